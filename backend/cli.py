"""The ``litecl`` command line: devices, inspect, run, compare, bench, kernel, export, sweep, --version.

Every command that runs a model runs it in LiteRT's own Interpreter with litecl.Delegate
(litecl.Interpreter) and reads the delegate's report (placement(), graph_info(),
partitions()): one source of truth for what runs where. Errors print one ``error: ...``
line on stderr and exit with status 2 (set LITECL_DEBUG=1 for a traceback). ``compare``
exits 1 when any output differs from LiteRT without the delegate.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

__all__ = ["main"]


class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and every multi-word flag in both spellings:
    ``--full-range`` and ``--full_range``, ``--num_runs`` and ``--num-runs`` (users mix
    benchmark_model's underscores with the usual hyphens). The first spelling given is
    the one help shows first and names the attribute."""

    def error(self, message):  # argparse's own exit status is 2 already; keep one line
        raise _Usage(message)

    def add_argument(self, *names, **kwargs):
        spelled = list(names)
        for n in names:
            if n.startswith("--") and ("-" in n[2:] or "_" in n[2:]):
                for other in ("--" + n[2:].replace("_", "-"), "--" + n[2:].replace("-", "_")):
                    if other not in spelled:
                        spelled.append(other)
        return super().add_argument(*spelled, **kwargs)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _arg_int(lo: int, what: str, hi: int | None = None):
    """argparse type: an integer >= lo (and <= hi)."""
    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < lo or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {what}, got {v}")
        return v
    return conv


def _arg_secs(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}") from None
    if not (v >= 0 and np.isfinite(v)):
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text}")
    return v


_NON_NEGATIVE = _arg_int(0, "an integer >= 0")
_POSITIVE = _arg_int(1, "an integer >= 1")
#: bench --num_runs's bound: every timed run's time is kept for the median and percentiles,
#: litecl's and LiteRT's (a float and its list slot, 32 bytes each): 64 MB at this bound
MAX_NUM_RUNS = 1_000_000
#: bench --profile_runs's bound: profiled runs wait for every kernel and have no time limit
MAX_PROFILE_RUNS = 10_000

_NPZ_WANTED = "expected a .npz archive of arrays keyed by input name (numpy.savez(path, name=array))"


def _load_npz(path: str) -> dict:
    if not os.path.exists(path):
        raise _Usage(f"inputs file not found: {path}")
    if os.path.isdir(path):
        raise _Usage(f"cannot read inputs file {path}: it is a directory; {_NPZ_WANTED}")
    from .model import special_file_kind  # noqa: PLC0415

    kind = special_file_kind(path)
    if kind:  # opening a FIFO blocks until a writer comes; /dev/zero never ends
        raise _Usage(f"cannot read inputs file {path}: it is {kind}, not a regular file; {_NPZ_WANTED}")
    try:
        with open(path, "rb") as f:
            head = f.read(6)
    except OSError as e:
        raise _Usage(f"cannot read inputs file {path}: {e.strerror or e}") from None
    if head.startswith(b"\x93NUMPY"):
        raise _Usage(f"cannot read inputs file {path}: it is a .npy file holding one array, "
                     f"not an .npz archive; {_NPZ_WANTED}")
    if head[:4] not in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip archive (an empty one)
        raise _Usage(f"cannot read inputs file {path}: not an .npz archive; {_NPZ_WANTED}")
    try:
        z = np.load(path, allow_pickle=False)
        if not hasattr(z, "files"):  # not an NpzFile after all
            raise ValueError("not an .npz archive")
        with z:
            return {k: z[k] for k in z.files}
    except MemoryError:
        raise
    except Exception as e:  # BadZipFile, zlib.error, object arrays (pickles), EOFError...
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise _Usage(f"cannot read inputs file {path} as .npz: {msg}") from None


