"""The ``litecl`` command line: devices, inspect, run, compare, bench, kernel, --version.

Errors print one ``error: ...`` line on stderr and exit with status 2 (set LITECL_DEBUG=1
for a traceback). ``compare`` exits 1 when any output differs from LiteRT.
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
    def error(self, message):  # argparse's own exit status is 2 already; keep one line
        raise _Usage(message)


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def _arg_int(lo: int, what: str):
    """argparse type: an integer >= lo."""
    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if v < lo:
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

_NPZ_WANTED = "expected a .npz archive of arrays keyed by input name (numpy.savez(path, name=array))"


def _load_npz(path: str) -> dict:
    if not os.path.exists(path):
        raise _Usage(f"inputs file not found: {path}")
    if os.path.isdir(path):
        raise _Usage(f"cannot read inputs file {path}: it is a directory; {_NPZ_WANTED}")
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


def _placement_of(interp, sig) -> list[dict]:
    """placement() entries of the subgraph that runs (signature ``sig``, else subgraph 0)
    and of the subgraphs it calls."""
    keep = _reachable(interp, _subgraph_of(interp, sig))
    return [p for p in interp.placement() if p["subgraph"] in keep]


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
        if v.dtype != want:
            raise _Usage(f"input {d['name']!r} expects {want}, got {v.dtype}")
        _check_shape(d, v, resize)
        out[d["name"]] = v
    return out


def _open(args):
    from .interpreter import Interpreter  # noqa: PLC0415

    return Interpreter(model_path=args.model, device=args.device,
                       strict=getattr(args, "strict", False),
                       reference=getattr(args, "reference", "builtin"))


def _fit_sub_byte(inputs: dict, details: list[dict], interp, sig) -> dict:
    """Seeded int4/uint4 inputs drawn in their range: their details say int8/uint8 (as
    LiteRT's), and set_tensor refuses values outside it (as LiteRT does)."""
    if interp is None:
        return inputs
    g = interp.get_signature_runner(sig)._graph if sig is not None else interp._graph(0)
    for k, d in enumerate(details):
        t = g.sg.tensors[int(d["index"])]
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


def _run_litecl(interp, inputs: dict, signature):
    if signature is not None:
        return dict(interp.get_signature_runner(signature)(**inputs))
    for d in interp.get_input_details():
        v = inputs[d["name"]]
        if tuple(v.shape) != tuple(d["shape"]):
            interp.resize_tensor_input(d["index"], list(v.shape))
    interp.allocate_tensors()
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], inputs[d["name"]])
    interp.invoke()
    return {d["name"]: interp.get_tensor(d["index"]) for d in interp.get_output_details()}


def _pick_signature(interp, sig):
    if sig is not None:
        interp.get_signature_runner(sig)  # validates the key
        return sig
    if not interp._model.subgraphs[0].inputs and interp.get_signature_list():
        return next(iter(interp.get_signature_list()))
    return None


def cmd_devices(args) -> int:
    from .device import list_devices  # noqa: PLC0415

    from .device import _all_devices, probe_compiler  # noqa: PLC0415

    devs = list_devices()
    # each device builds a trivial kernel first: one that cannot (PoCL 3.0 on AMD Zen 5)
    # would send every node to the fallback
    errors = [probe_compiler(d) for d in _all_devices()]
    if args.json:
        print(json.dumps([{
            "platform": c.platform, "name": c.name, "driver": c.driver, "gpu": c.is_gpu,
            "fp16": c.fp16, "fp64": c.fp64, "int64": c.int64, "compute_units": c.compute_units,
            "max_work_group_size": c.max_work_group_size, "builds_kernels": not err,
            "build_error": err} for c, err in zip(devs, errors)], indent=2))
        return 0
    for c, err in zip(devs, errors):
        feats = ", ".join(f for f, on in (("fp16", c.fp16), ("fp64", c.fp64), ("int64", c.int64)) if on)
        kind = "GPU" if c.is_gpu else "CPU/other"
        bad = f"; CANNOT BUILD KERNELS: {err}" if err else ""
        print(f"{c.platform}: {c.name} [{kind}; {c.compute_units} compute units; "
              f"max work-group {c.max_work_group_size}; {feats or 'no fp16/fp64'}{bad}]")
    return 0


