"""The remembered runtime: the ICD library (and device) a spec took, kept in litecl's
cache so that a later process gives the ICD loader that library alone.

device.py's ``_select`` asks ``_remembered`` first for an alias spec (pocl, intel,
oclgrind, nvidia) or a pick (auto, gpu, cpu: device._remember_pick says when one is
kept) and records its choice with ``_remember``; ``_platforms`` gives every
platform in the loader's order, also where the loader was given one library. device.py
imports this module after its ICD wiring (it loads pyopencl).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import sys
from pathlib import Path

import pyopencl as cl

from . import icd
from .errors import env_flag
from .icd import SYSTEM_VENDORS, _LLVM_EXPORTERS, _bind_oclgrind_now, _is_pocl_basic, _listing, _materialize_icd_folder

# ------------------------------------------------------------------ the remembered runtime
# Listing the platforms makes pyopencl's ICD loader (ocl-icd) dlopen every runtime it
# knows: ~60 ms here (Intel's CPU runtime 21 ms, Debian's PoCL 19, Oclgrind 12, the wheel's
# PoCL 6, measured one dlopen each), paid by the first Interpreter of every process. An
# alias spec (pocl, intel, oclgrind, nvidia) names one runtime, and a pick (auto, gpu, cpu)
# is the same one while the listing is (the same libraries, files, environment), so litecl remembers, in its
# cache (cache.probe_put), which library served it and which device it took, keyed by
# everything the listing depends on (_listing_key), and the next process initializes the
# loader with that library alone (19 ms for Debian's PoCL). ocl-icd reads its vendors once,
# so a later full listing in that process (list_devices, another spec) finds the other
# libraries itself, as ocl-icd does (_discover), and uses their platforms through the same
# loader: its calls dispatch through each object's own table (ocl_icd_loader_gen.c); only
# clGetPlatformIDs and a context created with CL_CONTEXT_PLATFORM, which litecl does not
# use, know its list. A runtime is remembered only when _discover, run in a process whose
# loader listed everything, gives the loader's platforms in its order. Side effect: in
# such a process pyopencl's own cl.get_platforms() lists the remembered runtime alone
# (litecl's listings stay complete); LITECL_NO_CACHE turns the memory off.

_cl_int, _cl_uint = ctypes.c_int32, ctypes.c_uint32
_EXT_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)
_GET_PLATFORMS = ctypes.CFUNCTYPE(_cl_int, _cl_uint, ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(_cl_uint))
_PLATFORM_INFO = ctypes.CFUNCTYPE(_cl_int, ctypes.c_void_p, _cl_uint, ctypes.c_size_t,
                                  ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t))
_DEVICE_IDS = ctypes.CFUNCTYPE(_cl_int, ctypes.c_void_p, ctypes.c_uint64, _cl_uint,
                               ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(_cl_uint))
#: Slots of the Khronos ICD dispatch table (cl_icd_dispatch.h) that every object starts with.
_SLOT_PLATFORM_INFO, _SLOT_DEVICE_IDS = 1, 2
#: clGetPlatformInfo names (cl.h, cl_ext.h) and device types (cl.h) the loader asks for.
_PLATFORM_EXTENSIONS, _PLATFORM_ICD_SUFFIX = 0x0904, 0x0920
_TYPE_CPU, _TYPE_GPU, _TYPE_ALL = 1 << 1, 1 << 2, 0xFFFFFFFF

#: Environment variables that change what the loader lists or what a runtime offers (the
#: loader's, pyopencl's, each runtime's, the dynamic linker's), by prefix: part of the key.
_LISTING_ENV = ("OCL", "OPENCL", "POCL", "CL_", "PYOPENCL", "CUDA", "NVIDIA", "GPU_", "ROCR",
                "HIP", "HSA", "ZE_", "SYCL", "ONEAPI", "INTEL", "LD_", "XDG_CACHE_HOME", "HOME",
                "RUSTICL", "MESA")
#: The cache entry (cache.probe_get name) holding the remembered runtimes.
_MEMORY = "icd-runtime-v1"
#: [library, _loader_icds()] while this process's loader was given that one library; the
#: complete platform list (_discover's addresses), found when first needed.
_RESTRICTED: list = []
_DISCOVERED: list = []
_REMEMBERED: set = set()  # aliases recorded (or found recorded) in this process
#: The process that first listed the OpenCL platforms (listing initializes every runtime).
_LISTED_BY: list = []


def _pyopencl_libs() -> Path | None:
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.find_spec("pyopencl")
    locs = (spec.submodule_search_locations or []) if spec else []
    return Path(locs[0], ".libs") if locs else None


def _icd_line(path: Path) -> str | None:
    """The library an .icd file names as ocl-icd reads it (_open_driver: the first line,
    its newline dropped), or None for an empty or unreadable file."""
    try:
        with open(path, "rb") as f:
            line = f.readline()
    except OSError:
        return None
    line = line[:-1] if line.endswith(b"\n") else line
    return os.fsdecode(line) if line else None


def _icds_in(folder: Path) -> list[str]:
    """The libraries of ``folder``'s *.icd files in directory (readdir) order, as ocl-icd
    walks it."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    lines = (_icd_line(folder / n) for n in names if len(n) > 4 and n.endswith(".icd"))
    return [x for x in lines if x]


