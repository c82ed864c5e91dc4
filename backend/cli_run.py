"""The ``litecl`` commands that run a model: ``run``, ``compare`` (against LiteRT without
the delegate), ``bench`` (with ``--trace``), ``export`` and ``sweep``."""
from __future__ import annotations

import json
import os
import sys

import numpy as np

from .cli_common import (_Usage, _check_reference_fits, _check_writable, _details_by_name, _device_json, _device_line, _inputs_for,
                         _load_npz, _npz_path, _open, _pick_signature, _reachable, _report, _signature_note,
                         _subgraph_of, _summary, _unique_names, shown)
from .cli_inspect import _node_runs, _unwritten_outputs
from .errors import LiteclError, PrepareError


def _open_with_inputs(args):
    """run/compare: (interpreter, signature key or None, inputs by name) from the
    command line (--inputs or seeded random, --resize, --full-range, --signature)."""
    given = _load_npz(args.inputs) if args.inputs else None
    interp = _open(args, given)
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
        from .model import special_file_kind  # noqa: PLC0415

        kind = special_file_kind(args.output) or ("a device path" if os.path.abspath(args.output).startswith(
            ("/dev/", "/proc/")) else None)
        if kind or args.output == "-":  # /dev/stdout became a new file /dev/stdout.npz
            raise _Usage(f"cannot write outputs file {args.output}: it is {kind or 'not a file name'}; "
                         "--output names the .npz file to write")
        out_path = _npz_path(args.output)
        _check_writable(out_path, "outputs file", (args.model, args.inputs))
    interp, sig, inputs = _open_with_inputs(args)
    outs = _unique_names(run_outputs(interp, inputs, sig))
    note = _signature_note(interp, sig)
    if note:  # stdout holds the outputs alone
        sys.stderr.write(f"INFO: {note}\n")
    for name, v in outs.items():
        print(f"{shown(name)}: {v.dtype}{list(v.shape)}")
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


def _litert_message(e: BaseException) -> str:
    """LiteRT's error text on one line, at most 300 characters: its reporter's messages,
    which it runs together ("index out of boundsNode number 4 (GATHER) failed to invoke."),
    parted by "; "."""
    import re  # noqa: PLC0415

    msg = re.sub(r"(?<=was not true\.)(?=\S)", " ", " ".join(str(e).split()))  # TF_LITE_ENSURE's
    return re.sub(r"(?<=[^\s;:])(?=Node number \d+ \()", "; ", msg)[:300]


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
    got = None
    try:  # litecl first: shapes LiteRT aborts the process on are refused here, not run alone
        got = run_outputs(interp, inputs, sig)
    except LiteclError as e:
        if getattr(e, "litert_aborts", False):
            raise
    except (RuntimeError, ValueError):  # LiteRT's own refusal: said as LiteRT alone's below
        pass
    if got is not None:
        _check_reference_fits(got)
    try:  # LiteRT alone: a model it cannot run at these shapes is said as such
        want = run_outputs(ref, inputs, sig)
    except (RuntimeError, ValueError) as e:  # e.g. an op version this LiteRT lacks
        if isinstance(e, LiteclError):  # litecl's own words (an output LiteRT cannot read)
            raise
        if isinstance(e, UnicodeDecodeError):  # a tensor name that is not UTF-8: litecl's
            run_outputs(interp, inputs, sig)    # Interpreter says so in its own words
        msg = _litert_message(e)
        values = (" over every value of each type (--full-range: integers the model uses as indices or sizes are "
                  "then mostly out of range)" if args.full_range else "")
        # other inputs cannot help an operator this LiteRT lacks
        hint = ("" if given is not None or "unresolved custom op" in msg.lower() else
                f" (random inputs{values} at the model's declared shapes "
                f"{', '.join(str(list(v.shape)) for v in inputs.values())}; give inputs it runs with --inputs "
                "FILE.npz)")
        raise _Usage(f"LiteRT without the delegate cannot run the model: {msg}{hint}") from None
    if got is None:
        got = run_outputs(interp, inputs, sig)
    if sig is not None:  # a signature's outputs are keyed by name; keep LiteRT's order
        got_by = dict(got)
        got = [(k, got_by.get(k, np.array([]))) for k, _ in want]
    # outputs compared by position (two outputs may share a name), each row named
    reps = [diff_report(k, g, v) for (k, v), (_, g) in zip(_unique_names(want).items(), got)]
    notes = _reused_by_litert(args, interp, inputs, sig, reps, got)
    _, graphs, _ = _report(interp, sig)  # the subgraphs that ran
    claimed = sum(g["claimed"] for g in graphs)
    return {"signature": sig, "all_bit_exact": all(r["bit_exact"] for r in reps),
            "opencl_nodes": claimed, "nodes": sum(g["nodes"] for g in graphs),
            "partitions": sum(g["partitions"] for g in graphs), "outputs": reps,
            "notes": _unwritten_outputs(interp, _subgraph_of(interp, sig), sig) + notes
            + ([] if claimed else [_why_none(interp, sig)])}


