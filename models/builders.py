"""Build small .tflite models as bytes with the TFLite schema object API.

The models exercise litecl's lowered ops (CAST, ADD) and mix them with ops that stay on
LiteRT's interpreter (MUL, SUB, RESHAPE). Every builder returns the FlatBuffer bytes of a
version-3 TFLite model with one subgraph, a ``serving_default`` signature and buffer 0 as
the empty sentinel; ``ai_edge_litert.interpreter.Interpreter(model_content=...)`` loads
and runs each of them (tests/test_builders.py).

Type names are TFLite's lower-case names: bool, int8, uint8, int16, uint16, int32,
uint32, int64, float16, float32, float64, complex64, bfloat16, int4, uint4, int2. The
TensorType code and the numpy dtype are derived from the name
(``schema.TensorType.<NAME>``, ``np.dtype(name)``, ml_dtypes for the last four), so
this module keeps no type table of its own.

The module also reads models back (``op_counts``, ``cast_pairs``), for the generator and
the wheel extractor.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

__all__ = [
    "TYPE_NAMES",
    "cast_model",
    "add_model",
    "chain_model",
    "multi_op_model",
    "MULTI_OP_PATTERNS",
    "op_counts",
    "cast_pairs",
    "builtin_name",
    "cast_version",
    "pack_bits",
]

#: The TFLite tensor types the builders accept (CAST takes all of them).
TYPE_NAMES: tuple[str, ...] = (
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
    "float16", "float32", "float64", "complex64", "bfloat16", "int4", "uint4", "int2",
)
#: Types numpy lacks: ml_dtypes' (a dependency of ai-edge-litert). Constant buffers of the
#: sub-byte types are packed as the schema stores them (low bits first: two int4/uint4 or
#: four int2 values per byte).
_ML_DTYPES = {"bfloat16": "bfloat16", "int4": "int4", "uint4": "uint4", "int2": "int2"}
_PACKED_BITS = {"int4": 4, "uint4": 4, "int2": 2}

_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
_BUILTIN_NAMES: dict[int, str] = {
    v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")
}
_TYPE_CODE_NAMES: dict[int, str] = {
    v: k.lower() for k, v in vars(schema.TensorType).items() if not k.startswith("_")
}
# OperatorCode.deprecated_builtin_code is an int8: codes above 127 store this placeholder
# there and the real code in builtin_code (schema.fbs, "PLACEHOLDER_FOR_GREATER_OP_CODES").
_PLACEHOLDER_FOR_GREATER_OP_CODES = 127
# TFLite's allocator expects constant data 16-byte aligned (the converter aligns it so).
_BUFFER_ALIGNMENT = 16


def _type_code(name: str) -> int:
    if name not in TYPE_NAMES:
        raise ValueError(f"unknown tensor type {name!r}; expected one of {', '.join(TYPE_NAMES)}")
    return getattr(schema.TensorType, name.upper())


def _np_dtype(name: str) -> np.dtype:
    _type_code(name)
    if name in _ML_DTYPES:
        import ml_dtypes  # noqa: PLC0415

        return np.dtype(getattr(ml_dtypes, _ML_DTYPES[name]))
    return np.dtype(name)


def pack_bits(values: np.ndarray, bits: int) -> bytes:
    """Sub-byte integers packed as TFLite stores them: 8 // bits values per byte, the
    first in the low bits; the last byte padded with zeros."""
    v = np.asarray(values).astype(np.int64).reshape(-1) & ((1 << bits) - 1)
    per = 8 // bits
    v = np.concatenate([v, np.zeros(-len(v) % per, np.int64)]).reshape(-1, per)
    return (v << (np.arange(per) * bits)).sum(axis=1).astype(np.uint8).tobytes()


def _activation_code(name: str) -> int:
    if name not in _ACTIVATIONS:
        raise ValueError(f"unknown fused activation {name!r}; expected one of {', '.join(_ACTIVATIONS)}")
    return getattr(schema.ActivationFunctionType, name)


def _shape(shape) -> list[int]:
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {tuple(shape)} has a negative dimension")
    return dims


def cast_version(src: str, dst: str) -> int:
    """CAST's operator version, following tensorflow/lite/tools/versioning/op_version.cc."""
    both = (src, dst)
    if "bfloat16" in both:
        return 7
    if src == "int4" and dst == "float32":
        return 6
    if "float64" in both or "float16" in both:
        return 5
    if "uint16" in both:
        return 4
    if "int8" in both:
        return 3
    if "uint32" in both:
        return 2
    return 1


