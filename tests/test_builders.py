"""Every builder in models/builders.py makes a model LiteRT loads and runs.

No OpenCL device needed: these only check the test-model tooling against LiteRT
(ai-edge-litert), the reference litecl is compared with.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # models/ is not installed

from models import builders as B  # noqa: E402

interpreter = pytest.importorskip("ai_edge_litert.interpreter", reason="needs ai-edge-litert")

#: the 11 types CAST converts among pairwise (bfloat16 and the sub-byte types: tests/test_cast.py)
CAST_NAMES = [n for n in B.TYPE_NAMES if n not in ("complex64", "bfloat16", "int4", "uint4", "int2")]


def _sample(dtype: str, shape, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) * 50 + 1j * rng.standard_normal(shape)).astype(dt)
    return (rng.standard_normal(shape) * 50).astype(dt)


def run(model: bytes, *inputs: np.ndarray) -> list[np.ndarray]:
    """Load ``model`` in LiteRT, resize inputs to the given arrays, invoke, return outputs."""
    it = interpreter.Interpreter(model_content=model)
    details = it.get_input_details()
    assert len(details) == len(inputs)
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], list(x.shape))
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


@pytest.mark.parametrize("src,dst", list(itertools.permutations(CAST_NAMES, 2)))
def test_cast_model_all_pairs(src, dst):
    x = _sample(src, (2, 3))
    (y,) = run(B.cast_model(src, dst, x.shape), x)
    assert y.dtype == np.dtype(dst) and y.shape == x.shape
    assert B.cast_pairs(B.cast_model(src, dst, x.shape)) == {(src, dst): 1}


@pytest.mark.parametrize("dst", ["float32", "int32", "bool"])
def test_cast_model_complex64(dst):
    x = np.array([1.5 + 2j, -3 - 1j, 0 + 1j], dtype=np.complex64)
    (y,) = run(B.cast_model("complex64", dst, x.shape), x)
    assert y.dtype == np.dtype(dst) and y.shape == x.shape
    if dst == "float32":
        np.testing.assert_array_equal(y, x.real)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3, 4, 5), (1, 2, 3, 2, 2), (2, 1, 3, 1, 2, 2)])
def test_cast_model_ranks(shape):
    x = _sample("int32", shape)
    (y,) = run(B.cast_model("int32", "float32", shape), x)
    assert y.shape == tuple(shape)
    np.testing.assert_array_equal(y, x.astype(np.float32))


def test_cast_model_constant_has_no_inputs():
    model = B.cast_model("int64", "float16", (2, 2), constant=np.array([[1, 2], [3, 65520]]))
    it = interpreter.Interpreter(model_content=model)
    assert it.get_input_details() == []
    (y,) = run(model)
    np.testing.assert_array_equal(y, np.array([[1, 2], [3, np.inf]], dtype=np.float16))


def test_cast_model_dynamic_first_dim():
    model = B.cast_model("uint8", "float32", (1, 3), dynamic=True)
    it = interpreter.Interpreter(model_content=model)
    assert list(it.get_input_details()[0]["shape_signature"]) == [-1, 3]
    x = np.arange(12, dtype=np.uint8).reshape(4, 3)
    (y,) = run(model, x)
    np.testing.assert_array_equal(y, x.astype(np.float32))


@pytest.mark.parametrize("activation", ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
def test_add_model_plain(dtype, activation):
    a, b = _sample(dtype, (2, 1, 3), 1), _sample(dtype, (4, 1), 2)
    (y,) = run(B.add_model(dtype, a.shape, b.shape, activation=activation), a, b)
    lo, hi = {"NONE": (None, None), "RELU": (0, None), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}[activation]
    expect = a + b
    if lo is not None or hi is not None:
        expect = np.clip(expect, lo, hi)
    assert y.dtype == np.dtype(dtype) and y.shape == (2, 4, 3)
    np.testing.assert_array_equal(y, expect)


@pytest.mark.parametrize("dtype,zp", [("int8", (1, -3, 2)), ("uint8", (128, 120, 130)), ("int16", (0, 0, 0))])
def test_add_model_quantized(dtype, zp):
    quant = ((0.5, zp[0]), (0.25, zp[1]), (0.75, zp[2]))
    a, b = _sample(dtype, (3, 4), 3), _sample(dtype, (4,), 4)
    (y,) = run(B.add_model(dtype, a.shape, b.shape, quant=quant), a, b)
    assert y.dtype == np.dtype(dtype) and y.shape == (3, 4)
    real = 0.5 * (a.astype(float) - zp[0]) + 0.25 * (b.astype(float) - zp[1])
    expect = np.clip(np.round(real / 0.75) + zp[2], np.iinfo(dtype).min, np.iinfo(dtype).max)
    assert np.max(np.abs(y.astype(float) - expect)) <= 1  # fixed-point rounding, not float


def test_add_model_6d_broadcast_and_constants():
    s1, s2 = (2, 1, 3, 1, 2, 1), (1, 2, 1, 2, 1, 3)
    a = _sample("float32", s1)
    (y,) = run(B.add_model("float32", s1, s2, const2=np.float32(0.5)), a)
    np.testing.assert_array_equal(y, a + np.full(s2, 0.5, np.float32))
    (y,) = run(B.add_model("int32", (3,), (3,), const1=[1, 2, 3], const2=[10, 20, 30]))
    np.testing.assert_array_equal(y, [11, 22, 33])


def test_add_model_quantized_needs_quant():
    with pytest.raises(ValueError, match="quantized"):
        B.add_model("int8", (2,), (2,))


def test_chain_model_with_fan_out():
    x = np.arange(6, dtype=np.uint8).reshape(2, 3)
    model = B.chain_model(["uint8", "float32", [("mul", 2.0)], ("add", 1.0), "float16"], x.shape)
    assert B.op_counts(model) == {"CAST": 2, "MUL": 1, "ADD": 1}
    y, y1 = run(model, x)
    np.testing.assert_array_equal(y, (x.astype(np.float32) + 1).astype(np.float16))
    np.testing.assert_array_equal(y1, x.astype(np.float32) * 2)


def test_chain_model_rejects_unknown_step():
    with pytest.raises(ValueError, match="unknown step"):
        B.chain_model(["float32", ("div", 2.0)], (2,))


@pytest.mark.parametrize("pattern", list(B.MULTI_OP_PATTERNS))
def test_multi_op_model(pattern):
    steps = B.MULTI_OP_PATTERNS[pattern]
    x = _sample(steps[0], (2, 3, 4))
    if np.dtype(steps[0]).kind in "iu":
        x = np.abs(x)
    model = B.multi_op_model(pattern, x.shape)
    counts = B.op_counts(model)
    assert counts["CAST"] >= 1 and set(counts) - {"CAST", "ADD"}, counts
    outs = run(model, x)
    last_type = [s for s in steps if isinstance(s, str)][-1]
    assert outs[0].dtype == np.dtype(last_type)
    assert outs[0].size == x.size
