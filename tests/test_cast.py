"""CAST: every pair x edge values x tail sizes x devices x capability profiles, bit for bit
against LiteRT (any NaN equals any NaN), and every CAST placed on OpenCL."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import litecl
from litecl.compare import mismatches
from litecl.compare import make_interpreter
from litecl.ops.dtypes import CAST_TYPES
from models.builders import cast_model

from conftest import force_copies, REAL_DEVICES, assert_on_opencl, device_params, launches, run_one_input, assert_folded_and_count_launches

NAMES = [d.name for d in CAST_TYPES]
#: the 110 real pairs, complex64 -> each real type, each real type -> complex64 and
#: complex64 -> complex64 (a copy)
PAIRS = ([(s, d) for s in NAMES for d in NAMES if s != d] + [("complex64", d) for d in NAMES]
         + [(s, "complex64") for s in NAMES + ["complex64"]])
#: bfloat16 to and from every other type (LiteRT's Python API passes ml_dtypes.bfloat16,
#: measured), int4/uint4 to and from float32 (passed as int8/uint8), float32 -> int2 (LiteRT
#: casts the sub-byte types to and from float32 only; an int2 input cannot be set)
EXTRA = ["bfloat16", "int4", "uint4", "int2"]
PAIRS += ([(s, "bfloat16") for s in NAMES + ["complex64"]] + [("bfloat16", d) for d in NAMES + ["complex64"]]
          + [("float32", t) for t in ("int4", "uint4", "int2")] + [(t, "float32") for t in ("int4", "uint4")])
SIZES = (1, 31, 33, 1999)

_F = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.999, 127.9, 128.0, -128.9,
      -129.0, 255.5, 256.0, 300.0, -300.0, 32767.5, 32768.0, -32769.0, 65504.0, 65519.0,
      65519.99, 65520.0, -65520.0, 1e-8, 1e-40, -1e-40, 1e-45, 6e-8, 3e-5, 2.0**24 + 1,
      2.0**31, -2.0**31, 2.0**31 - 64, 2.0**32, 4294967295.0, 2.0**53 + 1, 2.0**63, -2.0**63,
      2.0**64, 1e10, -1e10, 1e39, -1e39, 3.4028234663852886e38, 3.4028235677973366e38,
      1e300, 1e-310, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 2049.0, 4097.0]
_SPECIAL = [np.nan, -np.nan, np.inf, -np.inf]
_I = [0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, 65519, 65520,
      65535, 65536, 2**24 + 1, 2**31 - 1, -2**31, 2**32 - 1, 2**53 + 1, 2**62, 2**63 - 1,
      -2**63, -(2**53 + 1)]


@functools.lru_cache(maxsize=None)
def edge_values(src: str, n: int) -> np.ndarray:
    """n values of src: the edge values first, then random bits (floats) / values."""
    rng = np.random.default_rng(n)
    if src == "bfloat16":  # the float edge values rounded to it, then random bit patterns
        import ml_dtypes

        with np.errstate(over="ignore", invalid="ignore"):
            base = np.array(_F + _SPECIAL, np.float64).astype(np.float32).astype(ml_dtypes.bfloat16)
        rand = rng.integers(0, 1 << 16, n, dtype=np.uint16).view(ml_dtypes.bfloat16)
        out = np.concatenate([base, rand])[:n] if n > len(base) else np.roll(base, n)[:n].copy()
        return out
    if src in ("int4", "uint4", "int2"):  # one value per byte (LiteRT's Python API)
        lo, hi = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1)}[src]
        dt = np.int8 if lo < 0 else np.uint8
        base = np.arange(lo, hi + 1).astype(dt)
        rand = rng.integers(lo, hi + 1, n).astype(dt)
        return np.concatenate([base, rand])[:n] if n > len(base) else np.roll(base, n)[:n].copy()
    dt = np.dtype(src)
    if src == "bool":
        base = np.array([0, 1], np.bool_)
        rand = rng.integers(0, 2, n).astype(np.bool_)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [v for v in _I if info.min <= v <= info.max] + [info.min, info.max]
        base = np.array(vals, dtype=object).astype(dt)
        rand = rng.integers(info.min, int(info.max) + 1, n, dtype=dt)
    elif dt.kind == "f":
        with np.errstate(over="ignore"):
            base = np.array(_F + _SPECIAL, np.float64).astype(dt)
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
        rand = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dt)
    else:  # complex64: real parts from the float edge values
        with np.errstate(over="ignore"):
            re = np.array(_F + _SPECIAL, np.float64).astype(np.float32)
        base = np.empty(re.size, np.complex64)  # imaginary parts: the edge values reversed
        base.real, base.imag = re, re[::-1]
        rand = (rng.standard_normal(n) * 1e3 + 1j * rng.standard_normal(n)).astype(np.complex64)
    out = np.concatenate([base, rand])[:n] if n > len(base) else base[:n]
    if n > len(base):
        return out
    # small sizes: rotate so different sizes see different edge values
    return np.roll(base, n)[:n].copy()


def _out_of_reference_contract(src: str, dst: str, x: np.ndarray) -> np.ndarray:
    """complex64 -> integer is static_cast of the real part in cast.cc: undefined behaviour
    when out of range or NaN (x86 gives INT_MIN), so only in-range values are compared."""
    if src != "complex64" or dst in ("bool", "bfloat16") or np.dtype(dst).kind in "fc":
        return np.zeros(x.shape, bool)
    re = x.real.astype(np.float64)
    info = np.iinfo(np.dtype(dst))
    with np.errstate(invalid="ignore"):
        return ~((re > info.min - 1) & (re < info.max + 1))


@functools.lru_cache(maxsize=None)
def _model(src, dst, n):
    return cast_model(src, dst, [n])


@functools.lru_cache(maxsize=None)
def reference(src: str, dst: str, n: int) -> np.ndarray:
    ref = make_interpreter(_model(src, dst, n))
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], edge_values(src, n))
    ref.invoke()
    return ref.get_tensor(ref.get_output_details()[0]["index"])


def check_pair(device: str, src: str, dst: str, sizes=SIZES, copies: bool = False) -> None:
    """CAST src -> dst at each size on ``device``, on OpenCL and bit-exact with LiteRT.
    copies: the GPU memory path (device buffers copied to and from LiteRT's memory)."""
    for n in sizes:
        d = litecl.Delegate(device, quiet=True)
        if copies:
            force_copies(d)
        it = litecl.Interpreter(model_content=_model(src, dst, n), delegate=d)
        pl = it.placement()
        assert [p["placement"] for p in pl] == ["opencl"], pl
        it.allocate_tensors()
        x = edge_values(src, n)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        assert it.delegate.stats["partition_invokes"] == 1  # the CAST ran as litecl's kernel
        # LiteRT's tensors through copies when asked, and on a GPU (pretend ones included);
        # else in place (a packed int4/uint4/int2 side is always unpacked or packed: copied)
        st, copied = it.delegate.stats, copies or it.delegate.caps.is_gpu
        assert st["in_place"] + st["copied"] == 2 and (st["in_place"] == 0) == copied, st
        got = it.get_tensor(it.get_output_details()[0]["index"])
        want = reference(src, dst, n)
        assert got.dtype == want.dtype and got.shape == want.shape
        bad = mismatches(got, want) & ~_out_of_reference_contract(src, dst, x)
        if bad.any():
            i = np.flatnonzero(bad)[:8]
            pytest.fail(f"CAST {src}->{dst} n={n} on {device}: {int(bad.sum())} mismatches; "
                        f"in={x[i]!r} got={got[i]!r} want={want[i]!r}")


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile", "mobile-fp16"]))
@pytest.mark.parametrize("src", NAMES + ["complex64", "bfloat16", "int4", "uint4"])
def test_cast_all_pairs(device, src):
    for s, d in PAIRS:
        if s == src:
            check_pair(device, s, d)


def test_cast_all_pairs_on_the_copy_path(fast_device):
    """Every pair with LiteRT's tensors reached through copies, as on a discrete GPU (the
    H200): uploads, read-backs, packed sub-byte tensors, tails."""
    for s, d in PAIRS:
        check_pair(fast_device, s, d, sizes=(1, 33, 1999), copies=True)


def test_cast_all_pairs_on_pocl_pthread(monkeypatch):
    """Every pair on PoCL's pthread device, whose worker threads run the work-groups in
    parallel: these partitions are small, so by default they run on PoCL's basic device
    (test_cast_all_pairs); SMALL_PARTITION_BYTES below them all sends them to pthread."""
    import litecl.kernels as kernels_mod

    from conftest import DEVICE_STATUS

    if DEVICE_STATUS.get("pocl"):
        pytest.skip(DEVICE_STATUS["pocl"])
    monkeypatch.setattr(kernels_mod, "SMALL_PARTITION_BYTES", -1)
    it = litecl.Interpreter(model_content=_model("float32", "int32", 33), device="pocl")
    it.allocate_tensors()
    assert [p.dev for p in it.delegate.partitions()] == [it.delegate.device]
    for s, d in PAIRS:
        check_pair("pocl", s, d)


ORACLE_SUBSET = [("float32", "int8"), ("float32", "float16"), ("float64", "float16"),
                 ("int64", "float16"), ("bool", "float16"), ("uint8", "float32"),
                 ("float16", "uint32"), ("float64", "int64"), ("int64", "float64"),
                 ("float32", "float64"), ("complex64", "int32"), ("int32", "bool"),
                 ("float32", "bool"), ("float16", "bool"), ("float64", "bool"), ("int64", "bool"),
                 ("int32", "complex64"), ("float64", "complex64"), ("float16", "complex64"),
                 ("complex64", "complex64"), ("float32", "bfloat16"), ("bfloat16", "float32"),
                 ("float64", "bfloat16"), ("bfloat16", "int8"), ("float32", "int4"),
                 ("uint4", "float32"), ("float32", "int2")]


@pytest.mark.parametrize("device", device_params(["oclgrind"], ["", "mobile"]))
def test_cast_subset_under_oclgrind(device, capfd):
    for s, d in ORACLE_SUBSET:
        check_pair(device, s, d, sizes=(1, 33, 81))
    err = capfd.readouterr().err
    assert "Invalid read" not in err and "Invalid write" not in err, err[-2000:]


def test_rank5_and_rank6_cast(fast_device):
    for shape in ([2, 3, 1, 4, 5], [1, 2, 3, 2, 2, 3]):
        m = cast_model("int64", "float16", shape)
        it = litecl.Interpreter(model_content=m, device=fast_device)
        assert it.placement()[0]["placement"] == "opencl"
        it.allocate_tensors()
        x = np.arange(np.prod(shape), dtype=np.int64).reshape(shape) * 1000 - 30000
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        ref = make_interpreter(m)
        ref.allocate_tensors()
        ref.set_tensor(0, x)
        ref.invoke()
        assert not mismatches(it.get_tensor(it.get_output_details()[0]["index"]),
                              ref.get_tensor(ref.get_output_details()[0]["index"])).any()


@pytest.mark.parametrize("copies", [False, True], ids=["in_place", "copies"])
def test_constant_input_cast_computed_once(fast_device, monkeypatch, copies):
    """A CAST of a constant runs its kernel at the first invoke only ("constant inputs:
    computed once"); every invoke still writes LiteRT's output, equal to LiteRT's. copies:
    the GPU memory path (device buffers copied to LiteRT's memory) forced on a CPU device."""
    import pyopencl as cl

    const = np.array([[1.5, -2.5, np.nan, 70000.0]], np.float32)
    m = cast_model("float32", "float16", [1, 4], constant=const)
    d = litecl.Delegate(fast_device, quiet=True)
    if copies:
        force_copies(d)
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    ran = assert_folded_and_count_launches(it, monkeypatch)
    ref = make_interpreter(m)
    ref.allocate_tensors()
    ref.invoke()
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    for _ in range(3):
        it.invoke()
        assert not mismatches(it.get_tensor(it.get_output_details()[0]["index"]), want).any()
    assert len(ran) == 1 and d.stats["partition_invokes"] == 3


def test_zero_size_tensor(fast_device):
    m = cast_model("float32", "int8", [0])
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros([0], np.float32))
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]).shape == (0,)