def _reused_by_litert(args, interp, inputs: dict, sig, reps: list, got: list) -> list[str]:
    """Notes for the differing outputs of signature ``sig`` that equal LiteRT's own with
    experimental_preserve_all_tensors: an intermediate tensor the signature names, whose
    memory LiteRT alone reuses for a later node's result (its arena), so LiteRT alone
    returns that result, not the tensor's value (measured, LiteRT 2.3.0)."""
    from .compare import bit_equal, make_interpreter, run_outputs  # noqa: PLC0415

    bad = [k for k, r in enumerate(reps) if not r["bit_exact"]]
    if sig is None or not bad:
        return []
    try:
        kept = run_outputs(make_interpreter(interp._model.raw, args.num_threads, args.reference,
                                            preserve_all_tensors=True), inputs, sig)
    except (RuntimeError, ValueError):
        return []
    kept_by = dict(kept)
    names = [reps[k]["name"] for k in bad if got[k][0] in kept_by and bit_equal(got[k][1], kept_by[got[k][0]])]
    return [f"{n}: litecl's value equals LiteRT's with experimental_preserve_all_tensors; LiteRT alone reuses "
            "this intermediate tensor's memory for a later node's result, so its value there is not the "
            "tensor's" for n in names]


def _why_none(interp, sig=None) -> str:
    """Why no node ran on OpenCL, in one line: the model (signature ``sig``: the subgraphs
    it runs) has no CAST/ADD node, or the reason most of them stay on LiteRT
    (placement()'s), with the count."""
    from collections import Counter  # noqa: PLC0415

    subs = _reachable(interp, _subgraph_of(interp, sig)) if sig is not None else None
    rows = [r for r in interp.placement() if r["placement"] != "opencl" and (subs is None or r["subgraph"] in subs)]
    if not rows:
        what = f"the subgraph of signature {sig!r}" if sig is not None else "the model"
        return f"{what} has no CAST or ADD node: litecl has nothing to take, LiteRT ran every node"
    def kind(reason: str) -> str:  # auto's reasons carry each partition's own figures
        return ("auto's cost model expects no partition 1.2x faster on OpenCL" if reason.startswith("kept on LiteRT:")
                else reason or "(no reason given)")
    reason, n = Counter(kind(r["reason"]) for r in rows).most_common(1)[0]
    return (f"no CAST/ADD node ran on OpenCL; {n} of {len(rows)} stay on LiteRT because {reason} "
            "(`litecl inspect MODEL` gives each node's reason)")


