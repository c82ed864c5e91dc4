"""Bit-for-bit comparison with LiteRT, and seeded random inputs.

The contract (../shared/docs/REFERENCE_FACTS.md): every value compares bit for bit (so
-0.0 != +0.0, and bool tensors byte for byte), except that a NaN equals any NaN of the
same sign (NaN payloads differ between devices: LiteRT writes half NaN as 0x7E00,
NVIDIA's vstore_half_rte 0x7FFF).
"""
from __future__ import annotations

import numpy as np

from .errors import InputError, ModelError

__all__ = ["mismatches", "bit_equal", "random_inputs", "run_reference", "reference_outputs", "diff_report"]

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _nan_mask(a: np.ndarray) -> np.ndarray | None:
    if a.dtype.kind == "f":
        return np.isnan(a)
    if a.dtype.kind == "c":
        f = a.view(a.real.dtype)
        return np.isnan(f)
    if a.dtype.name == "bfloat16":  # ml_dtypes' (kind "V"): the same NaN rule as the floats
        return np.isnan(a.astype(np.float32))
    return None


def _check_same_kind(a: np.ndarray, b: np.ndarray) -> None:
    if a.dtype != b.dtype or a.shape != b.shape:
        raise InputError(f"cannot compare bit for bit: dtype {a.dtype} shape {list(a.shape)} vs "
                         f"dtype {b.dtype} shape {list(b.shape)}; dtypes and shapes must be equal")


