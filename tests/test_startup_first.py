"""The first Interpreter of a process (issue 22): the remembered runtime (device.py).

A spec naming one runtime (pocl, intel, oclgrind, nvidia) is remembered in litecl's cache
with the ICD library that served it; the next process gives the ICD loader that library
alone, and finds the others itself when it needs them. These tests run fresh processes
(the loader reads its vendors once per process) with a private cache folder holding a
copy of the real cache's probe results (so no compiler probe runs again), and check that
the remembered device is the one a full listing selects, that every other device stays
reachable in that process (also in a child of fork()), and that a memory that no longer
fits (another device, changed library files, another environment) is not trusted.
"""
from __future__ import annotations

import os
import shutil

import pyopencl as cl
import pytest

from litecl import cache
from litecl import device as D

from conftest import DEVICE_STATUS, script_json

_SCRIPT = r"""
import json, os, sys
import numpy as np
import litecl
from litecl import cache, device as D, remembered
import pyopencl as cl

args = sys.argv[1:]
key = D._listing_key(D._loader_icds())
if "--forget" in args:  # no memory for this environment
    p = cache._entry("probes", key, D._MEMORY)
    if p.exists():
        p.unlink()
record = cache.probe_get(D._MEMORY, key)
if "--other-device" in args:  # a memory naming a device the library does not have
    record["picks"]["pocl"]["sig"][1] = "no such device"
    cache.probe_put(D._MEMORY, key, record)
if "--changed-file" in args:  # a library file that is no longer the one remembered
    record["files"][0][3] += 1
    cache.probe_put(D._MEMORY, key, record)

def run(d):
    src = "__kernel void k(__global int* a) { a[get_global_id(0)] = 3 * (int)get_global_id(0); }"
    import pyopencl as cl
    prg = cl.Program(d.context, src).build(cache_dir=False)
    buf = cl.Buffer(d.context, cl.mem_flags.WRITE_ONLY, 4 * 8)
    prg.k(d.queue, (8,), None, buf)
    out = np.empty(8, np.int32)
    cl.enqueue_copy(d.queue, out, buf)
    d.queue.finish()
    return out.tolist()

out = {"opened": {}}
for spec in [a for a in args if not a.startswith("--")]:
    d = litecl.open_device(spec)
    out["opened"][spec] = [d.caps.platform, d.caps.name, d.caps.driver, run(d)]
out["restricted"] = bool(remembered._RESTRICTED)
if "--is-gpu" in args:
    out["is_gpu"] = litecl.open_device("auto").caps.is_gpu
out["raw"] = [p.name for p in cl.get_platforms()]
out["list"] = [[c.platform, c.name, c.driver] for c in litecl.list_devices()]
if "--fork" in args:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            run(litecl.open_device("intel"))
            run(litecl.open_device("oclgrind"))
            try:
                litecl.open_device("pocl")
                code = 3  # opened before fork(): must be refused
            except litecl.LiteclError:
                pass
        except BaseException:
            code = 2
        os._exit(code)
    out["child"] = os.waitpid(pid, 0)[1]
out["record"] = cache.probe_get(D._MEMORY, key)
print(json.dumps(out))
"""

_NEEDED = ("pocl", "intel", "oclgrind")
needs_runtimes = pytest.mark.skipif(
    any(DEVICE_STATUS.get(s) for s in _NEEDED),
    reason="; ".join(f"{s}: {DEVICE_STATUS[s]}" for s in _NEEDED if DEVICE_STATUS.get(s))
    or "needs PoCL, Intel and Oclgrind")
KERNEL_OUT = [3 * i for i in range(8)]


@pytest.fixture
def env(tmp_path):
    """A private cache folder holding the real cache's probe results."""
    root = cache.cache_root()
    if root is None:
        pytest.skip("litecl's cache is turned off (LITECL_NO_CACHE)")
    ours = tmp_path / "cache"
    ours.mkdir(mode=0o700)
    if (root / "probes").is_dir():
        shutil.copytree(root / "probes", ours / "probes")
    e = {k: v for k, v in os.environ.items() if k not in ("LITECL_DEVICE", "LITECL_NO_CACHE")}
    e["LITECL_CACHE_DIR"] = str(ours)
    return e


def first(env, *args) -> dict:
    return script_json(_SCRIPT, env, *args)


def test_discover_lists_what_the_loader_lists():
    """_discover, litecl's own enumeration, gives this process's loader list (conftest
    listed every device through the loader), platform for platform and in order."""
    libs = D._loader_icds()
    assert libs, "no ICD library found"
    flat, per_lib = D._discover(libs)
    assert flat == [p.int_ptr for p in cl.get_platforms()]
    assert sorted(flat) == sorted(p for ps in per_lib if ps for p in ps)


