"""Hostile models for issue 13: valid flatbuffers that LiteRT crashes on, aborts on or
refuses, built with the schema object API (``schema_py_generated``), and the structured
edits that make them from well-formed models (models/mutate.py applies these too).

``control_flow_model(kind, calls)`` builds a WHILE or IF model whose called subgraphs are
given explicitly, so a test can make the call graph cyclic. ``EDITS`` maps a name to a
function editing a ModelT in place (operator version 0, a scale with two zero points, an
output index -1, ...); ``apply_edit(buf, name)`` returns the edited, repacked bytes.
"""
from __future__ import annotations

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

__all__ = ["control_flow_model", "EDITS", "apply_edit", "pack"]

_S = schema.BuiltinOperator


def pack(model: schema.ModelT) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _tensor(name: str, ttype: int, shape, buffer: int = 0) -> schema.TensorT:
    t = schema.TensorT()
    t.name = name
    t.type = ttype
    t.shape = list(shape)
    t.buffer = buffer
    return t


def _op(opcode: int, inputs, outputs, opt_type=0, opts=None) -> schema.OperatorT:
    o = schema.OperatorT()
    o.opcodeIndex = opcode
    o.inputs = list(inputs)
    o.outputs = list(outputs)
    o.builtinOptionsType = opt_type
    o.builtinOptions = opts
    return o


def _subgraph(name, tensors, ops, inputs, outputs) -> schema.SubGraphT:
    s = schema.SubGraphT()
    s.name = name
    s.tensors = tensors
    s.operators = ops
    s.inputs = None if inputs is None else list(inputs)
    s.outputs = None if outputs is None else list(outputs)
    return s


def control_flow_model(kind: str = "while", calls: tuple = (1, 2), again: tuple = (1, 2)) -> bytes:
    """A model whose subgraph 0 runs one WHILE (``calls`` = (cond, body)) or IF (``calls``
    = (then, else)) on an int32[1] counter ``x`` (and, for IF, a bool[1] ``flag`` first).

    With the default ``calls`` the model is valid: WHILE counts x up to 10 (subgraph 1:
    x < 10; subgraph 2: x + 1); IF returns x + 1 (subgraph 1) or x (subgraph 2, ADD of 0).
    Subgraph 3 is a second caller like subgraph 0, calling ``again``. Other ``calls``
    make the call graph cyclic: (0, 2) for WHILE is a cond that is its own subgraph;
    ``calls=(3, 2), again=(0, 2)`` is the two-step cycle 0 -> 3 -> 0.
    """
    codes = []
    for c in (_S.WHILE if kind == "while" else _S.IF, _S.LESS, _S.ADD):
        oc = schema.OperatorCodeT()
        oc.builtinCode = c
        oc.deprecatedBuiltinCode = c
        oc.version = 1
        codes.append(oc)
    ten = schema.BufferT()
    ten.data = np.frombuffer(np.int32([10]).tobytes(), np.uint8)
    one = schema.BufferT()
    one.data = np.frombuffer(np.int32([1]).tobytes(), np.uint8)
    zero = schema.BufferT()
    zero.data = np.frombuffer(np.int32([0]).tobytes(), np.uint8)
    buffers = [schema.BufferT(), ten, one, zero]
    I32, BOOL = schema.TensorType.INT32, schema.TensorType.BOOL

    def caller(name, calls):
        if kind == "while":
            o = schema.WhileOptionsT()
            o.condSubgraphIndex, o.bodySubgraphIndex = calls
            op = _op(0, [0], [1], schema.BuiltinOptions.WhileOptions, o)
            return _subgraph(name, [_tensor("x", I32, [1]), _tensor("y", I32, [1])], [op], [0], [1])
        o = schema.IfOptionsT()
        o.thenSubgraphIndex, o.elseSubgraphIndex = calls
        op = _op(0, [0, 1], [2], schema.BuiltinOptions.IfOptions, o)
        return _subgraph(name, [_tensor("flag", BOOL, [1]), _tensor("x", I32, [1]),
                                _tensor("y", I32, [1])], [op], [0, 1], [2])

    add = schema.AddOptionsT()
    if kind == "while":
        cond = _subgraph("cond", [_tensor("x", I32, [1]), _tensor("ten", I32, [1], 1),
                                  _tensor("c", BOOL, [1])], [_op(1, [0, 1], [2])], [0], [2])
    else:  # then: x + 1
        cond = _subgraph("then", [_tensor("x", I32, [1]), _tensor("one", I32, [1], 2),
                                  _tensor("y", I32, [1])],
                         [_op(2, [0, 1], [2], schema.BuiltinOptions.AddOptions, add)], [0], [2])
    body = _subgraph("body" if kind == "while" else "else",
                     [_tensor("x", I32, [1]), _tensor("k", I32, [1], 2 if kind == "while" else 3),
                      _tensor("y", I32, [1])],
                     [_op(2, [0, 1], [2], schema.BuiltinOptions.AddOptions, add)], [0], [2])
    m = schema.ModelT()
    m.version = 3
    m.operatorCodes = codes
    m.buffers = buffers
    m.subgraphs = [caller("main", calls), cond, body, caller("again", again)]
    return pack(m)