def _add_version(dtype: str, pot_scale_int16: bool) -> int:
    """ADD's operator version (op_version.cc): int16 without POT scales 3, int64 4, int8 2."""
    if dtype == "int16" and not pot_scale_int16:
        return 3
    if dtype == "int64":
        return 4
    if dtype == "int8":
        return 2
    return 1


class _AlignedBufferT(schema.BufferT):
    """A BufferT whose bytes start on a 16-byte boundary (BufferT.Pack aligns to itemsize)."""

    def Pack(self, builder):  # noqa: N802 (the schema's method name)
        payload = self.data.tobytes()
        builder.StartVector(1, len(payload), _BUFFER_ALIGNMENT)
        builder.head -= len(payload)
        builder.Bytes[builder.head:builder.head + len(payload)] = payload
        data = builder.EndVector()
        schema.BufferStart(builder)
        schema.BufferAddData(builder, data)
        return schema.BufferEnd(builder)


class _Graph:
    """Accumulates one subgraph's tensors and operators, then packs a ModelT."""

    def __init__(self) -> None:
        self.tensors: list[schema.TensorT] = []
        self.operators: list[schema.OperatorT] = []
        self.buffers: list[schema.BufferT] = [schema.BufferT()]  # buffer 0: the sentinel
        self.opcodes: list[schema.OperatorCodeT] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def tensor(self, name: str, dtype: str, shape, *, data: np.ndarray | None = None,
               quant: tuple[float, int] | None = None, signature=None) -> int:
        t = schema.TensorT()
        t.name = name
        t.type = _type_code(dtype)
        t.shape = _shape(shape)
        if signature is not None:
            t.shapeSignature = [int(d) for d in signature]
        if quant is not None:
            q = schema.QuantizationParametersT()
            q.scale = [float(quant[0])]
            q.zeroPoint = [int(quant[1])]
            t.quantization = q
        if data is not None:
            arr = np.array(data, dtype=_np_dtype(dtype), order="C")  # ascontiguousarray makes 0-d 1-d
            if list(arr.shape) != t.shape:
                raise ValueError(f"constant {name!r} has shape {arr.shape}, tensor has {tuple(t.shape)}")
            buf = _AlignedBufferT()
            raw = pack_bits(arr, _PACKED_BITS[dtype]) if dtype in _PACKED_BITS else arr.tobytes()
            buf.data = np.frombuffer(raw, dtype=np.uint8)
            self.buffers.append(buf)
            t.buffer = len(self.buffers) - 1
        self.tensors.append(t)
        return len(self.tensors) - 1

    def constant(self, name: str, dtype: str, value) -> int:
        arr = np.asarray(value, dtype=_np_dtype(dtype))
        return self.tensor(name, dtype, arr.shape, data=arr)

    def shape_of(self, index: int) -> tuple[int, ...]:
        return tuple(self.tensors[index].shape)

    def dtype_of(self, index: int) -> str:
        return _TYPE_CODE_NAMES[self.tensors[index].type]

    def op(self, builtin: int, inputs: Sequence[int], outputs: Sequence[int], *,
           options_type: int = schema.BuiltinOptions.NONE, options=None, version: int = 1) -> None:
        for i, code in enumerate(self.opcodes):
            if code.builtinCode == builtin and code.version == version:
                index = i
                break
        else:
            code = schema.OperatorCodeT()
            code.builtinCode = builtin
            code.deprecatedBuiltinCode = min(builtin, _PLACEHOLDER_FOR_GREATER_OP_CODES)
            code.version = version
            self.opcodes.append(code)
            index = len(self.opcodes) - 1
        op = schema.OperatorT()
        op.opcodeIndex = index
        op.inputs = list(inputs)
        op.outputs = list(outputs)
        op.builtinOptionsType = options_type
        op.builtinOptions = options
        self.operators.append(op)

    def finish(self) -> bytes:
        sub = schema.SubGraphT()
        sub.tensors = self.tensors
        sub.operators = self.operators
        sub.inputs = list(self.inputs)
        sub.outputs = list(self.outputs)
        sub.name = "main"

        sig = schema.SignatureDefT()
        sig.signatureKey = "serving_default"
        sig.subgraphIndex = 0
        sig.inputs = [self._tensor_map(i) for i in self.inputs]
        sig.outputs = [self._tensor_map(i) for i in self.outputs]

        model = schema.ModelT()
        model.version = 3
        model.description = "litecl models.builders"
        model.operatorCodes = self.opcodes
        model.subgraphs = [sub]
        model.buffers = self.buffers
        model.signatureDefs = [sig]

        builder = flatbuffers.Builder(0)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        return bytes(builder.Output())

    def _tensor_map(self, index: int) -> schema.TensorMapT:
        m = schema.TensorMapT()
        m.name = self.tensors[index].name
        m.tensorIndex = index
        return m

    # Op helpers shared by the builders -----------------------------------------------

    def cast(self, x: int, dst: str, name: str) -> int:
        src = self.dtype_of(x)
        y = self.tensor(name, dst, self.shape_of(x), signature=self.tensors[x].shapeSignature)
        opts = schema.CastOptionsT()
        opts.inDataType = _type_code(src)
        opts.outDataType = _type_code(dst)
        self.op(schema.BuiltinOperator.CAST, [x], [y], options_type=schema.BuiltinOptions.CastOptions,
                options=opts, version=cast_version(src, dst))
        return y

    def binary(self, kind: str, a: int, b: int, name: str, activation: str = "NONE",
               out_quant: tuple[float, int] | None = None, pot_scale_int16: bool = False) -> int:
        dtype = self.dtype_of(a)
        shape = np.broadcast_shapes(self.shape_of(a), self.shape_of(b))
        y = self.tensor(name, dtype, shape, quant=out_quant)
        act = _activation_code(activation)
        if kind == "add":
            opts = schema.AddOptionsT()
            opts.fusedActivationFunction = act
            # potScaleInt16 defaults to True in the object API; the general int16 kernel
            # (any scales, zero points 0) needs False, which is what the converter writes.
            opts.potScaleInt16 = pot_scale_int16
            self.op(schema.BuiltinOperator.ADD, [a, b], [y], options_type=schema.BuiltinOptions.AddOptions,
                    options=opts, version=_add_version(dtype, opts.potScaleInt16))
        elif kind == "sub":
            opts = schema.SubOptionsT()
            opts.fusedActivationFunction = act
            opts.potScaleInt16 = False
            self.op(schema.BuiltinOperator.SUB, [a, b], [y], options_type=schema.BuiltinOptions.SubOptions,
                    options=opts)
        elif kind == "mul":
            opts = schema.MulOptionsT()
            opts.fusedActivationFunction = act
            self.op(schema.BuiltinOperator.MUL, [a, b], [y], options_type=schema.BuiltinOptions.MulOptions,
                    options=opts)
        else:
            raise ValueError(f"unknown binary op {kind!r}; expected add, sub or mul")
        return y

    def reshape(self, x: int, new_shape, name: str) -> int:
        out_shape = np.empty(self.shape_of(x), dtype=np.uint8).reshape(tuple(new_shape)).shape
        s = self.constant(f"{name}_shape", "int32", np.asarray(new_shape, dtype=np.int32).reshape(-1))
        y = self.tensor(name, self.dtype_of(x), out_shape)
        opts = schema.ReshapeOptionsT()
        opts.newShape = [int(d) for d in out_shape]
        self.op(schema.BuiltinOperator.RESHAPE, [x, s], [y], options_type=schema.BuiltinOptions.ReshapeOptions,
                options=opts)
        return y


