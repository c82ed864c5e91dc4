"""Benchmarks in the shape of TFLite's ``benchmark_model``: init time, warm-up and timed
runs (count/first/curr/min/max/avg/std in microseconds), and a per-node table with
event-profiled kernel times for OpenCL nodes and wall times for fallback segments.

One run is what a user does per inference: set every input, invoke, read every output.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["RunStats", "time_runs", "time_alternating", "benchmark_interpreter", "node_profile",
           "format_stats"]


@dataclass
class RunStats:
    """Per-run wall times in microseconds."""

    times_us: list = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.times_us)

    def summary(self) -> dict:
        t = self.times_us
        if not t:
            return {"count": 0}
        return {"count": len(t), "first": t[0], "curr": t[-1], "min": min(t), "max": max(t),
                "avg": statistics.fmean(t), "median": statistics.median(t),
                "std": statistics.pstdev(t) if len(t) > 1 else 0.0}


def format_stats(s: dict) -> str:
    """benchmark_model's line: count=.. first=.. curr=.. min=.. max=.. avg=.. std=.."""
    if not s.get("count"):
        return "count=0"
    return (f"count={s['count']} first={s['first']:.0f} curr={s['curr']:.0f} min={s['min']:.0f} "
            f"max={s['max']:.0f} avg={s['avg']:.0f} std={s['std']:.0f}")


def time_runs(run, *, min_runs: int, min_secs: float, max_secs: float) -> RunStats:
    """Call ``run()`` at least min_runs times and for at least min_secs seconds, stopping
    after max_secs."""
    st = RunStats()
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter_ns()
        run()
        st.times_us.append((time.perf_counter_ns() - t0) / 1e3)
        el = time.perf_counter() - t_start
        if (st.count >= min_runs and el >= min_secs) or el >= max_secs:
            return st


def time_alternating(runs: dict, *, min_runs: int, min_secs: float, max_secs: float) -> dict:
    """Call each closure of ``runs`` (name -> run) in turn, one run each per round, until
    every one ran ``min_runs`` times and ``min_secs`` passed (or ``max_secs``): the peer
    measured in the same process and in alternating rounds, so drift of the machine hits
    both alike. Returns name -> RunStats."""
    out = {k: RunStats() for k in runs}
    t_start = time.perf_counter()
    while True:
        for k, run in runs.items():
            t0 = time.perf_counter_ns()
            run()
            out[k].times_us.append((time.perf_counter_ns() - t0) / 1e3)
        el = time.perf_counter() - t_start
        if (min(s.count for s in out.values()) >= min_runs and el >= min_secs) or el >= max_secs:
            return out


def make_run(interp, inputs: dict):
    """A closure doing one inference on a LiteRT-API interpreter (litecl's or LiteRT's):
    set inputs (keyed by tensor index), invoke, read outputs."""
    outs = [d["index"] for d in interp.get_output_details()]

    def run():
        for idx, v in inputs.items():
            interp.set_tensor(idx, v)
        interp.invoke()
        for o in outs:
            interp.get_tensor(o)

    return run


def benchmark_interpreter(interp, inputs: dict, *, warmup_runs=1, warmup_min_secs=0.5,
                          num_runs=50, min_secs=1.0, max_secs=150.0, run=None) -> dict:
    """Warm-up then timed runs of ``run`` (default: make_run(interp, inputs)); returns
    {"warmup": summary, "runs": summary}."""
    run = run or make_run(interp, inputs)
    warm = time_runs(run, min_runs=warmup_runs, min_secs=warmup_min_secs, max_secs=max_secs)
    timed = time_runs(run, min_runs=num_runs, min_secs=min_secs, max_secs=max_secs)
    return {"warmup": warm.summary(), "runs": timed.summary()}


def _fused_note(g) -> str:
    return ", streaming stores" if "__builtin_nontemporal_store" in g.source else ""


def node_profile(interp, inputs: dict, runs: int = 10, run=None, ex=None,
                 inference_ms: float | None = None) -> list[dict]:
    """Per node (OpenCL kernels: event-profiled device time) and per fallback segment
    (wall time of the LiteRT sub-interpreter's invoke), averaged over ``runs`` runs with
    profiling on (each kernel is waited for, so these are not the pipelined timings).
    ``run``/``ex``: another inference closure and the executor it runs (a signature's).
    ``inference_ms``: the average inference time; the host time the rows do not cover
    becomes an "(other)" row, and [%] is of the whole inference."""
    ex = ex or interp._main.ex
    run = run or make_run(interp, inputs)
    acc: dict = {}
    ex.profile = True
    try:
        for _ in range(runs):
            ex.kernel_times_ns.clear()
            ex.segment_times_ns.clear()
            run()
            for k, v in ex.kernel_times_ns.items():
                acc.setdefault(("k", k), []).append(v)
            for k, v in ex.segment_times_ns.items():
                acc.setdefault(("f", k), []).append(v)
    finally:
        ex.profile = False
    rows = []
    sg = ex.sg
    for kind, step in ex._steps:
        if kind == "k":
            times = acc.get(("k", step))
            n = sg.nodes[step]
            spec = ex._kernels[step].spec if step in ex._kernels else None
            what = spec.what if spec else ""
            lead = ex._member.get(step)
            if lead is not None:  # one fused kernel for the group, timed under its first node
                g = ex._groups[lead]
                if step == lead:
                    from .executor import _ranges  # noqa: PLC0415

                    what = (f"fused kernel of nodes {_ranges(g.nodes)} "
                            f"({', '.join(sg.nodes[i].op for i in g.nodes)}){_fused_note(g)}")
                else:
                    what = f"in the fused kernel of node {lead}"
            rows.append({"node": f"{n.op}", "index": step, "placement": "opencl",
                         "what": what, "folded": step in ex.folded, "fused_into": lead,
                         "avg_ms": (np.mean(times) / 1e6) if times else 0.0})
        else:
            times = acc.get(("f", step.nodes[0]))
            ops = [sg.nodes[i].op for i in step.nodes]
            rows.append({"node": "FALLBACK", "index": step.nodes[0], "placement": "fallback",
                         "what": f"{len(ops)} node(s): " + ", ".join(ops[:6]) + (" ..." if len(ops) > 6 else ""),
                         "folded": False, "avg_ms": (np.mean(times) / 1e6) if times else 0.0})
    total = sum(r["avg_ms"] for r in rows) or 1.0
    if inference_ms is not None and inference_ms > total:  # the rest is host time: its own row
        rows.append({"node": "(other)", "index": -1, "placement": "host", "folded": False,
                     "what": "transfers, launches, Python overhead (inference avg minus the rows above)",
                     "avg_ms": inference_ms - total})
        total = inference_ms
    cdf = 0.0
    for r in rows:
        r["pct"] = 100.0 * r["avg_ms"] / total
        cdf += r["pct"]
        r["cdf"] = cdf
    return rows
