"""Seeded byte mutation of .tflite files, for fuzzing litecl's model reading and runtime.

``mutant(buf, seed)`` returns one mutated copy of ``buf`` and a description; the same
buffer and seed always give the same mutant. The strategies aim at a flatbuffer's
structure: bit flips anywhere, 4-byte words (offsets, lengths, indices) and 2-byte words
(vtable entries) replaced by edge values, truncation, and a chunk deleted or duplicated
(which shifts every offset that crosses it), values of scalar fields the verifier
locates (types, shapes, tensor indices, opcodes, options) replaced by edge values, and
structured edits of the object tree that keep the file well-formed (``_structured``:
the hostile kinds of issue 13, repacked with the schema's object API).
"""
from __future__ import annotations

import random
import struct

__all__ = ["mutant", "STRATEGIES"]

_WORDS = (0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 0x10000, 0x7FFFFFFF,
          0x80000000, 0xFFFFFFFF, 0xFFFFFFFC, 0x40000000)
_HALVES = (0, 1, 2, 4, 6, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0xFFFE)


def _flip(b: bytearray, r: random.Random) -> str:
    k = r.randint(1, 8)
    for _ in range(k):
        i = r.randrange(len(b))
        b[i] ^= 1 << r.randrange(8)
    return f"flip {k} bits"


def _word(b: bytearray, r: random.Random) -> str:
    if len(b) < 4:
        return _flip(b, r)
    i = r.randrange(0, max(1, len(b) - 3)) & ~3
    v = r.choice(_WORDS + (len(b), len(b) - i, r.getrandbits(32), r.randrange(64)))
    struct.pack_into("<I", b, i, v & 0xFFFFFFFF)
    return f"word at {i} = {v:#x}"


def _half(b: bytearray, r: random.Random) -> str:
    if len(b) < 2:
        return _flip(b, r)
    i = r.randrange(0, max(1, len(b) - 1)) & ~1
    v = r.choice(_HALVES + (r.getrandbits(16), r.randrange(64)))
    struct.pack_into("<H", b, i, v)
    return f"half at {i} = {v:#x}"


def _scalar(b: bytearray, r: random.Random) -> str:
    """An edge value written over a scalar field or scalar vector element the verifier
    found (tensor types, shapes, indices, opcodes, options): the file stays well-formed,
    so the mutant reaches model validation, kernels and LiteRT."""
    from litecl.verify import VerifyError, verify  # noqa: PLC0415

    found: list = []
    try:
        verify(bytes(b), scalars=found)
    except VerifyError:
        pass
    if not found:
        return _word(b, r)
    pos, width, count = r.choice(found)
    pos += width * r.randrange(count)
    bits = 8 * width
    v = r.choice((0, 1, 2, 3, -1, -2, 4, 5, 6, 7, 8, 9, 10, 16, 17, 31, 32, 63, 64, 127, 128, 255,
                  2**15 - 1, 2**15, 2**31 - 1, -2**31, 2**bits - 1, r.getrandbits(bits),
                  r.randrange(-4, 200)))
    b[pos:pos + width] = (v % 2**bits).to_bytes(width, "little")
    return f"scalar at {pos} ({width} bytes) = {v}"


def _truncate(b: bytearray, r: random.Random) -> str:
    n = r.randrange(len(b))
    del b[n:]
    return f"truncate to {n}"


def _chunk(b: bytearray, r: random.Random) -> str:
    i = r.randrange(len(b))
    n = r.choice((1, 2, 4, 8, 16, r.randint(1, 256)))
    if r.random() < 0.5:
        del b[i:i + n]
        return f"delete {n} at {i}"
    b[i:i] = b[i:i + n]
    return f"duplicate {n} at {i}"