def cmd_inspect(args) -> int:
    from .partition import Placement, summary_lines  # noqa: PLC0415

    interp = _open(args)
    # allocating builds the kernels: a node whose kernel fails to build shows as a
    # fallback with the build log in its reason
    if args.signature is not None:
        interp.get_signature_runner(args.signature).allocate_tensors()  # validates the key
        pl = _placement_of(interp, args.signature)
        keep = {p["subgraph"] for p in pl} | {_subgraph_of(interp, args.signature)}
        entries = interp._entry_subgraphs()
        summary = summary_lines([Placement(**p) for p in pl],
                                {si: interp._graph(si).ex.segments for si in entries if si in keep})
    else:
        interp.allocate_tensors()
        for key in interp.get_signature_list():
            interp.get_signature_runner(key).allocate_tensors()
        pl = interp.placement()
        summary = interp.summary()
    fused = _fused_groups(interp, {p["subgraph"] for p in pl})
    if args.json:
        print(json.dumps({"model": args.model, "device": _device_json(interp.device),
                          "signature": args.signature, "nodes": pl, "summary": summary,
                          "fused": fused}, indent=2))
        return 0
    print(f"model: {args.model}" + (f"  signature: {args.signature}" if args.signature else ""))
    print(f"device: {_device_line(interp.device)}")
    print(f"{'subgraph':>8} {'node':>5}  {'op':<24} {'placement':<9}  reason")
    for p in pl:
        print(f"{p['subgraph']:>8} {p['index']:>5}  {p['op']:<24} {p['placement']:<9}  {p['reason']}")
    print()
    for line in summary:
        print(line)
    for f in fused:
        print(f"Fused into one OpenCL kernel: subgraph {f['subgraph']} nodes "
              f"{', '.join(map(str, f['nodes']))} ({', '.join(f['ops'])}).")
    return 0


def _fused_groups(interp, subgraphs) -> list[dict]:
    """The fused kernels allocate_tensors() formed, per subgraph it planned."""
    out = []
    for si in sorted(subgraphs):
        g = interp._graphs.get(si)
        if g is None or g.ex is None:
            continue
        for lead in sorted(g.ex._groups):
            nodes = g.ex._groups[lead].nodes
            out.append({"subgraph": si, "nodes": list(nodes), "ops": [g.sg.nodes[i].op for i in nodes]})
    return out


def _open_with_inputs(args):
    """run/compare: (interpreter, signature key or None, inputs by name) from the
    command line (--inputs or seeded random, --resize, --full-range, --signature)."""
    given = _load_npz(args.inputs) if args.inputs else None
    interp = _open(args)
    sig = _pick_signature(interp, args.signature)
    inputs = _inputs_for(_details_by_name(interp, sig), given, args.seed, args.resize, args.full_range,
                         interp, sig)
    return interp, sig, inputs


def cmd_run(args) -> int:
    out_path = None
    if args.output:
        if os.path.isdir(args.output):
            raise _Usage(f"cannot write outputs file {args.output}: it is a directory")
        out_path = _npz_path(args.output)
        _check_writable(out_path, "outputs file")
    interp, sig, inputs = _open_with_inputs(args)
    outs = _run_litecl(interp, inputs, sig)
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


def cmd_compare(args) -> int:
    from .compare import diff_report, run_reference  # noqa: PLC0415

    interp, sig, inputs = _open_with_inputs(args)
    got = _run_litecl(interp, inputs, sig)
    try:
        want = run_reference(interp._model.raw, inputs, sig, reference=args.reference)
    except (RuntimeError, ValueError) as e:  # e.g. an op version this LiteRT lacks
        msg = " ".join(str(e).split())[:300]
        raise _Usage(f"LiteRT cannot run the model as the reference: {msg}") from None
    reps = [diff_report(k, got.get(k, np.array([])), v) for k, v in want.items()]
    ok = all(r["bit_exact"] for r in reps)
    pl = _placement_of(interp, sig)  # the nodes that ran: the signature's subgraph
    on = sum(p["placement"] == "opencl" for p in pl)
    if args.json:
        print(json.dumps({"model": args.model, "device": _device_json(interp.device),
                          "signature": sig, "all_bit_exact": ok,
                          "opencl_nodes": on, "nodes": len(pl), "outputs": reps}, indent=2))
    else:
        print(f"model: {args.model}" + (f"  signature: {sig}" if sig else "")
              + f"  device: {_device_line(interp.device)}  nodes on OpenCL: {on}/{len(pl)}")
        print(f"{'output':<32} {'dtype':<9} {'shape':<18} {'bit-exact':<9} {'max abs diff':>12} {'mismatched':>10}")
        for r in reps:
            mad = "-" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.6g}"
            print(f"{r['name'][:32]:<32} {r['dtype']:<9} {str(r['shape']):<18} "
                  f"{'yes' if r['bit_exact'] else 'NO':<9} {mad:>12} {r['mismatched']:>10}")
        print("all outputs bit-exact with LiteRT" if ok else "outputs DIFFER from LiteRT")
    return 0 if ok else 1


