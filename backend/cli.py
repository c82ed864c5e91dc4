"""The ``litecl`` command line: devices, inspect, run, compare, kernel.

Errors print one ``error: ...`` line on stderr and exit with status 2 (set LITECL_DEBUG=1
for a traceback). ``compare`` exits 1 when any output differs from LiteRT.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile

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


def _load_npz(path: str) -> dict:
    if not os.path.exists(path):
        raise _Usage(f"inputs file not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise _Usage(f"cannot read inputs file {path} as .npz: {str(e).splitlines()[0] if str(e) else type(e).__name__}") from None


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


def _inputs_for(details: list[dict], given: dict | None, seed: int) -> dict:
    from .compare import random_inputs  # noqa: PLC0415

    if given is None:
        _check_fits(details)
        return random_inputs(details, seed)
    names = [d["name"] for d in details]
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise _Usage(f"unknown input name(s) {unknown}; the model's inputs are {names}")
    missing = [n for n in names if n not in given]
    if missing:
        raise _Usage(f"missing input(s) {missing}; the model's inputs are {names}")
    out = {}
    for d in details:
        v = np.asarray(given[d["name"]])
        want = np.dtype(d["dtype"])
        if v.dtype != want:
            raise _Usage(f"input {d['name']!r} expects {want}, got {v.dtype}")
        out[d["name"]] = v
    return out


def _open(args):
    from .interpreter import Interpreter  # noqa: PLC0415

    return Interpreter(model_path=args.model, device=args.device,
                       strict=getattr(args, "strict", False),
                       reference=getattr(args, "reference", "builtin"))


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

    devs = list_devices()
    if args.json:
        print(json.dumps([{
            "platform": c.platform, "name": c.name, "driver": c.driver, "gpu": c.is_gpu,
            "fp16": c.fp16, "fp64": c.fp64, "int64": c.int64, "compute_units": c.compute_units,
            "max_work_group_size": c.max_work_group_size} for c in devs], indent=2))
        return 0
    for c in devs:
        feats = ", ".join(f for f, on in (("fp16", c.fp16), ("fp64", c.fp64), ("int64", c.int64)) if on)
        kind = "GPU" if c.is_gpu else "CPU/other"
        print(f"{c.platform}: {c.name} [{kind}; {c.compute_units} compute units; "
              f"max work-group {c.max_work_group_size}; {feats or 'no fp16/fp64'}]")
    return 0


def cmd_inspect(args) -> int:
    interp = _open(args)
    # allocating builds the kernels: a node whose kernel fails to build shows as a
    # fallback with the build log in its reason
    interp.allocate_tensors()
    for key in interp.get_signature_list():
        interp.get_signature_runner(key).allocate_tensors()
    pl = interp.placement()
    if args.json:
        print(json.dumps({"model": args.model, "device": repr(interp.device),
                          "nodes": pl, "summary": interp.summary()}, indent=2))
        return 0
    print(f"model: {args.model}")
    print(f"device: {interp.device.caps.platform}: {interp.device.caps.name}"
          + (f" (profile {interp.device.caps.profile})" if interp.device.caps.profile else ""))
    print(f"{'subgraph':>8} {'node':>5}  {'op':<24} {'placement':<9}  reason")
    for p in pl:
        print(f"{p['subgraph']:>8} {p['index']:>5}  {p['op']:<24} {p['placement']:<9}  {p['reason']}")
    print()
    for line in interp.summary():
        print(line)
    return 0


def cmd_run(args) -> int:
    interp = _open(args)
    sig = _pick_signature(interp, args.signature)
    details = _details_by_name(interp, sig)
    inputs = _inputs_for(details, _load_npz(args.inputs) if args.inputs else None, args.seed)
    outs = _run_litecl(interp, inputs, sig)
    for name, v in outs.items():
        print(f"{name}: {v.dtype}{list(v.shape)}")
    if args.output:
        try:
            np.savez(args.output, **outs)
        except OSError as e:
            raise _Usage(f"cannot write {args.output}: {e.strerror or e}") from None
        print(f"wrote {args.output}")
    return 0


def cmd_compare(args) -> int:
    from .compare import diff_report, run_reference  # noqa: PLC0415

    interp = _open(args)
    sig = _pick_signature(interp, args.signature)
    details = _details_by_name(interp, sig)
    inputs = _inputs_for(details, _load_npz(args.inputs) if args.inputs else None, args.seed)
    got = _run_litecl(interp, inputs, sig)
    try:
        want = run_reference(interp._model.raw, inputs, sig, reference=args.reference)
    except (RuntimeError, ValueError) as e:  # e.g. an op version this LiteRT lacks
        msg = " ".join(str(e).split())[:300]
        raise _Usage(f"LiteRT cannot run the model as the reference: {msg}") from None
    reps = [diff_report(k, got.get(k, np.array([])), v) for k, v in want.items()]
    ok = all(r["bit_exact"] for r in reps)
    pl = interp.placement()
    on = sum(p["placement"] == "opencl" for p in pl)
    if args.json:
        print(json.dumps({"model": args.model, "device": repr(interp.device), "all_bit_exact": ok,
                          "opencl_nodes": on, "nodes": len(pl), "outputs": reps}, indent=2))
    else:
        print(f"model: {args.model}  device: {interp.device.caps.name}  "
              f"nodes on OpenCL: {on}/{len(pl)}")
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
    from .compare import random_inputs  # noqa: PLC0415
    from .interpreter import Interpreter  # noqa: PLC0415

    t0 = time.perf_counter()
    interp = Interpreter(model_path=args.model, device=args.device, num_threads=args.num_threads)
    interp.allocate_tensors()
    init_ms = (time.perf_counter() - t0) * 1e3
    details = interp.get_input_details()
    by_name = _inputs_for(details, _load_npz(args.inputs) if args.inputs else None, args.seed)
    inputs = {d["index"]: by_name[d["name"]] for d in details}
    caps = interp.device.caps
    print(f"INFO: litecl device: {caps.platform}: {caps.name}" + (f" (profile {caps.profile})" if caps.profile else ""))
    print(f"INFO: Initialized session in {init_ms:.3f}ms.")
    print(f"INFO: Running benchmark for at least {args.warmup_runs} iterations and at least "
          f"{args.warmup_min_secs} seconds but terminate if exceeding {args.max_secs} seconds.")
    res = benchmark_interpreter(interp, inputs, warmup_runs=args.warmup_runs,
                                warmup_min_secs=args.warmup_min_secs, num_runs=args.num_runs,
                                min_secs=args.min_secs, max_secs=args.max_secs)
    print(f"INFO: {format_stats(res['warmup'])}")
    print(f"INFO: Running benchmark for at least {args.num_runs} iterations and at least "
          f"{args.min_secs} seconds but terminate if exceeding {args.max_secs} seconds.")
    print(f"INFO: {format_stats(res['runs'])}")
    w, r = res["warmup"], res["runs"]
    print(f"INFO: Inference timings in us: Init: {init_ms * 1e3:.0f}, First inference: "
          f"{w['first']:.0f}, Warmup (avg): {w['avg']:.0f}, Inference (avg): {r['avg']:.0f}")
    rows = node_profile(interp, inputs, runs=args.profile_runs)
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
        import json  # noqa: PLC0415

        with open(args.json, "w") as f:
            json.dump({"model": args.model, "device": repr(interp.device), "init_ms": init_ms,
                       **res, "nodes": rows}, f, indent=2)
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
    p = _Parser(prog="litecl", description="Run TFLite models with CAST/ADD on OpenCL, "
                "everything else on LiteRT; compare with LiteRT bit for bit.")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    dev_help = ("OpenCL device: auto (default), pocl, intel, oclgrind, nvidia or a name "
                "substring, optionally with :profile=mobile|mobile-fp16|nofp64|nofp16|strict|noint64 "
                "(default: $LITECL_DEVICE or auto)")

    s = sub.add_parser("devices", help="list OpenCL devices and their capabilities")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_devices)

    s = sub.add_parser("inspect", help="show where each node runs and why")
    s.add_argument("model")
    s.add_argument("--device", help=dev_help)
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_inspect)

    s = sub.add_parser("run", help="run a model (seeded random inputs unless --inputs)")
    s.add_argument("model")
    s.add_argument("--device", help=dev_help)
    s.add_argument("--inputs", help=".npz of inputs keyed by input tensor (or signature input) name")
    s.add_argument("--output", help="write outputs to this .npz, keyed by output name")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--signature", help="signature key to run (default: subgraph 0)")
    s.add_argument("--strict", action="store_true", help="fail instead of falling back when a kernel does not build")
    s.add_argument("--reference", choices=("builtin", "ref", "xnnpack"), default="builtin",
                   help="LiteRT op resolver for the fallback segments (default builtin)")
    s.set_defaults(fn=cmd_run)

    s = sub.add_parser("compare", help="run litecl and LiteRT on the same inputs; exit 1 on any difference")
    s.add_argument("model")
    s.add_argument("--device", help=dev_help)
    s.add_argument("--inputs", help=".npz of inputs keyed by input name")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--signature")
    s.add_argument("--json", action="store_true")
    s.add_argument("--reference", choices=("builtin", "ref", "xnnpack"), default="builtin",
                   help="LiteRT op resolver to compare with (it also runs litecl's fallback "
                   "segments): builtin kernels without XNNPACK (default), reference kernels, "
                   "or LiteRT's default configuration with XNNPACK")
    s.add_argument("--strict", action="store_true")
    s.set_defaults(fn=cmd_compare)

    s = sub.add_parser("bench", help="benchmark_model-style timings and a per-node table")
    s.add_argument("model")
    s.add_argument("--device", help=dev_help)
    s.add_argument("--inputs", help=".npz of inputs keyed by input name (default: seeded random)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--num_threads", type=int, default=None, help="threads of the LiteRT fallback segments")
    s.add_argument("--warmup_runs", type=int, default=1)
    s.add_argument("--warmup_min_secs", type=float, default=0.5)
    s.add_argument("--num_runs", type=int, default=50)
    s.add_argument("--min_secs", type=float, default=1.0)
    s.add_argument("--max_secs", type=float, default=150.0)
    s.add_argument("--profile_runs", type=int, default=10, help="runs for the per-node table")
    s.add_argument("--json", help="also write the results to this JSON file")
    s.set_defaults(fn=cmd_bench)

    s = sub.add_parser("kernel", help="print a generated kernel")
    ks = s.add_subparsers(dest="kind", metavar="KIND", parser_class=_Parser)
    ks.required = True
    c = ks.add_parser("cast", help="the CAST SRC -> DST chain and OpenCL source")
    c.add_argument("src", help="bool, int8, uint8, int16, uint16, int32, uint32, int64, float16, float32, float64, complex64")
    c.add_argument("dst")
    c.add_argument("--device", help=dev_help)
    c.add_argument("--build", action="store_true", help="also build it on the device")
    c.set_defaults(fn=cmd_kernel)
    return p


def main(argv=None) -> int:
    from .errors import LiteclError  # noqa: PLC0415

    try:
        args = _parser().parse_args(argv)
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