@pytest.mark.parametrize("spec", device_params(["intel", "pocl"], ["mobile"]))
def test_new_pairs_on_the_gpu_row(spec):
    """-> complex64, to and from bfloat16, and the sub-byte pairs with the GPU LAUNCH row's
    code (a CPU device that says it is a GPU: NaN-sign-keeping half loads, integer half
    stores, saturating conversions, 512-wide work-groups)."""
    from dataclasses import replace

    d = litecl.open_device(spec)
    gpu = litecl.Device(d.device, d.context, d.queue, replace(d.caps, is_gpu=True))
    for s, t in PAIRS:
        if {s, t} & {"complex64", "bfloat16", "int4", "uint4", "int2"} and not (s == "complex64" and t in NAMES):
            check_pair(gpu, s, t, sizes=(31, 1999))


def test_complex64_chain_runs_unfused_and_exact(fast_device):
    """f32 -> complex64 -> f16 -> complex64 -> int8: complex64 results are not fused, each
    such CAST has its own kernel; the chain equals LiteRT's."""
    from models.builders import chain_model

    m = chain_model(["float32", "complex64", "float16", "complex64", "int8"], [757])
    x = edge_values("float32", 757)
    it, got, want = run_one_input(m, fast_device, x)
    assert all(p["placement"] == "opencl" for p in it.placement()), it.placement()
    assert not mismatches(got, want).any()


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile"]))
def test_bfloat16_inside_a_model(device):
    """bfloat16 as an internal tensor (X -> bf16 -> Y chains, the fused form included),
    every type through it, edge values and random bits, against LiteRT: LiteRT rounds the
    float32 to nearest even (two roundings from wider types: int32 16842753 -> 16777216,
    float64 1 + 2**-8 + 2**-40 -> 1.0)."""
    from models.builders import chain_model

    checks = [(s, "float32") for s in NAMES + ["complex64"]] + [("float32", d) for d in NAMES + ["complex64"]]
    for s, d in checks:
        for n in (33, 1999):
            m = chain_model([s, "bfloat16", d], [n])
            x = edge_values(s, n)
            if s == "float64":
                x = x.copy()
                x[:2] = [1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40)]
            if s == "int32":
                x = x.copy()
                x[:1] = [2**24 + 2**16 + 1]
            it, got, want = run_one_input(m, device, x)
            assert all(p["placement"] == "opencl" for p in it.placement()), it.placement()
            bad = mismatches(got, want) & ~_out_of_reference_contract(s, d, x)
            assert not bad.any(), (s, d, n, x[bad][:5], got[bad][:5], want[bad][:5])


