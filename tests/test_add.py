"""ADD end to end through ``litecl.Interpreter``, bit for bit against LiteRT.

Every ADD runs through litecl.Delegate inside LiteRT's own Interpreter and must be placed
on OpenCL (``placement()``) and run there (``delegate.stats``), then its output is compared
with LiteRT's (``litecl.compare.mismatches``: bits, any NaN equals any NaN, -0.0 != +0.0):

- the matrix: float32, int32, int64, int8, uint8, int16 x broadcast shapes (same shape,
  scalars, rank mismatch, 5-D and 6-D, sizes that divide nothing) x the four fused
  activations x every real device (Intel's CPU runtime here; PoCL and NVIDIA where they
  build) in the default and ``mobile`` profiles; a small subset under Oclgrind, which reports invalid accesses;
- float edge cases (inf + -inf, NaN through every activation at every position, signed
  zeros, FLT_MAX saturation, subnormals) and integer wrap-around, each also checked
  against the value LiteRT documents (models/LITERT_FACTS.md);
- quantized: realistic scales (the real models' ADD configurations) against both the
  reference kernels (``reference="ref"``) and the default optimized kernels
  (``"builtin"``); scale ratios on which LiteRT's optimized kernel departs from its
  reference kernel against ``"ref"`` only, with the departure itself pinned down;
- constant operands uploaded once (at the first invoke, from LiteRT's read-only memory),
  all-constant ADDs computed once ("constant inputs: computed once");
- every ADD of the real models in ../shared/models, in place, against LiteRT.

LiteRT outputs are cached per model and inputs, so each device/profile reuses them.
"""
from __future__ import annotations

import functools
import math
import os
import warnings

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import litecl
from litecl.compare import bit_equal, mismatches, random_inputs, run_reference
from litecl.compare import make_interpreter
from litecl.ops.add_quant import quant_add_params, quant_add_reference
from models.builders import add_model

from conftest import (force_copies, REAL_DEVICES, any_fast_device, assert_folded_and_count_launches, assert_on_opencl, device_params,
                      launches, shared_model)

DTYPES = ("float32", "int32", "int64", "int8", "uint8", "int16")
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")

#: (shape1, shape2): same shape, scalars, rank mismatch, broadcasting both ways, 5-D and
#: 6-D, and element counts that divide no SIMD width or tile (1, 31, 33, 81, 757, 1999).
SHAPES = [
    ([1], [1]), ([31], [31]), ([1999], [1999]), ([3, 11, 1, 23], [3, 11, 1, 23]),
    ([], [757]), ([33], []), ([], []),
    ([81], [1]), ([3, 27], [27]), ([757], [2, 1]), ([1, 1, 1, 1, 1, 1], [1999]),
    ([1, 10, 1], [1, 10, 3]), ([1, 3], [2, 1]), ([31, 1], [1, 33]),
    ([2, 1, 3, 1, 5], [1, 4, 3, 7, 1]), ([1, 2, 1, 3, 1, 4], [2, 1, 3, 1, 5, 1]),
]

#: Per quantized type, an ADD configuration of a real model ((scale, zero point) of
#: input 1, input 2, output): MoveNet int8, Coral MobileNet uint8, the a16w8 model's
#: int16. On these LiteRT's optimized and reference kernels agree on every operand
#: (test_realistic_int8_config_is_exact_in_both_litert_kernels), so the matrix compares
#: quantized types with both.
QUANT = {
    "int8": ((0.039369, 12), (0.0374, -5), (0.041007, 7)),
    "uint8": ((0.40149, 136), (0.27583, 119), (0.43217, 133)),
    "int16": ((3.0492e-05, 0), (3.0492e-05, 0), (6.1e-05, 0)),
}

F32_MAX = float(np.finfo(np.float32).max)
_F32_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 5.999999, 6.0, 6.000001, 7.0, -7.0,
              0.999999, 1.000001, -1.000001, 1e-40, -1e-40, 1.4e-45, -1.4e-45, 1.1754944e-38,
              1.5e-38, -1.4e-38, 3e38, -3e38, F32_MAX, -F32_MAX, 1.7e38, 1e32,
              np.inf, -np.inf, np.nan, -np.nan]


def _numel(shape) -> int:
    return int(math.prod(shape))


def _int_edges(dt: str) -> list[int]:
    info = np.iinfo(dt)
    vals = [info.min, info.min + 1, info.max, info.max - 1, -2, -1, 0, 1, 2, 5, 6, 7]
    return [v for v in vals if info.min <= v <= info.max]


def values(dt: str, shape, seed: int) -> np.ndarray:
    """Seeded operand of dtype dt: random values with every edge value of the type placed
    at random positions (SIMD body and tail alike)."""
    shape = tuple(shape)
    n = _numel(shape)
    rng = np.random.default_rng(seed)
    if dt == "float32":
        with np.errstate(over="ignore"):
            mag = 10.0 ** rng.integers(-44, 39, n).astype(np.float64)
            out = (rng.standard_normal(n) * mag).astype(np.float32)
        edges = np.array(_F32_EDGES, np.float32)
    else:
        info = np.iinfo(dt)
        out = rng.integers(info.min, info.max, n, dtype=np.dtype(dt), endpoint=True)
        edges = np.array(_int_edges(dt), dtype=dt)
    k = min(n, len(edges))
    out[rng.choice(n, k, replace=False)] = rng.permutation(edges)[:k]
    return out.reshape(shape)


@functools.lru_cache(maxsize=None)
def model(dt: str, s1: tuple, s2: tuple, act: str, quant=None) -> bytes:
    q = quant if quant is not None else QUANT.get(dt)
    return add_model(dt, list(s1), list(s2), activation=act, quant=q)


def litert(content: bytes, inputs, reference: str = "builtin") -> np.ndarray:
    it = make_interpreter(content, reference=reference)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


@functools.lru_cache(maxsize=None)
def _case(dt: str, s1: tuple, s2: tuple, act: str, seed: int, reference: str):
    """(model, inputs, LiteRT output) of one matrix case, computed once per session."""
    m = model(dt, s1, s2, act)
    ins = [values(dt, s1, seed), values(dt, s2, seed + 1)]
    return m, ins, litert(m, ins, reference)


def litecl_run(content: bytes, inputs, device: str, reference: str = "builtin", copies: bool = False):
    """Run on litecl after asserting every ADD is on OpenCL, and that litecl's kernels ran
    at the invoke; returns (output, interp). copies: the GPU memory path (device buffers
    copied to and from LiteRT's memory) forced on any device."""
    if copies:
        d = force_copies(litecl.Delegate(device, quiet=True, reference="ref" if reference == "ref" else "builtin"))
        it = litecl.Interpreter(model_content=content, reference=reference, delegate=d)
    else:
        it = litecl.Interpreter(model_content=content, device=device, reference=reference, quiet=True)
    assert_on_opencl(it, ("ADD",))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    assert it.delegate.stats["partition_invokes"] == 1
    return it.get_tensor(it.get_output_details()[0]["index"]), it


def assert_same(got: np.ndarray, want: np.ndarray, what: str, inputs=()) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, got.shape,
                                                                 want.dtype, want.shape)
    bad = mismatches(got, want)
    if bad.any():
        idx = np.flatnonzero(bad)[:6]
        ops = [np.broadcast_to(x, want.shape).reshape(-1)[idx] for x in inputs]
        pytest.fail(f"{what}: {int(bad.sum())} of {want.size} differ; at {idx.tolist()} "
                    f"operands {[o.tolist() for o in ops]} got {got.reshape(-1)[idx].tolist()} "
                    f"want {want.reshape(-1)[idx].tolist()}")


# ------------------------------------------------------------------------------------------
# The matrix
# ------------------------------------------------------------------------------------------

FAST = device_params(REAL_DEVICES, ["", "mobile"])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("device", FAST)
def test_add_matrix(device, dt):
    """dtype x every shape pair x every activation; quantized types against both the
    reference kernels and the optimized (default) ones."""
    refs = ("ref", "builtin") if dt in QUANT else ("builtin",)
    count = 0
    for k, (s1, s2) in enumerate(SHAPES):
        for act in ACTIVATIONS:
            m, ins, _ = _case(dt, tuple(s1), tuple(s2), act, 10 * k, refs[0])
            got, _ = litecl_run(m, ins, device, refs[0])
            for ref in refs:
                want = _case(dt, tuple(s1), tuple(s2), act, 10 * k, ref)[2]
                assert_same(got, want, f"{dt} {s1}+{s2} {act} on {device} vs {ref}", ins)
            count += 1
    assert count == len(SHAPES) * len(ACTIVATIONS)


def test_add_matrix_on_the_copy_path(fast_device):
    """Every dtype x shape pair, two activations, with LiteRT's tensors reached through
    device copies (as on a discrete GPU, the H200)."""
    for dt in DTYPES:
        ref = "ref" if dt in QUANT else "builtin"
        for k, (s1, s2) in enumerate(SHAPES):
            for act in ("NONE", "RELU6"):
                m, ins, want = _case(dt, tuple(s1), tuple(s2), act, 10 * k, ref)
                got, it = litecl_run(m, ins, fast_device, ref, copies=True)
                assert it.delegate.stats["in_place"] == 0 and it.delegate.stats["copied"] == 3
                assert_same(got, want, f"{dt} {s1}+{s2} {act} copies", ins)


def test_add_matrix_on_pocl_pthread(monkeypatch):
    """Every dtype x shape pair x activation on PoCL's pthread device (parallel
    work-groups): these partitions are small, so by default they run on PoCL's basic
    device (test_add_matrix); SMALL_PARTITION_BYTES below them all sends them to pthread."""
    import litecl.kernels as kernels_mod

    from conftest import DEVICE_STATUS

    if DEVICE_STATUS.get("pocl"):
        pytest.skip(DEVICE_STATUS["pocl"])
    monkeypatch.setattr(kernels_mod, "SMALL_PARTITION_BYTES", -1)
    for dt in DTYPES:
        refs = ("ref", "builtin") if dt in QUANT else ("builtin",)
        for k, (s1, s2) in enumerate(SHAPES):
            for act in ACTIVATIONS:
                m, ins, _ = _case(dt, tuple(s1), tuple(s2), act, 10 * k, refs[0])
                got, it = litecl_run(m, ins, "pocl", refs[0])
                assert all(p.dev is it.delegate.device for p in it.delegate.partitions())
                for ref in refs:
                    want = _case(dt, tuple(s1), tuple(s2), act, 10 * k, ref)[2]
                    assert_same(got, want, f"{dt} {s1}+{s2} {act} on pocl pthread vs {ref}", ins)


