"""The self-test of each kernel family on each driver (backend/selftest.py), the LiteRT
tables it compares with (ops/selftest_<arch>.json), and the driver workarounds it found on
Mesa's rusticl."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import litecl
from litecl import selftest as S
from litecl.compare import make_interpreter

from conftest import DEVICE_STATUS, ROOT, device_params, invoke_with, litert_outputs, same_outputs
from models.builders import chain_model

ALL = ["pocl", "intel", "oclgrind", "rusticl", "nvidia"]


def test_tables_are_litert_s_bits_on_this_host():
    """models/selftest_tables.py regenerated here gives the committed table of this
    architecture (the aarch64 one is checked in the arm64 userland: tests/test_arm64.py)."""
    r = subprocess.run([sys.executable, "-m", "models.selftest_tables", "--check"], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_family_has_litert_bits_in_every_table():
    """Both architectures' tables hold every family litecl can place (FAMILIES), each
    with the bytes of its canonical output; what they hold differently is float ADD only."""
    names = {S.family_name(f) for f in S.FAMILIES}
    x86, arm = S.table("x86_64"), S.table("aarch64")
    assert set(x86) == names == set(arm)
    differ = sorted(k for k in names if x86[k] != arm[k])
    assert differ and all(k.startswith(("ADD float32", "ADD float16")) for k in differ), differ
    for f in S.FAMILIES:
        *_, out_dt, shape = S.canonical_kernel(f, litecl.open_device(_any()).caps)
        assert len(x86[S.family_name(f)]) == 2 * out_dt.itemsize * int(np.prod(shape)), S.family_name(f)


def test_every_node_family_is_in_the_tables():
    """The family a real node gets (family_of: quantization path, broadcast kind, reference)
    is one the tables hold, for CASTs, plain, quantized (general and power-of-two) ADDs."""
    from litecl.model import load_model
    from models.builders import add_model, cast_model

    caps = litecl.open_device(_any()).caps
    models = [cast_model("float32", "int16", [5]), add_model("float32", [2, 3], [3], activation="RELU"),
              add_model("int8", [4], [], quant=((0.05, 3), (0.07, -9), (0.11, 1))),
              add_model("int16", [4], [4], quant=((2.0 ** -10, 0), (2.0 ** -12, 0), (2.0 ** -10, 0)),
                        pot_scale_int16=True)]
    names = set(S.table(caps.arch))
    for m in models:
        sg = load_model(model_content=m).subgraphs[0]
        n = sg.nodes[0]
        f = S.family_of(n, sg, [sg.tensors[t].shape for t in n.inputs], caps)
        assert S.family_name(f) in names, S.family_name(f)


def _any() -> str:
    return next(s for s in ("pocl", "intel", "oclgrind") if not DEVICE_STATUS.get(s))


@pytest.mark.parametrize("spec", device_params(ALL))
def test_every_family_passes_on_every_device(spec):
    """Every family's canonical kernel gives LiteRT's bits on every device here (rusticl
    too, after the generator's workarounds below), so no node is refused by the check."""
    d = litecl.open_device(spec)
    bad = [(n, v) for n, v in S.check_all(d) if v]
    assert not bad, bad[:10]


# Mesa's rusticl 22.3 (llvmpipe): the defects the self-test found, and the generator's
# workaround of each. Each test shows the old text computes wrong there, so the
# workaround is what makes the family pass.
def _rusticl():
    if DEVICE_STATUS.get("rusticl"):
        pytest.skip(DEVICE_STATUS["rusticl"])
    return litecl.open_device("rusticl")


def _run_text(d, f, source) -> int:
    """Mismatches of ``source`` (family ``f``'s canonical kernel, edited) with LiteRT's bits."""
    import pyopencl as cl

    from litecl.compare import mismatches
    from litecl.kernels import build_program, launch_geometry

    _, name, n, tile, args, out_dt, shape = S.canonical_kernel(f, d.caps)
    want = S._expected(f, d.caps.arch, out_dt, shape)
    ins = S.canonical_inputs(f)
    bufs = [cl.Buffer(d.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR, hostbuf=x) for x in ins]
    got = np.zeros(shape, out_dt.np)
    out = cl.Buffer(d.context, cl.mem_flags.READ_WRITE, got.nbytes)
    k = cl.Kernel(build_program(d, source), name)
    t, g, lsz = launch_geometry(d.caps, n, tile)
    k.set_args(*bufs, out, *(np.uint32(v) for v in t.kernel_args()), *(np.int32(v) for _, v in args))
    cl.wait_for_events([cl.enqueue_nd_range_kernel(d.queue, k, g, lsz), cl.enqueue_copy(d.queue, got, out, is_blocking=False)])
    return int(mismatches(got, want).sum())


def test_rusticl_sign_extended_long_compared_with_zero():
    """rusticl compares a long sign-extended from an int with 0 as if unsigned: the soft
    float64 conversion's ``v < 0L`` made int32 -1 into +1.0. It reads the sign bit now."""
    d = _rusticl()
    f = S.Family("CAST", ("int32", "float64"))
    src = S.canonical_kernel(f, d.caps)[0]
    assert "as_ulong(v) & 0x8000000000000000UL" in src
    assert _run_text(d, f, src) == 0
    old = src.replace("as_ulong(v) & 0x8000000000000000UL", "v < 0L ? 0x8000000000000000UL : 0UL")
    assert _run_text(d, f, old) > 0


def test_rusticl_64_bit_select_by_a_sign_extended_mask():
    """rusticl's select of long lanes by a mask sign-extended from an int comparison kept
    the other operand (float32 -> int64: NaN and out-of-range lanes); a bitwise blend now."""
    d = _rusticl()
    f = S.Family("CAST", ("float32", "int64"))
    src = S.canonical_kernel(f, d.caps)[0]
    assert _run_text(d, f, src) == 0
    import re

    old = re.sub(r"\(\((convert_long\d+_rtz\(clamp\([^;]*?\)\))\) \^ \(\(\(\1\) \^ \(([^;]*?)\)\) & (convert_long\d+\(.*?\))\)\)",
                 r"select(\1, \2, \3)", src)
    assert old != src, src
    assert _run_text(d, f, old) > 0


def test_a_wrong_family_stays_on_litert_and_the_model_stays_exact(tmp_path):
    """With one family made wrong (the test-only fault switch), its node stays on LiteRT
    with the self-test's reason, the other nodes on OpenCL, and the model bit-exact with
    LiteRT; with the check skipped the same kernels give wrong bits (so the check is what
    keeps it exact)."""
    script = r"""
import json, sys
import numpy as np
import litecl
from litecl import selftest
from models.builders import chain_model
from conftest import invoke_with, litert_outputs, same_outputs
m = chain_model(["float32", "int16", "float32", "int32"], (2001,))
x = [(np.random.default_rng(1).standard_normal(2001) * 1e5).astype(np.float32)]
if sys.argv[2] == "skip":
    selftest.check = lambda device, f: ""
it = litecl.Interpreter(model_content=m, device=sys.argv[1], quiet=True)
it.allocate_tensors()
print(json.dumps({"rows": [[r["op"], r["placement"], r["reason"]] for r in it.placement()],
                  "exact": same_outputs(invoke_with(it, x), litert_outputs(m, x))}))
"""
    spec = _any()
    env = dict(os.environ, LITECL_TEST_WRONG_FAMILY="CAST float32->int16", LITECL_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    out = {}
    for mode in ("check", "skip"):  # a cache each: "skip" is another litecl (the Prepare's entry keeps reasons)
        env["LITECL_CACHE_DIR"] = str(tmp_path / mode)
        r = subprocess.run([sys.executable, "-c", script, spec, mode], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        out[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    rows = out["check"]["rows"]
    assert rows[0][:2] == ["CAST", "litert"] and [r[1] for r in rows[1:]] == ["opencl", "opencl"], rows
    assert rows[0][2].startswith("this device computes CAST float32->int16 wrong: ") and "of 77 edge values" in rows[0][2]
    assert out["check"]["exact"] is True
    assert [r[1] for r in out["skip"]["rows"]] == ["opencl"] * 3 and out["skip"]["exact"] is False


def test_verdicts_are_cached_per_device_and_cost_little(tmp_path):
    """The first check of a family builds and runs its canonical kernel once; a later
    process reads the verdict from litecl's cache and runs nothing (numbers printed)."""
    script = r"""
import json, sys, time
import litecl
from litecl import selftest
d = litecl.open_device(sys.argv[1])
f = selftest.Family("ADD", ("float32",), "RELU6", "same", "builtin")
runs = []
real = selftest.run
selftest.run = lambda dev, fam: runs.append(fam) or real(dev, fam)
t = time.perf_counter(); v = selftest.check(d, f); first = time.perf_counter() - t
t = time.perf_counter(); selftest.check(d, f); again = time.perf_counter() - t
print(json.dumps({"verdict": v, "runs": len(runs), "first_ms": first * 1e3, "again_us": again * 1e6}))
"""
    env = dict(os.environ, LITECL_CACHE_DIR=str(tmp_path))
    got = [json.loads(subprocess.run([sys.executable, "-c", script, _any()], env=env, capture_output=True,
                                     text=True, timeout=300, check=True).stdout.strip().splitlines()[-1])
           for _ in range(2)]
    print(got)
    assert got[0]["verdict"] == "" and got[0]["runs"] == 1 and got[1]["runs"] == 0
    assert got[1]["again_us"] < 100


def test_a_refusal_is_run_again_before_it_is_kept(tmp_path, monkeypatch):
    """One bad run ("computes ... wrong") was kept on disk and refused the family in every
    later process (PoCL's basic device, CAST int64->float32, among the suite's concurrent
    tests; a fresh process ran it right): a refusal is confirmed by a second run first."""
    monkeypatch.setenv("LITECL_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LITECL_NO_CACHE", raising=False)
    d = litecl.open_device(_any())
    f = S.Family("ADD", ("float32",), "RELU", "same", "builtin")
    answers = ["this device computes ADD wrong: 76 of 77 edge values", ""]
    monkeypatch.setattr(S, "run", lambda dev, fam: answers.pop(0))
    monkeypatch.setattr(S, "_VERDICTS", {})
    assert S.check(d, f) == "" and answers == []
    monkeypatch.setattr(S, "_VERDICTS", {})  # a later process: the verdict kept is the second run's
    monkeypatch.setattr(S, "run", lambda dev, fam: pytest.fail("ran again"))
    assert S.check(d, f) == ""
    answers = ["wrong once", "wrong twice"]
    monkeypatch.setattr(S, "run", lambda dev, fam: answers.pop(0))
    g = S.Family("ADD", ("float32",), "RELU6", "same", "builtin")
    assert S.check(d, g) == "wrong twice" and answers == []


def test_devices_check_prints_every_family_on_every_device():
    """``litecl devices --check``: each device's families in a child process (a crash is
    reported, not fatal), one row per device, and the families that fail by name."""
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "devices", "--check", "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=1200)
    rows = json.loads(r.stdout)
    assert rows and all({"spec", "device", "checked", "failed", "error"} <= set(row) for row in rows)
    usable = [row for row in rows if not row["error"]]
    assert usable and all(row["checked"] == len(S.FAMILIES) and row["failed"] == {} for row in usable), rows
    # exit 1 where a device builds no kernel (pip's PoCL 3.0 on AMD Zen 4), else 0
    assert r.returncode == int(any(row["error"] or row["failed"] for row in rows)), r.stderr


def test_devices_check_reports_a_crashing_runtime(tmp_path):
    """A runtime that dies during the check (injected: the child kills itself) is a row
    with the signal, and the other devices are still checked."""
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(
        "import os, signal\nimport litecl.selftest as s\n"
        "if os.environ.get('CRASH_CHECK'):\n"
        "    s.check_all = lambda d: (signal.signal(signal.SIGSEGV, signal.SIG_DFL), os.kill(os.getpid(), signal.SIGSEGV))\n")
    env = dict(os.environ, CRASH_CHECK="1",
               PYTHONPATH=os.pathsep.join([str(inject), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "devices", "--check", "--json"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr  # a check that did not finish is no pass
    rows = [row for row in json.loads(r.stdout) if not row["error"].startswith("builds no kernel")]
    assert rows and all(row["error"] == "the runtime crashed during the check (SIGSEGV)" for row in rows), rows


def test_devices_check_runs_from_a_folder_holding_a_litecl_folder(tmp_path):
    """The console script run from a folder that holds a folder named litecl (a checkout,
    seen from the folder above it): each device's child imports the installed litecl, not
    that folder (every check failed with "cannot import name 'open_device'" and exited 0)."""
    from pathlib import Path

    script = Path(sys.executable).with_name("litecl")
    if not script.exists():
        pytest.skip(f"no litecl console script beside {sys.executable} (not an installed venv)")
    (tmp_path / "litecl").mkdir()
    r = subprocess.run([str(script), "devices", "--check", "--json"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=1200)
    rows = json.loads(r.stdout)
    assert rows and not any("cannot import" in row["error"] for row in rows), rows
    assert any(row["checked"] == len(S.FAMILIES) for row in rows), rows
