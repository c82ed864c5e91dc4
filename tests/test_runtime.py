"""litecl's one C runtime (backend/runtime.py, backend/native/litecl_delegate.c) under
litecl.Delegate: every partition invoke in C with the same results as LiteRT, the planner
asked again when shapes change, the runtime's errors as litecl's, threads, copies with
staging, fork(), and how the library is built (at install, or again after an edit)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import litecl
from litecl import recall
from litecl import delegate as D
from litecl import runtime as R
from litecl.compare import make_interpreter

from conftest import force_copies, ROOT, assert_on_opencl, device_params, invoke_with, litert_outputs, same_outputs
from models.builders import cast_model, chain_model

HAVE_CC = shutil.which(os.environ.get("CC") or "cc") is not None

_litert = litert_outputs
_invoke = invoke_with
_same = same_outputs


def _model():
    """CAST f32 -> i32, ADD of a constant, CAST i32 -> f16 over 757 values: one partition,
    three launches unfused (fuse=False), fewer fused."""
    return chain_model(["float32", "int32", ("add", np.full(757, 7, np.int32)), "float16"], (757,))


def _inputs(m: bytes, seed: int) -> list:
    rng = np.random.default_rng(seed)
    ref = make_interpreter(m)
    out = []
    for d in ref.get_input_details():
        if np.dtype(d["dtype"]).kind == "f":
            out.append((rng.standard_normal(d["shape"]) * 1e3).astype(d["dtype"]))
        else:
            out.append(rng.integers(-1000, 1000, d["shape"]).astype(d["dtype"]))
    return out


def test_the_in_process_plan_is_the_generators():
    """native/inprocess_plan.c (compiled at install, without litecl's Python) is what
    runtime.inprocess_plan_c writes from ops/dtypes.py's table."""
    with open(os.path.join(ROOT, "backend", "native", "inprocess_plan.c")) as f:
        assert f.read() == R.inprocess_plan_c()


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_every_invoke_runs_in_c_and_stays_exact(fast_device, fuse, monkeypatch):
    """Invokes enter no Python: the planner runs once (at allocate), then five invokes with
    new inputs each are exact and counted by the runtime."""
    m = _model()
    d = litecl.Delegate(fast_device, quiet=True, fuse=fuse)
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    assert_on_opencl(it)
    (part,) = d.partitions()
    planned = []
    real = D._Planner.plan_for
    monkeypatch.setattr(D._Planner, "plan_for", lambda self, *a: planned.append(1) or real(self, *a))
    for k in range(5):  # new inputs every invoke: an invoke that ran nothing would fail here
        ins = _inputs(m, k)
        assert _same(_invoke(it, ins), _litert(m, ins)), k
    assert planned == []
    assert d.stats["partition_invokes"] == 5
    assert part.launches_run == 5 * len(part.plan.launches)


def test_plan_memos_stay_bounded_over_many_input_shapes(fast_device, monkeypatch):
    """plan_for's memos (_PLANNED, _C_PLANS: ~11 KB an entry) hold at most _PLANS_MAX
    entries: a model fed 40,000 input lengths held 450 MB at the views' bound (a fresh
    user's report); bit-exact throughout."""
    monkeypatch.setattr(D, "_PLANS_MAX", 8)
    m = chain_model(["float32", "int32", ("add", 7), "float16"], (40,))
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    for n in range(30, 50):
        it.resize_tensor_input(it.get_input_details()[0]["index"], [n])
        it.allocate_tensors()
        ins = [np.linspace(-3e3, 3e3, n, dtype=np.float32)]
        assert _same(_invoke(it, ins), _litert(m, ins)), n
        assert len(D._PLANNED) <= 8 and len(D._C_PLANS) <= 8


def test_the_expected_table_lives_until_its_replace_ends(fast_device, monkeypatch):
    """The runtime reads an _Expected's table (the Expected array and its ints) during
    ReplaceNodeSubsetsWithDelegateKernels. Another thread's Prepare of an equal context
    may build the table again meanwhile (a preset kept at a resize bumps its version),
    which dropped the last reference to the arrays under this Replace: two threads
    constructing and resizing interpreters died of SIGSEGV or SIGBUS, or failed with
    garbage node numbers (a fresh user's report). The arrays stay alive until ``end``."""
    import gc
    import weakref

    m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
    d = litecl.Delegate(fast_device, quiet=True)
    make_interpreter(m, delegates=[d]).allocate_tensors()
    alive = []
    real_begin, real_end = D._Expected.begin, D._Expected.end

    def begin(self, dlg, rec):
        state = real_begin(self, dlg, rec)
        if state is not None:  # as another thread rebuilding this entry's table
            refs = [weakref.ref(x) for t in self.tables.values() for x in t[4:6]]
            self.version += 1
            self.tables.clear()
            gc.collect()
            self._refs = refs
        return state

    def end(self, dlg, rec, addr, state, ok, **kw):
        if state is not None:
            alive.append(all(r() is not None for r in self._refs))
        return real_end(self, dlg, rec, addr, state, ok, **kw)

    monkeypatch.setattr(D._Expected, "begin", begin)
    monkeypatch.setattr(D._Expected, "end", end)
    recall.forget_all()  # Python's Prepare (the runtime's recalled one copies the table)
    second = make_interpreter(m, delegates=[d])
    second.allocate_tensors()
    assert alive == [True]
    ins = _inputs(m, 0)
    assert _same(_invoke(second, ins), _litert(m, ins))


def test_a_second_construction_makes_its_partitions_in_c(fast_device, monkeypatch):
    """A second interpreter of a model (an equal context: claims' Prepare memo) gets its
    partitions from the runtime's init with the plans the first one had: no Python init
    or planner call per partition, bit-exact, and placement() rows equal to the first's.
    A resize to new shapes asks the planner again."""
    m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
    d = litecl.Delegate(fast_device, quiet=True)
    first = make_interpreter(m, delegates=[d])
    first.allocate_tensors()
    calls = []
    real_init, real_plan = D._Planner.__init__, D._Planner.plan_for
    monkeypatch.setattr(D._Planner, "__init__", lambda self, *a: calls.append("init") or real_init(self, *a))
    monkeypatch.setattr(D._Planner, "plan_for", lambda self, *a: calls.append("plan") or real_plan(self, *a))
    second = make_interpreter(m, delegates=[d])
    second.allocate_tensors()
    assert calls == []
    (g0, g1) = d.graph_info()
    assert g0["partitions"] == g1["partitions"] == 2
    for k in range(3):
        ins = _inputs(m, k)
        assert _same(_invoke(second, ins), _litert(m, ins)), k
    rows = {}
    for r in d.placement():
        rows.setdefault(r.pop("interpreter"), []).append(r)
    assert rows[0] == rows[1] and all(r["kernel"] and r["device"] for r in rows[1]), rows
    i = second.get_input_details()[0]["index"]
    second.resize_tensor_input(i, [81])
    second.allocate_tensors()
    assert "plan" in calls
    ins = [np.linspace(-3e3, 3e3, 81, dtype=np.float32)]
    ref = make_interpreter(m)
    ref.resize_tensor_input(ref.get_input_details()[0]["index"], [81])
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], ins[0])
    ref.invoke()
    assert _same(_invoke(second, ins), [ref.get_tensor(ref.get_output_details()[0]["index"])])