ORACLE_CASES = [("float32", [33], [33], "RELU6"), ("float32", [1, 3], [2, 1], "NONE"),
                ("int32", [81], [1], "RELU"), ("int64", [2, 1, 3, 1, 5], [1, 4, 3, 7, 1], "NONE"),
                ("int8", [1, 10, 1], [1, 10, 3], "RELU_N1_TO_1"), ("uint8", [], [33], "RELU"),
                ("int16", [1, 2, 1, 3, 1, 4], [2, 1, 3, 1, 5, 1], "RELU6"),
                ("int16", [31], [31], "NONE")]


@pytest.mark.parametrize("device", device_params(["oclgrind"], ["", "mobile"]))
def test_add_subset_under_oclgrind(device, capfd):
    """Oclgrind simulates the kernels and reports out-of-bounds reads and writes."""
    for dt, s1, s2, act in ORACLE_CASES:
        ref = "ref" if dt in QUANT else "builtin"
        m, ins, want = _case(dt, tuple(s1), tuple(s2), act, 7, ref)
        got, _ = litecl_run(m, ins, device, ref)
        assert_same(got, want, f"{dt} {s1}+{s2} {act} on {device}", ins)
    err = capfd.readouterr().err
    assert "Invalid read" not in err and "Invalid write" not in err, err[-2000:]


# ------------------------------------------------------------------------------------------
# float32 and integer edge cases, checked against LiteRT and against the documented values
# ------------------------------------------------------------------------------------------

NAN = np.float32(np.nan)

#: (a, b, {activation: expected}) measured in LiteRT's builtin kernels (LITERT_FACTS.md);
#: a NaN expectation is any NaN of that sign (inf + -inf: x86's default NaN, negative).
F32_PAIRS = [
    (np.inf, -np.inf, {a: -NAN for a in ACTIVATIONS}),
    (np.inf, 1.0, {"NONE": F32_MAX, "RELU": F32_MAX, "RELU6": 6.0, "RELU_N1_TO_1": 1.0}),
    (-np.inf, -1.0, {"NONE": -F32_MAX, "RELU": 0.0, "RELU6": 0.0, "RELU_N1_TO_1": -1.0}),
    (F32_MAX, F32_MAX, {"NONE": F32_MAX, "RELU": F32_MAX}),
    (-F32_MAX, -F32_MAX, {"NONE": -F32_MAX, "RELU": 0.0}),
    (F32_MAX, 1e32, {"NONE": F32_MAX}),
    (-0.0, -0.0, {a: -0.0 for a in ACTIVATIONS}),   # RELU keeps -0.0: max(-0.0, 0) is -0.0
    (-0.0, 0.0, {a: 0.0 for a in ACTIVATIONS}),
    (np.nan, 0.0, {a: NAN for a in ACTIVATIONS}),
    (-np.nan, 0.0, {a: -NAN for a in ACTIVATIONS}),
    (0.0, np.nan, {a: NAN for a in ACTIVATIONS}),
    (1e-40, 0.0, {"NONE": 1e-40, "RELU": 1e-40}),
    (1e-40, 1e-40, {"NONE": np.float32(1e-40) * 2}),   # 0x00022d84: subnormals kept
    (-1e-40, 0.0, {"NONE": -1e-40, "RELU": 0.0, "RELU_N1_TO_1": -1e-40}),
    (1.5e-38, -1.4e-38, {"NONE": np.float32(1.5e-38) - np.float32(1.4e-38)}),
    (1.4e-45, 1.4e-45, {"NONE": np.float32(1.4e-45) * 2}),
    (7.0, 0.0, {"NONE": 7.0, "RELU": 7.0, "RELU6": 6.0, "RELU_N1_TO_1": 1.0}),
    (-7.0, 0.0, {"NONE": -7.0, "RELU": 0.0, "RELU6": 0.0, "RELU_N1_TO_1": -1.0}),
]


@pytest.mark.parametrize("device", FAST)
def test_float_edge_cases(device):
    a = np.array([p[0] for p in F32_PAIRS], np.float32)
    b = np.array([p[1] for p in F32_PAIRS], np.float32)
    n = a.size
    for act in ACTIVATIONS:
        m = model("float32", (n,), (n,), act)
        got, _ = litecl_run(m, [a, b], device)
        assert_same(got, litert(m, [a, b]), f"float edges {act} on {device}", [a, b])
        for k, (x, y, expect) in enumerate(F32_PAIRS):
            if act in expect:
                assert bit_equal(got[k:k + 1], np.array([expect[act]], np.float32)), (
                    x, y, act, got[k], expect[act])
    # inf + -inf: a negative NaN on every device (LiteRT on x86 gives 0xFFC00000)
    assert np.isnan(got[0]) and np.signbit(got[0])


@pytest.mark.parametrize("device", FAST)
def test_nan_propagates_through_every_activation_at_every_position(device):
    """NaN + 0 (and 0 + NaN, -NaN + 0) stays NaN under every activation, at every size
    (SIMD body and tail), broadcast or not: clamps written as std::max/std::min."""
    for act in ACTIVATIONS:
        for s1, s2 in [([1], [1]), ([3], [3]), ([17], [17]), ([1999], [1999]), ([17], [1]),
                       ([1], [17]), ([3, 17], [1, 17]), ([2, 1, 9], [1, 4, 1]), ([], [33])]:
            for sign in (1, -1):
                a = np.full(s1, sign * np.nan, np.float32)
                b = np.zeros(s2, np.float32)
                m = model("float32", tuple(s1), tuple(s2), act)
                for ins in ([a, b],) if s1 != s2 else ([a, b], [b, a]):
                    got, _ = litecl_run(m, ins, device)
                    assert np.isnan(got).all(), (act, s1, s2, got)
                    assert_same(got, litert(m, ins), f"NaN {act} {s1}+{s2}", ins)


INT_WRAP = {  # LITERT_FACTS.md (c): a + b wraps, then the activation clamps
    "int32": {"NONE": [-2**31, 2**31 - 1, -2, 0, 2**31 - 1],
              "RELU": [0, 2**31 - 1, 0, 0, 2**31 - 1], "RELU6": [0, 6, 0, 0, 6],
              "RELU_N1_TO_1": [-1, 1, -1, 0, 1]},
    "int64": {"NONE": [-2**63, 2**63 - 1, -2, 0, 2**63 - 1],
              "RELU": [0, 2**63 - 1, 0, 0, 2**63 - 1], "RELU6": [0, 6, 0, 0, 6],
              "RELU_N1_TO_1": [-1, 1, -1, 0, 1]},
}


@pytest.mark.parametrize("device", FAST)
@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_integer_overflow_wraps_then_clamps(device, dt):
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    a = np.array([hi, lo, hi, lo, -1], dt)
    b = np.array([1, -1, hi, lo, lo], dt)
    for act in ACTIVATIONS:
        m = model(dt, (5,), (5,), act)
        got, _ = litecl_run(m, [a, b], device)
        assert got.tolist() == INT_WRAP[dt][act], (act, got)
        assert_same(got, litert(m, [a, b]), f"{dt} wrap {act}", [a, b])
        # broadcast [5] + [1] wraps the same way
        mb = model(dt, (5,), (1,), act)
        one = np.array([1], dt)
        got, _ = litecl_run(mb, [a, one], device)
        assert_same(got, litert(mb, [a, one]), f"{dt} wrap bcast {act}", [a, one])


def _unquantized(content: bytes) -> bytes:
    """The model with every tensor's quantization parameters removed."""
    obj = schema.ModelT.InitFromPackedBuf(content, 0)
    for t in obj.subgraphs[0].tensors:
        t.quantization = None
    b = flatbuffers.Builder(1024)
    b.Finish(obj.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("device", FAST)
def test_unquantized_int16_add_wraps(device):
    """An int16 ADD without quantization parameters is plain wrapping arithmetic in LiteRT
    (then the activation clamp), like int32: measured, and run on OpenCL the same way.
    (int8/uint8 without them abort LiteRT: never built here.)"""
    a = np.array([32767, -32768, 5, -7, 7, 0, 1, -1, 3], np.int16)
    b = np.array([1, -1, 6, 0, 0, 0, 0, 0, 4], np.int16)
    expect = {"NONE": [-32768, 32767, 11, -7, 7, 0, 1, -1, 7],
              "RELU": [0, 32767, 11, 0, 7, 0, 1, 0, 7], "RELU6": [0, 6, 6, 0, 6, 0, 1, 0, 6],
              "RELU_N1_TO_1": [-1, 1, 1, -1, 1, 0, 1, -1, 1]}
    q = ((1.0, 0), (1.0, 0), (1.0, 0))
    for act in ACTIVATIONS:
        m = _unquantized(model("int16", (9,), (9,), act, q))
        got, _ = litecl_run(m, [a, b], device)
        assert got.tolist() == expect[act], (act, got)
        assert_same(got, litert(m, [a, b]), f"int16 plain {act}", [a, b])
        for s1, s2 in [([1999], [1999]), ([3, 1, 33], [1, 4, 1]), ([], [757])]:
            m = _unquantized(model("int16", tuple(s1), tuple(s2), act, q))
            ins = [values("int16", s1, 40), values("int16", s2, 41)]
            got, _ = litecl_run(m, ins, device)
            for ref in ("builtin", "ref"):
                assert_same(got, litert(m, ins, ref), f"int16 plain {act} {s1}+{s2} {ref}", ins)


@pytest.mark.parametrize("shapes", [([0], [0]), ([3, 0], [1]), ([0, 4], [4])])
def test_zero_size_operands(fast_device, shapes):
    for dt in ("float32", "int32", "int8"):
        s1, s2 = shapes
        m = model(dt, tuple(s1), tuple(s2), "NONE")
        ins = [values(dt, s1, 1), values(dt, s2, 2)]
        got, _ = litecl_run(m, ins, fast_device)
        assert_same(got, litert(m, ins), f"{dt} {s1}+{s2}")


# ------------------------------------------------------------------------------------------
# Quantized: which LiteRT kernels litecl matches
# ------------------------------------------------------------------------------------------

#: Scale configurations on which LiteRT's optimized ADD departs from its reference kernel:
#: unequal input scales where the optimized kernel's single rounding of the rescaled
#: smaller-scale input (one shift before the multiply) differs from the reference kernel's
#: two (multiply, then divide by a power of two), and output scales ~1000x below the
#: inputs' (the optimized kernel narrows to int16 without saturation, so a saturated
#: result comes out with the wrong sign).
DEPARTING = {
    "int8": [((0.05, -3), (0.08, 10), (0.1, -5)), ((0.5, 3), (0.5, -3), (0.0004, 0)),
             ((1.0, 0), (0.001, 0), (0.002, 0))],
    "uint8": [((0.5, 3), (0.5, 200), (0.0004, 128))],
}


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, [""]))
def test_quantized_follows_reference_kernels_where_optimized_departs(device):
    """litecl computes what BUILTIN_REF computes (reference="ref" then compares and falls
    back with the same kernels): every element, every activation, broadcast or not."""
    for dt, configs in DEPARTING.items():
        for q in configs:
            for act in ACTIVATIONS:
                for s1, s2 in [([4099], [4099]), ([64, 33], [64, 1]), ([], [757])]:
                    m = model(dt, tuple(s1), tuple(s2), act, q)
                    ins = [values(dt, s1, 3), values(dt, s2, 4)]
                    got, it = litecl_run(m, ins, device, reference="ref")
                    assert it.delegate.reference == "ref"
                    assert_same(got, litert(m, ins, "ref"), f"{dt} {q} {act} {s1}+{s2}", ins)
                    p = quant_add_params(dt, *q, act, pot_scale_int16=False)
                    assert bit_equal(got, quant_add_reference(*ins, p))


