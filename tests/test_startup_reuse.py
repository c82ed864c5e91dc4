"""What a second construction reuses (issue 38's start-up):

- litecl.Interpreter's allocate_tensors asks the runtime's log whether a recalled Prepare
  made partitions (recall.logged) instead of recording it there (records.has_partitions):
  the records are written when something needs them, and an interpreter gone before that
  never lends its rows to a new one that gets its id (recall.forgotten);
- the Delegate a gone litecl.Interpreter made for itself serves the next one of equal
  settings (pool.pooled / release) as a new one would: nothing of the old one shows."""
from __future__ import annotations

import numpy as np
import pytest

import litecl
from conftest import shared_model
from litecl import abi, pool, recall
from litecl import delegate as D
from models.builders import add_model, cast_model


def _warm(d, *models):
    for m in models * 2:  # the second construction of each is the runtime's (recalled)
        it = litecl.Interpreter(model_content=m, delegate=d)
        it.allocate_tensors()
        del it


def test_a_gone_interpreter_s_rows_never_join_a_new_one_with_its_id(fast_device):
    """A three-subgraph model's interpreter, freed before anything recorded its Prepares,
    then a one-node model's interpreter, which CPython gives the same id (the owner key of
    placement()): the new one's placement() and summary() are its own. Before
    lcl_recall_disown, 20 of 20 such pairs listed the gone one's subgraphs too."""
    big = shared_model("multi_signature_model.tflite").read_bytes()
    small = add_model("float32", [4], [4])
    d = litecl.Delegate(fast_device, quiet=True)
    _warm(d, big, small)
    same_id = mixed = 0
    for _ in range(20):
        a = litecl.Interpreter(model_content=big, delegate=d)
        a.allocate_tensors()
        gone = id(a)
        del a
        b = litecl.Interpreter(model_content=small, delegate=d)
        b.allocate_tensors()
        same_id += id(b) == gone
        mixed += len(d.placement(b)) != 1 or len(b.summary()) != 1
        del b
    assert same_id, "CPython gave no freed id again: nothing was tested"
    assert mixed == 0
    assert d.placement() == []  # every interpreter gone: no rows left


def test_allocate_leaves_the_recording_to_who_needs_it(fast_device):
    """After a recalled Prepare the log still holds it (nothing recorded at allocate), the
    interpreter with a partition guards its invoke (one thread at a time), one without
    takes LiteRT's own, and placement() and the outputs are right."""
    m = cast_model("int32", "float32", [5])
    none = add_model("float32", [4], [4])  # a node litecl leaves (ops= CAST only)
    d = litecl.Delegate(fast_device, quiet=True, ops=["CAST"])
    _warm(d, m, none)
    recall.drain()
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    assert recall.pending(), "allocate_tensors recorded the Prepare (the drain it no longer needs)"
    assert not it._plain_invoke  # a partition: litecl's invoke (the one-thread guard)
    plain = litecl.Interpreter(model_content=none, delegate=d)
    plain.allocate_tensors()
    assert plain._plain_invoke  # no partition: LiteRT's own invoke
    x = np.array([1, -2, 2**31 - 1, -2**31, 0], np.int32)
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    got = it.get_tensor(it.get_output_details()[0]["index"])
    assert got.tobytes() == x.astype(np.float32).tobytes()
    assert [r["placement"] for r in it.placement()] == ["opencl"]


def test_the_log_stays_short_without_placement(fast_device):
    """Interpreters made and dropped without placement() ever asked: the log of recalled
    Prepares is recorded once it passes recall.LOGGED_SCAN entries, so it never grows
    past that (nor does a has_partitions scan)."""
    m = add_model("float32", [4], [4])
    d = litecl.Delegate(fast_device, quiet=True, ops=["CAST"])
    _warm(d, m)
    most = 0
    for _ in range(3 * recall.LOGGED_SCAN):
        it = litecl.Interpreter(model_content=m, delegate=d)
        it.allocate_tensors()
        most = max(most, recall._PENDING.value)
        del it
    assert 0 < most <= recall.LOGGED_SCAN + 1


