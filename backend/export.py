"""``litecl export``: the kernels litecl.Delegate launches for a model, as files an app can
use without litecl: the OpenCL C sources and a manifest of the launches, in order.

What is exported is read from the delegate's own plans after allocate_tensors
(``Delegate.partitions()``: each delegated partition's PartitionPlan, backend/kernels.py)
for the subgraph that runs (the signature's, else subgraph 0): per launch, its kernel file
and name, its buffer arguments (tensor indices, inputs then outputs), the uint arguments
of its former/tail plan (``kernel_args()``, ops/tiling.py), its global and local size,
and the constant operands it reads. A launch whose inputs are all constants (``folded``)
runs once per plan, not per invoke. ``delegated_partitions`` is the one place that reads
the partitions.

Between two partitions LiteRT runs the model's other nodes: a partition's ``inputs`` are
LiteRT's tensors at the time the partition runs (model inputs or LiteRT nodes' outputs),
its ``outputs`` what LiteRT reads after it.

Files written to ``DIR`` (missing, empty, or holding an earlier export, whose files are
replaced; any other folder is refused: ``export``):

- ``manifest.json`` (``FORMAT``; fields in ``build_manifest``; ``native``: the native
  delegate; ``files``: every file of this export, the library build.sh makes included);
- ``kNNN_<kernel>.cl``: one OpenCL C file per distinct kernel source;
- ``t<index>.bin``: each constant operand, raw little-endian;
- the native delegate: ``plan.c``, ``src/``, ``build.sh``, ``delegate_options.json``.

``target`` ("gpu" or "cpu") picks the LAUNCH row and code path of that device type
(``Caps.is_gpu``) whatever the device is: the generators take capabilities as data, so
``target="gpu", device="pocl:profile=mobile"`` gives the mobile-GPU kernels on a laptop,
built on PoCL (the delegate builds every program at allocate_tensors).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from .errors import InputError

__all__ = ["delegated_partitions", "allocate", "build_manifest", "export", "target_device", "TARGETS",
           "PLACEMENTS", "FORMAT"]

TARGETS = ("gpu", "cpu")
PLACEMENTS = ("all", "auto")  # Delegate(placement=...)
#: manifest.json's "format": bumped when a field changes meaning (2: launches read from the
#: delegate's partitions, each launch names its partition; no C host; 3: "native", the
#: TFLite delegate written beside it; 4: a launch's scalar args may go on past the tiling's
#: four uints with int ones, a quantized ADD's constants; 5: sources hold every architecture's
#: text (ops/add.py arch_source), build_options {arch: option})
FORMAT = "litecl-export-5"
#: the tiling's scalar parameters (ops/codegen.py TILING_PARAMS), all OpenCL uint; the ops'
#: arguments after them (Launch.args) are int
_SCALAR_CTYPE = "uint"


def delegated_partitions(delegate, subgraphs=None, owner=None) -> list:
    """[(subgraph, partition)] of ``delegate``'s live partition kernels that have a plan
    (LiteRT prepared them: after allocate_tensors), in execution order; ``subgraphs``:
    only those subgraph numbers (Delegate.placement()'s ``subgraph``); ``owner``: only
    that interpreter's contexts (Delegate.owning; None: every interpreter's). A partition
    has ``number``, ``nodes`` (node views: .index, .op, .inputs, .outputs), ``inputs``,
    ``outputs`` (tensor indices), ``sg.tensors[t]`` (.name, .dtype, .constant),
    ``ctx_addr`` and ``plan`` (kernels.PartitionPlan)."""
    # the subgraph number is the context's subgraph index in its interpreter, as
    # placement() numbers it (Delegate.subgraph_records' "context"); with owner None and
    # a delegate shared by interpreters, each of them has its subgraph 0
    order = {r["context"]: r["subgraph"] for r in delegate.subgraph_records(owner)}
    out = []
    for p in delegate.partitions(owner):
        si = order.get(p.ctx_addr)
        if p.plan is None or si is None or (subgraphs is not None and si not in subgraphs):
            continue
        out.append((si, p))
    return out


def allocate(interp, signature: str | None = None) -> None:
    """allocate_tensors for signature ``signature``'s subgraph (None: the primary
    subgraph), so that LiteRT prepares the delegate's partition kernels there and they
    plan their launches. LiteRT's SignatureRunner has no allocate_tensors: it allocates
    its subgraph inside __call__, with the call made here. An error inside the delegate
    raises litecl's own error."""
    if signature is None:
        interp.allocate_tensors()
        return
    runner = interp.get_signature_runner(signature)
    try:
        runner._interpreter_wrapper.AllocateTensors(runner._subgraph_index)
    except RuntimeError:
        d = getattr(interp, "delegate", None)  # LiteRT's own Interpreter has none
        err = d.take_error() if d is not None else None
        if err is not None:
            raise err from None
        raise


def target_device(device, target: str | None):
    """``device`` (a litecl Device) as a device of type ``target``: its caps with
    ``is_gpu`` set, so ops/tiling.py's LAUNCH row and the generators' code path are those
    of that type; the context and queue stay the real device's (kernels are built and run
    there). ``nontemporal`` (streaming stores) is probed on CPU devices only, so a GPU
    target has none. None: the device as it is. Raises InputError for another target."""
    from .device import Device  # noqa: PLC0415

    if target is None:
        return device
    if target not in TARGETS:
        raise InputError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    gpu = target == "gpu"
    if device.caps.is_gpu == gpu:
        return device
    caps = replace(device.caps, is_gpu=gpu, nontemporal=device.caps.nontemporal and not gpu)
    return Device(device.device, device.context, device.queue, caps)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _caps_json(caps) -> dict:
    keep = ("platform", "name", "vendor", "driver", "fp16", "fp64", "int64", "compute_units",
            "max_work_group_size", "is_gpu", "strict_compiler", "profile", "nontemporal",
            "mem_base_addr_align")
    return {k: getattr(caps, k) for k in keep}


