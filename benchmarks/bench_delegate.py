"""litecl.Interpreter (LiteRT + litecl.Delegate) against LiteRT alone, same process,
alternating rounds: start-up, invoke per model with the per-partition cost against the
round-trip floor, and the five 16M-element synthetic models.

Usage::

    python benchmarks/bench_delegate.py --device pocl [--placement all|auto] [--keep-order false|true|auto] DIR [DIR ...]
        [--size 16777216] [--secs 1.0] [--init-rounds 7] [--skip-init] [--skip-models] [--skip-large] [--json OUT.json]

- round-trip floor: one 16 KiB write + a copy kernel + a 16 KiB read with one wait, median
  of 300, on the same device and queue, each after 1 ms of numpy work on this thread (the
  cold floor: a partition inside a model runs after LiteRT's nodes; issue 38's unit); the
  back-to-back floor (no gap) is printed beside it;
- start-up: construct + allocate_tensors after a first one of each (on-disk and in-process
  caches warm), ``--init-rounds`` rounds alternating LiteRT alone, the delegation floor
  (LiteRT with a delegate that takes the nodes litecl takes with empty kernels: LiteRT's
  own cost of any delegate there), litecl.Interpreter and LiteRT's own Interpreter with a
  litecl.Delegate, the per-model medians summed over the models LiteRT runs;
- invoke: rounds of set every input + invoke + read every output, alternating LiteRT /
  litecl for ``--secs`` per model after 3 warm-up rounds; the medians of invoke alone
  ((litecl - LiteRT) / partitions in round-trip floors) and of the API's copies
  (set_tensor + get_tensor) apart;
- kernels slower than LiteRT's node: each launch's event-profiled kernel time (bench.py
  launch_profile, 10 profiled invokes) against LiteRT alone running only the nodes it
  replaces (common.node_model, median of 21 invokes after 3, this one-node model's own
  invoke overhead included); the launches slower than LiteRT are named, and the
  per-partition column is also given with their excess (kernel - LiteRT) taken out;
- large: the five 16M-element models (inputs set once), 7 alternating rounds, medians:
  invoke alone and reading the outputs apart, with the placement litecl chose and why.
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
from litecl.compare import make_interpreter, random_inputs  # noqa: E402
from litecl.delegate import KEEP_ORDER_DEFAULT  # noqa: E402
from common import litert_runs, node_model, tflite_files  # noqa: E402
from models.builders import add_model, cast_model, chain_model  # noqa: E402


def round_trip_us(device, gap_us: float = 0.0, runs: int = 300) -> float:
    """The round-trip floor: one 16 KiB write, a copy kernel and a blocking 16 KiB read on
    ``device``'s queue, the median over ``runs`` (us). ``gap_us`` > 0: each run after that
    much compute on this thread (numpy, ~2 MB streamed), as a partition inside a model runs
    after LiteRT's nodes (the cold floor, bench_native.py)."""
    import pyopencl as cl

    q, ctx = device.queue, device.context
    src = "__kernel void c(__global const float4* a, __global float4* b) { b[get_global_id(0)] = a[get_global_id(0)]; }"
    k = cl.Kernel(cl.Program(ctx, src).build(), "c")
    h = np.zeros(4096, np.float32)
    a, b = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, h.nbytes) for _ in range(2))
    k.set_args(a, b)
    x = np.linspace(0, 1, 1 << 19, dtype=np.float32)

    def once():
        cl.enqueue_copy(q, a, h, is_blocking=False)
        cl.enqueue_nd_range_kernel(q, k, (1024,), None)
        cl.enqueue_copy(q, h, b, is_blocking=True)
    for _ in range(50 if gap_us <= 0 else 5):
        once()
    ts = []
    for _ in range(runs):
        end = time.perf_counter() + gap_us * 1e-6
        while time.perf_counter() < end:
            np.dot(x, x)
        t = time.perf_counter()
        once()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)) * 1e6


