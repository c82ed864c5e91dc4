"""Model reading, partition and sub-model fallback (no numerics beyond equality)."""
from __future__ import annotations

import numpy as np
import pytest

import litecl
from litecl.compare import bit_equal, random_inputs, run_reference
from litecl.fallback import build_submodel, make_interpreter
from litecl.model import load_model
from models.builders import add_model, cast_model, chain_model, multi_op_model

from conftest import shared_model, tf_model


# ----------------------------------------------------------------------------- reading
def test_reads_real_model_structure(shared_models):
    m = load_model(shared_model("lyra_quantizer.tflite"))
    assert len(m.subgraphs) == 2
    assert {s.key for s in m.signatures} == {"encode", "decode"}
    ops = [n.op for sg in m.subgraphs for n in sg.nodes]
    assert ops.count("CAST") == 3 and ops.count("ADD") == 91
    cast = next(n for sg in m.subgraphs for n in sg.nodes if n.op == "CAST")
    sg = m.subgraphs[0]
    assert sg.tensors[cast.inputs[0]].dtype is not None


def _same(a, b, where=""):
    """Deep equality of parsed models: numpy arrays by dtype, shape and bytes, objects by
    type and attributes (Model's caches left out)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape, where
        assert (a.tolist() == b.tolist()) if a.dtype == object else a.tobytes() == b.tobytes(), where
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif hasattr(a, "__dict__"):
        assert type(a) is type(b), (where, type(a), type(b))
        va, vb = ({k: v for k, v in vars(x).items() if k not in ("_obj", "_sha256", "_consts")} for x in (a, b))
        _same(va, vb, where)
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def test_fast_reader_parses_as_the_object_api_does(shared_models):
    """load_model reads the fields it validates with reader.read_model instead of the
    object API's ModelT (fast start): both give equal Models, options objects included."""
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    from litecl import model as mod  # noqa: PLC0415

    blobs = [multi_op_model(), add_model("int8", [2, 3], [3], quant=((0.5, 1), (0.25, -2), (1.0, 3))), cast_model("float32", "int8", [5])]
    blobs += [p.read_bytes() for p in sorted(shared_models.glob("*.tflite"))]
    for raw in blobs:
        m = load_model(model_content=raw)
        _same(m, mod._validate(raw, schema.ModelT.InitFromPackedBuf(raw, 0), "model_content"))
        assert isinstance(m.obj, schema.ModelT)  # unpacked on demand for fallback packing


def test_reads_quantization_and_constants(shared_models):
    m = load_model(shared_model("movenet_singlepose_lightning_int8.tflite"))
    sg = m.subgraphs[0]
    adds = [n for n in sg.nodes if n.op == "ADD"]
    assert len(adds) == 19
    t = sg.tensors[adds[0].outputs[0]]
    assert t.dtype.name == "int8" and t.scales.size == 1
    consts = [t for t in sg.tensors if t.is_constant]
    assert consts and all(c.data.shape == c.shape for c in consts)


def test_builtin_code_is_max_of_deprecated_and_new():
    m = load_model(model_content=add_model("float32", [2], [2]))
    assert m.subgraphs[0].nodes[0].op == "ADD"
    m.obj.operatorCodes[0].deprecatedBuiltinCode = 0  # new-style file: only builtinCode set
    assert max(m.obj.operatorCodes[0].builtinCode, 0) == 0  # ADD's code is 0 either way


@pytest.mark.parametrize("blob,match", [
    (b"", "empty"),
    (b"hello world, not a model at all", "not a TFLite model"),
    (b"\x00" * 8, "too short"),
    (b"\x10\x00\x00\x00TFL3" + b"\x00" * 8, "corrupt"),
    (b"\xff\xff\xff\x00TFL3" + b"\x00" * 64, "corrupt"),
])
def test_bad_bytes_raise_model_error(blob, match):
    with pytest.raises(litecl.ModelError, match=match):
        load_model(model_content=blob)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(litecl.ModelError, match="not found"):
        litecl.Interpreter(model_path=tmp_path / "nope.tflite")
    with pytest.raises(litecl.ModelError, match="directory"):
        litecl.Interpreter(model_path=tmp_path)


