"""Issue 12: litecl inside LiteRT's runtime stays faithful to it (TensorFlow in the same
process, run-time shapes, constants without a dense buffer, variables, execution order,
options unions, signatures). LiteRT owns the graph; litecl's delegate runs the CAST/ADD
nodes, asserted on OpenCL in each case, and every output is compared with LiteRT's
builtin kernels."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import force_copies, DEVICE_STATUS, ROOT, SHARED_MODELS

TF_FIRST = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf  # first, on purpose: it exports LLVM's symbols process-wide
    import litecl
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    dev, path = sys.argv[1], sys.argv[2]
    it = litecl.Interpreter(model_path=path, device=dev, quiet=True)
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
    assert on > 0 and it.delegate.stats["partition_invokes"] > 0, "nothing ran on OpenCL"
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


TF_AFTER = textwrap.dedent("""
    import sys
    import litecl
    from models.builders import cast_model
    litecl.open_device(sys.argv[1])  # the ICD libraries loaded before TensorFlow
    import tensorflow as tf  # noqa: F401  (exports its LLVM process-wide)
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    m = cast_model("float32", "int8", [33])
    it = litecl.Interpreter(model_content=m, device=sys.argv[1], quiet=True)
    it.allocate_tensors()  # builds a program
    ref = Interpreter(model_content=m, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref.allocate_tensors()
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 300.0, -300.0, 127.5, -128.5] * 3 + [0.5] * 6, np.float32)
    for r in (it, ref):
        r.set_tensor(r.get_input_details()[0]["index"], x)
        r.invoke()
    a, b = (r.get_tensor(r.get_output_details()[0]["index"]) for r in (it, ref))
    assert a.tobytes() == b.tobytes(), (a, b)
    assert it.placement()[0]["placement"] == "opencl"
    print("OK")
""")


@pytest.mark.parametrize("cache", ["none", "fresh"])
@pytest.mark.parametrize("dev", ["oclgrind", "pocl"])
def test_tensorflow_imported_after_the_runtime(dev, cache, tmp_path):
    """The runtime opened, then TensorFlow imported, then a program built: Oclgrind's and
    PoCL's lazily bound LLVM/clang calls went to TensorFlow's LLVM and the build
    segfaulted (a fresh user's test run crashed so with Oclgrind, after a test that
    imported tensorflow; a later one with Debian's PoCL 3.1 on an empty kernel cache);
    device.py binds their symbols when it loads them. PoCL's own kernel cache starts
    empty, so clang compiles. Without litecl's cache (full listing) and with a fresh one
    (the listing remembered: the loader given that runtime alone next time)."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (the test extra has it)")
    if DEVICE_STATUS.get(dev):
        pytest.skip(DEVICE_STATUS[dev])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT), POCL_CACHE_DIR=str(tmp_path / "pocl"))
    if cache == "none":
        env["LITECL_NO_CACHE"] = "1"
    else:
        env.pop("LITECL_NO_CACHE", None)
        env["LITECL_CACHE_DIR"] = str(tmp_path / "cache")
    for _ in range(1 if cache == "none" else 2):  # the second process reads the remembered listing
        r = subprocess.run([sys.executable, "-c", TF_AFTER, dev], capture_output=True, text=True,
                           env=env, timeout=600)
        assert r.returncode == 0, f"rc={r.returncode}: {r.stderr[-1500:]}"
        assert r.stdout.strip().endswith("OK"), r.stdout


# ---------------------------------------------------------------------------------------
# Hand-made graphs (models/runtime_graphs.py) and TensorFlow-built ones, against LiteRT

from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType  # noqa: E402

import litecl  # noqa: E402
from conftest import device_params, launches, tf_model  # noqa: E402
from models import runtime_graphs as rg  # noqa: E402

DEVICES = device_params(["pocl", "intel"]) + device_params(["pocl"], ("mobile",))