def _runner(it, ins):
    """A function running one round: set every input, invoke, read every output; it
    returns (copies s, invoke s): the API's copies (set_tensor, get_tensor) apart from
    the invoke."""
    det, outs = it.get_input_details(), it.get_output_details()

    def once():
        t0 = time.perf_counter()
        for d in det:
            it.set_tensor(d["index"], ins[d["name"]])
        t1 = time.perf_counter()
        it.invoke()
        t2 = time.perf_counter()
        for o in outs:
            it.get_tensor(o["index"])
        t3 = time.perf_counter()
        return (t1 - t0) + (t3 - t2), t2 - t1
    return once


def _construct(raw, kind, a, extra=None):
    """(seconds, interpreter) of one construct + allocate_tensors: "litert" (LiteRT alone),
    "litecl" (litecl.Interpreter), "stock" (LiteRT's own Interpreter with ``extra``, a
    litecl.Delegate), "floor" (LiteRT's own with ``extra``, an empty-kernel delegate)."""
    t = time.perf_counter()
    if kind == "litert":
        it = make_interpreter(raw)
    elif kind == "litecl":
        it = litecl.Interpreter(model_content=raw, device=a.device, placement=a.placement,
                                keep_order=a.keep_order, quiet=True)
    else:
        it = make_interpreter(raw, delegates=[extra])
    it.allocate_tensors()
    return time.perf_counter() - t, it


class _FloorDelegate:
    """LiteRT's own cost of delegating: a TfLiteDelegate whose Prepare replaces the nodes
    litecl claims in each subgraph (``claims``: node indices per Prepare, in the order
    LiteRT prepares the subgraphs) with kernels that have no init, prepare or invoke.
    What any delegate taking those nodes pays inside LiteRT (partitioning, the kernel
    nodes, re-planning the arena), the floor of litecl's start-up."""

    def __init__(self, claims: list):
        import ctypes as C  # noqa: PLC0415

        from litecl import abi  # noqa: PLC0415

        self.claims, self.k = claims, 0
        self._reg = abi.TfLiteRegistration()
        self._reg.builtin_code, self._reg.custom_name, self._reg.version = abi.BUILTIN_DELEGATE, b"floor", 1
        self._st = abi.TfLiteDelegate()
        self._st.flags = abi.ALLOW_DYNAMIC_TENSORS

        @abi.DELEGATE_PREPARE
        def prepare(ctx, dlg):
            nodes = self.claims[self.k] if self.k < len(self.claims) else []
            self.k += 1
            if not nodes:
                return abi.K_OK
            arr = abi.new_int_array(nodes, owned_by_litert=False)
            return ctx.contents.ReplaceNodeSubsetsWithDelegateKernels(
                ctx, self._reg, C.cast(arr, C.POINTER(abi.TfLiteIntArray)), dlg)

        self._prepare = prepare
        self._st.Prepare = prepare

    def _get_native_delegate_pointer(self) -> int:
        import ctypes as C  # noqa: PLC0415

        self.k = 0  # asked once per construction, before the subgraphs' Prepare
        return C.addressof(self._st)


def _claims_of(it) -> list:
    """litecl's claimed node indices per subgraph of interpreter ``it``, in placement()'s
    subgraph order (the order LiteRT prepared them)."""
    return claims_in(it.delegate.placement(id(it)))


def claims_in(rows) -> list:
    """The claimed node indices per subgraph of placement() ``rows`` (one interpreter's)."""
    subs = sorted({r["subgraph"] for r in rows})
    out = [[] for _ in range(max(subs) + 1 if subs else 0)]
    for r in rows:
        if r["placement"] == "opencl":
            out[r["subgraph"]].append(r["index"])
    return [sorted(c) for c in out]


def models(dirs):
    """[(file name, bytes)] of the models under ``dirs`` LiteRT alone runs."""
    out = []
    for f in tflite_files(dirs):
        raw = f.read_bytes()
        if litert_runs(raw):
            out.append((f.name, raw))
    return out