def test_resize_and_reallocate_plan_again(fast_device):
    m = cast_model("float32", "int32", [4])
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    for n in (4, 1999, 33, 0, 81):
        i = it.get_input_details()[0]["index"]
        it.resize_tensor_input(i, [n])
        it.allocate_tensors()
        for seed in range(3):
            x = (np.random.default_rng(seed).standard_normal(n) * 1e9).astype(np.float32)
            got = _invoke(it, [x])
            ref = make_interpreter(m)
            ref.resize_tensor_input(ref.get_input_details()[0]["index"], [n])
            ref.allocate_tensors()
            ref.set_tensor(ref.get_input_details()[0]["index"], x)
            ref.invoke()
            assert _same(got, [ref.get_tensor(ref.get_output_details()[0]["index"])]), (n, seed)


def test_an_opencl_error_in_the_runtime_is_litecls_error_then_recovers(fast_device, monkeypatch):
    """An OpenCL error inside the C runtime (here clCreateKernel on a name the program
    lacks) reaches the user as litecl's error naming the call and the OpenCL code; once
    the cause is gone the model is exact."""
    m = cast_model("float32", "int32", [1999])
    real = D._c_plan

    def wrong_name(plan, programs, device, memory):
        struct, keep = real(plan, programs, device, memory)
        struct.names[0] = b"litecl_no_such_kernel"
        return struct, keep

    monkeypatch.setattr(D, "_c_plan", wrong_name)
    monkeypatch.setattr(D, "_C_PLANS", {})
    monkeypatch.setattr(D, "_PLANNED", {})  # plan_for's answers hold their C plans
    monkeypatch.setattr(D, "_PRESETS", {})
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    with pytest.raises(litecl.LiteclError, match=r"clCreateKernel\(litecl_no_such_kernel\) failed "
                                                 r"\(OpenCL error -?\d+\)"):
        it.allocate_tensors()
    monkeypatch.undo()
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    it.allocate_tensors()
    x = np.arange(1999, dtype=np.float32)[::-1].copy()
    assert _same(_invoke(it, [x]), _litert(m, [x]))


