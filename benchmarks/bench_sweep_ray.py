"""``litecl sweep --ray`` against the local pool on one machine (issue 43): the wall time of
one zoo swept (``--force``) by the local pool and by local Ray clusters of the same number
of job slots, and the per-task overhead Ray adds, measured two ways: (1) from those sweeps,
wall time outside the jobs' own ``seconds`` per job, at one slot; (2) with an empty job
through each executor's own path (sweep._pool's fork, and sweep_ray._task as a Ray task).

    python benchmarks/bench_sweep_ray.py [MODELS ...] [--device SPEC ...] [--repeat N] [--json OUT]

Starts and stops its own clusters (``ray stop --force`` at the end: it stops every Ray
cluster of this machine). Medians of --repeat runs; the machine's load average is printed
with them, as other work on it changes every number here.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RAY = Path(sys.executable).parent / "ray"
PORT = 6395


#: RAY_worker_niceness of the clusters started here (None: Ray's default, +15 over the raylet's)
NICENESS = [None]


def ray_cli(*args) -> None:
    nice = {} if NICENESS[0] is None else {"RAY_worker_niceness": str(NICENESS[0])}
    subprocess.run(["nice", "-n", "10", str(RAY), *map(str, args)], check=True, capture_output=True,
                   env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **nice})


def cluster(nodes: list[tuple[int, list]]) -> None:
    """A fresh local cluster: one node per (CPUs, device specs offered); 4 units of each
    device, so that a node's CPUs bound its jobs at once, as --jobs bounds the local pool's."""
    from litecl.sweep_ray import resource_of  # noqa: PLC0415

    subprocess.run([str(RAY), "stop", "--force"], capture_output=True)
    for k, (cpus, specs) in enumerate(nodes):
        where = ["--head", "--port", PORT, "--include-dashboard=false"] if k == 0 else ["--address", f"127.0.0.1:{PORT}"]
        ray_cli("start", *where, "--num-cpus", cpus, "--object-store-memory", 300_000_000, "--disable-usage-stats",
                "--resources", json.dumps({resource_of(s): 4 for s in specs}))


def sweep(models, devices, extra) -> dict:
    """One ``litecl sweep --force`` into a fresh folder: wall seconds, jobs run, their seconds summed."""
    from litecl.sweep import read_results  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as out:
        argv = [sys.executable, "-m", "litecl.cli", "sweep", *models, *[x for d in devices for x in ("--device", d)],
                "--out", out, "--force", *extra]
        t = time.monotonic()
        r = subprocess.run(["nice", "-n", "10", *argv], capture_output=True, text=True, cwd=ROOT)
        wall = time.monotonic() - t
        rows = [x for x in read_results(out) if x["seconds"] > 0]  # the jobs that ran (not refused at once)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        return {"wall_s": wall, "jobs": len(rows), "job_s": sum(x["seconds"] for x in rows)}


def empty_job(job: dict) -> dict:
    return {"status": "exact", "reason": ""}


def micro(n: int, slots: int) -> dict:
    """Seconds per empty job: sweep._pool (fork, wait) and sweep_ray._task as a Ray task, ``slots`` at once."""
    import ray  # noqa: PLC0415

    from litecl import sweep, sweep_ray  # noqa: PLC0415

    jobs = [{"n": f"j{k}", "device": "pocl"} for k in range(n)]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.monotonic()
        sweep._pool(jobs, empty_job, slots, 60.0, Path(tmp), lambda *_: None)
        local = (time.monotonic() - t) / n
    ray.init(address=f"127.0.0.1:{PORT}", logging_level="ERROR", log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(sweep_ray._task)
        ray.get([task.remote(empty_job, j, None, 60.0) for j in jobs[:4]])  # workers started and warm
        t, refs = time.monotonic(), []
        for j in jobs:
            if len(refs) >= slots:
                _, refs = ray.wait(refs, num_returns=1)
            refs.append(task.remote(empty_job, j, None, 60.0))
        ray.get(refs)
        remote = (time.monotonic() - t) / n
    finally:
        ray.shutdown()
    return {"local_ms": local * 1e3, "ray_ms": remote * 1e3}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="*", default=[str(ROOT.parent / "shared" / "models"), "/work/real_models"])
    p.add_argument("--device", action="append", default=None)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--json", type=Path)
    p.add_argument("--worker-niceness", type=int, help="RAY_worker_niceness of the nodes (Ray's default: 15, "
                   "added to the raylet's: the jobs then run at a lower priority than the local pool's)")
    a = p.parse_args()
    NICENESS[0] = a.worker_niceness
    devices = a.device or ["pocl", "intel"]
    ray = ["--ray", f"127.0.0.1:{PORT}"]
    setups = [  # (name, job slots, cluster nodes or None for the local pool, sweep flags)
        ("local pool, --jobs 1", 1, None, ["--jobs", "1"]),
        ("Ray, 1 node x 1 CPU", 1, [(1, devices)], ray),
        ("local pool, --jobs 2", 2, None, ["--jobs", "2"]),
        ("Ray, 1 node x 2 CPUs", 2, [(2, devices)], ray),
        ("Ray, 2 nodes x 1 CPU, a device each", 2, [(1, devices[:1]), (1, devices[1:])], ray),
    ]
    results = []
    try:
        for name, slots, nodes, flags in setups:
            if nodes:
                cluster(nodes)
            runs = [sweep(a.models, devices, flags) for _ in range(a.repeat)]
            wall = statistics.median(r["wall_s"] for r in runs)
            jobs, job_s = runs[0]["jobs"], statistics.median(r["job_s"] for r in runs)
            res = {"setup": name, "worker_niceness": NICENESS[0] if nodes else None, "walls_s": [round(r["wall_s"], 2) for r in runs], "jobs": jobs,
                   "jobs_per_s": jobs / wall, "job_s_sum": job_s,
                   "outside_jobs_ms_per_job": (wall - job_s / slots) / jobs * 1e3,
                   "load": os.getloadavg()[0]}
            results.append(res)
            print(json.dumps(res), flush=True)
        cluster([(1, devices)])
        m1 = micro(100, 1)
        cluster([(2, devices)])
        m2 = micro(100, 2)
        results.append({"setup": "empty job, 1 slot", **m1, "load": os.getloadavg()[0]})
        results.append({"setup": "empty job, 2 slots", **m2, "load": os.getloadavg()[0]})
        print(json.dumps(results[-2:]), flush=True)
    finally:
        subprocess.run([str(RAY), "stop", "--force"], capture_output=True)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
