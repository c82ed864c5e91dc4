"""Quantized ADD (int8, uint8, int16) as LiteRT computes it, bit for bit.

A port of TFLite's ``tensorflow/lite/kernels/add.cc`` (Prepare and EvalAddQuantized),
``reference_integer_ops::AddFunc`` / ``reference_ops::AddElementwise`` (the general path),
``reference_ops::Add`` for int16 with power-of-two scales (the POT path), and the fixed-point
helpers of ``kernels/internal/common.h``, ``quantization_util.cc`` and gemmlowp
(``SaturatingRoundingDoublingHighMul``, ``RoundingDivideByPOT``,
``MultiplyByQuantizedMultiplier[SmallerThanOneExp]``, ``QuantizeMultiplier``,
``CalculateActivationRangeQuantized``, ``CheckedLog2``).

Three layers, all pure (no device access):

- :func:`quant_add_params` does Prepare: every integer the kernel uses, or a
  :class:`QuantizationError` for what LiteRT refuses.
- :func:`quant_add_reference` is the kernel in numpy int64 arithmetic, with int32/int16
  wrap-around emulated where the C++ stores into those types.
- :func:`quant_add_cl_functions` / :func:`quant_add_cl_expr` give OpenCL C 1.2 text that
  computes the same bits on a device (``int``/``long`` arithmetic, or ``int`` alone for
  a device without 64-bit integers).

What LiteRT 2.3.0 (ai-edge-litert, x86-64) computes, measured here with the reference
kernels (``OpResolverType.BUILTIN_REF``; tests/test_add_quant.py re-checks each point):

- int8/uint8: the general path with ``left_shift`` 20. int16: the general path with
  ``left_shift`` 15 when ``pot_scale_int16`` is false or a scale is not within 1e-3 (in log2)
  of a power of two -- the a16w8 model's scales (3.0492e-05 = 2**-15.0012) just miss it.
- int16 with ``pot_scale_int16`` true (the schema default; every model here has it) and all
  three scales within 1e-3 of a power of two: the POT path, which ignores the scales' exact
  values and shifts one input right by the difference of the rounded log2s. LiteRT aborts
  the process on a broadcasting POT ADD (MatchingElementsSize): see :func:`quant_add_why_not`.
- ``MultiplyByQuantizedMultiplier`` is the *double rounding* variant (TFLITE_SINGLE_ROUNDING
  undefined): on thousands of elements where the two variants differ, LiteRT gave the
  double-rounding value every time. ``rounding="single"`` gives the TFLM/CMSIS variant.
- Prepare aborts (TFLITE_CHECK) when 2 * max input scale / (2**left_shift * output scale)
  >= 1, and fails on an activation bound that overflows int32 and on int16 zero points != 0.

LiteRT's builtin kernels (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``: add.cc kGenericOptimized)
compute other bits on some elements of the general path: their loops run a SIMD body over
blocks of 16 or 8 elements and the reference formula on the rest (:func:`quant_add_simd_rule`
says which elements, :func:`quant_add_reference` and :func:`quant_add_cl_expr` compute
either kernel's bits, ``reference="builtin"`` or ``"ref"``). The x86-64 wheel defines
USE_NEON (NEON_2_SSE) and not __AVX2__, so the bodies are the NEON ones (measured: the AVX2
body of AddElementwiseInt16, which floors the multiply, differs on 103 of 65536 elements
where the NEON one differs on none). Sources: tflite/kernels/add.cc EvalAddQuantized,
internal/optimized/integer_ops/add.h (AddElementwiseInt8, AddElementwiseInt16,
AddScalarBroadcast), internal/optimized/optimized_ops.h (uint8 AddElementwise,
AddScalarBroadcast, BinaryBroadcastFiveFold), reference/process_broadcast_shapes.h:

- the reference kernel rescales an input as RoundingDivideByPOT(SRDHM(x << left_shift, m),
  -shift): two roundings. The SIMD bodies instead compute ``combined_shift``
  SRDHM(x << (left_shift + shift), m) -- one rounding (int8 AddElementwiseInt8, int16
  AddElementwiseInt16; with left_shift + shift < 0 an arithmetic, flooring, right shift of
  x first) -- or ``shift_after`` SRDHM(x << left_shift, m) >> -shift, flooring (uint8
  AddElementwise, int8/uint8 AddScalarBroadcast). vqrdmulh is SRDHM bit for bit, and the
  output stage (SRDHM, RoundingDivideByPOT, zero point, clamp) is the reference one, except
  that the 8-bit bodies narrow the rescaled sum to int16 without saturation and add the
  zero point in int16 (vmovn_s32, vaddq_s16) before saturating to 8 bits: a result far
  outside the type can come out with the wrong sign.
- which elements: same (extended) shapes: one loop over the flat tensor. A broadcast that
  ProcessBroadcastShapes fits in the fivefold loop (8-bit only): the elementwise body over
  each run of y4 output elements, or, with y4 == 1, AddScalarBroadcast over each run of y3.
  In a run of L elements the first L - L % block (block 16 or 8) take the SIMD body. Other
  broadcasts, every int16 broadcast (reference_ops::BroadcastAdd6DSlow) and the int16 POT
  path compute the reference formula.
- how often they differ (SIMD elements, random full-range operands): on
  simple_quantized_ops.tflite's int16 ADD (scales 2.96e-4, 1.39e-4 -> 3.83e-4; input 2's
  shift -2) by 1 on about 1 in 200,000 operand pairs (1 of the model's 102400 output
  elements on seeded full-range inputs), where the rescaled input 2 is near a rounding
  tie; with int8 scales 0.05, 0.08 -> 0.1 on ~0.9% of elements, uint8 ~0.8%; with
  8-bit output scales ~1000x finer than the inputs' on ~45% (the int16 wrap).
- AUTO and BUILTIN (``reference="xnnpack"``) hand int8/uint8 ADDs to XNNPACK, which differs
  by 1 on some near-ties (8 of 865536 elements over Coral's ADD configurations, 6 of 1.28M
  over MoveNet's); litecl follows the builtin kernels there. int16 ADDs stay on the builtin
  kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .broadcast import fivefold

__all__ = [
    "QuantizationError",
    "QuantAddParams",
    "quant_add_params",
    "quant_add_reference",
    "quant_add_cl_functions",
    "quant_add_cl_expr",
    "quant_add_why_not",
    "quant_add_simd_rule",
    "QuantSimdRule",
    "KERNELS",
    "ACTIVATIONS",
    "QUANT_DTYPES",
    "LITERT_ROUNDING",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1

#: Output types of the quantized ADD and their storage range (numeric_limits in add.cc).
QUANT_DTYPES: dict[str, tuple[int, int]] = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
}
_NUMPY = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16}

#: Fused activations TFLite's quantized ADD accepts (TfLiteFusedActivation names).
ACTIVATIONS: tuple[str, ...] = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")

#: The MultiplyByQuantizedMultiplier variant of the LiteRT build this port matches
#: (ai-edge-litert 2.3.0: TFLITE_SINGLE_ROUNDING undefined, measured).
LITERT_ROUNDING = "double"

#: Which LiteRT kernels litecl matches where they differ (Caps.reference, the delegate's
#: ``reference=``): "ref" BUILTIN_REF's reference kernels; "builtin" the builtin
#: (optimized) kernels, which "xnnpack" also runs for the ADDs XNNPACK does not take.
KERNELS = ("builtin", "ref", "xnnpack")

#: The SIMD bodies of LiteRT's optimized quantized ADD loops on x86-64 (NEON via
#: NEON_2_SSE): (dtype, loop) -> (input rescale form, block), loop "elementwise" (same
#: shapes, or a fivefold broadcast's inner run of y4 > 1) or "scalar" (y4 == 1: one operand
#: a scalar over each run of y3). See the module docstring for the forms.
_SIMD_BODIES: dict[tuple[str, str], tuple[str, int]] = {
    ("int8", "elementwise"): ("combined_shift", 16),   # integer_ops AddElementwiseInt8
    ("int16", "elementwise"): ("combined_shift", 16),  # integer_ops AddElementwiseInt16
    ("uint8", "elementwise"): ("shift_after", 8),      # optimized_ops AddElementwise
    ("int8", "scalar"): ("shift_after", 8),            # integer_ops AddScalarBroadcast
    ("uint8", "scalar"): ("shift_after", 8),           # optimized_ops AddScalarBroadcast
}


class QuantizationError(ValueError):
    """Quantization parameters LiteRT's ADD kernel refuses (Prepare fails or aborts) or for
    which its arithmetic is undefined. The message is a one-line reason."""


@dataclass(frozen=True)
class QuantAddParams:
    """Every integer LiteRT's quantized ADD kernel uses (tflite::ArithmeticParams).

    dtype: "int8", "uint8" or "int16" (both inputs and the output).
    path: "general" (reference_integer_ops::AddFunc: rescale both inputs to a shared scale
        with ``left_shift`` extra bits, add, rescale to the output) or "pot_int16"
        (reference_ops::Add for int16 with power-of-two scales: shift one input right,
        saturating add).
    rounding: "double" (gemmlowp SaturatingRoundingDoublingHighMul + RoundingDivideByPOT,
        LiteRT's) or "single" (TFLITE_SINGLE_ROUNDING: one 64-bit multiply and shift).
    input1_offset, input2_offset: minus the input zero points; output_offset: the output
        zero point (0 on the POT path).
    left_shift: 20 for 8-bit, 15 for int16 general, 0 on the POT path.
    input{1,2}_multiplier / input{1,2}_shift: Q31 multipliers and (<= 0) exponents of
        scale_i / (2 * max(scale1, scale2)); on the POT path the multipliers are 0 and the
        shifts are log2(scale_i) - log2(scale_out), rounded (<= 0, at least one is 0).
    output_multiplier / output_shift: Q31 multiplier and exponent of
        2 * max(scale1, scale2) / (2**left_shift * scale_out) (0 and 0 on the POT path).
    activation_min, activation_max: the clamp (CalculateActivationRangeQuantized).
    """

    dtype: str
    path: str
    rounding: str
    input1_offset: int
    input2_offset: int
    output_offset: int
    left_shift: int
    input1_multiplier: int
    input1_shift: int
    input2_multiplier: int
    input2_shift: int
    output_multiplier: int
    output_shift: int
    activation_min: int
    activation_max: int


# --------------------------------------------------------------------------------------
# Prepare (add.cc) and quantization_util.cc
# --------------------------------------------------------------------------------------

def _round_half_away(x: float) -> int:
    """TfLiteRound / std::round: half away from zero (x exact in a double)."""
    r = math.floor(abs(x) + 0.5)
    return int(-r if x < 0 else r)


def quantize_multiplier(real: float, rounding: str = LITERT_ROUNDING) -> tuple[int, int]:
    """tflite::QuantizeMultiplier: (q, shift) with real ~= q * 2**(shift - 31), q in
    [2**30, 2**31) (or 0). std::frexp + std::round on a double; a shift below -31 flushes
    to (0, 0); TFLITE_SINGLE_ROUNDING also saturates a shift above 30."""
    if real == 0.0:
        return 0, 0
    mant, shift = math.frexp(real)
    q = _round_half_away(mant * (1 << 31))
    if q > (1 << 31):  # TFLITE_CHECK
        raise QuantizationError(f"multiplier {real!r} does not quantize")
    if q == (1 << 31):
        q //= 2
        shift += 1
    if shift < -31:
        shift, q = 0, 0
    if rounding == "single" and shift > 30:
        shift, q = 30, (1 << 31) - 1
    return q, shift


def quantize_multiplier_smaller_than_one_exp(real: float, rounding: str = LITERT_ROUNDING
                                             ) -> tuple[int, int]:
    """tflite::QuantizeMultiplierSmallerThanOneExp: QuantizeMultiplier for 0 < real < 1,
    so the shift (a left shift, applied as a right shift) is <= 0."""
    if not 0.0 < real < 1.0:  # TFLITE_CHECK_LT / TFLITE_CHECK_GT: LiteRT aborts
        raise QuantizationError(f"input multiplier {real!r} outside (0, 1)")
    q, shift = quantize_multiplier(real, rounding)
    if shift > 0:
        raise QuantizationError(f"input multiplier {real!r} has a positive shift")
    return q, shift


def _f32(x: float) -> np.float32:
    return np.float32(x)


def checked_log2(x: float) -> tuple[bool, int]:
    """tflite::CheckedLog2 on a float: (|log2(x) - round(log2(x))| < 1e-3, round(log2(x))).

    The C++ computes ``std::log(float) * (1.0f / std::log(2.0f))`` in float; std::log on a
    float (glibc logf) is correctly rounded, so the float32 rounding of the exact double log
    gives the same float."""
    xf = _f32(x)
    log_x = _f32(math.log(float(xf)))
    inv_log2 = _f32(1.0) / _f32(math.log(2.0))  # std::log(2.0f) is a float too
    x_log2 = _f32(log_x * inv_log2)
    rounded = _f32(_round_half_away(float(x_log2)))
    frac = _f32(x_log2 - rounded)
    return bool(abs(float(frac)) < 1e-3), int(rounded)


def general_multipliers_abort(s1: float, s2: float, so: float, left_shift: int) -> str | None:
    """Why LiteRT's quantized ADD Prepare aborts on these positive finite float32 scales
    (input1, input2, output), or None. tflite/kernels/add.cc computes, with float32
    operands (``2 *`` and ``(1 << left_shift) *`` multiply a float, so they overflow to
    inf at 3.4e38) widened to double only afterwards:

        twice_max = double(2 * max(s1, s2))                    # float32 product
        real_input_i = s_i / twice_max
        real_output = twice_max / double((1 << left_shift) * so)  # float32 product

    and QuantizeMultiplierSmallerThanOneExp checks 0 < multiplier < 1 for each (a failed
    TFLITE_CHECK is abort()). An output scale above 3.4e38 / 2**left_shift (3.2e32 for
    8-bit) makes the divisor inf and the multiplier 0; an input scale above 1.7e38 makes
    twice_max inf and the input multipliers 0; an output scale too small for the inputs
    gives a multiplier >= 1. left_shift: 20 for 8-bit, 15 for int16's general path."""
    with np.errstate(over="ignore"):
        twice_max = float(_f32(2) * max(_f32(s1), _f32(s2)))
        denom = float(_f32(1 << left_shift) * _f32(so))
    with np.errstate(all="ignore"):
        ins = [float(np.float64(_f32(s)) / np.float64(twice_max)) for s in (s1, s2)]
        out = float(np.float64(twice_max) / np.float64(denom))
    if not all(0 < m < 1 for m in ins):
        return (f"2 * max(input scales) overflows float32 (input multipliers {ins[0]:g}, "
                f"{ins[1]:g}; LiteRT aborts unless each is in (0, 1))")
    if not 0 < out < 1:
        why = "output scale too small for the input scales" if out >= 1 else \
            f"2**{left_shift} * output scale overflows float32"
        return (f"{why}: output multiplier 2 * max(input scales) / (2**{left_shift} * output "
                f"scale) is {out:g} in LiteRT's float32 arithmetic (LiteRT aborts unless it "
                "is in (0, 1))")
    return None


def activation_range(activation: str, dtype: str, scale: float, zero_point: int
                     ) -> tuple[int, int]:
    """tflite::CalculateActivationRangeQuantized: quantize(f) = zero_point +
    static_cast<int32_t>(TfLiteRound(f / scale)) with f / scale in float."""
    qmin, qmax = QUANT_DTYPES[dtype]

    def quantize(f: float) -> int:
        q = float(_f32(f) / _f32(scale))  # float division, as the C++ lambda does
        r = _round_half_away(q)
        if not INT32_MIN <= r <= INT32_MAX:  # static_cast<int32_t> of it is undefined
            raise QuantizationError(
                f"activation bound {f} / output scale {scale!r} overflows int32")
        return zero_point + r

    if activation == "NONE":
        return qmin, qmax
    if activation == "RELU":
        return max(qmin, quantize(0.0)), qmax
    if activation == "RELU6":
        return max(qmin, quantize(0.0)), min(qmax, quantize(6.0))
    if activation == "RELU_N1_TO_1":
        return max(qmin, quantize(-1.0)), min(qmax, quantize(1.0))
    raise QuantizationError(
        f"fused activation {activation!r} unsupported by quantized ADD; expected one of "
        f"{', '.join(ACTIVATIONS)}")


def quant_add_params(dtype: str, in1: tuple[float, int], in2: tuple[float, int],
                     out: tuple[float, int], activation: str = "NONE", *,
                     pot_scale_int16: bool = True,
                     rounding: str = LITERT_ROUNDING) -> QuantAddParams:
    """Prepare of TFLite's quantized ADD (add.cc): the integers the kernel uses.

    dtype: "int8", "uint8" or "int16" (inputs and output share it, as TFLite requires).
    in1, in2, out: (scale, zero_point) of input 1, input 2 and the output; scales are
    rounded to float32 first, since a TFLite tensor stores them as float.
    activation: "NONE", "RELU", "RELU6" or "RELU_N1_TO_1" (the op's fused activation).
    pot_scale_int16: AddOptions.pot_scale_int16 (schema default true): with int16 and all
    three scales powers of two to within 1e-3 in log2 (CheckedLog2) LiteRT takes the POT
    path.
    rounding: "double" (LiteRT 2.3.0's build) or "single" (TFLITE_SINGLE_ROUNDING builds).

    Raises QuantizationError (a ValueError) with a one-line reason for what LiteRT refuses:
    Prepare fails (int16 zero point != 0, unsupported activation, an activation bound
    overflowing int32, POT shifts both nonzero or positive) or aborts the process (scale
    <= 0, output multiplier >= 1); and for what litecl refuses because LiteRT's arithmetic
    is undefined or the model malformed (zero point outside the type, POT shift > 31).
    """
    if dtype not in QUANT_DTYPES:
        raise QuantizationError(
            f"quantized ADD takes int8, uint8 or int16, got {dtype!r}")
    if rounding not in ("double", "single"):
        raise QuantizationError(f"rounding must be 'double' or 'single', got {rounding!r}")
    qmin, qmax = QUANT_DTYPES[dtype]
    scales = []
    zps = []
    for what, (scale, zp) in (("input1", in1), ("input2", in2), ("output", out)):
        sf = float(_f32(scale))
        if not (math.isfinite(sf) and sf > 0.0):
            raise QuantizationError(f"{what} scale must be a positive finite float32, got "
                                    f"{scale!r}")
        if int(zp) != zp or not qmin <= int(zp) <= qmax:
            raise QuantizationError(
                f"{what} zero point {zp!r} outside the {dtype} range [{qmin}, {qmax}]")
        if dtype == "int16" and zp != 0:
            raise QuantizationError(
                f"int16 ADD needs symmetric quantization: {what} zero point {zp}, expected 0")
        scales.append(sf)
        zps.append(int(zp))
    s1, s2, so = scales
    z1, z2, zo = zps
    act_min, act_max = activation_range(activation, dtype, so, zo)

    if dtype == "int16" and pot_scale_int16:
        logs = [checked_log2(s) for s in scales]
        if all(is_pot for is_pot, _ in logs):
            (_, l1), (_, l2), (_, lo) = logs
            sh1, sh2 = l1 - lo, l2 - lo
            if not (sh1 == 0 or sh2 == 0):
                raise QuantizationError(
                    f"int16 power-of-two ADD shifts one input only; log2 scale differences "
                    f"{sh1} and {sh2} are both nonzero")
            if sh1 > 0 or sh2 > 0:
                raise QuantizationError(
                    f"int16 power-of-two ADD needs input scales <= the output scale; log2 "
                    f"differences {sh1}, {sh2}")
            if min(sh1, sh2) < -31:
                raise QuantizationError(
                    f"int16 power-of-two ADD right shift {-min(sh1, sh2)} exceeds 31 "
                    f"(undefined in LiteRT)")
            return QuantAddParams(dtype, "pot_int16", rounding, 0, 0, 0, 0, 0, sh1, 0, sh2,
                                  0, 0, act_min, act_max)

    # The general path: 8-bit, and int16 with general scales. 20 (8-bit) keeps
    # 255 << 20 well inside int32; 15 (int16) keeps 65535 << 15 below 2**31.
    left_shift = 15 if dtype == "int16" else 20
    bad = general_multipliers_abort(s1, s2, so, left_shift)
    if bad:  # LiteRT 2.3.0 aborts in Prepare (measured)
        raise QuantizationError(f"scales {s1!r}, {s2!r} -> {so!r}: {bad}")
    twice_max = 2.0 * max(s1, s2)  # exact in float32 when general_multipliers_abort passed
    m1, sh1 = quantize_multiplier_smaller_than_one_exp(s1 / twice_max, rounding)
    m2, sh2 = quantize_multiplier_smaller_than_one_exp(s2 / twice_max, rounding)
    real_out = twice_max / ((1 << left_shift) * so)
    mo, sho = quantize_multiplier_smaller_than_one_exp(real_out, rounding)
    return QuantAddParams(dtype, "general", rounding, -z1, -z2, zo, left_shift,
                          m1, sh1, m2, sh2, mo, sho, act_min, act_max)


# --------------------------------------------------------------------------------------
# The kernel in numpy int64 arithmetic
# --------------------------------------------------------------------------------------

def _wrap32(x: np.ndarray) -> np.ndarray:
    """Keep the low 32 bits, sign-extended (the int32 store of the C++)."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _wrap16(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def _srdhm(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp::SaturatingRoundingDoublingHighMul(int32 a, int32 b): a * b / 2**31 to
    nearest, ties up for positive products and toward zero for negative ones."""
    ab = a * np.int64(b)
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    t = ab + nudge
    q = np.where(t >= 0, t >> 31, -((-t) >> 31))  # C++ '/' truncates toward zero
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, np.int64(INT32_MAX), q)


