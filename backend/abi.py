"""The TFLite delegate C ABI as ctypes: the structs litecl's delegate reads and fills, the
function-pointer types, pointer readers, the supported-version check and the layout
self-check. backend/delegate.py reads LiteRT through it; export.py writes its TESTED
versions into the native delegate, which checks the same ones.

Source of truth: ``tflite/core/c/common.h`` of LiteRT (classic delegate interface; the
layout below is identical from LiteRT v2.1.0 through 2.3.0 on Linux, and in tensorflow
2.21's tf.lite). Sizes on LP64 (x86-64, arm64): TfLiteTensor 112, TfLiteNode 80,
TfLiteRegistration 88, TfLiteContext 200, TfLiteDelegate 56, TfLiteDelegateParams 32
bytes; ``check_sizes`` asserts them. Facts: ../shared/docs/DELEGATE.md.
"""
from __future__ import annotations

import ctypes as C
import importlib.metadata as md

from .errors import LiteclError

__all__ = ["TfLiteTensor", "TfLiteNode", "TfLiteRegistration", "TfLiteContext",
           "TfLiteDelegate", "TfLiteDelegateParams", "int_array", "new_int_array",
           "check_versions", "check_sizes", "K_OK", "K_ERROR", "ALLOW_DYNAMIC_TENSORS",
           "BUILTIN_ADD", "BUILTIN_CAST", "BUILTIN_DELEGATE", "MMAP_RO", "ARENA_RW"]

K_OK, K_ERROR = 0, 1
#: TfLiteDelegateFlags
ALLOW_DYNAMIC_TENSORS = 1
#: BuiltinOperator codes (schema.fbs)
BUILTIN_ADD, BUILTIN_CAST, BUILTIN_DELEGATE = 0, 53, 51
#: TfLiteAllocationType
MEM_NONE, MMAP_RO, ARENA_RW, ARENA_RW_PERSISTENT, DYNAMIC, PERSISTENT_RO = 0, 1, 2, 3, 4, 5

_p = C.c_void_p


class TfLiteIntArray(C.Structure):
    _fields_ = [("size", C.c_int)]  # followed by int data[size]


class TfLiteFloatArray(C.Structure):
    _fields_ = [("size", C.c_int)]  # followed by float data[size]


class TfLiteAffineQuantization(C.Structure):
    _fields_ = [("scale", C.POINTER(TfLiteFloatArray)), ("zero_point", C.POINTER(TfLiteIntArray)),
                ("quantized_dimension", C.c_int32)]


class TfLiteQuantizationParams(C.Structure):
    _fields_ = [("scale", C.c_float), ("zero_point", C.c_int32)]


class TfLiteQuantization(C.Structure):
    _fields_ = [("type", C.c_int), ("params", _p)]


class TfLiteTensor(C.Structure):
    _fields_ = [("type", C.c_int), ("data", _p), ("dims", C.POINTER(TfLiteIntArray)),
                ("params", TfLiteQuantizationParams), ("allocation_type", C.c_int),
                ("bytes", C.c_size_t), ("allocation", _p), ("name", C.c_char_p),
                ("delegate", _p), ("buffer_handle", C.c_int), ("data_is_stale", C.c_bool),
                ("is_variable", C.c_bool), ("quantization", TfLiteQuantization),
                ("sparsity", _p), ("dims_signature", C.POINTER(TfLiteIntArray))]


class TfLiteNode(C.Structure):
    _fields_ = [("inputs", C.POINTER(TfLiteIntArray)), ("outputs", C.POINTER(TfLiteIntArray)),
                ("intermediates", C.POINTER(TfLiteIntArray)),
                ("temporaries", C.POINTER(TfLiteIntArray)), ("user_data", _p),
                ("builtin_data", _p), ("custom_initial_data", _p),
                ("custom_initial_data_size", C.c_int), ("delegate", _p),
                ("might_have_side_effect", C.c_bool)]


class TfLiteAddParams(C.Structure):
    _fields_ = [("activation", C.c_int), ("pot_scale_int16", C.c_bool)]


