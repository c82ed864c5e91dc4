"""The vector forms of lowered nodes (select/clamp/convert_TN on whole vectors) against
LiteRT: random CAST/ADD chains, fused and unfused, with scalar and same-shape ADD
operands, edge values in every vector lane, and a tail that divides no vector width."""
from __future__ import annotations

import numpy as np
import pytest

import litecl
import litecl.kernels
import litecl.delegate
import litecl.lowering
from conftest import REAL_DEVICES, assert_on_opencl, device_params, launches
from litecl.compare import mismatches, run_reference
from litecl.ops.dtypes import CAST_TYPES
from models.builders import chain_model
from test_cast import edge_values

TYPES = [d.name for d in CAST_TYPES]
ACTIVATIONS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
N = 1999  # 1999 = 124 * 16 + 15: vectors in every chunk, then a scalar tail


def random_chain(seed: int) -> list:
    """chain_model steps: an input type, then 2..5 CASTs and plain ADDs (float32 with an
    activation, int32/int64 wrapping), constants either one element or same-shape."""
    rng = np.random.default_rng(seed)
    cur = str(rng.choice(TYPES))
    steps: list = [cur]
    for _ in range(int(rng.integers(2, 6))):
        if cur in ("float32", "int32", "int64") and rng.random() < 0.4:
            if cur == "float32":
                v = np.float32(rng.standard_normal() * 100)
                act = str(rng.choice(ACTIVATIONS))
            else:
                v = np.array(rng.integers(-1000, 1000), dtype=cur)
                act = "NONE"
            const = v if rng.random() < 0.5 else np.full([N], v, dtype=cur)
            steps.append(("add", const, act))
        else:
            nxt = str(rng.choice([t for t in TYPES if t != cur]))
            steps.append(nxt)
            cur = nxt
    return steps


SEEDS = list(range(24))


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile"]))
def test_random_chains_vector_paths_match_litert(device, fuse):
    checked = 0
    for seed in SEEDS:
        steps = random_chain(seed)
        if not any(isinstance(s, str) for s in steps[1:]):
            continue
        m = chain_model(steps, [N])
        x = edge_values(steps[0], N)
        it = litecl.Interpreter(model_content=m, device=device, fuse=fuse, quiet=True)
        assert all(p["placement"] == "opencl" for p in it.placement()), (steps, it.placement())
        it.allocate_tensors()
        assert fuse or all(len(ln.nodes) == 1 for ln in launches(it))
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        assert it.delegate.stats["partition_invokes"] == 1
        want = run_reference(m, {it.get_input_details()[0]["name"]: x})
        for o in it.get_output_details():
            got = it.get_tensor(o["index"])
            bad = mismatches(got, want[o["name"]])
            assert not bad.any(), (seed, steps[0], [s if isinstance(s, str) else s[0] for s in steps[1:]],
                                   x[bad][:4], got[bad][:4], want[o["name"]][bad][:4])
        checked += 1
        it.close()
    assert checked >= 20


def test_vector_forms_are_used():
    # the kernel text calls the vector function (not one scalar call per component)
    from types import SimpleNamespace

    from litecl.ops.add import add_kernel
    from litecl.ops.codegen import cast_kernel
    from litecl.ops.fusion import FusedSpec, fused_kernel
    from litecl.ops.add import add_op
    from litecl.ops.codegen import cast_op
    from litecl.ops.dtypes import dtype

    caps = SimpleNamespace(fp16=False, fp64=True, int64=True, strict_compiler=False, is_gpu=False, profile="")
    assert "litecl_cast_op_v8(v0)" in cast_kernel("float32", "int8", caps)[0]
    assert "litecl_add_op_v8(" in add_kernel("float32", [64], [64], "RELU", caps)
    src = add_kernel("int32", [64], [], "NONE", caps)
    assert "(int8)(in1[0])" in src and "litecl_add_op_v8(x0, x1)" in src
    c, _ = cast_op("uint8", "float32", caps, "c0")
    a = add_op("float32", "NONE", caps, fn="a1", shapes=((100,), ()))
    h, _ = cast_op("float32", "float16", caps, "c2")
    f32, u8 = dtype("float32"), dtype("uint8")
    spec = FusedSpec((100,), ((u8, (100,)), (f32, ())),
                     ((c, (("in", 0),)), (a, (("t", 0), ("in", 1))), (h, (("t", 1),))),
                     ((2, dtype("float16")),))
    src = fused_kernel(spec, caps)
    assert "c0_v8(x0)" in src and "a1_v8(t0, x1, " in src and "ushort8 h_; vstorea_half8_rte(t2, 0, " in src
    # a broadcast that is not a single element: vectors that lie in one row of the
    # innermost dimension (25) read a row operand with vloadN and splat one broadcast along
    # it; a vector across two rows goes lane by lane (was: every element one by one)
    a2 = add_op("float32", "NONE", caps, fn="a1", shapes=((4, 25), (4, 1)))
    spec2 = FusedSpec((4, 25), ((f32, (4, 25)), (f32, (4, 1))), ((a2, (("in", 0), ("in", 1))),), ((0, f32),))
    body = fused_kernel(spec2, caps).split("__kernel")[1]
    assert "if (c1 + 8u <= 25u)" in body and "const float8 x1 = (float8)(in1[(c0)]);" in body \
        and "a1_v8(x0, x1, " in body and "for (uint j_ = 0; j_ < 8u; j_++)" in body, body
    a3 = add_op("float32", "NONE", caps, fn="a1", shapes=((4, 25), (25,)))
    spec3 = FusedSpec((4, 25), ((f32, (4, 25)), (f32, (25,))), ((a3, (("in", 0), ("in", 1))),), ((0, f32),))
    assert "vload8(0, in1 + (c1))" in fused_kernel(spec3, caps)
    # rows shorter than a vector: element by element
    spec4 = FusedSpec((25, 4), ((f32, (25, 4)), (f32, (4,))), ((a3, (("in", 0), ("in", 1))),), ((0, f32),))
    assert "_v" not in fused_kernel(spec4, caps).split("__kernel")[1]


