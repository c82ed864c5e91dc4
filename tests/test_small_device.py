"""Small partitions on PoCL's basic device (device.small_device, kernels.py
SMALL_PARTITION_BYTES): which device a partition runs on follows its size, moves with a
resize, and both devices give LiteRT's results bit for bit on the edge values and tail
sizes; the basic device litecl lists for itself stays out of every listing and spec."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import litecl
from litecl import delegate as D
from litecl import device as dev_mod
from litecl import icd
from litecl import kernels as K

from conftest import DEVICE_STATUS, ROOT, invoke_with, litert_outputs, same_outputs
from models.builders import add_model, cast_model

TAILS = (0, 1, 31, 32, 33, 80, 81, 757, 1999)


def _pocl_delegate(**kw) -> litecl.Delegate:
    if DEVICE_STATUS.get("pocl"):
        pytest.skip(DEVICE_STATUS["pocl"])
    d = litecl.Delegate("pocl", quiet=True, **kw)
    if d.small_device is None:  # its reason: test_the_switches asserts it is the probe's
        pytest.skip(d.small_partitions)
    return d


def _edge_f32(n: int, seed: int) -> np.ndarray:
    edges = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-45, -1e-45, 1.17e-38, 3e9, -3e9,
                      2147483520.0, -2147483648.0, 65504.0, 65520.0, 1e-8, 0.5, -0.5, 1.5, 2.5],
                     np.float32)
    x = (np.random.default_rng(seed).standard_normal(n) * 1e6).astype(np.float32)
    x[: min(n, edges.size)] = edges[: min(n, edges.size)]
    return x


def test_the_partition_follows_its_size_across_resizes():
    """757 elements run on basic; a resize past SMALL_PARTITION_BYTES moves the partition
    to the pthread device (kernels and buffers of the other context released), and back;
    exact at every step, later invokes in C where a compiler exists."""
    d = _pocl_delegate()
    m = cast_model("float32", "int32", [757])
    it = litecl.Interpreter(model_content=m, delegate=d)
    big = K.SMALL_PARTITION_BYTES // 8 + 1001  # float32 in + int32 out: 8 bytes an element
    seen = []
    for n in (757, big, 81, big, 0, 33):
        it.resize_tensor_input(it.get_input_details()[0]["index"], [n])
        it.allocate_tensors()
        for seed in range(3):
            x = _edge_f32(n, seed)
            assert same_outputs(invoke_with(it, [x]), litert_outputs(m, [x])), (n, seed)
        (part,) = d.partitions()
        seen.append(part.dev)
        want = d.device if n == big else d.small_device
        assert part.dev is want, (n, part.dev)
        assert [r["device"] for r in it.placement()] == [want.caps.name]  # which device, said
        assert part._c[1].device == d._device_index(want)  # the plan the C runtime runs names it
    assert seen[0] is d.small_device and seen[1] is d.device


@pytest.mark.parametrize("n", TAILS)
@pytest.mark.parametrize("threads", [False, True], ids=["basic", "pthread"])
def test_edge_values_and_tails_on_both_devices(n, threads, monkeypatch):
    """CAST float32 -> int32 / float16 / bool and an int8 quantized ADD at every tail size,
    on PoCL's basic device (the default for them) and forced onto its pthread device
    (SMALL_PARTITION_BYTES below every partition): each bit-exact with LiteRT."""
    d = _pocl_delegate()
    if threads:
        monkeypatch.setattr(K, "SMALL_PARTITION_BYTES", -1)
    want = d.device if threads else d.small_device
    models = [(cast_model("float32", dst, [n]), [_edge_f32(n, 7)]) for dst in ("int32", "float16", "bool")]
    rng = np.random.default_rng(n)
    q = ((0.05, 3), (0.07, -9), (0.11, 1))
    models.append((add_model("int8", [n], [n], quant=q),
                   [rng.integers(-128, 128, n).astype(np.int8) for _ in range(2)]))
    for m, xs in models:
        it = litecl.Interpreter(model_content=m, delegate=d)
        it.allocate_tensors()
        for _ in range(2):
            assert same_outputs(invoke_with(it, xs), litert_outputs(m, xs)), n
        parts = [p for p in d.partitions() if p.plan is not None]
        assert parts or n == 0
        assert all(p.dev is want for p in parts)


def test_the_basic_device_litecl_lists_stays_hidden():
    """litecl's own basic device is in no listing and no spec: ``pocl``, ``cpu`` and
    ``auto`` keep PoCL's pthread device."""
    if not icd._POCL_BASIC_ADDED:
        pytest.skip("litecl did not list PoCL's basic device in this process")
    names = [d.name for d in dev_mod._all_devices()]
    assert not any(dev_mod._pocl_kind("Portable Computing Language", n) == "single" for n in names)
    p = dev_mod.open_device("pocl")
    assert dev_mod._pocl_kind(p.caps.platform, p.caps.name) == "threads"
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "devices"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "basic" not in r.stdout.lower() and "cpu-minimal" not in r.stdout.lower()