# Builders ---------------------------------------------------------------------------------


def cast_model(src: str, dst: str, shape, *, constant: np.ndarray | None = None,
               dynamic: bool = False) -> bytes:
    """One CAST node from ``src`` to ``dst`` (TFLite type names), any rank (0 to 6 and more).

    Tensors: ``input`` (src, ``shape``) -> CAST -> ``output`` (dst, ``shape``). CastOptions
    carries in_data_type/out_data_type and the operator version follows op_version.cc.

    constant: if given, CAST reads a constant tensor holding ``constant`` (converted to
    ``src``, shape ``shape``; a scalar or array that broadcasts to ``shape``) and the model
    has zero inputs, which TFLite allows and LiteRT 2.3.0 runs (models/LITERT_FACTS.md).
    dynamic: sets shape_signature to -1 in the first dimension (``shape`` stays the default
    shape; resize the input before allocate). Needs rank >= 1.

    Raises ValueError for unknown type names, negative dims, or dynamic with rank 0.
    """
    dims = _shape(shape)
    signature = None
    if dynamic:
        if not dims:
            raise ValueError("dynamic=True needs a shape of rank >= 1")
        signature = [-1] + dims[1:]
    g = _Graph()
    if constant is not None:
        data = np.broadcast_to(np.asarray(constant, dtype=_np_dtype(src)), dims)
        x = g.tensor("input_const", src, dims, data=data)
    else:
        x = g.tensor("input", src, dims, signature=signature)
        g.inputs = [x]
    g.outputs = [g.cast(x, dst, "output")]
    return g.finish()


