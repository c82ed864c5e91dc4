"""Fused elementwise chains: one kernel per run of delegated nodes, every rounding the graph
defines kept, intermediates written only when something outside needs them. Plans are
read from the delegate's partitions (conftest.launches); every output is compared with
LiteRT's."""
from __future__ import annotations

import numpy as np
import pytest

import litecl
from litecl.compare import mismatches, run_reference
from models.builders import chain_model, multi_op_model

from conftest import REAL_DEVICES, assert_on_opencl, device_params, launches


def _run(m, device, x, fuse=True, **kw):
    it = litecl.Interpreter(model_content=m, device=device, fuse=fuse, quiet=True, **kw)
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], x)
    it.invoke()
    assert it.delegate.stats["partition_invokes"] >= 1
    return it, {o["name"]: it.get_tensor(o["index"]) for o in it.get_output_details()}


def _check(m, device, x):
    it, got = _run(m, device, x)
    want = run_reference(m, {it.get_input_details()[0]["name"]: x})
    for k in want:
        bad = mismatches(got[k], want[k])
        assert not bad.any(), (k, x[bad][:5] if x.shape == got[k].shape else None, got[k][bad][:5], want[k][bad][:5])
    return it


def _f32_values(n, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 6, n)).astype(np.float32)
    edge = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 65519.0, 65520.0, -65520.0, 1 + 2**-11,
                     1 + 3 * 2**-11, 6e-8, 3e-8, 1e-40, 2049.0, 1e10, -1e10], np.float32)
    k = min(n, len(edge))
    x[:k] = edge[:k]
    return x


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile", "mobile-fp16"]))
def test_f32_f16_f32_chain_keeps_half_rounding(device):
    # the fused kernel must round to half between the CASTs, as the graph defines
    m = chain_model(["float32", "float16", "float32", ("add", 0.25), "int8"], [1999])
    it = _check(m, device, _f32_values(1999))
    assert_on_opencl(it)
    (ln,) = launches(it)
    assert ln.nodes == (0, 1, 2, 3) and ln.what.startswith("fused")
    assert len(ln.outputs) == 1  # only the model output is written


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile"]))
@pytest.mark.parametrize("n", [1, 31, 33, 757])
def test_u8_image_chain_with_broadcast_add(device, n):
    bias = np.linspace(-3, 3, n).astype(np.float32)
    m = chain_model(["uint8", "float32", ("add", bias), ("add", 0.5, "RELU6"), "float16", "int64",
                     "float64", "bool"], [n])
    x = (np.arange(n) * 37 % 256).astype(np.uint8)
    it = _check(m, device, x)
    assert_on_opencl(it)
    (ln,) = launches(it)
    assert len(ln.nodes) == 7


@pytest.mark.parametrize("device", device_params(REAL_DEVICES))
def test_fan_out_writes_only_needed_intermediates(device):
    m = chain_model(["int32", "float32", [("add", 1.0), "float16"], ("add", 2.0), "int8"], [81])
    it = _check(m, device, (np.arange(81, dtype=np.int32) - 40) * 1000)
    assert_on_opencl(it)
    sg = it._model.subgraphs[0]
    (ln,) = launches(it)
    outs = {sg.tensors[t].name for t in ln.outputs}
    assert outs == {o["name"] for o in it.get_output_details()}
    inner = [t for j in ln.nodes for t in sg.nodes[j].outputs if t not in ln.outputs]
    assert inner  # computed in registers: no launch writes them


def test_litert_node_splits_partitions(fast_device):
    """CAST | MUL on LiteRT | ADD, CAST: two partitions; the ADD and CAST after the MUL
    fuse into one kernel; outputs equal LiteRT's."""
    m = multi_op_model("cast_mul_cast")
    x = (np.arange(24) * 11 % 256).astype(np.uint8).reshape(2, 3, 4)
    it = _check(m, fast_device, x)
    rows = assert_on_opencl(it)
    assert [(r["op"], r["partition"]) for r in rows] == [("CAST", 0), ("ADD", 1), ("CAST", 1)]
    assert [ln.nodes for ln in launches(it)] == [(0,), (2, 3)]
    ops = {n.index: n.op for n in it._model.subgraphs[0].nodes}
    assert ops[1] == "MUL" and all(ops[i] in ("CAST", "ADD") for ln in launches(it) for i in ln.nodes)


