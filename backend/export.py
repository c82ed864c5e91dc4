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

Files written to ``DIR``:

- ``manifest.json`` (``FORMAT``; fields in ``build_manifest``);
- ``kNNN_<kernel>.cl``: one OpenCL C file per distinct kernel source;
- ``t<index>.bin``: each constant operand, raw little-endian.

``target`` ("gpu" or "cpu") picks the LAUNCH row and code path of that device type
(``Caps.is_gpu``) whatever the device is: the generators take capabilities as data, so
``target="gpu", device="pocl:profile=mobile"`` gives the mobile-GPU kernels on a laptop,
built on PoCL (the delegate builds every program at allocate_tensors).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from .errors import InputError

__all__ = ["delegated_partitions", "allocate", "build_manifest", "export", "target_device", "TARGETS",
           "PLACEMENTS", "FORMAT"]

TARGETS = ("gpu", "cpu")
PLACEMENTS = ("all", "auto")  # Delegate(placement=...)
#: manifest.json's "format": bumped when a field changes meaning (2: launches read from the
#: delegate's partitions, each launch names its partition; no C host)
FORMAT = "litecl-export-2"
#: the kernels' trailing scalar parameters (ops/codegen.py TILING_PARAMS), all OpenCL uint
_SCALAR_CTYPE = "uint"


def delegated_partitions(delegate, subgraphs=None) -> list:
    """[(subgraph, partition)] of ``delegate``'s live partition kernels that have a plan
    (LiteRT prepared them: after allocate_tensors), in execution order; ``subgraphs``:
    only those subgraph numbers (Delegate.placement()'s ``subgraph``). A partition has
    ``number``, ``nodes`` (node views: .index, .op, .inputs, .outputs), ``inputs``,
    ``outputs`` (tensor indices), ``sg.tensors[t]`` (.name, .dtype, .constant),
    ``ctx_addr`` and ``plan`` (kernels.PartitionPlan)."""
    # the subgraph number is the context's place in the delegate's Prepare order, as
    # placement() numbers it
    order = {addr: i for i, addr in enumerate(delegate._order)}
    out = []
    for p in delegate.partitions():
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
    [{partition, kernel, source (file), build_options, kind "kernel"|"fused", what,
    folded, nodes [{index, op}], args [buffer/constant: {kind, tensor, elements, access};
    scalar: {kind, name, ctype, value}], global_size, local_size, reads, writes}].
    """
    from . import __version__  # noqa: PLC0415
    from .ops.codegen import TILING_PARAMS  # noqa: PLC0415
    from .ops.tiling import launch_config  # noqa: PLC0415

    launches = [(p, ln) for _, p in parts for ln in p.plan.launches]
    written = {t for _, ln in launches for t in ln.outputs}
    touched = list(dict.fromkeys(t for _, ln in launches for t in (*ln.inputs, *ln.outputs)))
    view, shape_of, part_out = {}, {}, set()
    for _, p in parts:
        part_out.update(p.outputs)
        for t in {t for ln in p.plan.launches for t in (*ln.inputs, *ln.outputs)}:
            view[t], shape_of[t] = p.sg.tensors[t], p.plan.shapes[t]
    files: dict[str, str] = {}
    for _, ln in launches:
        if ln.source not in files:
            files[ln.source] = f"k{len(files):03d}_{ln.name}.cl"
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
        ops = {n.index: n.op for n in p.nodes}
        out.append({
            "partition": p.number, "kernel": ln.name, "source": files[ln.source], "build_options": "",
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


def export(model: str, out_dir: str, *, device=None, target: str | None = None,
           signature: str | None = None, placement: str = "all", fuse: bool = True) -> dict:
    """Write the kernels litecl.Delegate launches for ``model`` (a .tflite path) to
    ``out_dir`` and return the manifest.

    device: a spec or litecl Device (default ``LITECL_DEVICE`` / auto); target: "gpu" or
    "cpu" (default: the device's type), see ``target_device``; signature: that
    signature's subgraph (default subgraph 0, or the first signature when subgraph 0 has
    no inputs, as ``litecl run``); placement, fuse: the Delegate's. The model runs
    through litecl.Interpreter up to allocate_tensors (every program is built there).
    ``out_dir`` is created if missing; files of an earlier export there (``k*.cl``,
    ``t*.bin``) are removed first. A model with no delegated node gives an empty
    ``launches`` list.

    Raises InputError (bad target, placement, signature, an out_dir that is a file or not
    writable), ModelError / litecl errors from loading and allocating the model.
    """
    from .device import open_device  # noqa: PLC0415
    from .interpreter import Interpreter  # noqa: PLC0415

    if placement not in PLACEMENTS:
        raise InputError(f"unknown placement {placement!r}; expected one of {', '.join(PLACEMENTS)}")
    if target is not None and target not in TARGETS:
        raise InputError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"cannot export to {out_dir}: it is not a folder")
    if not os.path.isfile(model):
        raise InputError(f"model file not found: {model}" if not os.path.exists(model)
                         else f"cannot read model {model}: not a file")
    dev = target_device(open_device(device), target)
    interp = Interpreter(model_path=model, device=dev, placement=placement, fuse=fuse, quiet=True)
    try:
        sigs = interp.get_signature_list()
        if signature is not None and signature not in sigs:
            raise InputError(f"unknown signature {signature!r}; the model has {sorted(sigs) or 'none'}")
        if signature is None and not interp._model.subgraphs[0].inputs and sigs:
            signature = next(iter(sigs))  # as `litecl run` picks
        allocate(interp, signature)
        si = 0 if signature is None else next(s.subgraph for s in interp._model.signatures
                                              if s.key == signature)
        parts = delegated_partitions(interp.delegate, {si})
        manifest, files = build_manifest(parts, interp.delegate.caps, model=os.path.abspath(model),
                                         signature=signature, subgraph=si,
                                         target="gpu" if dev.caps.is_gpu else "cpu", placement=placement)
        dtypes = {t: p.sg.tensors[t].dtype for _, p in parts for t in p.inputs}
        constants = {t["index"]: _constant_bytes(interp, si, t["index"], dtypes[t["index"]])
                     for t in manifest["tensors"] if t["role"] == "constant"}
    finally:
        interp.close()
    if not manifest["launches"]:
        manifest["note"] = "litecl's delegate takes no node of this subgraph: nothing to export"
    try:
        out.mkdir(parents=True, exist_ok=True)
        for old in (*out.glob("k[0-9][0-9][0-9]_*.cl"), *out.glob("t[0-9]*.bin")):
            if old.is_file():
                old.unlink()
        for src, name in files.items():
            (out / name).write_text(src)
        for t, data in constants.items():
            (out / f"t{t}.bin").write_bytes(data)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    except OSError as e:
        raise InputError(f"cannot write to {out_dir}: {e.strerror or e}") from None
    return manifest
