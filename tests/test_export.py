"""``litecl export``: the exported kernels, run by the generated C host (litecl_run.c built
with the system C compiler against the OpenCL ICD loader, no litecl, no Python), give
LiteRT's bits for every tensor they write.

Each model is exported once per configuration (PoCL, Intel's CPU runtime, and the GPU
target's code path and launch row built and run on PoCL and, with the mobile profile, on
Intel). The C host is fed the kernels' input tensors as LiteRT computed them
(experimental_preserve_all_tensors, resolver BUILTIN_WITHOUT_DEFAULT_DELEGATES, as
litecl's fallback segments) and each tensor it writes is compared with LiteRT's bit for bit
(NaN equals NaN of the same sign, litecl.compare.mismatches).
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import litecl
from litecl.cli import main
from litecl.compare import mismatches, random_inputs
from litecl.ops.dtypes import CAST_TYPES
from models.builders import _Graph, add_model, chain_model

from conftest import DEVICE_STATUS, SHARED_MODELS
from test_cast import _out_of_reference_contract, edge_values

#: platform-name substrings the C host is pointed at (LITECL_RUN_DEVICE)
RUN_DEVICE = {"pocl": "Portable Computing Language", "intel": "Intel(R) OpenCL"}

#: (id, export device spec, --target, runtime the C host runs on). The GPU target: its
#: LAUNCH row (512 work-items, integer half stores, saturating converts...) with the mobile
#: profile's caps on PoCL (no fp16/fp64, strict compiler: multi-hop chains, soft float64)
#: and with Intel's cl_khr_fp16.
CONFIGS = [("pocl", "pocl", None, "pocl"), ("intel", "intel", None, "intel"),
           ("pocl-mobile-gpu", "pocl:profile=mobile", "gpu", "pocl"), ("intel-gpu", "intel", "gpu", "intel")]
#: every_cast_pair builds 121 programs in the C host (~0.25 s each on Intel's runtime, which
#: keeps no kernel cache): it runs on three configurations, the GPU row once
HEAVY = {"every_cast_pair": {"pocl", "intel", "pocl-mobile-gpu"}}

_PROBE_C = ("#define CL_TARGET_OPENCL_VERSION 120\n#include <CL/cl.h>\n"
            "int main(void) { cl_uint n = 0; return clGetPlatformIDs(0, 0, &n) == CL_SUCCESS ? 0 : 0; }\n")


@functools.lru_cache(maxsize=None)
def host_toolchain() -> str:
    """'' when a C compiler can build and link an OpenCL 1.2 program here, else why not."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return "no C compiler (cc) on PATH"
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as d:
        src = Path(d, "probe.c")
        src.write_text(_PROBE_C)
        r = subprocess.run([cc, "-O2", "-o", str(Path(d, "probe")), str(src), "-lOpenCL"],
                           capture_output=True, text=True, timeout=120)
    if r.returncode:
        first = (r.stderr.strip().splitlines() or ["?"])[0]
        return ("cannot build against OpenCL (install ocl-icd-opencl-dev, as .ci/run does): "
                + first[:200])
    return ""


def _need_host():
    why = host_toolchain()
    if why:
        pytest.skip(why)


