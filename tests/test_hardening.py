"""Hardening (issue 7): the flatbuffer verifier, what LiteRT aborts on (refused first),
misuse (LiteRT's own errors through litecl.Interpreter), kernel build failures, dynamic
shapes, resource lifetime, threads. Fuzzing lives in test_fuzz.py."""
from __future__ import annotations

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
from litecl.compare import bit_equal, make_interpreter, random_inputs
from litecl.model import litert_abort_reason, load_model
from litecl.verify import VerifyError, table_layout, verify
from models.builders import add_model, cast_model, chain_model, multi_op_model

from conftest import ROOT, SHARED_MODELS, device_params, shared_model

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
    (b"", "model_content: empty, expected"),
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
                        (bad_type, "unknown type 99"),
                        (unproduced, "no input, constant, variable or operator output"),
                        (nan_scale, "scales must be positive and finite")):
        with pytest.raises(litecl.ModelError, match=match):
            load_model(model_content=_repack(m, edit))
    # LiteRT runs a model whose tensor name is not UTF-8 (tests/test_hostile.py): shown as U+FFFD
    assert load_model(model_content=_repack(m, bad_name)).subgraphs[0].tensors[0].name == "in\ufffdput"


# ----------------------------------------------------------------------------- LiteRT's aborts
_Q = (0.01, 0)
_LITERT_PREPARE = """
import sys
from litecl.compare import make_interpreter
m = make_interpreter(open(sys.argv[1], "rb").read())
try:
    m.allocate_tensors()
except Exception:
    pass
"""


def _binary_model(kind: str, dtype: str, q, shapes=([4], [4])) -> bytes:
    from models.builders import _Graph  # noqa: PLC0415

    g = _Graph()
    a, b = g.tensor("a", dtype, shapes[0], quant=q[0]), g.tensor("b", dtype, shapes[1], quant=q[1])
    g.inputs += [a, b]
    g.outputs = [g.binary(kind, a, b, "y", out_quant=q[2])]
    return g.finish()


def _declared(sg, node) -> dict:
    return {t: sg.tensors[t].shape for t in node.inputs}


def _litert_dies(path, script: str, *args) -> bool:
    """LiteRT alone, in a subprocess: did it end by a signal (SIGABRT)?"""
    r = subprocess.run([sys.executable, "-c", script, str(path), *args], capture_output=True, timeout=120)
    return r.returncode < 0 or r.returncode == 134


@pytest.mark.parametrize("kind,dtype,q", [
    ("add", "int8", (_Q, _Q, None)), ("add", "uint8", (None, _Q, _Q)), ("add", "int8", (_Q, _Q, _Q)),
    ("add", "int16", (_Q, _Q, None)), ("add", "int16", (None, _Q, _Q)), ("add", "int16", (None, None, None)),
    ("sub", "int8", (_Q, _Q, None)), ("sub", "int16", (None, None, None)),
    ("add", "int8", (_Q, _Q, (1e-12, 0))), ("sub", "int8", (_Q, _Q, (1e-12, 0))),
])
def test_abort_guard_matches_litert(tmp_path, monkeypatch, kind, dtype, q):
    """model.litert_abort_reason says "aborts" exactly where LiteRT's Prepare kills the
    process (LiteRT alone, in a subprocess), and load_model refuses exactly those models."""
    from litecl import model as mod  # noqa: PLC0415

    m = _binary_model(kind, dtype, q)
    p = tmp_path / "m.tflite"
    p.write_bytes(m)
    with monkeypatch.context() as mp:  # the model parsed without the check under test
        mp.setattr(mod, "_check_litert_aborts", lambda sub, where: None)
        sg = mod._load(m, "m").subgraphs[0]
    predicted = litert_abort_reason(sg.nodes[0], sg, _declared(sg, sg.nodes[0]))
    assert _litert_dies(p, _LITERT_PREPARE) == (predicted is not None), predicted
    if predicted:
        with pytest.raises(litecl.ModelError, match="LiteRT aborts"):
            mod._load(m, "m")
    else:
        mod._load(m, "m")


def test_static_abort_cases_are_model_errors(fast_device):
    """LiteRT 2.3.0 aborts (SIGABRT in allocate_tensors) on these; litecl's delegate
    claims none of them (its lowering refuses the same parameters), so litecl.Interpreter
    refuses them before LiteRT sees them, whatever the placement."""
    cases = [(add_model("int8", [4], [4], quant=((0.01, 0), (0.01, 0), (1e-12, 0))), "output scale too small"),
             (_binary_model("sub", "int8", (None, _Q, _Q)), r"int8 SUB with quantization parameters on 2 of its 3"),
             (_binary_model("add", "int8", (_Q, _Q, None)), r"int8 ADD with quantization parameters on 2 of its 3"),
             (add_model("int32", (2, 1, 1, 1, 1, 1, 1, 1, 5), (1, 1, 1, 1, 1, 1, 1, 3, 1)), "above 8 dimensions")]
    for m, match in cases:
        for placement in ("all", "auto"):
            with pytest.raises(litecl.ModelError, match=match):
                litecl.Interpreter(model_content=m, device=fast_device, placement=placement, quiet=True)


_LITERT_RUN = """
import sys, numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
r = {"builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, "ref": OpResolverType.BUILTIN_REF}[sys.argv[2]]
it = Interpreter(model_path=sys.argv[1], experimental_op_resolver_type=r)
for i, s in zip((0, 1), sys.argv[3:]):
    it.resize_tensor_input(i, [int(d) for d in s.split(",") if d])
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
    """LiteRT aborts (in invoke) on broadcasting ADDs above 8 dimensions, except in its
    optimized fivefold loop (float32/8-bit, builtin): litert_abort_reason predicts exactly
    when (LiteRT run alone in a subprocess, the shapes reached by a resize of a [4] + [4]
    ADD, as a user would)."""
    m = add_model(dtype, [4], [4], **({"quant": _Q3} if dtype in ("int8", "uint8") else {}))
    p = tmp_path / "m.tflite"
    p.write_bytes(m)
    shape_args = [",".join(map(str, s)) for s in (s1, s2)]
    dies = _litert_dies(p, _LITERT_RUN, reference, *shape_args)
    sg = load_model(model_content=m).subgraphs[0]
    n = sg.nodes[0]
    predicted = litert_abort_reason(n, sg, dict(zip(n.inputs, (s1, s2))), reference)
    assert dies == (predicted is not None), (dies, predicted)


_RESIZE_INTO_ABORT = """
import sys, numpy as np, litecl
from ai_edge_litert import schema_py_generated as schema
from litecl.compare import make_interpreter
from models.builders import add_model
from models.hostile import pack
kind, placement = sys.argv[1], sys.argv[2]
if kind == "pot":  # int16, power-of-two scales, pot_scale_int16: LiteRT's POT path
    o = schema.ModelT.InitFromPackedBuf(add_model("int16", [4], [4], quant=((1.0, 0), (0.5, 0), (1.0, 0))), 0)
    o.subgraphs[0].operators[0].builtinOptions.potScaleInt16 = True
    o.operatorCodes[0].version = 1
    m, bad, good = pack(o), ([4], [1]), ([6], [6])