def unpreparable_add_model() -> bytes:
    """ADD of inputs x [2] and y [3] (signature dims -1): LiteRT cannot prepare it at its
    declared shapes; at [3] and [3] it runs (commands' "declared shapes" hints)."""
    g = _Graph()
    x = g.tensor("x", "float32", (2,), signature=[-1])
    y = g.tensor("y", "float32", (3,), signature=[-1])
    out = g.tensor("out", "float32", (3,), signature=[-1])
    g.op(schema.BuiltinOperator.ADD, [x, y], [out], options_type=schema.BuiltinOptions.AddOptions,
         options=schema.AddOptionsT())
    g.inputs, g.outputs = [x, y], [out]
    return g.finish()


def custom_op_model(name: str = "LiteclAbsentOp") -> bytes:
    """x float32 [4] -> CAST int32 -> the custom operator ``name`` (which no LiteRT
    resolver has) -> y int32 [4]: LiteRT cannot prepare it at any shape ("Encountered
    unresolved custom op"), as a model that needs an app's own custom ops."""
    g = _Graph()
    x = g.tensor("x", "float32", (4,))
    c = g.cast(x, "int32", "c")
    y = g.tensor("y", "int32", (4,))
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CUSTOM
    code.customCode, code.version = name, 1
    g.opcodes.append(code)
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = len(g.opcodes) - 1, [c], [y]
    g.operators.append(op)
    g.inputs, g.outputs = [x], [y]
    return g.finish()


