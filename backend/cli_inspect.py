"""``litecl devices`` and ``litecl inspect``: the OpenCL devices and their specs, and where
a model's nodes run (the delegate's placement, its partitions and kernels)."""
from __future__ import annotations

import json
import os

from .cli_common import (_Usage, _check_writable, _details_by_name, _device_json, _device_line, _inputs_for,
                         _load_npz, _open, _pick_signature, _report, _subgraph_of, _summary)


def cmd_devices(args) -> int:
    """One line per device: the spec that selects it (``--device SPEC``), ``*`` on the one
    ``auto`` picks, its capabilities, and whether it builds kernels."""
    import shlex  # noqa: PLC0415

    if args.ray_resources:
        from .sweep_ray import node_resources  # noqa: PLC0415

        print(json.dumps(node_resources()))
        return 0
    from .device import (PROFILES, _all_devices, _type_name, auto_device, probe_compiler,  # noqa: PLC0415
                         read_caps, spec_of)

    raw = _all_devices()
    # each device builds a trivial kernel first: one that cannot (PoCL 3.0 on AMD Zen 5)
    # would fail every delegated partition at allocate_tensors
    errors = [probe_compiler(d) for d in raw]
    devs = [read_caps(d) for d in raw]
    chosen = auto_device()
    auto = [chosen is not None and d.int_ptr == chosen.int_ptr for d in raw]
    specs = [spec_of(d) for d in raw]
    if args.check:
        return _devices_check(args, [(s, f"{c.platform}: {c.name}", e) for s, c, e in zip(specs, devs, errors)])
    if args.json:
        print(json.dumps([{
            "platform": c.platform, "name": c.name, "driver": c.driver, "gpu": c.is_gpu,
            "fp16": c.fp16, "fp64": c.fp64, "int64": c.int64, "compute_units": c.compute_units,
            "max_work_group_size": c.max_work_group_size, "builds_kernels": not err,
            "build_error": err, "spec": spec, "auto": a}
            for c, err, spec, a in zip(devs, errors, specs, auto)], indent=2))
        return 0
    shown = [shlex.quote(s) if s else "-" for s in specs]
    width = max([len(s) for s in shown] + [4])
    print(f"  {'spec':<{width}}  device")
    for d, c, err, spec, a in zip(raw, devs, errors, shown, auto):
        feats = ", ".join(f for f, on in (("fp16", c.fp16), ("fp64", c.fp64), ("int64", c.int64)) if on)
        kind = _type_name(d)
        bad = f"; CANNOT BUILD KERNELS: {err}" if err else ""
        print(f"{'*' if a else ' '} {spec:<{width}}  {c.platform}: {c.name} [{kind}; "
              f"{c.compute_units} compute units; max work-group {c.max_work_group_size}; "
              f"{feats or 'no fp16/fp64'}{bad}]")
    print()
    profiles = ", ".join(p for p in PROFILES if p and p != "mobile")
    print("* is what --device auto (the default) picks. Pass --device SPEC to choose another; "
          f"gpu and cpu pick by device type, and SPEC:profile=mobile (or {profiles}, joined "
          "with '+') restricts a device to what mobile GPUs offer.")
    if any(s is None for s in specs):
        print("- marks a device no spec selects alone (an identical device of its platform comes first).")
    return 0


def _devices_check(args, devices) -> int:
    """``devices --check``: every self-test family on every device (backend/selftest.py),
    each device in a child process; one row per device, the failing families named. Exit
    1 when a device computes a family wrong, builds no kernel or could not be checked (a
    check that never ran exited 0, a fresh user's), else 0."""
    from .selftest import check_devices  # noqa: PLC0415

    rows = check_devices([(s, d) for s, d, err in devices if s and not err])
    rows += [{"spec": s, "device": d, "checked": 0, "failed": {}, "error": f"builds no kernel: {err}"}
             for s, d, err in devices if s and err]
    bad = int(any(r["error"] or r["failed"] for r in rows))
    if args.json:
        print(json.dumps(rows, indent=2))
        return bad
    for r in rows:
        state = r["error"] or (f"{len(r['failed'])} of {r['checked']} families computed wrong, kept on LiteRT"
                               if r["failed"] else f"all {r['checked']} families give LiteRT's bits")
        print(f"{r['spec']:<12} {r['device']}: {state}")
        for name, why in r["failed"].items():
            print(f"    {name}: {why}")
    return bad


