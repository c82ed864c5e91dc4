"""Node and tensor views read from LiteRT's TfLiteContext at the delegate's Prepare.

lowering.why_not and kernels.py read a node as a ``model.Node`` and its tensors as
``model.Tensor`` views (``_Tensors``, ``_Graph``: what lowering reads as a subgraph), made
from the C structs through backend/abi.py and memoised by their raw fields, so that a
second interpreter of a model reads no tensor twice. ``node_key`` is a node's identity
for Prepare's memos (claims.py).
"""
from __future__ import annotations

import ctypes as C
import sys
import types

import numpy as np

from . import abi
from .errors import LiteclError
from .model import Node, Tensor
from .ops.dtypes import BY_C_TYPE, C_TYPE_SCHEMA

#: the builtin operators litecl lowers, by TfLiteRegistration.builtin_code
_OPS = {abi.BUILTIN_ADD: "ADD", abi.BUILTIN_CAST: "CAST"}
#: TfLiteAllocationType values whose memory holds a value fixed for the interpreter's life
_CONSTANT_ALLOC = (abi.MMAP_RO, abi.PERSISTENT_RO)


def _raw_tensor(c, t: int) -> tuple:
    """What litecl reads of tensor ``t`` of context ``c`` (a TfLiteContext), as plain
    values: type, dims, dims_signature, quantization (scales, zero points, dimension)
    or None, is_variable, constant, name. The key of ``_TENSOR_VIEWS``."""
    ts = c.tensors[t]
    q = None
    if ts.quantization.type == 1 and ts.quantization.params:
        p = C.cast(ts.quantization.params, C.POINTER(abi.TfLiteAffineQuantization)).contents
        q = (abi.float_array(p.scale), abi.int_array(p.zero_point), int(p.quantized_dimension))
    shape = abi.int_array(ts.dims)
    return (ts.type, shape, abi.int_array(ts.dims_signature) if ts.dims_signature else shape, q,
            bool(ts.is_variable), ts.allocation_type in _CONSTANT_ALLOC, ts.name)


def _tensor_view(t: int, raw: tuple) -> Tensor:
    """lowering's Tensor for tensor ``t`` read as ``raw`` (``_raw_tensor``; no constant
    data: kernels read constants from LiteRT's memory at invoke)."""
    ctype, shape, sig, q, variable, constant, name = raw
    dt = BY_C_TYPE.get(ctype)
    code = dt.tflite if dt is not None else C_TYPE_SCHEMA.get(ctype, -1)
    scales, zps, qd = np.zeros(0, np.float32), np.zeros(0, np.int64), 0
    if q is not None:
        scales, zps, qd = np.array(q[0], np.float32), np.array(q[1], np.int64), q[2]
    return Tensor(index=t, name=name.decode("utf-8", "replace") if name else "", type_code=code,
                  dtype=dt, shape=shape, shape_signature=sig, buffer=0, data=None, scales=scales,
                  zero_points=zps, quantized_dimension=qd, is_variable=variable, constant=constant)


#: (tensor, raw) -> Tensor view, shared by every context that reads the same values (a
#: view is never modified). With _NODE_VIEWS, what makes a second interpreter of a model
#: cheap to prepare: 80 us of view building per CAST/ADD node became a lookup.
_TENSOR_VIEWS: dict = {}
#: (raw node, raw tensors, tensors_size) -> (Node view, node_key)
_NODE_VIEWS: dict = {}
_VIEWS_MAX = 1 << 16


