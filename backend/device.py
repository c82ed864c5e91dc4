"""OpenCL devices: discovery, selection by spec, and capabilities read once as data.

Specs (``open_device(spec)`` and ``LITECL_DEVICE``): ``auto`` (the default: a GPU if one
exists, else the first CPU runtime that can build kernels, tried in the order Intel, PoCL,
Oclgrind: _auto_order), ``gpu`` / ``cpu`` (by CL_DEVICE_TYPE: the first GPU, or the first CPU device
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

import contextlib
import os
import sys
from dataclasses import dataclass, field, replace

from . import icd
from .cl_build import say_held  # noqa: I001
from .cl_build import (STALE_LOCK_SECONDS, _bitcode_truncated, _elf_truncated,  # noqa: F401  (re-exported)
                       _fix_pocl_cache_folder, _fix_pyopencl_caches, _warn_once, build_binary,
                       build_source, pocl_binary_problem, pocl_cache_problem, pyopencl_cache_folder)
from .errors import CHILD_PATH, DeviceError
from .icd import (_GPU_NODES, _LLVM_EXPORTERS, _add_pocl_basic, _check_env,  # noqa: F401  (re-exported)
                  _icd_folder_name, _is_pocl_basic, _listing, _materialize_icd_folder, _pocl_kind,
                  _preload_icds_if_llvm_clash, _switched_off, _wire_intel_icd)
from .ops.add import host_arch

__all__ = ["Caps", "Device", "open_device", "list_devices", "PROFILES", "parse_spec", "spec_of",
           "auto_device"]

# at import, before the first OpenCL call (icd.py, cl_build.py)
_add_pocl_basic()
_wire_intel_icd()
_fix_pocl_cache_folder()
_fix_pyopencl_caches()
import pyopencl as cl  # noqa: E402  (after the ICD wiring, on purpose)

from . import remembered  # noqa: E402  (it loads pyopencl: after the ICD wiring)
from .remembered import (_MEMORY, _discover, _listing_key,  # noqa: E402,F401  (re-exported)
                         _loader_icds, _platforms, _remember, _remembered)


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
    #: device: two threads doing so at once deadlocked it, measured; Oclgrind crashed)
    one_thread: bool = False

    def exclusive(self):
        """A context manager around litecl's own commands on this device (self-test,
        probes, cost measurement): on a one_thread device they hold the lock partitions'
        invokes take in the runtime (lcl_inprocess_hold), else nothing is held. Raises
        LiteclError where the runtime cannot reach the device."""
        if not self.one_thread:
            return contextlib.nullcontext()
        return _Held(self)

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


class _Held:
    """Device.exclusive on a one_thread device: the runtime's lock for it, held."""

    def __init__(self, dev: Device):
        from . import runtime  # noqa: PLC0415
        from .delegate import device_index  # noqa: PLC0415

        self._rt, self._index = runtime.load(), device_index(dev)

    def __enter__(self):
        self._rt.lcl_inprocess_hold(self._index, 1)  # ctypes lets the GIL go while it waits

    def __exit__(self, *exc):
        self._rt.lcl_inprocess_hold(self._index, 0)


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
#: Specs that pick among every device (_auto_order): remembered as the aliases are
#: (remembered.py), keyed by the same listing, where the pick is complete (_remember_pick).
_PICKS = ("auto", *_TYPE_SPECS)


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
    base, colon, opts = spec.partition(":")
    if not base.strip():
        hint = f"; e.g. auto:{opts.strip()}" if opts.strip() else ""
        raise DeviceError(f"empty device spec {spec!r}{origin}; use {_SPEC_NAMES}{hint}")
    profile = None
    if colon and not all(o.strip() for o in opts.split(",")):  # "intel:", "intel:profile=mobile,"
        raise DeviceError(f"empty device option in {spec!r}{origin}; expected NAME:profile=PROFILE, or the "
                          f"name alone ({base.strip()!r})")
    for opt in (o.strip() for o in opts.split(",")) if colon else ():
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


