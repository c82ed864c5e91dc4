"""Fused elementwise kernels: a run of lowered nodes over one element space, one kernel.

Each node is its NodeOp function (ops/codegen.py). Values passed between fused nodes keep
every rounding the graph defines: a node's result is held in the exact form it would be
stored in (char, ushort bits of a half, ...) and re-read the way a load would read it, so
f32 -> f16 -> f32 still rounds to half (through ``vstore_half_rte`` into a private word
when the device has no cl_khr_fp16). Only tensors something outside the group needs are
written to global memory.

Inputs may broadcast (ADD): each external input is indexed from the group's element
index with ``broadcast.index_code``. Same inputs, same text.
"""
from __future__ import annotations

from dataclasses import dataclass

import math

from .broadcast import collapse, index_code
from .codegen import (NodeOp, lane_index, load_expr, op_kernel_args, op_args, op_preamble, scalar_store,
                      storage_type, tiled_kernel, vcomponent, vector_load, vector_store)
from .dtypes import DType

__all__ = ["FusedSpec", "fused_kernel", "fused_kernel_args", "half_round"]

@dataclass(frozen=True)
class FusedSpec:
    """A fused group.

    out_shape: the element space (every member's output shape).
    inputs: ((DType, shape), ...) external input buffers, parameters ``in0, in1, ...``.
    steps: ((NodeOp, args), ...) in order; each arg is ("in", k) or ("t", j) (the result of
      step j).
    outputs: ((step j, DType), ...) results written to parameters ``out0, out1, ...``.
    """

    out_shape: tuple
    inputs: tuple
    steps: tuple
    outputs: tuple


def half_round(caps, w: int = 1) -> str:
    """``litecl_half_round`` (w == 1) or ``litecl_half_round_vW``: float -> the float
    nearest-even-rounded to half, without cl_khr_fp16 (half is only a pointer type there).
    Through a private ushort with vstore_half_rte, or, where the device's LAUNCH row says
    so (GPUs: NVIDIA's vstore_half drops NaN signs), codegen.half_bits_source's integer
    conversions."""
    from .codegen import _half_bits  # noqa: PLC0415

    n = "" if w == 1 else str(w)
    name = "litecl_half_round" + ("" if w == 1 else f"_v{w}")
    head = f"float{n} {name}(const float{n} x)\n{{\n"
    if _half_bits(caps):
        return head + f"    return litecl_h2f_v{w}(litecl_f2h_v{w}(x));\n}}\n"
    st, ld = ("vstore_half_rte", "vload_half") if w == 1 else (f"vstore_half{w}_rte", f"vload_half{w}")
    # a NaN as LiteRT's fp16 round trip gives it, sign | 0x7fc00000 (pip's PoCL 3.0's
    # vstore_half wrote 0x7fff: 0x7fffe000 back)
    nan = f"as_float{n}((as_uint{n}(x) & 0x80000000u) | 0x7fc00000u)"
    return (head + f"    ushort{n} h;\n    {st}(x, 0, (__private half*)&h);\n"
            f"    return select({ld}(0, (const __private half*)&h), {nan}, isnan(x));\n}}\n")


def _reload(op: NodeOp, caps, var: str, w: int = 1) -> str:
    """The value a load of ``op``'s stored result would give (load_expr semantics), for a
    scalar (w == 1) or a ``w``-wide vector."""
    d = op.out
    if d.name == "float16":
        if caps.fp16 and op.out_vtype == "half":  # its NaNs as LiteRT's store makes them (codegen)
            from .codegen import _litert_half_nan  # noqa: PLC0415

            n = "" if w == 1 else str(w)
            return f"as_half{n}((ushort{n})({_litert_half_nan(f'as_ushort{n}({var})', w)}))"  # (?: gives int)
        return f"litecl_half_round{'' if w == 1 else f'_v{w}'}({var})"
    if d.name == "bfloat16":
        return f"as_float(convert_uint({var}) << 16)" if w == 1 else f"as_float{w}(convert_uint{w}({var}) << 16)"
    if d.middle == "int" and d.cl != "int":
        return f"(int){var}" if w == 1 else f"convert_int{w}({var})"
    return var


def _ctype(op: NodeOp, caps) -> str:
    from .codegen import store_ctype  # noqa: PLC0415

    return store_ctype(op.out, caps, op.out_vtype)