def _neon_add_int8(a, b, p) -> np.ndarray:
    """LiteRT's optimized int8 AddElementwise SIMD body (NEON, via NEON_2_SSE on x86):
    one combined shift before the multiply (one rounding where the reference kernel rounds
    twice) and a non-saturating narrowing to int16 before the saturating one to int8."""
    def wrap(x, bits):
        return ((x + (1 << (bits - 1))) & ((1 << bits) - 1)) - (1 << (bits - 1))

    def shl(x, n):  # vshlq_s32: left shift, or arithmetic right shift for n < 0
        return wrap(x << n, 32) if n >= 0 else x >> -n

    def rdmulh(x, m):  # vqrdmulhq_n_s32 (no saturation needed here)
        return (x * m + (1 << 30)) >> 31

    a, b = a.astype(np.int64), b.astype(np.int64)
    x1 = rdmulh(shl(a + p.input1_offset, p.left_shift + p.input1_shift), p.input1_multiplier)
    x2 = rdmulh(shl(b + p.input2_offset, p.left_shift + p.input2_shift), p.input2_multiplier)
    s = rdmulh(wrap(x1 + x2, 32), p.output_multiplier)
    e = -p.output_shift  # gemmlowp RoundingDivideByPOT: half away from zero
    s = (s >> e) + ((s & ((1 << e) - 1)) > (((1 << e) - 1) >> 1) + (s < 0))
    s = wrap(wrap(s, 16) + p.output_offset, 16)
    return np.clip(np.clip(s, -128, 127), p.activation_min, p.activation_max)


def test_realistic_int8_config_is_exact_in_both_litert_kernels():
    """The matrix's int8 configuration (MoveNet's first ADD): the optimized SIMD formula
    and the reference formula agree on all 65536 operand pairs, so comparing it with
    "builtin" is exact and not luck. int16 with equal input scales (the matrix's) shifts
    neither input, where the two formulas are the same by construction."""
    v = np.arange(-128, 128)
    a, b = (x.ravel().astype(np.int8) for x in np.meshgrid(v, v))
    for act in ACTIVATIONS:
        p = quant_add_params("int8", *QUANT["int8"], act)
        assert bit_equal(_neon_add_int8(a, b, p).astype(np.int8), quant_add_reference(a, b, p))
    p16 = quant_add_params("int16", *QUANT["int16"], pot_scale_int16=False)
    assert p16.path == "general" and p16.input1_shift == p16.input2_shift == 0


def test_litert_optimized_int8_add_departs_from_reference_kernel():
    """Pins down the surprise behind reference="ref": LiteRT's default (optimized) int8
    ADD runs the SIMD formula on each block of 16 elements and the reference formula on
    the rest, so its result depends on the element's position; ~0.8% of elements differ
    by 1 with scales 0.05/0.08/0.1. On every real model's ADD configuration the two
    formulas agree on all 65536 operand pairs but one (MoveNet, 2 pairs)."""
    q = DEPARTING["int8"][0]
    n = 4096 + 13
    a, b = values("int8", [n], 5), values("int8", [n], 6)
    m = model("int8", (n,), (n,), "NONE", q)
    opt, ref = litert(m, [a, b], "builtin"), litert(m, [a, b], "ref")
    p = quant_add_params("int8", *q)
    body = n - n % 16
    assert bit_equal(ref, quant_add_reference(a, b, p))
    assert (opt[:body] != ref[:body]).sum() > 10
    assert bit_equal(opt[:body], _neon_add_int8(a[:body], b[:body], p).astype(np.int8))
    assert bit_equal(opt[body:], ref[body:])  # the scalar tail is the reference formula


@pytest.mark.parametrize("pot", [True, False])
def test_int16_power_of_two_scales(fast_device, pot):
    """AddOptions.pot_scale_int16 with power-of-two scales takes LiteRT's POT path (a
    shift and a saturating add); without it, the general path. Same-size operands only:
    LiteRT aborts on a broadcasting POT ADD, so litecl leaves that one to LiteRT."""
    q = ((2.0**-10, 0), (2.0**-13, 0), (2.0**-10, 0))
    for act in ACTIVATIONS:
        for s1, s2 in [([1999], [1999]), ([1, 3], [3])]:
            m = _with_pot(model("int16", tuple(s1), tuple(s2), act, q), pot)
            ins = [values("int16", s1, 8), values("int16", s2, 9)]
            p = quant_add_params("int16", *q, act, pot_scale_int16=pot)
            assert p.path == ("pot_int16" if pot else "general")
            got, _ = litecl_run(m, ins, fast_device, reference="ref")
            for ref in ("ref", "builtin"):
                assert_same(got, litert(m, ins, ref), f"int16 pot={pot} {act} {s1}+{s2} {ref}",
                            ins)
    m = _with_pot(model("int16", (2, 3), (3,), "NONE", q), True)
    _assert_left_to_litert(m, fast_device, "power-of-two")


def _assert_left_to_litert(m: bytes, device: str, reason: str) -> None:
    """An ADD LiteRT aborts on (the process dies in its kernel): the delegate in LiteRT's
    own Interpreter leaves it to LiteRT with ``reason`` (never invoked here), and
    litecl.Interpreter refuses the model at construction, naming the abort."""
    d = litecl.Delegate(device, quiet=True)
    make_interpreter(m, delegates=[d])
    (p,) = d.placement()
    assert p["placement"] == "litert" and reason in p["reason"], p
    with pytest.raises(litecl.ModelError, match="LiteRT aborts"):
        litecl.Interpreter(model_content=m, device=device, quiet=True)