def cmd_compare(args) -> int:
    """LiteRT with litecl.Delegate against LiteRT without it: the same op resolver
    (--reference), the same inputs, every output bit for bit (litecl.compare). A model
    with several signatures has each one compared (``_compare_targets``), each named in
    the report; --signature compares one."""
    from .compare import make_interpreter  # noqa: PLC0415

    given = _load_npz(args.inputs) if args.inputs else None
    interp = _open(args, given)
    targets = _compare_targets(interp, args.signature, given)
    try:
        ref = make_interpreter(interp._model.raw, args.num_threads, args.reference)
    except (RuntimeError, ValueError) as e:
        raise _Usage(f"LiteRT without the delegate cannot run the model: {_litert_message(e)}") from None
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
            print(f"{shown(o['name'])[:32]:<32} {o['dtype']:<9} {str(o['shape']):<18} "
                  f"{'yes' if o['bit_exact'] else 'NO':<9} {mad:>12} {o['mismatched']:>10}")
        what = f"signature {sig}'s outputs" if len(results) > 1 else "all outputs"
        if r["all_bit_exact"]:
            print(f"{what} bit-exact with {against}")
        else:
            bad = [shown(o["name"]) for o in r["outputs"] if not o["bit_exact"]]
            of = f"signature {sig}: " if len(results) > 1 else ""
            print(f"{of}{len(bad)} of {len(r['outputs'])} output(s) DIFFER ({', '.join(bad)}) from {against}; "
                  f"--reference {others.replace(', ', ' or ')} compares against another LiteRT resolver")
        payloads = sum(o.get("nan_payloads", 0) for o in r["outputs"])
        if payloads:
            print(f"note: {payloads} NaN(s) equal LiteRT's in sign but not in payload bits; NaN payloads are "
                  "outside the bit-for-bit contract (README, 'Bit for bit')")
        signs = [o for o in r["outputs"] if not o["bit_exact"] and o.get("nan_signs") == o["mismatched"]]
        if signs:
            print(f"note: every differing element of {', '.join(shown(o['name']) for o in signs)} is a NaN of the other "
                  "sign" + (" (--reference ref: LiteRT's reference kernels give either sign for two NaNs "
                            "of opposite sign, README)" if args.reference == "ref" else ""))
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

    from .bench import (InvokeClock, benchmark_interpreter, format_stats, invoke_stats,  # noqa: PLC0415
                        launch_profile, make_run, time_alternating)
    from .interpreter import Interpreter  # noqa: PLC0415
    from .compare import make_interpreter  # noqa: PLC0415
    from .export import allocate  # noqa: PLC0415

    for path, what in ((args.json, "JSON file"), (args.trace, "trace file")):
        if path:
            _check_writable(path, what, (args.model, args.inputs))
    if args.json and args.trace and os.path.abspath(args.json) == os.path.abspath(args.trace):
        raise _Usage(f"--json and --trace both name {args.json}: give each its own file")
    given = _load_npz(args.inputs) if args.inputs else None
    t0 = time.perf_counter()
    interp = _open(args, given)
    sig = _pick_signature(interp, args.signature, given)

    def ready(it, given):
        """(run closure, inputs by name) for one interpreter, allocated at the inputs'
        shapes: ``given`` (by name) or seeded random ones."""
        if sig is not None:
            by_name = _inputs_for(_details_by_name(it, sig), given, args.seed, args.resize,
                                  interp=interp, sig=sig)
            runner = it.get_signature_runner(sig)
            allocate(it, sig, {n: v.shape for n, v in by_name.items()})  # at the given shapes
            ns: list = []  # the runner's Invoke, timed (its call sets, invokes and reads)
            if isinstance(it, Interpreter):  # litecl's runner reads its interpreter's wrapper
                it._interpreter = InvokeClock(it._interpreter, ns)
            else:  # LiteRT's keeps its own reference
                runner._interpreter_wrapper = InvokeClock(runner._interpreter_wrapper, ns)

            def call():
                runner(**by_name)
            call.invoke_ns = ns
            return call, by_name
        details = it.get_input_details()
        by_name = _inputs_for(details, given, args.seed, args.resize, interp=interp)
        for d in details:  # the given shapes before the first allocate: a model may not
            if tuple(by_name[d["name"]].shape) != tuple(d["shape"]):  # prepare at its declared ones
                it.resize_tensor_input(d["index"], list(by_name[d["name"]].shape))
        it.allocate_tensors()
        return make_run(it, {d["index"]: by_name[d["name"]] for d in it.get_input_details()}), by_name

    try:
        run, by_name = ready(interp, given)
    except PrepareError as e:
        if given is not None:
            raise
        raise PrepareError(f"{e} (inputs at the model's declared shapes; give inputs of shapes it runs with "
                           "--inputs FILE.npz)") from None
    init_ms = (time.perf_counter() - t0) * 1e3
    if sig is not None:
        print(f"INFO: signature: {sig}")
    elif _signature_note(interp, sig):
        print(f"INFO: {_signature_note(interp, sig)}")
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
    benchmark_interpreter(interp, {}, warmup_runs=args.warmup_runs, warmup_min_secs=args.warmup_min_secs,
                          num_runs=0, min_secs=0, max_secs=args.max_secs, run=run)
    benchmark_interpreter(ref, {}, warmup_runs=args.warmup_runs, warmup_min_secs=args.warmup_min_secs,
                          num_runs=0, min_secs=0, max_secs=args.max_secs, run=ref_run)
    # benchmark_model's figures are the invoke's (run.invoke_ns); a run's set_tensor and
    # get_tensor copies are reported apart (bench.py)
    res = {"warmup": invoke_stats(run)}
    warm = (len(run.invoke_ns), len(ref_run.invoke_ns))
    print(f"INFO: {format_stats(res['warmup'])}")
    print(f"INFO: Running benchmark for at least {args.num_runs} iterations and at least "
          f"{args.min_secs} seconds but terminate if exceeding {args.max_secs} seconds "
          "(litecl and LiteRT in alternating runs).")
    timed = time_alternating({"litecl": run, "litert": ref_run},
                             min_runs=args.num_runs, min_secs=args.min_secs, max_secs=args.max_secs)
    res["runs"], res["litert"] = invoke_stats(run, warm[0]), invoke_stats(ref_run, warm[1])
    res["runs_with_copies"], res["litert_with_copies"] = timed["litecl"].summary(), timed["litert"].summary()
    res["litert_init_ms"] = ref_init_ms
    res["reference"] = args.reference
    res["graphs"] = graphs
    print(f"INFO: {format_stats(res['runs'])}")
    w, r, lr = res["warmup"], res["runs"], res["litert"]
    rc, lc = res["runs_with_copies"], res["litert_with_copies"]
    print(f"INFO: Inference timings in us: Init: {init_ms * 1e3:.0f}, First inference: "
          f"{w['first']:.0f}, Warmup (avg): {w['avg']:.0f}, Inference (avg): {r['avg']:.0f}")
    print(f"INFO: LiteRT alone (--reference {args.reference}, same process): {format_stats(lr)}")
    print(f"INFO: LiteRT timings in us: Init: {ref_init_ms * 1e3:.0f}, Inference (avg): {lr['avg']:.0f}")
    print(f"INFO: the API's copies (set every input, read every output: a run less its invoke), avg us: "
          f"litecl {rc['avg'] - r['avg']:.0f}, LiteRT {lc['avg'] - lr['avg']:.0f}")
    res["ratio_median"] = r["median"] / lr["median"] if lr["median"] else None
    res["ratio_median_with_copies"] = rc["median"] / lc["median"] if lc["median"] else None
    ratio = f"{res['ratio_median']:.2f}x" if res["ratio_median"] is not None else "-"
    avg = f"{r['avg'] / lr['avg']:.2f}x" if lr["avg"] else "-"
    whole = f"{res['ratio_median_with_copies']:.2f}x" if res["ratio_median_with_copies"] is not None else "-"
    print(f"INFO: litecl / LiteRT: invoke median {r['median']:.0f} / {lr['median']:.0f} us = {ratio}, avg {avg}; "
          f"with the copies median {rc['median']:.0f} / {lc['median']:.0f} us = {whole}")
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