def _width(spec: FusedSpec, caps) -> int:
    """The group's vector width from the device's LAUNCH row and its types, or 1 where
    some member has no vector form at that width."""
    from .codegen import capped_half_width  # noqa: PLC0415
    from .tiling import launch_config, vector_width  # noqa: PLC0415

    cfg = launch_config(caps)
    w = vector_width([d.itemsize for d, _ in spec.inputs] + [d.itemsize for _, d in spec.outputs], cfg.vec_bytes)
    if capped_half_width(caps, any(d.name == "float16" for d, _ in spec.inputs),
                         any(d.name == "float16" for _, d in spec.outputs)):
        w = min(w, cfg.half_width)
    if w < 2 or any(op.vec is None or op.vec(w) is None for op, _ in spec.steps):
        return 1
    return w


def _vector_width(spec: FusedSpec, caps, idx: list) -> int:
    """The vector width of the group's vector path, or 1 when it has none: every input
    is read element by element (same shape) or is a single element (splatted), and
    every member has a vector form."""
    if any(e != "i" and math.prod(s) != 1 for e, (_, s) in zip(idx, spec.inputs)):
        return 1
    return _width(spec, caps)


#: types a row vector loads with vloadN and converts with vcomponent (no half, bfloat16 or
#: complex storage forms)
_ROW_TYPES = frozenset({"float32", "int32", "uint32", "int16", "uint16", "int8", "uint8", "int64", "uint64"})


def _row_width(spec: FusedSpec, caps, idx: list) -> tuple[int, list]:
    """(w, flags): the vector width of the group's row path and broadcast.collapse's
    flags of its inputs; (1, []) when it has none. Inputs that vary along the collapsed
    output's innermost dimension are read as rows of consecutive elements (vloadN from
    the input index of a vector's first lane), the others (broadcast along it) splatted,
    where a vector lies in one row; a vector across two rows takes the scalar body lane
    by lane. The values are the scalar body's (every member's vector form gives its
    scalar's)."""
    if any(int(x) == 0 for x in spec.out_shape) or all(e in ("i", "0") for e in idx):
        return 1, []
    dims, flags = collapse(spec.out_shape, [s for _, s in spec.inputs])
    if any(e not in ("i", "0") and (d.name not in _ROW_TYPES or storage_type(d, caps) != d.cl)
           for e, (d, _) in zip(idx, spec.inputs)):
        return 1, []
    w = _width(spec, caps)
    return (w, flags) if w > 1 and dims[-1] >= w else (1, [])


