"""Regression tests for problems a first-time user found (trial of 2026-11-29)."""
from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import litecl
from conftest import DEVICE_STATUS
from litecl.compare import make_interpreter
from models.builders import add_model, cast_model


def _pack(m) -> bytes:
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


_PER_CHANNEL = """
import sys
import litecl
from ai_edge_litert import schema_py_generated as schema
from test_user_reports import _pack
from models.builders import add_model
which, device = int(sys.argv[1]), sys.argv[2]
m = schema.ModelT.InitFromPackedBuf(add_model("int8", (2, 3), (2, 3), quant=((0.1, 0), (0.1, 0), (0.2, 0))), 0)
t = [m.subgraphs[0].inputs[0], m.subgraphs[0].inputs[1], m.subgraphs[0].outputs[0]][which]
q = m.subgraphs[0].tensors[t].quantization
q.scale, q.zeroPoint, q.quantizedDimension = [0.1, 0.2, 0.3], [0, 0, 0], 1
try:
    it = litecl.Interpreter(model_content=_pack(m), device=device)
    it.allocate_tensors()
    print("no error")
except Exception as e:
    print(type(e).__name__, e)
"""


@pytest.mark.parametrize("which", [0, 1, 2])
def test_per_channel_quantized_add_is_refused_not_aborted(which, fast_device):
    """LiteRT aborts the process (SIGABRT) preparing such an ADD; litecl must refuse first.
    Run in a child process, so that an abort fails this test and not the whole run."""
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    here = Path(__file__).resolve().parent
    # the caller's PYTHONPATH too (an install that reaches litecl through it: the GPU machine's)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(here), str(here.parent), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", _PER_CHANNEL, str(which), fast_device], capture_output=True,
                       text=True, timeout=300, env=env)
    assert r.returncode == 0, f"the process died (status {r.returncode}): {r.stderr[-500:]}"
    assert r.stdout.startswith("ModelError ") and "per-channel" in r.stdout, r.stdout


def test_input_with_constant_data_is_refused():
    m = schema.ModelT.InitFromPackedBuf(cast_model("float32", "int8", [4]), 0)
    sg = m.subgraphs[0]
    buf = schema.BufferT()
    buf.data = np.arange(4, dtype=np.float32).view(np.uint8)
    m.buffers.append(buf)
    sg.tensors[sg.inputs[0]].buffer = len(m.buffers) - 1
    with pytest.raises(litecl.ModelError, match="constant data"):
        litecl.Interpreter(model_content=_pack(m), device="intel")


def test_a_device_that_cannot_build_leaves_the_nodes_to_litert(fast_device):
    """A device whose compiler fails the trivial probe kernel (PoCL 3.0 on AMD Zen 5):
    the delegate takes no node, each says why, and the model runs on LiteRT."""
    from dataclasses import replace  # noqa: PLC0415

    from litecl.device import Device  # noqa: PLC0415

    real = litecl.open_device(fast_device)
    broken = Device(real.device, real.context, real.queue,
                    replace(real.caps, compiler_error="unknown target CPU 'generic'", profile="t-broken"))
    # one warning line says so (it said nothing: a fresh user saw only the missing
    # "Replacing" line); quiet=True, as the command line passes, keeps it off
    with pytest.warns(RuntimeWarning, match=r"cannot build litecl's kernels \(unknown target CPU 'generic'\): "
                                            "every CAST/ADD node stays on LiteRT") as said:
        it = litecl.Interpreter(model_content=cast_model("float32", "int8", [4]), device=broken)
        litecl.Interpreter(model_content=cast_model("float32", "int8", [4]), device=broken)
    assert len([w for w in said if "cannot build" in str(w.message)]) == 1  # once per device
    (p,) = it.placement()
    assert p["placement"] == "litert" and "cannot build kernels (unknown target CPU 'generic')" in p["reason"]
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.array([1.5, -2.5, 300, 0], np.float32))
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]).tolist() == [1, -2, 127, 0]


@pytest.mark.parametrize("n", [-1, 0, "4", 1.5])
def test_num_threads_checked_at_construction_as_litert(n, fast_device):
    from litecl.compare import make_interpreter

    m = cast_model("float32", "int8", [4])
    with pytest.raises(ValueError) as want:
        make_interpreter(m, n)
    with pytest.raises(ValueError) as got:
        litecl.Interpreter(model_content=m, device=fast_device, num_threads=n)
    assert str(got.value) == str(want.value)