@pytest.fixture
def half_bits_on_cpu(monkeypatch):
    """Every LAUNCH row with half vectors loaded and stored as ushortN and converted in
    integer code (the GPU row stores that way), so every device checks both conversions.
    (Plans and kernels are memoised by caps, which do not hold the LAUNCH row: none is kept.)"""
    from dataclasses import replace

    from litecl.ops import tiling

    for row in ("cpu", "gpu"):
        monkeypatch.setitem(tiling.LAUNCH, row, replace(tiling.LAUNCH[row], half_bits=True, half_bits_load=True))
    monkeypatch.setattr(litecl.kernels, "_PLANS", {})
    monkeypatch.setattr(litecl.delegate, "_PLANNED", {})  # plan_for's memo of plans
    monkeypatch.setattr(litecl.delegate, "_PRESETS", {})  # the plans _INIT hands the runtime
    monkeypatch.setattr(litecl.lowering, "_SPECS", {})  # kernel_spec's memo
    monkeypatch.setattr("litecl.claims._prepared", lambda dlg, ks: None)  # nor the cache's entries


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["mobile"]))
def test_half_bits_conversions_match_litert(device, half_bits_on_cpu):
    from test_cast import check_pair

    from litecl.ops.codegen import cast_kernel

    caps = litecl.open_device(device).caps
    assert "litecl_f2h_exact_v" in cast_kernel("uint8", "float16", caps)[0]
    assert "litecl_f2h_v" in cast_kernel("int16", "float16", caps)[0]
    assert "litecl_h2f_v" in cast_kernel("float16", "int32", caps)[0]
    for t in TYPES:
        if t != "float16":
            check_pair(device, t, "float16", sizes=(33, 1999))
            check_pair(device, "float16", t, sizes=(33, 1999))
    # every half bit pattern through f16 -> f32, and f32 values around each half rounding
    # boundary (ties, subnormals, overflow) through f32 -> f16
    from test_cast import _model

    allh = np.arange(65536, dtype=np.uint16).view(np.float16)
    with np.errstate(invalid="ignore", over="ignore"):
        mids = (allh[:-1].astype(np.float64) + allh[1:].astype(np.float64)) / 2
        f = np.concatenate([allh.astype(np.float32), mids.astype(np.float32),
                            np.nextafter(mids.astype(np.float32), np.float32(np.inf)),
                            np.nextafter(mids.astype(np.float32), np.float32(-np.inf))])
    for src, dst, x in (("float16", "float32", allh), ("float32", "float16", f)):
        m = _model(src, dst, len(x))
        it = litecl.Interpreter(model_content=m, device=device, quiet=True)
        it.allocate_tensors()
        assert_on_opencl(it)
        assert "litecl_f2h" in launches(it)[0].source or "litecl_h2f" in launches(it)[0].source
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        want = run_reference(m, {it.get_input_details()[0]["name"]: x})["output"]
        bad = mismatches(got, want)
        assert not bad.any(), (src, dst, x[bad][:6], got[bad][:6], want[bad][:6])


