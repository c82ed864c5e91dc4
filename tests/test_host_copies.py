"""Host copies (backend/hostcopy.py): copy_host splits a large copy over threads, and
litecl.Interpreter.get_tensor copies tensors of hostcopy.SPLIT_BYTES or more out of
LiteRT's view with it (LiteRT's own GetTensor mallocs and page-faults its result: 16M
float32 32-37 ms against 10-11 ms, measured on a 2-core VM). Bit-exact against LiteRT's
get_tensor (NaN, inf, -0.0, subnormals; odd sizes), and every other call, error included,
is LiteRT's own. set_tensor is LiteRT's (splitting its memcpy did not pay on 2 cores)."""
from __future__ import annotations

import re
import threading

import numpy as np
import pytest

import litecl
import litecl.hostcopy as hc
import litecl.interpreter as lit
from litecl.compare import make_interpreter
from models.builders import add_model, cast_model
from conftest import force_copies


@pytest.mark.parametrize("n", [1, 31, 33, 81, 757, 1999, 70001])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int64])
def test_copy_host_split_matches_copyto(monkeypatch, n, dtype):
    monkeypatch.setattr(hc, "SPLIT_BYTES", 1)
    monkeypatch.setattr(hc, "PIECE_BYTES", 64)
    monkeypatch.setenv("LITECL_HOST_THREADS", "4")
    src = (np.arange(n) * 7919 % 251).astype(dtype).reshape(-1, 1) if n % 2 else \
        (np.arange(n) * 7919 % 251).astype(dtype)
    dst = np.empty_like(src)
    hc.copy_host(dst, src)
    assert dst.tobytes() == src.tobytes()
    with pytest.raises(TypeError):
        hc.copy_host(np.empty(src.shape, np.float64 if dtype != np.float64 else np.int8), src)


def test_host_threads_setting(monkeypatch):
    monkeypatch.setenv("LITECL_HOST_THREADS", "3")
    assert hc.host_threads() == 3
    for bad in ("0", "-2", "many"):
        monkeypatch.setenv("LITECL_HOST_THREADS", bad)
        with pytest.raises(ValueError, match="LITECL_HOST_THREADS"):
            hc.host_threads()
    monkeypatch.delenv("LITECL_HOST_THREADS")
    assert 1 <= hc.host_threads() <= 8


@pytest.fixture
def counted_copies(monkeypatch):
    """Large means >= 1 KiB here (pieces of 256 bytes over 3 threads); the sizes of the
    copies litecl.Interpreter.get_tensor made through copy_host are listed."""
    monkeypatch.setattr(hc, "SPLIT_BYTES", 1024)
    monkeypatch.setattr(hc, "PIECE_BYTES", 256)
    monkeypatch.setattr(lit, "SPLIT_BYTES", 1024)
    monkeypatch.setenv("LITECL_HOST_THREADS", "3")
    calls = []
    orig = hc.copy_host
    monkeypatch.setattr(lit, "copy_host", lambda d, s: (calls.append(d.nbytes), orig(d, s))[1])
    return calls


_SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], np.float32)


@pytest.mark.parametrize("n", [1, 255, 256, 1999, 40000, 40001])
def test_large_get_tensor_bit_exact(fast_device, counted_copies, n):
    """An ADD's output and its inputs read back as LiteRT reads them, over three rounds
    (LiteRT's buffers are reused); tensors under 1 KiB keep LiteRT's own path."""
    buf = add_model("float32", [n], [n])
    it = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)
    it.allocate_tensors()
    ref = make_interpreter(buf)
    ref.allocate_tensors()
    out = ref.get_output_details()[0]["index"]
    rng = np.random.default_rng(n)
    for _ in range(3):
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        a[: min(n, 7)] = _SPECIAL[: min(n, 7)]
        for i, v in ((0, a), (1, b)):
            it.set_tensor(i, v)
            ref.set_tensor(i, v)
        it.invoke()
        ref.invoke()
        for t, want in ((out, ref.get_tensor(out)), (0, a), (1, b)):
            got = it.get_tensor(t)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), t
    big = 4 * n >= 1024
    assert counted_copies == ([4 * n] * 9 if big else [])


@pytest.mark.parametrize("dst", ["float16", "int64", "bool", "uint8"])
def test_large_get_tensor_of_each_type(fast_device, counted_copies, dst):
    n = 3001
    buf = cast_model("float32", dst, [n])
    x = (np.arange(n, dtype=np.float32) - 1500.25) * 3.5
    x[:7] = _SPECIAL
    got = {}
    for name, it in (("litecl", litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)),
                     ("litert", make_interpreter(buf))):
        it.allocate_tensors()
        it.set_tensor(0, x)
        it.invoke()
        got[name] = it.get_tensor(it.get_output_details()[0]["index"])
    assert got["litecl"].dtype == got["litert"].dtype and got["litecl"].shape == (n,)
    assert got["litecl"].tobytes() == got["litert"].tobytes()
    assert counted_copies == [got["litecl"].nbytes] * (got["litecl"].nbytes >= 1024)


