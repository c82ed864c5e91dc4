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
