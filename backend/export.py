"""``litecl export``: the kernels litecl.Delegate launches for a model, as files an app can
use without litecl: the OpenCL C sources and a manifest of the launches, in order.

What is exported is the model's plan: what litecl.Delegate decides and plans, read from
LiteRT's graph by a probe delegate (model_plan.py ``ModelPlan``: LiteRT's partitions, and
each partition's PartitionPlan, backend/kernels.py, at the shapes LiteRT prepares it with
at allocate_tensors; nothing is invoked) for the subgraph that runs (the signature's,
else subgraph 0): per launch, its kernel file and name, its buffer arguments (tensor
indices, inputs then outputs), the uint arguments of its former/tail plan
(``kernel_args()``, ops/tiling.py), its global and local size, and the constant operands
it reads. A launch whose inputs are all constants (``folded``) runs once per plan, not
per invoke. ``delegated_partitions`` reads a live Delegate's partitions (bench, inspect).

Between two partitions LiteRT runs the model's other nodes: a partition's ``inputs`` are
LiteRT's tensors at the time the partition runs (model inputs or LiteRT nodes' outputs),
its ``outputs`` what LiteRT reads after it.

Files written to ``DIR`` (missing, empty, or holding an earlier export, whose files are
replaced; any other folder is refused: ``export``):

- ``manifest.json`` (``FORMAT``; fields in ``build_manifest``; ``native``: the native
  delegate; ``files``: every file of this export, the library build.sh makes included);
- ``kNNN_<kernel>.cl``: one OpenCL C file per distinct kernel source;
- ``t<index>.bin``: each constant operand, raw little-endian;
- the native delegate: ``plan.c`` (plan_c.py's ``native_plan``), ``src/``, ``build.sh``, ``delegate_options.json``.

``target`` ("gpu" or "cpu") picks the LAUNCH row and code path of that device type
(``Caps.is_gpu``) whatever the device is: the generators take capabilities as data, so
``target="gpu", device="pocl:profile=mobile"`` gives the mobile-GPU kernels on a laptop,
built on PoCL (the delegate builds every program at allocate_tensors).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from .errors import InputError
from .plan_c import _arch_texts, _numel, _version, native_plan, tested_versions  # noqa: F401  (tested_versions re-exported)

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


def allocate(interp, signature: str | None = None, shapes: dict | None = None) -> None:
    """allocate_tensors for signature ``signature``'s subgraph (None: the primary
    subgraph), so that LiteRT prepares the delegate's partition kernels there and they
    plan their launches; ``shapes`` ({signature input name, or input tensor name without
    a signature: shape}) resizes those inputs first, as the SignatureRunner's call does (a model LiteRT cannot prepare at its
    declared shapes). LiteRT's SignatureRunner has no allocate_tensors: it allocates its
    subgraph inside __call__, with the calls made here. An error inside the delegate
    raises litecl's own error."""
    if signature is None:
        by_name = {x["name"]: x["index"] for x in interp.get_input_details()}
        for name, shape in (shapes or {}).items():
            interp.resize_tensor_input(by_name[name], list(shape))
        interp.allocate_tensors()
        return
    runner = interp.get_signature_runner(signature)
    try:
        for name, shape in (shapes or {}).items():
            runner._interpreter_wrapper.ResizeInputTensor(runner._inputs[name], np.array(shape, dtype=np.int32),
                                                          False, runner._subgraph_index)
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