def _first_op(m):
    return m.subgraphs[0].operators[0]


def _quantized_tensor(m):
    for t in m.subgraphs[0].tensors:
        if t.quantization is not None and t.quantization.scale is not None and len(t.quantization.scale):
            return t
    raise ValueError("model has no quantized tensor")


def _set_version(v):
    def edit(m):
        m.operatorCodes[_first_op(m).opcodeIndex].version = v
    return edit


def _zero_points(n):
    def edit(m):
        q = _quantized_tensor(m).quantization
        q.zeroPoint = [0] * n
    return edit


def _quantized_dimension(d):
    def edit(m):
        _quantized_tensor(m).quantization.quantizedDimension = d
    return edit


def _output_minus_one(m):
    _first_op(m).outputs = [-1]


def _empty_subgraph(m):
    """A subgraph 1 with empty tensor, operator, input and output lists (LiteRT runs it)."""
    m.subgraphs.append(_subgraph("empty", [], [], [], []))


def _tensors_absent(m):
    """A subgraph 1 without its tensors field (LiteRT: "Did not get tensors in subgraph 1")."""
    m.subgraphs.append(_subgraph("no tensors", None, [], [], []))


def _no_tensors(m):
    """Subgraph 0 loses every tensor (its operators then name tensors that do not exist)."""
    m.subgraphs[0].tensors = []


def _scale(v, which=-1):
    def edit(m):
        ts = [t for t in m.subgraphs[0].tensors
              if t.quantization is not None and t.quantization.scale is not None
              and len(t.quantization.scale)]
        ts[which].quantization.scale = [v]
    return edit


#: Structured edits: name -> function editing a ModelT in place. The quantization edits
#: need a model with a quantized tensor (e.g. an int8 ADD); the others any model.
EDITS = {
    "version0": _set_version(0),
    "version-1": _set_version(-1),
    "version999": _set_version(999),
    "zero_points0": _zero_points(0),
    "zero_points2": _zero_points(2),
    "quantized_dimension5": _quantized_dimension(5),
    "quantized_dimension-1": _quantized_dimension(-1),
    "output-1": _output_minus_one,
    "empty_subgraph": _empty_subgraph,
    "tensors_absent": _tensors_absent,
    "no_tensors": _no_tensors,
    "scale1e33": _scale(1e33),
    "scale1e38_input": _scale(1e38, 0),
    "while_self": None,  # filled below: not an edit of the given model
}
del EDITS["while_self"]


def apply_edit(buf: bytes, name: str) -> bytes:
    """``buf`` with structured edit ``name`` (a key of EDITS) applied, repacked."""
    m = schema.ModelT.InitFromPackedBuf(buf, 0)
    EDITS[name](m)
    return pack(m)