def _memo_put(memo: dict, key, value, limit: int = _VIEWS_MAX):
    """``memo[key] = value`` (returned), the memo emptied first when it holds ``limit``
    entries."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value
    return value


class _Cleared(dict):
    """A dict that counts its clear() calls (``cleared``): what _Expected copied from
    _PRESETS holds while this count does."""

    cleared = 0

    def clear(self) -> None:
        self.cleared += 1
        super().clear()


class _Tensors:
    """``sg.tensors`` for lowering: tensor views of one context, read on first use."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._views: dict = {}

    def __getitem__(self, t: int) -> Tensor:
        v = self._views.get(t)
        if v is None:
            c = self._ctx.contents
            if not 0 <= t < c.tensors_size:
                raise IndexError(f"tensor {t} outside the context's {c.tensors_size}")
            raw = _raw_tensor(c, t)
            v = _TENSOR_VIEWS.get((t, raw))
            if v is None:
                v = _memo_put(_TENSOR_VIEWS, (t, raw), _tensor_view(t, raw))
            self._views[t] = v
        return v


def node_key(n: Node, sg) -> tuple:
    """Everything lowering reads of node ``n`` (op, version, options, and per tensor its
    index, type, quantization, variable and constant flags and declared shape): equal keys
    lower to the same kernels at equal shapes (the plan memo's key)."""
    opts = n.options  # ADD's (views: activation, pot_scale_int16), or a model's options object
    o = None if opts is None else tuple(sorted((k, v) for k, v in vars(opts).items()
                                               if isinstance(v, (bool, int, float, str))))
    ts = []
    for t in (*n.inputs, *n.outputs):
        if t < 0:
            ts.append((t,))
            continue
        v = sg.tensors[t]
        ts.append((t, v.type_code, tuple(v.scales.tolist()), tuple(v.zero_points.tolist()),
                   v.quantized_dimension, v.is_variable, v.constant, tuple(v.shape_signature)))
    return (n.op, n.version, o, len(n.inputs), tuple(ts))


def _raw_node(index: int, node, code: int, version: int) -> tuple:
    """What litecl reads of node ``index`` (a TfLiteNode with builtin ``code``): index,
    code, version, inputs, outputs, and ADD's (activation, pot_scale_int16)."""
    opts = None
    if code == abi.BUILTIN_ADD:
        opts = (0, True)  # the schema's defaults when a model gives no options
        if node.builtin_data:
            p = C.cast(node.builtin_data, C.POINTER(abi.TfLiteAddParams)).contents
            opts = (int(p.activation), bool(p.pot_scale_int16))
    return (index, code, version, abi.int_array(node.inputs), abi.int_array(node.outputs), opts)


def _node_view(raw: tuple) -> Node:
    index, code, version, inputs, outputs, opts = raw
    if opts is not None:
        opts = types.SimpleNamespace(fusedActivationFunction=opts[0], potScaleInt16=opts[1])
    return Node(index=index, opcode=code, op=_OPS.get(code, f"BUILTIN:{code}"), inputs=inputs,
                outputs=outputs, options=opts, options2=None, version=version)


class _Graph:
    """What lowering reads as a subgraph inside a delegate: ``tensors`` (a _Tensors), and
    ``kept``: the Prepare's entry of litecl's cache (claims._prepared) or None."""

    __slots__ = ("tensors", "kept")

    def __init__(self, tensors):
        self.tensors = tensors
        self.kept = None


def _plausible(n: Node, tensors_size: int) -> None:
    """Cheap per-node layout check (a struct mirror that drifted reads garbage here)."""
    if not n.outputs or any(not -1 <= t < tensors_size for t in (*n.inputs, *n.outputs)) \
            or not 0 < n.version < 1000:
        raise LiteclError(f"node {n.index} ({n.op}) reads as inputs {list(n.inputs)}, outputs "
                          f"{list(n.outputs)}, version {n.version} with {tensors_size} tensors: "
                          "LiteRT's structs do not match litecl's mirror")
_CHECKED: list = []
_KEPT: list = []