def _checked_shapes(interp, signature, shapes: dict | None) -> dict | None:
    """``shapes`` ({input name: shape}) checked against the inputs of ``signature``
    (None: the primary subgraph's) of LiteRT Interpreter ``interp``: tuples of ints >= 0.
    Raises InputError naming a name it lacks or a shape that is none."""
    if shapes is None:
        return None
    if not shapes:
        raise InputError("no input shapes given (an --inputs file with no arrays): name the inputs to plan at")
    sigs = interp.get_signature_list()
    names = [x["name"] for x in interp.get_input_details()] if signature is None else \
        list(sigs[signature]["inputs"])
    out = {}
    for name, shape in shapes.items():
        if name not in names:
            where = f"signature {signature!r}" if signature else "the model"
            hint = next((f" (signature {k!r}'s: pass --signature {k})" for k, io in sigs.items()
                         if k != signature and name in io["inputs"]), "")
            raise InputError(f"{name!r} is not an input of {where}{hint}; its inputs: {', '.join(names) or 'none'}")
        try:
            dims = tuple(int(x) for x in shape)
        except (TypeError, ValueError, OverflowError):
            dims = None
        if dims is None or any(not 0 <= x < 1 << 31 for x in dims) or any(not float(x).is_integer() for x in shape):
            raise InputError(f"input {name!r}: shape {shape!r} is not a list of integers from 0 to 2^31 - 1")
        out[name] = dims
    return out


def _constant_bytes(model, si: int, t: int, dtype, held: bytes | None) -> bytes:
    """Tensor ``t``'s constant value, little-endian: the model's data, else ``held``, its
    bytes as LiteRT held them at prepare (a tensor LiteRT computed once there)."""
    data = model.subgraphs[si].tensors[t].data
    if data is None:
        if held is None:
            raise InputError(f"tensor {t}: a constant with no value in the model nor from LiteRT")
        data = np.frombuffer(held, dtype=dtype.np)
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
    the first ``tensor count`` tensors and asks for at least that many. That prepare may
    also write -1 for an output nothing reads (WHILE), which the C side takes for the
    tensor read here on any node but a CAST or ADD."""
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


def _probe(model, flags: int):
    """(fingerprints per subgraph LiteRT prepares, errors) read by a delegate with
    ``flags`` that claims nothing, on a plain LiteRT Interpreter (resolver
    BUILTIN_WITHOUT_DEFAULT_DELEGATES) of ``model`` (a path, or the model's bytes), at
    construction; fingerprints None when LiteRT refuses the delegate (the Interpreter raises)."""
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
        if not isinstance(model, (bytes, bytearray)):  # a path: its bytes (LiteRT's binding takes no
            with open(model, "rb") as f:  # name that is not UTF-8, which Linux allows: a fresh user's)
                model = f.read()
        src = {"model_content": model}
        it = Interpreter(**src, experimental_delegates=[holder],
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    except (RuntimeError, ValueError):
        return None, errors
    del it
    return list(seen.values()), errors


def delegate_flags(model) -> int:
    """The native delegate's TfLiteDelegate flags for ``model`` (a path, or the model's
    bytes), and litecl.Interpreter's own Delegate's under placement="auto". Without
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

    with _without_line(_STATIC_ONLY):  # LiteRT's answer to this probe: no word for the user
        fps, _ = _probe(model, 0)
    return 0 if fps is not None else abi.ALLOW_DYNAMIC_TENSORS


def _dynamic_elsewhere(m, shapes) -> int:
    """AllowDynamicTensors where ``m``'s graph is static at its declared shapes but not at
    the shapes it runs at: ``shapes`` (--inputs), else every -1 of its inputs' shape
    signatures at 2; else 0. A WHILE whose state grows (a concat in its body) is static at
    a declared [1] and dynamic at [5]: LiteRT then refused the exported static delegate at
    allocate_tensors after the app's resize (a fresh user's report). Shapes at which LiteRT
    takes no delegate at all (the model cannot run there) say nothing."""
    from . import abi  # noqa: PLC0415
    from .reader import with_input_shapes  # noqa: PLC0415

    if not shapes:
        sg = m.subgraphs[0]
        shapes = {sg.tensors[t].name: [2 if d == -1 else d for d in sg.tensors[t].shape_signature]
                  for t in sg.inputs if -1 in tuple(sg.tensors[t].shape_signature or ())}
        if not shapes:
            return 0
    try:
        raw = with_input_shapes(m, shapes)
    except (ValueError, KeyError):
        return 0
    if delegate_flags(raw) == 0:
        return 0
    with _without_line(_STATIC_ONLY):
        fps, _ = _probe(raw, abi.ALLOW_DYNAMIC_TENSORS)
    return abi.ALLOW_DYNAMIC_TENSORS if fps is not None else 0


