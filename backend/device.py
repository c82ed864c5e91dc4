"""OpenCL devices: discovery, selection by spec, and capabilities read once as data.

Specs (``open_device(spec)`` and ``LITECL_DEVICE``): ``auto`` (default: a GPU if one
exists, else PoCL), ``pocl``, ``intel``, ``oclgrind``, ``nvidia``, or any substring of a
platform or device name (case-insensitive). A spec may carry a capability profile,
``SPEC:profile=NAME`` (see ``PROFILES``), which restricts a real device to what mobile
GPUs offer so the mobile code paths run on a desktop device.
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import DeviceError

__all__ = ["Caps", "Device", "open_device", "list_devices", "PROFILES", "parse_spec"]


def _wire_intel_icd() -> None:
    """Make intel-opencl-rt visible to pyopencl's bundled ICD loader.

    The pip package installs ``<prefix>/lib/libintelocl.so`` but an .icd file naming a
    placeholder path (OPENCL_DEVICES.md); the loader reads OCL_ICD_VENDORS, so we point it
    at a folder holding a correct .icd. Must run before the first OpenCL call.
    """
    if os.environ.get("LITECL_NO_INTEL_ICD"):
        return
    lib = Path(sys.prefix) / "lib" / "libintelocl.so"
    if not lib.exists():
        return
    existing = os.environ.get("OCL_ICD_VENDORS")
    if existing and Path(existing, "litecl-intel.icd").exists():
        return
    folder = Path(tempfile.gettempdir()) / f"litecl-icd-{os.getuid()}"
    folder.mkdir(exist_ok=True)
    icd = folder / "litecl-intel.icd"
    if not icd.exists() or icd.read_text().strip() != str(lib):
        tmp = folder / f".tmp-{os.getpid()}"
        tmp.write_text(str(lib) + "\n")
        tmp.replace(icd)
    if existing and Path(existing).is_dir() and existing != str(folder):
        # keep the user's vendors: copy their .icd files beside ours
        for f in Path(existing).glob("*.icd"):
            dst = folder / f.name
            if not dst.exists():
                dst.write_text(f.read_text())
    os.environ["OCL_ICD_VENDORS"] = str(folder)


_wire_intel_icd()
import pyopencl as cl  # noqa: E402  (after the ICD wiring, on purpose)


@dataclass(frozen=True)
class Caps:
    """What a device offers, read once. Passed to planners and code generators.

    fp16: cl_khr_fp16 (native half arithmetic); fp64: cl_khr_fp64; int64: 64-bit integers
    usable in kernels; strict_compiler: forbid direct conversions some mobile compilers
    reject (long/bool/uchar -> half), forcing the multi-hop chain; compute_units,
    max_work_group_size: from clGetDeviceInfo; is_gpu: CL_DEVICE_TYPE_GPU; profile: the
    capability profile applied ("" for none).
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


def _is_gpu(d: "cl.Device") -> bool:
    # Oclgrind reports every device type at once; a GPU is a GPU and nothing else
    return d.type == cl.device_type.GPU


def read_caps(device: "cl.Device", profile: str = "") -> Caps:
    """Read a device's capabilities once and apply ``profile`` (a key of PROFILES).

    Raises DeviceError for an unknown profile.
    """
    if profile not in PROFILES:
        raise DeviceError(f"unknown profile {profile!r}; known: {', '.join(p for p in PROFILES if p)}")
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
    )
    over = dict(PROFILES[profile])
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

    def __repr__(self) -> str:
        p = f", profile={self.caps.profile}" if self.caps.profile else ""
        return f"Device({self.caps.platform!r}, {self.caps.name!r}{p})"


_ALIASES = {
    "pocl": "portable computing language",
    "intel": "intel(r) opencl",
    "oclgrind": "oclgrind",
    "nvidia": "nvidia",
}


