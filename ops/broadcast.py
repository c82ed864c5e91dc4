"""numpy broadcasting for elementwise kernels: the output shape, and OpenCL C computing
each input's element index from the output's.

TFLite broadcasts as numpy does (reference_ops::Add, ProcessBroadcastShapes). Used by ADD
(ops/add.py) and by fused groups (ops/fusion.py), whose external inputs may broadcast.
``fivefold`` is LiteRT's own grouping of a broadcast into its optimized fivefold loop,
which decides how its kernels treat each element (ops/add.py nan_rule, ops/add_quant.py
quant_add_simd_rule).
"""
from __future__ import annotations

import numpy as np

__all__ = ["NotBroadcastable", "broadcast_shape", "collapse", "fivefold", "index_code"]


class NotBroadcastable(ValueError):
    """Shapes that do not broadcast (numpy's rule, LiteRT's ADD's)."""


def broadcast_shape(a, b) -> tuple:
    """numpy's broadcast of shapes a and b. Raises NotBroadcastable (a ValueError) if they
    do not broadcast."""
    try:
        return tuple(int(x) for x in np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        raise NotBroadcastable(f"shapes {list(a)} and {list(b)} do not broadcast") from None


def collapse(out_shape, in_shapes) -> tuple[list[int], list[list[bool]]]:
    """Merge adjacent output dims where every input broadcasts (or not) alike.

    Returns (dims, flags): dims of the collapsed output, flags[k][d] True where input k
    is broadcast (size 1) along collapsed dim d. Size-1 output dims are dropped.
    """
    r = len(out_shape)
    padded = [(1,) * (r - len(s)) + tuple(s) for s in in_shapes]
    dims: list[int] = []
    flags: list[list[bool]] = [[] for _ in in_shapes]
    for d in range(r):
        n = out_shape[d]
        if n == 1:
            continue
        f = [p[d] == 1 for p in padded]
        if dims and all(flags[k][-1] == f[k] for k in range(len(f))):
            dims[-1] *= n
        else:
            dims.append(n)
            for k in range(len(f)):
                flags[k].append(f[k])
    return dims, flags


def index_code(out_shape, in_shapes, i: str = "i") -> tuple[str, list[str]]:
    """OpenCL C computing each input's element index from output index ``i``.

    Returns (statements, [index expression per input]). An empty output (a 0 in its
    shape) reads nothing: no statements (no ``% 0u``, which compilers warn about).
    """
    if any(int(d) == 0 for d in out_shape):
        return "", [i for _ in in_shapes]
    dims, flags = collapse(out_shape, in_shapes)
    exprs: list[str] = []
    need_coords = False
    for f in flags:
        if not any(f):
            exprs.append(i)
        elif all(f):
            exprs.append("0")
        else:
            need_coords = True
            exprs.append("")
    if not need_coords:
        return "", exprs
    lines = [f"uint r_ = {i};"]
    nd = len(dims)
    for d in range(nd - 1, -1, -1):
        if d == 0:
            lines.append(f"const uint c{d} = r_;")
        else:
            lines.append(f"const uint c{d} = r_ % {dims[d]}u; r_ /= {dims[d]}u;")
    for k, f in enumerate(flags):
        if exprs[k]:
            continue
        terms, stride = [], 1
        for d in range(nd - 1, -1, -1):
            if not f[d]:
                terms.append(f"c{d}" if stride == 1 else f"c{d} * {stride}u")
                stride *= dims[d]
        exprs[k] = "(" + " + ".join(reversed(terms)) + ")"
    return "\n".join(lines), exprs


def fivefold(e1, e2):
    """tflite::ProcessBroadcastShapes on two shapes of equal rank (broadcasting): the
    fast-broadcasting operand ("a" or "b") and the five loop extents y0..y4 when the
    broadcast fits LiteRT's optimized fivefold loop, else None (the generic path)."""
    fast = None
    for i in range(len(e1) - 1, -1, -1):
        if e1[i] == e2[i]:
            continue
        fast = "a" if e1[i] == 1 else "b" if e2[i] == 1 else None
        break
    if fast is None:
        return None
    sa, sb = (e1, e2) if fast == "a" else (e2, e1)
    y, i = [1] * 5, len(e1) - 1
    for k, test in ((4, lambda j: sa[j] == sb[j]), (3, lambda j: sa[j] == 1),
                    (2, lambda j: sa[j] == sb[j]), (1, lambda j: sb[j] == 1),
                    (0, lambda j: sa[j] == sb[j])):
        while i >= 0 and test(i):
            y[k] *= sb[i] if k in (4, 3, 0) else sa[i]
            i -= 1
    return (fast, y) if i < 0 else None
