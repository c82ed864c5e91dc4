"""litecl.Delegate inside the user's own LiteRT: stacking, control flow, variables, dynamic
shapes, preserve_all_tensors, and the ABI edges (version refusal, callback errors,
lifetimes, threads). Every output is compared bit for bit with LiteRT alone."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import litecl
from litecl import abi
from litecl.compare import bit_equal, make_interpreter, random_inputs, run_outputs
from models.builders import add_model, cast_model, chain_model, multi_op_model

from conftest import REAL_DEVICES, ROOT, device_params, tf_model


def _both(model: bytes, device: str, inputs=None, reference="builtin", **kw):
    """(delegate, litecl outputs, LiteRT-alone outputs) on the same inputs."""
    d = litecl.Delegate(device, quiet=True, reference="ref" if reference == "ref" else "builtin", **kw)
    it = make_interpreter(model, reference=reference, delegates=[d])
    ref = make_interpreter(model, reference=reference)
    if inputs is None:
        inputs = random_inputs(ref.get_input_details(), seed=3, full_range=True)
    return d, run_outputs(it, inputs), run_outputs(ref, inputs)


def _same(got, want):
    assert [n for n, _ in got] == [n for n, _ in want]
    for (n, a), (_, b) in zip(got, want):
        assert bit_equal(a, b), n


def test_stock_litert_with_the_delegate(fast_device, capfd):
    m = chain_model(["int16", "float32", ("add", 1.5, "RELU"), "int8"], (3, 33))
    d, got, want = _both(m, fast_device)
    _same(got, want)
    rows = d.placement()
    assert rows and all(r["placement"] == "opencl" and r["subgraph"] == 0 for r in rows)
    assert d.stats["partition_invokes"] >= 1
    assert "Replacing" not in capfd.readouterr().err  # quiet=True


def test_replacing_line_once_per_subgraph(fast_device, capfd):
    m = multi_op_model("cast_mul_cast")
    d = litecl.Delegate(fast_device)
    for _ in range(2):
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        it.resize_tensor_input(0, [2, 3, 4])
        it.allocate_tensors()  # LiteRT redoes the delegate: Prepare runs again
    err = capfd.readouterr().err
    # once per subgraph of each interpreter (two here), not again after the resize
    assert err.count("INFO: Replacing 3 out of 4 node(s) with delegate (litecl OpenCL) node, yielding 2 "
                     "partitions for the whole graph.\n") == 2, err
    assert err.count("Replacing") == 2
    os.environ["LITECL_QUIET"] = "1"
    try:
        make_interpreter(m, delegates=[litecl.Delegate(fast_device)]).allocate_tensors()
    finally:
        del os.environ["LITECL_QUIET"]
    assert "Replacing" not in capfd.readouterr().err


def test_replacing_line_for_a_new_interpreter_at_a_freed_one_s_address(fast_device, capfd):
    """A LiteRT Interpreter made after another was freed often gets the freed one's
    TfLiteContext address; the line was keyed by that address, so the new interpreter said
    nothing. Every interpreter now says it once, at a reused address too, and a resize
    (LiteRT undoes and redoes the delegate) still does not repeat it."""
    m = multi_op_model("cast_mul_cast")
    d = litecl.Delegate(fast_device)
    line = ("INFO: Replacing 3 out of 4 node(s) with delegate (litecl OpenCL) node, yielding 2 "
            "partitions for the whole graph.\n")
    reused = 0
    for _ in range(12):
        before = set(d._records)
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        it.resize_tensor_input(0, [2, 3, 4])
        it.allocate_tensors()
        reused += not set(d._records) - before  # no new context address: a freed one's
        assert capfd.readouterr().err.count("Replacing") == 1
        del it
        gc.collect()
        if reused >= 2:
            break
    if not reused:
        pytest.skip("the allocator gave every interpreter a new context address")
    it = make_interpreter(m, delegates=[d])
    it.allocate_tensors()
    assert capfd.readouterr().err == line


def test_litecl_quiet_is_a_yes_no_variable(fast_device, monkeypatch, capfd):
    """LITECL_QUIET=0 (or off, no, false) prints the Replacing line, as unset does; a value
    that is no yes/no word is an error naming it (errors.env_flag), unless quiet= is given."""
    m = cast_model("float32", "int8", [4])
    for v, quiet in (("0", False), (" OFF ", False), ("yes", True), ("1", True)):
        monkeypatch.setenv("LITECL_QUIET", v)
        make_interpreter(m, delegates=[litecl.Delegate(fast_device)]).allocate_tensors()
        assert ("Replacing 1 out of 1" in capfd.readouterr().err) is not quiet, v
    monkeypatch.setenv("LITECL_QUIET", "maybe")
    with pytest.raises(litecl.LiteclError, match="LITECL_QUIET must be one of 1, 0, true, false, yes, no, "
                                                 "on or off .or unset., got 'maybe'"):
        litecl.Delegate(fast_device)
    assert litecl.Delegate(fast_device, quiet=False).quiet is False  # quiet= wins over the variable


def test_reasons_for_nodes_kept_on_litert(fast_device):
    m = multi_op_model("cast_mul_cast")
    d = litecl.Delegate(fast_device, quiet=True)
    make_interpreter(m, delegates=[d]).allocate_tensors()
    rows = d.placement()
    assert [r["op"] for r in rows] == ["CAST", "ADD", "CAST"]  # MUL is not listed
    it = litecl.Interpreter(model_content=cast_model("float32", "bool", [4]), device=fast_device + ":profile=noint64",
                            quiet=True)
    assert it.placement()[0]["placement"] == "opencl"


def test_beside_xnnpack(fast_device):
    """reference="xnnpack": LiteRT's default resolver applies XNNPACK lazily to what the
    delegate leaves (DELEGATE.md); the model runs and litecl's nodes stay on OpenCL."""
    m = multi_op_model("cast_mul_cast")
    d, got, want = _both(m, fast_device, reference="xnnpack")
    _same(got, want)
    assert all(r["placement"] == "opencl" for r in d.placement())


def test_control_flow_bodies_are_delegated(fast_device):
    """WHILE body ADDs run on OpenCL (LiteRT prepares the delegate for every subgraph)."""
    m = tf_model("while_cast")
    inputs = {"x": np.array([1.5, 2, 3, -4, 5e9], np.float32), "n": np.array(3, np.int32)}
    d, got, want = _both(m, fast_device, inputs)
    _same(got, want)
    body = [r for r in d.placement() if r["subgraph"] > 0 and r["op"] == "ADD"]
    assert body and all(r["placement"] == "opencl" for r in body)


