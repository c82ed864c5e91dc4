"""Tests for ops/softf64.py: software float64 conversions, bit for bit against numpy.

Layers: text tests with no device (``source`` assembly, no ``double``), then every function
compiled into one test program per device (PoCL, Intel CPU runtime, NVIDIA when present)
and run on edge values plus ~260k random bit patterns in one launch each, plus a
hypothesis test on small batches, plus one Oclgrind run on the edge values that fails on
any invalid memory access it reports.

Comparison rule (REFERENCE_FACTS.md): any NaN equals any NaN; everything else bit for bit
(so -0.0 != +0.0). The references are numpy's ``astype`` (round to nearest even, gradual
underflow) and, for float -> integer, LiteRT's rule: truncate, saturate, NaN -> max.
"""
from __future__ import annotations

import importlib.util
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest


def wire_intel_icd() -> None:
    """Let the OpenCL ICD loader find Intel's CPU runtime: litecl.device does it at import
    (backend/device.py, OPENCL_DEVICES.md section 2). Must run before the first OpenCL
    call of the process."""
    try:
        import litecl.device  # noqa: F401,PLC0415
    except ImportError:  # litecl not installed: Intel's platform is simply not found
        pass


wire_intel_icd()

import pyopencl as cl  # noqa: E402  (after wire_intel_icd, before any OpenCL call)
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

# Intel's compiler logs every successful build; pyopencl turns that into warnings.
pytestmark = pytest.mark.filterwarnings("ignore::pyopencl.CompilerWarning")


def _load_ops_module(name: str):
    """``litecl.ops.<name>`` when that is this checkout's ops/ (an editable install), else
    the file ops/<name>.py of this checkout: the tests test the tree they live in."""
    path = REPO / "ops" / f"{name}.py"
    try:
        module = importlib.import_module(f"litecl.ops.{name}")
        if Path(module.__file__).resolve() == path:
            return module
    except ImportError:
        pass
    spec = importlib.util.spec_from_file_location(f"_litecl_ops_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


softf64 = _load_ops_module("softf64")
dtypes = _load_ops_module("dtypes")

#: Destination integer ranges of the float -> integer CAST, from the dtype table.
INT_RANGES = [(d.name, d.min, d.max) for d in dtypes.CAST_TYPES if d.is_integer]

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
FLT_MAX = float(np.finfo(np.float32).max)
FLT_HALFWAY = 3.4028235677973366e38  # FLT_MAX + half an ulp: ties to even, i.e. to inf


# --------------------------------------------------------------------------- inputs

def _bits(values) -> list[int]:
    return [int(b) for b in np.array(values, dtype=np.float64).view(np.uint64)]


def _with_neighbours(bits: list[int]) -> np.ndarray:
    """Each pattern and the next pattern up and down (one float64 ulp either way)."""
    out = {(b + d) % 2**64 for b in bits for d in (-1, 0, 1)}
    return np.array(sorted(out), dtype=np.uint64)


F64_EDGE_VALUES = [
    0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan,
    # float32 subnormal-range results and the underflow threshold 2^-150
    1e-40, -1e-40, 1e-45, -1e-45, 7e-46, -7e-46, 1.5e-45, -1.5e-45, 1.401298464324817e-45,
    2.0**-149, 2.0**-150, 3 * 2.0**-151, 2.0**-126, 2.0**-126 - 2.0**-150, 2.0**-127,
    # overflow threshold
    FLT_MAX, -FLT_MAX, FLT_HALFWAY, -FLT_HALFWAY, 1e39, -1e39, 2.0**128,
    # integer boundaries
    0.999, 0.5, 1.5, 2.5, -1.5, -0.5, -1.0, 1.0, 127.9, 128.0, -128.9, -129.0, -128.0,
    255.5, 256.0, -0.999, 32767.5, 32768.0, -32768.9, 65535.9, 65536.0,
    2.0**31 - 0.5, 2.0**31, -(2.0**31) - 0.5, -(2.0**31) - 1, 2.0**32 - 0.5, 2.0**32,
    2.0**24 + 1, 2.0**24 + 2, 2.0**53, 2.0**53 + 2, 2.0**63, -(2.0**63), 2.0**64,
    1e10, -1e10, 1e19, -1e19, 1e300, -1e300, 5e-324, -5e-324, 2.2250738585072014e-308,
    1.7976931348623157e308, -1.7976931348623157e308,
]
F64_EDGE_RAW = [
    0x0000000000000001, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x8000000000000001,
    0x800FFFFFFFFFFFFF, 0x7FF0000000000001, 0x7FF4000000000000, 0x7FF8000000000000,
    0x7FFFFFFFFFFFFFFF, 0xFFF0000000000001, 0xFFF8000000000000, 0xFFFFFFFFFFFFFFFF,
    0x7FEFFFFFFFFFFFFF, 0x47EFFFFFF0000000, 0x47EFFFFFEFFFFFFF, 0x47EFFFFFE0000000,
]
F64_EDGE = _with_neighbours(_bits(F64_EDGE_VALUES) + F64_EDGE_RAW)

LONG_EDGE = np.array(sorted({
    v for c in [0, 1, 127, 128, 2**24, 2**31, 2**32, 2**52, 2**53, 2**54, 2**62, 2**63 - 1024,
                2**63 - 512, 2**63 - 1536, 2**63 - 1]
    for v in (c - 2, c - 1, c, c + 1, c + 2, -c - 2, -c - 1, -c, -c + 1, -c + 2)
    if LONG_MIN <= v <= LONG_MAX
} | {LONG_MIN, LONG_MAX, 2**53 + 1, 2**53 + 3, 2**54 + 2, 2**54 + 6, 3 * 2**60 + 2**7}),
    dtype=np.int64)

U32_EDGE = np.array([0, 1, 2, 3, 255, 256, 2**16, 2**24 + 1, 2**31 - 1, 2**31, 2**31 + 1,
                     2**32 - 2, 2**32 - 1], dtype=np.uint32)

F32_EDGE = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
    0x7FBFFFFF, 0xFFFFFFFF, 0x00000001, 0x80000001, 0x00000002, 0x00000003, 0x00400000,
    0x007FFFFF, 0x807FFFFF, 0x00800000, 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000,
    0x3F7FFFFF, 0x4B800001, 0x00012345,
], dtype=np.uint32).view(np.float32)