#: PoCL devices left out in a child of fork() whose parent had listed them (see below).
_POCL_LEFT_OUT: list = []

POCL_FORK_MESSAGE = ("PoCL was initialized before this process was fork()ed (listing OpenCL "
                     "devices starts its worker threads, which do not survive fork(): an "
                     "invoke in the child never returned, measured); create the Interpreter "
                     "after forking, in a process that had not listed OpenCL devices before "
                     "(multiprocessing's 'spawn' or 'forkserver' start method)")


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
    if not remembered._LISTED_BY:
        remembered._LISTED_BY.append(os.getpid())
    inherited = remembered._LISTED_BY[0] != os.getpid()
    _POCL_LEFT_OUT.clear()
    out, seen = [], set()
    for p in platforms:
        try:
            devices = p.get_devices()
        except Exception:
            continue  # a platform with no devices
        count: dict = {}
        if icd._POCL_BASIC_ADDED:  # listed for small_device() only
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
    say_held()
    return [read_caps(d) for d in _all_devices()]


def _describe(d: "cl.Device") -> str:
    return f"{d.platform.name.strip()}: {d.name.strip()}"


def _auto_order(devices: list) -> list:
    """The order ``auto`` tries devices in: GPUs first, then the CPU runtimes (Intel,
    PoCL), the simulator (Oclgrind) last, then anything else; the first that builds
    kernels is taken. Intel's runtime before PoCL by measurement on pip's two (issue 38,
    docs/PERFORMANCE.md, session 17): on a 16-core Xeon (Skylake-AVX512) it ran litecl's
    partitions at 0.16 round-trip floors each against pip's PoCL 3.0's 0.39, invoke median
    1.48x LiteRT against 1.94x, MoveNet's first Interpreter in 109 ms against 121, the
    16M-element models alike; on an AMD EPYC Zen 4 pip's PoCL builds no kernel; on a
    2-core Xeon with AVX-512 and AMX (session 20) invoke median 1.25x against 1.32x, a
    third of PoCL's round trip, PoCL ahead only on one-node models and the first
    Interpreter (49 ms against 68)."""
    order = [d for d in devices if _is_gpu(d)]
    for alias in ("intel", "pocl", "oclgrind"):
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
    if key in _ALIASES or key in _PICKS:
        d = _remembered(key)
        if d is not None:
            return d
    devices = _all_devices()
    if not devices:
        raise DeviceError(POCL_FORK_MESSAGE if _POCL_LEFT_OUT else "no OpenCL device found")
    if key in _PICKS:
        order = _auto_order(devices)
        if key in _TYPE_SPECS:
            order = [d for d in order if (_is_gpu(d) if key == "gpu" else not _is_gpu(d) and _is_cpu(d))]
        if not order:
            names = "; ".join(f"{_describe(d)} ({_type_name(d)})" for d in devices)
            raise DeviceError(f"no OpenCL {key.upper()} device found; available: {names} "
                              f"(pass {'cpu' if key == 'gpu' else 'gpu'} or auto)")
        chosen = next((d for d in order if not probe_compiler(d)), order[0])
        _remember_pick(key, chosen, devices)
        return chosen
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


def _remember_pick(key: str, chosen: "cl.Device", devices: list) -> None:
    """Remember what ``auto``, ``gpu`` or ``cpu`` picked (remembered._remember: the next
    process gives the loader that library alone, ~30 ms of the first Interpreter on a
    2-core EPYC with pip's three runtimes), only where the pick needs no other device
    again: it builds kernels, it is no Oclgrind fallback (whose warning names the others)
    and every platform listed gave a device (one that gave none may give one later: a
    GPU's driver with the GPU absent), but Mesa's: rusticl lists devices for the drivers
    RUSTICL_ENABLE names (the environment is part of the memory's key), Clover for the
    GPUs of Mesa's drivers (Debian's mesa-opencl-icd lists both with no device on a
    machine without such a GPU)."""
    if probe_compiler(chosen) or _ALIASES["oclgrind"] in chosen.platform.name.lower():
        return
    try:
        gave = {d.platform.int_ptr for d in devices}
        if any(p.int_ptr not in gave and p.name.strip() not in _MESA_PLATFORMS for p in _platforms()):
            return
    except Exception:  # noqa: BLE001  (a platform that cannot answer: nothing remembered)
        return
    _remember(key, chosen)