def layout_check() -> None:
    """Once per process: the installed LiteRT is a tested version, and its context reads
    correctly through litecl's mirror (a built-in two-tensor ADD model: tensor count,
    names, types, shapes, quantization, the node's builtin code, version and options).
    Raises LiteclError naming what differs."""
    if _CHECKED:
        return
    abi.check_sizes()
    v = abi.check_versions("ai-edge-litert")
    if "tensorflow" in sys.modules:  # tf.lite's interpreter would call us too
        abi.check_versions("tensorflow")
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    seen: dict = {}

    @abi.DELEGATE_PREPARE
    def probe(ctx, dlg):
        try:
            c = ctx.contents
            plan_p = C.POINTER(abi.TfLiteIntArray)()
            c.GetExecutionPlan(ctx, C.byref(plan_p))
            node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
            c.GetNodeAndRegistration(ctx, abi.int_array(plan_p)[0], C.byref(node_p), C.byref(reg_p))
            reg = reg_p.contents
            n = _node_view(_raw_node(0, node_p.contents, reg.builtin_code, int(reg.version)))
            ts = [_tensor_view(t, _raw_tensor(c, t)) for t in range(c.tensors_size)]
            seen.update(size=c.tensors_size, op=n.op, version=n.version, inputs=n.inputs,
                        outputs=n.outputs, act=n.options.fusedActivationFunction,
                        tensors=[(t.name, t.dtype.name if t.dtype else None, t.shape,
                                  [round(float(s), 6) for s in t.scales], [int(z) for z in t.zero_points])
                                 for t in ts])
        except BaseException as e:  # noqa: BLE001
            seen["error"] = repr(e)
        return abi.K_OK

    st = abi.TfLiteDelegate()
    st.Prepare = probe
    holder = types.SimpleNamespace(_get_native_delegate_pointer=lambda: C.addressof(st))
    Interpreter(model_content=_SELF_CHECK_MODEL, experimental_delegates=[holder],
                experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    want = {"size": 3, "op": "ADD", "version": 1, "inputs": (0, 1), "outputs": (2,), "act": 1,
            "tensors": [("a", "int8", (1, 3), [0.5], [1]), ("b", "int8", (1, 3), [0.25], [-2]),
                        ("out", "int8", (1, 3), [1.0], [3])]}
    bad = {k: seen.get(k) for k in want if seen.get(k) != want[k]}
    if bad or "error" in seen:
        raise LiteclError(f"ai-edge-litert {v}: its TfLiteContext does not read as litecl's mirror "
                          f"expects ({seen.get('error') or bad}); litecl's delegate cannot run here")
    _KEPT.append((st, probe))  # LiteRT may keep the struct's address: kept for the process's life
    _CHECKED.append(True)


def _self_check_model() -> bytes:
    """An int8 ADD (RELU) of two [1, 3] tensors a (0.5, 1), b (0.25, -2) -> out (1.0, 3),
    written with the schema's object API (the same bytes every time)."""
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as s  # noqa: PLC0415

    m = s.ModelT()
    m.version = 3
    m.buffers = [s.BufferT()]
    oc = s.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = s.BuiltinOperator.ADD
    oc.version = 1
    m.operatorCodes = [oc]
    g = s.SubGraphT()
    g.tensors = []
    for name, sc, zp in (("a", 0.5, 1), ("b", 0.25, -2), ("out", 1.0, 3)):
        t = s.TensorT()
        t.name, t.type, t.shape, t.buffer = name.encode(), s.TensorType.INT8, [1, 3], 0
        t.quantization = s.QuantizationParametersT()
        t.quantization.scale, t.quantization.zeroPoint = [sc], [zp]
        g.tensors.append(t)
    op = s.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1], [2]
    op.builtinOptionsType = s.BuiltinOptions.AddOptions
    op.builtinOptions = s.AddOptionsT()
    op.builtinOptions.fusedActivationFunction = s.ActivationFunctionType.RELU
    g.operators, g.inputs, g.outputs = [op], [0, 1], [2]
    m.subgraphs = [g]
    b = flatbuffers.Builder(256)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


_SELF_CHECK_MODEL = _self_check_model()
