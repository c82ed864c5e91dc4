"""Bit-for-bit comparison with LiteRT, and seeded random inputs.

The contract (../shared/docs/REFERENCE_FACTS.md): every value compares bit for bit (so
-0.0 != +0.0, and bool tensors byte for byte), except that a NaN equals any NaN of the
same sign (NaN payloads differ between devices: LiteRT writes half NaN as 0x7E00,
NVIDIA's vstore_half_rte 0x7FFF).
"""
from __future__ import annotations

import numpy as np

__all__ = ["mismatches", "bit_equal", "random_inputs", "run_reference", "diff_report"]

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}


def _nan_mask(a: np.ndarray) -> np.ndarray | None:
    if a.dtype.kind == "f":
        return np.isnan(a)
    if a.dtype.kind == "c":
        f = a.view(a.real.dtype)
        return np.isnan(f)
    return None


def mismatches(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean mask of elements that differ: bits (bool: bytes), except that NaNs of the
    same sign are equal. Shapes/dtypes must match."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if a.dtype.kind == "c":  # compare real and imaginary parts as floats
        a, b = a.view(a.real.dtype), b.view(b.real.dtype)
    u = _UINT[a.dtype.itemsize]
    diff = a.view(u) != b.view(u)  # bool: the stored bytes, not their truth value
    na, nb = _nan_mask(a), _nan_mask(b)
    if na is not None:
        diff &= ~(na & nb & (np.signbit(a) == np.signbit(b)))
    return diff


def bit_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """True when a and b have the same dtype, shape and bits (any NaN equals any NaN)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return not mismatches(a, b).any()


def diff_report(name: str, got: np.ndarray, want: np.ndarray) -> dict:
    """Per-output comparison: dtype, shape, bit_exact, max_abs_diff, mismatched."""
    got, want = np.asarray(got), np.asarray(want)
    rep = {"name": name, "dtype": str(want.dtype), "shape": list(want.shape),
           "litecl_dtype": str(got.dtype), "litecl_shape": list(got.shape)}
    if got.dtype != want.dtype or got.shape != want.shape:
        rep.update(bit_exact=False, max_abs_diff=None, mismatched=int(want.size))
        return rep
    m = mismatches(got, want)
    if want.size and m.any():
        g, w = got[m], want[m]
        with np.errstate(all="ignore"):
            if want.dtype.kind == "c":
                d = np.abs(g.astype(np.complex128) - w.astype(np.complex128))
            else:
                d = np.abs(g.astype(np.float64) - w.astype(np.float64))
        mad = float(np.nanmax(d)) if np.isfinite(d).any() or not np.isnan(d).all() else float("nan")
    else:
        mad = 0.0
    rep.update(bit_exact=not bool(m.any()), max_abs_diff=mad, mismatched=int(m.sum()))
    return rep


def random_inputs(details, seed: int = 0, full_range: bool = False) -> dict:
    """Seeded inputs for a list of LiteRT-style detail dicts, keyed by tensor name.

    floats: standard normal; bool: fair coin; 8-bit integers: their full range (images,
    quantized activations); wider integers: [0, 10) so they are valid indices and ids.

    full_range: 8- and 16-bit integers uniform over all their values, floats and complex
    numbers random bit patterns (so NaN, inf and subnormals appear); bool and wider
    integers as above.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for d in details:
        dt = np.dtype(d["dtype"])
        shape = tuple(int(x) for x in d["shape"])
        if full_range and (dt.kind in "fc" or (dt.kind in "iu" and dt.itemsize <= 2)):
            n = int(np.prod(shape, dtype=np.int64))
            v = np.frombuffer(rng.bytes(n * dt.itemsize), dtype=dt).reshape(shape).copy()
        elif dt.kind == "f":
            v = rng.standard_normal(shape).astype(dt)
        elif dt.kind == "c":
            v = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
        elif dt == np.bool_:
            v = rng.integers(0, 2, shape).astype(np.bool_)
        elif dt.itemsize == 1:
            info = np.iinfo(dt)
            v = rng.integers(info.min, int(info.max) + 1, shape).astype(dt)
        else:
            v = rng.integers(0, 10, shape).astype(dt)
        out[d["name"]] = v
    return out


def run_reference(model_content: bytes, inputs: dict, signature: str | None = None,
                  num_threads=None, reference: str = "builtin") -> dict:
    """Run the whole model on LiteRT; inputs and outputs keyed by tensor (or signature)
    name. Raises RuntimeError from LiteRT on a failed invoke."""
    from .fallback import make_interpreter  # noqa: PLC0415

    ref = make_interpreter(model_content, num_threads, reference)
    if signature is not None:
        return dict(ref.get_signature_runner(signature)(**inputs))
    details = ref.get_input_details()
    for d in details:
        v = inputs[d["name"]]
        if tuple(d["shape"]) != v.shape:
            ref.resize_tensor_input(d["index"], list(v.shape))
    ref.allocate_tensors()
    for d in details:
        ref.set_tensor(d["index"], inputs[d["name"]])
    ref.invoke()
    return {d["name"]: ref.get_tensor(d["index"]) for d in ref.get_output_details()}