@needs_runtimes
def test_remembered_runtime_is_listed_alone_and_the_others_stay_reachable(env):
    full = first(env, "--forget", "pocl")
    assert not full["restricted"]
    assert full["record"]["picks"]["pocl"]["sig"][:2] == full["opened"]["pocl"][:2]
    again = first(env, "pocl", "intel", "oclgrind", "auto", "cpu")
    assert again["restricted"]  # the loader was given the remembered library alone
    assert again["opened"]["pocl"] == full["opened"]["pocl"]  # the device a full listing selects
    for spec in _NEEDED:
        assert again["opened"][spec][3] == KERNEL_OUT, spec
    assert again["opened"]["intel"][0] == "Intel(R) OpenCL"
    assert again["opened"]["oclgrind"][0] == "Oclgrind"
    assert again["list"] == full["list"]  # litecl's listing: every device, the loader's order
    # the documented side effect: pyopencl's own listing holds the remembered runtime only
    assert set(again["raw"]) == {"Portable Computing Language"}
    # what a process without the memory opens for the other specs
    plain = first(env, "--forget", "intel", "oclgrind", "auto", "cpu")
    for spec in ("intel", "oclgrind", "auto", "cpu"):
        assert again["opened"][spec] == plain["opened"][spec], spec


@needs_runtimes
def test_child_of_fork_reaches_the_other_runtimes(env):
    first(env, "--forget", "pocl")
    out = first(env, "pocl", "--fork")
    assert out["restricted"]
    assert out["child"] == 0  # Intel and Oclgrind opened and ran there; PoCL refused


@needs_runtimes
def test_memory_naming_another_device_falls_back_to_the_full_listing(env):
    full = first(env, "--forget", "pocl")
    stale = first(env, "pocl", "--other-device")
    assert stale["opened"]["pocl"] == full["opened"]["pocl"]
    assert stale["list"] == full["list"]
    assert "pocl" not in stale["record"]["picks"]  # forgotten
    relisted = first(env, "pocl")
    assert not relisted["restricted"] and relisted["opened"]["pocl"] == full["opened"]["pocl"]
    assert relisted["record"]["picks"]["pocl"] == full["record"]["picks"]["pocl"]
    assert first(env, "pocl")["restricted"]


@needs_runtimes
def test_changed_library_file_is_not_trusted(env):
    full = first(env, "--forget", "pocl")
    changed = first(env, "pocl", "--changed-file")
    assert not changed["restricted"]  # a full listing, which records the files again
    assert changed["opened"]["pocl"] == full["opened"]["pocl"]
    assert changed["record"]["files"] == full["record"]["files"]
    assert first(env, "pocl")["restricted"]


@needs_runtimes
def test_listing_environment_is_part_of_the_key(env):
    first(env, "--forget", "pocl")
    assert first(env, "pocl")["restricted"]
    other = dict(env, POCL_LITECL_TEST_UNUSED="1")  # a runtime's variable: another key
    out = first(other, "pocl")
    assert not out["restricted"]
    assert first(other, "pocl")["restricted"]


def test_no_cache_means_no_memory(env):
    out = first(dict(env, LITECL_NO_CACHE="1"), "pocl" if not DEVICE_STATUS.get("pocl") else "auto")
    assert not out["restricted"] and out["record"] is None


def test_auto_pick_is_remembered_like_an_alias(env):
    """The default spec (auto) and gpu/cpu are remembered as the aliases are: the next
    process lists the picked runtime alone and opens the device a full listing picks,
    every other device still listed; an Oclgrind fallback is never remembered (its
    warning names the other devices, so it needs the full listing)."""
    full = first(env, "--forget", "auto")
    assert not full["restricted"]
    again = first(env, "auto")
    assert again["opened"]["auto"] == full["opened"]["auto"]
    assert again["opened"]["auto"][3] == KERNEL_OUT
    assert again["list"] == full["list"]
    if full["opened"]["auto"][0] == "Oclgrind":
        assert not again["restricted"] and "auto" not in (again["record"] or {}).get("picks", {})
    else:
        assert again["restricted"]
        assert set(again["raw"]) == {full["opened"]["auto"][0]}
    kind = "gpu" if first(env, "--forget", "--is-gpu", "auto")["is_gpu"] else "cpu"  # a kind this machine has
    typed = first(env, "--forget", kind)
    assert first(env, kind)["opened"][kind] == typed["opened"][kind]
    # LITECL_FULL_LISTING: the loader lists every runtime (an app's own pyopencl sees them all)
    full_env = dict(env, LITECL_FULL_LISTING="1")
    first(full_env, "auto")
    whole = first(full_env, "auto")
    assert not whole["restricted"] and len(whole["raw"]) == len(full["raw"])
    assert whole["opened"]["auto"] == full["opened"]["auto"]
