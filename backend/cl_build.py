"""Building OpenCL programs despite broken kernel caches (PoCL's and pyopencl's).

``build_source`` and ``build_binary`` (kernels.py's builds, device.py's probes) check the
caches first: damaged PoCL cache entries are removed so that PoCL rebuilds them
(``pocl_cache_problem``, ``pocl_binary_problem``), and pyopencl's binary cache is left
out while it cannot be used. ``_fix_pocl_cache_folder`` and ``_fix_pyopencl_caches`` run
at import, before pyopencl loads (device.py), so pyopencl is imported only inside the
functions that build.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

from .errors import raised_by_app
from .icd import _owned_dir

# ---------------------------------------------------------------------------- caches
# A broken cache must not cost the device (issue 13): PoCL aborted on a truncated kernel
# .so or program.bc in its cache, and vanished from the device list when its cache folder
# could not be created; pyopencl raised KeyError('PYOPENCL_CACHE_FAILURE_FATAL') on a
# cache it could not write or read, and waited 60 s on a stale lock file. litecl checks
# each cache, builds without it when it is unusable, and warns once naming the folder.
_WARNED: set = set()


#: warnings of ``import litecl`` (the cache folders, repaired before pyopencl loads), said
#: at the first device opened (``say_held``): the command line's one-line form is in place
#: by then (it printed "litecl:0: RuntimeWarning: ..." before litecl's own "warning: ...")
_HELD: list = []


def _warn_once(key: str, message: str, hold: bool = False) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        if hold:
            _HELD.append(message)
            return
        import warnings  # noqa: PLC0415

        # explicit location: one line on stderr ("litecl:0: RuntimeWarning: ..."), no source
        warnings.warn_explicit(message, RuntimeWarning, "litecl", 0, module="litecl")


def say_held() -> None:
    """Warn what import time held (``_HELD``), once."""
    import warnings  # noqa: PLC0415

    while _HELD:
        warnings.warn_explicit(_HELD.pop(0), RuntimeWarning, "litecl", 0, module="litecl")


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
               f"PoCL caches kernels in {fresh} instead", hold=True)


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

    import pyopencl as cl  # noqa: PLC0415

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
    import pyopencl as cl  # noqa: PLC0415

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
    import pyopencl as cl  # noqa: PLC0415

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
            inner = e  # pyopencl's KeyError while handling the failure: the failure is a context below
            while isinstance(inner, KeyError) and inner.__context__ is not None:
                inner = inner.__context__
            if raised_by_app(inner):  # a signal handler's exception (an app's timeout): the app's, as it is
                raise inner from None
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
                       f"({why}); building kernels without pyopencl's caches", hold=True)
            return
