"""Reading .tflite models: flatbuffers + the TFLite schema (ai_edge_litert's generated
module), validated before anything else touches them.

Python's flatbuffers has no verifier: on a corrupt buffer it raises odd exceptions or
returns garbage (REFERENCE_FACTS.md). So the bytes go through litecl's own bounds-checking
verifier (verify.py) before reader.py reads the fields litecl needs, and every index the
rest of litecl follows (tensor, buffer, opcode, subgraph, signature) is bounds-checked
here; failures raise ModelError with a one-line reason. Only models that passed both reach
LiteRT (whose C++ verifier checks them once more). What LiteRT 2.3.0 aborts or crashes on
instead of returning an error is refused here too (``_check_litert_aborts``), and
``litert_abort_reason`` says which ADD/SUB shapes make it abort, for litecl.Interpreter to
check again after a resize (both in litert_aborts.py).
"""
from __future__ import annotations

import bisect
import gc
import hashlib
import json
import math
import os
import pickle
import stat
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from . import cache
from .errors import ModelError
from .litert_aborts import _check_litert_aborts, litert_abort_reason
from .ops.dtypes import BY_TFLITE, TFLITE_TYPE_NAMES, DType
from .reader import read_model
from .verify import VerifyError, verify

__all__ = ["Model", "Subgraph", "Tensor", "Node", "Signature", "load_model", "OP_NAMES",
           "ACTIVATIONS", "model_file", "special_file_kind", "shape_too_big", "litert_abort_reason"]

#: BuiltinOperator code -> name ("CAST"), from the generated schema.
OP_NAMES: dict[int, str] = {
    v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)
}
#: ActivationFunctionType code -> name.
ACTIVATIONS: dict[int, str] = {
    v: k for k, v in vars(schema.ActivationFunctionType).items() if not k.startswith("_") and isinstance(v, int)
}
MAX_MODEL_BYTES = 2**31 - 1  # flatbuffers' 32-bit offsets
SCHEMA_VERSION = 3  # the only one LiteRT accepts
_TENSOR_TYPES = frozenset(v for k, v in vars(schema.TensorType).items()
                          if not k.startswith("_") and isinstance(v, int))
#: Builtin ops whose kernels accept an omitted (-1) input: TFLite's optional operands
#: (biases, LSTM/RNN gates, states and auxiliary inputs, LSH weights). Other kernels use
#: the missing tensor: LiteRT 2.3.0 segfaults preparing a RESHAPE whose shape input is -1
#: (measured), so such nodes are refused. StableHLO and custom ops are not checked.
OPTIONAL_INPUT_OPS = frozenset({
    "FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_3D",
    "CONV_3D_TRANSPOSE", "SVDF", "RNN", "LSTM", "UNIDIRECTIONAL_SEQUENCE_LSTM",
    "BIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN",
    "LSH_PROJECTION",
})


def unpack_bits(blob: bytes, dt: DType, n: int) -> np.ndarray:
    """``n`` sub-byte integers of ``dt`` (int4, uint4, int2) from a constant buffer packed
    as the schema stores them (low bits first), one value per byte (sign-extended for the
    signed types), as LiteRT holds them at run time."""
    b = np.frombuffer(blob, np.uint8).astype(np.int16)
    per, bits = 8 // dt.packed_bits, dt.packed_bits
    v = ((b[:, None] >> (np.arange(per) * bits)) & ((1 << bits) - 1)).reshape(-1)[:n]
    if dt.kind == "int":
        v = np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    return v.astype(dt.np)


@dataclass
class Tensor:
    """One tensor of a subgraph. ``dtype`` is None for types litecl does not compute
    (string, resource, variant, ...); ``type_name`` names it anyway."""

    index: int
    name: str
    type_code: int
    dtype: Optional[DType]
    shape: tuple
    shape_signature: tuple
    buffer: int
    data: Optional[np.ndarray]  # constant contents, already shaped and typed
    scales: np.ndarray
    zero_points: np.ndarray
    quantized_dimension: int
    is_variable: bool
    block_size: int = 0  # blockwise quantization (LiteRT's detail key)
    #: the tensor has a buffer with bytes (LiteRT's read-only tensors), also when litecl
    #: cannot decode it into ``data`` (sparse, STRING), or it has zero elements and no
    #: operator or input gives it a value (nothing to read: ``data`` is then empty)
    constant: bool = False
    #: ``Tensor.sparsity`` is set: the buffer holds the compressed form DENSIFY expands
    sparse: bool = False

    @property
    def type_name(self) -> str:
        return TFLITE_TYPE_NAMES.get(self.type_code, f"TYPE{self.type_code}")

    @property
    def is_constant(self) -> bool:
        return self.constant or self.data is not None

    @property
    def quantized(self) -> bool:
        return self.scales.size > 0


