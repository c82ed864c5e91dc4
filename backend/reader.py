"""Reading the fields litecl needs out of a verified .tflite flatbuffer, fast.

``schema.ModelT.InitFromPackedBuf`` (the object API) unpacks every field of every table
through flatbuffers' Python accessors: 30-60 ms for MoveNet, ~60% of load_model
(measured). ``read_model`` reads only the fields model.py validates, each with one
``struct.unpack_from``, into objects whose attributes are named as the object API names
them (``tensor.shapeSignature``, ``op.builtinOptions``), so model.py reads either. Absent
tables, vectors and strings are None, absent scalars the object API's defaults, strings
bytes, scalar vectors tuples (Buffer.data: a memoryview of the buffer). Operator options
and quantization details are the object API's ``*T`` objects (its union creators).

Only for buffers that ``verify.verify`` accepted: offsets are followed unchecked.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from types import SimpleNamespace

from ai_edge_litert import schema_py_generated as schema
from flatbuffers.table import Table

from .verify import scalar_formats, table_layout

__all__ = ["read_model", "with_input_shapes"]

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from

#: Table -> accessors read (the rest of each table is never looked at).
_FIELDS = {
    "Model": ("Version", "OperatorCodes", "Subgraphs", "Buffers", "SignatureDefs"),
    "OperatorCode": ("DeprecatedBuiltinCode", "CustomCode", "Version", "BuiltinCode"),
    "Buffer": ("Data", "Offset", "Size"),
    "SubGraph": ("Tensors", "Inputs", "Outputs", "Operators", "Name"),
    "Tensor": ("Shape", "Type", "Buffer", "Name", "Quantization", "IsVariable", "Sparsity",
               "ShapeSignature"),
    "QuantizationParameters": ("Scale", "ZeroPoint", "Details", "QuantizedDimension"),
    "Operator": ("OpcodeIndex", "Inputs", "Outputs", "BuiltinOptions", "BuiltinOptions2"),
    "SignatureDef": ("Inputs", "Outputs", "SignatureKey", "SubgraphIndex"),
    "TensorMap": ("Name", "TensorIndex"),
}
#: Tables model.py only asks "is it there?": their position stands for them.
_PRESENCE_ONLY = frozenset({"SparsityParameters"})
#: Union accessor -> the object API's creator of its member objects.
_CREATORS = {"BuiltinOptions": schema.BuiltinOptionsCreator,
             "BuiltinOptions2": schema.BuiltinOptions2Creator,
             "Details": schema.QuantizationDetailsCreator}


def _attr(acc: str) -> str:
    """Accessor name -> the object API's attribute name (ShapeSignature -> shapeSignature)."""
    return acc[0].lower() + acc[1:]


@lru_cache(maxsize=None)
def _plan(name: str) -> tuple:
    """(defaults, fields) of table ``name``: the object API's default attributes, and
    (attribute, slot, kind, arg) of each field read, arg a struct.Struct for scalars,
    the element format for scalar vectors, the table name for tables, (type slot,
    creator) for unions."""
    fmts = scalar_formats(name)
    layout = {acc: (slot, kind, arg) for acc, slot, kind, arg in table_layout(name)}
    defaults = {_attr(acc): getattr(getattr(schema, name + "T")(), _attr(acc))
                for acc in _FIELDS[name]}
    fields = []
    for acc in _FIELDS[name]:
        slot, kind, arg = layout[acc]
        if kind == "scalar":
            arg = struct.Struct("<" + fmts[acc])
        elif kind == "scalars":
            arg = fmts[acc]
        elif kind == "union":
            arg = (arg[0], _CREATORS[acc])
        fields.append((_attr(acc), slot, kind, arg))
    return defaults, tuple(fields)


