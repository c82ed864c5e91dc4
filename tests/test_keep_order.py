"""keep_order: LiteRT's own nodes kept in the model's order around litecl's partitions
(backend/order.py, Delegate's keep_order). The simulation of LiteRT's greedy partitioning
against LiteRT's own partitioned plan, the rule of "auto" (more bytes live at once in the
greedy order), the guard (only where litecl's partitions stay the same), the flags put
back, bit-exact outputs with each setting, and bad values refused."""
from __future__ import annotations

import ctypes as C
import types

import numpy as np
import pytest

import litecl
from litecl import abi, order
from litecl.compare import bit_equal, make_interpreter, random_inputs, run_outputs
from litecl.delegate import KEEP_ORDER_DEFAULT
from models.builders import _Graph, schema

SETTINGS = (False, True, "auto")
N = 4096  # elements of the big tensors: 16 KiB each in float32


def _dequantize(g: _Graph, x: int, name: str) -> int:
    y = g.tensor(name, "float32", g.shape_of(x))
    g.op(schema.BuiltinOperator.DEQUANTIZE, [x], [y], version=3)
    return y


def _mul(g: _Graph, a: int, b: int, name: str) -> int:
    return g.binary("mul", a, b, name)


def weights_model(per_invoke: bool) -> bytes:
    """x -> MUL -> ADD (litecl's) -> MUL by w1 -> MUL by w2 -> output, where w1 and w2
    are DEQUANTIZEs of float16 weights placed just before their readers. LiteRT's greedy
    partitioning runs both DEQUANTIZEs before the ADD's partition (they wait for nothing).
    ``per_invoke``: the weights are graph inputs, so the DEQUANTIZEs write the arena at
    every invoke and the greedy order keeps w1 and w2 alive together across the
    partition (pose_detection's DEQUANTIZEs of DENSIFY'd weights); else constants, which
    LiteRT dequantizes once into persistent memory (hand_landmark_full): the order then
    changes nothing an invoke runs."""
    g = _Graph()
    x = g.tensor("x", "float32", [N])
    g.inputs.append(x)
    if per_invoke:
        h1, h2 = g.tensor("h1", "float16", [N]), g.tensor("h2", "float16", [N])
        g.inputs += [h1, h2]
    else:
        rng = np.random.default_rng(0)
        h1, h2 = (g.tensor(f"h{i}", "float16", [N], data=rng.standard_normal(N).astype(np.float16)) for i in (1, 2))
    a = _mul(g, x, g.constant("two", "float32", np.full([1], 2.0, np.float32)), "a")
    b = g.binary("add", a, g.constant("one", "float32", np.full([1], 1.0, np.float32)), "b")
    w1 = _dequantize(g, h1, "w1")
    c1 = _mul(g, b, w1, "c1")
    w2 = _dequantize(g, h2, "w2")
    out = _mul(g, c1, w2, "out")
    g.outputs.append(out)
    return g.finish()


def split_model() -> bytes:
    """Two ADDs LiteRT's greedy order puts in one partition (both wait only for a MUL at
    the front), while the model's order puts a MUL that reads the first ADD between
    them: kept order would split the partition in two, so keep_order leaves the order
    (pose_landmark_full, movenet)."""
    g = _Graph()
    x, y = g.tensor("x", "float32", [8]), g.tensor("y", "float32", [8])
    g.inputs += [x, y]
    one = g.constant("one", "float32", np.full([1], 1.0, np.float32))
    b = g.binary("add", _mul(g, x, x, "a"), one, "b")
    c = _mul(g, b, b, "c")
    q = g.binary("add", _mul(g, y, y, "p"), one, "q")
    g.outputs += [c, q]
    return g.finish()


# ------------------------------------------------------------------ a probe after litecl
_KEEP: list = []


def _probe(store: list):
    """A delegate applied after litecl's that claims nothing and records the execution
    plan LiteRT partitioned for litecl: [(node index, builtin code, might_have_side_effect)]."""

    @abi.DELEGATE_PREPARE
    def prepare(ctx, dlg):
        try:
            c = ctx.contents
            plan_p = C.POINTER(abi.TfLiteIntArray)()
            c.GetExecutionPlan(ctx, C.byref(plan_p))
            node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
            rows = []
            for i in abi.int_array(plan_p):
                c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p))
                rows.append((i, reg_p.contents.builtin_code, bool(node_p.contents.might_have_side_effect)))
            store.append(rows)
        except BaseException as e:  # noqa: BLE001 (nothing may leave a ctypes callback)
            store.append(e)
        return abi.K_OK

    st = abi.TfLiteDelegate()
    st.Prepare = prepare
    st.flags = abi.ALLOW_DYNAMIC_TENSORS
    _KEEP.append((st, prepare))
    return types.SimpleNamespace(_get_native_delegate_pointer=lambda: C.addressof(st))


