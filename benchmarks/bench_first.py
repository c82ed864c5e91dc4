"""The first Interpreter of a process: construct + allocate_tensors of a model in a fresh
Python process (litecl imported first, not timed; on-disk caches warm from a first
process that is not counted), litecl.Interpreter against LiteRT's own Interpreter, in
alternating fresh processes. This is the target of issue 22 (MoveNet, ``device="pocl"``:
<= 100 ms), the OpenCL platform listing and program loads included.

Usage::

    python benchmarks/bench_first.py MODEL [--device pocl] [--placement all|auto] [--runs 9]
        [--out FILE.json]

Prints each run and the medians, min and max; the load average beside them (the VM is
shared: the same code read 96-145 ms at load 0.5-1 and 77-90 ms after a change).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
kind, model, device, placement = sys.argv[1:5]
if kind == "litecl":
    import litecl
    t = time.perf_counter()
    it = litecl.Interpreter(model_path=model, device=device, placement=placement, quiet=True)
    it.allocate_tensors()
else:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    t = time.perf_counter()
    it = Interpreter(model_path=model,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
print(json.dumps({"ms": (time.perf_counter() - t) * 1e3}))
"""


def once(kind: str, a) -> float:
    r = subprocess.run([sys.executable, "-c", CHILD, kind, str(a.model), a.device, a.placement],
                       capture_output=True, text=True, timeout=300, cwd="/")
    if r.returncode:
        raise SystemExit(f"error: the {kind} child failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["ms"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--placement", default="all", choices=("all", "auto"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    a.model = a.model.resolve()
    once("litecl", a)  # on-disk caches warm
    rows = {"litecl": [], "litert": []}
    for i in range(a.runs):
        for kind in (("litecl", "litert") if i % 2 == 0 else ("litert", "litecl")):
            rows[kind].append(once(kind, a))
        print(f"run {i}: litecl {rows['litecl'][-1]:.1f} ms, LiteRT {rows['litert'][-1]:.1f} ms", flush=True)
    load = os.getloadavg()[0]
    res = {"model": a.model.name, "device": a.device, "placement": a.placement, "load_1min": load,
           **{f"{k}_ms": v for k, v in rows.items()},
           **{f"{k}_median_ms": statistics.median(v) for k, v in rows.items()}}
    print(f"{a.model.name}, device {a.device}, placement {a.placement}: first Interpreter of a process, "
          f"median litecl {res['litecl_median_ms']:.1f} ms (min {min(rows['litecl']):.1f}, max "
          f"{max(rows['litecl']):.1f}), LiteRT {res['litert_median_ms']:.1f} ms; load {load:.2f}")
    if a.out:
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
