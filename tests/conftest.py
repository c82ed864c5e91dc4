"""Shared fixtures: the OpenCL devices this machine offers, real models, the builders."""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # models/ (builders) is not an installed package
    sys.path.insert(0, str(ROOT))

# Mesa's rusticl lists llvmpipe (its CPU driver, the stand-in for Mesa's GPU drivers) only
# where RUSTICL_ENABLE names it: set before any OpenCL call, where the test leg did not
os.environ.setdefault("RUSTICL_ENABLE", "llvmpipe")

import litecl  # noqa: E402,F401  (wires the Intel ICD before pyopencl loads)
from litecl.device import _all_devices, probe_compiler  # noqa: E402

SHARED_MODELS = Path(os.environ.get("LITECL_SHARED_MODELS", ROOT.parent / "shared" / "models"))

#: (spec, human name) of each platform litecl knows how to reach.
KNOWN = [("pocl", "Portable Computing Language"), ("intel", "Intel(R) OpenCL"),
         ("oclgrind", "Oclgrind"), ("nvidia", "NVIDIA CUDA"), ("rusticl", "rusticl")]

#: The real devices device tests run on (each skipped with its reason when unusable).
REAL_DEVICES = ["pocl", "intel", "nvidia", "rusticl"]


def _device_status() -> dict[str, str]:
    """spec -> '' when usable, else why not (named in skip reasons)."""
    out = {}
    devs = _all_devices()
    for spec, name in KNOWN:
        found = [d for d in devs if name.lower() in d.platform.name.lower()]
        if not found:
            out[spec] = f"no {name} platform installed"
        else:
            # two installs of one runtime (PoCL from PyPI and from the OS): usable when
            # any builds kernels, as open_device takes the first that does
            errs = [probe_compiler(d) for d in found]
            out[spec] = "" if "" in errs else f"{name} cannot build kernels here: {errs[0]}"
    return out


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (pyproject addopts): a worker per core this process may use, at most 4 and
    one per 3 GiB of memory (a worker imports TensorFlow, LiteRT and every OpenCL runtime;
    Ray's test starts a cluster beside them)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        gib = 3.0
    return max(1, min(cores, 4, int(gib // 3)))


DEVICE_STATUS = _device_status()


def device_params(specs, profiles=("",)):
    """pytest params over device specs x profiles, skipping unusable devices with reason."""
    out = []
    for spec in specs:
        for prof in profiles:
            full = spec + (f":profile={prof}" if prof else "")
            marks = [pytest.mark.skip(reason=DEVICE_STATUS[spec])] if DEVICE_STATUS.get(spec) else []
            out.append(pytest.param(full, id=full, marks=marks))
    return out


def any_fast_device() -> str:
    for s in ("nvidia", "pocl", "intel"):
        if not DEVICE_STATUS.get(s):
            return s
    pytest.skip("no fast OpenCL device (PoCL or Intel) can build kernels here: "
                + "; ".join(f"{k}: {v}" for k, v in DEVICE_STATUS.items()))


def any_cpu_device() -> str:
    """A usable CPU device's spec (PoCL, else Intel): for tests of what litecl does only on
    CPU devices (in-place memory, its measurement), where the fast device may be a GPU."""
    for s in ("pocl", "intel"):
        if not DEVICE_STATUS.get(s):
            return s
    pytest.skip("no CPU OpenCL device (PoCL or Intel) can build kernels here: "
                + "; ".join(f"{k}: {v}" for k, v in DEVICE_STATUS.items()))


@pytest.fixture(scope="session")
def fast_device() -> str:
    """A spec of a usable fast CPU device (PoCL, else Intel)."""
    return any_fast_device()


@pytest.fixture(scope="session")
def shared_models() -> Path:
    if not SHARED_MODELS.is_dir():
        pytest.skip(f"real models folder {SHARED_MODELS} is absent (CI lays ../shared beside the checkout)")
    return SHARED_MODELS


def shared_model(name: str) -> Path:
    p = SHARED_MODELS / name
    if not p.exists():
        pytest.skip(f"real model {p} is absent")
    return p


@functools.lru_cache(maxsize=None)
def tf_model(name: str) -> bytes:
    """Build a models/tf_models.py model in a subprocess (TensorFlow and LLVM-based OpenCL
    ICDs crash when loaded in one process). Skips when TensorFlow is not installed."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (the test extra has it)")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "models.tf_models", name], capture_output=True,
                       env=env, cwd=ROOT, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"building {name} failed: {r.stderr.decode()[-2000:]}")
    return r.stdout


def run_one_input(model: bytes, device: str, x, **interp_kw):
    """Run a one-input model on litecl and on LiteRT's builtin kernels (no XNNPACK) with
    input ``x``; returns (litecl Interpreter, litecl's first output, LiteRT's)."""
    import litecl
    from litecl.compare import make_interpreter

    it = litecl.Interpreter(model_content=model, device=device, **interp_kw)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    ref = make_interpreter(model)
    ref.allocate_tensors()
    ref.set_tensor(ref.get_input_details()[0]["index"], x)
    ref.invoke()
    return (it, it.get_tensor(it.get_output_details()[0]["index"]),
            ref.get_tensor(ref.get_output_details()[0]["index"]))


def launches(it) -> list:
    """The kernel launches (backend/kernels.py Launch: nodes, source, what, folded) of the
    current plans of ``it``'s delegate (a litecl.Interpreter or a litecl.Delegate), in
    partition order; empty before allocate_tensors."""
    d = getattr(it, "delegate", it)
    return [ln for p in d.partitions() if p.plan is not None for ln in p.plan.launches]


class _Launches:
    """len(): the kernel launches of a delegate's partitions since it was made (the
    runtime's counts: _Planner.launches_run)."""

    def __init__(self, d):
        self.d = d
        self.start = self._now()

    def _now(self) -> int:
        return sum(p.launches_run for p in self.d.partitions())

    def __len__(self) -> int:
        return self._now() - self.start


def assert_folded_and_count_launches(it, monkeypatch) -> _Launches:
    """Assert ``it``'s one node is on OpenCL as one launch computed once (its inputs are
    all constants), and count every kernel launch from now on (len() of the result)."""
    (row,) = assert_on_opencl(it)
    assert row["kernel"].endswith("(constant inputs: computed once)"), row
    assert [ln.folded for ln in launches(it)] == [True]
    return _Launches(getattr(it, "delegate", it))


def assert_on_opencl(it, ops=("CAST", "ADD")) -> list:
    """Assert that ``it`` (litecl.Interpreter or Delegate) placed at least one node of
    ``ops`` and every one of them on OpenCL; returns those placement() rows."""
    rows = [r for r in it.placement() if r["op"] in ops]
    assert rows and all(r["placement"] == "opencl" for r in rows), rows
    return rows


def script_json(script: str, env: dict, *args) -> dict:
    """Run ``python -c script args`` in a fresh process with ``env`` (a timeout of 300 s)
    and return the JSON object its last stdout line holds; fails with its stderr's tail."""
    import json
    import subprocess

    r = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])



def force_copies(d):
    """Delegate ``d`` on the copy path of a discrete GPU on any device: LiteRT's tensors
    copied to and from device buffers (no buffer in place), and no small-partition device
    (a GPU has none; PoCL's basic one would take small partitions in place). Returns ``d``."""
    from litecl.memory import _Memory  # noqa: PLC0415

    d.memory = _Memory(False, 0)
    d.small_device = None
    return d


def invoke_with(it, xs: list) -> list:
    """Set ``xs`` as ``it``'s inputs in order, invoke, return every output."""
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]) for d in it.get_output_details()]


def litert_outputs(m: bytes, xs: list) -> list:
    """LiteRT alone (builtin kernels, no XNNPACK) on ``xs``, its inputs resized to their
    shapes where they differ from the model's."""
    from litecl.compare import make_interpreter  # noqa: PLC0415

    ref = make_interpreter(m)
    for d, x in zip(ref.get_input_details(), xs):
        if tuple(d["shape"]) != x.shape:
            ref.resize_tensor_input(d["index"], list(x.shape))
    ref.allocate_tensors()
    return invoke_with(ref, xs)


def same_outputs(got: list, want: list) -> bool:
    """Every output of one dtype and shape and bit for bit equal (any NaN = any NaN of
    its sign: compare.mismatches)."""
    from litecl.compare import mismatches  # noqa: PLC0415

    return all(g.dtype == w.dtype and g.shape == w.shape and not mismatches(g, w).any()
               for g, w in zip(got, want))
