"""The lowering table: which builtin operators litecl runs on OpenCL, and why not.

Mirrors a TFLite delegate's IsNodeSupported: ``LOWERINGS`` is keyed by BuiltinOperator
name; each entry's ``why_not(node, subgraph, caps)`` returns None when the node can run
on the device or a one-line reason (collected and reported in TFLite's log format), and
``kernel(node, subgraph, shapes, caps)`` returns a KernelSpec for concrete input shapes.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import InputError
from .model import Node, Subgraph
from .selftest import fault_family, faulty
from .ops import add as add_ops
from .ops.cast import cast_why_not
from .ops.codegen import cast_kernel

__all__ = ["KernelSpec", "LOWERINGS", "why_not", "kernel_spec", "output_shapes"]


@dataclass(frozen=True)
class KernelSpec:
    """A generated kernel for one node at concrete shapes: ``source`` (the cache key),
    kernel ``name``, element count ``n`` of the output, ``tile_bytes`` (the smallest
    itemsize the kernel touches, for 32-byte aligned chunks), a description, and the
    ``args`` the kernel takes after the tiling's four ((parameter name, int32 value) pairs:
    a quantized ADD's constants)."""

    source: str
    name: str
    n: int
    tile_bytes: int
    what: str
    args: tuple = ()  # ((name, int32 value), ...) after the tiling's four (codegen.NodeOp.args)


def _streaming_note(source: str) -> str:
    """What `litecl bench` shows for a kernel that stores non-temporally (ops/tiling.py streams)."""
    return ", streaming stores" if "__builtin_nontemporal_store" in source else ""


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


class CastLowering:
    op = "CAST"

    @staticmethod
    def why_not(node: Node, sg: Subgraph, caps) -> str | None:
        if len(node.inputs) != 1 or len(node.outputs) != 1 or node.inputs[0] < 0:
            return "expects one input and one output"
        src, dst = sg.tensors[node.inputs[0]], sg.tensors[node.outputs[0]]
        for t in (src, dst):
            if t.dtype is None:
                return f"{t.type_name} tensors not supported"
        return cast_why_not(src.dtype, dst.dtype, caps)

    @staticmethod
    def output_shapes(node, sg, shapes):
        return [tuple(shapes[0])]

    @staticmethod
    def kernel(node: Node, sg: Subgraph, shapes, caps) -> KernelSpec:
        src, dst = sg.tensors[node.inputs[0]].dtype, sg.tensors[node.outputs[0]].dtype
        source, plan = cast_kernel(src, dst, caps)
        return KernelSpec(source, "litecl_cast", _numel(shapes[0]),
                          min(src.itemsize, dst.itemsize),
                          f"CAST {src.name}->{dst.name} via {' -> '.join(plan.chain())}{_streaming_note(source)}")

    @staticmethod
    def node_op(node: Node, sg: Subgraph, shapes, caps, fn: str):
        from .ops.codegen import cast_op  # noqa: PLC0415

        src, dst = sg.tensors[node.inputs[0]].dtype, sg.tensors[node.outputs[0]].dtype
        return cast_op(src, dst, caps, fn)[0]


class AddLowering:
    op = "ADD"

    @staticmethod
    def _quant_params(node: Node, sg: Subgraph):
        from .ops.add_quant import quant_add_params  # noqa: PLC0415

        a, b, o = (sg.tensors[t] for t in (node.inputs[0], node.inputs[1], node.outputs[0]))
        qp = [(float(t.scales[0]), int(t.zero_points[0]) if t.zero_points.size else 0) for t in (a, b, o)]
        # AddOptions.pot_scale_int16 defaults to true in the schema (and when options are absent)
        pot = bool(getattr(node.options, "potScaleInt16", True)) if node.options is not None else True
        return quant_add_params(o.dtype.name, qp[0], qp[1], qp[2], node.activation,
                                pot_scale_int16=pot)

    @staticmethod
    def _quantized(node: Node, sg: Subgraph) -> bool:
        """int8/uint8 ADD is always quantized; int16 only with quantization parameters on
        some tensor: LiteRT runs an int16 ADD without any as plain wrapping arithmetic
        (measured: [32767, -32768] + [1, -1] = [-32768, 32767], then the activation)."""
        ts = [sg.tensors[t] for t in (*node.inputs, node.outputs[0])]
        dt = ts[-1].dtype.name
        return dt in ("int8", "uint8") or (dt == "int16" and any(t.scales.size for t in ts))

    @staticmethod
    def why_not(node: Node, sg: Subgraph, caps) -> str | None:
        if len(node.inputs) != 2 or len(node.outputs) != 1 or min(node.inputs) < 0:
            return "expects two inputs and one output"
        ts = [sg.tensors[t] for t in (*node.inputs, node.outputs[0])]
        if any(t.dtype is None for t in ts):
            return f"{ts[0].type_name} tensors not supported"
        if len({t.dtype.name for t in ts}) != 1:
            return "mixed input and output types"
        dt = ts[0].dtype.name
        quant = AddLowering._quantized(node, sg)
        if quant:
            if any(t.scales.size != 1 for t in ts):
                return f"{dt} ADD without per-tensor quantization"
            try:
                p = AddLowering._quant_params(node, sg)
            except ValueError as e:
                return str(e)
            from .ops.add_quant import quant_add_why_not  # noqa: PLC0415

            # shape_signature marks dynamic dims -1 (single_add a8w8: [-1, 32, 32]): check
            # the shapes the model declares now; kernel() re-checks the allocated ones
            r = quant_add_why_not(p, ts[0].shape, ts[1].shape)
            if r:
                return r
        return add_ops.add_why_not(dt, [t.shape_signature for t in ts], node.activation, caps)

    @staticmethod
    def output_shapes(node, sg, shapes):
        return [add_ops.broadcast_shape(shapes[0], shapes[1])]

    @staticmethod
    def kernel(node: Node, sg: Subgraph, shapes, caps) -> KernelSpec:
        dt = sg.tensors[node.outputs[0]].dtype
        quant = AddLowering._quant_params(node, sg) if AddLowering._quantized(node, sg) else None
        if quant is not None:
            from .ops.add_quant import quant_add_why_not  # noqa: PLC0415

            # after a resize: LiteRT aborts the process on a broadcasting int16 POT ADD
            r = quant_add_why_not(quant, shapes[0], shapes[1])
            if r:
                raise InputError(f"ADD node {node.index}: {r}")
        r = add_ops.add_why_not(dt.name, [shapes[0], shapes[1]], node.activation, caps)
        if r:  # e.g. after a resize: a 9-D broadcast, on which LiteRT aborts
            raise InputError(f"ADD node {node.index}: {r}")
        src = add_ops.add_kernel(dt.name, shapes[0], shapes[1], node.activation, caps, quant)
        out = add_ops.broadcast_shape(shapes[0], shapes[1])
        bc = " (broadcast)" if tuple(shapes[0]) != tuple(shapes[1]) else ""
        return KernelSpec(src, "litecl_add", _numel(out), dt.itemsize,
                          f"ADD {dt.name}{' quantized (' + quant.path + ' path)' if quant else ''} "
                          f"{node.activation}{bc}{_streaming_note(src)}",
                          add_ops.add_kernel_args(dt.name, shapes[0], shapes[1], node.activation, caps, quant))

    @staticmethod
    def node_op(node: Node, sg: Subgraph, shapes, caps, fn: str):
        dt = sg.tensors[node.outputs[0]].dtype
        quant = AddLowering._quant_params(node, sg) if AddLowering._quantized(node, sg) else None
        return add_ops.add_op(dt.name, node.activation, caps, quant, fn,
                              (tuple(shapes[0]), tuple(shapes[1])))


