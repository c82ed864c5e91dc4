"""The executor's memory paths against LiteRT: small tensors staged through host arrays
(one wait per invoke), large ones mapped (CPU devices) or copied (GPUs), kernel arguments
set once and reset when a resize reallocates a buffer."""
from __future__ import annotations

import numpy as np
import pytest

import litecl
from conftest import REAL_DEVICES, device_params
from litecl.executor import SMALL_BYTES
from litecl.fallback import make_interpreter
from models.builders import chain_model

# element counts whose float32 tensors fall on both sides of SMALL_BYTES, in an order
# that grows and shrinks buffers; 1, 31 and 33 divide no vector or chunk width
SIZES = [33, SMALL_BYTES // 4 + 1, 31, SMALL_BYTES // 4, 1, 3 * SMALL_BYTES // 4 + 7, 757]


def _run(it, x: np.ndarray) -> list[np.ndarray]:
    it.resize_tensor_input(it.get_input_details()[0]["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


@pytest.mark.parametrize("pattern", [
    ["uint8", "float32", ("add", 1.5), "float16"],                        # one fused kernel
    ["uint8", "float32", [("mul", 2.0)], ("add", 1.5), "float16"],        # + a fallback branch
    ["float32", "float16", "float32", [("add", 0.5)], "int8"],            # two outputs
], ids=["chain", "fallback_branch", "two_outputs"])
@pytest.mark.parametrize("copies", [False, True], ids=["native", "gpu_copies"])
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("device", device_params(REAL_DEVICES))
def test_resize_across_small_and_large_paths(device, fuse, pattern, copies):
    # copies: the GPU memory path (pinned staging arrays, explicit reads and writes) forced
    # on a CPU device, so it is checked where no GPU is
    model = chain_model(pattern, [1])
    it = litecl.Interpreter(model_content=model, device=device, fuse=fuse)
    if copies:
        it._main.ex.zero_copy = False
    ref = make_interpreter(model)
    rng = np.random.default_rng(0)
    for n in SIZES + SIZES[::-1]:
        for _ in range(2):  # new values every invoke: nothing stale may be returned
            if pattern[0] == "uint8":
                x = rng.integers(0, 256, n).astype(np.uint8)
            else:
                x = (rng.standard_normal(n) * 300).astype(np.float32)
            got, want = _run(it, x), _run(ref, x)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))
    if copies and it._main.ex.allocated:
        assert it._main.ex._pinned or all(s.placement != "opencl" for s in it._main.ex.segments)
    ex = it._main.ex
    it.close()
    assert ex.live_buffers() == 0


@pytest.mark.parametrize("device", device_params(REAL_DEVICES))
def test_output_read_twice_and_after_set(device):
    # the prefetched small output is a copy: mutating it or setting new inputs without
    # invoking does not change what get_tensor returns until the next invoke
    model = chain_model(["float32", "float16"], [64])
    it = litecl.Interpreter(model_content=model, device=device)
    it.allocate_tensors()
    i, o = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    it.set_tensor(i, x)
    it.invoke()
    a = it.get_tensor(o)
    a[:] = 0
    b = it.get_tensor(o)
    np.testing.assert_array_equal(b, x.astype(np.float16))
    it.set_tensor(i, x * 2)
    np.testing.assert_array_equal(it.get_tensor(o), x.astype(np.float16))
    it.invoke()
    np.testing.assert_array_equal(it.get_tensor(o), (x * 2).astype(np.float16))


@pytest.mark.parametrize("device", device_params(REAL_DEVICES))
def test_launch_resets_changed_arguments(device):
    # _launch keeps a kernel's arguments between launches; a new buffer or scalar must be set
    import pyopencl as cl

    from litecl.executor import _Kernel, _launch, build_program

    d = litecl.open_device(device)
    prg = build_program(d, "__kernel void k(__global int* a, uint v) { a[get_global_id(0)] = (int)v; }")
    k = _Kernel(None, cl.Kernel(prg, "k"), None, (4,), None)
    bufs = [cl.Buffer(d.context, cl.mem_flags.READ_WRITE, 16) for _ in range(2)]
    for i, (buf, v) in enumerate([(bufs[0], 1), (bufs[0], 1), (bufs[1], 2), (bufs[1], 3), (bufs[0], 4)]):
        _launch(d.queue, k, (buf, np.uint32(v)), (4,), None)
        out = np.empty(4, np.int32)
        cl.enqueue_copy(d.queue, out, buf)
        assert (out == v).all(), i