def test_threads_share_one_delegate(fast_device):
    """Four threads, four interpreters, one Delegate: every invoke exact while the
    runtime runs them concurrently (one queue, each partition its own kernels)."""
    m = _model()
    d = litecl.Delegate(fast_device, quiet=True)
    wants = {k: _litert(m, _inputs(m, k)) for k in range(6)}
    bad, its = [], []

    def work(seed):
        it = litecl.Interpreter(model_content=m, delegate=d)
        its.append(it)
        it.allocate_tensors()
        for r in range(30):
            k = (seed + r) % 6
            if not _same(_invoke(it, _inputs(m, k)), wants[k]):
                bad.append((seed, r))

    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad
    parts = d.partitions()  # every interpreter's (all four are alive in ``its``)
    assert len(its) == 4 and [p.counts()["partition_invokes"] for p in parts] == [30] * 4


@pytest.mark.parametrize("device", device_params(["pocl", "intel"]))
def test_the_wait_follows_the_runtimes_row(device):
    """An invoke's wait is the row of the device's runtime (litecl_delegate.c SPIN_ROWS,
    found from the device's platform name): Intel's CPU runtime blocks in clFinish at
    once, others poll for 1000 us first; the exact results either way."""
    m = _model()
    d = litecl.Delegate(device, quiet=True)
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    assert _same(_invoke(it, _inputs(m, 1)), _litert(m, _inputs(m, 1)))
    want = 0 if "Intel(R) OpenCL" in d.device.caps.platform else 1000
    assert d._rt.lcl_inprocess_device_spin_us(d._device_index(d.device)) == want


def test_staged_copies(fast_device):
    """The copy path (a discrete GPU's: device buffers, pinned staging) forced on a CPU
    device: host copies before the writes and after the wait, all exact."""
    m = _model()
    d = litecl.Delegate(fast_device, quiet=True)
    force_copies(d)
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    for k in range(4):
        ins = _inputs(m, k)
        assert _same(_invoke(it, ins), _litert(m, ins)), k
    assert d.stats["staged"] == 8 and d.stats["copied"] == 8 and d.stats["in_place"] == 0


def test_profile_reads_every_commands_event(fast_device):
    """profile=True: each partition invoke in profile_log with its commands' event times
    (ordered: queued <= start <= end) and the host's wait; kernel_times_ns per launch."""
    m = _model()
    d = litecl.Delegate(fast_device, quiet=True, fuse=False)
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    d.profile = True
    _invoke(it, _inputs(m, 0))
    (entry,) = d.profile_log
    kinds = [c[0] for c in entry["commands"]]
    assert kinds.count("kernel") == 3, kinds
    assert all(c[5] <= c[6] <= c[7] and c[7] > 0 for c in entry["commands"] if c[0] == "kernel")
    assert [s[0] for s in entry["spans"]] == ["wait"] and entry["host"][0] <= entry["spans"][0][1]
    assert len(d.kernel_times_ns) == 3
    d.profile = False
    _invoke(it, _inputs(m, 1))
    assert len(d.profile_log) == 1


_CHILD = r"""
import json, sys
import litecl
try:
    d = litecl.Delegate(sys.argv[1], quiet=True)
    print(json.dumps({"ok": True}))
except litecl.LiteclError as e:
    print(json.dumps({"error": str(e)}))
"""


