"""Hardening (issue 7): the flatbuffer verifier, input errors, kernel-build fallback,
dynamic shapes, resource lifetime, threads. Fuzzing lives in test_fuzz.py."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import struct
import subprocess
import sys
import threading
import time
import tracemalloc

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

import litecl
import litecl.cli
import litecl.executor
from litecl.compare import bit_equal, random_inputs
from litecl.fallback import make_interpreter
from litecl.model import load_model
from litecl.verify import VerifyError, table_layout, verify
from models.builders import add_model, cast_model, chain_model, multi_op_model

from conftest import SHARED_MODELS, shared_model

CLI = [sys.executable, "-m", "litecl.cli"]


def _run_cli(*args):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=300)


def _one_error_line(r, match: str = "") -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    assert re.search(match, lines[0]), lines[0]
    return lines[0]


def _repack(content: bytes, edit) -> bytes:
    """The model with ``edit(ModelT)`` applied, packed again."""
    obj = schema.ModelT.InitFromPackedBuf(content, 0)
    edit(obj)
    b = flatbuffers.Builder(1024)
    b.Finish(obj.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _dynamic(content: bytes) -> bytes:
    """Every tensor of rank >= 1 gets shape_signature -1 in its first dimension."""
    def edit(obj):
        for t in obj.subgraphs[0].tensors:
            if t.shape is not None and len(t.shape) and obj.buffers[t.buffer].data is None:
                t.shapeSignature = [-1] + [int(d) for d in t.shape[1:]]
    return _repack(content, edit)


# ----------------------------------------------------------------------------- verifier
def _table_classes() -> list[str]:
    return [n for n, c in vars(schema).items()
            if isinstance(c, type) and hasattr(c, "GetRootAs") and hasattr(c, "Init")]


def test_layouts_derived_for_every_schema_table():
    """The verifier's layout comes from the generated module: every table, and as many
    fields as the schema's builder has FooAddBar functions."""
    names = _table_classes()
    assert len(names) > 150  # ~200 builtin-options tables included
    for name in names:
        fields = table_layout(name)
        adders = [f for f in vars(schema) if re.fullmatch(name + r"Add[A-Z]\w*", f)]
        assert len(fields) == len(adders), name
    tensor = {acc: (slot, kind, arg) for acc, slot, kind, arg in table_layout("Tensor")}
    assert tensor["Shape"] == (4, "scalars", 4)
    assert tensor["Name"] == (10, "string", None)
    assert tensor["Quantization"] == (12, "table", "QuantizationParameters")
    op = {acc: (slot, kind, arg) for acc, slot, kind, arg in table_layout("Operator")}
    slot, kind, (type_slot, members) = op["BuiltinOptions"]
    assert kind == "union" and type_slot == 10 and members[schema.BuiltinOptions.AddOptions] == "AddOptions"
    assert op["BuiltinOptions2"][1] == "union"


def test_verifier_accepts_real_and_built_models():
    blobs = [cast_model("float32", "int8", [3]),
             add_model("int8", [2, 3], [3], quant=((0.5, 1), (0.25, 0), (1.0, -3))),
             multi_op_model("fanout_mixed")]
    if SHARED_MODELS.is_dir():
        blobs += [p.read_bytes() for p in sorted(SHARED_MODELS.glob("*.tflite"))]
    for b in blobs:
        verify(b)


def _mutate_at(content: bytes, pos: int, value: bytes) -> bytes:
    b = bytearray(content)
    b[pos:pos + len(value)] = value
    return bytes(b)


def _first_scalar_vector(content: bytes) -> int:
    """Byte position of the length field of the first scalar vector."""
    found: list = []
    verify(content, scalars=found)
    return next(pos for pos, _, count in found if count > 1) - 4


@pytest.mark.parametrize("defect,match", [
    ("vector_length", r"vector of \d+ x \d+ bytes .* runs past the end"),
    ("string_nul", r"not NUL-terminated"),
    ("vtable", r"vtable at byte -?\d+ .* outside"),
    ("root_misaligned", r"not 4-byte aligned"),
    ("zero_offset", r"offset to \w+ is 0"),
    ("field_outside_table", r"outside its \d+-byte table"),
])
def test_verifier_names_each_defect(defect, match):
    m = cast_model("float32", "int8", [2, 3])
    root = struct.unpack_from("<I", m, 0)[0]
    vt = root - struct.unpack_from("<i", m, root)[0]
    if defect == "vector_length":
        bad = _mutate_at(m, _first_scalar_vector(m), struct.pack("<I", 0x3FFFFFFF))
    elif defect == "string_nul":
        i = m.index(b"input\x00")
        bad = _mutate_at(m, i + 5, b"X")
    elif defect == "vtable":
        bad = _mutate_at(m, root, struct.pack("<i", -(1 << 20)))
    elif defect == "root_misaligned":
        bad = _mutate_at(m, 0, struct.pack("<I", root + 2))
    elif defect == "zero_offset":  # Model.subgraphs (vtable slot 8) -> an offset of 0
        bad = _mutate_at(m, root + struct.unpack_from("<H", m, vt + 8)[0], struct.pack("<I", 0))
    else:  # Model.version's field offset pushed past the table's inline size
        bad = _mutate_at(m, vt + 4, struct.pack("<H", 0xFFF0))
    with pytest.raises(VerifyError, match=match):
        verify(bad)
    with pytest.raises(litecl.ModelError, match="corrupt model"):
        load_model(model_content=bad)


