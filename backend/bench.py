"""Benchmarks in the shape of TFLite's ``benchmark_model``: init time, warm-up and timed
runs (count/first/curr/min/max/avg/std in microseconds), and a per-launch table with the
event-profiled kernel times of litecl.Delegate's partitions.

One run is what a user does per inference: set every input, invoke, read every output;
the invoke is timed apart (``run.invoke_ns``), so benchmark_model's "Inference" is the
invoke alone and the API's copies (set_tensor, get_tensor) are reported beside it: with
them in, a model of large outputs measured litecl.Interpreter's threaded get_tensor, not
the delegate (bench said 0.79x where the invoke alone was ~5x: a fresh user's report).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["RunStats", "time_runs", "time_alternating", "make_run", "InvokeClock", "benchmark_interpreter",
           "launch_profile", "format_stats"]


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
    set inputs (keyed by tensor index), invoke, read outputs. ``run.invoke_ns``: the ns
    of each call's ``interp.invoke()``."""
    outs = [d["index"] for d in interp.get_output_details()]
    ns: list = []
    clock = time.perf_counter_ns

    def run():
        for idx, v in inputs.items():
            interp.set_tensor(idx, v)
        t = clock()
        interp.invoke()
        ns.append(clock() - t)
        for o in outs:
            interp.get_tensor(o)

    run.invoke_ns = ns
    return run


class InvokeClock:
    """A LiteRT interpreter wrapper (the pybind object a signature runner calls) whose
    ``Invoke`` is timed into ``ns``; everything else passes through. A signature runner's
    call sets, invokes and reads in one: bench times its invoke with this in place."""

    __slots__ = ("_wrapper", "ns")

    def __init__(self, wrapper, ns: list):
        self._wrapper, self.ns = wrapper, ns

    def __getattr__(self, name):
        return getattr(self._wrapper, name)

    def Invoke(self, *a):  # noqa: N802 (LiteRT's name)
        t = time.perf_counter_ns()
        try:
            return self._wrapper.Invoke(*a)
        finally:
            self.ns.append(time.perf_counter_ns() - t)


def invoke_stats(run, first: int = 0) -> dict:
    """RunStats.summary of ``run.invoke_ns[first:]`` in microseconds."""
    return RunStats([v / 1e3 for v in run.invoke_ns[first:]]).summary()


def benchmark_interpreter(interp, inputs: dict, *, warmup_runs=1, warmup_min_secs=0.5,
                          num_runs=50, min_secs=1.0, max_secs=150.0, run=None) -> dict:
    """Warm-up then timed runs of ``run`` (default: make_run(interp, inputs)); returns
    {"warmup": summary, "runs": summary}."""
    run = run or make_run(interp, inputs)
    warm = time_runs(run, min_runs=warmup_runs, min_secs=warmup_min_secs, max_secs=max_secs)
    timed = time_runs(run, min_runs=num_runs, min_secs=min_secs, max_secs=max_secs)
    return {"warmup": warm.summary(), "runs": timed.summary()}


def launch_profile(delegate, run, runs: int = 10, subgraphs=None,
                   inference_ms: float | None = None) -> list[dict]:
    """One row per launch of the delegate's partitions (in subgraph, partition and launch
    order; ``subgraphs``: only those), with its event-profiled kernel time averaged over
    ``runs`` calls of ``run()`` with ``delegate.profile`` on (each kernel is waited for,
    so these are not the pipelined timings). A folded launch (constant inputs) runs once
    per plan, not per invoke: its row reads 0.

    Row keys: node (the op, or the ops of a fused kernel joined by "+"), nodes (model
    node indices), subgraph, partition, placement ("opencl"), what, folded, avg_ms
    (milliseconds: the sum over a run, a WHILE body's launches counted each time),
    runs (profiled runs that launched it), per_run (launches a run, averaged), pct, cdf. ``inference_ms``:
    the average inference time; what the rows do not cover (LiteRT's own nodes, copies,
    launches, Python) becomes a last row, and [%] is of the whole inference.
    """
    from .export import delegated_partitions  # noqa: PLC0415

    acc: dict = {}
    delegate.profile = True
    try:
        for _ in range(runs):
            delegate.profile_log.clear()
            run()
            # every partition invoke of the run, summed per launch: a WHILE body's partition
            # runs once per iteration (kernel_times_ns keeps its latest only: a fresh
            # user's 100-iteration loop read 0.13% of the inference, not ~all of it)
            per: dict = {}
            for e in delegate.profile_log:
                for kind, _, _, nodes, _, _, start, end in e["commands"]:
                    if kind == "kernel" and end:
                        t, n = per.get((e["ctx"], tuple(nodes)), (0, 0))
                        per[(e["ctx"], tuple(nodes))] = (t + end - start, n + 1)
            for k, v in per.items():
                acc.setdefault(k, []).append(v)
    finally:
        delegate.profile = False
    rows = []
    for si, part in delegated_partitions(delegate, subgraphs):
        ops = {n.index: n.op for n in part.nodes}
        for ln in part.plan.launches:
            got = acc.get((part.ctx_addr, tuple(ln.nodes)), [])
            times = [t for t, _ in got]
            rows.append({"node": "+".join(ops[i] for i in ln.nodes), "nodes": list(ln.nodes),
                         "subgraph": si, "partition": part.number, "placement": "opencl",
                         "what": ln.what + _streaming_note(ln), "folded": ln.folded,
                         "avg_ms": float(np.mean(times)) / 1e6 if times else 0.0, "runs": len(times),
                         "per_run": float(np.mean([n for _, n in got])) if got else 0.0})
    total = sum(r["avg_ms"] for r in rows)
    if inference_ms is not None and inference_ms > total:
        rows.append({"node": "(other)", "nodes": [], "subgraph": None, "partition": None,
                     "placement": "litert", "folded": False, "runs": runs,
                     "what": "LiteRT's own nodes, copies, launches, Python (inference avg minus the rows above)",
                     "avg_ms": inference_ms - total})
        total = inference_ms
    total = total or 1.0
    cdf = 0.0
    for r in rows:
        r["pct"] = 100.0 * r["avg_ms"] / total
        cdf += r["pct"]
        r["cdf"] = cdf
    return rows


def _streaming_note(ln) -> str:
    """", streaming stores" for a launch whose kernel has them, unless its description says
    so already (lowering's single-node ones do; fused ones do not)."""
    if "__builtin_nontemporal_store" not in ln.source or "streaming stores" in ln.what:
        return ""
    return ", streaming stores"