def build_manifest(parts: list, caps, *, model: str, signature, subgraph: int, target: str,
                   placement: str = "all") -> tuple[dict, dict]:
    """(manifest dict, {source: file name}) for the partitions ``parts`` (from
    ``delegated_partitions``, all of subgraph ``subgraph``) planned for ``caps``.

    Manifest fields: format, litecl_version, model, signature, subgraph, target, device
    {platform, name, profile}, caps, launch_row (ops/tiling.py LaunchConfig), placement,
    lowered_nodes (the delegated nodes), partitions [{partition, nodes, inputs, outputs}],
    tensors [{index, name, dtype, shape, elements, bytes, role: "input" (LiteRT's memory
    when the partition runs) | "constant" (file t<index>.bin) | "written" (a launch's
    output), partition_output}], inputs, outputs (tensor indices by role), launches
    [{partition, kernel, source (file: OpenCL C for every architecture, ops/add.py
    arch_source), build_options ({arch: the -D option to build it with where LiteRT runs on
    arch}), kind "kernel"|"fused", what,
    folded, nodes [{index, op}], args [buffer/constant: {kind, tensor, elements, access};
    scalar: {kind, name, ctype, value}], global_size, local_size, reads, writes}].
    """
    from . import __version__  # noqa: PLC0415
    from .ops.add import FLOAT_ADD_RULES, arch_define  # noqa: PLC0415
    from .ops.codegen import TILING_PARAMS  # noqa: PLC0415
    from .ops.tiling import launch_config  # noqa: PLC0415

    launches = [(p, ln) for _, p in parts for ln in p.plan.launches]
    text = {}  # id(Launch) -> its program text for every architecture (_arch_texts)
    for _, p in parts:
        consts = {t for t in p.inputs if p.sg.tensors[t].constant}
        fused = any(len(ln.nodes) > 1 for ln in p.plan.launches)
        shapes = {t: tuple(p.plan.shapes[t]) for t in p.inputs}
        for ln, t in zip(p.plan.launches, _arch_texts(p.plan, p.nodes, p.sg, shapes, caps, set(p.outputs),
                                                      consts, fused)):
            text[id(ln)] = t
    written = {t for _, ln in launches for t in ln.outputs}
    touched = list(dict.fromkeys(t for _, ln in launches for t in (*ln.inputs, *ln.outputs)))
    view, shape_of, part_out = {}, {}, set()
    for _, p in parts:
        part_out.update(p.outputs)
        for t in {t for ln in p.plan.launches for t in (*ln.inputs, *ln.outputs)}:
            view[t], shape_of[t] = p.sg.tensors[t], p.plan.shapes[t]
    files: dict[str, str] = {}
    for _, ln in launches:
        if text[id(ln)] not in files:
            files[text[id(ln)]] = f"k{len(files):03d}_{ln.name}.cl"
    tensors = []
    for t in sorted(touched):
        tt, shape = view[t], [int(d) for d in shape_of[t]]
        role = "constant" if tt.constant else "written" if t in written else "input"
        entry = {"index": t, "name": tt.name, "dtype": tt.dtype.name, "shape": shape,
                 "elements": _numel(shape), "bytes": _numel(shape) * tt.dtype.itemsize, "role": role,
                 "partition_output": t in part_out}
        if role == "constant":
            entry["file"] = f"t{t}.bin"
        tensors.append(entry)
    out = []
    for p, ln in launches:
        args = []
        for t in (*ln.inputs, *ln.outputs):
            kind = "constant" if view[t].constant else "buffer"
            a = {"kind": kind, "tensor": t, "elements": _numel(shape_of[t]),
                 "access": "write" if t in ln.outputs else "read"}
            if kind == "constant":
                a["file"] = f"t{t}.bin"
            args.append(a)
        for name, v in zip(TILING_PARAMS, ln.tiling.kernel_args()):
            args.append({"kind": "scalar", "name": name, "ctype": _SCALAR_CTYPE, "value": int(v)})
        for name, v in ln.args:  # the ops' int arguments (a quantized ADD's constants)
            args.append({"kind": "scalar", "name": name, "ctype": "int", "value": int(v)})
        ops = {n.index: n.op for n in p.nodes}
        out.append({
            "partition": p.number, "kernel": ln.name, "source": files[text[id(ln)]],
            "build_options": {a: f"-D{arch_define(a)}" for a in FLOAT_ADD_RULES},
            "kind": "fused" if len(ln.nodes) > 1 else "kernel", "what": ln.what, "folded": ln.folded,
            "nodes": [{"index": i, "op": ops[i]} for i in ln.nodes],
            "args": args, "global_size": list(ln.gsize), "local_size": list(ln.lsize),
            "reads": list(dict.fromkeys(ln.inputs)), "writes": list(ln.outputs),
        })
    manifest = {
        "format": FORMAT,
        "litecl_version": __version__,
        "model": model,
        "signature": signature,
        "subgraph": subgraph,
        "target": target,
        "device": {"platform": caps.platform, "name": caps.name, "profile": caps.profile or None},
        "caps": _caps_json(caps),
        "launch_row": asdict(launch_config(caps)),
        "placement": placement,
        "lowered_nodes": sorted(n.index for _, p in parts for n in p.nodes),
        "partitions": [{"partition": p.number, "nodes": [n.index for n in p.nodes],
                        "inputs": list(p.inputs), "outputs": list(p.outputs)} for _, p in parts],
        "tensors": tensors,
        "inputs": [t["index"] for t in tensors if t["role"] == "input"],
        "outputs": [t["index"] for t in tensors if t["role"] == "written"],
        "launches": out,
    }
    return manifest, files


def _constant_bytes(interp, si: int, t: int, dtype) -> bytes:
    """Tensor ``t``'s constant value, little-endian: the model's data, else LiteRT's
    (a tensor LiteRT computed once at prepare)."""
    data = interp._model.subgraphs[si].tensors[t].data
    if data is None:
        data = interp.get_tensor(t, si)
    return np.ascontiguousarray(data).astype(dtype.np.newbyteorder("<"), copy=False).tobytes()


# ---------------------------------------------------------------------- native delegate
#: the fixed C sources (backend/native/) copied to ``DIR/src``
NATIVE_SOURCES = ("litecl_delegate.c", "cl_loader.c", "cl_loader.h", "litert_check.c", "litert_check.h",
                  "tflite_abi.h", "litecl_plan.h")
SO_NAME = "liblitecl_delegate.so"
#: build.sh: the only dependencies are libc and libdl (OpenCL is dlopen'ed at run time)
BUILD_SH = """#!/bin/sh
# Builds liblitecl_delegate.so, litecl's TFLite delegate for {model}
# (exported by litecl {version} for {where}), into build/<abi>/ (Android's jniLibs
# names: x86_64, arm64-v8a, ...; the ABI is CC's target), and links {so} here to a build
# for this machine's own architecture.
# Cross builds: CC=aarch64-linux-gnu-gcc sh build.sh; Android: CC=<NDK clang for the ABI> sh build.sh
# Your flags: CFLAGS="-O0 -g" sh build.sh (they come after litecl's, so they win; to build
# with warnings that are not errors: CFLAGS=-Wno-error sh build.sh)
set -e
cd "$(dirname "$0")"
cc=${{CC:-cc}}
target=$($cc -dumpmachine)
case "$target" in
    x86_64-*) abi=x86_64 ;;
    aarch64-*|arm64-*) abi=arm64-v8a ;;
    *) echo "build.sh: CC's target $target is not x86_64 or aarch64 (litecl's native delegate is LP64)" >&2; exit 2 ;;
esac
mkdir -p "build/$abi"
$cc -std=c99 -Wall -Wextra -Werror -O2 -fPIC -shared -fvisibility=hidden -Isrc ${{CFLAGS:-}} \\
    -o "build/$abi/{so}" src/litecl_delegate.c src/cl_loader.c src/litert_check.c plan.c -ldl
case "$(uname -m)-$abi" in
    x86_64-x86_64|aarch64-arm64-v8a) ln -sf "build/$abi/{so}" {so} ;;
esac
echo "built $(pwd)/build/$abi/{so}"
"""