def slow_kernels(it, raw: bytes, run) -> list[dict]:
    """The launches of ``it``'s partitions whose kernel alone (event-profiled, the mean of
    10 profiled calls of ``run``) is slower than LiteRT alone running the nodes that launch
    replaces (``node_model``, median of 21 invokes after 3 warm-up): [{subgraph, nodes,
    node, what, kernel_us, litert_us}], slowest excess first. Launches whose nodes touch a
    dynamic dimension are not priced."""
    from litecl.bench import launch_profile  # noqa: PLC0415

    out = []
    for r in launch_profile(it.delegate, run, runs=10):
        if r["placement"] != "opencl" or r["folded"] or not r["runs"]:
            continue
        sub = node_model(raw, r["subgraph"], r["nodes"])
        if sub is None:
            continue
        ref = make_interpreter(sub)
        ref.allocate_tensors()
        for d, v in random_inputs(ref.get_input_details(), seed=1).items():
            ref.set_tensor(next(x["index"] for x in ref.get_input_details() if x["name"] == d), v)
        ts = []
        for k in range(24):
            t = time.perf_counter_ns()
            ref.invoke()
            if k >= 3:
                ts.append(time.perf_counter_ns() - t)
        lite_us, kern_us = float(np.median(ts)) / 1e3, r["avg_ms"] * 1e3
        if kern_us > lite_us:
            out.append({"subgraph": r["subgraph"], "nodes": r["nodes"], "node": r["node"], "what": r["what"],
                        "kernel_us": kern_us, "litert_us": lite_us})
    return sorted(out, key=lambda x: x["litert_us"] - x["kernel_us"])


