"""Streaming (non-temporal) stores against plain stores, per lowered kernel, on a CPU device.

For every CAST pair (or --pairs) and same-shape ADD, at each size: the kernel litecl
generates with plain vector stores and the one with ``__builtin_nontemporal_store``
(ops/tiling.py ``streams``; what the delegate's kernels use above LAUNCH["cpu"].stream_bytes),
timed in alternating rounds with a float4 copy of the same bytes (OpenCL profiling events,
medians), so all three see the same machine state. GB/s counts bytes read + written.

    python benchmarks/bench_streaming.py --device pocl --sizes 20,22,24,26 --out bench_out

Writes streaming.json and streaming.md under --out. Needs numpy, pyopencl and litecl (not
LiteRT). Exits with status 2 and a one-line error on a device without the builtin.
"""
from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np

from common import CopyProbe, cast_pairs, log2_sizes, positive_int, progress, run_script, write_outputs

import litecl  # noqa: E402  (after common.py set sys.path)
import pyopencl as cl  # noqa: E402
from litecl.ops.add import add_kernel  # noqa: E402
from litecl.ops.codegen import cast_kernel  # noqa: E402
from litecl.ops.dtypes import dtype  # noqa: E402
from litecl.ops.tiling import launch  # noqa: E402


def _buffers(dev, nbytes: list[int]) -> list:
    bufs = [cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, max(1, b)) for b in nbytes]
    for b, size in zip(bufs, nbytes):
        cl.enqueue_fill_buffer(dev.queue, b, np.uint8(1), 0, size)  # small finite values
    return bufs


def time_case(dev, op: str, s: str, d: str, n: int, repeats: int, probe: CopyProbe) -> dict:
    """Median seconds of the plain and the streaming kernel and of the adjacent copy."""
    src_t, dst_t = dtype(s), dtype(d)
    kernels = {}
    for mode, caps in (("plain", dev.caps), ("streaming", replace(dev.caps, streaming=True))):
        if op == "CAST":
            source, name = cast_kernel(s, d, caps)[0], "litecl_cast"
        else:
            source, name = add_kernel(s, [n], [n], "NONE", caps), "litecl_add"
        kernels[mode] = cl.Kernel(cl.Program(dev.context, source).build(), name)
    if op == "CAST":
        bufs = _buffers(dev, [n * src_t.itemsize, n * dst_t.itemsize])
        tile = min(src_t.itemsize, dst_t.itemsize)
        nbytes = n * (src_t.itemsize + dst_t.itemsize)
    else:
        bufs = _buffers(dev, [n * src_t.itemsize] * 3)
        tile = src_t.itemsize
        nbytes = 3 * n * src_t.itemsize
    tiling, gsize, lsize = launch(dev.caps, n, tile)
    args = [*bufs, *(np.uint32(v) for v in tiling.kernel_args())]
    times: dict[str, list] = {"plain": [], "streaming": [], "copy": []}
    for rnd in range(repeats + 1):  # round 0 warms up
        for mode, k in kernels.items():
            k.set_args(*args)
            ev = cl.enqueue_nd_range_kernel(dev.queue, k, gsize, lsize)
            ev.wait()
            if rnd:
                times[mode].append((ev.profile.end - ev.profile.start) * 1e-9)
        c = probe.seconds(nbytes)
        if rnd:
            times["copy"].append(c)
    for b in bufs:
        b.release()
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"op": op, "src": s, "dst": d, "n": n, "bytes": nbytes,
            **{f"{k}_gbps": nbytes / v / 1e9 for k, v in med.items()}}


def tables(rows: list, device: str, repeats: int) -> str:
    """Markdown: per size, per footprint (MiB read + written), and per kernel at the
    largest size."""
    def summary(key: str, groups: dict) -> list:
        out = [f"| {key} | kernels | streaming / plain: median | min | max | plain >= 80% of copy | "
               "streaming >= 80% of copy | median copy GB/s |", "|---|---|---|---|---|---|---|---|"]
        for k, rs in sorted(groups.items()):
            gain = [r["streaming_gbps"] / r["plain_gbps"] for r in rs]
            out.append(f"| {k} | {len(rs)} | {statistics.median(gain):.2f} | {min(gain):.2f} | {max(gain):.2f} | "
                       f"{sum(r['plain_gbps'] >= 0.8 * r['copy_gbps'] for r in rs)} | "
                       f"{sum(r['streaming_gbps'] >= 0.8 * r['copy_gbps'] for r in rs)} | "
                       f"{statistics.median(r['copy_gbps'] for r in rs):.1f} |")
        return out

    by_size: dict = {}
    by_bytes: dict = {}
    for r in rows:
        by_size.setdefault(r["n"].bit_length() - 1, []).append(r)
        by_bytes.setdefault(r["bytes"] >> 20, []).append(r)
    big = max(r["n"] for r in rows)
    md = [f"Device: {device}. GB/s (read + written), medians of {repeats} alternating rounds; 'copy': a "
          "float4 copy of the same bytes in the same rounds. Streaming = vector stores through "
          "__builtin_nontemporal_store.", ""]
    md += summary("2^k elements", by_size)
    md += ["", "By footprint (MiB read + written, all sizes):", ""] + summary("MiB", by_bytes)
    md += ["", f"Per kernel at 2^{big.bit_length() - 1}:", "",
           "| op | src -> dst | plain GB/s | streaming GB/s | copy GB/s |", "|---|---|---|---|---|"]
    md += [f"| {r['op']} | {r['src']} -> {r['dst']} | {r['plain_gbps']:.1f} | {r['streaming_gbps']:.1f} | "
           f"{r['copy_gbps']:.1f} |" for r in rows if r["n"] == big]
    return "\n".join(md) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="pocl", help="litecl device spec of a CPU device (default: pocl)")
    ap.add_argument("--sizes", default="20,22,24,26", type=log2_sizes,
                    help="comma-separated log2 element counts, each 0..30 (default 20,22,24,26)")
    ap.add_argument("--pairs", default="all", type=cast_pairs,
                    help="'all' or comma-separated src:dst CAST pairs; ADD of float32, int32 and int64 "
                         "always runs (default all)")
    ap.add_argument("--repeats", type=positive_int, default=5, help="timed rounds per case (default 5)")
    ap.add_argument("--out", default="bench_out", type=Path, help="output folder (default bench_out)")
    args = ap.parse_args(argv)
    dev = litecl.open_device(args.device)
    if not dev.caps.nontemporal:
        ap.exit(2, f"error: {dev.caps.name}: the compiler has no __builtin_nontemporal_store "
                   "(litecl asks only CPU devices)\n")
    pairs = args.pairs
    cases = [("CAST", s, d) for s, d in pairs] + [("ADD", t, t) for t in ("float32", "int32", "int64")]
    probe = CopyProbe(dev)
    rows = [time_case(dev, op, s, d, 1 << e, args.repeats, probe)
            for op, s, d in progress(cases, desc=f"streaming on {dev.caps.name}") for e in args.sizes]
    md = tables(rows, f"{dev.caps.platform}: {dev.caps.name}", args.repeats)
    write_outputs(args.out, "streaming", {"device": dev.caps.name, "rows": rows}, md)
    print(md.split("\n\n")[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