@dataclass
class Node:
    """One operator in a subgraph, in TFLite's execution order."""

    index: int
    opcode: int       # builtin code: max(builtin_code, deprecated_builtin_code)
    op: str           # BuiltinOperator name, or "CUSTOM:<code>"
    inputs: tuple     # tensor indices; -1 marks an omitted optional input
    outputs: tuple
    options: object   # the generated *OptionsT object, or None
    options2: object
    version: int = 1  # the operator code's version (OperatorCode.version)

    @property
    def activation(self) -> str:
        a = getattr(self.options, "fusedActivationFunction", 0) or 0
        return ACTIVATIONS.get(a, f"ACT{a}")

    def subgraph_refs(self) -> list[int]:
        """Indices of subgraphs this node calls (WHILE, IF, CALL_ONCE, StableHLO...): the
        options' ``*SubgraphIndex`` and ``*SubgraphIndices`` fields."""
        out = []
        for opts in (self.options, self.options2):
            if opts is None:
                continue
            fields = _ref_fields(type(opts))
            if fields is None:
                fields = [k for k in vars(opts) if k.endswith(_REF_SUFFIXES)]
            for k in fields:
                v = getattr(opts, k, None)
                if k.endswith("SubgraphIndex"):
                    if isinstance(v, int):
                        out.append(v)
                elif v is not None:
                    out.extend(int(x) for x in v)
        return out


_REF_SUFFIXES = ("SubgraphIndex", "SubgraphIndices")


@lru_cache(maxsize=None)
def _ref_fields(cls) -> tuple | None:
    """The subgraph-reference fields of options class ``cls`` (a generated *OptionsT, whose
    constructor sets every field), or None when ``cls`` cannot be built without arguments."""
    try:
        return tuple(k for k in vars(cls()) if k.endswith(_REF_SUFFIXES))
    except Exception:  # noqa: BLE001 (not a generated options class: read the instance)
        return None


@dataclass
class Subgraph:
    index: int
    name: str
    tensors: list
    nodes: list
    inputs: tuple
    outputs: tuple


@dataclass
class Signature:
    """A SignatureDef: key, the subgraph it runs, and name -> tensor index maps (an index
    may lie outside the subgraph's tensors: LiteRT's runner of that signature fails)."""

    key: str
    subgraph: int
    inputs: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)


@dataclass
class Model:
    """A validated model: ``raw`` (what LiteRT is given), ``subgraphs``, ``signatures``, ``path``."""

    raw: bytes
    subgraphs: list
    signatures: list
    path: Optional[str] = None
    #: constants decoded from ``raw``: (subgraph, tensor, start, length, data), for the cache
    _consts: list = field(default=None, repr=False, compare=False)
    #: litecl.Interpreter's memo: subgraph 0's input shapes -> whether a tensor is that large
    _big: dict = field(default_factory=dict, repr=False, compare=False)
    #: and (root, resolver, ADDs litecl took, input shapes) -> why LiteRT would abort
    _aborts: dict = field(default_factory=dict, repr=False, compare=False)
    #: litecl.Interpreter's: the signature tensors that are no subgraph input or output
    _visible: frozenset = field(default=None, repr=False, compare=False)
    #: litecl.Interpreter's under placement="auto": whether LiteRT takes a delegate that
    #: allows no dynamic tensors (export.delegate_flags; None until asked); subgraph 0's
    #: constant tensors (its set_tensor refuses them)
    _static: Optional[bool] = field(default=None, repr=False, compare=False)
    _readonly: frozenset = field(default=None, repr=False, compare=False)


def shape_too_big(shape, itemsize: int) -> str | None:
    """Why no numpy array can have ``shape`` (elements of ``itemsize`` bytes), or None.
    numpy multiplies the itemsize by every non-zero dimension and refuses a product above
    2**63 - 1 ("array is too big"), even when a 0 dimension leaves no element: so
    [0, 2**31-1, 2**31-1, 2**31-1] is refused although LiteRT allocates it (its Python
    get_tensor then fails the same way, measured). A product of all dimensions above that
    is larger than any memory (LiteRT refuses a size_t overflow)."""
    size = itemsize
    for d in shape:
        size *= d if d else 1
    if size <= 2**63 - 1:
        return None
    if 0 in shape:
        return (f"has no elements but no numpy array can have it: {itemsize} bytes times the "
                "non-zero dimensions exceeds 2**63 - 1 (numpy's limit)")
    return "is larger than any memory"