def fingerprint(ctx) -> list[int]:
    """The int32 stream litecl_delegate.c ``fingerprint_matches`` rebuilds from a
    TfLiteContext at its Prepare: tensor and node counts; per node of the execution plan
    its index, builtin code, version, inputs, outputs (ADD: activation, pot_scale_int16);
    per tensor its TfLiteType, signature shape (dims_signature, else dims), per-tensor
    scale as float bits and zero point. Read here through backend/abi.py from the same
    LiteRT, so both sides read the same fields.

    Only what a resize leaves alone: read at construction with AllowDynamicTensors, the
    context holds the model's tensors only. A delegate without that flag is prepared
    after LiteRT ran every op's prepare, which appends the ops' temporaries (MoveNet:
    334 tensors, 333 in the model; their shapes follow the inputs): the C side compares
    the first ``tensor count`` tensors and asks for at least that many."""
    import ctypes as C  # noqa: PLC0415
    import struct  # noqa: PLC0415

    from . import abi  # noqa: PLC0415

    c = ctx.contents
    plan_p = C.POINTER(abi.TfLiteIntArray)()
    if c.GetExecutionPlan(ctx, C.byref(plan_p)) != abi.K_OK:
        raise RuntimeError("GetExecutionPlan failed")
    plan = abi.int_array(plan_p)
    out = [int(c.tensors_size), len(plan)]
    for i in plan:
        node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
        if c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p)) != abi.K_OK:
            raise RuntimeError(f"GetNodeAndRegistration failed for node {i}")
        node, reg = node_p.contents, reg_p.contents
        ins, outs = abi.int_array(node.inputs), abi.int_array(node.outputs)
        out += [i, reg.builtin_code, reg.version, len(ins), *ins, len(outs), *outs]
        if reg.builtin_code == abi.BUILTIN_ADD:
            if node.builtin_data:
                p = C.cast(node.builtin_data, C.POINTER(abi.TfLiteAddParams)).contents
                out += [int(p.activation), int(bool(p.pot_scale_int16))]
            else:
                out += [0, 1]
    for t in range(c.tensors_size):
        ts = c.tensors[t]
        dims = abi.int_array(ts.dims_signature) if ts.dims_signature else (
            abi.int_array(ts.dims) if ts.dims else None)
        out += [ts.type] + ([-1] if dims is None else [len(dims), *dims])
        out += [struct.unpack("<i", struct.pack("<f", ts.params.scale))[0], int(ts.params.zero_point)]
    return out