def test_resource_variable_graph(fast_device):
    m = tf_model("variable_cast")
    d = litecl.Delegate(fast_device, quiet=True)
    it, ref = make_interpreter(m, delegates=[d]), make_interpreter(m)
    x = {it.get_input_details()[0]["name"]: np.array([1, -2, 3, 2**30], np.int32)}
    for _ in range(3):  # the variable accumulates across invokes, as in LiteRT
        _same(run_outputs(it, x), run_outputs(ref, x))
    assert [r["placement"] for r in d.placement()] == ["opencl"] * 3
    it.reset_all_variables()
    ref.reset_all_variables()
    _same(run_outputs(it, x), run_outputs(ref, x))


def test_dynamic_shapes_and_resize(fast_device):
    m = tf_model("dynamic_reshape")  # RESHAPE to a shape computed at invoke, then ADD
    d = litecl.Delegate(fast_device, quiet=True)
    it, ref = make_interpreter(m, delegates=[d]), make_interpreter(m)
    for n in (16, 32, 4):
        x = {"x": np.linspace(-3, 3, n, dtype=np.float32).reshape(1, n)}
        _same(run_outputs(it, x), run_outputs(ref, x))
    assert [r["placement"] for r in d.placement()] == ["opencl"]


@pytest.mark.parametrize("n", [0, 1, 33, 1999])
def test_resize_replans(fast_device, n):
    m = add_model("float32", [5], [1])
    d = litecl.Delegate(fast_device, quiet=True)
    it, ref = make_interpreter(m, delegates=[d]), make_interpreter(m)
    x = random_inputs(ref.get_input_details(), seed=n, full_range=True)
    first = ref.get_input_details()[0]["name"]
    x[first] = np.resize(x[first], (n,))  # run_outputs resizes, LiteRT redoes the delegate
    _same(run_outputs(it, x), run_outputs(ref, x))
    assert d.placement()[0]["placement"] == "opencl"


def test_preserve_all_tensors_shows_every_tensor(fast_device):
    m = chain_model(["float32", "int32", ("add", 3), "float16"], (2, 17))
    d = litecl.Delegate(fast_device, quiet=True)
    it = make_interpreter(m, preserve_all_tensors=True, delegates=[d])
    ref = make_interpreter(m, preserve_all_tensors=True)
    x = random_inputs(ref.get_input_details(), seed=5, full_range=True)
    run_outputs(it, x), run_outputs(ref, x)
    for t in ref.get_tensor_details():
        assert bit_equal(it.get_tensor(t["index"]), ref.get_tensor(t["index"])), t["name"]
    assert all(r["placement"] == "opencl" for r in d.placement())


def test_litecl_interpreter_is_litert_with_the_delegate(fast_device):
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    m = cast_model("float64", "float16", [81])
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    assert isinstance(it, LiteRT)
    it.allocate_tensors()
    x = np.array([np.nan, -0.0, 1e-310, 65520.0, -1e300] * 16 + [5e-8], np.float64)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ref = make_interpreter(m)
    want = run_outputs(ref, {ref.get_input_details()[0]["name"]: x})[0][1]
    assert bit_equal(it.get_tensor(it.get_output_details()[0]["index"]), want)
    assert it.placement()[0]["placement"] == "opencl"
    assert any("Replacing 1 out of 1" in ln for ln in it.summary())
    it.close()
    with pytest.raises(litecl.LiteclError, match="closed"):
        it.invoke()
    with pytest.raises(litecl.LiteclError, match="closed"):
        it.get_tensor(0)


def test_user_delegates_stack_after_litecl(fast_device):
    m = multi_op_model("cast_mul_cast")
    other = litecl.Delegate(fast_device, quiet=True)  # any delegate: a second litecl one
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True,
                            experimental_delegates=[other])
    ref = make_interpreter(m)
    x = random_inputs(ref.get_input_details(), seed=1)
    _same(run_outputs(it, x), run_outputs(ref, x))
    assert all(r["placement"] == "opencl" for r in it.placement())
    assert other.placement() == [] or all(r["placement"] != "opencl" for r in other.placement())


def test_the_same_delegate_twice_keeps_its_report(fast_device, capfd):
    """experimental_delegates=[d, d]: LiteRT prepares the graph with d twice; the second
    Prepare sees d's own partition kernels, claims nothing, says so in one INFO line, and
    keeps the first one's placement() (was: emptied, while 20 partitions ran; a fresh
    user's report). Bit-exact."""
    m = multi_op_model("cast_mul_cast")
    d = litecl.Delegate(fast_device)
    it = make_interpreter(m, delegates=[d, d])
    ref = make_interpreter(m)
    x = random_inputs(ref.get_input_details(), seed=1)
    _same(run_outputs(it, x), run_outputs(ref, x))
    rows = d.placement()
    assert len(rows) == 3 and all(r["placement"] == "opencl" for r in rows), rows
    assert d.graph_info() == [{"interpreter": 0, "subgraph": 0, "nodes": 4, "claimed": 3, "partitions": 2,
                               "kept_order": False, "order_dropped": []}], d.graph_info()
    err = capfd.readouterr().err
    assert err.count("Replacing 3 out of 4 node(s)") == 1 and err.count("already given to this litecl") == 1, err


# ---------------------------------------------------------------------- ABI edges
def test_struct_sizes_match_common_h():
    abi.check_sizes()
    assert {t.__name__: __import__("ctypes").sizeof(t) for t in abi.SIZES} == {
        "TfLiteTensor": 112, "TfLiteNode": 80, "TfLiteRegistration": 88, "TfLiteContext": 200,
        "TfLiteDelegate": 56, "TfLiteDelegateParams": 32}


def test_untested_version_is_refused_by_name(monkeypatch):
    monkeypatch.setattr(abi, "_version", lambda dist: "9.9.0")
    with pytest.raises(litecl.LiteclError) as e:
        abi.check_versions("ai-edge-litert")
    msg = str(e.value)
    assert "9.9.0" in msg and "2.3.x" in msg and "\n" not in msg