def test_bfloat16_rounding_matches_litert_on_random_bits(fast_device):
    x = np.random.default_rng(3).integers(0, 1 << 32, 1 << 18, dtype=np.uint32).view(np.float32)
    m = cast_model("float32", "bfloat16", [x.size])
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ref = make_interpreter(m)
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], x)
    ref.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    assert got.dtype == ref.get_tensor(ref.get_output_details()[0]["index"]).dtype
    assert not mismatches(got, ref.get_tensor(ref.get_output_details()[0]["index"])).any()


@pytest.mark.parametrize("sub", ["int4", "uint4", "int2"])
@pytest.mark.parametrize("n", [1, 31, 33, 757])
def test_sub_byte_constants_are_unpacked(fast_device, sub, n):
    """A packed int4/uint4/int2 constant buffer (two or four values per byte, low bits
    first) -> CAST float32 on OpenCL equals LiteRT."""
    from models.builders import chain_model

    x = edge_values(sub, n)
    if sub == "int2":  # float32 -> int2 -> float32: an int2 tensor inside the model
        m = chain_model(["float32", "int2", "float32"], [n])
        ins = [x.astype(np.float32)]
    else:
        m = cast_model(sub, "float32", [n], constant=x)
        ins = []
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    assert all(p["placement"] == "opencl" for p in it.placement()), it.placement()
    ref = make_interpreter(m)
    ref.allocate_tensors()
    for i, v in zip((it, ref), (ins, ins)):
        for d, a in zip(i.get_input_details(), v):
            i.set_tensor(d["index"], a)
        i.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    assert not mismatches(got, want).any() and (want == x).all()