def test_pocl_kind_reads_pocl_3_and_5_names():
    k = dev_mod._pocl_kind
    pocl = "Portable Computing Language"
    assert k(pocl, "pthread-skylake-avx512-Intel(R) Xeon(R) Processor") == "threads"
    assert k(pocl, "basic-Intel(R) Xeon(R) Processor") == "single"
    assert k(pocl, "cpu-skylake-avx512-Intel(R) Xeon(R) Processor") == "threads"  # PoCL 5.0
    assert k(pocl, "cpu-minimal-skylake-avx512-Intel(R) Xeon(R) Processor") == "single"
    assert k("Intel(R) OpenCL", "basic-x") == "" and k(pocl, "NVIDIA H200") == ""


_CHILD = r"""
import json, os, sys
import litecl
from litecl import device, icd
try:
    import pyopencl as cl
    d = litecl.Delegate("pocl", quiet=True)
    a = litecl.Delegate("auto", quiet=True)
    basic = [x for p in cl.get_platforms() for x in p.get_devices() if device._is_pocl_basic(x)]
    print(json.dumps({"small": d.small_device is not None, "added": bool(icd._POCL_BASIC_ADDED),
                      "env": os.environ.get("POCL_DEVICES"), "line": d.small_partitions,
                      "pocl": d.device.caps.name, "auto": a.device.caps.name,
                      "probe": device.probe_compiler(basic[0]) if basic else None}))
except litecl.LiteclError as e:
    print(json.dumps({"error": str(e)}))
"""


def _child(**env) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("POCL_DEVICES", "LITECL_NO_POCL_BASIC")}
    e.update(env)
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env=e)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _small_as_probed(got: dict) -> None:
    """The small device is there exactly where PoCL's basic device passes litecl's compiler
    probe (pip's PoCL 3.0 fails it on AVX-512 hosts); where it fails, small_partitions
    says so with the probe's words."""
    assert got["probe"] is not None, got  # listed
    if got["probe"] == "":
        assert got["small"] and "MiB run on" in got["line"], got
    else:
        assert not got["small"], got
        assert got["line"] == f"no small-partition device: PoCL's basic device fails litecl's compiler probe: {got['probe']}"


