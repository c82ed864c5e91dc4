"""What the OpenCL ICD loader lists, and how it loads each runtime (device.py's setup).

At import, before the first OpenCL call (device.py calls these in order, then imports
pyopencl): the Intel ICD wiring (``_wire_intel_icd``: ``OCL_ICD_VENDORS`` pointed at a
folder holding an .icd for intel-opencl-rt plus every .icd the loader would otherwise
read; device.py's docstring describes it), and the decision to list PoCL's ``basic``
device beside its ``pthread`` one (``_add_pocl_basic``; ``POCL_DEVICES`` is set around
litecl's own listings by ``_listing``). The yes/no variables ``LITECL_NO_INTEL_ICD`` and
``LITECL_NO_POCL_BASIC`` are read here without failing (``_switched_off``); a bad value
is raised at the first listing (``_check_env``). At a listing: the ICD libraries are
opened ahead of the loader where TensorFlow's LLVM is in the process
(``_preload_icds_if_llvm_clash``). Nothing here imports pyopencl.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
import tempfile
import threading
from pathlib import Path

from .errors import LiteclError, env_flag

#: The ICD loader's default vendors folder (used when neither OCL_ICD_VENDORS nor
#: OPENCL_VENDOR_PATH is set). Tests override it with LITECL_ICD_SYSTEM_VENDORS.
SYSTEM_VENDORS = "/etc/OpenCL/vendors"
#: The .icd litecl writes for the Intel CPU runtime.
_INTEL_ICD = "litecl-intel.icd"


def _intel_lib() -> Path:
    return Path(sys.prefix) / "lib" / "libintelocl.so"


def _vendor_path() -> Path:
    """The folder ocl-icd reads when OCL_ICD_VENDORS is unset (OPENCL_VENDOR_PATH first)."""
    return Path(os.environ.get("OPENCL_VENDOR_PATH") or os.environ.get("LITECL_ICD_SYSTEM_VENDORS")
                or SYSTEM_VENDORS)


def _icd_target(data: bytes) -> str:
    """The library an .icd names: its first line (what ocl-icd dlopens)."""
    return data.split(b"\n", 1)[0].decode("utf-8", "replace").strip()


def _bundled_targets() -> set[str]:
    """Libraries named by the .icd files shipped in pyopencl's wheel (PoCL, Oclgrind): its
    loader finds those by itself through PYOPENCL_HOME, so copying them would list them
    twice. Found without importing pyopencl (the wiring must precede that)."""
    import importlib.util  # noqa: PLC0415

    try:
        spec = importlib.util.find_spec("pyopencl")
    except (ImportError, ValueError):
        return set()
    out = set()
    for loc in (spec.submodule_search_locations or []) if spec else []:
        for f in Path(loc, ".libs").glob("*.icd"):
            try:
                out.add(_icd_target(f.read_bytes()))
            except OSError:
                continue
    return out


def _loader_vendors() -> list[tuple[str, bytes]]:
    """(file name, content) of every .icd the loader would read without litecl, following
    ocl-icd: OCL_ICD_VENDORS a folder (its *.icd), an .icd file (by name in the vendors
    path first when it has no slash, then as a path) or a library name; unset or empty,
    the vendors path."""
    value = os.environ.get("OCL_ICD_VENDORS", "")
    if not value:
        folder = _vendor_path()
    elif Path(value).is_dir():
        folder = Path(value)
    elif value.endswith(".icd"):
        tries = ([_vendor_path() / value] if "/" not in value else []) + [Path(value)]
        for f in tries:
            try:
                return [(f.name, f.read_bytes())] if f.is_file() else []
            except OSError:
                continue
        return []
    else:  # a library the loader dlopens directly: an .icd naming it is equivalent
        name = re.sub(r"[^A-Za-z0-9._-]", "_", Path(value).name) or "lib"
        return [(f"user-{name}.icd", value.encode() + b"\n")]
    out = []
    try:
        files = sorted(f for f in folder.iterdir() if f.name.endswith(".icd") and f.is_file())
    except OSError:
        return []
    for f in files:
        try:
            out.append((f.name, f.read_bytes()))
        except OSError:
            continue
    return out


def _desired_icds(lib: Path) -> dict[str, bytes]:
    """Our Intel .icd plus the loader's own vendors, without duplicate libraries: a file
    naming the same library as an earlier one (ours first), or one of pyopencl's bundled
    ICDs, is left out. A ``litecl-intel.icd`` already there (inherited from a litecl
    process, maybe of another environment) is replaced by ours."""
    ours = str(lib)
    files = {_INTEL_ICD: ours.encode() + b"\n"}
    seen = {ours} | _bundled_targets()
    for name, data in _loader_vendors():
        target = _icd_target(data)
        if name == _INTEL_ICD or not target or target in seen:
            continue
        seen.add(target)
        files[name] = data
    return files


def _icd_folder_name(files: dict[str, bytes]) -> str:
    """``litecl-icd-<uid>-<sha1[:12]>`` of the exact content (names and bytes)."""
    h = hashlib.sha1()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + files[name] + b"\0")
    return f"litecl-icd-{os.getuid()}-{h.hexdigest()[:12]}"


def _owned_dir(p: Path) -> bool:
    """A real folder of ours that no one else can write (not a link someone planted)."""
    try:
        st = os.lstat(p)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


#: seconds a folder whose Intel runtime is gone stays (_prune_stale_folders): a process
#: started just before its virtual environment was deleted may still be listing it
STALE_AFTER_S = 3600


def _prune_stale_folders(base: Path, keep: Path) -> None:
    """Remove this user's other ICD folders under ``base`` whose Intel .icd names a library
    that no longer exists (a deleted virtual environment or checkout) and that nobody
    touched for STALE_AFTER_S: each folder is keyed by its content, so every environment
    left one behind (a fresh user counted 31 in /tmp). Run only when a new folder was
    made, never on the import path of an existing one; a folder it cannot read is left."""
    import time  # noqa: PLC0415

    prefix = f"litecl-icd-{os.getuid()}-"
    try:
        names = [n for n in os.listdir(base) if n.startswith(prefix) and n != keep.name]
    except OSError:
        return
    now = time.time()
    for n in names:
        p = base / n
        try:
            if not _owned_dir(p) or now - os.lstat(p).st_mtime < STALE_AFTER_S:
                continue
            target = _icd_target((p / _INTEL_ICD).read_bytes())
            if not target or os.path.exists(target):
                continue
            for f in p.iterdir():
                f.unlink()
            p.rmdir()
        except OSError:  # read, removed or filled by another process meanwhile: left
            continue


def _sync_icd_folder(folder: Path, files: dict[str, bytes]) -> None:
    """Make ``folder``'s .icd files exactly ``files``: strays removed, each file replaced
    atomically when its content differs."""
    for f in folder.iterdir():
        if f.name.endswith(".icd") and f.name not in files:
            f.unlink(missing_ok=True)
    for name, data in files.items():
        dst = folder / name
        try:
            if dst.read_bytes() == data:
                continue
        except OSError:
            pass
        tmp = folder / f".{name}.tmp-{os.getpid()}"  # not *.icd: the loader never reads it
        tmp.write_bytes(data)
        os.replace(tmp, dst)


def _materialize_icd_folder(files: dict[str, bytes], base: Path | None = None) -> Path:
    """The folder holding exactly ``files``, created atomically (written under a private
    temporary name, then renamed) or brought back in sync when it exists."""
    base = Path(base or tempfile.gettempdir())
    final = base / _icd_folder_name(files)
    if not os.path.lexists(final):
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=base))
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        try:
            os.rename(tmp, final)
            _prune_stale_folders(base, final)
            return final
        except OSError:  # another process made it first
            for f in tmp.iterdir():
                f.unlink()
            tmp.rmdir()
    if _owned_dir(final):
        _sync_icd_folder(final, files)
        return final
    # someone else's folder (or a link) under our name: use a private one instead
    tmp = Path(tempfile.mkdtemp(prefix=f"{final.name}-", dir=base))
    for name, data in files.items():
        (tmp / name).write_bytes(data)
    return tmp


#: A LITECL_NO_INTEL_ICD or LITECL_NO_POCL_BASIC that is no yes/no value, as the message _check_env raises
_ENV_ERROR: list = []


def _switched_off(name: str) -> bool:
    """The yes/no variable ``name`` read at import, which must not fail: True when on, or
    when it holds no yes/no word (that error is kept for the first listing, _check_env)."""
    try:
        return env_flag(name)
    except LiteclError as e:
        _ENV_ERROR.append(str(e))
        return True


def _wire_intel_icd() -> None:
    """Make intel-opencl-rt visible to pyopencl's bundled ICD loader without hiding any
    vendor the loader would otherwise have read (module docstring). Must run before the
    first OpenCL call."""
    if _switched_off("LITECL_NO_INTEL_ICD"):
        return
    lib = _intel_lib()
    if not lib.exists():
        return
    try:
        folder = _materialize_icd_folder(_desired_icds(lib))
    except OSError as e:  # no writable temporary folder: the loader's own vendors stay
        import warnings  # noqa: PLC0415

        warnings.warn(f"litecl: cannot write an ICD folder for the Intel CPU runtime ({e}); "
                      "it will not be listed", RuntimeWarning, stacklevel=2)
        return
    os.environ["OCL_ICD_VENDORS"] = str(folder)


#: True once litecl listed PoCL's ``basic`` device for itself (_pocl_env_on): it is then
#: kept out of every listing and spec, and used only as small_device()
_POCL_BASIC_ADDED: list = []
#: True while litecl is to list PoCL's basic device at its first listing (_add_pocl_basic)
_POCL_BASIC_WANTED: list = []

#: Devices that PoCL's GPU drivers (cuda, vulkan) could list: where one exists, PoCL's
#: default device list may hold more than its CPU device, and POCL_DEVICES is left alone
_GPU_NODES = ("/dev/nvidiactl", "/dev/dri", "/dev/kfd")


def _add_pocl_basic() -> None:
    """Decide, at import, to list PoCL's ``basic`` device beside its ``pthread`` one
    (``POCL_DEVICES="pthread basic"`` at litecl's first listing, _pocl_env_on), for
    small_device(). Not when ``LITECL_NO_POCL_BASIC`` is on, nor where a GPU device node
    exists (/dev/nvidiactl, /dev/dri, /dev/kfd: naming the drivers would drop the GPU
    devices PoCL lists by default); nor, at the listing, when POCL_DEVICES is set."""
    if _switched_off("LITECL_NO_POCL_BASIC"):
        return
    if not any(os.path.exists(p) for p in _GPU_NODES):
        _POCL_BASIC_WANTED.append(True)


def _pocl_env_on() -> bool:
    """Set POCL_DEVICES for litecl's listings (PoCL reads it once, when it first lists
    its devices); True when this call set it (_pocl_env_off then removes it, so
    that no child process inherits it: there PoCL would list basic first, as set by a
    user)."""
    if not _POCL_BASIC_WANTED or "POCL_DEVICES" in os.environ:
        _POCL_BASIC_WANTED.clear()
        return False
    os.environ["POCL_DEVICES"] = "pthread basic"
    _POCL_BASIC_ADDED[:] = [True]
    return True


def _pocl_env_off() -> None:
    # kept wanted: a listing that returned before PoCL listed its devices (_remembered
    # finding no memory) must not leave the next one without it; once PoCL has read
    # POCL_DEVICES, setting it again changes nothing
    os.environ.pop("POCL_DEVICES", None)


#: one OpenCL listing or device opening at a time in the process (_listing, device.open_device):
#: eight threads making their first Interpreter at once listed platforms together and
#: PoCL's clGetDeviceInfo segfaulted (a device another thread's listing was making; and
#: POCL_DEVICES is set around a listing, for the process)
LISTING_LOCK = threading.RLock()


def _listing(fn):
    """Run ``fn`` (a function that lists OpenCL devices) under LISTING_LOCK with
    _pocl_env_on/off around."""
    import functools  # noqa: PLC0415

    @functools.wraps(fn)
    def wrapper(*a, **k):
        with LISTING_LOCK:
            mine = _pocl_env_on()
            try:
                return fn(*a, **k)
            finally:
                if mine:
                    _pocl_env_off()
    return wrapper


def _pocl_kind(platform: str, name: str) -> str:
    """"threads" for PoCL's pthread device (named "cpu" from PoCL 4 on), "single" for its
    basic device ("cpu-minimal" from PoCL 4 on: seen with PoCL 5.0), else ""."""
    if "portable computing language" not in platform.lower():
        return ""
    n = name.strip().lower()
    if n.startswith(("basic", "cpu-minimal")):
        return "single"
    return "threads" if n.startswith(("pthread", "cpu")) else ""


def _is_pocl_basic(d: "cl.Device") -> bool:
    try:
        return _pocl_kind(d.platform.name, d.name) == "single"
    except Exception:  # noqa: BLE001  (unreadable: not ours to hide)
        return False


def _check_env() -> None:
    """Raise LiteclError for a LITECL_NO_INTEL_ICD or LITECL_NO_POCL_BASIC that is no
    yes/no value (_switched_off read them at import, which must not fail)."""
    if _ENV_ERROR:
        raise LiteclError(_ENV_ERROR[0])


#: Libraries that, once loaded, export LLVM's symbols to the whole process (TensorFlow
#: loads libtensorflow_framework.so with RTLD_GLOBAL). An OpenCL runtime built on its own
#: LLVM (PoCL, Oclgrind, the Intel CPU runtime) then binds its static constructors to
#: TensorFlow's LLVM and segfaults while the ICD loader opens it (measured: gdb shows
#: liboclgrind's _GLOBAL__sub_I_CoverageMappingGen.cpp -> llvm::cl::Option::addArgument in
#: libtensorflow_framework.so.2, for every ICD, even with an empty OCL_ICD_VENDORS).
_LLVM_EXPORTERS = ("libtensorflow_framework", "libtensorflow_cc", "_pywrap_tensorflow_internal")
_icds_preloaded = False


def _icd_libraries() -> list[str]:
    """Every library the ICD loader will dlopen: pyopencl's bundled .icd files (relative
    to its .libs folder) and those of the vendors folder it reads (``_loader_vendors``)."""
    import importlib.util  # noqa: PLC0415

    out = []
    spec = importlib.util.find_spec("pyopencl")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        for f in sorted(Path(loc, ".libs").glob("*.icd")):
            try:
                name = _icd_target(f.read_bytes())
            except OSError:
                continue
            out.append(name if "/" in name else str(f.parent / name))
    out.extend(_icd_target(data) for _, data in _loader_vendors())
    return [x for x in dict.fromkeys(out) if x]


def _bind_oclgrind_now(libs) -> None:
    """Open the Oclgrind and PoCL ICD libraries among ``libs`` with every symbol bound now,
    before the ICD loader opens them lazily. Bound lazily, each resolves an LLVM (and
    clang) function at its first call, and where TensorFlow was imported after the
    platform listing (its libtensorflow_framework exports LLVM process-wide) that call
    lands in TensorFlow's LLVM: the next program build segfaulted (measured: Oclgrind,
    and Debian's PoCL 3.1 with an empty kernel cache: a Delegate's first model, import
    tensorflow, a model with a new kernel; with this, both build). Intel's runtime did not
    crash so and is left as the loader opens it. Oclgrind ~13 ms more than the loader's
    own lazy dlopen; Debian's PoCL 29 against 40 ms lazily (one dlopen each, noise)."""
    import ctypes  # noqa: PLC0415

    for lib in libs:
        name = os.path.basename(lib).lower()
        if ("oclgrind" in name or "pocl" in name) and lib not in _BOUND_NOW:
            try:
                ctypes.CDLL(lib, mode=os.RTLD_NOW | os.RTLD_LOCAL)
            except OSError:
                continue  # the loader reports it as before
            _BOUND_NOW.add(lib)


_BOUND_NOW: set = set()


def _preload_icds_if_llvm_clash() -> None:
    """Where a library that exports LLVM symbols is loaded (TensorFlow imported before
    litecl's first OpenCL call), open every ICD library first with RTLD_DEEPBIND, so that
    each resolves LLVM against its own copy; the loader's later dlopen of the same library
    returns the one already loaded. Without such a library nothing changes (DEEPBIND is
    not free of side effects). A library that fails to open is left to the loader, which
    reports it as before."""
    global _icds_preloaded
    if _icds_preloaded or not hasattr(os, "RTLD_DEEPBIND"):
        return
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        return
    if not any(x in maps for x in _LLVM_EXPORTERS):
        _bind_oclgrind_now(_icd_libraries())  # TensorFlow may come later
        return
    import ctypes  # noqa: PLC0415

    _icds_preloaded = True
    for lib in _icd_libraries():
        try:
            ctypes.CDLL(lib, mode=os.RTLD_NOW | os.RTLD_LOCAL | os.RTLD_DEEPBIND)
        except OSError:
            continue