def test_sub_byte_inputs_follow_litert_python_api(fast_device):
    """int4/uint4 inputs are int8/uint8 arrays, one value per byte, in range (LiteRT's own
    set_tensor: "Values for INT4 input must be between -8 and 7."), packed by LiteRT and
    unpacked for the kernel; an int2 input cannot be set (LiteRT's rule); CASTs LiteRT
    does not run (int4 -> int8) stay on LiteRT and say why."""
    for sub, dt, bad in (("int4", np.int8, 8), ("uint4", np.uint8, 16)):
        m = cast_model(sub, "float32", [3])
        it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
        ref = make_interpreter(m)
        it.allocate_tensors()
        ref.allocate_tensors()
        assert it.get_input_details()[0]["dtype"] == ref.get_input_details()[0]["dtype"] == dt
        for i in (it, ref):
            with pytest.raises(ValueError, match=f"{sub.upper()} input must be between"):
                i.set_tensor(0, np.array([1, bad, 2], dt))
            with pytest.raises(ValueError, match="but got INT16"):
                i.set_tensor(0, np.array([1, 2, 3], np.int16))
        x = np.array([1, -1 if dt == np.int8 else 15, 2], dt)
        for i in (it, ref):
            i.set_tensor(0, x)
            i.invoke()
        assert it.delegate.stats["partition_invokes"] == 1 and assert_on_opencl(it)
        got = it.get_tensor(it.get_output_details()[0]["index"])
        assert not mismatches(got, ref.get_tensor(ref.get_output_details()[0]["index"])).any()
        assert got.tolist() == x.astype(np.float32).tolist()
    it = litecl.Interpreter(model_content=cast_model("int2", "float32", [3]), device=fast_device, quiet=True)
    it.allocate_tensors()
    with pytest.raises(ValueError, match="INT2"):
        it.set_tensor(0, np.array([1, 0, -1], np.int8))
    it = litecl.Interpreter(model_content=cast_model("int4", "int8", [3]), device=fast_device, quiet=True)
    (p,) = it.placement()
    assert p["placement"] == "litert" and "int4 only to and from float32" in p["reason"], p
    from litecl.model import load_model

    sg = load_model(model_content=cast_model("float32", "int2", [3])).subgraphs[0]
    assert sg.tensors[1].type_name == "INT2" and sg.tensors[1].dtype.name == "int2"