def _table(buf, pos: int, name: str):
    if name in _PRESENCE_ONLY:
        return pos
    defaults, fields = _plan(name)
    out = dict(defaults)
    vt = pos - _I32(buf, pos)[0]
    vsize = _U16(buf, vt)[0]
    for attr, slot, kind, arg in fields:
        fo = _U16(buf, vt + slot)[0] if slot < vsize else 0
        if not fo:
            continue
        p = pos + fo
        if kind == "scalar":
            out[attr] = arg.unpack_from(buf, p)[0]
        elif kind == "union":
            type_slot, creator = arg
            to = _U16(buf, vt + type_slot)[0] if type_slot < vsize else 0
            out[attr] = creator(buf[pos + to] if to else 0, Table(buf, p + _U32(buf, p)[0]))
        else:
            p += _U32(buf, p)[0]
            n = _U32(buf, p)[0]
            if kind == "string":
                out[attr] = bytes(buf[p + 4:p + 4 + n])
            elif kind == "scalars":
                out[attr] = memoryview(buf)[p + 4:p + 4 + n] if arg == "B" else \
                    struct.unpack_from(f"<{n}{arg}", buf, p + 4)
            elif kind == "table":
                out[attr] = _table(buf, p, arg)
            else:  # tables
                out[attr] = [_table(buf, q + _U32(buf, q)[0], arg)
                             for q in range(p + 4, p + 4 + 4 * n, 4)]
    return SimpleNamespace(**out)


def read_model(buf: bytes):
    """The Model table of ``buf`` (verified by verify.verify) as described above."""
    return _table(buf, _U32(buf, 0)[0], "Model")


def with_input_shapes(model, shapes: dict) -> bytes:
    """``model.raw`` with inputs declared at ``shapes`` ({input name: shape}; a name of
    subgraph 0's input tensors or of a signature's inputs), so that LiteRT constructs the
    interpreter, and its delegates' Prepare decides, at those shapes rather than the
    declared ones: placement="auto" prices a node at the shapes of its Prepare, and a
    delegate that allows dynamic tensors is not asked again after resize_tensor_input.
    Only an input whose shape signature admits the shape (same rank, every fixed
    dimension equal) whose shape vector no other tensor shares is changed, in place
    (its int32s; the rank is kept, so no offset moves); the rest stay declared (the
    caller resizes them as before). Returns ``model.raw`` itself when nothing changes."""
    targets = {}
    for name, shape in shapes.items():
        places = [(0, t) for t in model.subgraphs[0].inputs if model.subgraphs[0].tensors[t].name == name]
        places += [(s.subgraph, s.inputs[name]) for s in model.signatures if name in s.inputs]
        for si, t in places:
            if si < len(model.subgraphs) and 0 <= t < len(model.subgraphs[si].tensors):
                targets[(si, t)] = tuple(int(d) for d in shape)
    raw = bytearray(model.raw)
    fb = schema.Model.GetRootAs(model.raw, 0)
    starts: dict = {}  # every tensor's shape vector start -> how many tensors hold it
    where: dict = {}
    for si in {si for si, _ in targets}:
        sg = fb.Subgraphs(si)
        for t in range(sg.TensorsLength()):
            tab = sg.Tensors(t)._tab
            o = tab.Offset(4)  # Tensor.shape: field 0
            if o:
                start = tab.Vector(o)
                starts[start] = starts.get(start, 0) + 1
                where[(si, t)] = (start, tab.VectorLen(o))
    changed = False
    for (si, t), shape in targets.items():
        tv = model.subgraphs[si].tensors[t]
        sig = tuple(tv.shape_signature) or tuple(tv.shape)
        got = where.get((si, t))
        if (got is None or got[1] != len(shape) or len(sig) != len(shape) or starts[got[0]] != 1
                or any(s != -1 and s != d for s, d in zip(sig, shape)) or tuple(tv.shape) == shape
                or any(d < 0 or d >= 2**31 for d in shape)):
            continue
        raw[got[0]:got[0] + 4 * len(shape)] = struct.pack(f"<{len(shape)}i", *shape)
        changed = True
    return bytes(raw) if changed else model.raw
