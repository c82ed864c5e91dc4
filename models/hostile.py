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

__all__ = ["control_flow_model", "svdf_model", "EDITS", "apply_edit", "pack"]

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


def _tensor_name(which: str):
    """Subgraph 0's first input, first output or first other ("inner") tensor gets a name
    whose bytes are not UTF-8. LiteRT 2.3.0 builds and runs the model; only its Python
    details of that tensor fail (get_input_details / get_output_details raise
    UnicodeDecodeError, get_tensor_details leaves the tensor out)."""
    def edit(m):
        sg = m.subgraphs[0]
        t = {"input": sg.inputs[0], "output": sg.outputs[0]}.get(which)
        if t is None:
            t = next(i for i in range(len(sg.tensors)) if i not in (*sg.inputs, *sg.outputs))
        sg.tensors[t].name = b"\xff" + which.encode() + b"\xc3"
    return edit


def _signature_index(which: str, index: int):
    """The first signature's first input or output maps its name to tensor ``index``.
    Out of range, LiteRT 2.3.0 builds and runs the model; only that signature's runner
    fails (ValueError "Invalid tensor index ..." from its details, a RuntimeError or a
    TypeError from a call)."""
    def edit(m):
        getattr(m.signatureDefs[0], which)[0].tensorIndex = index
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
    "name_not_utf8_input": _tensor_name("input"),
    "name_not_utf8_inner": _tensor_name("inner"),
    "name_not_utf8_output": _tensor_name("output"),
    "signature_input99": _signature_index("inputs", 99),
    "signature_output99": _signature_index("outputs", 99),
    "signature_output_uint32_max": _signature_index("outputs", 2**32 - 1),
}


def apply_edit(buf: bytes, name: str) -> bytes:
    """``buf`` with structured edit ``name`` (a key of EDITS) applied, repacked."""
    m = schema.ModelT.InitFromPackedBuf(buf, 0)
    EDITS[name](m)
    return pack(m)


def svdf_model(weights_time: str = "int8", state: str = "int8", *, batch: int = 1,
               input_size: int = 4, units: int = 2, rank: int = 1, memory: int = 3) -> bytes:
    """A fully integer SVDF like tflite-micro's keyword_scrambled_8bit: int8 input,
    int8 weights_feature [units*rank, input_size], ``weights_time`` [units*rank, memory],
    int32 bias [units], a variable ``state`` [batch, memory*units*rank], int8 output
    [batch, units]. LiteRT's integer SVDF expects int16 weights_time and state (what the
    converter writes); tflite-micro's kernel also takes int8 ones."""
    T = schema.TensorType
    types = {"int8": T.INT8, "int16": T.INT16}
    np_types = {"int8": np.int8, "int16": np.int16}
    filters = units * rank

    def q(scale, zp=0):
        p = schema.QuantizationParametersT()
        p.scale = [scale]
        p.zeroPoint = [zp]
        return p

    bufs = [schema.BufferT()]

    def const(arr):
        b = schema.BufferT()
        b.data = np.frombuffer(np.ascontiguousarray(arr).tobytes(), np.uint8)
        bufs.append(b)
        return len(bufs) - 1

    rng = np.random.default_rng(0)
    tensors = [
        _tensor("input", T.INT8, [batch, input_size]),
        _tensor("weights_feature", T.INT8, [filters, input_size],
                const(rng.integers(-127, 127, (filters, input_size), dtype=np.int8))),
        _tensor("weights_time", types[weights_time], [filters, memory],
                const(rng.integers(-127, 127, (filters, memory)).astype(np_types[weights_time]))),
        _tensor("bias", T.INT32, [units], const(np.zeros(units, np.int32))),
        _tensor("state", types[state], [batch, memory * filters]),
        _tensor("output", T.INT8, [batch, units]),
    ]
    for t, s in zip(tensors, (0.05, 0.01, 0.002, 0.0005, 0.03, 0.1)):
        t.quantization = q(s)
    tensors[4].isVariable = True
    opts = schema.SVDFOptionsT()
    opts.rank = rank
    opts.fusedActivationFunction = schema.ActivationFunctionType.RELU  # LiteRT: integer SVDF needs it
    oc = schema.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = _S.SVDF
    oc.version = 3
    op = _op(0, [0, 1, 2, 3, 4], [5], schema.BuiltinOptions.SVDFOptions, opts)
    m = schema.ModelT()
    m.version = 3
    m.operatorCodes = [oc]
    m.buffers = bufs
    m.subgraphs = [_subgraph("main", tensors, [op], [0], [5])]
    return pack(m)