def _check_writable(path: str, what: str) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        raise _Usage(f"cannot write {what} {path}: it is a directory")
    from .model import special_file_kind  # noqa: PLC0415

    kind = special_file_kind(full)
    if kind and "FIFO" in kind:  # opening a FIFO for writing blocks until a reader comes
        try:  # a FIFO someone reads (`--json /dev/stdout | jq`) is fine
            os.close(os.open(full, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # ENXIO: nobody reads it
            raise _Usage(f"cannot write {what} {path}: it is {kind} that nobody reads "
                         "(writing would block); give a regular file") from None
        return
    if kind and "socket" in kind:
        raise _Usage(f"cannot write {what} {path}: it is {kind}, not a regular file")
    if not os.path.exists(parent):
        raise _Usage(f"cannot write {what} {path}: folder {parent} does not exist")
    if not os.path.isdir(parent):
        raise _Usage(f"cannot write {what} {path}: {parent} is not a folder")
    ok = os.access(full, os.W_OK) if os.path.exists(full) else os.access(parent, os.W_OK | os.X_OK)
    if not ok:
        raise _Usage(f"cannot write {what} {path}: permission denied")
    # permission bits do not tell everything (root, read-only or pseudo file systems such
    # as /proc): open it for appending, which changes nothing, or create it and remove it
    existed = os.path.exists(full)
    try:
        with open(full, "ab" if existed else "xb"):
            pass
    except OSError as e:
        raise _Usage(f"cannot write {what} {path}: {e.strerror or e}") from None
    if not existed:
        os.remove(full)


def _npz_path(path: str) -> str:
    """The file numpy.savez writes for ``path`` (it appends .npz when missing)."""
    return path if path.endswith(".npz") else path + ".npz"


def _device_json(dev) -> dict:
    c = dev.caps
    return {"platform": c.platform, "name": c.name, "profile": c.profile or None}


def _device_line(dev) -> str:
    c = dev.caps
    return f"{c.platform}: {c.name}" + (f" (profile {c.profile})" if c.profile else "")


def _subgraph_of(interp, sig) -> int:
    if sig is None:
        return 0
    return next(s.subgraph for s in interp._model.signatures if s.key == sig)


def _reachable(interp, si: int) -> set:
    """Subgraph ``si`` and the subgraphs its nodes call (control flow), transitively."""
    subs = interp._model.subgraphs
    seen, todo = set(), [si]
    while todo:
        s = todo.pop()
        if s in seen or not 0 <= s < len(subs):
            continue
        seen.add(s)
        for n in subs[s].nodes:
            todo.extend(n.subgraph_refs())
    return seen


def _report(interp, sig):
    """The delegate's report restricted to the subgraph that runs (signature ``sig``,
    else subgraph 0) and the subgraphs it calls: (placement rows, graph_info rows,
    subgraph set)."""
    keep = _reachable(interp, _subgraph_of(interp, sig))
    d, me = interp.delegate, id(interp)  # this interpreter's contexts (Delegate.owning)
    rows = [p for p in d.placement(me) if p["subgraph"] in keep]
    # one interpreter: inspect's JSON "graphs" keep their keys, without the delegate's numbering
    graphs = [{k: v for k, v in g.items() if k != "interpreter"} for g in d.graph_info(me) if g["subgraph"] in keep]
    return rows, graphs, keep


class _Only:
    """A Delegate's placement() and graph_info() restricted to some subgraphs (what
    ``summary_lines`` reads)."""

    def __init__(self, delegate, keep: set):
        self._d, self._keep = delegate, keep

    def placement(self, owner=None) -> list[dict]:
        return [r for r in self._d.placement(owner) if r["subgraph"] in self._keep]

    def graph_info(self, owner=None) -> list[dict]:
        return [g for g in self._d.graph_info(owner) if g["subgraph"] in self._keep]


def _summary(interp, keep: set) -> list[str]:
    from .interpreter import summary_lines  # noqa: PLC0415

    return summary_lines(_Only(interp.delegate, keep), id(interp))


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _check_fits(details: list[dict]) -> None:
    """Refuse random inputs that cannot fit in memory (a mutated or absurd input shape),
    rather than being killed by the kernel's OOM killer half-way."""
    need = sum(int(np.prod(d["shape"], dtype=np.float64)) * np.dtype(d["dtype"]).itemsize
               for d in details)
    avail = _available_bytes()
    # numpy draws float64 before converting, and LiteRT and the device hold copies
    if avail is not None and 4 * need > avail:
        big = max(details, key=lambda d: float(np.prod(d["shape"], dtype=np.float64)))
        raise _Usage(f"random inputs need {need / 2**30:.1f} GiB (input {big['name']!r} "
                     f"{[int(x) for x in big['shape']]}) and {avail / 2**30:.1f} GiB is available; "
                     "pass --inputs")


def _check_shape(d: dict, v: np.ndarray, resize: bool) -> None:
    """A given input may change only the dimensions that are -1 in its shape_signature
    (LiteRT's strict resize), unless --resize."""
    want = [int(x) for x in d["shape"]]
    got = list(v.shape)
    if got == want or resize:
        return
    sig = [int(x) for x in d.get("shape_signature", d["shape"])]
    if len(sig) == len(got) and all(s == -1 or s == g for s, g in zip(sig, got)):
        return
    fixed = "its shape is fixed" if sig == want else \
        f"only the dimensions that are -1 in its shape_signature {sig} may change"
    raise _Usage(f"input {d['name']!r} expects shape {want}, got {got} ({fixed}); "
                 "pass --resize to resize it anyway")


def _inputs_for(details: list[dict], given: dict | None, seed: int, resize: bool = False,
                full_range: bool = False, interp=None, sig=None) -> dict:
    from .compare import random_inputs  # noqa: PLC0415

    if given is None:
        _check_fits(details)
        return _fit_sub_byte(random_inputs(details, seed, full_range=full_range), details, interp, sig)
    names = [d["name"] for d in details]
    unknown = sorted(set(given) - set(names))
    if unknown:
        hint = ""
        if interp is not None and sig is None:  # names of a signature's inputs?
            keys = [k for k, v in interp.get_signature_list().items() if set(given) <= set(v["inputs"])]
            if keys:
                hint = f" (those are the inputs of signature {keys[0]!r}: pass --signature {keys[0]})"
        raise _Usage(f"unknown input name(s) {unknown}; the model's inputs are {names}{hint}")
    missing = [n for n in names if n not in given]
    if missing:
        raise _Usage(f"missing input(s) {missing}; the model's inputs are {names}")
    out = {}
    for d in details:
        v = np.asarray(given[d["name"]])
        want = np.dtype(d["dtype"])
        if v.dtype != want and v.dtype.newbyteorder("=") == want:
            v = v.astype(want)  # the other byte order: its values, as Interpreter.set_tensor
        if v.dtype != want:
            raise _Usage(f"input {d['name']!r} expects {want}, got {v.dtype}")
        _check_shape(d, v, resize)
        out[d["name"]] = v
    return out


def _open(args):
    """litecl.Interpreter (LiteRT's Interpreter with litecl.Delegate) for the command's
    model and options. The delegate is quiet: the commands print its report themselves
    (stderr stays one `error:` line on failure)."""
    from .interpreter import Interpreter  # noqa: PLC0415

    return Interpreter(model_path=args.model, device=args.device,
                       reference=getattr(args, "reference", "builtin"),
                       num_threads=getattr(args, "num_threads", None),
                       placement=getattr(args, "placement", "all"), quiet=True)


def _fit_sub_byte(inputs: dict, details: list[dict], interp, sig) -> dict:
    """Seeded int4/uint4 inputs drawn in their range: their details say int8/uint8 (as
    LiteRT's), and set_tensor refuses values outside it (as LiteRT does)."""
    if interp is None:
        return inputs
    tensors = interp._model.subgraphs[_subgraph_of(interp, sig)].tensors
    for k, d in enumerate(details):
        t = tensors[int(d["index"])]
        if t.dtype is not None and t.dtype.packed_bits:
            v = inputs[d["name"]]
            rng = np.random.default_rng(k)
            inputs[d["name"]] = rng.integers(t.dtype.min, t.dtype.max + 1, v.shape).astype(v.dtype)
    return inputs


def _details_by_name(interp, signature):
    if signature is None:
        return interp.get_input_details()
    r = interp.get_signature_runner(signature)
    return [dict(d, name=k) for k, d in r.get_input_details().items()]


def _unique_names(outs: list) -> dict:
    """[(name, array)] -> {name: array}, a repeated name suffixed with its output
    position (``name#1``), for printing and .npz keys."""
    seen = {n for n, _ in outs}
    dup = {n for n in seen if sum(m == n for m, _ in outs) > 1}
    return {(f"{n}#{k}" if n in dup else n): v for k, (n, v) in enumerate(outs)}


def _pick_signature(interp, sig, given=None):
    """The signature key to run, or None for subgraph 0's own inputs and outputs:
    ``sig`` (--signature, checked); else the first signature when subgraph 0 has no
    inputs; else, when the inputs ``given`` (--inputs, by name) are not subgraph 0's but
    are the signature inputs of the model's only signature, that one (as LiteRT's
    get_signature_runner() takes the only signature without a key). With several
    signatures, _inputs_for's error names the one to pass."""
    sigs = interp.get_signature_list()
    if sig is not None:
        if sig not in sigs:
            raise _Usage(f"unknown signature {sig!r}; the model has {', '.join(sigs) or 'none'}")
        return sig
    if not interp._model.subgraphs[0].inputs and sigs:
        return next(iter(sigs))
    if given is not None and len(sigs) == 1:
        (key, io), = sigs.items()
        if not set(given) <= {d["name"] for d in interp.get_input_details()} and set(given) <= set(io["inputs"]):
            return key
    return None


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
    each device in a child process; one row per device, the failing families named."""
    from .selftest import check_devices  # noqa: PLC0415

    rows = check_devices([(s, d) for s, d, err in devices if s and not err])
    rows += [{"spec": s, "device": d, "checked": 0, "failed": {}, "error": f"builds no kernel: {err}"}
             for s, d, err in devices if s and err]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = r["error"] or (f"{len(r['failed'])} of {r['checked']} families computed wrong, kept on LiteRT"
                               if r["failed"] else f"all {r['checked']} families give LiteRT's bits")
        print(f"{r['spec']:<12} {r['device']}: {state}")
        for name, why in r["failed"].items():
            print(f"    {name}: {why}")
    return 0


def cmd_inspect(args) -> int:
    """Where each CAST/ADD node of one signature runs and how, as litecl.Delegate decided
    inside LiteRT: the signature compare runs (the given one, else subgraph 0, else the
    first signature when subgraph 0 has no inputs) and the subgraphs it calls; per node
    its model index, operand types and shapes, placement, delegated partition and the
    OpenCL kernel (conversion chain, fused group, folded) or the reason LiteRT keeps it;
    then TFLite's delegate summary ("Replacing N out of M node(s) ...")."""
    from .export import allocate, delegated_partitions  # noqa: PLC0415

    if args.html:
        _check_writable(args.html, "HTML file")
    interp = _open(args)
    sig = _pick_signature(interp, args.signature)
    si = _subgraph_of(interp, sig)
    allocate(interp, sig)  # the partition kernels plan their launches at prepare
    rows, graphs, keep = _report(interp, sig)
    parts = delegated_partitions(interp.delegate, keep, owner=id(interp))
    nodes = _node_rows(interp, rows, parts)
    summary = _summary(interp, keep)
    fused = [{"subgraph": s, "nodes": list(ln.nodes), "ops": [n.op for n in p.nodes if n.index in ln.nodes]}
             for s, p in parts for ln in p.plan.launches if len(ln.nodes) > 1]
    notes = _unwritten_outputs(interp, si)
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


def _unwritten_outputs(interp, si: int) -> list[str]:
    """What inspect and compare say about outputs of subgraph ``si`` no operator writes
    (a model with no operators, say): each is an input, a constant, or an empty tensor
    (the model loader refuses a non-empty one: it would never get a value)."""
    sg = interp._model.subgraphs[si]
    written = {t for n in sg.nodes for t in n.outputs}
    notes = []
    for t in sg.outputs:
        if t in written:
            continue
        tensor = sg.tensors[t]
        what = (f"output {tensor.name!r} ({tensor.type_name.lower()}{list(tensor.shape)}) is "
                "written by no operator: ")
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


def _open_with_inputs(args):
    """run/compare: (interpreter, signature key or None, inputs by name) from the
    command line (--inputs or seeded random, --resize, --full-range, --signature)."""
    given = _load_npz(args.inputs) if args.inputs else None
    interp = _open(args)
    sig = _pick_signature(interp, args.signature, given)
    inputs = _inputs_for(_details_by_name(interp, sig), given, args.seed, args.resize, args.full_range,
                         interp, sig)
    return interp, sig, inputs


def cmd_run(args) -> int:
    from .compare import run_outputs  # noqa: PLC0415

    out_path = None
    if args.output:
        if os.path.isdir(args.output):
            raise _Usage(f"cannot write outputs file {args.output}: it is a directory")
        out_path = _npz_path(args.output)
        _check_writable(out_path, "outputs file")
    interp, sig, inputs = _open_with_inputs(args)
    outs = _unique_names(run_outputs(interp, inputs, sig))
    for name, v in outs.items():
        print(f"{name}: {v.dtype}{list(v.shape)}")
    if out_path:
        try:
            with open(out_path, "wb") as f:  # a file object: numpy appends nothing
                np.savez(f, **outs)
        except OSError as e:
            raise _Usage(f"cannot write {out_path}: {e.strerror or e}") from None
        print(f"wrote {out_path}" + ("" if out_path == args.output else " (.npz appended)"))
    return 0


#: what each --reference means, as compare names it
_REFERENCE_TEXT = {"builtin": "LiteRT's builtin kernels without XNNPACK",
                   "ref": "LiteRT's reference kernels (BUILTIN_REF)",
                   "xnnpack": "LiteRT's default configuration, XNNPACK included"}


def _compare_targets(interp, sig, given) -> list:
    """What ``litecl compare`` checks: [signature key, or None for subgraph 0's own
    inputs and outputs]. --signature: that one. A model with several signatures: every
    one (the inputs of --inputs, by name, pick those whose inputs it holds; names of
    subgraph 0's own inputs pick subgraph 0). Otherwise what run picks
    (``_pick_signature``)."""
    sigs = interp.get_signature_list()
    if sig is not None or len(sigs) < 2:
        return [_pick_signature(interp, sig, given)]
    if given is None:
        return list(sigs)
    if interp._model.subgraphs[0].inputs and set(given) <= {d["name"] for d in interp.get_input_details()}:
        return [None]
    fits = [k for k, io in sigs.items() if set(io["inputs"]) <= set(given)]
    if fits and set(given) <= {n for k in fits for n in sigs[k]["inputs"]}:
        return fits
    return [None]  # _inputs_for says which names are unknown and which signature they are


def _compare_one(args, interp, ref, sig, given) -> dict:
    """Compare signature ``sig`` (None: subgraph 0) of ``interp`` (litecl) with ``ref``
    (LiteRT alone) on the inputs of --inputs (``given``, by name: those of ``sig``) or
    seeded random ones: {"signature", "all_bit_exact", "opencl_nodes", "nodes",
    "partitions", "outputs" (diff_report rows), "notes"}."""
    from .compare import diff_report, run_outputs  # noqa: PLC0415

    details = _details_by_name(interp, sig)
    if given is not None and sig is not None and args.signature is None:
        names = {d["name"] for d in details}  # --inputs may hold other signatures' inputs too
        given = {k: v for k, v in given.items() if k in names}
    inputs = _inputs_for(details, given, args.seed, args.resize, args.full_range, interp, sig)
    got = run_outputs(interp, inputs, sig)
    try:
        want = run_outputs(ref, inputs, sig)
    except (RuntimeError, ValueError) as e:  # e.g. an op version this LiteRT lacks
        msg = " ".join(str(e).split())[:300]
        raise _Usage(f"LiteRT without the delegate cannot run the model: {msg}") from None
    if sig is not None:  # a signature's outputs are keyed by name; keep LiteRT's order
        got_by = dict(got)
        got = [(k, got_by.get(k, np.array([]))) for k, _ in want]
    # outputs compared by position (two outputs may share a name), each row named
    reps = [diff_report(k, g, v) for (k, v), (_, g) in zip(_unique_names(want).items(), got)]
    _, graphs, _ = _report(interp, sig)  # the subgraphs that ran
    return {"signature": sig, "all_bit_exact": all(r["bit_exact"] for r in reps),
            "opencl_nodes": sum(g["claimed"] for g in graphs), "nodes": sum(g["nodes"] for g in graphs),
            "partitions": sum(g["partitions"] for g in graphs), "outputs": reps,
            "notes": _unwritten_outputs(interp, _subgraph_of(interp, sig))}


def cmd_compare(args) -> int:
    """LiteRT with litecl.Delegate against LiteRT without it: the same op resolver
    (--reference), the same inputs, every output bit for bit (litecl.compare). A model
    with several signatures has each one compared (``_compare_targets``), each named in
    the report; --signature compares one."""
    from .compare import make_interpreter  # noqa: PLC0415

    given = _load_npz(args.inputs) if args.inputs else None
    interp = _open(args)
    targets = _compare_targets(interp, args.signature, given)
    try:
        ref = make_interpreter(interp._model.raw, args.num_threads, args.reference)
    except (RuntimeError, ValueError) as e:
        msg = " ".join(str(e).split())[:300]
        raise _Usage(f"LiteRT without the delegate cannot run the model: {msg}") from None
    results = [_compare_one(args, interp, ref, sig, given) for sig in targets]
    ok = all(r["all_bit_exact"] for r in results)
    others = ", ".join(r for r in _REFERENCE_TEXT if r != args.reference)
    if args.json:
        head = {"model": args.model, "device": _device_json(interp.device),
                "small_partitions": interp.delegate.small_partitions or None}
        rows = [{k: v for k, v in r.items() if k != "notes"} for r in results]
        if len(rows) == 1:  # one signature (or subgraph 0): its fields at the top
            print(json.dumps({**head, "signature": rows[0]["signature"], "reference": args.reference,
                              **{k: v for k, v in rows[0].items() if k != "signature"}}, indent=2))
        else:
            print(json.dumps({**head, "reference": args.reference, "all_bit_exact": ok, "signatures": rows},
                             indent=2))
        return 0 if ok else 1
    against = f"LiteRT without the delegate (--reference {args.reference}: {_REFERENCE_TEXT[args.reference]})"
    for r in results:
        sig = r["signature"]
        print(f"model: {args.model}" + (f"  signature: {sig}" if sig else "")
              + f"  device: {_device_line(interp.device)}  nodes on OpenCL: {r['opencl_nodes']}/{r['nodes']}"
              + f" in {r['partitions']} partition(s)")
        print(f"{'output':<32} {'dtype':<9} {'shape':<18} {'bit-exact':<9} {'max abs diff':>12} {'mismatched':>10}")
        for o in r["outputs"]:
            mad = "-" if o["max_abs_diff"] is None else f"{o['max_abs_diff']:.6g}"
            print(f"{o['name'][:32]:<32} {o['dtype']:<9} {str(o['shape']):<18} "
                  f"{'yes' if o['bit_exact'] else 'NO':<9} {mad:>12} {o['mismatched']:>10}")
        what = f"signature {sig}'s outputs" if len(results) > 1 else "all outputs"
        if r["all_bit_exact"]:
            print(f"{what} bit-exact with {against}")
        else:
            print(f"{what} DIFFER from {against}; --reference {others.replace(', ', ' or ')} "
                  "compares against another LiteRT resolver")
        for note in r["notes"]:
            print(f"note: {note}")
    if len(results) > 1:
        bad = [r["signature"] for r in results if not r["all_bit_exact"]]
        names = ", ".join(r["signature"] for r in results)
        print(f"compared {len(results)} signatures ({names}): "
              + ("all bit-exact" if not bad else f"{', '.join(bad)} DIFFER"))
    return 0 if ok else 1


def cmd_bench(args) -> int:
    """benchmark_model's lines for LiteRT with litecl.Delegate and for LiteRT alone (the
    same resolver, inputs and process; timed runs alternate), then the delegated
    launches' event-profiled kernel times."""
    import time  # noqa: PLC0415

    from .bench import (benchmark_interpreter, format_stats, launch_profile, make_run,  # noqa: PLC0415
                        time_alternating)
    from .compare import make_interpreter  # noqa: PLC0415
    from .export import allocate  # noqa: PLC0415

    for path, what in ((args.json, "JSON file"), (args.trace, "trace file")):
        if path:
            _check_writable(path, what)
    given = _load_npz(args.inputs) if args.inputs else None
    t0 = time.perf_counter()
    interp = _open(args)
    sig = _pick_signature(interp, args.signature, given)

    def ready(it, given):
        """(run closure, inputs by name) for one interpreter, allocated at the inputs'
        shapes: ``given`` (by name) or seeded random ones."""
        if sig is not None:
            by_name = _inputs_for(_details_by_name(it, sig), given, args.seed, args.resize,
                                  interp=interp, sig=sig)
            runner = it.get_signature_runner(sig)
            allocate(it, sig)
            return (lambda: runner(**by_name)), by_name
        details = it.get_input_details()
        by_name = _inputs_for(details, given, args.seed, args.resize, interp=interp)
        for d in details:  # the given shapes before the first allocate: a model may not
            if tuple(by_name[d["name"]].shape) != tuple(d["shape"]):  # prepare at its declared ones
                it.resize_tensor_input(d["index"], list(by_name[d["name"]].shape))
        it.allocate_tensors()
        return make_run(it, {d["index"]: by_name[d["name"]] for d in it.get_input_details()}), by_name

    run, by_name = ready(interp, given)
    init_ms = (time.perf_counter() - t0) * 1e3
    if sig is not None:
        print(f"INFO: signature: {sig}")
    print(f"INFO: litecl device: {_device_line(interp.device)}")
    if interp.delegate.small_partitions:
        print(f"INFO: {interp.delegate.small_partitions}")
    _, graphs, keep = _report(interp, sig)
    for line in _summary(interp, keep):
        print(f"INFO: {line}")
    print(f"INFO: Initialized session in {init_ms:.3f}ms.")
    print(f"INFO: Running benchmark for at least {args.warmup_runs} iterations and at least "
          f"{args.warmup_min_secs} seconds but terminate if exceeding {args.max_secs} seconds.")
    # LiteRT alone on the same model, resolver and inputs, in this process: the peer of
    # every figure
    t0 = time.perf_counter()
    ref = make_interpreter(interp._model.raw, args.num_threads, args.reference)
    ref_run, _ = ready(ref, by_name)  # the same values, random ones included
    ref_init_ms = (time.perf_counter() - t0) * 1e3  # construct + allocate, as litecl's
    res = benchmark_interpreter(interp, {}, warmup_runs=args.warmup_runs,
                                warmup_min_secs=args.warmup_min_secs, num_runs=0,
                                min_secs=0, max_secs=args.max_secs, run=run)
    benchmark_interpreter(ref, {}, warmup_runs=args.warmup_runs, warmup_min_secs=args.warmup_min_secs,
                          num_runs=0, min_secs=0, max_secs=args.max_secs, run=ref_run)
    print(f"INFO: {format_stats(res['warmup'])}")
    print(f"INFO: Running benchmark for at least {args.num_runs} iterations and at least "
          f"{args.min_secs} seconds but terminate if exceeding {args.max_secs} seconds "
          "(litecl and LiteRT in alternating runs).")
    timed = time_alternating({"litecl": run, "litert": ref_run},
                             min_runs=args.num_runs, min_secs=args.min_secs, max_secs=args.max_secs)
    res["runs"], res["litert"] = timed["litecl"].summary(), timed["litert"].summary()
    res["litert_init_ms"] = ref_init_ms
    res["reference"] = args.reference
    res["graphs"] = graphs
    print(f"INFO: {format_stats(res['runs'])}")
    w, r, lr = res["warmup"], res["runs"], res["litert"]
    print(f"INFO: Inference timings in us: Init: {init_ms * 1e3:.0f}, First inference: "
          f"{w['first']:.0f}, Warmup (avg): {w['avg']:.0f}, Inference (avg): {r['avg']:.0f}")
    print(f"INFO: LiteRT alone (--reference {args.reference}, same process): {format_stats(lr)}")
    print(f"INFO: LiteRT timings in us: Init: {ref_init_ms * 1e3:.0f}, Inference (avg): {lr['avg']:.0f}")
    res["ratio_median"] = r["median"] / lr["median"] if lr["median"] else None
    ratio = f"{res['ratio_median']:.2f}x" if res["ratio_median"] is not None else "-"
    avg = f"{r['avg'] / lr['avg']:.2f}x" if lr["avg"] else "-"
    print(f"INFO: litecl / LiteRT: median {r['median']:.0f} / {lr['median']:.0f} us = {ratio}, avg {avg}")
    rows = launch_profile(interp.delegate, run, runs=args.profile_runs, subgraphs=keep,
                          inference_ms=r["avg"] / 1e3) if args.profile_runs else []
    if rows:
        _print_run_order(rows)
    if args.trace:
        _trace(args, interp, run, ref_run)
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump({"model": args.model, "device": _device_json(interp.device),
                           "small_partitions": interp.delegate.small_partitions or None,
                           "signature": sig, "init_ms": init_ms, **res, "launches": rows}, f, indent=2)
        except OSError as e:
            raise _Usage(f"cannot write JSON file {args.json}: {e.strerror or e}") from None
    return 0


def _trace(args, interp, run, ref_run) -> None:
    """bench --trace: a few profiled invokes, and LiteRT alone's, as Chrome trace JSON."""
    from .pictures import TRACE_RUNS, write_trace  # noqa: PLC0415

    names = {r["context"]: r["subgraph"] for r in interp.delegate.subgraph_records(id(interp))}
    about = {"model": args.model, "device": _device_json(interp.device),
             "note": "profiled invokes: every command's OpenCL profiling event read after the invoke's wait; "
                     "timestamps in microseconds on the host's perf_counter clock"}
    try:
        n = write_trace(args.trace, interp.delegate, run, names=names, ref_run=ref_run, about=about)
    except OSError as e:
        raise _Usage(f"cannot write trace file {args.trace}: {e.strerror or e}") from None
    print(f"INFO: wrote {n} trace events of {TRACE_RUNS} profiled invokes (and LiteRT alone's) to {args.trace}: "
          "open it in Perfetto or chrome://tracing")


def _print_run_order(rows: list) -> None:
    """benchmark_model's per-node table, one row per delegated launch."""
    print()
    print("============================== Run Order ==============================")
    print(f"{'[node type]':>24} {'[nodes]':>12} {'[avg ms]':>10} {'[%]':>8} {'[cdf%]':>8}  [what]")
    for row in rows:
        what = row["what"] + (" (computed once, not at every invoke)" if row["folded"] else "")
        nodes = _node_runs(row["nodes"]) if row["nodes"] else "-"
        print(f"{row['node']:>24} {nodes:>12} {row['avg_ms']:>10.3f} "
              f"{row['pct']:>7.2f}% {row['cdf']:>7.2f}%  {what}")
    print("(OpenCL rows: event-profiled kernel time of each delegated launch, the profiled runs "
          "waiting for each kernel; the last row: the rest of an average inference, LiteRT's own "
          "nodes included)")



def _kernel_device(args):
    """The device ``kernel`` and ``export`` generate for: --device, as a --target type."""
    from .device import open_device  # noqa: PLC0415
    from .export import target_device  # noqa: PLC0415

    return target_device(open_device(args.device), args.target)


def _kernel_header(dev, target) -> None:
    print(f"// device: {dev.caps.platform}: {dev.caps.name}"
          + (f" (profile {dev.caps.profile})" if dev.caps.profile else ""))
    print(f"// target: {'gpu' if dev.caps.is_gpu else 'cpu'}"
          + ("" if target else " (the device's type; --target gpu|cpu picks another)"))


def _kernel_build(args, dev, source) -> None:
    if args.build:
        from .kernels import build_program  # noqa: PLC0415

        build_program(dev, source)
        print("// built OK")


#: types LiteRT's Python API cannot pass as an input, measured with ai-edge-litert 2.3.0
#: (int2: set_tensor says "Got value of type INT8 but expected type INT2"; bfloat16:
#: get_input_details raises "Invalid data-type for array")
_UNSETTABLE_INPUTS = ("int2", "bfloat16")


def cmd_kernel(args) -> int:
    from .ops.codegen import cast_kernel  # noqa: PLC0415
    from .ops.dtypes import dtype  # noqa: PLC0415

    dev = _kernel_device(args)
    try:
        src, dst = dtype(args.src), dtype(args.dst)
    except KeyError as e:
        raise _Usage(str(e.args[0])) from None
    try:
        source, plan = cast_kernel(src, dst, dev.caps)
    except ValueError as e:
        raise _Usage(f"CAST {src.name} -> {dst.name} on {dev.caps.name}: {e}") from None
    _kernel_header(dev, args.target)
    if src.name in _UNSETTABLE_INPUTS:  # LiteRT runs the CAST; its Python API cannot feed it
        print(f"// note: LiteRT runs CAST {src.name} -> {dst.name} on {src.name} tensors the model makes "
              f"(constants, other nodes' outputs); its Python API cannot pass {src.name} inputs")
    print("// chain: " + " -> ".join(plan.chain()))
    for line in plan.describe().splitlines():
        print("// " + line)
    print(source)
    _kernel_build(args, dev, source)
    return 0


def _arg_shape(text: str) -> tuple:
    """argparse type: a shape as comma-separated dims >= 0 ("2,3,4"; "" or "[]" for 0-d)."""
    t = text.strip().strip("[]()").strip()
    if not t:
        return ()
    try:
        dims = tuple(int(x) for x in t.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a shape such as 2,3,4 (or [] for a scalar), got {text!r}") from None
    if any(d < 0 for d in dims):
        raise argparse.ArgumentTypeError(f"dimensions must be >= 0, got {text!r}")
    return dims


def _arg_qparam(text: str) -> tuple:
    """argparse type: SCALE:ZERO_POINT (a tensor's per-tensor quantization)."""
    s, sep, z = text.partition(":")
    try:
        if not sep:
            raise ValueError
        scale, zp = float(s), int(z)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SCALE:ZERO_POINT such as 0.5:-3, got {text!r}") from None
    if not (np.isfinite(scale) and scale > 0):
        raise argparse.ArgumentTypeError(f"scale must be a finite number > 0, got {s!r}")
    return scale, zp


def cmd_kernel_add(args) -> int:
    from .ops import add as add_ops  # noqa: PLC0415
    from .ops.add_quant import quant_add_params, quant_add_why_not  # noqa: PLC0415
    from .ops.dtypes import dtype  # noqa: PLC0415
    from .ops.tiling import launch  # noqa: PLC0415

    dev = _kernel_device(args)
    try:
        dt = dtype(args.dtype)
    except KeyError as e:
        raise _Usage(str(e.args[0])) from None
    a, b = args.shapes
    try:
        out = add_ops.broadcast_shape(a, b)
    except ValueError as e:
        raise _Usage(f"ADD: {e}") from None  # "shapes [3, 4] and [5] do not broadcast"
    quant = None
    if dt.name in ("int8", "uint8") and args.quant is None:
        raise _Usage(f"{dt.name} ADD is quantized: pass --quant S1:Z1 S2:Z2 SOUT:ZOUT")
    if args.quant is not None:
        if dt.name not in ("int8", "uint8", "int16"):
            raise _Usage(f"--quant applies to int8, uint8 and int16 ADD, not {dt.name}")
        try:
            quant = quant_add_params(dt.name, *args.quant, args.activation,
                                     pot_scale_int16=args.pot_scale_int16)
            why = quant_add_why_not(quant, a, b)
        except ValueError as e:
            raise _Usage(f"quantized {dt.name} ADD: {e}") from None
        if why:
            raise _Usage(f"quantized {dt.name} ADD: {why}")
    why = add_ops.add_why_not(dt.name, [a, b, out], args.activation, dev.caps)
    if why:
        raise _Usage(f"ADD {dt.name} on {dev.caps.name}: {why}")
    try:
        source = add_ops.add_kernel(dt.name, a, b, args.activation, dev.caps, quant)
        tiling, gsize, lsize = launch(dev.caps, add_ops.numel(out), dt.itemsize)
    except ValueError as e:
        raise _Usage(f"ADD {dt.name} {list(a)} + {list(b)}: {e}") from None
    _kernel_header(dev, args.target)
    print(f"// ADD {dt.name} {list(a)} + {list(b)} -> {list(out)}, activation {args.activation}"
          + (f", quantized {' '.join(f'{s:g}:{z}' for s, z in args.quant)}" if quant else ""))
    n, former_num, former_len, tail_len = tiling.kernel_args()
    extra = add_ops.add_kernel_args(dt.name, a, b, args.activation, dev.caps, quant)
    print(f"// launch: litecl_add(a, b, out, n={n}, former_num={former_num}, former_len={former_len}, "
          f"tail_len={tail_len}{''.join(f', {k}={v}' for k, v in extra)}), global size {gsize[0]}, local size {lsize[0]}")
    print(source)
    _kernel_build(args, dev, source)
    return 0


def cmd_export(args) -> int:
    from .export import export  # noqa: PLC0415

    if not os.path.exists(args.model):
        raise _Usage(f"model file not found: {args.model}")
    if not args.out:
        raise _Usage("--out is empty: name the folder to write the delegate to")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise _Usage(f"cannot export to {args.out}: it is not a folder")
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):
        raise _Usage(f"cannot export to {args.out}: folder {parent} does not exist")
    m = export(args.model, args.out, device=args.device, target=args.target,
               signature=args.signature, placement=args.placement)
    d = m["device"]
    where = f"{d['platform']}: {d['name']}" + (f" (profile {d['profile']})" if d["profile"] else "")
    nat = m["native"]
    if not m["launches"] and not any(g["claimed"] for g in nat["subgraphs"]):
        kept = m.get("kept_on_litert", [])
        why = (f"; {len(kept)} CAST/ADD node(s) kept on LiteRT, e.g. node {kept[0]['index']} ({kept[0]['op']}): "
               f"{kept[0]['reason']}" if kept else "; the model has no CAST or ADD node")
        print(f"{args.model}: no node is lowered to OpenCL on {where} (target {m['target']}){why}; "
              f"wrote an empty manifest to {os.path.join(args.out, 'manifest.json')}")
        return 0
    print(f"exported litecl's native TFLite delegate for target {m['target']} on {where} to {args.out}: "
          f"{nat['programs']} programs ({nat['binaries']} with {d['name']}'s binary)")
    for g in nat["subgraphs"]:  # one line per subgraph: what the native delegate claims
        print(f"subgraph {g['subgraph']}: the native delegate claims {g['native_claimed']} of its "
              f"{g['nodes']} nodes at the exported shapes")
        if g["left_at_invoke"]:  # and what litecl.Delegate claims there but it leaves, and why
            print(f"subgraph {g['subgraph']}: {len(g['left_at_invoke'])} more node(s) that litecl.Delegate "
                  f"claims are left to LiteRT by the native delegate: their input shapes are known only at "
                  f"invoke (litecl.Delegate plans them then) and their kernels compile in the exported shapes")
    sources = len({ln["source"] for ln in m["launches"]})
    print(f"manifest.json: {len(m['launches'])} launches of the {len(m['partitions'])} partition(s) "
          f"planned at allocate_tensors in subgraph {m['subgraph']} ({len(m['lowered_nodes'])} nodes, "
          f"{sources} kernel sources, {sum(t['role'] == 'constant' for t in m['tensors'])} constants)")
    print(f"build it with: sh {os.path.join(args.out, 'build.sh')} "
          f"(then load_delegate('{os.path.join(args.out, nat['library'])}', "
          f"options from {os.path.join(args.out, 'delegate_options.json')}))")
    return 0


def cmd_sweep(args) -> int:
    """Every model x device in its own process, results as JSON lines, and a report (backend/sweep.py)."""
    from .sweep import run  # noqa: PLC0415

    return run(args)


def _parser() -> argparse.ArgumentParser:
    from . import __version__  # noqa: PLC0415

    p = _Parser(prog="litecl", description="Run TFLite models in LiteRT with litecl's OpenCL "
                "delegate (CAST and ADD on OpenCL, everything else on LiteRT); compare with LiteRT "
                "alone bit for bit.")
    p.add_argument("--version", action="version", version=f"litecl {__version__}",
                   help="print litecl's version and exit")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser,
                           help="what to do (litecl COMMAND --help for its options)")
    sub.required = True
    dev_help = ("OpenCL device: auto (default), gpu, cpu, pocl, intel, oclgrind, nvidia or a "
                "name substring (litecl devices lists each device's spec), optionally with :profile=mobile|mobile-fp16|nofp64|nofp16|strict|noint64 "
                "(default: $LITECL_DEVICE or auto)")
    model_help = "path of the .tflite model"
    seed_help = "seed of the random inputs used when --inputs is not given (an integer >= 0; default 0)"
    resize_help = ("resize fixed-shape inputs to the shapes the --inputs file holds (without it, "
                   "only dimensions that are -1 in an input's shape_signature may differ from "
                   "the model's shape, as in LiteRT's strict resize)")
    full_range_help = ("random inputs over the full range: every integer type (int32 and "
                       "int64 included) uniform over all its values, floats (and complex parts) "
                       "random bit patterns, so NaN, inf and subnormals appear; bool stays a "
                       "fair coin. Integer inputs used as indices are then out of range. "
                       "Default: normal floats, 8-bit integers over their range, 16-bit and "
                       "wider in [0, 10) (they are often indices)")
    sig_help = ("signature key to run (default: subgraph 0, or the first signature when "
                "subgraph 0 has no inputs, or the only signature when --inputs names its inputs)")
    ref_choices = ("builtin", "ref", "xnnpack")
    placement_help = ("all (default): every node that can run on OpenCL does; auto: only where the "
                      "cost model (the device's measured bandwidth and round trip against LiteRT's) "
                      "expects it to be faster, the rest stays on LiteRT")
    threads_help = ("LiteRT's num_threads for the nodes it runs (an integer >= 1, as LiteRT; "
                    "default LiteRT's)")
    reference_help = ("LiteRT's op resolver, with and without the delegate: builtin (default: its "
                      "builtin kernels without XNNPACK), ref (its reference kernels, BUILTIN_REF) "
                      "or xnnpack (its default configuration: XNNPACK takes the nodes litecl leaves)")
    threads_type = _arg_int(1, "an integer >= 1 and <= 2147483647 (LiteRT's C int)", 2**31 - 1)

    def add_placement(s):
        s.add_argument("--placement", choices=("all", "auto"), default="all", help=placement_help)

    s = sub.add_parser("devices", help="list OpenCL devices and their capabilities")
    s.add_argument("--json", action="store_true", help="print the devices as a JSON list")
    s.add_argument("--check", action="store_true",
                   help="run litecl's self-test of every kernel family on every device (each in a child "
                        "process) and say which families a device computes wrong")
    s.add_argument("--ray-resources", action="store_true",
                   help="print this node's devices as Ray custom resources, the argument of ray start "
                        "--resources for litecl sweep --ray (one litecl_device:SPEC per spec that selects a device)")
    s.set_defaults(fn=cmd_devices)

    s = sub.add_parser("inspect", help="show where each CAST/ADD node runs (OpenCL or LiteRT) and why")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    s.add_argument("--signature", metavar="KEY",
                   help="show only the nodes of this signature's subgraph (and the subgraphs it calls)")
    s.add_argument("--json", action="store_true",
                   help="print JSON: model, device {platform, name, profile}, signature, nodes, "
                   "graphs, summary, fused, notes")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.add_argument("--html", metavar="FILE", help="also write the graph as litecl placed it to this HTML file "
                   "(one offline file: nodes in execution order, coloured by where they run, partitions boxed)")
    add_placement(s)
    s.set_defaults(fn=cmd_inspect)

    def add_input_args(s):  # what run and compare share: the inputs and how the model runs
        s.add_argument("--inputs", metavar="NPZ",
                       help=".npz of inputs keyed by input tensor (or signature input) name")
        s.add_argument("--seed", type=_NON_NEGATIVE, default=0, help=seed_help)
        s.add_argument("--full-range", action="store_true", help=full_range_help)
        s.add_argument("--resize", action="store_true", help=resize_help)
        s.add_argument("--signature", metavar="KEY", help=sig_help)
        s.add_argument("--num_threads", type=threads_type, default=None, metavar="N", help=threads_help)
        add_placement(s)

    s = sub.add_parser("run", help="run a model (seeded random inputs unless --inputs)")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    add_input_args(s)
    s.add_argument("--output", metavar="NPZ",
                   help="write outputs to this .npz, keyed by output name (.npz is appended when missing)")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("compare", help="run LiteRT with and without litecl's delegate on the same "
                       "inputs; exit 1 on any difference")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    add_input_args(s)
    s.add_argument("--json", action="store_true",
                   help="print JSON: model, device {platform, name, profile}, signature, "
                   "reference, all_bit_exact, opencl_nodes, nodes, partitions, outputs; several "
                   "signatures compared: model, device, reference, all_bit_exact and signatures, "
                   "a list of {signature, all_bit_exact, opencl_nodes, nodes, partitions, outputs}")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.set_defaults(fn=cmd_compare)

    s = sub.add_parser("bench", help="benchmark_model-style timings of LiteRT with and without the "
                       "delegate, and the delegated launches' kernel times")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    s.add_argument("--signature", metavar="KEY", help=sig_help)
    s.add_argument("--inputs", metavar="NPZ", help=".npz of inputs keyed by input name (default: seeded random)")
    s.add_argument("--resize", action="store_true", help=resize_help)
    s.add_argument("--seed", type=_NON_NEGATIVE, default=0, help=seed_help)
    s.add_argument("--num_threads", type=threads_type, default=None, metavar="N", help=threads_help)
    add_placement(s)
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    s.add_argument("--warmup_runs", type=_arg_int(0, f"an integer >= 0 and <= {MAX_NUM_RUNS}", MAX_NUM_RUNS),
                   default=1, metavar="N",
                   help=f"warm-up runs, at least (an integer from 0 to {MAX_NUM_RUNS:,}: each run's time is "
                        "kept; default 1; one run is always done)")
    s.add_argument("--warmup_min_secs", type=_arg_secs, default=0.5, metavar="SECS",
                   help="warm up for at least this many seconds (>= 0; default 0.5)")
    s.add_argument("--num_runs", type=_arg_int(1, f"an integer >= 1 and <= {MAX_NUM_RUNS}", MAX_NUM_RUNS),
                   default=50, metavar="N",
                   help=f"timed runs, at least (an integer from 1 to {MAX_NUM_RUNS:,}: each run's time "
                        "is kept for the median, litecl's and LiteRT's; default 50)")
    s.add_argument("--min_secs", type=_arg_secs, default=1.0, metavar="SECS",
                   help="time runs for at least this many seconds (>= 0; default 1)")
    s.add_argument("--max_secs", type=_arg_secs, default=150.0, metavar="SECS",
                   help="stop warm-up and timed runs after this many seconds each, even "
                   "before --warmup_runs/--num_runs (>= 0; default 150)")
    s.add_argument("--profile_runs", type=_arg_int(0, f"an integer >= 0 and <= {MAX_PROFILE_RUNS}", MAX_PROFILE_RUNS),
                   default=10, metavar="N",
                   help="profiled runs averaged in the per-launch table of event-profiled kernel "
                   f"times (an integer from 0 to {MAX_PROFILE_RUNS:,}: --max_secs does not bound them; "
                   "0: no table; default 10)")
    s.add_argument("--json", metavar="FILE",
                   help="also write the results to this JSON file (checked before the benchmark runs)")
    s.add_argument("--trace", metavar="FILE", help="also write a few profiled invokes as Chrome trace-event JSON "
                   "(Perfetto, chrome://tracing): partitions, copies, kernels, waits, LiteRT's spans between")
    s.set_defaults(fn=cmd_bench)

    target_help = ("generate for this device type: its launch row (ops/tiling.py LAUNCH) and code "
                   "path, whatever --device is (default: the device's own type)")
    s = sub.add_parser("export", help="write a native TFLite delegate for a model: C99 sources with "
                       "its kernels (OpenCL C and program binaries), build.sh, delegate_options.json "
                       "and a manifest of the launches")
    s.add_argument("model", help=model_help)
    s.add_argument("--out", required=True, metavar="DIR",
                   help="folder to write the delegate's sources, build.sh, delegate_options.json, "
                   "manifest.json, the .cl files and the constants to: a new or empty folder, or one "
                   "holding an earlier litecl export (only the files its manifest.json lists are replaced)")
    s.add_argument("--device", help=dev_help + "; kernels are built and checked there")
    s.add_argument("--target", choices=("gpu", "cpu"), help=target_help)
    s.add_argument("--signature", metavar="KEY", help=sig_help)
    s.add_argument("--placement", choices=("all", "auto"), default="all",
                   help="which nodes the delegate takes: all (every node litecl lowers; default) "
                   "or auto (only where the cost model expects OpenCL to be faster)")
    s.set_defaults(fn=cmd_export)

    s = sub.add_parser("sweep", help="check many models on many devices (verifier, placement, compare; "
                       "--bench timings), each in its own process, resumable; --report DIR: the report alone")
    s.add_argument("models", nargs="*", metavar="MODEL",
                   help="a .tflite file, a folder (searched for *.tflite) or a list file (one path a line)")
    s.add_argument("--device", action="append", metavar="SPEC", help="an OpenCL device spec as --device of the "
                   "other commands (litecl devices lists them), :profile=NAME allowed; repeat the flag for more "
                   "devices (a spec may hold commas); at least one")
    s.add_argument("--out", metavar="DIR", help="folder of results.jsonl, report.md and report.html")
    s.add_argument("--report", metavar="DIR", help="only write DIR/report.md and report.html from DIR's results")
    s.add_argument("--jobs", type=_POSITIVE, metavar="N", help="jobs at once (default: cores divided by the "
                   "threads one CPU device uses, plus one per GPU)")
    s.add_argument("--timeout", type=_arg_secs, default=600.0, metavar="SECS",
                   help="time limit of each job's process (default 600): a job past it is killed, an error row")
    s.add_argument("--reference", choices=ref_choices, default="builtin", help=reference_help)
    add_placement(s)
    s.add_argument("--bench", action="store_true", help="also time litecl against LiteRT (litecl bench) on each "
                   "model that ran, one job at a time after the checks")
    s.add_argument("--num_runs", type=_POSITIVE, default=50, metavar="N", help="--bench's timed runs (default 50)")
    s.add_argument("--force", action="store_true", help="redo jobs whose results are already in DIR")
    s.add_argument("--ray", nargs="?", const="auto", metavar="ADDRESS",
                   help="run the jobs on a Ray cluster (default ADDRESS: auto, the one this machine is a node of; "
                        "else HOST:PORT or ray://HOST:PORT), each on a node whose ray start --resources offers its "
                        "device (litecl devices --ray-resources); needs pip install 'litecl[cluster]'")
    s.set_defaults(fn=cmd_sweep)

    s = sub.add_parser("kernel", help="print a generated kernel")
    ks = s.add_subparsers(dest="kind", metavar="KIND", parser_class=_Parser,
                          help="which kernel")
    ks.required = True
    c = ks.add_parser("cast", help="the CAST SRC -> DST chain and OpenCL source")
    types = "bool, int8, uint8, int16, uint16, int32, uint32, int64, float16, float32, float64, complex64"
    c.add_argument("src", help=f"source tensor type: {types}")
    c.add_argument("dst", help=f"destination tensor type: {types}")
    c.add_argument("--device", help=dev_help)
    c.add_argument("--target", choices=("gpu", "cpu"), help=target_help)
    c.add_argument("--build", action="store_true", help="also build it on the device")
    c.set_defaults(fn=cmd_kernel)
    c = ks.add_parser("add", help="the ADD kernel of a dtype, shapes, activation and quantization")
    c.add_argument("dtype", help="tensor type: float32, float16, int32, int64, or int8, uint8, int16 (quantized)")
    c.add_argument("--shapes", nargs=2, type=_arg_shape, default=[(16,), (16,)], metavar=("A", "B"),
                   help="the two input shapes, comma-separated dims (2,3,4; [] for a scalar), "
                        "broadcast like numpy (default 16 16)")
    c.add_argument("--activation", choices=("NONE", "RELU", "RELU6", "RELU_N1_TO_1"), default="NONE",
                   help="fused activation (default NONE)")
    c.add_argument("--quant", nargs=3, type=_arg_qparam, metavar=("S1:Z1", "S2:Z2", "SOUT:ZOUT"),
                   help="per-tensor (scale, zero point) of input 1, input 2 and the output: needed "
                        "for int8/uint8, optional for int16 (without it int16 ADD wraps, as LiteRT's)")
    c.add_argument("--pot-scale-int16", action="store_true",
                   help="AddOptions.pot_scale_int16 (int16 with power-of-two scales takes LiteRT's "
                        "POT path; default off, as the TFLite converter writes it)")
    c.add_argument("--device", help=dev_help)
    c.add_argument("--target", choices=("gpu", "cpu"), help=target_help)
    c.add_argument("--build", action="store_true", help="also build it on the device")
    c.set_defaults(fn=cmd_kernel_add)
    return p


#: A yes/no variable (errors.env_flag): on, commands run in the litecl process itself,
#: without the supervising parent that turns a crash into an error line (see _supervised).
NO_SUPERVISOR_ENV = "LITECL_NO_SUPERVISOR"
#: The error line's start when the process running a command died of a signal.
CRASH_PREFIX = "the process running the model crashed"
#: How a runtime's own crash handler starts what it prints as the process dies (LLVM's,
#: which Intel's CPU runtime installs: "PLEASE submit a bug report to
#: https://software.intel.com/..."; then "Stack dump:" and frames). From such a line on,
#: the supervisor holds the child's stderr: dropped when the child dies of a signal (the
#: error line names the crash; LITECL_DEBUG=1 keeps them), passed on otherwise.
_CRASH_BANNERS = (b"PLEASE submit a bug report", b"Stack dump:")


def _supervised(args) -> int:  # noqa: C901
    """Run the command in a forked child and wait for it: LiteRT runs the model, and the
    OpenCL runtime litecl's delegate kernels, in-process, so a crash there (SIGSEGV, SIGABRT) would
    end `litecl` with no error line. The child does the work (stdout shared, stderr relayed
    line by line: _relay_stderr);
    when it dies of a signal the parent prints one `error:` line and exits 2. The fork
    comes before any OpenCL device is opened (after the arguments are parsed). SIGINT and
    SIGTERM given to the parent are passed on; the child dies with its parent (Linux
    PR_SET_PDEATHSIG), so a killed `litecl` leaves nothing running."""
    import signal  # noqa: PLC0415
    import threading  # noqa: PLC0415

    from .errors import env_flag  # noqa: PLC0415

    sys.stdout.flush()
    sys.stderr.flush()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: do the work
        os.close(err_r)
        os.dup2(err_w, 2)
        os.close(err_w)
        # Ctrl-C ends the child at once (the parent says "interrupted (SIGINT)"): raised as
        # KeyboardInterrupt it could land inside a delegate callback LiteRT called, where
        # Python prints it as an ignored exception with a traceback
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            import ctypes  # noqa: PLC0415

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # noqa: BLE001  (not Linux: no parent-death signal)
            pass
        code = 2
        try:
            code = _dispatch(args)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code if isinstance(code, int) else 2)
    def _forward(s, _f):
        try:
            os.kill(pid, s)
        except ProcessLookupError:  # the child is gone already
            pass
    os.close(err_w)
    held: list = []
    relay = threading.Thread(target=_relay_stderr, args=(err_r, held), daemon=True)
    relay.start()
    forward = {sig: signal.signal(sig, _forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except InterruptedError:
                continue
    finally:
        for sig, old in forward.items():
            signal.signal(sig, old)
    relay.join(5)  # a process the child started may still hold the pipe: not waited for
    if held and (not os.WIFSIGNALED(status) or env_flag("LITECL_DEBUG")):
        _write_err(b"".join(held))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        if sig in (signal.SIGINT, signal.SIGTERM):
            return _fail(f"interrupted ({name})")
        if sig == signal.SIGKILL:  # not a crash, and no Ctrl-C: the OOM killer, or kill -9
            return _fail(f"the child running `litecl {args.cmd}` was killed (SIGKILL): by another process "
                         "or by the kernel's out-of-memory killer (`dmesg` names it)")
        return _fail(f"{CRASH_PREFIX} ({name}) in LiteRT or the OpenCL runtime while running "
                     f"`litecl {args.cmd}` on {getattr(args, 'model', '?')}; litecl refuses the "
                     "models LiteRT is known to crash on, so please report this one")
    return os.WEXITSTATUS(status)


def _relay_stderr(fd: int, held: list) -> None:
    """Pass the child's stderr on line by line, holding every line from a runtime's crash
    banner on (_CRASH_BANNERS) in ``held``."""
    with os.fdopen(fd, "rb", buffering=0) as f:
        buf = b""
        while chunk := f.read(65536):
            buf += chunk
            *lines, buf = buf.split(b"\n")
            out = []
            for ln in lines:
                if held or ln.lstrip().startswith(_CRASH_BANNERS):
                    held.append(ln + b"\n")
                else:
                    out.append(ln + b"\n")
            if out:
                _write_err(b"".join(out))
        if buf and held:
            held.append(buf)
        elif buf:
            _write_err(buf)


def _write_err(data: bytes) -> None:
    try:
        sys.stderr.flush()
        while data:
            data = data[os.write(2, data):]
    except OSError:  # stderr closed: nothing to say it on
        pass


def main(argv=None) -> int:
    """The command line. With ``argv`` None (the ``litecl`` program), the commands that run
    a model (inspect, run, compare, bench, export) run in a supervised child (``_supervised``)
    unless $LITECL_NO_SUPERVISOR is on; an explicit ``argv`` runs in this process. A yes/no
    variable (LITECL_NO_SUPERVISOR, LITECL_DEBUG, LITECL_QUIET, LITECL_NO_CACHE) holding no
    yes/no word is an error line."""
    from .errors import LiteclError, env_flag  # noqa: PLC0415

    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --help, --version
        return e.code if isinstance(e.code, int) else 0
    except _Usage as e:
        return _fail(str(e))
    try:
        # every yes/no variable now, not while _internal reports another error; LITECL_QUIET
        # too, which the commands do not read (they pass quiet=True), so a bad value is
        # refused here as in Python
        for name in ("LITECL_DEBUG", "LITECL_QUIET", "LITECL_NO_CACHE"):
            env_flag(name)
        supervise = not env_flag(NO_SUPERVISOR_ENV)
    except LiteclError as e:
        return _fail(str(e))
    if argv is None and args.fn in (cmd_inspect, cmd_run, cmd_compare, cmd_bench, cmd_export) \
            and supervise and hasattr(os, "fork"):
        return _supervised(args)
    if argv is None:
        _exit_on_sigint()
    return _dispatch(args)


def _exit_on_sigint() -> None:
    """The ``litecl`` program run in-process: Ctrl-C prints one ``error: interrupted
    (SIGINT)`` line and exits 2 at once. As a KeyboardInterrupt it could land inside a
    delegate callback LiteRT called, which Python prints as an ignored exception with a
    traceback, and LiteRT then reports a failed node."""
    import signal  # noqa: PLC0415

    def stop(_s, _f):
        try:
            sys.stdout.flush()
        finally:
            os.write(2, b"error: interrupted (SIGINT)\n")
            os._exit(2)
    signal.signal(signal.SIGINT, stop)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    """warnings.showwarning for the command line: ``warning: ...`` on one line of stderr,
    without the source file and line Python's default shows."""
    text = " ".join(str(message).split())
    print(f"warning: {text[len('litecl: '):] if text.startswith('litecl: ') else text}",
          file=file or sys.stderr)


def _raised_by_litert(e: BaseException) -> bool:
    """Whether ``e`` was raised inside LiteRT's Python package (its binding's errors,
    e.g. "Didn't find op for builtin opcode 'CAST' version '31'"), not by litecl or numpy."""
    import ai_edge_litert  # noqa: PLC0415

    tb, last = e.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    pkg = os.path.dirname(ai_edge_litert.__file__)
    return last is not None and os.path.abspath(last.tb_frame.f_code.co_filename).startswith(pkg + os.sep)


def _dispatch(args) -> int:
    """Run the parsed command, mapping every error to one `error:` line (exit 2) and every
    warning to one `warning:` line."""
    import warnings  # noqa: PLC0415

    from .errors import LiteclError  # noqa: PLC0415

    warnings.showwarning = _one_line_warning
    for flag in ("inputs", "output", "json", "html", "trace"):  # an unset shell variable: not "no file"
        v = getattr(args, flag, None)
        if isinstance(v, str) and not v.strip():
            return _fail(f"--{flag} is empty: name the file (or leave the option out)")
    try:
        return args.fn(args)
    except _Usage as e:
        return _fail(str(e))
    except LiteclError as e:
        return _fail(str(e))
    except RuntimeError as e:  # LiteRT reports failed invokes of its own nodes this way
        return _fail(f"LiteRT: {' '.join(str(e).split())[:300]}")
    except ValueError as e:  # LiteRT's own refusals (an op version or a type it lacks)
        if isinstance(e, UnicodeDecodeError) and _raised_by_litert(e):
            # get_input_details / get_output_details decode every name as UTF-8
            return _fail(f"LiteRT's Python API cannot read a tensor name of this model: it is not UTF-8 "
                         f"({bytes(e.object[max(e.start - 20, 0):e.end + 20])!r}); the commands name "
                         "inputs and outputs through that API (the Python API runs the model)")
        if _raised_by_litert(e):
            return _fail(f"LiteRT: {' '.join(str(e).split())[:300]}")
        return _internal(e)
    except MemoryError:
        return _fail("out of memory (does the model or an input hold a huge tensor?)")
    except KeyboardInterrupt:
        return _fail("interrupted")
    except BrokenPipeError:
        return 0
    except Exception as e:  # never a traceback for the user
        return _internal(e)


def _internal(e: Exception) -> int:
    from .errors import LiteclError, env_flag  # noqa: PLC0415

    try:
        debug = env_flag("LITECL_DEBUG")
    except LiteclError:  # main() refused it already; a caller of _dispatch gets the one line
        debug = False
    if debug:
        import traceback  # noqa: PLC0415

        traceback.print_exception(type(e), e, e.__traceback__)  # then exit 2, as any error
        sys.stderr.flush()
        return 2
    return _fail(f"internal error ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                 "set LITECL_DEBUG=1 for a traceback")


if __name__ == "__main__":
    sys.exit(main())
