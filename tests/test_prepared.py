"""A Prepare's reasons and plans kept in litecl's cache (claims._prepared, kernels.plan_partition):
a later process reads them instead of generating every kernel, decides and computes the same,
and a changed source, a damaged entry or another device is not trusted."""
from __future__ import annotations

import hashlib
import os

import pytest

from conftest import ROOT, any_fast_device, script_json

_SCRIPT = r"""
import json, sys
import numpy as np
import litecl
from litecl import claims, lowering
claims.PREPARED_MIN_SECONDS = float(sys.argv[2])  # 0: kept however fast this host decides
from models.builders import chain_model, merged_model
from conftest import invoke_with, litert_outputs, same_outputs
calls = []
for low in lowering.LOWERINGS.values():  # every kernel text litecl generates passes here
    for name in ("kernel", "node_op"):
        real = getattr(low, name)
        setattr(low, name, staticmethod(lambda *a, _real=real, **k: calls.append(1) or _real(*a, **k)))
m = merged_model(chain_model(["float32", "int16", "float32", "int32"], (2001,)),
                 chain_model(["uint8", "float32", ("add", 1.5), "float16"], (33,)))
rng = np.random.default_rng(3)
xs = [(rng.standard_normal(2001) * 1e5).astype(np.float32), rng.integers(0, 256, 33).astype(np.uint8)]
xs[0][:4] = [np.nan, -np.nan, -0.0, np.inf]
it = litecl.Interpreter(model_content=m, device=sys.argv[1], quiet=True)
it.allocate_tensors()
rows = [[r["index"], r["op"], r["placement"], r["reason"], r["kernel"]] for r in it.placement()]
print(json.dumps({"generated": len(calls), "rows": rows,
                  "exact": same_outputs(invoke_with(it, xs), litert_outputs(m, xs))}))
"""


def _env(cache_dir) -> dict:
    return dict(os.environ, LITECL_CACHE_DIR=str(cache_dir),
                PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))


def test_a_later_process_reads_its_reasons_and_plans(tmp_path):
    """The first process generates the kernels and keeps the Prepare's entry; the next
    generates none, places every node as the first did and computes the same bits as
    LiteRT (NaN of both signs, -0.0, inf)."""
    spec = any_fast_device()
    first = script_json(_SCRIPT, _env(tmp_path), spec, "0")
    second = script_json(_SCRIPT, _env(tmp_path), spec, "0")
    assert first["generated"] > 0 and second["generated"] == 0, (first["generated"], second["generated"])
    assert second["rows"] == first["rows"] and any(r[2] == "opencl" for r in first["rows"]), first["rows"]
    assert first["exact"] is True and second["exact"] is True
    assert list((tmp_path / "prepared").rglob("*.bin"))


def test_a_damaged_entry_is_decided_again(tmp_path):
    """An entry that unpickles to something else is replaced: the process decides and
    generates again and stays exact."""
    spec = any_fast_device()
    script_json(_SCRIPT, _env(tmp_path), spec, "0")
    entries = list((tmp_path / "prepared").rglob("*.bin"))
    assert entries
    from litecl import cache

    for p in entries:  # the same checksummed format, another payload
        p.unlink()
        cache._write_atomic(p, cache._MAGIC + hashlib.sha256(b"x").digest() + b"x")
    got = script_json(_SCRIPT, _env(tmp_path), spec, "0")
    assert got["generated"] > 0 and got["exact"] is True
    assert all(p.read_bytes()[-1:] != b"x" for p in entries if p.exists())
def test_a_set_of_nodes_decided_fast_keeps_no_entry(tmp_path):
    """Nodes decided in less than PREPARED_MIN_SECONDS write no entry (tests make thousands
    of tiny models), and the process computes the same."""
    got = script_json(_SCRIPT, _env(tmp_path), any_fast_device(), "1e9")
    assert got["generated"] > 0 and got["exact"] is True
    assert not list(tmp_path.rglob("prepared/**/*.bin"))


def test_the_key_follows_the_sources_and_the_device(tmp_path):
    """cache.derived_key: another file modification time (a newer litecl's sources),
    another caps field or another part gives another key; equal inputs the same key; a
    source that is gone raises OSError (claims._prepared then keeps nothing)."""
    from litecl import cache
    from litecl.device import open_device

    d = open_device(any_fast_device())
    f = tmp_path / "src.py"
    f.write_text("a = 1\n")
    k0 = cache.derived_key(d.caps, [d.device], [f], "part")
    assert cache.derived_key(d.caps, [d.device], [f], "part") == k0
    assert cache.derived_key(d.caps, [d.device], [f], "other") != k0
    import dataclasses

    assert cache.derived_key(dataclasses.replace(d.caps, name=d.caps.name + "x"), [d.device], [f], "part") != k0
    cache._DIGESTS.clear()
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert cache.derived_key(d.caps, [d.device], [f], "part") != k0
    with pytest.raises(OSError):  # a source that is gone: no key to trust
        cache._DIGESTS.clear()
        cache.derived_key(d.caps, [d.device], [tmp_path / "absent.py"], "part")


def test_the_self_test_s_judge_is_in_both_keys(monkeypatch):
    """compare.py judges the self-test's output: an edit there changed which nodes litecl
    takes while both the Prepare entries and the verdicts stayed cached (a fresh user's
    report). It is among the deciding sources and in the verdicts' code hash."""
    from pathlib import Path

    from litecl import claims, selftest

    assert any(str(p).endswith("compare.py") for p in claims._deciding())
    read = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self.name) or real(self))
    selftest._code_hash.__wrapped__()
    assert "compare.py" in read and "lowering.py" in read, read