def parse_spec(spec: str | None) -> tuple[str, str]:
    """Split ``"pocl:profile=mobile"`` into ("pocl", "mobile"). Raises DeviceError."""
    if spec is None:
        spec = os.environ.get("LITECL_DEVICE", "") or "auto"
    spec = spec.strip()
    base, _, opts = spec.partition(":")
    profile = ""
    for opt in filter(None, opts.split(",")):
        k, eq, v = opt.partition("=")
        if k.strip() != "profile" or not eq:
            raise DeviceError(f"bad device option {opt!r} in {spec!r}; expected profile=NAME")
        profile = v.strip()
    if profile not in PROFILES:
        raise DeviceError(f"unknown profile {profile!r}; known: {', '.join(p for p in PROFILES if p)}")
    return (base.strip() or "auto"), profile


def _all_devices() -> list:
    try:
        platforms = cl.get_platforms()
    except Exception as e:  # the loader raises when no ICD is installed at all
        raise DeviceError(f"no OpenCL platform found ({e})") from None
    out = []
    for p in platforms:
        try:
            out.extend(p.get_devices())
        except Exception:
            continue  # a platform with no devices
    return out


def list_devices() -> list[Caps]:
    """Capabilities of every OpenCL device the loader sees."""
    return [read_caps(d) for d in _all_devices()]


def _select(base: str) -> "cl.Device":
    devices = _all_devices()
    if not devices:
        raise DeviceError("no OpenCL device found")
    key = base.lower()
    if key == "auto":
        # a GPU first, then the CPU runtimes, the simulator last; each must compile
        order = [d for d in devices if _is_gpu(d)]
        for alias in ("pocl", "intel", "oclgrind"):
            order += [d for d in devices if _ALIASES[alias] in d.platform.name.lower()]
        order += [d for d in devices if d not in order]
        for d in order:
            if not probe_compiler(d):
                return d
        return order[0]
    needle = _ALIASES.get(key, key)
    for d in devices:
        if needle in d.platform.name.lower() or needle in d.name.lower():
            return d
    names = "; ".join(f"{d.platform.name.strip()}: {d.name.strip()}" for d in devices)
    raise DeviceError(f"no OpenCL device matches {base!r}; available: {names}")


_OPEN: dict[tuple[str, str], Device] = {}
_PROBES: dict[str, str] = {}
_PROBE_SOURCE = "__kernel void litecl_probe(__global int* a) { a[get_global_id(0)] = 1; }"


def probe_compiler(d: "cl.Device") -> str:
    """'' if ``d`` builds a trivial kernel, else the first line of the build error.

    Measured: PoCL 3.0 (pocl-binary-distribution, LLVM 14) cannot build anything on AMD
    Zen 5 hosts ("unknown target CPU 'generic'"), so a device is tried before use.
    """
    key = f"{d.platform.name}|{d.name}|{d.int_ptr}"
    if key not in _PROBES:
        import warnings  # noqa: PLC0415

        try:
            ctx = cl.Context([d])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cl.Program(ctx, _PROBE_SOURCE).build()
            _PROBES[key] = ""
        except Exception as e:  # cl.RuntimeError with the build log, or a driver error
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            err = next((ln for ln in lines if "error" in ln.lower() and "build" not in ln.lower()),
                       lines[0] if lines else type(e).__name__)
            _PROBES[key] = err[:200]
    return _PROBES[key]


def open_device(spec: str | Device | None = None) -> Device:
    """Open (or reuse) the device named by ``spec``.

    spec: None (read ``LITECL_DEVICE``, default ``auto``), a Device (returned as is), or
    ``NAME[:profile=PROFILE]`` with NAME in auto/pocl/intel/oclgrind/nvidia or a platform
    or device name substring. One context and queue per (device, profile) per process.
    Raises DeviceError when nothing matches or the spec is malformed.
    """
    if isinstance(spec, Device):
        return spec
    base, profile = parse_spec(spec)
    d = _select(base)
    k = (f"{d.platform.name}|{d.name}|{d.int_ptr}", profile)
    if k not in _OPEN:
        ctx = cl.Context([d])
        queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        caps = replace(read_caps(d, profile), compiler_error=probe_compiler(d))
        _OPEN[k] = Device(d, ctx, queue, caps)
    return _OPEN[k]
