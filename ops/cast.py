"""The cast planner: TFLite CAST semantics as a chain of exact OpenCL C steps.

The seed (000_e024ac27fa04b36a.txt) converts src -> middle(src) -> middle(dst) -> dst,
with duplicates removed, because OpenCL has no implicit vector conversions and some
compilers cannot convert long or bool to half directly. Generalised here so no step loses
range or precision that LiteRT's CAST keeps (tensorflow/lite/kernels/cast.cc):

- middles: bool, 8/16/32-bit signed and unsigned <32-bit -> int; uint32 -> uint;
  int64 -> long; float16/float32 -> float; float64 -> double (or its ulong bits on a
  device without cl_khr_fp64); complex64 -> float (its real part, as cast.cc does).
- -> complex64: the real part is CAST -> float32, the imaginary part +0.0; complex64 ->
  complex64 copies both parts (measured with LiteRT 2.3.0, models/LITERT_FACTS.md (d)).
- bfloat16 <-> any type: through float32 (bf16 -> float32 exact; -> bf16 rounds the float32
  to nearest even on its bits, overflow to inf, subnormals kept, NaN -> quiet NaN of its
  sign: measured on 2**20 random float32 bit patterns, 0 mismatches with ml_dtypes).
- int4 / uint4 / int2: only to and from float32 (LiteRT fails on other pairs); float32 ->
  them truncates, saturates to [-8, 7] / [0, 15] / [-2, 1], NaN -> the maximum, as for
  every integer type (measured).
- bool -> float is 0/1 (``x != 0``); bool -> integer keeps the stored byte, as LiteRT
  does for bytes other than 0/1.
- -> bool is ``x != 0`` in the source's middle type (NaN -> true, -0.0 -> false); the
  test is done on bits for floats so a flush-to-zero device still sees subnormals.
- float -> integer truncates toward zero then saturates to the *destination* range, and
  NaN gives the destination maximum (REFERENCE_FACTS.md; OpenCL's convert_T_sat maps NaN
  to 0, so it is never used). The in-range conversion uses convert_T_rtz, defined there.
- integer -> narrower integer keeps the low bits (through unsigned, which C defines).
- -> float rounds to nearest even (convert_float_rte); float64 -> float16 goes through
  float32 (two roundings, as LiteRT).

A plan is data (a tuple of Steps); ``expr`` turns it into one OpenCL C expression with a
hole for the operand. Same inputs, same text.
"""
from __future__ import annotations

from dataclasses import dataclass

from .dtypes import SUB_BYTE_CAST_PARTNER, DType, dtype

__all__ = ["Step", "CastPlan", "plan_cast", "cast_why_not", "value_type", "load_type"]


@dataclass(frozen=True)
class Step:
    """One conversion: from OpenCL C value type ``frm`` to ``to``, by rule ``how``."""

    frm: str
    to: str
    how: str

    def __str__(self) -> str:
        return f"{self.frm} -> {self.to} ({self.how})"


@dataclass(frozen=True)
class CastPlan:
    """How to convert one element: load as ``load``, apply ``steps``, store ``dst``."""

    src: DType
    dst: DType
    load: str
    steps: tuple[Step, ...]
    store: str
    helpers: tuple[str, ...]  # names of soft-float64 helper functions needed

    def chain(self) -> list[str]:
        """The value types in order, e.g. ['long', 'float', 'half'] (the seed's vector)."""
        out = [self.load]
        out += [s.to for s in self.steps]
        return out

    def describe(self) -> str:
        lines = [f"CAST {self.src.name} -> {self.dst.name}",
                 f"  load  {self.src.name} as {self.load}"]
        lines += [f"  step  {s}" for s in self.steps]
        lines.append(f"  store {self.store} as {self.dst.name}")
        return "\n".join(lines)


def _f64(caps) -> str:
    return "double" if caps.fp64 else "f64bits"


def load_type(d: DType, caps) -> str:
    """The value type an element of ``d`` is loaded as (its middle)."""
    if d.name == "float64":
        return _f64(caps)
    if d.name == "float16" and caps.fp16:
        return "half"
    return d.middle


def value_type(d: DType, caps) -> str:
    """The middle value type of ``d`` (what conversions target before storing)."""
    if d.name == "float64":
        return _f64(caps)
    return d.middle


def cast_why_not(src, dst, caps) -> str | None:
    """Why CAST src -> dst cannot run on a device with ``caps`` (None: it can)."""
    src, dst = dtype(src), dtype(dst)
    for a, b in ((src, dst), (dst, src)):
        if a.packed_bits and b.name != SUB_BYTE_CAST_PARTNER:
            return (f"LiteRT casts {a.name} only to and from {SUB_BYTE_CAST_PARTNER} "
                    f"(its CAST fails on {src.name} -> {dst.name})")
    if not caps.int64:
        for d in (src, dst):
            if d.name == "int64":
                return "int64 needs 64-bit integers, which the device lacks"
            if d.name == "float64" and not caps.fp64:
                return ("float64 needs cl_khr_fp64 or 64-bit integers (for soft float64), "
                        "which the device lacks")
    return None


_INT_FAMILY = ("int", "uint", "long")
_FLOAT_FAMILY = ("float", "double", "f64bits", "half")