def _probe(model: str, flags: int):
    """(fingerprints per subgraph LiteRT prepares, errors) read by a delegate with
    ``flags`` that claims nothing, on a plain LiteRT Interpreter (resolver
    BUILTIN_WITHOUT_DEFAULT_DELEGATES), at construction; fingerprints None when LiteRT
    refuses the delegate (the Interpreter raises)."""
    import ctypes as C  # noqa: PLC0415
    import types  # noqa: PLC0415

    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    from . import abi  # noqa: PLC0415

    seen: dict = {}
    errors: list = []

    @abi.DELEGATE_PREPARE
    def probe(ctx, dlg):
        try:
            seen.setdefault(C.addressof(ctx.contents), fingerprint(ctx))
        except BaseException as e:  # noqa: BLE001 (nothing may leave a ctypes callback)
            errors.append(repr(e))
        return abi.K_OK

    st = abi.TfLiteDelegate()
    st.Prepare = probe
    st.flags = flags
    holder = types.SimpleNamespace(_get_native_delegate_pointer=lambda: C.addressof(st))
    _KEEP.append((st, probe))  # LiteRT may hold the struct until the process ends
    try:
        it = Interpreter(model_path=model, experimental_delegates=[holder],
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    except (RuntimeError, ValueError):
        return None, errors
    del it
    return list(seen.values()), errors


def model_fingerprints(model: str, signatures) -> list[list[int]]:
    """Per subgraph LiteRT prepares (in the order it prepares them: the order
    Delegate.placement() numbers them), the fingerprint LiteRT's context gives a
    delegate that is applied first, read with AllowDynamicTensors as litecl's delegates
    (without it LiteRT prepares every op first, which adds their temporaries)."""
    from . import abi  # noqa: PLC0415

    fps, errors = _probe(model, abi.ALLOW_DYNAMIC_TENSORS)
    if errors or fps is None:
        raise InputError("cannot read the model's fingerprint through LiteRT: "
                         f"{errors[0] if errors else 'LiteRT refused the probing delegate'}")
    return fps


def delegate_flags(model: str) -> int:
    """The native delegate's TfLiteDelegate flags for ``model``. Without
    AllowDynamicTensors LiteRT treats the graph as static: it propagates shapes before
    the delegate's Prepare and, after resize_tensor_input, undoes the delegate and runs
    its Prepare again at the new shapes (measured, LiteRT 2.3.0), so a kernel whose
    broadcast is compiled in is left to LiteRT there (litecl_delegate.c
    ``delegate_prepare``) and the model runs on, bit-exact. A graph with a tensor whose
    shape is known only at invoke makes LiteRT refuse such a delegate (tried here: the
    Interpreter raises): those models keep the flag (1), and there a resize that changes
    a compiled-in broadcast's shapes fails that partition's prepare with one line, since
    LiteRT keeps the delegate's nodes across the resize and asks its Prepare nothing."""
    from . import abi  # noqa: PLC0415

    fps, _ = _probe(model, 0)
    return 0 if fps is not None else abi.ALLOW_DYNAMIC_TENSORS


_KEEP: list = []


def _icd_libraries() -> list[str]:
    """OpenCL libraries that may provide a platform: the targets of the .icd files the
    ICD loader reads (OCL_ICD_VENDORS as litecl wires it, the system vendors folder,
    pyopencl's bundled ones), then Intel's libintelocl.so."""
    import sys  # noqa: PLC0415

    out: list[str] = []
    folders = []
    v = os.environ.get("OCL_ICD_VENDORS", "")
    if v and os.path.isdir(v):
        folders.append(Path(v))
    elif v.endswith(".icd") and os.path.isfile(v):
        out.append(Path(v).read_text().splitlines()[0].strip())
    elif v:
        out.append(v)
    folders.append(Path(os.environ.get("OPENCL_VENDOR_PATH") or "/etc/OpenCL/vendors"))
    try:
        import pyopencl  # noqa: PLC0415

        folders.append(Path(pyopencl.__file__).parent.parent / "pyopencl.libs")
        folders.append(Path(pyopencl.__file__).parent / ".libs")
    except ImportError:
        pass
    for folder in folders:
        for f in sorted(folder.glob("*.icd")) if folder.is_dir() else []:
            try:
                lib = f.read_text().splitlines()[0].strip()
            except (OSError, IndexError):
                continue
            if lib and not os.path.isabs(lib) and (folder / lib).exists():
                lib = str(folder / lib)  # pyopencl's .icd files name a library beside them
            out.append(lib)
    out.append(str(Path(sys.prefix) / "lib" / "libintelocl.so"))
    return list(dict.fromkeys(out))


def _platforms_of(lib: str) -> list[tuple[str, list[str]]]:
    """[(platform name, [device names])] of one OpenCL library, read the way
    cl_loader.c reaches it (direct exports, else clIcdGetPlatformIDsKHR and the ICD
    dispatch table); [] when it cannot be opened."""
    import ctypes as C  # noqa: PLC0415

    try:
        h = C.CDLL(lib)
    except OSError:
        return []
    u32, vp, sz = C.c_uint32, C.c_void_p, C.c_size_t
    info_t = C.CFUNCTYPE(C.c_int32, vp, u32, sz, vp, C.POINTER(sz))
    ids_t = C.CFUNCTYPE(C.c_int32, vp, C.c_uint64, u32, C.POINTER(vp), C.POINTER(u32))
    plat_t = C.CFUNCTYPE(C.c_int32, u32, C.POINTER(vp), C.POINTER(u32))
    try:
        get_plats = plat_t(C.cast(h.clGetPlatformIDs, vp).value)
        direct = True
    except AttributeError:
        direct = False
        try:
            gea = h.clGetExtensionFunctionAddress
        except AttributeError:
            return []
        gea.restype, gea.argtypes = vp, [C.c_char_p]
        addr = gea(b"clIcdGetPlatformIDsKHR")
        if not addr:
            return []
        get_plats = plat_t(addr)
    n = u32(0)
    if get_plats(0, None, C.byref(n)) != 0 or not n.value:
        return []
    plats = (vp * n.value)()
    if get_plats(n.value, plats, None) != 0:
        return []

    def fn(p, index, name, ftype):
        if direct:
            return ftype(C.cast(getattr(h, name), vp).value)
        table = C.cast(C.cast(p, C.POINTER(vp))[0], C.POINTER(vp))
        return ftype(table[index])

    def text(f, obj, param):
        buf = C.create_string_buffer(1024)
        return buf.value.decode("utf-8", "replace") if f(obj, param, 1023, buf, None) == 0 else ""

    out = []
    for p in plats:
        pinfo = fn(p, 1, "clGetPlatformInfo", info_t)
        devids = fn(p, 2, "clGetDeviceIDs", ids_t)
        dinfo = fn(p, 3, "clGetDeviceInfo", info_t)
        nd = u32(0)
        devs = (vp * 16)()
        names = []
        if devids(p, 0xFFFFFFFF, 16, devs, C.byref(nd)) == 0:
            names = [text(dinfo, devs[i], 0x102B) for i in range(min(nd.value, 16))]
        out.append((text(pinfo, p, 0x0902), names))
    return out


def opencl_library(platform: str, device: str) -> str:
    """The OpenCL library (path, or a name the dynamic loader finds) that provides
    ``platform``'s device ``device``: delegate_options.json's ``library``. Raises
    InputError when none of _icd_libraries() does."""
    for lib in _icd_libraries():
        for pname, devs in _platforms_of(lib):
            if pname == platform and device in devs:
                return lib
    raise InputError(f"cannot find the OpenCL library providing {platform}: {device} "
                     "(looked at the ICD loader's .icd files and Intel's libintelocl.so)")


def _c_string(text: str) -> str:
    """``text`` as C string literal lines (ASCII; other bytes as octal escapes)."""
    lines = []
    for line in text.encode("utf-8").split(b"\n"):
        esc = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92, 63) else f"\\{b:03o}" for b in line)
        lines.append(f'"{esc}\\n"')
    if text and not text.endswith("\n"):
        lines[-1] = lines[-1][:-3] + '"'
    return "\n    ".join(lines) if lines else '""'


def _c_bytes(data: bytes) -> str:
    rows = [", ".join(str(b) for b in data[i:i + 24]) for i in range(0, len(data), 24)]
    return "{\n    " + ",\n    ".join(rows) + "\n}"


def _q(s) -> str:
    return _c_string(str(s)) if s is not None else "NULL"


def _shape_generic(launch, nodes, sg, shapes: dict, caps, keep, constants, fuse) -> bool:
    """Whether ``launch``'s source holds for other element counts: every operand has the
    output's shape or is one element (a scalar the kernel splats: x + 0.25), so no
    broadcast index arithmetic is compiled in, and planning the same nodes with that
    shape replaced by another gives the same source. Otherwise the kernel runs at the
    exported shapes only (litecl_delegate.c declines others)."""
    from .kernels import plan_partition  # noqa: PLC0415

    e = tuple(shapes[launch.outputs[0]])
    if any(tuple(shapes[t]) != e and _numel(shapes[t]) != 1 for t in (*launch.inputs, *launch.outputs)):
        return False
    if any(tuple(shapes[t]) != e for t in launch.outputs):
        return False
    alt_shape = (_numel(e) + 37,)
    ins = {t: (alt_shape if tuple(shapes[t]) == e else tuple(shapes[t]))
           for n in nodes for t in n.inputs if t >= 0 and t in shapes and
           not any(t in m.outputs for m in nodes[:nodes.index(n)])}
    try:
        plan = plan_partition(nodes, sg, ins, caps, keep=keep, constants=constants, fuse=fuse)
    except Exception:  # noqa: BLE001 (a shape the nodes refuse: not generic)
        return False
    same = [ln for ln in plan.launches if ln.nodes == launch.nodes]
    return len(same) == 1 and same[0].source == launch.source and same[0].name == launch.name


