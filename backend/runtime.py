"""litecl's one partition runtime: backend/native/litecl_delegate.c, loaded in process.

The exported .so (``litecl export``) and litecl.Delegate run their partitions with the
same C code: kernel init/prepare/invoke, memory in LiteRT's tensors in place or staged,
the run-time former/tail tiling, the waits, event profiling. An export compiles it with
the model's plan.c; in process with native/inprocess_plan.c (``inprocess_plan_c()``: no
exported subgraph, the type tables only) and asks litecl.Delegate's planner (a ctypes callback,
delegate.py ``_Planner``) for a partition's launches whenever its input shapes change.
It reaches OpenCL through the ICD loader pyopencl uses, on pyopencl's context and queue.

The library is compiled when litecl is installed (setup.py, backend/native/build.py) and
loaded with ctypes. Where the installed sources differ from what it was built from (an
edit of the C in a checkout), it is built again with the system's C compiler (``CC``,
else ``cc``) and kept in litecl's on-disk cache (kind "runtime"); without one ``load()``
raises one LiteclError saying so.
"""
from __future__ import annotations

import atexit
import ctypes as C
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading

from . import abi
from .errors import LiteclError

__all__ = ["Expected", "Launch", "Plan", "c_plan", "ProfileCmd", "ProfileSpan", "PLANNER", "REPORTER", "PROFILER", "load",
           "opencl_loader", "type_tables_c", "inprocess_plan_c", "COUNTS"]

#: lcl_partition_counts' order (litecl_delegate.c LCL_IN_PLACE ...)
COUNTS = ("in_place", "copied", "staged", "partition_invokes", "launches", "buffers", "uploads")


class Span(C.Structure):
    _fields_ = [("off", C.c_int32), ("len", C.c_int32)]


class Launch(C.Structure):
    """litecl_plan.h lcl_launch."""
    _fields_ = [("program", C.c_int32), ("tile_bytes", C.c_int32), ("shape_fixed", C.c_int32),
                ("nodes", Span), ("inputs", Span), ("outputs", Span), ("shapes", Span),
                ("fixed_elements", C.c_int32), ("args", Span), ("family", C.c_int32)]


class Plan(C.Structure):
    """litecl_plan.h lcl_inprocess_plan."""
    _fields_ = [("ints", C.POINTER(C.c_int32)), ("launches", C.POINTER(Launch)), ("n_launches", C.c_int32),
                ("programs", C.POINTER(C.c_void_p)), ("names", C.POINTER(C.c_char_p)), ("device", C.c_int32),
                ("in_place", C.c_int32), ("align", C.c_int32)]


class Expected(C.Structure):
    """litecl_plan.h lcl_expected."""
    _fields_ = [("nodes", Span), ("order", Span), ("outputs", Span), ("device", C.c_int32),
                ("preset_key", Span), ("preset", C.POINTER(Plan))]


class ProfileCmd(C.Structure):
    """litecl_plan.h lcl_profile_cmd."""
    _fields_ = [("kind", C.c_int32), ("launch", C.c_int32), ("bytes", C.c_int64), ("host_ns", C.c_int64),
                ("queued", C.c_uint64), ("start", C.c_uint64), ("end", C.c_uint64)]


class ProfileSpan(C.Structure):
    """litecl_plan.h lcl_profile_span."""
    _fields_ = [("kind", C.c_int32), ("pad", C.c_int32), ("t0", C.c_int64), ("t1", C.c_int64)]


#: int planner(int64 partition key, TfLiteContext *, const int *shape_key, int n_key,
#: lcl_inprocess_plan *out): 0 planned; shape_key (an address): per input slot its
#: constness, rank and dims, n_key int32s (-1: none)
PLANNER = C.CFUNCTYPE(C.c_int, C.c_int64, C.POINTER(abi.TfLiteContext), C.c_void_p, C.c_int, C.POINTER(Plan))
#: void reporter(int64 delegate key, TfLiteContext *, const char *message)
REPORTER = C.CFUNCTYPE(None, C.c_int64, C.POINTER(abi.TfLiteContext), C.c_char_p)
#: the partition kernel's init in Python (delegate.py _INIT): the partition into *out
INIT = C.CFUNCTYPE(C.c_int, C.POINTER(abi.TfLiteContext), C.c_void_p, C.c_size_t, C.POINTER(C.c_void_p))
#: void profiler(int64 partition key, cmds, n, spans, n_spans, t0 ns, t1 ns)
PROFILER = C.CFUNCTYPE(None, C.c_int64, C.POINTER(ProfileCmd), C.c_int32, C.POINTER(ProfileSpan), C.c_int32,
                       C.c_int64, C.c_int64)

