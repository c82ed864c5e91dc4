"""End-to-end: LiteRT with litecl.Delegate vs LiteRT alone on the same model in the same
process, alternating rounds.

One inference = set inputs, invoke, read outputs (what a user pays). Both use the same op
resolver (builtin kernels, no XNNPACK; --reference to change). Also cold start:
interpreter creation + allocate_tensors + first inference, vs warm.

    python benchmarks/bench_e2e.py --device intel --size 16777216 --out bench_out

Writes e2e.json, e2e.md and e2e.png under --out.
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from common import SHARED, positive_int, progress, run_script, write_outputs

import litecl  # noqa: E402
from litecl.bench import make_run  # noqa: E402
from litecl.compare import make_interpreter, random_inputs  # noqa: E402
from models.builders import add_model, cast_model, chain_model  # noqa: E402

REAL = ["movenet_singlepose_lightning_int8.tflite", "lyra_quantizer.tflite",
        "recommendation_cnn_i10i32o100.tflite", "rope.tflite", "frontend_sl_v1.tflite"]


def synthetic(n: int) -> dict[str, bytes]:
    return {
        "CAST f32->f16": cast_model("float32", "float16", [n]),
        "CAST u8->f32": cast_model("uint8", "float32", [n]),
        "CAST i64->f16": cast_model("int64", "float16", [n]),
        "ADD f32": add_model("float32", [n], [n]),
        "u8->f32 +1 ->f16": chain_model(["uint8", "float32", ("add", np.full([n], 1.0, np.float32)), "float16"], [n]),
    }


def _inputs(interp, seed=0):
    ins = random_inputs(interp.get_input_details(), seed)
    return {d["index"]: ins[d["name"]] for d in interp.get_input_details()}


def cold_start(model: bytes, device, reference, placement="all") -> tuple[float, float]:
    t0 = time.perf_counter()
    it = litecl.Interpreter(model_content=model, device=device, reference=reference, placement=placement)
    it.allocate_tensors()
    run = make_run(it, _inputs(it))
    run()
    t_l = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = make_interpreter(model, reference=reference)
    ref.allocate_tensors()
    make_run(ref, _inputs(ref))()
    t_r = time.perf_counter() - t0
    return t_l, t_r


def transfer_floor_us(device, in_bytes: list, out_bytes: list, repeats: int = 7) -> float:
    """The physical floor of one inference's transfers, in microseconds: every input
    written from and every output read into pinned host memory (ALLOC_HOST_PTR, mapped),
    one wait; median of ``repeats``. On host-unified devices (no bus) it is the copy."""
    import pyopencl as cl

    dev = litecl.open_device(device)
    q, ctx, mf = dev.queue, dev.context, cl.mem_flags
    bufs, hosts = [], []
    for n in list(in_bytes) + list(out_bytes):
        n = max(int(n), 1)
        b = cl.Buffer(ctx, mf.READ_WRITE, n)
        pin = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, n)
        h, _ = cl.enqueue_map_buffer(q, pin, cl.map_flags.READ | cl.map_flags.WRITE, 0, (n,), np.uint8)
        bufs.append((b, pin))
        hosts.append(h)
    k = len(in_bytes)

    def once():
        for (b, _), h in zip(bufs[:k], hosts[:k]):
            cl.enqueue_copy(q, b, h, is_blocking=False)
        for (b, _), h in zip(bufs[k:], hosts[k:]):
            cl.enqueue_copy(q, h, b, is_blocking=False)
        q.finish()
    once()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        once()
        ts.append((time.perf_counter_ns() - t0) / 1e3)
    for h in hosts:
        h.base.release(q)
    for b, pin in bufs:
        b.release()
        pin.release()
    return statistics.median(ts)


def compare(model: bytes, device, reference: str, rounds: int, per_round: int,
            placement: str = "all") -> dict:
    it = litecl.Interpreter(model_content=model, device=device, reference=reference, placement=placement)
    it.allocate_tensors()
    ref = make_interpreter(model, reference=reference)
    ref.allocate_tensors()
    run_l, run_r = make_run(it, _inputs(it)), make_run(ref, _inputs(ref))
    run_l()
    run_r()  # warm-up
    tl, tr = [], []
    for _ in range(rounds):  # alternate so drift (thermal, other load) hits both
        for run, acc in ((run_l, tl), (run_r, tr)):
            for _ in range(per_round):
                t0 = time.perf_counter_ns()
                run()
                acc.append((time.perf_counter_ns() - t0) / 1e3)
    d = it.delegate
    on = sum(g["claimed"] for g in d.graph_info())
    parts = sum(g["partitions"] for g in d.graph_info())
    # where the time goes: the delegated launches' event-profiled kernel time (profiled
    # runs, median); the rest is LiteRT's own nodes and the delegate's copies and launches
    d.profile = True
    kern = []
    for _ in range(max(3, per_round)):
        d.kernel_times_ns.clear()
        run_l()
        kern.append(sum(d.kernel_times_ns.values()) / 1e3)
    d.profile = False
    it.close()
    ml, mr = statistics.median(tl), statistics.median(tr)
    k_us = statistics.median(kern)
    nb = lambda d: int(np.prod(d["shape"], dtype=np.int64)) * np.dtype(d["dtype"]).itemsize  # noqa: E731
    floor = transfer_floor_us(device, [nb(d) for d in ref.get_input_details()],
                              [nb(d) for d in ref.get_output_details()])
    return {"litecl_us": ml, "litert_us": mr, "ratio": ml / mr, "opencl_nodes": on,
            "floor_us": floor, "x_floor": ml / floor if floor else float("nan"),
            "partitions": parts, "kernel_us": k_us, "rest_us": ml - k_us,
            "delta_per_partition_us": (ml - mr) / parts if parts else float("nan")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="litecl device spec (default: auto)")
    ap.add_argument("--size", type=positive_int, default=1 << 24,
                    help="elements of the large synthetic models (default 16777216)")
    ap.add_argument("--small", type=positive_int, default=4096,
                    help="elements of the small-model overhead run (default 4096)")
    ap.add_argument("--rounds", type=positive_int, default=5,
                    help="alternating rounds, litecl then LiteRT (default 5)")
    ap.add_argument("--per-round", type=positive_int, default=4,
                    help="inferences of each per round (default 4); the median over all rounds is reported")
    ap.add_argument("--reference", default="builtin", choices=("builtin", "ref", "xnnpack"),
                    help="LiteRT's op resolver, with and without the delegate (default builtin)")
    ap.add_argument("--placement", default="all", choices=("all", "auto"),
                    help="the delegate's placement (default all)")
    ap.add_argument("--no-real", action="store_true",
                    help="skip the real models (from $LITECL_SHARED_MODELS, default ../shared/models "
                         "beside the checkout)")
    ap.add_argument("--out", default="bench_out", type=Path, help="output folder (default bench_out)")
    args = ap.parse_args(argv)
    dev = litecl.open_device(args.device)
    cases = [(f"{k} [{args.size}]", m) for k, m in synthetic(args.size).items()]
    cases += [(f"{k} [{args.small}]", m) for k, m in synthetic(args.small).items()]
    if not args.no_real and SHARED.is_dir():
        cases += [(name, (SHARED / name).read_bytes()) for name in REAL if (SHARED / name).exists()]
    rows = []
    for name, m in progress(cases, desc=f"e2e on {dev.caps.name}"):
        r = compare(m, args.device, args.reference, args.rounds, args.per_round, args.placement)
        cl, cr = cold_start(m, args.device, args.reference, args.placement)
        r.update(case=name, cold_litecl_ms=cl * 1e3, cold_litert_ms=cr * 1e3)
        rows.append(r)
    md = [f"Device: {dev.caps.platform}: {dev.caps.name}; reference: LiteRT {args.reference}; "
          f"placement {args.placement}; "
          f"median of {args.rounds}x{args.per_round} alternating runs (set inputs + invoke + read outputs)\n",
          "| model | litecl (us) | LiteRT (us) | litecl / LiteRT | transfer floor (us) | litecl / floor | "
          "delegated partitions | kernels (us) | "
          "rest (us) | (litecl - LiteRT) per partition (us) | cold start litecl / LiteRT (ms) |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['case']} | {r['litecl_us']:.0f} | {r['litert_us']:.0f} | {r['ratio']:.2f}x | "
                  f"{r['floor_us']:.0f} | {r['x_floor']:.2f}x | "
                  f"{r['partitions']} | {r['kernel_us']:.0f} | {r['rest_us']:.0f} | "
                  f"{r['delta_per_partition_us']:.0f} | "
                  f"{r['cold_litecl_ms']:.1f} / {r['cold_litert_ms']:.1f} |")
    md.append("\nkernels: the delegated launches' event-profiled time; rest = litecl - kernels: "
              "LiteRT's own nodes, the delegate's copies, launches, waits and Python. "
              "(litecl - LiteRT) per partition: what each delegated partition adds or saves. "
              "Transfer floor = every input written from and every output read into pinned "
              "memory, one wait, measured in the same process.")
    write_outputs(args.out, "e2e", {"device": dev.caps.name, "rows": rows}, "\n".join(md) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
        ys = np.arange(len(rows))
        ax.barh(ys - 0.2, [r["litecl_us"] / 1e3 for r in rows], 0.4, label="litecl")
        ax.barh(ys + 0.2, [r["litert_us"] / 1e3 for r in rows], 0.4, label="LiteRT")
        ax.set_yticks(ys, [r["case"] for r in rows], fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("ms per inference (set + invoke + read), log scale")
        ax.set_title(f"litecl vs LiteRT on {dev.caps.name}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.out / "e2e.png", dpi=110)
    except ImportError:
        print("matplotlib not installed (bench extra): no plot")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
