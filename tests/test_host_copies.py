"""Issue 14, transfers at the floor: host copies split over threads (backend/hostcopy.py),
in set_tensor's copy into pinned staging and get_tensor's copy out, bit-exact against
LiteRT. The bus path (pinned staging) is forced on the local CPU devices by turning
zero-copy off."""
from __future__ import annotations

import numpy as np
import pytest

import litecl
import litecl.executor as exm
import litecl.hostcopy as hc
from models.builders import add_model


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


def _bus_interpreter(buf, device):
    it = litecl.Interpreter(model_content=buf, device=device)
    it._main.ex.zero_copy = False  # copies into pinned staging, as across a bus
    it.allocate_tensors()
    return it


@pytest.mark.parametrize("n", [1, 1999, 40000, 40001])
def test_staging_copies_split_bit_exact(fast_device, monkeypatch, n):
    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

    monkeypatch.setattr(hc, "SPLIT_BYTES", 1024)
    monkeypatch.setattr(hc, "PIECE_BYTES", 256)
    monkeypatch.setenv("LITECL_HOST_THREADS", "3")
    calls = []
    orig = hc.copy_host
    monkeypatch.setattr(exm, "copy_host", lambda d, s: (calls.append(d.nbytes), orig(d, s))[1])
    buf = add_model("float32", [n], [n])
    it = _bus_interpreter(buf, fast_device)
    ref = LiteRT(model_content=buf, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref.allocate_tensors()
    rng = np.random.default_rng(n)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], np.float32)
    out = ref.get_output_details()[0]["index"]
    for _ in range(3):  # the staging is reused
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        a[: min(n, 6)] = special[: min(n, 6)]
        for i, v in ((0, a), (1, b)):
            it.set_tensor(i, v)
            ref.set_tensor(i, v)
        it.invoke()
        ref.invoke()
        assert it.get_tensor(out).tobytes() == ref.get_tensor(out).tobytes()
        assert it.get_tensor(0).tobytes() == a.tobytes()  # an input reads back as set
    assert 0 in it._main.ex._pinned and calls  # pinned staging, copies through copy_host


@pytest.mark.parametrize("n", [1999, 40000, 40001])
def test_zero_copy_set_and_get_split_bit_exact(fast_device, monkeypatch, n):
    """On host-unified devices (the CPU runtimes) set_tensor copies into the mapped buffer
    and get_tensor out of it through copy_host too, split over threads."""
    from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

    monkeypatch.setattr(hc, "SPLIT_BYTES", 1024)
    monkeypatch.setattr(hc, "PIECE_BYTES", 256)
    monkeypatch.setattr(exm, "SMALL_BYTES", 64)  # large enough for the mapped path
    monkeypatch.setenv("LITECL_HOST_THREADS", "3")
    calls = []
    orig = hc.copy_host
    monkeypatch.setattr(exm, "copy_host", lambda d, s: (calls.append(d.nbytes), orig(d, s))[1])
    buf = add_model("float32", [n], [n])
    it = litecl.Interpreter(model_content=buf, device=fast_device)
    it.allocate_tensors()
    if not it._main.ex.zero_copy:
        pytest.skip(f"{fast_device} has no host-unified memory")
    ref = LiteRT(model_content=buf, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref.allocate_tensors()
    rng = np.random.default_rng(n)
    special = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38], np.float32)
    out = ref.get_output_details()[0]["index"]
    for _ in range(3):
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        a[:6] = special
        for i, v in ((0, a), (1, b)):
            it.set_tensor(i, v)
            ref.set_tensor(i, v)
        it.invoke()
        ref.invoke()
        assert it.get_tensor(out).tobytes() == ref.get_tensor(out).tobytes()
    assert 0 not in it._main.ex._pinned  # no staging: the mapped buffers
    assert calls.count(4 * n) >= 9  # two inputs set and the output read, each round