else:
    m, bad, good = add_model("int32", [4], [4]), ([2, 1, 1, 1, 1, 1, 1, 1, 5], [1, 1, 1, 1, 1, 1, 1, 3, 1]), ([3], [3])
it = litecl.Interpreter(model_content=m, device=sys.argv[3], placement=placement, quiet=True)
it.allocate_tensors()
for i, s in enumerate(bad):
    it.resize_tensor_input(i, s)
try:
    it.allocate_tensors()
    print("RESULT allocated", flush=True)
except litecl.LiteclError as e:
    print("RESULT", type(e).__name__, isinstance(e, RuntimeError), e, flush=True)
print("SHAPES", [d["shape"].tolist() for d in it.get_input_details()], flush=True)
try:
    it.invoke()
    print("INVOKE ran", flush=True)
except RuntimeError as e:  # LiteRT's error reporter keeps the earlier messages too
    print("INVOKE", type(e).__name__, " ".join(str(e).split()), flush=True)
for i, s in enumerate(good):
    it.resize_tensor_input(i, s)
it.allocate_tensors()
ref = make_interpreter(m)
for r in (it, ref):
    for i, s in enumerate(good):
        r.resize_tensor_input(i, s)
    r.allocate_tensors()
    for i, s in enumerate(good):
        r.set_tensor(i, (np.arange(s[0]) * 300 - 700).astype(np.int16 if kind == "pot" else np.int32))
    r.invoke()
print("AGAIN", it.get_tensor(2).tobytes() == ref.get_tensor(2).tobytes(), flush=True)
"""


@pytest.mark.parametrize("placement", ["all", "auto"])
@pytest.mark.parametrize("kind", ["pot", "rank9"])
def test_resize_into_a_litert_abort_is_an_error(fast_device, kind, placement):
    """A resize to shapes LiteRT aborts on in invoke (an int16 POT ADD of [4] and [1]; a
    9-D broadcast of an int32 ADD; measured, tests above): when litecl's delegate holds the
    ADD, its kernel prepare refuses the shapes (InputError); when LiteRT holds it
    (placement "auto" keeps a tiny ADD there), litecl.Interpreter.allocate_tensors refuses
    them (ResizedPrepareError) and leaves LiteRT's interpreter not ready, so invoke raises
    LiteRT's own error text as NotAllocatedError (a RuntimeError). Either way no signal, and the next resize runs bit-exact."""
    r = _py_hardening(_RESIZE_INTO_ABORT, kind, placement, fast_device)
    out = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.split(" ", 1)[0].isupper())
    want = "ResizedPrepareError True" if placement == "auto" else "InputError False"
    assert out["RESULT"].startswith(want), r.stdout
    assert ("MatchingElementsSize" if kind == "pot" else "above 8 dimensions") in out["RESULT"]
    assert out["INVOKE"].startswith("NotAllocatedError ") and \
        out["INVOKE"].endswith("Invoke called on model that is not ready."), r.stdout
    assert out["SHAPES"] == str([[4], [1]] if kind == "pot" else
                                [[2, 1, 1, 1, 1, 1, 1, 1, 5], [1, 1, 1, 1, 1, 1, 1, 3, 1]])
    assert out["AGAIN"] == "True", r.stdout


def _py_hardening(code: str, *args, timeout: float = 120):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=ROOT)
    assert r.returncode == 0, (r.returncode, r.stdout[-1000:], r.stderr[-2000:])
    return r


def test_signature_runner_into_a_litert_abort_is_an_error(shared_models, fast_device):
    """LiteRT's SignatureRunner resizes, allocates and invokes in one call: litecl's
    runner checks between its allocate and its invoke. multi_signature_model's "add"
    signature, called with 9-D operands that broadcast (LiteRT aborts), then with good ones."""
    code = """
import sys, numpy as np, litecl
it = litecl.Interpreter(model_path=sys.argv[1], device=sys.argv[2], placement="auto", quiet=True)
run = it.get_signature_runner("add")
a = np.ones([2, 1, 1, 1, 1, 1, 1, 1, 5], np.float32)
b = np.ones([1, 1, 1, 1, 1, 1, 1, 3, 1], np.float32)
for _ in range(2):  # the second call is answered from the memo of these ADD shapes
    try:
        run(a=a, b=b)
        print("RESULT ran", flush=True)
    except litecl.LiteclError as e:
        print("RESULT", type(e).__name__, e, flush=True)
out = run(a=np.full([10, 10], 2, np.float32), b=np.ones([10, 10], np.float32))
print("AGAIN", out["output"].tolist() == [[3.0] * 10] * 10, flush=True)
"""
    r = _py_hardening(code, shared_model("multi_signature_model.tflite"), fast_device)
    assert r.stdout.count("RESULT ResizedPrepareError") == 2 and "above 8 dimensions" in r.stdout, r.stdout
    assert "AGAIN True" in r.stdout, r.stdout


def test_propagated_and_ref_only_aborts_are_refused_at_allocate(fast_device):
    """Shapes LiteRT propagates (a CAST's output feeding a 9-D broadcast: load_model judges
    only the shapes a model starts from) and an abort only BUILTIN_REF has (a 9-D
    float32 broadcast in the optimized fivefold loop runs under the builtin kernels):
    PrepareError at allocate_tensors; invoke then gets LiteRT's own error."""
    cast9 = chain_model(["int32", "float32", ("add", np.ones((1, 1, 1, 1, 1, 1, 1, 3, 1), np.float32))],
                        (2, 1, 1, 1, 1, 1, 1, 1, 5))
    five = add_model("float32", (1, 1, 1, 1, 1, 1, 1, 1, 5), (1,))
    for m, reference in ((cast9, "builtin"), (cast9, "ref"), (five, "ref")):
        it = litecl.Interpreter(model_content=m, device=fast_device, reference=reference, quiet=True)
        with pytest.raises(litecl.PrepareError, match="above 8 dimensions") as e:
            it.allocate_tensors()
        assert not isinstance(e.value, litecl.ResizedPrepareError)
        with pytest.raises(RuntimeError, match="not ready"):
            it.invoke()
    it = litecl.Interpreter(model_content=five, device=fast_device, quiet=True)  # builtin: runs
    it.allocate_tensors()
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 1, 1, 1, 1, 1, 1, 5)
    it.set_tensor(0, x)
    it.set_tensor(1, np.array([0.5], np.float32))
    it.invoke()
    assert it.get_tensor(2).ravel().tolist() == [0.5, 1.5, 2.5, 3.5, 4.5]


