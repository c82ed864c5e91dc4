"""The partition runner (backend/runner.py, backend/native/runner.c): partition invokes
run in C while LiteRT's tensor pointers hold, through Python again when they move, with
the same results as LiteRT on every invoke; the pyopencl path without it."""
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
from litecl import delegate as D
from litecl import runner as R
from litecl.compare import make_interpreter

from conftest import ROOT, assert_on_opencl, invoke_with, litert_outputs, same_outputs
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


def _parts(it):
    return it.delegate.partitions()


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the runner is not built (the pyopencl path is tested below)")
@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "unfused"])
def test_later_invokes_run_in_c_and_stay_exact(fast_device, fuse):
    m = _model()
    d = litecl.Delegate(fast_device, quiet=True, fuse=fuse)
    assert d.invoke_path == "native"
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    assert_on_opencl(it)
    (part,) = _parts(it)
    for k in range(5):  # new inputs every invoke: a list that ran nothing would fail here
        ins = _inputs(m, k)
        assert _same(_invoke(it, ins), _litert(m, ins)), k
        assert part.fast.armed == 1
    # the first invoke wrote the list from Python (lcl_run), the other four ran in C
    assert part.fast.direct == 4
    assert d.stats["partition_invokes"] == 5
    assert part.launches_run == 5 * len(part.plan.launches)


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_a_moved_tensor_goes_through_python_again(fast_device):
    """lcl_invoke runs the list only while every bound tensor keeps its data pointer and
    size: a different one (as after LiteRT moves it) makes delegate.py bind again."""
    m = _model()
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True)
    it.allocate_tensors()
    ins = _inputs(m, 1)
    _invoke(it, ins)
    (part,) = _parts(it)
    part.fast.checks[0].data = (part.fast.checks[0].data or 0) + 64  # LiteRT "moved" it
    ins = _inputs(m, 2)
    assert _same(_invoke(it, ins), _litert(m, ins))
    assert part.fast.direct == 0 and part.fast.armed == 1  # bound again, from Python
    ins = _inputs(m, 3)
    assert _same(_invoke(it, ins), _litert(m, ins))
    assert part.fast.direct == 1


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_resize_and_reallocate_bind_again(fast_device):
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


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_an_opencl_error_in_c_is_litecls_error_then_recovers(fast_device):
    """An OpenCL error while the list runs in C (here a local size that does not divide
    the global size: CL_INVALID_WORK_GROUP_SIZE) reaches the user as litecl's error
    naming the call; the next invoke binds again and is exact."""
    m = cast_model("float32", "int32", [1999])
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True, fuse=False)
    it.allocate_tensors()
    x = np.arange(1999, dtype=np.float32)
    _invoke(it, [x])
    (part,) = _parts(it)
    k = next(j for j in range(part.fast.n_cmds) if part.fast.cmds[j].op == R.KERNEL)
    part.fast.cmds[k].local = part.fast.cmds[k].global_ + 1
    with pytest.raises(litecl.LiteclError, match=r"clEnqueueNDRangeKernel failed \(OpenCL error -?\d+\)"):
        it.invoke()
    x = x[::-1].copy()
    assert _same(_invoke(it, [x]), _litert(m, [x]))


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_threads_share_one_delegate_in_c(fast_device):
    """Four threads, four interpreters, one Delegate: every invoke exact while the lists
    run in C concurrently (one queue, each partition its own kernels and list)."""
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
    assert len(its) == 4 and len(parts) == 4 and all(p.fast.direct == 29 for p in parts), \
        [p.fast.direct for p in parts]


@pytest.mark.parametrize("copies", [False, True], ids=["in_place", "copies"])
def test_the_pyopencl_path_is_exact(fast_device, monkeypatch, copies):
    """LITECL_NO_NATIVE_INVOKE: the same command lists through pyopencl (also what runs
    without a C compiler), in place and through device copies with staging."""
    monkeypatch.setenv("LITECL_NO_NATIVE_INVOKE", "1")
    m = _model()
    d = litecl.Delegate(fast_device, quiet=True)
    assert d.invoke_path == "python: LITECL_NO_NATIVE_INVOKE is set"
    if copies:
        d.memory = D._Memory(False, 0)
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    (part,) = _parts(it)
    assert part.fast is None
    for k in range(3):
        ins = _inputs(m, k)
        assert _same(_invoke(it, ins), _litert(m, ins)), k
    st = d.stats
    assert st["partition_invokes"] == 3
    # a GPU (no host-unified memory) copies in both cases
    assert (st["copied"], st["in_place"]) == ((0, 6) if d.memory.in_place else (6, 0))


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_staged_copies_in_c(fast_device):
    """The copy path (a discrete GPU's: device buffers, pinned staging) forced on a CPU
    device, run in C from the second invoke: host copies before the writes and after the
    wait."""
    m = _model()
    d = litecl.Delegate(fast_device, quiet=True)
    d.memory = D._Memory(False, 0)
    it = litecl.Interpreter(model_content=m, delegate=d)
    it.allocate_tensors()
    for k in range(4):
        ins = _inputs(m, k)
        assert _same(_invoke(it, ins), _litert(m, ins)), k
    (part,) = _parts(it)
    assert part.fast.direct == 3
    assert d.stats["staged"] == 8 and d.stats["copied"] == 8


_CHILD = r"""
import json, sys
import numpy as np
import litecl
from litecl import runner
d = litecl.Delegate(sys.argv[1], quiet=True)
print(json.dumps({"path": d.invoke_path}))
"""


