"""Sweep real models through ``litecl compare`` in subprocesses, against LiteRT alone.

Usage::

    python -m models.extract_wheels --out /tmp/real --package real
    python -m models.sweep_real /tmp/real --device pocl --device intel --timeout 600

For each ``*.tflite`` under the folder (sorted, duplicates by content skipped): first
LiteRT alone (builtin kernels, seeded inputs as ``litecl compare`` makes them) in a
subprocess, then ``litecl compare MODEL --device D --json`` per device, each with a
timeout; a crash of either is a result, not the end of the sweep. Prints one line per
model and device and a summary: how many LiteRT runs, and how many of those litecl runs
bit-exact, with the CAST/ADD nodes on OpenCL. Exit status 0 when every model LiteRT runs
is bit-exact on every device, else 1.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

_LITERT_ALONE = """
import sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from litecl.compare import random_inputs
it = Interpreter(model_path=sys.argv[1],
                 experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
it.allocate_tensors()
d = it.get_input_details()
for det, v in zip(d, random_inputs(d).values()):
    it.set_tensor(det["index"], v)
it.invoke()
print("ok")
"""


def unique_models(folder: Path) -> list[Path]:
    seen, out = set(), []
    for p in sorted(folder.rglob("*.tflite")):
        h = hashlib.sha1(p.read_bytes()).hexdigest()
        if h not in seen:
            seen.add(h)
            out.append(p)
    return out


def litert_runs(model: Path, timeout: float) -> tuple[bool, str]:
    """(True, "") when LiteRT alone runs ``model`` with seeded inputs, else (False, why)."""
    try:
        r = subprocess.run([sys.executable, "-c", _LITERT_ALONE, str(model)], capture_output=True,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:g} s"
    if r.returncode == 0:
        return True, ""
    tail = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    return False, (f"signal {-r.returncode}" if r.returncode < 0 else tail)[:200]


def compare(model: Path, device: str, timeout: float) -> dict:
    """``litecl compare --json`` in a subprocess: {"status": "exact"|"differs"|"error"|
    "crash"|"timeout", "why", "opencl_nodes", "nodes"}."""
    cmd = [sys.executable, "-m", "litecl.cli", "compare", str(model), "--device", device, "--json"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "why": f"after {timeout:g} s"}
    if r.returncode < 0:
        return {"status": "crash", "why": f"signal {-r.returncode}: {r.stderr.strip()[-200:]}"}
    if r.returncode == 2:
        return {"status": "error", "why": r.stderr.strip().splitlines()[-1][:300] if r.stderr.strip() else ""}
    try:
        rep = json.loads(r.stdout)
    except json.JSONDecodeError:
        return {"status": "error", "why": f"exit {r.returncode}, no JSON: {r.stderr.strip()[-200:]}"}
    return {"status": "exact" if rep["all_bit_exact"] else "differs",
            "why": "" if rep["all_bit_exact"] else ", ".join(o["name"] for o in rep["outputs"] if not o["bit_exact"]),
            "opencl_nodes": rep["opencl_nodes"], "nodes": rep["nodes"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.sweep_real", description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="folder searched for *.tflite (recursively)")
    ap.add_argument("--device", action="append", help="litecl device spec (repeatable; default: pocl)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per subprocess (default: 600)")
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args(argv)
    if not args.folder.is_dir():
        print(f"error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    devices = args.device or ["pocl"]
    models = unique_models(args.folder)
    results, runs, exact = [], 0, {d: 0 for d in devices}
    for m in models:
        ok, why = litert_runs(m, args.timeout)
        row = {"model": str(m.relative_to(args.folder)), "litert": ok, "litert_why": why, "devices": {}}
        if ok:
            runs += 1
            for d in devices:
                c = compare(m, d, args.timeout)
                row["devices"][d] = c
                exact[d] += c["status"] == "exact"
                print(f"{row['model']:<72} {d:<22} {c['status']:<8} "
                      f"{c.get('opencl_nodes', '-')}/{c.get('nodes', '-')} {c['why']}", flush=True)
        else:
            print(f"{row['model']:<72} {'LiteRT':<22} {'fails':<8} {why}", flush=True)
        results.append(row)
    print(f"\n{len(models)} unique models; LiteRT runs {runs}; litecl bit-exact: "
          + ", ".join(f"{d} {exact[d]}/{runs}" for d in devices))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(v == runs for v in exact.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
