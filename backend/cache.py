"""litecl's on-disk cache: built program binaries, checked models and device probe
results, so that a process does not compile or check what an earlier one already did
(issue 14, fast start).

Measured on PoCL 3.1 (2-core VM, PoCL's own kernel cache warm): building a CAST kernel
from source takes 80-115 ms (clang parses it every time), from its binary 1.3-2 ms;
MoveNet's 26 programs took 2.7 s of its 3.2 s allocate_tensors().

Where: ``LITECL_CACHE_DIR``, else ``$XDG_CACHE_HOME/litecl``, else ``~/.cache/litecl``.
Entries are keyed by SHA-256 of the source text and the device's identity (platform,
device name, driver and OpenCL versions), and each binary file carries the SHA-256 of its
payload, so a truncated or corrupted entry is detected before the driver sees it and is
rebuilt from source. Checked models (model.py ``load_model``: the verifier's and the
parser's result, without the constants) are kept the same way, as kind "models", keyed by
the file's identity or the bytes' SHA-256 and the loader's version. A Prepare's reasons
and partition plans (kind "prepared": claims._prepared) are keyed by ``derived_key``: the
nodes, the device's caps and identity, and the deciding sources. A cache that cannot be
written (read-only, a file in the way) is skipped: litecl builds from source and warns
once, naming the folder. A folder that is not the user's, or that others can write (sticky
bit or not), is neither read nor written: one warning, and the cache is off for the process
(``_refused``). ``LITECL_NO_CACHE`` (a yes/no variable, errors.env_flag: 1, true,
yes or on) turns the cache off. The entries are kept under ``LITECL_CACHE_MAX_BYTES``
(default 2 GiB): a store removes the least recently used ones when the root's ledger of
stores says they pass it (``_prune``).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path

from .errors import env_flag

__all__ = ["cache_root", "device_identity", "load_binary", "store_binary", "load_blob",
           "store_blob", "forget_blob", "probe_get", "probe_put"]

_MAGIC = b"LITECL-BIN1\n"
_warned: set = set()


def cache_root() -> Path | None:
    """The cache folder, or None when LITECL_NO_CACHE is on (errors.env_flag: raises
    LiteclError for a value that is no yes/no word) or the folder is not safe to use
    (_refused)."""
    if env_flag("LITECL_NO_CACHE"):
        return None
    env = os.environ
    k = (env.get("LITECL_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    root = _ROOTS.get(k)
    if root is None:
        if k[0]:  # "~" expanded, a relative folder made absolute once: a service that changes
            # its folder later keeps one cache (a fresh user's report: "~/x" made a folder "~")
            root = Path(os.path.abspath(os.path.expanduser(k[0])))
        else:
            root = Path(k[1] or str(Path.home() / ".cache")) / "litecl"
        if len(_ROOTS) < 64:
            _ROOTS[k] = root
    return None if _refused(root) else root


# cache_root runs at every cache access (a dozen per Interpreter): finding the folder
# (Path.home()) and checking it cost ~24 us a call, 1.5 ms over the start-up of 31 models
# (auto 1.47x -> 1.66-1.82x LiteRT, measured); the folder is remembered by the variables
# naming it, its check (one stat) is made each time: ~6 us
_ROOTS: dict = {}     # (LITECL_CACHE_DIR, XDG_CACHE_HOME, HOME) -> the cache folder they name
_REFUSED: set = set()  # cache folders this process found unsafe: the cache is off there


def _refused(root: Path) -> bool:
    """Whether cache folder ``root`` exists but is no folder, or not this user's alone to
    write: not owned by the user, or writable by others (sticky bit or not), the rule its entries are
    read under (_private, root=True). Then litecl neither reads nor writes it for the rest
    of the process, and warns once naming it (a world-writable folder was written to by a
    first run, and every later run warned that its entries are not used and wrote more).
    An absent folder is fine: the first store makes it this user's only (_write_atomic)."""
    key = str(root)
    if key in _REFUSED:
        return True
    try:
        st = os.stat(key)
    except OSError:  # absent, or unreachable: a store says why (_warn_once)
        return False
    folder = stat.S_ISDIR(st.st_mode)
    if folder and _private(st, root=True):
        return False
    _REFUSED.add(key)
    if f"open|{root}" not in _warned:  # _trusted's warning for the same folder
        _warned.add(f"open|{root}")
        what = "is not this user's or others can write it" if folder else "is not a folder"  # was "(File exists)"
        warnings.warn(f"litecl: the cache folder {root} {what}; litecl does not use it (kernels built from "
                      "source, models checked in full)", RuntimeWarning, stacklevel=3)
    return True


