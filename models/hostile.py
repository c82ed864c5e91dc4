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
    s.inputs = list(inputs)
    s.outputs = list(outputs)
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