def _with_pot(content: bytes, pot: bool) -> bytes:
    """The model with AddOptions.pot_scale_int16 set (models.builders writes False)."""
    obj = schema.ModelT.InitFromPackedBuf(content, 0)
    obj.subgraphs[0].operators[0].builtinOptions.potScaleInt16 = pot
    b = flatbuffers.Builder(1024)
    b.Finish(obj.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_no_code_generation_per_invoke(fast_device, monkeypatch):
    """Index arithmetic, plans and kernels are made at allocate_tensors (the delegate
    kernel's prepare) for the concrete shapes; invoke() only launches."""
    import litecl.delegate as delegate_mod  # noqa: PLC0415
    import litecl.kernels as kernels_mod  # noqa: PLC0415
    import litecl.ops.add as add_mod  # noqa: PLC0415

    m = model("int8", (2, 1, 3, 1, 5), (1, 4, 3, 7, 1), "RELU")
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    it.allocate_tensors()
    assert_on_opencl(it)

    def forbidden(*args, **kwargs):
        raise AssertionError("code generated at invoke")

    for mod, name in [(kernels_mod, "kernel_spec"), (kernels_mod, "build_program"),
                      (kernels_mod, "_plan_partition"), (kernels_mod, "plan_partition"),
                      (delegate_mod, "build_program"), (add_mod, "add_kernel"),
                      (add_mod, "index_code")]:
        monkeypatch.setattr(mod, name, forbidden)
    for seed in (1, 2, 3):
        ins = [values("int8", (2, 1, 3, 1, 5), seed), values("int8", (1, 4, 3, 7, 1), seed + 9)]
        for d, x in zip(it.get_input_details(), ins):
            it.set_tensor(d["index"], x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        assert_same(got, litert(m, ins, "ref"), f"invoke {seed}", ins)
    assert it.delegate.stats["partition_invokes"] == 3


def test_same_tensor_on_both_inputs(fast_device):
    """x + x: one buffer bound to both (read-only, restrict-qualified) arguments."""
    for dt in ("float32", "int32", "int8"):
        obj = schema.ModelT.InitFromPackedBuf(model(dt, (757,), (757,), "NONE"), 0)
        sg = obj.subgraphs[0]
        sg.operators[0].inputs = [0, 0]
        sg.inputs = [0]
        b = flatbuffers.Builder(1024)
        b.Finish(obj.Pack(b), file_identifier=b"TFL3")
        m = bytes(b.Output())
        x = values(dt, [757], 31)
        got, _ = litecl_run(m, [x], fast_device, "ref")
        assert_same(got, litert(m, [x], "ref"), f"{dt} x + x", [x, x])


# ------------------------------------------------------------------------------------------
# Constant operands: uploaded once, all-constant nodes computed once
# ------------------------------------------------------------------------------------------

CONST_CASES = [("float32", [33], [1, 33]), ("int32", [], [81]), ("int64", [2, 1, 3], [4, 1]),
               ("int8", [757], []), ("uint8", [31, 1], [1, 33]), ("int16", [3, 27], [27])]


def _runtime_counts(d) -> dict:
    """The runtime's counts summed over ``d``'s live partitions (runtime.COUNTS: "buffers"
    device buffers made, "uploads" of them constants copied from the host)."""
    out: dict = {}
    for p in d.partitions():
        for k, v in p.counts().items():
            out[k] = out.get(k, 0) + v
    return out


def _delegate(device, copies: bool):
    """A quiet litecl.Delegate; copies: the GPU memory path (device buffers copied to and
    from LiteRT's memory) forced on a CPU device, so it is checked where no GPU is."""
    d = litecl.Delegate(device, quiet=True)
    return force_copies(d) if copies else d


@pytest.mark.parametrize("copies", [False, True], ids=["in_place", "copies"])
@pytest.mark.parametrize("device", device_params(REAL_DEVICES, [""]))
def test_constant_operand_uploaded_once(device, copies, monkeypatch):
    """A constant ADD operand (LiteRT's read-only model memory) is uploaded at the first
    invoke only; later invokes make no buffer at all, and every result equals LiteRT's."""
    for dt, s1, s2 in CONST_CASES:
        for which in (1, 2):
            cval = values(dt, s1 if which == 1 else s2, 11)
            kw = {f"const{which}": cval}
            m = add_model(dt, s1, s2, activation="RELU", quant=QUANT.get(dt), **kw)
            d = _delegate(device, copies)
            it = litecl.Interpreter(model_content=m, delegate=d)
            assert [p["placement"] for p in it.placement()] == ["opencl"]
            it.allocate_tensors()
            assert [ln.folded for ln in launches(it)] == [False]
            (inp,) = it.get_input_details()
            for k, seed in enumerate((12, 13, 14)):
                x = values(dt, s2 if which == 1 else s1, seed)
                it.set_tensor(inp["index"], x)
                it.invoke()
                got = it.get_tensor(it.get_output_details()[0]["index"])
                assert_same(got, litert(m, [x]), f"{dt} const{which} {s1}+{s2}")
                made = _runtime_counts(d)
                assert made["uploads"] == 1, (k, made)  # the constant, at the first invoke
                if k == 0:
                    first = made["buffers"]
            assert made["buffers"] == first, made  # nothing new after the first invoke
            assert d.stats["partition_invokes"] == 3


@pytest.mark.parametrize("copies", [False, True], ids=["in_place", "copies"])
@pytest.mark.parametrize("device", device_params(REAL_DEVICES, [""]))
def test_all_constant_add_computed_once(device, copies, monkeypatch):
    """An ADD of two constants is one launch at the first invoke ("constant inputs:
    computed once"); every invoke writes its value to LiteRT's output, equal to LiteRT's."""
    import pyopencl as cl  # noqa: PLC0415

    import litecl.delegate as delegate_mod  # noqa: PLC0415

    for dt, s1, s2 in CONST_CASES:
        c1, c2 = values(dt, s1, 21), values(dt, s2, 22)
        m = add_model(dt, s1, s2, activation="RELU6", quant=QUANT.get(dt), const1=c1, const2=c2)
        d = _delegate(device, copies)
        it = litecl.Interpreter(model_content=m, delegate=d)
        assert it.get_input_details() == []
        it.allocate_tensors()
        ran = assert_folded_and_count_launches(it, monkeypatch)
        want = litert(m, [])
        for _ in range(3):
            it.invoke()
            got = it.get_tensor(it.get_output_details()[0]["index"])
            assert_same(got, want, f"{dt} const+const {s1}+{s2}")
        assert len(ran) == 1 and d.stats["partition_invokes"] == 3
        monkeypatch.undo()


# ------------------------------------------------------------------------------------------
# Real models: every ADD on OpenCL, every ADD output equal to LiteRT's
# ------------------------------------------------------------------------------------------

REAL = [
    "movenet_singlepose_lightning_int8.tflite", "coral_mobilenet_v2_1_0_224_quant.tflite",
    "single_add_default_a8w8_recipe_quantized.tflite",
    "single_add_default_a16w8_recipe_quantized.tflite", "add_1d_2d_3d_4d.tflite",
    "topo_sort_fork.tflite", "topo_sort_interleaved.tflite", "tflm_add_model.tflite",
    "tflm_add_model_float.tflite", "simple_quantized_ops.tflite", "island_partial.tflite",
    "constant_output_tensor.tflite", "mixed_input_model.tflite", "rope.tflite",
    "simple_add_dynamic_shape.tflite",
]


def _full_range_inputs(details, seed):
    """random_inputs, but wider integers over their full range too (ADD operands)."""
    out = random_inputs(details, seed)
    rng = np.random.default_rng(seed + 100)
    for d in details:
        dt = np.dtype(d["dtype"])
        if dt.kind in "iu" and dt.itemsize > 1:
            info = np.iinfo(dt)
            out[d["name"]] = rng.integers(info.min, info.max, tuple(d["shape"]), dtype=dt,
                                          endpoint=True)
    return out


#: (model, reference) -> ADD elements allowed to differ by one: LiteRT's optimized int16
#: ADD (SIMD blocks of 16: one rounding where the reference kernel rounds twice) departs
#: from its reference kernel, which litecl follows, on 1 of the 102400 full-range elements.
BUILTIN_DEPARTS = {("simple_quantized_ops.tflite", "builtin"): 8}


@pytest.mark.parametrize("reference", ["builtin", "ref"])
@pytest.mark.parametrize("name", REAL)
def test_real_model_adds_equal_litert(shared_models, fast_device, name, reference):
    """Every ADD on OpenCL; every ADD's output tensor (kept with
    experimental_preserve_all_tensors) and every model output bit-equal to LiteRT run
    with the op resolver the litecl.Interpreter gives the nodes litecl leaves; quantized
    ADDs under reference="ref" also equal the reference formula on the operands LiteRT
    computed."""
    check_real_model_adds(name, fast_device, reference)


def check_real_model_adds(name: str, device: str, reference: str):
    """test_real_model_adds_equal_litert's checks for one model on one device spec
    (tests/test_noint64.py runs them under the noint64 profile). Returns the litecl
    Interpreter."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    path = shared_model(name)
    it = litecl.Interpreter(model_path=path, device=device, reference=reference,
                            experimental_preserve_all_tensors=True)  # ADD outputs read in place
    adds = [p for p in it.placement() if p["op"] == "ADD"]
    assert adds and all(p["placement"] == "opencl" for p in adds), adds
    it.allocate_tensors()
    inputs = _full_range_inputs(it.get_input_details(), 0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], inputs[d["name"]])
    it.invoke()
    kind = {"builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            "ref": OpResolverType.BUILTIN_REF}[reference]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = Interpreter(model_path=str(path), experimental_op_resolver_type=kind,
                          experimental_preserve_all_tensors=True)
    ref.allocate_tensors()
    for d in ref.get_input_details():
        ref.set_tensor(d["index"], inputs[d["name"]])
    ref.invoke()
    sg = it._model.subgraphs[0]
    allowed = BUILTIN_DEPARTS.get((name, reference), 0)

    def check(got, want, what):
        if not allowed:
            return assert_same(got, want, what)
        bad = mismatches(got, want)
        diff = np.abs(got[bad].astype(np.int64) - want[bad].astype(np.int64))
        assert bad.sum() <= allowed and (diff <= 1).all(), (what, int(bad.sum()), diff.max())

    for n in sg.nodes:
        if n.op != "ADD":
            continue
        t = n.outputs[0]
        got = it.get_tensor(t)
        check(got, ref.get_tensor(t), f"{name} ADD node {n.index}")
        tensors = [sg.tensors[i] for i in (*n.inputs, t)]
        if tensors[2].dtype.name in QUANT and reference == "ref":  # the reference kernel's formula
            q = [(float(x.scales[0]), int(x.zero_points[0])) for x in tensors]
            p = quant_add_params(tensors[2].dtype.name, *q, n.activation,
                                 pot_scale_int16=bool(getattr(n.options, "potScaleInt16", True)))
            operands = [ref.get_tensor(i) for i in n.inputs]
            assert_same(got, quant_add_reference(*operands, p), f"{name} ADD {n.index} in place")
    for d in ref.get_output_details():
        check(it.get_tensor(d["index"]), ref.get_tensor(d["index"]), f"{name} output")
    return it


@pytest.mark.parametrize("sig", ["encode", "decode"])
def test_lyra_signature_adds(shared_models, fast_device, sig):
    """Lyra's quantizer: 91 float ADDs over two subgraphs, reached by signature runners."""
    it = litecl.Interpreter(model_path=shared_model("lyra_quantizer.tflite"), device=fast_device)
    adds = [p for p in it.placement() if p["op"] == "ADD"]
    assert len(adds) == 91 and all(p["placement"] == "opencl" for p in adds)
    r = it.get_signature_runner(sig)
    details = [dict(d, name=k) for k, d in r.get_input_details().items()]
    for seed in (0, 1):
        inputs = random_inputs(details, seed)  # int32 inputs index tables: keep them small
        got = r(**inputs)
        want = run_reference(it._model.raw, inputs, sig)
        assert set(got) == set(want)
        for k in want:
            assert_same(got[k], want[k], f"lyra {sig} {k}")


def test_dynamic_batch_quantized_add(shared_models, fast_device):
    """single_add a8w8/a16w8 have shape_signature [-1, 32, 32]: they run on OpenCL at the
    model's batch and after resizing it."""
    for name in ("single_add_default_a8w8_recipe_quantized.tflite",
                 "single_add_default_a16w8_recipe_quantized.tflite"):
        path = shared_model(name)
        it = litecl.Interpreter(model_path=path, device=fast_device)
        assert [p["placement"] for p in it.placement()] == ["opencl"]
        for batch in (1, 3):
            for d in it.get_input_details():
                it.resize_tensor_input(d["index"], [batch, 32, 32], strict=True)
            it.allocate_tensors()
            details = it.get_input_details()
            inputs = _full_range_inputs(details, batch)
            for d in details:
                it.set_tensor(d["index"], inputs[d["name"]])
            it.invoke()
            (o,) = it.get_output_details()
            want = run_reference(it._model.raw, inputs)
            assert_same(it.get_tensor(o["index"]), want[o["name"]], f"{name} batch {batch}")


#: shapes whose innermost (collapsed) dimension is broadcast in one operand, in both or in
#: neither, with runs that leave 0..3 elements after LiteRT's 4-wide SIMD body
NAN_SHAPES = [([n], [n]) for n in (1, 2, 3, 4, 5, 7, 8, 9, 17, 31, 33, 1999)] + [
    ([7], [1]), ([7], []), ([1], [7]), ([], [7]), ([4, 7], [4, 1]), ([4, 1], [4, 7]),
    ([4, 7], [1, 7]), ([1, 7], [4, 7]), ([3, 1, 5], [1, 4, 1]), ([2, 3, 9], [2, 3, 1]),
    ([2, 1, 9], [2, 3, 9]), ([1, 1], [1, 1]), ([5, 1], [1, 1]), ([3, 1, 6], [1, 5, 6]),
    ([1, 5, 6], [3, 1, 6]), ([3, 1, 2], [1, 5, 2]), ([2, 3, 5], [2, 1, 5]), ([5, 3], [1, 3]),
    ([2, 4, 1, 5], [2, 1, 3, 5]), ([4, 9], [4, 9]), ([2, 3, 9], [2, 1, 9]), ([3, 1, 17], [1, 2, 17])]


@pytest.mark.parametrize("reference", ["builtin", "ref"])
@pytest.mark.parametrize("device", FAST + device_params(["oclgrind"]))
def test_nan_signs_of_two_nan_operands_match_litert(device, reference):
    """Which NaN an ADD of two NaNs returns is position-dependent in LiteRT (its SIMD body
    returns the second operand's, its scalar remainder the first's, a broadcast operand
    loses): litecl reproduces it, and inf + -inf's negative default NaN, on every device."""
    rng = np.random.default_rng(1)
    shapes = NAN_SHAPES if "oclgrind" not in device else NAN_SHAPES[::4]
    for s1, s2 in shapes:
        m = model("float32", tuple(s1), tuple(s2), "RELU6" if len(s1) == 2 else "NONE")
        for a, b in ((np.full(s1, -np.nan, np.float32), np.full(s2, np.nan, np.float32)),
                     (np.full(s1, np.nan, np.float32), np.full(s2, -np.nan, np.float32)),
                     (np.where(rng.random(s1) < 0.5, -np.nan, np.inf).astype(np.float32),
                      np.where(rng.random(s2) < 0.5, np.nan, -np.inf).astype(np.float32))):
            got, _ = litecl_run(m, [a, b], device, reference)
            assert_same(got, litert(m, [a, b], reference), f"NaN signs {s1}+{s2} {reference}", [a, b])


def _random_shape_pairs(seed: int, count: int, max_rank: int, dims=(1, 2, 3, 4, 5, 7, 9)):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        r = int(rng.integers(1, max_rank + 1))
        o = [int(rng.choice(dims)) for _ in range(r)]
        s1 = [d if rng.random() < 0.6 else 1 for d in o]
        s2 = [d if rng.random() < 0.6 else 1 for d in o]
        s1 = s1[int(rng.integers(0, r)):] if rng.random() < 0.3 else s1
        s2 = s2[int(rng.integers(0, r)):] if rng.random() < 0.3 else s2
        if int(np.prod(np.broadcast_shapes(tuple(s1), tuple(s2)))) <= 3000:
            out.append((tuple(s1), tuple(s2)))
    return out


def _litert_nan_choice(s1, s2, reference):
    """'a'/'b' per output element: whose NaN LiteRT returns when both operands are NaN."""
    m = model("float32", s1, s2, "NONE")
    got = litert(m, [np.full(s1, -np.nan, np.float32), np.full(s2, np.nan, np.float32)], reference)
    return np.where(np.signbit(got).ravel(), "a", "b")


def _rule_choice(s1, s2, reference):
    from litecl.ops.add import nan_rule

    rule = nan_rule(s1, s2, reference)
    n = int(np.prod(np.broadcast_shapes(s1, s2)))
    if rule in ("a", "b"):
        return np.full(n, rule)
    _, run, x, block = rule
    i = np.arange(n) % run
    return np.where(i < run - run % block, "b" if x == "a" else "a", x)


@pytest.mark.parametrize("reference,min_rank,max_rank", [("builtin", 1, 4), ("builtin", 5, 6), ("ref", 1, 6),
                                                          ("builtin", 7, 8), ("ref", 7, 8)])
def test_nan_rule_predicts_litert(reference, min_rank, max_rank):
    """ops/add.py nan_rule against LiteRT itself on random shape pairs (no device); 5-D
    to 8-D: LiteRT's generic path, reference_ops' loop in both resolvers (at 5-D and 6-D
    the rule read the innermost dimension alone: wrong on 14 of 300 pairs, a fresh user's
    [3, 5, 4, 8, 1, 2] + [1, 5, 1, 8, 1, 2] gave 504 of 960 NaNs of the other sign)."""
    pairs = [p for p in _random_shape_pairs(3, 300 if min_rank == 1 else 1500, max_rank)
             if max(len(p[0]), len(p[1])) >= min_rank][:300]
    bad = [(s1, s2) for s1, s2 in pairs
           if (_litert_nan_choice(s1, s2, reference) != _rule_choice(s1, s2, reference)).any()]
    assert not bad, bad[:5]


def test_nan_rule_predicts_litert_at_4d_broadcasts_outside_the_fivefold_loop():
    """4-D broadcasts LiteRT's fivefold loop does not fit ([2, 3, 4, 9] + [1, 3, 1, 9]:
    the operand broadcast twice, around a shared dimension) with innermost runs of 8, 9, 12
    and 17: reference_ops' loop vectorised 8 wide (nan_rule said "a" everywhere: a fresh
    user's 192 of 192 NaNs of the other sign on x86-64)."""
    from litecl.ops.broadcast import fivefold

    pairs = [(s1, s2) for s1, s2 in _random_shape_pairs(11, 3000, 4, (1, 2, 3, 8, 9, 12, 17))
             if len(s1) == len(s2) == 4 and np.broadcast_shapes(s1, s2) not in (s1, s2)
             and fivefold(s1, s2) is None][:40]
    pairs += [((2, 3, 4, 9), (1, 3, 1, 9)), ((1, 3, 1, 12), (2, 1, 4, 12)), ((2, 3, 4, 8), (1, 3, 1, 8))]
    bad = [(s1, s2) for s1, s2 in pairs
           if (_litert_nan_choice(s1, s2, "builtin") != _rule_choice(s1, s2, "builtin")).any()]
    assert len(pairs) >= 10 and not bad, (len(pairs), bad[:5])


@pytest.mark.parametrize("reference", ["builtin", "ref"])
def test_nan_signs_random_broadcasts_on_device(fast_device, reference):
    """The generated kernels follow nan_rule: random shape pairs up to 4-D (and the shapes
    a trial or a fresh user found wrong at first, 5-D and 6-D among them), both operands
    NaN with opposite signs."""
    pairs = _random_shape_pairs(5, 40, 4) + [
        ((1,), (3, 1)), ((1, 1), (2, 3, 1)), ((9, 1, 1, 1), (1, 8, 1, 1)), ((2, 2, 2, 2), (1, 2, 1, 2)),
        ((2, 2, 2, 2), (2, 1, 2)), ((4, 1, 4), (3, 4, 4, 4)), ((3, 2, 2, 3), (2, 1, 3)),
        ((2, 3, 4, 9), (1, 3, 1, 9)), ((1, 3, 1, 12), (2, 1, 4, 12)), ((2, 3, 4, 8), (1, 3, 1, 8)),
        ((3, 5, 4, 8, 1, 2), (1, 5, 1, 8, 1, 2)), ((5, 1, 9, 1), (2, 1, 5, 9, 1)), ((4, 3, 5, 5, 4), (3, 1, 5, 4)),
        ((5, 9, 2, 1, 2, 9), (1, 9, 1, 1, 2, 9))]
    for s1, s2 in pairs:
        m = model("float32", s1, s2, "NONE")
        a, b = np.full(s1, -np.nan, np.float32), np.full(s2, np.nan, np.float32)
        got, _ = litecl_run(m, [a, b], fast_device, reference)
        assert_same(got, litert(m, [a, b], reference), f"NaN signs {s1}+{s2} {reference}", [a, b])


#: broadcasts whose innermost collapsed dimension holds a vector or more (fusion._row_width:
#: rows read as vectors, one vector across two rows lane by lane), rows of 8 .. 81
ROW_PAIRS = [((3, 37), (37,)), ((3, 37), (3, 1)), ((5, 1, 19), (5, 7, 19)), ((2, 9, 33), (9, 1)),
             ((1, 16, 8, 32), (32,)), ((4, 3, 45), (4, 1, 45)), ((7, 80), (1, 80)), ((2, 81), (2, 1)),
             ((31,), (3, 1, 31)), ((1, 757), (2, 1, 1))]


@pytest.mark.parametrize("dt", ["float32", "int32", "int64", "int8", "uint8", "int16"])
def test_row_broadcasts_bit_exact(fast_device, dt):
    """Broadcast ADDs read as rows of vectors: bit-exact with LiteRT on every type, edge
    values (NaN of both signs, infinities, -0.0, subnormals, wrapping integers) at random
    positions, float32 under RELU and both NaNs at once too (whose NaN follows LiteRT's
    walk: nan_rule)."""
    acts = ["NONE", "RELU"] if dt == "float32" else ["NONE"]
    for k, (s1, s2) in enumerate(ROW_PAIRS):
        for act in acts:
            m = model(dt, s1, s2, act)
            ins = [values(dt, s1, 2 * k), values(dt, s2, 2 * k + 1)]
            got, _ = litecl_run(m, ins, fast_device)
            assert_same(got, litert(m, ins), f"{dt} {s1}+{s2} {act}", ins)
        if dt == "float32":
            m = model(dt, s1, s2, "NONE")
            a, b = np.full(s1, -np.nan, np.float32), np.full(s2, np.nan, np.float32)
            got, _ = litecl_run(m, [a, b], fast_device)
            assert_same(got, litert(m, [a, b]), f"NaN signs {s1}+{s2}", [a, b])


# ------------------------------------------------------------------------------------------
# float16 ADD (semantics measured on LiteRT 2.3.0: ops/add.py's module docstring)
# ------------------------------------------------------------------------------------------

F16 = np.float16
_F16_EDGES = [0.0, -0.0, 1.0, -1.0, 65504.0, -65504.0, np.inf, -np.inf, np.nan, -np.nan,
              5.96e-8, -5.96e-8, 6.1e-5, 1e-5, 6.0, 6.004, 5.996, 7.0, -7.0, 0.5, 2049.0,
              65519.0, 1e-4, -1e-4, 0.9995, 1.001, -1.001]

#: (shape1, shape2): tails 1, 31, 33, 757, 1999, scalars, broadcasts both ways, and the
#: 7-D and 8-D broadcasts of LiteRT's generic path
F16_SHAPES = [([1], [1]), ([31], [31]), ([33], [33]), ([757], [757]), ([1999], [1999]),
              ([], [757]), ([33], []), ([3, 27], [27]), ([757], [2, 1]), ([31, 1], [1, 33]),
              ([2, 1, 3, 1, 5], [1, 4, 3, 7, 1]), ([2, 1, 1, 1, 1, 1, 3], [1, 2, 1, 1, 1, 1, 3]),
              ([2, 1, 2, 1, 2, 1, 2, 3], [1, 2, 1, 2, 1, 2, 1, 1])]


def half_values(shape, seed: int) -> np.ndarray:
    """Random half bit patterns (NaN payloads of both signs, subnormals, infinities among
    them) with every _F16_EDGES value at random positions."""
    shape = tuple(shape)
    n = _numel(shape)
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 1 << 16, n, dtype=np.uint16).view(F16).copy()
    k = min(n, len(_F16_EDGES))
    out[rng.choice(n, k, replace=False)] = rng.permutation(np.array(_F16_EDGES, F16))[:k]
    return out.reshape(shape)


F16_DEVICES = FAST + device_params(["intel"], ["mobile-fp16"])


def _check_half_adds(device, shapes, acts=ACTIVATIONS) -> None:
    for k, (s1, s2) in enumerate(shapes):
        for act in acts:
            m = model("float16", tuple(s1), tuple(s2), act)
            for ins in ([half_values(s1, 3 * k), half_values(s2, 3 * k + 1)],
                        [np.full(s1, -np.nan, F16), np.full(s2, np.nan, F16)],
                        [np.full(s1, np.nan, F16), np.full(s2, -np.nan, F16)]):
                got, _ = litecl_run(m, ins, device)
                assert_same(got, litert(m, ins), f"float16 {s1}+{s2} {act} on {device}", ins)


@pytest.mark.parametrize("device", F16_DEVICES)
def test_float16_add_matrix(device):
    """float16 ADD on OpenCL (native half with cl_khr_fp16: Intel, intel:mobile-fp16;
    through float elsewhere) bit for bit with LiteRT: random bit patterns plus edge
    values, both-NaN operands of either sign order, every activation, tails and
    broadcasts up to 8-D."""
    _check_half_adds(device, F16_SHAPES)


#: (a, b, {activation: expected half}) measured in LiteRT 2.3.0 (builtin and ref alike)
F16_PAIRS = [
    (65504.0, 65504.0, {"NONE": 65504.0, "RELU": 65504.0, "RELU6": 6.0, "RELU_N1_TO_1": 1.0}),
    (np.inf, 1.0, {"NONE": 65504.0, "RELU": 65504.0}),
    (-np.inf, -1.0, {"NONE": -65504.0, "RELU": 0.0, "RELU_N1_TO_1": -1.0}),
    (np.inf, -np.inf, {a: -F16(np.nan) for a in ACTIVATIONS}),
    (-np.nan, 0.0, {a: -F16(np.nan) for a in ACTIVATIONS}),
    (0.0, np.nan, {a: F16(np.nan) for a in ACTIVATIONS}),
    (-0.0, -0.0, {a: -0.0 for a in ACTIVATIONS}),
    (5.96e-8, 5.96e-8, {"NONE": np.uint16(2).view(F16), "RELU": np.uint16(2).view(F16)}),
    (-5.96e-8, 0.0, {"NONE": np.uint16(0x8001).view(F16), "RELU": 0.0}),
    (2048.0, 1.0, {"NONE": 2048.0}),   # 2049 rounds to even
    (1000.0, 0.4, {"NONE": 1000.5}),
]


@pytest.mark.parametrize("device", F16_DEVICES)
def test_float16_add_documented_values(device):
    a = np.array([p[0] for p in F16_PAIRS], F16)
    b = np.array([p[1] for p in F16_PAIRS], F16)
    for act in ACTIVATIONS:
        m = model("float16", (a.size,), (a.size,), act)
        got, _ = litecl_run(m, [a, b], device)
        assert_same(got, litert(m, [a, b]), f"float16 edges {act} on {device}", [a, b])
        for k, (x, y, expect) in enumerate(F16_PAIRS):
            if act in expect:
                assert bit_equal(got[k:k + 1], np.array([expect[act]], F16)), (x, y, act, got[k], expect[act])


def test_float_add_rules_predict_litert_on_this_host():
    """ops/add.py's FloatAddRules row of this machine's architecture (the one LiteRT runs
    on here) against LiteRT itself (tests/arch_checks.py ``rules``, which also runs in the
    arm64 userland, tests/test_arm64.py): two NaNs on random shape pairs of rank 1..8 and
    same-shape tails past every SIMD block, -0.0 under RELU/RELU6, the default NaN of
    inf + -inf; float32 and float16, builtin and ref kernels (no device)."""
    from arch_checks import check_rules

    got = check_rules()
    assert got["checked"] > 1500 and got["n_bad"] == 0, got


def test_float_add_rules_are_one_row_per_architecture():
    """The rules differ by architecture only through FLOAT_ADD_RULES' rows (the generator
    takes the row): the same ADD's kernel text for x86_64 and aarch64 differs in the
    default NaN, the NaN choice and the signed zero; an unknown architecture is refused."""
    from dataclasses import replace

    from litecl.ops.add import FLOAT_ADD_RULES, add_kernel, arch_of

    caps = litecl.open_device(any_fast_device()).caps
    x86, arm = (add_kernel("float32", [17], [17], "RELU", replace(caps, arch=a)) for a in ("x86_64", "aarch64"))
    assert "0xffc00000u" in x86 and "0x7fc00000u" in arm and "0xffc00000u" not in arm
    assert "c == 0.0f" in arm and "c == 0.0f" not in x86  # -0.0 -> +0.0 in the SIMD body (zero_rule)
    assert sorted(FLOAT_ADD_RULES) == ["aarch64", "x86_64"] and arch_of("arm64") == "aarch64"
    with pytest.raises(ValueError, match="riscv64"):
        arch_of("riscv64")


def test_half_nan_rule_predicts_litert():
    """ops/add.py half_nan_rule against LiteRT on random shape pairs up to 8-D (no device)."""
    from litecl.ops.add import half_nan_rule

    bad = []
    for reference in ("builtin", "ref"):
        for s1, s2 in _random_shape_pairs(7, 200, 8):
            m = model("float16", s1, s2, "NONE")
            got = litert(m, [np.full(s1, -np.nan, F16), np.full(s2, np.nan, F16)], reference)
            want = half_nan_rule(s1, s2)
            if (np.signbit(got) != (want == "a")).any():
                bad.append((reference, s1, s2, want))
    assert not bad, bad[:5]


@pytest.mark.parametrize("device", device_params(["oclgrind"], ["", "mobile"]))
def test_float16_add_under_oclgrind(device, capfd):
    _check_half_adds(device, [([1], [1]), ([33], [33]), ([757], [1]), ([31, 1], [1, 33]),
                              ([2, 1, 2, 1, 2, 1, 2, 3], [1, 2, 1, 2, 1, 2, 1, 1])], ("NONE", "RELU6"))
    err = capfd.readouterr().err
    assert "Invalid read" not in err and "Invalid write" not in err, err[-2000:]


@pytest.mark.parametrize("spec", device_params(["intel", "pocl"], ["mobile"]))
def test_float16_add_gpu_row_on_a_cpu_device(spec):
    """The GPU LAUNCH row's float16 ADD code (integer half stores, NaN-sign-keeping half
    loads, 512-wide work-groups) on a CPU device that says it is a GPU, so what the H200
    runs is checked here too."""
    from dataclasses import replace

    d = litecl.open_device(spec)
    gpu = litecl.Device(d.device, d.context, d.queue, replace(d.caps, is_gpu=True))
    from litecl.ops.add import add_kernel

    src = add_kernel("float16", [1999], [1999], "NONE", gpu.caps)
    assert "litecl_f2h_v" in src, src
    _check_half_adds(gpu, [([1999], [1999]), ([33], []), ([757], [2, 1]),
                           ([2, 1, 1, 1, 1, 1, 3], [1, 2, 1, 1, 1, 1, 3])], ("NONE", "RELU"))


# ------------------------------------------------------------------------------------------
# 7-D and 8-D broadcasts (LiteRT's generic path); above 8 only same shapes
# ------------------------------------------------------------------------------------------

HIGH_SHAPES = [([2, 1, 1, 1, 1, 1, 3], [1, 2, 1, 1, 1, 1, 3]), ([3, 1, 2, 1, 1, 1, 1, 5], [1, 1, 1, 1, 1, 1, 2, 1]),
               ([1, 3, 1, 1, 7, 1, 3], [2, 1, 5, 4, 7, 1, 3]), ([2, 1, 2, 1, 2, 1, 2, 3], [3]),
               ([1, 2, 1, 1, 4], [1, 2, 4, 1, 2, 3, 3, 4]), ([2, 3, 1, 1, 1, 1, 1, 1, 5], [2, 3, 1, 1, 1, 1, 1, 1, 5])]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("device", FAST)
def test_rank_7_and_8_broadcasts(device, dt):
    refs = ("ref", "builtin") if dt in QUANT else ("builtin", "ref")
    for k, (s1, s2) in enumerate(HIGH_SHAPES):
        for act in ("NONE", "RELU6"):
            for ref in refs:
                m, ins, want = _case(dt, tuple(s1), tuple(s2), act, 100 + k, ref)
                got, _ = litecl_run(m, ins, device, ref)
                assert_same(got, want, f"{dt} {s1}+{s2} {act} on {device} vs {ref}", ins)
                if dt == "float32":  # both NaN: nan_rule at 7-D and 8-D
                    ab = [np.full(s1, -np.nan, np.float32), np.full(s2, np.nan, np.float32)]
                    got, _ = litecl_run(m, ab, device, ref)
                    assert_same(got, litert(m, ab, ref), f"NaN {s1}+{s2} vs {ref}", ab)


@pytest.mark.parametrize("device", device_params(["oclgrind"]))
def test_rank_8_broadcast_under_oclgrind(device, capfd):
    for dt in ("float32", "int64"):
        s1, s2 = HIGH_SHAPES[1]
        m, ins, want = _case(dt, tuple(s1), tuple(s2), "NONE", 7, "builtin")
        got, _ = litecl_run(m, ins, device)
        assert_same(got, want, f"{dt} {s1}+{s2} on {device}", ins)
    err = capfd.readouterr().err
    assert "Invalid read" not in err and "Invalid write" not in err, err[-2000:]


def test_rank_9_broadcast_still_refused(fast_device):
    m = model("int32", (2, 1, 1, 1, 1, 1, 1, 1, 5), (1, 1, 1, 1, 1, 1, 1, 3, 1), "NONE")
    _assert_left_to_litert(m, fast_device, "above 8 dimensions")


def test_errors_are_runtime_errors_where_litert_raises_one(fast_device):
    """LiteRT raises RuntimeError at allocate_tensors for ADD shapes that do not broadcast
    and at invoke() before allocate_tensors(): so does litecl.Interpreter (LiteRT's own
    API), and where the error comes from litecl's delegate (its kernel's prepare) it is
    litecl's own class (a ValueError), still a RuntimeError, saying why."""
    m = model("float32", (3,), (3,), "NONE")
    for make in (lambda: make_interpreter(m), lambda: litecl.Interpreter(model_content=m, device=fast_device),
                 lambda: make_interpreter(m, delegates=[litecl.Delegate(fast_device, quiet=True)])):
        it = make()
        it.resize_tensor_input(0, [4])
        with pytest.raises(RuntimeError, match="broadcast"):
            it.allocate_tensors()
        with pytest.raises(RuntimeError, match="not ready"):
            make().invoke()
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    assert_on_opencl(it)
    it.resize_tensor_input(0, [4])
    with pytest.raises(litecl.LiteclError, match=r"\[4\] and \[3\] do not broadcast") as e:
        it.allocate_tensors()
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ValueError)
    assert isinstance(e.value, litecl.ResizedPrepareError), type(e.value)  # the resize's fault
    assert issubclass(litecl.PrepareError, litecl.ModelError) and issubclass(litecl.PrepareError, RuntimeError)
    # a model whose own shapes do not broadcast: the delegate leaves the ADD to LiteRT,
    # which raises its own RuntimeError at allocate_tensors, as without litecl
    mdl = schema.ModelT.InitFromPackedBuf(add_model("float32", [3], [3]), 0)
    mdl.subgraphs[0].tensors[0].shape = [4]
    b = flatbuffers.Builder(1024)
    b.Finish(mdl.Pack(b), file_identifier=b"TFL3")
    lit = litecl.Interpreter(model_content=bytes(b.Output()), device=fast_device, quiet=True)
    (p,) = lit.placement()
    assert p["placement"] == "litert" and p["reason"] == "shapes [4] and [3] do not broadcast", p
    for it in (lit, make_interpreter(bytes(b.Output()))):
        with pytest.raises(RuntimeError, match="not broadcastable"):
            it.allocate_tensors()