def test_delegated_adds_are_not_judged_at_stale_shapes(fast_device):
    """Tensors inside a delegated partition keep the shapes LiteRT last gave them (the
    delegate resizes only the partition's outputs): the guard skips the ADDs litecl runs,
    so a same-shape 9-D chain resized to another 9-D shape runs, bit-exact."""
    from models.builders import _Graph  # noqa: PLC0415

    s9 = [2, 1, 1, 1, 1, 1, 1, 1, 5]
    g = _Graph()
    x, y, z = (g.tensor(n, "int32", s9) for n in "xyz")
    g.inputs = [x, y, z]
    g.outputs = [g.binary("add", g.binary("add", x, y, "t"), z, "out")]
    m = g.finish()
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    ref = make_interpreter(m)
    new = [3, 1, 1, 1, 1, 1, 1, 1, 4]
    for r in (it, ref):
        for i in range(3):
            r.resize_tensor_input(i, new)
        r.allocate_tensors()
        for i in range(3):
            r.set_tensor(i, np.arange(12, dtype=np.int32).reshape(new) * (i + 1))
        r.invoke()
    assert [p["placement"] for p in it.placement()] == ["opencl", "opencl"]
    assert it.get_tensor(it.get_output_details()[0]["index"]).tobytes() == \
        ref.get_tensor(ref.get_output_details()[0]["index"]).tobytes()


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



# ----------------------------------------------------------------------------- misuse
def _error_of(call):
    with pytest.raises(Exception) as e:
        call()
    return e.value


def _same_error(ours, theirs, what="", subclass=None):
    """``ours`` (litecl.Interpreter) and ``theirs`` (LiteRT's own) both raise: the same
    type (or ``subclass``, litecl's subclass of LiteRT's type) and message (pybind's
    object addresses aside)."""
    a, b = _error_of(ours), _error_of(theirs)
    norm = lambda e: re.sub(r"0x[0-9a-f]+", "0x?", str(e))  # noqa: E731
    assert type(a) is (subclass or type(b)) and isinstance(a, type(b)) and norm(a) == norm(b), (what, a, b)
    return a


_BAD_CALLS = {  # what a user can get wrong after allocate_tensors: LiteRT's own answers
    "dtype": lambda i: i.set_tensor(0, np.zeros([2, 3])),
    "shape": lambda i: i.set_tensor(1, np.zeros([2, 3], np.float32)),
    "text": lambda i: i.set_tensor(0, "text"),
    "objects": lambda i: i.set_tensor(0, np.array([[None] * 3] * 2)),
    "0-d": lambda i: i.set_tensor(0, np.float32(1)),
    "name as index": lambda i: i.set_tensor("input1", np.zeros([2, 3], np.float32)),
    "index 99": lambda i: i.set_tensor(99, np.zeros([2, 3], np.float32)),
    "index -1": lambda i: i.set_tensor(-1, np.zeros([2, 3], np.float32)),
    "index 2**40": lambda i: i.set_tensor(2**40, np.zeros([2, 3], np.float32)),
    "get 99": lambda i: i.get_tensor(99),
    "get -1": lambda i: i.get_tensor(-1),
    "get subgraph 5": lambda i: i.get_tensor(0, subgraph_index=5),
    "get subgraph -1": lambda i: i.get_tensor(0, subgraph_index=-1),
    "tensor(99)": lambda i: i.tensor(99)(),
    "details subgraph 9": lambda i: i.get_tensor_details(9),
    "resize nested": lambda i: i.resize_tensor_input(0, [[2, 3]]),
    "resize text": lambda i: i.resize_tensor_input(0, ["a"]),
    "resize negative": lambda i: i.resize_tensor_input(0, [-1, 3]),
    "resize 2**31": lambda i: i.resize_tensor_input(0, [2**31, 3]),
    "resize index 99": lambda i: i.resize_tensor_input(99, [4, 3]),
    "strict resize": lambda i: i.resize_tensor_input(0, [5, 3], strict=True),
    "no runner": lambda i: i.get_signature_runner("zz"),
    "view held": lambda i: (lambda v: i.invoke())(i.tensor(0)()),
    "huge arena": lambda i: (i.resize_tensor_input(0, [2**31 - 1, 2**31 - 1]),
                             i.resize_tensor_input(1, [2**31 - 1]), i.allocate_tensors()),
}


@pytest.mark.parametrize("what", list(_BAD_CALLS))
def test_misuse_is_litert_s_error(fast_device, what):
    """litecl.Interpreter is LiteRT's Interpreter: each misuse raises what LiteRT raises
    (type and message), none crashes. (The huge arena is kept on LiteRT under
    placement "auto"; under "all" litecl's kernel refuses it first: below.)"""
    m = add_model("float32", [2, 3], [3])
    ours = litecl.Interpreter(model_content=m, device=fast_device, placement="auto", quiet=True)
    theirs = make_interpreter(m)
    for it in (ours, theirs):
        it.allocate_tensors()
    # allocate_tensors' RuntimeError at resized shapes: litecl's ResizedPrepareError (a
    # RuntimeError and a ValueError) with LiteRT's message
    e = _same_error(lambda: _BAD_CALLS[what](ours), lambda: _BAD_CALLS[what](theirs), what,
                    litecl.ResizedPrepareError if what == "huge arena" else None)
    assert isinstance(e, (ValueError, RuntimeError, TypeError, OverflowError)), e


def test_misuse_before_allocate_is_litert_s_error(fast_device):
    m = add_model("float32", [2, 3], [3])
    ours = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    theirs = make_interpreter(m)
    for what, call in {"set": lambda i: i.set_tensor(0, np.zeros([2, 3], np.float32)),
                       "get": lambda i: i.get_tensor(0), "invoke": lambda i: i.invoke()}.items():
        _same_error(lambda: call(ours), lambda: call(theirs), what,
                    litecl.NotAllocatedError if what == "invoke" else None)  # a RuntimeError


def test_set_tensor_on_a_constant_is_refused(fast_device):
    """LiteRT's set_tensor on a constant writes into the model's bytes, which every
    litecl.Interpreter of the model shares, while litecl's kernels read constants once:
    a fresh user's ADD kept the old constant, LiteRT's MUL in the same interpreter took
    the new one, and a second interpreter of the model got it too. One error line, and
    nothing changes; inputs are set as before."""
    k = np.array([1, 2, 3, 4], np.float32)
    m = chain_model(["float32", ("add", k)], [4])
    a, b = (litecl.Interpreter(model_content=bytes(m), device=fast_device, quiet=True) for _ in range(2))
    const = next(t for t in litecl.model.load_model(model_content=m).subgraphs[0].tensors if t.is_constant)
    for it in (a, b):
        it.allocate_tensors()
    with pytest.raises(litecl.LiteclError, match=rf"Cannot set tensor: tensor {const.index} \(.*\) is a constant"):
        a.set_tensor(const.index, np.full(4, 100, np.float32))
    for it in (a, b):
        it.set_tensor(it.get_input_details()[0]["index"], np.ones(4, np.float32))
        it.invoke()
        assert it.get_tensor(it.get_output_details()[0]["index"]).tolist() == [2, 3, 4, 5]