def test_truncated_model_raises():
    m = add_model("float32", [4], [4])
    for cut in (12, 40, len(m) // 2, len(m) - 8):
        with pytest.raises(litecl.ModelError):
            load_model(model_content=m[:cut])


def test_model_error_is_valueerror():
    assert issubclass(litecl.ModelError, ValueError)


# ----------------------------------------------------------------------------- partition
def test_placement_reasons_and_summary(fast_device):
    it = litecl.Interpreter(model_content=multi_op_model("cast_mul_cast"), device=fast_device)
    pl = it.placement()
    assert [p["op"] for p in pl] == ["CAST", "MUL", "ADD", "CAST"]
    assert [p["placement"] for p in pl] == ["opencl", "fallback", "opencl", "opencl"]
    assert pl[1]["reason"] == "not a lowered operator"
    assert set(pl[0]) == {"subgraph", "index", "op", "placement", "reason"}
    s = it.summary()
    assert "MUL: not a lowered operator" in s
    assert s[-1] == ("Replacing 3 out of 4 node(s) with delegate (litecl OpenCL) node, "
                     "yielding 2 partitions for the whole graph.")


def test_rope_casts_on_opencl(shared_models, fast_device):
    it = litecl.Interpreter(model_path=shared_model("rope.tflite"), device=fast_device)
    pl = it.placement()
    assert all(p["placement"] == "opencl" for p in pl if p["op"] in ("CAST", "ADD"))
    assert all(p["placement"] == "fallback" and p["reason"] for p in pl if p["op"] not in ("CAST", "ADD"))


def test_topological_grouping_reduces_partitions(shared_models, fast_device):
    # interleaved ADD/MUL chains: grouping independent nodes by placement merges segments
    it = litecl.Interpreter(model_path=shared_model("topo_sort_interleaved.tflite"), device=fast_device)
    segs = it._main.ex.segments
    file_order_runs = 1
    ps = {p["index"]: p["placement"] for p in it.placement()}
    for i in range(1, len(ps)):
        file_order_runs += ps[i] != ps[i - 1]
    assert len(segs) <= file_order_runs
    order = [p["index"] for p in it.placement()]
    assert sorted(order) == list(range(len(ps)))


def test_unsupported_reason_for_fp64_free_int64_profile(fast_device):
    it = litecl.Interpreter(model_content=cast_model("int64", "float32", [4]),
                            device=f"{fast_device}:profile=noint64")
    p = it.placement()[0]
    assert p["placement"] == "fallback" and "64-bit integers" in p["reason"]
    it.allocate_tensors()
    x = np.array([1, -2, 2**40, -(2**62)], np.int64)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    assert bit_equal(it.get_tensor(it.get_output_details()[0]["index"]), x.astype(np.float32))


# ----------------------------------------------------------------------------- fallback
def test_submodel_is_valid_litert_model(shared_models):
    m = load_model(shared_model("rope.tflite"))
    sg = m.subgraphs[0]
    nodes = [n.index for n in sg.nodes if n.op in ("SIN", "COS")]
    ins = [sg.nodes[i].inputs[0] for i in nodes]
    outs = [sg.nodes[i].outputs[0] for i in nodes]
    sub = build_submodel(m, 0, nodes, list(dict.fromkeys(ins)), outs)
    interp = make_interpreter(sub)
    interp.allocate_tensors()
    x = np.linspace(-3, 3, int(np.prod(sg.tensors[ins[0]].shape)), dtype=np.float32).reshape(sg.tensors[ins[0]].shape)
    interp.set_tensor(interp.get_input_details()[0]["index"], x)
    interp.invoke()
    got = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    assert bit_equal(got[0], np.sin(x)) or np.allclose(got[0], np.sin(x), atol=1e-6)


def _compare_model(path_or_bytes, device, signature=None, seed=0):
    kw = {"model_path": path_or_bytes} if not isinstance(path_or_bytes, bytes) else {"model_content": path_or_bytes}
    it = litecl.Interpreter(device=device, **kw)
    if signature:
        r = it.get_signature_runner(signature)
        details = [dict(d, name=k) for k, d in r.get_input_details().items()]
        inputs = random_inputs(details, seed)
        got = r(**inputs)
    else:
        it.allocate_tensors()
        inputs = random_inputs(it.get_input_details(), seed)
        for d in it.get_input_details():
            it.set_tensor(d["index"], inputs[d["name"]])
        it.invoke()
        got = {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}
    want = run_reference(it._model.raw, inputs, signature)
    assert set(got) == set(want)
    for k in want:
        assert bit_equal(got[k], want[k]), k
    return it


@pytest.mark.parametrize("sig", ["add", "mul", "sub"])
def test_multi_signature_runner(shared_models, fast_device, sig):
    it = _compare_model(shared_model("multi_signature_model.tflite"), fast_device, sig)
    assert it.get_signature_list() == make_interpreter(it._model.raw).get_signature_list()


@pytest.mark.parametrize("sig", ["encode", "decode"])
def test_multi_subgraph_lyra(shared_models, fast_device, sig):
    it = _compare_model(shared_model("lyra_quantizer.tflite"), fast_device, sig)
    pl = [p for p in it.placement() if p["op"] == "CAST"]
    assert len(pl) == 3 and all(p["placement"] == "opencl" for p in pl)


def test_dynamic_shape_resize(shared_models, fast_device):
    path = shared_model("simple_add_dynamic_shape.tflite")
    it = litecl.Interpreter(model_path=path, device=fast_device)
    ref = make_interpreter(open(path, "rb").read())
    for batch in (1, 3, 7):
        for interp in (it, ref):
            for d in interp.get_input_details():
                interp.resize_tensor_input(d["index"], [batch, 128, 4], strict=True)
            interp.allocate_tensors()
        rng = np.random.default_rng(batch)
        for d in it.get_input_details():
            v = rng.standard_normal([batch, 128, 4]).astype(np.float32)
            it.set_tensor(d["index"], v)
            ref.set_tensor(d["index"], v)
        it.invoke()
        ref.invoke()
        o = it.get_output_details()[0]
        assert tuple(o["shape"]) == (batch, 128, 4)
        assert bit_equal(it.get_tensor(o["index"]), ref.get_tensor(ref.get_output_details()[0]["index"]))


def test_strict_resize_refuses_static_dims(shared_models, fast_device):
    it = litecl.Interpreter(model_path=shared_model("simple_add_dynamic_shape.tflite"), device=fast_device)
    with pytest.raises(litecl.InputError, match="shape_signature"):
        it.resize_tensor_input(it.get_input_details()[0]["index"], [2, 64, 4], strict=True)


@pytest.mark.parametrize("name", [
    "add_1d_2d_3d_4d.tflite", "constant_output_tensor.tflite", "island_partial.tflite",
    "mixed_input_model.tflite", "topo_sort_fork.tflite", "topo_sort_interleaved.tflite",
    "tflm_add_model_float.tflite", "frontend_sl_v1.tflite", "recommendation_cnn_i10i32o100.tflite",
    "rope.tflite", "movenet_singlepose_lightning_int8.tflite",
])
def test_real_models_equal_litert(shared_models, fast_device, name):
    it = _compare_model(shared_model(name), fast_device)
    assert all(p["placement"] == "opencl" for p in it.placement() if p["op"] == "CAST")


def test_control_flow_stays_in_one_fallback_segment(fast_device):
    m = tf_model("while_cast")
    it = litecl.Interpreter(model_content=m, device=fast_device)
    assert len(it._model.subgraphs) >= 3
    pl = it.placement()
    assert any(p["op"] == "WHILE" and p["placement"] == "fallback" for p in pl)
    assert any(p["subgraph"] > 0 and "control flow" in p["reason"] for p in pl)
    assert [p["placement"] for p in pl if p["op"] == "CAST" and p["subgraph"] == 0] == ["opencl", "opencl"]
    it.allocate_tensors()
    x = np.array([1.5, -2.7, 3e9, np.nan, -0.0], np.float32)
    d = {d["name"]: d["index"] for d in it.get_input_details()}
    names = sorted(d)
    inputs = {names[0]: x, names[1]: np.array(4, np.int32)} if "x" in names[0] else {names[0]: np.array(4, np.int32), names[1]: x}
    for k, v in inputs.items():
        it.set_tensor(d[k], v)
    it.invoke()
    want = run_reference(m, inputs)
    got = {o["name"]: it.get_tensor(o["index"]) for o in it.get_output_details()}
    for k in want:
        assert bit_equal(got[k], want[k])


def test_resource_variables_keep_state_in_one_segment(fast_device):
    m = tf_model("variable_cast")
    it = litecl.Interpreter(model_content=m, device=fast_device)
    ops = [p["op"] for p in it.placement()]
    assert "ASSIGN_VARIABLE" in ops or "VAR_HANDLE" in ops
    it.allocate_tensors()
    idx = it.get_input_details()[0]["index"]
    out = it.get_output_details()[0]["index"]
    ref = make_interpreter(m)
    ref.allocate_tensors()
    for k in range(5):
        if k == 3:  # LiteRT's reset_all_variables, on both
            it.reset_all_variables()
            ref.reset_all_variables()
        x = np.array([1, 2, 3, -4], np.int32) * (k + 1)
        it.set_tensor(idx, x)
        it.invoke()
        ref.set_tensor(ref.get_input_details()[0]["index"], x)
        ref.invoke()
        assert bit_equal(it.get_tensor(out), ref.get_tensor(ref.get_output_details()[0]["index"]))
    # (resource variables are not variable tensors: LiteRT's reset keeps them, and so does litecl)


def test_chain_tensors_stay_on_device(fast_device):
    m = chain_model(["uint8", "float32", ("add", 1.0), "float16"], [64])
    it = litecl.Interpreter(model_content=m, device=fast_device)
    assert all(p["placement"] == "opencl" for p in it.placement())
    it.allocate_tensors()
    d = it.get_input_details()[0]
    x = (np.arange(64) % 200).astype(d["dtype"])
    it.set_tensor(d["index"], x)
    it.invoke()
    ex = it._main.ex
    # the intermediates were never copied to the host
    inter = [t for t in range(len(ex.sg.tensors)) if t not in ex.sg.inputs and t not in ex.sg.outputs]
    assert not any(t in ex.on_host for t in inter)
    want = run_reference(m, {d["name"]: x})
    o = it.get_output_details()[0]
    assert bit_equal(it.get_tensor(o["index"]), want[o["name"]])


@pytest.mark.parametrize("op,version,lowered", [("CAST", 9, True), ("CAST", 10, False),
                                                ("ADD", 6, True), ("ADD", 7, False)])
def test_newer_operator_versions_fall_back(op, version, lowered, fast_device):
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    from models.builders import add_model, cast_model

    m = schema.ModelT.InitFromPackedBuf(cast_model("float32", "int32", [4]) if op == "CAST"
                                        else add_model("float32", [4], [4]), 0)
    for oc in m.operatorCodes:
        oc.version = version
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    it = litecl.Interpreter(model_content=bytes(b.Output()), device=fast_device)
    (p,) = it.placement()
    assert (p["placement"] == "opencl") == lowered, p
    if not lowered:
        assert f"version {version} is newer" in p["reason"]
