"""litecl's native delegate (``litecl export`` + ``sh build.sh``) inside stock LiteRT, in a
Python process where litecl and pyopencl cannot be imported, against LiteRT alone.

Usage::

    python benchmarks/bench_native.py --device pocl [--target gpu|cpu] [--placement all|auto]
        DIR [DIR ...] [--secs 0.5] [--tol-floors 0.05] [--max-secs 10] [--out benchmarks/results/pocl]
        [--tag NAME] [--check-only]

For every ``*.tflite`` under the folders (duplicates by content skipped; models LiteRT
alone cannot run at their declared shapes skipped): ``litecl export`` for the device,
``sh build.sh``, then a child process (``sys.modules['litecl'] = None``,
``sys.modules['pyopencl'] = None`` before anything; only ai_edge_litert and numpy) that
loads the .so with ``load_delegate(so, exported_device.json)`` into an Interpreter with
BUILTIN_WITHOUT_DEFAULT_DELEGATES and measures:

- bit-exact: every output against LiteRT alone on the same seeded inputs
  (litecl.compare.random_inputs; NaN equals NaN of the same sign);
- its "Replacing N out of M node(s) ... P partitions" lines against the Python
  delegate's (litecl.Delegate.graph_info() for the same model, device, placement), or
  short of them by the nodes it names on "left to LiteRT: its input shapes are known only
  at invoke" lines (the documented decline);
- construct + allocate_tensors: median of 3 after a first one, with and without it;
  the limit is 1.2x LiteRT's plus 2 ms per distinct program;
- invoke (set inputs + invoke + read outputs), with and without the delegate:
  (with - alone) / partitions in round-trip floors (one 16 KiB write + copy kernel + read
  with one wait, median of 300, measured here with pyopencl on the same device:
  benchmarks/bench_delegate.py round_trip_us): the median over pairs of each pair's
  difference over the floor measured around it, each pair a block of two LiteRT-alone
  runs and a block of two runs with the delegate, in alternating order, the second run
  of each block timed (CHILD says why). The pairs run in chunks of CHUNK_S with the floor
  measured before and after each (on the shared 2-core VM it moves between ~25 and ~175
  us within seconds with the other load; with one floor for the whole run the same model
  read 1.3 to 3.5 floors/P in three runs), for ``--secs`` and 40 pairs at least, then
  until the 95% interval of that median is within -+``--tol-floors`` floors per partition
  or for ``--max-secs``. The interval covers one run's pairs; a run minutes later, at
  another load, can land outside it (pose_detection, four runs: 96-180 us, 1.6-2.8
  floors per partition): the table gives us/P beside floors/P. And the same less the
  kernels' event-profiled time
  (``kernel_us``, the Python delegate's launches, which are the native one's): what
  launches, waits and copies cost beyond the kernels. The 1-minute load average is
  recorded with each model.
- the cold floor beside it: the same round trip, each after COLD_GAP_US of compute on the
  enqueuing thread (cold_round_trip_us), measured before and after each model's pairs, and
  (with - alone) / partitions over it. A partition inside a model runs after LiteRT's own
  nodes have kept the runtime's worker threads idle for milliseconds, and waking them is
  most of a partition's cost on PoCL: its worker starts a kernel 37-77 us after the enqueue
  there (event-profiled inside pose_detection, 2-core VM under load 1.5-2) against a few us
  in a tight loop, and the floor's three commands take 140-190 us after 3 ms of compute
  against 55-76 us back to back (measured together). The native delegate's own work per
  partition is ~1 us before its one enqueue and ~1 us after the kernel completes; how it
  waits (clFinish, polling with or without sched_yield) moved it by less than the noise in a
  C harness of the same launches. floors/P against the hot floor stays the target's unit.
- ``--disable-delegate-clustering``: both interpreters built with LiteRT's
  experimental_disable_delegate_clustering (C++: InterpreterOptions::
  SetDisableDelegateClustering). By default ReplaceNodeSubsetsWithDelegateKernels
  partitions greedily: every LiteRT node that is ready runs before the next delegate node,
  so a graph's weight chains move to the front. In pose_detection the 38 DEQUANTIZEs of
  DENSIFY'd fp16 weights (arena tensors, computed every invoke) then run before the first
  ADD partition instead of just before their convolutions, and LiteRT's own nodes take
  ~1.3-1.5 ms more per invoke with no OpenCL at all (a test build computing the ADDs on the
  host: +1531 us, 95% 1423..1647, over LiteRT alone); with clustering disabled the native
  delegate's difference there fell from 2754 to 1499 us (measured together, bit-exact), but
  it also splits partitions whose nodes are not adjacent in the model (movenet 20 -> 24,
  BirdNET's MData 2 -> 5: 36 of 42 models agree with the Python delegate's Replacing lines).
  The native delegate's option keep_order keeps LiteRT's own nodes in the model's order
  where that leaves its partitions as they are (litecl_delegate.c keep_order_begin) and,
  under "auto" (the default, as the Python delegate's), only where LiteRT's greedy order
  would make more per-invoke bytes live at once (backend/order.py keep_order_pays):
  pose_detection 2732 -> 1310 us per invoke with the order kept. (An earlier note here,
  pose_landmark_full 1004 -> 1860 with keep_order=1, compared two runs of the same plan:
  keeping its order would split partitions, 20 -> 28, so keep_order leaves it as it is.)
  This benchmark runs the defaults.

Writes ``native_<tag>.json`` and ``native_<tag>.md`` under ``--out``. Exit status 0 when
every model is bit-exact and every Replacing line agrees (or differs by that decline only).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import select
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
import json, os, time
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate

so, model, opts, inputs, secs = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), sys.argv[4], float(sys.argv[5])
no_clustering = len(sys.argv) > 6 and sys.argv[6] == "1"
ins = dict(np.load(inputs))
R = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
d = load_delegate(so, opts)

def make(dl):
    t = time.perf_counter()
    it = Interpreter(model_path=model, experimental_delegates=dl, experimental_op_resolver_type=R,
                     experimental_disable_delegate_clustering=no_clustering)
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
    def timed(f):
        t = time.perf_counter(); f(); return time.perf_counter() - t

    # Chunks of pairs, each on the parent's "go SECONDS" (it measures the round-trip floor
    # between chunks, so each pair has a floor from the same few seconds), until "stop".
    # A pair: a block of two runs of LiteRT alone and a block of two with the delegate, in
    # alternating order (AABB BBAA ...), only a block's second run timed. Each timed run
    # follows a run of its own interpreter, as in an app that runs one: the first run after
    # a switch costs either side more (~70-150 us on PoCL, frontend_sl_v1: measured), and
    # with one order always (ABAB) that cost landed on the two sides unevenly. A pair's
    # timed runs are two runs apart: a drift in the machine's speed cancels in its difference.
    n = 0
    while True:
        cmd = sys.stdin.readline().split()
        if len(cmd) != 2 or cmd[0] != "go":
            break
        ta, tb = [], []
        end = time.perf_counter() + float(cmd[1])
        while time.perf_counter() < end or len(ta) < 2:
            if n % 2:
                fb(); b = timed(fb); fa(); a = timed(fa)
            else:
                fa(); a = timed(fa); fb(); b = timed(fb)
            ta.append(a); tb.append(b); n += 1
        print("@@chunk " + json.dumps([ta, tb]), flush=True)
    res["loadavg_1min"] = os.getloadavg()[0]  # this process's runs count in it too
print("@@" + json.dumps(res))
'''

#: litecl_delegate.c's line for a node it leaves to LiteRT by design: a compiled-in broadcast
#: whose shapes the Python delegate learns only at invoke, in a graph with invoke-time shapes
DECLINED = re.compile(r"INFO: litecl: node \d+ left to LiteRT: its input shapes are known only at invoke")
REPLACING = re.compile(r"Replacing (\d+) out of (\d+) node\(s\) with delegate \(litecl OpenCL\) node, "
                       r"yielding (\d+) partitions")


#: the pairs' chunk length (s): the floor is measured before and after each
CHUNK_S = 0.5
MIN_PAIRS = 40
#: compute before each cold round trip (us): LiteRT runs 0.5-3.6 ms of its own nodes between
#: pose_detection's partitions and 9 ms before frontend_sl_v1's; PoCL's round trip grows from
#: ~1x at 0 to 2-3x the back-to-back one at 1-3 ms (2-core VM, measured)
COLD_GAP_US = 3000
COLD_RUNS = 30


def cold_round_trip_us(device, gap_us: float = COLD_GAP_US, runs: int = COLD_RUNS) -> float:
    """The round-trip floor's commands (benchmarks/bench_delegate.py round_trip_us), each
    run after ``gap_us`` of compute on this thread, as a partition inside a model runs
    after LiteRT's nodes: the median over ``runs`` (us)."""
    from bench_delegate import round_trip_us  # noqa: PLC0415

    return round_trip_us(device, gap_us, runs)