def _run(it, x):
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def test_a_gone_interpreter_s_own_delegate_serves_the_next_as_new(fast_device):
    """The next litecl.Interpreter of equal settings gets the gone one's Delegate, with a
    new Delegate's state: no stats, kernel times or profile log of the old one, profiling
    off, LiteRT's dynamic-tensor flag back; outputs exact."""
    m = cast_model("int32", "float32", [5])
    x = np.array([1, -2, 2**31 - 1, -2**31, 7], np.int32)
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    it.allocate_tensors()
    _run(it, x)
    first = id(it.delegate)
    assert it.delegate.stats["partition_invokes"] == 1
    it.delegate._struct.flags = 0  # as placement="auto" leaves it on a model of known shapes
    del it
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    d = it.delegate
    assert id(d) == first, "not reused"
    assert d._struct.flags == abi.ALLOW_DYNAMIC_TENSORS
    it.allocate_tensors()
    assert d.stats == {"in_place": 0, "copied": 0, "staged": 0, "partition_invokes": 0}
    assert d.kernel_times_ns == {} and not d.profile_log and d.profile is False
    assert _run(it, x).tobytes() == x.astype(np.float32).tobytes()
    assert d.stats["partition_invokes"] == 1
    assert [r["placement"] for r in it.placement()] == ["opencl"]


def test_a_delegate_still_referred_to_or_of_other_settings_is_not_reused(fast_device):
    """A Delegate the caller kept (``interpreter.delegate``), one made with ops= or nodes=,
    and one profiling are never handed on; one of other settings (quiet) goes to its own.
    (Each gone Delegate is marked: a new one may get its freed id.)"""
    m = cast_model("int32", "float32", [5])

    def marked(it):
        it.allocate_tensors()
        it.delegate.__dict__["_test_mark"] = True
        return it

    def fresh(**kw):
        return "_test_mark" not in litecl.Interpreter(model_content=m, device=fast_device, **kw).delegate.__dict__

    pool._POOL.clear()
    kept = marked(litecl.Interpreter(model_content=m, device=fast_device, quiet=True))
    held = kept.delegate
    del kept
    assert fresh(quiet=True)
    del held
    for kw in ({"ops": ["CAST"]}, {"nodes": {0: [0]}}):
        marked(litecl.Interpreter(model_content=m, device=fast_device, quiet=True, **kw))
        assert fresh(quiet=True, **kw)
    it = marked(litecl.Interpreter(model_content=m, device=fast_device, quiet=True))
    it.delegate.profile = True
    del it
    assert fresh(quiet=True)
    pool._POOL.clear()
    marked(litecl.Interpreter(model_content=m, device=fast_device, quiet=True))
    assert fresh(quiet=False)
    assert not fresh(quiet=True)  # the control: the marked one is reused at its own settings


def test_a_delegate_collected_with_its_interpreter_is_not_reused(fast_device):
    """An Interpreter in a reference cycle goes with its Delegate in one collection, which
    clears the Delegate's weak references (and runs its runtime's free) before the
    Interpreter's __del__: that Delegate is not handed on (the next Interpreter's Prepare
    said "the litecl.Delegate this interpreter was given no longer exists")."""
    import gc

    m = cast_model("int32", "float32", [5])
    x = np.array([1, -2, 2**31 - 1, -2**31, 7], np.int32)
    for _ in range(3):
        it = litecl.Interpreter(model_content=m, device=fast_device, placement="auto", quiet=True)
        it.allocate_tensors()
        it._cycle = it
        del it
        gc.collect()
        it = litecl.Interpreter(model_content=m, device=fast_device, placement="auto", quiet=True)
        it.allocate_tensors()
        assert _run(it, x).tobytes() == x.astype(np.float32).tobytes()
        del it


def test_interpreters_made_in_a_loop_keep_nothing_per_interpreter(fast_device):
    """litecl.Interpreter per request: its own Delegate is reused, so no TfLiteDelegate
    struct (kept for the process: LiteRT may hold its pointer) is made per interpreter; a
    new litecl.Delegate per LiteRT interpreter leaves no _LIVE entry behind (each kept one,
    ~0.6 KB a Delegate with its Prepare thunk: a fresh user's report)."""
    from litecl.compare import make_interpreter

    m = cast_model("int32", "float32", [5])
    litecl.Interpreter(model_content=m, device=fast_device, quiet=True).allocate_tensors()
    structs, live = len(D._STRUCTS), len(D._LIVE)
    for _ in range(200):
        it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
        it.allocate_tensors()
        del it
    assert len(D._STRUCTS) <= structs + 1 and len(D._LIVE) <= live + 1
    for _ in range(200):
        d = litecl.Delegate(fast_device, quiet=True)
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        del it, d
    assert len(D._LIVE) <= live + 1