def _wiring(model: bytes):
    """The model's plan as order.partition reads it: [(inputs, outputs)] per node."""
    it = make_interpreter(model)
    return [(tuple(op["inputs"]), tuple(op["outputs"])) for op in it._get_ops_details()]


def _simulated(wiring, claimed, kept: bool) -> list:
    """LiteRT's partitioned plan as order.partition predicts it: LiteRT's node indices,
    "D" for each partition."""
    mine = [i in claimed for i in range(len(wiring))]
    epoch, run = order.partition(wiring, mine, [i for i in range(len(wiring)) if not mine[i]] if kept else ())
    out, seen = [], set()
    for i in run:
        if not mine[i]:
            out.append(i)
        elif epoch[i] not in seen:
            seen.add(epoch[i])
            out.append("D")
    return out


# ------------------------------------------------------------------ no device
def test_partition_moves_ready_nodes_ahead_and_a_chain_keeps_plan_order():
    """graph_info.cc's greedy partitioning: node 3 (waits for nothing) joins the first
    LiteRT subset, before the delegated node 1; chained after node 2 (which reads the
    partition's output), it runs after the partition. Within a subset nodes run by
    (sweep, position): a node reading a later position's output waits a sweep."""
    wiring = [((0,), (1,)), ((1,), (2,)), ((2,), (3,)), ((5,), (6,)), ((3, 6), (7,))]
    mine = [False, True, False, False, False]
    epoch, run = order.partition(wiring, mine)
    assert epoch == [0, 1, 2, 0, 2] and run == [0, 3, 1, 2, 4]
    epoch, run = order.partition(wiring, mine, [0, 2, 3, 4])
    assert epoch == [0, 1, 2, 2, 2] and run == [0, 1, 2, 3, 4]
    assert order.same_partitions(mine, *(order.partition(wiring, mine, m)[0] for m in ((), (0, 2, 3, 4))))
    epoch, run = order.partition([((3,), (4,)), ((0,), (3,))], [False, False])
    assert epoch == [0, 0] and run == [1, 0]


def test_same_partitions_sees_a_split():
    """Kept order holding back a node a partition waits for splits it (split_model's
    wiring): the guard says no."""
    wiring = [((0,), (2,)), ((2, 9), (3,)), ((3,), (4,)), ((1,), (5,)), ((5, 9), (6,))]
    mine = [False, True, False, False, True]
    greedy = order.partition(wiring, mine)[0]
    kept = order.partition(wiring, mine, [0, 2, 3])[0]
    assert len({greedy[1], greedy[4]}) == 1 and len({kept[1], kept[4]}) == 2
    assert not order.same_partitions(mine, greedy, kept)


def test_live_peak_counts_what_is_alive_together():
    steps = [((0,), (1,)), ((1,), (2,)), ((2, 9), (3,))]
    size = {0: 10, 1: 100, 2: 1000, 3: 1, 9: 10**6}
    assert order.live_peak(steps, size.get, lambda t: t == 9) == 1100  # 9 is constant
    assert order.live_peak(steps, size.get, lambda t: False) == 10**6 + 1100  # a graph input: live from the start


@pytest.mark.parametrize("per_invoke", [True, False])
def test_rule_on_the_wiring(per_invoke):
    """keep_order_pays on weights_model's graph, without LiteRT: per-invoke DEQUANTIZEs
    moved ahead make more bytes live at once (it pays); DEQUANTIZEs of constants run
    once (computed_once) and the peaks are equal (it does not)."""
    model = weights_model(per_invoke)
    sg = litecl.load_model(model_content=model).subgraphs[0]
    wiring = _wiring(model)
    codes = [n.opcode for n in sg.nodes]
    mine = [c == abi.BUILTIN_ADD for c in codes]
    assert codes.count(order.BUILTIN_DEQUANTIZE) == 2 and sum(mine) == 1
    nbytes = lambda t: int(np.prod(sg.tensors[t].shape)) * sg.tensors[t].dtype.itemsize  # noqa: E731
    constant = lambda t: sg.tensors[t].is_constant  # noqa: E731
    greedy = order.partition(wiring, mine)
    kept = order.partition(wiring, mine, [i for i in range(len(wiring)) if not mine[i]])
    assert greedy[1] != kept[1] and order.same_partitions(mine, greedy[0], kept[0])
    assert order.keep_order_pays(wiring, mine, codes, nbytes, constant, greedy, kept) is per_invoke


