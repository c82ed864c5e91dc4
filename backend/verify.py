"""A bounds-checking verifier for .tflite flatbuffers, run before any parser walks them.

Python's flatbuffers has no verifier: on a corrupt buffer its object API raises odd
exceptions, returns garbage, or follows a shared sub-table so many times that unpacking
takes minutes (REFERENCE_FACTS.md). ``verify(buf)`` checks what flatbuffers' C++
``Verifier`` (the one LiteRT runs) checks, for every table ``ModelT.InitFromPackedBuf``
unpacks: each table's vtable offset, vtable size and inline size in bounds; each present
field inside its table and aligned; each offset to a sub-table, vector or string non-zero
and in bounds; each vector's length times its element size in bounds; each string
NUL-terminated in bounds; each known union member verified as its table.

The layout is data, derived once from the generated schema module (``ai_edge_litert.
schema_py_generated``): every accessor names its vtable slot and how it reads it, so all
tables, the ~200 builtin-options tables of the ``BuiltinOptions``/``BuiltinOptions2``
unions included, are covered without a hand-kept copy of schema.fbs.

Work is capped by what a legitimate file of the same size could ask of the parser: at
most one table visit per 8 bytes (a table needs its 4-byte soffset and the 4-byte offset
that reaches it) and at most as many vector and string bytes as the file holds. A file
that reuses one sub-table or string many times to multiply the parser's work is refused.
"""
from __future__ import annotations

import inspect
import re
import struct
from functools import lru_cache

from ai_edge_litert import schema_py_generated as schema
from flatbuffers import number_types

__all__ = ["VerifyError", "verify", "table_layout", "scalar_formats"]

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_MAX_DEPTH = 64  # flatbuffers' C++ Verifier default


class VerifyError(Exception):
    """The buffer is not a well-formed flatbuffer of the TFLite schema (one-line reason)."""


# ---------------------------------------------------------------------------- layout
# Accessor bodies of the generated code, by what they read at `o` (the field's offset):
#   scalar   self._tab.Get(flatbuffers.number_types.Int32Flags, o + self._tab.Pos)
#   string   self._tab.String(o + self._tab.Pos)
#   table    x = self._tab.Indirect(o + self._tab.Pos); obj = Foo()
#   union    self._tab.Union(obj, o)
#   vectors  a = self._tab.Vector(o) then Get(...Flags, a + ...) / String(a + ...) /
#            Indirect(x); obj = Foo()
_DEF = re.compile(r"^    def (\w+)\(self(, j)?\):\n"
                  r"        o = flatbuffers\.number_types\.UOffsetTFlags\.py_type\("
                  r"self\._tab\.Offset\((\d+)\)\)\n", re.M)
_FLAGS = re.compile(r"number_types\.(\w+Flags), ([oa]) \+")
_OBJ = re.compile(r"obj = (\w+)\(\)")
_CREATOR = re.compile(r"(\w+)Creator\(self\.\w+Type, \w+\.(\w+)\(\)\)")
_CLASS = re.compile(r"^class (\w+)\(object\):\n", re.M)


@lru_cache(maxsize=None)
def _class_sources() -> dict:
    """Class name -> its source text, from one read of the generated module."""
    src = inspect.getsource(schema)
    heads = list(_CLASS.finditer(src))
    return {m.group(1): src[m.end(): nxt.start() if nxt else len(src)]
            for m, nxt in zip(heads, heads[1:] + [None])}


def _kind(body: str):
    """(kind, arg) of one accessor body, or None for the helper accessors
    (FooLength, FooIsNone, FooAsNumpy)."""
    if "VectorLen(" in body or "return o == 0" in body or "GetVectorAsNumpy" in body:
        return None
    if "self._tab.Union(" in body:
        return ("union", None)
    obj = _OBJ.search(body)
    flags = _FLAGS.search(body)
    if "self._tab.Vector(o)" in body:
        if "Indirect(" in body and obj:
            return ("tables", obj.group(1))
        if "self._tab.String(" in body:
            return ("strings", None)
        if flags and flags.group(2) == "a":
            return ("scalars", getattr(number_types, flags.group(1)).bytewidth)
    elif "Indirect(o + self._tab.Pos)" in body and obj:
        return ("table", obj.group(1))
    elif "self._tab.String(o + self._tab.Pos)" in body:
        return ("string", None)
    elif flags and flags.group(2) == "o":
        return ("scalar", getattr(number_types, flags.group(1)).bytewidth)
    raise RuntimeError(f"unrecognised generated accessor:\n{body}")


