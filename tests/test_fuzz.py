"""Fuzzing: seeded byte mutants of small real and built models through the API and the
CLI (no crash, hang or traceback; errors are ModelError/InputError, or LiteRT's
RuntimeError from a failed invoke), and a hypothesis search over byte edits of one model
checking that whatever the verifier accepts, the schema's object API can unpack.

benchmarks/fuzz_run.py runs the CLI part at scale and reports counts."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import litecl
from litecl.compare import random_inputs
from litecl.model import load_model
from litecl.verify import VerifyError, verify
from models.builders import add_model, cast_model, chain_model, multi_op_model
from models.mutate import mutant

from conftest import SHARED_MODELS

SMALL = 64_000  # bytes: the shared models small enough to run hundreds of times


def _seeds() -> list[tuple[str, bytes]]:
    out = [("cast", cast_model("float32", "int8", [2, 3])),
           ("cast_dynamic", cast_model("int64", "float16", [3, 4], dynamic=True)),
           ("add_quant", add_model("int8", [2, 3], [3], quant=((0.5, 1), (0.25, 0), (1.0, -3)))),
           ("chain", chain_model(["uint8", "float32", ("mul", 0.5), ("add", 1.0), "float16"], [4])),
           ("fanout", multi_op_model("fanout_mixed"))]
    if SHARED_MODELS.is_dir():
        out += [(p.name, p.read_bytes()) for p in sorted(SHARED_MODELS.glob("*.tflite"))
                if p.stat().st_size <= SMALL]
    return out


def _exercise(content: bytes, device: str) -> str:
    """Load and, when it loads, run one mutant; returns how it ended. Raises on anything
    that is not one of litecl's errors or an error LiteRT's own Python package raised
    (litecl.Interpreter is LiteRT's: its refusals are LiteRT's ValueError/RuntimeError)."""
    from litecl.cli import _raised_by_litert  # noqa: PLC0415

    try:
        it = litecl.Interpreter(model_content=content, device=device, quiet=True)
    except litecl.ModelError:
        return "rejected"
    except (ValueError, RuntimeError) as e:
        if isinstance(e, litecl.LiteclError) or not _raised_by_litert(e):
            raise
        return "litert refused"
    try:
        with it:
            it.allocate_tensors()
            details = it.get_input_details()
            if any(int(np.prod(d["shape"])) > 1 << 22 for d in details):
                return "huge input"  # a mutated dimension; not worth the memory here
            for name, v in random_inputs(details, 0).items():
                it.set_tensor(next(d["index"] for d in details if d["name"] == name), v)
            it.invoke()
            for d in it.get_output_details():
                it.get_tensor(d["index"])
    except litecl.LiteclError:
        return "error"
    except (ValueError, RuntimeError) as e:  # LiteRT's failed prepare or invoke, as LiteRT reports it
        if not _raised_by_litert(e):
            raise
        return "litert error"
    return "ok"


_API_FUZZ = """
import sys, time, traceback
sys.path.insert(0, {tests!r})
import test_fuzz
from models.mutate import mutant
seeds = test_fuzz._seeds()
for k in range({count}):
    name, buf = seeds[k % len(seeds)]
    m, what = mutant(buf, 7919 * k + 1)
    print("START", k, name, what, flush=True)
    t0 = time.perf_counter()
    try:
        kind = test_fuzz._exercise(m, {device!r})
    except Exception as e:
        kind = "UNEXPECTED " + type(e).__name__ + ": " + " ".join(str(e).split())[:300]
    print("END", k, round(time.perf_counter() - t0, 2), kind, flush=True)