def _litert(buf: bytes):
    return LiteRT(model_content=buf, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == object or b.dtype == object:
        return a.shape == b.shape and list(a.ravel()) == list(b.ravel())
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _both(buf: bytes, dev: str, inputs: dict, resize: dict | None = None, invokes: int = 2):
    """Run ``buf`` on LiteRT and on litecl with the same inputs (index -> array), ``invokes``
    times; returns (litert outputs, litecl outputs) of each invoke and the litecl Interpreter."""
    ref, it = _litert(buf), litecl.Interpreter(model_content=buf, device=dev, quiet=True)
    for x in (ref, it):
        for k, s in (resize or {}).items():
            x.resize_tensor_input(k, s)
        x.allocate_tensors()
    runs = []
    for _ in range(invokes):
        outs = []
        for x in (ref, it):
            for k, v in inputs.items():
                x.set_tensor(k, v)
            x.invoke()
            outs.append([x.get_tensor(d["index"]) for d in x.get_output_details()])
        runs.append(outs)
    # each partition's kernel counts its own invokes (a WHILE body's, each iteration)
    assert it.delegate.stats["partition_invokes"] >= invokes or not it.delegate.partitions()
    return runs, it


def _assert_same(runs):
    for want, got in runs:
        assert len(want) == len(got)
        for w, g in zip(want, got):
            assert _same(g, w), (g, w)


def _ops_on(it, op):
    """placement() of the nodes of ``op`` (only CAST and ADD nodes have rows: LiteRT
    runs every other node)."""
    return [p["placement"] for p in it.placement() if p["op"] == op]


@pytest.mark.parametrize("dev", DEVICES)
def test_write_after_write_keeps_model_order(dev):
    # CAST a->y, ADD y+y->w, CAST b->y: LiteRT w = 2a, y = b (litecl gave w = 2b before)
    a, b = np.array([1, 2, 3, 4], np.int32), np.array([100, 200, 300, 400], np.int32)
    runs, it = _both(rg.write_after_write(), dev, {0: a, 1: b})
    _assert_same(runs)
    assert runs[0][1][0].tolist() == [2, 4, 6, 8]
    assert _ops_on(it, "CAST") == ["opencl", "opencl"] and _ops_on(it, "ADD") == ["opencl"]


@pytest.mark.parametrize("dev", DEVICES)
def test_graph_input_overwritten_after_read(dev):
    x, z = np.array([1.5, -2, 3, 4], np.float32), np.array([7, 8, 9, 10], np.int32)
    runs, it = _both(rg.input_overwritten(), dev, {0: x, 1: z})
    _assert_same(runs)
    assert runs[0][1][0].tolist() == [3, -4, 6, 8]
    assert _ops_on(it, "ADD") == ["opencl"] and _ops_on(it, "CAST") == ["opencl"]


@pytest.mark.parametrize("copies", [False, True], ids=["in_place", "copies"])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_overwritten_input_in_one_partition(fast_device, fuse, copies):
    """ADD reads x, then CAST z -> x in the same partition: the ADD runs first (LiteRT
    lists the partition's nodes CAST first) and reads the x that was set, also on the
    copy path (x is uploaded as an input and read back as an output)."""

    d = litecl.Delegate(fast_device, quiet=True, fuse=fuse)
    if copies:
        force_copies(d)
    buf = rg.input_overwritten()
    ref, it = _litert(buf), litecl.Interpreter(model_content=buf, delegate=d)
    for i in (ref, it):
        i.allocate_tensors()
    for k in range(3):
        x = np.array([1.5, -2, 3, 4], np.float32) * (k + 1)
        z = np.array([7, 8, 9, 10], np.int32) - k
        outs = []
        for i in (ref, it):
            i.set_tensor(0, x)
            i.set_tensor(1, z)
            i.invoke()
            outs.append([i.get_tensor(o["index"]) for o in i.get_output_details()])
        assert all(_same(g, w) for g, w in zip(outs[1], outs[0])), (k, outs)
    assert [p["partition"] for p in it.placement()] == [0, 0] and d.stats["partition_invokes"] == 3


@pytest.mark.parametrize("dev", DEVICES)
def test_variable_written_then_read_across_partitions(dev):
    # nodes next to a variable are delegated too (LiteRT owns the variable's memory)
    x = np.array([1.5, 2.25, -3, 4], np.float32)
    runs, it = _both(rg.variable_across_segments(), dev, {0: x})
    _assert_same(runs)
    assert runs[0][1][0].tolist() == (2 * x - np.trunc(x)).tolist()
    assert _ops_on(it, "CAST") == ["opencl", "opencl"]


@pytest.mark.parametrize("dev", DEVICES)
def test_variable_input_takes_the_value_set(dev):
    x, v = np.array([1, 2, 3, 4], np.float32), np.array([5, -6, 7.5, 8], np.float32)
    runs, it = _both(rg.variable_input(), dev, {0: x, 1: v})
    _assert_same(runs)
    assert runs[0][1][0].tolist() == [5, -12, 22, 32]
    assert it.placement() and set(_ops_on(it, "CAST") + _ops_on(it, "ADD")) == {"opencl"}


def test_reset_all_variables_matches_litert(fast_device):
    buf = rg.variable_input()
    ref, it = _litert(buf), litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)
    for x in (ref, it):
        x.allocate_tensors()
        x.set_tensor(0, np.array([1, 2, 3, 4], np.float32))
        x.set_tensor(1, np.array([5, 6, 7, 8], np.float32))
        x.reset_all_variables()
        x.invoke()
    assert _same(it.get_tensor(it.get_output_details()[0]["index"]),
                 ref.get_tensor(ref.get_output_details()[0]["index"]))
    assert it.delegate.stats["partition_invokes"] == 1


