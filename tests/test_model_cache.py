"""load_model's cache of checked models (model.py, fast start): a hit gives the model a
full load gives, and nothing that changed the file or the entry is trusted. litecl.Interpreter
verifies every model before LiteRT sees it, so the cache still pays at start-up: summed
over the 19 shared models, checks in full 71 ms, from the cache 20 ms (lyra_quantizer
39 -> 5.6 ms, MoveNet 17 -> 5.7 ms; 2-core VM, 2026-12-01)."""
from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from litecl import cache
from litecl import model as mod
from litecl.errors import ModelError
from models.builders import add_model, cast_model, multi_op_model

from conftest import shared_model


def _same(a, b, where=""):
    """Deep equality of parsed models: numpy arrays by dtype, shape and bytes, objects by
    type and attributes (the cache's bookkeeping, ``_consts``, left out)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape, where
        assert (a.tolist() == b.tolist()) if a.dtype == object else a.tobytes() == b.tobytes(), where
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif hasattr(a, "__dict__"):
        assert type(a) is type(b), (where, type(a), type(b))
        va, vb = ({k: v for k, v in vars(x).items() if k != "_consts"} for x in (a, b))
        _same(va, vb, where)
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def test_fast_reader_parses_as_the_object_api_does(shared_models):
    """load_model reads the fields it validates with reader.read_model straight from the
    verified buffer, not the object API's ModelT (fast start): both give equal Models,
    options objects included."""
    blobs = [multi_op_model(), add_model("int8", [2, 3], [3], quant=((0.5, 1), (0.25, -2), (1.0, 3))),
             cast_model("float32", "int8", [5])]
    blobs += [p.read_bytes() for p in sorted(shared_models.glob("*.tflite"))]
    for raw in blobs:
        _same(mod._load(raw, "model_content"),
              mod._validate(raw, schema.ModelT.InitFromPackedBuf(raw, 0), "model_content"))


@pytest.fixture
def model_cache(tmp_path, monkeypatch):
    """A fresh cache folder that caches every model, old files or new."""
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LITECL_NO_CACHE", raising=False)
    monkeypatch.setattr(mod, "MODEL_CACHE_MIN_SECONDS", 0.0)
    monkeypatch.setattr(mod, "RACY_SECONDS", 0.0)
    return tmp_path / "cache" / "models"


def _entries(folder):
    return sorted(folder.rglob("*.bin")) if folder.exists() else []


def _counting_loads(monkeypatch):
    calls = []
    real = mod._load
    monkeypatch.setattr(mod, "_load", lambda raw, where: calls.append(where) or real(raw, where))
    return calls


def test_hit_equals_full_load(model_cache, monkeypatch, tmp_path, shared_models):
    blobs = [multi_op_model(), add_model("int8", [2, 3], [3], quant=((0.5, 1), (0.25, -2), (1.0, 3))),
             cast_model("float32", "int8", [5])]
    blobs += [p.read_bytes() for p in sorted(shared_models.glob("*.tflite"))]
    calls = _counting_loads(monkeypatch)
    for i, raw in enumerate(blobs):
        p = tmp_path / f"m{i}.tflite"
        p.write_bytes(raw)
        first = mod.load_model(str(p))
        again = mod.load_model(str(p))
        fresh = mod._load(raw, str(p))
        _same(again, fresh, p.name)
        _same(first, fresh, p.name)
        assert again.raw == fresh.raw == raw
        consts = [t for sg in again.subgraphs for t in sg.tensors if t.data is not None]
        assert all(t.dtype is None or t.dtype is mod.BY_TFLITE[t.type_code] for sg in again.subgraphs
                   for t in sg.tensors)  # the dtype table's own rows, not copies
        views = [c for c in consts if c.data.dtype != object and not c.dtype.packed_bits]
        assert all(not c.data.flags.writeable for c in views)  # views of raw, not copies
    assert calls.count(str(tmp_path / "m0.tflite")) == 2  # the full load and fresh above
    assert len(_entries(model_cache)) == len(blobs)


def test_bytes_are_keyed_by_their_hash(model_cache, monkeypatch):
    raw = multi_op_model()
    calls = _counting_loads(monkeypatch)
    a = mod.load_model(model_content=raw)
    b = mod.load_model(model_content=bytearray(raw))
    assert calls == ["model_content"] and b.path is None
    _same(a, b)
    other = bytearray(raw)
    other[-1] ^= 1  # any change is another key
    try:
        mod.load_model(model_content=bytes(other))
    except ModelError:
        pass
    assert len(calls) == 2


def test_rewritten_file_is_checked_again(model_cache, monkeypatch, tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(add_model("float32", [4], [4]))
    mod.load_model(str(p))
    calls = _counting_loads(monkeypatch)
    raw = bytearray(p.read_bytes())
    raw[8:12] = b"\xff\xff\xff\x7f"  # corrupt the root table's vtable offset, same size
    st = p.stat()
    p.write_bytes(bytes(raw))
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back: ctime still moves
    with pytest.raises(ModelError, match="corrupt"):
        mod.load_model(str(p))
    assert calls == [str(p)]


def test_recent_file_is_not_cached(model_cache, monkeypatch, tmp_path):
    monkeypatch.setattr(mod, "RACY_SECONDS", 3600.0)
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model())
    mod.load_model(str(p))
    assert _entries(model_cache) == []


def test_quick_models_are_not_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(mod, "RACY_SECONDS", 0.0)
    mod.load_model(model_content=add_model("float32", [4], [4]))  # checked in well under 2 ms
    assert _entries(tmp_path / "cache" / "models") == []


def test_damaged_or_foreign_entry_is_ignored(model_cache, monkeypatch, tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model())
    good = mod.load_model(str(p))
    (entry,) = _entries(model_cache)
    calls = _counting_loads(monkeypatch)
    blob = bytearray(entry.read_bytes())
    blob[-3] ^= 0x55  # fails the entry's checksum: removed, full load
    entry.write_bytes(bytes(blob))
    _same(mod.load_model(str(p)), good)
    assert calls == [str(p)]
    (entry,) = _entries(model_cache)
    cache._store(entry, b"not a pickle")  # checksum fine, content from other code
    _same(mod.load_model(str(p)), good)
    assert calls == [str(p)] * 2


def test_no_cache_env_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LITECL_NO_CACHE", "1")
    monkeypatch.setattr(mod, "MODEL_CACHE_MIN_SECONDS", 0.0)
    monkeypatch.setattr(mod, "RACY_SECONDS", 0.0)
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model())
    mod.load_model(str(p))
    assert not (tmp_path / "cache").exists()


def test_cached_real_model_runs_bit_exact(model_cache, shared_models, fast_device):
    """A model taken from the cache runs as one checked in full (constants included)."""
    import litecl  # noqa: PLC0415
    from litecl.compare import bit_equal, random_inputs, run_reference  # noqa: PLC0415

    path = shared_model("movenet_singlepose_lightning_int8.tflite")
    mod.load_model(path)
    assert _entries(model_cache)
    it = litecl.Interpreter(model_path=path, device=fast_device)
    it.allocate_tensors()
    d = it.get_input_details()
    inputs = random_inputs(d, seed=3)
    for x, v in zip(d, inputs.values()):
        it.set_tensor(x["index"], v)
    it.invoke()
    ref = run_reference(open(path, "rb").read(), inputs)
    assert len(ref) == len(it.get_output_details())
    for o in it.get_output_details():
        assert bit_equal(it.get_tensor(o["index"]), ref[o["name"]])


def test_non_utf8_file_name(model_cache, monkeypatch, tmp_path):
    p = os.path.join(os.fsencode(tmp_path), b"model-\xff.tflite")
    with open(p, "wb") as f:
        f.write(multi_op_model())
    calls = _counting_loads(monkeypatch)
    for name in (p, os.fsdecode(p)):
        m = mod.load_model(name)
        assert m.path == os.fsdecode(p)
    assert len(calls) == 1 and len(_entries(model_cache)) == 1


def test_bytes_changed_under_an_unchanged_identity_are_caught(model_cache, monkeypatch, tmp_path):
    """Writes through a shared mapping to pages already dirty leave a file's times as
    they were (measured by a break test): so an entry is checked against the bytes
    outside the constants, and a change inside a constant is read anew. Here _read
    reports the first identity for every version of the file."""
    good = add_model("float32", [4], [4], const2=np.arange(4, dtype=np.float32))
    p = tmp_path / "m.tflite"
    p.write_bytes(good)
    real_read = mod._read
    _, key = real_read(str(p))
    monkeypatch.setattr(mod, "_read", lambda path: (real_read(path)[0], key))
    first = mod.load_model(str(p))
    bad = bytearray(good)
    root = int.from_bytes(good[:4], "little")
    bad[root:root + 4] = b"\xff\xff\xff\x7f"  # the root table's vtable offset
    p.write_bytes(bytes(bad))
    calls = _counting_loads(monkeypatch)
    with pytest.raises(ModelError, match="corrupt"):
        mod.load_model(str(p))
    assert calls == [str(p)]
    # a change inside a constant only: the cached tables stand, the constant is read anew
    const = next(t for t in first.subgraphs[0].tensors if t.data is not None and t.data.size == 4)
    start = next(c[2] for c in first._consts if c[1] == const.index)
    new = bytearray(good)
    new[start:start + 16] = np.array([9, 8, 7, 6], np.float32).tobytes()
    p.write_bytes(bytes(new))
    again = mod.load_model(str(p))
    assert calls == [str(p)]  # from the entry
    assert again.subgraphs[0].tensors[const.index].data.tolist() == [9, 8, 7, 6]
    assert again.raw == bytes(new)  # these bytes
    _same(again, mod._load(bytes(new), str(p)))


def test_entry_of_another_model_is_not_used(model_cache, monkeypatch, tmp_path):
    a, b = tmp_path / "a.tflite", tmp_path / "b.tflite"
    a.write_bytes(add_model("float32", [4], [4], const2=np.arange(4, dtype=np.float32)))
    b.write_bytes(cast_model("float32", "int32", [4]))
    mod.load_model(str(a))
    (ea,) = _entries(model_cache)
    mod.load_model(str(b))
    (eb,) = [e for e in _entries(model_cache) if e != ea]
    eb.write_bytes(ea.read_bytes())  # b's entry now holds a's (valid checksum)
    calls = _counting_loads(monkeypatch)
    m = mod.load_model(str(b))
    assert calls == [str(b)] and m.subgraphs[0].nodes[0].op == "CAST"


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
def test_entry_others_could_write_is_not_used(model_cache, monkeypatch, tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model())
    mod.load_model(str(p))
    (entry,) = _entries(model_cache)
    calls = _counting_loads(monkeypatch)
    for target, mode in ((entry, 0o664), (entry.parent, 0o777)):
        old = target.stat().st_mode
        os.chmod(target, mode)
        mod.load_model(str(p))
        os.chmod(target, old)
    assert calls == [str(p)] * 2
    mod.load_model(str(p))
    assert len(calls) == 2  # private again: used


def test_special_file_as_entry_does_not_hang(model_cache, tmp_path):
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import textwrap  # noqa: PLC0415

    from conftest import ROOT  # noqa: PLC0415

    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model())
    mod.load_model(str(p))
    (entry,) = _entries(model_cache)
    entry.unlink()
    os.mkfifo(entry)
    code = textwrap.dedent(f"""
        import litecl.model as mod
        mod.MODEL_CACHE_MIN_SECONDS = 0.0; mod.RACY_SECONDS = 0.0
        print(len(mod.load_model({str(p)!r}).subgraphs))
    """)
    env = dict(os.environ, LITECL_CACHE_DIR=str(model_cache.parent),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr[-800:]


def test_constants_are_read_only(model_cache, tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(cast_model("int4", "int8", [5], constant=np.array([-8, -1, 0, 3, 7], np.int8)))
    for _ in range(2):  # full load, then from the cache
        m = mod.load_model(str(p))
        data = [t.data for t in m.subgraphs[0].tensors if t.data is not None]
        assert data and all(not d.flags.writeable for d in data)
        with pytest.raises(ValueError):
            data[0][0] = 1


def test_cached_quantization_arrays_are_each_tensors_own(model_cache, monkeypatch, tmp_path):
    """A hit holds every tensor's scales and zero points as slices of two arrays (one
    np.array a tensor cost MoveNet 3 ms): each as the full load gives it (float32 /
    int64, writable), and a write to one reaches no other tensor's."""
    p = tmp_path / "q.tflite"
    p.write_bytes(add_model("int8", [2, 3], [3], quant=((0.5, 1), (0.25, -2), (1.0, 3))))
    calls = _counting_loads(monkeypatch)
    mod.load_model(str(p))
    hit = mod.load_model(str(p))
    assert calls == [str(p)]  # the second load came from the cache
    ts = [t for t in hit.subgraphs[0].tensors if t.scales.size]
    assert len(ts) == 3
    assert [(float(t.scales[0]), int(t.zero_points[0])) for t in ts] == [(0.5, 1), (0.25, -2), (1.0, 3)]
    assert all(t.scales.dtype == np.float32 and t.zero_points.dtype == np.int64 for t in ts)
    assert all(t.scales.flags.writeable and t.zero_points.flags.writeable for t in ts)
    ts[0].scales[0], ts[0].zero_points[0] = 9.0, 9
    assert [(float(t.scales[0]), int(t.zero_points[0])) for t in ts[1:]] == [(0.25, -2), (1.0, 3)]
    assert float(mod.load_model(str(p)).subgraphs[0].tensors[ts[0].index].scales[0]) == 0.5