def _warn_once(folder: Path, e: Exception) -> None:
    if str(folder) in _warned:
        return
    _warned.add(str(folder))
    warnings.warn(f"litecl: cannot use the cache folder {folder} ({getattr(e, 'strerror', None) or e}); "
                  "running without it (kernels built from source, models checked in full)",
                  RuntimeWarning, stacklevel=3)


def device_identity(d) -> str:
    """What identifies a device's compiler output: platform, device name, driver and
    OpenCL C versions (a driver upgrade gives new keys)."""
    parts = []
    for get in (lambda: d.platform.name, lambda: d.platform.version, lambda: d.name,
                lambda: d.driver_version, lambda: d.version):
        try:
            parts.append(str(get()).strip())
        except Exception:  # a runtime that cannot say: keep the key distinct anyway
            parts.append("?")
    return "|".join(parts)


def _entry(kind: str, identity: str, text: str) -> Path | None:
    root = cache_root()
    if root is None:
        return None
    # surrogateescape: a key naming a file whose name is not UTF-8 (os.fsdecode's form)
    h = hashlib.sha256(f"{identity}\0{text}".encode("utf-8", "surrogateescape")).hexdigest()
    return root / kind / h[:2] / f"{h}.bin"


def load_blob(kind: str, key: str) -> bytes | None:
    """The bytes stored by store_blob under ``kind`` ("programs", "models") and
    ``key``, or None (absent, unreadable, or failing its checksum: then the entry is
    removed)."""
    return _load(_entry(kind, "", key))


#: The largest entry read back (a checked model's entry holds its tables, not its
#: constants: a few MB for the largest shared models).
MAX_ENTRY_BYTES = 64 << 20


def _private(st, root: bool = False) -> bool:
    """Whether a cache file or folder is this user's and only this user's to write: owned
    by the current user, not writable by others (the cache root) or by group or others
    (litecl's own folders and entries). Entries are pickles and program binaries, that is
    code: an entry someone else could have written is not used."""
    if not hasattr(os, "getuid"):
        return True
    return st.st_uid == os.getuid() and not st.st_mode & (0o002 if root else 0o022)


def _trusted(p: Path, st) -> bool:
    root = cache_root()
    if not (stat.S_ISREG(st.st_mode) and _private(st)):
        return False
    try:
        top = root or p.parent.parent.parent
        if not _private(top.stat(), root=True):
            if f"open|{top}" not in _warned:
                _warned.add(f"open|{top}")
                warnings.warn(f"litecl: the cache folder {top} is not this user's or others can "
                              "write it; its entries are not used", RuntimeWarning, stacklevel=4)
            return False
        return _private(p.parent.stat()) and _private(p.parent.parent.stat())
    except OSError:
        return False


def _load(p: Path | None) -> bytes | None:
    blob = _read_entry(p)
    if blob is None:
        return None
    n = len(_MAGIC)
    payload = blob[n + 32:]
    if blob[:n] != _MAGIC or hashlib.sha256(payload).digest() != blob[n:n + 32] or not payload:
        _unlink(p)
        return None
    _touch(p)
    return payload