def special_file_kind(path) -> str | None:
    """What an existing path is when it is not a regular file or a directory ("a FIFO",
    "a character device", ...), else None (also for a missing path). Reading one would
    block (a FIFO waits for a writer) or never end (/dev/zero); LiteRT refuses them at
    once ("mmap of size 0")."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    for test, kind in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None


def model_file(path) -> Path:
    """``path`` (str, bytes or os.PathLike) as the Path of a model file to read. Raises
    ModelError, in the words every command uses, where it is missing, a directory, or a
    FIFO, device or socket (a FIFO blocks open() until a writer comes, /dev/zero never
    ends)."""
    try:
        p = Path(os.fsdecode(path))  # str, bytes or os.PathLike
    except TypeError:
        raise ModelError(f"model_path must be a str or path-like, got {type(path).__name__}") from None
    try:
        found = p.exists()
    except OSError as e:  # a name over the file system's limit (ENAMETOOLONG), ...
        raise ModelError(f"cannot read model path {str(p)[:80]}{'...' if len(str(p)) > 80 else ''}: "
                         f"{e.strerror or e}") from None
    if not found:
        if p.is_symlink():  # exists() follows it: a loop, or a target that is gone
            raise ModelError(f"model path {p} is a symbolic link that leads to no file (a loop, or its target "
                             f"{os.readlink(p)} is missing)")
        raise ModelError(f"model file not found: {p}")
    if p.is_dir():
        raise ModelError(f"model path is a directory, expected a .tflite file: {p}")
    if os.fsdecode(path).endswith(("/", os.sep)):  # Path drops it; the OS says ENOTDIR
        raise ModelError(f"model path {os.fsdecode(path)} ends with a slash, but {p} is a file, not a folder")
    kind = special_file_kind(p)
    if kind:
        raise ModelError(f"model path {p} is {kind}, not a regular file; expected a .tflite file")
    return p


def _read(path) -> bytes:
    p = model_file(path)
    try:
        with open(p, "rb") as f:
            before = os.fstat(f.fileno())
            if before.st_size > MAX_MODEL_BYTES:
                raise ModelError(f"model file {p} is {before.st_size} bytes; at most {MAX_MODEL_BYTES} supported")
            # no more than the size it had when opened; a file whose size reads 0 may still
            # hold bytes (procfs): its first 64 KiB tell what it is (no model, or too short)
            raw = f.read(before.st_size if before.st_size else 1 << 16)
            after = os.fstat(f.fileno())
    except OSError as e:
        raise ModelError(f"cannot read model file {p}: {e.strerror or e}") from None
    return raw, _identity(p, before, after, len(raw))


#: Models whose checks take less than this (seconds) get no cache entry: reading an
#: entry costs ~0.1 ms plus ~3 us a tensor, and tests make thousands of tiny models.
MODEL_CACHE_MIN_SECONDS = 0.002

#: A file changed this recently (seconds) is not cached: file systems stamp times at a
#: coarse tick, so a write racing the read could leave the times unchanged (git's "racily
#: clean" rule).
RACY_SECONDS = 2.0


def _identity(p: Path, before, after, nread: int) -> Optional[str]:
    """What identifies the bytes just read from ``p``, or None when they cannot be trusted
    to stay what was read: device, inode, size, and the modification and status-change
    times in ns, the same before and after the read. The status-change time (ctime) is
    set by the kernel on a write() and cannot be set back by a user; writes through a
    shared mapping to pages already dirty move no time, so _cached also checks the bytes
    (_structure_digest)."""
    keys = [(x.st_dev, x.st_ino, x.st_size, x.st_mtime_ns, x.st_ctime_ns) for x in (before, after)]
    if keys[0] != keys[1] or nread != before.st_size:
        return None
    newest = max(after.st_mtime_ns, after.st_ctime_ns) / 1e9
    if time.time() - newest < RACY_SECONDS:
        return None
    return f"{os.path.realpath(p)}|{'|'.join(map(str, keys[0]))}"


@lru_cache(maxsize=None)
def _loader_version() -> str:
    """What load_model's result depends on besides the file: the code of model.py,
    reader.py, verify.py and the dtype table, and the versions of the schema, numpy and
    Python (the cache entries are pickles)."""
    import sys  # noqa: PLC0415

    import ai_edge_litert  # noqa: PLC0415

    from .ops import dtypes  # noqa: PLC0415
    from . import reader as _r, verify as _v  # noqa: PLC0415

    h = hashlib.sha256()
    for mod in (sys.modules[__name__], _r, _v, dtypes):
        h.update(Path(mod.__file__).read_bytes())
    h.update(f"{getattr(ai_edge_litert, '__version__', '?')}|{np.__version__}|{sys.version}".encode())
    return h.hexdigest()


def _regions(consts) -> list:
    """The byte ranges [start, end) of ``raw`` that decoded constants come from, sorted and
    merged (two tensors may share a buffer)."""
    out: list = []
    for start, end in sorted((c[2], c[2] + c[3]) for c in consts):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def _structure_digest(raw: bytes, regions: list) -> str:
    """SHA-256 of ``raw`` leaving out ``regions`` (the decoded constants, which every load
    reads again), and of the regions' bounds: the bytes the cached tables were parsed from
    must hash the same. Costs ~0.7 ms per MB hashed, so weights, the bulk of a model, are
    not hashed."""
    h = hashlib.sha256(len(raw).to_bytes(8, "little"))
    mv, pos = memoryview(raw), 0
    for start, end in regions:
        if not pos <= start <= end <= len(raw):
            return ""
        h.update(mv[pos:start])
        h.update(start.to_bytes(8, "little") + end.to_bytes(8, "little"))
        pos = end
    h.update(mv[pos:])
    return h.hexdigest()


def _cached(raw: bytes, key: str, where: str) -> Optional[Model]:
    """The model load_model validated earlier for ``key``, its constants decoded again
    from ``raw``, or None: absent; for another key; the bytes outside the constants not
    those the entry was parsed from (a file rewritten through a shared mapping keeps its
    times: the times are not trusted alone); or an entry this code cannot read. The
    entry's JSON header (key, regions, digest) is checked before its pickle is read."""
    blob = cache.load_blob("models", f"{key}|{_loader_version()}")
    if blob is None:
        return None
    try:
        n = int.from_bytes(blob[:4], "little")
        head = json.loads(blob[4:4 + n].decode("utf-8", "surrogateescape"))
        regions = head["regions"]
        if head["key"] != key or _structure_digest(raw, regions) != head["digest"]:
            return None
        gc_was_on = gc.isenabled()
        gc.disable()  # its ~60,000 objects set off collections: dp_net 12-40 -> 9.6 ms
        try:
            subgraphs, signatures, consts, counts, scales, zero_points = pickle.loads(blob[4 + n:])
        finally:
            if gc_was_on:
                gc.enable()
        tensors = [t for sg in subgraphs for t in sg.tensors]
        if len(counts) != 2 * len(tensors):
            return None
        # each tensor's slice of one array: numpy's unpickling took 16 us an array, one
        # np.array a tensor 4.5 us (MoveNet, 666 arrays: 3 ms), a slice 0.2 us
        scales = np.frombuffer(scales, np.float32).copy()
        zero_points = np.frombuffer(zero_points, np.int64).copy()
        s = z = 0
        for i, t in enumerate(tensors):
            ns, nz = counts[2 * i], counts[2 * i + 1]
            t.scales, t.zero_points = scales[s:s + ns], zero_points[z:z + nz]
            s, z = s + ns, z + nz
        if s != scales.size or z != zero_points.size:
            return None
        starts = [r[0] for r in regions]
        for si, ti, start, length in consts:
            k = bisect.bisect_right(starts, start) - 1
            if k < 0 or start + length > regions[k][1]:  # outside what the digest left out
                return None
            t = subgraphs[si].tensors[ti]
            t.data = _decode_constant(memoryview(raw)[start:start + length], t.type_code, t.dtype,
                                      t.shape, t.sparse, where, f"subgraph {si} tensor {ti} ({t.name!r})")
    except Exception:  # an entry from other code, damaged beyond its checksum, or constants
        return None    # the file now holds that fail their checks: the full load says why
    return Model(raw, subgraphs, signatures, where if where != "model_content" else None)


