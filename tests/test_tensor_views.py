"""Issue 14: Interpreter.tensor() as LiteRT's zero-copy access. An input's view is its
host staging (pinned on a discrete GPU): written into, it is the input at the next invoke
without a set_tensor copy; an output's view is its host copy. Checked against LiteRT's
builtin kernels on the mapped (CPU) path, the bus path (zero-copy off) and passthrough."""
from __future__ import annotations

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

import litecl
from models.builders import add_model, chain_model, multi_op_model

SPECIAL = np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45, 3.4e38, -3.4e38], np.float32)


def _ref(buf):
    r = LiteRT(model_content=buf, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    r.allocate_tensors()
    return r


def _interp(buf, device, bus: bool, **kw):
    it = litecl.Interpreter(model_content=buf, device=device, **kw)
    if bus:
        it._main.ex.zero_copy = False  # pinned staging, as across a bus
    it.allocate_tensors()
    return it


@pytest.mark.parametrize("bus", [False, True])
@pytest.mark.parametrize("n", [1, 33, 757, 1999, 100001])
def test_input_views_are_the_inputs(fast_device, bus, n):
    buf = add_model("float32", [n], [n])
    it, ref = _interp(buf, fast_device, bus), _ref(buf)
    views = [it.tensor(d["index"]) for d in it.get_input_details()]
    out = it.get_output_details()[0]["index"]
    rng = np.random.default_rng(n)
    for k in range(3):  # the same function each time; the arrays refilled in place
        a = rng.standard_normal(n).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32)
        a[: min(n, 7)] = SPECIAL[: min(n, 7)]
        views[0]()[...] = a
        views[1]()[...] = b
        ref.set_tensor(0, a)
        ref.set_tensor(1, b)
        it.invoke()
        ref.invoke()
        want = ref.get_tensor(out).tobytes()
        assert it.get_tensor(out).tobytes() == want
        assert it.tensor(out)().tobytes() == want
        assert it.get_tensor(0).tobytes() == a.tobytes()
    # set_tensor after a view still works, and the view shows the value set
    it.set_tensor(0, b)
    assert views[0]().tobytes() == b.tobytes()
    it.invoke()
    ref.set_tensor(0, b)
    ref.invoke()
    assert it.get_tensor(out).tobytes() == ref.get_tensor(out).tobytes()


def test_views_with_fallback_segments_and_passthrough(fast_device):
    buf = multi_op_model("alternating", (2, 3, 4))
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4) * 37 - 400
    ref = _ref(buf)
    ref.set_tensor(0, x)
    ref.invoke()
    out = ref.get_output_details()[0]["index"]
    for placement in ("all", "auto"):  # OpenCL segments between LiteRT ones; passthrough
        it = _interp(buf, fast_device, False, placement=placement)
        it.tensor(0)()[...] = x
        it.invoke()
        assert it.get_tensor(out).tobytes() == ref.get_tensor(out).tobytes()
        assert it.tensor(out)().tobytes() == ref.get_tensor(out).tobytes()
        with pytest.raises(litecl.InputError):
            it.tensor(10**6)


def test_view_rules(fast_device):
    const = np.full([4], 2.5, np.float32)
    buf = chain_model(["float32", ("add", const)], (4,))
    it = _interp(buf, fast_device, False)
    fn = it.tensor(0)
    with pytest.raises(litecl.InputError, match="allocate"):
        litecl.Interpreter(model_content=buf, device=fast_device).tensor(0)()
    fn()[...] = np.arange(4, dtype=np.float32)
    it.invoke()
    out = it.get_output_details()[0]["index"]
    assert it.get_tensor(out).tolist() == [2.5, 3.5, 4.5, 5.5]
    consts = [d["index"] for d in it.get_tensor_details() if d["index"] not in (0, out)]
    c = it.tensor(consts[0])()
    assert not c.flags.writeable and c.tolist() == const.tolist()
    it.resize_tensor_input(0, [4])
    it.allocate_tensors()
    fn()[...] = 1.0  # the function, held across allocate, gives the new array
    it.invoke()
    assert it.get_tensor(out).tolist() == [3.5] * 4
    it.close()
    with pytest.raises(litecl.LiteclError, match="closed"):
        fn()


# --- a new user's break attempts (each was a bug before) --------------------------------