def cmd_export(args) -> int:
    from .export import export  # noqa: PLC0415

    from .model import model_file  # noqa: PLC0415

    model_file(args.model)  # missing, a directory, a link to nothing: every command's words
    if not args.out:
        raise _Usage("--out is empty: name the folder to write the delegate to")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise _Usage(f"cannot export to {args.out}: it is not a folder")
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):
        raise _Usage(f"cannot export to {args.out}: folder {parent} does not exist")
    shapes = {k: v.shape for k, v in _load_npz(args.inputs).items()} if args.inputs else None
    m = export(args.model, args.out, device=args.device, target=args.target,
               signature=args.signature, placement=args.placement, shapes=shapes)
    d = m["device"]
    where = f"{d['platform']}: {d['name']}" + (f" (profile {d['profile']})" if d["profile"] else "")
    nat = m["native"]
    if not m["launches"] and not any(g["claimed"] for g in nat["subgraphs"]):
        kept = m.get("kept_on_litert", [])
        why = (f"; {len(kept)} CAST/ADD node(s) kept on LiteRT, e.g. node {kept[0]['index']} ({kept[0]['op']}): "
               f"{kept[0]['reason']}" if kept else "; the model has no CAST or ADD node")
        print(f"{args.model}: no node is lowered to OpenCL on {where} (target {m['target']}){why}; "
              f"wrote an empty manifest to {os.path.join(args.out, 'manifest.json')}; nothing to ship (exit 1)")
        return 1  # a library that runs nothing: not a success a script should pass on
    shipped = sum(g["native_claimed"] for g in nat["subgraphs"])
    if shipped:
        print(f"exported litecl's native TFLite delegate for target {m['target']} on {where} to {args.out}: "
              f"{nat['programs']} programs ({nat['binaries']} with {d['name']}'s binary)")
        needs = {"fp16": ("float16 (cl_khr_fp16)", "nofp16"), "fp64": ("float64 (cl_khr_fp64)", "nofp64"),
                 "int64": ("64-bit integers", "noint64")}
        if nat.get("needs"):  # a device without them refuses the whole library at load
            print(f"its kernels need {', '.join(needs[k][0] for k in nat['needs'])} on the device that loads it: "
                  f"for devices without, export with --device SPEC:profile="
                  f"{'+'.join(needs[k][1] for k in nat['needs'])}"
                  f"{'' if 'int64' in nat['needs'] else ' (or profile=mobile)'}")
        if args.placement == "auto":  # the library keeps what auto chose here
            print(f"placement auto chose the nodes by {d['name']}'s measured costs on this machine; the library "
                  "takes them wherever it is loaded (export on the target, or with --placement all)")
    for g in nat["subgraphs"]:  # one line per subgraph: what the native delegate claims
        print(f"subgraph {g['subgraph']}: the native delegate claims {g['native_claimed']} of its "
              f"{g['nodes']} nodes at the exported shapes")
        if g["left_at_invoke"]:  # and what litecl.Delegate claims there but it leaves, and why
            print(f"subgraph {g['subgraph']}: {len(g['left_at_invoke'])} more node(s) that litecl.Delegate "
                  f"claims are left to LiteRT by the native delegate: their input shapes are known only at "
                  f"invoke (litecl.Delegate plans them then) and their kernels compile in the exported shapes")
        if g.get("fixed_across_resize"):
            k = g["fixed_across_resize"]
            print(f"warning: subgraph {g['subgraph']}: {len(k)} node(s) the native delegate claims (node "
                  f"{k[0]}{', ...' if len(k) > 1 else ''}) compile in the exported shapes, and LiteRT keeps this "
                  f"graph's delegate across resize_tensor_input (its shapes are known only at invoke): at other "
                  f"input shapes allocate_tensors fails; export at the shapes the app runs (--inputs FILE.npz)",
                  file=sys.stderr)
        if g.get("left_at_construction"):
            print(f"subgraph {g['subgraph']}: {len(g['left_at_construction'])} more node(s) that litecl.Delegate "
                  f"claims are left to LiteRT by the native delegate: their kernels compile in the shapes given "
                  f"to export, and LiteRT prepares this graph's delegate once, at the model's own shapes (the "
                  f"graph has shapes known only at invoke), not after a resize")
        if g.get("left_in_callee"):
            print(f"subgraph {g['subgraph']}: {len(g['left_in_callee'])} more node(s) that litecl.Delegate "
                  f"claims are left to LiteRT by the native delegate: their kernels compile in the exported "
                  f"shapes, and this subgraph (called by an IF or WHILE) takes its caller's shapes")
    if not shipped:  # litecl.Delegate's nodes, none of which the native delegate takes (said above)
        if m.get("note"):
            print(f"note: {m['note']}")
        print(f"{args.model}: the native delegate would take no node at the exported shapes on {where}; "
              f"nothing to ship (exit 1)")
        return 1
    sources = len({ln["source"] for ln in m["launches"]})
    print(f"manifest.json: {len(m['launches'])} launches of the {len(m['partitions'])} partition(s) "
          f"planned at allocate_tensors in subgraph {m['subgraph']} ({len(m['lowered_nodes'])} nodes, "
          f"{sources} kernel sources, {sum(t['role'] == 'constant' for t in m['tensors'])} constants)")
    if m.get("note"):
        print(f"note: {m['note']}")
    import shlex  # noqa: PLC0415 (a folder with spaces or quotes: the line pastes into a shell)

    print(f"build it with: sh {shlex.quote(os.path.join(args.out, 'build.sh'))} "
          f"(then load_delegate({os.path.join(args.out, nat['library'])!r}, "
          f"options from {os.path.join(args.out, 'delegate_options.json')}))")
    return 0


def cmd_sweep(args) -> int:
    """Every model x device in its own process, results as JSON lines, and a report (backend/sweep.py)."""
    from .sweep import run  # noqa: PLC0415

    return run(args)