def random_f64_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """n float64 bit patterns mixing: uniform bits; exponents around the float32 range
    (normal and subnormal results, overflow); exact and near float32 rounding ties at
    every shift; magnitudes around the integer ranges, with integers and halves."""
    q = n // 4
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(63)
    frac = rng.integers(0, 2**52, n, dtype=np.uint64)
    uniform = rng.integers(0, 2**64, q, dtype=np.uint64, endpoint=False)
    # exponents from below 2^-150 to above 2^128
    exp_f32 = rng.integers(1023 - 155, 1023 + 130, q, dtype=np.uint64)
    around_f32 = sign[:q] | (exp_f32 << np.uint64(52)) | frac[:q]
    # ties at bit k (k in 1..52), +-1 ulp, exponents in the float32 subnormal/normal range
    k = rng.integers(1, 53, q, dtype=np.uint64)
    low = np.uint64(1) << (k - np.uint64(1))
    tie_frac = (frac[q:2 * q] >> k << k) | low
    tie_frac = (tie_frac.astype(np.int64) + rng.integers(-1, 2, q)).astype(np.uint64)
    tie_frac &= np.uint64(2**52 - 1)
    exp_tie = rng.integers(1023 - 152, 1023 + 129, q, dtype=np.uint64)
    ties = sign[q:2 * q] | (exp_tie << np.uint64(52)) | tie_frac
    # integer range: |x| from 0.25 to 2^66, a third of them with few fraction bits
    rest = n - 3 * q
    exp_int = rng.integers(1023 - 2, 1023 + 67, rest, dtype=np.uint64)
    f = frac[3 * q:]
    coarse = rng.integers(0, 3, rest) == 0
    f = np.where(coarse, f >> np.uint64(40) << np.uint64(40), f)
    ints = sign[3 * q:] | (exp_int << np.uint64(52)) | f
    return np.concatenate([uniform, around_f32, ties, ints])