def cmd_inspect(args) -> int:
    """Where each CAST/ADD node of one signature runs and how, as litecl.Delegate decided
    inside LiteRT: the signature compare runs (the given one, else subgraph 0, else the
    first signature when subgraph 0 has no inputs) and the subgraphs it calls; per node
    its model index, operand types and shapes, placement, delegated partition and the
    OpenCL kernel (conversion chain, fused group, folded) or the reason LiteRT keeps it;
    then TFLite's delegate summary ("Replacing N out of M node(s) ...")."""
    from .export import allocate, delegated_partitions  # noqa: PLC0415

    from .compare import run_outputs  # noqa: PLC0415
    from .errors import LiteclError, PrepareError  # noqa: PLC0415

    if args.html:
        _check_writable(args.html, "HTML file", (args.model, args.inputs))
    given = _load_npz(args.inputs) if args.inputs else None
    interp = _open(args, given)
    sig = _pick_signature(interp, args.signature, given)
    si = _subgraph_of(interp, sig)
    try:
        if given is None:
            allocate(interp, sig)  # the partition kernels plan their launches at prepare
        else:  # one run at the given shapes: every partition planned as it ran
            run_outputs(interp, _inputs_for(_details_by_name(interp, sig), given, 0, interp=interp, sig=sig), sig)
    except (RuntimeError, ValueError) as e:
        # LiteRT's own node failing its prepare (litecl.Interpreter: PrepareError) is said
        # with the shapes it had; litecl's errors are said as they are
        if isinstance(e, LiteclError) and not (isinstance(e, PrepareError) and "litecl" not in str(e)):
            raise
        msg = " ".join(str(e).split())[:300]
        if given is not None:
            raise _Usage(f"LiteRT cannot run the model on --inputs: {msg}") from None
        if "unresolved custom op" in msg.lower():  # no input shapes give LiteRT an operator it lacks
            raise _Usage(f"LiteRT cannot prepare the model: {msg}") from None
        raise _Usage(f"LiteRT cannot prepare the model at its declared input shapes ({msg}); give inputs of "
                     "shapes it runs with --inputs FILE.npz") from None
    rows, graphs, keep = _report(interp, sig)
    parts = delegated_partitions(interp.delegate, keep, owner=id(interp))
    nodes = _node_rows(interp, rows, parts)
    summary = _summary(interp, keep)
    fused = [{"subgraph": s, "nodes": list(ln.nodes), "ops": [n.op for n in p.nodes if n.index in ln.nodes]}
             for s, p in parts for ln in p.plan.launches if len(ln.nodes) > 1]
    notes = _unwritten_outputs(interp, si, sig)
    shown = sig if sig is not None else next(
        (s.key for s in interp._model.signatures if s.subgraph == si), None)
    others = [k for k in interp.get_signature_list() if k != shown]
    if args.html:
        _graph_page(args, interp, nodes, keep, shown, summary)
    if args.json:
        print(json.dumps({"model": args.model, "device": _device_json(interp.device),
                          "signature": shown, "subgraph": si, "other_signatures": others,
                          "reference": args.reference, "placement": args.placement,
                          "small_partitions": interp.delegate.small_partitions or None, "nodes": nodes, "graphs": graphs, "summary": summary, "fused": fused,
                          "notes": notes}, indent=2))
        return 0
    print(f"model: {args.model}" + (f"  signature: {shown}" if shown is not None else "")
          + f"  (subgraph {si})")
    if others:
        print(f"other signatures: {', '.join(others)} (pass --signature KEY to inspect one)")
    print(f"device: {_device_line(interp.device)}")
    if interp.delegate.small_partitions:
        print(f"        {interp.delegate.small_partitions}")
    print(f"{'subgraph':>8} {'node':>5}  {'op':<5} {'placement':<9} {'partition':>9}  inputs -> outputs")
    for n in nodes:
        part = "-" if n["partition"] is None else n["partition"]
        print(f"{n['subgraph']:>8} {n['index']:>5}  {n['op']:<5} {n['placement']:<9} {part:>9}  "
              f"{_tensors_text(n['inputs'])} -> {_tensors_text(n['outputs'])}")
        if n["placement"] == "opencl":
            how = [n["kernel"] or "planned at invoke (its input shapes are known only then)"]
            if n["folded"]:
                how.append("folded (constant inputs: computed once, not at every invoke)")
            if n["fused_with"]:
                how.append(f"fused: one kernel for nodes {_node_runs(n['fused_with'])}")
            if n.get("device") and n["device"] != interp.device.caps.name:
                how.append(f"on {n['device']}")
            print(f"{'':>16}kernel: {'; '.join(how)}")
        else:
            print(f"{'':>16}reason: {n['reason']}")
    if not nodes:
        print(f"{'':>16}(no CAST or ADD node: every node runs on LiteRT)")
    print("(node: the operator's index in the model; partition: the delegated partition, one "
          "litecl kernel node in LiteRT's graph, that runs it; every other operator runs on LiteRT)")
    print()
    for line in summary:
        print(line)
    for g in graphs:
        if g["kept_order"]:
            dropped = "".join(f"; not around node {i} ({name}, a delegate applied before litecl)"
                              for i, name in g["order_dropped"])
            print(f"keep_order: subgraph {g['subgraph']}'s LiteRT nodes run in the model's order{dropped}.")
    for f in fused:
        print(f"Fused into one OpenCL kernel: subgraph {f['subgraph']} nodes "
              f"{', '.join(map(str, f['nodes']))} ({', '.join(f['ops'])}).")
    for note in notes:
        print(f"note: {note}")
    return 0


