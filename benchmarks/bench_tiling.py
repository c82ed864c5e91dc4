"""Former/tail tiling against the usual elementwise launch shapes, in GB/s.

Kernels (the same per-element function in each, from litecl's code generators):
  tiled_v32 / tiled_v16  former/tail plan (ops/tiling.py), one work-group per core,
                         aligned vector loads/stores of 32 / 16 bytes on the widest side
  tiled_scalar           former/tail plan with scalar loads (litecl before vectorising)
  ndrange                one work-item per element, ``if (i < n)``
  grid_stride            ``for (i = gid; i < n; i += global_size)``
Cases: CAST float32->float16, CAST uint8->float32, same-shape ADD float32, at --sizes
(default 2^16..2^24). GB/s counts bytes read + written, from OpenCL profiling events
(--warmup untimed rounds, then the median of --repeats launches; all kernels of a point
are timed in alternating rounds). Each kernel's output is first checked against numpy.
Each point also times the device's float4 copy kernel moving the same bytes in the same
rounds (cache-resident sizes run above DRAM's), and the header gives a 256 MiB copy: the
roof.

Geometry: the tiled kernels use the device type's LAUNCH row (local size, work-groups per
compute unit); ndrange uses local 256 on a GPU and the runtime's choice on a CPU;
grid_stride a machine-sized grid: 8 groups of 256 per compute unit on a GPU, 4 groups of
16 (one SIMD packet of the CPU runtime's vectoriser) per compute unit on a CPU.
``--geometry`` also times the tiled kernels over local size x work-groups per compute
unit x vector bytes at the largest size (how LAUNCH was chosen).

    python benchmarks/bench_tiling.py --device intel --out bench_out
    python benchmarks/bench_tiling.py --device nvidia --geometry --out $OUT

Writes tiling.json and tiling.md under --out (with --geometry also geometry.md, its rows in
the JSON). Needs only numpy, pyopencl and litecl.device / litecl.ops (not LiteRT).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
# common also puts the checkout on sys.path
from common import copy_bandwidth, log2_sizes, nonnegative_int, positive_int, run_script  # noqa: E402

from litecl.device import open_device  # noqa: E402
from litecl.ops.add import add_kernel  # noqa: E402
from litecl.ops.codegen import cast_kernel  # noqa: E402
from litecl.ops.tiling import LAUNCH, launch, launch_config  # noqa: E402

import pyopencl as cl  # noqa: E402

VARIANTS = ("tiled_v32", "tiled_v16", "tiled_scalar", "ndrange", "grid_stride")
CASES = (("CAST", "float32", "float16"), ("CAST", "uint8", "float32"), ("ADD", "float32", "float32"))


def case_name(case) -> str:
    op, s, d = case
    return f"CAST {s}->{d}" if op == "CAST" else f"ADD {s}"


def kernel_source(case, variant: str, caps) -> tuple[str, str]:
    """(source, kernel name) of ``variant`` for ``case``."""
    op, s, d = case
    skeleton = variant if variant in ("ndrange", "grid_stride") else "tiled"
    vb = {"tiled_v32": 32, "tiled_v16": 16, "tiled_scalar": 1}.get(variant, 1)
    if op == "CAST":
        return cast_kernel(s, d, caps, vec_bytes=vb, skeleton=skeleton)[0], "litecl_cast"
    return add_kernel(s, [1], [1], "NONE", caps, vec_bytes=vb, skeleton=skeleton), "litecl_add"


def inputs(case, n: int, rng) -> list[np.ndarray]:
    op, s, _ = case
    if s == "uint8":
        return [rng.integers(0, 256, n, dtype=np.uint8)]
    xs = [(rng.standard_normal(n) * 100).astype(np.float32)]
    return xs + [(rng.standard_normal(n) * 100).astype(np.float32)] if op == "ADD" else xs


def expected(case, xs) -> np.ndarray:
    op, _, d = case
    return (xs[0] + xs[1]) if op == "ADD" else xs[0].astype(np.dtype(d))


class Runner:
    """Inputs, one output buffer per kernel, and timing for one case at one size."""

    def __init__(self, dev, case, n: int, repeats: int, warmup: int):
        self.dev, self.case, self.n, self.repeats, self.warmup = dev, case, n, repeats, warmup
        rng = np.random.default_rng(n)
        self.xs = inputs(case, n, rng)
        self.want = expected(case, self.xs)
        mf = cl.mem_flags
        ctx = dev.context
        self.ins = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) for x in self.xs]
        self.nbytes = sum(x.nbytes for x in self.xs) + self.want.nbytes
        self.tile = min([x.itemsize for x in self.xs] + [self.want.itemsize])

    def time(self, launches, copy=None) -> list[float]:
        """Median kernel seconds of each (kernel, global, local, scalar args) in
        ``launches``, timed in alternating rounds (one launch of each per round, so drift
        and neighbours' load fall on all alike) from profiling events. With ``copy`` (the
        float4 copy kernel) its time for the same bytes read + written comes last. Each
        launch is first run once into a zeroed output and checked: AssertionError when
        its result is wrong."""
        q, ctx = self.dev.queue, self.dev.context
        out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, self.want.nbytes)
        got = np.empty_like(self.want)
        calls = []
        for j, (kern, g, loc, sc) in enumerate(launches):
            args = (*self.ins, out, *(np.uint32(v) for v in sc))
            cl.enqueue_fill_buffer(q, out, np.uint8(0), 0, self.want.nbytes)
            kern(q, g, loc, *args)
            cl.enqueue_copy(q, got, out)
            if not np.array_equal(got, self.want):
                bad = int((got != self.want).sum())
                raise AssertionError(f"{case_name(self.case)} n={self.n} launch {j}: {bad} wrong elements")
            calls.append((kern, g, loc, args))
        if copy is not None:
            n4 = max(1, self.nbytes // 32)  # half the bytes read, half written
            bufs = [cl.Buffer(ctx, cl.mem_flags.READ_WRITE, n4 * 16) for _ in range(2)]
            cl.enqueue_fill_buffer(q, bufs[0], np.uint8(1), 0, n4 * 16)
            calls.append((copy, (n4,), None, tuple(bufs)))
        times: list[list[float]] = [[] for _ in calls]
        for r in range(self.warmup + self.repeats):
            for j, (kern, gsize, lsize, args) in enumerate(calls):
                ev = kern(q, gsize, lsize, *args)
                ev.wait()
                if r >= self.warmup:
                    times[j].append((ev.profile.end - ev.profile.start) * 1e-9)
        return [statistics.median(t) for t in times]


def geometry(variant: str, caps, n: int, tile: int):
    """(global, local, scalar args) of a variant (module docstring)."""
    if variant.startswith("tiled"):
        t, g, loc = launch(caps, n, tile)
        return g, loc, t.kernel_args()
    if variant == "ndrange":
        if caps.is_gpu:
            return (-(-n // 256) * 256,), (256,), (n,)
        return (n,), None, (n,)
    # grid_stride: a machine-sized grid; GPU 8 groups of 256 per CU, CPU 4 groups of 16
    # work-items (one SIMD packet of the CPU runtime's vectoriser) per CU
    local, per_cu = (256, 8) if caps.is_gpu else (16, 4)
    local = min(local, caps.max_work_group_size)
    return (caps.compute_units * per_cu * local,), (local,), (n,)


def build(dev, source: str, name: str):
    with warnings.catch_warnings():  # pyopencl warns on any compiler chatter
        warnings.simplefilter("ignore")
        return cl.Kernel(cl.Program(dev.context, source).build(), name)


COPY4 = ("__kernel void copy4(__global const float4* a, __global float4* b) "
         "{ const size_t i = get_global_id(0); b[i] = a[i]; }")


def run_main(dev, sizes, repeats, warmup, log) -> list[dict]:
    rows = []
    copy = build(dev, COPY4, "copy4")
    for case in CASES:
        kernels = {v: build(dev, *kernel_source(case, v, dev.caps)) for v in VARIANTS}
        for n in sizes:
            r = Runner(dev, case, n, repeats, warmup)
            geo = [geometry(v, dev.caps, n, r.tile) for v in VARIANTS]
            secs = r.time([(kernels[v], *g) for v, g in zip(VARIANTS, geo)], copy=copy)
            for v, (g, loc, _), sec in zip(VARIANTS, geo, secs):
                rows.append({"case": case_name(case), "n": n, "variant": v, "seconds": sec,
                             "gbps": r.nbytes / sec / 1e9, "global": g[0],
                             "local": loc[0] if loc else None})
            rows.append({"case": case_name(case), "n": n, "variant": "copy", "seconds": secs[-1],
                         "gbps": max(1, r.nbytes // 32) * 32 / secs[-1] / 1e9})
            log(f"{case_name(case)} 2^{n.bit_length() - 1}: " + ", ".join(
                f"{x['variant']} {x['gbps']:.1f}" for x in rows[-len(VARIANTS) - 1:]))
    return rows


def run_geometry(dev, n, repeats, warmup, log) -> list[dict]:
    """Tiled kernels at size n over local sizes x work-groups per compute unit x vec bytes."""
    caps = dev.caps
    locals_ = (1, 4, 16, 64, 128, 256, 512) if caps.is_gpu else (1, 2, 4, 8, 16, 64)
    per_cu = (1, 2, 4, 8, 16, 32)
    rows = []
    for case in CASES:
        r = Runner(dev, case, n, repeats, warmup)
        configs, launches = [], []
        for vb, name in ((16, "tiled_v16"), (32, "tiled_v32")):
            kern = build(dev, *kernel_source(case, name, caps))
            for loc in locals_:
                if loc > caps.max_work_group_size:
                    continue
                for pc in per_cu:
                    bd = max(1, caps.compute_units * pc)
                    t, g, lsz = launch(caps, n, r.tile, block_dim=bd, local_size=loc)
                    configs.append({"case": case_name(case), "n": n, "vec_bytes": vb, "local": loc,
                                    "groups_per_cu": pc, "block_dim": bd})
                    launches.append((kern, g, lsz, t.kernel_args()))
        for c, sec in zip(configs, r.time(launches)):
            rows.append({**c, "gbps": r.nbytes / sec / 1e9})
        best = max((x for x in rows if x["case"] == case_name(case)), key=lambda x: x["gbps"])
        log(f"geometry {case_name(case)}: best {best}")
    return rows


def main_table(rows, roof, dev, sizes) -> str:
    lines = [f"Device: {dev.caps.platform}: {dev.caps.name} ({dev.caps.compute_units} compute units); "
             f"float4 copy roof {roof:.1f} GB/s (256 MiB); GB/s = bytes read + written / kernel time "
             "(median of profiled launches, alternating rounds); last column: a float4 copy "
             "moving the same bytes in the same rounds\n",
             "| case | n | " + " | ".join(VARIANTS) + " | float4 copy, same bytes |",
             "|---|---|" + "---|" * (len(VARIANTS) + 1)]
    for case in CASES:
        for n in sizes:
            cells = {x["variant"]: x["gbps"] for x in rows if x["case"] == case_name(case) and x["n"] == n}
            best = max(cells[v] for v in VARIANTS)
            lines.append(f"| {case_name(case)} | 2^{n.bit_length() - 1} | " + " | ".join(
                (f"**{cells[v]:.1f}**" if cells[v] == best else f"{cells[v]:.1f}") for v in VARIANTS)
                + f" | {cells['copy']:.1f} |")
    return "\n".join(lines) + "\n"


def geometry_table(rows) -> str:
    lines = ["| case | vec bytes | local | groups/CU | GB/s |", "|---|---|---|---|---|"]
    for case in {x["case"]: None for x in rows}:
        top = sorted((x for x in rows if x["case"] == case), key=lambda x: -x["gbps"])[:8]
        lines += [f"| {case} | {x['vec_bytes']} | {x['local']} | {x['groups_per_cu']} | {x['gbps']:.1f} |"
                  for x in top]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="litecl device spec (default: auto)")
    ap.add_argument("--sizes", default="16,17,18,19,20,21,22,23,24", type=log2_sizes,
                    help="comma-separated log2 element counts, each 0..30 (default 16,17,...,24)")
    ap.add_argument("--repeats", type=positive_int, default=15,
                    help="timed launches of each kernel per point, median (default 15)")
    ap.add_argument("--warmup", type=nonnegative_int, default=3,
                    help="untimed launches of each kernel first (default 3)")
    ap.add_argument("--geometry", action="store_true",
                    help="also sweep local size x work-groups per CU x vector bytes at the largest size")
    ap.add_argument("--out", default="bench_out", type=Path, help="output folder (default bench_out)")
    args = ap.parse_args(argv)
    dev = open_device(args.device)
    sizes = [1 << s for s in args.sizes]

    def log(msg):
        print(msg, flush=True)

    t0 = time.time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        roof = copy_bandwidth(dev)
    log(f"{dev.caps.platform}: {dev.caps.name}; float4 copy {roof:.1f} GB/s; "
        f"LAUNCH row {'gpu' if dev.caps.is_gpu else 'cpu'}: {launch_config(dev.caps)}")
    rows = run_main(dev, sizes, args.repeats, args.warmup, log)
    args.out.mkdir(parents=True, exist_ok=True)
    data = {"device": f"{dev.caps.platform}: {dev.caps.name}", "compute_units": dev.caps.compute_units,
            "is_gpu": dev.caps.is_gpu, "copy_gbps": roof, "launch": {k: vars(v) for k, v in LAUNCH.items()},
            "rows": rows}
    md = main_table(rows, roof, dev, sizes)
    if args.geometry:
        g = run_geometry(dev, max(sizes), args.repeats, args.warmup, log)
        data["geometry"] = g
        (args.out / "geometry.md").write_text(geometry_table(g))
    (args.out / "tiling.json").write_text(json.dumps(data, indent=2))
    (args.out / "tiling.md").write_text(md)
    print(md)
    log(f"done in {time.time() - t0:.0f} s; wrote {args.out}/tiling.json, tiling.md"
        + (", geometry.md" if args.geometry else ""))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(main))