def test_an_unresolved_custom_op_names_the_resolver_that_has_it():
    """selfie_segmentation's Convolution2DTransposeBias (MediaPipe's) runs under LiteRT's
    default resolver (XNNPACK) and fails under litecl's builtin one: the error says which
    reference resolves it (a fresh user found nothing pointing there)."""
    from litecl.interpreter import _litert_text  # noqa: PLC0415

    e = RuntimeError("Encountered unresolved custom op: Convolution2DTransposeBias.\nNode number 244 "
                     "(Convolution2DTransposeBias) failed to prepare.")
    for ref in ("builtin", "ref"):
        assert _litert_text(e, ref).endswith('(reference="xnnpack", LiteRT\'s default resolver, has MediaPipe\'s '
                                             'custom ops such as Convolution2DTransposeBias)')
    assert "reference=" not in _litert_text(e, "xnnpack")
    assert "reference=" not in _litert_text(RuntimeError("Node number 3 (CONV_2D) failed to prepare."), "builtin")
    # an op no LiteRT resolver has (Coral's): no hint that cannot help (a fresh user's report)
    tpu = RuntimeError("Encountered unresolved custom op: edgetpu-custom-op. Node number 0 (edgetpu-custom-op) "
                       "failed to prepare.")
    assert "reference=" not in _litert_text(tpu, "builtin")


GC_INSIDE_LOCKS = r"""
import gc, sys, numpy as np
import litecl
from litecl import delegate as D
from models.builders import add_model
m = add_model("float32", [4], [4])
d = litecl.Delegate(sys.argv[1], quiet=True)
for k in range(3):
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    it._cycle = it  # only the cyclic collector frees it
    del it
    gc.disable()
    with D._LOCK:  # a collection inside a _LOCK block (has_partitions' generator ran one)
        gc.collect()
    with d._lock:  # and inside the Delegate's own (placement, Prepare's record)
        gc.collect()
    gc.enable()
it = litecl.Interpreter(model_content=m, delegate=d)
it.allocate_tensors()
for x in it.get_input_details():
    it.set_tensor(x["index"], np.ones(4, np.float32))
it.invoke()
print("OK", it.get_tensor(it.get_output_details()[0]["index"]).tolist(), len(D._DEFERRED), len(d.placement(it)))
"""


def test_a_garbage_collection_inside_litecl_s_locks_frees_later(fast_device):
    """A cyclic garbage collection that runs inside a block holding litecl's lock (any
    allocation there may start one) finalises a dead interpreter, whose partition kernels'
    free took that lock again: the CI's system leg hung for good in has_partitions. The
    free is done later, outside the lock; the records of a collected litecl.Interpreter
    likewise."""
    r = _py_hardening(GC_INSIDE_LOCKS, fast_device, timeout=120)
    assert "OK [2.0, 2.0, 2.0, 2.0] 0 1" in r.stdout, r.stdout


INVOKE_AT_FINALIZATION = r"""
import sys, numpy as np
import litecl
from conftest import shared_model
M = str(shared_model("movenet_singlepose_lightning_int8.tflite"))
class Holder:  # a pool or session object torn down by the final collection
    def __init__(self):
        self.it = litecl.Interpreter(model_path=M, device=sys.argv[1], quiet=True)
        self.it.allocate_tensors()
    def __del__(self):
        d = self.it.get_input_details()[0]
        self.it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        self.it.invoke()
h = Holder()
h.cycle = h
print("main done", flush=True)
"""


def test_an_invoke_in_the_final_collection_does_not_crash(fast_device, shared_models):
    """An interpreter invoked from a __del__ that Python's final collection runs (after
    atexit): the OpenCL runtime segfaulted in 8 of 20 processes on Intel's (a fresh
    user's report: 7 of 20). litecl's atexit handler (runtime.py: lcl_exit_now) stops
    new OpenCL work first: the invoke raises "the process is exiting", which Python
    prints as an ignored exception; the process exits 0."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"),
                                                       os.environ.get("PYTHONPATH", "")]))
    for _ in range(6):
        r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", INVOKE_AT_FINALIZATION, fast_device],
                           capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)
        assert r.returncode == 0 and "main done" in r.stdout, (r.returncode, r.stderr[-1500:])


def test_huge_shapes_are_errors_not_crashes(fast_device):
    """A resize to shapes no memory holds: LiteRT's arena refuses them (RuntimeError);
    when litecl's delegate holds the node, its kernel refuses them first (InputError:
    the kernels index with 32 bits). A shape of no elements that numpy cannot hold
    ([0, 2**31-1, 2**31-1, 2**31-1]) allocates, as in LiteRT, and get_tensor is then
    LiteRT's ValueError."""
    m = add_model("float32", [4], [4])
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    it.resize_tensor_input(0, [2**20, 2**20])
    it.resize_tensor_input(1, [2**20])
    with pytest.raises(litecl.InputError, match="at most 2147483648") as e:
        it.allocate_tensors()
    assert isinstance(e.value, RuntimeError)  # as LiteRT's allocate_tensors raises (ResizedPrepareError)
    big = litecl.Interpreter(model_content=cast_model("uint8", "int8", [2**16, 2**15 + 1]), device=fast_device, quiet=True)
    with pytest.raises(litecl.PrepareError, match="at most 2147483648") as e:  # at the declared shapes
        big.allocate_tensors()
    assert isinstance(e.value, RuntimeError)
    odd = [0, 2**31 - 1, 2**31 - 1, 2**31 - 1]
    ours, theirs = litecl.Interpreter(model_content=m, device=fast_device, quiet=True), make_interpreter(m)
    for i in (ours, theirs):
        i.resize_tensor_input(0, odd)
        i.resize_tensor_input(1, odd)
        i.allocate_tensors()
    _same_error(lambda: ours.get_tensor(2), lambda: theirs.get_tensor(2))


def test_signature_runner_misuse_is_litert_s_error(shared_models, fast_device):
    m = shared_model("multi_signature_model.tflite").read_bytes()
    ours, theirs = litecl.Interpreter(model_content=m, device=fast_device, quiet=True), make_interpreter(m)
    r, t = ours.get_signature_runner("add"), theirs.get_signature_runner("add")
    ok = np.ones([10, 10], np.float32)
    calls = {"missing": lambda x: x(a=ok), "unknown": lambda x: x(a=ok, b=ok, c=ok),
             "renamed": lambda x: x(a=ok, c=ok), "dtype": lambda x: x(a=ok, b=ok.astype(np.int32)),
             "not an array": lambda x: x(a=ok, b=[1.0] * 100)}
    for what, call in calls.items():
        _same_error(lambda: call(r), lambda: call(t), what)
    assert (r(a=ok, b=ok)["output"] == 2).all()  # and it still runs