def median_ci(x) -> tuple[float, float]:
    """A distribution-free 95% interval of the median of ``x``: the order statistics of
    ranks n/2 - 0.98 sqrt(n) and 1 + n/2 + 0.98 sqrt(n) (binomial, normal approximation)."""
    x, n = np.sort(np.asarray(x, float)), len(x)
    h = 0.98 * n ** 0.5
    return float(x[max(0, round(n / 2 - h) - 1)]), float(x[min(n - 1, round(n / 2 + h))])


def _line(p, buf: list, deadline: float):
    """The child's next stdout line (None at its end); TimeoutError past ``deadline``."""
    fd = p.stdout.fileno()
    while b"\n" not in buf[0]:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        data = os.read(fd, 1 << 16)
        if not data:
            return None
        buf[0] += data
    line, buf[0] = buf[0].split(b"\n", 1)
    return line.decode()


def _time_pairs(p, buf: list, deadline: float, secs: float, max_secs: float, floor, partitions: int,
                tol_floors: float) -> dict:
    """Drive CHILD's timing: chunks of CHUNK_S, ``floor()`` (a round trip, us) before the
    first and after each; for ``secs`` and MIN_PAIRS at least, then on until the 95%
    interval of the median of (with - alone) / (partitions x the pair's floor) is within
    -+``tol_floors`` or for ``max_secs`` (the stop looks at the interval's width, never
    at where it lies)."""
    ta, tb, fl = [], [], []
    before = floor() if floor else None
    start = time.monotonic()
    while True:
        p.stdin.write(f"go {CHUNK_S}\n".encode())
        p.stdin.flush()
        line = _line(p, buf, deadline)
        while line is not None and not line.startswith("@@chunk "):
            line = _line(p, buf, deadline)
        if line is None:
            break
        a, b = json.loads(line[len("@@chunk "):])
        after = floor() if floor else None
        ta += a
        tb += b
        fl += [None if floor is None else (before + after) / 2] * len(a)
        before = after
        el, n = time.monotonic() - start, len(ta)
        if el < secs or n < MIN_PAIRS:
            continue
        if el >= max_secs or n >= 5000 or not floor or tol_floors <= 0:
            break
        lo, hi = median_ci((np.array(tb) - np.array(ta)) * 1e6 / np.array(fl) / max(1, partitions))
        if (hi - lo) / 2 <= tol_floors:
            break
    p.stdin.write(b"stop\n")
    p.stdin.close()
    if not ta:
        return {}
    ta, tb = np.array(ta) * 1e6, np.array(tb) * 1e6
    diff = tb - ta
    res = {"litert_us": float(np.median(ta)), "native_us": float(np.median(tb)), "diff_us": float(np.median(diff)),
           "diff_ci_us": list(median_ci(diff)), "pairs": len(ta), "timed_s": time.monotonic() - start,
           # the median difference of the pairs run in each order (an order effect if far apart)
           "diff_litert_first_us": float(np.median(diff[0::2])),
           "diff_native_first_us": float(np.median(diff[1::2]))}
    if floor:
        fl = np.array(fl)
        res.update(floor_us=float(np.median(fl)), diff_floors=float(np.median(diff / fl)),
                   diff_floors_ci=list(median_ci(diff / fl)))
    return res