def test_untested_version_refused_at_delegate_construction():
    code = ("import importlib.metadata as md; real = md.version; "
            "md.version = lambda d: '2.0.9' if d == 'ai-edge-litert' else real(d); "
            "import litecl\n"
            "try:\n    litecl.Delegate('pocl')\nexcept litecl.LiteclError as e:\n    print('refused:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "refused: ai-edge-litert 2.0.9 is not a version" in r.stdout


def test_callback_error_reaches_the_user(fast_device, monkeypatch):
    """An error in the planner the C runtime calls back (at a partition's prepare) reaches
    the user as litecl's own error, and LiteRT's RuntimeError carries its message."""
    from litecl import delegate as D

    m = cast_model("int32", "float32", [8])

    def boom(self, *args):
        raise litecl.KernelBuildError("simulated: the device lost its kernel")

    monkeypatch.setattr(D._Planner, "plan_for", boom)
    monkeypatch.setattr(D, "_PRESETS", {})  # no plan handed at init: the runtime asks the planner
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    with pytest.raises(litecl.KernelBuildError, match="simulated: the device lost its kernel"):
        it.allocate_tensors()
    # LiteRT's own Interpreter: its RuntimeError carries litecl's message (ReportError)
    d = litecl.Delegate(fast_device, quiet=True)
    raw = make_interpreter(m, delegates=[d])
    with pytest.raises(RuntimeError, match="simulated: the device lost its kernel"):
        raw.allocate_tensors()
    assert isinstance(d.take_error(), litecl.KernelBuildError)
    monkeypatch.undo()
    raw.allocate_tensors()  # the interpreter works once the cause is gone
    raw.set_tensor(raw.get_input_details()[0]["index"], np.arange(8, dtype=np.int32))
    raw.invoke()
    assert raw.get_tensor(raw.get_output_details()[0]["index"]).tolist() == list(range(8))


def test_error_in_prepare_is_an_error_not_a_crash(fast_device, monkeypatch):
    """A bug in litecl's Prepare (an exception raised in litecl's own code, as the code
    object's file says: errors.raised_by_app) is a LiteclError naming it, not a crash."""
    from litecl import claims

    ns: dict = {}
    exec(compile("def boom(*a):\n    raise ZeroDivisionError('simulated')\n", claims.__file__, "exec"), ns)
    monkeypatch.setattr(claims, "why_not", ns["boom"])
    monkeypatch.setattr(claims, "_prepared", lambda dlg, ks: None)  # decided here, not read from the cache
    with pytest.raises(litecl.LiteclError, match="ZeroDivisionError: simulated"):
        litecl.Interpreter(model_content=cast_model("int8", "int16", [4]), device=fast_device, quiet=True)


def test_lifetimes_any_deletion_order():
    """The delegate deleted before or after its interpreters, interpreters deleted while
    another still runs, a deleted Delegate's interpreter torn down: no crash (subprocess:
    a use-after-free would kill it)."""
    code = r"""
import gc, sys
import numpy as np
sys.path.insert(0, %r)
import litecl
from litecl.compare import make_interpreter
from models.builders import cast_model
m = cast_model("float32", "int16", [5])
x = np.array([1.5, -2.5, 1e9, np.nan, -0.0], np.float32)
def run(it):
    it.allocate_tensors(); it.set_tensor(it.get_input_details()[0]["index"], x); it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])
d = litecl.Delegate("auto", quiet=True)
a, b = make_interpreter(m, delegates=[d]), make_interpreter(m, delegates=[d])
want = run(a)
del d; gc.collect()                      # the interpreters hold it
assert (run(b) == want).all()
del a; gc.collect()
assert (run(b) == want).all()
b._delegates = None; gc.collect()        # LiteRT's list dropped first: the Delegate goes
try:
    b.allocate_tensors(); b.invoke()     # kernels still exist; a Prepare would now fail cleanly
except Exception as e:
    print("after:", type(e).__name__)
del b; gc.collect()
c = litecl.Interpreter(model_content=m, quiet=True)
assert (run(c) == want).all()
del c; gc.collect()
print("ok")
""" % str(ROOT)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout, r.stderr[-3000:])


def test_threads_share_one_delegate(fast_device):
    m = add_model("int32", [1999], [1])
    d = litecl.Delegate(fast_device, quiet=True)
    ref = make_interpreter(m)
    errors, results = [], {}

    def work(k):
        try:
            it = make_interpreter(m, delegates=[d])
            x = random_inputs(ref.get_input_details(), seed=k, full_range=True)
            for _ in range(30):
                results[k] = (run_outputs(it, x), x)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    [t.start() for t in ts]
    [t.join(timeout=300) for t in ts]
    assert not errors, errors
    for k, (got, x) in results.items():
        _same(got, run_outputs(ref, x))
    gc.collect()


def test_placement_while_other_threads_prepare(fast_device):
    """placement() in threads while others construct interpreters of the same Delegate:
    a partition's preset was cleared by the planner between settle's check and its use
    (TypeError, 2 of 3 polling threads in 4 of 5 runs of a fresh user's script). Every
    thread's first Prepare is recalled (another Delegate of equal settings kept it): a
    thread's partition found no planner while another recorded the log (recall.drain)."""
    from conftest import shared_model  # noqa: PLC0415

    raw = shared_model("movenet_singlepose_lightning_int8.tflite").read_bytes()
    make_interpreter(raw, delegates=[litecl.Delegate(fast_device, quiet=True)]).allocate_tensors()
    d = litecl.Delegate(fast_device, quiet=True)
    stop, errors = [], []

    def build():
        try:
            for _ in range(25):
                it = make_interpreter(raw, delegates=[d])
                it.allocate_tensors()
                it.invoke()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def poll():
        while not stop:
            try:
                d.placement()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
                return

    builders, pollers = [threading.Thread(target=build) for _ in range(3)], [threading.Thread(target=poll)
                                                                            for _ in range(3)]
    [t.start() for t in pollers + builders]
    [t.join(timeout=300) for t in builders]
    stop.append(1)
    [t.join(timeout=60) for t in pollers]
    assert not errors, errors[:2]
    assert {r["placement"] for r in d.placement()} == {"opencl"}


def test_litecl_interpreter_refuses_a_second_thread(fast_device):
    it = litecl.Interpreter(model_content=cast_model("uint8", "float32", [1 << 20]), device=fast_device,
                            quiet=True)
    it.allocate_tensors()
    it._busy.acquire()
    try:
        with pytest.raises(litecl.LiteclError, match="in use by another thread"):
            it.invoke()
    finally:
        it._busy.release()
    it.invoke()


@pytest.mark.skipif(__import__("importlib").util.find_spec("tensorflow") is None,
                    reason="tensorflow is not installed (the test extra has it)")