class TfLiteContext(C.Structure):
    pass


class TfLiteDelegate(C.Structure):
    pass


class TfLiteRegistration(C.Structure):
    pass


Ctx = C.POINTER(TfLiteContext)
Dlg = C.POINTER(TfLiteDelegate)
NodeP = C.POINTER(TfLiteNode)

# kernel callbacks (TfLiteRegistration)
INIT = C.CFUNCTYPE(_p, Ctx, _p, C.c_size_t)
FREE = C.CFUNCTYPE(None, Ctx, _p)
PREPARE = C.CFUNCTYPE(C.c_int, Ctx, NodeP)
INVOKE = C.CFUNCTYPE(C.c_int, Ctx, NodeP)
# delegate callbacks (TfLiteDelegate)
DELEGATE_PREPARE = C.CFUNCTYPE(C.c_int, Ctx, Dlg)
COPY_HANDLE = C.CFUNCTYPE(C.c_int, Ctx, Dlg, C.c_int, C.POINTER(TfLiteTensor))
FREE_HANDLE = C.CFUNCTYPE(None, Ctx, Dlg, C.POINTER(C.c_int))
# context functions LiteRT provides
GET_EXECUTION_PLAN = C.CFUNCTYPE(C.c_int, Ctx, C.POINTER(C.POINTER(TfLiteIntArray)))
GET_NODE_AND_REGISTRATION = C.CFUNCTYPE(C.c_int, Ctx, C.c_int, C.POINTER(NodeP),
                                        C.POINTER(C.POINTER(TfLiteRegistration)))
REPLACE_NODE_SUBSETS = C.CFUNCTYPE(C.c_int, Ctx, TfLiteRegistration, C.POINTER(TfLiteIntArray), Dlg)
RESIZE_TENSOR = C.CFUNCTYPE(C.c_int, Ctx, C.POINTER(TfLiteTensor), C.POINTER(TfLiteIntArray))
# variadic in C (const char* format, ...): called with ("%s", message) only
REPORT_ERROR = C.CFUNCTYPE(None, Ctx, C.c_char_p, C.c_char_p)

TfLiteRegistration._fields_ = [
    ("init", INIT), ("free", FREE), ("prepare", PREPARE), ("invoke", INVOKE),
    ("profiling_string", _p), ("builtin_code", C.c_int32), ("custom_name", C.c_char_p),
    ("version", C.c_int), ("registration_external", _p), ("async_kernel", _p),
    ("inplace_operator", C.c_uint64)]

TfLiteContext._fields_ = [
    ("tensors_size", C.c_size_t), ("GetExecutionPlan", GET_EXECUTION_PLAN),
    ("tensors", C.POINTER(TfLiteTensor)), ("impl_", _p), ("ResizeTensor", RESIZE_TENSOR),
    ("ReportError", REPORT_ERROR), ("AddTensors", _p),
    ("GetNodeAndRegistration", GET_NODE_AND_REGISTRATION),
    ("ReplaceNodeSubsetsWithDelegateKernels", REPLACE_NODE_SUBSETS),
    ("recommended_num_threads", C.c_int), ("GetExternalContext", _p),
    ("SetExternalContext", _p), ("allow_fp32_relax_to_fp16", C.c_bool), ("profiler", _p),
    ("AllocatePersistentBuffer", _p), ("AllocateBufferForEval", _p),
    ("RequestScratchBufferInArena", _p), ("GetScratchBuffer", _p),
    ("ResizeTensorExplicit", _p), ("PreviewDelegatePartitioning", _p), ("GetTensor", _p),
    ("GetEvalTensor", _p), ("GetModelMetadata", _p), ("AcquireSubgraphContext", _p),
    ("ReleaseSubgraphContext", _p)]

TfLiteDelegate._fields_ = [
    ("data_", _p), ("Prepare", DELEGATE_PREPARE), ("CopyFromBufferHandle", COPY_HANDLE),
    ("CopyToBufferHandle", COPY_HANDLE), ("FreeBufferHandle", FREE_HANDLE),
    ("flags", C.c_int64), ("opaque_delegate_builder", _p)]