def test_cli_compare_on_an_int4_input_model(tmp_path, fast_device):
    """`litecl compare` seeds int4 inputs in [-8, 7] (their details say int8, as LiteRT's)."""
    import subprocess
    import sys

    p = tmp_path / "i4.tflite"
    p.write_bytes(cast_model("int4", "float32", [757]))
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "compare", str(p), "--device", fast_device,
                        "--full-range"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "bit-exact" in r.stdout, (r.stdout[-800:], r.stderr[-800:])


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile"]))
def test_same_type_casts(device):
    """CAST T -> T runs in LiteRT for every type but the sub-byte ones: a copy (bool bytes
    other than 0/1 kept, as LiteRT does)."""
    for t in NAMES + ["complex64", "bfloat16"]:
        check_pair(device, t, t, sizes=(1, 33, 1999))
    m = cast_model("bool", "bool", [4])
    x = np.array([0, 1, 2, 255], np.uint8).view(np.bool_)
    out = []
    for it in (make_interpreter(m), litecl.Interpreter(model_content=m, device=device)):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        out.append(it.get_tensor(it.get_output_details()[0]["index"]).view(np.uint8).tolist())
    assert out[0] == out[1] == [0, 1, 2, 255]


def test_bfloat16_copies_keep_bits_in_chains(fast_device):
    """bf16 -> bf16 -> f32 -> bf16 -> bf16 on every bf16 bit pattern: the copies keep NaN
    payloads as LiteRT does (not fused), the rest rounds as LiteRT."""
    import ml_dtypes
    from models.builders import chain_model

    m = chain_model(["bfloat16", "bfloat16", "float32", "bfloat16", "bfloat16"], [1 << 16])
    x = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    out = []
    for it in (make_interpreter(m), litecl.Interpreter(model_content=m, device=fast_device)):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        out.append(it.get_tensor(it.get_output_details()[0]["index"]))
    assert (out[0].view(np.uint16) == out[1].view(np.uint16)).all()


# ------------------------------------------------------------------------------------------
# TFLite's own CAST cases (tensorflow/lite/kernels/cast_test.cc): its inputs and expected
# values, run through the delegate; each result also bit-equal to LiteRT's
# ------------------------------------------------------------------------------------------

