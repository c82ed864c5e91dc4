"""The ``noint64`` profile: no kernel litecl generates holds a 64-bit type, and what runs
on OpenCL is still bit-exact with LiteRT.

Embedded-profile OpenCL devices may lack 64-bit integers (``long`` is optional there,
OpenCL 1.2 section 6.1.1), and many mobile GPUs run them slowly. Under ``noint64``
(``Caps.int64`` False, which also drops fp64) the quantized ADD's fixed-point helpers are
built from ``mul_hi`` and 32-bit parts (ops/add_quant.py), and every node that needs 64-bit
values (int64 CAST/ADD, float64 without cl_khr_fp64) stays on LiteRT with a reason.

Every kernel the delegate runs is built by ``litecl.kernels.build_program`` from its source;
the tests record the sources there and scan them for 64-bit type names and literals.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import litecl
import litecl.delegate as delegate_mod
from litecl.compare import bit_equal, make_interpreter, mismatches
from litecl.ops.add_quant import _mbqm, _srdhm, quant_add_cl_functions, quant_add_cl_vector_functions
from litecl.ops.dtypes import DTYPES
from models.builders import add_model, cast_model

from conftest import SHARED_MODELS, device_params, launches, shared_model
from test_add import (ACTIVATIONS, QUANT, SHAPES, _case, assert_same, check_real_model_adds,
                      litecl_run)
from test_cast import edge_values

#: A 64-bit OpenCL C type (scalar or vector), or an integer literal with an L suffix.
_64BIT = re.compile(r"\b(?:u?long(?:2|3|4|8|16)?|u?int64(?:_t)?|double(?:2|3|4|8|16)?"
                    r"|(?:0[xX][0-9a-fA-F]+|\d+)[uU]?[lL]{1,2})\b")

NOINT64 = device_params(["pocl", "intel"], ["mobile+noint64"])


def sixty_four_bit_tokens(source: str) -> list[str]:
    """The 64-bit type names and literals of OpenCL C ``source`` (comments dropped)."""
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", source, flags=re.S)
    return _64BIT.findall(code)


@pytest.fixture
def sources(monkeypatch) -> list[str]:
    """Every kernel source the delegate takes a kernel of during the test."""
    seen: list[str] = []
    build = delegate_mod.build_program

    def record(device, source):
        seen.append(source)
        return build(device, source)

    monkeypatch.setattr(delegate_mod, "build_program", record)
    monkeypatch.setattr(delegate_mod, "_PLANNED", {})  # plan_for's memo: every plan's programs asked for
    monkeypatch.setattr(delegate_mod, "_PRESETS", {})  # the plans _INIT hands the runtime
    return seen


def assert_no_64bit(sources: list[str], what: str) -> None:
    assert sources, f"{what}: no kernel was built"
    for s in sources:
        found = sixty_four_bit_tokens(s)
        assert not found, f"{what}: kernel holds 64-bit tokens {sorted(set(found))[:8]}"


def test_scanner_finds_what_it_must():
    assert sixty_four_bit_tokens("long a; ulong4 b; 1L; 0xffUL; double c;") == [
        "long", "ulong4", "1L", "0xffUL", "double"]
    assert sixty_four_bit_tokens("/* long */ int along; uint x = 1u; // ulong\n") == []
    assert sixty_four_bit_tokens(quant_add_cl_functions(True))
    assert sixty_four_bit_tokens(quant_add_cl_functions(False)) == []


# ------------------------------------------------------------------------------------------
# The fixed-point helpers alone, on operands far beyond what an ADD feeds them
# ------------------------------------------------------------------------------------------

_I32 = np.iinfo(np.int32)
_EDGES = np.array([_I32.min, _I32.min + 1, -(1 << 30), -(1 << 30) - 1, -3, -2, -1, 0, 1, 2, 3,
                   (1 << 30) - 1, 1 << 30, (1 << 30) + 1, _I32.max - 1, _I32.max], np.int32)


def _operands(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.integers(_I32.min, _I32.max, n, dtype=np.int32, endpoint=True)
    b = rng.integers(_I32.min, _I32.max, n, dtype=np.int32, endpoint=True)
    small = rng.integers(-70000, 70000, n // 4, dtype=np.int32)  # products near the nudge
    a[: n // 4] = small
    ea, eb = np.meshgrid(_EDGES, _EDGES)
    return np.concatenate([ea.ravel(), a]), np.concatenate([eb.ravel(), b])


@pytest.mark.parametrize("int64", [True, False], ids=["long", "32-bit"])
@pytest.mark.parametrize("device", device_params(["pocl", "intel", "oclgrind"]))
def test_fixed_point_helpers_match_numpy(device, int64):
    """litecl_srdhm and litecl_mbqm_single (every shift -31..30, passed at run time) on
    2^18 random int32 pairs (2^10 under Oclgrind, a simulator) and every pair of edge
    values, in both forms, against the numpy port (itself checked against LiteRT in
    tests/test_add_quant.py). Oclgrind also proves the text has no LLVM funnel shift,
    which it cannot run."""
    import pyopencl as cl  # noqa: PLC0415

    from litecl.device import open_device  # noqa: PLC0415

    dev = open_device(device)
    source = quant_add_cl_functions(int64) + r"""