def add_model(dtype: str, shape1, shape2, *, activation: str = "NONE",
              quant: tuple | None = None, const1=None, const2=None, pot_scale_int16: bool = False,
              dynamic: bool = False) -> bytes:
    """One ADD node ``output = act(input1 + input2)`` with numpy broadcasting.

    dtype: float32, int32, int64 (plain) or int8, uint8, int16 (quantized, ``quant``
    required). Output shape: ``np.broadcast_shapes(shape1, shape2)``; LiteRT broadcasts up
    to 6-D. activation: NONE, RELU, RELU6 or RELU_N1_TO_1 (fused).
    quant: ``((scale1, zp1), (scale2, zp2), (scale_out, zp_out))``, per-tensor; int16
    needs zero points 0 (the kernel refuses others at allocate time). AddOptions has
    pot_scale_int16 = False, as the converter writes it, unless ``pot_scale_int16`` (int16 with
    power-of-two scales then takes LiteRT's POT path).
    const1 / const2: make that operand a constant tensor holding the value (converted to
    ``dtype``, broadcast to ``shape1`` / ``shape2``) instead of a model input. The inputs
    that remain are named ``input1`` / ``input2``; the output is ``output``.
    dynamic: every dimension of the inputs and the output -1 in its shape signature (each
    input resizes on its own, as TensorFlow's converter writes ``[None]`` operands).

    Raises ValueError on unknown names, quant missing for a quantized type, or shapes that
    do not broadcast.
    """
    quantized = dtype in ("int8", "uint8", "int16")
    if quantized and quant is None:
        raise ValueError(f"{dtype} ADD is quantized: pass quant=((s1, zp1), (s2, zp2), (s_out, zp_out))")
    if quant is not None and len(quant) != 3:
        raise ValueError(f"quant must hold 3 (scale, zero_point) pairs, got {quant!r}")
    out_shape = np.broadcast_shapes(tuple(_shape(shape1)), tuple(_shape(shape2)))
    q = quant if quant is not None else (None, None, None)
    g = _Graph()
    operands = []
    for i, (shape, const, qp) in enumerate(((shape1, const1, q[0]), (shape2, const2, q[1])), start=1):
        if const is not None:
            data = np.broadcast_to(np.asarray(const, dtype=_np_dtype(dtype)), _shape(shape))
            operands.append(g.tensor(f"input{i}_const", dtype, shape, data=data, quant=qp))
        else:
            operands.append(g.tensor(f"input{i}", dtype, shape, quant=qp,
                                     signature=[-1] * len(_shape(shape)) if dynamic else None))
            g.inputs.append(operands[-1])
    y = g.binary("add", operands[0], operands[1], "output", activation, out_quant=q[2],
                 pot_scale_int16=pot_scale_int16)
    assert g.shape_of(y) == tuple(out_shape)
    if dynamic:
        g.tensors[y].shapeSignature = [-1] * len(out_shape)
    g.outputs = [y]
    return g.finish()