def test_constructor_flags_and_path_types(tmp_path, fast_device):
    """litecl's own options are checked by litecl; LiteRT's flags are LiteRT's (its
    num_threads checks, its experimental_preserve_all_tensors takes any truth value)."""
    from models.builders import cast_model  # noqa: PLC0415

    p = tmp_path / "m.tflite"
    p.write_bytes(cast_model("float32", "float16", [4]))
    with pytest.raises(litecl.LiteclError, match="fuse must be True or False"):
        litecl.Interpreter(model_path=str(p), device=fast_device, fuse="yes")
    with pytest.raises(litecl.LiteclError, match="unknown placement"):
        litecl.Interpreter(model_path=str(p), device=fast_device, placement="gpu")
    with pytest.raises(litecl.ModelError, match="str or path-like"):
        litecl.Interpreter(model_path=3, device=fast_device)
    m = p.read_bytes()
    for kw in ({"num_threads": 0}, {"num_threads": -5}, {"num_threads": "x"}):
        _same_error(lambda: litecl.Interpreter(model_content=m, device=fast_device, **kw),
                    lambda: make_interpreter(m, **kw), kw)
    # above a C int LiteRT's binding raises a many-line TypeError; litecl one line (issue 34)
    with pytest.raises(litecl.LiteclError, match="^num_threads must be at most 2147483647"):
        litecl.Interpreter(model_content=m, device=fast_device, num_threads=2**31)
    for path in (str(p), p, os.fsencode(str(p))):  # str, PathLike and bytes paths all load
        litecl.Interpreter(model_path=path, device=fast_device).close()


def test_tensor_types_litert_cannot_cast_are_litert_s_error(fast_device):
    """An INT2 tensor into a CAST to int8: LiteRT's CAST has no such kernel and fails at
    invoke (RuntimeError, measured); litecl leaves the node to LiteRT and reports the
    same. (BFLOAT16 converts on OpenCL.)"""
    from ai_edge_litert import schema_py_generated as s  # noqa: PLC0415

    m = chain_model(["float32", "int2", "int8"], (4,))
    ours, theirs = litecl.Interpreter(model_content=m, device=fast_device, quiet=True), make_interpreter(m)
    for it in (ours, theirs):
        it.allocate_tensors()
        it.set_tensor(0, np.array([1.5, -2, 0.3, 7], np.float32))
    _same_error(ours.invoke, theirs.invoke)

    def bf16(m):
        m.subgraphs[0].tensors[1].type = s.TensorType.BFLOAT16

    it = litecl.Interpreter(model_content=_mutated(cast_model("float32", "float16", (4,)), bf16),
                            device=fast_device)
    it.allocate_tensors()
    assert [p["placement"] for p in it.placement()] == ["opencl"]


def test_cli_input_errors(tmp_path, fast_device):
    model = tmp_path / "m.tflite"
    model.write_bytes(add_model("float32", [2, 3], [3]))
    good = {"input1": np.zeros([2, 3], np.float32), "input2": np.zeros([3], np.float32)}
    cases = {
        "dtype": (dict(good, input2=np.zeros([3], np.int32)), r"input 'input2' expects float32, got int32"),
        # bfloat16 (ml_dtypes) is stored as raw 2-byte values: the message said "got |V2"
        "bfloat16": (dict(good, input2=np.zeros([3], "V2")), r"expects float32, got raw 2-byte values \(\|V2: how "
                     r"an \.npz stores bfloat16"),
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
                             "--resize"), r"node 0 \(ADD\): shapes \[2, 3\] and \[4\] do not broadcast")


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


def _break_kernels(monkeypatch, when=lambda source: True):
    """Make every generated kernel whose source ``when`` accepts invalid OpenCL C: the
    device's compiler then fails on it for real (a build log). (Past the in-memory
    program cache, which may hold the program built from the unbroken source, and past
    plan_for's memo of plans already built.)"""
    import litecl.delegate as D  # noqa: PLC0415
    from litecl import kernels  # noqa: PLC0415

    real = D.build_program

    def build(device, source):
        return kernels.build_program(device, source + BROKEN) if when(source) else real(device, source)

    monkeypatch.setattr(D, "build_program", build)
    monkeypatch.setattr(D, "_PLANNED", {})  # plan_for's memo of plans whose programs built
    monkeypatch.setattr(D, "_PRESETS", {})  # the plans _INIT hands the runtime


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


def test_kernel_build_failure_is_an_error_with_the_log(monkeypatch, fast_device):
    """A kernel the device's compiler refuses: allocate_tensors raises KernelBuildError
    (one line naming the device and the compiler's first error; .log and .source carry
    the rest), not a crash; the interpreter works once the cause is gone."""
    m = multi_op_model("cast_mul_cast")  # CAST (CL) | MUL (LiteRT) | ADD, CAST (CL)
    _break_kernels(monkeypatch)
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    with pytest.raises(litecl.KernelBuildError, match=r"^kernel build failed on .*must not build") as e:
        it.allocate_tensors()
    assert "\n" not in str(e.value) and "this kernel must not build" in e.value.log
    assert BROKEN in e.value.source
    monkeypatch.undo()
    it.allocate_tensors()
    inputs = random_inputs(it.get_input_details(), 1)
    got, want = _run(it, inputs), _litert(m, inputs)
    assert all(bit_equal(got[k], want[k]) for k in want)


