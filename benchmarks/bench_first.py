"""The first Interpreter of a process: construct + allocate_tensors of a model in a fresh
Python process (litecl imported first, not timed; on-disk caches warm from a first
process that is not counted), litecl.Interpreter against LiteRT's own Interpreter, in
alternating fresh processes. This is the target of issue 22 (MoveNet, ``device="pocl"``:
<= 100 ms), the OpenCL platform listing and program loads included.

Usage::

    python benchmarks/bench_first.py MODEL [--device pocl] [--placement all|auto] [--runs 9]
        [--also-env VAR=VALUE] [--out FILE.json]

Prints each run and the medians, min and max, and the import apart (import + first
Interpreter: what a user waits for; --also-env runs litecl a second way in the same
rounds, e.g. LITECL_FULL_LISTING=1); the load average beside them (the VM is
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
t0 = time.perf_counter()
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
t1 = time.perf_counter()
print(json.dumps({"ms": (t1 - t) * 1e3, "import_ms": (t - t0) * 1e3}))
"""


def once(kind: str, a) -> tuple[float, float]:
    """(first Interpreter ms, import ms) of one fresh process of ``kind`` (litecl, LiteRT,
    or litecl with --also-env's variable)."""
    env = dict(os.environ)
    if kind == "litecl+env":
        k, _, v = a.also_env.partition("=")
        env[k] = v
    r = subprocess.run([sys.executable, "-c", CHILD, kind.split("+")[0], str(a.model), a.device, a.placement],
                       capture_output=True, text=True, timeout=300, cwd="/", env=env)
    if r.returncode:
        raise SystemExit(f"error: the {kind} child failed: {r.stderr.strip().splitlines()[-1:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return out["ms"], out["import_ms"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--device", default="pocl")
    ap.add_argument("--placement", default="all", choices=("all", "auto"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--also-env", metavar="VAR=VALUE",
                    help="also run litecl with this variable set, in the same alternating rounds "
                         "(e.g. LITECL_FULL_LISTING=1)")
    a = ap.parse_args(argv)
    a.model = a.model.resolve()
    once("litecl", a)  # on-disk caches warm
    kinds = ["litecl", "litert"] + (["litecl+env"] if a.also_env else [])
    rows = {k: [] for k in kinds}
    imports = {k: [] for k in kinds}
    for i in range(a.runs):
        for kind in (kinds if i % 2 == 0 else kinds[::-1]):
            ms, imp = once(kind, a)
            rows[kind].append(ms)
            imports[kind].append(imp)
        print(f"run {i}: " + ", ".join(f"{k} {rows[k][-1]:.1f} ms (import {imports[k][-1]:.0f})" for k in kinds),
              flush=True)
    load = os.getloadavg()[0]
    med = statistics.median
    res = {"model": a.model.name, "device": a.device, "placement": a.placement, "load_1min": load,
           "also_env": a.also_env,
           **{f"{k}_ms": v for k, v in rows.items()}, **{f"{k}_import_ms": v for k, v in imports.items()},
           **{f"{k}_median_ms": med(v) for k, v in rows.items()},
           **{f"{k}_import_plus_first_median_ms": med([x + y for x, y in zip(rows[k], imports[k])]) for k in kinds}}
    print(f"{a.model.name}, device {a.device}, placement {a.placement}: first Interpreter of a process, "
          f"median litecl {res['litecl_median_ms']:.1f} ms (min {min(rows['litecl']):.1f}, max "
          f"{max(rows['litecl']):.1f}), LiteRT {res['litert_median_ms']:.1f} ms; load {load:.2f}")
    for k in kinds:
        label = f"litecl with {a.also_env}" if k == "litecl+env" else k
        print(f"  {label}: first Interpreter median {res[f'{k}_median_ms']:.1f} ms; import + first Interpreter "
              f"median {res[f'{k}_import_plus_first_median_ms']:.1f} ms")
    if a.out:
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
