"""litecl's native delegate (``litecl export`` + ``sh build.sh``) inside stock LiteRT, in a
Python process where litecl and pyopencl cannot be imported, against LiteRT alone.

Usage::

    python benchmarks/bench_native.py --device pocl [--target gpu|cpu] [--placement all|auto]
        DIR [DIR ...] [--secs 0.5] [--out benchmarks/results/pocl] [--tag NAME] [--check-only]

For every ``*.tflite`` under the folders (duplicates by content skipped; models LiteRT
alone cannot run at their declared shapes skipped): ``litecl export`` for the device,
``sh build.sh``, then a child process (``sys.modules['litecl'] = None``,
``sys.modules['pyopencl'] = None`` before anything; only ai_edge_litert and numpy) that
loads the .so with ``load_delegate(so, delegate_options.json)`` into an Interpreter with
BUILTIN_WITHOUT_DEFAULT_DELEGATES and measures:

- bit-exact: every output against LiteRT alone on the same seeded inputs
  (litecl.compare.random_inputs; NaN equals NaN of the same sign);
- its "Replacing N out of M node(s) ... P partitions" lines against the Python
  delegate's (litecl.Delegate.graph_info() for the same model, device, placement), or
  short of them by the nodes it names on "left to LiteRT: its input shapes are known only
  at invoke" lines (the documented decline);
- construct + allocate_tensors: median of 3 after a first one, with and without it;
  the limit is 1.2x LiteRT's plus 2 ms per distinct program;
- invoke (set inputs + invoke + read outputs), alternating with LiteRT alone for
  ``--secs``: (with - alone) / partitions in round-trip floors (one 16 KiB write + copy
  kernel + read with one wait, median of 300, measured here with pyopencl on the same
  device: benchmarks/bench_delegate.py round_trip_us), (with - alone) being the median
  of the back-to-back pairs' differences (at least 20 pairs); and the same less the kernels'
  event-profiled time (``kernel_us``, the Python delegate's launches, which are the
  native one's): what launches, waits and copies cost beyond the kernels.

Writes ``native_<tag>.json`` and ``native_<tag>.md`` under ``--out``. Exit status 0 when
every model is bit-exact and every Replacing line agrees (or differs by that decline only).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

#: the child: litecl and pyopencl blocked before anything is imported
CHILD = r'''
import sys
sys.modules["litecl"] = None
sys.modules["pyopencl"] = None
import json, time
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate

so, model, opts, inputs, secs = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), sys.argv[4], float(sys.argv[5])
ins = dict(np.load(inputs))
R = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
d = load_delegate(so, opts)

def make(dl):
    t = time.perf_counter()
    it = Interpreter(model_path=model, experimental_delegates=dl, experimental_op_resolver_type=R)
    it.allocate_tensors()
    return time.perf_counter() - t, it

def runner(it):
    det, outs = it.get_input_details(), it.get_output_details()
    def once():
        for x in det:
            it.set_tensor(x["index"], ins[x["name"]])
        it.invoke()
        return [it.get_tensor(o["index"]) for o in outs]
    return once

def same(a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.tobytes() == b.tobytes():
        return True
    if a.dtype.kind in "fc":
        fa, fb = a.view(a.real.dtype) if a.dtype.kind == "c" else a, b.view(b.real.dtype) if b.dtype.kind == "c" else b
        nan = np.isnan(fa) & np.isnan(fb) & (np.signbit(fa) == np.signbit(fb))
        return bool(np.all(nan | (fa.view(np.uint8).reshape(fa.shape + (-1,)) == fb.view(np.uint8).reshape(fb.shape + (-1,))).all(-1)))
    return False

sys.stderr.write("@@begin\n"); sys.stderr.flush()
t_ref, ref = make([])
t_mine, mine = make([d])
sys.stderr.write("@@end\n"); sys.stderr.flush()
want, got = runner(ref)(), runner(mine)()
res = {"bit_exact": len(want) == len(got) and all(same(x, y) for x, y in zip(want, got)),
       "init_first_litert_ms": t_ref * 1e3, "init_first_native_ms": t_mine * 1e3}
if secs > 0:
    ta_c, tb_c = [], []
    for _ in range(4):
        ta_c.append(make([])[0]); tb_c.append(make([d])[0])
    res["init_litert_ms"] = float(np.median(ta_c[1:])) * 1e3
    res["init_native_ms"] = float(np.median(tb_c[1:])) * 1e3
    fa, fb = runner(ref), runner(mine)
    for _ in range(3):
        fa(); fb()
    ta, tb = [], []
    end = time.perf_counter() + secs
    while (time.perf_counter() < end or len(ta) < 20) and len(ta) < 5000:
        t = time.perf_counter(); fa(); ta.append(time.perf_counter() - t)
        t = time.perf_counter(); fb(); tb.append(time.perf_counter() - t)
    res["litert_us"], res["native_us"] = float(np.median(ta)) * 1e6, float(np.median(tb)) * 1e6
    # per pair (the two runs back to back): a drift in the machine's speed cancels
    res["diff_us"] = float(np.median(np.array(tb) - np.array(ta))) * 1e6
    res["pairs"] = len(ta)
print("@@" + json.dumps(res))
'''

#: litecl_delegate.c's line for a node it leaves to LiteRT by design: a compiled-in broadcast
#: whose shapes the Python delegate learns only at invoke, in a graph with invoke-time shapes
DECLINED = re.compile(r"INFO: litecl: node \d+ left to LiteRT: its input shapes are known only at invoke")
REPLACING = re.compile(r"Replacing (\d+) out of (\d+) node\(s\) with delegate \(litecl OpenCL\) node, "
                       r"yielding (\d+) partitions")


def run_child(so: Path, model: Path, options: Path, inputs: Path, secs: float, timeout: float = 300) -> dict:
    """Run CHILD; returns its result dict plus "replacing" [(N, M, P)] from the delegate's
    construction and "stderr" (the last lines), or {"error": ...}."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LITECL_QUIET")}
    # PYTHONPATH without the folders that hold litecl (the H200 installs LiteRT on
    # PYTHONPATH too); CHILD blocks litecl and pyopencl imports anyway
    keep = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if e and not (Path(e) / "litecl").exists() and not (Path(e) / "backend").is_dir()]
    if keep:
        env["PYTHONPATH"] = os.pathsep.join(keep)
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, str(so), str(model), str(options), str(inputs), str(secs)],
                           capture_output=True, text=True, timeout=timeout, env=env, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    err = r.stderr
    seg = err.split("@@begin", 1)[-1].split("@@end", 1)[0]
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("@@")), None)
    if r.returncode or line is None:
        tail = [ln for ln in err.splitlines() if ln.strip()][-1:] or [f"exit {r.returncode}"]
        return {"error": tail[0][:200]}
    res = json.loads(line[2:])
    res["replacing"] = [tuple(int(x) for x in m.groups()) for m in REPLACING.finditer(seg)]
    res["declined_invoke_shapes"] = len(DECLINED.findall(seg))
    return res