def _rdbpot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp::RoundingDivideByPOT(int32 x, exponent), 0 <= exponent <= 31: divide by
    2**exponent rounding half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def _rdbpot16(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp::RoundingDivideByPOT<int16_t>: every intermediate is stored in int16_t,
    so for exponent >= 16 the mask truncates to -1."""
    mask = int(_wrap16(np.int64((1 << exponent) - 1)))
    remainder = _wrap16(x & mask)
    threshold = _wrap16((mask >> 1) + (x < 0))
    return _wrap16((x >> exponent) + (remainder > threshold))


def _mbqm(x: np.ndarray, m: int, shift: int, rounding: str) -> np.ndarray:
    """tflite::MultiplyByQuantizedMultiplier(int32 x, int32 m, int shift). With shift <= 0
    (all ADD uses) it is also MultiplyByQuantizedMultiplierSmallerThanOneExp."""
    if rounding == "single":
        total = 31 - shift
        return _wrap32((x * np.int64(m) + np.int64(1 << (total - 1))) >> total)
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    return _rdbpot(_srdhm(_wrap32(x << left), m), right)


def quant_add_why_not(p: QuantAddParams, shape1, shape2) -> str | None:
    """Why LiteRT cannot run this ADD on operands of these shapes, or None if it can.

    Shapes must broadcast (numpy rules). The int16 POT path has no broadcasting: its
    kernel takes MatchingElementsSize, which aborts LiteRT unless both operands and the
    output hold the same number of elements (measured: [1,10,1] + [1,10,3] aborts;
    [1,3] + [3] runs)."""
    try:
        out = np.broadcast_shapes(tuple(shape1), tuple(shape2))
    except ValueError:
        return f"ADD operand shapes {tuple(shape1)} and {tuple(shape2)} do not broadcast"
    if p.path == "pot_int16":
        sizes = {math.prod(shape1), math.prod(shape2), math.prod(out)}
        if len(sizes) > 1:
            return (f"int16 power-of-two-scale ADD cannot broadcast {tuple(shape1)} with "
                    f"{tuple(shape2)} (LiteRT aborts in MatchingElementsSize)")
    return None


@dataclass(frozen=True)
class QuantSimdRule:
    """Where LiteRT's builtin quantized ADD computes its SIMD body instead of the reference
    formula: output element i (flat, row-major) takes the body when
    ``i % run < simd``, the first ``run - run % block`` of each run of ``run`` elements.

    form: "combined_shift" (one shift by left_shift + input shift before the multiply) or
        "shift_after" (the multiply on x << left_shift, then a flooring right shift).
    run: the length of the loop LiteRT restarts (the flat size, or y4 / y3 of its fivefold
        broadcast loop); block: the SIMD width in elements (16 or 8).
    """

    form: str
    run: int
    block: int

    @property
    def simd(self) -> int:
        """How many leading elements of each run take the SIMD body (> 0)."""
        return self.run - self.run % self.block

    @property
    def everywhere(self) -> bool:
        """Every element takes the SIMD body (run a multiple of block): no index needed."""
        return self.simd == self.run


def quant_add_simd_rule(p: QuantAddParams, shape1, shape2, reference: str = "builtin",
                        flat: bool = False) -> QuantSimdRule | None:
    """Which output elements of a quantized ADD of operands of these shapes LiteRT's
    ``reference`` kernels compute with a SIMD body (module docstring), or None when every
    element is the reference formula: reference "ref", the int16 POT path, an int16
    broadcast, a broadcast outside the fivefold loop, or runs shorter than one block.

    reference: "builtin" or "xnnpack" (the builtin kernel: XNNPACK takes 8-bit ADDs from it
    in LiteRT, which litecl does not reproduce) or "ref" (KERNELS). Shapes broadcast as
    numpy's; raises ValueError for an unknown reference. ``flat``: a same-shape run shorter
    than one block gets its rule too (no element in the body), so a kernel whose body's end
    comes from the element count (quant_add_cl_expr's flat) has one text at every length."""
    if reference not in KERNELS:
        raise ValueError(f"reference must be one of {', '.join(KERNELS)}, got {reference!r}")
    if reference == "ref" or p.path != "general":
        return None
    r = max(len(shape1), len(shape2), 1)
    e1 = (1,) * (r - len(shape1)) + tuple(int(d) for d in shape1)
    e2 = (1,) * (r - len(shape2)) + tuple(int(d) for d in shape2)
    if 0 in e1 or 0 in e2:
        return None
    if e1 == e2:  # ProcessBroadcastShapes: kNonBroadcast, one loop over the flat tensor
        loop, run = "elementwise", math.prod(e1)
    elif p.dtype == "int16":  # add.cc: reference_ops::BroadcastAdd6DSlow in every kernel
        return None
    else:
        five = fivefold(e1, e2)
        if five is None:  # kGenericBroadcast: the reference BroadcastAdd6DSlow
            return None
        y = five[1]
        loop, run = ("elementwise", y[4]) if y[4] > 1 else ("scalar", y[3])
    form, block = _SIMD_BODIES[(p.dtype, loop)]
    if run < block and not (flat and e1 == e2):
        return None
    return QuantSimdRule(form, run, block)


def _simd_body(a64: np.ndarray, b64: np.ndarray, p: QuantAddParams, form: str) -> np.ndarray:
    """The SIMD body's result for operands a64, b64 (int64 arrays of raw values, broadcast
    alike): NEON's vshlq_s32 (a left shift, or an arithmetic right shift for a negative
    count), vqrdmulhq_n_s32 (== SRDHM), then the reference output stage; 8-bit narrows
    through int16 without saturation (vmovn_s32, vaddq_s16) before saturating."""

    def rescale(x, m, shift):
        if form == "combined_shift":
            n = p.left_shift + shift
            return _srdhm(x << n if n >= 0 else x >> -n, m)  # no overflow: |x| < 2**16
        return _srdhm(x << p.left_shift, m) >> -shift

    raw_sum = _wrap32(rescale(a64 + p.input1_offset, p.input1_multiplier, p.input1_shift)
                      + rescale(b64 + p.input2_offset, p.input2_multiplier, p.input2_shift))
    s = _rdbpot(_srdhm(raw_sum, p.output_multiplier), -p.output_shift)
    if p.dtype == "int16":
        s = s + p.output_offset
    else:  # then vqmovn_s16 / vqmovun_s16: saturation to the type, inside the clamp below
        s = _wrap16(_wrap16(s) + p.output_offset)
    return np.clip(s, p.activation_min, p.activation_max)


def quant_add_reference(a: np.ndarray, b: np.ndarray, p: QuantAddParams,
                        reference: str = "ref") -> np.ndarray:
    """LiteRT's quantized ADD on raw quantized values, in numpy int64 arithmetic.

    a, b: integer arrays of p.dtype's values (any integer numpy dtype is accepted; values
    outside the type raise ValueError), numpy-broadcastable to each other (TFLite
    broadcasting is numpy's). reference: the LiteRT kernels to reproduce (KERNELS): "ref"
    (BUILTIN_REF, the default) or "builtin" / "xnnpack" (the builtin optimized kernel,
    whose SIMD bodies round some elements differently: :func:`quant_add_simd_rule`).
    Returns an array of p.dtype with the broadcast shape, bit-identical to those kernels.
    Raises QuantizationError for shapes :func:`quant_add_why_not` refuses and ValueError
    for an unknown reference.
    """
    qmin, qmax = QUANT_DTYPES[p.dtype]
    a64 = np.asarray(a).astype(np.int64)
    b64 = np.asarray(b).astype(np.int64)
    for name, v in (("a", a64), ("b", b64)):
        if v.size and (v.min() < qmin or v.max() > qmax):
            raise ValueError(f"operand {name} holds values outside {p.dtype} [{qmin}, {qmax}]")
    reason = quant_add_why_not(p, a64.shape, b64.shape)
    if reason:
        raise QuantizationError(reason)
    rule = quant_add_simd_rule(p, a64.shape, b64.shape, reference)
    a64, b64 = np.broadcast_arrays(a64, b64)

    if p.path == "pot_int16":
        if p.input1_shift == 0:
            kept, shifted, e = a64, b64, -p.input2_shift
        else:
            kept, shifted, e = b64, a64, -p.input1_shift
        raw = np.clip(kept + _rdbpot16(shifted, e), -32768, 32767)  # SaturatingAdd
    else:
        r = p.rounding
        x1 = _wrap32((a64 + p.input1_offset) << p.left_shift)
        x2 = _wrap32((b64 + p.input2_offset) << p.left_shift)
        s1 = _mbqm(x1, p.input1_multiplier, p.input1_shift, r)
        s2 = _mbqm(x2, p.input2_multiplier, p.input2_shift, r)
        raw_sum = _wrap32(s1 + s2)
        raw = _wrap32(_mbqm(raw_sum, p.output_multiplier, p.output_shift, r)
                      + p.output_offset)
    out = np.clip(raw, p.activation_min, p.activation_max)
    if rule is not None:
        body = _simd_body(a64, b64, p, rule.form)
        at = np.arange(out.size, dtype=np.int64).reshape(out.shape) % rule.run < rule.simd
        out = np.where(at, body, out)
    return out.astype(_NUMPY[p.dtype])


# --------------------------------------------------------------------------------------
# OpenCL C
# --------------------------------------------------------------------------------------

_CL_SRDHM_64 = r"""
/* gemmlowp::SaturatingRoundingDoublingHighMul: a * b / 2^31 to nearest; a tie rounds up
   for a positive product, toward zero for a negative one (-0.5 -> 0); INT_MIN * INT_MIN
   saturates to INT_MAX. */
LITECL_INLINE int litecl_srdhm(int a, int b) {
    long ab = (long)a * (long)b;
    long nudge = ab >= 0 ? (1L << 30) : (1L - (1L << 30));
    int r = (int)((ab + nudge) / (1L << 31));   /* C division truncates, as in C++ */
    /* a select, not an early return: with b a kernel argument (not a literal that folds
       the test away) a branch kept compilers from vectorizing the loop (4-9x slower) */
    return (a == b && a == INT_MIN) ? INT_MAX : r;
}
"""

_CL_SRDHM_32 = r"""
/* gemmlowp::SaturatingRoundingDoublingHighMul in 32-bit operations (no long: embedded
   profile). Its nudge (2^30 for a product >= 0, 1 - 2^30 below) and C++'s division
   toward zero by 2^31 make, for either sign, floor((a * b + 2^30) / 2^31): below zero,
   truncating is flooring after adding 2^31 - 1, and 1 - 2^30 + 2^31 - 1 = 2^30. With the
   64-bit product as hi * 2^32 + lo (hi = mul_hi(a, b), lo = a * b in uint) that is
   2 * hi + floor((lo + 2^30) / 2^31) = 2 * hi + (lo / 2 + 2^29) / 2^30, whose sum
   lo / 2 + 2^29 fits a uint (no carry) and whose quotient is 0, 1 or 2; the result fits
   an int (|a * b| <= 2^62). (Written as an add of overlapping bits, not as
   (hi << 1) | (lo' >> 31), which LLVM turns into a funnel shift that Oclgrind 21.10
   cannot run.) */
LITECL_INLINE int litecl_srdhm(int a, int b) {
    const uint w = (((uint)a * (uint)b) >> 1) + 0x20000000u;
    const int r = as_int(((uint)mul_hi(a, b) << 1) + (w >> 30));
    return (a == b && a == INT_MIN) ? INT_MAX : r;   /* a select: see the 64-bit form */
}
"""

_CL_COMMON = r"""
/* gemmlowp::RoundingDivideByPOT(int32): x / 2^e rounded half away from zero, 0 <= e <= 31. */
LITECL_INLINE int litecl_rdbpot(int x, int e) {
    int mask = as_int((1u << e) - 1u);
    int remainder = x & mask;
    int threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

/* gemmlowp::RoundingDivideByPOT<int16_t>: every intermediate stored in a short. */
LITECL_INLINE int litecl_rdbpot16(int x, int e) {
    short mask = as_short((ushort)((1u << e) - 1u));
    short remainder = as_short((ushort)(x & mask));
    short threshold = as_short((ushort)((mask >> 1) + (x < 0 ? 1 : 0)));
    return (int)as_short((ushort)((x >> e) + (remainder > threshold ? 1 : 0)));
}

/* tflite::MultiplyByQuantizedMultiplier, double rounding (LiteRT's build), shift <= 30;
   for shift <= 0 also MultiplyByQuantizedMultiplierSmallerThanOneExp. x << shift wraps as
   in LiteRT's int32 multiply. */
LITECL_INLINE int litecl_mbqm(int x, int m, int shift) {
    int left = shift > 0 ? shift : 0;
    int right = shift > 0 ? 0 : -shift;
    return litecl_rdbpot(litecl_srdhm(as_int((uint)x << left), m), right);
}
"""

_CL_SINGLE_64 = r"""
/* tflite::MultiplyByQuantizedMultiplier, TFLITE_SINGLE_ROUNDING: -31 <= shift <= 30. */
LITECL_INLINE int litecl_mbqm_single(int x, int m, int shift) {
    int total = 31 - shift;
    long round = 1L << (total - 1);
    return as_int((uint)(((long)x * (long)m + round) >> total));
}
"""

_CL_SINGLE_32 = r"""
/* tflite::MultiplyByQuantizedMultiplier, TFLITE_SINGLE_ROUNDING: -31 <= shift <= 30, in
   32-bit operations: the low 32 bits (the C++ stores an int32) of
   floor((x * m + 2^(total - 1)) / 2^total) with the product as hi * 2^32 + lo.
   total < 32: hi * 2^(32 - total) + (lo / 2 + 2^(total - 2)) / 2^(total - 1) (the halved
   sum fits a uint; an add of overlapping bits, not a funnel shift, see litecl_srdhm);
   total 1: hi * 2^31 + (lo + 1) / 2 (rhadd, opaque to the same fold); total >= 32: the rounding bit lands in hi (or, at
   32, carries into it), then an arithmetic shift of hi. */
LITECL_INLINE int litecl_mbqm_single(int x, int m, int shift) {
    const int total = 31 - shift;   /* 1 .. 62 */
    const int hi = mul_hi(x, m);
    const uint lo = (uint)x * (uint)m;
    if (total == 1)
        return as_int(((uint)hi << 31) + rhadd(lo, 0u));   /* rhadd: (lo + 1) / 2 in 33 bits */
    if (total < 32)
        return as_int(((uint)hi << (32 - total)) + (((lo >> 1) + (1u << (total - 2))) >> (total - 1)));
    if (total == 32)
        return hi + (int)(((lo >> 1) + 0x40000000u) >> 31);
    return (hi + (1 << (total - 33))) >> (total - 32);
}
"""

_CL_HEAD = r"""
/* Quantized ADD helpers: TFLite/gemmlowp fixed-point arithmetic (litecl.ops.add_quant). */
/* Inlined into the kernel: with a node's constants as kernel arguments the functions no
   longer shrink to a few instructions, and PoCL's compiler then called them per element,
   unvectorized (an int8 ADD of 2^20 elements: 9.0 ms, inlined 1.4 ms, constants as
   literals 0.95 ms). Clang-based compilers take the attribute; others get plain functions. */
#if defined(__clang__) || defined(__GNUC__)
#define LITECL_INLINE __attribute__((always_inline))
#else
#define LITECL_INLINE
#endif
"""


def quant_add_cl_functions(int64: bool = True) -> str:
    """OpenCL C 1.2 helper functions used by :func:`quant_add_cl_expr`'s expressions
    (``litecl_srdhm``, ``litecl_rdbpot``, ``litecl_rdbpot16``, ``litecl_mbqm``,
    ``litecl_mbqm_single``). Wrap-around is written with ``as_int``/``as_short`` of
    unsigned values, so nothing relies on signed overflow.

    int64: whether the device has 64-bit integers (``Caps.int64``; long is core in the
    full profile, optional in the embedded one). With it the two 32x32 -> 64-bit products
    (SaturatingRoundingDoublingHighMul, the single-rounding multiply) are one ``long``
    multiply; without it they are built from ``mul_hi`` and the low 32-bit product with
    explicit carries, and the text holds no 64-bit type at all. Both give the same bits
    (tests/test_add_quant.py runs both against LiteRT). The same text for the same
    argument (a cache key)."""
    if int64:
        return _CL_HEAD + _CL_SRDHM_64 + _CL_COMMON + _CL_SINGLE_64
    return _CL_HEAD + _CL_SRDHM_32 + _CL_COMMON + _CL_SINGLE_32


_CL_VECTOR = r"""
/* The quantized-ADD helpers on {w}-wide int vectors (the functions above, lane by lane;
   the constants stay scalars). Guarded: every quantized ADD of a fused kernel carries them. */
#ifndef LITECL_QUANT_V{w}
#define LITECL_QUANT_V{w}
LITECL_INLINE int{w} litecl_sext16_v{w}(int{w} x) {{   /* (int)as_short((ushort)x) */
    return as_int{w}(as_uint{w}(x) << 16u) >> 16;
}}
{srdhm}
LITECL_INLINE int{w} litecl_rdbpot_v{w}(int{w} x, int e) {{
    int mask = as_int((1u << e) - 1u);
    int{w} remainder = x & mask;
    /* selects, not arithmetic on a vector compare's -1: Oclgrind 21.10 computes that wrong */
    int{w} threshold = (int{w})(mask >> 1) + select((int{w})0, (int{w})1, x < 0);
    return (x >> e) + select((int{w})0, (int{w})1, remainder > threshold);
}}
LITECL_INLINE int{w} litecl_rdbpot16_v{w}(int{w} x, int e) {{
    int mask = (int)as_short((ushort)((1u << e) - 1u));
    int{w} remainder = litecl_sext16_v{w}(x & mask);
    int{w} threshold = litecl_sext16_v{w}((int{w})(mask >> 1) + select((int{w})0, (int{w})1, x < 0));
    return litecl_sext16_v{w}((x >> e) + select((int{w})0, (int{w})1, remainder > threshold));
}}
LITECL_INLINE int{w} litecl_mbqm_v{w}(int{w} x, int m, int shift) {{
    int left = shift > 0 ? shift : 0;
    int right = shift > 0 ? 0 : -shift;
    return litecl_rdbpot_v{w}(litecl_srdhm_v{w}(as_int{w}(as_uint{w}(x) << (uint)left), m), right);
}}
{single}
#endif
"""

_CL_VECTOR_64 = ("""LITECL_INLINE int{w} litecl_srdhm_v{w}(int{w} a, int b) {{
    long{w} ab = convert_long{w}(a) * (long)b;
    long{w} t = ab + select((long{w})(1L - (1L << 30)), (long{w})(1L << 30), ab >= 0);
    int{w} r = convert_int{w}((t + select((long{w})0, (long{w})((1L << 31) - 1), t < 0)) >> 31);
    return b == INT_MIN ? select(r, (int{w})INT_MAX, a == INT_MIN) : r;
}}""", """LITECL_INLINE int{w} litecl_mbqm_single_v{w}(int{w} x, int m, int shift) {{
    int total = 31 - shift;
    long round = 1L << (total - 1);
    return as_int{w}(convert_uint{w}(((convert_long{w}(x) * (long)m + round) >> total) & 0xFFFFFFFFL));
}}""")

_CL_VECTOR_32 = ("""LITECL_INLINE int{w} litecl_srdhm_v{w}(int{w} a, int b) {{
    const uint{w} w = ((as_uint{w}(a) * (uint)b) >> 1) + 0x20000000u;
    const int{w} r = as_int{w}((as_uint{w}(mul_hi(a, (int{w})b)) << 1) + (w >> 30));
    return b == INT_MIN ? select(r, (int{w})INT_MAX, a == INT_MIN) : r;
}}""", """LITECL_INLINE int{w} litecl_mbqm_single_v{w}(int{w} x, int m, int shift) {{
    const int total = 31 - shift;
    const int{w} hi = mul_hi(x, (int{w})m);
    const uint{w} lo = as_uint{w}(x) * (uint)m;
    if (total == 1)
        return as_int{w}((as_uint{w}(hi) << 31) + rhadd(lo, (uint{w})0u));
    if (total < 32)
        return as_int{w}((as_uint{w}(hi) << (uint)(32 - total)) + (((lo >> 1) + (1u << (total - 2))) >> (uint)(total - 1)));
    if (total == 32)
        return hi + as_int{w}(((lo >> 1) + 0x40000000u) >> 31);
    return (hi + (1 << (total - 33))) >> (total - 32);
}}""")


def quant_add_cl_vector_functions(w: int, int64: bool = True) -> str:
    """:func:`quant_add_cl_functions`' helpers on ``w``-wide int vectors (``litecl_srdhm_vW``,
    ``litecl_rdbpot_vW``, ``litecl_rdbpot16_vW``, ``litecl_mbqm_vW``,
    ``litecl_mbqm_single_vW``, ``litecl_sext16_vW``), the same bits lane by lane, the
    constants scalar; behind an include guard, so several ops may carry them. Needs
    :func:`quant_add_cl_functions` (LITECL_INLINE) first.

    Why: with one work-item per work-group (the CPU LAUNCH row) the scalar helpers called
    lane by lane vectorize only where the compiler does it within a work-item. PoCL's does;
    Intel's CPU runtime (2026.2, this project's VM) does not: MoveNet's int8 ADD over 55,296
    elements took 560 us against 68 us in this vector form (LiteRT: 80 us)."""
    srdhm, single = _CL_VECTOR_64 if int64 else _CL_VECTOR_32
    return _CL_VECTOR.format(w=w, srdhm=srdhm.format(w=w), single=single.format(w=w))


def quant_add_cl_expr(p: QuantAddParams, a: str, b: str, rule: QuantSimdRule | None = None,
                      index: str = "i", w: int = 0, flat: bool = False) -> tuple[str, tuple]:
    """(expression, args): an OpenCL C ``int`` expression of LiteRT's clamped quantized
    ADD of the raw operands, and the constants it reads.

    a, b: OpenCL C expressions of type int holding the raw stored values (e.g.
    ``(int)in1[i]``). rule: :func:`quant_add_simd_rule`'s answer for the kernels matched
    (None: the reference formula everywhere, BUILTIN_REF's bits); with a rule, the elements
    it names compute LiteRT's SIMD body, chosen by ``index``, an OpenCL C ``uint``
    expression of the flat output index (not used when the rule covers every element).
    Needs :func:`quant_add_cl_functions` in the same program.

    args: ((name, int32 value), ...), in the order the expression first names them: ``p``'s
    constants, which the expression reads by name (int parameters the caller declares and
    passes), not as literals. The text then depends only on ``p``'s dtype, path, rounding
    and which operand a POT ADD shifts, and on ``rule``, so the quantized ADDs of a model
    share one program (MoveNet: 14 of its 20 programs were such ADDs differing only in
    their constants). Equal arguments give equal text.

    w: 0 for the scalar form above; w > 1 for the same arithmetic on ``w``-wide vectors:
    ``a``, ``b`` and the result are intW, ``index`` a uintW of the lanes' indices, and it
    calls :func:`quant_add_cl_vector_functions`' helpers.

    flat: ``rule``'s run is the whole output (same shapes: ``index`` < run), so the SIMD
    body's end is computed from the uint ``count`` in scope (the launch's element count,
    codegen.NodeOp.wants_count) and the text is the same at every length (one program
    for a service's many input lengths; an exported kernel that holds at any length).
    """
    args: list = []
    fn = (lambda name: f"{name}_v{w}") if w else (lambda name: name)  # noqa: E731

    def clamp(x: str, lo: str, hi: str) -> str:  # vector bounds for vectors: Oclgrind 21.10
        # clamps an int4 with scalar bounds wrong (clamp(2, 0, 200) gave 0)
        return f"clamp({x}, (int{w})({lo}), (int{w})({hi}))" if w else f"clamp({x}, {lo}, {hi})"

    def v(name: str, value: int) -> str:
        if all(n != name for n, _ in args):
            args.append((name, int(value)))
        return name

    if p.path == "pot_int16":
        if p.input1_shift == 0:
            kept, shifted, e = a, b, -p.input2_shift
        else:
            kept, shifted, e = b, a, -p.input1_shift
        total = clamp(f"({kept}) + {fn('litecl_rdbpot16')}(({shifted}), {v('e', e)})", "(-32768)", "32767")
        return clamp(total, v('lo', p.activation_min), v('hi', p.activation_max)), tuple(args)
    mbqm = fn("litecl_mbqm_single" if p.rounding == "single" else "litecl_mbqm")
    # No int overflow: |x + offset| <= 255 times 2**20, or 32768 times 2**15 (zero points
    # lie in the type); each scaled input is at most half of that, so the sum fits too.
    x1 = f"(({a}) + {v('o1', p.input1_offset)})"
    x2 = f"(({b}) + {v('o2', p.input2_offset)})"
    k = v("k", 1 << p.left_shift)
    s1 = f"{mbqm}(({x1} * {k}), {v('m1', p.input1_multiplier)}, {v('s1', p.input1_shift)})"
    s2 = f"{mbqm}(({x2} * {k}), {v('m2', p.input2_multiplier)}, {v('s2', p.input2_shift)})"
    # The output multiplier is < 1 (Prepare refuses others), so the rescaled sum is at
    # most 2**30 in magnitude and adding the zero point cannot overflow either.
    raw = f"{mbqm}({s1} + {s2}, {v('mo', p.output_multiplier)}, {v('so', p.output_shift)}) + {v('oo', p.output_offset)}"
    ref = clamp(raw, v('lo', p.activation_min), v('hi', p.activation_max))
    if rule is None:
        return ref, tuple(args)
    body = _cl_simd_body(p, x1, x2, rule.form, v, w)
    if rule.everywhere and not flat:
        return body, tuple(args)
    cond = (f"(({index}) < (uint)(count - count % {rule.block}u))" if flat
            else f"(({index}) % {rule.run}u < {rule.simd}u)")
    if w:  # a vector wholly in the body (the common case) skips the reference formula
        return f"(all({cond}) ? {body} : select({ref}, {body}, {cond}))", tuple(args)
    return f"({cond} ? {body} : {ref})", tuple(args)


def _cl_simd_body(p: QuantAddParams, x1: str, x2: str, form: str, v, w: int = 0) -> str:
    """:func:`_simd_body` in OpenCL C int arithmetic (no long: litecl_srdhm has a 32-bit
    form), x1 and x2 the operands with their zero points removed; ``v(name, value)`` names
    a constant (quant_add_cl_expr's args); ``w``: quant_add_cl_expr's."""
    sfx = f"_v{w}" if w else ""

    def wrap16(x: str) -> str:  # vmovn_s32's int16 wrap-around
        return f"litecl_sext16{sfx}({x})" if w else f"(int)as_short((ushort)({x}))"

    def rescale(x: str, m: int, shift: int, j: int) -> str:
        if form == "combined_shift":  # vshlq_s32 by left_shift + shift, then vqrdmulh
            n = p.left_shift + shift
            nn = v(f"n{j}", n)  # its sign chosen at run time: the same int arithmetic
            shifted = f"({nn} >= 0 ? {x} * (1 << {nn}) : {x} >> (-{nn}))"
            return f"litecl_srdhm{sfx}({shifted}, {v(f'm{j}', m)})"
        return f"(litecl_srdhm{sfx}(({x} * {v('k', 1 << p.left_shift)}), {v(f'm{j}', m)}) >> {v(f'r{j}', -shift)})"

    s = (f"litecl_mbqm{sfx}({rescale(x1, p.input1_multiplier, p.input1_shift, 1)} + "
         f"{rescale(x2, p.input2_multiplier, p.input2_shift, 2)}, {v('mo', p.output_multiplier)}, "
         f"{v('so', p.output_shift)})")  # SRDHM, then RoundingDivideByPOT: the output stage
    if p.dtype != "int16":  # vmovn_s32, vaddq_s16: int16 wrap-around, then saturation
        s = wrap16(f"{wrap16(s)} + {v('oo', p.output_offset)}")
    else:
        s = f"{s} + {v('oo', p.output_offset)}"
    if w:  # vector bounds: see quant_add_cl_expr
        return f"clamp({s}, (int{w})({v('lo', p.activation_min)}), (int{w})({v('hi', p.activation_max)}))"
    return f"clamp({s}, {v('lo', p.activation_min)}, {v('hi', p.activation_max)})"