_LOCK = threading.Lock()
_STATE: dict = {}   # "lib": the loaded library, or "why": why it cannot be


def opencl_loader() -> str | None:
    """The file of the OpenCL ICD loader pyopencl uses: the copy its wheel carries
    (pyopencl/.libs), else the libOpenCL this process has mapped; None if neither."""
    import pyopencl  # noqa: PLC0415  (maps the loader)

    libs = os.path.join(os.path.dirname(pyopencl.__file__), ".libs")
    try:  # a directory listing: reading /proc/self/maps cost ~1 ms a process
        own = sorted(f for f in os.listdir(libs) if f.startswith("libOpenCL"))
    except OSError:
        own = []
    if own:
        return os.path.join(libs, own[0])
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if os.path.basename(path).startswith("libOpenCL"):
                    return path
    except OSError:
        pass
    return None


def type_tables_c() -> list[str]:
    """plan.c's SIZES (bytes per value by TfLiteType, sub-byte types one value per byte as
    the kernels hold them), LCL_TYPE_NAMES (the types' names, for messages) and PACKED
    ((code, bits, signed) of sub-byte types) arrays and their lengths (LCL_N_SIZES,
    LCL_N_PACKED), from ops/dtypes.py's table: C lines."""
    from .ops.dtypes import DTYPES  # noqa: PLC0415

    packed = [x for dt in DTYPES if dt.packed_bits for x in (dt.c_type, dt.packed_bits, int(dt.kind == "int"))]
    sizes = [0] * (max(dt.c_type for dt in DTYPES) + 1)
    names = [""] * len(sizes)
    for dt in DTYPES:
        sizes[dt.c_type] = dt.itemsize
        names[dt.c_type] = dt.name
    return [f"static const int32_t SIZES[{len(sizes)}] = {{{', '.join(map(str, sizes))}}};",
            f"const char *const LCL_TYPE_NAMES[{len(names)}] = {{{', '.join(f'{chr(34)}{n}{chr(34)}' for n in names)}}};",
            f"static const int32_t PACKED[{max(1, len(packed))}] = {{{', '.join(map(str, packed)) or '0'}}};",
            f"#define LCL_N_PACKED {len(packed) // 3}", f"#define LCL_N_SIZES {len(sizes)}"]


def inprocess_plan_c() -> str:
    """The plan.c of the in-process library: no exported subgraph, program or family
    (litecl.Delegate's planner gives each partition's launches), the type tables."""
    return "\n".join([
        "/* litecl's in-process runtime: no exported plan (backend/runtime.py inprocess_plan_c) */",
        '#include "litecl_plan.h"', *type_tables_c(),
        'const char *const LCL_OP_NAMES[1] = {""};',
        "const int32_t LCL_N_OP_NAMES = 0;",
        "const int32_t LCL_INTS[1] = {0};",
        'const lcl_program LCL_PROGRAMS[1] = {{"", "", 0, NULL, 0}};',
        "const lcl_launch LCL_LAUNCHES[1] = {{0, 1, 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0, {0, 0}, -1}};",
        "const lcl_partition LCL_PARTITIONS[1] = {{{0, 0}, 0, 0}};",
        'const lcl_family LCL_FAMILIES[1] = {{"", 0, 0, 1, {0, 0}, 0, {NULL, NULL}, {0, 0}, {NULL, NULL}, 0, 0}};',
        "const lcl_subgraph LCL_SUBGRAPHS[1] = {{{0, 0}, {0, 0}, 0, 0, 0, 0}};",
        "const lcl_plan_info LCL_PLAN = {",
        '    "", "", "", "", "", "", 1, 64, 1, 1, 0, 0, 1, 1, 0, 0,',
        "    PACKED, LCL_N_PACKED, SIZES, LCL_N_SIZES, 0, NULL, 0,",
        '    0, 0, 0, 1, 0.0, 0, "", NULL, 0, NULL',
        "};", ""])


def _native_dir() -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")


