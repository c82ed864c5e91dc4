"""The partition runner: litecl.Delegate's partition invoke executed in C
(backend/native/runner.c), so that an invoke whose bindings have not changed runs
without entering Python.

delegate.py writes each partition invoke as a list of commands (``Commands``: host
copies, buffer writes, kernel launches, buffer copies and reads over pyopencl's handles)
and checks (the data pointer and byte size of every tensor it bound). runner.c's
``lcl_invoke`` is then the partition kernel's TfLiteRegistration.invoke: while the
checks hold it runs the list and waits (polling, then clFinish), with no Python and the
GIL released; when LiteRT has moved a tensor (allocate_tensors, a resize) it calls
delegate.py's invoke, which binds again and writes a new list.

Why (issue 22, PoCL on a 2-core VM, placement all, the 8 models with the most
partitions): the Python invoke cost a median 3.42 round-trip floors per partition over
LiteRT alone, the native delegate (the same commands from C) 0.94; a ctypes version of
the Python path saved only 10-18 us of the 40-200 us (docs/PERFORMANCE.md).

The C file is compiled once per machine with the system's C compiler (``CC``, else
``cc``) and kept in litecl's on-disk cache (kind "runner", keyed by its source and the
machine); a process loads it from there. Without a compiler,
with ``LITECL_NO_NATIVE_INVOKE`` set (errors.env_flag), or when the OpenCL loader
pyopencl uses cannot be found, delegate.py runs the same lists through pyopencl
(``run_in_python``): the same results, more time per partition. ``status()`` says which
and why.
"""
from __future__ import annotations

import ctypes as C
import hashlib
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

from . import abi

__all__ = ["Cmd", "Check", "Part", "Mutex", "OPS", "runner", "status"]

#: runner.c's command codes
PRE, WRITE, KERNEL, COPY, READ, POST = 1, 2, 3, 4, 5, 6
OPS = {"pre": PRE, "write": WRITE, "kernel": KERNEL, "copy": COPY, "read": READ, "post": POST}


class Cmd(C.Structure):
    """runner.c lcl_cmd."""
    _fields_ = [("op", C.c_int32), ("once", C.c_int32), ("a", C.c_void_p), ("b", C.c_void_p),
                ("bytes", C.c_size_t), ("global_", C.c_size_t), ("local", C.c_size_t)]


class Check(C.Structure):
    """runner.c lcl_check."""
    _fields_ = [("tensor", C.c_int32), ("pad", C.c_int32), ("data", C.c_void_p), ("bytes", C.c_size_t)]


class Part(C.Structure):
    """runner.c lcl_part: one partition kernel's list (its address is the kernel's
    TfLiteNode.user_data)."""
    _fields_ = [("armed", C.c_int32), ("ran", C.c_int32), ("direct", C.c_int64), ("launches", C.c_int64),
                ("n_checks", C.c_int32), ("n_cmds", C.c_int32),
                ("checks", C.POINTER(Check)), ("cmds", C.POINTER(Cmd)), ("queue", C.c_void_p),
                ("spin_us", C.c_int32), ("err", C.c_int32), ("err_cmd", C.c_int32), ("pad", C.c_int32),
                ("lock", C.c_void_p)]


class Mutex:
    """A pthread mutex in memory this object owns, usable from Python (``with``: libc's
    pthread_mutex_lock through ctypes, which releases the GIL while it waits) and from
    runner.c (``address``, lcl_part.lock). Lives as long as the device it guards."""

    _libc = None

    def __init__(self):
        if Mutex._libc is None:
            libc = C.CDLL(None)
            for f in ("pthread_mutex_init", "pthread_mutex_lock", "pthread_mutex_unlock"):
                getattr(libc, f).argtypes = [C.c_void_p] + ([C.c_void_p] if f == "pthread_mutex_init" else [])
                getattr(libc, f).restype = C.c_int
            Mutex._libc = libc
        self._mem = C.create_string_buffer(128)  # pthread_mutex_t: 40 bytes on x86-64/aarch64 glibc
        self.address = C.addressof(self._mem)
        if Mutex._libc.pthread_mutex_init(self.address, None):
            raise OSError("pthread_mutex_init failed")

    def __enter__(self):
        Mutex._libc.pthread_mutex_lock(self.address)
        return self

    def __exit__(self, *exc):
        Mutex._libc.pthread_mutex_unlock(self.address)
        return False


_CL_NAMES = ("clEnqueueNDRangeKernel", "clEnqueueWriteBuffer", "clEnqueueReadBuffer",
             "clEnqueueCopyBuffer", "clFlush", "clFinish", "clGetEventInfo", "clReleaseEvent",
             "clWaitForEvents")


class _ClTable(C.Structure):
    _fields_ = [(n, C.c_void_p) for n in _CL_NAMES]


_LOCK = threading.Lock()
#: how long the C compiler may run (a hung one is killed with its children)
_COMPILE_S = 60
_STATE: dict = {}   # "lib": the loaded runner (or None), "why": why not


def _opencl_loader() -> str | None:
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


def _source() -> bytes:
    # beside this module in both layouts (backend/native, litecl/native); importlib.resources
    # took ~1.2 ms a process
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "native", "runner.c"), "rb") as f:
        return f.read()