__kernel void srdhm(__global const int* a, __global const int* b, __global int* out) {
    const uint i = get_global_id(0);
    out[i] = litecl_srdhm(a[i], b[i]);
}
__kernel void single(__global const int* a, __global const int* b, __global int* out,
                     const int shift) {
    const uint i = get_global_id(0);
    out[i] = litecl_mbqm_single(a[i], b[i], shift);
}
"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = cl.Program(dev.context, source).build()
    single = cl.Kernel(prog, "single")
    a, b = _operands(1 << 10 if device.startswith("oclgrind") else 1 << 18, 3)
    mf = cl.mem_flags
    ga = cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    gb = cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    go = cl.Buffer(dev.context, mf.WRITE_ONLY, a.nbytes)
    out = np.empty_like(a)

    def run(kernel, *extra):
        kernel(dev.queue, (a.size,), None, ga, gb, go, *extra)
        cl.enqueue_copy(dev.queue, out, go)
        dev.queue.finish()
        return out

    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    want = _srdhm(a64, b64).astype(np.int32)
    got = run(prog.srdhm)
    bad = np.flatnonzero(got != want)
    assert not bad.size, (f"srdhm: {bad.size} differ, e.g. a={a[bad[:3]]} b={b[bad[:3]]} "
                          f"got {got[bad[:3]]} want {want[bad[:3]]}")
    for shift in range(-31, 31):
        want = _mbqm(a64, b64, shift, "single").astype(np.int32)
        got = run(single, np.int32(shift))
        bad = np.flatnonzero(got != want)
        assert not bad.size, (f"mbqm_single shift {shift}: {bad.size} differ, e.g. "
                              f"x={a[bad[:3]]} m={b[bad[:3]]} got {got[bad[:3]]} want {want[bad[:3]]}")


_VECTOR_CASES = r"""
#define LANES(f, ...) (int4)(f(x.s0, __VA_ARGS__), f(x.s1, __VA_ARGS__), f(x.s2, __VA_ARGS__), f(x.s3, __VA_ARGS__))
LITECL_INLINE int litecl_sext16(int x, int unused) { return (int)as_short((ushort)x); }
__kernel void both(__global const int* a, __global int* scalar, __global int* vector,
                   const int m, const int k, const int which) {
    const uint i = get_global_id(0);
    const int4 x = vload4(i, a);
    int4 s, v;
    if (which == 0) { s = LANES(litecl_srdhm, m); v = litecl_srdhm_v4(x, m); }
    else if (which == 1) { s = LANES(litecl_mbqm_single, m, k); v = litecl_mbqm_single_v4(x, m, k); }
    else if (which == 2) { s = LANES(litecl_mbqm, m, k); v = litecl_mbqm_v4(x, m, k); }
    else if (which == 3) { s = LANES(litecl_rdbpot, k); v = litecl_rdbpot_v4(x, k); }
    else if (which == 4) { s = LANES(litecl_rdbpot16, k); v = litecl_rdbpot16_v4(x, k); }
    else { s = LANES(litecl_sext16, 0); v = litecl_sext16_v4(x); }
    vstore4(s, i, scalar);
    vstore4(v, i, vector);
}
"""