@pytest.mark.parametrize("dev", DEVICES)
def test_add_with_another_options_table_ignores_it(dev):
    # MulOptions(RELU) in ADD's union: LiteRT applies no activation
    a, b = np.array([-1, 2, -3, 4], np.float32), np.array([-1, -5, 1, 1], np.float32)
    runs, it = _both(rg.add_with_mul_options(), dev, {0: a, 1: b})
    _assert_same(runs)
    assert runs[0][1][0].tolist() == [-2, -3, -2, 5]
    assert _ops_on(it, "ADD") == ["opencl"]


def test_signature_input_that_is_no_subgraph_input(fast_device):
    """The signature input 'c' is the CAST's output, read by the ADD: inside one delegated
    partition LiteRT would allocate no memory for it and its runner's set_tensor would
    raise 'Tensor is unallocated' (LiteRT alone runs it). litecl.Interpreter keeps the
    CAST on LiteRT, saying why, and the ADD on OpenCL."""
    buf = rg.signature_non_input()
    x, c = np.array([1, 2, 3, 4], np.int32), np.array([9, 9, 9, 9], np.float32)
    want = _litert(buf).get_signature_runner()(x=x, c=c)
    it = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)
    runner = it.get_signature_runner()
    assert runner.get_input_details()["c"]["index"] == 1
    got = runner(x=x, c=c)
    assert _same(got["y"], want["y"])
    rows = {p["op"]: p for p in it.placement()}
    assert rows["ADD"]["placement"] == "opencl"
    assert rows["CAST"]["placement"] == "litert" and "signature tensor" in rows["CAST"]["reason"]
    assert it.delegate.stats["partition_invokes"] == 1
    with pytest.raises(ValueError):  # LiteRT: "Dimension mismatch" (no resize of non-inputs)
        runner(x=x, c=np.zeros(6, np.float32))
    # a second Interpreter of the model (Prepare's memo) decides the same
    again = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)
    assert _same(again.get_signature_runner()(x=x, c=c)["y"], want["y"])
    assert again.placement() == it.placement()


@pytest.mark.parametrize("dev", DEVICES)
def test_constant_string_output(dev):
    runs, it = _both(rg.constant_string_output(), dev, {0: np.array([3, -4], np.int32)})
    _assert_same(runs)
    assert list(runs[0][1][1]) == [b"ab", b"c"]
    assert it.get_output_details()[1]["dtype"] is np.bytes_
    assert it.placement() and all(p["placement"] == "opencl" for p in it.placement())