def test_entry_whose_quantization_counts_disagree_is_ignored(model_cache, monkeypatch, tmp_path):
    p = tmp_path / "q.tflite"
    p.write_bytes(add_model("int8", [2, 3], [3], quant=((0.5, 1), (0.25, -2), (1.0, 3))))
    mod.load_model(str(p))
    raw, key = mod._read(str(p))
    blob = cache.load_blob("models", f"{key}|{mod._loader_version()}")
    n = int.from_bytes(blob[:4], "little")
    subgraphs, signatures, consts, counts, scales, zps = pickle.loads(blob[4 + n:])
    body = pickle.dumps((subgraphs, signatures, consts, counts[:-2], scales, zps))
    cache.store_blob("models", f"{key}|{mod._loader_version()}", blob[:4 + n] + body)
    assert mod._cached(raw, key, str(p)) is None  # one tensor short: not trusted
    body = pickle.dumps((subgraphs, signatures, consts, counts, scales + b"\0" * 4, zps))
    cache.store_blob("models", f"{key}|{mod._loader_version()}", blob[:4 + n] + body)
    assert mod._cached(raw, key, str(p)) is None  # a scale left over: not trusted
    calls = _counting_loads(monkeypatch)
    assert mod.load_model(str(p)).subgraphs[0].tensors[0].scales.size == 1
    assert calls == [str(p)]  # checked in full again
