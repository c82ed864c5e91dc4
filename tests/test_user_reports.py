"""Regression tests for problems a first-time user found (trial of 2026-11-29)."""
from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import litecl
from conftest import DEVICE_STATUS
from models.builders import add_model, cast_model


def _pack(m) -> bytes:
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("which", [0, 1, 2])
def test_per_channel_quantized_add_is_refused_not_aborted(which, fast_device):
    # LiteRT aborts the process (SIGABRT) preparing such an ADD; litecl must refuse first
    m = schema.ModelT.InitFromPackedBuf(add_model("int8", (2, 3), (2, 3), quant=((0.1, 0), (0.1, 0), (0.2, 0))), 0)
    t = [m.subgraphs[0].inputs[0], m.subgraphs[0].inputs[1], m.subgraphs[0].outputs[0]][which]
    q = m.subgraphs[0].tensors[t].quantization
    q.scale, q.zeroPoint, q.quantizedDimension = [0.1, 0.2, 0.3], [0, 0, 0], 1
    with pytest.raises(litecl.ModelError, match="per-channel"):
        it = litecl.Interpreter(model_content=_pack(m), device=fast_device)
        it.allocate_tensors()


def test_input_with_constant_data_is_refused():
    m = schema.ModelT.InitFromPackedBuf(cast_model("float32", "int8", [4]), 0)
    sg = m.subgraphs[0]
    buf = schema.BufferT()
    buf.data = np.arange(4, dtype=np.float32).view(np.uint8)
    m.buffers.append(buf)
    sg.tensors[sg.inputs[0]].buffer = len(m.buffers) - 1
    with pytest.raises(litecl.ModelError, match="constant data"):
        litecl.Interpreter(model_content=_pack(m), device="intel")


def test_strict_on_a_device_that_cannot_build():
    from litecl.device import _all_devices, probe_compiler

    bad = [d for d in _all_devices() if probe_compiler(d)]
    if not bad:
        pytest.skip("every OpenCL device here builds kernels: nothing to refuse")
    with pytest.raises(litecl.KernelBuildError, match="cannot build kernels"):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [4]),
                           device=bad[0].name.strip(), strict=True)


@pytest.mark.parametrize("n,msg", [(-1, ">= 1"), (0, ">= 1"), ("4", "must be an int")])
def test_num_threads_checked_at_construction(n, msg, fast_device):
    with pytest.raises(litecl.LiteclError, match=msg):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [4]), device=fast_device, num_threads=n)


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


def test_fallback_internal_tensor_message(fast_device):
    from models.builders import chain_model

    # two MULs form one fallback segment: the first MUL's output never leaves LiteRT
    m = chain_model(["float32", ("mul", 2.0), ("mul", 3.0), "float16"], [4])
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones(4, np.float32))
    it.invoke()
    ex = it._main.ex
    inner = [t for kind, f in ex._steps if kind == "f" for i in f.nodes
             for t in ex.sg.nodes[i].outputs if t not in f.outputs]
    assert len(inner) == 1
    with pytest.raises(litecl.InputError, match="internal to a LiteRT fallback segment"):
        it.get_tensor(inner[0])
    assert (it.get_tensor(it.get_output_details()[0]["index"]) == 6).all()


def test_add_reading_a_variable_tensor_falls_back(fast_device):
    from litecl.compare import bit_equal
    from litecl.fallback import make_interpreter

    m = schema.ModelT.InitFromPackedBuf(add_model("float32", [3], [3]), 0)
    sg = m.subgraphs[0]
    var = sg.inputs[1]
    sg.tensors[var].isVariable = True
    sg.inputs = [sg.inputs[0]]
    m.signatureDefs = []
    content = _pack(m)
    it = litecl.Interpreter(model_content=content, device=fast_device)
    p = it.placement()[0]
    assert p["placement"] == "fallback" and "variable" in p["reason"]
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
    """ai-edge-litert 2.3.0 refuses num_threads -1 and 0 ("should >= 1"); a model with a
    fallback node (MUL) passes the value on to LiteRT."""
    from litecl.fallback import make_interpreter
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
    except litecl.LiteclError:
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
    from litecl.fallback import make_interpreter

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


def test_fallback_invoke_errors_name_the_models_node(fast_device):
    """A GATHER with an index out of bounds fails inside LiteRT at invoke: the
    RuntimeError names the model's node (1), not the fallback sub-model's (0)."""
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
    assert [p["placement"] for p in it.placement()] == ["opencl", "fallback"]
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.arange(4, dtype=np.float32))
    it.set_tensor(it.get_input_details()[1]["index"], np.array([1, 9], np.int32))
    with pytest.raises(RuntimeError, match=r"Node number 1 \(GATHER\)"):
        it.invoke()


def test_big_endian_inputs_are_read_by_value(fast_device):
    m = add_model("float32", (4,), (4,))
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    x = np.arange(4, dtype=np.float32)
    for d in it.get_input_details():
        it.set_tensor(d["index"], x.astype(">f4"))
    it.invoke()
    assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), 2 * x)
    with pytest.raises(litecl.InputError, match="expects float32"):
        it.set_tensor(it.get_input_details()[0]["index"], x.astype(">f8"))