@pytest.mark.parametrize("device", F16_DEVICES)
def test_float16_add_in_fused_chains(device):
    """float16 ADDs fused with CASTs (f32 -> f16 -> ADD -> ADD -> f32, a scalar and a
    same-shape constant), the sums rounded to half between the nodes, against LiteRT."""
    from models.builders import chain_model

    for k, (c1, act) in enumerate(((np.float16(-0.0), "NONE"), (np.float16(65504), "RELU"),
                                   (np.float16(np.nan), "RELU6"), (np.float16(1e-7), "RELU_N1_TO_1"))):
        for n in (33, 1999):
            c2 = half_values((n,), k)
            m = chain_model(["float32", "float16", ("add", c1, act), ("add", c2, "NONE"), "float32"], [n])
            with np.errstate(invalid="ignore", over="ignore"):
                x = half_values((n,), 10 + k).astype(np.float32) * np.float32(1.0001)
            got, it = litecl_run(m, [x], device)
            assert any(len(ln.nodes) > 1 for ln in launches(it)), "not fused"
            assert_same(got, litert(m, [x]), f"fused float16 chain {act} n={n} on {device}", [x])


# ------------------------------------------------------------------------------------------
# TFLite's own ADD cases (tensorflow/lite/kernels/add_test.cc): its operands and expected
# values, run through the delegate; each result also bit-equal to LiteRT's
# ------------------------------------------------------------------------------------------