def test_tf_lite_interpreter_takes_the_delegate():
    """tensorflow's tf.lite.Interpreter with litecl.Delegate, bit-exact with tf.lite alone
    (a subprocess: TensorFlow and LLVM-based ICDs do not always share a process)."""
    code = r"""
import sys
import numpy as np
import tensorflow as tf
sys.path.insert(0, %r)
import litecl
from models.builders import chain_model
m = chain_model(["int8", "float32", ("add", 0.5, "RELU6"), "uint8"], (4, 81))
R = tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
d = litecl.Delegate("pocl", quiet=True)
outs = []
for ds in ([d], []):
    it = tf.lite.Interpreter(model_content=m, experimental_delegates=ds, experimental_op_resolver_type=R)
    it.allocate_tensors()
    x = np.random.default_rng(0).integers(-9, 9, (4, 81)).astype(it.get_input_details()[0]["dtype"])
    it.set_tensor(it.get_input_details()[0]["index"], x); it.invoke()
    outs.append(it.get_tensor(it.get_output_details()[0]["index"]))
assert outs[0].tobytes() == outs[1].tobytes()
assert all(r["placement"] == "opencl" for r in d.placement()), d.placement()
print("ok", len(d.placement()))
""" % str(ROOT)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       cwd=ROOT, env=env)
    if "no Portable Computing Language" in r.stderr or "cannot build kernels" in r.stderr:
        pytest.skip("PoCL is not usable here: " + r.stderr.strip().splitlines()[-1])
    assert r.returncode == 0 and "ok 3" in r.stdout, (r.stdout, r.stderr[-3000:])


def test_shared_delegate_reports_per_interpreter(fast_device):
    """litecl.Interpreters sharing one Delegate each report their own nodes and subgraphs."""
    d = litecl.Delegate(fast_device, quiet=True)
    a = litecl.Interpreter(model_content=multi_op_model("cast_mul_cast"), delegate=d)
    b = litecl.Interpreter(model_content=cast_model("float32", "int8", [7]), delegate=d)
    a.allocate_tensors()
    b.allocate_tensors()
    assert [r["op"] for r in a.placement()] == ["CAST", "ADD", "CAST"]
    assert [(r["subgraph"], r["op"]) for r in b.placement()] == [(0, "CAST")]
    assert b.summary()[-1].startswith("subgraph 0: Replacing 1 out of 1 node(s)")
    assert len(d.placement()) == 4  # the Delegate itself reports both
    b.resize_tensor_input(0, [9])
    b.allocate_tensors()  # LiteRT redoes the delegate: the new Prepare is still b's
    assert [(r["subgraph"], r["op"]) for r in b.placement()] == [(0, "CAST")]
    with pytest.raises(litecl.LiteclError, match="given with delegate="):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [7]), delegate=d, device="intel")
    # a Delegate matching the reference kernels under an Interpreter of the builtin ones (or
    # the reverse): its nodes would give the other kernels' bits (accepted silently: a fresh user)
    for ref, dref in (("builtin", "ref"), ("ref", "builtin"), ("xnnpack", "ref")):
        with pytest.raises(litecl.LiteclError, match=f"delegate= matches reference '{dref}', the Interpreter "
                                                     f"runs '{ref}': give both the same reference"):
            litecl.Interpreter(model_content=cast_model("float32", "int8", [7]), reference=ref,
                               delegate=litecl.Delegate(d.device, reference=dref, quiet=True))
    for ref, dref in (("xnnpack", "builtin"), ("builtin", "xnnpack"), ("ref", "ref")):  # the same bits
        litecl.Interpreter(model_content=cast_model("float32", "int8", [7]), reference=ref,
                           delegate=litecl.Delegate(d.device, reference=dref, quiet=True))
    with pytest.raises(litecl.LiteclError, match="applies first already"):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [7]), delegate=d,
                           experimental_delegates=[d])
    with pytest.raises(litecl.LiteclError, match="quiet must be"):
        litecl.Delegate(fast_device, quiet="no")


def test_a_second_interpreter_of_a_model_recalls_prepare_and_stays_exact(fast_device, monkeypatch):
    """litecl.Interpreter names its model to the delegate: a second Interpreter of the same
    bytes reuses the first one's Prepare (no decision is taken again) and places and
    computes the same, bit-exact with LiteRT, also after a resize to other shapes; a
    Delegate on another device decides afresh."""
    import litecl.claims as cm
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    buf = add_model("float32", [4, 1], [1, 5])
    decided = []
    orig = cm.decide
    monkeypatch.setattr(cm, "decide",
                        lambda self, ctx, plan, si=None: (decided.append(1), orig(self, ctx, plan, si))[1])

    def check(it, shapes):
        ref = make_interpreter(buf)
        for x in (it, ref):
            for i, s in enumerate(shapes):
                x.resize_tensor_input(i, s)
            x.allocate_tensors()
        ins = random_inputs(ref.get_input_details(), seed=len(decided))
        _same(run_outputs(it, ins), run_outputs(ref, ins))

    first = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True)
    check(first, [[4, 1], [1, 5]])
    n = len(decided)
    assert n >= 1 and first.placement()[0]["placement"] == "opencl"
    second = litecl.Interpreter(model_content=bytes(buf), device=fast_device, quiet=True)
    assert len(decided) == n  # recalled
    assert [{k: r[k] for k in ("index", "op", "placement", "reason")} for r in second.placement()] == \
        [{k: r[k] for k in ("index", "op", "placement", "reason")} for r in first.placement()]
    check(second, [[4, 1], [1, 5]])
    check(second, [[3, 1], [1, 7]])
    # LiteRT's own calls where litecl has nothing to do at invoke (a flag: _wrap), litecl's
    # otherwise; the class is never switched (CPython 3.11 then reads every attribute slower)
    assert not second._plain_invoke and type(second) is litecl.Interpreter
    none = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True, placement="auto")
    assert not none._plain_invoke  # before allocate_tensors: NotAllocatedError
    with pytest.raises(litecl.NotAllocatedError):
        litecl.Interpreter(model_content=buf, device=fast_device, quiet=True, placement="auto").invoke()
    none.allocate_tensors()
    assert not none.delegate.partitions(id(none))  # a 20-element ADD: the round trip costs more
    assert none._plain_invoke and none._plain_get and type(none) is litecl.Interpreter
    none.resize_tensor_input(0, [3, 1])
    assert not none._plain_invoke  # not ready until allocate_tensors: NotAllocatedError
    with pytest.raises(litecl.NotAllocatedError):
        none.invoke()
    none.allocate_tensors()
    assert none._plain_invoke