#: the line LiteRT writes when a delegate without AllowDynamicTensors meets a graph with
#: invoke-time shapes (delegate_flags' probe is that delegate on purpose)
_STATIC_ONLY = b"WARNING: Attempting to use a delegate that only supports static-sized tensors"


@contextlib.contextmanager
def _without_line(prefix: bytes):
    """File descriptor 2 through a pipe while the block runs; every line written to it
    but those starting with ``prefix`` is written to the real stderr afterwards. One
    block at a time in the process (_STDERR_LOCK): two threads' blocks interleaved would
    each save the other's pipe as "stderr" (one waits for good on a pipe the other holds
    open, and fd 2 is left on a pipe)."""
    with _STDERR_LOCK:
        with _through_pipe(prefix):
            yield


_STDERR_LOCK = threading.Lock()


@contextlib.contextmanager
def _through_pipe(prefix: bytes):
    sys.stderr.flush()
    saved, (r, w) = os.dup(2), os.pipe()
    got: list = []
    reader = threading.Thread(target=lambda: got.extend(iter(lambda: os.read(r, 65536), b"")), daemon=True)
    reader.start()
    os.dup2(w, 2)
    os.close(w)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # the pipe's last writer closed: the reader ends
        os.close(saved)
        reader.join()
        os.close(r)
        kept = b"".join(ln for ln in b"".join(got).splitlines(keepends=True) if not ln.startswith(prefix))
        if kept:
            os.write(2, kept)


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
    # names in its comments are printable only: a model file named "m\nid > x\n.tflite" ran
    # "id > x" when the user ran build.sh (a fresh user's report)
    b.write_text(BUILD_SH.format(model=_printable(os.path.basename(model)), version=_version(),
                                 where=_printable(where), so=SO_NAME))
    b.chmod(0o755)
    (out / "delegate_options.json").write_text(json.dumps(options, indent=1) + "\n")