def _resolve(lib: str, libs_dir: Path | None) -> str:
    """``lib`` as litecl's dlopen finds what the loader's finds: a bare name is searched
    first in pyopencl's .libs folder (the RPATH of pyopencl's _cl module, which loaded the
    loader; seen with LD_DEBUG=libs), then where the dynamic linker looks."""
    if "/" not in lib and libs_dir is not None and (libs_dir / lib).is_file():
        return str(libs_dir / lib)
    return lib


def _loader_icds() -> list[str]:
    """The libraries pyopencl's ocl-icd opens, in its order (ocl_icd_loader.c
    __initClIcd): OCL_ICD_VENDORS a folder (its *.icd), an .icd file (by name in the
    vendors folder first when it has no slash) or a library; unset or empty, the *.icd of
    OPENCL_VENDOR_PATH or /etc/OpenCL/vendors; then the *.icd of $PYOPENCL_HOME/.libs
    (pyopencl's patch). Each is resolved as _resolve says."""
    value = os.environ.get("OCL_ICD_VENDORS", "")
    vendors = Path(os.environ.get("OPENCL_VENDOR_PATH") or SYSTEM_VENDORS)
    if not value:
        out = _icds_in(vendors)
    elif os.path.isdir(value):
        out = _icds_in(Path(value))
    elif value.endswith(".icd"):
        tries = ([vendors / value] if "/" not in value else []) + [Path(value)]
        out = next(([x] for x in map(_icd_line, tries) if x), [])
    else:
        out = [value]
    home = os.environ.get("PYOPENCL_HOME")
    if home:
        out += _icds_in(Path(home, ".libs"))
    libs_dir = _pyopencl_libs()
    return [_resolve(x, libs_dir) for x in out]


def _slot(obj: int, slot: int) -> int:
    """Entry ``slot`` of the dispatch table an ICD object points to first."""
    table = ctypes.cast(obj, ctypes.POINTER(ctypes.c_void_p))[0]
    return ctypes.cast(table, ctypes.POINTER(ctypes.c_void_p))[slot]


def _platform_bytes(info, pid: int, name: int) -> bytes | None:
    size = ctypes.c_size_t(0)
    if info(pid, name, 0, None, ctypes.byref(size)) != 0:
        return None
    buf = ctypes.create_string_buffer(max(size.value, 1))
    if info(pid, name, size.value, buf, None) != 0:
        return None
    return buf.raw[:size.value]


def _icd_platforms(lib: str) -> list[int] | None:
    """The platforms (addresses) the ICD library ``lib`` gives ocl-icd, taken as it takes
    them (_find_and_check_platforms: clIcdGetPlatformIDsKHR through the library's
    clGetExtensionFunctionAddress, each platform kept when it names cl_khr_icd, unless
    OCL_ICD_ASSUME_ICD_EXTENSION, and answers its ICD suffix). None when the library does
    not load. A library loaded before is not loaded again (the dynamic linker's handle is
    shared), so these are the very platforms the loader holds."""
    try:
        h = ctypes.CDLL(lib, mode=os.RTLD_LAZY | os.RTLD_LOCAL)  # the loader's flags
    except OSError:
        return None

    def symbol(name: str) -> int | None:
        try:
            return ctypes.cast(getattr(h, name), ctypes.c_void_p).value
        except AttributeError:
            return None

    ext = symbol("clGetExtensionFunctionAddress")
    if not ext:
        return []
    find = lambda name: _EXT_FN(ext)(name.encode()) or symbol(name)  # noqa: E731
    ids, info = find("clIcdGetPlatformIDsKHR"), find("clGetPlatformInfo")
    assume = bool(os.environ.get("OCL_ICD_ASSUME_ICD_EXTENSION"))
    if not ids or not (info or assume):
        return []
    count = _cl_uint(0)
    if _GET_PLATFORMS(ids)(0, None, ctypes.byref(count)) != 0 or not count.value:
        return []
    found = (ctypes.c_void_p * count.value)()
    if _GET_PLATFORMS(ids)(count.value, found, None) != 0:
        return []
    out = []
    for pid in found:
        if not pid:
            continue
        get = _PLATFORM_INFO(info or _slot(pid, _SLOT_PLATFORM_INFO))
        if not assume and b"cl_khr_icd" not in (_platform_bytes(get, pid, _PLATFORM_EXTENSIONS) or b""):
            continue
        if _platform_bytes(get, pid, _PLATFORM_ICD_SUFFIX) is None:
            continue
        out.append(pid)
    return out


