"""Roofline of litecl's lowered kernels: GB/s (bytes read + written) of every CAST pair and
of ADD, from OpenCL profiling events, against the device's own float4 copy bandwidth.

    python benchmarks/bench_roofline.py --device intel --sizes 10,14,18,22,24 --out bench_out

Writes roofline.json, roofline.md and roofline.png under --out. roofline.md has, per
size, how many kernels reach >= 80% of a float4 copy of the same bytes timed next to them,
then every kernel at the largest size. From a roofline.json written earlier, --replot
redraws roofline.png and --remd rewrites roofline.md (no device needed):

    python benchmarks/bench_roofline.py --remd results/pocl/roofline.json --out bench_out
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path

import numpy as np

from common import CopyProbe, cast_pairs, copy_bandwidth, log2_sizes, positive_int, progress, run_script, write_outputs

import litecl  # noqa: E402  (after common.py set sys.path)
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
    d = it.delegate
    it.invoke()  # warm-up (and first upload)
    d.profile = True  # each delegated launch event-profiled
    times, copies = [], []
    for _ in range(repeats):
        d.kernel_times_ns.clear()
        it.invoke()
        times.append(sum(d.kernel_times_ns.values()) * 1e-9)
        if probe is not None:
            copies.append(probe.seconds(nbytes))
    d.profile = False
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


#: the fields of a roofline.json row that --replot and --remd read
ROW_KEYS = frozenset({"op", "src", "dst", "n", "gbps", "roof_pct"})


def _median(values) -> float:
    """Median of the finite values (nan when none: a kernel timed at 0 s has nan ratios)."""
    vals = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return statistics.median(vals) if vals else float("nan")


def markdown(rows: list, roof: float, device: str, repeats: int | None = None) -> str:
    """roofline.md from the rows of roofline.json: a header naming ``device`` (platform,
    name and LAUNCH row when measured; the JSON's device name on --remd), a per-size
    summary (kernels at >= 80% of the adjacent copy at every size) and the per-kernel table
    at the largest size."""
    medians = f"medians of {repeats}" if repeats else "medians of the run's --repeats invokes"
    md = [f"Device: {device}; float4 copy roof {roof:.1f} GB/s (256 MiB, at start). 'adjacent': a float4 "
          f"copy of the same bytes timed after each invoke ({medians}), which cancels the machine's drift.\n"]
    if not rows:
        return "\n".join(md + ["No kernels measured."]) + "\n"
    by_size: dict[int, list] = {}
    for r in rows:
        by_size.setdefault(r["n"], []).append(r)
    md += ["Per size, over every kernel measured:\n",
           "| size (elements) | kernels | >= 80% of adjacent copy | median % of adjacent copy | "
           "median adjacent copy GB/s |", "|---|---|---|---|---|"]
    for n, rs in sorted(by_size.items()):
        ok = sum(r.get("adjacent_pct", float("nan")) >= 80 for r in rs)
        pct = _median(r.get("adjacent_pct") for r in rs)
        copy = _median(r.get("copy_gbps_adjacent") for r in rs)
        md.append(f"| 2^{n.bit_length() - 1} | {len(rs)} | {ok} | {pct:.0f}% | {copy:.1f} |")
    big = max(by_size)
    k = big.bit_length() - 1
    md += ["", f"| op | src -> dst | GB/s at 2^{k} | % of copy roof | adjacent copy GB/s | % of adjacent copy |",
           "|---|---|---|---|---|---|"]
    for r in by_size[big]:
        md.append(f"| {r['op']} | {r['src']} -> {r['dst']} | {r['gbps']:.1f} | {r['roof_pct']:.0f}% | "
                  f"{r.get('copy_gbps_adjacent', float('nan')):.1f} | {r.get('adjacent_pct', float('nan')):.0f}% |")
    ok = sum(r.get("adjacent_pct", float("nan")) >= 80 for r in by_size[big])
    md.append(f"\n{ok} of {len(by_size[big])} kernels at >= 80% of the adjacent copy at 2^{k}.")
    return "\n".join(md) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="litecl device spec (default: auto)")
    ap.add_argument("--sizes", default="10,14,18,22,24", type=log2_sizes,
                    help="comma-separated log2 element counts, each 0..30 (default 10,14,18,22,24)")
    ap.add_argument("--pairs", default="all", type=cast_pairs,
                    help="'all' or comma-separated src:dst CAST pairs; ADD of float32, int32 and int64 "
                         "always runs (default all)")
    ap.add_argument("--repeats", type=positive_int, default=7, help="profiled invokes per case (default 7)")
    ap.add_argument("--launch", action="append", default=[], metavar="ROW.FIELD=INT",
                    help="override a LAUNCH constant (ops/tiling.py) for this run, e.g. gpu.half_bits=0 "
                         "(repeatable)")
    ap.add_argument("--replot", type=Path, metavar="JSON",
                    help="only draw roofline.png under --out from a roofline.json written earlier")
    ap.add_argument("--remd", type=Path, metavar="JSON",
                    help="only rewrite roofline.md under --out from a roofline.json written earlier")
    ap.add_argument("--out", default="bench_out", type=Path, help="output folder (default bench_out)")
    args = ap.parse_args(argv)
    if args.replot or args.remd:  # a roofline.json from another machine (the device tool's $OUT)
        for opt, path in (("--replot", args.replot), ("--remd", args.remd)):
            if path is None:
                continue
            try:
                data = json.loads(path.read_text())
                rows, roof, device = data["rows"], float(data["copy_gbps"]), str(data["device"])
                if not isinstance(rows, list) or not all(
                        isinstance(r, dict) and ROW_KEYS <= r.keys() and isinstance(r["n"], int) for r in rows):
                    raise ValueError(f"every row needs {', '.join(sorted(ROW_KEYS))}")
            except (OSError, ValueError, KeyError, TypeError) as e:
                ap.error(f"{opt} {path}: not a readable roofline.json ({type(e).__name__}: {e})")
            if opt == "--replot":
                plot(rows, roof, device, args.out / "roofline.png")
            else:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / "roofline.md").write_text(markdown(rows, roof, device))
                print(f"wrote {args.out / 'roofline.md'}")
        return 0
    pairs = args.pairs
    for opt in args.launch:  # e.g. gpu.half_bits=0: try another LAUNCH row in this process
        from dataclasses import fields, replace

        from litecl.ops import tiling

        key, eq, val = opt.partition("=")
        row, _, name = key.partition(".")
        if not eq or row not in tiling.LAUNCH or name not in {f.name for f in fields(tiling.LaunchConfig)}:
            ap.error(f"bad --launch {opt!r}: expected ROW.FIELD=INT, ROW one of {', '.join(tiling.LAUNCH)}, "
                     f"FIELD one of {', '.join(f.name for f in fields(tiling.LaunchConfig))}")
        try:
            ival = int(val)
        except ValueError:
            ap.error(f"bad --launch {opt!r}: {val!r} is not an integer")
        old = getattr(tiling.LAUNCH[row], name)
        tiling.LAUNCH[row] = replace(tiling.LAUNCH[row], **{name: type(old)(ival)})
    dev = litecl.open_device(args.device)
    roof = copy_bandwidth(dev)
    probe = CopyProbe(dev)
    sizes = [1 << s for s in args.sizes]
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
    from litecl.ops.tiling import launch_config

    md = markdown(rows, roof, f"{dev.caps.platform}: {dev.caps.name}; {launch_config(dev.caps)}", args.repeats)
    write_outputs(args.out, "roofline", {"device": dev.caps.name, "copy_gbps": roof, "rows": rows}, md)
    plot(rows, roof, dev.caps.name, args.out / "roofline.png")
    print(md, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_script(main))
