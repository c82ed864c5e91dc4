"""litecl.Delegate's keep_order settings against each other and LiteRT alone, per model, in
one process: which order LiteRT runs, the live bytes each order predicts, and the invoke
time of each setting.

Usage::

    python benchmarks/bench_keep_order.py --device pocl [--secs 4] [--copies 2] [--all] DIR [DIR ...]
        [--json OUT.json]

Per model with litecl partitions (placement "all"): LiteRT alone and ``--copies``
litecl.Interpreters per setting (False, True, "auto"; separate copies because one
interpreter is steadily faster or slower than another of the same plan: four copies of
palm_detection_lite with keep_order=False, 27.9-30.0 ms in the same rounds, likely where
their memory landed), set inputs + invoke + read outputs in rounds of a random order, for ``--secs``
after 3 warm-up rounds. Reported per setting: the median over rounds of the copies' mean
time, its difference to LiteRT alone and (litecl - LiteRT) / partitions in round-trip
floors (bench_delegate.round_trip_us, measured once); and "paired": the median over
rounds of (setting - False) in the same round. Also per model: whether True and "auto"
kept the order (only where litecl's partitions stay the same), and the most per-invoke
bytes live at once in LiteRT's greedy order and in the model's order (order.py
live_peak, what "auto" compares). Without ``--all`` only models where True keeps the
order are timed (elsewhere the settings run the same plan).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import litecl  # noqa: E402
from litecl import order as _order  # noqa: E402
from litecl.compare import make_interpreter, random_inputs  # noqa: E402
from bench_delegate import _runner, models, round_trip_us  # noqa: E402

SETTINGS = (False, True, "auto")


def peaks(raw: bytes, device) -> tuple:
    """(greedy, kept) live_peak of subgraph 0 as Delegate(keep_order="auto") computed them
    at its Prepare, or None where it compared none (partitions not the same)."""
    got = []
    orig = _order.keep_order_pays

    def spy(wiring, mine, codes, nbytes, constant, greedy, kept):
        once = _order.computed_once(wiring, codes, constant)
        const = lambda t: constant(t) or t in once  # noqa: E731
        got.append(tuple(_order.live_peak(_order.execution_order(wiring, mine, *p), nbytes, const)
                         for p in (greedy, kept)))
        return orig(wiring, mine, codes, nbytes, constant, greedy, kept)
    _order.keep_order_pays = spy
    try:
        litecl.Interpreter(model_content=raw, device=device, keep_order="auto", quiet=True)
    finally:
        _order.keep_order_pays = orig
    return got[0] if got else None


def run(raw: bytes, device, secs: float, copies: int) -> dict:
    ref = make_interpreter(raw)
    ref.allocate_tensors()
    its = {s: [] for s in SETTINGS}
    for _ in range(copies):
        for s in SETTINGS:
            it = litecl.Interpreter(model_content=raw, device=device, placement="all", keep_order=s, quiet=True)
            it.allocate_tensors()
            its[s].append(it)
    kept = {s: any(g["kept_order"] for g in its[s][0].delegate.subgraph_records(id(its[s][0]))) for s in SETTINGS}
    P = sum(g["partitions"] for g in its[False][0].delegate.graph_info(id(its[False][0])))
    ins = random_inputs(ref.get_input_details(), seed=0)
    slots = [("litert", _runner(ref, ins))] + [(s, _runner(it, ins)) for s in SETTINGS for it in its[s]]
    for _ in range(3):
        for _, f in slots:
            f()
    ts = {k: [] for k, _ in slots}
    rng = np.random.default_rng(0)
    rounds, end = 0, time.perf_counter() + secs
    while time.perf_counter() < end or rounds < 10:
        one: dict = {}
        # a new order each round: a fixed cycle runs one copy after LiteRT alone every
        # round (PoCL's threads asleep), another always after a litecl copy
        for j in rng.permutation(len(slots)):
            name, f = slots[j]
            t = time.perf_counter()
            f()
            one.setdefault(name, []).append(time.perf_counter() - t)
        for name, v in one.items():
            ts[name].append(float(np.mean(v)) * 1e6)
        rounds += 1
    med = {str(k): float(np.median(v)) for k, v in ts.items()}
    paired = {str(s): float(np.median(np.subtract(ts[s], ts[False]))) for s in SETTINGS if s is not False}
    return {"partitions": P, "kept": {str(s): kept[s] for s in SETTINGS}, "median_us": med,
            "paired_vs_false_us": paired, "rounds": rounds}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--device", default=None, help="OpenCL device spec (default: LITECL_DEVICE or auto)")
    ap.add_argument("--secs", type=float, default=4.0, help="timed rounds per model, seconds (default 4)")
    ap.add_argument("--copies", type=int, default=2, help="interpreters per setting (default 2)")
    ap.add_argument("--all", action="store_true", help="also time models where no setting keeps the order")
    ap.add_argument("--json", type=Path, help="write the results there (default: none)")
    a = ap.parse_args(argv)
    dev = litecl.open_device(a.device)
    res = {"device": f"{dev.caps.platform}: {dev.caps.name}", "loadavg_start": os.getloadavg()[0]}
    floor = res["round_trip_us"] = round_trip_us(dev)
    print(f"device {res['device']}; round-trip floor {floor:.1f} us; load {res['loadavg_start']:.2f}")
    print(f"{'model':36s} {'P':>3s} {'live MB greedy->kept':>20s} {'kept T/auto':>11s} {'LiteRT us':>9s} "
          f"{'floors/P: F':>11s} {'T':>6s} {'auto':>6s} {'paired T':>9s} {'auto':>7s} {'load':>5s}")
    rows = []
    for name, raw in models(a.dirs):
        pk = peaks(raw, a.device)
        probe = litecl.Interpreter(model_content=raw, device=a.device, keep_order=True, quiet=True)
        recs = probe.delegate.subgraph_records(id(probe))
        if not any(g["partitions"] for g in recs) or not (a.all or any(g["kept_order"] for g in recs)):
            continue
        r = run(raw, a.device, a.secs, a.copies)
        r.update(model=name, live_bytes=pk, loadavg=os.getloadavg()[0])
        lit = r["median_us"]["litert"]
        r["floors_per_partition"] = {s: (r["median_us"][s] - lit) / r["partitions"] / floor
                                     for s in map(str, SETTINGS)}
        rows.append(r)
        f = r["floors_per_partition"]
        live = f"{pk[0] / 1e6:8.2f}->{pk[1] / 1e6:8.2f}" if pk else f"{'(not same)':>18s}"
        print(f"{name[:36]:36s} {r['partitions']:3d} {live:>20s} {str(r['kept']['True'])[0]}/{str(r['kept']['auto'])[0]:>9s} "
              f"{lit:9.1f} {f['False']:11.2f} {f['True']:6.2f} {f['auto']:6.2f} "
              f"{r['paired_vs_false_us']['True']:+9.1f} {r['paired_vs_false_us']['auto']:+7.1f} {r['loadavg']:5.2f}",
              flush=True)
    res["rows"] = rows
    res["loadavg_end"] = os.getloadavg()[0]
    if rows:
        for s in map(str, SETTINGS):
            res[f"median_floors_per_partition_{s}"] = float(np.median([r["floors_per_partition"][s] for r in rows]))
    print(f"load average (1 min) {res['loadavg_start']:.2f} at the start, {res['loadavg_end']:.2f} at the end")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