class TfLiteDelegateParams(C.Structure):
    _fields_ = [("delegate", Dlg), ("nodes_to_replace", C.POINTER(TfLiteIntArray)),
                ("input_tensors", C.POINTER(TfLiteIntArray)),
                ("output_tensors", C.POINTER(TfLiteIntArray))]


#: sizeof on LP64, from common.h (DELEGATE.md): asserted by check_sizes
SIZES = {TfLiteTensor: 112, TfLiteNode: 80, TfLiteRegistration: 88, TfLiteContext: 200,
         TfLiteDelegate: 56, TfLiteDelegateParams: 32}


def check_sizes() -> None:
    """Raise LiteclError unless every mirrored struct has common.h's size (LP64 only)."""
    if C.sizeof(C.c_void_p) != 8:
        raise LiteclError("litecl's delegate needs a 64-bit (LP64) process")
    bad = [f"{t.__name__} {C.sizeof(t)} (want {n})" for t, n in SIZES.items() if C.sizeof(t) != n]
    if bad:  # an internal invariant, reported as an error rather than an assert
        raise LiteclError("litecl's TFLite struct mirror is wrong: " + ", ".join(bad))


_INT_P = C.POINTER(C.c_int)
_FLOAT_P = C.POINTER(C.c_float)


def _items(p, ctype) -> tuple:
    """The items after the int size of a TfLiteIntArray* / TfLiteFloatArray* (empty for
    NULL). A pointer slice: an array type made per call cost 11 us for 150 items, this
    2.4 us (measured)."""
    if not p:
        return ()
    q = C.cast(p, _INT_P)
    n = q[0]
    if n <= 0:
        return ()
    if ctype is C.c_int:
        return tuple(q[1:n + 1])
    return tuple(C.cast(C.addressof(q.contents) + 4, _FLOAT_P)[:n])


def int_array(p) -> tuple:
    """The ints of a TfLiteIntArray* (empty for NULL)."""
    return _items(p, C.c_int)


def float_array(p) -> tuple:
    """The floats of a TfLiteFloatArray* (empty for NULL)."""
    return _items(p, C.c_float)


_libc = C.CDLL(None)
_libc.malloc.restype = C.c_void_p
_libc.malloc.argtypes = [C.c_size_t]
_libc.free.argtypes = [C.c_void_p]


def new_int_array(values, owned_by_litert: bool):
    """A TfLiteIntArray holding ``values``. ``owned_by_litert``: malloc'd, for LiteRT to free
    (ResizeTensor takes it over); else a ctypes object the caller keeps alive."""
    n = len(values)
    if owned_by_litert:
        addr = _libc.malloc(4 * (n + 1))
        if not addr:
            raise MemoryError("malloc failed for a TfLiteIntArray")
        arr = (C.c_int * (n + 1)).from_address(addr)
        arr[0] = n
        for i, v in enumerate(values):
            arr[i + 1] = int(v)
        return C.cast(addr, C.POINTER(TfLiteIntArray))
    buf = (C.c_int * (n + 1))(n, *[int(v) for v in values])
    return buf


#: The LiteRT / TensorFlow versions this layout was checked against (a test runs each one
#: present: tests/test_delegate_abi.py). Others are refused by name.
TESTED = {"ai-edge-litert": ("2.1.", "2.2.", "2.3."), "tensorflow": ("2.21.",)}


def _version(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def check_versions(dist: str) -> str:
    """The installed version of ``dist`` ("ai-edge-litert" or "tensorflow"), or a
    LiteclError naming the tested versions when it is not one of them."""
    v = _version(dist)
    if v is None:
        raise LiteclError(f"{dist} is not installed")
    if not v.startswith(TESTED[dist]):
        tested = ", ".join(p + "x" for p in TESTED[dist])
        raise LiteclError(f"{dist} {v} is not a version litecl's delegate was checked against "
                          f"({tested}); its C structs may differ. Install a tested version")
    return v