def test_litert_own_interpreter_recalls_prepare_by_context_key(fast_device, monkeypatch):
    """The Prepare memo is keyed by the context's content (claims.context_key, one C call),
    not by litecl.Interpreter's model: LiteRT's own Interpreter with a Delegate decides
    once per graph, then recalls (placement equal, outputs bit-exact); a graph that differs
    only in a tensor's name, a quantization scale or a declared shape gets another key
    and is decided afresh."""
    import litecl.claims as cm
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    decided = []
    orig = cm.decide
    monkeypatch.setattr(cm, "decide",
                        lambda self, ctx, plan, si=None: (decided.append(1), orig(self, ctx, plan, si))[1])
    monkeypatch.setattr(cm, "_PREPARES", {})  # the earlier tests' graphs decided afresh here
    from litecl import recall
    recall.forget_all()  # and not recalled from the runtime's kept Prepares of earlier Delegates
    d = litecl.Delegate(fast_device, quiet=True)

    def run(buf):
        it = LiteRT(model_content=buf, experimental_delegates=[d])
        it.allocate_tensors()
        ref = make_interpreter(buf)
        ref.allocate_tensors()
        ins = random_inputs(ref.get_input_details(), seed=3)
        _same(run_outputs(it, ins), run_outputs(ref, ins))

    buf = add_model("float32", [4, 1], [1, 5])
    run(buf)
    n = len(decided)
    assert n >= 1
    run(bytes(buf))
    assert len(decided) == n  # recalled: same content
    run(add_model("float32", [4, 2], [1, 2]))
    assert len(decided) == n + 1  # another declared shape
    q1 = add_model("int8", [6], [6], quant=((0.5, 1), (0.25, 2), (0.125, 3)))
    q2 = add_model("int8", [6], [6], quant=((0.5, 1), (0.25, 2), (0.25, 3)))
    run(q1)
    run(q2)
    assert len(decided) == n + 3  # another output scale
    rt = d._rt
    ctxs = []
    assert buf.count(b"input1") == 2
    for b in (buf, buf.replace(b"input1", b"inpuT1")):
        ctxs.append(_context_key_of(b, rt))
    assert ctxs[0] != ctxs[1]  # another tensor name


def test_kernel_rows_name_this_model_s_nodes_after_an_equal_plan(fast_device):
    """Two models with equal tensors whose ADD is node 0 in one and node 1 in the other
    (found by a fresh user): the second one's placement() row for its ADD names its
    kernel and device, as in a fresh process (the plan memo once returned the first
    model's plan, whose launch named node 0, so node 1's row stayed empty)."""
    from ai_edge_litert import schema_py_generated as S
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    from models import builders as B

    def model(add_first: bool) -> bytes:
        g = B._Graph()
        x, y = g.tensor("x", "float32", (2, 3)), g.tensor("y", "float32", (2, 3))
        g.inputs = [x, y]
        k = g.constant("k", "float32", np.full((2, 3), 1.5, np.float32))
        s, p = g.tensor("sum", "float32", (2, 3)), g.tensor("prod", "float32", (2, 3))
        ops = [lambda: g.op(S.BuiltinOperator.ADD, [x, k], [s], options_type=S.BuiltinOptions.AddOptions,
                            options=S.AddOptionsT()),
               lambda: g.op(S.BuiltinOperator.MUL, [y, k], [p], options_type=S.BuiltinOptions.MulOptions,
                            options=S.MulOptionsT())]
        for f in ops if add_first else ops[::-1]:
            f()
        g.outputs = [s, p]
        return g.finish()

    for add_first, index in ((True, 0), (False, 1)):
        d = litecl.Delegate(fast_device, quiet=True)
        buf = model(add_first)
        it = LiteRT(model_content=buf, experimental_delegates=[d])
        it.allocate_tensors()
        (row,) = [r for r in d.placement() if r["op"] == "ADD"]
        assert row["index"] == index and row["placement"] == "opencl", row
        ran_on = d.small_device or d.device  # a partition this small runs on the small device where there is one
        assert row["kernel"].startswith("ADD float32") and row["device"] == ran_on.caps.name, row
        ins = random_inputs(it.get_input_details(), seed=1)
        _same(run_outputs(it, ins), run_outputs(make_interpreter(buf), ins))


def _context_key_of(buf, rt):
    """claims.context_key of ``buf``'s subgraph 0 as a delegate's Prepare sees it."""
    import ctypes as C
    import types

    import litecl.abi as abi
    import litecl.claims as cm
    from ai_edge_litert.interpreter import Interpreter as LiteRT

    got = []

    @abi.DELEGATE_PREPARE
    def probe(ctx, dlg):
        got.append(cm.context_key(rt, ctx))
        return abi.K_OK

    st = abi.TfLiteDelegate()
    st.Prepare = probe
    st.flags = abi.ALLOW_DYNAMIC_TENSORS
    holder = types.SimpleNamespace(_get_native_delegate_pointer=lambda: C.addressof(st))
    LiteRT(model_content=buf, experimental_delegates=[holder])
    _KEEP.append((st, probe))
    return got[0]


_KEEP: list = []


def test_shared_delegate_forgets_deleted_interpreters(fast_device):
    """A Delegate shared by many interpreters keeps the records of the live ones only:
    litecl.Interpreter's are dropped when it is deleted (its key, id(), may name another
    one later), those of LiteRT Interpreters the user made are capped; reports and the
    "which partitions are live" answer stay per interpreter."""
    import litecl.records as dm

    d = litecl.Delegate(fast_device, quiet=True)
    buf = cast_model("float32", "int8", [7])
    for _ in range(30):
        it = litecl.Interpreter(model_content=buf, delegate=d)
        it.allocate_tensors()
        assert [(r["subgraph"], r["op"], r["placement"]) for r in it.placement()] == [(0, "CAST", "opencl")]
        assert d.has_partitions(id(it)) and len(d.partitions(id(it))) == 1
        del it
    gc.collect()
    assert d.placement() == [] and not d._owned
    keep = litecl.Interpreter(model_content=buf, delegate=d)
    assert len(d.placement()) == 1 and d.placement(id(keep))[0]["op"] == "CAST"
    old = dm._MAX_RECORDS
    try:
        dm._MAX_RECORDS = 8
        its = [make_interpreter(buf, delegates=[d]) for _ in range(20)]  # LiteRT's own: no owner
        assert len(d._records) <= 8 + 1
        assert d.placement(id(keep))[0]["op"] == "CAST"  # an owned record is never dropped
        ins = random_inputs(its[-1].get_input_details(), seed=1, full_range=True)
        _same(run_outputs(its[-1], ins), run_outputs(make_interpreter(buf), ins))
    finally:
        dm._MAX_RECORDS = old