def _fixed_elements(launch, nodes, sg, shapes: dict, caps, keep, constants, fuse) -> int:
    """Why a launch that is not ``_shape_generic`` runs at the exported shapes only
    (lcl_launch.fixed_elements, named in the delegate's INFO line): N > 0 when every
    operand has the output's shape and the source is the same when those shapes are
    flattened to their N elements (only the element count is compiled in: a float32 ADD,
    whose NaN choice follows LiteRT's SIMD body and tail, a quantized ADD); 0 when an
    operand has another shape (a broadcast); -1 otherwise."""
    from .kernels import plan_partition  # noqa: PLC0415

    e = tuple(shapes[launch.outputs[0]])
    if any(tuple(shapes[t]) != e for t in (*launch.inputs, *launch.outputs)):
        return 0
    n = _numel(e)
    if n < 1:
        return -1
    ins = {t: ((n,) if tuple(shapes[t]) == e else tuple(shapes[t]))
           for m in nodes for t in m.inputs if t >= 0 and t in shapes and
           not any(t in k.outputs for k in nodes[:nodes.index(m)])}
    try:
        plan = plan_partition(nodes, sg, ins, caps, keep=keep, constants=constants, fuse=fuse)
    except Exception:  # noqa: BLE001 (a shape the nodes refuse)
        return -1
    same = [ln for ln in plan.launches if ln.nodes == launch.nodes]
    return n if len(same) == 1 and same[0].source == launch.source else -1


def tested_versions() -> dict:
    """{distribution: [version prefix, ...]}: the LiteRT / TensorFlow versions whose TFLite
    structs litecl's delegates were checked against (backend/abi.py TESTED, the one list;
    written into plan.c, which refuses any other at tflite_plugin_create_delegate, and
    into the manifest)."""
    from .abi import TESTED  # noqa: PLC0415

    return {dist: list(prefixes) for dist, prefixes in TESTED.items()}