def python_replacing(model: Path, device, placement: str) -> list:
    """(N, M, P) of each subgraph where the Python delegate claims nodes."""
    import litecl  # noqa: PLC0415

    it = litecl.Interpreter(model_path=str(model), device=device, placement=placement, quiet=True)
    try:
        return [(g["claimed"], g["nodes"], g["partitions"]) for g in it.delegate.graph_info() if g["claimed"]]
    finally:
        it.close()


def kernel_us(model: Path, device, placement: str, inputs: dict, target=None, runs: int = 10) -> float:
    """Event-profiled kernel time per invoke (us) of the Python delegate's launches for
    ``model`` (the kernels the native delegate runs: the same sources and geometry),
    each kernel waited for (litecl.bench.launch_profile; folded launches count 0)."""
    import litecl  # noqa: PLC0415
    from litecl.bench import launch_profile  # noqa: PLC0415
    from litecl.export import target_device  # noqa: PLC0415

    dev = target_device(litecl.open_device(device), target)
    it = litecl.Interpreter(model_path=str(model), device=dev, placement=placement, quiet=True)
    try:
        it.allocate_tensors()
        for x in it.get_input_details():
            it.set_tensor(x["index"], inputs[x["name"]])
        it.invoke()
        rows = launch_profile(it.delegate, it.invoke, runs=runs)
        return sum(r["avg_ms"] for r in rows) * 1e3
    finally:
        it.close()


def models(dirs) -> list[Path]:
    """The .tflite files under ``dirs`` LiteRT alone runs (one per content)."""
    from common import litert_runs, tflite_files  # noqa: PLC0415

    return [f for f in tflite_files(dirs) if litert_runs(f.read_bytes())]


