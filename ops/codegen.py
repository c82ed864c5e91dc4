"""OpenCL C code generation: small pure functions returning source text.

Same inputs, same text: the text is the program-cache key and is snapshot-testable
without a device. Nothing here queries a device; capabilities arrive as a ``Caps``.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from .cast import CastPlan, Step, plan_cast
from .dtypes import DType, dtype

__all__ = [
    "storage_type", "load_expr", "step_expr", "store_stmt", "store_value", "store_ctype",
    "scalar_store", "vector_load", "vector_store", "component", "cast_expr", "pragmas",
    "tiled_kernel", "ndrange_kernel", "grid_stride_kernel", "elementwise_kernel",
    "cast_kernel", "int_literal", "float_literal", "TILING_PARAMS", "SKELETONS",
    "step_vexpr", "store_vvalue", "vcomponent", "cast_vector_fn", "half_bits_source", "bf16_source",
]

#: Kernel parameters every tiled kernel takes after its buffers (see ops/tiling.py).
TILING_PARAMS = ("n", "former_num", "former_len", "tail_len")


def storage_type(d: DType, caps) -> str:
    """The OpenCL C element type of a ``__global`` buffer holding ``d``."""
    if d.name == "float64" and not caps.fp64:
        return "ulong"
    return d.cl


def int_literal(v: int, ctype: str) -> str:
    """An OpenCL C integer literal of type ``ctype`` (int/uint/long) for value v."""
    v = int(v)
    if ctype == "long":
        if v == -(2**63):
            return "(-9223372036854775807L - 1L)"
        return f"{v}L"
    if ctype == "uint":
        return f"{v}u"
    if v == -(2**31):
        return "(-2147483647 - 1)"
    return str(v)


def float_literal(v: float, ctype: str) -> str:
    """An exact OpenCL C literal for v (a float32-representable value) of float/double."""
    v = float(v)
    if abs(v) == float(np.finfo(np.float32).max):
        return ("-" if v < 0 else "") + ("FLT_MAX" if ctype == "float" else "0x1.fffffep127")
    s = repr(v)
    if "e" not in s and "." not in s:
        s += ".0"
    return s + ("f" if ctype == "float" else "")


def load_expr(d: DType, caps, ptr: str, idx: str, nan_sign: bool = True) -> str:
    """Expression loading element ``idx`` of buffer ``ptr`` as its middle value type.
    ``nan_sign=False``: the consumer ignores NaN signs (a conversion to an integer type)."""
    if d.name == "float16":
        if caps.fp16:
            return f"{ptr}[{idx}]"
        if caps.is_gpu and nan_sign:  # NVIDIA's vload_half returns a canonical NaN: keep the sign
            return (f"(isnan(vload_half({idx}, {ptr})) ? as_float(((convert_uint(((__global const ushort*)({ptr}))"
                    f"[{idx}]) & 0x8000u) << 16) | 0x7fc00000u) : vload_half({idx}, {ptr}))")
        return f"vload_half({idx}, {ptr})"
    if d.kind == "complex":
        return f"{ptr}[{idx}].x"  # real part (cast.cc: std::real)
    if d.name == "bfloat16":
        return f"as_float(convert_uint({ptr}[{idx}]) << 16)"  # the float32 it is the top half of
    if d.middle == "int" and d.cl != "int":
        return f"(int){ptr}[{idx}]"
    return f"{ptr}[{idx}]"


def bf16_source() -> str:
    """``litecl_f2bf``: float -> bfloat16 bits, round to nearest even on the bits (overflow
    to inf, subnormals kept), NaN -> the quiet NaN of its sign (LiteRT's, measured), in
    integer operations (no float operation may flush or canonicalize)."""
    return ("ushort litecl_f2bf(const float v)\n{\n"
            "    const uint x = as_uint(v);\n"
            "    return (x & 0x7fffffffu) > 0x7f800000u ? (ushort)(((x >> 16) & 0x8000u) | 0x7fc0u)\n"
            "                                            : (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);\n}\n")


_SIGNED_NARROW = {"char": "uchar", "short": "ushort"}


def store_value(d: DType, caps, value: str, vtype: str) -> str:
    """``value`` (of OpenCL value type ``vtype``) as the component that is stored for ``d``.

    float16 keeps the value (float: rounded by vstore_half_rte; half: stored as is);
    signed 8/16-bit integers keep the low bits (through unsigned, which C defines)."""
    st = storage_type(d, caps)
    if d.name == "float16":
        return value
    if d.kind == "complex":  # a real value: the real part, imaginary +0 (cast.cc)
        return value if vtype == "float2" else f"(float2)({value}, 0.0f)"
    if d.name == "bfloat16":
        return value if vtype == "ushort" else f"litecl_f2bf({value})"
    if st in _SIGNED_NARROW:
        return f"as_{st}(({_SIGNED_NARROW[st]})({value}))"
    if st in ("uchar", "ushort"):
        return f"({st})({value})"
    return value


def store_ctype(d: DType, caps, vtype: str) -> str:
    """The OpenCL C type of what ``store_value`` returns (float for half storage)."""
    if d.name == "float16":
        return "half" if vtype == "half" else "float"
    return storage_type(d, caps)


def store_stmt(d: DType, caps, ptr: str, idx: str, value: str, vtype: str) -> str:
    """Statement storing ``value`` (of OpenCL value type ``vtype``) as element ``idx``."""
    return scalar_store(d, caps, ptr, idx, store_value(d, caps, value, vtype), vtype)


def scalar_store(d: DType, caps, ptr: str, idx: str, value: str, vtype: str) -> str:
    """Statement storing an already converted component (``store_value``) at ``idx``."""
    if d.name == "float16" and vtype != "half":
        if _half_bits(caps):  # integer conversion: NVIDIA's vstore_half_rte drops NaN signs
            return f"((__global ushort*)({ptr}))[{idx}] = litecl_f2h_v1({value});"
        return (f"{{ ushort h_; vstore_half_rte({value}, 0, (__private half*)&h_); ((__global ushort*)({ptr}))[{idx}] = "
                f"{_litert_half_nan('h_', 1)}; }}")
    if d.name == "float16":  # a half value (cl_khr_fp16): its NaN bits are the device's own (Intel kept payloads)
        return f"{{ ushort h_ = as_ushort({value}); ((__global ushort*)({ptr}))[{idx}] = {_litert_half_nan('h_', 1)}; }}"
    return f"{ptr}[{idx}] = {value};"


def _litert_half_nan(h: str, w: int) -> str:
    """Half bits ``h`` (ushort, or ushortW) with every NaN made LiteRT's sign | 0x7e00 (its
    fp16 conversion drops payloads; pip's PoCL 3.0's vstore_half wrote 0x7fff, a fresh
    user's report). A select on the bits: an isnan test and a branch per vector cost PoCL's
    f32 -> f16 CAST 2.4x, this 1.2x (session 25)."""
    if w == 1:
        return f"({h} & 0x7fffu) > 0x7c00u ? (ushort)(({h} & 0x8000u) | 0x7e00u) : {h}"  # an assignment's right side
    u = f"ushort{w}"
    return f"select({h}, ({h} & ({u})(0x8000u)) | ({u})(0x7e00u), ({h} & ({u})(0x7fffu)) > ({u})(0x7c00u))"


def half_bits_source(w: int) -> str:
    """``litecl_f2h_vW`` (float -> half bits, round to nearest even, as vstore_half_rte:
    subnormals kept, overflow to inf, NaN -> quiet NaN of its sign) and ``litecl_h2f_vW``
    (half bits -> float, exact) on ``w``-wide vectors in integer and float32 arithmetic
    (F. Giesen's float_to_half_fast3_rtne / half_to_float_fast). The subnormal paths add
    a power of two so the FPU rounds (and subtract one exactly); a device that flushes
    float32 subnormals still gives the right half (they all round to zero)."""
    n = "" if w == 1 else str(w)  # w == 1: the scalar forms, litecl_f2h_v1 / litecl_h2f_v1
    u, f = f"uint{n}", f"float{n}"
    return (
        f"ushort{n} litecl_f2h_v{w}(const {f} v)\n{{\n"
        f"    {u} x = as_{u}(v);\n"
        f"    const {u} s = x & ({u})(0x80000000u);\n"
        f"    x ^= s;\n"
        f"    const {u} special = select(({u})(0x7c00u), ({u})(0x7e00u), x > ({u})(0x7f800000u));\n"
        f"    const {u} sub = as_{u}(as_{f}(x) + ({f})(0.5f)) - ({u})(0x3f000000u);\n"
        f"    const {u} nor = (x + ({u})(0xc8000fffu) + ((x >> 13) & ({u})(1u))) >> 13;\n"
        f"    {u} o = select(nor, sub, x < ({u})(0x38800000u));\n"
        f"    o = select(o, special, x >= ({u})(0x47800000u));\n"
        f"    return convert_ushort{n}(o | (s >> 16));\n}}\n\n"
        f"{f} litecl_h2f_v{w}(const ushort{n} h)\n{{\n"
        f"    const {u} b = convert_{u}(h);\n"
        f"    const {u} e = b & ({u})(0x7c00u);\n"
        f"    const {u} o = (b & ({u})(0x7fffu)) << 13;\n"
        f"    const {u} sub = as_{u}(as_{f}(o + ({u})(0x38800000u)) - ({f})(0x1p-14f));\n"
        f"    {u} r = select(o + ({u})(0x38000000u), o + ({u})(0x70000000u), e == ({u})(0x7c00u));\n"
        f"    r = select(r, sub, e == ({u})(0u));\n"
        f"    return as_{f}(r | ((b & ({u})(0x8000u)) << 16));\n}}\n\n"
        f"ushort{n} litecl_f2h_exact_v{w}(const {f} v)\n{{\n"
        f"    const {u} x = as_{u}(v);\n"
        f"    const {u} a = x & ({u})(0x7fffffffu);\n"
        f"    const {u} o = select((a >> 13) - ({u})(0x1c000u), ({u})(0u), a == ({u})(0u));\n"
        f"    return convert_ushort{n}(o | ((x >> 16) & ({u})(0x8000u)));\n}}\n")


def vload_half_source(w: int) -> str:
    """``litecl_vload_half_vW(bits)``: ``w`` halves given as their bits (one vector load
    from global memory) converted to floats from private memory. On the H200 this beats
    vloada_halfW from global memory for narrow outputs: float16 -> int8 81% -> 95% of copy
    at 2^26, -> int16 84% -> 96% (wider outputs tie; LAUNCH's ``half_load_private``)."""
    return (f"float{w} litecl_vload_half_v{w}(const ushort{w} h)\n{{\n"
            f"    return vloada_half{w}(0, (const __private half*)&h);\n}}\n")


def _half_bits(caps, load: bool = False) -> bool:
    """Whether half vectors are stored (``load``: loaded) as ushortN with integer
    conversions on this device (its LAUNCH row, only without cl_khr_fp16)."""
    from .tiling import launch_config  # noqa: PLC0415

    cfg = launch_config(caps)
    return not caps.fp16 and (cfg.half_bits_load if load else cfg.half_bits)


def capped_half_width(caps, loads_half: bool, stores_half: bool) -> bool:
    """Whether the LAUNCH row's half_width caps a vector width: a half vector goes
    through vloada_halfN / vstorea_halfN_rte."""
    return not caps.fp16 and ((loads_half and not _half_bits(caps, True))
                              or (stores_half and not _half_bits(caps)))


def _vec(ctype: str, w: int) -> str:
    return f"{ctype}{w}"


def vector_load(d: DType, caps, ptr: str, idx: str, w: int, nan_sign: bool = True) -> tuple[str, str]:
    """(vector type, expression) loading elements idx .. idx+w-1 of ``ptr`` in one access.

    ``idx`` must be a multiple of ``w`` and the buffer aligned to its vector size, as
    tiled kernels guarantee (ops/tiling.py: chunks start on 32-byte boundaries, vectors
    never straddle them): the access goes through a vector pointer (an aligned vector
    load, one 128-bit LDG on NVIDIA), or vloada_halfN for half storage without
    cl_khr_fp16. complex64 loads 2w floats (real, imaginary interleaved).
    """
    st = storage_type(d, caps)
    if d.name == "float16" and not caps.fp16:
        from .tiling import launch_config  # noqa: PLC0415

        raw = f"*(__global const ushort{w}*)({ptr} + {idx})"
        if _half_bits(caps, load=True):
            return _vec("float", w), f"litecl_h2f_v{w}({raw})"
        # one vector load of the bits, converted from registers (half_load_private), or
        # vloada_halfN straight from global memory
        v = f"litecl_vload_half_v{w}({raw})" if launch_config(caps).half_load_private \
            else f"vloada_half{w}(0, {ptr} + {idx})"
        if caps.is_gpu and nan_sign:  # NVIDIA's vloada_halfN returns canonical NaNs: keep their signs
            return _vec("float", w), (f"select({v}, as_float{w}(((convert_uint{w}({raw}) & (uint{w})(0x8000u)) << 16)"
                                      f" | (uint{w})(0x7fc00000u)), isnan({v}))")
        return _vec("float", w), v
    if d.kind == "complex":
        vt = _vec("float", 2 * w)
        return vt, f"*(__global const {vt}*)({ptr} + {idx})"
    vt = _vec(st, w)
    return vt, f"*(__global const {vt}*)({ptr} + {idx})"


def component(d: DType, caps, var: str, c: int) -> str:
    """Component ``c`` of a ``vector_load`` variable as the value ``load_expr`` gives."""
    if d.kind == "complex":
        return f"{var}.s{2 * c:x}"  # real part (cast.cc: std::real)
    if d.name == "bfloat16":
        return f"as_float(convert_uint({var}.s{c:x}) << 16)"
    if d.middle == "int" and d.cl != "int":
        return f"(int){var}.s{c:x}"
    return f"{var}.s{c:x}"


def vector_store(d: DType, caps, ptr: str, idx: str, value: str, w: int, vtype: str,
                 exact_half: bool = False) -> tuple[str, str]:
    """(vector type of ``value``, statement storing it at idx .. idx+w-1); see vector_load.
    ``exact_half``: the values are integers of magnitude <= 255 (so exact, normal or zero
    in half): the half bits are the float's, re-biased (``litecl_f2h_exact_vW``)."""
    ct = store_ctype(d, caps, vtype)
    vt = _vec(ct, w)
    if d.name == "float16" and ct == "float":
        if _half_bits(caps):
            f2h = "litecl_f2h_exact_v" if exact_half else "litecl_f2h_v"
            return vt, _store(f"ushort{w}", ptr, idx, f"{f2h}{w}({value})", caps)
        # converted into registers, NaNs made LiteRT's (_litert_half_nan), one store (a
        # streaming one where the kernel streams)
        u = f"ushort{w}"
        bits = f"{{ {u} h_; vstorea_half{w}_rte({value}, 0, (__private half*)&h_); h_ = {_litert_half_nan('h_', w)}; "
        if _streaming(caps):
            return vt, bits + f"__builtin_nontemporal_store(h_, (__global {u}*)({ptr} + {idx})); }}"
        return vt, bits + f"*(__global {u}*)({ptr} + {idx}) = h_; }}"
    if d.name == "float16":  # half values (cl_khr_fp16): NaNs made LiteRT's as above (Intel kept payloads)
        u = f"ushort{w}"
        return vt, f"{{ {u} h_ = as_{u}({value}); h_ = {_litert_half_nan('h_', w)}; {_store(u, ptr, idx, 'h_', caps)} }}"
    return vt, _store(vt, ptr, idx, value, caps)


def _streaming(caps) -> bool:
    return getattr(caps, "streaming", False) and getattr(caps, "nontemporal", False)


def _store(vt: str, ptr: str, idx: str, value: str, caps) -> str:
    """An aligned vector store; non-temporal with caps.streaming (ops/tiling.py streams)."""
    if _streaming(caps):
        return f"__builtin_nontemporal_store({value}, (__global {vt}*)({ptr} + {idx}));"
    return f"*(__global {vt}*)({ptr} + {idx}) = {value};"


def _sat_expr(x: str, frm: str, to: str, lo: int, hi: int) -> str:
    """Truncate toward zero and saturate to [lo, hi]; NaN -> hi (LiteRT cast.cc)."""
    hi_excl = float_literal(hi + 1, frm)  # a power of two: exact in float and double
    lo_f = float_literal(lo, frm)          # 0 or a negative power of two: exact
    return (f"(isnan({x}) ? {int_literal(hi, to)} : ({x}) >= {hi_excl} ? {int_literal(hi, to)}"
            f" : ({x}) < {lo_f} ? {int_literal(lo, to)} : convert_{to}_rtz({x}))")


def step_expr(step: Step, x: str) -> str:
    """One conversion step as an expression of the operand expression ``x``."""
    f, t, how = step.frm, step.to, step.how
    if how == "x != 0":
        if f in ("int", "uint", "long"):
            return f"(int)(({x}) != 0)"
        if f == "float":
            return f"(int)((as_uint({x}) & 0x7fffffffu) != 0u)"
        if f == "double":
            return f"(int)((as_ulong({x}) & 0x7fffffffffffffffUL) != 0UL)"
        if f == "f64bits":
            return f"litecl_f64_nonzero({x})"
    if how.startswith("trunc"):
        lo, hi = (int(v) for v in how.split("[")[1].split("]")[0].split(","))
        if f == "f64bits":
            return f"litecl_f64_to_long_sat({x}, {int_literal(lo, 'long')}, {int_literal(hi, 'long')})"
        return _sat_expr(x, f, t, lo, hi)
    if how.startswith("clamp"):
        if f == "long":
            return f"(int)clamp({x}, -65536L, 65536L)"
        if f == "uint":
            return f"(int)min({x}, 65536u)"
        return f"clamp({x}, -65536, 65536)"
    if how == "in range":
        return f"({t})({x})"
    if how == "extend":
        if t == "long":
            return f"(long)({x})"
        return f"as_{t}({x})"  # int <-> uint: same width, reinterpret (two's complement)
    if how == "wrap":
        return f"as_{t}((uint)({x}))" if t == "int" else f"({t})({x})"
    if how in ("rte", "exact"):
        if t == "f64bits":
            if f == "float":
                return f"litecl_f32_to_f64({x})"
            if f == "uint":
                return f"litecl_ulong32_to_f64({x})"
            return f"litecl_long_to_f64((long)({x}))"
        if f == "f64bits" and t == "float":
            return f"litecl_f64_to_f32({x})"
        suffix = "_rte" if how == "rte" else ""
        if {f, t} == {"float", "double"}:  # NVIDIA's cvt returns canonical NaNs: keep the sign
            return f"(isnan({x}) ? {_nan_of(t, x)} : convert_{t}{suffix}({x}))"
        return f"convert_{t}{suffix}({x})"
    raise AssertionError(f"unhandled step {step}")


def _nan_of(t: str, x: str, w: int = 0) -> str:
    """A quiet NaN of type ``t`` (float/double) with the sign of ``x`` (double/float), in
    integer operations (no float operation may canonicalize it)."""
    n = str(w) if w else ""
    if t == "float":
        return (f"as_float{n}(convert_uint{n}((as_ulong{n}({x}) >> 32) & (ulong{n})(0x80000000UL))"
                f" | (uint{n})(0x7fc00000u))")
    return (f"as_double{n}((convert_ulong{n}(as_uint{n}({x}) & (uint{n})(0x80000000u)) << 32)"
            f" | (ulong{n})(0x7ff8000000000000UL))")


_WIDTH_BITS = {"char": 8, "uchar": 8, "short": 16, "ushort": 16, "half": 16, "int": 32, "uint": 32,
               "float": 32, "long": 64, "ulong": 64, "double": 64}
_MASK_TYPE = {8: "char", 16: "short", 32: "int", 64: "long"}


def _mask(cmp: str, operand_type: str, result_type: str, w: int) -> str:
    """A vector comparison of ``operand_type`` operands (a -1/0 mask of that width) as the
    mask ``select`` needs for ``result_type`` components (same width)."""
    if _WIDTH_BITS[operand_type] == _WIDTH_BITS[result_type]:
        return cmp
    return f"convert_{_MASK_TYPE[_WIDTH_BITS[result_type]]}{w}({cmp})"


def _select(a: str, b: str, cmp: str, operand_type: str, result_type: str, w: int) -> str:
    """``select(a, b, cmp)`` for ``w``-wide vectors of ``result_type``, ``cmp`` a vector
    comparison of ``operand_type`` operands. 64-bit integer lanes take a bitwise blend by
    the sign-extended mask instead: Mesa's rusticl 22.3 picks them wrongly by it (a
    float32 -> int64 CAST's NaN and out-of-range lanes kept the clamped value, measured)."""
    m = _mask(cmp, operand_type, result_type, w)
    if result_type in ("long", "ulong"):
        return f"(({a}) ^ ((({a}) ^ ({b})) & {m}))"
    return f"select({a}, {b}, {m})"


def _below(v: int, ctype: str) -> str:
    """The largest ``ctype`` (float/double) value below the power of two ``v`` (exact)."""
    f = np.float32 if ctype == "float" else np.float64
    return float_literal(float(np.nextafter(f(v), f(0))), ctype) if ctype == "float" else \
        repr(float(np.nextafter(np.float64(v), 0.0)))


#: (lo, hi) of a saturating float -> integer step, and the OpenCL type of that range
_SAT_TYPES = {(-(1 << 7), (1 << 7) - 1): "char", (0, (1 << 8) - 1): "uchar",
              (-(1 << 15), (1 << 15) - 1): "short", (0, (1 << 16) - 1): "ushort",
              (-(1 << 31), (1 << 31) - 1): "int", (0, (1 << 32) - 1): "uint",
              (-(1 << 63), (1 << 63) - 1): "long"}


def step_vexpr(step: Step, x: str, w: int, sat: bool = False) -> str | None:
    """``step`` on a ``w``-wide vector ``x`` of ``step.frm`` components: the same values as
    ``step_expr`` gives per component, in vector built-ins (select, clamp, convert_TN),
    which compilers keep in SIMD registers. None where no vector form exists (the soft
    float64 helpers are scalar functions). Bounds are vectors, not scalars: Oclgrind
    21.10 computes clamp(long4, long, long) wrongly (measured).

    ``sat``: saturating float -> integer steps use ``convert_T_sat_rtz`` (OpenCL 1.2
    6.2.3.3: out-of-range values saturate, NaN gives 0) with NaN lanes selected to the
    maximum; one instruction on NVIDIA (cvt.rzi.sat), where the clamp form costs 5-11% of
    copy bandwidth (LAUNCH's ``sat_convert``)."""
    f, t, how = step.frm, step.to, step.how
    if "f64bits" in (f, t):
        return None
    if how == "x != 0":
        # a vector comparison gives -1 for true: select 1 by it (Oclgrind 21.10 computes
        # both -mask and mask & 1 as 255 for true, measured; select is right everywhere)
        one, zero = f"(int{w})(1)", f"(int{w})(0)"
        if f in ("int", "uint"):
            return f"select({zero}, {one}, ({x}) != ({f}{w})(0))"
        if f == "long":
            return f"select({zero}, {one}, convert_int{w}(({x}) != (long{w})(0)))"
        if f == "float":
            return f"select({zero}, {one}, (as_uint{w}({x}) & (uint{w})(0x7fffffffu)) != (uint{w})(0u))"
        if f == "double":
            return (f"select({zero}, {one}, convert_int{w}((as_ulong{w}({x}) & (ulong{w})(0x7fffffffffffffffUL))"
                    f" != (ulong{w})(0UL)))")
        return None
    if how.startswith("trunc"):
        lo, hi = (int(v) for v in how.split("[")[1].split("]")[0].split(","))
        st = _SAT_TYPES.get((lo, hi))
        if sat and st:  # isnan: -1 (all bits) in NaN lanes, select's mask
            v = _select(f"convert_{st}{w}_sat_rtz({x})", f"({st}{w})({int_literal(hi, st)})", f"isnan({x})", f, st, w)
            return v if st == t else f"convert_{t}{w}({v})"
        # clamp into range first (so the conversion is always defined), then lanes at or
        # above hi + 1 (beyond the clamp when hi + 1 is not representable below it) and
        # NaN lanes (clamp's fmax/fmin drop NaN) take hi
        lo_f = float_literal(lo, f)
        top = _below(hi + 1, f)
        conv = f"convert_{t}{w}_rtz(clamp({x}, ({f}{w})({lo_f}), ({f}{w})({top})))"
        hot = f"((({x}) >= {float_literal(hi + 1, f)}) | isnan({x}))"
        return _select(conv, f"({t}{w})({int_literal(hi, t)})", hot, f, t, w)
    if how.startswith("clamp"):
        if f == "long":
            return f"convert_int{w}(clamp({x}, (long{w})(-65536L), (long{w})(65536L)))"
        if f == "uint":
            return f"convert_int{w}(min({x}, (uint{w})(65536u)))"
        return f"clamp({x}, (int{w})(-65536), (int{w})(65536))"
    if how == "in range":
        return f"convert_{t}{w}({x})"
    if how == "extend":
        if t == "long":
            return f"convert_long{w}({x})"
        return f"as_{t}{w}({x})"
    if how == "wrap":
        return f"as_int{w}(convert_uint{w}({x}))" if t == "int" else f"convert_{t}{w}({x})"
    if how in ("rte", "exact"):
        suffix = "_rte" if how == "rte" else ""
        if {f, t} == {"float", "double"}:  # as step_expr: NaN signs kept
            mask = f"convert_{'int' if t == 'float' else 'long'}{w}(isnan({x}))"
            return f"select(convert_{t}{w}{suffix}({x}), {_nan_of(t, x, w)}, {mask})"
        return f"convert_{t}{w}{suffix}({x})"
    return None


def store_vvalue(d: DType, caps, value: str, w: int) -> str:
    """``store_value`` for a ``w``-wide vector (conversions to unsigned keep the low bits:
    C99 6.3.1.3, which OpenCL's convert_T follows out of range)."""
    st = storage_type(d, caps)
    if d.name == "float16":
        return value
    if st in _SIGNED_NARROW:
        return f"as_{st}{w}(convert_{_SIGNED_NARROW[st]}{w}({value}))"
    if st in ("uchar", "ushort"):
        return f"convert_{st}{w}({value})"
    return value


def vcomponent(d: DType, caps, var: str, w: int) -> str:
    """A ``vector_load`` variable as a vector of the value ``load_expr`` gives."""
    if d.kind == "complex":
        return f"{var}.even"  # real parts (cast.cc: std::real)
    if d.name == "bfloat16":
        return f"as_float{w}(convert_uint{w}({var}) << 16)"
    if d.middle == "int" and d.cl != "int":
        return f"convert_int{w}({var})"
    return var


def cast_vector_fn(plan: CastPlan, caps, fn: str, w: int, operand: str = "x") -> str | None:
    """The CAST of ``plan`` on ``w``-wide vectors as a function ``fn`` (source text), or
    None when a step has no vector form. Takes what ``vcomponent`` gives (as ``x``;
    ``operand`` is the expression of ``x`` the first step converts); returns the vector
    ``vector_store`` stores."""
    from .tiling import launch_config  # noqa: PLC0415

    if plan.dst.kind == "complex" or plan.dst.name == "bfloat16":  # scalar only: (real, 0)
        return None  # pairs; the bf16 rounding helper is scalar (lanes call it one by one)
    sat = launch_config(caps).sat_convert
    x = operand
    for s in plan.steps:
        x = step_vexpr(s, x, w, sat)
        if x is None:
            return None
    value = store_vvalue(plan.dst, caps, x, w)
    out_t = store_ctype(plan.dst, caps, plan.store)
    return f"{out_t}{w} {fn}(const {_ctype(plan.load)}{w} x)\n{{\n    return {value};\n}}\n"


def cast_expr(plan: CastPlan, x: str) -> str:
    """The whole conversion of a loaded element ``x`` as one expression."""
    for s in plan.steps:
        x = step_expr(s, x)
    return x


def pragmas(caps, *, half: bool = False, double: bool = False) -> str:
    """Extension pragmas, only for what the kernel uses."""
    out = []
    if half and caps.fp16:
        out.append("#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
    if double and caps.fp64:
        out.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    return "\n".join(out) + ("\n" if out else "")


def tiled_kernel(name: str, params: list[str], body: str, preamble: str = "",
                 vec_body: str | None = None, width: int = 1, int_args=()) -> str:
    """A kernel whose work-group g is core g of a former/tail plan (ops/tiling.py).

    ``body`` handles the element index ``i`` (uint). With ``width`` > 1 and ``vec_body``
    (which handles elements i .. i+width-1, i a multiple of width), the chunk is walked in
    width-element vectors, then a scalar tail of fewer than width elements (only the last
    non-empty chunk has one: every other chunk is a whole number of 32-byte blocks).
    Work-items stride by the local size so adjacent work-items touch adjacent vectors
    (coalesced on GPUs; one contiguous stream per core on CPUs with one work-item per
    group). The chunk's end is clipped to ``n`` (and an empty chunk past ``n`` does
    nothing): the padded tail of the aligned length is never read or written.
    ``int_args``: names of ``const int`` parameters after the tiling's four (the ops'
    arguments, op_args).
    """
    plist = ",\n    ".join(params + [f"const uint {p}" for p in TILING_PARAMS]
                          + [f"const int {a}" for a in int_args])
    if "litecl_f2h_v1(" in body + preamble or "litecl_h2f_v1(" in body + preamble:
        preamble = half_bits_source(1) + "\n" + preamble
    if vec_body is not None and f"_v{width}(" in vec_body and (
            f"litecl_h2f_v{width}(" in vec_body + preamble or f"litecl_f2h_v{width}(" in vec_body + preamble
            or f"litecl_f2h_exact_v{width}(" in vec_body):
        preamble = half_bits_source(width) + "\n" + preamble
    if vec_body is not None and f"litecl_vload_half_v{width}(" in vec_body:
        preamble = vload_half_source(width) + "\n" + preamble
    head = (
        f"{preamble}"
        f"__kernel void {name}(\n    {plist})\n"
        "{\n"
        "    const uint g = get_group_id(0);\n"
        "    const uint start = g < former_num ? g * former_len\n"
        "                                       : former_num * former_len + (g - former_num) * tail_len;\n"
        "    const uint stop = max(start, min(start + (g < former_num ? former_len : tail_len), n));\n"
        "    const uint lid = get_local_id(0), lsize = get_local_size(0);\n"
    )
    scalar = _indent(body, 8)
    if width > 1 and vec_body is not None:
        return (
            head
            + f"    const uint nvec = (stop - start) / {width}u;\n"
            "    for (uint k = lid; k < nvec; k += lsize) {\n"
            f"        const uint i = start + k * {width}u;\n"
            f"{_indent(vec_body, 8)}\n"
            "    }\n"
            f"    for (uint i = start + nvec * {width}u + lid; i < stop; i += lsize) {{\n"
            f"{scalar}\n"
            "    }\n"
            "}\n"
        )
    return (
        head
        + "    for (uint i = start + lid; i < stop; i += lsize) {\n"
        f"{scalar}\n"
        "    }\n"
        "}\n"
    )


def ndrange_kernel(name: str, params: list[str], body: str, preamble: str = "") -> str:
    """Baseline (benchmarks): one work-item per element, ``if (i < n)``; takes ``n``."""
    plist = ",\n    ".join(params + ["const uint n"])
    return (f"{preamble}__kernel void {name}(\n    {plist})\n{{\n"
            "    const uint i = get_global_id(0);\n"
            f"    if (i < n) {{\n{_indent(body, 8)}\n    }}\n}}\n")


def grid_stride_kernel(name: str, params: list[str], body: str, preamble: str = "") -> str:
    """Baseline (benchmarks): a grid-stride loop over [0, n); takes ``n``."""
    plist = ",\n    ".join(params + ["const uint n"])
    return (f"{preamble}__kernel void {name}(\n    {plist})\n{{\n"
            "    for (uint i = get_global_id(0); i < n; i += get_global_size(0)) {\n"
            f"{_indent(body, 8)}\n    }}\n}}\n")


SKELETONS = ("tiled", "ndrange", "grid_stride")


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.strip().splitlines())


def elementwise_kernel(name: str, inputs, output, fn: str, out_vtype: str, caps,
                       preamble: str = "", width: int = 1, skeleton: str = "tiled",
                       vfn: str | None = None, exact_half: bool = False,
                       index_arg: bool = False, args: tuple = (), count_arg: bool = False) -> str:
    """A kernel applying the scalar OpenCL C function ``fn`` element by element.

    inputs: [(buffer name, DType)]; output: (buffer name, DType). ``fn`` takes each
    input element as ``load_expr`` gives it and returns the stored component
    (``store_value``, of ``store_ctype(output, caps, out_vtype)``); it is defined in
    ``preamble``. The vector path applies ``fn`` per component of one aligned vector load
    per input and stores one vector, so both paths compute exactly the same values; with
    ``vfn`` (a ``width``-wide vector form of ``fn``, also in ``preamble``, taking each
    load as ``vcomponent`` gives it) it calls that once per vector instead. A
    buffer named both as an input and the output is one read-write parameter (no
    ``restrict``). skeleton: "tiled" (former/tail, ops/tiling.py), or the benchmarks'
    baselines "ndrange" / "grid_stride" (scalar, take ``n``). args: the int kernel
    parameters ``fn`` takes last (op_args), declared after the tiling's; ``count_arg``: fn
    takes the element count after the index (NodeOp.wants_count).
    """
    if args and skeleton != "tiled":
        raise ValueError("op arguments need the tiled skeleton")
    oname, od = output
    params, seen = [], set()
    for pname, d in list(inputs) + [output]:
        if pname in seen:
            continue
        seen.add(pname)
        both = pname == oname and any(p == oname for p, _ in inputs)
        st = storage_type(d, caps)
        if both:
            params.append(f"__global {st}* {pname}")
        elif pname == oname:
            params.append(f"__global {st}* restrict {pname}")
        else:
            params.append(f"__global const {st}* restrict {pname}")
    # NaN signs matter only where the output keeps NaNs (a float type); an integer or bool
    # output maps every NaN alike, so half loads skip their NaN-sign fix-up there
    keep = od.kind in ("float", "complex")

    def load(p, d):
        if d.kind == "complex" and od.kind == "complex":  # complex64 -> complex64: both parts
            return f"{p}[i]"
        if d.name == od.name == "bfloat16":  # bfloat16 -> bfloat16: the bits
            return f"{p}[i]"
        return load_expr(d, caps, p, 'i', keep)
    extra = (["n"] if count_arg else []) + list(args)
    call = f"{fn}({', '.join([load(p, d) for p, d in inputs] + (['i'] if index_arg else []) + extra)})"
    body = scalar_store(od, caps, oname, "i", call, out_vtype)
    if skeleton == "ndrange":
        return ndrange_kernel(name, params, body, preamble)
    if skeleton == "grid_stride":
        return grid_stride_kernel(name, params, body, preamble)
    if skeleton != "tiled":
        raise ValueError(f"unknown skeleton {skeleton!r}; known: {', '.join(SKELETONS)}")
    if width <= 1:
        return tiled_kernel(name, params, body, preamble, int_args=args)
    lines = []
    for k, (p, d) in enumerate(inputs):
        vt, expr = vector_load(d, caps, p, "i", width, keep)
        lines.append(f"const {vt} v{k} = {expr};")
    vt, store = vector_store(od, caps, oname, "i", "r", width, out_vtype, exact_half)
    if vfn:
        vargs = ", ".join([vcomponent(d, caps, f"v{k}", width) for k, (p, d) in enumerate(inputs)]
                          + ([lane_index(width)] if index_arg else []) + extra)
        lines.append(f"const {vt} r = {vfn}({vargs});")
    else:
        comps = ", ".join(f"{fn}({', '.join([component(d, caps, f'v{k}', c) for k, (p, d) in enumerate(inputs)] + ([f'i + {c}u'] if index_arg else []) + extra)})"
                          for c in range(width))
        lines.append(f"const {vt} r = ({vt})({comps});")
    lines.append(store)
    return tiled_kernel(name, params, body, preamble, vec_body="\n".join(lines), width=width, int_args=args)


def lane_index(w: int, i: str = "i") -> str:
    """The element indices of a ``w``-wide vector starting at element ``i`` (uintN)."""
    return f"((uint{w})({i}) + (uint{w})({', '.join(str(k) for k in range(w))}))"


def _ctype(t: str) -> str:
    return "ulong" if t == "f64bits" else t


@dataclass(frozen=True)
class NodeOp:
    """One lowered node as a scalar OpenCL C function, the unit kernels are built from.

    ``fn(x0, x1, ...)`` takes each input element as ``load_expr`` gives it and returns the
    component that is stored for the output (``store_value``, of
    ``store_ctype(out, caps, out_vtype)``). ``text`` defines it; ``soft`` names the
    soft-float64 helpers it calls, ``quant`` whether it calls the quantized-ADD helpers,
    ``half``/``double`` whether it needs those extensions. ``vec(w)``, where given, is the
    text of ``fn_vW``: the same function on ``w``-wide vectors (inputs as ``vcomponent``
    gives them, the result as ``vector_store`` stores it), or None when it has none.
    """

    fn: str
    text: str
    inputs: tuple
    out: DType
    out_vtype: str
    soft: tuple = ()
    quant: bool = False
    half: bool = False
    double: bool = False
    vec: Callable[[int], str | None] | None = field(default=None, compare=False, repr=False)
    exact_half: bool = False  # a float16 result is always an integer of magnitude <= 255
    #: fn takes the output element index as a last argument (uint; the vector form: uintN
    #: of the lanes' indices), for rules that depend on the position (ADD's NaN choice)
    wants_index: bool = False
    #: fn takes the launch's element count (uint, the tiling's ``n``) after the index: a
    #: rule split at the SIMD body's end of the whole output (ADD's flat rules) computes it
    wants_count: bool = False
    #: ((name, int32 value), ...): int arguments fn takes after the others (a quantized
    #: ADD's scales and zero points, so equal ops share one program); a kernel declares
    #: them as parameters op_args names, after the tiling's, and the launch passes values
    args: tuple = ()

    def vfn(self, w: int) -> str:
        return f"{self.fn}_v{w}"


def op_args(op: NodeOp) -> list[str]:
    """The kernel parameter names that carry ``op.args`` (unique per op: its fn's name)."""
    return [f"{op.fn}_{n}" for n, _ in op.args]


def op_kernel_args(ops) -> tuple:
    """((kernel parameter name, int32 value), ...) of the ops' arguments, in the order
    kernels declare them (op by op, each op's op_args): what a launch passes after the
    tiling's four."""
    return tuple((f"{op.fn}_{n}", v) for op in ops for n, v in op.args)


def op_preamble(ops, caps) -> str:
    """Pragmas, then every helper the ops need (each once), then the ops' functions."""
    pre = pragmas(caps, half=any(o.half for o in ops), double=any(o.double for o in ops))
    soft = [h for o in ops for h in o.soft]
    if soft:
        from .softf64 import source as soft_source  # noqa: PLC0415

        pre += soft_source(list(dict.fromkeys(soft))) + "\n"
    if any("litecl_f2bf(" in o.text for o in ops):
        pre += bf16_source() + "\n"
    if any(o.quant for o in ops):
        from .add_quant import quant_add_cl_functions  # noqa: PLC0415

        pre += quant_add_cl_functions(caps.int64) + "\n"
    return pre + "".join(o.text + "\n" for o in ops)


def cast_op(src, dst, caps, fn: str = "litecl_cast_op") -> tuple[NodeOp, CastPlan]:
    """CAST src -> dst as a NodeOp (and its plan). Raises ValueError when the pair cannot
    run on ``caps``."""
    src, dst = dtype(src), dtype(dst)
    plan = plan_cast(src, dst, caps)
    out_ct = store_ctype(dst, caps, plan.store)
    value = store_value(dst, caps, cast_expr(plan, "x"), plan.store)
    types = plan.chain()
    text = f"{out_ct} {fn}(const {_ctype(plan.load)} x)\n{{\n    return {value};\n}}\n"
    return NodeOp(fn, text, (src,), dst, plan.store, tuple(plan.helpers), False,
                  "half" in types, "double" in types,
                  lambda w: cast_vector_fn(plan, caps, f"{fn}_v{w}", w),
                  dst.name == "float16" and src.bits <= 8), plan


def _half_bits_to_bool_op(caps, fn: str) -> tuple[NodeOp, CastPlan]:
    """CAST float16 -> bool on the half's bits, loaded as uint16: nonzero unless +-0 (NaN
    and inf are true, as cast.cc's ``x != 0``), with no conversion to float. Measured on
    the H200 (no cl_khr_fp16): 79% -> 95% of copy at 2^26. Only for a whole CAST kernel: in
    a fused group the half arrives as a float value, not as bits."""
    op, plan = cast_op("uint16", "bool", caps, fn)
    value = store_value(plan.dst, caps, cast_expr(plan, "((x) & 0x7fff)"), plan.store)
    text = f"{store_ctype(plan.dst, caps, plan.store)} {fn}(const {_ctype(plan.load)} x)\n{{\n    return {value};\n}}\n"
    return replace(op, text=text, vec=lambda w: cast_vector_fn(
        plan, caps, f"{fn}_v{w}", w, f"((x) & ({_ctype(plan.load)}{w})(0x7fff))")), plan


def cast_kernel(src, dst, caps, name: str = "litecl_cast", vec_bytes: int | None = None,
                skeleton: str = "tiled", vector_ops: bool = True) -> tuple[str, CastPlan]:
    """OpenCL C source of a tiled CAST kernel ``name(src, dst, n, former_num, ...)``.

    The conversion is one function ``name_op`` (``cast_expr`` on a scalar) applied per
    element; the tiled kernel loads ``vector_width`` elements at a time (vec_bytes
    defaults to the device type's ``LAUNCH`` row). Chunks are planned with the smaller
    itemsize (KernelSpec.tile_bytes), so they start on 32-byte boundaries of both
    buffers. With ``vector_ops`` the vectors are converted by a vector form of the
    function (``cast_vector_fn``: select/clamp/convert_TN, what SIMD compilers keep in
    registers) where every step has one. Returns (source, plan). Raises ValueError when
    the pair cannot run on ``caps``.
    """
    from .tiling import launch_config, vector_width  # noqa: PLC0415

    if dtype(src).name == "float16" and dtype(dst).name == "bool" and not caps.fp16:
        op, plan = _half_bits_to_bool_op(caps, f"{name}_op")
    else:
        op, plan = cast_op(src, dst, caps, f"{name}_op")
    src, dst = op.inputs[0], op.out
    pre = op_preamble([op], caps) + "\n"
    vb = vec_bytes if vec_bytes is not None else launch_config(caps).vec_bytes
    width = vector_width((src.itemsize, dst.itemsize), vb)
    if dst.kind == "complex" or src.name == dst.name == "bfloat16":  # element by element:
        width = 1  # (real, imaginary) float2 pairs; bfloat16 bits copied as they are
    if capped_half_width(caps, src.name == "float16", dst.name == "float16") and vec_bytes is None:
        width = min(width, launch_config(caps).half_width)
    vfn = None
    if width > 1 and vector_ops:
        vtext = op.vec(width)
        if vtext is not None:
            pre += vtext + "\n"
            vfn = op.vfn(width)
    return elementwise_kernel(name, [("src", src)], ("dst", dst), op.fn, plan.store, caps, pre,
                              width, skeleton, vfn, op.exact_half), plan