def native_plan(interp, model: str, fingerprints: list, library: str, target: str,
                flags: int = 1) -> tuple[str, dict]:
    """(plan.c text, summary) for litecl.Interpreter ``interp`` after allocate_tensors:
    every subgraph its delegate prepared, with the claimed nodes, partitions and launches
    (the partition's own plan where LiteRT prepared it, else planned here at the declared
    shapes, as the delegate would), one unfused launch per claimed node, every distinct
    program's source and (where the device gives it) binary."""
    import pyopencl as cl  # noqa: PLC0415

    from .kernels import build_program, plan_partition  # noqa: PLC0415
    from .ops.add import arch_define  # noqa: PLC0415
    from .runtime import type_tables_c  # noqa: PLC0415
    from .ops.tiling import launch_config  # noqa: PLC0415

    d = interp.delegate
    caps, dev = d.caps, d.device
    records = d.subgraph_records(id(interp))  # this interpreter's contexts (Delegate.owning)
    if len(records) != len(fingerprints):
        raise InputError(f"LiteRT prepared {len(fingerprints)} subgraph(s) for a plain interpreter and "
                         f"{len(records)} for litecl's: cannot pair them")
    parts_by = {}
    for p in d.partitions(id(interp)):
        parts_by.setdefault(p.ctx_addr, []).append(p)
    ints: list[int] = []

    def span(values) -> str:
        off = len(ints)
        ints.extend(int(v) for v in values)
        return f"{{{off}, {len(values)}}}"

    programs: dict = {}  # source (every architecture's: arch_source) -> (index, name)
    blobs: list = []  # C arrays of the self-test families' inputs and expected bits
    launches_c, parts_c, subs_c = [], [], []
    portable: dict = {}  # id(Launch) -> its program text for every architecture

    def planned(nodes, shapes, keep, consts, fuse, plan=None):
        """``plan`` (else planned here) at ``shapes`` on ``caps``, its launches' program
        texts for every architecture kept in ``portable``."""
        plan = plan or plan_partition(nodes, sg, shapes, caps, keep=keep, constants=consts, fuse=fuse)
        for ln, text in zip(plan.launches, _arch_texts(plan, nodes, sg, shapes, caps, keep, consts, fuse)):
            portable[id(ln)] = (text, ln)  # the launch kept: its id stays its own
        return plan

    def prog(ln) -> int:
        src = portable[id(ln)][0]
        if src not in programs:
            programs[src] = (len(programs), ln.name)
        return programs[src][0]

    needs = {"local": 1, "alloc": 0}  # the largest work-group and buffer the launches use

    families: dict = {}  # family -> (index, C initializer): the self-tests of the single launches

    def family(node, shapes) -> int:
        """LCL_FAMILIES index of ``node``'s self-test family (its canonical kernel a program of
        its own, its edge inputs and both architectures' LiteRT bits), or -1."""
        from . import selftest as S  # noqa: PLC0415
        from .ops.add import FLOAT_ADD_RULES, arch_source  # noqa: PLC0415

        f = S.family_of(node, sg, [shapes[t] for t in node.inputs if t >= 0], caps)
        if f is None or any(S.family_name(f) not in S.table(a) for a in FLOAT_ADD_RULES):
            return -1
        if f not in families:
            texts = {a: S.canonical_kernel(f, replace(caps, arch=a))[0] for a in FLOAT_ADD_RULES}
            _, name, n, tile, args, out_dt, _ = S.canonical_kernel(f, caps)
            src = arch_source(texts)
            if src not in programs:
                programs[src] = (len(programs), name)
            ins = [np.ascontiguousarray(x).tobytes() for x in S.canonical_inputs(f)]
            exp = [bytes.fromhex(S.table(a)[S.family_name(f)]) for a in ("x86_64", "aarch64")]
            k = len(families)
            blobs.extend([f"static const unsigned char F{k}I{j}[{max(len(b), 1)}] = {_c_bytes(b or bytes(1))};"
                          for j, b in enumerate(ins)] +
                         [f"static const unsigned char F{k}E{j}[{max(len(b), 1)}] = {_c_bytes(b or bytes(1))};"
                          for j, b in enumerate(exp)])
            kind = {"float16": 2, "bfloat16": 3, "float32": 4, "complex64": 4, "float64": 8}.get(out_dt.name, 0)
            inputs = ", ".join(f"F{k}I{j}" for j in range(len(ins))) or "NULL"
            sizes = ", ".join(str(len(b)) for b in ins) or "0"
            families[f] = (k, f"{{{_q(S.family_name(f))}, {programs[src][0]}, {n}, {tile}, "
                              f"{span([v for _, v in args])}, {len(ins)}, {{{inputs}}}, {{{sizes}}}, "
                              f"{{F{k}E0, F{k}E1}}, {len(exp[0])}, {kind}}}")
        return families[f][0]

    def launch_c(ln, shapes, generic, dynamic=False, fixed=0, fam=-1) -> str:
        needs["local"] = max(needs["local"], *(int(x) for x in ln.lsize or (1,)))
        needs["alloc"] = max(needs["alloc"], *(_numel(shapes[t]) * sg.tensors[t].dtype.itemsize
                                                for t in (*ln.inputs, *ln.outputs) if t in shapes))
        # shape_fixed: 0 elementwise, 1 the exported shapes compiled in, 2 the same but the
        # Python delegate planned it only at invoke (shapes unknown at allocate): declined;
        # fixed: why (_fixed_elements)
        tile = 32 // ln.tiling.align_num
        shp = [x for t in ln.inputs for x in (len(shapes[t]), *shapes[t])]
        launches_c.append(f"{{{prog(ln)}, {tile}, {0 if generic else 2 if dynamic else 1}, {span(ln.nodes)}, {span(ln.inputs)}, "
                          f"{span(ln.outputs)}, {span(shp)}, {0 if generic else fixed}, {span([v for _, v in ln.args])}, "
                          f"{fam}}}")
        return launches_c[-1]

    from .abi import ALLOW_DYNAMIC_TENSORS  # noqa: PLC0415
    summary = {"subgraphs": []}
    for si, (rec, fp) in enumerate(zip(records, fingerprints)):
        addr = rec["context"]
        if fp[1] != rec["nodes"]:
            raise InputError(f"subgraph {si}: {fp[1]} nodes for a plain interpreter, {rec['nodes']} for litecl's")
        claimed = sorted(r["index"] for r in rec["rows"] if r["placement"] == "opencl")
        sg = rec["sg"]
        first_part = len(parts_c)
        part_rows = []
        dynamic_nodes = set()
        for p in sorted(parts_by.get(addr, []), key=lambda p: p.number):
            consts = {t for t in p.inputs if sg.tensors[t].constant}
            plan = p.plan
            if plan is None:  # not planned at allocate (dynamic shapes, a signature never allocated)
                dynamic_nodes.update(n.index for n in p.nodes)
                shapes = {t: tuple(sg.tensors[t].shape) for t in p.inputs}
            else:
                shapes = {t: tuple(plan.shapes[t]) for t in p.inputs}
            # fused as the delegate planned it (it unfuses a group the compiler refuses)
            fused = d.fuse if plan is None else any(len(ln.nodes) > 1 for ln in plan.launches)
            plan = planned(p.nodes, shapes, set(p.outputs), consts, fused, plan)
            first = len(launches_c)
            for ln in plan.launches:
                generic = _shape_generic(ln, p.nodes, sg, plan.shapes, caps, set(p.outputs), consts, d.fuse)
                fixed = 0 if generic else _fixed_elements(ln, p.nodes, sg, plan.shapes, caps, set(p.outputs),
                                                          consts, d.fuse)
                launch_c(ln, plan.shapes, generic, fixed=fixed)
            nodes = sorted(n.index for n in p.nodes)
            parts_c.append(f"{{{span(nodes)}, {first}, {len(plan.launches)}}}")
            part_rows.append({"nodes": nodes, "launches": len(plan.launches), "shapes": plan.shapes,
                              "p": p})
        # one unfused launch per claimed node, at the shapes of its partition's plan
        first_single = len(launches_c)
        at_invoke = []  # claimed by litecl.Delegate, left to LiteRT by the native delegate
        for i in claimed:
            pr = next(r for r in part_rows if i in r["nodes"])
            n = next(n for n in pr["p"].nodes if n.index == i)
            shapes = {t: tuple(pr["shapes"][t]) for t in n.inputs if t >= 0}
            consts = {t for t in shapes if sg.tensors[t].constant}
            plan = planned([n], shapes, set(n.outputs), consts, False)
            (ln,) = plan.launches
            generic = _shape_generic(ln, [n], sg, plan.shapes, caps, set(n.outputs), consts, False)
            e = tuple(plan.shapes[ln.outputs[0]])
            # shapes known only at invoke: only a kernel whose operands all share the output's
            # shape follows them (a one-element operand may grow: a broadcast then)
            if i in dynamic_nodes and any(tuple(plan.shapes[t]) != e for t in ln.inputs):
                generic = False
            fixed = 0 if generic else _fixed_elements(ln, [n], sg, plan.shapes, caps, set(n.outputs), consts, False)
            dynamic = i in dynamic_nodes and not generic
            launch_c(ln, plan.shapes, generic, dynamic=dynamic, fixed=fixed, fam=family(n, plan.shapes))
            if dynamic and flags & ALLOW_DYNAMIC_TENSORS:  # litecl_delegate.c delegate_prepare declines it
                at_invoke.append(i)
        subs_c.append(f"{{{span(fp)}, {span(claimed)}, {rec['nodes']}, {first_part}, "
                      f"{len(parts_c) - first_part}, {first_single}}}")
        # claimed: litecl.Delegate's nodes; native_claimed: the native delegate's at the
        # exported shapes; left_at_invoke: the difference (shapes known only at invoke, a
        # kernel that compiles them in, a graph whose delegate sets AllowDynamicTensors)
        summary["subgraphs"].append({"subgraph": si, "nodes": rec["nodes"], "claimed": len(claimed),
                                     "partitions": rec["partitions"],
                                     "native_claimed": len(claimed) - len(at_invoke),
                                     "left_at_invoke": at_invoke})
    # programs: the source, and the device's binary (loaded first; the source when the
    # runtime refuses it, litecl_delegate.c ``program``)
    prog_c, bins = [], []
    for source, (k, name) in programs.items():
        binary = None
        try:  # built for this machine's architecture (LCL_PLAN.binary_arch)
            prg = build_program(dev, f"#define {arch_define(caps.arch)}\n{source}")
            binary = prg.get_info(cl.program_info.BINARIES)[0]
        except Exception:  # noqa: BLE001 (no binary: the delegate builds the source)
            binary = None
        if binary:
            bins.append(f"static const unsigned char BIN{k}[{len(binary)}] = {_c_bytes(binary)};")
        prog_c.append(f"{{{_q(name)}, {_c_string(source)},\n     {len(source.encode())}, "
                      f"{f'BIN{k}' if binary else 'NULL'}, {len(binary) if binary else 0}}}")
    row = launch_config(caps)
    mem = d.memory
    tested = [x for dist, prefixes in tested_versions().items() for v in prefixes for x in (dist, v)]
    text = "\n".join([
        f"/* litecl's native delegate plan for {os.path.basename(model)}: written by litecl export",
        f" * (backend/export.py native_plan) for {caps.platform}: {caps.name}"
        f"{' (profile ' + caps.profile + ')' if caps.profile else ''}, target {target}. Do not edit. */",
        '#include "litecl_plan.h"', "",
        *bins, *blobs, "",
        f"const int32_t LCL_INTS[{max(1, len(ints))}] = {{{', '.join(map(str, ints)) or '0'}}};",
        *type_tables_c(),
        "/* (distribution, version prefix): the LiteRT / TensorFlow versions the structs were checked",
        " * against (backend/abi.py TESTED); tflite_plugin_create_delegate refuses any other */",
        f"static const char *const TESTED[{max(1, len(tested))}] = {{{', '.join(map(_q, tested)) or 'NULL'}}};",
        "const lcl_program LCL_PROGRAMS[] = {\n    " + (",\n    ".join(prog_c) or '{"", "", 0, NULL, 0}')
        + "\n};",
        "const lcl_launch LCL_LAUNCHES[] = {\n    " + (",\n    ".join(launches_c) or
                                                    "{0, 1, 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0, {0, 0}, -1}") + "\n};",
        "const lcl_partition LCL_PARTITIONS[] = {\n    " + (",\n    ".join(parts_c) or "{{0, 0}, 0, 0}")
        + "\n};",
        "const lcl_family LCL_FAMILIES[] = {\n    " + (",\n    ".join(v[1] for v in families.values()) or
                                                  '{"", 0, 0, 1, {0, 0}, 0, {NULL, NULL}, {0, 0}, {NULL, NULL}, 0, 0}')
        + "\n};",
        "const lcl_subgraph LCL_SUBGRAPHS[] = {\n    " + (",\n    ".join(subs_c) or
                                                      "{{0, 0}, {0, 0}, 0, 0, 0, 0}") + "\n};",
        "const lcl_plan_info LCL_PLAN = {",
        f"    {_q(library)}, {_q(caps.platform)}, {_q(caps.name)},",
        f"    {_q(os.path.basename(model))}, {_q(_version())}, {_q(target)},",
        f"    {int(mem.in_place)}, {int(mem.align or 0)},",
        f"    {row.local_size}, {row.groups_per_cu}, {row.vec_bytes}, {caps.compute_units}, "
        f"{caps.max_work_group_size},",
        f"    {len(subs_c)}, {len(prog_c)}, PACKED, LCL_N_PACKED, SIZES, LCL_N_SIZES,",
        f"    {int(flags)}, TESTED, {len(tested) // 2},",
        f"    {', '.join(str(int(any(_USES[k].search(p) for p in programs))) for k in ('fp16', 'fp64', 'int64'))}, "
        f"{needs['local']}, {float(needs['alloc'])!r},",
        f"    {len(families)}, {_q(caps.arch)}",
        "};", ""])
    summary.update(programs=len(prog_c), binaries=len(bins), launches=len(launches_c), delegate_flags=int(flags),
                   tested_versions=tested_versions())
    return text, summary