@pytest.mark.parametrize("int64", [True, False], ids=["long", "32-bit"])
@pytest.mark.parametrize("device", device_params(["pocl", "intel", "oclgrind"]))
def test_vector_helpers_match_the_scalar_ones(device, int64):
    """The quantized ADD's vector helpers (quant_add_cl_vector_functions: what its
    vector kernels call) give the scalar helpers' bits lane by lane (those are checked
    against numpy above and against LiteRT in tests/test_add_quant.py): srdhm for every
    edge multiplier, mbqm_single and mbqm at every shift -31..30, rdbpot at every exponent
    0..31, rdbpot16 at 0..15, and the int16 wrap, on edge and random int32 operands."""
    import pyopencl as cl  # noqa: PLC0415

    from litecl.device import open_device  # noqa: PLC0415

    dev = open_device(device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = cl.Program(dev.context, quant_add_cl_functions(int64) + quant_add_cl_vector_functions(4, int64)
                          + _VECTOR_CASES).build()
    a, _ = _operands(1 << 8 if device.startswith("oclgrind") else 1 << 14, 5)
    a = a[: a.size // 4 * 4]
    mf = cl.mem_flags
    ga = cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
    gs, gv = (cl.Buffer(dev.context, mf.WRITE_ONLY, a.nbytes) for _ in range(2))
    s, v = np.empty_like(a), np.empty_like(a)
    rng = np.random.default_rng(7)
    ms = [*_EDGES, *rng.integers(1 << 30, _I32.max, 3, dtype=np.int32)]
    cases = ([(0, m, 0) for m in ms] + [(w, m, k) for w in (1, 2) for m in ms[::4] for k in range(-31, 31)]
             + [(3, 0, k) for k in range(32)] + [(4, 0, k) for k in range(16)] + [(5, 0, 0)])
    both = cl.Kernel(prog, "both")
    for which, m, k in cases:
        both(dev.queue, (a.size // 4,), None, ga, gs, gv, np.int32(m), np.int32(k), np.int32(which))
        cl.enqueue_copy(dev.queue, s, gs)
        cl.enqueue_copy(dev.queue, v, gv)
        dev.queue.finish()
        bad = np.flatnonzero(s != v)
        assert not bad.size, (f"case {which} m={m} k={k}: {bad.size} lanes differ, e.g. x={a[bad[:3]]} "
                              f"scalar {s[bad[:3]]} vector {v[bad[:3]]}")


# ------------------------------------------------------------------------------------------
# Through the Interpreter: the quantized ADD matrix and the real models
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", sorted(QUANT))
@pytest.mark.parametrize("device", NOINT64)
def test_quantized_add_matrix_without_int64(device, dt, sources):
    """tests/test_add.py's matrix for the quantized types (every shape pair x every
    activation, against LiteRT's reference and optimized kernels) under noint64, with no
    64-bit type in any kernel it built (fused broadcast kernels included)."""
    count = 0
    for k, (s1, s2) in enumerate(SHAPES):
        for act in ACTIVATIONS:
            m, ins, _ = _case(dt, tuple(s1), tuple(s2), act, 10 * k, "ref")
            got, _ = litecl_run(m, ins, device, "ref")
            for ref in ("ref", "builtin"):
                want = _case(dt, tuple(s1), tuple(s2), act, 10 * k, ref)[2]
                assert_same(got, want, f"{dt} {s1}+{s2} {act} on {device} vs {ref}", ins)
            count += 1
    assert count == len(SHAPES) * len(ACTIVATIONS)
    assert_no_64bit(sources, f"{dt} ADD matrix on {device}")


_QUANT_MODELS = ["movenet_singlepose_lightning_int8.tflite",
                 "coral_mobilenet_v2_1_0_224_quant.tflite",
                 "single_add_default_a8w8_recipe_quantized.tflite",
                 "single_add_default_a16w8_recipe_quantized.tflite",
                 "tflm_add_model.tflite", "simple_quantized_ops.tflite"]


@pytest.mark.parametrize("name", _QUANT_MODELS)
def test_quantized_models_without_int64(shared_models, fast_device, name, sources):
    """Every ADD of the quantized real models on OpenCL under mobile+noint64 (MoveNet:
    every one of its ADDs, fused groups included), every ADD output and model output
    bit-equal to LiteRT's reference kernels, and no kernel with a 64-bit type."""
    device = f"{fast_device}:profile=mobile+noint64"
    it = check_real_model_adds(name, device, "ref")
    assert not it.delegate.caps.int64
    assert_no_64bit(sources, f"{name} on {device}")


@pytest.mark.parametrize("name", sorted(p.name for p in SHARED_MODELS.glob("*.tflite"))
                         if SHARED_MODELS.is_dir() else ["(no shared models)"])
def test_every_shared_model_kernel_is_32bit(shared_models, fast_device, name, sources):
    """Whatever runs on OpenCL under noint64, in any shared model, holds no 64-bit type;
    what needs 64-bit values stays on LiteRT and says so."""
    it = litecl.Interpreter(model_path=shared_model(name), device=f"{fast_device}:profile=noint64",
                            quiet=True)
    it.allocate_tensors()
    for s in sources:
        assert not sixty_four_bit_tokens(s), (name, sorted(set(sixty_four_bit_tokens(s))))
    for p in it.placement():
        assert p["placement"] in ("opencl", "litert"), p
        if p["placement"] == "litert":
            assert p["reason"], p
    # every partition's kernels were taken (and scanned) at allocate_tensors
    assert len(sources) >= len(launches(it))


_CAST_TYPES = [d.name for d in DTYPES]
#: types added after the 12 the count below was written for (bfloat16, sub-byte integers)
_NEWER = {"bfloat16", "int4", "uint4", "int2"}


def test_every_cast_pair_is_32bit_or_stays_on_litert(fast_device, sources):
    """All 132 CAST pairs (12 sources, complex64 included, x 11 destinations) under
    mobile+noint64: a pair with int64, or float64 (no cl_khr_fp64 there), stays on LiteRT
    naming what is missing; every other pair runs on OpenCL with a 32-bit kernel, bit-exact
    with LiteRT."""
    device = f"{fast_device}:profile=mobile+noint64"
    on_cl = 0
    for src in _CAST_TYPES:
        for dst in _CAST_TYPES:
            if dst == "complex64":
                continue
            sources.clear()
            m = cast_model(src, dst, [37])
            it = litecl.Interpreter(model_content=m, device=device, quiet=True)
            p = it.placement()[0]
            if {src, dst} & _NEWER and p["placement"] == "litert":
                continue  # sub-byte pairs LiteRT does not run (tests/test_cast.py checks which)
            it.allocate_tensors()
            if "int64" in (src, dst) or "float64" in (src, dst):
                assert p["placement"] == "litert", (src, dst, p)
                assert "64-bit integers" in p["reason"], (src, dst, p["reason"])
                continue
            assert p["placement"] == "opencl", (src, dst, p)
            assert_no_64bit(sources, f"CAST {src}->{dst}")
            if "int2" not in (src, dst):  # LiteRT's Python API cannot set an int2 input
                x = edge_values(src, 37)
                ref = make_interpreter(m)
                for i in (it, ref):
                    i.allocate_tensors()
                    i.set_tensor(i.get_input_details()[0]["index"], x)
                    i.invoke()
                got, want = (i.get_tensor(i.get_output_details()[0]["index"]) for i in (it, ref))
                assert it.delegate.stats["partition_invokes"] == 1
                assert not mismatches(got, want).any(), (src, dst, x, got, want)
            on_cl += not {src, dst} & _NEWER
    assert on_cl == 10 * 9  # sources without int64/float64 x destinations without them


def test_int64_add_falls_back_with_reason(fast_device):
    m = add_model("int64", [5], [5])
    it = litecl.Interpreter(model_content=m, device=f"{fast_device}:profile=noint64", quiet=True)
    p = it.placement()[0]
    assert p["placement"] == "litert" and "64-bit integers" in p["reason"]
    a, b = np.array([2**62, -1, 5, 2**63 - 1, 0], np.int64), np.array([2**62, -2, 6, 1, 0], np.int64)
    outs = []
    for i in (it, make_interpreter(m)):  # LiteRT runs it: the same result as LiteRT alone
        i.allocate_tensors()
        i.set_tensor(i.get_input_details()[0]["index"], a)
        i.set_tensor(i.get_input_details()[1]["index"], b)
        i.invoke()
        outs.append(i.get_tensor(i.get_output_details()[0]["index"]))
    assert bit_equal(*outs) and it.delegate.stats["partition_invokes"] == 0


def test_full_profile_keeps_the_long_multiply():
    """The default (full-profile) text is unchanged: one long multiply per product."""
    text = quant_add_cl_functions(True)
    assert "(long)a * (long)b" in text and "mul_hi" not in text
    assert "mul_hi" in quant_add_cl_functions(False)