def test_tensor_accessor(fast_device):
    it = litecl.Interpreter(model_content=cast_model("int32", "float32", [3]), device=fast_device)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.array([1, -2, 3], np.int32))
    it.invoke()
    f = it.tensor(it.get_output_details()[0]["index"])
    assert f().tolist() == [1.0, -2.0, 3.0]


def test_zero_size_output_without_producer_reads_empty(fast_device):
    it = litecl.Interpreter(model_content=cast_model("float32", "int8", [0, 4]), device=fast_device)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros([0, 4], np.float32))
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]).shape == (0, 4)


def test_tensor_inside_a_partition_reads_as_litert_says(fast_device):
    """A tensor internal to a delegated partition (between two fused ADDs) has no memory
    in LiteRT: get_tensor says so (in litecl's words: LiteRT's told to allocate); with
    experimental_preserve_all_tensors every node is its own partition and it reads."""
    from models.builders import chain_model

    m = chain_model(["float32", ("add", 2.0), ("add", 3.0), "float16"], [4])
    for preserve, partitions in ((False, 1), (True, 3)):
        it = litecl.Interpreter(model_content=m, device=fast_device, experimental_preserve_all_tensors=preserve)
        assert it.delegate.graph_info()[0]["partitions"] == partitions
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.ones(4, np.float32))
        it.invoke()
        inner = next(d["index"] for d in it.get_tensor_details() if d["name"] == "t1_add")
        if preserve:
            assert it.get_tensor(inner).tolist() == [3.0] * 4
            assert it.tensor(inner)().tolist() == [3.0] * 4
        else:
            with pytest.raises(ValueError, match="has no data: a node litecl runs on OpenCL writes it inside"):
                it.get_tensor(inner)  # LiteRT said "Tensor data is null. Run allocate_tensors() first"
            with pytest.raises(ValueError, match="has no data: a node litecl runs on OpenCL writes it inside"):
                it.tensor(inner)()  # so did tensor()'s view (a fresh user's report)
        assert it.tensor(it.get_output_details()[0]["index"])().tolist() == [6.0] * 4
        assert (it.get_tensor(it.get_output_details()[0]["index"]) == 6).all()


def test_a_tensor_read_before_allocate_gets_litert_s_words(fast_device):
    """get_tensor of the output (and of an inner tensor) before allocate_tensors: LiteRT's
    "Tensor data is null. Run allocate_tensors() first", as LiteRT alone says; litecl's
    "inside its partition" words (whose advice does not help there) were given for the
    graph's output (a fresh user's report)."""
    from litecl.compare import make_interpreter
    from models.builders import chain_model

    m = chain_model(["float32", ("add", 2.0), ("add", 3.0), "float16"], [4])
    it, ref = litecl.Interpreter(model_content=m, device=fast_device), make_interpreter(m)
    for name in ("t1_add", None):
        idx = [next(d["index"] for d in x.get_tensor_details() if d["name"] == name) if name
               else x.get_output_details()[0]["index"] for x in (it, ref)]
        with pytest.raises(ValueError) as theirs:
            ref.get_tensor(idx[1])
        with pytest.raises(ValueError) as ours:
            it.get_tensor(idx[0])
        assert str(ours.value) == str(theirs.value) and "allocate_tensors" in str(ours.value)


def test_add_reading_a_variable_tensor_stays_on_litert(fast_device):
    from litecl.compare import bit_equal, make_interpreter

    m = schema.ModelT.InitFromPackedBuf(add_model("float32", [3], [3]), 0)
    sg = m.subgraphs[0]
    var = sg.inputs[1]
    sg.tensors[var].isVariable = True
    sg.inputs = [sg.inputs[0]]
    m.signatureDefs = []
    content = _pack(m)
    it = litecl.Interpreter(model_content=content, device=fast_device)
    p = it.placement()[0]
    assert p["placement"] == "litert" and "variable" in p["reason"]
    it.allocate_tensors()
    ref = make_interpreter(content)
    ref.allocate_tensors()
    x = np.array([1.5, -2.0, 3.0], np.float32)
    for _ in range(2):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        ref.set_tensor(ref.get_input_details()[0]["index"], x)
        ref.invoke()
        assert bit_equal(it.get_tensor(it.get_output_details()[0]["index"]),
                         ref.get_tensor(ref.get_output_details()[0]["index"]))