def _device_counts(pid: int) -> tuple[int, int, int]:
    """(GPUs, CPUs, all devices) of a platform, asked as ocl-icd's _count_devices asks."""
    get = _DEVICE_IDS(_slot(pid, _SLOT_DEVICE_IDS))
    out = []
    for kind in (_TYPE_GPU, _TYPE_CPU, _TYPE_ALL):
        n = _cl_uint(0)
        get(pid, kind, 0, None, ctypes.byref(n))  # an error leaves 0, as in the loader
        out.append(n.value)
    return out[0], out[1], out[2]


def _discover(libs: list[str]) -> tuple[list[int], list[list[int] | None]]:
    """The platforms ocl-icd would list for ``libs`` (its order: by library, then sorted
    by most GPUs, CPUs, devices, stable, unless OCL_ICD_PLATFORM_SORT=none;
    _sort_platforms), and each library's own (None: it did not load)."""
    per_lib = [_icd_platforms(lib) for lib in libs]
    flat = [p for ps in per_lib for p in ps or ()]
    if len(flat) > 1 and os.environ.get("OCL_ICD_PLATFORM_SORT") != "none":
        counts = {p: _device_counts(p) for p in dict.fromkeys(flat)}
        flat.sort(key=lambda p: tuple(-c for c in counts[p]))
    return flat, per_lib