def random_longs(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniform int64 bits, then shifted down to every magnitude, half of them made exact
    ties or near-ties for the 53-bit rounding."""
    v = rng.integers(LONG_MIN, LONG_MAX, n, dtype=np.int64, endpoint=True)
    shift = rng.integers(0, 63, n).astype(np.int64)
    v = np.where(rng.integers(0, 4, n) == 0, v, v >> shift)
    k = rng.integers(1, 12, n).astype(np.int64)
    tie = ((v >> k) << k) | (np.int64(1) << (k - 1))
    tie = tie + rng.integers(-1, 2, n)
    return np.where(rng.integers(0, 2, n) == 0, v, tie).astype(np.int64)


N_RANDOM = 1 << 18
RNG_SEED = 20240611


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(RNG_SEED)
    f32_bits = np.concatenate([
        rng.integers(0, 2**32, N_RANDOM, dtype=np.uint64).astype(np.uint32),
        rng.integers(0, 2**23, 1 << 14, dtype=np.uint32)
        | (rng.integers(0, 2, 1 << 14, dtype=np.uint32) << np.uint32(31)),  # subnormals
    ])
    return {
        "f64": np.concatenate([F64_EDGE, random_f64_bits(rng, N_RANDOM)]),
        "long": np.concatenate([LONG_EDGE, random_longs(rng, N_RANDOM)]),
        "u32": np.concatenate([U32_EDGE, rng.integers(0, 2**32, N_RANDOM, dtype=np.uint64)
                               .astype(np.uint32)]),
        "f32": np.concatenate([F32_EDGE, f32_bits.view(np.float32)]),
    }


# ----------------------------------------------------------------------- references

def ref_f64_to_f32(bits: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return bits.view(np.float64).astype(np.float32)


def ref_to_f64(x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # signalling NaNs
        return x.astype(np.float64)


def ref_f64_to_long_sat(bits: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """LiteRT's float -> integer CAST: trunc toward zero, clamp to [lo, hi], NaN -> hi.

    Float comparisons are exact here: lo is exact as a float64 for every range, and
    float(LONG_MAX) = 2^63 has no float64 between it and LONG_MAX.
    """
    x = bits.view(np.float64)
    out = np.zeros(x.shape, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x)
        low = t <= lo
        high = t >= float(hi)
    mid = ~(low | high | np.isnan(x))
    out[mid] = t[mid].astype(np.int64)
    out[low] = lo
    out[high | np.isnan(x)] = hi
    return out


def py_f64_to_long_sat(x: float, lo: int, hi: int) -> int:
    """The same rule on Python ints, one value at a time (cross-checks the vectorised one)."""
    if math.isnan(x):
        return hi
    if math.isinf(x):
        return hi if x > 0 else lo
    return min(max(int(x), lo), hi)  # int() truncates toward zero, exactly


def ref_nonzero(bits: np.ndarray) -> np.ndarray:
    return (bits.view(np.float64) != 0).astype(np.int32)


def assert_same(got: np.ndarray, want: np.ndarray, inputs: np.ndarray, what: str) -> None:
    """Bit-for-bit equality, any NaN equal to any NaN; lists the first mismatches."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        utype = np.dtype(f"u{got.dtype.itemsize}")
        both_nan = np.isnan(got) & np.isnan(want)
        bad = ~both_nan & (got.view(utype) != want.view(utype))
    else:
        bad = got != want
    if not bad.any():
        return
    width = inputs.dtype.itemsize * 2
    in_bits = inputs.view(np.dtype(f"u{inputs.dtype.itemsize}"))
    lines = []
    for i in np.flatnonzero(bad)[:12]:
        g, w = got[i], want[i]
        if got.dtype.kind == "f":
            g = f"{g!r} (0x{int(got.view(utype)[i]):0{got.itemsize * 2}x})"
            w = f"{w!r} (0x{int(want.view(utype)[i]):0{got.itemsize * 2}x})"
        lines.append(f"  in 0x{int(in_bits[i]):0{width}x} ({inputs[i]!r}): got {g}, want {w}")
    pytest.fail(f"{what}: {int(bad.sum())} of {bad.size} differ\n" + "\n".join(lines))


# ---------------------------------------------------------------- no-device tests

def test_source_includes_dependencies_once_in_order():
    text = softf64.source(["litecl_long_to_f64", "litecl_f64_to_f32", "litecl_shr_rne"])
    defined = re.findall(r"^\w+ (litecl_\w+)\(", text, flags=re.M)
    assert defined == ["litecl_shr_rne", "litecl_long_to_f64", "litecl_f64_to_f32"]
    assert softf64.source("litecl_f64_nonzero") == softf64.f64_is_nonzero()
    assert softf64.source([]) == ""
    assert softf64.source(softf64.NAMES) == softf64.source(list(softf64.NAMES))


def test_source_defines_every_name_and_no_double():
    text = softf64.source(softf64.NAMES)
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    defined = re.findall(r"^\w+ (litecl_\w+)\(", text, flags=re.M)
    assert sorted(defined) == sorted(softf64.NAMES)
    assert not re.search(r"\bdouble\b|\bhalf\b|#pragma", code)


def test_source_rejects_unknown_name():
    with pytest.raises(ValueError, match="litecl_f64_to_f16.*known: litecl_shr_rne"):
        softf64.source(["litecl_f64_to_f16"])


def test_sat_reference_matches_python_ints():
    x = F64_EDGE.view(np.float64)
    for name, lo, hi in INT_RANGES:
        want = [py_f64_to_long_sat(float(v), lo, hi) for v in x]
        assert ref_f64_to_long_sat(F64_EDGE, lo, hi).tolist() == want, name


# ------------------------------------------------------------------------ devices

PLATFORMS = {
    "pocl": "Portable Computing Language",
    "intel": "Intel(R) OpenCL",
    "nvidia": "NVIDIA CUDA",
}

TEST_KERNELS = """
__kernel void t_f64_to_f32(__global const ulong *x, __global float *y)
{ size_t i = get_global_id(0); y[i] = litecl_f64_to_f32(x[i]); }

__kernel void t_f64_to_long_sat(__global const ulong *x, __global long *y, long lo, long hi)
{ size_t i = get_global_id(0); y[i] = litecl_f64_to_long_sat(x[i], lo, hi); }

__kernel void t_f64_nonzero(__global const ulong *x, __global int *y)
{ size_t i = get_global_id(0); y[i] = litecl_f64_nonzero(x[i]); }

__kernel void t_long_to_f64(__global const long *x, __global ulong *y)
{ size_t i = get_global_id(0); y[i] = litecl_long_to_f64(x[i]); }

__kernel void t_ulong32_to_f64(__global const uint *x, __global ulong *y)
{ size_t i = get_global_id(0); y[i] = litecl_ulong32_to_f64(x[i]); }

__kernel void t_f32_to_f64(__global const float *x, __global ulong *y)
{ size_t i = get_global_id(0); y[i] = litecl_f32_to_f64(x[i]); }
"""


def find_device(platform_name: str):
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return None
    for p in platforms:
        if p.name == platform_name:
            devices = p.get_devices()
            return devices[0] if devices else None
    return None


def cannot_build_anything(device) -> str | None:
    """The compiler's first error line when a one-line kernel fails to build, else None.

    Tells a broken installation from a bug in softf64's source: PoCL 3.0's LLVM 14 (the
    pip wheel) names this host's Zen 5 CPU "generic" and then refuses it ("unknown target
    CPU 'generic'") for every kernel.
    """
    ctx = cl.Context([device])
    try:
        cl.Program(ctx, "__kernel void probe(__global int *y) { y[0] = 1; }").build()
    except cl.RuntimeError as e:
        errors = [ln.strip() for ln in str(e).splitlines() if "error" in ln.lower()]
        return errors[-1] if errors else str(e).splitlines()[0]
    return None


class Runner:
    """One device's context, queue and the built test program."""

    def __init__(self, device, options: str = ""):
        self.device = device
        self.ctx = cl.Context([device])
        self.queue = cl.CommandQueue(self.ctx)
        src = softf64.source(softf64.NAMES) + TEST_KERNELS
        self.program = cl.Program(self.ctx, src).build(options=options)
        self.kernels = {k.function_name: k for k in self.program.all_kernels()}

    def run(self, kernel: str, x: np.ndarray, out_dtype, *scalars) -> np.ndarray:
        x = np.ascontiguousarray(x)
        y = np.empty(x.shape, dtype=out_dtype)
        mf = cl.mem_flags
        xb = cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
        yb = cl.Buffer(self.ctx, mf.WRITE_ONLY, y.nbytes)
        self.kernels[kernel](self.queue, x.shape, None, xb, yb, *scalars)
        cl.enqueue_copy(self.queue, y, yb)
        self.queue.finish()
        return y

    def check_all(self, f64: np.ndarray, longs: np.ndarray, u32: np.ndarray,
                  f32: np.ndarray) -> None:
        """Every function against numpy on the given inputs."""
        assert_same(self.run("t_f64_to_f32", f64, np.float32), ref_f64_to_f32(f64),
                    f64.view(np.float64), "f64 -> f32")
        for name, lo, hi in INT_RANGES:
            got = self.run("t_f64_to_long_sat", f64, np.int64, np.int64(lo), np.int64(hi))
            assert_same(got, ref_f64_to_long_sat(f64, lo, hi), f64.view(np.float64),
                        f"f64 -> {name} (saturating)")
        assert_same(self.run("t_f64_nonzero", f64, np.int32), ref_nonzero(f64),
                    f64.view(np.float64), "f64 != 0")
        assert_same(self.run("t_long_to_f64", longs, np.uint64).view(np.float64),
                    ref_to_f64(longs), longs, "int64 -> f64")
        assert_same(self.run("t_ulong32_to_f64", u32, np.uint64).view(np.float64),
                    ref_to_f64(u32), u32, "uint32 -> f64")
        assert_same(self.run("t_f32_to_f64", f32, np.uint64).view(np.float64),
                    ref_to_f64(f32), f32, "f32 -> f64")


@pytest.fixture(scope="module", params=list(PLATFORMS), ids=list(PLATFORMS))
def runner(request):
    platform_name = PLATFORMS[request.param]
    device = find_device(platform_name)
    if device is None:
        pytest.skip(f"OpenCL platform {platform_name!r} not available")
    broken = cannot_build_anything(device)
    if broken:
        pytest.skip(f"OpenCL platform {platform_name!r} cannot build even a trivial kernel "
                    f"here: {broken}")
    return Runner(device)


def test_edge_values(runner):
    runner.check_all(F64_EDGE, LONG_EDGE, U32_EDGE, F32_EDGE)


def test_random_bit_patterns(runner, inputs):
    runner.check_all(inputs["f64"], inputs["long"], inputs["u32"], inputs["f32"])


def test_flush_to_zero_build(runner, inputs):
    """Built with -cl-denorms-are-zero (what a device without float denormals does): the
    results must not change, since no float arithmetic touches a value."""
    flushed = Runner(runner.device, "-cl-denorms-are-zero")
    flushed.check_all(np.concatenate([F64_EDGE, inputs["f64"][::16]]),
                      np.concatenate([LONG_EDGE, inputs["long"][::16]]),
                      np.concatenate([U32_EDGE, inputs["u32"][::16]]),
                      np.concatenate([F32_EDGE, inputs["f32"][-(1 << 14):]]))  # subnormals


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    f64=st.lists(st.one_of(
        st.floats(width=64).map(lambda v: _bits([v])[0]),
        st.integers(0, 2**64 - 1)), min_size=1, max_size=64),
    longs=st.lists(st.integers(LONG_MIN, LONG_MAX), min_size=1, max_size=64),
    u32=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
    f32=st.lists(st.floats(width=32), min_size=1, max_size=64),
)
def test_hypothesis_batches(runner, f64, longs, u32, f32):
    runner.check_all(np.array(f64, dtype=np.uint64), np.array(longs, dtype=np.int64),
                     np.array(u32, dtype=np.uint32), np.array(f32, dtype=np.float32))


@pytest.mark.slow
def test_oclgrind_no_invalid_access(capfd):
    """Oclgrind reports every out-of-bounds or uninitialised access on stderr."""
    device = find_device("Oclgrind")
    if device is None:
        pytest.skip("OpenCL platform 'Oclgrind' not available")
    Runner(device).check_all(F64_EDGE, LONG_EDGE, U32_EDGE, F32_EDGE)
    err = capfd.readouterr().err
    assert not re.search(r"Invalid (read|write)|Uninitialized|error", err, flags=re.I), err