def _read_entry(p: Path | None) -> bytes | None:
    """The bytes of entry file ``p``, or None: absent, unreadable, not a regular file
    (a FIFO or device put there would block or never end), over MAX_ENTRY_BYTES, or not
    _trusted."""
    if p is None:
        return None
    try:  # O_NONBLOCK: a FIFO put in an entry's place does not block the open. The file
        # object owns the descriptor from its making (a signal handler's exception between
        # an os.open and its fdopen closed it twice: EBADF, or another thread's descriptor)
        with open(p, "rb", opener=_nonblocking) as f:
            st = os.fstat(f.fileno())
            if not _trusted(p, st) or st.st_size > MAX_ENTRY_BYTES:
                return None
            return f.read(st.st_size)
    except OSError:
        return None


def _nonblocking(path, flags: int) -> int:
    return os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))


def _unlink(p: Path | None) -> None:
    try:
        if p is not None:
            p.unlink()
    except OSError:
        pass


def load_binary(identity: str, source: str) -> bytes | None:
    """The cached binary of ``source`` for the device ``identity``, or None (absent,
    unreadable, or failing its checksum: then the entry is removed)."""
    return _load(_entry("programs", identity, source))


def forget_binary(identity: str, source: str) -> None:
    _unlink(_entry("programs", identity, source))


def forget_blob(kind: str, key: str) -> None:
    """Remove the entry store_blob wrote under ``kind`` and ``key`` (its contents proved
    unusable: runtime.py's build that does not load)."""
    _unlink(_entry(kind, "", key))


def _write_atomic(p: Path, data: bytes) -> None:
    root = p.parent.parent.parent
    if not root.is_dir():  # made by litecl: this user's only, whatever the umask (_refused)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    for d in (p.parent.parent, p.parent):  # litecl's folders: this user's only (_private)
        try:
            d.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            st = d.stat()
            if hasattr(os, "getuid") and st.st_uid == os.getuid() and st.st_mode & 0o022:
                os.chmod(d, stat.S_IMODE(st.st_mode) & ~0o022)  # made by an older litecl
    _replace_file(p, data)


def _replace_file(p: Path, data: bytes) -> None:
    """Write ``data`` to ``p`` whole or not at all (a temporary file beside it, renamed)."""
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _store(p: Path | None, data: bytes) -> None:
    if p is None or not data:
        return
    try:
        _write_atomic(p, _MAGIC + hashlib.sha256(data).digest() + data)
    except OSError as e:
        _warn_once(cache_root(), e)
        return
    _prune(len(data) + len(_MAGIC) + 32)


#: The cache's size bound when LITECL_CACHE_MAX_BYTES is not set: 2 GiB.
DEFAULT_MAX_BYTES = 2 << 30
#: The ledger of the entries' bytes at the cache root: a line "=N" written by the last
#: count, then a line "+n" per store since (appended: every process's stores are seen)
LEDGER = "usage"
#: Lines past which the ledger is counted again (a store reads it whole: ~40 us at this size)
LEDGER_LINES = 4096


def max_bytes() -> int:
    """LITECL_CACHE_MAX_BYTES, else DEFAULT_MAX_BYTES. Raises LiteclError (a ValueError)
    when it is set to anything but a positive integer; Interpreter() checks it at
    construction."""
    from .errors import env_positive_int  # noqa: PLC0415

    n = env_positive_int("LITECL_CACHE_MAX_BYTES", "a positive integer (bytes)")
    return DEFAULT_MAX_BYTES if n is None else n


def _touch(p: Path) -> None:
    """Mark a hit as recently used (prune removes the least recently used first)."""
    try:
        os.utime(p)
    except OSError:
        pass