def _structured(b: bytearray, r: random.Random) -> str:
    """A structured edit of the model's object tree (issue 13's kinds), repacked so the
    file stays a well-formed flatbuffer: operator versions 0/-1/huge, zero point counts,
    quantized_dimension, huge or degenerate scales, an operator output -1, a subgraph
    without tensors, a WHILE calling its own subgraph, a shape numpy cannot hold, a
    tensor type swapped."""
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    from models.hostile import pack  # noqa: PLC0415

    try:
        m = schema.ModelT.InitFromPackedBuf(bytes(b), 0)
        sgs = m.subgraphs or []
        if not sgs or not sgs[0].tensors:
            raise ValueError("no subgraph")
    except Exception:  # noqa: BLE001  (an earlier byte mutation broke it)
        return _word(b, r)
    sg = r.choice(sgs)
    tensors = sg.tensors or sgs[0].tensors
    ops = sg.operators or []
    kind = r.choice(("version", "zero_points", "quantized_dimension", "scale", "output-1",
                     "tensors_absent", "empty_subgraph", "while_self", "huge_shape", "type"))
    t = r.choice(tensors)
    if kind == "version" and m.operatorCodes:
        v = r.choice((0, -1, 2, 999, 2**31 - 1))
        r.choice(m.operatorCodes).version = v
        what = f"operator code version {v}"
    elif kind in ("zero_points", "quantized_dimension", "scale"):
        q = t.quantization or schema.QuantizationParametersT()
        t.quantization = q
        if q.scale is None or not len(q.scale):
            q.scale, q.zeroPoint = [0.05], [0]
        if kind == "zero_points":
            n = r.choice((0, 2, len(q.scale) + 1))
            q.zeroPoint = [0] * n
            what = f"{n} zero points for {len(q.scale)} scales"
        elif kind == "quantized_dimension":
            q.quantizedDimension = r.choice((-1, 0 if t.shape is None else len(t.shape), 5, 2**31 - 1))
            what = f"quantized_dimension {q.quantizedDimension}"
        else:
            v = r.choice((1e33, 1e38, 3.4e38, 1.71e38, 3.3e32, 1e-38, 1e-45, 0.0, -1.0,
                          float("inf"), float("nan")))
            q.scale = [v] * len(q.scale)
            what = f"scale {v}"
    elif kind == "output-1" and ops:
        op = r.choice(ops)
        if op.outputs is not None and len(op.outputs):
            op.outputs = [-1] + list(op.outputs)[1:]
        what = "an operator output -1"
    elif kind == "tensors_absent":
        s = schema.SubGraphT()
        s.tensors, s.operators, s.inputs, s.outputs = None, [], [], []
        m.subgraphs.append(s)
        what = "a subgraph without its tensors field"
    elif kind == "empty_subgraph":
        s = schema.SubGraphT()
        s.tensors, s.operators, s.inputs, s.outputs = [], [], [], []
        m.subgraphs.append(s)
        what = "an empty subgraph"
    elif kind == "while_self" and sg.inputs is not None and len(sg.inputs):
        oc = schema.OperatorCodeT()
        oc.builtinCode = oc.deprecatedBuiltinCode = schema.BuiltinOperator.WHILE
        oc.version = 1
        m.operatorCodes = list(m.operatorCodes or []) + [oc]
        src = sg.tensors[int(sg.inputs[0])]
        out = schema.TensorT()
        out.name, out.type, out.shape, out.buffer = "while_out", src.type, src.shape, 0
        sg.tensors.append(out)
        opts = schema.WhileOptionsT()
        me = sgs.index(sg)
        opts.condSubgraphIndex = r.choice((me, 0))
        opts.bodySubgraphIndex = me
        op = schema.OperatorT()
        op.opcodeIndex = len(m.operatorCodes) - 1
        op.inputs, op.outputs = [int(sg.inputs[0])], [len(sg.tensors) - 1]
        op.builtinOptionsType, op.builtinOptions = schema.BuiltinOptions.WhileOptions, opts
        sg.operators = list(ops) + [op]
        what = f"a WHILE in subgraph {me} calling subgraph {me}"
    elif kind == "huge_shape":
        t.shape = r.choice(([0, 2**31 - 1, 2**31 - 1, 2**31 - 1], [2**31 - 1] * 3, [0, 2**31 - 1]))
        t.shapeSignature = None
        what = f"shape {t.shape}"
    else:
        t.type = r.choice((schema.TensorType.INT8, schema.TensorType.INT16, schema.TensorType.UINT8,
                           schema.TensorType.FLOAT16, schema.TensorType.INT32))
        what = f"tensor type {t.type}"
    b[:] = pack(m)
    return "structured: " + what


#: (name, function, weight)
STRATEGIES = (("flip", _flip, 4), ("word", _word, 4), ("half", _half, 3),
              ("scalar", _scalar, 6), ("truncate", _truncate, 1), ("chunk", _chunk, 1),
              ("structured", _structured, 6))


def mutant(buf: bytes, seed: int) -> tuple[bytes, str]:
    """One seeded mutant of ``buf``: (bytes, what was done). 1-3 mutations are applied."""
    r = random.Random(seed)
    b = bytearray(buf)
    done = []
    names, fns, weights = zip(*((n, f, w) for n, f, w in STRATEGIES))
    for _ in range(r.choice((1, 1, 1, 2, 3))):
        if not b:
            break
        done.append(r.choices(fns, weights)[0](b, r))
    return bytes(b), "; ".join(done)