def fused_kernel(spec: FusedSpec, caps, name: str = "litecl_fused") -> str:
    """OpenCL C of the fused group ``name(in0.., out0.., n, former_num, ..., args)`` in the
    former/tail skeleton (ops/codegen.py tiled_kernel). Where every input is same-shape
    or a single element and every member has a vector form (NodeOp.vec), chunks are
    walked in aligned vectors (single elements splatted) with a scalar tail; otherwise
    element by element, broadcast inputs indexed with ``broadcast.index_code``. Raises
    ValueError for a member with a complex64 result (not fused)."""
    ops = [op for op, _ in spec.steps]
    if any(op.out.kind == "complex" for op in ops):  # raised: the plan leaves it unfused
        raise ValueError("complex64 results are not fused (each such CAST has its own kernel)")
    if any(op.out.name == "bfloat16" and op.inputs[0].name == "bfloat16" for op in ops):
        raise ValueError("a bfloat16 -> bfloat16 copy of bits is not fused")
    pre = op_preamble(list({op.fn: op for op in ops}.values()), caps)
    needs_round = any(op.out.name == "float16" and not (caps.fp16 and op.out_vtype == "half")
                      for j, (op, _) in enumerate(spec.steps)
                      if any(a == ("t", j) for _, args in spec.steps for a in args))
    if needs_round:
        pre += half_round(caps)
    idx_stmts, idx = index_code(spec.out_shape, [s for _, s in spec.inputs])
    w, row = _vector_width(spec, caps, idx), []  # row: the row path's collapse flags
    if w == 1:
        w, row = _row_width(spec, caps, idx)
    if w > 1:
        pre += "".join(dict.fromkeys(op.vec(w) for op, _ in spec.steps))
        if needs_round:
            pre += half_round(caps, w)
    lines = [idx_stmts] if idx_stmts else []
    used = {a[1] for _, args in spec.steps for a in args if a[0] == "in"}
    for k, (d, _) in enumerate(spec.inputs):
        if k in used:
            lines.append(f"const {_load_ctype(d, caps)} x{k} = {load_expr(d, caps, f'in{k}', idx[k])};")
    for j, (op, args) in enumerate(spec.steps):
        vals = [f"x{a[1]}" if a[0] == "in" else _reload(spec.steps[a[1]][0], caps, f"t{a[1]}")
                for a in args] + (["i"] if op.wants_index else []) + (["n"] if op.wants_count else []) + op_args(op)
        lines.append(f"const {_ctype(op, caps)} t{j} = {op.fn}({', '.join(vals)});")
    for m, (j, d) in enumerate(spec.outputs):
        lines.append(scalar_store(d, caps, f"out{m}", "i", f"t{j}", spec.steps[j][0].out_vtype))
    params = [f"__global const {storage_type(d, caps)}* restrict in{k}" for k, (d, _) in enumerate(spec.inputs)]
    params += [f"__global {storage_type(d, caps)}* restrict out{m}" for m, (_, d) in enumerate(spec.outputs)]
    int_args = [a for op in ops for a in op_args(op)]
    if w < 2:
        return tiled_kernel(name, params, "\n".join(lines), pre + "\n", int_args=int_args)
    vlines = []
    for k, (d, shape) in enumerate(spec.inputs):
        if k not in used:
            continue
        if idx[k] == "i":
            vt, expr = vector_load(d, caps, f"in{k}", "i", w)
            vlines.append(f"const {vt} l{k} = {expr};")
            vlines.append(f"const {_load_ctype(d, caps)}{w} x{k} = {vcomponent(d, caps, f'l{k}', w)};")
        elif idx[k] != "0" and row[k][-1]:  # row path: broadcast along the row, splatted
            lt = _load_ctype(d, caps)
            vlines.append(f"const {lt}{w} x{k} = ({lt}{w})({load_expr(d, caps, f'in{k}', idx[k])});")
        elif idx[k] != "0":  # row path: consecutive elements of this input
            vlines.append(f"const {d.cl}{w} l{k} = vload{w}(0, in{k} + {idx[k]});")
            vlines.append(f"const {_load_ctype(d, caps)}{w} x{k} = {vcomponent(d, caps, f'l{k}', w)};")
        else:  # a single element, splatted
            lt = _load_ctype(d, caps)
            vlines.append(f"const {lt}{w} x{k} = ({lt}{w})({load_expr(d, caps, f'in{k}', '0')});")
    for j, (op, args) in enumerate(spec.steps):
        vals = ([f"x{a[1]}" if a[0] == "in" else _reload(spec.steps[a[1]][0], caps, f"t{a[1]}", w)
                 for a in args] + ([lane_index(w)] if op.wants_index else []) + (["n"] if op.wants_count else [])
                + op_args(op))
        vlines.append(f"const {_ctype(op, caps)}{w} t{j} = {op.vfn(w)}({', '.join(vals)});")
    for m, (j, d) in enumerate(spec.outputs):
        op = spec.steps[j][0]
        vlines.append(vector_store(d, caps, f"out{m}", "i", f"t{j}", w, op.out_vtype, op.exact_half)[1])
    if row:  # the vector's first lane's input indices; lane by lane where it crosses a row
        dims = collapse(spec.out_shape, [s for _, s in spec.inputs])[0]  # index_code's c0 .. c{last}
        vlines = [idx_stmts, f"if (c{len(dims) - 1} + {w}u <= {dims[-1]}u) {{", *("    " + x for x in vlines), "} else {",
                  "    const uint i0_ = i;", f"    for (uint j_ = 0; j_ < {w}u; j_++) {{",
                  "        const uint i = i0_ + j_;", *("        " + x for x in "\n".join(lines).split("\n")),
                  "    }", "}"]
    return tiled_kernel(name, params, "\n".join(lines), pre + "\n", vec_body="\n".join(vlines), width=w,
                        int_args=int_args)


def fused_kernel_args(spec: FusedSpec) -> tuple:
    """((parameter name, int32 value), ...) fused_kernel's kernel takes after the tiling's
    four (its steps' NodeOp.args, step by step)."""
    return op_kernel_args([op for op, _ in spec.steps])


def _load_ctype(d: DType, caps) -> str:
    """The OpenCL C type load_expr yields for ``d``."""
    if d.name == "float16":
        return "half" if caps.fp16 else "float"
    if d.kind == "complex" or d.name == "bfloat16":
        return "float"
    if d.name == "float64" and not caps.fp64:
        return "ulong"
    return d.middle