#: what a kernel's text uses that a device may lack (litecl_delegate.c device_lacks)
_USES = {"fp16": re.compile(r"cl_khr_fp16 : enable"), "fp64": re.compile(r"cl_khr_fp64 : enable"),
         "int64": re.compile(r"\bu?long\d*\b")}


def _arch_texts(plan, nodes, sg, shapes, caps, keep, consts, fuse) -> list[str]:
    """Per launch of ``plan`` (planned on ``caps``): its program text for every
    architecture of ops/add.py FLOAT_ADD_RULES (``arch_source``: LiteRT's float ADD bits
    differ between x86-64 and aarch64, and the native delegate runs where LiteRT does, not
    where it was exported). Raises InputError if another architecture's plan launches
    other kernels (it never should: only kernel text depends on it)."""
    from .kernels import plan_partition  # noqa: PLC0415
    from .ops.add import FLOAT_ADD_RULES, arch_source  # noqa: PLC0415

    texts = {}
    for arch in FLOAT_ADD_RULES:
        other = plan if arch == caps.arch else plan_partition(
            nodes, sg, shapes, replace(caps, arch=arch), keep=keep, constants=consts, fuse=fuse)
        if [(ln.name, ln.nodes) for ln in other.launches] != [(ln.name, ln.nodes) for ln in plan.launches]:
            raise InputError(f"nodes {[n.index for n in nodes]}: the {arch} plan launches other kernels")
        texts[arch] = [ln.source for ln in other.launches]
    return [arch_source({a: t[i] for a, t in texts.items()}) for i in range(len(plan.launches))]


def _version() -> str:
    from . import __version__  # noqa: PLC0415

    return __version__


def write_native(out: Path, plan_c: str, options: dict, *, model: str, where: str) -> None:
    """DIR/plan.c, DIR/src/ (backend/native's fixed sources), DIR/build.sh,
    DIR/delegate_options.json."""
    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).parent / "native"
    for name in NATIVE_SOURCES:
        (src / name).write_bytes((here / name).read_bytes())
    (out / "plan.c").write_text(plan_c)
    b = out / "build.sh"
    b.write_text(BUILD_SH.format(model=os.path.basename(model), version=_version(), where=where, so=SO_NAME))
    b.chmod(0o755)
    (out / "delegate_options.json").write_text(json.dumps(options, indent=1) + "\n")


#: the files ``export`` writes besides k*.cl and t*.bin (and the library build.sh makes)
EXPORT_FILES = ("manifest.json", "plan.c", "build.sh", "delegate_options.json", "exported_device.json", SO_NAME,
                *(f"src/{n}" for n in NATIVE_SOURCES))
#: the kernel sources' and constants' names (``build_manifest``): with EXPORT_FILES, the
#: only names a later export removes, whatever a manifest.json lists
_EXPORT_NAME = re.compile(r"k[0-9]{3}_\w+\.cl|t[0-9]+\.bin")


def _listed_files(m: dict) -> list[str]:
    """The files the export that wrote manifest ``m`` lists: its "files"; a manifest from
    before that field: its launches' sources, its constants' files and EXPORT_FILES."""
    if isinstance(m.get("files"), list):
        return [f for f in m["files"] if isinstance(f, str)]
    launches = m.get("launches") if isinstance(m.get("launches"), list) else []
    tensors = m.get("tensors") if isinstance(m.get("tensors"), list) else []
    return [*(ln.get("source") for ln in launches if isinstance(ln, dict) and isinstance(ln.get("source"), str)),
            *(t.get("file") for t in tensors if isinstance(t, dict) and isinstance(t.get("file"), str)),
            *EXPORT_FILES]