def _store(model: Model, key: str) -> None:
    """Keep ``model``'s parsed form for _cached: a JSON header (the key, the constants'
    byte ranges, _structure_digest of the rest) and a pickle of its subgraphs and
    signatures, each constant decoded from ``raw`` replaced by where it lies there, and
    the tensors' quantization scales and zero points as two arrays (with their counts)."""
    consts, held = [], []
    for si, ti, start, length, data in model._consts or ():
        t = model.subgraphs[si].tensors[ti]
        if t.data is data:  # still the value decoded from raw
            consts.append((si, ti, start, length))
            held.append((t, "data", data))
            t.data = None
    counts, scales, zero_points = [], [], []
    for sg in model.subgraphs:
        for t in sg.tensors:
            held += [(t, "scales", t.scales), (t, "zero_points", t.zero_points)]
            counts += [t.scales.size, t.zero_points.size]
            scales.append(np.asarray(t.scales, np.float32).ravel())
            zero_points.append(np.asarray(t.zero_points, np.int64).ravel())
            t.scales = t.zero_points = None
    try:  # every tensor's quantization as one array of scales and one of zero points
        body = pickle.dumps((model.subgraphs, model.signatures, consts, counts,
                             np.concatenate(scales or [np.zeros(0, np.float32)]).tobytes(),
                             np.concatenate(zero_points or [np.zeros(0, np.int64)]).tobytes()),
                            protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # an option object that does not pickle: no entry
        body = None
    finally:
        for t, attr, value in held:
            setattr(t, attr, value)
    if body is None:
        return
    regions = _regions(consts)
    head = json.dumps({"key": key, "regions": regions,
                       "digest": _structure_digest(model.raw, regions)}).encode("utf-8", "surrogateescape")
    cache.store_blob("models", f"{key}|{_loader_version()}", len(head).to_bytes(4, "little") + head + body)


def load_model(model_path=None, model_content: bytes | None = None) -> Model:
    """Read and validate a .tflite model from a path or from bytes.

    Raises ModelError with a one-line reason for a missing, unreadable, empty, truncated,
    non-TFLite or structurally invalid model.

    The checks and parsing (verify.verify, reader.read_model, _validate: 2-250 ms a real
    model, measured on a 2-core VM) run once per model: a model that passed them is kept in
    litecl's cache (cache.py, kind "models"; constants not copied, only where they lie in
    the file) and the next load takes the parsed form back. The key is, for a path, the
    file's identity: real path, device, inode, size, modification and status-change times
    (a file changed in the last RACY_SECONDS is not cached); for bytes, their SHA-256.
    Keys also carry the loader's code and versions (_loader_version). An entry is used only
    when it names this key and the file's bytes outside its constants hash as they did
    (_structure_digest: the tables it was parsed from), and only when no other user could
    have written it (cache._trusted: entries are pickles). Models checked in under
    MODEL_CACHE_MIN_SECONDS are not cached.
    """
    if (model_path is None) == (model_content is None):
        raise ModelError("give exactly one of model_path and model_content")
    if model_path is not None:
        raw, key = _read(model_path)
        where = os.fsdecode(model_path) if isinstance(model_path, bytes) else str(model_path)
    else:
        if not isinstance(model_content, (bytes, bytearray, memoryview)):
            raise ModelError(f"model_content must be bytes-like (bytes, bytearray, memoryview), got "
                             f"{type(model_content).__name__}")
        raw = bytes(model_content)
        where = "model_content"
        key = "content|" + hashlib.sha256(raw).hexdigest()  # 0.7 ms a MB (measured)
    return load_read(raw, key, where)


def load_read(raw: bytes, key, where: str) -> Model:
    """load_model of bytes already read: ``raw`` with its cache ``key`` (``_read``'s
    identity of a file, or None: not cached) and ``where`` naming it in errors
    (litecl.Interpreter reads a file once for its own memo and passes it on). Raises
    ModelError as load_model."""
    if len(raw) == 0:
        raise ModelError(f"{where}: {'empty' if where == 'model_content' else 'empty file'}, expected a .tflite model")
    if len(raw) < 16:
        raise ModelError(f"{where}: {len(raw)} bytes is too short for a .tflite model")
    if raw[4:8] != b"TFL3":
        raise ModelError(f"{where}: not a TFLite model (file identifier {raw[4:8]!r}, expected b'TFL3')")
    root = int.from_bytes(raw[0:4], "little")
    if root < 8 or root + 4 > len(raw):
        raise ModelError(f"{where}: corrupt model (root table offset {root} outside the {len(raw)}-byte file)")
    if key is not None and cache.cache_root() is not None:
        model = _cached(raw, key, where)
        if model is not None:
            return model
    t0 = time.perf_counter()
    model = _load(raw, where)
    if (key is not None and cache.cache_root() is not None
            and time.perf_counter() - t0 >= MODEL_CACHE_MIN_SECONDS):
        _store(model, key)
    return model


def _load(raw: bytes, where: str) -> Model:
    """load_model's checks and parsing of ``raw``, without the cache."""
    try:
        verify(raw)  # every offset, vector and string in bounds before the object API walks them
    except VerifyError as e:
        raise ModelError(f"{where}: corrupt model ({e})") from None
    try:
        view = read_model(raw)  # only the fields validated below
    except ModelError:
        raise
    except Exception as e:  # struct.error, IndexError, ... on what the verifier let through
        raise ModelError(f"{where}: corrupt model ({type(e).__name__}: {_short(e)})") from None
    try:
        return _validate(raw, view, where)
    except ModelError:
        raise
    except Exception as e:
        raise ModelError(f"{where}: corrupt model ({type(e).__name__}: {_short(e)})") from None


def _short(e: Exception) -> str:
    s = str(e).splitlines()[0] if str(e) else ""
    return s[:160]


def _buffer_bytes(raw: bytes, buf, where: str, bi: int):
    """Buffer ``bi``'s bytes: a memoryview of ``raw`` (no copy), bytes for a ModelT's
    ndarray, or None."""
    if buf is None:
        return None
    off, size = int(buf.offset or 0), int(buf.size or 0)
    if off > 1:  # data stored after the flatbuffer (models over 2 GB)
        if off + size > len(raw):
            raise ModelError(f"{where}: buffer {bi} points at bytes {off}..{off + size} past the end of the file")
        return memoryview(raw)[off:off + size]
    if buf.data is None:
        return None
    data = buf.data
    return data.tobytes() if isinstance(data, np.ndarray) else data


def _offset_in(raw: bytes, blob) -> Optional[int]:
    """Where memoryview ``blob`` starts inside ``raw``, or None when it is not a view of it."""
    if not isinstance(blob, memoryview) or blob.obj is not raw or not blob.nbytes:
        return None
    return np.frombuffer(blob, np.uint8).ctypes.data - np.frombuffer(raw, np.uint8).ctypes.data


def _strings(blob: bytes, shape: tuple, where: str, what: str) -> np.ndarray:
    """A STRING constant's value as LiteRT's get_tensor returns it: an object array of
    bytes of ``shape``. TFLite's layout (tflite/string_util.h): int32 count N, N + 1
    int32 offsets from the buffer's start, then the bytes."""
    n = math.prod(shape)
    if len(blob) < 4 * (n + 2) or int.from_bytes(blob[:4], "little", signed=True) != n:
        raise ModelError(f"{where}: {what} is a STRING constant whose buffer does not hold "
                         f"{n} strings")
    offs = np.frombuffer(blob, "<i4", n + 1, 4).astype(np.int64)
    if np.any(np.diff(offs) < 0) or offs[0] < 4 * (n + 2) or offs[-1] > len(blob):
        raise ModelError(f"{where}: {what} is a STRING constant with offsets outside its buffer")
    out = np.empty(n, dtype=object)
    for i in range(n):
        out[i] = bytes(blob[offs[i]:offs[i + 1]])
    out.flags.writeable = False  # read-only like every other constant
    return out.reshape(shape)


def _text(b, where: str, what: str) -> str:
    """A flatbuffer string as str, up to its first NUL byte: LiteRT reads names as C
    strings (a tensor named b"in\0put" is "in" in its details). The schema's strings are
    UTF-8, and LiteRT's Interpreter fails to construct where a signature key or signature
    tensor name is not (UnicodeDecodeError from get_signature_list, measured with 2.3.0):
    ModelError."""
    if not isinstance(b, bytes):
        return (b or "").split("\0", 1)[0]
    try:
        return b.split(b"\0", 1)[0].decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelError(f"{where}: {what} is not UTF-8 ({_short(e)})") from None


def _tensor_name(b) -> str:
    """A tensor's name as _text reads it, bytes that are not UTF-8 shown as U+FFFD (as the
    delegate's views of LiteRT's tensors, delegate._tensor_view). LiteRT 2.3.0 builds and
    runs such a model; only its Python details of that tensor fail (get_input_details and
    get_output_details raise UnicodeDecodeError, get_tensor_details leaves it out), and
    litecl.Interpreter's are LiteRT's (tests/test_hostile.py)."""
    if not isinstance(b, bytes):
        return (b or "").split("\0", 1)[0]
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def _check_sources(sub: "Subgraph", has_value: set, where: str) -> None:
    """Every tensor an operator reads, and every output, must get a value: be an input, a
    constant, a variable, empty, or the output of an operator listed before it (LiteRT
    runs operators in the order listed). No operator may write a constant. (LiteRT would
    read uninitialised memory, or write into the model's buffers; litecl refuses the
    model.)"""
    ok = has_value | set(sub.inputs) | {t for n in sub.nodes for t in n.outputs}
    produced_by = {}
    for n in sub.nodes:
        for t in n.outputs:
            produced_by.setdefault(t, n.index)
    for n in sub.nodes:
        for t in n.outputs:
            if t >= 0 and sub.tensors[t].is_constant:
                raise ModelError(f"{where}: subgraph {sub.index} operator {n.index} ({n.op}) writes "
                                 f"tensor {t} ({sub.tensors[t].name!r}), a constant")
        for t in n.inputs:
            if t >= 0 and t not in has_value and t not in sub.inputs and produced_by.get(t, -1) >= n.index:
                raise ModelError(
                    f"{where}: subgraph {sub.index} operator {n.index} ({n.op}) reads tensor {t} "
                    f"({sub.tensors[t].name!r}) before operator {produced_by[t]} writes it "
                    "(LiteRT runs operators in the order listed)")
    for n in sub.nodes:
        if -1 in n.inputs and n.op not in OPTIONAL_INPUT_OPS \
                and not n.op.startswith(("CUSTOM", "STABLEHLO_")):
            raise ModelError(f"{where}: subgraph {sub.index} operator {n.index} ({n.op}) omits input "
                             f"{n.inputs.index(-1)} (-1), which {n.op} does not allow")
        for t in n.inputs:
            if t >= 0 and t not in ok:
                raise ModelError(
                    f"{where}: subgraph {sub.index} operator {n.index} ({n.op}) reads tensor {t} "
                    f"({sub.tensors[t].name!r}), which is no input, constant, variable or "
                    "operator output")
    for t in sub.outputs:
        if t not in ok:
            raise ModelError(f"{where}: subgraph {sub.index} output tensor {t} "
                             f"({sub.tensors[t].name!r}) is no input, constant, variable or "
                             "operator output")


#: The options table LiteRT's parser reads for the operators litecl lowers
#: (tflite/core/api/flatbuffer_conversions.cc: ``op->builtin_options_as_AddOptions()``
#: is null when the union holds another table, and the defaults apply).
_OPTIONS_OF = {"ADD": schema.AddOptionsT, "CAST": schema.CastOptionsT}


def _zero_element_constants(sub: "Subgraph") -> None:
    """A zero-element tensor that no operator writes and that is no subgraph input holds
    its (empty) value from the start, like a constant: e.g. the int32[0] shape operand of
    a RESHAPE to a scalar, whose buffer has no bytes (LiteRT gives it an empty arena
    allocation)."""
    written = set(sub.inputs) | {t for n in sub.nodes for t in n.outputs}
    for t in sub.tensors:
        if (t.data is None and not t.constant and 0 in t.shape and t.index not in written
                and t.dtype is not None and not t.is_variable):
            t.data = np.empty(t.shape, t.dtype.np)
            t.constant = True



def _check_quantization(n_scales: int, n_zero_points: int, qd: int, shape: tuple, what: str) -> None:
    """LiteRT's checks of a tensor's quantization (InterpreterBuilder::ParseQuantization,
    refused when the Interpreter is built, measured with LiteRT 2.3.0): when it has
    scales, quantized_dimension in [0, rank) (any value >= 0 for a scalar), as many zero
    points as scales, and one scale (per tensor) or shape[quantized_dimension] of them
    (per axis)."""
    if qd < 0 or (shape and qd >= len(shape)):
        raise ModelError(f"{what}: quantized_dimension {qd} outside [0, {len(shape)}) for shape "
                         f"{list(shape)}")
    if n_zero_points != n_scales:
        raise ModelError(f"{what}: quantization has {n_scales} scale(s) and {n_zero_points} zero "
                         "point(s); LiteRT needs one zero point per scale")
    if n_scales != 1 and (not shape or n_scales != shape[qd]):
        raise ModelError(f"{what}: {n_scales} quantization scales; expected 1 (per tensor) or "
                         f"shape[{qd}] = {shape[qd] if shape else 'none, a scalar'} (per axis)")


def _check_call_cycles(subgraphs: list, where: str) -> None:
    """Refuse a cycle in the call graph of subgraphs (a WHILE whose cond or body is its
    own subgraph, an IF branch that calls back into its caller, ...): LiteRT 2.3.0 recurses
    preparing such a model until the stack overflows (SIGSEGV in AllocateTensors,
    measured, tests/test_hostile.py); TFLite has no recursion. The error names the cycle
    as subgraph -> subgraph (operator)."""
    calls = {s.index: [(n, ref) for n in s.nodes for ref in n.subgraph_refs()] for s in subgraphs}
    state = {}  # subgraph -> 1 while on the DFS path, 2 when done
    for root in calls:
        if state.get(root):
            continue
        path = [(root, iter(calls[root]), None)]
        state[root] = 1
        while path:
            si, it, _ = path[-1]
            nxt = next(it, None)
            if nxt is None:
                state[si] = 2
                path.pop()
                continue
            node, ref = nxt
            if state.get(ref) == 1:
                start = [p[0] for p in path].index(ref)
                steps = [f"subgraph {p[0]}" for p in path[start:]]
                ops = [p[2] for p in path[start + 1:]] + [node]
                shown = " -> ".join(f"{a} ({o.op} operator {o.index})" for a, o in zip(steps, ops))
                raise ModelError(f"{where}: subgraphs call each other in a cycle: {shown} -> "
                                 f"subgraph {ref} (LiteRT has no recursion and overflows its "
                                 "stack preparing it)")
            if not state.get(ref):
                state[ref] = 1
                path.append((ref, iter(calls[ref]), node))


def _validate(raw: bytes, obj, where: str) -> Model:
    """Check ``obj`` (reader.read_model's view of ``raw``, or a ModelT) and parse it."""
    bufs = obj.buffers or []
    codes = obj.operatorCodes or []
    sgs = obj.subgraphs or []
    if obj.version != SCHEMA_VERSION:
        raise ModelError(f"{where}: schema version {obj.version}, expected {SCHEMA_VERSION}")
    if not sgs:
        raise ModelError(f"{where}: model has no subgraph")
    for ci, oc in enumerate(codes):  # LiteRT registers every code, used or not
        if int(oc.version) < 1:
            code = max(int(oc.builtinCode), int(oc.deprecatedBuiltinCode))
            raise ModelError(f"{where}: operator code {ci} ({OP_NAMES.get(code, code)}) has version "
                             f"{oc.version}; versions start at 1 (LiteRT: \"Didn't find op ... "
                             "Registration failed\")")
    subgraphs = []
    consts: list = []  # (subgraph, tensor, start in raw, length, data) for the model cache
    for si, sg in enumerate(sgs):
        if sg.tensors is None:  # an empty vector is fine (LiteRT runs such a subgraph)
            raise ModelError(f"{where}: subgraph {si} has no tensors field (LiteRT: \"Did not get "
                             f"tensors in subgraph {si}\")")
        tensors = []
        has_value: set = set()  # constants, variables and empty tensors need no producer
        tlist = sg.tensors or []
        nt = len(tlist)
        for ti, t in enumerate(tlist):
            shape = tuple(int(x) for x in (t.shape if t.shape is not None else ()))
            sig = tuple(int(x) for x in t.shapeSignature) if t.shapeSignature is not None else shape
            if any(d < 0 for d in shape):
                raise ModelError(f"{where}: subgraph {si} tensor {ti} has a negative dimension {list(shape)}")
            if int(t.type) not in _TENSOR_TYPES:
                raise ModelError(f"{where}: subgraph {si} tensor {ti} has unknown type {t.type}")
            why = shape_too_big(shape, BY_TFLITE[int(t.type)].itemsize if int(t.type) in BY_TFLITE else 1)
            if why:
                raise ModelError(f"{where}: subgraph {si} tensor {ti} shape {list(shape)} {why}")
            if len(sig) != len(shape) or any(s != -1 and s != d for s, d in zip(sig, shape)):
                sig = shape if len(sig) != len(shape) else sig
            if not 0 <= t.buffer < max(len(bufs), 1):
                raise ModelError(f"{where}: subgraph {si} tensor {ti} names buffer {t.buffer}, model has {len(bufs)}")
            dt = BY_TFLITE.get(int(t.type))
            data = None
            blob = _buffer_bytes(raw, bufs[t.buffer], where, t.buffer) if bufs and t.buffer > 0 else None
            name = _tensor_name(t.name)
            sparse = t.sparsity is not None
            if blob:
                data = _decode_constant(blob, int(t.type), dt, shape, sparse, where,
                                        f"subgraph {si} tensor {ti} ({name!r})")
                start = _offset_in(raw, blob) if data is not None else None
                if start is not None:
                    consts.append((si, ti, start, len(blob), data))
            q = t.quantization
            scales = np.asarray(q.scale if q is not None and q.scale is not None else [], np.float32)
            zps = np.asarray(q.zeroPoint if q is not None and q.zeroPoint is not None else [], np.int64)
            qd = int(q.quantizedDimension) if q is not None else 0
            bs = int(getattr(getattr(q, "details", None), "blockSize", 0) or 0) if q is not None else 0
            if scales.size:
                _check_quantization(scales.size, zps.size, qd, shape,
                                    f"{where}: subgraph {si} tensor {ti} ({name!r})")
            if blob or t.isVariable or 0 in shape:
                has_value.add(ti)
            tensors.append(Tensor(ti, name, int(t.type), dt, shape, sig, int(t.buffer), data,
                                  scales, zps, qd, bool(t.isVariable), bs,
                                  constant=bool(blob), sparse=sparse and bool(blob)))

        def check_idx(lst, what, allow_optional=False):
            out = tuple(int(x) for x in (lst if lst is not None else ()))
            for x in out:
                if not (0 <= x < nt or (allow_optional and x == -1)):
                    raise ModelError(f"{where}: subgraph {si} {what} names tensor {x}, subgraph has {nt}")
            return out

        nodes = []
        for ni, op in enumerate(sg.operators or []):
            if not 0 <= op.opcodeIndex < len(codes):
                raise ModelError(f"{where}: subgraph {si} operator {ni} has opcode index {op.opcodeIndex}, model has {len(codes)}")
            oc = codes[op.opcodeIndex]
            code = max(int(oc.builtinCode), int(oc.deprecatedBuiltinCode))
            if code not in OP_NAMES:
                raise ModelError(f"{where}: subgraph {si} operator {ni} has unknown builtin code {code}")
            name = OP_NAMES[code]
            if name == "CUSTOM":
                cc = oc.customCode.decode("utf-8", "replace") if isinstance(oc.customCode, bytes) else oc.customCode
                name = f"CUSTOM:{cc}"
            options = op.builtinOptions
            expected = _OPTIONS_OF.get(name)
            if expected is not None and not isinstance(options, expected):
                options = None  # LiteRT: builtin_options_as_<T>() is null, defaults apply
            builtin = not name.startswith(("CUSTOM", "STABLEHLO_"))
            node = Node(ni, code, name, check_idx(op.inputs, f"operator {ni} input", True),
                        check_idx(op.outputs, f"operator {ni} output", not builtin),
                        options, getattr(op, "builtinOptions2", None), int(oc.version))
            both = sorted(set(node.inputs) & set(node.outputs) - {-1})
            if both:  # LiteRT: "Tensor 0 is both input 0 and output 0" (AllocateTensors fails)
                raise ModelError(f"{where}: subgraph {si} operator {ni} ({name}) has tensor {both[0]} "
                                 "as both an input and an output")
            for ref in node.subgraph_refs():
                if not 0 <= ref < len(sgs):
                    raise ModelError(f"{where}: subgraph {si} operator {ni} ({name}) calls subgraph {ref}, model has {len(sgs)}")
            nodes.append(node)
        sname = sg.name.decode("utf-8", "replace") if isinstance(sg.name, bytes) else (sg.name or "")
        sub = Subgraph(si, sname, tensors, nodes, check_idx(sg.inputs, "input"),
                       check_idx(sg.outputs, "output"))
        _zero_element_constants(sub)
        _check_sources(sub, has_value, where)
        _check_litert_aborts(sub, where)
        for t in sub.inputs:
            if sub.tensors[t].is_constant:  # LiteRT segfaults in set_tensor on these
                raise ModelError(f"{where}: subgraph {si} input tensor {t} ({sub.tensors[t].name!r}) "
                                 "also holds constant data")
        subgraphs.append(sub)
    _check_call_cycles(subgraphs, where)
    signatures = []
    for sd in obj.signatureDefs or []:
        key = _text(sd.signatureKey, where, "signature key")
        if not 0 <= sd.subgraphIndex < len(subgraphs):
            raise ModelError(f"{where}: signature {key!r} runs subgraph {sd.subgraphIndex}, model has {len(subgraphs)}")
        sig = Signature(key, int(sd.subgraphIndex))
        for lst, dst in ((sd.inputs, sig.inputs), (sd.outputs, sig.outputs)):
            for tm in lst or []:
                # an index out of range is kept: LiteRT 2.3.0 runs the model, and only this
                # signature's runner fails (its details: ValueError "Invalid tensor index")
                dst[_text(tm.name, where, f"signature {key!r} tensor name")] = int(tm.tensorIndex)
        signatures.append(sig)
    model = Model(raw, subgraphs, signatures, where if where != "model_content" else None)
    model._consts = consts
    return model


def _decode_constant(blob, type_code: int, dt, shape: tuple, sparse: bool, where: str, what: str):
    """A constant tensor's value from its buffer's bytes, as LiteRT's get_tensor returns
    it (read-only, a view of ``blob`` where the type is not packed), or None for what
    litecl leaves to LiteRT (sparse, compressed constants and types litecl does not
    compute). A longer buffer is fine (LiteRT reads its first bytes); a
    shorter one raises ModelError."""
    if type_code == schema.TensorType.STRING and not sparse:
        return _strings(blob, shape, where, what)
    if dt is None or sparse:
        return None
    n = math.prod(shape)
    need = -(-n * dt.packed_bits // 8) if dt.packed_bits else n * dt.itemsize
    if len(blob) < need:
        raise ModelError(f"{where}: {what} holds {len(blob)} bytes, expected {need} for "
                         f"{dt.name}{list(shape)}")
    if dt.packed_bits:
        out = unpack_bits(blob[:need], dt, n).reshape(shape)
        out.flags.writeable = False  # read-only like every other constant
        return out
    # a read-only view of the model's bytes, no copy (BirdNET FP32, 50 MB of weights:
    # 53 ms of copies per load, measured); it keeps those bytes alive
    return np.frombuffer(blob[:need], dtype=dt.np).reshape(shape)