def _child(env: dict, device: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD, device], env=env, capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _edited_checkout(tmp_path):
    """A copy of the package whose C runtime sources differ from what any library was
    built from (a comment added): as after editing the C in a checkout."""
    pkg = tmp_path / "pkg" / "litecl"
    shutil.copytree(ROOT / "backend", pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    shutil.copytree(ROOT / "ops", pkg / "ops", ignore=shutil.ignore_patterns("__pycache__"))
    src = pkg / "native" / "litecl_delegate.c"
    src.write_text(src.read_text() + f"\n/* edited {tmp_path.name} */\n")
    return tmp_path / "pkg"


def test_after_an_edit_the_runtime_is_built_once_then_cached(fast_device, tmp_path):
    """Sources no installed library was built from: built with CC once, kept in litecl's
    cache (kind "runtime"); a second process loads it from there with no compiler."""
    if not HAVE_CC:
        pytest.skip("no C compiler")
    cache = tmp_path / "cache"
    env = dict(os.environ, LITECL_CACHE_DIR=str(cache),
               PYTHONPATH=os.pathsep.join([str(_edited_checkout(tmp_path)), str(ROOT)]))
    env.pop("CC", None)
    assert _child(env, fast_device) == {"ok": True}
    assert list((cache / "runtime").rglob("*.bin"))
    assert _child(dict(env, CC=str(tmp_path / "no-such-cc")), fast_device) == {"ok": True}


def test_without_a_built_runtime_or_a_compiler_one_error(fast_device, tmp_path):
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "cache"), CC=str(tmp_path / "no-such-cc"),
               PYTHONPATH=os.pathsep.join([str(_edited_checkout(tmp_path)), str(ROOT)]))
    got = _child(env, fast_device)["error"]
    assert got.startswith("litecl's C runtime (backend/native) is not built for these sources and no C "
                          f"compiler was found ({str(tmp_path / 'no-such-cc')!r})"), got
    assert "\n" not in got


def test_a_compiler_that_fails_is_named(fast_device, tmp_path):
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "cache"), CC="/bin/false",
               PYTHONPATH=os.pathsep.join([str(_edited_checkout(tmp_path)), str(ROOT)]))
    got = _child(env, fast_device)["error"]
    assert got.startswith("/bin/false could not build litecl's C runtime (") and got.endswith(
        "native): it exited 1; where those sources were edited, the compiler's words say what to fix, else set "
        "CC to this machine's C compiler"), got


def test_a_c_source_that_does_not_compile_is_named(fast_device, tmp_path):
    """An edit that breaks the C: the compiler's own error in the one line, and the
    sources named as what to fix (the compiler works)."""
    if not HAVE_CC:
        pytest.skip("no C compiler")
    pkg = _edited_checkout(tmp_path)
    src = pkg / "litecl" / "native" / "litecl_delegate.c"
    src.write_text(src.read_text() + "\nthis is not C;\n")
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join([str(pkg), str(ROOT)]))
    env.pop("CC", None)
    got = _child(env, fast_device)["error"]
    assert "could not build litecl's C runtime" in got and "error:" in got and "\n" not in got, got
    assert "where those sources were edited, the compiler's words say what to fix" in got