#: Mesa's OpenCL platforms (clGetPlatformInfo's names), which list no device on a machine
#: without the GPUs (or RUSTICL_ENABLE) they serve
_MESA_PLATFORMS = ("rusticl", "Clover")


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
_WIDE_VECTOR_PROBE = CHILD_PATH + r"""
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
    say_held()  # import's warnings (cache folders), in the command line's form by now
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
    with icd.LISTING_LOCK:  # one thread lists and opens; the others then take its Device
        hit = _BY_SPEC.get((spec, env))
        if hit is not None:
            hit.check_usable()
            return hit
        return _open_spec(spec, env)


def _open_spec(spec, env) -> Device:
    """open_device's first opening of ``spec`` (under icd.LISTING_LOCK)."""
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
        # Oclgrind: two threads' kernels at once crashed it (oclgrind::WorkGroup, 14 of 15
        # runs of two threads invoking) and once gave a wrong output: one thread at a time
        _OPEN[k] = Device(d, ctx, queue, caps, one_thread=_ALIASES["oclgrind"] in d.platform.name.lower())
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
        with icd.LISTING_LOCK:  # it lists PoCL's devices and may open one (open_device)
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
    if not icd._POCL_BASIC_ADDED and os.environ.get("POCL_DEVICES") is not None:
        return f"POCL_DEVICES={os.environ['POCL_DEVICES']!r} does not list basic"
    nodes = [p for p in _GPU_NODES if os.path.exists(p)]
    if nodes and not icd._POCL_BASIC_ADDED:
        return (f"a GPU device node exists ({', '.join(nodes)}): litecl leaves POCL_DEVICES alone; "
                "set POCL_DEVICES='pthread basic' to have one")
    return "PoCL listed its devices before litecl did (import litecl before using pyopencl)"


def warn_if_refused(dev: Device, quiet: bool) -> Device:
    """``dev``, after one warning per device and process where it cannot build litecl's
    kernels (caps.compiler_error: every CAST/ADD node then stays on LiteRT, and without a
    word a user saw only the missing "Replacing" line: a fresh user's device="pocl" on a
    host where pip's PoCL 3.0 builds nothing). Not where ``quiet`` (the command line says
    it in its own note)."""
    err = dev.caps.compiler_error
    if err and not quiet:
        _warn_once(f"refused|{dev.caps.platform}|{dev.caps.name}|{dev.caps.profile}",
                   f"device {dev.caps.platform}: {dev.caps.name} cannot build litecl's kernels "
                   f"({' '.join(err.split())}): every CAST/ADD node stays on LiteRT; pick another device with "
                   "device=SPEC or LITECL_DEVICE=SPEC (`litecl devices` lists them)")
    return dev


def _warn_auto_oclgrind(chosen: "cl.Device") -> None:
    """Warn once per process (one line on stderr) that ``auto`` fell back to Oclgrind, a
    simulator that interprets every work-item (much slower than a CPU runtime): which devices there are and why none of them was taken, and how to pick
    another."""
    others = [d for d in _all_devices() if not _same(d, chosen)]
    why = "; ".join(f"{_describe(d)}: {' '.join(probe_compiler(d).split()) or 'builds them'}"
                    for d in others) or "it is the only OpenCL device found"
    _warn_once("auto-oclgrind", "device auto picked the Oclgrind simulator, which runs kernels very slowly, "
               f"because no other OpenCL device builds litecl's kernels ({why}); pick another device with "
               "--device SPEC (device=SPEC in Python) or LITECL_DEVICE=SPEC (`litecl devices` lists them)")


#: (spec, LITECL_DEVICE when spec is None) -> the Device it opened (open_device's memo)
_BY_SPEC: dict = {}