LOWERINGS = {cls.op: cls for cls in (CastLowering, AddLowering)}

#: The newest operator version litecl's semantics were checked against, per operator:
#: the versions LiteRT (ai-edge-litert 2.x, builtin resolver) registers, measured by
#: loading each version (CAST 1..9, ADD 1..6). A newer version may mean semantics litecl
#: does not know, so such a node falls back (and LiteRT reports it if it cannot run it).
MAX_VERSION = {"CAST": 9, "ADD": 6}


def why_not(node: Node, sg: Subgraph, caps) -> str | None:
    """None if ``node`` runs on OpenCL, else the reason it falls back."""
    low = LOWERINGS.get(node.op)
    if low is None:
        return "not a lowered operator"
    if node.version > MAX_VERSION[node.op]:
        return (f"{node.op} version {node.version} is newer than litecl knows "
                f"(checked up to version {MAX_VERSION[node.op]})")
    if caps.compiler_error:
        return f"the device cannot build kernels ({caps.compiler_error})"
    if any(t >= 0 and sg.tensors[t].is_variable for t in (*node.inputs, *node.outputs)):
        return "touches a variable tensor (its state lives in LiteRT)"
    return low.why_not(node, sg, caps)


def output_shapes(node: Node, sg: Subgraph, shapes) -> list[tuple]:
    return LOWERINGS[node.op].output_shapes(node, sg, shapes)


def kernel_spec(node: Node, sg: Subgraph, shapes, caps) -> KernelSpec:
    """The node's kernel at input ``shapes`` on ``caps``, memoised per process on the
    node's key (views.node_key: everything lowering reads of it), the shapes and the caps
    object: Prepare generates each node's kernel at its declared shapes to check it, and
    the partition's plan asks for the same one at allocate (MoveNet's first Interpreter:
    ~10 ms of code generation saved). Raises InputError where it cannot be generated."""
    from .views import _memo_put, node_key  # noqa: PLC0415

    key = (node_key(node, sg), tuple(tuple(int(d) for d in s) for s in shapes), id(caps), fault_family())
    hit = _SPECS.get(key)
    if hit is not None and hit[0] is caps:
        return hit[1]
    spec = LOWERINGS[node.op].kernel(node, sg, shapes, caps)
    name = _faulted(node, sg, shapes, caps)
    spec = replace(spec, source=faulty(name, spec.source)) if name else spec
    return _memo_put(_SPECS, key, (caps, spec), _SPECS_MAX)[1]


#: (node key, input shapes, id(caps), fault family) -> (caps, KernelSpec): kernel_spec's memo
_SPECS: dict = {}
#: emptied at this many entries, as the plans' (delegate._PLANS_MAX): one a node and shape, ~3.5 KB
#: each with its source; a model resized to ever new shapes grew the process to ~230 MB at the
#: views' 65536 (a fresh user's report)
_SPECS_MAX = 4096


def node_op(node: Node, sg: Subgraph, shapes, caps, fn: str):
    """The node as a NodeOp (ops/codegen.py) named ``fn``, for fused kernels."""
    op = LOWERINGS[node.op].node_op(node, sg, shapes, caps, fn)
    name = _faulted(node, sg, shapes, caps)
    if not name:
        return op
    vec = op.vec
    return replace(op, text=faulty(name, op.text), vec=vec and (lambda w: faulty(name, vec(w) or "") or None))


def _faulted(node: Node, sg: Subgraph, shapes, caps) -> str:
    """The node's self-test family name where the test-only fault switch names it
    (selftest.FAULT_ENV: its kernels are generated wrong), else ""."""
    if not fault_family():
        return ""
    from .selftest import family_name, family_of  # noqa: PLC0415

    f = family_of(node, sg, shapes, caps)
    return family_name(f) if f is not None and family_name(f) == fault_family() else ""