def _printable(text: str) -> str:
    """``text`` with every character that is not printable written as its escape."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


#: the files ``export`` writes besides k*.cl and t*.bin (and the library build.sh makes)
EXPORT_FILES = ("manifest.json", "plan.c", "build.sh", "delegate_options.json", "exported_device.json", SO_NAME,
                *(f"src/{n}" for n in NATIVE_SOURCES),
                *(f"build/{abi}/{SO_NAME}" for abi in ("x86_64", "arm64-v8a")))  # what build.sh writes
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
           signature: str | None = None, placement: str = "all", fuse: bool = True,
           shapes: dict | None = None) -> dict:
    """Write the kernels litecl.Delegate launches for ``model`` (a .tflite path) to
    ``out_dir`` and return the manifest.

    device: a spec or litecl Device (default ``LITECL_DEVICE`` / auto); target: "gpu" or
    "cpu" (default: the device's type), see ``target_device``; signature: that
    signature's subgraph (default subgraph 0, or the first signature when subgraph 0 has
    no inputs, as ``litecl run``); placement, fuse: the Delegate's. What litecl.Delegate
    decides and plans is read from LiteRT's graph by a probe delegate (model_plan.py):
    nothing is invoked; every program is built. ``shapes``: {input name (the signature's
    input names with a signature): shape} planned at instead of the model's own (the
    native delegate then claims the nodes whose kernels compile in shapes after the app's
    resize_tensor_input to them, README "Resize").
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
    from .delegate import Delegate  # noqa: PLC0415
    from .device import open_device  # noqa: PLC0415
    from .interpreter import _verified, _visible  # noqa: PLC0415
    from . import abi  # noqa: PLC0415
    from .model import model_file  # noqa: PLC0415
    from .reader import with_input_shapes  # noqa: PLC0415
    from .model_plan import ModelPlan  # noqa: PLC0415

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
    if replaced:  # another model's export (and its builds) go: said, not silently
        with contextlib.suppress(OSError, ValueError, AttributeError):
            was = json.loads((out / "manifest.json").read_text()).get("model")
            if isinstance(was, str) and os.path.basename(was) != os.path.basename(str(model)):
                import warnings  # noqa: PLC0415

                warnings.warn(f"litecl: {out_dir} held the export of {was}: replacing it (and its builds) "
                              f"with {model}'s", RuntimeWarning, stacklevel=2)
    model_file(model)  # missing, a directory, a FIFO: every command's words, before the device opens
    dev = target_device(open_device(device), target)
    m = _verified(model, None)  # litecl's verifier, as litecl.Interpreter's
    d = Delegate(dev, placement=placement, fuse=fuse, quiet=True)
    raw, probe_flags = m.raw, abi.ALLOW_DYNAMIC_TENSORS
    if placement == "auto" and shapes:  # auto prices the nodes at the shapes they run at
        raw = with_input_shapes(m, shapes)  # (interpreter._price_at_running_shapes)
        probe_flags = delegate_flags(raw)
    probe = ModelPlan(raw, d, _visible(m), probe_flags)  # model -> what the delegate decides and plans
    try:
        flags = delegate_flags(model) or _dynamic_elsewhere(m, shapes)
        sigs = probe.interpreter.get_signature_list()
        if signature is not None and signature not in sigs:
            raise InputError(f"unknown signature {signature!r}; the model has {sorted(sigs) or 'none'}")
        if signature is None and not m.subgraphs[0].inputs and sigs:
            signature = next(iter(sigs))  # as `litecl run` picks
        if signature is None and shapes and len(sigs) == 1:  # the only signature's input names
            (key, io), = sigs.items()     # (as `litecl run --inputs`, cli_common._pick_signature)
            if not set(shapes) <= {x["name"] for x in probe.interpreter.get_input_details()} \
                    and set(shapes) <= set(io["inputs"]):
                signature = key
        probe.allocate(signature, _checked_shapes(probe.interpreter, signature, shapes))
        si = 0 if signature is None else next(s.subgraph for s in m.signatures if s.key == signature)
        subs = probe.subgraphs
        parts = [(si, p) for g in subs if g["subgraph"] == si for p in g["parts"] if p.plan is not None]
        caps = d.caps
        manifest, files = build_manifest(parts, caps, model=os.path.abspath(model),
                                         signature=signature, subgraph=si,
                                         target="gpu" if dev.caps.is_gpu else "cpu", placement=placement)
        held = {t: (p.sg.tensors[t].dtype, p.constants.get(t)) for _, p in parts for t in p.inputs}
        constants = {t["index"]: _constant_bytes(m, si, t["index"], *held[t["index"]])
                     for t in manifest["tensors"] if t["role"] == "constant"}
        library = opencl_library(caps.platform, caps.name)
        plan_c, native = native_plan(d, subs, model, library, manifest["target"], flags)
        # why each CAST/ADD node stays on LiteRT (placement()'s reasons: capability, auto's
        # cost model), so an export that takes nothing can say why
        manifest["kept_on_litert"] = [{"subgraph": g["subgraph"], "index": r["index"], "op": r["op"],
                                       "reason": r["reason"]}
                                      for g in subs for r in g["rows"] if r["placement"] != "opencl"]
    finally:
        probe.close()
    if not manifest["launches"]:
        sub = next((g for g in native["subgraphs"] if g["subgraph"] == si), {})
        manifest["note"] = (
            f"litecl's delegate takes {sub['claimed']} node(s) of this subgraph but plans them only at invoke "
            f"(their shapes are known then): no launch is listed here; the native delegate takes "
            f"{sub['native_claimed']} of them at the exported shapes (native.subgraphs)"
            if sub.get("claimed") else "litecl's delegate takes no node of this subgraph" + (
                "; the native delegate takes nodes of other subgraphs (native.subgraphs)"
                if any(g["native_claimed"] for g in native["subgraphs"]) else ": nothing to export"))
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
