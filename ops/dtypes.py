"""The dtype table: the single source of truth for every tensor type litecl handles.

One frozen row per TFLite TensorType. Every other mapping (by name, by TensorType code,
by numpy dtype) is derived from the table by a comprehension, and tests assert the maps
are complete and one-to-one.

Storage rules (OpenCL C 1.2 section 6.1 / 6.9):
- bool may not appear in kernel arguments or buffers: a TFLite bool is a 0/1 byte, stored
  as ``uchar``.
- half may only be a pointer type without cl_khr_fp16: it is loaded with ``vload_half``
  and stored with ``vstore_half_rte``.
- double needs cl_khr_fp64; without it a float64 tensor is stored as ``ulong`` bits and
  converted with integer operations.
- complex64 is two floats, stored as ``float2`` (real, imaginary).
- bfloat16 is the top half of a float32, stored as ``ushort`` bits (numpy type: ml_dtypes'
  bfloat16, which LiteRT's Python API takes and returns; measured).
- int4, uint4, int2 (sub-byte integers): one value per byte in tensors, as LiteRT holds
  them at run time and as its Python API passes int4/uint4 (int8/uint8 arrays; values
  outside the type's range refused); packed in constant buffers as the schema stores them
  (``packed_bits`` per value, low bits first), unpacked when the model is read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

try:  # bfloat16's numpy type (ml_dtypes: a dependency of ai-edge-litert, which LiteRT's
    import ml_dtypes  # Python API uses for it); without it the bfloat16 row is left out
except ImportError:  # pragma: no cover (a bare install without ai-edge-litert's deps)
    ml_dtypes = None

__all__ = ["DType", "DTYPES", "BY_NAME", "BY_TFLITE", "BY_NUMPY", "BY_C_TYPE", "C_TYPE_SCHEMA", "CAST_TYPES", "SUB_BYTE_CAST_PARTNER", "dtype"]


@dataclass(frozen=True)
class DType:
    """One TFLite tensor type.

    name: TFLite's lower-case name ("float32"); tflite: the schema's TensorType code;
    itemsize: bytes per element; np: numpy dtype; cl: the OpenCL C *storage* type;
    extension: the OpenCL extension needed to do arithmetic on it natively (None: core);
    middle: the OpenCL C type it is widened to before conversion (the seed's middle type,
    generalised so no step loses range: 64-bit integers keep ``long``, uint32 keeps
    ``uint``, float64 keeps ``double``); kind: "bool", "int", "uint", "float", "complex";
    bits: value bits (integers and floats); packed_bits: bits per value in a constant
    buffer when the schema packs several values per byte (0: not packed).
    """

    name: str
    tflite: int
    itemsize: int
    np: np.dtype
    cl: str
    extension: Optional[str]
    middle: str
    kind: str
    bits: int
    packed_bits: int = 0
    #: the C API's TfLiteType number (tflite/core/c/common.h), which is not the schema's
    #: TensorType: what a delegate reads from TfLiteTensor.type
    c_type: int = 0

    def __reduce__(self):  # unpickled as the table's own row (model cache: model.py)
        return _by_name, (self.name,)

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def min(self) -> int | float:
        """Smallest finite value (numpy's iinfo/finfo)."""
        if self.kind == "bool":
            return 0
        if self.is_integer:  # from the value bits: int4 is [-8, 7] though stored in an int8
            return -(1 << (self.bits - 1)) if self.kind == "int" else 0
        return float(_finfo(self.np if self.kind == "float" else np.float32).min)

    @property
    def max(self) -> int | float:
        """Largest finite value (numpy's iinfo/finfo)."""
        if self.kind == "bool":
            return 1
        if self.is_integer:
            return (1 << (self.bits - (self.kind == "int"))) - 1
        return float(_finfo(self.np if self.kind == "float" else np.float32).max)


def _finfo(npdt):
    """numpy's finfo, or ml_dtypes' for the types numpy lacks (bfloat16)."""
    try:
        return np.finfo(npdt)
    except ValueError:
        return ml_dtypes.finfo(npdt)


def _row(name, tflite, c_type, itemsize, npdt, cl, ext, middle, kind, bits, packed_bits=0):
    return DType(name, tflite, itemsize, np.dtype(npdt), cl, ext, middle, kind, bits, packed_bits, c_type)


# Columns: name, the schema's TensorType (tensorflow/lite/schema/schema.fbs), the C API's
# TfLiteType (tflite/core/c/common.h; ../shared/docs/DELEGATE.md), itemsize, ...
DTYPES: tuple[DType, ...] = (
    _row("bool", 6, 6, 1, np.bool_, "uchar", None, "int", "bool", 1),
    _row("int8", 9, 9, 1, np.int8, "char", None, "int", "int", 8),
    _row("uint8", 3, 3, 1, np.uint8, "uchar", None, "int", "uint", 8),
    _row("int16", 7, 7, 2, np.int16, "short", None, "int", "int", 16),
    _row("uint16", 16, 17, 2, np.uint16, "ushort", None, "int", "uint", 16),
    _row("int32", 2, 2, 4, np.int32, "int", None, "int", "int", 32),
    _row("uint32", 15, 16, 4, np.uint32, "uint", None, "uint", "uint", 32),
    _row("int64", 4, 4, 8, np.int64, "long", None, "long", "int", 64),
    _row("float16", 1, 10, 2, np.float16, "half", "cl_khr_fp16", "float", "float", 16),
    _row("float32", 0, 1, 4, np.float32, "float", None, "float", "float", 32),
    _row("float64", 10, 11, 8, np.float64, "double", "cl_khr_fp64", "double", "float", 64),
    _row("complex64", 8, 8, 8, np.complex64, "float2", None, "float", "complex", 64),
    *((_row("bfloat16", 18, 19, 2, ml_dtypes.bfloat16, "ushort", None, "float", "float", 16),)
      if ml_dtypes is not None else ()),
    # held as int8/uint8 (LiteRT's run-time layout and Python API), packed in buffers
    _row("int4", 17, 18, 1, np.int8, "char", None, "int", "int", 4, packed_bits=4),
    _row("uint4", 20, 21, 1, np.uint8, "uchar", None, "int", "uint", 4, packed_bits=4),
    _row("int2", 19, 20, 1, np.int8, "char", None, "int", "int", 2, packed_bits=2),
)

BY_NAME: dict[str, DType] = {d.name: d for d in DTYPES}


def _by_name(name: str) -> DType:
    return BY_NAME[name]


BY_TFLITE: dict[int, DType] = {d.tflite: d for d in DTYPES}
#: TfLiteType (what a delegate reads from TfLiteTensor.type) -> row
BY_C_TYPE: dict[int, DType] = {d.c_type: d for d in DTYPES}
#: TfLiteType -> the schema's TensorType for the types outside the table (their names, in
#: messages, come from TFLITE_TYPE_NAMES): STRING, COMPLEX128, UINT64, RESOURCE, VARIANT,
#: FLOAT8_E4M3FN, FLOAT8_E5M2
C_TYPE_SCHEMA: dict[int, int] = {5: 5, 12: 11, 13: 12, 14: 13, 15: 14, 22: 21, 23: 22}
#: numpy dtype -> row, for the types held in their own numpy dtype (the sub-byte types
#: share int8/uint8 with those rows)
BY_NUMPY: dict[np.dtype, DType] = {d.np: d for d in DTYPES if not d.packed_bits}

#: The types TFLite CAST converts among (REFERENCE_FACTS.md: 110 ordered pairs).
CAST_TYPES: tuple[DType, ...] = tuple(d for d in DTYPES if d.kind != "complex"
                                      and d.name != "bfloat16" and not d.packed_bits)

#: Sub-byte integer types and the only type LiteRT 2.3.0 casts them to and from
#: (measured: every other pair fails at invoke, "Type INT8 is unsupported by op Cast").
SUB_BYTE_CAST_PARTNER = "float32"

#: TensorType names of the schema, for messages about types litecl does not handle.
TFLITE_TYPE_NAMES: dict[int, str] = {
    0: "FLOAT32", 1: "FLOAT16", 2: "INT32", 3: "UINT8", 4: "INT64", 5: "STRING",
    6: "BOOL", 7: "INT16", 8: "COMPLEX64", 9: "INT8", 10: "FLOAT64", 11: "COMPLEX128",
    12: "UINT64", 13: "RESOURCE", 14: "VARIANT", 15: "UINT32", 16: "UINT16", 17: "INT4",
    18: "BFLOAT16", 19: "INT2", 20: "UINT4", 21: "FLOAT8_E4M3FN", 22: "FLOAT8_E5M2",
}


def dtype(x) -> DType:
    """Look up a row by name ("float32"), TensorType code (0) or numpy dtype.

    Raises KeyError naming the unknown type.
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in BY_NAME:
        return BY_NAME[x]
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool) and int(x) in BY_TFLITE:
        return BY_TFLITE[int(x)]
    try:
        nd = np.dtype(x)
    except TypeError:
        nd = None
    if nd is not None and nd in BY_NUMPY:
        return BY_NUMPY[nd]
    raise KeyError(f"unknown tensor type {x!r}; known: {', '.join(BY_NAME)}")