_FORK = r"""
import os, sys
import numpy as np
import litecl
from litecl.compare import make_interpreter
from models.builders import cast_model
d = litecl.Delegate(sys.argv[1], quiet=True)
it = make_interpreter(cast_model("float32", "int32", [33]), delegates=[d])
it.allocate_tensors(); it.invoke(); it.invoke()
pid = os.fork()
if pid == 0:
    try:
        it.invoke()
        os.write(1, b"child: invoked\n")
    except RuntimeError as e:
        os.write(1, ("child: " + str(e)[:60] + "\n").encode())
    os._exit(0)
os.waitpid(pid, 0)
it.invoke()
print("parent: invoked")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork()")
def test_a_forked_child_gets_the_fork_error_not_a_hang(fast_device):
    """LiteRT's own Interpreter with the Delegate, invoked in a fork()ed child: the
    runtime refuses with litecl's fork message (an OpenCL call there never returned);
    the parent goes on."""
    r = subprocess.run([sys.executable, "-c", _FORK, fast_device], capture_output=True, text=True,
                       timeout=120, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                           [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "child: this process was fork()ed after" in r.stdout and "parent: invoked" in r.stdout, r.stdout


def _shared(name: str) -> bytes:
    from conftest import SHARED_MODELS  # noqa: PLC0415

    p = SHARED_MODELS / name
    if not p.exists():
        pytest.skip(f"{p} is not here (../shared/models)")
    return p.read_bytes()


def test_a_recalled_prepare_runs_in_c_and_records_as_python_would(fast_device, monkeypatch):
    """From the second interpreter of a model on, a Prepare of an equal context runs in the
    runtime without calling Python (litecl_delegate.c lcl_inprocess_prepare; issue 38's
    start-up): no claims.prepare call, the same placement() rows and graph_info() (each
    interpreter numbered), bit-exact outputs, stats counting every partition invoke. A
    resize prepares again at the same context (one interpreter still)."""
    from litecl import claims  # noqa: PLC0415

    m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
    d = litecl.Delegate(fast_device, quiet=True)
    recall.forget_all()  # an earlier test's Delegate of equal settings kept this graph's
    calls = []
    real = claims.prepare
    monkeypatch.setattr(claims, "prepare", lambda dlg, ctx: calls.append(1) or real(dlg, ctx))
    its = []
    for _ in range(3):
        its.append(make_interpreter(m, delegates=[d]))
        its[-1].allocate_tensors()
    assert len(calls) == 1, calls
    ins = _inputs(m, 3)
    for it in its:
        assert _same(_invoke(it, ins), _litert(m, ins))
    rows = d.placement()
    assert sorted({r["interpreter"] for r in rows}) == [0, 1, 2]
    strip = lambda r: {k: v for k, v in r.items() if k != "interpreter"}  # noqa: E731
    per = [[strip(r) for r in rows if r["interpreter"] == k] for k in range(3)]
    assert per[0] == per[1] == per[2] and all(r["placement"] == "opencl" and r["kernel"] for r in per[0])
    info = d.graph_info()
    assert [g["interpreter"] for g in info] == [0, 1, 2] and len({g["partitions"] for g in info}) == 1
    assert d.stats["partition_invokes"] == 3 * info[0]["partitions"]
    its[1].resize_tensor_input(0, [300])
    its[1].allocate_tensors()
    x = [np.asarray(ins[0])[:300]]
    ref = make_interpreter(m)
    ref.resize_tensor_input(0, [300])
    ref.allocate_tensors()
    assert _same(_invoke(its[1], x), _invoke(ref, x))
    assert sorted({r["interpreter"] for r in d.placement()}) == [0, 1, 2]


def test_litecl_interpreters_recall_each_other_s_prepare(fast_device, monkeypatch):
    """litecl.Interpreter makes a Delegate per construction: a second Interpreter of a model
    (a Delegate of equal settings) has its Prepare recalled in the runtime, logged with its
    owner: no claims.prepare call, its own placement() rows (equal to the first's) and
    stats, bit-exact. A Delegate of other settings (fuse=False) and a litecl.Delegate
    shared through ``delegate=`` keep their own rules: the first decides, the second's
    construction is recalled too."""
    from litecl import claims  # noqa: PLC0415

    m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
    recall.forget_all()
    calls = []
    real = claims.prepare
    monkeypatch.setattr(claims, "prepare", lambda dlg, ctx: calls.append(dlg) or real(dlg, ctx))
    ins = _inputs(m, 5)
    its = []
    for _ in range(3):
        its.append(litecl.Interpreter(model_content=m, device=fast_device, quiet=True))
        its[-1].allocate_tensors()
        assert _same(_invoke(its[-1], ins), _litert(m, ins))
    assert len(calls) == 1 and len({id(it.delegate) for it in its}) == 3, calls
    rows = [it.placement() for it in its]
    assert rows[0] == rows[1] == rows[2] and all(r["placement"] == "opencl" and r["kernel"] for r in rows[2])
    assert all(it.delegate.stats["partition_invokes"] >= 1 for it in its)
    other = litecl.Interpreter(model_content=m, device=fast_device, quiet=True, fuse=False)
    other.allocate_tensors()
    assert len(calls) == 2 and calls[-1] is other.delegate  # other settings: decided by Python
    assert _same(_invoke(other, ins), _litert(m, ins))
    d = litecl.Delegate(fast_device, quiet=True)
    shared = [litecl.Interpreter(model_content=m, delegate=d) for _ in range(2)]
    for it in shared:
        it.allocate_tensors()
        assert _same(_invoke(it, ins), _litert(m, ins))
    assert len(calls) == 2  # the same settings as the first three: recalled
    assert [r["interpreter"] for r in shared[1].placement()] == [1] * len(rows[0])
    del its[0]
    assert its[0].placement() == rows[1]  # an owner's rows stay its own


def test_a_delegate_per_interpreter_keeps_one_prepare_per_graph(fast_device):
    """A new litecl.Delegate per LiteRT Interpreter whose Prepare is Python's each time
    (kept ones dropped): each offer replaced the runtime's kept Prepare but stayed listed
    on the memo entry with its ~20 KB context key (a fresh user's 20,000 interpreters: +22 KB
    each); one per graph and settings is listed now."""
    from litecl import claims  # noqa: PLC0415

    def listed():  # every memo entry's offers (other tests of this worker list theirs too)
        return sum(len(e.tokens) for memo in list(claims._PREPARES.values()) for e in memo[-1].values()
                   if e is not None and hasattr(e, "tokens"))

    m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
    before = listed()
    for _ in range(12):
        recall.forget_all()
        d = litecl.Delegate(fast_device, quiet=True)
        make_interpreter(m, delegates=[d]).allocate_tensors()
        del d
    assert listed() - before <= 1, (before, listed())


def test_a_delegate_per_interpreter_gets_its_plans_without_the_planner(fast_device, monkeypatch):
    """A new Delegate per interpreter, the previous one gone (as litecl.Interpreter makes
    them): from the third on, the Prepare is recalled with the plans the earlier ones had
    and no partition asks the planner (a recalled Prepare whose offering Delegate was gone
    kept no plans: the planner ran at every construction, start-up 2.0x LiteRT's)."""
    import gc

    m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
    recall.forget_all()
    planned = []
    real = D._Planner.plan_for
    monkeypatch.setattr(D._Planner, "plan_for", lambda self, *a: planned.append(1) or real(self, *a))
    ins = _inputs(m, 2)
    counts = []
    for _ in range(5):
        d = litecl.Delegate(fast_device, quiet=True)
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        assert _same(_invoke(it, ins), _litert(m, ins))
        counts.append(len(planned))
        del it, d
        gc.collect()
    assert counts[-1] == counts[1], counts


def test_recalled_prepares_say_their_line_once_per_interpreter(fast_device, capfd):
    """The "Replacing N out of M node(s)" line, said by the runtime for a Prepare it
    recalls: once per new interpreter (also one at a freed interpreter's address), not
    again at a resize of the same one; the same lines as Python's Prepare says."""
    m = chain_model(["float32", "int32", ("sub", 1), ("add", 7), "float16"], (757,))
    d = litecl.Delegate(fast_device, quiet=False)
    lines = []
    for k in range(4):
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        if k == 3:
            it.resize_tensor_input(0, [100])
            it.allocate_tensors()
        lines.append([ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("INFO: Replacing")])
        del it  # the next one may take its address
    assert [len(x) for x in lines] == [1, 1, 1, 1], lines
    assert len({x[0] for x in lines}) == 1, lines
    d.quiet = True
    make_interpreter(m, delegates=[d]).allocate_tensors()
    assert "Replacing" not in capfd.readouterr().err


def test_a_recalled_prepare_that_forms_other_partitions_stays_exact(fast_device):
    """An equal context key can still partition otherwise (the key holds no subgraph
    outputs: a graph that reads a fused chain's middle tensor): the runtime makes the
    partition it did not expect without a preset, the planner plans it for its outputs
    (recall_extra, recall._extras); both graphs bit-exact, also when each comes back, and
    the second graph's rows on OpenCL."""
    from test_delegate import _two_casts  # noqa: PLC0415

    d = litecl.Delegate(fast_device, quiet=True)
    for read in (False, True, False, True, True):
        m = _two_casts(read)
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        ins = _inputs(m, int(read))
        assert _same(_invoke(it, ins), _litert(m, ins))
    info = d.graph_info()
    assert len(info) == 5 and all(g["claimed"] == info[0]["claimed"] > 0 for g in info), info
    assert all(r["placement"] == "opencl" and r["kernel"] for r in d.placement()), d.placement()


def test_a_real_model_recalled_many_times_stays_exact(fast_device):
    """MoveNet (20 partitions) constructed again and again with one delegate: every
    interpreter bit-exact, and its records those of Python's Prepare."""
    m = _shared("movenet_singlepose_lightning_int8.tflite")
    d = litecl.Delegate(fast_device, quiet=True)
    ref = make_interpreter(m)
    ref.allocate_tensors()
    ins = _inputs(m, 5)
    want = _invoke(ref, ins)
    for _ in range(4):
        it = make_interpreter(m, delegates=[d])
        it.allocate_tensors()
        assert _same(_invoke(it, ins), want)
    info = d.graph_info()
    assert len(info) == 4 and {g["partitions"] for g in info} == {20} and {g["claimed"] for g in info} == {24}
