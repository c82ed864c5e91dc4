"""How far a recalled Prepare in C could take start-up (issue 38: construct + allocate at
most 1.5x LiteRT's): the same second constructions as bench_delegate's start-up, in
alternating rounds, for

- ``litert``: LiteRT alone;
- ``floor``: LiteRT with bench_delegate's empty-kernel delegate taking litecl's nodes;
- ``litecl``: LiteRT with litecl.Delegate as it is;
- ``bound``: LiteRT with the same litecl.Delegate whose recalled Prepare does only what a
  Prepare in C would have to: the context key, keep_order's marks, the expected
  partitions handed to the runtime and ReplaceNodeSubsetsWithDelegateKernels. No record,
  no _Planner, no placement() rows: what is left is LiteRT's Replace, the C runtime's
  init and kernel_prepare, and one Python callback per Prepare (which C would not pay).

``bound`` leaves every partition it makes without a planner (they are not freed: the
numbers are all it is for), which slows the other kinds' rounds in the same process
(litecl 1.80x alone, 2.06x beside bound): LITECL_BOUND_KINDS picks the kinds, so run
``litert,floor,litecl`` and ``litert,floor,bound`` apart. A model whose partitions the
runtime cannot prepare from the first construction's presets alone (it would ask the
planner) is left out of every column.

Measured (Intel's runtime 2026.2, the 34 LiteRT runs of .shared_models + .real_models, 9
rounds, load 0.4-0.5, session 21): floor 1.24-1.25x, litecl 1.80x, bound 1.62-1.66x. A
recalled Prepare without any of Python's bookkeeping stays above 1.5x: the rest is the
Python callback, the key and the runtime's per-partition init and kernel_prepare.

Usage::

    LITECL_BOUND_KINDS=litert,floor,bound python benchmarks/bench_prepare_bound.py DIR [DIR ...]
        [--device intel] [--rounds 15]
"""
from __future__ import annotations

import argparse
import ctypes as C
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import litecl  # noqa: E402
from litecl import abi, claims  # noqa: E402
from litecl import delegate as D  # noqa: E402
from litecl.compare import make_interpreter  # noqa: E402
from bench_delegate import _FloorDelegate, claims_in, models  # noqa: E402

_ORIGINAL = claims.prepare
_LEARNT: dict = {}    # context key -> (claimed nodes, keep_order's marks, the _Expected)
_BOUND = [False]      # the Prepare of the round being timed is the bound's


def _prepare(dlg, ctx) -> int:
    if not _BOUND[0]:  # litecl.Delegate's Prepare as it is: nothing added
        return _ORIGINAL(dlg, ctx)
    key = claims.context_key(dlg._rt, ctx)
    hit = _LEARNT.get(key)
    if hit is None or _BOUND[0] == "learn":
        status = _ORIGINAL(dlg, ctx)
        if key not in _LEARNT:
            for mkey, memo in claims._PREPARES.items():
                if mkey[0] == key:
                    marked = next(iter(memo[-1]), ())
                    _LEARNT[key] = (memo[4], marked, memo[-1].get(marked))
        return status
    claim, marked, expected = hit
    if not claim:
        return abi.K_OK
    rt, arr = dlg._rt, claims._int_array(tuple(claim))
    claims._flag(rt, ctx, marked, True)
    made = None  # the runtime writes the partitions it makes here: alive until after the Replace
    if expected is not None and expected.parts is not None:
        entries, ints, _ = expected._table(dlg)
        n = len(expected.parts)
        made = (C.c_void_p * n)()
        rt.lcl_inprocess_expect(dlg._native, C.addressof(dlg._struct), entries, ints, n, D._new_keys(n), made)
    status = ctx.contents.ReplaceNodeSubsetsWithDelegateKernels(
        ctx, D._registration(rt), C.cast(arr, C.POINTER(abi.TfLiteIntArray)), C.cast(C.addressof(dlg._struct), abi.Dlg))
    rt.lcl_inprocess_expect(dlg._native, None, None, None, 0, 0, None)
    claims._flag(rt, ctx, marked, False)
    del made
    return status


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--device", default="intel")
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args(argv)
    claims.prepare = _prepare
    ms = models(a.dirs)
    rows = []
    for name, raw in ms:
        d = litecl.Delegate(a.device, quiet=True)
        _BOUND[0] = "learn"
        first = make_interpreter(raw, delegates=[d])
        first.allocate_tensors()
        _BOUND[0] = False
        floor = _FloorDelegate(claims_in(d.placement()))
        del first
        try:
            _BOUND[0] = True
            it = make_interpreter(raw, delegates=[d])
            it.allocate_tensors()
            del it
        except (RuntimeError, ValueError):
            print(f"{name}: left out (its partitions ask the planner at a second construction)")
            continue
        finally:
            _BOUND[0] = False
        rows.append((name, raw, d, floor))
    kinds = tuple(os.environ.get("LITECL_BOUND_KINDS", "litert,floor,litecl,bound").split(","))
    med = dict.fromkeys(kinds, 0.0)
    for name, raw, d, floor in rows:  # per model alternating rounds, medians summed (bench_delegate's way)
        ts = {k: [] for k in kinds}
        for _ in range(a.rounds):
            for kind in kinds:
                _BOUND[0] = kind == "bound"
                t = time.perf_counter()
                it = make_interpreter(raw, delegates=[] if kind == "litert" else [floor if kind == "floor" else d])
                it.allocate_tensors()
                ts[kind].append(time.perf_counter() - t)
                _BOUND[0] = False
                del it
        for kind in kinds:
            med[kind] += float(np.median(ts[kind])) * 1e3
    print(f"{len(rows)} models, device {a.device}, {a.rounds} alternating rounds, load average "
          f"{os.getloadavg()[0]:.2f}: construct + allocate, per-model medians summed")
    for k in kinds:
        print(f"  {k:7s} {med[k]:7.2f} ms  {med[k] / med['litert']:.2f}x LiteRT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
