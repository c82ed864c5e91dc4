"""Start-up per model: construct + allocate_tensors, litecl against LiteRT builtin, in one
process (issue 14: "construct + allocate over the real models <= 2x LiteRT's in total").

Usage::

    python benchmarks/bench_init.py --device pocl MODEL_OR_FOLDER... [--repeats 5] [--placement auto]

Per model: the first construction in the process ("first": litecl's on-disk caches as
they are, nothing of this model in memory yet) and the median of ``--repeats`` later
ones, litecl and LiteRT taking turns; then totals over the models LiteRT builtin runs.
Models LiteRT cannot run are listed and left out of the totals.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _p in (ROOT, ROOT / "benchmarks"):  # litecl from the checkout; common beside this script
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from common import device_error, model_files  # noqa: E402


def _time(make) -> float:
    t0 = time.perf_counter()
    it = make()
    it.allocate_tensors()
    return (time.perf_counter() - t0) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", type=Path, help=".tflite files (folders: every *.tflite in them)")
    ap.add_argument("--device", default="auto", help="litecl device spec")
    ap.add_argument("--placement", default="auto", choices=("all", "auto"))
    ap.add_argument("--repeats", type=int, default=5, help="timed constructions after the first")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        print("error: --repeats must be >= 1", file=sys.stderr)
        return 2
    paths, err = model_files(args.models)
    err = err or device_error(args.device)
    if err:
        print(err, file=sys.stderr)
        return 2
    import litecl  # noqa: PLC0415
    from ai_edge_litert.interpreter import Interpreter as LiteRT  # noqa: PLC0415
    from ai_edge_litert.interpreter import OpResolverType  # noqa: PLC0415

    rows = []
    print(f"{'model':<44} {'MB':>6} {'first ms litecl/LiteRT':>23} {'median ms litecl/LiteRT':>24}")
    for p in paths:
        lite = lambda: LiteRT(model_path=str(p), experimental_op_resolver_type=  # noqa: E731
                              OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        ours = lambda: litecl.Interpreter(model_path=str(p), device=args.device,  # noqa: E731
                                          placement=args.placement)
        try:
            first_r = _time(lite)
        except Exception as e:  # noqa: BLE001 (LiteRT cannot run it: say so, leave it out)
            print(f"{p.name[:44]:<44} LiteRT builtin cannot run it: {str(e).splitlines()[0][:80]}")
            continue
        first_l = _time(ours)
        tl, tr = [], []
        for _ in range(args.repeats):
            tr.append(_time(lite))
            tl.append(_time(ours))
        r = {"model": p.name, "mb": p.stat().st_size / 1e6, "first_litecl_ms": first_l,
             "first_litert_ms": first_r, "litecl_ms": statistics.median(tl),
             "litert_ms": statistics.median(tr)}
        rows.append(r)
        print(f"{p.name[:44]:<44} {r['mb']:6.2f} {first_l:11.1f}/{first_r:<11.1f} "
              f"{r['litecl_ms']:11.1f}/{r['litert_ms']:<11.1f}", flush=True)
    for k in ("first", ""):
        a = sum(r[f"{k}_litecl_ms" if k else "litecl_ms"] for r in rows)
        b = sum(r[f"{k}_litert_ms" if k else "litert_ms"] for r in rows)
        print(f"total {'first' if k else 'median'}: litecl {a:.0f} ms, LiteRT builtin {b:.0f} ms "
              f"({a / max(b, 1e-9):.2f}x) over {len(rows)} models")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