@pytest.mark.parametrize("dev", DEVICES)
def test_sparse_constant_read_by_densify(dev):
    x = np.arange(16, dtype=np.float32).reshape(4, 4) * 0.75 - 3
    runs, it = _both(rg.sparse_densify_add(), dev, {0: x})
    _assert_same(runs)
    assert _ops_on(it, "ADD") == ["opencl"] and _ops_on(it, "CAST") == ["opencl"]
    assert _ops_on(it, "DENSIFY") == []  # LiteRT's: the delegate lists only CAST/ADD


def test_compare_shows_outputs_of_one_name_by_position(tmp_path, fast_device):
    # two outputs named alike: compare prints a row for each (keyed by position)
    from ai_edge_litert import schema_py_generated as schema

    m = schema.ModelT.InitFromPackedBuf(rg.write_after_write(), 0)
    for t in m.subgraphs[0].outputs:
        m.subgraphs[0].tensors[t].name = "same"
    m.signatureDefs = []
    p = tmp_path / "dup.tflite"
    p.write_bytes(rg._pack(m))
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "compare", str(p), "--device", fast_device],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("same")]
    assert len(rows) == 2 and rows[0].split()[0] == "same#0" and rows[1].split()[0] == "same#1", r.stdout


# TensorFlow-built models: run-time shapes and zero-element constants --------------------

@pytest.mark.parametrize("dev", DEVICES)
def test_shape_computed_at_run_time(dev):
    # SHAPE, STRIDED_SLICE, FLOOR_DIV, PACK -> RESHAPE to [1, n/4, 4, 1], ADD, 2 CONV_2D:
    # LiteRT reports the RESHAPE output as (1, 1, 4, 1) until it runs; the real one is
    # (1, 4, 4, 1), and the CONV segment must be prepared at that shape (it was refused)
    buf = tf_model("dynamic_reshape")
    x = np.linspace(-2, 2, 16, dtype=np.float32).reshape(1, 16)
    runs, it = _both(buf, dev, {0: x}, resize={0: [1, 16]})
    _assert_same(runs)
    assert runs[0][1][0].shape == (1, 4, 4, 2)
    assert _ops_on(it, "ADD") == ["opencl"]
    # a new input shape: re-planned at run time, still bit-exact
    x2 = np.linspace(-1, 3, 32, dtype=np.float32).reshape(1, 32)
    runs, _ = _both(buf, dev, {0: x2}, resize={0: [1, 32]})
    _assert_same(runs)
    assert runs[0][1][0].shape == (1, 8, 4, 2)


def test_run_time_planning_is_cached(fast_device):
    """The ADD after a RESHAPE to a shape computed at invoke: LiteRT prepares the
    delegate's kernel again once the shape is known; the plan is made for the real shape
    and kept while it does not change."""
    buf = tf_model("dynamic_reshape")
    it = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)
    it.resize_tensor_input(0, [1, 16])
    it.allocate_tensors()
    assert _ops_on(it, "ADD") == ["opencl"]
    x = np.ones((1, 16), np.float32)
    it.set_tensor(0, x)
    it.invoke()
    (part,) = it.delegate.partitions()
    plan = part.plan
    (ln,) = plan.launches
    assert ln.n == 16 and (1, 4, 4, 1) in [plan.shapes[t] for t in ln.inputs]
    it.set_tensor(0, x)
    it.invoke()
    assert part.plan is plan and it.delegate.stats["partition_invokes"] == 2  # same shape: not planned again


@pytest.mark.parametrize("dev", DEVICES)
def test_zero_element_constant_shape_operand(dev):
    # tf.reshape(x + 1.0, []) * 2.0: RESHAPE's shape operand is int32[0] with no bytes
    buf = tf_model("reshape_scalar")
    runs, it = _both(buf, dev, {0: np.array([1.25], np.float32)})
    _assert_same(runs)
    assert float(runs[0][1][0]) == 4.5
    assert _ops_on(it, "ADD") == ["opencl"]