def test_one_launch_per_group(fast_device):
    m = chain_model(["uint8", "float32", ("add", 1.0), "float16"], [4096])
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros(4096, np.uint8))
    it.delegate.profile = True
    it.invoke()
    assert [k[1] for k in it.delegate.kernel_times_ns] == [(0, 1, 2)]
    assert all(v > 0 for v in it.delegate.kernel_times_ns.values())


def test_fused_equals_unfused(fast_device):
    m = chain_model(["float32", "float16", "float32", ("add", -1.5), "uint8"], [757])
    x = _f32_values(757, seed=3)
    ita, a = _run(m, fast_device, x, fuse=True)
    itb, b = _run(m, fast_device, x, fuse=False)
    assert [ln.nodes for ln in launches(ita)] == [(0, 1, 2, 3)]
    assert [ln.nodes for ln in launches(itb)] == [(0,), (1,), (2,), (3,)]
    want = run_reference(m, {ita.get_input_details()[0]["name"]: x})
    for k in a:
        assert not mismatches(a[k], b[k]).any() and not mismatches(a[k], want[k]).any()


def test_resize_replans_the_fused_kernel(fast_device):
    m = chain_model(["float32", "float16", "float32"], [8])
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    it.allocate_tensors()
    for n in (8, 33):
        if n != 8:
            it.resize_tensor_input(it.get_input_details()[0]["index"], [n])
            it.allocate_tensors()
        x = _f32_values(n, seed=n)
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got = it.get_tensor(it.get_output_details()[0]["index"])
        with np.errstate(over="ignore"):
            want = x.astype(np.float16).astype(np.float32)
        assert not mismatches(got, want).any()
        assert_on_opencl(it)
        (part,) = it.delegate.partitions()
        assert [ln.n for ln in part.plan.launches] == [n] and part.plan.shapes[0] == (n,)


@pytest.mark.parametrize("device", device_params(["oclgrind"], ["", "mobile"]))
def test_fused_under_oclgrind(device, capfd):
    m = chain_model(["float32", "float16", "float32", ("add", np.full([33], 2.0, np.float32)), "int8"], [33])
    _check(m, device, _f32_values(33))
    err = capfd.readouterr().err
    assert "Invalid read" not in err and "Invalid write" not in err, err[-2000:]


def test_preserve_all_tensors_writes_intermediates(fast_device):
    """experimental_preserve_all_tensors: LiteRT reads every intermediate (it gives each
    node its own partition then), so litecl's launches write each one, bit-equal to
    LiteRT's."""
    from litecl.compare import make_interpreter

    m = chain_model(["uint8", "float32", ("add", 1.0), "float16"], [31])
    x = np.arange(31, dtype=np.uint8)
    it, _ = _run(m, fast_device, x, experimental_preserve_all_tensors=True)
    ref = make_interpreter(m, preserve_all_tensors=True)
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], x)
    ref.invoke()
    assert_on_opencl(it)
    sg = it._model.subgraphs[0]
    written = {t for ln in launches(it) for t in ln.outputs}
    assert sorted(i for ln in launches(it) for i in ln.nodes) == [0, 1, 2]
    for i in (0, 1, 2):
        t = sg.nodes[i].outputs[0]
        assert t in written
        assert it.get_tensor(t).shape == (31,)
        assert not mismatches(it.get_tensor(t), ref.get_tensor(t)).any(), t
    cast_out = sg.nodes[0].outputs[0]
    assert (it.get_tensor(cast_out) == x.astype(np.float32)).all()
