"""Small hand-made graphs that LiteRT runs and that a runtime standing in for it must run
the same way (issue 12): tensors written twice, graph inputs overwritten, variable
tensors, mismatched options unions, signatures naming non-input tensors, constant STRING
outputs, sparse constants read by DENSIFY, and buffers stored after the flatbuffer.

Each builder returns .tflite bytes (schema object API, via models.builders._Graph).
"""
from __future__ import annotations

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from .builders import _Graph

__all__ = ["write_after_write", "input_overwritten", "variable_across_segments",
           "variable_input", "add_with_mul_options", "signature_non_input",
           "constant_string_output", "sparse_densify_add", "buffers_after_flatbuffer",
           "GRAPHS"]

_OP = schema.BuiltinOperator


def write_after_write() -> bytes:
    """CAST a->y, ADD y+y->w, CAST b->y (int32 a, b [4] -> float32): y is written twice.
    LiteRT: w = 2*a, y = b (the second write)."""
    g = _Graph()
    a = g.tensor("a", "int32", [4])
    b = g.tensor("b", "int32", [4])
    g.inputs = [a, b]
    y = g.tensor("y", "float32", [4])
    w = g.tensor("w", "float32", [4])
    for src, dst in ((a, y),):
        _cast_into(g, src, dst)
    opts = schema.AddOptionsT()
    g.op(_OP.ADD, [y, y], [w], options_type=schema.BuiltinOptions.AddOptions, options=opts)
    _cast_into(g, b, y)
    g.outputs = [w, y]
    return g.finish()


def input_overwritten() -> bytes:
    """ADD y = x + x, then CAST z -> x: the graph input x is overwritten after it is read.
    LiteRT: y = 2*x (the value set), x = float(z) afterwards."""
    g = _Graph()
    x = g.tensor("x", "float32", [4])
    z = g.tensor("z", "int32", [4])
    g.inputs = [x, z]
    y = g.tensor("y", "float32", [4])
    g.op(_OP.ADD, [x, x], [y], options_type=schema.BuiltinOptions.AddOptions, options=schema.AddOptionsT())
    _cast_into(g, z, x)
    g.outputs = [y, x]
    return g.finish()


def variable_across_segments() -> bytes:
    """MUL x*2 -> v (a variable tensor), CAST x -> xi (int32, OpenCL), CAST xi -> xf,
    SUB v - xf -> out: v is written in one fallback segment and read in a later one, with
    OpenCL nodes between them."""
    g = _Graph()
    x = g.tensor("x", "float32", [4])
    g.inputs = [x]
    two = g.constant("two", "float32", np.full([4], 2.0))
    v = g.tensor("v", "float32", [4])
    g.tensors[v].isVariable = True
    g.op(_OP.MUL, [x, two], [v], options_type=schema.BuiltinOptions.MulOptions, options=schema.MulOptionsT())
    xi = g.cast(x, "int32", "xi")
    xf = g.cast(xi, "float32", "xf")
    out = g.tensor("out", "float32", [4])
    g.op(_OP.SUB, [v, xf], [out], options_type=schema.BuiltinOptions.SubOptions, options=schema.SubOptionsT())
    g.outputs = [out]
    return g.finish()


def variable_input() -> bytes:
    """Inputs x and v (v marked is_variable): MUL v*x -> p, CAST p -> int32 out. LiteRT
    uses the value set_tensor wrote into v."""
    g = _Graph()
    x = g.tensor("x", "float32", [4])
    v = g.tensor("v", "float32", [4])
    g.tensors[v].isVariable = True
    g.inputs = [x, v]
    p = g.tensor("p", "float32", [4])
    g.op(_OP.MUL, [v, x], [p], options_type=schema.BuiltinOptions.MulOptions, options=schema.MulOptionsT())
    g.outputs = [g.cast(p, "int32", "out")]
    return g.finish()


def add_with_mul_options() -> bytes:
    """float32 ADD whose builtin_options union holds MulOptions(RELU): LiteRT reads
    builtin_options_as_AddOptions(), gets null and uses the defaults (no activation)."""
    g = _Graph()
    a = g.tensor("a", "float32", [4])
    b = g.tensor("b", "float32", [4])
    g.inputs = [a, b]
    y = g.tensor("y", "float32", [4])
    opts = schema.MulOptionsT()
    opts.fusedActivationFunction = schema.ActivationFunctionType.RELU
    g.op(_OP.ADD, [a, b], [y], options_type=schema.BuiltinOptions.MulOptions, options=opts)
    g.outputs = [y]
    return g.finish()


def signature_non_input() -> bytes:
    """A signature whose inputs map "x" to the subgraph input and "c" to a tensor that is
    no subgraph input (the output of a CAST): LiteRT's signature runner writes it, the
    CAST then overwrites it when invoked."""
    g = _Graph()
    x = g.tensor("x", "int32", [4])
    g.inputs = [x]
    f = g.cast(x, "float32", "f")
    y = g.tensor("y", "float32", [4])
    g.op(_OP.ADD, [f, f], [y], options_type=schema.BuiltinOptions.AddOptions, options=schema.AddOptionsT())
    g.outputs = [y]
    buf = g.finish()
    m = schema.ModelT.InitFromPackedBuf(buf, 0)
    tm = schema.TensorMapT()
    tm.name, tm.tensorIndex = "c", f
    m.signatureDefs[0].inputs.append(tm)
    return _pack(m)


