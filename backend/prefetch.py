"""The remembered OpenCL runtime's library, loaded on a thread while litecl imports.

A process's first Interpreter waited ~25-40 ms in the dynamic linker for the runtime
remembered.py remembered (Intel's CPU runtime, the default on a 2-core EPYC: one dlopen
35-42 ms, measured), after ``import litecl`` had spent ~300 ms importing numpy, pyopencl
and LiteRT on one core. ``start``, the package's first statement, dlopens that library on
a thread (dlopen releases the GIL) while the import goes on, so the ICD loader's dlopen
finds it loaded. What it loads is what the same spec (LITECL_DEVICE, else auto) opened in
an earlier process that saw the same environment at import (``_KEY``: the variables
remembered._LISTING_ENV names, LITECL_*, the interpreter), checked by the file's identity;
a wrong guess costs the load only (~90 MB resident for Intel's runtime), since the loader
is not touched. Nothing is loaded where a library exporting LLVM is loaded (TensorFlow:
icd._preload_icds_if_llvm_clash opens the runtimes its way), for PoCL and Oclgrind
(icd._bind_oclgrind_now), with LITECL_NO_CACHE, or with LITECL_NO_PREFETCH on. Every
symbol is bound at the load (RTLD_NOW), before TensorFlow could export its LLVM. A
fork() and the process's exit wait for the thread: no child starts inside the linker.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import sys
import threading

#: the cache entry (cache.probe_get name) holding {alias: the library file's identity}
_NAME = "prefetch-v1"
#: variables whose value changes what a spec opens (remembered._LISTING_ENV) or litecl's
#: choices: part of _KEY
_ENV = ("OCL", "OPENCL", "POCL", "CL_", "PYOPENCL", "CUDA", "NVIDIA", "GPU_", "ROCR", "HIP", "HSA",
        "ZE_", "SYCL", "ONEAPI", "INTEL", "LD_", "XDG_CACHE_HOME", "HOME", "RUSTICL", "MESA", "LITECL_")
#: library names left to icd.py (they are bound and set up there)
_SKIP = ("pocl", "oclgrind")
#: text in /proc/self/maps of a library exporting LLVM (icd._LLVM_EXPORTERS)
_LLVM = ("libtensorflow_framework", "libtensorflow_cc", "_pywrap_tensorflow_internal")

_KEY: list = []  # [the environment's key at import, the same without _OWN]
#: variables litecl sets itself (icd.py: OCL_ICD_VENDORS, PYOPENCL_HOME at import,
#: POCL_DEVICES at the first listing): note() looks past them for a changed environment
_OWN = ("OCL_ICD_VENDORS", "PYOPENCL_HOME", "POCL_DEVICES")
_HINTS: dict = {}  # what start() read: alias -> [path, device, inode, size, mtime_ns]
_THREAD: list = []  # [the loading thread]
_HANDLES: list = []  # dlopen handles, kept (the library stays loaded for the process)


def _key(skip: tuple = ()) -> str:
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV) and k not in skip)
    text = repr((env, sys.prefix, sys.executable, sys.platform))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _alias() -> str:
    """The spec device=None opens (device.parse_spec's base, lower case)."""
    spec = os.environ.get("LITECL_DEVICE", "")
    return (spec if spec.strip() else "auto").partition(":")[0].strip().lower()


def _identity(path: str) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _llvm_loaded() -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return True
    return any(x in maps for x in _LLVM)


def start() -> None:
    """Start loading the library the default spec opened in an earlier process of this
    environment, if any (never raises: import must not fail here)."""
    try:
        from . import cache  # noqa: PLC0415
        from .errors import env_flag  # noqa: PLC0415

        _KEY[:] = [_key(), _key(_OWN)]
        if env_flag("LITECL_NO_PREFETCH") or cache.cache_root(quiet=True) is None:
            return  # (a refused folder: warned of where litecl uses the cache)
        hints = cache.probe_get(_NAME, _KEY[0])
        if isinstance(hints, dict):
            _HINTS.update(hints)
        pick = _HINTS.get(_alias())
        if not isinstance(pick, list) or not pick or not isinstance(pick[0], str) \
                or any(s in os.path.basename(pick[0]).lower() for s in _SKIP) or _identity(pick[0]) != pick:
            return
        if _llvm_loaded():
            return
    except Exception:  # noqa: BLE001  (a bad LITECL_* value or cache: litecl says so where it reads them)
        return
    t = threading.Thread(target=_load, args=(os.fsencode(pick[0]),), name="litecl-prefetch", daemon=True)
    _THREAD[:] = [t]
    t.start()


def _load(path: bytes) -> None:
    try:
        libc = ctypes.CDLL(None)
        dlopen = libc.dlopen
        dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
        if not _llvm_loaded():  # TensorFlow imported meanwhile (another thread): icd.py's way
            h = dlopen(path, os.RTLD_NOW | os.RTLD_LOCAL)  # the GIL is released during the call
            if h:
                _HANDLES.append(h)
    except Exception:  # noqa: BLE001  (nothing loaded: the loader loads it as before)
        pass


def wait() -> None:
    """Wait for the loading thread (before fork(), at exit, and before litecl lists the
    platforms)."""
    t = _THREAD[0] if _THREAD else None
    if t is not None and t is not threading.current_thread() and t.is_alive():
        t.join()


def note(alias: str, identity: list | None) -> None:
    """Record that ``alias`` opened the library file ``identity`` ([path, device, inode,
    size, mtime_ns]: remembered._file_of) for the next import in this environment; nothing
    where the environment changed since this process imported litecl (the next import
    would not see this one's)."""
    if not _KEY or not identity or _HINTS.get(alias) == identity:
        return
    try:
        from . import cache  # noqa: PLC0415

        if _key(_OWN) != _KEY[1]:
            return
        _HINTS[alias] = identity
        cache.probe_put(_NAME, _KEY[0], dict(_HINTS))
    except Exception:  # noqa: BLE001  (a hint only)
        pass


os.register_at_fork(before=wait)
atexit.register(wait)
