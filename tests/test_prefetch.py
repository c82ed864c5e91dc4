"""The remembered runtime's library loaded beside ``import litecl`` (backend/prefetch.py,
issue 38): a fresh process whose environment matches an earlier one's loads the library
that process's default spec opened, on a thread, before anything lists the platforms;
the device then opens and runs as without it. Nothing is loaded with LITECL_NO_PREFETCH,
in another environment, for a library file that changed, or where TensorFlow (LLVM's
symbols) was imported first; a fork() waits for the load. Fresh processes, a private cache.
"""
from __future__ import annotations

import os
import shutil

import pytest

from litecl import cache

from conftest import DEVICE_STATUS, script_json

_SCRIPT = r"""
import json, os, sys
if "--tensorflow-first" in sys.argv:
    import tensorflow  # noqa: F401
import litecl
from litecl import prefetch
started = bool(prefetch._THREAD)
prefetch.wait()
hint = prefetch._HINTS.get(prefetch._alias())
with open("/proc/self/maps") as f:
    maps = f.read()
loaded = bool(hint) and os.path.realpath(hint[0]) in maps  # before anything listed the platforms
out = {"started": started, "loaded": loaded, "hint": hint}
if "--open" in sys.argv:
    import numpy as np
    import pyopencl as cl
    d = litecl.open_device()
    prg = cl.Program(d.context, "__kernel void k(__global int* a) { a[get_global_id(0)] = 5 * (int)get_global_id(0); }").build()
    buf = cl.Buffer(d.context, cl.mem_flags.WRITE_ONLY, 4 * 8)
    prg.k(d.queue, (8,), None, buf)
    got = np.empty(8, np.int32)
    cl.enqueue_copy(d.queue, got, buf)
    d.queue.finish()
    out.update(platform=d.caps.platform, kernel=got.tolist())
print(json.dumps(out))
"""

needs_intel = pytest.mark.skipif(bool(DEVICE_STATUS.get("intel")),
                                 reason=f"intel: {DEVICE_STATUS.get('intel')} (prefetch loads runtimes other "
                                        "than PoCL and Oclgrind: Intel's is the one pip installs)")


@pytest.fixture
def env(tmp_path):
    """The spec ``intel`` by LITECL_DEVICE, a private cache holding the real cache's probes."""
    root = cache.cache_root()
    if root is None:
        pytest.skip("litecl's cache is turned off (LITECL_NO_CACHE)")
    ours = tmp_path / "cache"
    ours.mkdir(mode=0o700)
    if (root / "probes").is_dir():
        shutil.copytree(root / "probes", ours / "probes")
    e = {k: v for k, v in os.environ.items() if not k.startswith("LITECL_")}
    e.update(LITECL_CACHE_DIR=str(ours), LITECL_DEVICE="intel")
    return e


def run(env, *args) -> dict:
    return script_json(_SCRIPT, env, *args)


@needs_intel
def test_the_remembered_library_loads_beside_the_import(env):
    first = run(env, "--open")  # lists every runtime, remembers Intel's and notes its library
    assert not first["started"] and first["platform"] == "Intel(R) OpenCL"
    again = run(env, "--open")
    assert again["started"] and again["loaded"], again
    assert os.path.basename(again["hint"][0]).startswith("libintelocl")
    assert again["platform"] == first["platform"] and again["kernel"] == [5 * i for i in range(8)]
    off = run(dict(env, LITECL_NO_PREFETCH="1"))
    assert not off["started"] and not off["loaded"]  # the import alone loads no runtime
    other = run(dict(env, LITECL_OTHER="1"))  # another environment: not what the first process saw
    assert not other["started"] and other["hint"] is None


@needs_intel
def test_a_changed_library_file_is_not_loaded(env):
    from litecl import prefetch  # noqa: PLC0415

    run(env, "--open")
    assert run(env)["started"]
    key = script_json("import json\nfrom litecl import prefetch\nprint(json.dumps(prefetch._KEY[0]))", env)
    old = os.environ.get("LITECL_CACHE_DIR")
    os.environ["LITECL_CACHE_DIR"] = env["LITECL_CACHE_DIR"]
    try:
        hints = cache.probe_get(prefetch._NAME, key)
        hints["intel"][4] += 1  # another mtime: another file
        cache.probe_put(prefetch._NAME, key, hints)
    finally:
        if old is None:
            os.environ.pop("LITECL_CACHE_DIR")
        else:
            os.environ["LITECL_CACHE_DIR"] = old
    assert not run(env)["started"]


@needs_intel
def test_nothing_loads_after_tensorflow(env):
    """TensorFlow exports LLVM process-wide: icd.py opens the runtimes its own way then."""
    pytest.importorskip("tensorflow")
    run(env, "--open")
    got = run(env, "--tensorflow-first", "--open")
    assert not got["started"] and got["kernel"] == [5 * i for i in range(8)]


def test_fork_waits_for_the_load():
    """A child of fork() never starts inside the dynamic linker: the parent's fork waits
    for the loading thread (a stand-in sleeping 0.4 s)."""
    script = r"""
import json, os, threading, time
from litecl import prefetch
t = threading.Thread(target=time.sleep, args=(0.4,), daemon=True)
prefetch._THREAD[:] = [t]
t.start()
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os._exit(7 if t.is_alive() else 0)
took = time.perf_counter() - t0
print(json.dumps({"took": took, "alive_at_fork": os.waitpid(pid, 0)[1] != 0}))
"""
    got = script_json(script, dict(os.environ))
    assert got["took"] >= 0.3 and not got["alive_at_fork"]


def test_a_bad_switch_is_an_error_at_the_first_listing():
    """LITECL_NO_PREFETCH is read at import (which must not fail); a value that is no
    yes/no word is the first device opening's one-line error, as for litecl's other
    switches."""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    e = dict(os.environ, LITECL_NO_PREFETCH="maybe")
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "devices"], env=e, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 2 and r.stderr.startswith("error: LITECL_NO_PREFETCH must be one of"), r.stderr