def _child(env: dict, device: str) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD, device], env=env, capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_without_a_compiler_partitions_run_through_pyopencl(fast_device, tmp_path):
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "cache"), CC=str(tmp_path / "no-such-cc"))
    env.pop("LITECL_NO_NATIVE_INVOKE", None)
    got = _child(env, fast_device)
    assert got["path"] == f"python: no C compiler ({str(tmp_path / 'no-such-cc')!r} not found; set CC)"


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_the_built_runner_is_cached(fast_device, tmp_path):
    """Built once per machine: a second process loads it from litecl's cache (kind
    "runner") and needs no compiler."""
    cache = tmp_path / "cache"
    env = dict(os.environ, LITECL_CACHE_DIR=str(cache))
    env.pop("LITECL_NO_NATIVE_INVOKE", None)
    env.pop("CC", None)
    assert _child(env, fast_device)["path"] == "native"
    assert list((cache / "runner").rglob("*.bin"))
    # no compiler now: loaded from the cache
    assert _child(dict(env, CC=str(tmp_path / "no-such-cc")), fast_device)["path"] == "native"


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_a_build_that_does_not_load_is_not_cached(fast_device, tmp_path):
    """A compiler whose output does not load here (a cross compiler, a broken one) is named,
    nothing is cached, and the next process with the machine's compiler runs in C."""
    fake = tmp_path / "fake-cc"
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\necho junk > "$2"\n')
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    env = dict(os.environ, LITECL_CACHE_DIR=str(cache), CC=str(fake))
    env.pop("LITECL_NO_NATIVE_INVOKE", None)
    got = _child(env, fast_device)["path"]
    assert got.startswith(f"python: runner.c as built by {fake} does not load here") and "set CC" in got, got
    assert not list((cache / "runner").rglob("*.bin")) if (cache / "runner").exists() else True
    env.pop("CC")
    assert _child(env, fast_device)["path"] == "native"


def test_compiler_messages_and_a_cc_with_arguments(fast_device, tmp_path):
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "c1"), CC="/bin/false")
    env.pop("LITECL_NO_NATIVE_INVOKE", None)
    assert _child(env, fast_device)["path"] == "python: /bin/false could not build runner.c: it exited 1"
    if HAVE_CC:  # CC split as a shell would ("ccache gcc", "gcc -m64")
        cc = shutil.which(os.environ.get("CC") or "cc")
        env = dict(env, LITECL_CACHE_DIR=str(tmp_path / "c2"), CC=f"{cc} -O1")
        assert _child(env, fast_device)["path"] == "native"


_FORK = r"""
import os, sys
import numpy as np
import litecl
from litecl.compare import make_interpreter
from models.builders import cast_model
d = litecl.Delegate(sys.argv[1], quiet=True)
it = make_interpreter(cast_model("float32", "int32", [33]), delegates=[d])
it.allocate_tensors(); it.invoke(); it.invoke()   # armed: the next invoke would run in C
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
    """LiteRT's own Interpreter with the Delegate, invoked in a fork()ed child: runner.c's
    armed list is off in the child, and the invoke fails with litecl's fork message (an
    OpenCL call there never returned); the parent goes on."""
    r = subprocess.run([sys.executable, "-c", _FORK, fast_device], capture_output=True, text=True,
                       timeout=120, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                           [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "child: this process was fork()ed after" in r.stdout and "parent: invoked" in r.stdout, r.stdout


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler")
def test_invoke_path_names_partitions_that_ran_through_pyopencl(fast_device):
    """invoke_path says "native" only while every live partition's latest invoke ran in
    C: a packed int4 output (packed on the host) and ``profile`` are named."""
    d = litecl.Delegate(fast_device, quiet=True)
    it = litecl.Interpreter(model_content=cast_model("float32", "int32", [81]), delegate=d)
    it.allocate_tensors()
    _invoke(it, [np.arange(81, dtype=np.float32)])
    assert d.invoke_path == "native"
    packed = litecl.Interpreter(model_content=cast_model("float32", "int4", [81]), delegate=d)
    packed.allocate_tensors()
    _invoke(packed, [np.arange(81, dtype=np.float32) % 8])
    assert d.invoke_path == ("native; 1 of 2 partitions through pyopencl "
                             "(a packed sub-byte output packed on the host)")
    del packed
    import gc  # noqa: PLC0415

    gc.collect()
    assert d.invoke_path == "native"
    d.profile = True
    _invoke(it, [np.arange(81, dtype=np.float32)])
    assert d.invoke_path == "native; 1 of 1 partitions through pyopencl (profile is set)"
    d.profile = False
    _invoke(it, [np.arange(81, dtype=np.float32)])
    assert d.invoke_path == "native"


def test_a_failed_build_is_remembered_until_the_compiler_changes(fast_device, tmp_path):
    """A compiler that fails (here: its output does not load) runs once: the next process
    reads the remembered reason instead of running it again (a hung one cost every
    process 60 s); a changed compiler file is tried again."""
    ran = tmp_path / "ran"
    fake = tmp_path / "fake-cc"
    fake.write_text(f'#!/bin/sh\necho x >> "{ran}"\nwhile [ "$1" != "-o" ]; do shift; done\necho junk > "$2"\n')
    fake.chmod(0o755)
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path / "cache"), CC=str(fake))
    env.pop("LITECL_NO_NATIVE_INVOKE", None)
    first = _child(env, fast_device)["path"]
    assert "does not load here" in first and ran.read_text().count("x") == 1, first
    second = _child(env, fast_device)["path"]
    assert second.startswith(first) and second.endswith(
        "(remembered from an earlier process: set CC to another compiler to try again)"), second
    assert ran.read_text().count("x") == 1
    fake.write_text(fake.read_text() + "# changed\n")
    assert "does not load here" in _child(env, fast_device)["path"]
    assert ran.read_text().count("x") == 2
