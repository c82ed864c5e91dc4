"""Bit-exact on arm64: litecl in the arm64 userland (.ci/arm64-userland: Debian 12's arm64
Python, Debian's arm64 PoCL 3.1, LiteRT's aarch64 wheel, under qemu-user) against arm64
LiteRT alone, whose float ADD bits differ from x86-64's (ops/add.py FLOAT_ADD_RULES).

Marked ``arm64`` (minutes under qemu, and root): ``pytest -m arm64``, which .ci/run runs as
a leg of its own. Where the userland cannot run (not root, no qemu-user-static, not set
up), each test skips naming why. The checks themselves are tests/arch_checks.py.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, SHARED_MODELS

pytestmark = pytest.mark.arm64

USERLAND = ROOT / ".ci" / "arm64-userland"
CROSS = "aarch64-linux-gnu-gcc"


def _ready() -> str:
    r = subprocess.run([str(USERLAND), "status"], capture_output=True, text=True, timeout=60)
    return "" if r.returncode == 0 else r.stdout.strip() or r.stderr.strip()


@pytest.fixture(scope="module")
def userland():
    why = _ready()
    if why:
        pytest.skip(f"arm64 userland: {why}")


def in_arm64(*args, timeout: int = 3000) -> dict:
    """tests/arch_checks.py ARGS in the arm64 userland: its JSON line."""
    r = subprocess.run([str(USERLAND), "run", "python", "tests/arch_checks.py", *args], capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_float_add_rules_predict_arm64_litert(userland):
    """ops/add.py's aarch64 row against arm64 LiteRT: the NaN two NaNs give (random shape
    pairs of rank 1..8, builtin and ref), -0.0 under RELU/RELU6 (+0.0 in optimized_ops'
    SIMD bodies), the default NaN of inf + -inf, float32 and float16."""
    got = in_arm64("rules")
    assert got["checked"] > 1500 and got["n_bad"] == 0, got


def test_selftest_table_is_arm64_litert_s_bits(userland):
    """ops/selftest_aarch64.json (the self-test's expected bits, backend/selftest.py) is
    what arm64 LiteRT gives today: regenerated in the userland and diffed."""
    r = subprocess.run([str(USERLAND), "run", "python", "-m", "models.selftest_tables", "--check"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


def test_kernels_bit_exact_on_arm64_pocl(userland):
    """litecl's kernels for every CAST pair and the ADD matrix (edge values of both NaN
    signs, both operand orders, broadcasts, every activation, tails 1-9 past each SIMD
    block), planned on the arm64 device's caps, on arm64 PoCL's pthread and basic devices."""
    got = in_arm64("kernels")
    assert got["n_skipped"] == 0 and got["kernels"] > 700 and got["n_bad"] == 0, got
    assert got["arch"] == "aarch64" and len(got["devices"]) == 2, got


def _arm64_runtime() -> None:
    """litecl's C runtime for aarch64, cross-built here beside the x86-64 one (the
    userland has no C compiler; backend/native/build.py names one file per architecture)."""
    if shutil.which(CROSS) is None:
        pytest.skip(f"no {CROSS} (Debian's gcc-aarch64-linux-gnu): litecl's runtime cannot be built for arm64")
    from litecl.native import build  # noqa: PLC0415

    native = ROOT / "backend" / "native"
    build.compile_library([CROSS], str(native), str(native / build.library("aarch64")))


def test_shared_models_through_litecl_on_arm64(userland, shared_models):
    """Every shared model, and float ADD edge models, through litecl.Interpreter on arm64
    PoCL (the delegate itself: the small device and pthread), against arm64 LiteRT."""
    _arm64_runtime()
    models = sorted(f"/shared/models/{p.name}" for p in shared_models.glob("*.tflite"))
    got = in_arm64("models", *models)
    assert got["checked"] == len(models) + 5 and not got["bad"], got
    assert sum(r[1] for r in got["rows"]) > 50, got  # CAST/ADD nodes on OpenCL


def test_cross_built_native_delegate_on_arm64(userland, tmp_path, fast_device):
    """Exported here (x86-64, this machine's device) with defaults, cross-built for aarch64
    (build/arm64-v8a/), loaded unedited by arm64 LiteRT (its delegate_options.json as
    written): it finds arm64's OpenCL and device itself, the kernels' float ADD bits are
    aarch64's (built with -DLITECL_ARCH_AARCH64), bit-exact with arm64 LiteRT on seeded
    inputs and on float ADD edge values (NaN of both signs, -0.0). MoveNet exported for
    ``--target gpu`` runs on arm64 PoCL's CPU device with the CPU row's local size (with the
    GPU row's 512 work-items per group it segfaulted under qemu: 1 of 1)."""
    if shutil.which(CROSS) is None:
        pytest.skip(f"no {CROSS} (Debian's gcc-aarch64-linux-gnu)")
    from litecl.cli import main
    from models.builders import add_model

    work = ROOT / ".arm64-native"  # inside the checkout: the userland sees it as /src/...
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    cases = [(SHARED_MODELS / n, None) for n in ("add_1d_2d_3d_4d.tflite", "rope.tflite",
                                                 "simple_quantized_ops.tflite", "tflm_add_model_float.tflite")]
    gpu_target = SHARED_MODELS / "movenet_singlepose_lightning_int8.tflite"
    cases.append((gpu_target, None))
    for k, (dt, s1, s2, act) in enumerate([("float32", [17], [17], "RELU"), ("float32", [4, 17], [4, 1], "RELU6"),
                                           ("float16", [4, 1], [4, 17], "NONE")]):
        p = tmp_path / f"edge{k}.tflite"
        p.write_bytes(add_model(dt, s1, s2, activation=act))
        cases.append((p, (dt, s1, s2)))
    # the float16 ADD exported without cl_khr_fp16 (float arithmetic, LiteRT's bits): the
    # arm64 userland's PoCL has none, and pip's PoCL 3.0 (the fast device where it builds)
    # has none either (exported where a device had it, the library found no device on arm64)
    fp16_device = f"{fast_device}:profile=nofp16"
    dirs = []
    try:
        for k, (m, edge) in enumerate(cases):
            if not m.exists():
                pytest.skip(f"real model {m} is absent")
            device = fp16_device if edge and edge[0] == "float16" else fast_device
            out = work / f"e{k}"
            target = ["--target", "gpu"] if m == gpu_target else []
            assert main(["export", str(m), "--out", str(out), "--device", device, *target]) == 0
            r = subprocess.run(["sh", str(out / "build.sh")], env={"CC": CROSS, "PATH": "/usr/bin:/bin"},
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stderr
            shutil.copy(m, out / "model.tflite")
            (out / "model").write_text(f"/src/.arm64-native/e{k}/model.tflite\n")
            if edge:
                dt, s1, s2 = edge
                u, f = (np.uint32, np.float32) if dt == "float32" else (np.uint16, np.float16)
                nan, zero = (0x7FC00000, 0x80000000) if dt == "float32" else (0x7E00, 0x8000)
                a = np.full(s1, nan | zero, u)
                a.ravel()[::3] = zero
                b = np.full(s2, nan, u)
                b.ravel()[1::4] = zero
                np.savez(out / "inputs.npz", a=a.view(f), b=b.view(f))
            dirs.append(f"/src/.arm64-native/e{k}")
        got = in_arm64("native", *dirs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert got["checked"] == len(cases) and not got["bad"], got