def large(n: int) -> dict:
    return {"CAST f32->f16": cast_model("float32", "float16", [n]),
            "CAST u8->f32": cast_model("uint8", "float32", [n]),
            "CAST i64->f16": cast_model("int64", "float16", [n]),
            "ADD f32": add_model("float32", [n], [n]),
            "u8->f32 +1 ->f16": chain_model(["uint8", "float32", ("add", np.full([n], 1.0, np.float32)),
                                             "float16"], [n])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="folders (or files) of .tflite models; those LiteRT alone runs are measured")
    ap.add_argument("--device", default=None, help="litecl device spec (default: LITECL_DEVICE, else auto)")
    ap.add_argument("--placement", default="all", choices=("all", "auto"))
    ap.add_argument("--keep-order", default=KEEP_ORDER_DEFAULT, type=lambda v: {"false": False, "true": True}.get(v, v),
                    choices=(False, True, "auto"), help="litecl.Delegate's keep_order (default: its default)")
    ap.add_argument("--size", type=int, default=1 << 24, help="elements of the five large models (default 2^24)")
    ap.add_argument("--secs", type=float, default=1.0, help="alternating rounds per model for this long (default 1 s)")
    ap.add_argument("--skip-init", action="store_true")
    ap.add_argument("--skip-models", action="store_true")
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--json", type=Path, help="also write every number to this JSON file")
    ap.add_argument("--init-rounds", type=int, default=7, help="alternating start-up rounds per model")
    a = ap.parse_args(argv)
    dev = litecl.open_device(a.device)
    res = {"device": f"{dev.caps.platform}: {dev.caps.name}", "placement": a.placement, "keep_order": a.keep_order}
    res["loadavg_start"] = os.getloadavg()[0]
    floor = res["round_trip_us"] = round_trip_us(dev, gap_us=1000)
    res["round_trip_back_to_back_us"] = round_trip_us(dev)
    print(f"device {res['device']}; placement {a.placement}; keep_order {a.keep_order}; round-trip floor "
          f"{floor:.1f} us (cold: after 1 ms of work; back-to-back {res['round_trip_back_to_back_us']:.1f} us)")
    ms = models(a.dirs) if (a.dirs and not (a.skip_init and a.skip_models)) else []
    if ms and not a.skip_init:
        kinds = ("litert", "floor", "litecl", "stock")
        tot = dict.fromkeys(kinds, 0.0)
        rows = []
        for name, raw in ms:
            ts = {k: [] for k in kinds}
            _, first = _construct(raw, "litecl", a)  # the first: caches warm
            extra = {"floor": _FloorDelegate(_claims_of(first)),
                     "stock": litecl.Delegate(a.device, placement=a.placement, keep_order=a.keep_order, quiet=True)}
            del first
            for kind in kinds:
                _construct(raw, kind, a, extra.get(kind))
            for _ in range(a.init_rounds):  # alternating rounds, per-model medians
                for kind in kinds:
                    ts[kind].append(_construct(raw, kind, a, extra.get(kind))[0])
            r = {kind: float(np.median(v)) * 1e3 for kind, v in ts.items()}
            for kind in r:
                tot[kind] += r[kind]
            rows.append({"model": name, **r})
        res["init"] = {"rows": rows, **{f"{k}_ms": v for k, v in tot.items()}}
        print(f"start-up (construct + allocate, second construction) over {len(ms)} models: "
              f"litecl {tot['litecl']:.1f} ms, LiteRT {tot['litert']:.1f} ms: "
              f"{tot['litecl'] / tot['litert']:.2f}x; LiteRT's own Interpreter with a litecl.Delegate "
              f"{tot['stock']:.1f} ms: {tot['stock'] / tot['litert']:.2f}x; the delegation floor (LiteRT with "
              f"a delegate taking the same nodes with empty kernels) {tot['floor']:.1f} ms: "
              f"{tot['floor'] / tot['litert']:.2f}x")
    if ms and not a.skip_models:
        rows = []
        print("invoke alone, medians; P: partitions; (d/P)/floor: (litecl - LiteRT) per partition in round-trip "
              "floors; copies: set_tensor + get_tensor apart; slow k.: launches whose kernel alone is slower than "
              "LiteRT's nodes (listed below); floors w/o: (d/P)/floor with their excess taken out")
        print(f"{'model':40s} {'LiteRT us':>10s} {'litecl us':>10s} {'ratio':>6s} {'P':>3s} {'(d/P)/floor':>11s} "
              f"{'copies LiteRT':>13s} {'copies litecl':>13s} {'slow k.':>7s} {'floors w/o':>10s}")
        for name, raw in ms:
            ref = make_interpreter(raw)
            ref.allocate_tensors()
            it = litecl.Interpreter(model_content=raw, device=a.device, placement=a.placement,
                                    keep_order=a.keep_order, quiet=True)
            it.allocate_tensors()
            ins = random_inputs(ref.get_input_details(), seed=0)
            fa, fb = _runner(ref, ins), _runner(it, ins)
            for _ in range(3):
                fa()
                fb()
            ta, tb = [], []
            end = time.perf_counter() + a.secs
            while (time.perf_counter() < end or len(ta) < 10) and len(ta) < 5000:
                ta.append(fa())
                tb.append(fb())
            A, B = (float(np.median([t[1] for t in ts])) * 1e6 for ts in (ta, tb))
            CA, CB = (float(np.median([t[0] for t in ts])) * 1e6 for ts in (ta, tb))
            P = sum(g["partitions"] for g in it.delegate.graph_info())
            per = (B - A) / P / floor if P else None
            slow = slow_kernels(it, raw, lambda: fb()) if P else []
            excess = sum(s["kernel_us"] - s["litert_us"] for s in slow)
            rest = (B - A - excess) / P / floor if P else None
            rows.append({"model": name, "litert_us": A, "litecl_us": B, "ratio": B / A, "partitions": P,
                         "per_partition_floors": per, "litert_copies_us": CA, "litecl_copies_us": CB,
                         "opencl_nodes": sum(r["placement"] == "opencl" for r in it.placement()),
                         "slow_kernels": slow, "per_partition_floors_without_slow_kernels": rest})
            print(f"{name[:40]:40s} {A:10.1f} {B:10.1f} {B / A:6.2f} {P:3d} "
                  f"{'' if per is None else f'{per:11.2f}':>11s} {CA:13.1f} {CB:13.1f} {len(slow):7d} "
                  f"{'' if rest is None else f'{rest:10.2f}':>10s}")
        ratios = [r["ratio"] for r in rows]
        pers = [r["per_partition_floors"] for r in rows if r["per_partition_floors"] is not None]
        res["models"] = {"rows": rows, "median_ratio": float(np.median(ratios)), "max_ratio": max(ratios),
                         "median_per_partition_floors": float(np.median(pers)) if pers else None}
        print(f"invoke over {len(rows)} models: litecl / LiteRT median {np.median(ratios):.3f}, max "
              f"{max(ratios):.2f}; (litecl - LiteRT) / partitions median "
              f"{np.median(pers) if pers else float('nan'):.2f} round-trip floors over {len(pers)} models with partitions")
        slow = [(r["model"], s) for r in rows for s in r["slow_kernels"]]
        rests = {r["model"]: r["per_partition_floors_without_slow_kernels"] for r in rows
                 if r["per_partition_floors_without_slow_kernels"] is not None}
        res["models"]["slow_kernels"] = len(slow)
        res["models"]["max_per_partition_floors_without_slow_kernels"] = max(rests.values()) if rests else None
        print(f"{len(slow)} launch(es) whose kernel alone is slower than LiteRT running its node(s) alone:")
        for m, s in slow:
            print(f"  {m[:40]:40s} subgraph {s['subgraph']} nodes {s['nodes']} {s['node']}: kernel "
                  f"{s['kernel_us']:.1f} us, LiteRT {s['litert_us']:.1f} us ({s['what']})")
        if rests:
            worst = max(rests, key=rests.get)
            print(f"(litecl - LiteRT - those kernels' excess) / partitions: median {np.median(list(rests.values())):.2f}, "
                  f"max {rests[worst]:.2f} round-trip floors ({worst})")
    if not a.skip_large:
        rows = []
        for name, raw in large(a.size).items():
            ref = make_interpreter(raw)
            ref.allocate_tensors()
            it = litecl.Interpreter(model_content=raw, device=a.device, placement=a.placement,
                                    keep_order=a.keep_order, quiet=True)
            it.allocate_tensors()
            ins = random_inputs(ref.get_input_details(), seed=0)
            for x in (ref, it):
                for d in x.get_input_details():
                    x.set_tensor(d["index"], ins[d["name"]])

            def run(x):  # (invoke s, reading the outputs s)
                t = time.perf_counter()
                x.invoke()
                t1 = time.perf_counter()
                for o in x.get_output_details():
                    x.get_tensor(o["index"])
                return t1 - t, time.perf_counter() - t1
            run(ref)
            run(it)
            ta, tb = [], []
            for _ in range(7):
                ta.append(run(ref))
                tb.append(run(it))
            A, B = (float(np.median([t[0] for t in ts])) * 1e3 for ts in (ta, tb))
            RA, RB = (float(np.median([t[1] for t in ts])) * 1e3 for ts in (ta, tb))
            pl = [r["placement"] for r in it.placement()]
            why = sorted({r["reason"] for r in it.placement() if r["reason"]})
            rows.append({"model": name, "litert_invoke_ms": A, "litecl_invoke_ms": B, "invoke_ratio": B / A,
                         "litert_read_ms": RA, "litecl_read_ms": RB, "ratio": (B + RB) / (A + RA),
                         "placement": pl, "reasons": why})
            print(f"{name:18s} invoke: LiteRT {A:8.2f} ms  litecl {B:8.2f} ms  {B / A:5.2f}x;  read outputs: "
                  f"LiteRT {RA:6.2f} ms  litecl {RB:6.2f} ms;  {pl}{'  ' + '; '.join(why) if why else ''}")
        res["large"] = rows
    res["loadavg_end"] = os.getloadavg()[0]
    print(f"load average (1 min) {res['loadavg_start']:.2f} at the start, {res['loadavg_end']:.2f} at the end")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