def test_cli_shows_a_build_failure_on_one_line(monkeypatch, capsys, tmp_path, fast_device):
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model("cast_mul_cast"))
    _break_kernels(monkeypatch)
    assert litecl.cli.main(["run", str(p), "--device", fast_device]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: kernel build failed on"), err


def test_build_failure_at_a_new_shape(monkeypatch, fast_device):
    """A kernel that builds at one shape and not at another (a broadcast ADD's source
    holds its inner dimension): the allocate after the resize raises KernelBuildError,
    and other shapes run bit-exact before and after."""
    m = add_model("float32", [2, 3], [3])
    _break_kernels(monkeypatch, when=lambda src: "% 4u" in src)
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    for rows, inner in ((2, 3), (5, 4), (3, 5), (2, 3)):
        shapes = {"input1": [rows, inner], "input2": [inner]}
        it.resize_tensor_input(0, shapes["input1"])
        it.resize_tensor_input(1, shapes["input2"])
        if inner == 4:
            with pytest.raises(litecl.KernelBuildError, match="kernel build failed"):
                it.allocate_tensors()
            continue
        it.allocate_tensors()
        x = {k: np.arange(np.prod(v), dtype=np.float32).reshape(v) - 4 for k, v in shapes.items()}
        got, want = _run(it, x), _litert(m, x, shapes)
        assert bit_equal(got["output"], want["output"]), (rows, inner)
    assert it.placement()[0]["placement"] == "opencl"


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
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
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
    assert any(p["placement"] == "opencl" for p in it.placement())


def test_resize_errors_are_litert_s(fast_device):
    m = cast_model("float32", "int8", [2, 3], dynamic=True)
    ours, theirs = litecl.Interpreter(model_content=m, device=fast_device, quiet=True), make_interpreter(m)
    i = theirs.get_input_details()[0]["index"]
    o = theirs.get_output_details()[0]["index"]
    calls = {"strict other dim": lambda x: x.resize_tensor_input(i, [5, 4], strict=True),
             "strict rank": lambda x: x.resize_tensor_input(i, [5, 3, 1], strict=True),
             "negative": lambda x: x.resize_tensor_input(i, [-1, 3]),
             "nested": lambda x: x.resize_tensor_input(i, [[2, 3]]),
             "text": lambda x: x.resize_tensor_input(i, ["a"])}
    for what, call in calls.items():
        _same_error(lambda: call(ours), lambda: call(theirs), what)
    for x in (ours, theirs):
        x.resize_tensor_input(o, [4, 3])  # LiteRT resizes an output too; prepare resets it
        x.resize_tensor_input(i, [5, 3, 1])  # not strict: any rank, as LiteRT
        x.resize_tensor_input(i, np.array([4, 3], np.int64))
    _same_error(ours.invoke, theirs.invoke, "invoke after resize", litecl.NotAllocatedError)
    for x in (ours, theirs):
        x.allocate_tensors()
    _same_error(lambda: ours.set_tensor(i, np.zeros([2, 3], np.float32)),
                lambda: theirs.set_tensor(i, np.zeros([2, 3], np.float32)), "old shape")
    # a static model resized so that its ADD cannot broadcast: the delegate's message
    a = litecl.Interpreter(model_content=add_model("float32", [2, 3], [3]), device=fast_device, quiet=True)
    a.resize_tensor_input(1, [4])
    with pytest.raises(RuntimeError, match=r"node 0 \(ADD\): shapes \[2, 3\] and \[4\] do not broadcast") as e:
        a.allocate_tensors()
    assert isinstance(e.value, litecl.LiteclError)


def test_inputs_survive_allocate_and_resizes_rebind_memory(fast_device):
    """LiteRT keeps input values across allocate_tensors() (and a resize to the same
    shape): so does litecl (its kernels read LiteRT's memory). After a real resize LiteRT
    moves the tensors: litecl's kernels follow, bit-exact."""
    for m, n in ((add_model("float32", (4,), (4,)), 4), (cast_model("int8", "int64", [300000]), 300000)):
        it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
        it.allocate_tensors()
        ins = it.get_input_details()
        for d in ins:
            it.set_tensor(d["index"], np.arange(n).astype(d["dtype"]))
        it.invoke()
        want = it.get_tensor(it.get_output_details()[0]["index"])
        it.allocate_tensors()
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
        it.resize_tensor_input(ins[0]["index"], [n])
        it.allocate_tensors()
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
        ref = make_interpreter(m)
        for x in (it, ref):
            for d in ins:
                x.resize_tensor_input(d["index"], [n + 1])
            x.allocate_tensors()
            for d in ins:
                x.set_tensor(d["index"], (np.arange(n + 1) % 100).astype(d["dtype"]))
            x.invoke()
        o = ref.get_output_details()[0]["index"]
        assert it.get_tensor(o).tobytes() == ref.get_tensor(o).tobytes()
        assert it.placement()[0]["placement"] == "opencl"
        it.close()


# ----------------------------------------------------------------------------- lifetime
def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc for RSS")
def test_10k_invokes_do_not_grow_memory(fast_device):
    """CAST (OpenCL) | MUL (LiteRT) | ADD, CAST (OpenCL): 10,000 set/invoke/get rounds
    leave the Python heap and the process's memory flat and the results unchanged."""
    it = litecl.Interpreter(model_content=multi_op_model("cast_mul_cast"), device=fast_device, quiet=True)
    it.allocate_tensors()
    d, o = it.get_input_details()[0], it.get_output_details()[0]
    x = random_inputs([d], 0)["input"]

    def step():
        it.set_tensor(d["index"], x)
        it.invoke()
        return it.get_tensor(o["index"])

    want = step()
    for _ in range(300):  # warm-up: allocator pools, pyopencl caches
        step()
    rss0 = _rss()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(10_000):
            got = step()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert bit_equal(got, want)
    assert sum(p["placement"] == "opencl" for p in it.placement()) == 3
    assert grown < 256 * 1024, f"Python heap grew {grown} bytes over 10k invokes"
    assert _rss() - rss0 < 16 * 2**20, f"RSS grew {(_rss() - rss0) / 2**20:.1f} MiB over 10k invokes"


def test_close_releases_everything_and_use_after_close_raises(shared_models, fast_device):
    """close() frees LiteRT's interpreter now, and with it litecl's partition kernels
    (LiteRT calls their free), even while a SignatureRunner of it lives; every later
    call, the runner's included, is a LiteclError."""
    it = litecl.Interpreter(model_path=shared_model("multi_signature_model.tflite"), device=fast_device,
                            quiet=True)
    runner = it.get_signature_runner("add")
    runner(a=np.ones([10, 10], np.float32), b=np.ones([10, 10], np.float32))
    assert it.delegate.partitions()
    it.close()
    assert it.delegate.partitions() == []
    calls = [it.allocate_tensors, it.invoke, it.get_input_details, it.get_output_details,
             it.get_tensor_details, it.get_signature_list,
             lambda: it.set_tensor(0, np.zeros(1)), lambda: it.get_tensor(0),
             lambda: it.resize_tensor_input(0, [1]), lambda: it.get_signature_runner("add"),
             runner.get_input_details,
             lambda: runner(a=np.ones([10, 10], np.float32), b=np.ones([10, 10], np.float32))]
    for call in calls:
        with pytest.raises(litecl.LiteclError, match="closed"):
            call()
    it.close()  # idempotent


def test_context_manager_releases_device_buffers(fast_device):
    m = chain_model(["int32", "float32", ("add", np.ones([64], np.float32)), "float16"], [64])
    with litecl.Interpreter(model_content=m, device=fast_device, quiet=True) as it:
        it.allocate_tensors()
        _run(it, {"input": np.arange(64, dtype=np.int32)})
        parts = it.delegate.partitions()
        assert parts and all(p.counts()["buffers"] > 0 and p.handle for p in parts)
    assert it.delegate.partitions() == []
    assert all(p.handle is None for p in parts)  # the runtime's partitions freed by LiteRT's free
    with pytest.raises(litecl.LiteclError, match="closed"):
        it.invoke()


def test_many_interpreters_opened_and_closed(fast_device):
    m = chain_model(["uint8", "float32", ("mul", 0.5), "float16"], [256])
    x = {"input": np.arange(256, dtype=np.uint8)}
    for _ in range(20):  # warm-up
        with litecl.Interpreter(model_content=m, device=fast_device, quiet=True) as it:
            it.allocate_tensors()
            _run(it, x)
    rss0 = _rss() if os.path.exists("/proc/self/statm") else 0
    for _ in range(200):
        with litecl.Interpreter(model_content=m, device=fast_device, quiet=True) as it:
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
            it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
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


_THREADS_ON_ONE = """
import collections, sys, threading, numpy as np
sys.path.insert(0, sys.argv[2])
import litecl
from models.builders import add_model
it = litecl.Interpreter(model_content=add_model("float32", (64, 64), (64, 64)), device=sys.argv[1], quiet=True)
it.allocate_tensors()
seen = collections.Counter()
def work():
    x = np.ones((64, 64), np.float32)
    for _ in range(300):
        try:
            it.set_tensor(0, x); it.set_tensor(1, x); it.invoke(); it.get_tensor(it.get_output_details()[0]["index"])
            seen["ok"] += 1
        except litecl.LiteclError as e:
            seen["busy" if "another thread" in str(e) else repr(e)] += 1
        except Exception as e:  # LiteRT's own, e.g. a view another thread holds
            seen[type(e).__name__ + ": " + str(e).splitlines()[0]] += 1
ts = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print("SEEN", dict(seen))
"""


@pytest.mark.parametrize("device", device_params(["pocl", "intel"]))
def test_one_interpreter_from_many_threads_errors_instead_of_crashing(device):
    """LiteRT's rule is one thread per Interpreter; four threads on one used to segfault
    PoCL (map/unmap races). An invoke while another thread's runs is a LiteclError
    naming the rule; nothing crashes or hangs."""
    r = subprocess.run([sys.executable, "-c", _THREADS_ON_ONE, device, str(ROOT)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])
    seen = eval(r.stdout.split("SEEN ", 1)[1])
    assert sum(seen.values()) == 1200 and set(seen) <= {"ok", "busy"}, seen


def test_interpreters_are_not_picklable(fast_device):
    import copy  # noqa: PLC0415
    import pickle  # noqa: PLC0415

    from models.builders import cast_model  # noqa: PLC0415

    it = litecl.Interpreter(model_content=cast_model("float32", "int8", [4]), device=fast_device)
    for f in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="cannot be pickled or copied"):
            f(it)