def _prune(added: int) -> None:
    """After a store of ``added`` bytes: keep the entries (*.bin files under the cache
    root named as _entry names them) under max_bytes(). The store is appended to the
    root's LEDGER; the entries are counted (a walk of the cache: 85-250 ms at 21,000
    entries on a 2-core VM, which every process's first store paid) only when the ledger
    is missing, unreadable or longer than LEDGER_LINES, or its sum passes the bound. Past
    the bound the least recently used entries (oldest mtime; hits touch theirs) are removed
    until three quarters of it are left. The sum is an estimate between counts: a store
    that replaces an entry counts it twice and a removed entry stays counted (an early
    count, never a late one), and a store appended while another process writes a new
    count is lost until the next. A missing file (another process removed it) is skipped.
    PoCL's own kernel cache is not touched."""
    root = cache_root()
    if root is None:
        return
    ledger = root / LEDGER
    total = None
    try:
        with open(ledger, "a+", encoding="ascii") as f:
            f.write(f"+{added}\n")
            f.seek(0)
            lines = f.read().split()
        if len(lines) <= LEDGER_LINES and lines and lines[0][:1] == "=":
            total = int(lines[0][1:]) + sum(int(x[1:]) for x in lines[1:] if x[:1] == "+")
    except (OSError, ValueError):  # no ledger to read or append to: the entries are counted below
        total = None
    cap = max_bytes()
    if total is not None and total <= cap:
        return
    total = _count_and_prune(root, cap)
    try:
        _replace_file(ledger, f"={total}\n".encode())
    except OSError:  # the next store counts again (the cache's own writes warn: _warn_once)
        return


def _count_and_prune(root: Path, cap: int) -> int:
    """The bytes of the entries under ``root`` once the least recently used are removed
    down to three quarters of ``cap`` where they pass it (_prune)."""
    entries = []
    for p in root.glob("*/*/*.bin"):
        if len(p.stem) != 64 or p.parent.name != p.stem[:2]:  # not an entry _entry names
            continue
        try:
            st = p.stat()
        except OSError:
            continue
        entries.append((st.st_mtime_ns, st.st_size, p))
    total = sum(e[1] for e in entries)
    if total > cap:
        for _, size, p in sorted(entries, key=lambda e: e[0]):
            if total <= cap * 3 // 4:
                break
            _unlink(p)
            total -= size
    return total


def store_binary(identity: str, source: str, binary: bytes) -> None:
    """Keep ``binary`` for the next process; a cache that cannot be written is skipped
    (one warning naming the folder)."""
    _store(_entry("programs", identity, source), binary)


def store_blob(kind: str, key: str, data: bytes) -> None:
    """Keep ``data`` under ``kind`` and ``key`` for load_blob (same checksummed format
    and failure handling as store_binary)."""
    _store(_entry(kind, "", key), data)


def derived_key(caps, devices, files, *parts) -> str:
    """The key of a result litecl derives from a model's nodes on a device (kind
    "prepared": claims._prepared, its reasons and plans), for load_blob/store_blob: the device
    caps ``caps`` (every field), the identity of each device of ``devices`` (pyopencl
    Devices), the source ``files`` the result follows from (path, size and modification
    time, read once per process: Python's own rule for its .pyc files) and ``parts``
    (plain values, by repr). Raises OSError where a file cannot be read."""
    c = json.dumps({k: sorted(v) if isinstance(v, frozenset) else v for k, v in vars(caps).items()},
                   sort_keys=True, default=str)
    text = "\0".join([c, *(device_identity(d) for d in devices), _files_digest(tuple(str(f) for f in files)),
                      repr(parts)])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _files_digest(files: tuple) -> str:
    got = _DIGESTS.get(files)
    if got is None:
        stats = []
        for f in files:
            st = os.stat(f)
            stats.append((f, st.st_size, st.st_mtime_ns))
        got = _DIGESTS[files] = repr(stats)
    return got


_DIGESTS: dict = {}  # source files -> their paths, sizes and modification times (derived_key)


def probe_get(name: str, identity: str):
    """A probe result stored by probe_put (any JSON value), or None."""
    p = _entry("probes", identity, name)
    if p is None:
        return None
    blob = _read_entry(p)
    if blob is None:
        return None
    try:
        return json.loads(blob.decode("utf-8"))["value"]
    except (ValueError, KeyError, TypeError):
        return None


def probe_put(name: str, identity: str, value) -> None:
    p = _entry("probes", identity, name)
    if p is None:
        return
    try:
        _write_atomic(p, json.dumps({"probe": name, "device": identity, "value": value}).encode())
    except OSError as e:
        _warn_once(cache_root(), e)
