"""Each model constructed 3 times with one litecl.Delegate (the 2nd and 3rd Prepare run in
the C runtime): every interpreter bit-exact against LiteRT alone on the same inputs, and
the placement rows of the three interpreters equal; "python prepares" counts the Prepares
of each construction that ran in Python (claims.prepare).

Usage::

    python benchmarks/recall_check.py DEVICE DIR [DIR ...] [--fresh]

``--fresh``: a new litecl.Delegate per construction, the previous one gone (as
litecl.Interpreter makes them): the 2nd and 3rd recall the 1st's Prepare across Delegates.
Bits are compared exactly (NaN payloads and signs included).
"""
import sys, glob, os
import numpy as np
import litecl
from litecl import claims
from litecl.compare import make_interpreter, random_inputs, run_outputs
fresh = "--fresh" in sys.argv
args = [a for a in sys.argv[1:] if a != "--fresh"]
dev = args[0]; dirs = args[1:]
paths = sorted(p for d in dirs for p in glob.glob(os.path.join(d, "**", "*.tflite"), recursive=True))
calls = [0]
real = claims.prepare
def counted(dlg, ctx):
    calls[0] += 1
    return real(dlg, ctx)
claims.prepare = counted
ok = bad = skipped = 0
for p in paths:
    raw = open(p, "rb").read()
    try:
        ref = make_interpreter(raw); ref.allocate_tensors()
    except Exception as e:
        skipped += 1; continue
    ins = {d["name"]: v for d, v in zip(ref.get_input_details(), random_inputs(ref.get_input_details(), seed=3).values())}
    try:
        want = run_outputs(ref, ins)
    except Exception as e:
        skipped += 1; continue
    d = litecl.Delegate(dev, quiet=True)
    c0 = calls[0]; same = True; py = []; per = []
    for k in range(3):
        before = calls[0]
        if fresh and k:
            del d
            d = litecl.Delegate(dev, quiet=True)
        it = make_interpreter(raw, delegates=[d])
        got = run_outputs(it, ins)
        py.append(calls[0] - before)
        for (n1, a), (n2, b) in zip(got, want):
            if a.tobytes() != b.tobytes():
                same = False
        if fresh:
            per.append(sorted((r["subgraph"], r["index"], r["placement"], r["kernel"]) for r in d.placement()))
        del it
    if not fresh:
        rows = d.placement()
        per = [sorted((r["subgraph"], r["index"], r["placement"], r["kernel"]) for r in rows if r["interpreter"] == k)
               for k in range(3)]
    eq = per[0] == per[1] == per[2]
    status = "bit-exact" if same else "DIFFER"
    print(f"{os.path.basename(p)[:44]:44s} {status} rows {'equal' if eq else 'DIFFER'} python prepares {py}", flush=True)
    ok += same and eq; bad += not (same and eq)
print(f"{ok} ok, {bad} bad, {skipped} not runnable by LiteRT alone here")