_TFL_A6, _TFL_B6 = [-2.0, 0.2, 0.7, 0.8, 1.1, 2.0], [0.1, 0.2, 0.3, 0.5, 1.1, 0.1]
_TFL_MIXED_A = [-0.3, 2.3, 0.9, 0.5, 0.8, -1.1, 1.2, 2.8, -1.6, 0.0, 0.7, -2.2]  # [2, 3, 1, 2]
_TFL_MIXED_B = [0.2, 0.3, -0.4, 0.5, 1.0, 0.9]
_TFL_MIXED = {  # MixedBroadcast: the second operand's shape -> expected sum
    (1, 1, 3, 2): [-0.1, 2.6, -0.7, 2.8, 0.7, 3.2, 1.1, 0.8, 0.5, 1.0, 1.9, 1.4, 1.0, -0.8, 0.4,
                   -0.6, 1.8, -0.2, 1.4, 3.1, 0.8, 3.3, 2.2, 3.7, -1.4, 0.3, -2.0, 0.5, -0.6, 0.9,
                   0.9, -1.9, 0.3, -1.7, 1.7, -1.3],
    (1, 3, 1, 2): [-0.1, 2.6, 0.5, 1.0, 1.8, -0.2, 1.4, 3.1, -2.0, 0.5, 1.7, -1.3],
    (2, 1, 3, 1): [-0.1, 2.5, 0.0, 2.6, -0.7, 1.9, 1.1, 0.7, 1.2, 0.8, 0.5, 0.1, 1.0, -0.9, 1.1,
                   -0.8, 0.4, -1.5, 1.7, 3.3, 2.2, 3.8, 2.1, 3.7, -1.1, 0.5, -0.6, 1.0, -0.7, 0.9,
                   1.2, -1.7, 1.7, -1.2, 1.6, -1.3],
    (2, 3, 1, 1): [-0.1, 2.5, 1.2, 0.8, 0.4, -1.5, 1.7, 3.3, -0.6, 1.0, 1.6, -1.3],
}
_TFL_SHAPES = [(6,), (2, 3), (2, 1, 3), (1, 3, 1, 2)]


