"""The CPU launch row's vector bytes (ops/tiling.py LAUNCH["cpu"].vec_bytes, RUNTIME_ROWS)
measured per OpenCL runtime: each CAST/ADD kind below at each size, kernel event time
(Delegate.profile: kernel_times_ns) of a one-node model, the median of 21 invokes after 3
warm-up ones; each row is measured ``--rounds`` times alternating, the medians printed,
with the ratio to the first row. The rows are set by patching LAUNCH and RUNTIME_ROWS in
this process (plans and Prepare memos cleared between rows).

Usage::

    python benchmarks/bench_vec_bytes.py --device intel [--vec 32 64] [--sizes 50000 200000 1000000 4000000]
        [--rounds 3]

Results: benchmarks/results/intel/vec_bytes_s16.txt (the reason for Intel's RUNTIME_ROWS entry).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import litecl  # noqa: E402
import litecl.claims as claims  # noqa: E402
import litecl.delegate as delegate  # noqa: E402
import litecl.kernels as kernels  # noqa: E402
import litecl.lowering as lowering  # noqa: E402
import litecl.ops.tiling as tiling  # noqa: E402
from litecl.compare import random_inputs  # noqa: E402
from models.builders import add_model, cast_model  # noqa: E402

CASES = [
    ("ADD f32", lambda n: add_model("float32", [n], [n])),
    ("ADD i64", lambda n: add_model("int64", [n], [n])),
    ("ADD i8 q", lambda n: add_model("int8", [n], [n], quant=((0.5, 1), (0.25, -2), (0.3, 3)))),
    ("ADD i16 q", lambda n: add_model("int16", [n], [n], quant=((0.5, 0), (0.25, 0), (0.3, 0)))),
    ("CAST f32->f16", lambda n: cast_model("float32", "float16", [n])),
    ("CAST f16->f32", lambda n: cast_model("float16", "float32", [n])),
    ("CAST u8->f32", lambda n: cast_model("uint8", "float32", [n])),
    ("CAST f32->i8", lambda n: cast_model("float32", "int8", [n])),
    ("CAST f32->u8", lambda n: cast_model("float32", "uint8", [n])),
    ("CAST i32->f32", lambda n: cast_model("int32", "float32", [n])),
    ("CAST i64->f32", lambda n: cast_model("int64", "float32", [n])),
    ("CAST bool->f32", lambda n: cast_model("bool", "float32", [n])),
]


def kernel_us(dev, buf: bytes, vec_bytes: int) -> float:
    """Median kernel time (us) of ``buf``'s launches with the CPU row's vec_bytes set."""
    tiling.LAUNCH["cpu"] = dataclasses.replace(tiling.LAUNCH["cpu"], vec_bytes=vec_bytes)
    kernels._PLANS.clear()
    lowering._SPECS.clear()
    delegate._PLANNED.clear()
    delegate._PRESETS.clear()
    delegate._C_PLANS.clear()
    claims._PREPARES.clear()
    claims._REASONS.clear()
    it = litecl.Interpreter(model_content=buf, device=dev, quiet=True)
    it.allocate_tensors()
    by_name = {d["name"]: d["index"] for d in it.get_input_details()}
    for k, v in random_inputs(it.get_input_details(), 1).items():
        it.set_tensor(by_name[k], v)
    it.delegate.profile = True
    for _ in range(3):
        it.invoke()
    ts = []
    for _ in range(21):
        it.delegate.kernel_times_ns.clear()
        it.invoke()
        ts.append(sum(it.delegate.kernel_times_ns.values()) / 1e3)
    return statistics.median(ts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", required=True, help="a litecl device spec (a CPU device)")
    ap.add_argument("--vec", type=int, nargs="+", default=[32, 64], help="vector bytes to compare (first: the base)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[50_000, 200_000, 1_000_000, 4_000_000],
                    help="elements per tensor")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per row")
    a = ap.parse_args()
    dev = litecl.open_device(a.device)
    if dev.caps.is_gpu:
        print("error: --device must be a CPU device (the CPU row)", file=sys.stderr)
        return 2
    tiling.RUNTIME_ROWS.clear()  # the rows measured are this script's alone
    print(f"# {dev.caps.platform}: {dev.caps.name}; load average {os.getloadavg()[0]:.2f}")
    for name, make in CASES:
        for n in a.sizes:
            buf = make(n)
            got: dict = {v: [] for v in a.vec}
            for _ in range(a.rounds):
                for v in a.vec:
                    got[v].append(kernel_us(dev, buf, v))
            med = {v: statistics.median(t) for v, t in got.items()}
            base = med[a.vec[0]]
            cols = "  ".join(f"v{v} {med[v]:8.1f} us" + ("" if v == a.vec[0] else f" ({med[v] / base:.2f})")
                             for v in a.vec)
            print(f"{name:14s} n={n:>8}: {cols}", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
