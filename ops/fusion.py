"""Fused elementwise kernels: a run of lowered nodes over one element space, one kernel.

Each node is its NodeOp function (ops/codegen.py). Values passed between fused nodes keep
every rounding the graph defines: a node's result is held in the exact form it would be
stored in (char, ushort bits of a half, ...) and re-read the way a load would read it, so
f32 -> f16 -> f32 still rounds to half (through ``vstore_half_rte`` into a private word
when the device has no cl_khr_fp16). Only tensors something outside the group needs are
written to global memory.

Inputs may broadcast (ADD): each external input is indexed from the group's element
index with ``add.index_code``. Same inputs, same text.
"""
from __future__ import annotations

from dataclasses import dataclass

from .add import index_code
from .codegen import NodeOp, load_expr, op_preamble, scalar_store, storage_type, tiled_kernel
from .dtypes import DType

__all__ = ["FusedSpec", "fused_kernel", "HALF_ROUND"]

#: float -> the float nearest-even-rounded to half, without cl_khr_fp16 (half is only a
#: pointer type there: the value goes through vstore_half_rte into a private ushort).
HALF_ROUND = """float litecl_half_round(const float x)
{
    ushort h;
    vstore_half_rte(x, 0, (__private half*)&h);
    return vload_half(0, (const __private half*)&h);
}
"""


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


def _reload(op: NodeOp, caps, var: str) -> str:
    """The value a load of ``op``'s stored result would give (load_expr semantics)."""
    d = op.out
    if d.name == "float16":
        return var if (caps.fp16 and op.out_vtype == "half") else f"litecl_half_round({var})"
    if d.middle == "int" and d.cl != "int":
        return f"(int){var}"
    return var


def _ctype(op: NodeOp, caps) -> str:
    from .codegen import store_ctype  # noqa: PLC0415

    return store_ctype(op.out, caps, op.out_vtype)


def fused_kernel(spec: FusedSpec, caps, name: str = "litecl_fused") -> str:
    """OpenCL C of the fused group ``name(in0.., out0.., n, former_num, ...)``; scalar
    element loop in the former/tail skeleton (ops/codegen.py tiled_kernel)."""
    ops = [op for op, _ in spec.steps]
    pre = op_preamble(list({op.fn: op for op in ops}.values()), caps)
    needs_round = any(op.out.name == "float16" and not (caps.fp16 and op.out_vtype == "half")
                      for j, (op, _) in enumerate(spec.steps)
                      if any(a == ("t", j) for _, args in spec.steps for a in args))
    if needs_round:
        pre += HALF_ROUND
    idx_stmts, idx = index_code(spec.out_shape, [s for _, s in spec.inputs])
    lines = [idx_stmts] if idx_stmts else []
    used = {a[1] for _, args in spec.steps for a in args if a[0] == "in"}
    for k, (d, _) in enumerate(spec.inputs):
        if k in used:
            lines.append(f"const {_load_ctype(d, caps)} x{k} = {load_expr(d, caps, f'in{k}', idx[k])};")
    for j, (op, args) in enumerate(spec.steps):
        vals = [f"x{a[1]}" if a[0] == "in" else _reload(spec.steps[a[1]][0], caps, f"t{a[1]}")
                for a in args]
        lines.append(f"const {_ctype(op, caps)} t{j} = {op.fn}({', '.join(vals)});")
    for m, (j, d) in enumerate(spec.outputs):
        lines.append(scalar_store(d, caps, f"out{m}", "i", f"t{j}", spec.steps[j][0].out_vtype))
    params = [f"__global const {storage_type(d, caps)}* restrict in{k}" for k, (d, _) in enumerate(spec.inputs)]
    params += [f"__global {storage_type(d, caps)}* restrict out{m}" for m, (_, d) in enumerate(spec.outputs)]
    return tiled_kernel(name, params, "\n".join(lines), pre + "\n")


def _load_ctype(d: DType, caps) -> str:
    """The OpenCL C type load_expr yields for ``d``."""
    if d.name == "float16":
        return "half" if caps.fp16 else "float"
    if d.kind == "complex":
        return "float"
    if d.name == "float64" and not caps.fp64:
        return "ulong"
    return d.middle