# ------------------------------------------------------------------ with LiteRT and a device
def _run(model: bytes, device: str, keep_order):
    """(delegate, LiteRT's partitioned plan, outputs) with litecl first and the probe after."""
    plans: list = []
    d = litecl.Delegate(device, quiet=True, keep_order=keep_order)
    it = make_interpreter(model, delegates=[d, _probe(plans)])
    ref = make_interpreter(model)
    inputs = random_inputs(ref.get_input_details(), seed=5)
    return d, plans, run_outputs(it, inputs), run_outputs(ref, inputs)


@pytest.mark.parametrize("name", ["per_invoke", "once", "split"])
def test_each_setting_is_bit_exact_claims_the_same_and_puts_the_flags_back(name, fast_device):
    """Every setting: LiteRT's outputs bit for bit, the same claims and partitions; LiteRT's
    partitioned plan is the one order.partition predicts (model order where kept); every
    node's might_have_side_effect is clear again after litecl's Prepare. Which order:
    True keeps it where the partitions stay (not in split_model), "auto" only where the
    greedy order makes more bytes live at once (per_invoke)."""
    model = {"per_invoke": weights_model(True), "once": weights_model(False), "split": split_model()}[name]
    wiring = _wiring(model)
    rows = {}
    for setting in SETTINGS:
        d, plans, got, want = _run(model, fast_device, setting)
        assert len(got) == len(want) and all(bit_equal(a, b) for (_, a), (_, b) in zip(got, want)), setting
        (plan,) = [p for p in plans if not isinstance(p, BaseException)]
        assert not any(flag for _, _, flag in plan), plan
        (rec,) = d.subgraph_records()
        claimed = {r["index"] for r in d.placement() if r["placement"] == "opencl"}
        live = [i if i < len(wiring) else "D" for i, _, _ in plan]
        assert live == _simulated(wiring, claimed, rec["kept_order"]), (setting, live)
        info = [{k: v for k, v in r.items() if k != "kept_order"} for r in d.graph_info()]
        rows[setting] = (info, d.placement(), rec["kept_order"])
    assert rows[False][:2] == rows[True][:2] == rows["auto"][:2]
    kept = {s: rows[s][2] for s in SETTINGS}
    assert kept == {False: False, True: name != "split", "auto": name == "per_invoke"}, kept


def test_interpreter_passes_it_and_a_second_construction_decides_the_same(fast_device):
    """litecl.Interpreter(keep_order=...) reaches the Delegate; a second Interpreter of the
    model (the memoised decision) keeps the order too, bit-exact; delegate= with
    keep_order is refused as the other Delegate options are."""
    model = weights_model(True)
    ref = make_interpreter(model)
    inputs = random_inputs(ref.get_input_details(), seed=1)
    want = run_outputs(ref, inputs)
    for _ in range(2):
        it = litecl.Interpreter(model_content=model, device=fast_device, quiet=True, keep_order="auto")
        assert it.delegate.keep_order == "auto" and it.delegate.subgraph_records(id(it))[0]["kept_order"]
        assert all(bit_equal(a, b) for (_, a), (_, b) in zip(run_outputs(it, inputs), want))
    d = litecl.Delegate(fast_device, quiet=True)
    assert d.keep_order == KEEP_ORDER_DEFAULT
    with pytest.raises(litecl.LiteclError, match="keep_order given with delegate="):
        litecl.Interpreter(model_content=model, delegate=d, keep_order=not KEEP_ORDER_DEFAULT)


@pytest.mark.parametrize("bad", ["yes", 1, None, "Auto", [True]])
def test_bad_values_are_refused_in_one_line(bad):
    for make in (lambda: litecl.Delegate(keep_order=bad),
                 lambda: litecl.Interpreter(model_content=split_model(), keep_order=bad)):
        with pytest.raises(litecl.LiteclError) as e:
            make()
        msg = str(e.value)
        assert isinstance(e.value, ValueError) and "\n" not in msg
        assert msg == f"keep_order must be True, False or 'auto', got {bad!r}", msg
