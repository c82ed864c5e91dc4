"""Software float64: OpenCL C functions that convert float64 values held as ``ulong`` bits.

Many mobile GPUs lack cl_khr_fp64, but TFLite models can hold float64 tensors. Without the
extension a float64 tensor is stored as ``ulong`` bit patterns (see ``dtypes.py``) and every
conversion to or from it is done here with integer operations (and ``as_float``/``as_uint``
to move float32 bits), so the results are bit-exact with IEEE-754 and with LiteRT's CAST
(REFERENCE_FACTS.md) on any device, whatever its float denormal or rounding support.

Each public generator below is pure and returns the text of one OpenCL C 1.2 function; no
device is touched and the word for the 64-bit float type never appears in the text, so no
pragma is needed. ``source(names)`` assembles the functions a kernel calls plus their
dependencies, each once, in dependency order::

    prelude = softf64.source(["litecl_f64_to_f32"])   # also emits litecl_shr_rne
    kernel = prelude + "__kernel void k(...) { ... litecl_f64_to_f32(x[i]) ... }"

OpenCL C functions (all names start with ``litecl_``):

==========================  =========================================================
``litecl_f64_to_f32``       ``float (ulong bits)``: round to nearest even
``litecl_f64_to_long_sat``  ``long (ulong bits, long lo, long hi)``: trunc, saturate
``litecl_f64_nonzero``      ``int (ulong bits)``: ``x != 0`` (NaN 1, -0.0 0)
``litecl_long_to_f64``      ``ulong (long v)``: round to nearest even
``litecl_ulong32_to_f64``   ``ulong (uint v)``: exact
``litecl_f32_to_f64``       ``ulong (float x)``: exact
``litecl_shr_rne``          ``ulong (ulong m, uint s)``: helper, ``m / 2^s`` rounded
==========================  =========================================================

The functions are plain (neither ``static`` nor ``inline``): C99 ``inline`` semantics make
some OpenCL 1.2 compilers leave an external definition missing, and a program includes each
function once anyway. They use ``long``/``ulong``, which the OpenCL embedded profile makes
optional (cles_khr_int64); the full profile always has them.
"""
from __future__ import annotations

from typing import Callable, Iterable

__all__ = [
    "shr_rne",
    "f64_to_f32_rte",
    "f64_to_long_sat",
    "f64_is_nonzero",
    "long_to_f64_rte",
    "ulong32_to_f64",
    "f32_to_f64",
    "NAMES",
    "source",
]


def shr_rne() -> str:
    """``ulong litecl_shr_rne(ulong m, uint s)``: ``m / 2^s`` rounded to nearest, ties to even.

    ``s`` must be in [1, 63] (OpenCL masks shift counts to the operand width, so 64 would
    shift by 0). The shared rounding step of the narrowing conversions.
    """
    return """\
ulong litecl_shr_rne(ulong m, uint s)
{
    /* m / 2^s rounded to nearest, ties to even; s in [1, 63]. */
    ulong q = m >> s;
    ulong rem = m & ((1UL << s) - 1UL);
    ulong tie = 1UL << (s - 1u);
    return q + ((rem > tie || (rem == tie && (q & 1UL) != 0UL)) ? 1UL : 0UL);
}
"""


def f64_to_f32_rte() -> str:
    """``float litecl_f64_to_f32(ulong bits)``: float64 bits -> float32, round to nearest even.

    IEEE-754 ``convertFormat`` as numpy's ``astype(np.float32)`` and LiteRT's CAST compute
    it: float32 subnormal results are rounded, not flushed (1e-40 -> 0x000116C2, 7e-46 -> 0,
    1e-45 -> 0x00000001); |x| >= FLT_MAX + half an ulp (3.4028235677973366e38, a tie that
    rounds to the even 2^128) gives +-inf; float64 subnormals give +-0.0; -0.0 stays -0.0;
    inf stays inf; NaN gives a quiet NaN (payload: the top mantissa bits). The result is
    built with ``as_float(uint)``, never with float arithmetic a device might flush to zero.
    Depends on ``litecl_shr_rne``.
    """
    return """\
float litecl_f64_to_f32(ulong bits)
{
    uint sign = (uint)(bits >> 32) & 0x80000000u;
    ulong a = bits & 0x7FFFFFFFFFFFFFFFUL;    /* |x| */
    ulong frac = bits & 0x000FFFFFFFFFFFFFUL;
    uint mag;
    /* Classified by comparing |x| bits, not by a test on the exponent field: Oclgrind 21.10
       mis-evaluates the `switch` on an i11 that LLVM makes of such a test (-NaN -> -inf). */
    if (a >= 0x7FF0000000000000UL) {
        /* inf stays inf; NaN stays a (quiet) NaN */
        mag = 0x7F800000u | (frac != 0UL ? 0x00400000u | (uint)(frac >> 29) : 0u);
    } else if (a < 0x0010000000000000UL) {
        /* +-0 and float64 subnormals (< 2^-1022, far below half the least float32 subnormal) */
        mag = 0u;
    } else {
        int e = (int)(a >> 52) - 1023 + 127;   /* float32 biased exponent, unrounded value */
        ulong m = frac | 0x0010000000000000UL; /* 53-bit significand: |x| = m * 2^(e-150) */
        /* Normal result: keep 24 bits (shift 29). Subnormal result (e <= 0): the unit is
           2^-149, so shift 30 - e. From 54 on the result is 0 whatever m is (m < 2^53 is
           below the tie point), and the shift must stay under 64. */
        int shift = e > 0 ? 29 : 30 - e;
        shift = shift > 54 ? 54 : shift;
        uint q = (uint)litecl_shr_rne(m, (uint)shift);
        /* Normal: q in [2^23, 2^24] holds the implicit bit, so adding (e-1) << 23 sets the
           exponent, and a carry out of rounding moves into it (254 -> 255 is inf).
           Subnormal: q in [0, 2^23]; q == 2^23 is the least normal, also right.
           e >= 255 overflows whatever the rounding. */
        mag = e >= 0xFF ? 0x7F800000u : (e > 0 ? ((uint)(e - 1) << 23) : 0u) + q;
    }
    /* one reinterpretation at the end: no float value is ever selected or merged, so no
       compiler can canonicalise a NaN or flush a subnormal on the way */
    return as_float(sign | mag);
}
"""