def export_and_build(model: Path, out: Path, device, target, placement) -> dict:
    """litecl export + sh build.sh; returns the manifest."""
    from litecl.export import export  # noqa: PLC0415

    m = export(str(model), str(out), device=device, target=target, placement=placement)
    r = subprocess.run(["sh", str(out / "build.sh")], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"build.sh failed: {(r.stderr or r.stdout).strip().splitlines()[-1][:200]}")
    return m


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--device", default=None)
    ap.add_argument("--target", choices=("gpu", "cpu"))
    ap.add_argument("--placement", default="all", choices=("all", "auto"))
    ap.add_argument("--secs", type=float, default=0.5)
    ap.add_argument("--check-only", action="store_true", help="bit-exactness and Replacing lines only")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pocl")
    ap.add_argument("--tag", default=None, help="file name part (default: device and target)")
    a = ap.parse_args(argv)
    import litecl  # noqa: PLC0415
    from litecl.compare import random_inputs  # noqa: PLC0415
    from litecl.compare import make_interpreter  # noqa: PLC0415

    dev = litecl.open_device(a.device)
    tag = a.tag or re.sub(r"[^A-Za-z0-9]+", "_", f"{a.device or 'auto'}_{a.target or 'native'}_{a.placement}").strip("_")
    floor = None
    if not a.check_only:
        from bench_delegate import round_trip_us  # noqa: PLC0415

        floor = float(np.median([round_trip_us(dev) for _ in range(3)]))  # it varies with the load
    print(f"device {dev.caps.platform}: {dev.caps.name}; target {a.target or 'its own'}; placement {a.placement}; "
          + (f"round-trip floor {floor:.1f} us" if floor else "check only"))
    rows = []
    work = Path(tempfile.mkdtemp(prefix="litecl-native-"))
    for k, f in enumerate(models([p.resolve() for p in a.dirs])):
        row = {"model": f.name}
        try:
            d = work / f"m{k}"
            m = export_and_build(f, d, a.device, a.target, a.placement)
            nat = m["native"]
            row["programs"], row["binaries"] = nat["programs"], nat["binaries"]
            ref = make_interpreter(f.read_bytes())
            ins = random_inputs(ref.get_input_details(), seed=0)
            np.savez(d / "inputs.npz", **ins)
            res = run_child(d / "liblitecl_delegate.so", f, d / "delegate_options.json", d / "inputs.npz",
                            0 if a.check_only else a.secs)
            row.update(res)
            row["python_replacing"] = python_replacing(f, a.device, a.placement)
            row["replacing_agrees"] = [tuple(x) for x in row.get("replacing", [])] == row["python_replacing"]
            # the documented decline (README "Using litecl in your app"): every node the
            # Python delegate claims is claimed here or named on a "left to LiteRT" line
            row["replacing_explained"] = row["replacing_agrees"] or (
                "replacing" in row and row.get("declined_invoke_shapes", 0) > 0 and
                sum(x[0] for x in row["replacing"]) + row["declined_invoke_shapes"]
                == sum(x[0] for x in row["python_replacing"]))
            # partitions the native delegate runs (its Replacing lines; the Python delegate's
            # where they agree)
            P = sum(x[2] for x in row.get("replacing", []))
            row["partitions"] = P
            if "native_us" in row:
                row["per_partition_floors"] = row["diff_us"] / P / floor if P else None
                # what the kernels themselves take (event-profiled): the rest of the
                # difference is launches, waits and copies, less LiteRT's time for the
                # nodes the delegate took over
                row["kernel_us"] = kernel_us(f, a.device, a.placement, ins, a.target) if P else 0.0
                row["per_partition_floors_without_kernels"] = (
                    (row["diff_us"] - row["kernel_us"]) / P / floor if P else None)
                row["init_limit_ms"] = 1.2 * row["init_litert_ms"] + 2.0 * row["programs"]
                row["init_ok"] = row["init_native_ms"] <= row["init_limit_ms"]
                # the first construction in the process loads every program (binary, else source)
                row["init_first_limit_ms"] = 1.2 * row["init_first_litert_ms"] + 2.0 * row["programs"]
                row["init_first_ok"] = row["init_first_native_ms"] <= row["init_first_limit_ms"]
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        rows.append(row)
        ok = row.get("bit_exact") and row.get("replacing_explained")
        extra = "" if "native_us" not in row else (
            f" LiteRT {row['litert_us']:.1f} us, native {row['native_us']:.1f} us, P {row['partitions']}, "
            f"{'' if row['per_partition_floors'] is None else format(row['per_partition_floors'], '.2f') + ' floors/P, '}"
            f"kernels {row['kernel_us']:.1f} us"
            f"{'' if row['per_partition_floors'] is None else ' (' + format(row['per_partition_floors_without_kernels'], '.2f') + ' floors/P without), '}"
            f"init {row['init_native_ms']:.2f} / {row['init_litert_ms']:.2f} ms (limit {row['init_limit_ms']:.2f})")
        print(f"{f.name[:44]:44s} {'bit-exact' if row.get('bit_exact') else 'MISMATCH'} "
              f"{'replacing-agrees' if row.get('replacing_agrees') else 'replacing-differs-by-documented-decline (' + str(row['declined_invoke_shapes']) + ' nodes with invoke-time shapes)' if row.get('replacing_explained') else 'REPLACING DIFFERS'}"
              f"{' ERROR ' + row['error'] if 'error' in row else ''}{extra}", flush=True)
        if not ok and "error" not in row:
            print(f"    native {row.get('replacing')} python {row.get('python_replacing')}")
    good = [r for r in rows if r.get("bit_exact") and r.get("replacing_explained")]
    summary = {"device": f"{dev.caps.platform}: {dev.caps.name}", "target": a.target, "placement": a.placement,
               "round_trip_us": floor, "models": len(rows), "bit_exact_and_agreeing": len(good),
               "bit_exact": sum(bool(r.get("bit_exact")) for r in rows),
               "replacing_agrees": sum(bool(r.get("replacing_agrees")) for r in rows),
               "replacing_documented_decline": [r["model"] for r in rows
                                                if r.get("replacing_explained") and not r.get("replacing_agrees")]}
    pers = [r["per_partition_floors"] for r in rows if r.get("per_partition_floors") is not None]
    if pers:
        summary["per_partition_floors_median"] = float(np.median(pers))
        summary["per_partition_floors_max"] = float(max(pers))
        wo = [r["per_partition_floors_without_kernels"] for r in rows
              if r.get("per_partition_floors_without_kernels") is not None]
        summary["per_partition_floors_without_kernels_median"] = float(np.median(wo))
        summary["per_partition_floors_without_kernels_max"] = float(max(wo))
        tot_l = sum(r["init_litert_ms"] for r in rows if "init_litert_ms" in r)
        tot_n = sum(r["init_native_ms"] for r in rows if "init_native_ms" in r)
        summary.update(init_litert_ms=tot_l, init_native_ms=tot_n,
                       init_models_within_limit=sum(bool(r.get("init_ok")) for r in rows),
                       init_first_models_within_limit=sum(bool(r.get("init_first_ok")) for r in rows))
    print(json.dumps(summary))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"native_{tag}.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    md = [f"# Native delegate: {summary['device']} (target {a.target or 'own'}, placement {a.placement})", "",
          f"{len(good)} of {len(rows)} models bit-exact with LiteRT alone and Replacing lines equal to the "
          f"Python delegate's ({summary['replacing_agrees']}) or short of it by the documented decline only "
          "(broadcast ADDs whose shapes the Python delegate learns only at invoke, in a graph with invoke-time "
          f"shapes: {', '.join(summary['replacing_documented_decline']) or 'none'}).", ""]
    if pers:
        md += [f"Round-trip floor {floor:.1f} us; (native - LiteRT) / partitions: median "
               f"{summary['per_partition_floors_median']:.2f}, max {summary['per_partition_floors_max']:.2f} floors; "
               "less the event-profiled kernel time: median "
               f"{summary['per_partition_floors_without_kernels_median']:.2f}, max "
               f"{summary['per_partition_floors_without_kernels_max']:.2f} floors. "
               f"Construct + allocate summed: native {summary['init_native_ms']:.1f} ms, LiteRT "
               f"{summary['init_litert_ms']:.1f} ms; {summary['init_models_within_limit']} of {len(rows)} models "
               "within 1.2x LiteRT + 2 ms per program.", "",
               "| model | bit-exact | Replacing agrees | P | LiteRT us | native us | floors/P | kernels us | "
               "floors/P less kernels | init native ms | init LiteRT ms | limit ms | first init native ms | "
               "first init LiteRT ms | first limit ms |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if "native_us" in r:
                fp = "" if r["per_partition_floors"] is None else f"{r['per_partition_floors']:.2f}"
                fw = ("" if r.get("per_partition_floors_without_kernels") is None
                      else f"{r['per_partition_floors_without_kernels']:.2f}")
                md.append(f"| {r['model']} | {r['bit_exact']} | {r['replacing_agrees']} | {r['partitions']} | "
                          f"{r['litert_us']:.1f} | {r['native_us']:.1f} | {fp} | {r['kernel_us']:.1f} | {fw} | "
                          f"{r['init_native_ms']:.2f} | {r['init_litert_ms']:.2f} | {r['init_limit_ms']:.2f} | "
                          f"{r['init_first_native_ms']:.2f} | {r['init_first_litert_ms']:.2f} | "
                          f"{r['init_first_limit_ms']:.2f} |")
            else:
                md.append(f"| {r['model']} | {r.get('bit_exact')} | {r.get('replacing_agrees')} | | | | | | | | | | | | "
                          f"{r.get('error', '')} |")
    (a.out / f"native_{tag}.md").write_text("\n".join(md) + "\n")
    return 0 if len(good) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