"""


def test_api_survives_400_mutants(fast_device):
    """400 seeded mutants through litecl.Interpreter, in a subprocess (a crash in LiteRT
    must fail this test, not end the test session): each is refused by litecl, refused
    or failed by LiteRT with its own error, or runs; none crashes, hangs or raises
    anything else."""
    from conftest import ROOT  # noqa: PLC0415

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    code = _API_FUZZ.format(tests=str(ROOT / "tests"), count=400, device=fast_device)
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900,
                           env=env, cwd=ROOT)
        out, rc = r.stdout, r.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), None
    lines = out.splitlines()
    started = [ln for ln in lines if ln.startswith("START ")]
    ends = [ln.split(" ", 3) for ln in lines if ln.startswith("END ")]
    assert rc == 0 and len(ends) == 400, f"rc={rc}; last mutant started: {started[-1:]}"
    counts: dict = {}
    for _, k, secs, kind in ends:
        assert not kind.startswith("UNEXPECTED"), f"mutant {k}: {kind} ({started[int(k)]})"
        assert float(secs) < 30, f"mutant {k} took {secs} s ({started[int(k)]})"
        counts[kind] = counts.get(kind, 0) + 1
    assert counts.get("rejected", 0) > 100 and counts.get("ok", 0) > 20, counts


def test_cli_survives_mutants(tmp_path, fast_device):
    """A subset through `litecl run` in subprocesses: exit 0, or exit 2 with one error line."""
    seeds = _seeds()
    for k in range(12):
        name, buf = seeds[(5 * k) % len(seeds)]
        m, what = mutant(buf, 104729 * k + 3)
        p = tmp_path / f"mutant{k}.tflite"
        p.write_bytes(m)
        r = subprocess.run([sys.executable, "-m", "litecl.cli", "run", str(p), "--device", fast_device],
                           capture_output=True, text=True, timeout=120)
        where = f"mutant {k} of {name} ({what}): rc={r.returncode} {r.stderr[-1000:]}"
        assert r.returncode in (0, 2), where
        assert "Traceback" not in r.stderr, where
        if r.returncode == 2:
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), where
            assert "internal error" not in lines[0], where


_BASE = cast_model("float32", "int8", [2, 3])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.integers(0, len(_BASE) - 1), st.integers(0, 255)), max_size=6),
       cut=st.one_of(st.none(), st.integers(0, len(_BASE))))
def test_verified_means_unpackable(edits, cut):
    b = bytearray(_BASE)
    for pos, v in edits:
        b[pos] = v
    blob = bytes(b[:cut] if cut is not None else b)
    try:
        load_model(model_content=blob)
    except litecl.ModelError:
        pass
    if len(blob) >= 8 and blob[4:8] == b"TFL3":
        try:
            verify(blob)
        except VerifyError:
            return
        schema.ModelT.InitFromPackedBuf(blob, 0)  # must not raise once verified


_RESIZE_FUZZ = """
import random, sys
import numpy as np
import litecl
from ai_edge_litert import schema_py_generated as schema
from models.builders import add_model, cast_model
from models.hostile import pack


def pot(m):  # int16 ADD on LiteRT's power-of-two path (pot_scale_int16, power-of-two scales)
    o = schema.ModelT.InitFromPackedBuf(m, 0)
    o.subgraphs[0].operators[0].builtinOptions.potScaleInt16 = True
    o.operatorCodes[0].version = 1
    return pack(o)


seeds = [add_model("float32", [4], [4]), add_model("int32", [2, 3], [3]),
         add_model("int8", [4], [4], quant=((0.05, 1), (0.08, -2), (0.1, 3))),
         add_model("uint8", [4], [1], quant=((0.05, 1), (0.08, 2), (0.1, 3))),
         pot(add_model("int16", [4], [4], quant=((1.0, 0), (0.5, 0), (1.0, 0)))),
         add_model("int16", [4], [4], quant=((0.01, 0), (0.02, 0), (0.03, 0))),
         cast_model("float32", "int8", [4])]
rng = random.Random(int(sys.argv[2]))
for k in range(int(sys.argv[3])):
    m = seeds[k % len(seeds)]
    placement, reference = rng.choice(("all", "auto")), rng.choice(("builtin", "ref"))
    it = litecl.Interpreter(model_content=m, device=sys.argv[1], placement=placement, reference=reference,
                            quiet=True)
    shapes = []
    for d in it.get_input_details():
        rank = rng.choice((0, 1, 2, 8, 9, 9, 10))
        shapes.append([rng.choice((1, 1, 2, 3)) for _ in range(rank)])
    print("START", k, placement, reference, shapes, flush=True)
    try:
        for d, s in zip(it.get_input_details(), shapes):
            it.resize_tensor_input(d["index"], s)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
        it.invoke()
        kind = "ok"
    except (ValueError, RuntimeError) as e:
        kind = type(e).__name__
    print("END", k, kind, flush=True)
"""


def test_random_resizes_never_crash(fast_device):
    """Seeded random resizes (ranks up to 10, broadcasting or not) of ADD and CAST models,
    quantized int16 on LiteRT's power-of-two path included, under both placements and
    both resolvers, in a subprocess: each runs or ends in an error; LiteRT never aborts
    (litecl refuses the shapes it would abort on first)."""
    from conftest import ROOT  # noqa: PLC0415

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _RESIZE_FUZZ, fast_device, "7", "160"], capture_output=True,
                       text=True, timeout=600, env=env, cwd=ROOT)
    started = [ln for ln in r.stdout.splitlines() if ln.startswith("START ")]
    ends = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("END ")]
    assert r.returncode == 0 and len(ends) == 160, (r.returncode, started[-1:], r.stderr[-1000:])
    kinds = {e[2] for e in ends}
    assert "ok" in kinds and kinds - {"ok"}, kinds  # some run, some are refused
