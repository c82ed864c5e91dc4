"""OpenCL C code generation: small pure functions returning source text.

Same inputs, same text: the text is the program-cache key and is snapshot-testable
without a device. Nothing here queries a device; capabilities arrive as a ``Caps``.
"""
from __future__ import annotations

import numpy as np

from .cast import CastPlan, Step, plan_cast
from .dtypes import DType, dtype

__all__ = [
    "storage_type", "load_expr", "step_expr", "store_stmt", "cast_expr", "pragmas",
    "tiled_kernel", "cast_kernel", "int_literal", "float_literal", "TILING_PARAMS",
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


def load_expr(d: DType, caps, ptr: str, idx: str) -> str:
    """Expression loading element ``idx`` of buffer ``ptr`` as its middle value type."""
    if d.name == "float16":
        return f"{ptr}[{idx}]" if caps.fp16 else f"vload_half({idx}, {ptr})"
    if d.kind == "complex":
        return f"{ptr}[{idx}].x"  # real part (cast.cc: std::real)
    if d.middle == "int" and d.cl != "int":
        return f"(int){ptr}[{idx}]"
    return f"{ptr}[{idx}]"


_SIGNED_NARROW = {"char": "uchar", "short": "ushort"}


def store_stmt(d: DType, caps, ptr: str, idx: str, value: str, vtype: str) -> str:
    """Statement storing ``value`` (of OpenCL value type ``vtype``) as element ``idx``."""
    st = storage_type(d, caps)
    if d.name == "float16":
        if vtype == "half":
            return f"{ptr}[{idx}] = {value};"
        return f"vstore_half_rte({value}, {idx}, {ptr});"
    if st in _SIGNED_NARROW:  # keep the low bits: C defines conversion to unsigned
        return f"{ptr}[{idx}] = as_{st}(({_SIGNED_NARROW[st]})({value}));"
    if st in ("uchar", "ushort"):
        return f"{ptr}[{idx}] = ({st})({value});"
    return f"{ptr}[{idx}] = {value};"


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
        return f"convert_{t}{suffix}({x})"
    raise AssertionError(f"unhandled step {step}")


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


def tiled_kernel(name: str, params: list[str], body: str, preamble: str = "") -> str:
    """A kernel whose work-group g is core g of a former/tail plan (ops/tiling.py).

    Work-items stride over the chunk by the local size so adjacent work-items touch
    adjacent elements (coalesced on GPUs, vectorisable by CPU compilers). The chunk's end
    is clipped to ``n``: the padded tail of the aligned length is never read or written.
    ``body`` uses the element index ``i`` (uint).
    """
    plist = ",\n    ".join(params + [f"const uint {p}" for p in TILING_PARAMS])
    body = "\n".join("        " + line for line in body.strip().splitlines())
    return (
        f"{preamble}"
        f"__kernel void {name}(\n    {plist})\n"
        "{\n"
        "    const uint g = get_group_id(0);\n"
        "    const uint start = g < former_num ? g * former_len\n"
        "                                       : former_num * former_len + (g - former_num) * tail_len;\n"
        "    const uint stop = min(start + (g < former_num ? former_len : tail_len), n);\n"
        "    for (uint i = start + get_local_id(0); i < stop; i += get_local_size(0)) {\n"
        f"{body}\n"
        "    }\n"
        "}\n"
    )


def uses_half(*types: str) -> bool:
    return "half" in types


def cast_kernel(src, dst, caps, name: str = "litecl_cast") -> tuple[str, CastPlan]:
    """OpenCL C source of a tiled CAST kernel ``name(src, dst, n, former_num, ...)``.

    Returns (source, plan). Raises ValueError when the pair cannot run on ``caps``.
    """
    src, dst = dtype(src), dtype(dst)
    plan = plan_cast(src, dst, caps)
    x = load_expr(src, caps, "src", "i")
    value = cast_expr(plan, x)
    body = store_stmt(dst, caps, "dst", "i", value, plan.store)
    types = plan.chain()
    pre = pragmas(caps, half="half" in types, double="double" in types)
    if plan.helpers:
        from .softf64 import source as soft_source  # noqa: PLC0415

        pre += soft_source(plan.helpers) + "\n"
    params = [f"__global const {storage_type(src, caps)}* restrict src",
              f"__global {storage_type(dst, caps)}* restrict dst"]
    return tiled_kernel(name, params, body, pre), plan
