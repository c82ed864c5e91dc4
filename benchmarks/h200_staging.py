"""How a discrete GPU's copies of LiteRT's tensors are fastest (the native delegate's
path on copy devices): for sizes of 16 KiB to 4 MiB, an upload (host -> device) and a
download (device -> host) of pageable host memory (numpy, as LiteRT's arena) either
(a) staged: memcpy into a mapped ALLOC_HOST_PTR (pinned) buffer, then the DMA from it
(and the reverse), or (b) direct: clEnqueueWrite/ReadBuffer on the pageable pointer (the
driver stages it itself). Medians of alternating rounds, each a write + read + one wait.

    python benchmarks/h200_staging.py --device nvidia [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    import pyopencl as cl

    from litecl.device import open_device

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="nvidia")
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    dev = open_device(a.device)
    ctx, q = dev.context, dev.queue
    mf = cl.mem_flags
    rows = []
    print(f"device {dev.caps.name}")
    for kib in (16, 64, 144, 288, 576, 1152, 2304, 4096):
        n = kib << 10
        src = np.random.default_rng(0).integers(0, 255, n, dtype=np.uint8)
        dst = np.empty_like(src)
        buf = cl.Buffer(ctx, mf.READ_WRITE, n)
        pin = cl.Buffer(ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, n)
        pin_h, _ = cl.enqueue_map_buffer(q, pin, cl.map_flags.READ | cl.map_flags.WRITE, 0, (n,), np.uint8)

        def staged():
            t = time.perf_counter()
            pin_h[:] = src
            cl.enqueue_copy(q, buf, pin_h, is_blocking=False)
            cl.enqueue_copy(q, pin_h, buf, is_blocking=False)
            q.finish()
            dst[:] = pin_h
            return time.perf_counter() - t

        def direct():
            t = time.perf_counter()
            cl.enqueue_copy(q, buf, src, is_blocking=False)
            cl.enqueue_copy(q, dst, buf, is_blocking=False)
            q.finish()
            return time.perf_counter() - t

        for f in (staged, direct):
            f()
        s, d = [], []
        for _ in range(a.rounds):
            s.append(staged())
            d.append(direct())
        assert np.array_equal(dst, src)
        row = dict(kib=kib, staged_us=float(np.median(s)) * 1e6, direct_us=float(np.median(d)) * 1e6)
        rows.append(row)
        print(f"{kib:6d} KiB up + down: staged {row['staged_us']:8.1f} us, direct {row['direct_us']:8.1f} us "
              f"({row['staged_us'] / row['direct_us']:.2f}x)", flush=True)
        pin_h.base.release() if hasattr(pin_h.base, "release") else None
    if a.json:
        Path(a.json).write_text(json.dumps(dict(device=dev.caps.name, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