@lru_cache(maxsize=None)
def table_layout(name: str) -> tuple:
    """Fields of schema table ``name`` as (accessor name, vtable slot, kind, arg), where
    kind is scalar (arg: byte width), string, table (arg: table name), union (arg: (type
    slot, {type code: table name})), scalars (arg: element width), strings, tables (arg:
    table name). Derived from the generated module's source."""
    src = _class_sources()[name]
    defs = list(_DEF.finditer(src))
    fields, slots = [], {}
    for m, nxt in zip(defs, defs[1:] + [None]):
        body = src[m.end(): nxt.start() if nxt else len(src)]
        k = _kind(body)
        if k is None:
            continue
        slots[m.group(1)] = int(m.group(3))
        fields.append((m.group(1), int(m.group(3)), k[0], k[1]))
    unions = {}
    # the object API names each union's enum: FooCreator(self.xType, foo.X())
    for enum, acc in _CREATOR.findall(_class_sources().get(name + "T", "")):
        members = {v: k for k, v in vars(getattr(schema, enum)).items()
                   if not k.startswith("_") and isinstance(v, int) and v != 0}
        unions[acc] = (slots[acc + "Type"], members)
    out = []
    for acc, slot, kind, arg in fields:
        if kind == "union":
            if acc not in unions:
                raise RuntimeError(f"{name}.{acc}: union without a Creator in {name}T")
            arg = unions[acc]
        out.append((acc, slot, kind, arg))
    return tuple(out)


@lru_cache(maxsize=None)
def scalar_formats(name: str) -> dict:
    """Accessor name -> struct format character ("b", "I", "f", "?", ...) of each scalar
    field and scalar vector of schema table ``name``, read from the generated accessors
    (the flatbuffers.number_types flags each one reads with)."""
    src = _class_sources()[name]
    defs = list(_DEF.finditer(src))
    out = {}
    for m, nxt in zip(defs, defs[1:] + [None]):
        body = src[m.end(): nxt.start() if nxt else len(src)]
        k = _kind(body)
        if k is not None and k[0] in ("scalar", "scalars"):
            flags = getattr(number_types, _FLAGS.search(body).group(1))
            out[m.group(1)] = flags.packer_type.format.lstrip("<")
    return out