_F6 = [100.0, 20.0, 3.0, 0.4, 0.999, 1.1]
_U6 = [100.0, 1.0, 0.0, 0.4, 1.999, 1.1]
_C6 = [complex(i, 10 + i) for i in range(1, 7)]
_INF = float("inf")
#: (source, destination, shape, input, expected); a float expected value is compared
#: exactly after rounding it to the destination type (TFLite: FloatingPointEq)
TFLITE_CAST_CASES = [
    ("int4", "float32", (2, 3), [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]),
    ("float32", "int4", (2, 4), [1, 2, 3, 4, 5, 6, 7, -8], [1, 2, 3, 4, 5, 6, 7, -8]),
    ("float32", "int4", (1, 4), [100, -100, 7.9, -8.9], [7, -8, 7, -8]),
    ("float32", "uint8", (2,), [_INF, -_INF], [255, 0]),
    ("float32", "int16", (2,), [_INF, -_INF], [32767, -32768]),
    ("float32", "int32", (2,), [_INF, -_INF], [2**31 - 1, -2**31]),
    ("int16", "float32", (2, 3), [100, 200, 300, 400, 500, 600], [100, 200, 300, 400, 500, 600]),
    ("int16", "int32", (2, 3), [100, 200, 300, 400, 500, 600], [100, 200, 300, 400, 500, 600]),
    ("int32", "float32", (2, 3), [100, 200, 300, 400, 500, 600], [100, 200, 300, 400, 500, 600]),
    ("float32", "int32", (3, 2), _F6, [100, 20, 3, 0, 0, 1]),
    ("float32", "int16", (3, 2), _F6, [100, 20, 3, 0, 0, 1]),
    ("int64", "float32", (2, 3), [100, 200, 300, 400, 500, 600], [100, 200, 300, 400, 500, 600]),
    ("float32", "int64", (3, 2), _F6, [100, 20, 3, 0, 0, 1]),
    ("float32", "bool", (3, 2), [100, -1.0, 0, 0.4, 0.999, 1.1], [True, True, False, True, True, True]),
    ("bool", "float32", (3, 2), [True, True, False, True, False, True], [1, 1, 0, 1, 0, 1]),
    ("float32", "uint8", (3, 2), _U6, [100, 1, 0, 0, 1, 1]),
    ("uint8", "float32", (3, 2), [123, 0, 1, 2, 3, 4], [123, 0, 1, 2, 3, 4]),
    ("float32", "uint16", (3, 2), _U6, [100, 1, 0, 0, 1, 1]),
    ("uint16", "float32", (3, 2), [123, 0, 1, 2, 3, 4], [123, 0, 1, 2, 3, 4]),
    ("int32", "uint8", (3, 2), [100, 1, 200, 2, 255, 3], [100, 1, 200, 2, 255, 3]),
    ("uint8", "int32", (3, 2), [100, 1, 200, 2, 255, 3], [100, 1, 200, 2, 255, 3]),
    ("complex64", "float32", (2, 3), _C6, [1, 2, 3, 4, 5, 6]),
    ("float32", "complex64", (2, 3), [1, 2, 3, 4, 5, 6], [complex(i, 0) for i in range(1, 7)]),
    ("complex64", "int32", (2, 3), _C6, [1, 2, 3, 4, 5, 6]),
    ("int32", "complex64", (2, 3), [1, 2, 3, 4, 5, 6], [complex(i, 0) for i in range(1, 7)]),
    ("complex64", "complex64", (2, 3), _C6, _C6),
    ("uint32", "int32", (2, 3), [100, 200, 300, 400, 500, 600], [100, 200, 300, 400, 500, 600]),
    ("int32", "uint32", (2, 3), [100, 200, 300, 400, 500, 600], [100, 200, 300, 400, 500, 600]),
    ("uint8", "int8", (2, 3), [10, 20, 30, 40, 50, 60], [10, 20, 30, 40, 50, 60]),
    ("int8", "uint8", (2, 3), [10, 20, 30, 40, 50, 60], [10, 20, 30, 40, 50, 60]),
    ("uint16", "int16", (2, 3), [10, 20, 30, 40, 50, 60], [10, 20, 30, 40, 50, 60]),
    ("int16", "uint16", (2, 3), [10, 20, 30, 40, 50, 60], [10, 20, 30, 40, 50, 60]),
    ("float32", "float16", (3, 2), _U6, _U6),
    ("float32", "bfloat16", (3, 2), _U6, _U6),
    ("float16", "float32", (3, 2), _U6, [100, 1, 0, 0.399902344, 1.99902344, 1.09960938]),
    ("bfloat16", "float32", (3, 2), _U6, [100, 1, 0, 0.400390625, 2, 1.1015625]),
    ("float16", "int32", (1, 6), _F6, [100, 20, 3, 0, 0, 1]),
    ("int32", "float16", (1, 6), [100, 20, 3, 0, 1, -1], [100, 20, 3, 0, 1, -1]),
    ("float16", "bfloat16", (1, 6), _F6, [100, 20, 3, 0.4, 0.999, 1.1]),
    ("uint4", "float32", (1, 6), [15, 0, 1, 8, 7, 2], [15, 0, 1, 8, 7, 2]),
    ("float32", "uint4", (1, 6), [15, 0, 1, 8, 7, 2], [15, 0, 1, 8, 7, 2]),
]