def _invoked_add(device):
    """A litecl.Interpreter of a float32 ADD of [1000] + [1000], invoked on arange(1000)."""
    it = litecl.Interpreter(model_content=add_model("float32", [1000], [1000]), device=device)
    it.allocate_tensors()
    x = np.arange(1000, dtype=np.float32)
    it.set_tensor(0, x)
    it.set_tensor(1, x)
    it.invoke()
    return it


def test_large_get_tensor_is_a_copy_and_leaves_no_view(fast_device, counted_copies):
    """The result owns its memory (writing it changes nothing in LiteRT), and no view of
    LiteRT's memory outlives the call: invoke and allocate_tensors still pass LiteRT's
    _ensure_safe (which refuses while a tensor() view is alive)."""
    it = _invoked_add(fast_device)
    y = it.get_tensor(2)
    assert y.flags.owndata and y.flags.writeable
    y[:] = -1
    assert it.get_tensor(2).tolist() == (2 * np.arange(1000, dtype=np.float32)).tolist()
    it.invoke()
    it.allocate_tensors()
    assert counted_copies


def test_get_tensor_errors_are_litert_s(fast_device, counted_copies):
    """Bad indices, a tensor before allocate_tensors, another subgraph: the same error
    type and message as LiteRT's get_tensor."""
    buf = add_model("float32", [1000], [1000])
    calls = {"before": lambda i: i.get_tensor(0), "index": lambda i: i.get_tensor(99),
             "negative": lambda i: i.get_tensor(-1), "subgraph": lambda i: i.get_tensor(0, 3),
             "str": lambda i: i.get_tensor("input1"), "float": lambda i: i.get_tensor(0.0),
             "huge": lambda i: i.get_tensor(2**40)}
    for name, call in calls.items():
        seen = []
        for it in (litecl.Interpreter(model_content=buf, device=fast_device, quiet=True), make_interpreter(buf)):
            if name != "before":
                it.allocate_tensors()
            with pytest.raises(Exception) as e:
                call(it)
            seen.append((type(e.value), re.sub(r"0x[0-9a-f]+", "0x?", str(e.value))))  # pybind's object ids
        assert seen[0] == seen[1], (name, seen)


def test_bad_host_threads_is_an_error_on_a_large_get(fast_device, counted_copies, monkeypatch):
    it = litecl.Interpreter(model_content=add_model("float32", [1000], [1000]), device=fast_device)
    it.allocate_tensors()
    monkeypatch.setenv("LITECL_HOST_THREADS", "many")
    with pytest.raises(litecl.LiteclError, match="LITECL_HOST_THREADS must be a positive integer"):
        it.get_tensor(2)
    with pytest.raises(litecl.LiteclError, match="LITECL_HOST_THREADS must be a positive integer"):
        litecl.Interpreter(model_content=add_model("float32", [4], [4]), device=fast_device)
    monkeypatch.setenv("LITECL_HOST_THREADS", "2")
    it.invoke()  # nothing of the failed copy is left holding LiteRT's memory
    assert it.get_tensor(2).shape == (1000,)


def test_get_tensor_while_another_thread_invokes_is_litert_s(fast_device, counted_copies):
    """An invoke in progress holds the Interpreter: a get_tensor from another thread then
    takes LiteRT's own path (a view would make LiteRT's invoke refuse), and returns the
    same bytes."""
    it = _invoked_add(fast_device)
    want = it.get_tensor(2).tobytes()
    counted_copies.clear()
    assert it._busy.acquire(blocking=False)  # stands for an invoke running in another thread
    try:
        got = []
        t = threading.Thread(target=lambda: got.append(it.get_tensor(2)))
        t.start()
        t.join(30)
        assert got and got[0].tobytes() == want
        assert counted_copies == []
    finally:
        it._busy.release()


