"""Roofline of litecl's lowered kernels: GB/s (bytes read + written) of every CAST pair and
of ADD, from OpenCL profiling events, against the device's own float4 copy bandwidth.

    python benchmarks/bench_roofline.py --device intel --sizes 10,14,18,22,24 --out bench_out

Writes roofline.json, roofline.md and roofline.png under --out.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import numpy as np

from common import CopyProbe, copy_bandwidth, log2_sizes, positive_int, progress, write_outputs

import litecl  # noqa: E402  (after common.py set sys.path)
from litecl.ops.dtypes import CAST_TYPES  # noqa: E402
from models.builders import add_model, cast_model  # noqa: E402


def kernel_seconds(model: bytes, device: str, repeats: int, probe=None, nbytes: int = 0):
    """Median device seconds of the model's kernels over ``repeats`` invokes, and (with a
    CopyProbe) the median seconds of a float4 copy of ``nbytes`` run after each invoke."""
    it = litecl.Interpreter(model_content=model, device=device)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        dt = np.dtype(d["dtype"])
        v = (rng.random(d["shape"]) * 100).astype(dt) if dt.kind != "b" else rng.random(d["shape"]) < 0.5
        it.set_tensor(d["index"], v)
    ex = it._main.ex
    it.invoke()  # warm-up (and first upload)
    ex.profile = True
    times, copies = [], []
    for _ in range(repeats):
        ex.kernel_times_ns.clear()
        it.invoke()
        times.append(sum(ex.kernel_times_ns.values()) * 1e-9)
        if probe is not None:
            copies.append(probe.seconds(nbytes))
    it.close()
    return statistics.median(times), (statistics.median(copies) if copies else float("nan"))


def plot(rows: list, roof: float, device_name: str, path: Path) -> None:
    """GB/s against elements, one line per kernel, the copy roof dashed (matplotlib, the
    bench extra; skipped with a note when it is missing)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (bench extra): no plot")
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for key in sorted({(r["op"], r["src"], r["dst"]) for r in rows}):
        pts = [(r["n"], r["gbps"]) for r in rows if (r["op"], r["src"], r["dst"]) == key]
        ax.plot(*zip(*pts), alpha=0.35, lw=1)
    ax.axhline(roof, color="k", ls="--", label=f"float4 copy of 256 MiB: {roof:.0f} GB/s")
    adj = sorted({r["n"] for r in rows if "copy_gbps_adjacent" in r})
    if adj:  # the copy kernel timed next to each case, median over the cases of a size
        import statistics

        ax.plot(adj, [statistics.median(r["copy_gbps_adjacent"] for r in rows if r["n"] == n) for n in adj],
                color="k", lw=2, label="float4 copy of the same bytes (median)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("elements")
    ax.set_ylabel("GB/s (read + written)")
    ax.set_title(f"litecl CAST/ADD kernels on {device_name}")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="litecl device spec (default: auto)")
    ap.add_argument("--sizes", default="10,14,18,22,24", type=log2_sizes,
                    help="comma-separated log2 element counts (issue range: 10..26)")
    ap.add_argument("--pairs", default="all", help="'all' or comma-separated src:dst CAST pairs")
    ap.add_argument("--repeats", type=positive_int, default=7, help="profiled invokes per case (default 7)")
    ap.add_argument("--launch", action="append", default=[], metavar="ROW.FIELD=INT",
                    help="override a LAUNCH constant (ops/tiling.py) for this run, e.g. gpu.half_bits=0")
    ap.add_argument("--replot", type=Path, metavar="JSON",
                    help="only draw roofline.png under --out from a roofline.json written earlier")
    ap.add_argument("--out", default="bench_out", type=Path)
    args = ap.parse_args(argv)
    if args.replot:  # a roofline.json from another machine (the device tool's $OUT)
        import json

        data = json.loads(args.replot.read_text())
        plot(data["rows"], data["copy_gbps"], data["device"], args.out / "roofline.png")
        return 0
    for opt in args.launch:  # e.g. gpu.half_bits=0: try another LAUNCH row in this process
        from dataclasses import replace

        from litecl.ops import tiling

        key, _, val = opt.partition("=")
        row, _, name = key.partition(".")
        old = getattr(tiling.LAUNCH[row], name)
        tiling.LAUNCH[row] = replace(tiling.LAUNCH[row], **{name: type(old)(int(val))})
    dev = litecl.open_device(args.device)
    roof = copy_bandwidth(dev)
    probe = CopyProbe(dev)
    sizes = [1 << s for s in args.sizes]
    names = [d.name for d in CAST_TYPES]
    if args.pairs == "all":
        pairs = [(s, d) for s in names for d in names if s != d]
    else:
        pairs = [tuple(p.split(":")) for p in args.pairs.split(",")]
        bad = [":".join(p) for p in pairs if len(p) != 2 or not set(p) <= set(names) or p[0] == p[1]]
        if bad:
            ap.error(f"bad --pairs {', '.join(bad)}: expected src:dst of {', '.join(names)}")
    cases = [("CAST", s, d) for s, d in pairs] + [("ADD", t, t) for t in ("float32", "int32", "int64")]
    rows = []
    for op, s, d in progress(cases, desc=f"roofline on {dev.caps.name}"):
        for n in sizes:
            if op == "CAST":
                m = cast_model(s, d, [n])
                nbytes = n * (np.dtype(s).itemsize + np.dtype(d).itemsize)
            else:
                m = add_model(s, [n], [n])
                nbytes = 3 * n * np.dtype(s).itemsize
            sec, copy_sec = kernel_seconds(m, args.device, args.repeats, probe, nbytes)
            rows.append({"op": op, "src": s, "dst": d, "n": n, "seconds": sec,
                         "gbps": nbytes / sec / 1e9 if sec else float("nan"),
                         "roof_pct": 100 * nbytes / sec / 1e9 / roof if sec else float("nan"),
                         "copy_gbps_adjacent": nbytes / copy_sec / 1e9,
                         "adjacent_pct": 100 * copy_sec / sec if sec else float("nan")})
    big = max(sizes)
    from litecl.ops.tiling import launch_config

    md = [f"Device: {dev.caps.platform}: {dev.caps.name}; {launch_config(dev.caps)}; float4 copy roof {roof:.1f} GB/s "
          f"(256 MiB, at start). 'adjacent': a float4 copy of the same bytes timed after each "
          f"invoke (medians of {args.repeats}), which cancels the machine's drift.\n",
          f"| op | src -> dst | GB/s at 2^{big.bit_length() - 1} | % of copy roof | "
          "adjacent copy GB/s | % of adjacent copy |", "|---|---|---|---|---|---|"]
    for r in rows:
        if r["n"] == big:
            md.append(f"| {r['op']} | {r['src']} -> {r['dst']} | {r['gbps']:.1f} | {r['roof_pct']:.0f}% | "
                      f"{r['copy_gbps_adjacent']:.1f} | {r['adjacent_pct']:.0f}% |")
    below = [r for r in rows if r["n"] == big and r["adjacent_pct"] < 80]
    md.append(f"\n{sum(r['n'] == big for r in rows) - len(below)} of {sum(r['n'] == big for r in rows)} "
              f"kernels at >= 80% of the adjacent copy at 2^{big.bit_length() - 1}.")
    write_outputs(args.out, "roofline", {"device": dev.caps.name, "copy_gbps": roof, "rows": rows},
                  "\n".join(md) + "\n")
    plot(rows, roof, dev.caps.name, args.out / "roofline.png")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