def mismatches(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean mask (of ``a``'s shape) of elements that differ: bits (bool: bytes; complex:
    either part), except that NaNs of the same sign are equal.

    Raises InputError (a ValueError) when the shapes or dtypes differ: nothing is broadcast
    or converted (int8 -1 and uint8 255 are different tensors, not equal bytes). Callers
    that may get different shapes/dtypes check that first (as ``diff_report`` and
    ``bit_equal`` do)."""
    a, b = np.asarray(a), np.asarray(b)
    _check_same_kind(a, b)
    shape = a.shape
    if a.dtype.kind == "O":  # no stored bits to compare: compare the objects
        return np.frompyfunc(lambda x, y: bool(x != y), 2, 1)(a, b).astype(bool).reshape(shape)
    a, b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    parts = 1
    if a.dtype.kind == "c":  # compare real and imaginary parts as floats
        a, b, parts = a.view(a.real.dtype), b.view(b.real.dtype), 2
    if a.dtype.itemsize in (1, 2, 4, 8):
        u = _UINT[a.dtype.itemsize]
        diff = a.view(u) != b.view(u)  # bool: the stored bytes, not their truth value
    else:  # long double, strings, records: byte for byte
        n = a.dtype.itemsize
        diff = (a.view(np.uint8).reshape(-1, n) != b.view(np.uint8).reshape(-1, n)).any(axis=1)
    na, nb = _nan_mask(a), _nan_mask(b)
    if na is not None:
        diff &= ~(na & nb & (np.signbit(a) == np.signbit(b)))
    if parts > 1:
        diff = diff.reshape(-1, parts).any(axis=1)
    return diff.reshape(shape)


def bit_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """True when a and b have the same dtype, shape and bits, except that a NaN equals any
    NaN of the same sign (payloads may differ; -NaN != +NaN, -0.0 != +0.0). Different
    dtypes or shapes give False, not an error."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return not mismatches(a, b).any()


def diff_report(name: str, got: np.ndarray, want: np.ndarray) -> dict:
    """Per-output comparison: dtype, shape, bit_exact, max_abs_diff, mismatched;
    nan_payloads: NaNs of the same sign whose other bits differ (equal under the
    contract, counted so a byte-for-byte check is not a surprise); nan_signs: the
    mismatched elements that are NaN on both sides (of the other sign).

    A litecl output whose dtype or shape differs from LiteRT's (``litecl_dtype``,
    ``litecl_shape``) is reported as a difference, not an error: bit_exact False,
    max_abs_diff None, every element mismatched. max_abs_diff is None for non-numeric
    tensors (strings)."""
    got, want = np.asarray(got), np.asarray(want)
    rep = {"name": name, "dtype": str(want.dtype), "shape": list(want.shape),
           "litecl_dtype": str(got.dtype), "litecl_shape": list(got.shape)}
    if got.dtype != want.dtype or got.shape != want.shape:
        rep.update(bit_exact=False, max_abs_diff=None, mismatched=int(want.size))
        return rep
    m = mismatches(got, want)
    if want.dtype.kind not in "biufc":
        mad = None
    elif want.size and m.any():
        g, w = got[m], want[m]
        with np.errstate(all="ignore"):
            if want.dtype.kind == "c":
                d = np.abs(g.astype(np.complex128) - w.astype(np.complex128))
            else:
                d = np.abs(g.astype(np.float64) - w.astype(np.float64))
        mad = float(np.nanmax(d)) if np.isfinite(d).any() or not np.isnan(d).all() else float("nan")
    else:
        mad = 0.0
    rep.update(bit_exact=not bool(m.any()), max_abs_diff=mad, mismatched=int(m.sum()), nan_payloads=0, nan_signs=0)
    ng, nw = _nan_mask(got), _nan_mask(want)
    if ng is not None and want.dtype.kind != "c" and (ng & nw).any():
        both = ng & nw
        raw = got.reshape(-1).view(_UINT[got.dtype.itemsize]) != want.reshape(-1).view(_UINT[want.dtype.itemsize])
        rep["nan_payloads"] = int((raw.reshape(both.shape) & both & ~m).sum())
        rep["nan_signs"] = int((both & m).sum())
    return rep


def random_inputs(details, seed: int = 0, full_range: bool = False) -> dict:
    """Seeded inputs for a list of LiteRT-style detail dicts, keyed by tensor name.

    floats: standard normal; bool: fair coin; 8-bit integers: their full range (images,
    quantized activations); wider integers: [0, 10) so they are valid indices and ids.

    full_range: every integer type (int8 .. int64, uint8 .. uint64) uniform over all its
    values, so int32/int64 wrap-around and saturation are exercised; floats and complex
    numbers random bit patterns (so NaN, inf and subnormals appear); bool as above.
    Integer inputs a model uses as indices or sizes are then mostly out of range.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for d in details:
        dt = np.dtype(d["dtype"])
        shape = tuple(int(x) for x in d["shape"])
        if full_range and dt.kind in "fciu":
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


def make_interpreter(content: bytes, num_threads=None, reference: str = "builtin",
                     preserve_all_tensors: bool = False, delegates=None):
    """LiteRT's own Interpreter over model bytes with the op resolver named by
    ``reference`` (litecl.interpreter.REFERENCES) and ``delegates`` (e.g. a
    litecl.Delegate) first. Raises LiteclError for an unknown reference."""
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    from .interpreter import _resolve_reference, resolver_type  # noqa: PLC0415

    return Interpreter(model_content=content, num_threads=num_threads,
                       experimental_delegates=list(delegates or []),
                       experimental_op_resolver_type=resolver_type(_resolve_reference(reference, None)),
                       experimental_preserve_all_tensors=preserve_all_tensors)


def run_outputs(interp, inputs: dict, signature: str | None = None) -> list:
    """Run ``interp`` (any LiteRT-API Interpreter) on ``inputs`` keyed by tensor (or
    signature input) name, resizing inputs whose shape differs. Returns [(name, array)]
    in output order (two outputs may share a name)."""
    if signature is not None:
        return list(interp.get_signature_runner(signature)(**inputs).items())
    details = interp.get_input_details()
    for d in details:
        v = inputs[d["name"]]
        if tuple(d["shape"]) != v.shape:
            interp.resize_tensor_input(d["index"], list(v.shape))
    interp.allocate_tensors()
    for d in details:
        interp.set_tensor(d["index"], inputs[d["name"]])
    interp.invoke()
    out = []
    for d in interp.get_output_details():
        try:
            out.append((d["name"], interp.get_tensor(d["index"])))
        except ValueError as e:  # LiteRT's own refusal, e.g. "Invalid tensor size." for an
            # output of no elements that no operator writes and the model gives no data
            raise ModelError(f"LiteRT cannot read output {d['name']!r} ({np.dtype(d['dtype']).name}"
                             f"{[int(x) for x in d['shape']]}): {e}") from None
    return out


def reference_outputs(model_content: bytes, inputs: dict, signature: str | None = None,
                      num_threads=None, reference: str = "builtin") -> list:
    """Run the whole model on LiteRT alone (``run_outputs``). Raises RuntimeError from
    LiteRT on a failed invoke."""
    return run_outputs(make_interpreter(model_content, num_threads, reference), inputs, signature)
def run_reference(model_content: bytes, inputs: dict, signature: str | None = None,
                  num_threads=None, reference: str = "builtin") -> dict:
    """``reference_outputs`` as a dict keyed by output name (the last of two outputs
    with one name wins: use reference_outputs where names may repeat)."""
    return dict(reference_outputs(model_content, inputs, signature, num_threads, reference))