FIRST_INTERPRETERS_AT_ONCE = r"""
import sys, threading
import numpy as np
import litecl
from models.builders import cast_model
device = sys.argv[1]
models = [cast_model("float32", "float16", [1, 100 + k], dynamic=True) for k in range(8)]
start, errors = threading.Barrier(8), []
def work(m):
    start.wait()
    try:
        for placement in ("auto", "all"):
            it = litecl.Interpreter(model_content=m, device=device, placement=placement, quiet=True)
            it.allocate_tensors()
            it.set_tensor(it.get_input_details()[0]["index"], np.ones(it.get_input_details()[0]["shape"], np.float32))
            it.invoke()
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=work, args=(m,)) for m in models]
for t in threads: t.start()
for t in threads: t.join()
print("DONE", errors)
"""


@pytest.mark.parametrize("device", device_params(["intel", "pocl"]))
def test_eight_threads_making_a_process_s_first_interpreters_at_once(device):
    """Eight threads construct a fresh process's first litecl.Interpreters at once (an
    app's thread pool at start-up): each lists and opens the OpenCL device, one at a time
    (icd.LISTING_LOCK). Before, their listings ran together and PoCL's clGetDeviceInfo
    segfaulted (1 to 3 of 6 processes here). The serialisation itself is checked first:
    eight open_device calls at once, the device search entered by one thread at a time."""
    r = subprocess.run([sys.executable, "-c", SEARCHES_AT_ONCE, device], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0 and "AT ONCE 1 OPENED 1" in r.stdout, (r.returncode, r.stdout, r.stderr[-1500:])
    for _ in range(3):
        r = subprocess.run([sys.executable, "-c", FIRST_INTERPRETERS_AT_ONCE, device], capture_output=True,
                           text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 0 and "DONE []" in r.stdout, (r.returncode, r.stdout, r.stderr[-1500:])


SEARCHES_AT_ONCE = r"""
import sys, threading, time
from litecl import device as D
inside, most, lock = [0], [0], threading.Lock()
select = D._select
def counted(base):
    with lock:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
    time.sleep(0.05)
    try:
        return select(base)
    finally:
        with lock:
            inside[0] -= 1
D._select = counted
start, got = threading.Barrier(8), []
def work():
    start.wait()
    got.append(D.open_device(sys.argv[1]))
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("AT ONCE", most[0], "OPENED", len({id(d) for d in got}))
"""


OCLGRIND_THREADS = r"""
import sys, threading
import numpy as np
import litecl
from litecl.compare import make_interpreter
from models.builders import add_model
m = add_model("float32", [1, 8], [1, 8])
errors = []
def work(k):
    try:
        it = litecl.Interpreter(model_content=m, device="oclgrind", quiet=True)
        it.allocate_tensors()
        rng = np.random.default_rng(k)
        for _ in range(20):
            x, y = (rng.standard_normal((1, 8)).astype(np.float32) for _ in range(2))
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.set_tensor(it.get_input_details()[1]["index"], y)
            it.invoke()
            if it.get_tensor(it.get_output_details()[0]["index"]).tobytes() != (x + y).tobytes():
                errors.append("differs")
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
for t in threads: t.start()
for t in threads: t.join()
print("DONE", errors)
"""


def test_two_threads_invoking_on_oclgrind_run_one_at_a_time(tmp_path):
    """Oclgrind with two threads invoking their interpreters: it crashed in
    oclgrind::WorkGroup (14 of 15 processes, a fresh user's) and once returned a wrong sum;
    its commands now run one thread at a time (Device.one_thread), exact. With an empty
    cache (CI's): one thread's self-test kernels and program builds beside the other's
    invoke crashed it too (9 of 10 processes; Device.exclusive)."""
    from conftest import DEVICE_STATUS

    if DEVICE_STATUS.get("oclgrind"):
        pytest.skip(DEVICE_STATUS["oclgrind"])
    for k in range(2):
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / f"cache{k}")}
        r = subprocess.run([sys.executable, "-c", OCLGRIND_THREADS], capture_output=True, text=True,
                           timeout=300, cwd=ROOT, env=env)
        assert r.returncode == 0 and "DONE []" in r.stdout, (r.returncode, r.stdout, r.stderr[-1500:])


_RESULT = r"""
def result(call):  # what reached the caller: RESULT and its kind
    try:
        call()
        print("RESULT none", flush=True)
    except KeyboardInterrupt:
        print("RESULT KeyboardInterrupt", flush=True)
    except SystemExit as e:
        print("RESULT SystemExit", e.code, flush=True)
    except Exception as e:
        print("RESULT", type(e).__name__, flush=True)
"""


_INTERRUPTED_PREPARE = r"""
import sys, numpy as np, litecl
from litecl import claims
from litecl.compare import make_interpreter
from models.builders import chain_model
kind, device, api = sys.argv[1], sys.argv[2], sys.argv[3]
m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
real, hits = claims.decide, []
def decide(*a, **k):  # a signal handler's exception, landing inside litecl's Prepare callback
    if not hits:
        hits.append(1)
        raise KeyboardInterrupt() if kind == "int" else SystemExit(3)
    return real(*a, **k)
claims.decide = decide
d = litecl.Delegate(device, quiet=True)
result(lambda: (make_interpreter(m, delegates=[d]) if api == "litert"
                else litecl.Interpreter(model_content=m, delegate=d)).allocate_tensors())
it = make_interpreter(m, delegates=[d])  # the next one as usual
it.allocate_tensors()
print("AGAIN ok", flush=True)
"""


