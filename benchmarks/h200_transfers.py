"""Discrete-GPU transfers A/B (issue 14): on one device, in one process, for the five
16M-element synthetic models of bench_e2e, set + invoke + get medians of LiteRT with
litecl's delegate (litecl.Interpreter) under

  serial  - litecl.Interpreter.get_tensor's copies of large outputs on one thread
            (LITECL_HOST_THREADS=1); set_tensor is LiteRT's own
  threads - the same copies split over hostcopy.host_threads() threads (the default)
  views   - LiteRT's zero-copy idiom: inputs written in place through tensor() views,
            then invoke + the output views; no set/get copies (the delegate's own
            host<->device copies at invoke remain)

beside LiteRT (same process, alternating rounds) and the pinned transfer floor
(bench_e2e.transfer_floor_us). Also the host copy rates behind them. Prints a Markdown
table; ``--json`` writes every figure.

    python benchmarks/h200_transfers.py --device nvidia [--size 16777216] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_e2e import _inputs, synthetic, transfer_floor_us  # noqa: E402

import litecl  # noqa: E402
import litecl.hostcopy as hc  # noqa: E402
from litecl.bench import make_run  # noqa: E402
from litecl.compare import make_interpreter  # noqa: E402

MODES = ("serial", "threads", "views")


def _mode(mode: str, threads: int) -> None:
    os.environ["LITECL_HOST_THREADS"] = "1" if mode == "serial" else str(threads)


def _med(f, n=7) -> float:
    f()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        f()
        ts.append((time.perf_counter_ns() - t0) / 1e3)
    return statistics.median(ts)


def copy_rates(nbytes: int, threads: int, device) -> dict:
    """GB/s of host copies of ``nbytes``: into pinned memory and into a fresh array, on
    one thread and split."""
    import pyopencl as cl

    dev = litecl.open_device(device)
    pin = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, nbytes)
    dst, _ = cl.enqueue_map_buffer(dev.queue, pin, cl.map_flags.READ | cl.map_flags.WRITE, 0, (nbytes,), np.uint8)
    src = np.random.default_rng(0).integers(0, 255, nbytes, dtype=np.uint8)
    out = {}
    for mode in ("serial", "threads"):
        _mode(mode, threads)
        out[f"to pinned, {mode}"] = nbytes / _med(lambda: hc.copy_host(dst, src)) / 1e3
        out[f"to a fresh array, {mode}"] = nbytes / _med(lambda: hc.copy_host(np.empty_like(src), src)) / 1e3
    dst.base.release(dev.queue)
    pin.release()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="nvidia")
    ap.add_argument("--size", type=int, default=1 << 24)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--per-round", type=int, default=4)
    ap.add_argument("--threads", type=int, default=hc.host_threads())
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    rates = copy_rates(64 << 20, args.threads, args.device)
    print(f"host: {os.cpu_count()} cores, {args.threads} copy threads; 64 MiB host copies (GB/s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in rates.items()))
    rows = []
    for name, model in synthetic(args.size).items():
        ref = make_interpreter(model)
        ref.allocate_tensors()
        it = litecl.Interpreter(model_content=model, device=args.device)
        it.allocate_tensors()
        ins = _inputs(ref)
        runs = {"litert": make_run(ref, ins), "litecl": make_run(it, ins)}
        out_views = [it.tensor(d["index"]) for d in it.get_output_details()]

        def run_views():
            it.invoke()
            for f in out_views:
                f()
        runs["views"] = run_views
        want = [ref.get_tensor(d["index"]) for d in ref.get_output_details()]
        times = {m: [] for m in (*MODES, "litert")}
        for _ in range(args.rounds):
            for m in times:
                if m != "litert":
                    _mode(m, args.threads)
                if m == "views":  # the inputs written in place, once
                    for idx, v in ins.items():
                        it.tensor(idx)()[...] = v
                run = runs[m if m in ("litert", "views") else "litecl"]
                run()
                for _ in range(args.per_round):
                    t0 = time.perf_counter_ns()
                    run()
                    times[m].append((time.perf_counter_ns() - t0) / 1e3)
        runs["litert"]()
        want = [ref.get_tensor(d["index"]).tobytes() for d in ref.get_output_details()]
        got = [it.get_tensor(d["index"]).tobytes() for d in it.get_output_details()]
        run_views()
        got_views = [f().tobytes() for f in out_views]
        nb = lambda d: int(np.prod(d["shape"], dtype=np.int64)) * np.dtype(d["dtype"]).itemsize  # noqa: E731
        floor = transfer_floor_us(args.device, [nb(d) for d in ref.get_input_details()],
                                  [nb(d) for d in ref.get_output_details()])
        med = {m: statistics.median(v) for m, v in times.items()}
        rows.append({"model": name, "floor_us": floor, "median_us": med,
                     "bit_exact": got == want and got_views == want})
        it.close()
    print("\n| model | serial ms | threads ms | views ms | LiteRT ms | floor ms | threads / floor | "
          "views / floor | exact |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        m = r["median_us"]
        print(f"| {r['model']} | {m['serial'] / 1e3:.2f} | {m['threads'] / 1e3:.2f} | {m['views'] / 1e3:.2f} | "
              f"{m['litert'] / 1e3:.2f} | {r['floor_us'] / 1e3:.2f} | {m['threads'] / r['floor_us']:.2f}x | "
              f"{m['views'] / r['floor_us']:.2f}x | "
              f"{r['bit_exact']} |")
    if args.json:
        args.json.write_text(json.dumps({"rates_gbs": rates, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