def test_the_verified_models_memo_counts_their_objects(monkeypatch):
    """Many distinct small models (one per request): the memo of verified models holds at
    most _VERIFIED_MAX_BYTES of their cost, their parsed objects counted beside their bytes
    (a cap on the bytes alone kept ~8x that: a fresh user's 5,000 models grew the process
    by 7 KB each)."""
    from litecl import interpreter as I

    monkeypatch.setattr(I, "_VERIFIED_MAX_BYTES", 64 << 10)
    monkeypatch.setattr(I, "_VERIFIED", {})
    monkeypatch.setattr(I, "_MEMO_HELD", [0])
    for k in range(100):
        I._verified(None, add_model("float32", [4], [4], const2=float(k)))
    held = sum(cost for _, cost in I._VERIFIED.values())
    assert held == I._MEMO_HELD[0] <= 64 << 10
    assert len(I._VERIFIED) < 20  # ~1 KB of bytes and ~6 KB of objects each
    m = add_model("float32", [4], [4], const2=99.0)
    assert I._verified(None, m) is I._verified(None, m)  # the latest is kept


def test_a_model_file_read_again_is_found_by_its_identity_not_a_hash(tmp_path, monkeypatch):
    """model_path's second verification finds the memoised model by the file's identity
    (model._identity) and compares the bytes: no hash of a new read's bytes (~0.2 ms a MB
    at every construction); a file rewritten with other bytes is read and verified anew."""
    from litecl import interpreter as I
    from litecl import model as M

    monkeypatch.setattr(M, "RACY_SECONDS", 0.0)  # a file just written is trusted (no 2 s wait)
    p = tmp_path / "m.tflite"
    p.write_bytes(add_model("float32", [4], [4], const2=1.0))
    first = I._verified(str(p), None)

    def no_hash(_):
        raise AssertionError("the model's bytes were hashed")

    monkeypatch.setattr(I, "hash", no_hash, raising=False)
    assert I._verified(str(p), None) is first
    monkeypatch.setattr(I, "hash", hash, raising=False)
    p.write_bytes(add_model("float32", [4], [4], const2=2.0))
    again = I._verified(str(p), None)
    assert again is not first and again.raw == p.read_bytes()


def test_a_model_resized_to_ever_new_shapes_keeps_a_bounded_kernel_memo(fast_device, monkeypatch):
    """lowering.kernel_spec's memo (one KernelSpec with its source a node and shape, ~3.5 KB)
    is emptied at _SPECS_MAX entries, as the plans' are: a model resized to ever new shapes
    grew the process ~3.5 KB a shape up to the views' 65536 (a fresh user's report); each
    result stays right."""
    from litecl import lowering

    monkeypatch.setattr(lowering, "_SPECS_MAX", 8)
    monkeypatch.setattr(lowering, "_SPECS", {})  # what earlier tests of this worker left is no concern here
    it = litecl.Interpreter(model_content=add_model("float32", [1, 3], [1, 3], dynamic=True),
                            device=fast_device, quiet=True)
    for k in range(1, 30):
        it.resize_tensor_input(0, [k, 3])
        it.resize_tensor_input(1, [1 if k % 2 else k, 3])
        it.allocate_tensors()
        it.set_tensor(0, np.full((k, 3), k, np.float32))
        it.set_tensor(1, np.ones((1 if k % 2 else k, 3), np.float32))
        it.invoke()
        assert (it.get_tensor(it.get_output_details()[0]["index"]) == k + 1).all()
        assert len(lowering._SPECS) <= 8


def test_interpreters_collected_with_their_delegate_free_their_partitions(fast_device, monkeypatch):
    """An app object holding a litecl.Interpreter in a reference cycle: the collector frees
    the interpreter and its Delegate together, clearing the Delegate's weak references
    first, so the drain skipped the recalled Prepare's partitions and their free released
    nothing (13-24 KB of device-side memory an interpreter stayed, a fresh user's report).
    Every partition is freed now, the Delegate gone or not."""
    import gc

    from litecl import runtime

    m = cast_model("int32", "float32", [5])
    lib = runtime.load()
    freed = []
    real = lib.lcl_partition_free
    monkeypatch.setattr(lib, "lcl_partition_free", lambda p: freed.append(p) or real(p))

    class App:
        def __init__(self):
            self.it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
            self.it.allocate_tensors()
            self.me = self

    gc.collect()
    App()
    gc.collect()
    freed.clear()
    for _ in range(20):
        App()
    gc.collect()
    assert len(freed) == 20, len(freed)  # one partition each