def _tflite_case(m: bytes, ins, device: str, refs=("builtin",)) -> np.ndarray:
    """litecl's output for ``ins`` (ADD on OpenCL, run there), asserted bit-equal to
    LiteRT's under each reference in ``refs``."""
    got, _ = litecl_run(m, ins, device, refs[0])
    for ref in refs:
        assert_same(got, litert(m, ins, ref), f"TFLite case vs {ref}", ins)
    return got


@pytest.mark.parametrize("device", FAST)
def test_tflite_float_add_cases(device):
    """FloatAddOpModel: NoActivation, ActivationRELU_N1_TO_1, VariousInputShapes,
    WithBroadcast, WithBroadcastGeneric, MixedBroadcast (both operand orders)."""
    f32 = lambda v: np.array(v, np.float32)  # noqa: E731
    a, b = f32([-2.0, 0.2, 0.7, 0.8]), f32([0.1, 0.2, 0.3, 0.5])
    for act, want in (("NONE", [-1.9, 0.4, 1.0, 1.3]), ("RELU_N1_TO_1", [-1.0, 0.4, 1.0, 1.0])):
        got = _tflite_case(model("float32", (1, 2, 2, 1), (1, 2, 2, 1), act), [a.reshape(1, 2, 2, 1),
                           b.reshape(1, 2, 2, 1)], device)
        np.testing.assert_allclose(got.ravel(), want, rtol=1e-6)
    for s in _TFL_SHAPES:
        got = _tflite_case(model("float32", s, s, "NONE"), [f32(_TFL_A6).reshape(s), f32(_TFL_B6).reshape(s)], device)
        np.testing.assert_allclose(got.ravel(), [-1.9, 0.4, 1.0, 1.3, 2.2, 2.1], rtol=1e-6)
        got = _tflite_case(model("float32", s, (), "NONE"), [f32(_TFL_A6).reshape(s), f32(0.1)], device)
        np.testing.assert_allclose(got.ravel(), [-1.9, 0.3, 0.8, 0.9, 1.2, 2.1], rtol=1e-6)
    got = _tflite_case(model("float32", (1, 3, 1), (2, 1, 2), "NONE"),
                       [f32([0.1, 0.2, 0.3]).reshape(1, 3, 1), f32([0.1, 0.2, 0.3, 0.4]).reshape(2, 1, 2)], device)
    np.testing.assert_allclose(got.ravel(), [0.2, 0.3, 0.3, 0.4, 0.4, 0.5, 0.4, 0.5, 0.5, 0.6, 0.6, 0.7], atol=1e-6)
    base = f32(_TFL_MIXED_A).reshape(2, 3, 1, 2)
    for s, want in _TFL_MIXED.items():
        other = f32(_TFL_MIXED_B).reshape(s)
        for ins, shapes in (([base, other], ((2, 3, 1, 2), s)), ([other, base], (s, (2, 3, 1, 2)))):
            got = _tflite_case(model("float32", *shapes, "NONE"), ins, device)
            np.testing.assert_allclose(got.ravel(), want, atol=1e-4)


@pytest.mark.parametrize("dt", ["int16", "int32", "int64"])
@pytest.mark.parametrize("device", FAST)
def test_tflite_integer_add_cases(device, dt):
    """IntegerAddOpTest (int16 without quantization, int32, int64): NoActivation,
    ActivationRELU_N1_TO_1, VariousInputShapes, WithBroadcast, Int32MultiDimBroadcast."""
    def mdl(s1, s2, act="NONE"):
        if dt == "int16":  # TFLite's IntegerAddOpModel: an int16 ADD without quantization
            return _unquantized(model("int16", tuple(s1), tuple(s2), act, ((1.0, 0),) * 3))
        return model(dt, tuple(s1), tuple(s2), act)

    v = lambda x, s=None: np.array(x, dt).reshape(s if s is not None else (len(x),))  # noqa: E731
    a, b = v([-20, 2, 7, 8], (1, 2, 2, 1)), v([1, 2, 3, 5], (1, 2, 2, 1))
    for act, want in (("NONE", [-19, 4, 10, 13]), ("RELU_N1_TO_1", [-1, 1, 1, 1])):
        assert _tflite_case(mdl((1, 2, 2, 1), (1, 2, 2, 1), act), [a, b], device).ravel().tolist() == want
    for s in _TFL_SHAPES:
        x = v([-20, 2, 7, 8, 11, 20], s)
        got = _tflite_case(mdl(s, s), [x, v([1, 2, 3, 5, 11, 1], s)], device)
        assert got.ravel().tolist() == [-19, 4, 10, 13, 22, 21]
        got = _tflite_case(mdl(s, ()), [x, np.array(1, dt)], device)
        assert got.ravel().tolist() == [-19, 3, 8, 9, 12, 21]
    got = _tflite_case(mdl((1, 2), (2, 1)), [v([3, 5], (1, 2)), v([1, 4], (2, 1))], device)
    assert got.ravel().tolist() == [4, 6, 7, 9]


def _tflite_qparams(dt: str, lo: float, hi: float) -> tuple:
    """(scale, zero point) as TFLite's SingleOpModel derives them from [lo, hi] (int16:
    symmetric, zero point 0, as its QuantizedAddOpModel makes them)."""
    info = np.iinfo(dt)
    if dt == "int16":
        return (hi / info.max, 0)
    scale = (hi - lo) / (int(info.max) - int(info.min))
    zp = info.min - lo / scale
    zp = int(np.clip(np.sign(zp) * np.floor(abs(zp) + 0.5), info.min, info.max))  # std::round
    return (scale, zp)