def _as_type(values, name: str) -> np.ndarray:
    """``values`` in ``name``'s numpy form (int4/uint4 one value per byte, as LiteRT's
    Python API passes them; float values rounded to the type as C++'s static_cast)."""
    if name == "bfloat16":
        import ml_dtypes

        return np.array(values, np.float32).astype(ml_dtypes.bfloat16)
    npdt = {"int4": np.int8, "uint4": np.uint8}.get(name, name)
    if name in ("float16",):
        return np.array(values, np.float32).astype(np.float16)
    return np.array(values, dtype=npdt)


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile"]))
def test_tflite_cast_cases(device):
    for src, dst, shape, x, want in TFLITE_CAST_CASES:
        m = cast_model(src, dst, list(shape))
        xv = _as_type(x, src).reshape(shape)
        it = litecl.Interpreter(model_content=m, device=device, quiet=True)
        assert_on_opencl(it)
        ref = make_interpreter(m)
        for i in (it, ref):
            i.allocate_tensors()
            i.set_tensor(i.get_input_details()[0]["index"], xv)
            i.invoke()
        got, lit = (i.get_tensor(i.get_output_details()[0]["index"]) for i in (it, ref))
        assert it.delegate.stats["partition_invokes"] == 1
        assert not mismatches(got, lit).any(), (src, dst, x, got, lit)
        expect = _as_type(want, dst).reshape(shape)
        assert got.dtype == expect.dtype and not mismatches(got, expect).any(), (src, dst, got, expect)
    # CastConstInputCachingWorks: a CAST of a constant int8 [2, 3] gives its values at
    # every invoke (litecl computes it once and writes it to LiteRT's output each time)
    m = cast_model("int8", "float32", [2, 3], constant=np.array([[10, 20, 30], [40, 50, 60]], np.int8))
    it = litecl.Interpreter(model_content=m, device=device, quiet=True)
    it.allocate_tensors()
    assert_on_opencl(it)
    for _ in range(2):
        it.invoke()
        assert it.get_tensor(it.get_output_details()[0]["index"]).ravel().tolist() == [10, 20, 30, 40, 50, 60]


@pytest.mark.parametrize("device", device_params(["pocl", "intel", "oclgrind", "nvidia"]))
def test_half_nan_bits_are_litert_s(device):
    """A NaN converted to float16 is LiteRT's sign | 0x7e00, byte for byte (not only in
    sign): CAST float32/float64 -> float16, float16 ADD, and a fused float32 -> float16 ->
    float32 chain (the float32 NaN sign | 0x7fc00000). pip's PoCL 3.0's vstore_half wrote
    0x7fff / 0xffff (a fresh user's report; 40 of 350 random CAST/ADD graphs differed)."""
    from conftest import invoke_with, litert_outputs
    from models.builders import add_model, chain_model

    # NaNs with payloads too, also on a device with cl_khr_fp16, which converts in half
    # arithmetic (Intel's CPU runtime kept the payloads: 0x7fc12345 -> 0x7e09, a fresh user's
    # report): every half store makes them LiteRT's
    pay = [0x7fc00000, 0xffc00000, 0x3f800000, 0x7f800000, 0, 0x7f800001, 0xffbfffff, 0x7fc12345, 0x7fa00000]
    x = np.tile(np.array(pay, np.uint32).view(np.float32), 8)[:37]  # a vector body and a scalar tail
    cases = [(cast_model("float32", "float16", (37,)), [x]),
             (cast_model("float64", "float16", (37,)), [x.astype(np.float64)]),
             (add_model("float16", (37,), (37,)), [x.astype(np.float16), np.ones(37, np.float16)]),
             (chain_model(["float32", "float16", "float32"], (37,)), [x]),
             (chain_model(["float32", "float16", ("add", np.full(37, 1, np.float16)), "float32"], (37,)), [x])]
    for m, xs in cases:
        it = litecl.Interpreter(model_content=m, device=device, quiet=True)
        it.allocate_tensors()
        assert_on_opencl(it)
        got, want = invoke_with(it, xs), litert_outputs(m, xs)
        for g, w in zip(got, want):
            bits = np.uint16 if w.itemsize == 2 else np.uint32
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), (g.view(bits), w.view(bits))
