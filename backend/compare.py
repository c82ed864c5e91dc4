"""Bit-for-bit comparison with LiteRT, and seeded random inputs.

The contract (../shared/docs/REFERENCE_FACTS.md): every value compares bit for bit (so
-0.0 != +0.0, and bool tensors byte for byte), except that a NaN equals any NaN of the
same sign (NaN payloads differ between devices: LiteRT writes half NaN as 0x7E00,
NVIDIA's vstore_half_rte 0x7FFF).
"""
from __future__ import annotations

import math

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


#: elements compared at a time: the masks and views of a chunk (~10 bytes an element) stay
#: small beside the outputs themselves (a whole 1 GiB float32 output at once held ~1.5 GiB of
#: them, and compare peaked at ~6x the output: a fresh user's report)
CHUNK = 1 << 20


def _flat(a: np.ndarray, b: np.ndarray) -> tuple:
    """(a, b) as 1-D arrays of equal itemsize whose elements compare as stored bits, and
    how many of their elements make one of the caller's (complex: 2 float parts)."""
    a, b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    if a.dtype.kind == "c":  # compare real and imaginary parts as floats
        return a.view(a.real.dtype), b.view(b.real.dtype), 2
    return a, b, 1


def _chunk_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The mismatch mask of two flat chunks (_flat's), per stored element."""
    if a.dtype.itemsize in (1, 2, 4, 8):
        u = _UINT[a.dtype.itemsize]
        diff = a.view(u) != b.view(u)  # bool: the stored bytes, not their truth value
    else:  # long double, strings, records: byte for byte
        n = a.dtype.itemsize
        diff = (a.view(np.uint8).reshape(-1, n) != b.view(np.uint8).reshape(-1, n)).any(axis=1)
    na, nb = _nan_mask(a), _nan_mask(b)
    if na is not None:
        diff &= ~(na & nb & (np.signbit(a) == np.signbit(b)))
    return diff


def _chunks(a: np.ndarray, b: np.ndarray):
    """(start, stop, mismatch mask) over the elements of ``a`` and ``b`` (same dtype and
    shape, not objects), CHUNK elements at a time, in flat order."""
    fa, fb, parts = _flat(a, b)
    step = CHUNK * parts
    for i in range(0, fa.size, step):
        d = _chunk_diff(fa[i:i + step], fb[i:i + step])
        if parts > 1:
            d = d.reshape(-1, parts).any(axis=1)
        yield i // parts, i // parts + d.size, d


def mismatches(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Boolean mask (of ``a``'s shape) of elements that differ: bits (bool: bytes; complex:
    either part), except that NaNs of the same sign are equal. Computed CHUNK elements at
    a time: beside the mask, temporaries of one chunk.

    Raises InputError (a ValueError) when the shapes or dtypes differ: nothing is broadcast
    or converted (int8 -1 and uint8 255 are different tensors, not equal bytes). Callers
    that may get different shapes/dtypes check that first (as ``diff_report`` and
    ``bit_equal`` do)."""
    a, b = np.asarray(a), np.asarray(b)
    _check_same_kind(a, b)
    shape = a.shape
    if a.dtype.kind == "O":  # no stored bits to compare: compare the objects
        return np.frompyfunc(lambda x, y: bool(x != y), 2, 1)(a, b).astype(bool).reshape(shape)
    out = np.empty(a.size, bool)
    for i, j, d in _chunks(a, b):
        out[i:j] = d
    return out.reshape(shape)


def bit_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """True when a and b have the same dtype, shape and bits, except that a NaN equals any
    NaN of the same sign (payloads may differ; -NaN != +NaN, -0.0 != +0.0). Different
    dtypes or shapes give False, not an error. Stops at the first differing chunk."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "O":
        return not mismatches(a, b).any()
    return not any(d.any() for _, _, d in _chunks(a, b))


def diff_report(name: str, got: np.ndarray, want: np.ndarray) -> dict:
    """Per-output comparison: dtype, shape, bit_exact, max_abs_diff, mismatched;
    nan_payloads: NaNs of the same sign whose other bits differ (equal under the
    contract, counted so a byte-for-byte check is not a surprise); nan_signs: the
    mismatched elements that are NaN on both sides (of the other sign).

    A litecl output whose dtype or shape differs from LiteRT's (``litecl_dtype``,
    ``litecl_shape``) is reported as a difference, not an error: bit_exact False,
    max_abs_diff None, every element mismatched. max_abs_diff is None for non-numeric
    tensors (strings). Computed CHUNK elements at a time (memory: one chunk's
    temporaries beside the two tensors)."""
    got, want = np.asarray(got), np.asarray(want)
    rep = {"name": name, "dtype": str(want.dtype), "shape": list(want.shape),
           "litecl_dtype": str(got.dtype), "litecl_shape": list(got.shape)}
    if got.dtype != want.dtype or got.shape != want.shape:
        rep.update(bit_exact=False, max_abs_diff=None, mismatched=int(want.size))
        return rep
    if want.dtype.kind == "O":
        m = mismatches(got, want)
        rep.update(bit_exact=not bool(m.any()), max_abs_diff=None, mismatched=int(m.sum()), nan_payloads=0,
                   nan_signs=0)
        return rep
    numeric, floats = want.dtype.kind in "biufc", _nan_mask(want.reshape(-1)[:0]) is not None and want.dtype.kind != "c"
    g1, w1 = got.reshape(-1), want.reshape(-1)
    bad = payloads = signs = 0
    worst = None  # the largest |got - want| of a mismatch that is not NaN
    for i, j, m in _chunks(got, want):
        n = int(m.sum())
        bad += n
        if n and numeric:
            g, w = g1[i:j][m], w1[i:j][m]
            with np.errstate(all="ignore"):
                if want.dtype.kind == "c":
                    d = np.abs(g.astype(np.complex128) - w.astype(np.complex128))
                else:
                    d = np.abs(g.astype(np.float64) - w.astype(np.float64))
            d = d[~np.isnan(d)]
            if d.size:
                worst = max(float(d.max()), worst if worst is not None else float(d.max()))
        if floats:
            ng, nw = _nan_mask(g1[i:j]), _nan_mask(w1[i:j])
            both = ng & nw
            if both.any():
                u = _UINT[want.dtype.itemsize]
                raw = g1[i:j].view(u) != w1[i:j].view(u)
                payloads += int((raw & both & ~m).sum())
                signs += int((both & m).sum())
    # every mismatch NaN apart (NaN against a number, or NaNs of the other sign): NaN
    mad = None if not numeric else 0.0 if not bad else worst if worst is not None else float("nan")
    rep.update(bit_exact=not bad, max_abs_diff=mad, mismatched=bad, nan_payloads=payloads, nan_signs=signs)
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
