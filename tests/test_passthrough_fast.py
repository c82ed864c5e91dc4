"""Issue 14: the passthrough fast path (Interpreter._maybe_fast). A model that runs whole
on LiteRT gets set_tensor/get_tensor/invoke closures calling LiteRT's own methods; every
uncommon case must still take the checked path, with the same errors, and a closure held
across a re-plan or close must never touch a stale LiteRT interpreter."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

import litecl
from models.builders import chain_model, multi_op_model

FAST = ("set_tensor", "get_tensor", "invoke")


def _litert(buf):
    it = LiteRT(model_content=buf, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    return it


def _fast(it) -> bool:
    return all(name in it.__dict__ for name in FAST)


def test_fast_path_matches_litert_and_checked_errors_stay(fast_device):
    buf = multi_op_model("alternating", (2, 3, 4))
    it = litecl.Interpreter(model_content=buf, device=fast_device, placement="auto")
    it.allocate_tensors()
    assert it._main.ex._pass is not None and not _fast(it)
    with pytest.raises(litecl.InputError, match="was not set"):  # not yet: the check holds
        it.invoke()
    ref = _litert(buf)
    out = it.get_output_details()[0]["index"]
    rng = np.random.default_rng(0)
    for k in range(3):
        x = rng.integers(-1000, 1000, (2, 3, 4)).astype(np.int32)
        it.set_tensor(0, x)
        ref.set_tensor(0, x)
        it.invoke()
        ref.invoke()
        assert _fast(it)  # installed once every input was set
        assert it.get_tensor(out).tobytes() == ref.get_tensor(out).tobytes()
    # the checked path's errors, unchanged
    with pytest.raises(litecl.InputError, match="expects shape"):
        it.set_tensor(0, np.zeros((2, 3, 5), np.int32))
    with pytest.raises(litecl.InputError, match="expects int32"):
        it.set_tensor(0, np.zeros((2, 3, 4), np.float32))
    with pytest.raises(litecl.InputError, match="not an input"):
        it.set_tensor(out, np.zeros(it.get_output_details()[0]["shape"], np.float16))
    with pytest.raises(litecl.InputError, match="must be an int"):
        it.set_tensor(True, x)
    with pytest.raises(litecl.InputError, match="internal to a LiteRT"):
        it.get_tensor(1)
    # a byte-swapped array has int32's type number: it must be converted, not copied raw
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    it.set_tensor(0, x.astype(">i4"))
    ref.set_tensor(0, x)
    it.invoke()
    ref.invoke()
    assert it.get_tensor(out).tobytes() == ref.get_tensor(out).tobytes()


def test_held_fast_methods_follow_resize_and_close(fast_device):
    buf = chain_model(["float32", ("mul", 2.0)], (4,))
    it = litecl.Interpreter(model_content=buf, device=fast_device)
    it.allocate_tensors()
    it.set_tensor(0, np.ones(4, np.float32))
    it.invoke()
    assert _fast(it)
    held_set, held_invoke, held_get = it.set_tensor, it.invoke, it.get_tensor
    out = it.get_output_details()[0]["index"]
    it.resize_tensor_input(0, [6])
    assert not _fast(it)
    it.allocate_tensors()
    held_set(0, np.full(6, 3, np.float32))  # the new interpreter, through the checked path
    held_invoke()
    assert held_get(out).tolist() == [6.0] * 6
    it.close()
    for call in (lambda: held_set(0, np.ones(6, np.float32)), held_invoke, lambda: held_get(out)):
        with pytest.raises(litecl.LiteclError, match="closed"):
            call()


def test_fast_invoke_and_other_threads(fast_device):
    """Calls from a second thread while a fast invoke runs get LiteclError (LiteRT's
    one-thread rule), never a race; the results stay LiteRT's."""
    n = 1 << 22
    buf = chain_model(["float32", ("mul", 2.0), ("mul", 3.0), ("mul", 0.5)], (n,))
    it = litecl.Interpreter(model_content=buf, device=fast_device)
    it.allocate_tensors()
    x = np.linspace(-4, 4, n, dtype=np.float32)
    it.set_tensor(0, x)
    it.invoke()
    assert _fast(it)
    out = it.get_output_details()[0]["index"]
    want = (((x * np.float32(2)) * np.float32(3)) * np.float32(0.5)).tobytes()
    deadline = time.monotonic() + 20
    refused, errors, mine = [], [], [0]

    def done():  # both threads ran calls and at least one collision was refused
        return time.monotonic() > deadline or (mine[0] > 3 and len(refused) > 3)

    def other():
        while not done():
            for call in (lambda: it.set_tensor(0, x), it.invoke, lambda: it.get_tensor(out),
                         it.allocate_tensors):
                try:
                    call()
                except litecl.LiteclError as e:
                    refused.append(str(e))
                except Exception as e:  # noqa: BLE001  anything else is a failure
                    errors.append(repr(e))

    t = threading.Thread(target=other)
    t.start()
    while not done():
        try:
            it.invoke()
            mine[0] += 1
        except litecl.LiteclError as e:
            refused.append(str(e))
    t.join()
    assert not errors
    assert mine[0] and refused and all("another thread" in r for r in refused)
    it.invoke()
    assert it.get_tensor(out).tobytes() == want


def test_profiling_takes_the_checked_invoke(fast_device):
    from litecl.bench import node_profile

    buf = chain_model(["float32", ("mul", 2.0)], (8,))
    it = litecl.Interpreter(model_content=buf, device=fast_device)
    it.allocate_tensors()
    x = np.ones(8, np.float32)
    it.set_tensor(0, x)
    it.invoke()
    assert _fast(it)
    rows = node_profile(it, {0: x}, runs=3)
    assert rows and any(r.get("us", r.get("time_us", 1)) for r in rows)
    assert it._main.ex.segment_times_ns  # the segment was timed: the checked invoke ran


def test_dynamic_output_shapes_after_fast_invoke(fast_device, shared_models):
    """An output LiteRT sizes only by running: its details follow each fast invoke."""
    path = str(shared_models / "simple_add_dynamic_shape.tflite")
    it = litecl.Interpreter(model_path=path, device=fast_device, placement="auto")
    ref = LiteRT(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for batch in (1, 3):
        for interp in (it, ref):
            for d in interp.get_input_details():
                interp.resize_tensor_input(d["index"], [batch, *d["shape"][1:]])
            interp.allocate_tensors()
        for _ in range(2):
            for d in ref.get_input_details():
                x = np.random.default_rng(batch).standard_normal(
                    [batch, *d["shape"][1:]]).astype(np.float32)
                it.set_tensor(d["index"], x)
                ref.set_tensor(d["index"], x)
            it.invoke()
            ref.invoke()
        assert _fast(it) and it._main.ex._pass is not None and it._main.ex._dynamic_outputs
        o, r = it.get_output_details()[0], ref.get_output_details()[0]
        assert list(o["shape"]) == list(r["shape"]) == [batch, *r["shape"][1:]]
        assert it.get_tensor(o["index"]).tobytes() == ref.get_tensor(r["index"]).tobytes()
