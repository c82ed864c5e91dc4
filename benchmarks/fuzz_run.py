"""Fuzz the command line: seeded byte mutants of small real models through `litecl run`.

Each mutant (models/mutate.py) is written to a file and run as `python -m litecl.cli run
MUTANT --device D` in its own process with a timeout, and classified by how it ended:

  rejected    exit 2 with exactly one `error: ...` line on stderr (the contract)
  ok          exit 0
  differs     exit 1 (only with --command compare: outputs not bit-exact with LiteRT)
  crash       killed by a signal (segfault, abort, OOM kill)
  hang        still running after --timeout seconds
  traceback   a Python traceback on stderr
  internal    exit 2 with the CLI's catch-all "internal error (...)" (an unmapped exception)
  other       any other exit status or stderr shape

    python benchmarks/fuzz_run.py --count 300 --seed 0 --timeout 60 --device intel

Prints the counts, the most common rejection reasons and every non-contract outcome with
its seed; `--keep DIR` saves those mutants. Exits 1 when anything crashed, hung, printed
a traceback or hit the catch-all, else 0.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # for models.mutate

from models.mutate import mutant  # noqa: E402

SHARED = Path(os.environ.get("LITECL_SHARED_MODELS", ROOT.parent / "shared" / "models"))
BAD = ("crash", "hang", "traceback", "internal", "other")


def small_models(folder: Path, max_bytes: int) -> list[Path]:
    return sorted(p for p in folder.glob("*.tflite") if p.stat().st_size <= max_bytes)


def classify(rc: int | None, stderr: str, command: str) -> str:
    if rc is None:
        return "hang"
    if rc < 0:
        return "crash"
    if "Traceback (most recent call last)" in stderr:
        return "traceback"
    lines = stderr.strip().splitlines()
    if rc == 2 and len(lines) == 1 and lines[0].startswith("error: "):
        if "process running the model crashed" in lines[0]:  # the CLI's supervisor saw it
            return "crash"
        return "internal" if "internal error" in lines[0] else "rejected"
    if rc == 0:
        return "ok"
    if rc == 1 and command == "compare":
        return "differs"
    return "other"


def reason_key(stderr: str) -> str:
    """A rejection message with numbers, names and paths folded, for counting."""
    line = stderr.strip().splitlines()[0] if stderr.strip() else ""
    line = re.sub(r"^error: \S+?\.tflite: ", "error: ", line)
    line = re.sub(r"'[^']*'|\"[^\"]*\"", "S", line)
    line = re.sub(r"\[\d+\]", "[N]", line)
    line = re.sub(r"-?\d+", "N", line)
    return line[:120]


def stage(stderr: str) -> str:
    """Which layer refused a rejected mutant, from its error line."""
    line = stderr.strip().splitlines()[0] if stderr.strip() else ""
    if "corrupt model (" in line or "root table offset" in line:
        return "flatbuffer verifier"
    if any(k in line for k in ("not a TFLite model", "too short", "empty file")):
        return "file identifier / size"
    if "LiteRT" in line:
        return "LiteRT (prepare or invoke)"
    if "random inputs need" in line:
        return "random inputs too large"
    return "model / shape validation"


def run_one(i: int, model: Path, seed: int, args, workdir: str) -> dict:
    buf, what = mutant(model.read_bytes(), seed)
    path = os.path.join(workdir, f"mutant_{i}.tflite")
    with open(path, "wb") as f:
        f.write(buf)
    cmd = [sys.executable, "-m", "litecl.cli", args.command, path]
    if args.device:
        cmd += ["--device", args.device]
    env = {k: v for k, v in os.environ.items() if k != "LITECL_DEBUG"}  # the user's path
    env["LITECL_NO_SUPERVISOR"] = "1"  # a crash must show as a signal, not as an error line
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env,
                           cwd=workdir, errors="replace")
        rc, err = p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode("utf-8", "replace") if isinstance(e.stderr, bytes) else e.stderr
        rc, err = None, err or ""
    kind = classify(rc, err, args.command)
    out = {"i": i, "model": model.name, "seed": seed, "mutation": what, "kind": kind, "rc": rc,
           "seconds": round(time.perf_counter() - t0, 3), "stderr": err[-2000:]}
    if rc is not None and rc < 0:
        out["signal"] = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
    if kind in BAD and args.keep:
        os.makedirs(args.keep, exist_ok=True)
        with open(os.path.join(args.keep, f"{kind}_{model.stem}_{seed}.tflite"), "wb") as f:
            f.write(buf)
    os.unlink(path)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Mutant k of a run uses model k mod the number of models "
                                        "and mutation seed SEED*1000003 + k.")
    ap.add_argument("--count", type=int, default=300, help="number of mutants (default 300)")
    ap.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds before a run counts as a hang (default 60)")
    ap.add_argument("--device", default=os.environ.get("LITECL_DEVICE", "intel"),
                    help="litecl --device (default $LITECL_DEVICE or intel)")
    ap.add_argument("--models", type=Path, default=SHARED, help=f"model folder (default {SHARED})")
    ap.add_argument("--max-bytes", type=int, default=400_000,
                    help="use models up to this size (default 400000)")
    ap.add_argument("--command", choices=("run", "compare"), default="run",
                    help="litecl subcommand (compare also checks bit-exactness vs LiteRT)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel runs")
    ap.add_argument("--keep", help="save crashing/hanging/traceback mutants in this folder")
    ap.add_argument("--json", help="write every result to this JSON file")
    args = ap.parse_args(argv)

    models = small_models(args.models, args.max_bytes)
    if not models:
        ap.error(f"no .tflite models of at most {args.max_bytes} bytes in {args.models}")
    jobs = [(i, models[i % len(models)], args.seed * 1000003 + i) for i in range(args.count)]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="litecl_fuzz_") as work, \
            ThreadPoolExecutor(max(1, args.jobs)) as pool:
        results = list(pool.map(lambda j: run_one(*j, args, work), jobs))
    wall = time.perf_counter() - t0

    counts = collections.Counter(r["kind"] for r in results)
    print(f"{len(results)} mutants of {len(models)} models from {args.models} "
          f"(seed {args.seed}, `litecl {args.command} --device {args.device}`, timeout "
          f"{args.timeout:g} s) in {wall:.0f} s")
    for kind in ("rejected", "ok", "differs", *BAD):
        print(f"  {kind:<10} {counts.get(kind, 0)}")
    per_model = collections.defaultdict(collections.Counter)
    for r in results:
        per_model[r["model"]][r["kind"]] += 1
    print("per model (rejected/ok/other):")
    for m, c in sorted(per_model.items()):
        print(f"  {m:<52} {c['rejected']:>4} {c['ok']:>4} {sum(c.values()) - c['rejected'] - c['ok']:>4}")
    stages = collections.Counter(stage(r["stderr"]) for r in results if r["kind"] == "rejected")
    print("rejected by:")
    for k, n in stages.most_common():
        print(f"  {n:>4}  {k}")
    reasons = collections.Counter(reason_key(r["stderr"]) for r in results if r["kind"] == "rejected")
    print("most common rejection reasons:")
    for k, n in reasons.most_common(12):
        print(f"  {n:>4}  {k}")
    bad = [r for r in results if r["kind"] in BAD or r["kind"] == "differs"]
    for r in bad:
        print(f"{r['kind'].upper()}: {r['model']} seed {r['seed']} ({r['mutation']}) rc={r['rc']}"
              f"{' ' + r['signal'] if 'signal' in r else ''}\n    {r['stderr'].strip()[-600:]}")
    if args.json:
        Path(args.json).write_text(json.dumps({"counts": counts, "results": results}, indent=1))
    return 1 if any(counts.get(k) for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