def constant_string_output() -> bytes:
    """Outputs: a CAST of the input, and a constant STRING tensor ["ab", "c"] (TFLite's
    string buffer layout: int32 count, count+1 int32 offsets, the bytes)."""
    g = _Graph()
    x = g.tensor("x", "int32", [2])
    g.inputs = [x]
    y = g.cast(x, "float32", "y")
    strings = [b"ab", b"c"]
    header = 4 * (len(strings) + 2)
    offs = np.cumsum([header] + [len(s) for s in strings]).astype(np.int32)
    blob = np.int32(len(strings)).tobytes() + offs.tobytes() + b"".join(strings)
    t = schema.TensorT()
    t.name, t.type, t.shape = "labels", schema.TensorType.STRING, [2]
    b = schema.BufferT()
    b.data = np.frombuffer(blob, np.uint8)
    g.buffers.append(b)
    t.buffer = len(g.buffers) - 1
    g.tensors.append(t)
    g.outputs = [y, len(g.tensors) - 1]
    return g.finish()


def sparse_densify_add() -> bytes:
    """A float32[4, 4] constant stored sparse (CSR: dim 0 dense, dim 1 sparse), DENSIFY
    -> dense, ADD with the input x[4, 4] -> y, CAST y -> int32 z. LiteRT runs DENSIFY on
    the compressed buffer (its values only, 5 of 16)."""
    dense = np.zeros((4, 4), np.float32)
    dense[0, 1], dense[1, 0], dense[1, 3], dense[2, 2], dense[3, 0] = 1.5, -2.0, 3.25, 4.0, -0.5
    g = _Graph()
    x = g.tensor("x", "float32", [4, 4])
    g.inputs = [x]
    rows, cols = np.nonzero(dense)
    values = dense[rows, cols]
    sp = g.tensor("w_sparse", "float32", [len(values)], data=values)
    g.tensors[sp].shape = [4, 4]
    sparsity = schema.SparsityParametersT()
    sparsity.traversalOrder = [0, 1]
    d0 = schema.DimensionMetadataT()
    d0.format, d0.denseSize = schema.DimensionType.DENSE, 4
    d1 = schema.DimensionMetadataT()
    d1.format = schema.DimensionType.SPARSE_CSR
    seg = schema.Int32VectorT()
    seg.values = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=4))]).astype(np.int32).tolist()
    idx = schema.Int32VectorT()
    idx.values = cols.astype(np.int32).tolist()
    d1.arraySegmentsType, d1.arraySegments = schema.SparseIndexVector.Int32Vector, seg
    d1.arrayIndicesType, d1.arrayIndices = schema.SparseIndexVector.Int32Vector, idx
    sparsity.dimMetadata = [d0, d1]
    g.tensors[sp].sparsity = sparsity
    w = g.tensor("w", "float32", [4, 4])
    g.op(_OP.DENSIFY, [sp], [w])
    y = g.tensor("y", "float32", [4, 4])
    g.op(_OP.ADD, [x, w], [y], options_type=schema.BuiltinOptions.AddOptions, options=schema.AddOptionsT())
    g.outputs = [g.cast(y, "int32", "z")]
    return g.finish()


def buffers_after_flatbuffer(content: bytes) -> bytes:
    """``content`` rewritten the way LiteRT's large-model writer stores it: every non-empty
    buffer's bytes moved after the flatbuffer (16-byte aligned), the Buffer holding only
    ``offset`` and ``size``."""
    m = schema.ModelT.InitFromPackedBuf(content, 0)
    blobs = {}
    for i, b in enumerate(m.buffers or []):
        if b.data is not None and len(b.data):
            blobs[i] = np.asarray(b.data, np.uint8).tobytes()
            b.data = None
            b.offset, b.size = 1 << 40, len(blobs[i])  # placeholders of the final width
    head = _pack(m)
    pos = (len(head) + 15) // 16 * 16
    tail = b""
    for i, blob in blobs.items():
        m.buffers[i].offset = pos + len(tail)
        tail += blob + b"\0" * ((-len(blob)) % 16)
    head = _pack(m)
    assert (len(head) + 15) // 16 * 16 == pos, "repacking changed the flatbuffer's size"
    return head + b"\0" * (pos - len(head)) + tail


def _cast_into(g: _Graph, src: int, dst: int) -> None:
    opts = schema.CastOptionsT()
    opts.inDataType, opts.outDataType = g.tensors[src].type, g.tensors[dst].type
    g.op(_OP.CAST, [src], [dst], options_type=schema.BuiltinOptions.CastOptions, options=opts)


def _pack(m) -> bytes:
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


GRAPHS = {f.__name__: f for f in (write_after_write, input_overwritten, variable_across_segments,
                                  variable_input, add_with_mul_options, signature_non_input,
                                  constant_string_output, sparse_densify_add)}