def f64_to_long_sat() -> str:
    """``long litecl_f64_to_long_sat(ulong bits, long lo, long hi)``: truncate, then saturate.

    LiteRT's float -> integer CAST rule (REFERENCE_FACTS.md): truncation toward zero, then
    clamping to [lo, hi]; NaN -> hi, +inf -> hi, -inf -> lo. lo/hi are the destination
    type's range (-128/127, 0/4294967295, LONG_MIN/LONG_MAX, ...); a uint64 destination
    cannot be expressed (TFLite CAST has none). Never uses an implementation-defined
    float -> integer conversion.
    """
    return """\
long litecl_f64_to_long_sat(ulong bits, long lo, long hi)
{
    int neg = (int)(bits >> 63);
    ulong a = bits & 0x7FFFFFFFFFFFFFFFUL;    /* |x| */
    long v;
    /* |x| bits compared, not the exponent field (see litecl_f64_to_f32: Oclgrind) */
    if (a > 0x7FF0000000000000UL) {
        return hi;                       /* NaN -> hi (LiteRT) */
    }
    if (a >= 0x43E0000000000000UL) {
        /* |x| >= 2^63 (inf included): above any hi, or at/below LONG_MIN <= any lo */
        return neg ? lo : hi;
    }
    if (a < 0x3FF0000000000000UL) {
        v = 0L;                          /* |x| < 1 truncates to 0 (also -0.0, subnormals) */
    } else {
        int e = (int)(a >> 52) - 1023;   /* |x| in [2^e, 2^(e+1)), e in [0, 62] */
        ulong m = (a & 0x000FFFFFFFFFFFFFUL) | 0x0010000000000000UL;
        ulong mag = e >= 52 ? m << (uint)(e - 52) : m >> (uint)(52 - e);  /* < 2^63 */
        v = neg ? -(long)mag : (long)mag;
    }
    return v < lo ? lo : (v > hi ? hi : v);
}
"""


def f64_is_nonzero() -> str:
    """``int litecl_f64_nonzero(ulong bits)``: ``x != 0`` as 1/0 (NaN 1, -0.0 0, subnormal 1).

    The float64 -> bool CAST (REFERENCE_FACTS.md: ``x != 0``).
    """
    return """\
int litecl_f64_nonzero(ulong bits)
{
    /* every bit but the sign: +-0 is the only zero */
    return (bits & 0x7FFFFFFFFFFFFFFFUL) != 0UL ? 1 : 0;
}
"""


def long_to_f64_rte() -> str:
    """``ulong litecl_long_to_f64(long v)``: int64 -> float64 bits, round to nearest even.

    Exact for |v| <= 2^53; above, ties go to the even significand (2^53 + 1 -> 2^53,
    2^53 + 3 -> 2^53 + 4), as numpy's ``astype(np.float64)``. LONG_MIN gives -2^63; 0 gives
    +0.0. Narrower signed integers (and uint8/uint16) widen to long first.
    Depends on ``litecl_shr_rne``.
    """
    return """\
ulong litecl_long_to_f64(long v)
{
    if (v == 0L) {
        return 0UL;
    }
    /* the sign bit itself, not v < 0L ? ...: Mesa's rusticl 22.3 compares a long
       sign-extended from an int with 0 as if unsigned (int32 -1 -> +1.0, measured) */
    ulong sign = as_ulong(v) & 0x8000000000000000UL;
    /* the builtin abs returns ulong: LONG_MIN -> 2^63, no overflow. (A hand-written
       v < 0 ? -v : v becomes llvm.abs.i64, which Oclgrind 21.10 cannot run.) */
    ulong mag = abs(v);
    uint lz = (uint)clz(mag);
    uint msb = 63u - lz;                 /* value in [2^msb, 2^(msb+1)) */
    /* Put the leading 1 at bit 63, keep 53 bits. q in [2^52, 2^53]; a carry out of
       rounding (q == 2^53) moves into the exponent when added below. */
    ulong q = litecl_shr_rne(mag << lz, 11u);
    return sign | (((ulong)(msb + 1022u) << 52) + q);
}
"""