@pytest.mark.parametrize("api", ["litert", "litecl"])
@pytest.mark.parametrize("kind", ["int", "exit"])
def test_an_interrupt_inside_a_prepare_is_raised_as_itself(fast_device, kind, api):
    """Ctrl-C (KeyboardInterrupt) or a signal handler's sys.exit (SystemExit) landing in
    litecl's Prepare callback, where nothing may leave it, became a RuntimeError or
    LiteclError, and a server that catches Exception kept serving (a fresh user's
    report): it is raised again, as itself, once LiteRT's call returns to Python, under
    LiteRT's Interpreter and litecl.Interpreter; the next interpreter prepares as usual."""
    r = _py_hardening(_RESULT + _INTERRUPTED_PREPARE, kind, fast_device, api)
    lines = dict(ln.split(" ", 1) for ln in r.stdout.splitlines() if " " in ln)
    assert lines.get("RESULT") == ("KeyboardInterrupt" if kind == "int" else "SystemExit 3"), r.stdout + r.stderr
    assert lines.get("AGAIN") == "ok", r.stdout + r.stderr


_INTERRUPT_AT_A_CALLBACK_S_START = r"""
import sys, numpy as np, litecl
from litecl.compare import make_interpreter
from models.builders import add_model
kind, device, api = sys.argv[1], sys.argv[2], sys.argv[3]
m = add_model("float32", [1, 3], [1, 3], dynamic=True)
d = litecl.Delegate(device, quiet=True)
it = make_interpreter(m, delegates=[d]) if api == "litert" else litecl.Interpreter(model_content=m, delegate=d)
it.allocate_tensors()
it.resize_tensor_input(0, [5, 3]); it.resize_tensor_input(1, [5, 3])  # a new shape: the planner runs
class Timeout(Exception):
    pass
where = "plan_for" if kind == "own-body" else "_PLAN"  # inside the callback's try, or before it
def at_start(frame, event, arg):  # a signal handler's exception at _PLAN's first instruction, before its try
    if event == "call" and frame.f_code.co_name == where:
        sys.setprofile(None)
        raise {"int": KeyboardInterrupt(), "exit": SystemExit(3), "own": Timeout("late"), "own-body": Timeout("late")}[kind]
sys.setprofile(at_start)
result(it.allocate_tensors)
sys.setprofile(None)
it.allocate_tensors()  # the next prepare as usual; its output bit for bit LiteRT's without litecl
ref = make_interpreter(m)
ref.resize_tensor_input(0, [5, 3]); ref.resize_tensor_input(1, [5, 3]); ref.allocate_tensors()
x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
for r in (it, ref):
    for k, det in enumerate(r.get_input_details()):
        r.set_tensor(det["index"], x[k])
    r.invoke()
got, want = (r.get_tensor(r.get_output_details()[0]["index"]) for r in (it, ref))
print("AGAIN", got.tobytes() == want.tobytes(), flush=True)
"""


@pytest.mark.parametrize("api", ["litert", "litecl"])
@pytest.mark.parametrize("kind", ["int", "exit", "own", "own-body"])
def test_an_interrupt_at_a_callback_s_first_line_is_raised_as_itself(fast_device, kind, api):
    """A signal handler runs at a function's first instruction: its exception (Ctrl-C, a
    SIGTERM handler's sys.exit, an app's timeout) raised at the planner callback's start,
    before its try, was printed as "Exception ignored on calling ctypes callback function"
    and lost (a service kept running after SIGTERM, 4 of 5 times: a fresh user's report).
    It is raised again as itself once LiteRT's call returns, nothing printed; the next
    prepare runs as usual. ``own-body``: the app's exception inside the callback's try
    (in the planner) came back as LiteclError("litecl delegate: Timeout: late") (a fresh
    user's SIGALRM timer): it is the app's too (errors.raised_by_app)."""
    r = _py_hardening(_RESULT + _INTERRUPT_AT_A_CALLBACK_S_START, kind, fast_device, api)
    lines = dict(ln.split(" ", 1) for ln in r.stdout.splitlines() if " " in ln)
    want = {"int": "KeyboardInterrupt", "exit": "SystemExit 3", "own": "Timeout", "own-body": "Timeout"}[kind]
    assert lines.get("RESULT") == want, r.stdout + r.stderr
    assert lines.get("AGAIN") == "True", r.stdout + r.stderr
    assert "Exception ignored" not in r.stderr, r.stderr


_FORK_WHILE_INVOKING = r"""
import os, sys, threading, time, numpy as np, litecl
from models.builders import chain_model
m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (1 << 16,))
it = litecl.Interpreter(model_content=m, device=sys.argv[1], quiet=True)
it.allocate_tensors()
stop = []
def loop():
    while not stop:
        it.invoke()
t = threading.Thread(target=loop, daemon=True)
t.start()
slow = 0
for k in range(12):
    time.sleep(0.01)
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # a normal exit: Python's atexit and the C runtime's
    t0 = time.time()
    os.waitpid(pid, 0)
    slow = max(slow, time.time() - t0)
stop.append(1)
t.join()
print("SLOWEST", round(slow, 2), flush=True)
"""


def test_a_child_forked_while_invoking_exits_at_once(fast_device):
    """A child forked while another thread was inside an invoke, which never uses litecl,
    took ~11 s to exit: litecl's exit handler waited twice 5 s for the parent's work in
    flight, which the child does not have (a fresh user's server children)."""
    r = _py_hardening(_FORK_WHILE_INVOKING, fast_device, timeout=240)
    slow = float(r.stdout.split("SLOWEST")[1].split()[0])
    assert slow < 3.0, r.stdout


def test_raised_by_app_tells_litecl_s_code_from_an_app_s():
    """errors.raised_by_app (delegate._fail, cl_build.build_source): an exception raised in
    litecl's own files (backend/ and ops/, in a checkout or installed), its libraries or
    Python's library is litecl's; one raised in any other file (an app's signal handler,
    python -c) is the app's; a LiteclError is always litecl's."""
    import numpy as np  # noqa: PLC0415

    import litecl.ops.codegen as codegen  # noqa: PLC0415
    from litecl import claims  # noqa: PLC0415
    from litecl.errors import LiteclError, raised_by_app  # noqa: PLC0415

    def raised_in(filename: str, exc: str = "ZeroDivisionError('x')") -> BaseException:
        ns: dict = {}
        exec(compile(f"def f():\n    raise {exc}\n", filename, "exec"), ns)
        try:
            ns["f"]()
        except BaseException as e:  # noqa: BLE001
            return e
        raise AssertionError("did not raise")

    for own in (claims.__file__, codegen.__file__, np.__file__, os.__file__):
        assert not raised_by_app(raised_in(own)), own
    assert raised_by_app(raised_in(__file__)) and raised_by_app(raised_in("<string>"))
    assert not raised_by_app(raised_in(__file__, "__import__('litecl').LiteclError('x')"))
    assert not raised_by_app(LiteclError("no traceback")) and not raised_by_app(ValueError("none either"))