def _dlopen(so: bytes):
    """Load shared-object bytes: from an anonymous memory file (memfd_create; no file
    system, so a noexec TMPDIR does not matter), else a private temporary file (mkstemp:
    0600) loaded, then unlinked. Raises OSError (the dynamic linker's message)."""
    first = None
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create("litecl-runtime", getattr(os, "MFD_CLOEXEC", 1))
        except OSError:
            fd = -1
        if fd >= 0:
            try:
                view = memoryview(so)
                while view:
                    view = view[os.write(fd, view):]
                return C.CDLL(f"/proc/self/fd/{fd}", mode=os.RTLD_NOW | os.RTLD_LOCAL)
            except OSError as e:
                first = e  # e.g. no /proc: the temporary file below
            finally:
                os.close(fd)
    fd, path = tempfile.mkstemp(prefix="litecl-runtime-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(so)
        return C.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        raise (first or e) from None
    finally:
        os.unlink(path)


def _built_by(lib, want: str) -> bool:
    f = lib.lcl_runtime_digest
    f.restype = C.c_char_p
    return f().decode() == want


def _declare(lib) -> None:
    vp, i32, i64 = C.c_void_p, C.c_int, C.c_int64
    sig = {
        "lcl_inprocess_new": (vp, [i64, vp, vp, vp, i32, vp]),
        "lcl_inprocess_expect": (None, [vp, vp, vp, vp, i32, i64, vp]),
        "lcl_inprocess_free": (None, [vp]),
        "lcl_inprocess_profile": (None, [vp, i32]),
        "lcl_inprocess_device": (i32, [vp, C.c_char_p, vp, vp, vp] + [i32] * 7 + [C.c_char_p, C.c_char_p, C.c_size_t]),
        "lcl_partition_new": (vp, [vp, vp, i64, C.POINTER(C.c_int), i32, vp, i32, vp, C.c_char_p, i32]),
        "lcl_partition_free": (None, [vp]),
        "lcl_partition_on_preset": (i32, [vp]),
        "lcl_partition_counts": (None, [vp, C.POINTER(C.c_int64)]),
        "lcl_inprocess_sizes": (i64, []),
        "lcl_inprocess_device_spin_us": (C.c_long, [i32]),
        "lcl_inprocess_hold": (i32, [i32, i32]),
        "lcl_context_key": (C.c_long, [vp, C.POINTER(i32), C.c_long]),
        "lcl_flag_nodes": (None, [vp, vp, i32, i32]),
        "lcl_subgraph_place": (i32, [vp, C.POINTER(vp)]),
        "lcl_exit_now": (None, []),
        "lcl_next_event": (i64, []),
        "lcl_new_keys": (i64, [i32]),
        "lcl_recall_bind": (i32, [vp, vp, vp, vp, i32]),
        # by the Delegate's key (never reused): a collected Delegate's is a no-op
        "lcl_recall_put": (i32, [i64, vp, C.c_long, vp, i32, vp, i32, vp, vp, i32, i32, i32, i64, i64]),
        "lcl_recall_forget": (None, [i64]),
        "lcl_recall_own": (None, [i64, i64, i64]),
        "lcl_announce": (i32, [i64, vp, i32]),
        "lcl_recall_next": (i32, [C.POINTER(i64), C.POINTER(vp), i32, C.POINTER(i32), C.c_long]),
        "lcl_recall_logged": (i32, [i64, i64]),
        "lcl_recall_disown": (None, [i64, i64]),
        "lcl_recall_fetched": (None, [i64, i64, i64]),
        "lcl_recall_bind_say": (None, [i64, i32]),
        "lcl_recall_freed": (i64, [i64, vp, i64]),
    }
    for name, (res, args) in sig.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args
    # Python's atexit, before its final collection: no OpenCL work starts after it, and the
    # work in flight (daemon threads) ends before the runtime goes (litecl_delegate.c)
    atexit.register(lib.lcl_exit_now)


def _load():
    """The library installed with litecl (built by setup.py) while it matches the installed
    sources; else the one built on this machine before (litecl's cache, kind "runtime");
    else built now with CC (after an edit of the C sources, or an install that skipped it)."""
    from . import cache  # noqa: PLC0415
    from .native import build  # noqa: PLC0415

    native = _native_dir()
    want = build.digest(native)
    lib = None
    installed = os.path.join(native, build.library(platform.machine()))
    if os.path.exists(installed):
        try:
            lib = C.CDLL(installed, mode=os.RTLD_NOW | os.RTLD_LOCAL)
            if not _built_by(lib, want):
                lib = None
        except OSError:
            lib = None
    key = f"{want}-{platform.machine()}-{sys.platform}"
    if lib is None:
        so = cache.load_blob("runtime", key)
        if so is not None:
            try:
                lib = _dlopen(so)
                if not _built_by(lib, want):
                    lib = None
            except OSError:  # a build that does not load here (another machine's, damaged): again
                lib = None
            if lib is None:
                cache.forget_blob("runtime", key)
    if lib is None:
        cc_text = os.environ.get("CC") or "cc"
        try:
            cc = shlex.split(cc_text)
        except ValueError:
            cc = []
        if not cc or shutil.which(cc[0]) is None:
            raise LiteclError(f"litecl's C runtime (backend/native) is not built for these sources and no C "
                              f"compiler was found ({cc_text!r}): reinstall litecl (pip install .), install "
                              "a C compiler (Debian: apt-get install gcc) or set CC")
        with tempfile.TemporaryDirectory(prefix="litecl-runtime-") as tmp:
            out = os.path.join(tmp, build.library(platform.machine()))
            try:
                build.compile_library(cc, native, out)
                with open(out, "rb") as f:
                    so = f.read()
                lib = _dlopen(so)
            except (OSError, subprocess.SubprocessError) as e:
                raise LiteclError(f"{cc_text} could not build litecl's C runtime ({native}): {e}; where those "
                                  "sources were edited, the compiler's words say what to fix, else set CC to "
                                  "this machine's C compiler") from None
        cache.store_blob("runtime", key, so)  # only a build that loads
    _declare(lib)
    sizes = C.sizeof(Expected) * 10**9 + C.sizeof(Launch) * 1000000 + C.sizeof(Plan) * 1000 + C.sizeof(ProfileCmd)
    if lib.lcl_inprocess_sizes() != sizes:  # an internal invariant
        raise LiteclError(f"litecl's C runtime's structs differ from runtime.py's mirror "
                          f"({lib.lcl_inprocess_sizes()} != {sizes})")
    return lib


def load():
    """The runtime library (ctypes CDLL), built and loaded once per process. Raises
    LiteclError: no C compiler, a build that fails or does not load."""
    lib = _STATE.get("lib")
    if lib is not None:  # no lock once loaded: a collection may ask inside this function's block
        return lib
    with _LOCK:
        if "lib" not in _STATE:
            try:
                _STATE["lib"] = _load()
            except LiteclError as e:
                _STATE["error"] = e
                _STATE["lib"] = None
        if _STATE["lib"] is None:
            raise _STATE["error"]
        return _STATE["lib"]


def c_plan(plan, programs: list, device: int, memory):
    """``plan`` (kernels.PartitionPlan) on runtime device ``device`` with ``memory`` (its
    ``in_place`` and ``align``) as litecl_plan.h's lcl_inprocess_plan: (the Plan struct,
    what it points into, kept alive while the runtime may read it)."""
    ints: list = []

    def span(values) -> Span:
        off = len(ints)
        ints.extend(int(v) for v in values)
        return Span(off, len(values))

    launches = (Launch * max(1, len(plan.launches)))()
    for i, ln in enumerate(plan.launches):
        launches[i] = Launch(i, 32 // ln.tiling.align_num, 0, span(ln.nodes), span(ln.inputs),
                                     span(ln.outputs), span(()), 0, span([v for _, v in ln.args]), -1)
    arr = (C.c_int32 * max(1, len(ints)))(*ints)
    progs = (C.c_void_p * max(1, len(programs)))(*[p.int_ptr for p in programs])
    names = (C.c_char_p * max(1, len(plan.launches)))(*[ln.name.encode() for ln in plan.launches])
    out = Plan(C.cast(arr, C.POINTER(C.c_int32)), C.cast(launches, C.POINTER(Launch)),
                       len(plan.launches), C.cast(progs, C.POINTER(C.c_void_p)),
                       C.cast(names, C.POINTER(C.c_char_p)), device, int(memory.in_place), int(memory.align or 0))
    return out, (arr, launches, progs, names, programs)
