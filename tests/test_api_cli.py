"""The Interpreter API (LiteRT's names and detail-dict keys) and the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import litecl
from litecl.compare import make_interpreter
from models.builders import add_model, cast_model, multi_op_model

from conftest import shared_model

CLI = [sys.executable, "-m", "litecl.cli"]


def test_detail_dicts_match_litert(shared_models, fast_device):
    path = shared_model("movenet_singlepose_lightning_int8.tflite")
    it = litecl.Interpreter(model_path=path, device=fast_device)
    ref = make_interpreter(open(path, "rb").read())
    it.allocate_tensors()
    ref.allocate_tensors()
    for ours, theirs in ((it.get_input_details(), ref.get_input_details()),
                         (it.get_output_details(), ref.get_output_details())):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert set(a) == set(b)
            for k in ("name", "index", "dtype", "quantization"):
                assert a[k] == b[k], k
            for k in ("shape", "shape_signature"):
                assert np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype
            qa, qb = a["quantization_parameters"], b["quantization_parameters"]
            assert set(qa) == set(qb)
            assert np.array_equal(qa["scales"], qb["scales"])
            assert np.array_equal(qa["zero_points"], qb["zero_points"])


def _same_error(ours, theirs):
    """Both calls raise; litecl's error is LiteRT's type (or a subclass) with LiteRT's
    message (litecl.Interpreter's API is LiteRT's own)."""
    with pytest.raises(Exception) as want:
        theirs()
    with pytest.raises(Exception) as got:
        ours()
    assert isinstance(got.value, type(want.value)), (got.value, want.value)
    assert str(got.value) == str(want.value)
    return got.value


def _pair(device, model):
    ours = litecl.Interpreter(model_content=model, device=device)
    theirs = make_interpreter(model)
    return ours, theirs


def test_set_tensor_errors_are_litert_s(fast_device):
    ours, theirs = _pair(fast_device, cast_model("float32", "int8", [2, 3]))
    for it in (ours, theirs):
        it.allocate_tensors()
    idx = theirs.get_input_details()[0]["index"]
    out = theirs.get_output_details()[0]["index"]
    for index, value in ((idx, np.zeros([2, 3], np.int32)), (idx, np.zeros([3, 2], np.float32)),
                         (99, np.zeros([2, 3], np.float32))):
        e = _same_error(lambda: ours.set_tensor(index, value), lambda: theirs.set_tensor(index, value))
        assert isinstance(e, ValueError)
    # LiteRT lets set_tensor write an output tensor; so does litecl.Interpreter
    ours.set_tensor(out, np.ones([2, 3], np.int8))
    theirs.set_tensor(out, np.ones([2, 3], np.int8))


def test_invoke_before_allocate_is_litert_s_error(fast_device):
    ours, theirs = _pair(fast_device, cast_model("float32", "int8", [4]))
    e = _same_error(ours.invoke, theirs.invoke)
    assert isinstance(e, RuntimeError) and "not ready" in str(e)
    # litecl's type (a ValueError too), LiteRT's words (was LiteRT's bare RuntimeError: the
    # exported NotAllocatedError was never raised, found by a fresh user)
    assert isinstance(e, litecl.NotAllocatedError) and isinstance(e, ValueError)


def test_signature_runner_errors(shared_models, fast_device):
    m = shared_model("multi_signature_model.tflite").read_bytes()
    ours, theirs = _pair(fast_device, m)
    _same_error(ours.get_signature_runner, theirs.get_signature_runner)
    _same_error(lambda: ours.get_signature_runner("nope"), lambda: theirs.get_signature_runner("nope"))
    r, t = ours.get_signature_runner("add"), theirs.get_signature_runner("add")
    _same_error(lambda: r(a=np.zeros([10, 10], np.float32)), lambda: t(a=np.zeros([10, 10], np.float32)))
    bad = {"a": np.zeros([10, 10], np.float64), "b": np.zeros([10, 10], np.float32)}
    _same_error(lambda: r(**bad), lambda: t(**bad))
    out = r(a=np.ones([10, 10], np.float32), b=np.full([10, 10], 2, np.float32))
    assert set(out) == {"output"} and (out["output"] == 3).all()
    # the ADD of signature "add" ran in litecl's delegate
    assert [(p["subgraph"], p["op"], p["placement"]) for p in ours.placement()] == [(0, "ADD", "opencl")]


def test_bad_device_spec():
    with pytest.raises(litecl.DeviceError, match="no OpenCL device matches"):
        litecl.open_device("no-such-device-xyz")
    with pytest.raises(litecl.DeviceError, match="unknown profile"):
        litecl.open_device("intel:profile=nope")
    with pytest.raises(litecl.DeviceError, match="bad device option"):
        litecl.open_device("intel:foo=bar")


def test_device_caps_are_data(fast_device):
    d = litecl.open_device(fast_device)
    assert d.caps.compute_units >= 1 and d.caps.max_work_group_size >= 1
    m = litecl.open_device(fast_device + ":profile=mobile")
    assert not m.caps.fp16 and not m.caps.fp64 and m.caps.strict_compiler
    with pytest.raises(Exception):
        m.caps.fp16 = True  # frozen


def test_context_manager_and_close(fast_device):
    with litecl.Interpreter(model_content=cast_model("int32", "float32", [3]), device=fast_device) as it:
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.array([1, 2, 3], np.int32))
        it.invoke()
        assert it.get_tensor(it.get_output_details()[0]["index"]).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(litecl.LiteclError, match="closed"):
        it.invoke()


# ----------------------------------------------------------------------------- CLI
def run_cli(*args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run(CLI + list(args), capture_output=True, text=True, env=e, timeout=600)


def test_cli_devices_json():
    r = run_cli("devices", "--json")
    assert r.returncode == 0, r.stderr
    devs = json.loads(r.stdout)
    assert devs and {"platform", "name", "fp16", "fp64", "compute_units"} <= set(devs[0])


def test_cli_inspect(fast_device, tmp_path):
    """cast_mul_cast: CAST, MUL, ADD, CAST; the delegate takes the three CAST/ADD nodes
    in two partitions (LiteRT keeps the MUL between them)."""
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model("cast_mul_cast"))
    r = run_cli("inspect", str(p), "--device", fast_device)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # the delegate's own INFO line is the summary on stdout
    assert ("subgraph 0: Replacing 3 out of 4 node(s) with delegate (litecl OpenCL) node, "
            "yielding 2 partitions.") in r.stdout
    assert "Following operations are not supported" not in r.stdout  # MUL is not litecl's to take
    r = run_cli("inspect", str(p), "--device", fast_device, "--json")
    rep = json.loads(r.stdout)
    assert [(n["index"], n["op"], n["placement"], n["partition"]) for n in rep["nodes"]] == \
        [(0, "CAST", "opencl", 0), (2, "ADD", "opencl", 1), (3, "CAST", "opencl", 1)]
    assert rep["graphs"] == [{"subgraph": 0, "nodes": 4, "claimed": 3, "partitions": 2, "kept_order": False,
                              "order_dropped": []}]


def test_cli_inspect_names_what_litert_keeps(fast_device, tmp_path):
    """A node the delegate refuses (int64 on a device without 64-bit integers) is listed
    with its reason, and in TFLite's "not supported" lines."""
    p = tmp_path / "i64.tflite"
    p.write_bytes(cast_model("int64", "float16", [4]))
    r = run_cli("inspect", str(p), "--device", fast_device + ":profile=noint64")
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "reason:" in ln]
    assert len(rows) == 1 and "64-bit integers" in rows[0]
    assert "Following operations are not supported by litecl OpenCL delegate:" in r.stdout
    assert "CAST: " + rows[0].split("reason: ", 1)[1] in r.stdout
    assert "Replacing 0 out of 1 node(s)" in r.stdout
    r = run_cli("inspect", str(p), "--device", fast_device + ":profile=noint64", "--json")
    (n,) = json.loads(r.stdout)["nodes"]
    assert (n["placement"], n["partition"], n["kernel"]) == ("litert", None, None)
    assert n["reason"] == rows[0].split("reason: ", 1)[1]