@pytest.mark.parametrize("n", [-1, 0, 1, 2, True])
def test_num_threads_accepts_what_litert_accepts(n, fast_device):
    """ai-edge-litert 2.3.0 refuses num_threads -1 and 0 ("should >= 1"); litecl.Interpreter
    passes the value on to LiteRT, which runs the MUL."""
    from litecl.compare import make_interpreter
    from models.builders import multi_op_model

    m = multi_op_model("cast_mul_cast")
    try:
        make_interpreter(m, n).allocate_tensors()
        litert_ok = True
    except ValueError:
        litert_ok = False
    try:
        it = litecl.Interpreter(model_content=m, device=fast_device, num_threads=n)
        it.allocate_tensors()
        ours = True
    except ValueError:
        ours = False
    assert ours == litert_ok, (n, litert_ok)


def test_node_writing_its_own_input_is_refused():
    # LiteRT refuses it at allocate ("Tensor 0 is both input 0 and output 0"); litecl at load
    m = schema.ModelT.InitFromPackedBuf(add_model("float32", (4,), (4,)), 0)
    op = m.subgraphs[0].operators[0]
    op.outputs = [op.inputs[0]]
    m.subgraphs[0].outputs = [op.inputs[0]]
    with pytest.raises(litecl.ModelError, match="both an input and an output"):
        litecl.Interpreter(model_content=_pack(m), device="intel")