def _shared_tensor_model(n: int, distinct: bool) -> bytes:
    """A model whose subgraph lists ``n`` tensors: ``n`` offsets to one table (a
    work-multiplying file) or ``n`` tables of its own (a legitimately large file)."""
    b = flatbuffers.Builder(0)
    name = b.CreateString("t")

    def tensor():
        schema.TensorStart(b)
        if distinct:
            schema.TensorAddName(b, name)
        return schema.TensorEnd(b)

    offs = [tensor() for _ in range(n)] if distinct else [tensor()] * n
    schema.SubGraphStartTensorsVector(b, n)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    tensors = b.EndVector()
    schema.SubGraphStart(b)
    schema.SubGraphAddTensors(b, tensors)
    sg = schema.SubGraphEnd(b)
    schema.ModelStartSubgraphsVector(b, 1)
    b.PrependUOffsetTRelative(sg)
    sgs = b.EndVector()
    schema.ModelStart(b)
    schema.ModelAddVersion(b, 3)
    schema.ModelAddSubgraphs(b, sgs)
    b.Finish(schema.ModelEnd(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_work_is_capped_by_file_size():
    """200k offsets to one Tensor table (800 KB) would make the object API build 200k
    TensorT objects; the verifier refuses it at once. 20k distinct tables pass."""
    evil = _shared_tensor_model(200_000, distinct=False)
    t0 = time.perf_counter()
    with pytest.raises(VerifyError, match="more table visits than the file could hold"):
        verify(evil)
    with pytest.raises(litecl.ModelError, match="shared sub-table"):
        load_model(model_content=evil)
    assert time.perf_counter() - t0 < 5
    verify(_shared_tensor_model(20_000, distinct=True))


@pytest.mark.parametrize("blob,match", [
    (b"", "empty file"),
    (b"TFL3", "too short"),
    (b"hello, this is a text file, not a model\n" * 4, "not a TFLite model"),
    (bytes(range(256)) * 4, "not a TFLite model"),
    (b"\x10\x00\x00\x00TFL3" + b"\x00" * 8, "corrupt model"),
])
def test_bad_bytes_are_model_errors(blob, match):
    with pytest.raises(litecl.ModelError, match=match):
        litecl.Interpreter(model_content=blob, device="intel")
    assert issubclass(litecl.ModelError, ValueError)


def test_truncations_of_a_real_model_are_model_errors():
    m = cast_model("float32", "int8", [2, 3])
    for n in range(0, len(m), 7):
        with pytest.raises(litecl.ModelError):
            load_model(model_content=m[:n])


def test_model_validation_beyond_the_verifier():
    m = cast_model("float32", "int8", [2, 3])

    def set_version(obj):
        obj.version = 7

    def bad_name(obj):
        obj.subgraphs[0].tensors[0].name = b"in\xffput"

    def bad_type(obj):
        obj.subgraphs[0].tensors[0].type = 99

    def unproduced(obj):  # the output tensor is no operator's output any more
        obj.subgraphs[0].operators = []

    def nan_scale(obj):
        q = schema.QuantizationParametersT()
        q.scale, q.zeroPoint = [float("nan")], [0]
        obj.subgraphs[0].tensors[1].quantization = q

    for edit, match in ((set_version, "schema version 7, expected 3"),
                        (bad_name, "name is not UTF-8"),
                        (bad_type, "unknown type 99"),
                        (unproduced, "no input, constant, variable or operator output"),
                        (nan_scale, "scales must be positive and finite")):
        with pytest.raises(litecl.ModelError, match=match):
            load_model(model_content=_repack(m, edit))


def test_litert_abort_cases_are_errors(fast_device):
    """LiteRT 2.3.0 aborts the process (SIGABRT) on a quantized ADD whose output scale is
    too small; litecl refuses it before LiteRT sees it, when the node falls back."""
    q = ((0.01, 0), (0.01, 0), (1e-12, 0))
    m = add_model("int8", [4], [4], quant=q)
    it = litecl.Interpreter(model_content=m, device=fast_device)
    (p,) = it.placement()
    assert p["placement"] == "fallback"
    with pytest.raises(litecl.ModelError, match="LiteRT aborts"):
        it.allocate_tensors()
    it = litecl.Interpreter(model_content=_binary_model("sub", "int8", (None, _Q, _Q)), device=fast_device)
    with pytest.raises(litecl.ModelError, match=r"int8 SUB with quantization parameters on 2 of its 3"):
        it.allocate_tensors()


_Q = (0.01, 0)
_LITERT_PREPARE = """
import sys
from litecl.fallback import make_interpreter
m = make_interpreter(open(sys.argv[1], "rb").read())
try:
    m.allocate_tensors()
except Exception:
    pass
"""


def _binary_model(kind: str, dtype: str, q) -> bytes:
    from models.builders import _Graph  # noqa: PLC0415

    g = _Graph()
    a, b = g.tensor("a", dtype, [4], quant=q[0]), g.tensor("b", dtype, [4], quant=q[1])
    g.inputs += [a, b]
    g.outputs = [g.binary(kind, a, b, "y", out_quant=q[2])]
    return g.finish()


@pytest.mark.parametrize("kind,dtype,q", [
    ("add", "int8", (_Q, _Q, None)), ("add", "uint8", (None, _Q, _Q)), ("add", "int8", (_Q, _Q, _Q)),
    ("add", "int16", (_Q, _Q, None)), ("add", "int16", (None, _Q, _Q)), ("add", "int16", (None, None, None)),
    ("sub", "int8", (_Q, _Q, None)), ("sub", "int16", (None, None, None)),
    ("add", "int8", (_Q, _Q, (1e-12, 0))), ("sub", "int8", (_Q, _Q, (1e-12, 0))),
])
def test_abort_guard_matches_litert(tmp_path, kind, dtype, q):
    """fallback.litert_abort_reason says "aborts" exactly where LiteRT's Prepare kills
    the process (run in a subprocess)."""
    from litecl.fallback import litert_abort_reason  # noqa: PLC0415

    m = _binary_model(kind, dtype, q)
    p = tmp_path / "m.tflite"
    p.write_bytes(m)
    r = subprocess.run([sys.executable, "-c", _LITERT_PREPARE, str(p)], capture_output=True, timeout=120)
    sg = load_model(model_content=m).subgraphs[0]
    predicted = litert_abort_reason(sg.nodes[0], sg, {t: sg.tensors[t].shape for t in sg.nodes[0].inputs})
    assert (r.returncode < 0) == (predicted is not None), (r.returncode, predicted)


def test_cli_model_errors_one_line(tmp_path):
    cases = {"empty.tflite": b"", "text.tflite": b"just some text\n" * 20,
             "random.tflite": np.random.default_rng(0).integers(0, 256, 3000, np.uint8).tobytes(),
             "trunc.tflite": cast_model("float32", "int8", [2, 3])[:150]}
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
    for name in cases:
        _one_error_line(_run_cli("run", tmp_path / name, "--device", "intel"), r"\.tflite")
    _one_error_line(_run_cli("inspect", tmp_path / "missing.tflite"), "not found")
    _one_error_line(_run_cli("compare", tmp_path), "directory")


def test_cli_when_litert_refuses_the_model(tmp_path, fast_device):
    """An op version newer than LiteRT (and litecl) knows: the ADD falls back, LiteRT
    cannot prepare it, and run and compare say so in one line each."""
    def edit(obj):
        obj.operatorCodes[0].version = 99

    p = tmp_path / "m.tflite"
    p.write_bytes(_repack(add_model("float32", [4], [4]), edit))
    _one_error_line(_run_cli("run", p, "--device", fast_device), "version '99'")
    _one_error_line(_run_cli("compare", p, "--device", fast_device), "version '99'")


# ----------------------------------------------------------------------------- bad inputs
def test_api_input_errors_name_tensor_expected_and_given(fast_device):
    it = litecl.Interpreter(model_content=add_model("float32", [2, 3], [3]), device=fast_device)
    it.allocate_tensors()
    a, b = (d["index"] for d in it.get_input_details())
    with pytest.raises(litecl.InputError, match=r"tensor 0 \('input1'\) expects float32, got float64"):
        it.set_tensor(a, np.zeros([2, 3]))
    with pytest.raises(litecl.InputError, match=r"'input2'\) expects shape \[3\], got \[2, 3\]"):
        it.set_tensor(b, np.zeros([2, 3], np.float32))
    with pytest.raises(litecl.InputError, match=r"expects float32, got <U"):
        it.set_tensor(a, "text")
    with pytest.raises(litecl.InputError, match="tensor index must be an int, got str"):
        it.set_tensor("input1", np.zeros([2, 3], np.float32))
    it.set_tensor(a, np.zeros([2, 3], np.float32))
    with pytest.raises(litecl.InputError, match=r"input tensor 1 \('input2'\) was not set"):
        it.invoke()
    with pytest.raises(litecl.InputError, match="subgraph index 5 out of range"):
        it.get_tensor(0, subgraph_index=5)


def test_signature_runner_input_errors(shared_models, fast_device):
    it = litecl.Interpreter(model_path=shared_model("multi_signature_model.tflite"), device=fast_device)
    r = it.get_signature_runner("add")
    ok = np.ones([10, 10], np.float32)
    with pytest.raises(litecl.InputError, match=r"expects inputs \['a', 'b'\]; missing \['b'\]"):
        r(a=ok)
    with pytest.raises(litecl.InputError, match=r"unknown \['c'\]"):
        r(a=ok, b=ok, c=ok)
    with pytest.raises(litecl.InputError, match=r"\('.*'\) expects float32, got int32"):
        r(a=ok, b=ok.astype(np.int32))
    with pytest.raises(litecl.InputError, match="invalid input name 'zz'"):
        r.resize_input("zz", [3])


def test_cli_input_errors(tmp_path, fast_device):
    model = tmp_path / "m.tflite"
    model.write_bytes(add_model("float32", [2, 3], [3]))
    good = {"input1": np.zeros([2, 3], np.float32), "input2": np.zeros([3], np.float32)}
    cases = {
        "dtype": (dict(good, input2=np.zeros([3], np.int32)), r"input 'input2' expects float32, got int32"),
        "missing": ({"input1": good["input1"]}, r"missing input\(s\) \['input2'\]"),
        "unknown": (dict(good, nope=good["input2"]), r"unknown input name\(s\) \['nope'\]"),
        "shape": (dict(good, input2=np.zeros([4], np.float32)),
                  r"input 'input2' expects shape \[3\], got \[4\].*--resize"),
    }
    for name, (arrays, match) in cases.items():
        npz = tmp_path / f"{name}.npz"
        np.savez(npz, **arrays)
        _one_error_line(_run_cli("run", model, "--device", fast_device, "--inputs", npz), match)
    # --resize resizes the fixed-shape input; then the shapes do not broadcast
    _one_error_line(_run_cli("run", model, "--device", fast_device, "--inputs", tmp_path / "shape.npz",
                             "--resize"), r"tensor 1 \('input2'\) from \[3\] to \[4\].*do not broadcast")


def test_cli_litert_invoke_error_is_one_line(shared_models, tmp_path, fast_device):
    """GATHER with out-of-range ids fails inside LiteRT's invoke (a RuntimeError)."""
    path = shared_model("recommendation_cnn_i10i32o100.tflite")
    npz = tmp_path / "ids.npz"
    np.savez(npz, **{"serving_default_context_movie_id:0": np.full([10], 10**8, np.int32),
                     "serving_default_context_movie_genre:0": np.full([32], -5, np.int32)})
    _one_error_line(_run_cli("run", path, "--device", fast_device, "--inputs", npz),
                    "LiteRT: .*GATHER")


# ----------------------------------------------------------------------------- build failures
BROKEN = "\n#error litecl test: this kernel must not build\n"


def _break_kernel(monkeypatch, node: int, when=lambda shapes: True):
    """Make the generated kernel of ``node`` invalid OpenCL C (when ``when(shapes)``)."""
    real = litecl.executor.kernel_spec

    def spec(n, sg, shapes, caps):
        s = real(n, sg, shapes, caps)
        if n.index == node and when(shapes):
            s = dataclasses.replace(s, source=s.source + BROKEN + f"// {shapes}\n")
        return s

    monkeypatch.setattr(litecl.executor, "kernel_spec", spec)


def _run(it, inputs: dict) -> dict:
    for d in it.get_input_details():
        it.set_tensor(d["index"], inputs[d["name"]])
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def _litert(content: bytes, inputs: dict, shapes: dict | None = None) -> dict:
    ref = make_interpreter(content)
    for d in ref.get_input_details():
        if shapes and d["name"] in shapes:
            ref.resize_tensor_input(d["index"], shapes[d["name"]])
    ref.allocate_tensors()
    return _run(ref, inputs)


def test_kernel_build_failure_falls_back_with_log(monkeypatch, fast_device):
    m = multi_op_model("cast_mul_cast")  # CAST (CL) | MUL (LiteRT) | ADD, CAST (CL)
    _break_kernel(monkeypatch, node=2)
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    pl = {p["index"]: p for p in it.placement()}
    assert pl[2]["placement"] == "fallback"
    assert re.search(r"kernel build failed on .*; build log: .*this kernel must not build", pl[2]["reason"])
    assert [pl[i]["placement"] for i in (0, 3)] == ["opencl", "opencl"]
    assert any("kernel build failed" in line for line in it.summary())
    inputs = random_inputs(it.get_input_details(), 1)
    got, want = _run(it, inputs), _litert(m, inputs)
    assert all(bit_equal(got[k], want[k]) for k in want)

    with pytest.raises(litecl.KernelBuildError) as e:
        litecl.Interpreter(model_content=m, device=fast_device, strict=True).allocate_tensors()
    assert "this kernel must not build" in e.value.log and BROKEN in e.value.source


def test_cli_inspect_shows_build_failure(monkeypatch, capsys, tmp_path, fast_device):
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model("cast_mul_cast"))
    _break_kernel(monkeypatch, node=0)
    assert litecl.cli.main(["inspect", str(p), "--device", fast_device, "--json"]) == 0
    nodes = {n["index"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    assert nodes[0]["placement"] == "fallback" and "build log" in nodes[0]["reason"]
    assert litecl.cli.main(["run", str(p), "--device", fast_device, "--strict"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: kernel build failed on")


def test_build_failure_at_a_new_shape(monkeypatch, fast_device):
    """A kernel that builds at one shape and not at another: allocation after a resize
    falls that node back, and an invoke that meets the new shape replans too."""
    m = _dynamic(chain_model(["int32", "float32", ("add", 1.0), "float16"], [2, 3]))
    _break_kernel(monkeypatch, node=1, when=lambda shapes: shapes[0][0] == 5)
    it = litecl.Interpreter(model_content=m, device=fast_device)
    i = it.get_input_details()[0]["index"]
    for rows in (2, 5, 3):
        it.resize_tensor_input(i, [rows, 3], strict=True)
        it.allocate_tensors()
        x = {"input": np.arange(rows * 3, dtype=np.int32).reshape(rows, 3) - 4}
        got, want = _run(it, x), _litert(m, x, {"input": [rows, 3]})
        assert bit_equal(got["output"], want["output"])
    assert {p["index"]: p["placement"] for p in it.placement()}[1] == "fallback"

    # invoke-time replan: pretend the node's kernel was planned for other shapes
    it2 = litecl.Interpreter(model_content=m, device=fast_device, fuse=False)  # per-node kernels
    it2.resize_tensor_input(i, [5, 3], strict=True)
    monkeypatch.setattr(litecl.executor, "kernel_spec", litecl.lowering.kernel_spec)
    it2.allocate_tensors()
    _break_kernel(monkeypatch, node=1)
    it2._main.ex._kernels[1].in_shapes = [(1, 1)]
    x = {"input": np.arange(15, dtype=np.int32).reshape(5, 3)}
    got, want = _run(it2, x), _litert(m, x, {"input": [5, 3]})
    assert bit_equal(got["output"], want["output"])
    assert {p["index"]: p["placement"] for p in it2.placement()}[1] == "fallback"


# ----------------------------------------------------------------------------- dynamic shapes
@pytest.mark.parametrize("content", [
    pytest.param(lambda: cast_model("float32", "int8", [2, 3], dynamic=True), id="cast"),
    pytest.param(lambda: _dynamic(chain_model(["uint8", "float32", ("mul", 0.5), ("add", 1.0), "float16"],
                                              [2, 3])),
                 id="chain_cast_mul_add_cast"),
    pytest.param(lambda: _dynamic(chain_model(["int64", "int32", ("add", 7), "float32", "float16"], [4, 1])),
                 id="chain_cl_only"),
])
def test_resizes_match_litert(content, fast_device):
    m = content()
    it = litecl.Interpreter(model_content=m, device=fast_device)
    ref = make_interpreter(m)
    d = it.get_input_details()[0]
    assert d["shape_signature"][0] == -1
    tail = list(d["shape"][1:])
    for rows in (1, 7, 0, 33, 7, 1999):
        shape = [rows] + tail
        for interp in (it, ref):
            interp.resize_tensor_input(d["index"], shape, strict=True)
            interp.allocate_tensors()
        x = random_inputs([dict(d, shape=shape)], rows)
        got, want = _run(it, x), _run(ref, x)
        for k in want:
            assert got[k].shape == want[k].shape and bit_equal(got[k], want[k]), (rows, k)
        assert [list(o["shape"]) for o in it.get_output_details()] == \
               [list(o["shape"]) for o in ref.get_output_details()]
        for k in it._main.ex._kernels.values():  # tiling re-planned for the new size
            assert k.tiling.total_length == k.spec.n


def test_resize_errors_as_litert(fast_device):
    it = litecl.Interpreter(model_content=cast_model("float32", "int8", [2, 3], dynamic=True),
                            device=fast_device)
    i = it.get_input_details()[0]["index"]
    o = it.get_output_details()[0]["index"]
    with pytest.raises(litecl.InputError, match=r"strict resize .* shape_signature \[-1, 3\], got \[5, 4\]"):
        it.resize_tensor_input(i, [5, 4], strict=True)
    with pytest.raises(litecl.InputError, match=r"got \[5, 3, 1\]"):
        it.resize_tensor_input(i, [5, 3, 1], strict=True)
    with pytest.raises(litecl.InputError, match=r"dimensions must be in \[0, 2\*\*31\), got \[-1, 3\]"):
        it.resize_tensor_input(i, [-1, 3])
    with pytest.raises(litecl.InputError, match="1-D sequence of integers"):
        it.resize_tensor_input(i, [[2, 3]])
    with pytest.raises(litecl.InputError, match="1-D sequence of integers"):
        it.resize_tensor_input(i, ["a"])
    with pytest.raises(litecl.InputError, match="is not an input"):
        it.resize_tensor_input(o, [4, 3])
    it.resize_tensor_input(i, [5, 3, 1])  # not strict: any rank, as LiteRT
    it.resize_tensor_input(i, np.array([4, 3], np.int64))
    with pytest.raises(litecl.InputError, match="allocate_tensors"):
        it.invoke()
    it.allocate_tensors()
    with pytest.raises(litecl.InputError, match=r"expects shape \[4, 3\], got \[2, 3\]"):
        it.set_tensor(i, np.zeros([2, 3], np.float32))
    # a static model resized so that its ADD cannot broadcast: named at allocate
    a = litecl.Interpreter(model_content=add_model("float32", [2, 3], [3]), device=fast_device)
    a.resize_tensor_input(1, [4])
    with pytest.raises(litecl.InputError, match=r"tensor 1 \('input2'\) from \[3\] to \[4\]"):
        a.allocate_tensors()


# ----------------------------------------------------------------------------- lifetime
def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc for RSS")
def test_10k_invokes_do_not_grow_memory(fast_device):
    """CAST (OpenCL) | MUL (LiteRT) | ADD, CAST (OpenCL): 10,000 set/invoke/get rounds
    allocate no device buffer and leave host memory flat."""
    it = litecl.Interpreter(model_content=multi_op_model("cast_mul_cast"), device=fast_device)
    it.allocate_tensors()
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    x = random_inputs([d], 0)["input"]
    ex = it._main.ex

    def step():
        it.set_tensor(d["index"], x)
        it.invoke()
        return it.get_tensor(o["index"])

    want = step()
    for _ in range(300):  # warm-up: allocator pools, pyopencl caches
        step()
    created, live, rss0 = ex.buffers_created, ex.live_buffers(), _rss()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(10_000):
            got = step()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert bit_equal(got, want)
    assert ex.buffers_created == created and ex.live_buffers() == live
    assert grown < 256 * 1024, f"Python heap grew {grown} bytes over 10k invokes"
    assert _rss() - rss0 < 16 * 2**20, f"RSS grew {(_rss() - rss0) / 2**20:.1f} MiB over 10k invokes"


def test_close_releases_everything_and_use_after_close_raises(shared_models, fast_device):
    it = litecl.Interpreter(model_path=shared_model("multi_signature_model.tflite"), device=fast_device)
    runner = it.get_signature_runner("add")
    runner(a=np.ones([10, 10], np.float32), b=np.ones([10, 10], np.float32))
    graphs = list(it._graphs.values())
    it.close()
    for g in graphs:
        assert g.ex.live_buffers() == 0 and not g.ex._kernels and not g.ex.host
        assert all(step.interp is None for kind, step in g.ex._steps if kind == "f")
    calls = [it.allocate_tensors, it.invoke, it.get_input_details, it.get_output_details,
             it.get_tensor_details, it.get_signature_list, it.placement, it.summary,
             lambda: it.set_tensor(0, np.zeros(1)), lambda: it.get_tensor(0),
             lambda: it.resize_tensor_input(0, [1]), lambda: it.get_signature_runner("add"),
             lambda: it.device, runner.get_input_details,
             lambda: runner(a=np.ones([10, 10], np.float32), b=np.ones([10, 10], np.float32))]
    for call in calls:
        with pytest.raises(litecl.LiteclError, match="closed"):
            call()
    it.close()  # idempotent


def test_context_manager_releases_device_buffers(fast_device):
    m = chain_model(["int32", "float32", ("add", np.ones([64], np.float32)), "float16"], [64])
    with litecl.Interpreter(model_content=m, device=fast_device) as it:
        it.allocate_tensors()
        _run(it, {"input": np.arange(64, dtype=np.int32)})
        ex = it._main.ex
        assert ex.live_buffers() > 0
    assert ex.live_buffers() == 0
    with pytest.raises(litecl.LiteclError, match="closed"):
        it.invoke()


def test_many_interpreters_opened_and_closed(fast_device):
    m = chain_model(["uint8", "float32", ("mul", 0.5), "float16"], [256])
    x = {"input": np.arange(256, dtype=np.uint8)}
    for _ in range(20):  # warm-up
        with litecl.Interpreter(model_content=m, device=fast_device) as it:
            it.allocate_tensors()
            _run(it, x)
    rss0 = _rss() if os.path.exists("/proc/self/statm") else 0
    for _ in range(200):
        with litecl.Interpreter(model_content=m, device=fast_device) as it:
            it.allocate_tensors()
            _run(it, x)
    if rss0:
        assert _rss() - rss0 < 32 * 2**20


def test_two_interpreters_in_two_threads(fast_device):
    models = [multi_op_model("alternating", (3, 50)),
              chain_model(["int64", "float32", ("add", 0.5), "float16", "int8"], (7, 31))]
    errors, results = [], {}

    def work(k):
        try:
            m = models[k]
            it = litecl.Interpreter(model_content=m, device=fast_device)
            it.allocate_tensors()
            d = it.get_input_details()[0]
            for r in range(150):
                x = random_inputs([d], seed=1000 * k + r)
                got = _run(it, x)
                if r % 50 == 0:
                    want = _litert(m, x)
                    assert all(bit_equal(got[n], want[n]) for n in want), (k, r)
                results[(k, r)] = True
            it.close()
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(results) == 300


_LITERT_RUN = """
import sys, numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
r = {"builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, "ref": OpResolverType.BUILTIN_REF}[sys.argv[2]]
it = Interpreter(model_path=sys.argv[1], experimental_op_resolver_type=r)
it.allocate_tensors()
for d in it.get_input_details():
    it.set_tensor(d["index"], np.ones(d["shape"], d["dtype"]))
it.invoke()
"""

_Q3 = ((0.05, 0), (0.08, 0), (0.1, 0))
_HIGH_RANK = [  # (dtype, shape1, shape2): broadcasts around LiteRT's 8-dimension limit
    ("int32", (2, 1, 1, 1, 1, 1, 1, 1, 5), (1, 1, 1, 1, 1, 1, 1, 3, 1)),
    ("float32", (2, 1, 1, 1, 1, 1, 1, 1, 5), (1, 1, 1, 1, 1, 1, 1, 3, 1)),
    ("float32", (1, 1, 1, 1, 1, 1, 1, 1, 5), (1,)),
    ("int32", (1, 1, 1, 1, 1, 1, 1, 1, 5), ()),
    ("uint8", (2, 1, 1, 1, 1, 1, 1, 1, 5), (1, 1, 1, 1, 1, 1, 1, 1, 5)),
    ("int64", (1,), (1, 1, 1, 1, 1, 1, 1, 1, 5)),
    ("int32", (2, 1, 1, 1, 1, 1, 1, 5), (1, 1, 1, 1, 1, 1, 3, 1)),  # 8-D: fine
    ("int32", (2, 3, 1, 1, 1, 1, 1, 1, 5), (2, 3, 1, 1, 1, 1, 1, 1, 5)),  # same shape: fine
]


@pytest.mark.parametrize("reference", ["builtin", "ref"])
@pytest.mark.parametrize("dtype,s1,s2", _HIGH_RANK)
def test_high_rank_broadcast_abort_guard_matches_litert(tmp_path, dtype, s1, s2, reference):
    """LiteRT aborts on broadcasting ADDs above 8 dimensions, except in its optimized
    fivefold loop (float32/8-bit, builtin): litert_abort_reason predicts exactly when
    (LiteRT run in a subprocess), and litecl refuses those models with a ModelError."""
    from litecl.fallback import litert_abort_reason  # noqa: PLC0415
    from models.builders import add_model  # noqa: PLC0415

    m = add_model(dtype, s1, s2, **({"quant": _Q3} if dtype in ("int8", "uint8") else {}))
    p = tmp_path / "m.tflite"
    p.write_bytes(m)
    r = subprocess.run([sys.executable, "-c", _LITERT_RUN, str(p), reference], capture_output=True, timeout=120)
    sg = load_model(model_content=m).subgraphs[0]
    predicted = litert_abort_reason(sg.nodes[0], sg, {t: sg.tensors[t].shape for t in sg.nodes[0].inputs}, reference)
    assert (r.returncode != 0) == (predicted is not None), (r.returncode, r.stderr[-300:], predicted)


def test_high_rank_broadcast_is_refused_not_a_crash(tmp_path, fast_device):
    from models.builders import add_model  # noqa: PLC0415

    m = add_model("int32", (2, 1, 1, 1, 1, 1, 1, 1, 5), (1, 1, 1, 1, 1, 1, 1, 3, 1))
    it = litecl.Interpreter(model_content=m, device=fast_device)
    with pytest.raises(litecl.ModelError, match="above 8 dimensions"):
        it.allocate_tensors()
    p = tmp_path / "bc9.tflite"
    p.write_bytes(m)
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "run", str(p), "--device", fast_device],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_inputs_survive_allocate_without_resize(fast_device):
    """LiteRT keeps input values across allocate_tensors() (and a resize to the same
    shape); after a real resize litecl asks for the input again (LiteRT reads stale
    memory there)."""
    from models.builders import add_model, cast_model  # noqa: PLC0415

    for m, n in ((add_model("float32", (4,), (4,)), 4), (cast_model("int8", "int64", [300000]), 300000)):
        it = litecl.Interpreter(model_content=m, device=fast_device)
        it.allocate_tensors()
        ins = it.get_input_details()
        vals = [np.arange(n).astype(d["dtype"]) for d in ins]
        for d, v in zip(ins, vals):
            it.set_tensor(d["index"], v)
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"])
        it.allocate_tensors()
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
        it.resize_tensor_input(ins[0]["index"], [n])
        it.allocate_tensors()
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
        for d in ins:
            it.resize_tensor_input(d["index"], [n + 1])
        it.allocate_tensors()
        with pytest.raises(litecl.InputError, match="was not set"):
            it.invoke()
        it.close()


def _mutated(content: bytes, edit) -> bytes:
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as s  # noqa: PLC0415

    m = s.ModelT.InitFromObj(s.Model.GetRootAsModel(content, 0))
    edit(m)
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_names_with_nul_and_long_constant_buffers_as_litert(tmp_path, fast_device):
    """LiteRT reads tensor names up to the first NUL byte and accepts a constant buffer
    longer than its tensor (reading the first bytes): litecl's details and results agree,
    and `litecl compare` finds them equal."""
    from models.builders import add_model, cast_model  # noqa: PLC0415

    def nul_names(m):
        m.subgraphs[0].tensors[0].name = "in\0put"
        m.subgraphs[0].tensors[1].name = "out\0put"

    def long_buffer(m):
        t = m.subgraphs[0].tensors[m.subgraphs[0].operators[0].inputs[1]]
        buf = m.buffers[t.buffer]
        buf.data = np.concatenate([np.asarray(buf.data, np.uint8), np.full(60, 7, np.uint8)])

    cases = [_mutated(cast_model("float32", "float16", (4,)), nul_names),
             _mutated(add_model("int32", (4,), (1,), const2=np.array([5], np.int32)), long_buffer)]
    for i, m in enumerate(cases):
        ref = make_interpreter(m)
        ref.allocate_tensors()
        it = litecl.Interpreter(model_content=m, device=fast_device)
        it.allocate_tensors()
        assert [d["name"] for d in it.get_input_details()] == [d["name"] for d in ref.get_input_details()]
        assert [d["name"] for d in it.get_output_details()] == [d["name"] for d in ref.get_output_details()]
        p = tmp_path / f"m{i}.tflite"
        p.write_bytes(m)
        r = subprocess.run([sys.executable, "-m", "litecl.cli", "compare", str(p), "--device", fast_device],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (r.stdout[-500:], r.stderr)


def test_tensor_types_litert_python_cannot_pass_are_model_errors(tmp_path, fast_device):
    """An INT2 tensor entering a fallback segment: LiteRT's Python API cannot set it
    (measured: "Got value of type INT8 but expected type INT2"); litecl names the type in
    a ModelError at allocate_tensors. (BFLOAT16, once refused here, passes: LiteRT's API
    takes ml_dtypes.bfloat16, and a model converting through it runs on OpenCL.)"""
    from ai_edge_litert import schema_py_generated as s  # noqa: PLC0415
    from models.builders import cast_model, chain_model  # noqa: PLC0415

    m = chain_model(["float32", "int2", "int8"], (4,))  # int2 -> int8: LiteRT-only, falls back
    with pytest.raises(litecl.ModelError, match="INT2"):
        litecl.Interpreter(model_content=m, device=fast_device).allocate_tensors()
    p = tmp_path / "int2.tflite"
    p.write_bytes(m)
    for cmd in ("run", "compare"):
        r = subprocess.run([sys.executable, "-m", "litecl.cli", cmd, str(p), "--device", fast_device],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.startswith("error: ") and "INT2" in r.stderr, (cmd, r.stderr)

    def bf16(m):
        m.subgraphs[0].tensors[1].type = s.TensorType.BFLOAT16

    m = _mutated(cast_model("float32", "float16", (4,)), bf16)
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    assert [p["placement"] for p in it.placement()] == ["opencl"]


def test_operators_out_of_order_or_writing_constants_are_model_errors():
    """LiteRT runs operators in the order listed (reading a tensor a later operator
    writes reads stale memory) and would write into the model's own buffer for an
    operator whose output is a constant (it crashed on such a fuzzed model): refused."""
    from models.builders import chain_model  # noqa: PLC0415

    def reverse(m):
        m.subgraphs[0].operators = m.subgraphs[0].operators[::-1]

    m = _mutated(chain_model(["float32", "int32", "float16", "float32"], (8,)), reverse)
    with pytest.raises(litecl.ModelError, match="before operator .* writes it"):
        load_model(model_content=m)

    def write_const(m):
        sg = m.subgraphs[0]
        sg.operators[0].outputs = [sg.operators[1].inputs[1]]  # the next ADD's constant

    c = np.arange(8, dtype=np.int32)
    m = _mutated(chain_model(["int32", ("add", c, "NONE"), ("add", c + 1, "NONE")], (8,)), write_const)
    with pytest.raises(litecl.ModelError, match="a constant"):
        load_model(model_content=m)


def test_constructor_flags_and_path_types(tmp_path, fast_device):
    from models.builders import cast_model  # noqa: PLC0415

    p = tmp_path / "m.tflite"
    p.write_bytes(cast_model("float32", "float16", [4]))
    for kw in ({"fuse": "yes"}, {"strict": "no"}, {"experimental_preserve_all_tensors": 1}):
        with pytest.raises(litecl.LiteclError, match="must be True or False"):
            litecl.Interpreter(model_path=str(p), device=fast_device, **kw)
    with pytest.raises(litecl.ModelError, match="str or path-like"):
        litecl.Interpreter(model_path=3, device=fast_device)
    for path in (str(p), p, os.fsencode(str(p))):  # str, PathLike and bytes paths all load
        litecl.Interpreter(model_path=path, device=fast_device).close()


from conftest import ROOT, device_params  # noqa: E402

_THREADS_ON_ONE = """
import sys, threading, numpy as np
sys.path.insert(0, sys.argv[2])
import litecl
from models.builders import add_model
it = litecl.Interpreter(model_content=add_model("float32", (64, 64), (64, 64)), device=sys.argv[1])
it.allocate_tensors()
busy = [0]
def work():
    x = np.ones((64, 64), np.float32)
    for _ in range(300):
        try:
            it.set_tensor(0, x); it.set_tensor(1, x); it.invoke(); it.get_tensor(it.get_output_details()[0]["index"])
        except litecl.LiteclError as e:
            assert "another thread" in str(e) or "was not set" in str(e), e
            busy[0] += 1
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print("busy", busy[0])
"""


@pytest.mark.parametrize("device", device_params(["pocl", "intel"]))
def test_one_interpreter_from_many_threads_errors_instead_of_crashing(device):
    """LiteRT's rule is one thread per Interpreter; four threads on one used to segfault
    PoCL (map/unmap races). Now a second thread gets a LiteclError, and nothing crashes."""
    r = subprocess.run([sys.executable, "-c", _THREADS_ON_ONE, device, str(ROOT)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])
    assert r.stdout.startswith("busy")


def test_interpreters_are_not_picklable(fast_device):
    import copy  # noqa: PLC0415
    import pickle  # noqa: PLC0415

    from models.builders import cast_model  # noqa: PLC0415

    it = litecl.Interpreter(model_content=cast_model("float32", "int8", [4]), device=fast_device)
    for f in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            f(it)