def _previous_export(out: Path, out_dir: str) -> list[Path]:
    """The files of ``out`` that an export there replaces: none for a missing or empty
    folder; for a folder holding an earlier ``litecl export`` (its manifest.json is
    litecl's: a JSON object whose "format" starts with "litecl-export-"), the files that
    manifest lists (``_listed_files``) that exist, each only where its name is one an
    export writes (EXPORT_FILES, k*.cl, t*.bin). The user's other files there stay.

    Raises InputError naming ``out_dir`` for any other non-empty folder: litecl does not
    write over files it did not write."""
    if not out.is_dir() or not any(out.iterdir()):
        return []
    why = "no manifest.json"
    try:
        m = json.loads((out / "manifest.json").read_text())
        ours = isinstance(m, dict) and str(m.get("format", "")).startswith("litecl-export-")
        if not ours:
            why = "its manifest.json was not written by litecl export"
    except FileNotFoundError:
        m, ours = None, False
    except (OSError, UnicodeDecodeError, ValueError):
        m, ours, why = None, False, "its manifest.json is unreadable or not JSON"
    if not ours:
        raise InputError(f"cannot export to {out_dir}: the folder holds files but no earlier litecl export ({why}), "
                         "and litecl replaces only an export's own files; name a new or empty folder, "
                         "or empty this one")
    names = dict.fromkeys(f for f in _listed_files(m) if f in EXPORT_FILES or _EXPORT_NAME.fullmatch(f))
    return [out / f for f in names if (out / f).is_file() or (out / f).is_symlink()]


def export(model: str, out_dir: str, *, device=None, target: str | None = None,
           signature: str | None = None, placement: str = "all", fuse: bool = True) -> dict:
    """Write the kernels litecl.Delegate launches for ``model`` (a .tflite path) to
    ``out_dir`` and return the manifest.

    device: a spec or litecl Device (default ``LITECL_DEVICE`` / auto); target: "gpu" or
    "cpu" (default: the device's type), see ``target_device``; signature: that
    signature's subgraph (default subgraph 0, or the first signature when subgraph 0 has
    no inputs, as ``litecl run``); placement, fuse: the Delegate's. The model runs
    through litecl.Interpreter up to allocate_tensors (every program is built there).
    ``out_dir`` is created if missing. It must be missing, empty, or hold an earlier
    litecl export (recognised by its manifest.json): the files that export's manifest
    lists (its "files": what it wrote and the liblitecl_delegate.so its build.sh
    builds, which no longer matches the new plan.c) are removed first, nothing else.
    The manifest's "files" lists this export's. A model with no delegated node gives an
    empty ``launches`` list.

    Raises InputError (bad target, placement, signature; an out_dir that is an empty
    string, a file, not writable, or a non-empty folder with no earlier litecl export in
    it), ModelError (a model path that is missing, a directory or a FIFO, as
    model.model_file says for every command) / litecl errors from loading and allocating
    the model.
    """
    from .device import open_device  # noqa: PLC0415
    from .interpreter import Interpreter  # noqa: PLC0415
    from .model import model_file  # noqa: PLC0415

    if placement not in PLACEMENTS:
        raise InputError(f"unknown placement {placement!r}; expected one of {', '.join(PLACEMENTS)}")
    if target is not None and target not in TARGETS:
        raise InputError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    if not str(out_dir):
        raise InputError("the output folder is empty: name the folder to export to (--out DIR)")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"cannot export to {out_dir}: it is not a folder")
    try:
        replaced = _previous_export(out, out_dir)  # before the model's work: refuse at once
    except PermissionError as e:
        raise InputError(f"cannot export to {out_dir}: {e.strerror or e}") from None
    model_file(model)  # missing, a directory, a FIFO: every command's words, before the device opens
    dev = target_device(open_device(device), target)
    interp = Interpreter(model_path=model, device=dev, placement=placement, fuse=fuse, quiet=True)
    try:
        fingerprints = model_fingerprints(model, None)  # after litecl's verifier accepted it
        flags = delegate_flags(model)
        sigs = interp.get_signature_list()
        if signature is not None and signature not in sigs:
            raise InputError(f"unknown signature {signature!r}; the model has {sorted(sigs) or 'none'}")
        if signature is None and not interp._model.subgraphs[0].inputs and sigs:
            signature = next(iter(sigs))  # as `litecl run` picks
        allocate(interp, signature)
        si = 0 if signature is None else next(s.subgraph for s in interp._model.signatures
                                              if s.key == signature)
        parts = delegated_partitions(interp.delegate, {si}, owner=id(interp))
        manifest, files = build_manifest(parts, interp.delegate.caps, model=os.path.abspath(model),
                                         signature=signature, subgraph=si,
                                         target="gpu" if dev.caps.is_gpu else "cpu", placement=placement)
        dtypes = {t: p.sg.tensors[t].dtype for _, p in parts for t in p.inputs}
        constants = {t["index"]: _constant_bytes(interp, si, t["index"], dtypes[t["index"]])
                     for t in manifest["tensors"] if t["role"] == "constant"}
        caps = interp.delegate.caps
        library = opencl_library(caps.platform, caps.name)
        plan_c, native = native_plan(interp, model, fingerprints, library, manifest["target"], flags)
        # why each CAST/ADD node stays on LiteRT (placement()'s reasons: capability, auto's
        # cost model), so an export that takes nothing can say why
        manifest["kept_on_litert"] = [{"subgraph": r["subgraph"], "index": r["index"], "op": r["op"],
                                       "reason": r["reason"]}
                                      for r in interp.placement() if r["placement"] != "opencl"]
    finally:
        interp.close()
    if not manifest["launches"]:
        manifest["note"] = "litecl's delegate takes no node of this subgraph: nothing to export"
    # delegate_options.json holds no option: the delegate finds OpenCL and a device that can
    # run its kernels where it is loaded (litecl_delegate.c open_device); the exporting
    # machine's library and device, which pin it, go to exported_device.json
    options: dict = {}
    exported = {"library": library, "platform": caps.platform, "device": caps.name}
    manifest["native"] = {**native, "options": options, "exported_device": exported, "build": "sh build.sh",
                          "library": SO_NAME,
                          "sources": ["plan.c", *(f"src/{n}" for n in NATIVE_SOURCES)]}
    # what this export writes, and the library its build.sh writes: what the next export
    # into out_dir replaces (_previous_export)
    manifest["files"] = sorted({*files.values(), *(f"t{t}.bin" for t in constants), *EXPORT_FILES})
    try:
        out.mkdir(parents=True, exist_ok=True)
        for old in replaced:
            old.unlink()
        # the manifest first: an export that fails part-way leaves a folder the next
        # export recognises, with every file written so far listed
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        for src, name in files.items():
            (out / name).write_text(src)
        for t, data in constants.items():
            (out / f"t{t}.bin").write_bytes(data)
        where = f"{caps.platform}: {caps.name}" + (f" (profile {caps.profile})" if caps.profile else "")
        write_native(out, plan_c, options, model=model, where=where)
        (out / "exported_device.json").write_text(json.dumps(exported, indent=1) + "\n")
    except OSError as e:
        raise InputError(f"cannot write to {out_dir}: {e.strerror or e}") from None
    return manifest
