"""Where a partition runs on PoCL: its ``pthread`` device (worker threads) or its ``basic``
device (the enqueueing thread), by the partition's size: the measurement behind
kernels.py's SMALL_PARTITION_BYTES.

One float32 ADD partition (input1 + input2, N elements: 12 N bytes read and written) in a
model whose other nodes (MUL chains on LiteRT) keep the host busy for ``--gap-us`` before it,
as LiteRT's nodes do in a real model. Each size: LiteRT alone, the partition on pthread and
on basic, in alternating rounds in one process; medians of invoke (inputs set once). The
difference to LiteRT alone is the partition's cost.

Usage::

    python benchmarks/bench_small_device.py [--device pocl] [--sizes 1024,16384,...] [--secs 1.0] [--json OUT]

Needs PoCL's basic device listed (litecl lists it at import unless POCL_DEVICES is set).
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

import litecl  # noqa: E402
from litecl import kernels as _kernels  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402
from models.builders import chain_model  # noqa: E402

SIZES = (1024, 4096, 16384, 65536, 131072, 262144, 524288, 1 << 20, 4 << 20)


def _model(n: int, muls: int) -> bytes:
    # MULs on LiteRT (the host's work before the partition), then ADD with a same-shape constant
    steps = ["float32", *[("mul", np.float32(1.0001)) for _ in range(muls)],
             ("add", np.full((n,), 0.5, np.float32))]
    return chain_model(steps, (n,))


def _interp(raw: bytes, dlg=None):
    it = Interpreter(model_content=raw, experimental_delegates=[dlg] if dlg else None,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], np.linspace(-1, 1, int(np.prod(d["shape"])), dtype=np.float32).reshape(d["shape"]))
    return it


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--secs", type=float, default=1.0)
    ap.add_argument("--device", default="pocl", help="PoCL's pthread device (a spec; 'pthread' where "
                    "POCL_DEVICES lists basic first)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    sizes = [int(s) for s in a.sizes.split(",")]
    base = litecl.Delegate(device=a.device, quiet=True)
    if base.small_device is None:
        raise SystemExit("error: PoCL lists no basic device here (POCL_DEVICES set, LITECL_NO_POCL_BASIC, "
                         "a GPU device node, or no PoCL)")
    rows, saved = [], _kernels.SMALL_PARTITION_BYTES
    print(f"pthread: {base.device.caps.name}; basic: {base.small_device.caps.name}; "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'elements':>9} {'MiB':>6} {'LiteRT us':>10} {'pthread +us':>11} {'basic +us':>10}")
    for n in sizes:
        muls = max(1, (1 << 21) // n)  # ~2M elements of MUL before the partition
        raw = _model(n, muls)
        its = {"litert": _interp(raw)}
        for kind, bound in (("pthread", -1), ("basic", 1 << 62)):
            _kernels.SMALL_PARTITION_BYTES = bound  # read at Prepare
            its[kind] = _interp(raw, litecl.Delegate(device=a.device, quiet=True))
        _kernels.SMALL_PARTITION_BYTES = saved
        ref = None
        for kind, it in its.items():
            it.invoke()
            out = it.get_tensor(it.get_output_details()[0]["index"])
            ref = out if ref is None else ref
            if not np.array_equal(out.view(np.uint32), ref.view(np.uint32)):
                raise SystemExit(f"error: {kind} differs from LiteRT at {n} elements")
        ts = {k: [] for k in its}
        end = time.perf_counter() + a.secs
        while time.perf_counter() < end or len(ts["litert"]) < 5:
            for k, it in its.items():
                t = time.perf_counter()
                it.invoke()
                ts[k].append(time.perf_counter() - t)
        med = {k: float(np.median(v)) * 1e6 for k, v in ts.items()}
        row = {"elements": n, "bytes": 12 * n, "litert_us": med["litert"],
               "pthread_us": med["pthread"] - med["litert"], "basic_us": med["basic"] - med["litert"],
               "rounds": len(ts["litert"])}
        rows.append(row)
        print(f"{n:>9} {12 * n / 2**20:>6.2f} {med['litert']:>10.1f} {row['pthread_us']:>11.1f} {row['basic_us']:>10.1f}",
              flush=True)
    if a.json:
        a.json.write_text(json.dumps({"device": base.device.caps.name, "cpus": os.cpu_count(),
                                      "load_1min": os.getloadavg()[0], "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
