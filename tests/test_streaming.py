"""Streaming (non-temporal) vector stores on CPU devices (ops/tiling.py ``streams``):
which kernels get them, and that every CAST pair, ADD and fused chain stays bit-exact
with LiteRT when they do (forced on small tensors here; by default only kernels moving
more than LAUNCH["cpu"].stream_bytes stream)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import litecl
import litecl.claims
import litecl.kernels
import litecl.delegate
import litecl.lowering
from conftest import assert_on_opencl, device_params, launches
from litecl.compare import mismatches, run_reference
from litecl.ops import tiling
from models.builders import add_model, cast_model, chain_model
from test_cast import PAIRS, check_pair, edge_values
from test_vector_paths import N, SEEDS, random_chain

NT = "__builtin_nontemporal_store"
CPU_DEVICES = ["pocl", "intel"]


@pytest.fixture
def stream_above(monkeypatch):
    """Set the CPU row's stream_bytes for one test (plans made under it are not kept:
    litecl.kernels, plan_for and kernel_spec memoise by caps, the Prepare's cache entries
    by caps and source files, and the LAUNCH row changed in memory is in none of their keys)."""
    def set_limit(limit: int) -> None:
        monkeypatch.setitem(tiling.LAUNCH, "cpu", replace(tiling.LAUNCH["cpu"], stream_bytes=limit))
        monkeypatch.setattr(litecl.kernels, "_PLANS", {})
        monkeypatch.setattr(litecl.delegate, "_PLANNED", {})  # plan_for's memo of plans
        monkeypatch.setattr(litecl.delegate, "_PRESETS", {})  # the plans _INIT hands the runtime
        monkeypatch.setattr(litecl.lowering, "_SPECS", {})  # kernel_spec's memo
        monkeypatch.setattr(litecl.claims, "_prepared", lambda dlg, ks: None)  # nor the cache's entries
    return set_limit


def _sources(it, fused_only: bool = False) -> str:
    """The kernel sources of ``it``'s launches (fused_only: of launches of several nodes),
    after asserting its CAST/ADD nodes are on OpenCL."""
    assert_on_opencl(it)
    return "\n".join(ln.source for ln in launches(it) if not fused_only or len(ln.nodes) > 1)


def test_streams_rule():
    caps = litecl.Caps("p", "d", "v", "1", frozenset(), False, True, True, 2, 256, False, nontemporal=True)
    limit = tiling.LAUNCH["cpu"].stream_bytes
    assert limit > 0
    assert not tiling.streams(caps, limit) and tiling.streams(caps, limit + 1)
    assert not tiling.streams(replace(caps, nontemporal=False), limit + 1)  # compiler lacks the builtin
    assert not tiling.streams(replace(caps, is_gpu=True), 1 << 40)  # the GPU row never streams


@pytest.mark.parametrize("device", device_params(CPU_DEVICES))
def test_cpu_runtimes_have_the_builtin(device):
    assert litecl.open_device(device).caps.nontemporal


@pytest.mark.parametrize("device", device_params(CPU_DEVICES))
def test_only_kernels_above_the_limit_stream(device, stream_above):
    stream_above(3 * 4 * 1000)  # bytes: a float32 ADD of 1000 elements moves exactly this
    for n, want in ((1000, False), (1001, True)):
        it = litecl.Interpreter(model_content=add_model("float32", [n], [n]), device=device, quiet=True)
        it.allocate_tensors()
        assert (NT in _sources(it)) == want, n
        # and `litecl bench` and placement() name it in the node's description
        assert ("streaming stores" in launches(it)[0].what) == want
        assert ("streaming stores" in it.placement()[0]["kernel"]) == want
        it.close()
    # a fused group counts its inputs and the outputs it writes (not its intermediates)
    stream_above(4000 * 1 + 4000 * 8 - 1)
    it = litecl.Interpreter(model_content=chain_model(["uint8", "float32", "int64"], [4000]), device=device,
                            quiet=True)
    it.allocate_tensors()
    assert len(launches(it)) == 1 and NT in _sources(it, fused_only=True)
    it.close()
    stream_above(4000 * 1 + 4000 * 8)
    it = litecl.Interpreter(model_content=chain_model(["uint8", "float32", "int64"], [4000]), device=device,
                            quiet=True)
    it.allocate_tensors()
    assert NT not in _sources(it, fused_only=True)
    it.close()


@pytest.mark.parametrize("device", device_params(CPU_DEVICES + ["oclgrind"]))
def test_streaming_casts_match_litert(device, stream_above):
    """Every CAST pair (each output type and vector width), NaN/inf/-0/out-of-range edge
    values, sizes with scalar tails; Oclgrind also checks the streaming stores' bounds."""
    stream_above(1)
    it = litecl.Interpreter(model_content=cast_model("int8", "int64", [33]), device=device, quiet=True)
    it.allocate_tensors()
    assert NT in _sources(it)
    it.close()
    sizes = (33,) if device == "oclgrind" else (31, 1999)
    for s, d in PAIRS:
        if device != "oclgrind" or s in ("uint8", "float32", "int64"):
            check_pair(device, s, d, sizes=sizes)
    # without cl_khr_fp16, half vectors are converted in registers, then streamed as bits
    nofp16 = device + ":profile=nofp16"
    it = litecl.Interpreter(model_content=cast_model("float32", "float16", [33]), device=nofp16, quiet=True)
    it.allocate_tensors()
    w = min(16, tiling.launch_config(litecl.open_device(nofp16).caps).vec_bytes // 4)  # float lanes
    assert f"vstorea_half{w}_rte" in _sources(it) and f"(__global ushort{w}*)" in _sources(it)
    it.close()
    for s in ("float32", "float64", "uint8", "int64"):
        check_pair(nofp16, s, "float16", sizes=sizes)


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("device", device_params(CPU_DEVICES))
def test_streaming_chains_match_litert(device, fuse, stream_above):
    stream_above(1)
    for seed in SEEDS[:12]:
        steps = random_chain(seed)
        m = chain_model(steps, [N])
        x = edge_values(steps[0], N)
        it = litecl.Interpreter(model_content=m, device=device, fuse=fuse, quiet=True)
        it.allocate_tensors()
        assert NT in _sources(it)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        assert it.delegate.stats["partition_invokes"] == 1
        want = run_reference(m, {it.get_input_details()[0]["name"]: x})
        for o in it.get_output_details():
            bad = mismatches(it.get_tensor(o["index"]), want[o["name"]])
            assert not bad.any(), (seed, steps[0], o["name"])
        it.close()
    for dt in ("float32", "int32", "int64"):  # same-shape ADD (vector stores)
        m = add_model(dt, [N], [N])
        rng = np.random.default_rng(1)
        a, b = (edge_values(dt, N), rng.permutation(edge_values(dt, N)))
        it = litecl.Interpreter(model_content=m, device=device, quiet=True)
        it.allocate_tensors()
        assert NT in _sources(it)
        names = [d["name"] for d in it.get_input_details()]
        for d, v in zip(it.get_input_details(), (a, b)):
            it.set_tensor(d["index"], v)
        it.invoke()
        want = run_reference(m, dict(zip(names, (a, b))))
        o = it.get_output_details()[0]
        assert not mismatches(it.get_tensor(o["index"]), want[o["name"]]).any(), dt
        it.close()