def _compile(src: bytes, cc: list) -> bytes:
    """runner.c built as a shared object by the command ``cc`` (a list: CC split as a
    shell would, e.g. "ccache gcc"); bytes. Raises OSError or subprocess.SubprocessError
    with the compiler's last lines. A compiler that runs past _COMPILE_S is killed with
    its children."""
    with tempfile.TemporaryDirectory(prefix="litecl-runner-") as tmp:
        c_path, so_path = os.path.join(tmp, "runner.c"), os.path.join(tmp, "runner.so")
        with open(c_path, "wb") as f:
            f.write(src)
        p = subprocess.Popen([*cc, "-std=c99", "-O2", "-fPIC", "-pthread", "-shared", "-fvisibility=hidden",
                              "-o", so_path, c_path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=_COMPILE_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            raise subprocess.SubprocessError(f"it ran past {_COMPILE_S} s and was stopped") from None
        if p.returncode != 0:
            lines = out.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise subprocess.SubprocessError(" | ".join(lines) or f"it exited {p.returncode}")
        with open(so_path, "rb") as f:
            return f.read()


def _dlopen(so: bytes):
    """Load shared-object bytes: from an anonymous memory file (memfd_create; no file
    system, so a noexec TMPDIR does not matter), else a private temporary file (mkstemp:
    0600) loaded, then unlinked. Raises OSError (the dynamic linker's message)."""
    first = None
    if hasattr(os, "memfd_create"):
        try:
            fd = os.memfd_create("litecl-runner", getattr(os, "MFD_CLOEXEC", 1))
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
    fd, path = tempfile.mkstemp(prefix="litecl-runner-", suffix=".so")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(so)
        return C.CDLL(path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        raise (first or e) from None
    finally:
        os.unlink(path)


def _load(fallback) -> tuple:
    from . import cache  # noqa: PLC0415

    loader = _opencl_loader()
    if loader is None:
        return None, "the OpenCL loader pyopencl uses was not found in the process"
    try:
        ocl = C.CDLL(loader, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        table = _ClTable(*(C.cast(getattr(ocl, n), C.c_void_p).value for n in _CL_NAMES))
    except (OSError, AttributeError) as e:
        return None, f"the OpenCL loader {loader} lacks an entry point ({e})"
    src = _source()
    cc_text = os.environ.get("CC") or "cc"
    try:
        cc = shlex.split(cc_text)
    except ValueError:
        cc = []
    # not the compiler: plain C99 calling only libc, any compiler's build serves
    key = hashlib.sha256(src + f"\0{platform.machine()}\0{sys.platform}".encode()).hexdigest()
    so = cache.load_blob("runner", key)
    lib = None
    if so is not None:
        try:
            lib = _dlopen(so)
        except OSError:  # a build that does not load here (another machine's, damaged): again
            cache.forget_blob("runner", key)
            so = None
    if lib is None:
        found = shutil.which(cc[0]) if cc else None
        if found is None:
            return None, f"no C compiler ({cc_text!r} not found; set CC)"
        # a build that failed is remembered for this source, CC and compiler file: a hung
        # compiler cost every process 60 s (a trial's report); a new compiler tries again
        try:
            st = os.stat(found)
            fkey = hashlib.sha256(f"{key}\0{cc_text}\0{found}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
        except OSError:
            fkey = None
        failed = cache.probe_get("runner-failed", fkey) if fkey else None
        if isinstance(failed, str):
            return None, f"{failed} (remembered from an earlier process: set CC to another compiler to try again)"
        try:
            so = _compile(src, cc)
        except (OSError, subprocess.SubprocessError) as e:
            return None, _failed(fkey, f"{cc_text} could not build runner.c: {e}")
        try:
            lib = _dlopen(so)
        except OSError as e:
            return None, _failed(fkey, f"runner.c as built by {cc_text} does not load here ({e}); "
                                       "set CC to this machine's compiler")
        cache.store_blob("runner", key, so)  # only a build that loads
    lib.lcl_run.argtypes = [C.POINTER(Part)]
    lib.lcl_run.restype = C.c_int
    lib.lcl_configure.restype = C.c_int
    lib.lcl_configure.argtypes = [C.POINTER(_ClTable)] + [C.c_size_t] * 5 + [C.c_void_p]
    got = lib.lcl_configure(C.byref(table), abi.TfLiteContext.tensors.offset, C.sizeof(abi.TfLiteTensor),
                            abi.TfLiteTensor.data.offset, abi.TfLiteTensor.bytes.offset,
                            abi.TfLiteNode.user_data.offset, C.cast(fallback, C.c_void_p).value)
    if got != C.sizeof(Part) * 1000 + C.sizeof(Cmd):  # an internal invariant
        return None, f"runner.c's structs differ from runner.py's mirror ({got})"
    lib._litecl_keep = (ocl, table, fallback)
    return lib, ""


def _failed(fkey, why: str) -> str:
    """Remember ``why`` a build failed (litecl's cache, "runner-failed"); returns it."""
    if fkey:
        from . import cache  # noqa: PLC0415

        cache.probe_put("runner-failed", fkey, why)
    return why


def runner(fallback):
    """The loaded runner library (ctypes CDLL: lcl_invoke, lcl_run), built and loaded
    once per process, or None (``status()`` says why). ``fallback``: the Python invoke
    callback (abi.INVOKE) lcl_invoke calls when a list is not armed; the first call's is
    kept for the process's life."""
    with _LOCK:
        if "lib" not in _STATE:
            _STATE["lib"], _STATE["why"] = _load(fallback)
        return _STATE["lib"]


def status() -> str:
    """"native" when partition invokes run in C, else "python: WHY" (after ``runner``
    was asked; "unknown" before)."""
    if "lib" not in _STATE:
        return "unknown"
    return "native" if _STATE["lib"] is not None else f"python: {_STATE['why']}"