def test_a_delegate_takes_no_attribute_of_the_caller_s(fast_device):
    """litecl's partitions hold their Delegate until LiteRT frees them: a callback of the
    object holding the interpreter, stored on the Delegate, made a cycle through a module
    global that no collection could free (~95 KB an interpreter, a fresh user's report).
    Such an attribute is refused in one line; litecl's own settable ones still work."""
    import pytest

    d = litecl.Delegate(fast_device, quiet=True)
    with pytest.raises(AttributeError, match="takes no attribute of yours"):
        d.on_done = print
    d.profile = True
    d.quiet = False
    d.kernel_times_ns = {}
    assert d.profile and not d.quiet


def test_a_call_racing_close_says_the_interpreter_was_closed(fast_device):
    """A worker thread invoking while the owner calls close(): the worker is told the
    interpreter was closed, not "in use by another thread ... (LiteRT's rule)", a rule it
    kept (a fresh user's report)."""
    import threading
    import time

    it = litecl.Interpreter(model_content=add_model("float32", [1 << 20], [1 << 20]), device=fast_device, quiet=True)
    it.allocate_tensors()
    errors = []

    def work():
        try:
            for _ in range(100000):
                it.invoke()
        except Exception as e:  # noqa: BLE001
            errors.append(str(e))

    t = threading.Thread(target=work)
    t.start()
    time.sleep(0.05)
    it.close()
    t.join(30)
    assert errors and "was closed" in errors[0] and "another thread" not in errors[0], errors


def test_kernel_times_of_a_gone_interpreter_go_with_it(fast_device):
    """Delegate.kernel_times_ns, keyed by context address and nodes: a gone interpreter's
    entries stayed, and the next interpreter whose context got that address wrote another
    kernel's time under the same key (a fresh user's report). They go with its partitions."""
    d = litecl.Delegate(fast_device, quiet=True)
    d.profile = True
    it = litecl.Interpreter(model_content=add_model("float32", [4], [4]), delegate=d)
    it.allocate_tensors()
    it.invoke()
    assert len(d.kernel_times_ns) == 1
    del it
    assert d.kernel_times_ns == {}


def test_a_failed_prepare_keeps_no_interpreter_alive(fast_device):
    """LiteRT's own Interpreter with a new litecl.Delegate, a resize the ADD refuses, the
    app catching allocate_tensors' error: the error the Delegate kept (for litecl's entry
    points; nobody takes it here) held the frames it passed, which kept the interpreter, its
    Delegate and partitions alive for good (~105 KB each, a fresh user's report)."""
    import gc

    from litecl.compare import make_interpreter

    m = add_model("float32", [4], [4])
    gc.collect()
    live, planners = len(D._LIVE), len(D._PLANNERS)
    for _ in range(30):
        d = litecl.Delegate(fast_device, quiet=True)
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        it.resize_tensor_input(0, [5])
        with pytest.raises(RuntimeError):  # [5] + [4]: LiteRT's ADD refuses it
            it.allocate_tensors()
        del it, d
    gc.collect()
    assert len(D._LIVE) <= live + 1 and len(D._PLANNERS) <= planners + 1, (len(D._LIVE), len(D._PLANNERS))


def test_interpreters_made_on_short_lived_threads_keep_nothing_per_thread(fast_device):
    """A server making each interpreter on a new thread: the runtime's per-thread buffer of
    the context key (a recalled Prepare's) stayed after its thread ended, ~17-21 KB a
    thread for MoveNet (a fresh user's report: +128 MB after 6000 threads)."""
    import gc
    import threading

    from conftest import shared_model

    raw = shared_model("movenet_singlepose_lightning_int8.tflite").read_bytes()

    def rss_kb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 // 1024

    def request():
        it = litecl.Interpreter(model_content=raw, device=fast_device, quiet=True)
        it.allocate_tensors()

    def on_threads(n):
        for _ in range(n):
            t = threading.Thread(target=request)
            t.start()
            t.join()

    on_threads(60)
    gc.collect()
    before = rss_kb()
    on_threads(300)
    gc.collect()
    assert (rss_kb() - before) / 300 < 6, (rss_kb() - before) / 300