def build_host(out: Path) -> Path:
    """cc -O2 -o DIR/run DIR/*.c -lOpenCL, as README tells; returns DIR/run."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    r = subprocess.run([cc, "-O2", "-std=c99", "-Wall", "-o", str(out / "run"),
                        *sorted(str(p) for p in out.glob("*.c")), "-lOpenCL"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "warning" not in r.stderr, r.stderr[-3000:]
    return out / "run"


def run_host(exe: Path, in_dir: Path, out_dir: Path, runtime: str):
    env = dict(os.environ, LITECL_RUN_DEVICE=RUN_DEVICE[runtime])
    out_dir.mkdir(exist_ok=True)
    return subprocess.run([str(exe), str(in_dir), str(out_dir)], capture_output=True, text=True,
                          env=env, timeout=300)


# ----------------------------------------------------------------------- models
def every_cast_pair_model() -> tuple[bytes, dict]:
    """One input per CAST type (each its own length, so no two consecutive CASTs share an
    element space and none fuse), CAST to every other type, ordered destination-major;
    complex64 -> every type; and a CAST of a constant (folded at allocate) feeding an ADD.
    Returns (model, inputs by name): edge values then random bits (test_cast.edge_values)."""
    names = [d.name for d in CAST_TYPES]
    g = _Graph()
    src = {}
    inputs = {}
    for k, s in enumerate(names + ["complex64"]):
        n = 101 + 2 * k
        src[s] = g.tensor(f"in_{s}", s, [n])
        g.inputs.append(src[s])
        inputs[f"in_{s}"] = edge_values(s, n)
    for d in names:
        for s in names + ["complex64"]:
            if s != d:
                g.outputs.append(g.cast(src[s], d, f"{s}_to_{d}"))
    c = g.tensor("c_int32", "int32", [37], data=np.arange(-18, 19, dtype=np.int32) * 1000003)
    x = g.tensor("in_add", "float32", [37])
    g.inputs.append(x)
    inputs["in_add"] = edge_values("float32", 37)
    cf = g.cast(c, "float32", "c_as_float32")
    g.outputs.append(g.binary("add", cf, x, "c_plus_x"))
    return g.finish(), inputs


def _synthetic():
    pairs, pair_inputs = every_cast_pair_model()
    return {
        "every_cast_pair": (pairs, None, pair_inputs),
        # f32 -> f16 -> f32 + 0.25 -> int8 fuses into one kernel that rounds to half inside;
        # the u8 image chain has a broadcast ADD of a bias and a RELU6 inside its group
        "fused_chain": (chain_model(["float32", "float16", "float32", ("add", 0.25), "int8"], [1999]),
                        None, None),
        "fused_image_chain": (chain_model(["uint8", "float32", ("add", np.linspace(-3, 3, 67).astype(np.float32)),
                                           ("add", 0.5, "RELU6"), "float16", "int64", "float64", "bool"],
                                          [3, 67]), None, None),
        "quant_add": (add_model("int8", [5, 1, 67], [1, 3, 67], activation="RELU6",
                                quant=((0.05, 3), (0.1, -7), (0.08, 2))), None, None),
        "add_6d_broadcast": (add_model("float32", [2, 1, 3, 1, 2, 5], [1, 3, 1, 4, 1, 5]), None, None),
    }


SYNTHETIC = _synthetic()
REAL = {"movenet": ("movenet_singlepose_lightning_int8.tflite", None),
        "lyra_encode": ("lyra_quantizer.tflite", "encode"),
        "lyra_decode": ("lyra_quantizer.tflite", "decode")}
MODELS = list(SYNTHETIC) + list(REAL)


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    out = {}
    for name, (content, _, _) in SYNTHETIC.items():
        p = d / f"{name}.tflite"
        p.write_bytes(content)
        out[name] = p
    return out


def _model(name: str, files: dict) -> tuple[Path, str | None, dict | None]:
    if name in SYNTHETIC:
        return files[name], SYNTHETIC[name][1], SYNTHETIC[name][2]
    fname, sig = REAL[name]
    p = SHARED_MODELS / fname
    if not p.exists():
        pytest.skip(f"real model {p} is absent")
    return p, sig, None


@functools.lru_cache(maxsize=None)
def _signature_subgraph(path: str, signature: str) -> int:
    from litecl.model import load_model  # noqa: PLC0415

    return next(s.subgraph for s in load_model(path).signatures if s.key == signature)


@functools.lru_cache(maxsize=None)
def reference(name: str, path: str, signature):
    """LiteRT's run of model ``name`` with every tensor kept: a function tensor(t) -> array
    of the subgraph that ran (the signature's, else 0). Inputs: the model's own
    (SYNTHETIC) or seeded full-range random ones (NaN, inf, subnormals, every 8/16-bit
    value)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    given = SYNTHETIC[name][2] if name in SYNTHETIC else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                          experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    if signature is not None:
        r = ref.get_signature_runner(signature)
        details = [dict(d, name=k) for k, d in r.get_input_details().items()]
        r(**(given or random_inputs(details, 0, full_range=True)))
        si = _signature_subgraph(path, signature)
    else:
        ref.allocate_tensors()
        details = ref.get_input_details()
        values = given or random_inputs(details, 0, full_range=True)
        for d in details:
            ref.set_tensor(d["index"], values[d["name"]])
        ref.invoke()
        si = 0
    return lambda t: ref.get_tensor(t, si)


def _runtime_ok(runtime: str):
    if DEVICE_STATUS.get(runtime):
        pytest.skip(DEVICE_STATUS[runtime])


def _opencl_nodes(path: Path, device: str, signature) -> list[int]:
    """The nodes litecl places on OpenCL in the subgraph that runs (after allocate)."""
    it = litecl.Interpreter(model_path=str(path), device=device)
    si = 0 if signature is None else _signature_subgraph(str(path), signature)
    return sorted(p["index"] for p in it.placement() if p["subgraph"] == si and p["placement"] == "opencl")


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
@pytest.mark.parametrize("name", MODELS)
def test_exported_host_matches_litert(name, config, model_files, tmp_path):
    cid, spec, target, runtime = config
    if name in HEAVY and cid not in HEAVY[name]:
        pytest.skip(f"{name} runs on {', '.join(sorted(HEAVY[name]))} only (test time)")
    _runtime_ok(runtime)
    _need_host()
    path, sig, _ = _model(name, model_files)
    out = tmp_path / "export"
    argv = ["export", str(path), "--out", str(out), "--device", spec]
    argv += ["--target", target] if target else []
    argv += ["--signature", sig] if sig else []
    assert main(argv) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["target"] == (target or "cpu")
    assert m["caps"]["is_gpu"] == (target == "gpu")
    assert m["launch_row"]["local_size"] == (512 if target == "gpu" else 1)
    assert m["device"]["profile"] == (spec.partition("profile=")[2] or None)
    assert m["launches"], m.get("note")
    # every node litecl runs on OpenCL is in one launch, once
    implemented = [n["index"] for ln in m["launches"] for n in ln["nodes"]]
    assert sorted(implemented) == m["lowered_nodes"] == _opencl_nodes(path, spec, sig)
    tensors = {t["index"]: t for t in m["tensors"]}
    ref = reference(name, str(path), sig)
    in_dir = tmp_path / "in"
    in_dir.mkdir()
    for t in m["inputs"]:
        v = np.ascontiguousarray(ref(t))
        assert list(v.shape) == tensors[t]["shape"] and v.dtype.name == tensors[t]["dtype"]
        (in_dir / f"t{t}.bin").write_bytes(v.astype(v.dtype.newbyteorder("<")).tobytes())
    exe = build_host(out)
    r = run_host(exe, in_dir, tmp_path / "out", runtime)
    assert r.returncode == 0, r.stderr
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == sorted(f"t{t}.bin" for t in m["outputs"])
    bad = []
    for t in m["outputs"]:
        want = ref(t)
        got = np.frombuffer((tmp_path / "out" / f"t{t}.bin").read_bytes(),
                            dtype=want.dtype.newbyteorder("<")).reshape(want.shape)
        diff = mismatches(got, want)
        if name == "every_cast_pair" and tensors[t]["name"].startswith("complex64_to_"):
            x = SYNTHETIC[name][2]["in_complex64"]
            diff &= ~_out_of_reference_contract("complex64", tensors[t]["dtype"], x)
        if diff.any():
            bad.append(f"t{t} {tensors[t]['name']} ({tensors[t]['dtype']}): {int(diff.sum())} of "
                       f"{diff.size} differ, got {got[diff][:4]!r} want {want[diff][:4]!r}")
    assert not bad, f"{name} on {cid}: " + "; ".join(bad[:5])
