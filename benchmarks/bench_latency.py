"""Where the per-invoke time of a small model goes: litecl's set_tensor / invoke /
get_tensor on a float32 -> float16 CAST of --n elements (default 4096), and the raw OpenCL
calls they are made of (blocking map, read, write, kernel launch + finish) on a buffer of
the same size, plus the same transfers through pinned (ALLOC_HOST_PTR, mapped once) host
memory.

    python benchmarks/bench_latency.py --device pocl --out bench_out

Writes latency.json and latency.md under --out (microseconds, mean of --runs calls after
max(10, runs / 20) untimed ones).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from common import positive_int, run_script, write_outputs

import litecl  # noqa: E402
from models.builders import cast_model  # noqa: E402


def mean_us(f, runs: int) -> float:
    for _ in range(max(10, runs // 20)):
        f()
    t0 = time.perf_counter()
    for _ in range(runs):
        f()
    return (time.perf_counter() - t0) / runs * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="litecl device spec (default: auto)")
    ap.add_argument("--n", type=positive_int, default=4096,
                    help="elements of the float32 -> float16 CAST model and the raw buffers (default 4096)")
    ap.add_argument("--runs", type=positive_int, default=2000, help="timed calls per step, mean (default 2000)")
    ap.add_argument("--out", default="bench_out", type=Path, help="output folder (default bench_out)")
    args = ap.parse_args(argv)
    import pyopencl as cl

    dev = litecl.open_device(args.device)
    n = args.n
    it = litecl.Interpreter(model_content=cast_model("float32", "float16", [n]), device=dev)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    x = np.random.default_rng(0).random(n).astype(np.float32)
    rows = {}
    rows["set_tensor"] = mean_us(lambda: it.set_tensor(i, x), args.runs)
    rows["invoke"] = mean_us(it.invoke, args.runs)
    rows["get_tensor"] = mean_us(lambda: it.get_tensor(o), args.runs)

    def full():
        it.set_tensor(i, x)
        it.invoke()
        it.get_tensor(o)
    rows["set + invoke + get"] = mean_us(full, args.runs)
    q, ctx = dev.queue, dev.context
    mf = cl.mem_flags
    buf = cl.Buffer(ctx, mf.READ_WRITE | (mf.ALLOC_HOST_PTR if not dev.caps.is_gpu else 0), 4 * n)
    h = np.empty(n, np.float32)
    rows["finish (empty queue)"] = mean_us(q.finish, args.runs)

    def mp():
        a, _ = cl.enqueue_map_buffer(q, buf, cl.map_flags.READ, 0, (n,), np.float32, is_blocking=True)
        a.base.release(q)
    rows["map + unmap (blocking)"] = mean_us(mp, args.runs)
    rows["read (blocking)"] = mean_us(lambda: cl.enqueue_copy(q, h, buf, is_blocking=True), args.runs)
    rows["write (non-blocking) + finish"] = mean_us(
        lambda: (cl.enqueue_copy(q, buf, h, is_blocking=False), q.finish()), args.runs)
    k = cl.Program(ctx, "__kernel void k(__global float* a) { a[get_global_id(0)] += 1.0f; }").build().k
    k.set_args(buf)
    rows["kernel launch + finish"] = mean_us(
        lambda: (cl.enqueue_nd_range_kernel(q, k, (n,), None), q.finish()), args.runs)
    rows["write + kernel + read (one wait)"] = mean_us(
        lambda: (cl.enqueue_copy(q, buf, h, is_blocking=False), cl.enqueue_nd_range_kernel(q, k, (n,), None),
                 cl.enqueue_copy(q, h, buf, is_blocking=False), q.finish()), args.runs)
    # pinned staging: a host-allocated buffer mapped once, copies between it and buf
    pin = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, 4 * n)
    ph, _ = cl.enqueue_map_buffer(q, pin, cl.map_flags.READ | cl.map_flags.WRITE, 0, (n,), np.float32)
    rows["write from pinned + kernel + read to pinned (one wait)"] = mean_us(
        lambda: (cl.enqueue_copy(q, buf, ph, is_blocking=False), cl.enqueue_nd_range_kernel(q, k, (n,), None),
                 cl.enqueue_copy(q, ph, buf, is_blocking=False), q.finish()), args.runs)
    rows["buffer->buffer copies from pinned + kernel (one wait)"] = mean_us(
        lambda: (cl.enqueue_copy(q, buf, pin), cl.enqueue_nd_range_kernel(q, k, (n,), None),
                 cl.enqueue_copy(q, pin, buf), q.finish()), args.runs)
    md = [f"Device: {dev.caps.platform}: {dev.caps.name}; {n} elements; mean of {args.runs} calls\n",
          "| step | us |", "|---|---|"] + [f"| {k_} | {v:.1f} |" for k_, v in rows.items()]
    write_outputs(args.out, "latency", {"device": dev.caps.name, "n": n, "us": rows}, "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
