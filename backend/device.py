"""OpenCL devices: discovery, selection by spec, and capabilities read once as data.

Specs (``open_device(spec)`` and ``LITECL_DEVICE``): ``auto`` (the default: a GPU if one
exists, else the first CPU runtime that can build kernels, tried in the order PoCL, Intel,
Oclgrind), ``gpu`` / ``cpu`` (by CL_DEVICE_TYPE: the first GPU, or the first CPU device
in auto's order, that builds kernels), ``pocl``, ``intel``, ``oclgrind``, ``nvidia``, or
any substring of a platform or device name (case-insensitive); ``spec_of`` gives the
spec that selects a given device (``litecl devices`` prints it). The aliases match
platform names (device names too only when no platform name matches). A substring matching devices of more than one
platform (``"AMD EPYC"``: PoCL's ``pthread-AMD EPYC`` and Intel's ``AMD EPYC``) is an
error listing them; when all matches are of one platform name (two installs of one
runtime, or several devices of one platform) the first that builds kernels is taken. An
empty name (``""``, ``":"``, ``":profile=mobile"``) is an error: write ``auto``.

A spec may carry a capability profile, ``SPEC:profile=NAME`` (see ``PROFILES``), which
restricts a real device to what mobile GPUs offer so the mobile code paths run on a
desktop device. Profiles combine with ``+`` (``intel:profile=mobile+noint64`` applies
both; a profile only ever removes capabilities).

Environment variables:

``LITECL_DEVICE``
    The spec used when ``open_device`` (or an Interpreter) gets no device; default ``auto``
    (unset, empty or only blanks all mean ``auto``: ``LITECL_DEVICE= cmd`` is the shell's
    way to unset it). A non-blank value follows the spec rules, so ``:profile=mobile`` is
    an error there too (write ``auto:profile=mobile``).
``LITECL_NO_INTEL_ICD``
    A yes/no variable (1, true, yes, on / 0, false, no, off; unset or empty: off;
    errors.env_flag). On, importing litecl leaves ``OCL_ICD_VENDORS`` alone, so the Intel
    CPU runtime of the pip package ``intel-opencl-rt`` is not made visible (see below).
    Any other value: the import succeeds (the ``litecl`` program reports it as its error
    line), and listing or opening a device raises LiteclError naming it.
``LITECL_ICD_SYSTEM_VENDORS``
    For testing: the folder taken as the loader's default vendors folder (normally
    ``/etc/OpenCL/vendors``, see ``SYSTEM_VENDORS``).

The remembered runtime: listing OpenCL platforms loads every runtime the ICD loader knows
(~60 ms with Intel's, two PoCLs and Oclgrind installed). For a spec naming one runtime
(pocl, intel, oclgrind, nvidia) litecl's cache (backend/cache.py) remembers the library
that served it and the device taken, and a later process with the same libraries and
environment gives the loader that library alone (PoCL 3.1: ~20 ms). Every other device
stays reachable there: ``list_devices`` and other specs find the other libraries as the
loader would. In such a process pyopencl's own ``cl.get_platforms()`` lists the
remembered runtime only; ``LITECL_NO_CACHE`` turns the memory off with the cache.

Intel ICD wiring (at import, before the first OpenCL call): intel-opencl-rt installs
``<sys.prefix>/lib/libintelocl.so`` with an .icd file naming a placeholder path, so litecl
points ``OCL_ICD_VENDORS`` at a folder holding an .icd naming the real library **plus**
every .icd the loader would otherwise have read: the ``*.icd`` files of ``OCL_ICD_VENDORS``
when it is a folder, the one it names when it is an .icd file or a library, else those of
``OPENCL_VENDOR_PATH`` or ``/etc/OpenCL/vendors`` (where system GPU drivers register).
The folder is ``<tmp>/litecl-icd-<uid>-<hash of its content>``, so every distinct set of
vendors has its own folder, kept exactly in sync on each import. PoCL and Oclgrind shipped
inside pyopencl are found by pyopencl's loader itself (``PYOPENCL_HOME``) and not copied.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import stat
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from .errors import DeviceError, LiteclError, env_flag
from .ops.add import host_arch

__all__ = ["Caps", "Device", "open_device", "list_devices", "PROFILES", "parse_spec", "spec_of",
           "auto_device"]

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


def _listing(fn):
    """Run ``fn`` (a function that lists OpenCL devices) with _pocl_env_on/off around."""
    import functools  # noqa: PLC0415

    @functools.wraps(fn)
    def wrapper(*a, **k):
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


_add_pocl_basic()


# ---------------------------------------------------------------------------- caches
# A broken cache must not cost the device (issue 13): PoCL aborted on a truncated kernel
# .so or program.bc in its cache, and vanished from the device list when its cache folder
# could not be created; pyopencl raised KeyError('PYOPENCL_CACHE_FAILURE_FATAL') on a
# cache it could not write or read, and waited 60 s on a stale lock file. litecl checks
# each cache, builds without it when it is unusable, and warns once naming the folder.
_WARNED: set = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        import warnings  # noqa: PLC0415

        # explicit location: one line on stderr ("litecl:0: RuntimeWarning: ..."), no source
        warnings.warn_explicit(message, RuntimeWarning, "litecl", 0, module="litecl")


def _unwritable_reason(folder: Path) -> str | None:
    """Why ``folder`` cannot be (created and) written, without creating it: its first
    existing ancestor is a file, or not writable; None when it is fine."""
    p = folder
    while not os.path.lexists(p):
        if p.parent == p:
            return None
        p = p.parent
    if not p.is_dir():
        return f"{p} is not a folder"
    if not os.access(p, os.W_OK | os.X_OK):
        return f"{p} is not writable"
    return None


def _pocl_cache_folder() -> Path:
    """PoCL's kernel cache folder, chosen as PoCL does (pocl_cache.c): POCL_CACHE_DIR,
    else $XDG_CACHE_HOME/pocl/kcache, else $HOME/.cache/pocl/kcache, else /tmp/pocl/kcache."""
    if os.environ.get("POCL_CACHE_DIR"):
        return Path(os.environ["POCL_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "pocl" / "kcache"
    if os.environ.get("HOME"):
        return Path(os.environ["HOME"]) / ".cache" / "pocl" / "kcache"
    return Path("/tmp/pocl/kcache")


def _fix_pocl_cache_folder() -> None:
    """Before PoCL starts: when its cache folder cannot be created or written (PoCL then
    lists no device at all, measured with XDG_CACHE_HOME naming a file), point
    POCL_CACHE_DIR at a fresh private folder and warn once."""
    folder = _pocl_cache_folder()
    why = _unwritable_reason(folder)
    if why is None:
        return
    fresh = os.path.join(tempfile.gettempdir(), f"litecl-pocl-kcache-{os.getuid()}")
    try:
        os.makedirs(fresh, mode=0o700, exist_ok=True)
        if not _owned_dir(Path(fresh)):  # someone else's folder (or a link) under our name
            fresh = tempfile.mkdtemp(prefix="litecl-pocl-kcache-")
    except OSError:
        return
    os.environ["POCL_CACHE_DIR"] = fresh
    _warn_once(f"pocl-folder|{folder}", f"PoCL's kernel cache folder {folder} is unusable ({why}); "
               f"PoCL caches kernels in {fresh} instead")


def _bitcode_truncated(path, size: int) -> str | None:
    """Why the LLVM bitcode file at ``path`` is damaged (bad magic, or a top-level block
    running past the end), else None. Only block headers are read: at the top level,
    2-bit abbreviation ids; ENTER_SUBBLOCK (1) is followed by a vbr8 block id, a vbr4
    abbreviation width, alignment to 32 bits and the block's length in 32-bit words
    (LLVM's bitstream format)."""
    with open(path, "rb") as f:
        head = f.read(20)
        base = 0
        if head[:4] == b"\xde\xc0\x17\x0b" and len(head) >= 20:  # the wrapper header
            base, length = int.from_bytes(head[8:12], "little"), int.from_bytes(head[12:16], "little")
            if base + length > size:
                return "wrapped bitcode runs past the end of the file"
            size = base + length
            f.seek(base)
            head = f.read(4)
        if head[:4] != b"BC\xc0\xde":
            return "no LLVM bitcode magic"
        pos = 32  # bits from base
        end = (size - base) * 8
        while pos + 32 <= end:
            f.seek(base + (pos >> 3))
            chunk = f.read(16)
            if not any(chunk) and not any(f.read(64)):  # zero padding at the end
                return None
            word = int.from_bytes(chunk, "little") >> (pos & 7)
            avail = len(chunk) * 8 - (pos & 7)
            used = 0

            def take(count):
                nonlocal word, used
                if used + count > avail:
                    raise EOFError
                v = word & ((1 << count) - 1)
                word >>= count
                used += count
                return v

            def vbr(width):
                v, shift = 0, 0
                while True:
                    piece = take(width)
                    v |= (piece & ((1 << (width - 1)) - 1)) << shift
                    shift += width - 1
                    if not piece >> (width - 1):
                        return v

            try:
                if take(2) != 1:
                    return "unexpected record at the top level"
                vbr(8)
                vbr(4)
                p = (pos + used + 31) & ~31
                take(p - pos - used)
                words = take(32)
            except EOFError:
                return "truncated"
            pos = p + 32 + 32 * words
            if pos > end:
                return "a block runs past the end of the file"
    return None


def _elf_truncated(path, size: int) -> str | None:
    """Why the ELF file at ``path`` is damaged (bad magic; program or section headers or a
    section's bytes past the end of the file), else None."""
    import struct  # noqa: PLC0415

    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or len(head) < 64 or head[4] != 2:  # ELF64 only (PoCL's CPU .so)
            return "not a 64-bit ELF file"
        e = "<" if head[5] == 1 else ">"
        phoff, shoff = struct.unpack_from(e + "QQ", head, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from(e + "HHHH", head, 0x36)
        if phoff + phnum * phentsize > size or shoff + shnum * shentsize > size:
            return "headers past the end of the file"
        f.seek(shoff)
        table = f.read(shnum * shentsize)
    for i in range(shnum):
        sh_type, = struct.unpack_from(e + "I", table, i * shentsize + 4)
        off, sz = struct.unpack_from(e + "QQ", table, i * shentsize + 0x18)
        if sh_type != 8 and off + sz > size:  # 8: SHT_NOBITS (.bss) has no bytes
            return f"section {i} past the end of the file"
    return None


def _pocl_entry_damage(root: str, known: dict, good: dict) -> str | None:
    """Why the PoCL cache entry folder ``root`` is damaged (the first program.bc or kernel
    .so file found truncated, as "path: why"), else None. ``known``/``good``: see
    _damaged_pocl_entries."""
    with os.scandir(root) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                r = _pocl_entry_damage(e.path, known, good)
            elif e.name == "program.bc" or e.name.endswith(".so"):
                st = e.stat(follow_symlinks=False)
                stamp = [st.st_size, st.st_mtime_ns]
                if known.get(e.path) == stamp:
                    good[e.path] = stamp
                    continue
                check = _bitcode_truncated if e.name == "program.bc" else _elf_truncated
                r = check(e.path, st.st_size)
                if r:
                    r = f"{e.path}: {r}"
                else:
                    good[e.path] = stamp
            else:
                continue
            if r:
                return r
    return None


def _damaged_pocl_entries(folder: Path, sound: dict | None = None,
                          seen: dict | None = None) -> list[tuple[Path, str]]:
    """(entry folder, why) of each PoCL cache entry (``<folder>/<2 letters>/<hash>/``)
    whose program.bc or kernel .so files are damaged. Reads only headers: about 0.15 s
    for a 5,000-file, 96 MB cache, 0.4 s for 10,700 files (measured).

    ``sound``: {path: [size, mtime_ns]} of files found sound before. A file listed with
    its current size and mtime is not read again (a stat only); ``seen`` receives every
    file that is sound now, in the same form."""
    out = []
    known = sound or {}
    good = {} if seen is None else seen
    try:
        tops = [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return out
    for top in tops:
        try:
            entries = [e.path for e in os.scandir(top) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for entry in entries:
            try:
                why = _pocl_entry_damage(entry, known, good)
            except OSError as e:
                why = f"{entry}: unreadable ({e.strerror or e})"
            if why:
                out.append((Path(entry), why))
    return out


_POCL_CACHE_CHECKED: dict = {}  # PoCL cache folder -> problem ('' when sound), whole folder
_POCL_ENTRY_CHECKED: dict = {}  # one entry folder -> problem, checked for build_binary


def _repair(folder: Path, damaged: list, warn_key: str) -> str:
    """Remove the ``damaged`` entries ((entry, why) pairs) of PoCL's cache ``folder``,
    warning once per ``warn_key``; '' when all went, else why PoCL cannot use the cache."""
    import shutil  # noqa: PLC0415

    left = []
    for entry, why in damaged:
        shutil.rmtree(entry, ignore_errors=True)
        if entry.exists():
            left.append(why)
    if damaged:
        _warn_once(warn_key, f"PoCL's kernel cache {folder} held {len(damaged)} "
                   f"damaged entr{'y' if len(damaged) == 1 else 'ies'} ({damaged[0][1]}); "
                   + ("removed, PoCL rebuilds them" if not left else "some could not be removed"))
    return (f"PoCL's kernel cache {folder} holds damaged files that cannot be "
            f"removed ({left[0]})") if left else ""


def pocl_cache_problem() -> str:
    """'' when PoCL's kernel cache is sound, else why PoCL cannot use it. Checked once per
    process and folder, before litecl's first PoCL build from source: damaged entries
    (PoCL aborts on a truncated .so or program.bc, measured) are removed so PoCL rebuilds
    them, with one warning naming them; entries that cannot be removed are the returned
    reason (the device then builds nothing, and every node falls back to LiteRT naming
    it). A build from a binary checks only the entry the binary names
    (pocl_binary_problem)."""
    folder = _pocl_cache_folder()
    key = str(folder)
    if key not in _POCL_CACHE_CHECKED:
        from . import cache  # noqa: PLC0415

        sound = cache.probe_get("pocl-cache-sound-v1", key)
        sound = sound if isinstance(sound, dict) else {}
        seen: dict = {}
        damaged = _damaged_pocl_entries(folder, sound, seen)
        if seen != sound:  # files read and found sound this time are not read again
            cache.probe_put("pocl-cache-sound-v1", key, seen)
        _POCL_CACHE_CHECKED[key] = _repair(folder, damaged, f"pocl-damaged|{key}")
    return _POCL_CACHE_CHECKED[key]


#: Where a PoCL program binary names its kernel cache entry: PoCL 3.x's binary header
#: ("poclbin\0", device id, version, kernel count, flags) is followed by the program's
#: build hash as the entry's path under the cache folder, two letters, "/", the rest
#: (letters A-P, one per hex digit; pocl_binary.c, pocl_cache.c), NUL-terminated.
_POCL_ENTRY = re.compile(rb"([A-P]{2})/([A-P]{8,64})\x00")


def pocl_binary_problem(binary: bytes) -> str:
    """pocl_cache_problem for a build from the PoCL ``binary``: PoCL unpacks a binary into
    the cache entry its build hash names and reads only that entry (the program.bc, the
    kernel .so files of each work-group size), so only that entry is checked, once per
    process: ~0.3 ms instead of walking the whole cache (~60-150 ms for 17,000 files,
    measured). A binary whose header does not name an entry gets the whole-folder check."""
    if not binary.startswith(b"poclbin\0"):
        return pocl_cache_problem()
    m = _POCL_ENTRY.search(binary, 8, 160)
    folder = _pocl_cache_folder()
    if m is None:
        return pocl_cache_problem()
    if _POCL_CACHE_CHECKED.get(str(folder)) == "":  # the whole folder was found sound
        return ""
    entry = folder / m.group(1).decode() / m.group(2).decode()
    key = str(entry)
    if key not in _POCL_ENTRY_CHECKED:
        try:
            why = _pocl_entry_damage(key, {}, {})
        except FileNotFoundError:  # PoCL creates the entry from the binary
            why = None
        except OSError as e:
            why = f"{entry}: unreadable ({e.strerror or e})"
        _POCL_ENTRY_CHECKED[key] = _repair(folder, [(entry, why)] if why else [],
                                           f"pocl-damaged|{key}")
    return _POCL_ENTRY_CHECKED[key]


def pyopencl_cache_folder() -> Path:
    """pyopencl's binary cache folder, as pyopencl.cache computes it (platformdirs'
    user cache folder for "pyopencl", then pyopencl-compiler-cache-v2-py<version>)."""
    import platformdirs  # noqa: PLC0415

    base = platformdirs.user_cache_dir("pyopencl", "pyopencl")
    if sys.platform == "darwin" and os.getenv("XDG_CACHE_HOME") is not None:
        base = os.path.join(os.environ["XDG_CACHE_HOME"], "pyopencl")
    return Path(base) / "pyopencl-compiler-cache-v2-py{}".format(".".join(str(i) for i in sys.version_info))


#: A pyopencl cache lock older than this (seconds) is stale: pyopencl holds it only to
#: read or write one entry (milliseconds), and waits 60 s on a lock before giving up.
STALE_LOCK_SECONDS = 10.0
_PYOPENCL_CACHE_BROKEN: list = []  # [why] once pyopencl's cache failed in this process


def _pyopencl_cache_problem() -> str | None:
    """Why pyopencl's binary cache cannot be used now, or None."""
    import time  # noqa: PLC0415

    if _PYOPENCL_CACHE_BROKEN:
        return _PYOPENCL_CACHE_BROKEN[0]
    if getattr(cl, "_PYOPENCL_NO_CACHE", False):  # PYOPENCL_NO_CACHE: nothing to check
        return None
    folder = pyopencl_cache_folder()
    why = _unwritable_reason(folder)
    if why:
        return f"pyopencl's kernel cache folder {folder} is unusable ({why})"
    try:
        age = time.time() - os.stat(folder / "lock").st_mtime
    except OSError:
        return None
    if age > STALE_LOCK_SECONDS:
        return (f"pyopencl's kernel cache {folder} has a stale lock file ({folder / 'lock'}, "
                f"{age:.0f} s old; delete it if no pyopencl program is running)")
    return None


def build_binary(ctx, device, binary: bytes):
    """``cl.Program(ctx, [device], [binary]).build()`` (litecl's binary cache,
    backend/cache.py), after the same PoCL kernel cache repair as build_source: PoCL
    looks its kernel cache up for a binary too, and a damaged entry aborts it."""
    if "portable computing language" in device.platform.name.lower():
        why = pocl_binary_problem(binary)
        if why:
            raise RuntimeError(why)
    import warnings  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cl.Program(ctx, [device], [binary]).build()


def build_source(ctx, source: str):
    """``cl.Program(ctx, source).build()``, with pyopencl's binary cache while it works.

    When the cache is unusable (its folder cannot be written, a stale lock file, or
    pyopencl fails on an entry: KeyError('PYOPENCL_CACHE_FAILURE_FATAL') from pyopencl
    2026.1), the program is built without it and one warning names the folder. On a
    PoCL device a damaged PoCL kernel cache is repaired first (pocl_cache_problem); one
    that cannot be repaired raises RuntimeError with the reason. Compiler errors are
    raised as pyopencl raises them (cl.Error with the build log)."""
    if "portable computing language" in ctx.devices[0].platform.name.lower():
        why = pocl_cache_problem()
        if why:
            raise RuntimeError(why)
    import warnings  # noqa: PLC0415

    why = _pyopencl_cache_problem()
    if why is None:
        try:
            with warnings.catch_warnings():  # pyopencl warns on any compiler chatter
                warnings.simplefilter("ignore")
                return cl.Program(ctx, source).build()
        except cl.Error:
            raise
        except Exception as e:  # noqa: BLE001  (pyopencl's cache code failed, not the compiler)
            cause = ("an entry it cannot read or write: pyopencl 2026.1 reports any cache failure "
                     "as KeyError('PYOPENCL_CACHE_FAILURE_FATAL')"
                     if isinstance(e, KeyError) and "PYOPENCL_CACHE_FAILURE_FATAL" in str(e)
                     else f"{type(e).__name__}: {str(e)[:120]}")
            why = f"pyopencl's kernel cache {pyopencl_cache_folder()} failed ({cause})"
            _PYOPENCL_CACHE_BROKEN.append(why)
    _warn_once("pyopencl|" + why.split(" (")[0], f"{why}; building kernels without it")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cl.Program(ctx, source).build(cache_dir=False)


def _fix_pyopencl_caches() -> None:
    """Before pyopencl loads: when its binary cache folder or pytools' folder (which
    pyopencl.invoker opens as a persistent dict when the first kernel is made; with
    XDG_CACHE_HOME naming a file that raised NotADirectoryError) cannot be written, set
    PYOPENCL_NO_CACHE=1 (pyopencl's own switch, read at its import) and warn once."""
    if os.environ.get("PYOPENCL_NO_CACHE"):
        return
    try:
        import platformdirs  # noqa: PLC0415
    except ImportError:
        return
    for folder in (pyopencl_cache_folder(), Path(platformdirs.user_cache_dir("pytools", "pytools"))):
        why = _unwritable_reason(folder)
        if why:
            os.environ["PYOPENCL_NO_CACHE"] = "1"
            _warn_once(f"pyopencl-folder|{folder}", f"pyopencl's cache folder {folder} is unusable "
                       f"({why}); building kernels without pyopencl's caches")
            return


_wire_intel_icd()
_fix_pocl_cache_folder()
_fix_pyopencl_caches()
import pyopencl as cl  # noqa: E402  (after the ICD wiring, on purpose)


@dataclass(frozen=True)
class Caps:
    """What a device offers, read once. Passed to planners and code generators.

    fp16: cl_khr_fp16 (native half arithmetic); fp64: cl_khr_fp64; int64: 64-bit integers
    usable in kernels; strict_compiler: forbid direct conversions some mobile compilers
    reject (long/bool/uchar -> half), forcing the multi-hop chain; compute_units,
    max_work_group_size: from clGetDeviceInfo; is_gpu: CL_DEVICE_TYPE_GPU; profile: the
    capability profile applied ("" for none); nontemporal: the compiler has clang's
    ``__builtin_nontemporal_store`` (probed on CPU devices only: PoCL and Intel's CPU
    runtime have it). ``reference`` and ``streaming`` are not device properties: the
    the delegate sets them per delegate / per kernel (ops/tiling.py ``streams``).
    """

    platform: str
    name: str
    vendor: str
    driver: str
    extensions: frozenset
    fp16: bool
    fp64: bool
    int64: bool
    compute_units: int
    max_work_group_size: int
    is_gpu: bool
    mem_base_addr_align: int = 1024
    strict_compiler: bool = False
    profile: str = ""
    compiler_error: str = ""  # non-empty when the device cannot build even a trivial kernel
    reference: str = "builtin"  # the LiteRT kernels matched where they differ (the Delegate sets it)
    #: the architecture whose LiteRT bits the kernels give (ops/add.py FLOAT_ADD_RULES):
    #: LiteRT's, which runs in this process; export sets the target's
    arch: str = field(default_factory=host_arch)
    nontemporal: bool = False
    streaming: bool = False  # vector stores bypass the cache (set per kernel plan)
    #: CL_DEVICE_HOST_UNIFIED_MEMORY (deprecated in OpenCL 2.0 but answered by the runtimes
    #: seen: CPU devices and integrated/mobile GPUs say true, a discrete GPU false). The
    #: delegate measures whether it can work in LiteRT's memory in place there.
    host_unified: bool | None = None

    @property
    def key(self) -> str:
        """A string naming device, driver and profile, for program caches."""
        return f"{self.platform}|{self.name}|{self.driver}|{self.profile}"


#: Capability profiles: overrides applied on top of a real device's caps.
PROFILES: dict[str, dict] = {
    "": {},
    # A typical mobile GPU (Mali/Adreno/PowerVR class): no double, half only as storage,
    # a compiler that refuses long/bool/uchar -> half.
    "mobile": {"fp16": False, "fp64": False, "strict_compiler": True},
    # Like mobile but with native half arithmetic (Adreno/Mali do expose cl_khr_fp16).
    "mobile-fp16": {"fp64": False, "strict_compiler": True},
    "nofp64": {"fp64": False},
    "nofp16": {"fp16": False},
    "strict": {"strict_compiler": True},
    # An embedded-profile device without 64-bit integers: int64 nodes are refused.
    "noint64": {"int64": False, "fp64": False},
}


def _known_profiles() -> str:
    return ", ".join(p for p in PROFILES if p)


def profile_overrides(profile: str, where: str = "") -> dict:
    """The cap overrides of ``profile``: a key of PROFILES or several joined by ``+``
    (``mobile+noint64``). Overrides only remove capabilities, so combining takes the
    stricter value of each: False for fp16/fp64/int64, True for strict_compiler.

    Raises DeviceError for an unknown or empty part.
    """
    if not isinstance(profile, str):
        raise DeviceError(f"profile must be a string, got {type(profile).__name__}")
    if profile == "":
        return {}
    over: dict = {}
    for part in profile.split("+"):
        part = part.strip()
        if part not in PROFILES or not part:
            what = f"unknown profile {part!r}" if part else f"empty profile name in {profile!r}"
            raise DeviceError(f"{what}{where}; known: {_known_profiles()} (combine with '+')")
        for k, v in PROFILES[part].items():
            over[k] = (over.get(k, False) or v) if k == "strict_compiler" else (over.get(k, True) and v)
    return over


def _is_gpu(d: "cl.Device") -> bool:
    # Oclgrind reports every device type at once; a GPU is a GPU and nothing else
    return d.type == cl.device_type.GPU


def _host_unified(device) -> bool | None:
    try:
        return bool(device.host_unified_memory)
    except Exception:  # an OpenCL 3.0 runtime may not answer the deprecated query
        return None


def read_caps(device: "cl.Device", profile: str = "") -> Caps:
    """Read a device's capabilities once and apply ``profile`` (a key of PROFILES, or
    several joined by ``+``).

    Raises DeviceError for an unknown profile.
    """
    over = profile_overrides(profile)
    ext = frozenset(device.extensions.split())
    caps = Caps(
        platform=device.platform.name.strip(),
        name=device.name.strip(),
        vendor=device.vendor.strip(),
        driver=device.driver_version.strip(),
        extensions=ext,
        fp16="cl_khr_fp16" in ext,
        fp64="cl_khr_fp64" in ext or device.double_fp_config != 0,
        # Full-profile devices must support long; embedded ones advertise cles_khr_int64.
        int64="EMBEDDED" not in device.profile.upper() or "cles_khr_int64" in ext,
        compute_units=int(device.max_compute_units),
        max_work_group_size=int(device.max_work_group_size),
        is_gpu=_is_gpu(device),
        mem_base_addr_align=int(device.mem_base_addr_align),
        host_unified=_host_unified(device),
    )
    # a profile only ever removes capabilities
    for k in ("fp16", "fp64", "int64"):
        if k in over:
            over[k] = over[k] and getattr(caps, k)
    return replace(caps, profile=profile, **over)


@dataclass
class Device:
    """An opened OpenCL device: ``context`` (pyopencl Context), ``queue`` (in-order,
    profiling enabled so kernel times can be read from events) and ``caps``."""

    device: "cl.Device"
    context: "cl.Context"
    queue: "cl.CommandQueue"
    caps: Caps

    #: True in a child of fork() when the device was opened before it (see _after_fork)
    forked: bool = False
    #: commands may be enqueued and waited for by one thread at a time only (PoCL's basic
    #: device: two threads doing so at once deadlocked it, measured; delegate.py _serial)
    one_thread: bool = False

    def __repr__(self) -> str:
        p = f", profile={self.caps.profile}" if self.caps.profile else ""
        return f"Device({self.caps.platform!r}, {self.caps.name!r}{p})"

    def check_usable(self) -> None:
        """Raise LiteclError in a child of fork() when this device was opened before
        the fork: an OpenCL context does not survive fork() (PoCL's worker threads are
        gone: an invoke in the child never returned, and a new context on the same
        device in the child hung as well, measured)."""
        if self.forked:
            from .errors import LiteclError  # noqa: PLC0415

            raise LiteclError(FORK_MESSAGE.format(device=f"{self.caps.platform}: {self.caps.name}"))


FORK_MESSAGE = ("this process was fork()ed after {device} was opened, and an OpenCL context "
                "cannot be used across fork(); create the Interpreter after forking, in a "
                "process that had not opened the device before (multiprocessing's 'spawn' or "
                "'forkserver' start method)")


_ALIASES = {
    "pocl": "portable computing language",
    "intel": "intel(r) opencl",
    "oclgrind": "oclgrind",
    "nvidia": "nvidia",
    # Mesa's OpenCL (the driver of Mali, Adreno, Intel and AMD GPUs under Mesa; llvmpipe on
    # a CPU): lists devices only for the drivers RUSTICL_ENABLE names (llvmpipe, panfrost, ...)
    "rusticl": "rusticl",
}


_SPEC_NAMES = "auto, gpu, cpu, pocl, intel, oclgrind, nvidia, rusticl or a platform/device name substring"

#: Specs that select by CL_DEVICE_TYPE rather than by name.
_TYPE_SPECS = ("gpu", "cpu")


def _type_error(spec) -> DeviceError:
    return DeviceError(f"device must be a spec string or a litecl Device, got {type(spec).__name__}")


def parse_spec(spec: str | None) -> tuple[str, str]:
    """Split ``"pocl:profile=mobile"`` into ("pocl", "mobile"); ``profile=a+b`` combines
    profiles. None reads ``LITECL_DEVICE`` (unset, empty or blank: ``auto``). Raises
    DeviceError, also for an empty name (``""``, ``":"``, ``":profile=mobile"``)."""
    origin = ""
    if spec is None:
        env = os.environ.get("LITECL_DEVICE", "")
        spec, origin = (env, " (from LITECL_DEVICE)") if env.strip() else ("auto", "")
    if not isinstance(spec, str):
        raise _type_error(spec)
    spec = spec.strip()
    base, _, opts = spec.partition(":")
    if not base.strip():
        hint = f"; e.g. auto:{opts.strip()}" if opts.strip() else ""
        raise DeviceError(f"empty device spec {spec!r}{origin}; use {_SPEC_NAMES}{hint}")
    profile = None
    for opt in filter(None, (o.strip() for o in opts.split(","))):
        k, eq, v = opt.partition("=")
        if not eq and profile is not None and all(p.strip() and p.strip() in PROFILES for p in k.split("+")):
            # "profile=mobile,noint64": the comma separates options, not profiles
            raise DeviceError(f"bad device option {opt!r} in {spec!r}{origin}: profiles combine "
                              f"with '+', e.g. profile={'+'.join(filter(None, (profile, k.strip())))}")
        if k.strip() != "profile" or not eq:
            raise DeviceError(f"bad device option {opt!r} in {spec!r}{origin}; expected profile=NAME")
        if profile is not None:
            raise DeviceError(f"profile given twice in {spec!r}{origin}; combine profiles with '+', "
                              f"e.g. profile={profile}+{v.strip()}")
        profile = v.strip()
        if not profile:
            raise DeviceError(f"empty profile in {spec!r}{origin}; known: {_known_profiles()} "
                              "(combine with '+')")
        profile_overrides(profile, where=f" in {spec!r}{origin}")
    profile = "+".join(p.strip() for p in profile.split("+")) if profile else ""
    return base.strip(), profile


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


# ------------------------------------------------------------------ the remembered runtime
# Listing the platforms makes pyopencl's ICD loader (ocl-icd) dlopen every runtime it
# knows: ~60 ms here (Intel's CPU runtime 21 ms, Debian's PoCL 19, Oclgrind 12, the wheel's
# PoCL 6, measured one dlopen each), paid by the first Interpreter of every process. An
# alias spec (pocl, intel, oclgrind, nvidia) names one runtime, so litecl remembers, in its
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
                "HIP", "HSA", "ZE_", "SYCL", "ONEAPI", "INTEL", "LD_", "XDG_CACHE_HOME", "HOME")
#: The cache entry (cache.probe_get name) holding the remembered runtimes.
_MEMORY = "icd-runtime-v1"
#: [library, _loader_icds()] while this process's loader was given that one library; the
#: complete platform list (_discover's addresses), found when first needed.
_RESTRICTED: list = []
_DISCOVERED: list = []
_REMEMBERED: set = set()  # aliases recorded (or found recorded) in this process


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
    if _POCL_BASIC_WANTED and "POCL_DEVICES" not in env:  # what PoCL sees at litecl's listings
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
    """Whether the loader may be given one library: no OPENCL_LAYERS (layers see every
    call), and no library exporting LLVM loaded (_preload_icds_if_llvm_clash then loads
    every runtime anyway)."""
    if os.environ.get("OPENCL_LAYERS"):
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
            if _POCL_BASIC_ADDED and _is_pocl_basic(d):
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


#: The process that first listed the OpenCL platforms (listing initializes every runtime).
_LISTED_BY: list = []
#: PoCL devices left out in a child of fork() whose parent had listed them (see below).
_POCL_LEFT_OUT: list = []

POCL_FORK_MESSAGE = ("PoCL was initialized before this process was fork()ed (listing OpenCL "
                     "devices starts its worker threads, which do not survive fork(): an "
                     "invoke in the child never returned, measured); create the Interpreter "
                     "after forking, in a process that had not listed OpenCL devices before "
                     "(multiprocessing's 'spawn' or 'forkserver' start method)")


def _check_env() -> None:
    """Raise LiteclError for a LITECL_NO_INTEL_ICD or LITECL_NO_POCL_BASIC that is no
    yes/no value (_switched_off read them at import, which must not fail)."""
    if _ENV_ERROR:
        raise LiteclError(_ENV_ERROR[0])


@_listing
def _all_devices() -> list:
    """Every OpenCL device (duplicates of one library registered twice left out). In a
    child of fork() whose parent had listed the devices, PoCL's are left out: PoCL starts
    its worker threads when listed, and a child then hung in invoke (measured, parent on
    the Intel runtime, child on PoCL); the Intel runtime survived the same fork."""
    _check_env()
    _preload_icds_if_llvm_clash()
    try:
        platforms = _platforms()
    except Exception as e:  # the loader raises when no ICD is installed at all
        raise DeviceError(f"no OpenCL platform found ({e})") from None
    if not platforms:  # the loader was given one remembered library, and none gives any
        raise DeviceError("no OpenCL platform found (no ICD library gave one)")
    if not _LISTED_BY:
        _LISTED_BY.append(os.getpid())
    inherited = _LISTED_BY[0] != os.getpid()
    _POCL_LEFT_OUT.clear()
    out, seen = [], set()
    for p in platforms:
        try:
            devices = p.get_devices()
        except Exception:
            continue  # a platform with no devices
        count: dict = {}
        if _POCL_BASIC_ADDED:  # listed for small_device() only
            devices = [d for d in devices if not _is_pocl_basic(d)]
        for d in devices:
            # the same library registered twice (two .icd files naming it) lists its
            # platform twice: a device whose platform name, device name and driver version
            # an earlier platform listed is dropped (identical devices of one platform,
            # like two GPUs of a kind, are all kept: the index within the platform counts)
            try:
                sig = (p.name.strip(), d.name.strip(), d.driver_version.strip())
            except Exception:
                out.append(d)  # unreadable: keep it
                continue
            count[sig] = count.get(sig, 0) + 1
            key = (*sig, count[sig])
            if key not in seen:
                seen.add(key)
                if (inherited and "portable computing language" in sig[0].lower()
                        and not any(k[0] == f"{d.platform.name}|{d.name}|{d.int_ptr}" for k in _OPEN)):
                    _POCL_LEFT_OUT.append(d)  # (one the parent opened says so itself)
                    continue
                out.append(d)
    return out


def list_devices() -> list[Caps]:
    """Capabilities of every OpenCL device the loader sees (a platform registered twice
    is listed once)."""
    return [read_caps(d) for d in _all_devices()]


def _describe(d: "cl.Device") -> str:
    return f"{d.platform.name.strip()}: {d.name.strip()}"


def _auto_order(devices: list) -> list:
    """The order ``auto`` tries devices in: GPUs first, then the CPU runtimes (PoCL,
    Intel), the simulator (Oclgrind) last, then anything else; the first that builds
    kernels is taken."""
    order = [d for d in devices if _is_gpu(d)]
    for alias in ("pocl", "intel", "oclgrind"):
        order += [d for d in devices if d not in order and _ALIASES[alias] in d.platform.name.lower()]
    order += [d for d in devices if d not in order]
    # PoCL's pthread device before its basic one (PoCL lists basic first where a user's
    # POCL_DEVICES names both); basic then serves small partitions (small_device)
    return sorted(order, key=lambda d: _pocl_kind(d.platform.name, d.name) == "single")


def _is_cpu(d: "cl.Device") -> bool:
    return bool(d.type & cl.device_type.CPU)


def _type_name(d: "cl.Device") -> str:
    return "GPU" if _is_gpu(d) else "CPU" if _is_cpu(d) else "other"


def _same(a: "cl.Device", b: "cl.Device") -> bool:
    return a.int_ptr == b.int_ptr


def auto_device() -> "cl.Device | None":
    """The device ``auto`` (the default spec) opens, or None when there is none."""
    try:
        return _select("auto")
    except DeviceError:
        return None


def spec_of(d: "cl.Device") -> str | None:
    """The first spec that selects ``d``, tried in the order: an alias, ``gpu``/``cpu``,
    its device name, its platform name; None when none does (an identical device of the
    same platform comes first and is always taken)."""
    return next(iter(specs_of(d)), None)


def specs_of(d: "cl.Device") -> list[str]:
    """Every spec of spec_of's candidates that selects ``d``, in its order (``auto`` not
    among them): what a node offers a Ray sweep (sweep_ray.node_resources)."""
    platform, name = d.platform.name.strip(), d.name.strip()
    candidates = [a for a in _ALIASES if _ALIASES[a] in platform.lower()]
    candidates += [t for t in _TYPE_SPECS if (_is_gpu(d) if t == "gpu" else _is_cpu(d))]
    candidates += [name, platform]
    out = []
    for c in dict.fromkeys(candidates):
        if ":" in c or not c:
            continue  # the spec syntax reserves ':'
        try:
            if _same(_select(c), d):
                out.append(c)
        except DeviceError:
            continue
    return out


def _select(base: str) -> "cl.Device":
    _check_env()
    key = base.strip().lower()
    if not key:  # parse_spec rejects it first; "" is a substring of every name
        raise DeviceError(f"empty device spec; use {_SPEC_NAMES}")
    if key in _ALIASES:
        d = _remembered(key)
        if d is not None:
            return d
    devices = _all_devices()
    if not devices:
        raise DeviceError(POCL_FORK_MESSAGE if _POCL_LEFT_OUT else "no OpenCL device found")
    if key == "auto":
        order = _auto_order(devices)
        return next((d for d in order if not probe_compiler(d)), order[0])
    if key in _TYPE_SPECS:
        order = [d for d in _auto_order(devices)
                 if (_is_gpu(d) if key == "gpu" else not _is_gpu(d) and _is_cpu(d))]
        if not order:
            names = "; ".join(f"{_describe(d)} ({_type_name(d)})" for d in devices)
            raise DeviceError(f"no OpenCL {key.upper()} device found; available: {names} "
                              f"(pass {'cpu' if key == 'gpu' else 'gpu'} or auto)")
        return next((d for d in order if not probe_compiler(d)), order[0])
    needle = _ALIASES.get(key, key)
    matches = []
    if key in _ALIASES:  # an alias names a runtime: its platform, not devices of others
        matches = [d for d in devices if needle in d.platform.name.lower()]
    if not matches:
        matches = [d for d in devices if needle in d.platform.name.lower() or needle in d.name.lower()]
    if not matches:
        if any(needle in d.platform.name.lower() or needle in d.name.lower() for d in _POCL_LEFT_OUT):
            raise DeviceError(POCL_FORK_MESSAGE)
        names = "; ".join(_describe(d) for d in devices)
        hint = ""
        if key == "rusticl" and "RUSTICL_ENABLE" not in os.environ:
            hint = (" (Mesa's rusticl lists a device only for the drivers RUSTICL_ENABLE names: "
                    "set RUSTICL_ENABLE=llvmpipe, or panfrost, iris, radeonsi, ...)")
        raise DeviceError(f"no OpenCL device matches {base!r}; available: {names}{hint}")
    platforms = {d.platform.name.strip() for d in matches}
    if len(platforms) > 1:
        names = "; ".join(_describe(d) for d in matches)
        raise DeviceError(f"device spec {base!r} is ambiguous: it matches devices of "
                          f"{len(platforms)} platforms ({names}); give a more specific spec "
                          "(pocl, intel, oclgrind, nvidia or a longer name substring)")
    # two installs of one runtime (PoCL from PyPI and from the OS) both match: take
    # the first that builds kernels; PoCL's pthread device before its basic one (PoCL
    # lists basic first where POCL_DEVICES names both)
    matches.sort(key=lambda d: _pocl_kind(d.platform.name, d.name) == "single")
    chosen = next((d for d in matches if not probe_compiler(d)), matches[0])
    if key in _ALIASES and needle in chosen.platform.name.lower() and not probe_compiler(chosen):
        _remember(key, chosen)
    return chosen


_OPEN: dict[tuple[str, str], Device] = {}
_PROBES: dict[str, str] = {}


def _after_fork_in_child() -> None:
    """os.register_at_fork hook: every device opened so far is unusable in the child.

    Their OpenCL objects (contexts, queues, buffers, programs, and the litecl objects
    holding them) are also kept alive for the child's whole life: a child that released
    them as it exited invalidated the parent's NVIDIA context, whose driver file
    descriptors it shares (the parent's next invoke: "clFinish failed:
    INVALID_COMMAND_QUEUE", measured on the H200)."""
    if not _OPEN:
        return
    for dev in _OPEN.values():
        dev.forked = True
    import ctypes  # noqa: PLC0415
    import gc  # noqa: PLC0415

    keep = []
    for o in gc.get_objects():
        mod = getattr(type(o), "__module__", None)
        if isinstance(mod, str) and mod.startswith(("litecl", "pyopencl")):
            keep.append(o)
    keep += [_OPEN, getattr(sys.modules.get("litecl.kernels"), "_PROGRAMS", None)]
    tools = sys.modules.get("pyopencl.tools")
    if tools is not None:  # pyopencl empties its per-context caches at exit: not here
        import atexit  # noqa: PLC0415

        atexit.unregister(tools.clear_first_arg_caches)
        keep += list(getattr(tools, "_first_arg_dependent_caches", []))
    for o in keep:
        if o is not None:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(o))  # never freed in this process


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
_PROBE_SOURCE = "__kernel void litecl_probe(__global int* a) { a[get_global_id(0)] = 1; }"
_NT_PROBE_SOURCE = ("__kernel void litecl_probe(__global int4* a) "
                    "{ __builtin_nontemporal_store((int4)(1), a + get_global_id(0)); }")


def probe_nontemporal(d: "cl.Device") -> bool:
    """Whether ``d``'s compiler builds clang's ``__builtin_nontemporal_store`` (streaming
    stores, ops/tiling.py ``streams``). Only CPU devices are asked: on them a store that
    bypasses the cache saves the read-for-ownership of each written line."""
    key = f"nt|{d.platform.name}|{d.name}|{d.int_ptr}"
    if key not in _PROBES:
        _PROBES[key] = _cached_probe("nontemporal", d, lambda: _nt_probe(d))
    return not _PROBES[key]


def _cached_probe(name: str, d: "cl.Device", run) -> str:
    """A probe's result ('' or the error) from the disk cache (backend/cache.py, keyed by
    the device's platform, name and driver versions), else ``run()`` stored there: each
    probe builds a kernel, ~100 ms per device on PoCL at every start otherwise."""
    from .cache import device_identity, probe_get, probe_put  # noqa: PLC0415

    ident = device_identity(d)
    got = probe_get(name, ident)
    if isinstance(got, str):
        return got
    got = run()
    if not got.startswith(_TRANSIENT):  # a probe that did not finish is asked again next time
        probe_put(name, ident, got)
    return got


#: probe results that say nothing about the device (not kept on disk)
_TRANSIENT = "a 16-wide vector conversion probe did not finish"


def _nt_probe(d: "cl.Device") -> str:
    try:
        build_source(cl.Context([d]), _NT_PROBE_SOURCE)
        return ""
    except Exception as e:  # the compiler does not know the builtin
        return str(e)[:200] or type(e).__name__


def probe_compiler(d: "cl.Device") -> str:
    """'' if ``d`` builds a trivial kernel, else the first line of the build error.

    Measured: PoCL 3.0 (pocl-binary-distribution, LLVM 14) cannot build anything on AMD
    Zen 5 hosts ("unknown target CPU 'generic'"), so a device is tried before use.
    """
    key = f"{d.platform.name}|{d.name}|{d.int_ptr}"
    if key not in _PROBES:
        _PROBES[key] = _cached_probe("compiler-v2", d, lambda: _compiler_probe(d))
    return _PROBES[key]


def _compiler_probe(d: "cl.Device") -> str:
    try:
        build_source(cl.Context([d]), _PROBE_SOURCE)
    except Exception as e:  # cl.RuntimeError with the build log, or a driver error
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
        err = next((ln for ln in lines if "error" in ln.lower() and "build" not in ln.lower()),
                   lines[0] if lines else type(e).__name__)
        return err[:200]
    return "" if _is_gpu(d) else _wide_vector_probe(d)


#: litecl's CPU kernels pass 64-byte vectors (int16, float16 of the middle type) to OpenCL
#: builtins such as convert_uchar16. PoCL 3.0's wheel, on an AVX-512 host whose CPU its
#: LLVM names znver3 (AMD EPYC Zen 4, measured), compiles kernels without avx512f but links
#: its avx512 builtin library: convert_uchar16(int16) returns garbage and some kernels crash
#: the process (a CAST returned zeros, another segfaulted). Run in a child process.
_WIDE_VECTOR_PROBE = r"""
import sys
import numpy as np
from litecl.device import _all_devices
import pyopencl as cl
SRC = ("__kernel void k(__global const int* s, __global uchar* o) "
       "{ *(__global uchar16*)o = convert_uchar16(*(__global const int16*)s); }")
_all_devices()  # litecl's listing (PoCL's basic device included, though hidden from it)
found = [d for p in cl.get_platforms() for d in p.get_devices()
         if p.name == sys.argv[1] and d.name == sys.argv[2]]
if not found:
    print("missing", flush=True)
    sys.exit(0)
d = found[0]
ctx = cl.Context([d])
q = cl.CommandQueue(ctx)
x = (np.arange(16, dtype=np.int32) * 37 + 5) % 256
a = cl.Buffer(ctx, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=x)
o = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 16)
cl.Program(ctx, SRC).build(cache_dir=False).k(q, (1,), (1,), a, o)  # pyopencl's cache may be broken (a stale lock: 60 s)
got = np.empty(16, np.uint8)
cl.enqueue_copy(q, got, o)
q.finish()
print("ok" if (got == x.astype(np.uint8)).all() else "wrong", flush=True)
"""


def _wide_vector_probe(d: "cl.Device") -> str:
    """'' when ``d`` converts a 16-wide int vector to uchar correctly, else why not (a
    child process runs it: the defect can crash)."""
    import subprocess  # noqa: PLC0415

    env = dict(os.environ, LITECL_NO_INTEL_ICD=os.environ.get("LITECL_NO_INTEL_ICD", ""))
    try:
        r = subprocess.run([sys.executable, "-c", _WIDE_VECTOR_PROBE, d.platform.name, d.name],
                           capture_output=True, text=True, timeout=120, env=env,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{_TRANSIENT} ({type(e).__name__})"
    out = r.stdout.strip().splitlines()
    if out and out[-1] == "ok":
        return ""
    if out and out[-1] == "wrong":
        return ("convert_uchar16(int16) returns wrong values on this device (its builtin library's "
                "vector ABI differs from its kernels': PoCL 3.0's wheel on an AVX-512 host), so "
                "litecl's kernels would give wrong results")
    if r.returncode < 0:
        return f"a 16-wide vector conversion crashed this device's runtime ({_signal_name(-r.returncode)})"
    # the probe itself failed (it could not list the device, say): nothing learnt of the
    # device, asked again next time (_TRANSIENT)
    last = (r.stderr.strip().splitlines() or out or [f"exit {r.returncode}"])[-1]
    return f"{_TRANSIENT} ({'the device was not listed' if out and out[-1] == 'missing' else last[:160]})"


def _signal_name(sig: int) -> str:
    import signal  # noqa: PLC0415

    return signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"


def open_device(spec: str | Device | None = None) -> Device:
    """Open (or reuse) the device named by ``spec``.

    spec: None (read ``LITECL_DEVICE``, default ``auto``), a Device (returned as is), or
    ``NAME[:profile=PROFILE[+PROFILE...]]`` with NAME in auto/gpu/cpu/pocl/intel/oclgrind/
    nvidia or a platform or device name substring. ``auto`` takes a GPU if one exists, else the
    first CPU runtime that builds kernels (PoCL, Intel, then Oclgrind; falling back to the
    Oclgrind simulator warns once per process, a RuntimeWarning naming the other devices
    and why each was passed over). One context and
    queue per (device, profile) per process. Raises DeviceError when nothing matches,
    when a substring matches devices of more than one platform, or when the spec is
    malformed (an empty name included) or not a string.
    """
    if isinstance(spec, Device):
        spec.check_usable()
        return spec
    if spec is not None and not isinstance(spec, str):
        raise _type_error(spec)
    env = os.environ.get("LITECL_DEVICE") if spec is None else None
    hit = _BY_SPEC.get((spec, env))
    if hit is not None:  # a spec opened before in this process: no listing, no probe
        hit.check_usable()
        return hit
    base, profile = parse_spec(spec)
    try:
        d = _select(base)
        if base.strip().lower() == "auto" and _ALIASES["oclgrind"] in d.platform.name.lower():
            _warn_auto_oclgrind(d)
    except DeviceError:
        forked = [dev for dev in _OPEN.values() if dev.forked]
        if forked and not _POCL_LEFT_OUT:  # e.g. NVIDIA's runtime lists no device in a child
            from .errors import LiteclError  # noqa: PLC0415

            dev = forked[0]
            raise LiteclError(FORK_MESSAGE.format(device=f"{dev.caps.platform}: {dev.caps.name}")) from None
        raise
    _BY_SPEC[(spec, env)] = dev = _open(d, profile)
    return dev


def _open(d: "cl.Device", profile: str) -> Device:
    """The Device of ``d`` with ``profile``: one context and queue per process."""
    k = (f"{d.platform.name}|{d.name}|{d.int_ptr}", profile)
    if k in _OPEN:
        _OPEN[k].check_usable()  # opened before fork(): a new context would hang as well
    else:
        ctx = cl.Context([d])
        queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        err = probe_compiler(d)
        caps = replace(read_caps(d, profile), compiler_error=err,
                       nontemporal=not err and not _is_gpu(d) and probe_nontemporal(d))
        _OPEN[k] = Device(d, ctx, queue, caps)
    return _OPEN[k]


#: the caps a kernel's source and plan depend on: a small device must agree on each
_PLAN_CAPS = ("extensions", "fp16", "fp64", "int64", "strict_compiler", "nontemporal",
              "mem_base_addr_align", "host_unified", "profile", "max_work_group_size")


def small_device(dev: Device) -> "Device | None":
    """The device litecl runs small partitions on beside ``dev``, or None
    (small_device_why then says why).

    On PoCL's ``pthread`` device that is PoCL's ``basic`` device of the same platform
    (PoCL 4 and later name them "cpu-minimal" and "cpu"; same compiler and kernels, one
    thread): basic runs a kernel in the thread that enqueues it, where pthread wakes its
    worker threads, which costs ~50-300 us after LiteRT's nodes have left them asleep
    (benchmarks/bench_small_device.py; docs/PERFORMANCE.md, session 12). The delegate
    sends a partition there when its kernels move at most SMALL_PARTITION_BYTES
    (delegate.py). None on every other device, and where PoCL lists no basic device
    (POCL_DEVICES set without it, LITECL_NO_POCL_BASIC, a GPU device node, PoCL first used
    before litecl was imported), or basic's compiler or caps differ from ``dev``'s."""
    return _small(dev)[0]


def small_device_why(dev: Device) -> str:
    """Why ``dev`` has no small_device, in words; "" where it has one, or where small
    partitions do not apply (any device but PoCL's pthread one)."""
    return _small(dev)[1]


def _small(dev: Device) -> tuple:
    if dev.forked or _pocl_kind(dev.caps.platform, dev.caps.name) != "threads" or dev.caps.compiler_error:
        return None, ""
    k = id(dev)
    if k not in _SMALL:
        _SMALL[k] = _find_small(dev)
    return _SMALL[k]


#: id(Device) -> (its small_device or None, why not) (Devices live for the process: _OPEN)
_SMALL: dict = {}


def _find_small(dev: Device) -> tuple:
    try:
        found = [d for d in dev.device.platform.get_devices() if _is_pocl_basic(d)]
    except Exception as e:  # noqa: BLE001  (a platform that cannot answer: no small device)
        return None, f"PoCL's device list could not be read ({type(e).__name__})"
    if not found:
        return None, _why_no_basic()
    try:
        small = _open(found[0], dev.caps.profile)
    except Exception as e:  # noqa: BLE001  (a context PoCL refuses: pthread alone)
        return None, f"PoCL's basic device refused a context ({' '.join(str(e).split())[:160]})"
    if small.caps.compiler_error:
        return None, f"PoCL's basic device fails litecl's compiler probe: {small.caps.compiler_error}"
    differ = [f for f in _PLAN_CAPS if getattr(small.caps, f) != getattr(dev.caps, f)]
    if differ:
        return None, f"PoCL's basic device differs from {dev.caps.name} in {', '.join(differ)}"
    small.one_thread = True
    return small, ""


def _why_no_basic() -> str:
    """Why PoCL lists no basic device beside pthread (the cases _add_pocl_basic names)."""
    if _switched_off("LITECL_NO_POCL_BASIC"):
        return "LITECL_NO_POCL_BASIC is on"
    if not _POCL_BASIC_ADDED and os.environ.get("POCL_DEVICES") is not None:
        return f"POCL_DEVICES={os.environ['POCL_DEVICES']!r} does not list basic"
    nodes = [p for p in _GPU_NODES if os.path.exists(p)]
    if nodes and not _POCL_BASIC_ADDED:
        return (f"a GPU device node exists ({', '.join(nodes)}): litecl leaves POCL_DEVICES alone; "
                "set POCL_DEVICES='pthread basic' to have one")
    return "PoCL listed its devices before litecl did (import litecl before using pyopencl)"


def _warn_auto_oclgrind(chosen: "cl.Device") -> None:
    """Warn once per process (one line on stderr) that ``auto`` fell back to Oclgrind, a
    simulator that interprets every work-item (much slower than a CPU runtime): which devices there are and why none of them was taken, and how to pick
    another."""
    others = [d for d in _all_devices() if not _same(d, chosen)]
    why = "; ".join(f"{_describe(d)}: {' '.join(probe_compiler(d).split())[:120] or 'builds them'}"
                    for d in others) or "it is the only OpenCL device found"
    _warn_once("auto-oclgrind", "device auto picked the Oclgrind simulator, which runs kernels very slowly, "
               f"because no other OpenCL device builds litecl's kernels ({why}); pick another device with "
               "--device SPEC (device=SPEC in Python) or LITECL_DEVICE=SPEC (`litecl devices` lists them)")


#: (spec, LITECL_DEVICE when spec is None) -> the Device it opened (open_device's memo)
_BY_SPEC: dict = {}