def test_cli_run_and_compare_with_inputs(fast_device, tmp_path):
    p = tmp_path / "m.tflite"
    p.write_bytes(add_model("int32", [2, 3], [3], activation="RELU6"))
    inp = tmp_path / "in.npz"
    np.savez(inp, input1=np.arange(6, dtype=np.int32).reshape(2, 3) - 3,
             input2=np.array([1, 2, 2**31 - 1], np.int32))
    out = tmp_path / "out.npz"
    r = run_cli("run", str(p), "--device", fast_device, "--inputs", str(inp), "--output", str(out))
    assert r.returncode == 0, r.stderr
    with np.load(out) as z:
        assert z["output"].tolist() == [[0, 0, 0], [1, 3, 0]] or z["output"].shape == (2, 3)
    r = run_cli("compare", str(p), "--device", fast_device, "--inputs", str(inp), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["all_bit_exact"] and rep["opencl_nodes"] == 1 and rep["nodes"] == 1
    assert rep["reference"] == "builtin" and rep["partitions"] == 1


def test_cli_compare_real_model(shared_models, fast_device):
    r = run_cli("compare", str(shared_model("rope.tflite")), "--device", fast_device)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "all outputs bit-exact with LiteRT" in r.stdout


def test_cli_compare_exit_1_on_difference(fast_device, tmp_path):
    # against XNNPACK (which keeps inf where the builtin ADD clamps to FLT_MAX) it differs
    p = tmp_path / "m.tflite"
    p.write_bytes(add_model("float32", [4], [4]))
    inp = tmp_path / "in.npz"
    np.savez(inp, input1=np.array([np.inf, 1, 2, 3], np.float32), input2=np.ones(4, np.float32))
    r = run_cli("compare", str(p), "--device", fast_device, "--inputs", str(inp), "--reference", "xnnpack")
    assert r.returncode == 1, r.stdout + r.stderr
    # the mismatch names the resolver compared against and how to pick another
    assert "1 of 1 output(s) DIFFER (output) from LiteRT without the delegate (--reference xnnpack: " in r.stdout
    assert "--reference builtin or ref compares against another LiteRT resolver" in r.stdout
    r = run_cli("compare", str(p), "--device", fast_device, "--inputs", str(inp))
    assert r.returncode == 0 and "bit-exact with LiteRT without the delegate (--reference builtin" in r.stdout


@pytest.mark.parametrize("args,msg", [
    (["run", "/nonexistent/model.tflite"], "not found"),
    (["inspect", "/"], "directory"),
    (["run", "{model}", "--inputs", "/nonexistent.npz"], "inputs file not found"),
    (["run", "{model}", "--inputs", "{garbage}"], "cannot read inputs file"),
    (["run", "{model}", "--inputs", "{wrongname}"], "unknown input name"),
    (["run", "{model}", "--device", "nonexistent-dev"], "no OpenCL device matches"),
    (["kernel", "cast", "float32", "float8_e4m3fn"], "unknown tensor type"),
    (["bogus-command"], "invalid choice"),
    (["run", "{text}"], "not a TFLite model"),
])
def test_cli_errors_one_line_exit_2(tmp_path, args, msg):
    model = tmp_path / "m.tflite"
    model.write_bytes(cast_model("float32", "int8", [3]))
    garbage = tmp_path / "g.npz"
    garbage.write_bytes(b"not a zip")
    wrong = tmp_path / "w.npz"
    np.savez(wrong, nope=np.zeros(3, np.float32))
    text = tmp_path / "t.tflite"
    text.write_text("hello, this is text " * 10)
    args = [a.format(model=model, garbage=garbage, wrongname=wrong, text=text) for a in args]
    r = run_cli(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("var,cmd", [("LITECL_NO_SUPERVISOR", "run"), ("LITECL_DEBUG", "run"),
                                     ("LITECL_NO_CACHE", "run"), ("LITECL_NO_INTEL_ICD", "devices"),
                                     ("LITECL_QUIET", "run")])
def test_cli_yes_no_variable_of_another_value_is_an_error_line(tmp_path, var, cmd):
    """A yes/no variable holding no yes/no word: one error line naming it and the accepted
    values, exit 2 (it was taken as "on", silently)."""
    model = tmp_path / "m.tflite"
    model.write_bytes(cast_model("float32", "int8", [3]))
    r = run_cli(*(["run", str(model)] if cmd == "run" else ["devices"]), env={var: "maybe"})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        f"error: {var} must be one of 1, 0, true, false, yes, no, on or off (or unset), got 'maybe'"], r.stderr


def test_cli_kernel_cast_prints_chain(fast_device):
    r = run_cli("kernel", "cast", "int64", "float16", "--device", fast_device + ":profile=mobile", "--build")
    assert r.returncode == 0, r.stderr
    # the half store: vstore_half_rte on CPU rows, integer bits (litecl_f2h) on the GPU row
    assert "// chain: long -> int -> float" in r.stdout and ("vstore_half_rte" in r.stdout or "litecl_f2h_v1" in r.stdout)
    assert "built OK" in r.stdout