def run_child(so: Path, model: Path, options: Path, inputs: Path, secs: float, timeout: float = 300, *,
              floor=None, partitions: int = 1, tol_floors: float = 0.0, max_secs: float | None = None,
              no_clustering: bool = False) -> dict:
    """Run CHILD; returns its result dict plus "replacing" [(N, M, P)] from the delegate's
    construction, or {"error": ...}. With ``secs`` > 0 it times invoke pairs
    (``_time_pairs``: ``floor``, ``partitions``, ``tol_floors``, ``max_secs``, default
    ``secs``): "diff_us" and its interval, and with ``floor`` "diff_floors" (the median
    of each pair's difference over its floor) and its interval, "floor_us".
    ``no_clustering``: both interpreters with experimental_disable_delegate_clustering."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LITECL_QUIET")}
    # PYTHONPATH without the folders that hold litecl (the H200 installs LiteRT on
    # PYTHONPATH too); CHILD blocks litecl and pyopencl imports anyway
    keep = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if e and not (Path(e) / "litecl").exists() and not (Path(e) / "backend").is_dir()]
    if keep:
        env["PYTHONPATH"] = os.pathsep.join(keep)
    argv = [sys.executable, "-c", CHILD, str(so), str(model), str(options), str(inputs), str(secs),
            "1" if no_clustering else "0"]
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf, env=env,
                             cwd=tempfile.gettempdir())
        buf, lines, timing = [b""], [], {}
        try:
            if secs > 0:
                try:
                    timing = _time_pairs(p, buf, deadline, secs, secs if max_secs is None else max_secs, floor,
                                         partitions, tol_floors)
                except BrokenPipeError:  # the child ended early: its error is read below
                    pass
            while (ln := _line(p, buf, deadline)) is not None:
                lines.append(ln)
            p.wait(max(1.0, deadline - time.monotonic()))
        except (TimeoutError, subprocess.TimeoutExpired):
            p.kill()
            p.wait()
            return {"error": f"timed out after {timeout} s"}
        errf.seek(0)
        err = errf.read().decode(errors="replace")
    seg = err.split("@@begin", 1)[-1].split("@@end", 1)[0]
    line = next((ln for ln in lines if ln.startswith("@@") and not ln.startswith("@@chunk")), None)
    if p.returncode or line is None:
        tail = [ln for ln in err.splitlines() if ln.strip()][-1:] or [f"exit {p.returncode}"]
        return {"error": tail[0][:200]}
    res = {**json.loads(line[2:]), **timing}
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


@contextlib.contextmanager
def _invoked(model: Path, device, placement: str, inputs: dict, target=None):
    """litecl.Interpreter of ``model`` on ``device`` as ``target`` (the Python delegate
    whose plans the native delegate runs), its inputs set and one invoke done; closed
    after."""
    import litecl  # noqa: PLC0415
    from litecl.export import target_device  # noqa: PLC0415

    dev = target_device(litecl.open_device(device), target)
    it = litecl.Interpreter(model_path=str(model), device=dev, placement=placement, quiet=True)
    try:
        it.allocate_tensors()
        for x in it.get_input_details():
            it.set_tensor(x["index"], inputs[x["name"]])
        it.invoke()
        yield it
    finally:
        it.close()


def kernel_us(model: Path, device, placement: str, inputs: dict, target=None, runs: int = 10) -> float:
    """Event-profiled kernel time per invoke (us) of the Python delegate's launches for
    ``model`` (the kernels the native delegate runs: the same sources and geometry),
    each kernel waited for (litecl.bench.launch_profile; folded launches count 0)."""
    from litecl.bench import launch_profile  # noqa: PLC0415

    with _invoked(model, device, placement, inputs, target) as it:
        rows = launch_profile(it.delegate, it.invoke, runs=runs)
        return sum(r["avg_ms"] for r in rows) * 1e3


def partition_bytes(model: Path, device, placement: str, inputs: dict, target=None) -> list:
    """(bytes in, bytes out) of each partition the Python delegate makes of ``model`` (the
    native delegate's partitions): the inputs that are not constants and the outputs LiteRT
    reads, what a copy device moves across its link every invoke."""
    def nbytes(p, t):
        v = p.sg.tensors[t]
        return int(np.prod(p.plan.shapes.get(t, v.shape), dtype=np.int64)) * v.dtype.itemsize

    with _invoked(model, device, placement, inputs, target) as it:
        return [(sum(nbytes(p, t) for t in p.inputs if not p.sg.tensors[t].is_constant),
                 sum(nbytes(p, t) for t in p.outputs)) for p in it.delegate.partitions(id(it)) if p.plan]


def staged_round_trip_us(device, nin: int, nout: int, runs: int = 60) -> float:
    """The round-trip floor with a partition's own bytes on a copy device, the native
    delegate's way (litecl_delegate.c: staging through pinned memory): ``nin`` bytes copied
    into a mapped ALLOC_HOST_PTR buffer and written, bench_delegate's 16 KiB copy kernel,
    ``nout`` bytes read into pinned memory and copied out, one wait; the median (us)."""
    import pyopencl as cl  # noqa: PLC0415

    q, ctx = device.queue, device.context
    src = "__kernel void c(__global const float4* a, __global float4* b) { b[get_global_id(0)] = a[get_global_id(0)]; }"
    k = cl.Kernel(cl.Program(ctx, src).build(), "c")
    mf = cl.mem_flags
    a, b = (cl.Buffer(ctx, mf.READ_WRITE, max(n, 16384)) for n in (nin, nout))
    k.set_args(a, b)
    host_in = np.ones(max(nin, 1), np.uint8)
    host_out = np.empty(max(nout, 1), np.uint8)
    pins = [cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, max(n, 1)) for n in (nin, nout)]
    pin_in, pin_out = (cl.enqueue_map_buffer(q, pb, cl.map_flags.READ | cl.map_flags.WRITE, 0, (max(n, 1),), np.uint8)[0]
                       for pb, n in zip(pins, (nin, nout)))

    def once():
        pin_in[:] = host_in
        cl.enqueue_copy(q, a, pin_in[:nin] if nin else pin_in[:1], is_blocking=False)
        cl.enqueue_nd_range_kernel(q, k, (1024,), None)
        cl.enqueue_copy(q, pin_out[:nout] if nout else pin_out[:1], b, is_blocking=True)
        host_out[:] = pin_out
    for _ in range(5):
        once()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        once()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e6


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


def _ci(ci, digits: int = 2) -> str:
    return "" if not ci else f"{ci[0]:.{digits}f}..{ci[1]:.{digits}f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--device", default=None)
    ap.add_argument("--target", choices=("gpu", "cpu"))
    ap.add_argument("--placement", default="all", choices=("all", "auto"))
    ap.add_argument("--secs", type=float, default=0.5, help="least time of the invoke pairs per model")
    ap.add_argument("--tol-floors", type=float, default=0.05,
                    help="pairs run on until the 95%% interval of (with - alone) is within -+this many floors "
                         "per partition ...")
    ap.add_argument("--max-secs", type=float, default=10.0, help="... or for this long (per model)")
    ap.add_argument("--check-only", action="store_true", help="bit-exactness and Replacing lines only")
    ap.add_argument("--disable-delegate-clustering", action="store_true",
                    help="both interpreters with LiteRT's experimental_disable_delegate_clustering (the "
                         "execution order of the model's own nodes kept: see the docstring)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "pocl")
    ap.add_argument("--tag", default=None, help="file name part (default: device and target)")
    a = ap.parse_args(argv)
    import litecl  # noqa: PLC0415
    from litecl.compare import random_inputs  # noqa: PLC0415
    from litecl.compare import make_interpreter  # noqa: PLC0415

    dev = litecl.open_device(a.device)
    tag = a.tag or re.sub(r"[^A-Za-z0-9]+", "_", f"{a.device or 'auto'}_{a.target or 'native'}_{a.placement}").strip("_")
    floor = floor_us = None
    if not a.check_only:
        from bench_delegate import round_trip_us  # noqa: PLC0415

        def floor_us() -> float:  # it moves with the load (x2.5 within seconds here): measured
            return round_trip_us(dev)  # between each model's chunks of pairs too

        floor = float(np.median([floor_us() for _ in range(3)]))
    copies = not litecl.Delegate(dev, quiet=True).memory.in_place if not a.check_only else False
    _staged: dict = {}

    def staged(nin: int, nout: int) -> float:
        if (nin, nout) not in _staged:
            _staged[nin, nout] = staged_round_trip_us(dev, nin, nout)
        return _staged[nin, nout]
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
            # time the pairs until the median difference is known to -+tol_floors floors per
            # partition (the Python delegate's partitions, which the native ones match)
            p_exp = max(1, sum(s["partitions"] for s in nat["subgraphs"]))
            cold = [] if a.check_only else [cold_round_trip_us(dev)]
            res = run_child(d / "liblitecl_delegate.so", f, d / "exported_device.json", d / "inputs.npz",
                            0 if a.check_only else a.secs, timeout=max(300.0, 3 * a.max_secs + 120),
                            floor=floor_us, partitions=p_exp, tol_floors=a.tol_floors,
                            max_secs=max(a.secs, a.max_secs), no_clustering=a.disable_delegate_clustering)
            row.update(res)
            if cold:
                cold.append(cold_round_trip_us(dev))
                row["cold_floor_us"] = float(np.mean(cold))
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
                # each pair's difference over the floor measured around its chunk: the
                # median of those, over P
                fl = row["floor_us"]
                row["per_partition_floors"] = row["diff_floors"] / P if P else None
                row["per_partition_floors_ci"] = [v / P for v in row["diff_floors_ci"]] if P else None
                # the same in us (the floor moves more than the overhead on a shared VM)
                row["per_partition_us"] = row["diff_us"] / P if P else None
                row["per_partition_us_ci"] = [v / P for v in row["diff_ci_us"]] if P else None
                # the same over the cold floor (COLD_GAP_US of compute before each round trip)
                row["per_partition_cold_floors"] = row["diff_us"] / P / row["cold_floor_us"] if P else None
                # what the kernels themselves take (event-profiled): the rest of the
                # difference is launches, waits and copies, less LiteRT's time for the
                # nodes the delegate took over
                row["kernel_us"] = kernel_us(f, a.device, a.placement, ins, a.target) if P else 0.0
                row["per_partition_floors_without_kernels"] = (
                    row["per_partition_floors"] - row["kernel_us"] / P / fl if P else None)
                if copies and P:
                    # on a copy device each partition moves its own bytes: the floor with
                    # them (staged_round_trip_us per partition, summed) is what the
                    # kernels and transfers alone would cost
                    sizes = partition_bytes(f, a.device, a.placement, ins, a.target)
                    row["partition_bytes"] = sizes
                    row["transfer_floor_us"] = float(sum(staged(nin, nout) for nin, nout in sizes))
                    row["transfer_floors"] = row["diff_us"] / row["transfer_floor_us"]
                    row["transfer_floors_without_kernels"] = (row["diff_us"] - row["kernel_us"]) / row["transfer_floor_us"]
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
            f"floor {row['floor_us']:.1f} us, "
            f"{'' if row['per_partition_us'] is None else format(row['per_partition_us'], '.1f') + ' us/P (95% ' + _ci(row['per_partition_us_ci'], 1) + '), '}"
            f"{'' if row['per_partition_floors'] is None else format(row['per_partition_floors'], '.2f') + ' floors/P'}"
            f"{'' if row['per_partition_floors'] is None else ' (95% ' + _ci(row['per_partition_floors_ci']) + ')'}"
            f", cold floor {row['cold_floor_us']:.1f} us"
            f"{'' if row['per_partition_cold_floors'] is None else ' (' + format(row['per_partition_cold_floors'], '.2f') + ' cold floors/P)'}"
            f", {row['pairs']} pairs, "
            f"kernels {row['kernel_us']:.1f} us"
            f"{'' if row['per_partition_floors'] is None else ' (' + format(row['per_partition_floors_without_kernels'], '.2f') + ' floors/P without), '}"
            f"init {row['init_native_ms']:.2f} / {row['init_litert_ms']:.2f} ms (limit {row['init_limit_ms']:.2f})"
            + (f", transfer floor {row['transfer_floor_us']:.0f} us: {row['transfer_floors']:.2f}x "
               f"({row['transfer_floors_without_kernels']:.2f}x less kernels)" if "transfer_floor_us" in row else ""))
        print(f"{f.name[:44]:44s} {'bit-exact' if row.get('bit_exact') else 'MISMATCH'} "
              f"{'replacing-agrees' if row.get('replacing_agrees') else 'replacing-differs-by-documented-decline (' + str(row['declined_invoke_shapes']) + ' nodes with invoke-time shapes)' if row.get('replacing_explained') else 'REPLACING DIFFERS'}"
              f"{' ERROR ' + row['error'] if 'error' in row else ''}{extra}", flush=True)
        if not ok and "error" not in row:
            print(f"    native {row.get('replacing')} python {row.get('python_replacing')}")
    good = [r for r in rows if r.get("bit_exact") and r.get("replacing_explained")]
    summary = {"device": f"{dev.caps.platform}: {dev.caps.name}", "target": a.target, "placement": a.placement,
               "delegate_clustering": not a.disable_delegate_clustering,
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
        fls = [r["floor_us"] for r in rows if "floor_us" in r]
        summary.update(floor_us_median=float(np.median(fls)), floor_us_min=float(min(fls)),
                       floor_us_max=float(max(fls)))
        pus = [r["per_partition_us"] for r in rows if r.get("per_partition_us") is not None]
        summary.update(per_partition_us_median=float(np.median(pus)), per_partition_us_max=float(max(pus)))
        cps = [r["per_partition_cold_floors"] for r in rows if r.get("per_partition_cold_floors") is not None]
        cfl = [r["cold_floor_us"] for r in rows if "cold_floor_us" in r]
        summary.update(per_partition_cold_floors_median=float(np.median(cps)),
                       per_partition_cold_floors_max=float(max(cps)), cold_floor_us_median=float(np.median(cfl)),
                       cold_gap_us=COLD_GAP_US)
        tot_l = sum(r["init_litert_ms"] for r in rows if "init_litert_ms" in r)
        tot_n = sum(r["init_native_ms"] for r in rows if "init_native_ms" in r)
        summary.update(init_litert_ms=tot_l, init_native_ms=tot_n,
                       init_models_within_limit=sum(bool(r.get("init_ok")) for r in rows),
                       init_first_models_within_limit=sum(bool(r.get("init_first_ok")) for r in rows))
    tfs = [r for r in rows if "transfer_floors" in r]
    if tfs:
        summary.update(transfer_floors_median=float(np.median([r["transfer_floors"] for r in tfs])),
                       transfer_floors_max=float(max(r["transfer_floors"] for r in tfs)))
    print(json.dumps(summary))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / f"native_{tag}.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
    md = [f"# Native delegate: {summary['device']} (target {a.target or 'own'}, placement {a.placement}"
          f"{', delegate clustering off' if a.disable_delegate_clustering else ''})", "",
          f"{len(good)} of {len(rows)} models bit-exact with LiteRT alone and Replacing lines equal to the "
          f"Python delegate's ({summary['replacing_agrees']}) or short of it by the documented decline only "
          "(broadcast ADDs whose shapes the Python delegate learns only at invoke, in a graph with invoke-time "
          f"shapes: {', '.join(summary['replacing_documented_decline']) or 'none'}).", ""]
    if pers:
        md += [f"Round-trip floor {floor:.1f} us at the start; per model (the median of those measured between "
               f"its chunks of pairs) {summary['floor_us_min']:.1f} to {summary['floor_us_max']:.1f} us, median "
               f"{summary['floor_us_median']:.1f}; (native - LiteRT) / partitions: median "
               f"{summary['per_partition_us_median']:.1f} us, max {summary['per_partition_us_max']:.1f} us; in floors: median "
               f"{summary['per_partition_floors_median']:.2f}, max {summary['per_partition_floors_max']:.2f} floors; "
               "less the event-profiled kernel time: median "
               f"{summary['per_partition_floors_without_kernels_median']:.2f}, max "
               f"{summary['per_partition_floors_without_kernels_max']:.2f} floors. "
               f"Cold floor (the same round trip after {COLD_GAP_US / 1e3:g} ms of compute on the enqueuing thread, "
               f"as a partition runs after LiteRT's nodes): median {summary['cold_floor_us_median']:.1f} us; "
               f"(native - LiteRT) / partitions over it: median {summary['per_partition_cold_floors_median']:.2f}, "
               f"max {summary['per_partition_cold_floors_max']:.2f} cold floors. "
               f"Construct + allocate summed: native {summary['init_native_ms']:.1f} ms, LiteRT "
               f"{summary['init_litert_ms']:.1f} ms; {summary['init_models_within_limit']} of {len(rows)} models "
               "within 1.2x LiteRT + 2 ms per program.", "",
               "floors/P: the median over pairs (a block of two LiteRT-alone runs and one of two runs with the "
               "delegate, in alternating order, each block's second run timed) of their difference over the "
               f"floor measured around their {CHUNK_S:g} s chunk, over P; its 95% interval (order statistics "
               "of the pairs) beside it; pairs ran "
               f"for {a.secs:g} s and 40 pairs at least, then until that interval was within "
               f"-+{a.tol_floors:g} floors or {max(a.secs, a.max_secs):g} s. On a shared machine both the "
               "overhead and the floor move with the other load (load: the 1-minute load average, this "
               "benchmark's own runs included).", "",
               "| model | bit-exact | Replacing agrees | P | LiteRT us | native us | us/P | 95% interval | floor us | "
               "floors/P | 95% interval | cold floor us | cold floors/P | pairs | load | kernels us | floors/P less kernels | init native ms | "
               "init LiteRT ms | limit ms | first init native ms | first init LiteRT ms | first limit ms |",
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if "native_us" in r:
                fp = "" if r["per_partition_floors"] is None else f"{r['per_partition_floors']:.2f}"
                fw = ("" if r.get("per_partition_floors_without_kernels") is None
                      else f"{r['per_partition_floors_without_kernels']:.2f}")
                md.append(f"| {r['model']} | {r['bit_exact']} | {r['replacing_agrees']} | {r['partitions']} | "
                          f"{r['litert_us']:.1f} | {r['native_us']:.1f} | "
                          f"{'' if r['per_partition_us'] is None else format(r['per_partition_us'], '.1f')} | "
                          f"{_ci(r.get('per_partition_us_ci'), 1)} | {r['floor_us']:.1f} | {fp} | "
                          f"{_ci(r.get('per_partition_floors_ci'))} | {r['cold_floor_us']:.1f} | "
                          f"{'' if r['per_partition_cold_floors'] is None else format(r['per_partition_cold_floors'], '.2f')} | "
                          f"{r['pairs']} | {r['loadavg_1min']:.2f} | "
                          f"{r['kernel_us']:.1f} | {fw} | "
                          f"{r['init_native_ms']:.2f} | {r['init_litert_ms']:.2f} | {r['init_limit_ms']:.2f} | "
                          f"{r['init_first_native_ms']:.2f} | {r['init_first_litert_ms']:.2f} | "
                          f"{r['init_first_limit_ms']:.2f} |")
            else:
                md.append(f"| {r['model']} | {r.get('bit_exact')} | {r.get('replacing_agrees')} | "
                          + "| " * 19 + f"{r.get('error', '')} |")
    if tfs:
        md += ["", "On this copy device every partition moves its own inputs and outputs across the link. "
               "Transfer floor: per partition, the round trip with its bytes (its inputs that are not constants "
               "copied into pinned memory and written, a 16 KiB copy kernel, its outputs read and copied out, "
               "one wait: `staged_round_trip_us`), summed; native - LiteRT over it (1.00: the kernels and "
               f"transfers alone): median {summary['transfer_floors_median']:.2f}, max "
               f"{summary['transfer_floors_max']:.2f}.", "",
               "| model | P | KiB in + out per invoke | transfer floor us | native - LiteRT us | over the transfer floor | less kernels |",
               "|---|---|---|---|---|---|---|"]
        for r in tfs:
            kib = sum(i + o for i, o in r["partition_bytes"]) / 1024
            md.append(f"| {r['model']} | {r['partitions']} | {kib:.0f} | {r['transfer_floor_us']:.0f} | "
                      f"{r['diff_us']:.0f} | {r['transfer_floors']:.2f} | {r['transfer_floors_without_kernels']:.2f} |")
    (a.out / f"native_{tag}.md").write_text("\n".join(md) + "\n")
    return 0 if len(good) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