def chain_model(steps: Sequence, shape) -> bytes:
    """A chain of nodes read left to right from one input of shape ``shape``.

    ``steps[0]`` is the input's type name. Each later step acts on the current tensor:

    - ``"float16"`` (a type name): CAST to that type;
    - ``("add", value)`` or ``("add", value, activation)``: ADD a constant holding
      ``value`` in the current type, with the value's own shape (a Python scalar gives a
      0-d constant, i.e. a broadcast ADD; pass ``np.full(shape, v)`` for a same-shape one);
    - ``("sub", value[, activation])``, ``("mul", value[, activation])``: SUB / MUL with a
      constant, ops litecl does not lower (they run on LiteRT's interpreter);
    - ``("reshape", new_shape)``: RESHAPE (new_shape may hold one -1);
    - a list of steps: a branch (fan-out). The current tensor feeds the branch's first
      node *and* the next step of this chain; the branch's last tensor becomes an extra
      model output. Branches may nest.

    Outputs: ``output`` (the main chain's last tensor) first, then ``output_1``,
    ``output_2``... for the branches in the order they appear. Example, the u8 image
    pattern with a fan-out::

        chain_model(["uint8", "float32", [("mul", 2.0)], ("add", 1.0), "float16"], (2, 3))
        # input u8 -> CAST f32 -> t;  t -> MUL 2 -> output_1 (f32);
        # t -> ADD 1 -> CAST f16 -> output (f16)

    No float16 arithmetic exists in TFLite: ADD/SUB/MUL on float16 is refused by LiteRT.
    Raises ValueError on an unknown step.
    """
    if not steps or not isinstance(steps[0], str):
        raise ValueError("chain_model: steps[0] must be the input's type name, e.g. 'uint8'")
    g = _Graph()
    x = g.tensor("input", steps[0], shape)
    g.inputs = [x]
    counter = iter(range(1, 1 << 30))
    branch_outputs: list[int] = []

    def run(x: int, rest: Iterable) -> int:
        for step in rest:
            n = next(counter)
            if isinstance(step, str):
                x = g.cast(x, step, f"t{n}_cast_{step}")
            elif isinstance(step, list):
                branch_outputs.append(run(x, step))
            elif isinstance(step, tuple) and step and step[0] in ("add", "sub", "mul"):
                kind, value = step[0], step[1]
                activation = step[2] if len(step) > 2 else "NONE"
                c = g.constant(f"t{n}_{kind}_const", g.dtype_of(x), value)
                x = g.binary(kind, x, c, f"t{n}_{kind}", activation)
            elif isinstance(step, tuple) and step and step[0] == "reshape":
                x = g.reshape(x, step[1], f"t{n}_reshape")
            else:
                raise ValueError(f"chain_model: unknown step {step!r}")
        return x

    y = run(x, steps[1:])
    outputs = [y] + branch_outputs
    if len(set(outputs)) != len(outputs) or x in outputs:
        raise ValueError("chain_model: every output must come from at least one node")
    g.tensors[y].name = "output"
    for k, t in enumerate(branch_outputs, start=1):
        g.tensors[t].name = f"output_{k}"
    g.outputs = outputs
    return g.finish()


#: Patterns for multi_op_model: chain_model steps mixing lowered nodes (CAST, ADD) with
#: fallback nodes (MUL, SUB, RESHAPE). The comment gives the partitions in execution order
#: (CL: litecl's OpenCL kernels, CPU: LiteRT's interpreter).
MULTI_OP_PATTERNS: dict[str, list] = {
    # CL | CPU | CL: the image-normalisation pattern, u8 -> f32, * 1/255, - 0.5, -> f16.
    "cast_mul_cast": ["uint8", "float32", ("mul", 1.0 / 255.0), ("add", -0.5), "float16"],
    # CPU | CL: RESHAPE first, then CAST and a broadcast int32 ADD.
    "reshape_cast": ["float32", ("reshape", (-1,)), "int32", ("add", 3)],
    # CL | CPU | CL | CPU | CL: alternating partitions.
    "alternating": ["int32", "float32", ("mul", 2.0), ("add", 1.0), ("sub", 0.25), "float16"],
    # One f32 tensor feeds a MUL (CPU, output_1) and an ADD (CL): fan-out across partitions.
    "fanout_mixed": ["uint8", "float32", [("mul", 2.0)], ("add", 1.0), "int32"],
}


def multi_op_model(pattern: str = "cast_mul_cast", shape=(2, 3, 4)) -> bytes:
    """A model whose lowered nodes are split by a node litecl does not lower.

    pattern: a key of MULTI_OP_PATTERNS (see its comments for the partitions);
    shape: the input shape. Input ``input`` has the pattern's first type; outputs as in
    chain_model. Raises KeyError naming the known patterns.
    """
    if pattern not in MULTI_OP_PATTERNS:
        raise KeyError(f"unknown pattern {pattern!r}; known: {', '.join(MULTI_OP_PATTERNS)}")
    return chain_model(MULTI_OP_PATTERNS[pattern], shape)