@pytest.mark.parametrize("dev", DEVICES)
def test_buffers_after_the_flatbuffer_on_the_control_flow_path(dev):
    # a WHILE model with every buffer stored after the flatbuffer (offset/size): the
    # constants LiteRT maps from there reach the delegated nodes of every subgraph
    from ai_edge_litert import schema_py_generated as schema

    buf = rg.buffers_after_flatbuffer(tf_model("while_cast"))
    assert all(not b.data for b in schema.ModelT.InitFromPackedBuf(buf, 0).buffers)
    x, n = np.array([1.5, -2.5, 3, 4, 100], np.float32), np.array(3, np.int32)
    runs, it = _both(buf, dev, {0: x, 1: n})
    _assert_same(runs)
    assert _ops_on(it, "CAST")[:2] == ["opencl", "opencl"]
    body = [p for p in it.placement() if p["subgraph"] > 0]
    assert body and all(p["placement"] == "opencl" for p in body), it.placement()


def _shape_cast() -> bytes:
    """SHAPE(x) -> CAST float32: LiteRT computes SHAPE's output at Prepare (a
    kTfLitePersistentRo tensor), so the CAST's only input is read-only between Prepares."""
    from ai_edge_litert import schema_py_generated as schema

    from models.builders import _Graph

    g = _Graph()
    x = g.tensor("x", "float32", [4])
    g.inputs = [x]
    s = g.tensor("s", "int32", [1])
    opts = schema.ShapeOptionsT()
    opts.outType = schema.TensorType.INT32
    g.op(_OP.SHAPE, [x], [s], options_type=schema.BuiltinOptions.ShapeOptions, options=opts)
    f = g.tensor("f", "float32", [1])
    g.op(_OP.CAST, [s], [f])
    g.outputs = [f]
    return g.finish()


from ai_edge_litert.schema_py_generated import BuiltinOperator as _OP  # noqa: E402


@pytest.mark.parametrize("dev", DEVICES)
def test_value_computed_at_prepare_is_read_again_after_a_resize(dev):
    """The CAST of SHAPE's output runs once per Prepare ("constant inputs: computed
    once"), not once per interpreter: after each resize it gives the new shape, as LiteRT."""
    buf = _shape_cast()
    ref, it = _litert(buf), litecl.Interpreter(model_content=buf, device=dev, quiet=True)
    (row,) = it.placement()
    assert row["op"] == "CAST" and row["placement"] == "opencl"
    for n in (4, 9, 4, 17, 17):
        outs = []
        for i in (ref, it):
            i.resize_tensor_input(0, [n])
            i.allocate_tensors()
            i.set_tensor(0, np.zeros(n, np.float32))
            i.invoke()
            outs.append(i.get_tensor(i.get_output_details()[0]["index"]))
        assert outs[1].tolist() == outs[0].tolist() == [n]
    assert it.placement()[0]["kernel"].endswith("(constant inputs: computed once)")


def test_shared_delegate_never_reuses_another_models_constant(fast_device):
    """One litecl.Delegate serving interpreter after interpreter (each freed before the
    next): a new model's constant may land where a freed one was; each ADD still adds its
    own constant (a cache keyed by address alone returned the old one)."""
    import gc

    from litecl.compare import bit_equal, make_interpreter
    from models.builders import add_model

    d = litecl.Delegate(fast_device, quiet=True)
    models = [add_model("float32", [757], [757], const2=np.full([757], float(k), np.float32))
              for k in range(2)]
    x = np.arange(757, dtype=np.float32)
    for k in range(24):
        m = bytes(bytearray(models[k % 2]))  # fresh bytes: addresses get reused
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        assert bit_equal(got, x + np.float32(k % 2)), (k, got[:3])
        del it, m
        gc.collect()
    assert d.stats["partition_invokes"] == 24 and all(r["placement"] == "opencl" for r in d.placement())


def test_interpreters_freed_at_exit_do_not_crash():
    """An Interpreter freed by Python's last garbage collection at exit (here: held by a
    kept traceback) calls the delegate kernels' free callback after module globals are
    cleared; the callbacks must still exist (the process exited 139 after printing its
    summary, three runs in three, before they were kept alive: delegate._immortal)."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
                        "tests/test_add.py", "tests/test_add_quant.py",
                        "-k", "errors_are or test_refusals or litert_refuses"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, (r.returncode, r.stdout[-1500:], r.stderr[-1500:])
    assert " passed" in r.stdout and "failed" not in r.stdout, r.stdout[-800:]
