"""Fused elementwise chains: one kernel per run of lowered nodes, every rounding the graph
defines kept, intermediates written only when something outside needs them."""
from __future__ import annotations

import numpy as np
import pytest

import litecl
from litecl.compare import mismatches, run_reference
from models.builders import chain_model, multi_op_model

from conftest import REAL_DEVICES, device_params


def _run(m, device, x, fuse=True):
    it = litecl.Interpreter(model_content=m, device=device)
    it._main.ex.fuse = fuse
    it.allocate_tensors()
    d = it.get_input_details()[0]
    it.set_tensor(d["index"], x)
    it.invoke()
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
    groups = it._main.ex._groups
    assert [g.nodes for g in groups.values()] == [[0, 1, 2, 3]]
    assert len(next(iter(groups.values())).outputs) == 1  # only the model output is written


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ["", "mobile"]))
@pytest.mark.parametrize("n", [1, 31, 33, 757])
def test_u8_image_chain_with_broadcast_add(device, n):
    bias = np.linspace(-3, 3, n).astype(np.float32)
    m = chain_model(["uint8", "float32", ("add", bias), ("add", 0.5, "RELU6"), "float16", "int64",
                     "float64", "bool"], [n])
    x = (np.arange(n) * 37 % 256).astype(np.uint8)
    it = _check(m, device, x)
    assert len(it._main.ex._groups) == 1


@pytest.mark.parametrize("device", device_params(REAL_DEVICES))
def test_fan_out_writes_only_needed_intermediates(device):
    m = chain_model(["int32", "float32", [("add", 1.0), "float16"], ("add", 2.0), "int8"], [81])
    it = _check(m, device, (np.arange(81, dtype=np.int32) - 40) * 1000)
    ex = it._main.ex
    (g,) = ex._groups.values()
    outs = {ex.sg.tensors[t].name for t in g.outputs}
    assert outs == {o["name"] for o in it.get_output_details()}
    inner = [t for j in g.nodes for t in ex.sg.nodes[j].outputs if t not in g.outputs]
    assert inner and not any(t in ex.on_device or t in ex.on_host for t in inner)


def test_fallback_node_splits_groups(fast_device):
    m = multi_op_model("cast_mul_cast")
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    ex = it._main.ex
    for g in ex._groups.values():
        assert all(ex.sg.nodes[i].op in ("CAST", "ADD") for i in g.nodes)
        assert all(p["placement"] == "opencl" for p in it.placement() if p["index"] in g.nodes)


def test_one_launch_per_group(fast_device):
    m = chain_model(["uint8", "float32", ("add", 1.0), "float16"], [4096])
    it = litecl.Interpreter(model_content=m, device=fast_device)
    it.allocate_tensors()
    ex = it._main.ex
    it.set_tensor(it.get_input_details()[0]["index"], np.zeros(4096, np.uint8))
    ex.profile = True
    it.invoke()
    assert list(ex.kernel_times_ns) == [0]


def test_fused_equals_unfused(fast_device):
    m = chain_model(["float32", "float16", "float32", ("add", -1.5), "uint8"], [757])
    x = _f32_values(757, seed=3)
    _, a = _run(m, fast_device, x, fuse=True)
    _, b = _run(m, fast_device, x, fuse=False)
    for k in a:
        assert not mismatches(a[k], b[k]).any()


def test_dynamic_shape_refuses(fast_device):
    m = chain_model(["float32", "float16", "float32"], [8])
    it = litecl.Interpreter(model_content=m, device=fast_device)
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
        assert [g.in_shapes for g in it._main.ex._groups.values()] == [[(n,)]]


@pytest.mark.parametrize("device", device_params(["oclgrind"], ["", "mobile"]))
def test_fused_under_oclgrind(device, capfd):
    m = chain_model(["float32", "float16", "float32", ("add", np.full([33], 2.0, np.float32)), "int8"], [33])
    _check(m, device, _f32_values(33))
    err = capfd.readouterr().err
    assert "Invalid read" not in err and "Invalid write" not in err, err[-2000:]


def test_preserve_all_tensors_writes_intermediates(fast_device):
    m = chain_model(["uint8", "float32", ("add", 1.0), "float16"], [31])
    it = litecl.Interpreter(model_content=m, device=fast_device, experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    x = np.arange(31, dtype=np.uint8)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ex = it._main.ex
    (g,) = ex._groups.values()
    for i in g.nodes:
        t = ex.sg.nodes[i].outputs[0]
        assert t in g.outputs
        v = it.get_tensor(t)
        assert v.shape == (31,)
    cast_out = ex.sg.nodes[g.nodes[0]].outputs[0]
    assert (it.get_tensor(cast_out) == x.astype(np.float32)).all()
