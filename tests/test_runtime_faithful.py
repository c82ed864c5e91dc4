"""Issue 12: litecl as a faithful stand-in for LiteRT's runtime (TensorFlow in the same
process, run-time shapes, constants without a dense buffer, variables, execution order,
options unions, signatures). Every case is compared with LiteRT's builtin kernels."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import DEVICE_STATUS, ROOT, SHARED_MODELS

TF_FIRST = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf  # first, on purpose: it exports LLVM's symbols process-wide
    import litecl
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    dev, path = sys.argv[1], sys.argv[2]
    it = litecl.Interpreter(model_path=path, device=dev)
    it.allocate_tensors()
    ref = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        x = rng.integers(0, 255, d["shape"]).astype(d["dtype"])
        it.set_tensor(d["index"], x)
        ref.set_tensor(d["index"], x)
    it.invoke()
    ref.invoke()
    for d in it.get_output_details():
        a, b = it.get_tensor(d["index"]), ref.get_tensor(d["index"])
        assert a.tobytes() == b.tobytes(), d["name"]
    on = sum(p["placement"] == "opencl" for p in it.placement())
    assert on > 0, "nothing ran on OpenCL"
    # TensorFlow itself still works in this process
    assert float(tf.reduce_sum(tf.constant([1.0, 2.0]))) == 3.0
    print("OK", on)
""")


@pytest.mark.parametrize("dev", ["pocl", "intel", "oclgrind"])
def test_tensorflow_imported_first(dev):
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (the test extra has it)")
    if DEVICE_STATUS.get(dev):
        pytest.skip(DEVICE_STATUS[dev])
    model = SHARED_MODELS / "movenet_singlepose_lightning_int8.tflite"
    if not model.exists():
        pytest.skip(f"real model {model} is absent")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT / "tests"))
    r = subprocess.run([sys.executable, "-c", TF_FIRST, dev, str(model)], capture_output=True,
                       text=True, env=env, timeout=600)
    assert r.returncode == 0, f"rc={r.returncode}: {r.stderr[-1500:]}"
    assert r.stdout.strip().startswith("OK"), r.stdout