def cmd_bench(args) -> int:
    import time  # noqa: PLC0415

    from .bench import benchmark_interpreter, format_stats, node_profile  # noqa: PLC0415
    from .interpreter import Interpreter  # noqa: PLC0415

    if args.json:
        _check_writable(args.json, "JSON file")
    given = _load_npz(args.inputs) if args.inputs else None
    t0 = time.perf_counter()
    interp = Interpreter(model_path=args.model, device=args.device, num_threads=args.num_threads)
    interp.allocate_tensors()
    init_ms = (time.perf_counter() - t0) * 1e3
    sig = _pick_signature(interp, args.signature)
    run = ex = None
    if sig is None:
        details = interp.get_input_details()
        by_name = _inputs_for(details, given, args.seed, args.resize, interp=interp)
        resized = False
        for d in details:
            if tuple(by_name[d["name"]].shape) != tuple(d["shape"]):
                interp.resize_tensor_input(d["index"], list(by_name[d["name"]].shape))
                resized = True
        if resized:
            interp.allocate_tensors()
        inputs = {d["index"]: by_name[d["name"]] for d in details}
    else:  # a signature: its runner takes the inputs by name (and resizes to them)
        by_name = _inputs_for(_details_by_name(interp, sig), given, args.seed, args.resize, interp=interp, sig=sig)
        runner = interp.get_signature_runner(sig)
        inputs, ex = {}, runner._g.ex

        def run():
            runner(**by_name)
        print(f"INFO: signature: {sig}")
    print(f"INFO: litecl device: {_device_line(interp.device)}")
    print(f"INFO: Initialized session in {init_ms:.3f}ms.")
    print(f"INFO: Running benchmark for at least {args.warmup_runs} iterations and at least "
          f"{args.warmup_min_secs} seconds but terminate if exceeding {args.max_secs} seconds.")
    res = benchmark_interpreter(interp, inputs, warmup_runs=args.warmup_runs,
                                warmup_min_secs=args.warmup_min_secs, num_runs=args.num_runs,
                                min_secs=args.min_secs, max_secs=args.max_secs, run=run)
    print(f"INFO: {format_stats(res['warmup'])}")
    print(f"INFO: Running benchmark for at least {args.num_runs} iterations and at least "
          f"{args.min_secs} seconds but terminate if exceeding {args.max_secs} seconds.")
    print(f"INFO: {format_stats(res['runs'])}")
    w, r = res["warmup"], res["runs"]
    print(f"INFO: Inference timings in us: Init: {init_ms * 1e3:.0f}, First inference: "
          f"{w['first']:.0f}, Warmup (avg): {w['avg']:.0f}, Inference (avg): {r['avg']:.0f}")
    rows = node_profile(interp, inputs, runs=args.profile_runs, run=run, ex=ex)
    print()
    print("============================== Run Order ==============================")
    print(f"{'[node type]':>24} {'[placement]':>11} {'[avg ms]':>10} {'[%]':>8} {'[cdf%]':>8}  [what]")
    for row in rows:
        what = row["what"] + (" (computed once at allocate_tensors)" if row["folded"] else "")
        print(f"{row['node']:>24} {row['placement']:>11} {row['avg_ms']:>10.3f} "
              f"{row['pct']:>7.2f}% {row['cdf']:>7.2f}%  {what}")
    other = r["avg"] / 1e3 - sum(row["avg_ms"] for row in rows)
    print(f"{'(other)':>24} {'host':>11} {max(other, 0.0):>10.3f}  transfers, launches, "
          "Python overhead (inference avg minus the rows above)")
    print("(OpenCL rows: event-profiled kernel time; fallback rows: wall time of the LiteRT "
          "sub-interpreter's invoke; profiled runs wait for each kernel)")
    if args.json:
        try:
            with open(args.json, "w") as f:
                json.dump({"model": args.model, "device": _device_json(interp.device),
                           "init_ms": init_ms, **res, "nodes": rows}, f, indent=2)
        except OSError as e:
            raise _Usage(f"cannot write JSON file {args.json}: {e.strerror or e}") from None
    return 0


