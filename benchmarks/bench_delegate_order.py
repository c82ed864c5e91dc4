"""litecl after a GPU delegate (tests/gpu_standin.py's stand-in) against the same stand-in
with LiteRT's CPU kernels for what it leaves: median invoke time per configuration, in
alternating rounds in one process, and where placement="auto" puts the leftovers.

    python benchmarks/bench_delegate_order.py --device pocl [--rounds 5] [--json OUT]

Configurations: "stand-in + LiteRT" (leftovers on LiteRT's builtin kernels), "stand-in +
litecl all", "stand-in + litecl auto". Models: the chain of tests/test_delegate_order.py at
768, 48K and 3M elements (its int64 CASTs and ADD and the float16 CAST are the leftovers).
The stand-in runs its own nodes with LiteRT's CPU kernels, so the times show what litecl
adds or saves on the leftovers, not a GPU's speed.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402

import litecl  # noqa: E402
from gpu_standin import StandIn  # noqa: E402
from models.builders import chain_model  # noqa: E402
from test_delegate_order import CHAIN  # noqa: E402


def build(m: bytes, device: str, mode: str):
    dels = [StandIn()] + ([litecl.Delegate(device, mode, quiet=True)] if mode != "none" else [])
    it = Interpreter(model_content=m, experimental_delegates=dels,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.random.default_rng(1).standard_normal(d["shape"]).astype(np.float32))
    return it, dels[-1] if mode != "none" else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=30, help="invokes per round")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    out = {"device": litecl.open_device(args.device).caps.name, "load_average": os.getloadavg(), "models": []}
    for shape in ((3, 256), (3, 16384), (3, 1 << 20)):
        m = chain_model(CHAIN, shape)
        its = {mode: build(m, args.device, mode) for mode in ("none", "all", "auto")}
        times = {mode: [] for mode in its}
        for _ in range(args.rounds):  # alternating rounds, warm-up first in each
            for mode, (it, _) in its.items():
                it.invoke()
                t0 = time.perf_counter()
                for _ in range(args.runs):
                    it.invoke()
                times[mode].append((time.perf_counter() - t0) / args.runs * 1e6)
        auto = its["auto"][1]
        row = {"elements": int(np.prod(shape)), **{f"{k}_us": round(statistics.median(v), 1) for k, v in times.items()},
               "auto_on_opencl": [r["index"] for r in auto.placement() if r["placement"] == "opencl"],
               "auto_kept": {r["index"]: r["reason"] for r in auto.placement() if r["placement"] == "litert"}}
        out["models"].append(row)
        print(f"{row['elements']:>9} elements: stand-in + LiteRT {row['none_us']:.0f} us, + litecl all "
              f"{row['all_us']:.0f} us, + litecl auto {row['auto_us']:.0f} us (auto on OpenCL: "
              f"{row['auto_on_opencl'] or 'none'})", flush=True)
    print(f"device {out['device']}, load average {out['load_average'][0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