def ulong32_to_f64() -> str:
    """``ulong litecl_ulong32_to_f64(uint v)``: uint32 -> float64 bits, exact (32 < 53 bits)."""
    return """\
ulong litecl_ulong32_to_f64(uint v)
{
    if (v == 0u) {
        return 0UL;
    }
    uint msb = 31u - (uint)clz(v);
    /* significand with its implicit bit at 52; adding the exponent field minus one
       absorbs that bit */
    ulong m = (ulong)v << (52u - msb);
    return ((ulong)(msb + 1022u) << 52) + m;
}
"""


def f32_to_f64() -> str:
    """``ulong litecl_f32_to_f64(float x)``: float32 -> float64 bits, exact, from ``as_uint(x)``.

    float32 subnormals are normalised with ``clz`` (they are normal float64 values), so a
    device without float denormals still converts them; +-inf stays +-inf, NaN stays a NaN
    (payload shifted into the top mantissa bits, so never an inf), -0.0 stays -0.0.
    """
    return """\
ulong litecl_f32_to_f64(float x)
{
    uint b = as_uint(x);
    ulong sign = (ulong)(b & 0x80000000u) << 32;
    uint a = b & 0x7FFFFFFFu;                  /* |x| */
    uint frac = b & 0x007FFFFFu;
    /* |x| bits compared, not the exponent field (see litecl_f64_to_f32: Oclgrind) */
    if (a >= 0x7F800000u) {
        /* inf, or NaN with a non-zero payload that stays non-zero */
        return sign | 0x7FF0000000000000UL | ((ulong)frac << 29);
    }
    if (a < 0x00800000u) {
        if (a == 0u) {
            return sign;
        }
        /* subnormal: frac * 2^-149 = 2^(msb-149) * 1.f, a normal float64 */
        uint msb = 31u - (uint)clz(frac);        /* in [0, 22] */
        ulong m = (ulong)frac << (52u - msb);    /* implicit bit at 52 */
        return sign | (((ulong)(msb + 1023u - 149u - 1u) << 52) + m);
    }
    /* normal: rebias the exponent (+896), widen the fraction */
    return sign | (((ulong)a << 29) + ((ulong)(1023u - 127u) << 52));
}
"""


# OpenCL C name -> (generator, OpenCL C names it calls). Dependencies come first in the
# output of ``source``.
_FUNCTIONS: dict[str, tuple[Callable[[], str], tuple[str, ...]]] = {
    "litecl_shr_rne": (shr_rne, ()),
    "litecl_f64_to_f32": (f64_to_f32_rte, ("litecl_shr_rne",)),
    "litecl_f64_to_long_sat": (f64_to_long_sat, ()),
    "litecl_f64_nonzero": (f64_is_nonzero, ()),
    "litecl_long_to_f64": (long_to_f64_rte, ("litecl_shr_rne",)),
    "litecl_ulong32_to_f64": (ulong32_to_f64, ()),
    "litecl_f32_to_f64": (f32_to_f64, ()),
}

#: Every OpenCL C function name ``source`` knows, in definition order.
NAMES: tuple[str, ...] = tuple(_FUNCTIONS)


def source(names: Iterable[str] | str) -> str:
    """OpenCL C text defining the functions ``names`` and their dependencies.

    names: OpenCL C function names (see ``NAMES``), e.g. ``["litecl_f64_to_f32"]``; a single
    name may be passed as a string. Each function appears once, dependencies before their
    callers, otherwise in the order requested, so the same request always gives the same
    text (usable as part of a kernel cache key). An empty request gives "".
    Raises ValueError naming an unknown function and the known ones.
    """
    if isinstance(names, str):
        names = [names]
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        if name not in _FUNCTIONS:
            raise ValueError(
                f"unknown soft-float64 function {name!r}; known: {', '.join(NAMES)}"
            )
        generator, deps = _FUNCTIONS[name]
        for dep in deps:
            visit(dep)
        order.append(name)

    for name in names:
        visit(name)
    return "\n".join(_FUNCTIONS[name][0]() for name in order)