def cmd_kernel(args) -> int:
    from .device import open_device  # noqa: PLC0415
    from .ops.codegen import cast_kernel  # noqa: PLC0415
    from .ops.dtypes import dtype  # noqa: PLC0415

    dev = open_device(args.device)
    try:
        src, dst = dtype(args.src), dtype(args.dst)
    except KeyError as e:
        raise _Usage(str(e.args[0])) from None
    try:
        source, plan = cast_kernel(src, dst, dev.caps)
    except ValueError as e:
        raise _Usage(f"CAST {src.name} -> {dst.name} on {dev.caps.name}: {e}") from None
    print(f"// device: {dev.caps.platform}: {dev.caps.name}"
          + (f" (profile {dev.caps.profile})" if dev.caps.profile else ""))
    print("// chain: " + " -> ".join(plan.chain()))
    for line in plan.describe().splitlines():
        print("// " + line)
    print(source)
    if args.build:
        from .executor import build_program  # noqa: PLC0415

        build_program(dev, source)
        print("// built OK")
    return 0


def _parser() -> argparse.ArgumentParser:
    from . import __version__  # noqa: PLC0415

    p = _Parser(prog="litecl", description="Run TFLite models with CAST/ADD on OpenCL, "
                "everything else on LiteRT; compare with LiteRT bit for bit.")
    p.add_argument("--version", action="version", version=f"litecl {__version__}",
                   help="print litecl's version and exit")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser,
                           help="what to do (litecl COMMAND --help for its options)")
    sub.required = True
    dev_help = ("OpenCL device: auto (default), pocl, intel, oclgrind, nvidia or a name "
                "substring, optionally with :profile=mobile|mobile-fp16|nofp64|nofp16|strict|noint64 "
                "(default: $LITECL_DEVICE or auto)")
    model_help = "path of the .tflite model"
    seed_help = "seed of the random inputs used when --inputs is not given (an integer >= 0; default 0)"
    resize_help = ("resize fixed-shape inputs to the shapes the --inputs file holds (without it, "
                   "only dimensions that are -1 in an input's shape_signature may differ from "
                   "the model's shape, as in LiteRT's strict resize)")
    full_range_help = ("random inputs over the full range: 8- and 16-bit integers uniform over "
                       "all their values, floats (and complex parts) random bit patterns, so "
                       "NaN, inf and subnormals appear; bool stays a fair coin and wider "
                       "integers stay in [0, 10) (they are often indices). Default: normal "
                       "floats, 8-bit integers over their range, 16-bit and wider in [0, 10)")
    sig_help = ("signature key to run (default: subgraph 0, or the first signature when "
                "subgraph 0 has no inputs)")
    ref_choices = ("builtin", "ref", "xnnpack")

    s = sub.add_parser("devices", help="list OpenCL devices and their capabilities")
    s.add_argument("--json", action="store_true", help="print the devices as a JSON list")
    s.set_defaults(fn=cmd_devices)

    s = sub.add_parser("inspect", help="show where each node runs and why")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    s.add_argument("--signature", metavar="KEY",
                   help="show only the nodes of this signature's subgraph (and the subgraphs it calls)")
    s.add_argument("--json", action="store_true",
                   help="print JSON: model, device {platform, name, profile}, signature, nodes, summary")
    s.set_defaults(fn=cmd_inspect)

    def add_input_args(s):  # what run and compare share: the inputs and how the model runs
        s.add_argument("--inputs", metavar="NPZ",
                       help=".npz of inputs keyed by input tensor (or signature input) name")
        s.add_argument("--seed", type=_NON_NEGATIVE, default=0, help=seed_help)
        s.add_argument("--full-range", action="store_true", help=full_range_help)
        s.add_argument("--resize", action="store_true", help=resize_help)
        s.add_argument("--signature", metavar="KEY", help=sig_help)
        s.add_argument("--strict", action="store_true",
                       help="fail instead of falling back when a kernel does not build")

    s = sub.add_parser("run", help="run a model (seeded random inputs unless --inputs)")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    add_input_args(s)
    s.add_argument("--output", metavar="NPZ",
                   help="write outputs to this .npz, keyed by output name (.npz is appended when missing)")
    s.add_argument("--reference", choices=ref_choices, default="builtin",
                   help="LiteRT op resolver for the fallback segments (default builtin)")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("compare", help="run litecl and LiteRT on the same inputs; exit 1 on any difference")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    add_input_args(s)
    s.add_argument("--json", action="store_true",
                   help="print JSON: model, device {platform, name, profile}, signature, "
                   "all_bit_exact, opencl_nodes, nodes, outputs")
    s.add_argument("--reference", choices=ref_choices, default="builtin",
                   help="LiteRT op resolver to compare with (it also runs litecl's fallback "
                   "segments): builtin kernels without XNNPACK (default), reference kernels, "
                   "or LiteRT's default configuration with XNNPACK")
    s.set_defaults(fn=cmd_compare)

    s = sub.add_parser("bench", help="benchmark_model-style timings and a per-node table")
    s.add_argument("model", help=model_help)
    s.add_argument("--device", help=dev_help)
    s.add_argument("--signature", metavar="KEY", help=sig_help)
    s.add_argument("--inputs", metavar="NPZ", help=".npz of inputs keyed by input name (default: seeded random)")
    s.add_argument("--resize", action="store_true", help=resize_help)
    s.add_argument("--seed", type=_NON_NEGATIVE, default=0, help=seed_help)
    s.add_argument("--num_threads", type=_POSITIVE, default=None, metavar="N",
                   help="threads of the LiteRT fallback segments (an integer >= 1, as LiteRT; "
                        "default LiteRT's)")
    s.add_argument("--warmup_runs", type=_NON_NEGATIVE, default=1, metavar="N",
                   help="warm-up runs, at least (an integer >= 0; default 1; one run is always done)")
    s.add_argument("--warmup_min_secs", type=_arg_secs, default=0.5, metavar="SECS",
                   help="warm up for at least this many seconds (>= 0; default 0.5)")
    s.add_argument("--num_runs", type=_POSITIVE, default=50, metavar="N",
                   help="timed runs, at least (an integer >= 1; default 50)")
    s.add_argument("--min_secs", type=_arg_secs, default=1.0, metavar="SECS",
                   help="time runs for at least this many seconds (>= 0; default 1)")
    s.add_argument("--max_secs", type=_arg_secs, default=150.0, metavar="SECS",
                   help="stop warm-up and timed runs after this many seconds each, even "
                   "before --warmup_runs/--num_runs (>= 0; default 150)")
    s.add_argument("--profile_runs", type=_POSITIVE, default=10, metavar="N",
                   help="profiled runs averaged in the per-node table (an integer >= 1; default 10)")
    s.add_argument("--json", metavar="FILE",
                   help="also write the results to this JSON file (checked before the benchmark runs)")
    s.set_defaults(fn=cmd_bench)

    s = sub.add_parser("kernel", help="print a generated kernel")
    ks = s.add_subparsers(dest="kind", metavar="KIND", parser_class=_Parser,
                          help="which kernel")
    ks.required = True
    c = ks.add_parser("cast", help="the CAST SRC -> DST chain and OpenCL source")
    types = "bool, int8, uint8, int16, uint16, int32, uint32, int64, float16, float32, float64, complex64"
    c.add_argument("src", help=f"source tensor type: {types}")
    c.add_argument("dst", help=f"destination tensor type: {types}")
    c.add_argument("--device", help=dev_help)
    c.add_argument("--build", action="store_true", help="also build it on the device")
    c.set_defaults(fn=cmd_kernel)
    return p


def main(argv=None) -> int:
    from .errors import LiteclError  # noqa: PLC0415

    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as e:  # --help, --version
            return e.code if isinstance(e.code, int) else 0
        return args.fn(args)
    except _Usage as e:
        return _fail(str(e))
    except LiteclError as e:
        return _fail(str(e))
    except RuntimeError as e:  # LiteRT reports failed fallback invokes this way
        return _fail(f"LiteRT: {' '.join(str(e).split())[:300]}")
    except MemoryError:
        return _fail("out of memory (does the model or an input hold a huge tensor?)")
    except KeyboardInterrupt:
        return _fail("interrupted")
    except BrokenPipeError:
        return 0
    except Exception as e:  # never a traceback for the user
        if os.environ.get("LITECL_DEBUG"):
            raise
        return _fail(f"internal error ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                     "set LITECL_DEBUG=1 for a traceback")


if __name__ == "__main__":
    sys.exit(main())
