"""How far placement="auto"'s estimates are from what runs: for each of the five
16M-element synthetic models (and --size), the cost model's OpenCL and LiteRT estimates
(placement.estimate with node_rates and run_rate) beside the measured litecl kernel time
(event profiled), litecl invoke and LiteRT invoke, medians of alternating rounds, and the
Costs figures. The kernel ratio compares the estimate's kernel part (without the round
trip and the boundary copies) with the kernels' measured time: issue 22's "within 1.5x".

    python benchmarks/cost_model_check.py --device pocl [--size 16777216]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import litecl  # noqa: E402
from litecl import placement as pm  # noqa: E402
from litecl.compare import make_interpreter, random_inputs  # noqa: E402

from bench_delegate import large  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--size", type=int, default=1 << 24)
    ap.add_argument("--rounds", type=int, default=9, help="alternating rounds per model (medians)")
    ap.add_argument("--json", default=None, help="write the rows here too")
    ap.add_argument("--fresh", action="store_true",
                    help="measure the rates now instead of reading litecl's cache (rates cached at another "
                         "moment carry that moment's memory bandwidth: it drifts up to 2x on a shared VM)")
    a = ap.parse_args(argv)
    if a.fresh:
        from litecl import cache as lcache  # noqa: PLC0415

        real_get = lcache.probe_get
        lcache.probe_get = lambda name, ident: None if name.startswith(("rates-", "run-rate-")) else real_get(name, ident)
    d = litecl.Delegate(a.device, quiet=True)
    costs = pm.device_costs(d.device)
    print(f"device {d.device.caps.name}; in place {d.memory.in_place}; costs {asdict(costs)}")
    rows = []
    for name, raw in large(a.size).items():
        it = litecl.Interpreter(model_content=raw, delegate=d)
        it.allocate_tensors()
        rec = d._records[d._addrs(id(it))[0]]
        sg, views = rec["sg"], list(rec["views"].values())
        est = [pm.estimate(g, sg, costs, d.memory.in_place, {n.index: pm.node_rates(d, n, sg) for n in g}, d.fuse,
                           lambda run: pm.run_rate(d, run, sg))
               for g in pm.groups(views)]
        ocl_est, lit_est = sum(e[0] for e in est), sum(e[1] for e in est)
        # the estimate's kernel part: the same estimate without the boundary copies (as if
        # in place) less the round trip each partition pays
        kest = sum(pm.estimate(g, sg, costs, True, {n.index: pm.node_rates(d, n, sg) for n in g}, d.fuse,
                               lambda run: pm.run_rate(d, run, sg))[0] - costs.round_trip_us
                   for g in pm.groups(views))
        ref = make_interpreter(raw)
        ref.allocate_tensors()
        ins = random_inputs(ref.get_input_details(), seed=0)
        for x in (ref, it):
            for det in x.get_input_details():
                x.set_tensor(det["index"], ins[det["name"]])
        ta, tb, tk = [], [], []
        for _ in range(a.rounds):
            t = time.perf_counter()
            ref.invoke()
            ta.append(time.perf_counter() - t)
            d.profile = False
            t = time.perf_counter()
            it.invoke()
            tb.append(time.perf_counter() - t)
            d.profile, d.kernel_times_ns = True, {}
            it.invoke()
            tk.append(sum(d.kernel_times_ns.values()) / 1e9)
        d.profile = False
        A, B, K = (float(np.median(v)) * 1e6 for v in (ta, tb, tk))
        row = dict(model=name, opencl_estimate_us=ocl_est, kernel_estimate_us=kest, kernel_us=K,
                   kernel_ratio=K / kest, invoke_us=B, invoke_ratio=B / ocl_est,
                   litert_estimate_us=lit_est, litert_us=A, litert_ratio=A / lit_est)
        rows.append(row)
        print(f"{name:18s} kernel: estimate {kest:7.0f} us, measured {K:7.0f} (x{K / kest:.2f}) | "
              f"OpenCL invoke: estimate {ocl_est:7.0f}, measured {B:7.0f} (x{B / ocl_est:.2f}) | "
              f"LiteRT: estimate {lit_est:7.0f}, measured {A:7.0f} (x{A / lit_est:.2f})", flush=True)
    ks = [r["kernel_ratio"] for r in rows]
    print(f"measured kernel / estimate: {min(ks):.2f}-{max(ks):.2f} (medians of {a.rounds} rounds)")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(device=d.device.caps.name, costs=asdict(costs), rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