def test_the_switches():
    """LITECL_NO_POCL_BASIC=1, or a POCL_DEVICES the user set, leaves PoCL's devices
    alone (no small device unless the user listed basic, and then ``pocl`` is still the
    pthread device); where basic is listed, the small device follows its probe's verdict;
    a value of no yes/no word is litecl's one-line error naming the variable."""
    if DEVICE_STATUS.get("pocl"):
        pytest.skip(DEVICE_STATUS["pocl"])
    if any(os.path.exists(p) for p in dev_mod._GPU_NODES):
        pytest.skip("a GPU device node exists: litecl leaves POCL_DEVICES alone here")
    on = _child()
    # set for PoCL's first listing only: a child process of this one inherits no POCL_DEVICES
    assert on["added"] and on["env"] is None
    _small_as_probed(on)
    off = _child(LITECL_NO_POCL_BASIC="1")
    assert not off["small"] and not off["added"] and off["env"] is None
    assert off["line"] == "no small-partition device: LITECL_NO_POCL_BASIC is on"
    user = _child(POCL_DEVICES="pthread")
    assert not user["small"] and not user["added"] and user["env"] == "pthread"
    assert user["line"] == "no small-partition device: POCL_DEVICES='pthread' does not list basic"
    # the user's own list with both (PoCL lists basic first): pocl is the pthread device,
    # basic its small device where it passes the probe, both visible
    both = _child(POCL_DEVICES="basic pthread")
    assert not both["added"] and both["env"] == "basic pthread"
    assert dev_mod._pocl_kind("Portable Computing Language", both["pocl"]) == "threads", both
    # a trial's auto took basic, one thread for every partition (auto is Intel's where it is installed)
    assert dev_mod._pocl_kind("Portable Computing Language", both["auto"]) != "single", both
    _small_as_probed(both)
    if both["small"]:
        assert "MiB run on basic" in both["line"] or "MiB run on cpu-minimal" in both["line"]
    bad = _child(LITECL_NO_POCL_BASIC="maybe")
    assert "LITECL_NO_POCL_BASIC" in bad["error"] and "maybe" in bad["error"]


_THREADS = r"""
import sys, threading
import numpy as np
import litecl
from litecl.compare import make_interpreter
from models.builders import chain_model, multi_op_model
models = [multi_op_model("alternating", (3, 50)),
          chain_model(["int64", "float32", ("add", 0.5), "float16", "int8"], (7, 31)),
          chain_model(["float32", "int32", ("add", 3), "float32"], (600000,))]  # 7.2 MB: pthread
d = litecl.Delegate("pocl", quiet=True)
done, bad, alive = [0] * 6, [], []
def work(k):
    m = models[k % 3]
    it = litecl.Interpreter(model_content=m, delegate=d)
    alive.append(it)
    it.allocate_tensors()
    ref = make_interpreter(m)
    ref.allocate_tensors()
    det = it.get_input_details()[0]
    for r in range(int(sys.argv[1])):
        x = (np.random.default_rng(r).standard_normal(det["shape"]) * 100).astype(det["dtype"])
        it.set_tensor(det["index"], x)
        it.invoke()
        if r % 50 == 0:
            ref.set_tensor(ref.get_input_details()[0]["index"], x)
            ref.invoke()
            a = it.get_tensor(it.get_output_details()[0]["index"])
            b = ref.get_tensor(ref.get_output_details()[0]["index"])
            if a.tobytes() != b.tobytes():
                bad.append((k, r))
        done[k] += 1
ts = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(6)]
[t.start() for t in ts]
[t.join(100) for t in ts]
devs = sorted({p.dev.caps.name.split("-")[0] for p in d.partitions()})
print(done, bad, devs, flush=True)
"""


def test_threads_share_the_basic_device_without_deadlock():
    """Six threads invoking interpreters of one Delegate, most partitions on PoCL's basic
    device and one on pthread: every invoke returns and results stay exact. Through
    the C runtime, 4 threads on basic deadlocked inside PoCL within a few hundred
    invokes (measured); every invoke on it now runs under the device's lock
    (litecl_delegate.c kernel_invoke: Device.one_thread). In a child process so that a
    deadlock fails instead of hanging."""
    _pocl_delegate()
    e = {k: v for k, v in os.environ.items() if k not in ("POCL_DEVICES", "LITECL_NO_POCL_BASIC")}
    e.update(PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    r = subprocess.run([sys.executable, "-c", _THREADS, "400"], capture_output=True, text=True,
                       timeout=150, cwd=ROOT, env=e)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[400, 400, 400, 400, 400, 400] [] ['basic', 'pthread']", r.stdout
