"""Per model: LiteRT builtin, LiteRT default (XNNPACK), LiteRT with litecl.Delegate at each
placement, the delegated partitions, and start-up times, all in one process (issue 14).

Usage::

    python benchmarks/bench_models.py --device pocl MODEL... [--runs 30] [--rounds 3] [--json F]

One inference is what a user does: set every input, invoke, read every output. Each
configuration is warmed up, then timed for ``--runs`` inferences per round, the
configurations taking turns in ``--rounds`` alternating rounds; the figure is the median
over all timed inferences. Init is construct + allocate_tensors (+ the first invoke for
nothing: it is timed apart as "first"). Prints a table and the median ratio of
litecl/LiteRT builtin per placement; ``--json`` writes every figure.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "benchmarks"):  # litecl from the checkout; common beside this script
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from common import device_error, model_files  # noqa: E402


def bench_model(path: Path, device: str, runs: int, rounds: int, num_threads=None,
                placements=("all", "auto")) -> dict:
    import litecl  # noqa: PLC0415
    from ai_edge_litert.interpreter import Interpreter as LiteRT  # noqa: PLC0415
    from ai_edge_litert.interpreter import OpResolverType  # noqa: PLC0415
    from litecl.compare import random_inputs  # noqa: PLC0415

    configs, init = {}, {}
    for name, make in (
        ("litert_builtin", lambda: LiteRT(model_path=str(path), num_threads=num_threads,
                                          experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)),
        ("litert_xnnpack", lambda: LiteRT(model_path=str(path), num_threads=num_threads)),
        ("litecl_all", lambda: litecl.Interpreter(model_path=str(path), device=device, placement="all",
                                                  num_threads=num_threads)),
        ("litecl_auto", lambda: litecl.Interpreter(model_path=str(path), device=device, placement="auto",
                                                   num_threads=num_threads)),
    ):
        if name.startswith("litecl_") and name[len("litecl_"):] not in placements:
            continue
        t0 = time.perf_counter()
        try:
            it = make()
            it.allocate_tensors()
        except Exception as e:  # a configuration that cannot run the model: say so
            configs[name] = f"{type(e).__name__}: {str(e)[:120]}"
            continue
        init[name] = (time.perf_counter() - t0) * 1e3
        configs[name] = it
    ref = configs["litert_builtin"]
    if isinstance(ref, str):
        return {"model": path.name, "error": ref}
    d = ref.get_input_details()
    inputs = {x["index"]: v for x, v in zip(d, random_inputs(d).values())}
    from litecl.bench import make_run  # noqa: PLC0415  (set every input, invoke, read every output)

    runners = {k: make_run(v, inputs) for k, v in configs.items() if not isinstance(v, str)}
    first = {}
    for k, r in runners.items():
        t0 = time.perf_counter()
        r()
        first[k] = (time.perf_counter() - t0) * 1e3
        for _ in range(3):
            r()
    times = {k: [] for k in runners}
    for _ in range(rounds):
        for k, r in runners.items():
            for _ in range(runs):
                t0 = time.perf_counter_ns()
                r()
                times[k].append((time.perf_counter_ns() - t0) / 1e3)
    out = {"model": path.name, "median_us": {k: float(np.median(v)) for k, v in times.items()},
           "init_ms": init, "first_ms": first,
           "errors": {k: v for k, v in configs.items() if isinstance(v, str)}}
    for k in ("litecl_all", "litecl_auto"):
        it = configs.get(k)
        if not isinstance(it, str) and it is not None:
            graphs = it.delegate.graph_info()
            out.setdefault("partitions", {})[k] = sum(g["partitions"] for g in graphs)
            out.setdefault("opencl_nodes", {})[k] = sum(g["claimed"] for g in graphs)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("models", nargs="+", type=Path, help=".tflite files (folders: every *.tflite in them)")
    ap.add_argument("--device", default="auto", help="litecl device spec")
    ap.add_argument("--runs", type=int, default=30, help="timed inferences per configuration per round")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--num_threads", "--num-threads", type=int, default=None,
                    help="LiteRT threads (default LiteRT's)")
    ap.add_argument("--placements", default="all,auto",
                    help="litecl placements to time, comma-separated (all, auto)")
    ap.add_argument("--json", type=Path, help="write the results here")
    args = ap.parse_args(argv)
    placements = tuple(x for x in args.placements.split(",") if x)
    if not placements or set(placements) - {"all", "auto"}:
        print(f"error: --placements takes all and/or auto, got {args.placements!r}", file=sys.stderr)
        return 2
    if args.runs < 1 or args.rounds < 1:
        print("error: --runs and --rounds must be >= 1", file=sys.stderr)
        return 2
    paths, err = model_files(args.models)
    err = err or device_error(args.device)
    if err:
        print(err, file=sys.stderr)
        return 2
    rows = []
    print(f"{'model':<44} {'builtin us':>11} {'xnnpack':>8} {'all':>7} {'auto':>7} "
          f"{'parts all/auto':>14} {'init ms builtin/all/auto':>26}")
    for p in paths:
        r = bench_model(p, args.device, args.runs, args.rounds, args.num_threads, placements)
        rows.append(r)
        if "error" in r:
            print(f"{p.name[:44]:<44} LiteRT builtin cannot run it: {r['error']}")
            continue
        m, b = r["median_us"], r["median_us"]["litert_builtin"]
        ratio = lambda k: f"{m[k] / b:6.2f}x" if k in m else "   n/a "  # noqa: E731
        parts = r.get("partitions", {})
        ini = r["init_ms"]
        print(f"{p.name[:44]:<44} {b:11.1f} {ratio('litert_xnnpack'):>8} {ratio('litecl_all'):>7} "
              f"{ratio('litecl_auto'):>7} {parts.get('litecl_all', '-')!s:>7}/{parts.get('litecl_auto', '-')!s:<6} "
              f"{ini.get('litert_builtin', 0):8.1f}/{ini.get('litecl_all', 0):7.1f}/{ini.get('litecl_auto', 0):7.1f}",
              flush=True)
    ok = [r for r in rows if "error" not in r]
    for k in ("litecl_all", "litecl_auto"):
        rs = [r["median_us"][k] / r["median_us"]["litert_builtin"] for r in ok if k in r["median_us"]]
        if rs:
            print(f"{k}: median {np.median(rs):.2f}x, max {max(rs):.2f}x LiteRT builtin over {len(rs)} models")
    for k in (f"litecl_{x}" for x in placements):
        tot = sum(r["init_ms"].get(k, 0) for r in ok)
        base = sum(r["init_ms"].get("litert_builtin", 0) for r in ok)
        print(f"init total {k}: {tot:.0f} ms against LiteRT builtin's {base:.0f} ms ({tot / max(base, 1e-9):.2f}x)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