def _loaded(lib: str) -> bool:
    """Whether the dynamic linker holds ``lib`` already (RTLD_NOLOAD: nothing is loaded)."""
    try:
        ctypes.CDLL(lib, mode=os.RTLD_LAZY | os.RTLD_LOCAL | os.RTLD_NOLOAD)
    except OSError:
        return False
    return True


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _file_of(lib: str) -> list | None:
    """[path, device, inode, size, mtime_ns] of the file the dynamic linker loaded for
    ``lib`` (dladdr of its clGetExtensionFunctionAddress), or None."""
    try:
        h = ctypes.CDLL(lib, mode=os.RTLD_LAZY | os.RTLD_LOCAL)
        addr = ctypes.cast(h.clGetExtensionFunctionAddress, ctypes.c_void_p)
        info = _DlInfo()
        if not ctypes.CDLL(None).dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
            return None
        path = os.fsdecode(info.dli_fname)
        st = os.stat(path)
    except (OSError, AttributeError):
        return None
    return [path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _listing_key(libs: list[str]) -> str:
    """What the listing depends on besides the library files (checked apart: _file_of):
    the loader's libraries in order, the _LISTING_ENV variables, and the dynamic linker's
    cache (ldconfig)."""
    env = {k: v for k, v in os.environ.items() if k.startswith(_LISTING_ENV)}
    if icd._POCL_BASIC_WANTED and "POCL_DEVICES" not in env:  # what PoCL sees at litecl's listings
        env["POCL_DEVICES"] = "pthread basic"
    env = sorted(env.items())
    try:
        st = os.stat("/etc/ld.so.cache")
        ld = [st.st_ino, st.st_size, st.st_mtime_ns]
    except OSError:
        ld = None
    text = repr((libs, env, ld, sys.platform))
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _signature(platform, device, devices) -> list:
    """[platform name, device name, driver version, index among identical ones before it]."""
    sig = [platform.name.strip(), device.name.strip(), device.driver_version.strip()]
    same = [d for d in devices if [d.name.strip(), d.driver_version.strip()] == sig[1:]]
    return sig + [next(i for i, d in enumerate(same) if d.int_ptr == device.int_ptr)]


def _restrictable() -> bool:
    """Whether the loader may be given one library: no LITECL_FULL_LISTING (the app's own
    pyopencl.get_platforms() then lists every runtime: a restricted loader lists the
    remembered one alone for the process), no OPENCL_LAYERS (layers see every call), and
    no library exporting LLVM loaded (_preload_icds_if_llvm_clash then loads every runtime
    anyway). Raises LiteclError for a LITECL_FULL_LISTING that is no yes/no value."""
    if env_flag("LITECL_FULL_LISTING") or os.environ.get("OPENCL_LAYERS"):
        return False
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return False
    return not any(x in maps for x in _LLVM_EXPORTERS)


@_listing
def _remembered(alias: str) -> "cl.Device | None":
    """The device ``alias`` selected in an earlier process under the same _listing_key,
    with the loader given its library alone; None (nothing changed, or the loader
    restricted and _all_devices then discovering the rest) when there is no such memory,
    a library file changed, or the device is not found or does not build kernels."""
    from . import cache  # noqa: PLC0415
    from .device import probe_compiler  # noqa: PLC0415

    if _LISTED_BY or not _restrictable() or cache.cache_root() is None:
        return None  # listed before (here or in the parent, before fork())
    libs = _loader_icds()
    key = _listing_key(libs)
    record = cache.probe_get(_MEMORY, key)
    try:
        pick = record["picks"][alias]
        lib, sig = pick["lib"], pick["sig"]
        if record["libs"] != libs or any(_stat_of(f) != f for f in record["files"]):
            return None
    except (KeyError, TypeError):
        return None
    try:
        folder = _materialize_icd_folder({"litecl-remembered.icd": os.fsencode(lib) + b"\n"})
    except OSError:
        return None
    _bind_oclgrind_now([lib])
    saved = {k: os.environ.get(k) for k in ("OCL_ICD_VENDORS", "PYOPENCL_HOME")}
    os.environ.update(OCL_ICD_VENDORS=str(folder), PYOPENCL_HOME=str(folder))  # no .libs there
    try:
        platforms = cl.get_platforms()
    except Exception:  # noqa: BLE001  (the library gave nothing: _all_devices discovers)
        platforms = []
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    _LISTED_BY.append(os.getpid())
    own = _icd_platforms(lib) or []
    if any(p.int_ptr not in own for p in platforms):
        return None  # the loader had listed before litecl asked: its list is complete
    _RESTRICTED[:] = [lib, libs]
    for p in platforms:
        try:
            devices = p.get_devices()
        except Exception:  # noqa: BLE001
            continue
        for d in devices:
            if icd._POCL_BASIC_ADDED and _is_pocl_basic(d):
                continue  # listed for small_device() only (_all_devices)
            if _signature(p, d, devices) == sig and not probe_compiler(d):
                _REMEMBERED.add(alias)
                return d
    _forget(alias, key)
    return None


def _stat_of(f) -> list | None:
    try:
        st = os.stat(f[0])
    except (OSError, TypeError, IndexError):
        return None
    return [f[0], st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def _forget(alias: str, key: str) -> None:
    from . import cache  # noqa: PLC0415

    record = cache.probe_get(_MEMORY, key)
    if isinstance(record, dict) and isinstance(record.get("picks"), dict):
        record["picks"].pop(alias, None)
        cache.probe_put(_MEMORY, key, record)


def _remember(alias: str, d: "cl.Device") -> None:
    """Record that ``alias`` selected ``d`` (which builds kernels), where the loader
    listed every library itself and _discover gives its very list: the libraries, their
    files, and d's library and signature (_signature)."""
    from . import cache  # noqa: PLC0415

    if alias in _REMEMBERED or _RESTRICTED or cache.cache_root() is None:
        return
    _REMEMBERED.add(alias)
    if _LISTED_BY and _LISTED_BY[0] != os.getpid() or not _restrictable():
        return  # a child of fork() (the parent's listing), or no use for a memory
    libs = _loader_icds()
    if not all(map(_loaded, libs)):
        return  # a library the loader could not use (or left: no platform) may give later
    key = _listing_key(libs)
    record = cache.probe_get(_MEMORY, key)
    if not isinstance(record, dict) or record.get("libs") != libs:
        record = {"libs": libs, "files": None, "picks": {}}
    try:
        loader = [p.int_ptr for p in cl.get_platforms()]
        flat, per_lib = _discover(libs)
        if flat != loader or not all(per_lib):
            return  # not the loader's list
        owner = next(lib for lib, ps in zip(libs, per_lib) if d.platform.int_ptr in ps)
        devices = d.platform.get_devices()
        pick = {"lib": owner, "sig": _signature(d.platform, d, devices)}
        files = [_file_of(lib) for lib in libs]
    except Exception:  # noqa: BLE001  (a runtime that cannot answer: nothing remembered)
        return
    if not all(files) or record.get("picks", {}).get(alias) == pick and record["files"] == files:
        return
    if record["files"] != files:
        record = {"libs": libs, "files": files, "picks": {}}
    record["picks"][alias] = pick
    cache.probe_put(_MEMORY, key, record)


def _platforms() -> list:
    """Every platform in the loader's order: the loader's list, or where it was given one
    remembered library (_remembered), the platforms _discover finds as it would have."""
    if not _RESTRICTED:
        return cl.get_platforms()
    if not _DISCOVERED:
        flat, _ = _discover(_RESTRICTED[1])
        _DISCOVERED.extend(flat)
    return [cl.Platform.from_int_ptr(p) for p in _DISCOVERED]