def _tflite_quantize(x, dt: str, q: tuple) -> np.ndarray:
    """TFLite's QuantizeAndPopulate: round half away from zero, then clamp."""
    info = np.iinfo(dt)
    v = np.asarray(x, np.float64) / q[0]
    v = np.sign(v) * np.floor(np.abs(v) + 0.5) + q[1]
    return np.clip(v, info.min, info.max).astype(dt)


#: QuantizedAddOpModel's [-1, 1] cases: (activation, shape, inputs1, inputs2, results)
_TFL_QUANT = [
    ("NONE", (1, 2, 2, 1), [[0.1, 0.2, 0.3, 0.4], [-0.8, 0.2, 0.4, 0.7], [-0.8, 0.2, 0.7, 0.3]],
     [[0.6, 0.4, 0.3, 0.1], [0.6, 0.4, 0.5, -0.8], [0.6, 0.4, -0.8, 0.5]],
     [[0.7, 0.6, 0.6, 0.5], [-0.2, 0.6, 0.9, -0.1], [-0.2, 0.6, -0.1, 0.8]]),
    ("RELU_N1_TO_1", (1, 2, 2, 1), [[-0.8, 0.2, 0.9, 0.7], [-0.8, 0.2, 0.7, 0.3]],
     [[0.6, 0.4, 0.9, -0.8], [0.6, 0.4, -0.8, 0.5]], [[-0.2, 0.6, 1.0, -0.1], [-0.2, 0.6, -0.1, 0.8]]),
]
_TFL_QUANT16 = ("NONE", (1, 2, 3, 1),
                [[0.1, 0.2, 0.3, 0.4, 0.9, 0.7], [-0.8, 0.2, 0.4, 0.7, 0.1, 0.0], [-0.8, 0.2, 0.7, 0.3, 0.9, 0.1]],
                [[0.6, 0.4, 0.3, 0.1, -0.1, 0.3], [0.6, 0.4, 0.5, -0.8, 0.0, -1.0], [0.6, 0.4, -0.8, 0.5, -0.9, 0.1]],
                [[0.7, 0.6, 0.6, 0.5, 0.8, 1.0], [-0.2, 0.6, 0.9, -0.1, 0.1, -1.0], [-0.2, 0.6, -0.1, 0.8, 0.0, 0.2]])


@pytest.mark.parametrize("dt", ["int8", "uint8", "int16"])
@pytest.mark.parametrize("device", FAST)
def test_tflite_quantized_add_cases(device, dt):
    """QuantizedTestsNoActivation / ActivationRELU_N1_TO_1 (int16: its 6-element case):
    inputs quantized as TFLite's test quantizes them, the dequantized sum within TFLite's
    tolerance of its expected values, and bit-equal to LiteRT's reference and optimized
    kernels."""
    q = _tflite_qparams(dt, -1.0, 1.0)
    tol = 2.0 * 2.0 / (int(np.iinfo(dt).max) - int(np.iinfo(dt).min))
    cases = [_TFL_QUANT16] if dt == "int16" else _TFL_QUANT
    for act, shape, xs, ys, wants in cases:
        m = model(dt, shape, shape, act, (q, q, q))
        for x, y, want in zip(xs, ys, wants):
            ins = [_tflite_quantize(x, dt, q).reshape(shape), _tflite_quantize(y, dt, q).reshape(shape)]
            got = _tflite_case(m, ins, device, ("ref", "builtin"))
            deq = (got.astype(np.float64).ravel() - q[1]) * q[0]
            np.testing.assert_allclose(deq, want, atol=tol)


_TFL_DIMS = (2, 3, 4, 5, 6, 7)


def _tflite_multidim_cases(count: int | None, seed: int = 0):
    """MultiDimBroadcast's shape pairs: per operand a mask of 6-D dimensions broadcast (to
    1) of (2, 3, 4, 5, 6, 7), then its last 1..6 dimensions; ``count`` of the 64 x 64 x 36
    seeded at random (None: every mask pair, both ranks 6)."""
    def shape(mask, rank):
        full = [1 if mask >> i & 1 else d for i, d in enumerate(_TFL_DIMS)]
        return tuple(full[6 - rank:])

    if count is None:
        return [(shape(m1, 6), shape(m2, 6)) for m1 in range(64) for m2 in range(64)]
    rng = np.random.default_rng(seed)
    return [(shape(int(rng.integers(64)), int(rng.integers(1, 7))),
             shape(int(rng.integers(64)), int(rng.integers(1, 7)))) for _ in range(count)]


def _check_multidim(device, dt: str, pairs) -> None:
    rng = np.random.default_rng(7)
    for s1, s2 in pairs:
        if dt == "float32":  # TFLite: uniform [0.01, 1), the reference sum exact in float
            ins = [rng.uniform(0.01, 1.0, s).astype(np.float32) for s in (s1, s2)]
            got = _tflite_case(model(dt, s1, s2, "NONE"), ins, device)
            assert bit_equal(got, (ins[0] + ins[1]).astype(np.float32))
        elif dt in ("int16", "int32", "int64"):  # TFLite: uniform [0, 256]
            ins = [rng.integers(0, 257, s).astype(dt) for s in (s1, s2)]
            m = (_unquantized(model(dt, s1, s2, "NONE", ((1.0, 0),) * 3)) if dt == "int16"
                 else model(dt, s1, s2, "NONE"))
            got = _tflite_case(m, ins, device)
            assert bit_equal(got, (ins[0] + ins[1]).astype(dt))
        else:  # quantized: operands in [-0.5, 0.5], output [-1, 1], dequantized within 0.6
            qi, qo = _tflite_qparams(dt, -0.5, 0.5), _tflite_qparams(dt, -1.0, 1.0)
            xs = [rng.uniform(-0.5, 0.5, s) for s in (s1, s2)]
            ins = [_tflite_quantize(x, dt, qi) for x in xs]
            got = _tflite_case(model(dt, s1, s2, "NONE", (qi, qi, qo)), ins, device, ("ref", "builtin"))
            deq = (got.astype(np.float64) - qo[1]) * qo[0]
            assert np.abs(deq - np.clip(xs[0] + xs[1], -1, 1)).max() <= 0.6


@pytest.mark.parametrize("dt", ["float32", "int16", "int32", "int64", "int8", "uint8"])
def test_tflite_multidim_broadcast_sample(fast_device, dt):
    """Float32/Integer/Int8Quantized/Uint8QuantizedMultiDimBroadcast: 24 seeded shape
    pairs of its 147,456 (tests/test_add.py::test_tflite_multidim_broadcast_all: more)."""
    _check_multidim(fast_device, dt, _tflite_multidim_cases(24, seed=len(dt)))


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("LITECL_FULL_SWEEP"), reason="full sweep: set LITECL_FULL_SWEEP=1")
@pytest.mark.parametrize("dt", ["float32", "int32", "int8", "uint8"])
def test_tflite_multidim_broadcast_all(fast_device, dt):
    """Every broadcast-mask pair of MultiDimBroadcast at rank 6 (4096 models per type;
    minutes: behind LITECL_FULL_SWEEP, as tests/test_tiling_kernels.py's full sweep)."""
    _check_multidim(fast_device, dt, _tflite_multidim_cases(None))


@pytest.mark.parametrize("dt", ["float32", "int8"])
def test_many_lengths_of_one_add_share_its_programs(fast_device, dt):
    """A same-shape float32 or quantized ADD resized to many lengths (a service with
    free-form inputs) builds at most three programs: the SIMD body's end, which LiteRT's
    NaN and rounding choices depend on, is a kernel argument (a fresh user measured one
    program per length: ~2.4 MB kept and 50-270 ms each). Bit-exact at every length, NaNs
    of both signs included."""
    quant = ((0.05, 3), (0.07, -9), (0.11, 1)) if dt == "int8" else None
    m = add_model(dt, [8], [8], quant=quant)
    d = litecl.Delegate(fast_device, quiet=True)
    it, ref = make_interpreter(m, delegates=[d]), make_interpreter(m)
    sources = set()
    for n in range(15, 60):
        for x in (it, ref):
            for det in x.get_input_details():
                x.resize_tensor_input(det["index"], [n])
            x.allocate_tensors()
        ins = [values(dt, (n,), n), values(dt, (n,), n + 100)]
        if dt == "float32":  # NaN + NaN of opposite signs at every position, both ways
            ins[0][::2], ins[1][::2] = np.float32("nan"), -np.float32("nan")
            ins[0][1::2], ins[1][1::2] = -np.float32("nan"), np.float32("nan")
        got, want = [], []
        for x, out in ((it, got), (ref, want)):
            for det, v in zip(x.get_input_details(), ins):
                x.set_tensor(det["index"], v)
            x.invoke()
            out.append(x.get_tensor(x.get_output_details()[0]["index"]))
        assert bit_equal(got[0], want[0]), n
        sources |= {ln.source for p in d.partitions() for ln in p.plan.launches}
    assert 1 <= len(sources) <= 3, len(sources)
    assert all(r["placement"] == "opencl" for r in d.placement())


@pytest.mark.parametrize("device", FAST + device_params(["oclgrind"]))
def test_float_add_returns_a_nan_operand_quieted_as_litert(device):
    """A signalling NaN operand comes back quieted, payload kept (0x7f800001 + 1.0 is
    0x7fc00001 in LiteRT on x86-64 and aarch64): litecl chose the operand's bits in integers
    and returned them unquieted (a fresh user's report). Byte for byte against LiteRT,
    same shapes, row and single-value broadcasts, a generic 4-D and a 6-D one."""
    bits = np.array([0x7f800001, 0xff800001, 0x7fa00000, 0x7fc00001, 0xffc12345, 0x3f800000, 0x7f800000,
                     0xff800000, 0, 0x80000000], np.uint32).view(np.float32)
    rng = np.random.default_rng(4)
    for s1, s2 in (((37,), (37,)), ((3, 37), (37,)), ((37,), (1,)), ((2, 3, 4, 9), (1, 3, 1, 9)),
                   ((3, 5, 4, 8, 1, 2), (1, 5, 1, 8, 1, 2))):
        a = bits[rng.integers(0, bits.size, int(np.prod(s1)))].reshape(s1)
        b = bits[rng.integers(0, bits.size, int(np.prod(s2)))].reshape(s2)
        m = model("float32", s1, s2, "NONE")
        got, _ = litecl_run(m, [a, b], device, "builtin")
        want = litert(m, [a, b], "builtin")
        assert got.tobytes() == want.tobytes(), (s1, s2, got.view(np.uint32)[:8], want.view(np.uint32)[:8])