def many_partitions_model(partitions: int = 214, shape=(1, 32, 32, 8)) -> bytes:
    """A float32 chain that litecl splits into ``partitions`` partitions (a stand-in for
    models such as dp_net, 214 partitions): per partition an ADD (every fifth also a CAST
    to float16 and back: three nodes), then a MUL or SUB that stays on LiteRT; every
    seventh MUL/SUB also feeds a branch (an extra output) through a MUL."""
    steps: list = ["float32"]
    for k in range(partitions):
        steps.append(("add", 1.0 / (k + 1)))
        if k % 5 == 0:
            steps += ["float16", "float32"]
        steps.append(("mul", 0.5) if k % 3 else ("sub", 0.25))
        if k % 7 == 3:
            steps.append([("mul", 2.0)])
    return chain_model(steps, shape)


# Reading models ---------------------------------------------------------------------------


def builtin_name(code: schema.OperatorCodeT) -> str:
    """The BuiltinOperator name of an operator code ("CAST"), or "CUSTOM:<name>"."""
    builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
    if builtin == schema.BuiltinOperator.CUSTOM:
        custom = code.customCode.decode() if isinstance(code.customCode, bytes) else code.customCode
        return f"CUSTOM:{custom}"
    return _BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}")


def merged_model(*models: bytes) -> bytes:
    """One model whose subgraph k is ``models[k]``'s subgraph 0 (buffers and operator
    codes renumbered; each keeps its signature, named "sig<k>" past the first). No node
    calls another subgraph: LiteRT prepares each as its own context."""
    out = _model(models[0])
    out.subgraphs = out.subgraphs[:1]
    out.signatureDefs = (out.signatureDefs or [])[:1]
    for buf in models[1:]:
        m = _model(buf)
        off = len(out.buffers) - 1  # buffer 0, the sentinel, stays 0
        out.buffers += m.buffers[1:]
        codes = {}
        for i, oc in enumerate(m.operatorCodes):
            same = [j for j, o in enumerate(out.operatorCodes)
                    if (o.builtinCode, o.version, o.deprecatedBuiltinCode) ==
                    (oc.builtinCode, oc.version, oc.deprecatedBuiltinCode)]
            if not same:
                out.operatorCodes.append(oc)
            codes[i] = same[0] if same else len(out.operatorCodes) - 1
        sg = m.subgraphs[0]
        for t in sg.tensors:
            t.buffer = t.buffer + off if t.buffer else 0
        for op in sg.operators:
            op.opcodeIndex = codes[op.opcodeIndex]
        sg.name = f"sg{len(out.subgraphs)}"
        out.subgraphs.append(sg)
        for sig in (m.signatureDefs or [])[:1]:
            sig.subgraphIndex, sig.signatureKey = len(out.subgraphs) - 1, f"sig{len(out.subgraphs) - 1}"
            out.signatureDefs.append(sig)
    builder = flatbuffers.Builder(0)
    builder.Finish(out.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _model(buf: bytes) -> schema.ModelT:
    if buf[4:8] != b"TFL3":
        raise ValueError("not a TFLite model: file identifier is not TFL3")
    return schema.ModelT.InitFromPackedBuf(bytearray(buf), 0)


def op_counts(buf: bytes) -> Counter:
    """Count of each operator name over all subgraphs of a .tflite model's bytes."""
    model = _model(buf)
    names = [builtin_name(c) for c in model.operatorCodes or []]
    return Counter(names[op.opcodeIndex] for sg in model.subgraphs or [] for op in sg.operators or [])


def cast_pairs(buf: bytes) -> Counter:
    """Count of (src, dst) type-name pairs of the CAST nodes in a model, over all subgraphs.

    Types come from the CAST's input and output tensors (the converter does not always
    write CastOptions).
    """
    model = _model(buf)
    names = [builtin_name(c) for c in model.operatorCodes or []]
    pairs: Counter = Counter()
    for sg in model.subgraphs or []:
        for op in sg.operators or []:
            if names[op.opcodeIndex] == "CAST":
                src = sg.tensors[op.inputs[0]].type
                dst = sg.tensors[op.outputs[0]].type
                pairs[(_TYPE_CODE_NAMES.get(src, str(src)), _TYPE_CODE_NAMES.get(dst, str(dst)))] += 1
    return pairs