def test_large_get_tensor_reuses_only_an_array_nobody_holds(fast_device, counted_copies):
    """get_tensor writes a large read into the array it returned last time only when the
    caller let go of it (its reference count): an array held by a name, a list or a view
    is never written again, and every read has the values of its own invoke."""
    n = 1000
    it = litecl.Interpreter(model_content=add_model("float32", [n], [n]), device=fast_device, quiet=True)
    it.allocate_tensors()
    out = it.get_output_details()[0]["index"]

    def run(k):
        x = np.full(n, float(k), np.float32)
        it.set_tensor(0, x)
        it.set_tensor(1, x)
        it.invoke()
    run(1)
    first = it.get_tensor(out)
    run(2)
    held = it.get_tensor(out)
    assert held is not first and first[0] == 2.0 and held[0] == 4.0
    kept = [held]
    view = held[:5]
    del held
    run(3)
    third = it.get_tensor(out)
    assert not np.shares_memory(third, kept[0]) and kept[0][0] == 4.0 and view[0] == 4.0 and third[0] == 6.0
    addr = third.ctypes.data
    del third
    run(4)
    fourth = it.get_tensor(out)
    assert fourth.ctypes.data == addr and fourth[0] == 8.0 and fourth.flags.owndata and fourth.flags.writeable
    fourth.setflags(write=False)
    del fourth
    run(5)
    fifth = it.get_tensor(out)
    assert fifth.flags.writeable and fifth[0] == 10.0
    assert kept[0][0] == 4.0 and view.tolist() == [4.0] * 5 and first.tolist() == [2.0] * n


def test_signature_with_minus_one_keeps_litert_get_tensor_until_a_tensor_is_large(fast_device, counted_copies):
    """A -1 in a shape signature alone no longer wraps get_tensor: at small shapes it is
    LiteRT's own method (the wrapper cost ~0.25 us a read); resized so a tensor reaches
    SPLIT_BYTES it is litecl's copy again; both read bit-exact with LiteRT."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    buf = cast_model("int16", "float32", [4, 3], dynamic=True)
    it = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)
    ref = make_interpreter(buf)
    for rows, own in ((4, True), (200, False)):  # 200 x 3 float32: 2400 bytes >= 1 KiB
        for x in (it, ref):
            x.resize_tensor_input(0, [rows, 3])
            x.allocate_tensors()
        assert it._plain_get == own  # LiteRT's GetTensor straight away
        v = (np.arange(rows * 3, dtype=np.int16) * 113 - 900).reshape(rows, 3)
        for x in (it, ref):
            x.set_tensor(0, v)
            x.invoke()
        out = ref.get_output_details()[0]["index"]
        assert it.get_tensor(out).tobytes() == ref.get_tensor(out).tobytes()
    assert counted_copies == [2400]


def test_copy_devices_stage_small_tensors_through_pinned_memory(fast_device):
    """On a copy device (a discrete GPU; here the fast device told to copy) a partition's
    input or output of at most 1.5 MiB (litecl_delegate.c LCL_STAGE_MAX) goes through a
    mapped ALLOC_HOST_PTR buffer, a larger one straight from LiteRT's memory; both
    bit-exact with LiteRT (NaN, inf, -0.0, subnormals), across a resize that grows the
    staging buffers."""
    from litecl.compare import bit_equal

    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38, -7.5], np.float32)
    raw = cast_model("float32", "float16", [757])
    d = litecl.Delegate(fast_device, quiet=True)
    force_copies(d)
    it, ref = make_interpreter(raw, delegates=[d]), make_interpreter(raw)
    # in 4n bytes, out 2n: both staged, both, then the output only (the input is 1.6 MB)
    for n, staged in ((757, 2), (81, 2), (400_000, 1)):
        for r in (it, ref):
            r.resize_tensor_input(r.get_input_details()[0]["index"], [n])
            r.allocate_tensors()
        with np.errstate(over="ignore"):
            x = np.resize(specials, n) * np.float32(1 + np.arange(n) % 3)
        before = d.stats["staged"]
        for r in (it, ref):
            r.set_tensor(r.get_input_details()[0]["index"], x)
            r.invoke()
        got, want = (r.get_tensor(r.get_output_details()[0]["index"]) for r in (it, ref))
        assert bit_equal(got, want), n
        assert d.stats["staged"] - before == staged, (n, d.stats)
        assert d.stats["in_place"] == 0

def test_a_busy_host_splits_a_copy_over_fewer_threads(monkeypatch):
    """The split copy takes the cores the 1-minute load average leaves idle (a fresh
    user's 16 MiB reads took 1.6x LiteRT's with both cores of the 2-core VM busy), at
    least one; LITECL_HOST_THREADS set wins."""
    monkeypatch.delenv("LITECL_HOST_THREADS", raising=False)
    monkeypatch.setattr(hc, "_CPUS", 4)
    for load, want in ((0.0, 4), (1.2, 3), (3.6, 1), (40.0, 1)):
        monkeypatch.setattr(hc.os, "getloadavg", lambda load=load: (load, load, load))
        assert hc._idle_threads() == want, load
    monkeypatch.setenv("LITECL_HOST_THREADS", "3")
    assert hc._idle_threads() == 3