def plan_cast(src, dst, caps) -> CastPlan:
    """Plan CAST ``src`` -> ``dst`` (dtype names, codes or DTypes) for a device's caps.

    Raises ValueError (UnsupportedCast) when ``cast_why_not`` gives a reason.
    """
    src, dst = dtype(src), dtype(dst)
    reason = cast_why_not(src, dst, caps)
    if reason:
        raise ValueError(reason)
    if dst.kind == "complex":
        if src.kind == "complex":  # a copy of both parts (measured: NaN signs, subnormals kept)
            return CastPlan(src, dst, "float2", (), "float2", ())
        # the real part is exactly CAST src -> float32 (measured for all 11 real types:
        # bool 0/1, float64 rounded to nearest even, NaN signs kept), the imaginary part +0
        p = plan_cast(src, "float32", caps)
        return CastPlan(src, dst, p.load, p.steps, p.store, p.helpers)
    if src.name == dst.name == "bfloat16":  # a copy of the bits (LiteRT keeps NaN payloads)
        return CastPlan(src, dst, "ushort", (), "ushort", ())
    if src.name == "bfloat16" or dst.name == "bfloat16":
        # bfloat16 loads as the float32 it is the top half of (exact); X -> bfloat16 is
        # X -> float32 then rounded to nearest even at the store (measured: two roundings,
        # int32 16842753 -> 16777216, float64 1 + 2**-8 + 2**-40 -> 1.0)
        p = plan_cast("float32" if src.name == "bfloat16" else src,
                      "float32" if dst.name == "bfloat16" else dst, caps)
        return CastPlan(src, dst, p.load, p.steps, p.store, p.helpers)
    ld = load_type(src, caps)
    steps: list[Step] = []
    cur = ld
    helpers: list[str] = []

    def add(to: str, how: str):
        nonlocal cur
        steps.append(Step(cur, to, how))
        cur = to

    if cur == "half":
        # native half: widen to float (exact) unless the store is native half too
        if dst.name != "float16":
            add("float", "exact")
    if dst.kind == "bool" and src.kind == "bool":  # a copy of the byte (LiteRT: 2 -> 2, measured)
        return CastPlan(src, dst, ld, (), "int", ())
    if dst.kind == "bool":
        if cur == "f64bits":
            helpers.append("litecl_f64_nonzero")
        add("int", "x != 0")
        return CastPlan(src, dst, ld, tuple(steps), "int", tuple(helpers))

    target = value_type(dst, caps)
    if dst.name == "float16":
        target = "half" if caps.fp16 else "float"
    if src.kind == "bool" and cur == "int" and dst.kind == "float":
        # LiteRT's static_cast<float>(bool) tests the byte; static_cast<int>(bool) keeps the
        # raw byte (measured with bytes 0..255, models/LITERT_FACTS.md)
        add("int", "x != 0")
    # measured on the Intel CPU runtime: convert_halfN_rte(longN) runs at ~58% of copy,
    # clamp + convert through float at the copy roof; 32/64-bit sources take that path
    direct = (not caps.strict_compiler and caps.fp16 and dst.name == "float16"
              and cur in ("int", "uint", "long") and src.bits <= 16)
    if direct:
        # convert_half_rte(long) rounds once; through float it rounds twice, but both give
        # the same half: |x| < 2^24 is exact in float, larger magnitudes overflow to inf.
        add("half", "rte")
        return CastPlan(src, dst, ld, tuple(steps), "half", tuple(helpers))

    if cur in _INT_FAMILY:
        if target in _INT_FAMILY:
            if cur != target:
                add(target, "wrap" if _narrows(cur, target) else "extend")
        else:  # int -> float family
            if target == "f64bits":
                helpers.append("litecl_long_to_f64" if cur != "uint" else "litecl_ulong32_to_f64")
                add("f64bits", "rte")
            elif target == "double":
                add("double", "rte")
            else:  # float (or half through float)
                if dst.name == "float16" and src.bits > 16:
                    # |x| >= 65520 becomes inf in half either way; clamping to +-2^16 first
                    # makes the int -> float step exact (no long/uint rounding, which some
                    # compilers emulate slowly) and gives the same half
                    add("int", "clamp [-65536, 65536]")
                add("float", "rte")
    else:  # float family source (float/double/f64bits)
        if target in _INT_FAMILY:
            lo, hi = int(dst.min), int(dst.max)
            if cur == "f64bits":
                helpers.append("litecl_f64_to_long_sat")
                add("long", f"trunc, sat [{lo}, {hi}], NaN -> {hi}")
                if target != "long":
                    add(target, "in range")
            else:
                add(target, f"trunc, sat [{lo}, {hi}], NaN -> {hi}")
        else:
            want = "float" if target in ("float", "half") else target
            if cur != want:
                if cur == "f64bits" and want == "float":
                    helpers.append("litecl_f64_to_f32")
                elif cur == "float" and want == "f64bits":
                    helpers.append("litecl_f32_to_f64")
                add(want, "rte" if _narrows(cur, want) else "exact")
    if target == "half" and cur != "half":
        add("half", "rte")
    # narrowing to the storage type happens at the store
    store = cur
    return CastPlan(src, dst, ld, tuple(steps), store, tuple(helpers))


_RANK = {"int": 32, "uint": 32, "long": 64, "half": 16, "float": 32, "double": 64, "f64bits": 64}


def _narrows(a: str, b: str) -> bool:
    return _RANK[b] < _RANK[a]
