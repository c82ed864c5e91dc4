"""The native delegate's staged copies (litecl_delegate.c host_copy): on copy devices every
tensor goes through pinned memory, and copies of 512 KiB and more are split over threads
(LITECL_HOST_THREADS, else the host's cores, at most 8). Checked bit for bit against
LiteRT alone with the delegate told to copy (option ``memory=copy``) on PoCL, at sizes
whose pieces end mid cache line, with 1, 3 and the default thread count; and a bad
LITECL_HOST_THREADS refused with one line at load."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from litecl.cli import main
from litecl.compare import make_interpreter, random_inputs
from models.builders import add_model, cast_model

from conftest import DEVICE_STATUS, ROOT

import sys

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_native import run_child  # noqa: E402

CC = os.environ.get("CC", "cc")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two models with tensors of 0.5-4 MB, exported for PoCL and built: {name: (model, dir)}."""
    if DEVICE_STATUS.get("pocl"):
        pytest.skip(DEVICE_STATUS["pocl"])
    import shutil

    if shutil.which(CC) is None:
        pytest.skip(f"no C compiler {CC!r} on PATH (.ci/run installs it where apt-get works)")
    tmp = tmp_path_factory.mktemp("native_staging")
    out = {}
    # 1M + 3 float32 -> float16: 4 MB in (8 pieces of 524,288.x bytes), 2 MB out;
    # ADD of 3 x 87,383 int32 against a broadcast row: 1 MB in and out, pieces of 349,532
    # bytes rounded to cache lines, the last one shorter
    for name, content in (("cast", cast_model("float32", "float16", [(1 << 20) + 3])),
                          ("add", add_model("int32", [3, 87383], [1, 87383]))):
        model = tmp / f"{name}.tflite"
        model.write_bytes(content)
        d = tmp / name
        assert main(["export", str(model), "--out", str(d), "--device", "pocl"]) == 0
        r = subprocess.run(["sh", str(d / "build.sh")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        opts = json.loads((d / "delegate_options.json").read_text())
        (d / "copy_options.json").write_text(json.dumps({**opts, "memory": "copy"}))
        ref = make_interpreter(content)
        np.savez(d / "inputs.npz", **random_inputs(ref.get_input_details(), seed=1))
        out[name] = (model, d)
    return out


@pytest.mark.parametrize("threads", ["1", "3", None])
def test_staged_copies_split_over_threads_are_bit_exact(built, threads, monkeypatch):
    if threads is None:
        monkeypatch.delenv("LITECL_HOST_THREADS", raising=False)
    else:
        monkeypatch.setenv("LITECL_HOST_THREADS", threads)
    for name, (model, d) in built.items():
        res = run_child(d / "liblitecl_delegate.so", model, d / "copy_options.json", d / "inputs.npz", 0)
        assert res.get("bit_exact") is True, (name, threads, res)
        assert [tuple(x)[2] for x in res["replacing"]] == [1], res


@pytest.mark.parametrize("value", ["0", "two", "65", "-1"])
def test_a_bad_host_threads_value_is_refused_with_one_line(built, value, monkeypatch):
    monkeypatch.setenv("LITECL_HOST_THREADS", value)
    model, d = built["add"]
    res = run_child(d / "liblitecl_delegate.so", model, d / "copy_options.json", d / "inputs.npz", 0)
    err = res.get("error", "")
    assert f'LITECL_HOST_THREADS "{value}" is not a whole number from 1 to 64' in err, res
    assert "Traceback" not in err