def test_passthrough_view_held_across_a_reallocating_invoke_is_refused(fast_device, shared_models):
    path = str(shared_models / "simple_add_dynamic_shape.tflite")
    it = litecl.Interpreter(model_path=path, device=fast_device, placement="auto")
    it.allocate_tensors()
    assert it._main.ex._pass is not None and it._main.ex._dynamic_outputs
    x = np.ones(it.get_input_details()[0]["shape"], np.float32)
    for d in it.get_input_details():
        it.set_tensor(d["index"], x)
    it.invoke()
    out = it.get_output_details()[0]["index"]
    held = it.tensor(out)()
    for _ in range(2):  # the checked path, then the fast path
        with pytest.raises(RuntimeError, match="hold the function"):
            it.invoke()
    del held
    it.invoke()
    assert it.get_tensor(out).tolist() == (x + x).tolist()
    v = it.tensor(0)()  # LiteRT would move memory under it: allocate says so
    with pytest.raises(litecl.LiteclError, match="hold the function"):
        it.allocate_tensors()
    del v
    it.allocate_tensors()


@pytest.mark.parametrize("placement", ["all", "auto"])
def test_packed_types_have_no_view(fast_device, placement):
    from models.builders import cast_model

    it = _interp(cast_model("int4", "float32", [8]), fast_device, False, placement=placement)
    with pytest.raises(litecl.InputError, match="packed"):
        it.tensor(0)()


@pytest.mark.parametrize("placement", ["all", "auto"])
def test_view_counts_as_set_only_until_allocate(fast_device, placement):
    from models.builders import cast_model

    it = _interp(cast_model("float32", "int32", [4], dynamic=True), fast_device, False, placement=placement)
    it.tensor(0)()[...] = 1
    it.invoke()
    it.resize_tensor_input(0, [1000])
    it.allocate_tensors()
    with pytest.raises(litecl.InputError, match="was not set"):
        it.invoke()


@pytest.mark.parametrize("placement", ["all", "auto"])
def test_outputs_before_invoke_and_constants(fast_device, placement):
    from models.builders import cast_model

    buf = cast_model("float32", "int32", [3])
    it = _interp(buf, fast_device, False, placement=placement)
    it.set_tensor(0, np.ones(3, np.float32))
    for read in (lambda: it.get_tensor(1), lambda: it.tensor(1)()):
        with pytest.raises(litecl.InputError, match="no value yet"):
            read()
    it.invoke()
    assert it.get_tensor(1).tolist() == [1, 1, 1]
    const = np.full((2, 3), 2.0, np.float32)
    it = _interp(chain_model(["float32", ("mul", const)], (2, 3)), fast_device, False, placement=placement)
    c = [d["index"] for d in it.get_tensor_details() if d["index"] not in (0, it.get_output_details()[0]["index"])][0]
    with pytest.raises(ValueError, match="read-only"):
        it.tensor(c)()[...] = 100


@pytest.mark.parametrize("placement", ["all", "auto"])
def test_zero_d_views_are_scalars_and_fast_path_errors(fast_device, placement):
    buf = add_model("float32", (), ())
    it = _interp(buf, fast_device, False, placement=placement)
    for i in (0, 1):
        it.set_tensor(i, np.array(1.5, np.float32))
    it.invoke()
    it.invoke()
    v = it.tensor(2)()
    assert type(v) is np.float32 and v == np.float32(3.0)
    for bad in ([0], np.array(0), {}):
        with pytest.raises(litecl.InputError, match="must be an int"):
            it.get_tensor(bad)
        with pytest.raises(litecl.InputError, match="must be an int"):
            it.set_tensor(bad, np.array(1.0, np.float32))


def test_bad_host_threads_setting_fails_at_construction(fast_device, monkeypatch):
    monkeypatch.setenv("LITECL_HOST_THREADS", "x")
    with pytest.raises(litecl.LiteclError, match="LITECL_HOST_THREADS"):
        litecl.Interpreter(model_content=add_model("float32", [4], [4]), device=fast_device)


def test_views_held_over_close_and_replan_keep_their_memory(fast_device):
    n = 70001
    it = _interp(add_model("float32", [n], [n]), fast_device, True)  # pinned staging
    a, b = it.tensor(0)(), it.tensor(1)()
    a[...] = 1.0
    b[...] = 2.0
    it.invoke()
    out = it.tensor(2)()
    assert out[:3].tolist() == [3.0] * 3
    it.resize_tensor_input(0, [n])
    it.allocate_tensors()  # a re-plan: the old arrays stay valid while held
    it.close()
    a[...] = 5.0  # memory still mapped (released when the views go), no crash
    assert float(a.sum()) == 5.0 * n and out[-1] == 3.0
    del a, b, out