@lru_cache(maxsize=None)  # once per accessor: the verifier names every field it enters
def _snake(name: str) -> str:
    """Accessor name -> the schema's field name (OperatorCodes -> operator_codes)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


# ---------------------------------------------------------------------------- verifier
class _Verifier:
    def __init__(self, buf: bytes, scalars: list | None = None):
        self.buf = buf
        self.scalars = scalars
        self.n = len(buf)
        self.tables_left = self.n // 8 + 1   # one table per 8 bytes at most (see module doc)
        self.bytes_left = self.n              # vector and string bytes, summed over visits
        self.path: list = []

    def fail(self, msg: str):
        where = "".join(self.path).lstrip(".") or "root"
        raise VerifyError(f"{where}: {msg}")

    def need(self, pos: int, size: int, what: str, align: int = 1) -> None:
        if pos < 0 or pos + size > self.n:
            self.fail(f"{what} at byte {pos} (+{size}) outside the {self.n}-byte file")
        if align > 1 and pos % align:
            self.fail(f"{what} at byte {pos} is not {align}-byte aligned")

    def offset(self, pos: int, what: str) -> int:
        """Follow the uoffset stored at ``pos``; returns the target position."""
        self.need(pos, 4, f"offset to {what}", 4)
        o = _U32(self.buf, pos)[0]
        if o == 0 or o >= 2**31:
            self.fail(f"offset to {what} is {o}")
        self.need(pos + o, 1, what)
        return pos + o

    def vector(self, pos: int, elem: int, what: str) -> int:
        """Check the vector at ``pos``; returns its length."""
        self.need(pos, 4, f"{what} length", 4)
        count = _U32(self.buf, pos)[0]
        size = count * elem
        if size > self.n - pos - 4:
            self.fail(f"{what} of {count} x {elem} bytes at byte {pos} runs past the end of the "
                      f"{self.n}-byte file")
        self.bytes_left -= size
        if self.bytes_left < 0:
            self.fail("vectors and strings referenced more often than the file could hold "
                      "(shared data multiplying the parser's work)")
        return count

    def string(self, pos: int, what: str) -> None:
        count = self.vector(pos, 1, what)
        end = pos + 4 + count
        if end >= self.n or self.buf[end] != 0:
            self.fail(f"{what} of {count} bytes at byte {pos} is not NUL-terminated inside the file")

    def table(self, pos: int, name: str, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            self.fail(f"tables nested deeper than {_MAX_DEPTH}")
        self.tables_left -= 1
        if self.tables_left < 0:
            self.fail("more table visits than the file could hold "
                      "(a shared sub-table multiplying the parser's work)")
        self.need(pos, 4, f"{name} table", 4)
        vt = pos - _I32(self.buf, pos)[0]
        self.need(vt, 4, f"{name} vtable", 2)
        vsize, tsize = _U16(self.buf, vt)[0], _U16(self.buf, vt + 2)[0]
        if vsize < 4 or vsize % 2:
            self.fail(f"{name} vtable size {vsize} is not an even number >= 4")
        self.need(vt, vsize, f"{name} vtable", 2)
        if tsize < 4:
            self.fail(f"{name} table size {tsize} < 4")
        self.need(pos, tsize, f"{name} table", 4)
        for acc, slot, kind, arg in table_layout(name):
            fo = _U16(self.buf, vt + slot)[0] if slot < vsize else 0
            if not fo:
                continue
            size = arg if kind == "scalar" else 4
            self.path.append(f".{_snake(acc)}")
            if fo + size > tsize:
                self.fail(f"field at offset {fo} (+{size}) outside its {tsize}-byte table")
            p = pos + fo
            if kind == "scalar":
                self.need(p, size, "scalar", size)
                if self.scalars is not None:
                    self.scalars.append((p, size, 1))
            elif kind == "union":
                type_slot, members = arg
                to = _U16(self.buf, vt + type_slot)[0] if type_slot < vsize else 0
                code = self.buf[pos + to] if to and to < tsize else 0
                if code in members:  # unknown codes are not unpacked (nor verified by C++)
                    self.table(self.offset(p, members[code]), members[code], depth + 1)
            else:
                what = arg if kind == "table" else "string" if kind == "string" else "vector"
                target = self.offset(p, what)
                if kind == "table":
                    self.table(target, arg, depth + 1)
                elif kind == "string":
                    self.string(target, "string")
                elif kind == "scalars":
                    count = self.vector(target, arg, "vector")
                    if self.scalars is not None and count:
                        self.scalars.append((target + 4, arg, count))
                else:  # a vector of offsets to tables or strings
                    count = self.vector(target, 4, "vector")
                    for i in range(count):
                        self.path.append(f"[{i}]")
                        elem = self.offset(target + 4 + 4 * i, arg or "string")
                        if kind == "tables":
                            self.table(elem, arg, depth + 1)
                        else:
                            self.string(elem, "string")
                        self.path.pop()
            self.path.pop()


def verify(buf: bytes, root: str = "Model", scalars: list | None = None) -> None:
    """Verify ``buf`` as a flatbuffer whose root table is ``root`` (a schema table name).
    Raises VerifyError naming the field path and what is wrong. Does not check the file
    identifier (the caller does) or the meaning of indices (model.py does).

    scalars: if a list, (position, byte width, count) of every scalar field and scalar
    vector met is appended to it (the fuzzer mutates values there)."""
    v = _Verifier(bytes(buf), scalars)
    v.table(v.offset(0, f"root {root} table"), root)