def _graph_page(args, interp, nodes, keep, shown, summary) -> None:
    """inspect --html: the graph as litecl placed it (pictures.py)."""
    from .pictures import write_graph_page  # noqa: PLC0415

    facts = [f"device: {_device_line(interp.device)}; reference {args.reference}; placement {args.placement}"
             + (f"; signature {shown}" if shown is not None else ""), *summary]
    try:
        write_graph_page(args.html, interp, nodes, keep, title=os.path.basename(args.model), facts=facts)
    except OSError as e:
        raise _Usage(f"cannot write HTML file {args.html}: {e.strerror or e}") from None


def _node_runs(nodes) -> str:
    """Node indices with consecutive runs joined: [0, 1, 2, 5] -> '0-2, 5'."""
    runs: list[list[int]] = []
    for i in nodes:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _tensors_text(rows: list[dict]) -> str:
    return ", ".join("-" if r["index"] < 0 else f"{r['dtype']}{r['shape']}" for r in rows) or "()"


def _live_shapes(interp, si: int) -> dict:
    """tensor -> shape in LiteRT now (after allocate_tensors), for the named tensors of
    subgraph ``si`` (LiteRT lists no unnamed ones)."""
    try:
        return {d["index"]: [int(x) for x in d["shape"]] for d in interp.get_tensor_details(subgraph_index=si)}
    except (ValueError, RuntimeError):
        return {}


def _node_rows(interp, rows: list[dict], parts: list) -> list[dict]:
    """The delegate's placement() rows with what inspect adds: ``inputs``/``outputs``
    (index, name, dtype, shape as LiteRT holds it now) and, for OpenCL nodes, ``kernel``
    (the node's kernel: op, types, conversion chain), ``folded`` (its launch reads only
    constants: computed once) and ``fused_with`` (the nodes of its fused kernel)."""
    launch_of = {(s, i): (p, ln) for s, p in parts for ln in p.plan.launches for i in ln.nodes}
    shapes: dict = {}
    out = []
    for r in rows:
        s, i = r["subgraph"], r["index"]
        if s not in shapes:
            shapes[s] = _live_shapes(interp, s)
        sg = interp._model.subgraphs[s]
        node = sg.nodes[i]
        planned = launch_of.get((s, i))
        kernel, folded, fused = None, False, None
        if r["placement"] == "opencl":
            kernel = r["kernel"] or None
            if planned is not None:
                p, ln = planned
                folded = ln.folded
                if len(ln.nodes) > 1:
                    fused = list(ln.nodes)
                    kernel = _own_kernel(p, i) or kernel
                else:
                    kernel = ln.what

        def operand(t, s=s, sg=sg, planned=planned):
            if t < 0:
                return {"index": -1, "name": None, "dtype": None, "shape": None}
            tensor = sg.tensors[t]
            shape = shapes[s].get(t)
            if shape is None:
                shape = planned[0].plan.shapes.get(t, tensor.shape) if planned else tensor.shape
            return {"index": t, "name": tensor.name,
                    "dtype": tensor.dtype.name if tensor.dtype is not None else tensor.type_name.lower(),
                    "shape": [int(x) for x in shape]}

        out.append(dict(r, inputs=[operand(t) for t in node.inputs],
                        outputs=[operand(t) for t in node.outputs],
                        kernel=kernel, folded=folded, fused_with=fused))
    return out


def _own_kernel(part, index: int) -> str | None:
    """What node ``index`` of a fused launch computes (its own kernel's description at
    the planned shapes), or None where it cannot be described."""
    from .lowering import kernel_spec  # noqa: PLC0415

    n = next((n for n in part.nodes if n.index == index), None)
    if n is None:
        return None
    try:
        return kernel_spec(n, part.sg, [part.plan.shapes[t] for t in n.inputs], part.delegate.caps).what
    except (ValueError, KeyError):
        return None


def _unwritten_outputs(interp, si: int, sig=None) -> list[str]:
    """What inspect and compare say about outputs of subgraph ``si`` no operator writes
    (a model with no operators, say): each is an input, a constant, or an empty tensor
    (the model loader refuses a non-empty one: it would never get a value). Under
    signature ``sig`` an output is named as the signature names it (the table's rows),
    its tensor beside it."""
    sg = interp._model.subgraphs[si]
    written = {t for n in sg.nodes for t in n.outputs}
    by_sig = {t: k for s in interp._model.signatures if s.key == sig for k, t in s.outputs.items()}
    notes = []
    for t in sg.outputs:
        if t in written:
            continue
        tensor = sg.tensors[t]
        name = f"{by_sig[t]!r} (tensor {tensor.name!r}, " if t in by_sig else f"{tensor.name!r} ("
        what = f"output {name}{tensor.type_name.lower()}{list(tensor.shape)}) is written by no operator: "
        if t in sg.inputs:
            notes.append(what + "it is an input, returned as given")
        elif tensor.data is not None and tensor.data.size:
            notes.append(what + "it is a constant of the model")
        else:
            notes.append(what + "it has no elements and the model gives it no data (LiteRT reads it as an "
                         "empty array where it holds memory for it, and refuses to read it where it holds none)")
    if not sg.nodes:
        notes.insert(0, f"subgraph {si} has no operators: nothing runs on OpenCL or LiteRT")
    return notes
