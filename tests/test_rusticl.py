"""Mesa's rusticl (llvmpipe) as a supported device: long-lived processes and repeated runs.
The conformance tests run on it through conftest's REAL_DEVICES; its driver defects and
their workarounds are in tests/test_selftest.py."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import DEVICE_STATUS, ROOT, SHARED_MODELS


@pytest.fixture(scope="module")
def rusticl():
    if DEVICE_STATUS.get("rusticl"):
        pytest.skip(DEVICE_STATUS["rusticl"])
    return "rusticl"


_CYCLES = r"""
import json, sys
import numpy as np
import litecl
from litecl.compare import make_interpreter, random_inputs, mismatches
from models.builders import add_model, cast_model, chain_model
paths = sys.argv[3:]
models = [open(p, "rb").read() for p in paths] + [
    add_model("float32", [1, 2, 3, 4], [4], activation="RELU"), cast_model("float32", "int64", [1999]),
    chain_model(["uint8", "float32", ("add", 0.5), "float16", "int8"], (7, 31)),
    add_model("int8", [33], [33], quant=((0.05, 3), (0.07, -9), (0.11, 1)))]
n, checked, bad = int(sys.argv[2]), 0, []
refs = {}
d = litecl.Delegate(sys.argv[1], quiet=True)
for i in range(n):
    m = models[i % len(models)]
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    det = it.get_input_details()
    xs = list(random_inputs(det, seed=i % 7).values())
    for dd, x in zip(det, xs):
        it.set_tensor(dd["index"], x)
    it.invoke()
    got = [it.get_tensor(o["index"]) for o in it.get_output_details()]
    k = (i % len(models), i % 7)
    if k not in refs:
        ref = make_interpreter(m)
        ref.allocate_tensors()
        for dd, x in zip(ref.get_input_details(), xs):
            ref.set_tensor(dd["index"], x)
        ref.invoke()
        refs[k] = [ref.get_tensor(o["index"]) for o in ref.get_output_details()]
    checked += 1
    if any(g.shape != w.shape or mismatches(g, w).any() for g, w in zip(got, refs[k])):
        bad.append(i % len(models))
    it.close()
print(json.dumps({"cycles": checked, "bad": sorted(set(bad)), "on_opencl": d.stats["partition_invokes"]}))
"""


def test_a_thousand_models_in_one_process(rusticl):
    """1,000 construct + allocate + invoke cycles of mixed models (the shared models that
    run on LiteRT's builtin kernels and four built ones) in one process on rusticl, each
    bit-exact with LiteRT (one such process crashed with SIGSEGV before the event waits)."""
    names = ["add_1d_2d_3d_4d.tflite", "rope.tflite", "simple_quantized_ops.tflite", "mixed_input_model.tflite",
             "topo_sort_fork.tflite", "tflm_add_model.tflite", "constant_output_tensor.tflite"]
    paths = [str(SHARED_MODELS / n) for n in names if (SHARED_MODELS / n).exists()]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _CYCLES, rusticl, "1000", *paths], env=env, capture_output=True,
                       text=True, timeout=1500)
    assert r.returncode == 0, (r.returncode, r.stderr[-3000:])
    got = json.loads(r.stdout.strip().splitlines()[-1])
    print(got)
    assert got["cycles"] == 1000 and not got["bad"] and got["on_opencl"] >= 1000, got


def test_the_broadcast_add_model_is_exact_every_time(rusticl):
    """add_1d_2d_3d_4d: garbage in all 24 outputs on some runs (the early clFinish): now
    bit-exact in 20 fresh processes out of 20, through the CLI."""
    m = SHARED_MODELS / "add_1d_2d_3d_4d.tflite"
    if not m.exists():
        pytest.skip(f"real model {m} is absent")
    for _ in range(20):
        r = subprocess.run([sys.executable, "-m", "litecl.cli", "compare", str(m), "--device", rusticl],
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stdout + r.stderr