@pytest.mark.parametrize("device", device_params(REAL_DEVICES + ["oclgrind"]))
def test_saturating_conversions_match_litert(device, monkeypatch):
    """The GPU row's float -> integer vector form (convert_T_sat_rtz, NaN lanes selected to
    the maximum) on every device, every float source and integer or bool destination, edge
    values (NaN, inf, -0, out of range) in every lane, tails of 31 and 1999 - 1984."""
    from dataclasses import replace

    from test_cast import check_pair

    from litecl.ops import tiling
    from litecl.ops.codegen import cast_kernel

    for row in ("cpu", "gpu"):
        monkeypatch.setitem(tiling.LAUNCH, row, replace(tiling.LAUNCH[row], sat_convert=True))
    monkeypatch.setattr(litecl.kernels, "_PLANS", {})  # plans made without it are not reused
    monkeypatch.setattr("litecl.claims._prepared", lambda dlg, ks: None)  # nor the cache's entries
    caps = litecl.open_device(device).caps
    assert "convert_char" in cast_kernel("float32", "int8", caps)[0] and "_sat_rtz" in cast_kernel("float32", "int8", caps)[0]
    srcs = ["float16", "float32"] + (["float64"] if caps.fp64 else [])
    for s in srcs:
        for t in TYPES:
            if t not in ("float16", "float32", "float64"):
                check_pair(device, s, t, sizes=(31,) if device == "oclgrind" else (31, 1999))


def test_half_to_bool_reads_bits():
    """float16 -> bool without cl_khr_fp16 tests the half's bits (no conversion to float);
    with fp16 or inside a fused group it converts as before."""
    from types import SimpleNamespace

    from litecl.ops.codegen import cast_kernel

    caps = SimpleNamespace(fp16=False, fp64=True, int64=True, strict_compiler=False, is_gpu=True)
    src = cast_kernel("float16", "bool", caps)[0]
    assert "__global const ushort* restrict src" in src and "0x7fff" in src and "half" not in src
    assert "((x) & 0x7fff)" not in cast_kernel("float16", "bool", SimpleNamespace(**{**vars(caps), "fp16": True}))[0]


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["mobile"]))
def test_half_bits_fused_chains(device, half_bits_on_cpu):
    for seed in range(6):
        steps = ["float32", "float16", "float32", ("add", np.float32(seed - 2.5), "NONE"), "float16",
                 ["uint8"], "int32"]
        m = chain_model(steps, [N])
        x = edge_values("float32", N)
        it = litecl.Interpreter(model_content=m, device=device, quiet=True)
        it.allocate_tensors()
        assert_on_opencl(it)
        fused = [ln for ln in launches(it) if len(ln.nodes) > 1]
        assert fused and "litecl_half_round_v" in fused[0].source
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        assert it.delegate.stats["partition_invokes"] == 1
        want = run_reference(m, {it.get_input_details()[0]["name"]: x})
        for o in it.get_output_details():
            assert not mismatches(it.get_tensor(o["index"]), want[o["name"]]).any(), (seed, o["name"])


@pytest.mark.parametrize("spec", device_params(["intel", "pocl"], ["mobile"]))
def test_gpu_code_paths_on_a_cpu_device(spec):
    """The GPU row's code (512-wide work-groups, integer half stores, NaN-sign-keeping half
    loads, pinned staging) run on a CPU device that says it is a GPU, against LiteRT: the
    float CASTs and the NaN-sign cases of ADD, so what the H200 runs is checked here too."""
    from dataclasses import replace

    from test_add import NAN_SHAPES, litecl_run, litert, model, assert_same
    from test_cast import check_pair

    d = litecl.open_device(spec)
    gpu = litecl.Device(d.device, d.context, d.queue, replace(d.caps, is_gpu=True))
    for s in TYPES:
        for t in ("float16", "float32", "float64"):
            if s != t:
                check_pair(gpu, s, t, sizes=(31, 1999))
                check_pair(gpu, t, s, sizes=(31, 1999))
    for s1, s2 in NAN_SHAPES[::3]:
        m = model("float32", tuple(s1), tuple(s2), "RELU6")
        a = np.where(np.arange(np.prod(s1, dtype=int)).reshape(s1) % 3 == 0, np.inf, -np.nan).astype(np.float32)
        b = np.full(s2, np.nan, np.float32)
        got, _ = litecl_run(m, [a, b], gpu)
        assert_same(got, litert(m, [a, b]), f"NaN signs {s1}+{s2} on a pretend GPU", [a, b])
    steps = ["float32", "float16", "float32", ("add", np.float32(-np.nan), "RELU"), "float64", "float16"]
    m = chain_model(steps, [N])
    x = edge_values("float32", N)
    it = litecl.Interpreter(model_content=m, device=gpu, quiet=True)
    it.allocate_tensors()
    assert_on_opencl(it)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    assert it.delegate.stats["partition_invokes"] == 1
    want = run_reference(m, {it.get_input_details()[0]["name"]: x})
    assert not mismatches(it.get_tensor(it.get_output_details()[0]["index"]), want["output"]).any()