def test_devices_marks_runtimes_that_cannot_build():
    import json
    import subprocess
    import sys

    from litecl.device import _all_devices, probe_compiler

    r = subprocess.run([sys.executable, "-m", "litecl.cli", "devices", "--json"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    want = [probe_compiler(d) for d in _all_devices()]
    assert [row["build_error"] for row in rows] == want
    assert [row["builds_kernels"] for row in rows] == [not e for e in want]
    text = subprocess.run([sys.executable, "-m", "litecl.cli", "devices"], capture_output=True,
                          text=True, timeout=300).stdout.splitlines()
    rows = text[1:1 + len(want)]  # a header line, then one line per device
    assert [("CANNOT BUILD KERNELS" in ln) for ln in rows] == [bool(e) for e in want]


def test_compare_checks_bool_bytes_and_nan_signs():
    from litecl.compare import bit_equal, mismatches

    a = np.array([0, 1, 1], np.uint8).view(np.bool_)
    b = np.array([0, 1, 255], np.uint8).view(np.bool_)  # same truth values, other byte
    assert mismatches(a, b).tolist() == [False, False, True]
    x = np.array([np.nan, -np.nan, 1.0], np.float32)
    y = np.array([np.float32(np.nan), np.uint32(0x7FC00001).view(np.float32), 1.0], np.float32)
    assert mismatches(x, y).tolist() == [False, True, False]  # payload ignored, sign not
    assert bit_equal(x[:1], np.uint32([0x7FFFFFFF]).view(np.float32))
    z = np.array([-0.0], np.float32)
    assert not bit_equal(z, np.zeros(1, np.float32))


def test_litert_api_parity_details(fast_device, shared_models):
    """Second trial's API findings: num_subgraphs, get_tensor_details(subgraph_index), 0-d
    tensors as numpy scalars, tensor() copies that refuse writes."""
    from litecl.compare import make_interpreter

    m = (shared_models / "multi_signature_model.tflite").read_bytes()
    it, ref = litecl.Interpreter(model_content=m, device=fast_device), make_interpreter(m)
    it.allocate_tensors()
    ref.allocate_tensors()
    assert it.num_subgraphs() == ref.num_subgraphs()
    for si in range(ref.num_subgraphs()):
        assert [d["name"] for d in it.get_tensor_details(subgraph_index=si)] == \
            [d["name"] for d in ref.get_tensor_details(subgraph_index=si)]
    m0 = add_model("float32", (), ())
    it, ref = litecl.Interpreter(model_content=m0, device=fast_device), make_interpreter(m0)
    for x in (it, ref):
        x.allocate_tensors()
        for d in x.get_input_details():
            x.set_tensor(d["index"], np.array(1.5, np.float32))
        x.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    want = ref.get_tensor(ref.get_output_details()[0]["index"])
    assert type(got) is type(want) and got == want == np.float32(3.0)
    view = it.tensor(it.get_input_details()[0]["index"])()  # 0-d: a numpy scalar, as LiteRT's
    want_view = ref.tensor(ref.get_input_details()[0]["index"])()
    assert type(view) is type(want_view) is np.float32 and view == want_view == 1.5


def test_zero_element_add_has_no_division_by_zero():
    from litecl.ops.add import add_kernel, nan_rule

    assert nan_rule((0, 128, 4), (0, 128, 4)) == "a"
    caps = litecl.open_device("oclgrind").caps if not DEVICE_STATUS.get("oclgrind") else None
    if caps is not None:
        assert "% (uint" not in add_kernel("float32", (0, 128, 4), (0, 128, 4), "NONE", caps)


def test_empty_broadcast_add_has_no_modulo_by_zero(fast_device):
    """A broadcast ADD whose output has a 0 dimension ((3, 0, 2) + (3, 1, 2)) reads
    nothing: its kernel computes no coordinates (was ``r_ % 0u``, a compiler warning, found
    by a fresh user); a non-empty one still does."""
    from litecl.ops.add import add_kernel

    caps = litecl.open_device(fast_device).caps
    for dt in ("float32", "int32"):
        src = add_kernel(dt, (3, 0, 2), (3, 1, 2), "NONE", caps)
        assert "% 0u" not in src and "/= 0u" not in src, src
        assert "r_ %" in add_kernel(dt, (3, 4, 2), (3, 1, 2), "NONE", caps)
        # and it runs on OpenCL as LiteRT does: an empty output of the same shape and type
        m = add_model(dt, (3, 0, 2), (3, 1, 2))
        it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
        assert [r["placement"] for r in it.placement()] == ["opencl"]
        ref = make_interpreter(m)
        got, want = [], []
        for x, out in ((it, got), (ref, want)):
            x.allocate_tensors()
            x.set_tensor(x.get_input_details()[0]["index"], np.zeros((3, 0, 2), dt))
            x.set_tensor(x.get_input_details()[1]["index"], np.ones((3, 1, 2), dt))
            x.invoke()
            out.append(x.get_tensor(x.get_output_details()[0]["index"]))
        assert got[0].shape == want[0].shape == (3, 0, 2) and got[0].dtype == want[0].dtype


def test_litert_invoke_errors_name_the_models_node(fast_device):
    """A GATHER with an index out of bounds fails inside LiteRT at invoke: the
    RuntimeError names the model's node (1), beside the delegate's partition."""
    from models.builders import _Graph

    g = _Graph()
    x = g.tensor("x", "float32", [4])
    idx = g.tensor("idx", "int32", [2])
    g.inputs += [x, idx]
    c = g.cast(x, "int32", "xi")
    y = g.tensor("y", "int32", [2])
    opts = schema.GatherOptionsT()
    opts.axis = 0
    g.op(schema.BuiltinOperator.GATHER, [c, idx], [y], options_type=schema.BuiltinOptions.GatherOptions,
         options=opts)
    g.outputs = [y]
    m = g.finish()
    it = litecl.Interpreter(model_content=m, device=fast_device)
    assert [(p["index"], p["placement"]) for p in it.placement()] == [(0, "opencl")]  # GATHER is LiteRT's
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.arange(4, dtype=np.float32))
    it.set_tensor(it.get_input_details()[1]["index"], np.array([1, 9], np.int32))
    with pytest.raises(RuntimeError, match=r"Node number 1 \(GATHER\)"):
        it.invoke()


def test_big_endian_inputs_as_litert(fast_device):
    """set_tensor is LiteRT's: a big-endian float32 array is taken as LiteRT takes it (its
    bytes), a float64 one refused with LiteRT's message. (The command line reads .npz
    inputs by value: test_cli_more.)"""
    from litecl.compare import bit_equal, make_interpreter

    m = add_model("float32", (4,), (4,))
    x = np.arange(4, dtype=np.float32)
    outs, errors = [], []
    for it in (litecl.Interpreter(model_content=m, device=fast_device), make_interpreter(m)):
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], x.astype(">f4"))
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
        with pytest.raises(ValueError) as e:
            it.set_tensor(it.get_input_details()[0]["index"], x.astype(">f8"))
        errors.append(str(e.value))
    assert bit_equal(outs[0], outs[1]) and errors[0] == errors[1]
