"""Real models through stock LiteRT with litecl.Delegate, bit for bit against LiteRT alone.

Usage::

    python benchmarks/delegate_models.py --device pocl DIR [DIR ...] [--reference builtin|ref|xnnpack]
        [--placement all|auto] [--full-range] [--tflite] [--json OUT.json]

For every ``*.tflite`` under the folders (duplicates by content skipped): LiteRT's own
Interpreter alone, then LiteRT's own Interpreter with ``experimental_delegates=[litecl
.Delegate(...)]``, same resolver, same seeded inputs (litecl.compare.random_inputs; a
model whose declared input shape LiteRT cannot prepare is skipped, named). Prints per
model: bit-exact, the CAST/ADD nodes on OpenCL and kept on LiteRT, partitions; then a
summary. Exit status 0 when every model LiteRT runs is bit-exact (under ``--reference
xnnpack``: runs; the delegate computes the builtin kernels' bits, XNNPACK's own ADD may
differ), else 1. ``--tflite``: tensorflow's ``tf.lite.Interpreter`` on both sides instead of
ai_edge_litert's (the same resolvers; tensorflow must be installed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import litecl  # noqa: E402
from common import tflite_files  # noqa: E402
from litecl.compare import bit_equal, make_interpreter, random_inputs, run_outputs  # noqa: E402


def tflite_interpreter(content: bytes, reference: str = "builtin", delegates=None):
    """tensorflow's tf.lite.Interpreter over model bytes, the resolver ``reference`` names
    (as litecl.compare.make_interpreter does for ai_edge_litert's)."""
    import tensorflow as tf  # noqa: PLC0415

    kind = {"builtin": tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            "ref": tf.lite.experimental.OpResolverType.BUILTIN_REF,
            "xnnpack": tf.lite.experimental.OpResolverType.AUTO}[reference]
    return tf.lite.Interpreter(model_content=content, experimental_delegates=list(delegates or []),
                               experimental_op_resolver_type=kind)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--device", default=None)
    ap.add_argument("--reference", default="builtin", choices=("builtin", "ref", "xnnpack"))
    ap.add_argument("--placement", default="all", choices=("all", "auto"))
    ap.add_argument("--full-range", action="store_true")
    ap.add_argument("--tflite", action="store_true", help="tensorflow's tf.lite.Interpreter on both sides")
    ap.add_argument("--exclude", action="append", default=[], metavar="NAME",
                    help="skip models of this file name (e.g. one LiteRT alone crashes on: a crash cannot be caught)")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    interpreter = tflite_interpreter if a.tflite else make_interpreter
    files = tflite_files(a.dirs)
    d = litecl.Delegate(a.device, a.placement, quiet=True,
                        reference="ref" if a.reference == "ref" else "builtin")
    print(f"device: {d.device.caps.platform}: {d.device.caps.name}{' (' + d.device.caps.profile + ')' if d.device.caps.profile else ''}; "
          f"{'tf.lite ' if a.tflite else ''}reference {a.reference}; placement {a.placement}; memory "
          f"{'in place, ' + str(d.memory.align) + '-byte aligned' if d.memory.in_place else 'copies'}")
    rows, bad, stats = [], 0, {}
    for f in files:
        if f.name in a.exclude:
            print(f"{f.name[:44]:44s} excluded (--exclude)")
            continue
        raw = f.read_bytes()
        try:
            ref = interpreter(raw, reference=a.reference)
            ins = random_inputs(ref.get_input_details(), seed=0, full_range=a.full_range)
            want = run_outputs(ref, ins)
        except Exception as e:  # noqa: BLE001 (LiteRT alone cannot run it: not litecl's to run)
            print(f"{f.name[:44]:44s} LiteRT alone cannot run it: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        d = litecl.Delegate(a.device, a.placement, quiet=True,
                            reference="ref" if a.reference == "ref" else "builtin")
        try:
            got = run_outputs(interpreter(raw, reference=a.reference, delegates=[d]), ins)
            ok = len(got) == len(want) and all(bit_equal(x, y) for (_, x), (_, y) in zip(got, want))
            err = ""
        except Exception as e:  # noqa: BLE001
            ok, err = False, f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
        mine = d.placement()
        stats = {k: stats.get(k, 0) + v for k, v in d.stats.items()}
        on = sum(r["placement"] == "opencl" for r in mine)
        # under xnnpack the delegate still computes LiteRT's builtin kernels' bits, which
        # XNNPACK's own ADD need not: there the check is that the model runs
        bad += bool(err) if a.reference == "xnnpack" else not ok
        rows.append({"model": f.name, "bit_exact": ok, "opencl": on, "litert": len(mine) - on, "error": err})
        print(f"{f.name[:44]:44s} {'bit-exact' if ok else ('MISMATCH ' if err or a.reference != 'xnnpack' else 'runs, differs from XNNPACK alone') + err}  CAST/ADD on OpenCL {on}, "
              f"on LiteRT {len(mine) - on}")
    print(f"{len(rows)} models LiteRT runs: {len(rows) - bad} bit-exact with the delegate, {bad} not; "
          f"CAST/ADD nodes on OpenCL {sum(r['opencl'] for r in rows)}, on LiteRT {sum(r['litert'] for r in rows)}; "
          f"tensor bindings in place {stats.get('in_place', 0)}, copied {stats.get('copied', 0)} "
          f"(through pinned staging {stats.get('staged', 0)})")
    if a.json:
        a.json.write_text(json.dumps({"device": d.device.caps.name, "reference": a.reference, "tflite": a.tflite,
                                      "placement": a.placement, "rows": rows, "stats": stats}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