def test_one_delegate_shared_by_two_interpreters_numbers_each_one_s_subgraphs(fast_device):
    """Two LiteRT interpreters of one model (a WHILE: subgraphs 0, cond, body) share a
    Delegate: placement() rows say which interpreter they come from (0, 1 in the order of
    their first Prepare) and the subgraph within it, so the second interpreter's rows
    read subgraph 0 and its body's index (they read 3 and 5: the contexts counted across
    both); subgraph_records() likewise; each interpreter's own numbers are the first's."""
    m = tf_model("while_cast")
    d = litecl.Delegate(fast_device, quiet=True)
    its = [make_interpreter(m, delegates=[d]) for _ in range(2)]
    for it in its:
        it.allocate_tensors()
    rows = d.placement()
    assert {r["interpreter"] for r in rows} == {0, 1}
    first = [{k: v for k, v in r.items() if k != "interpreter"} for r in rows if r["interpreter"] == 0]
    second = [{k: v for k, v in r.items() if k != "interpreter"} for r in rows if r["interpreter"] == 1]
    assert first == second and first
    assert any(r["subgraph"] == 0 for r in second) and any(r["subgraph"] > 0 for r in second)  # the body
    recs = d.subgraph_records()
    assert [(g["interpreter"], g["subgraph"]) for g in recs] == [(0, s) for s in range(len(recs) // 2)] + [
        (1, s) for s in range(len(recs) // 2)]
    assert all(r["interpreter"] == g["interpreter"] and r["subgraph"] == g["subgraph"]
               for g in recs for r in g["rows"])
    # one model, one subgraph: the second interpreter's rows are its subgraph 0 too
    d = litecl.Delegate(fast_device, quiet=True)
    its = [make_interpreter(chain_model(["float32", ("add", 1.0), "int8"], [7]), delegates=[d]) for _ in range(2)]
    for it in its:
        it.allocate_tensors()
    assert [(r["interpreter"], r["subgraph"]) for r in d.placement()] == [(0, 0), (0, 0), (1, 0), (1, 0)]
    # graph_info() and taken() number them the same way (they counted 0, 1 across both)
    assert [(g["interpreter"], g["subgraph"], g["claimed"]) for g in d.graph_info()] == [(0, 0, 2), (1, 0, 2)]
    assert d.taken() == {(0, r["index"]) for r in d.placement()}


def test_litecl_interpreters_sharing_a_delegate_keep_their_own_subgraph_numbers(fast_device):
    """litecl.Interpreter(delegate=d) twice: each one's placement() reads its model's
    subgraph 0, and names its interpreter (the delegate's numbering)."""
    d = litecl.Delegate(fast_device, quiet=True)
    a = litecl.Interpreter(model_content=cast_model("float32", "int8", [5]), delegate=d)
    b = litecl.Interpreter(model_content=add_model("float32", [3], [3]), delegate=d)
    assert [(r["interpreter"], r["subgraph"], r["op"]) for r in a.placement()] == [(0, 0, "CAST")]
    assert [(r["interpreter"], r["subgraph"], r["op"]) for r in b.placement()] == [(1, 0, "ADD")]
    assert [(r["interpreter"], r["subgraph"]) for r in d.placement()] == [(0, 0), (1, 0)]
    assert "subgraph 0: Replacing 1 out of 1" in b.summary()[-1]


def test_finding_a_context_s_subgraph_leaves_every_context_as_it_was(fast_device, monkeypatch):
    """Delegate._record asks LiteRT's AcquireSubgraphContext for the subgraph index of
    the context being prepared (and releases the others): every context of the
    interpreter reads byte for byte as before, and the model's subgraphs are numbered
    0, 1, ... (a WHILE: cond and body)."""
    import ctypes

    from litecl.delegate import Delegate

    seen, changed, places = [], [], []
    record = Delegate._record

    def watched(self, addr, rec):
        before = {a: ctypes.string_at(a, ctypes.sizeof(abi.TfLiteContext)) for a in [*seen, addr]}
        record(self, addr, rec)
        changed.extend(a for a, b in before.items() if ctypes.string_at(a, len(b)) != b)
        seen.append(addr)
        places.append(rec["place"][1])

    monkeypatch.setattr(Delegate, "_record", watched)
    from litecl import recall
    recall.forget_all()  # Python's Prepare (an earlier test's Delegate kept this graph's)
    m = tf_model("while_cast")
    d, got, want = _both(m, fast_device, {"x": np.array([1.5, 2, 3, -4, 5e9], np.float32),
                                          "n": np.array(3, np.int32)})
    _same(got, want)
    assert not changed and places == list(range(len(places))) and len(places) >= 3


def test_stats_count_partition_invokes_under_that_name(fast_device):
    """d.stats["partition_invokes"] counts invokes of litecl's partition kernels: one
    interpreter invoke of a model with two delegated partitions (CAST, MUL on LiteRT,
    ADD+CAST) counts 2. The key was "invokes", read as interpreter invokes."""
    m = multi_op_model("cast_mul_cast")
    d = litecl.Delegate(fast_device, quiet=True)
    it = make_interpreter(m, delegates=[d])
    run_outputs(it, random_inputs(it.get_input_details(), seed=1))
    assert set(d.stats) == {"in_place", "copied", "staged", "partition_invokes"}
    assert d.stats["partition_invokes"] == 2


@pytest.mark.parametrize("state", ["constructed", "allocated_all", "allocated_auto", "resized"])
def test_an_interpreter_goes_with_its_last_name_without_the_collector(fast_device, state):
    """litecl.Interpreter holds no reference to itself in any state (no bound method in its
    attributes, no cycle): deleting the last name frees it, and its kernels, at once with
    the garbage collector off."""
    import gc
    import weakref

    buf = add_model("float32", [4, 1], [1, 5])
    it = litecl.Interpreter(model_content=buf, device=fast_device, quiet=True,
                            placement="auto" if state == "allocated_auto" else "all")
    if state != "constructed":
        it.allocate_tensors()
    if state == "resized":
        it.resize_tensor_input(0, [3, 1])
    gone = weakref.ref(it)
    gc.disable()
    try:
        del it
        assert gone() is None
    finally:
        gc.enable()


def test_report_owner_must_be_a_litecl_interpreter(fast_device):
    """placement/taken/graph_info/subgraph_records/partitions(owner): a litecl.Interpreter
    or its id(); a LiteRT Interpreter (which has no key) is litecl's error, not an empty
    list (a trial read [] as "nothing on OpenCL")."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    m = cast_model("float32", "int32", [33])
    d = litecl.Delegate(fast_device, quiet=True)
    mine = litecl.Interpreter(model_content=m, delegate=d)
    mine.allocate_tensors()
    theirs = Interpreter(model_content=m, experimental_delegates=[d],
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    theirs.allocate_tensors()
    assert d.placement(mine) == d.placement(id(mine)) == mine.placement()
    assert len(d.placement()) == 2 and {r["interpreter"] for r in d.placement()} == {0, 1}
    for f in (d.placement, d.taken, d.graph_info, d.subgraph_records, d.partitions):
        with pytest.raises(litecl.LiteclError, match="owner must be a litecl.Interpreter"):
            f(theirs)
        with pytest.raises(ValueError):
            f("0")
    other = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    with pytest.raises(litecl.LiteclError, match="uses another Delegate"):
        d.placement(other)


def test_a_freed_interpreters_rows_keep_their_own_number(fast_device):
    """A LiteRT interpreter of a 3-subgraph model is deleted; plain interpreters are made;
    a new interpreter of a 1-subgraph model takes the same Delegate. Whichever address it
    reuses, its number holds its own subgraph 0 only: the freed one's rows stay under
    their own number (they were once reported under the new one's)."""
    from models.builders import merged_model  # noqa: PLC0415

    three = merged_model(cast_model("float32", "int32", (3,)), add_model("int32", (4,), (4,)),
                         chain_model(["int8", "float32", ("add", 2.0)], (5,)))
    one = cast_model("float32", "int8", (3,))
    for n in range(4):
        d = litecl.Delegate(fast_device, quiet=True)
        a = make_interpreter(three, delegates=[d])
        a.allocate_tensors()
        assert {r["subgraph"] for r in d.placement()} == {0, 1, 2}
        del a
        gc.collect()
        plain = [make_interpreter(one) for _ in range(n)]
        b = make_interpreter(one, delegates=[d])
        b.allocate_tensors()
        rows = d.placement()
        live = max(r["interpreter"] for r in rows)  # numbered after every earlier one
        assert [(r["subgraph"], r["kernel"]) for r in rows if r["interpreter"] == live] == \
            [(0, "CAST float32->int8 via float -> int")], (n, rows)
        del b, plain


def test_deleted_interpreters_keep_their_rows_when_their_address_is_reused(fast_device):
    """placement() keeps the rows of LiteRT interpreters that were deleted (its docstring):
    20 interpreters made and deleted one after another with one Delegate, alternating two
    models, give 20 rows numbered 0..19 in the order they were made, each its model's
    node, whatever addresses LiteRT reused (a new context at a freed one's address
    replaced its record: 1 row, 12-16 of 169 in a fresh user's loop)."""
    d = litecl.Delegate(fast_device, quiet=True)
    bufs = [cast_model("float32", "int8", (4,)), add_model("int32", (3,), (3,))]
    for k in range(20):
        it = make_interpreter(bufs[k % 2], delegates=[d])
        it.allocate_tensors()
        del it  # freed here (no cycle: gc.collect() cost 0.4 s a round)
    rows = d.placement()
    assert [(r["interpreter"], r["subgraph"], r["op"]) for r in rows] == \
        [(k, 0, ("CAST", "ADD")[k % 2]) for k in range(20)], rows
    assert [g["interpreter"] for g in d.graph_info()] == list(range(20))


def test_past_the_record_bound_deleted_interpreters_go_first(fast_device):
    """Past 4096 records (records._MAX_RECORDS) the Delegate drops those of interpreters
    known deleted first: a live interpreter made first keeps its rows and number 0 while
    4100 others are made and deleted (it lost both: a fresh user's report)."""
    from litecl.records import _MAX_RECORDS

    d = litecl.Delegate(fast_device, quiet=True)
    first = make_interpreter(chain_model(["float32", "int32", ("add", 1)], (5,)), delegates=[d])
    first.allocate_tensors()
    other = cast_model("float32", "int8", (3,))
    for _ in range(_MAX_RECORDS + 4):
        it = make_interpreter(other, delegates=[d])
        del it
    rows = d.placement()
    assert [(r["interpreter"], r["op"]) for r in rows if r["interpreter"] == 0] == [(0, "CAST"), (0, "ADD")], rows[:3]
    assert len(d.graph_info()) <= _MAX_RECORDS


def test_close_drops_the_interpreters_rows(fast_device):
    d = litecl.Delegate(fast_device, quiet=True)
    a = litecl.Interpreter(model_content=cast_model("float32", "int8", (3,)), delegate=d)
    a.allocate_tensors()
    b = litecl.Interpreter(model_content=cast_model("int32", "float16", (5,)), delegate=d)
    b.allocate_tensors()
    a.close()
    assert d.placement() == b.placement() and len(b.placement()) == 1
    for call in (a.placement, a.summary):
        with pytest.raises(litecl.LiteclError, match="this Interpreter was closed"):
            call()


def test_delegate_settings_are_checked(fast_device):
    """keep_order of an array, profile of a non-bool, a new device: litecl's error or
    Python's read-only attribute, not numpy's ambiguity or a later failure in Prepare."""
    with pytest.raises(litecl.LiteclError, match="keep_order must be"):
        litecl.Delegate(fast_device, quiet=True, keep_order=np.array([True, False]))
    for nodes in ({0: 1}, {0: None}, {0: [-1]}, {"0": [1]}, {0: [True]}, {0: [1.0]}):
        with pytest.raises(litecl.LiteclError, match="nodes must map subgraph indices"):
            litecl.Delegate(fast_device, quiet=True, nodes=nodes)
    # numpy integers, as np.where gives them, are indices (a fresh user's were refused)
    assert litecl.Delegate(fast_device, quiet=True, nodes={np.int64(0): np.where([False, True])[0]}).nodes == {0: {1}}
    d = litecl.Delegate(fast_device, quiet=True)
    for bad in ("yes", None, 2):
        with pytest.raises(litecl.LiteclError, match="profile must be True or False"):
            d.profile = bad
    assert d.profile is False
    with pytest.raises(AttributeError):
        d.device = None


def _two_casts(read_middle: bool) -> bytes:
    """input f32 -> CAST i32 ("middle") -> CAST f16 ("output"): equal tensors and nodes
    either way; ``read_middle`` also makes the middle tensor a model output."""
    from models.builders import _Graph  # noqa: PLC0415

    g = _Graph()
    x = g.tensor("input", "float32", (4, 33))
    g.inputs = [x]
    y = g.cast(x, "int32", "middle")
    g.outputs = [g.cast(y, "float16", "output"), y] if read_middle else [g.cast(y, "float16", "output")]
    return g.finish()


def test_equal_nodes_with_other_outputs_plan_apart(fast_device):
    # the plan memo once keyed a partition by its nodes alone: the graph that reads the
    # fused chain's middle tensor got the plan of the one that does not, which never
    # writes it (a silently wrong output)
    d = litecl.Delegate(fast_device, quiet=True)
    for read in (False, True):
        m = _two_casts(read)
        it = make_interpreter(m, delegates=[d])
        ref = make_interpreter(m)
        ins = random_inputs(ref.get_input_details(), seed=1)
        got, want = run_outputs(it, ins), run_outputs(ref, ins)
        _same(got, want)


@pytest.mark.parametrize("device", device_params(REAL_DEVICES))
def test_many_resizes_of_one_interpreter_stay_exact(device):
    """Each resize moves LiteRT's tensors, so each invoke binds new memory in place: past
    the runtime's 64 cached in-place buffers it starts again. It did so while binding, and
    released a buffer bound to an earlier tensor of the same invoke: from the 22nd shape of
    an ADD (3 tensors) clSetKernelArg failed (CL_INVALID_MEM_OBJECT) on Intel's runtime and
    PoCL aborted the process (a fresh user's report; openwakeword's melspectrogram at its
    22nd audio length, BirdNET's MData model at batch 11)."""
    buf = add_model("float32", [1, 8], [1, 8])  # 3 tensors in place: the 64th is the 22nd invoke's first
    d = litecl.Delegate(device, quiet=True)
    it, ref = make_interpreter(buf, delegates=[d]), make_interpreter(buf)
    for b in [*range(1, 46), 3, 1, 45]:
        for x in (it, ref):
            for det in x.get_input_details():
                x.resize_tensor_input(det["index"], [b, 8])
            x.allocate_tensors()
        ins = random_inputs(ref.get_input_details(), seed=b, full_range=True)  # NaN, inf, subnormals
        _same(run_outputs(it, ins), run_outputs(ref, ins))
    assert all(r["placement"] == "opencl" for r in d.placement()) and d.stats["partition_invokes"] == 48


def test_a_partition_of_many_tensors_keeps_its_in_place_buffers(fast_device):
    """The in-place buffer cache starts again only when this invoke's bindable tensors (its
    inputs that are not constants, its outputs) would not fit: a partition of 40 ADDs of
    constants (80+ tensors) keeps its two in-place buffers from one invoke to the next."""
    steps = ["float32"]
    for k in range(40):
        steps += [("add", np.full([33], k + 0.5, np.float32))]
    buf = chain_model(steps, [33])
    d = litecl.Delegate(fast_device, quiet=True)
    it, ref = make_interpreter(buf, delegates=[d]), make_interpreter(buf)
    it.allocate_tensors()
    ref.allocate_tensors()
    made = []
    for k in range(4):
        ins = random_inputs(ref.get_input_details(), seed=k)
        _same(run_outputs(it, ins), run_outputs(ref, ins))
        (part,) = d.partitions()
        made.append(part.counts()["buffers"])
    assert made[1] == made[2] == made[3], made


def test_a_delegate_is_not_copied(fast_device):
    """copy.copy(Delegate) made an alias of every part, refused as "no longer exists" once
    the original was collected; deepcopy and pickle failed on 'Device' (a fresh user's).
    Each now says why, in one TypeError, and the delegate works after."""
    import copy
    import pickle

    d = litecl.Delegate(fast_device, quiet=True)
    for f in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="a litecl.Delegate cannot be pickled or copied"):
            f(d)
    it = litecl.Interpreter(model_content=cast_model("int8", "int16", [4]), delegate=d)
    it.allocate_tensors()
    assert it.placement()[0]["placement"] == "opencl"


def test_reading_a_tensor_inside_a_partition_says_why_it_has_no_data(fast_device):
    """A tensor a node on OpenCL writes inside its partition has no memory in LiteRT:
    get_tensor said LiteRT's "Run allocate_tensors() first" (it was run; a fresh user's).
    Now litecl's InputError (a ValueError) names the partition and
    experimental_preserve_all_tensors, with which the value reads as LiteRT's."""
    from models.builders import chain_model

    m = chain_model(["float32", "int32", ("add", np.int32(5)), "float16", "float32"], (2, 3))
    x = np.arange(6, dtype=np.float32).reshape(2, 3) * 1.7
    for preserve in (False, True):
        it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True,
                                experimental_preserve_all_tensors=preserve)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        mid = it._model.subgraphs[0].nodes[0].outputs[0]  # the CAST's int32 result
        if preserve:
            assert it.get_tensor(mid).tolist() == [[0, 1, 3], [5, 6, 8]]
        else:
            with pytest.raises(litecl.InputError, match="inside its partition.*experimental_preserve_all_tensors"):
                it.get_tensor(mid)


@pytest.mark.parametrize("fail_first", [False, True])
def test_an_add_unbroadcastable_only_at_declared_shapes_runs_after_a_resize(fast_device, fail_first):
    """x [2] + y [3], both -1 in the signature: LiteRT cannot prepare it at its declared
    shapes. The ADD was kept off litecl for good ("shapes [2] and [3] do not broadcast"),
    and stayed on LiteRT with that reason after a resize to [3] + [3] (a fresh user's
    report): the shapes it runs at decide; bit for bit LiteRT's there."""
    from models.builders import unpreparable_add_model  # noqa: PLC0415

    m = unpreparable_add_model()
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    if fail_first:
        with pytest.raises(litecl.PrepareError):
            it.allocate_tensors()
    ref = make_interpreter(m)
    x = np.array([1.5, -0.0, np.nan], np.float32)
    for r in (it, ref):
        for d in r.get_input_details():
            r.resize_tensor_input(d["index"], [3])
        r.allocate_tensors()
        for d in r.get_input_details():
            r.set_tensor(d["index"], x)
        r.invoke()
    assert [(r["placement"], r["reason"]) for r in it.placement()] == [("opencl", "")]
    got, want = (r.get_tensor(r.get_output_details()[0]["index"]) for r in (it, ref))
    assert got.tobytes() == want.tobytes()
