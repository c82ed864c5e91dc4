"""``litecl export``: the kernels litecl's delegate launches, run from the exported files
alone (manifest.json, the .cl files, the constants' .bin files) by a small pyopencl host
in this test, give LiteRT's bits for every tensor they write.

Each model is exported once per configuration (PoCL, Intel's CPU runtime, and the GPU
target's code path and launch row built and run on PoCL and, with the mobile profile, on
Intel). The host is fed the kernels' input tensors as LiteRT computed them
(experimental_preserve_all_tensors, resolver BUILTIN_WITHOUT_DEFAULT_DELEGATES, the one
litecl.Interpreter uses by default) and each tensor it writes is compared with LiteRT's
bit for bit (NaN equals NaN of the same sign, litecl.compare.mismatches).
"""
from __future__ import annotations

import functools
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

import litecl
from litecl.cli import main
from litecl.compare import mismatches, random_inputs
from litecl.errors import InputError
from litecl.export import export
from litecl.ops.add import arch_define, host_arch
from litecl.ops.dtypes import CAST_TYPES
from models.builders import _Graph, add_model, cast_model, chain_model

from conftest import DEVICE_STATUS, SHARED_MODELS
from test_cast import _out_of_reference_contract, edge_values

#: (id, export device spec, --target, runtime the exported kernels run on). The GPU
#: target: its LAUNCH row (512 work-items, integer half stores, saturating converts...)
#: with the mobile profile's caps on PoCL (no fp16/fp64, strict compiler: multi-hop
#: chains, soft float64) and with Intel's cl_khr_fp16; and a real GPU where NVIDIA's
#: runtime is present.
CONFIGS = [("pocl", "pocl", None, "pocl"), ("intel", "intel", None, "intel"),
           ("pocl-mobile-gpu", "pocl:profile=mobile", "gpu", "pocl"), ("intel-gpu", "intel", "gpu", "intel"),
           ("nvidia", "nvidia", None, "nvidia")]
#: every_cast_pair and MoveNet build many programs: their GPU row is checked on PoCL
#: (mobile caps) only; the other models cover Intel's GPU row
HEAVY = {"every_cast_pair": {"pocl", "intel", "pocl-mobile-gpu", "nvidia"},
         "movenet": {"pocl", "intel", "pocl-mobile-gpu", "nvidia"}}


def run_exported(out: Path, value, device) -> dict:
    """Run manifest.json's launches in order from the files in ``out`` alone: a buffer
    per tensor (role "input": ``value(t)``, LiteRT's array; "constant": its t<index>.bin;
    "written": fresh), each launch's kernel from its .cl file with its arguments, global
    and local size (a launch of n = 0 elements is not enqueued). ``device``: a litecl
    Device, for its OpenCL context and queue; programs are built through
    litecl.kernels.build_program only for its binary cache (the source is the file's).
    Returns {tensor: bytes} of every written tensor."""
    import pyopencl as cl

    from litecl.kernels import build_program
    from litecl.ops.add import host_arch

    m = json.loads((out / "manifest.json").read_text())
    ctx, q, mf = device.context, device.queue, cl.mem_flags
    bufs = {}
    for t in m["tensors"]:
        if t["role"] == "written":
            bufs[t["index"]] = cl.Buffer(ctx, mf.READ_WRITE, max(t["bytes"], 1))
            continue
        if t["role"] == "constant":
            data = (out / t["file"]).read_bytes()
        else:
            v = np.ascontiguousarray(value(t["index"]))
            assert list(v.shape) == t["shape"] and v.dtype.name == t["dtype"], t
            data = v.astype(v.dtype.newbyteorder("<")).tobytes()
        assert len(data) == t["bytes"], t
        bufs[t["index"]] = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR,
                                     hostbuf=np.frombuffer(data or b"\0", np.uint8))
    for ln in m["launches"]:
        # built as the manifest says for this machine's architecture (its -D option, as a
        # #define: build_program takes no options)
        define = ln["build_options"][host_arch()].removeprefix("-D")
        kernel = cl.Kernel(build_program(device, f"#define {define}\n" + (out / ln["source"]).read_text()),
                           ln["kernel"])
        args = [bufs[a["tensor"]] if a["kind"] != "scalar" else
                np.int32(a["value"]) if a["ctype"] == "int" else np.uint32(a["value"]) for a in ln["args"]]
        n = next(a["value"] for a in ln["args"] if a["kind"] == "scalar")
        if n == 0:
            continue
        kernel.set_args(*args)
        local = ln["local_size"][0]
        groups = ln["global_size"][0] // local
        # a kernel may allow fewer work-items than the device: keep the groups (the
        # kernels stride by their local size)
        local = min(local, kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device.device))
        cl.enqueue_nd_range_kernel(q, kernel, (groups * local,), (local,))
    out_bytes = {}
    for t in m["tensors"]:
        if t["role"] == "written":
            host = np.empty(t["bytes"], np.uint8)
            if t["bytes"]:
                cl.enqueue_copy(q, host, bufs[t["index"]])
            out_bytes[t["index"]] = host.tobytes()
    q.finish()
    return out_bytes


# ----------------------------------------------------------------------- models
def every_cast_pair_model() -> tuple[bytes, dict]:
    """One input per CAST type (each its own length, so no two consecutive CASTs share an
    element space and none fuse), CAST to every other type, ordered destination-major;
    complex64 -> every type; and a CAST of a constant (folded: computed once) feeding a
    broadcasting ADD.
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
    x = g.tensor("in_add", "float32", [2, 37])  # a broadcast: the ADD does not fuse with the CAST
    g.inputs.append(x)
    inputs["in_add"] = edge_values("float32", 74).reshape(2, 37)
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

    def _inputs(details):
        # edge values everywhere, but int32/int64 inputs stay in [0, 10): real models use
        # them as indices (Lyra's GATHER), and --full-range draws them over their range
        full, plain = random_inputs(details, 0, full_range=True), random_inputs(details, 0)
        return {k: (plain[k] if v.dtype in (np.int32, np.int64) else v) for k, v in full.items()}

    given = SYNTHETIC[name][2] if name in SYNTHETIC else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                          experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    if signature is not None:
        r = ref.get_signature_runner(signature)
        details = [dict(d, name=k) for k, d in r.get_input_details().items()]
        r(**(given or _inputs(details)))
        si = _signature_subgraph(path, signature)
    else:
        ref.allocate_tensors()
        details = ref.get_input_details()
        values = given or _inputs(details)
        for d in details:
            ref.set_tensor(d["index"], values[d["name"]])
        ref.invoke()
        si = 0
    return lambda t: ref.get_tensor(t, si)


def _runtime_ok(runtime: str):
    if DEVICE_STATUS.get(runtime):
        pytest.skip(DEVICE_STATUS[runtime])


def _opencl_nodes(path: Path, device: str, signature) -> list[int]:
    """The nodes litecl's delegate places on OpenCL in the subgraph that runs."""
    it = litecl.Interpreter(model_path=str(path), device=device, quiet=True)
    si = 0 if signature is None else _signature_subgraph(str(path), signature)
    return sorted(p["index"] for p in it.placement() if p["subgraph"] == si and p["placement"] == "opencl")


CASES = [pytest.param(name, c, id=f"{name}-{c[0]}") for name in MODELS for c in CONFIGS
         if name not in HEAVY or c[0] in HEAVY[name]]


@pytest.mark.parametrize("name, config", CASES)
def test_exported_kernels_match_litert(name, config, model_files, tmp_path):
    cid, spec, target, runtime = config
    _runtime_ok(runtime)
    path, sig, _ = _model(name, model_files)
    out = tmp_path / "export"
    argv = ["export", str(path), "--out", str(out), "--device", spec]
    argv += ["--target", target] if target else []
    argv += ["--signature", sig] if sig else []
    assert main(argv) == 0
    m = json.loads((out / "manifest.json").read_text())
    gpu = target == "gpu" or (target is None and runtime == "nvidia")
    assert m["format"] == "litecl-export-5"
    assert m["target"] == ("gpu" if gpu else "cpu") and m["caps"]["is_gpu"] == gpu
    assert m["launch_row"]["local_size"] == (512 if gpu else 1)
    assert m["device"]["profile"] == (spec.partition("profile=")[2] or None)
    assert m["launches"], m.get("note")
    local = min(m["launch_row"]["local_size"], m["caps"]["max_work_group_size"])
    assert all(ln["local_size"] == [local] and ln["global_size"][0] % local == 0 for ln in m["launches"])
    # every node the delegate runs on OpenCL is in one launch, once, of its partition
    implemented = [n["index"] for ln in m["launches"] for n in ln["nodes"]]
    assert sorted(implemented) == m["lowered_nodes"] == _opencl_nodes(path, spec, sig)
    parts = {p["partition"]: set(p["nodes"]) for p in m["partitions"]}
    assert all({n["index"] for n in ln["nodes"]} <= parts[ln["partition"]] for ln in m["launches"])
    tensors = {t["index"]: t for t in m["tensors"]}
    ref = reference(name, str(path), sig)
    got_bytes = run_exported(out, ref, litecl.open_device(runtime))
    assert sorted(got_bytes) == sorted(m["outputs"])
    bad = []
    for t in m["outputs"]:
        want = ref(t)
        got = np.frombuffer(got_bytes[t], dtype=want.dtype.newbyteorder("<")).reshape(want.shape)
        diff = mismatches(got, want)
        if name == "every_cast_pair" and tensors[t]["name"].startswith("complex64_to_"):
            x = SYNTHETIC[name][2]["in_complex64"]
            diff &= ~_out_of_reference_contract("complex64", tensors[t]["dtype"], x)
        if diff.any():
            bad.append(f"t{t} {tensors[t]['name']} ({tensors[t]['dtype']}): {int(diff.sum())} of "
                       f"{diff.size} differ, got {got[diff][:4]!r} want {want[diff][:4]!r}")
    assert not bad, f"{name} on {cid}: " + "; ".join(bad[:5])


# ----------------------------------------------------------------------- manifest, CLI
@pytest.fixture(scope="module")
def pairs_export(model_files, fast_device, tmp_path_factory):
    """every_cast_pair exported once on the fast device (the manifest's checks)."""
    out = tmp_path_factory.mktemp("pairs")
    assert main(["export", str(model_files["every_cast_pair"]), "--out", str(out), "--device", fast_device]) == 0
    return out, json.loads((out / "manifest.json").read_text())


def test_manifest_describes_every_launch(pairs_export, model_files):
    out, m = pairs_export
    from litecl.model import load_model  # noqa: PLC0415

    sg = load_model(str(model_files["every_cast_pair"])).subgraphs[0]
    tensors = {t["index"]: t for t in m["tensors"]}
    assert m["format"] == "litecl-export-5" and m["placement"] == "all" and m["subgraph"] == 0
    # LiteRT hands the delegate every node as one partition (nothing of LiteRT's between)
    assert m["partitions"] == [{"partition": 0, "nodes": list(range(len(sg.nodes))),
                                "inputs": m["partitions"][0]["inputs"], "outputs": m["partitions"][0]["outputs"]}]
    assert set(m["partitions"][0]["outputs"]) == set(sg.outputs)
    assert len(m["launches"]) == 11 * 11 + 2  # every pair, complex64 -> each, the folded CAST, its ADD
    sources = set()
    for ln in m["launches"]:
        node = sg.nodes[ln["nodes"][0]["index"]]
        bufs = [a for a in ln["args"] if a["kind"] != "scalar"]
        scalars = [a for a in ln["args"] if a["kind"] == "scalar"]
        # buffers in the node's order, inputs then outputs, then n, former_num, former_len, tail_len
        assert [a["tensor"] for a in bufs] == [*node.inputs, *node.outputs]
        assert [a["name"] for a in scalars] == ["n", "former_num", "former_len", "tail_len"]
        assert all(a["ctype"] == "uint" for a in scalars)
        n, former_num, former_len, tail_len = (a["value"] for a in scalars)
        assert n == tensors[node.outputs[0]]["elements"]
        groups = ln["global_size"][0] // ln["local_size"][0]
        # the former/tail plan covers n: former chunks then tail chunks (ops/tiling.py)
        assert former_num * former_len + (groups - former_num) * tail_len >= n
        assert ln["reads"] == list(dict.fromkeys(node.inputs)) and ln["writes"] == list(node.outputs)
        src = (out / ln["source"]).read_text()  # one text, or one per architecture (arch_source)
        assert src.count(f"__kernel void {ln['kernel']}(") == (2 if "#if defined(LITECL_ARCH_" in src else 1)
        assert ln["partition"] == 0 and ln["kind"] == "kernel"
        sources.add(ln["source"])
    assert sorted(sources) == sorted(p.name for p in out.glob("k*.cl"))
    folded = [ln for ln in m["launches"] if ln["folded"]]
    assert [ln["what"].split(" via")[0] for ln in folded] == ["CAST int32->float32"]
    (c,) = [t for t in m["tensors"] if t["role"] == "constant"]
    assert c["name"] == "c_int32" and c["file"] == "t%d.bin" % c["index"]
    assert (out / c["file"]).read_bytes() == sg.tensors[c["index"]].data.astype("<i4").tobytes()
    assert set(m["inputs"]) == set(sg.inputs)
    assert set(m["outputs"]) == {t for n in sg.nodes for t in n.outputs}
    assert {t for t in m["outputs"] if tensors[t]["partition_output"]} == set(sg.outputs)


def test_export_matches_the_delegate_s_plan(model_files, fast_device, tmp_path):
    """The manifest is the delegate's own plan: a fused chain is one launch over its three
    nodes, as placement() and inspect report it."""
    out = tmp_path / "e"
    assert main(["export", str(model_files["fused_chain"]), "--out", str(out), "--device", fast_device]) == 0
    m = json.loads((out / "manifest.json").read_text())
    it = litecl.Interpreter(model_path=str(model_files["fused_chain"]), device=fast_device, quiet=True)
    it.allocate_tensors()
    (part,) = it.delegate.partitions()
    assert [[n["index"] for n in ln["nodes"]] for ln in m["launches"]] == [list(ln.nodes) for ln in part.plan.launches]
    assert [ln["source"] for ln in m["launches"]] == ["k000_litecl_fused.cl"]
    text, src = (out / "k000_litecl_fused.cl").read_text(), part.plan.launches[0].source
    # the delegate's text, or it among every architecture's (ops/add.py arch_source)
    assert text == src or (text.startswith("#if defined(LITECL_ARCH_")
                           and f"defined({arch_define(host_arch())})\n{src}\n#" in text), text
    assert m["launches"][0]["kind"] == "fused" and m["launches"][0]["what"] == part.plan.launches[0].what


def test_export_without_lowered_node_writes_empty_manifest(fast_device, tmp_path, capsys):
    p = tmp_path / "mul.tflite"
    p.write_bytes(chain_model(["float32", ("mul", 2.0)], [4]))
    out = tmp_path / "e"
    assert main(["export", str(p), "--out", str(out), "--device", fast_device]) == 1  # nothing to ship
    said = capsys.readouterr().out
    assert "no node is lowered to OpenCL" in said and "the model has no CAST or ADD node" in said
    m = json.loads((out / "manifest.json").read_text())
    assert m["launches"] == [] and m["tensors"] == [] and m["lowered_nodes"] == [] and "note" in m
    assert m["kept_on_litert"] == []
    assert m["partitions"] == []
    assert sorted(p.name for p in out.iterdir()) == ["build.sh", "delegate_options.json", "exported_device.json", "manifest.json",
                                                     "plan.c", "src"]
    assert m["native"]["programs"] == 0 and m["native"]["subgraphs"][0]["claimed"] == 0


def test_export_refuses_bad_paths_and_models(fast_device, tmp_path, capsys, model_files):
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"not a model at all")
    afile = tmp_path / "afile"
    afile.write_text("x")
    good = str(model_files["fused_chain"])
    cases = [
        (["export", str(tmp_path / "missing.tflite"), "--out", str(tmp_path / "o")], "not found"),
        (["export", str(junk), "--out", str(tmp_path / "o")], "not a TFLite model"),
        (["export", str(tmp_path), "--out", str(tmp_path / "o")], "model path is a directory"),
        (["export", good, "--out", str(afile)], "not a folder"),
        (["export", good, "--out", str(tmp_path / "no" / "such")], "does not exist"),
        (["export", good, "--out", str(tmp_path / "o"), "--signature", "nope"], "nope"),
        (["export", good, "--out", str(tmp_path / "o"), "--placement", "gpu"], "invalid choice"),
        (["export", good, "--out", str(tmp_path / "o"), "--target", "dsp"], "invalid choice"),
        (["export", good], "--out"),
    ]
    for argv, what in cases:
        rc = main(argv + ["--device", fast_device])
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        assert err.startswith("error: ") and err.count("\n") == 1 and what in err, (argv, err)
    assert not (tmp_path / "o").exists()


def test_export_names_a_directory_or_fifo_model_as_the_other_commands_do(fast_device, tmp_path, capsys):
    """A model path that is a directory (or a FIFO): export said "cannot read model X: not
    a file" where run, compare, inspect and bench say "model path is a directory, expected a
    .tflite file: X" (model.py's check of a model path); now every command says the same."""
    fifo = tmp_path / "pipe.tflite"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        lines = {}
        for cmd in ("run", "compare", "inspect", "bench", "export"):
            extra = ["--out", str(tmp_path / "o")] if cmd == "export" else []
            assert main([cmd, str(path), "--device", fast_device, *extra]) == 2, cmd
            lines[cmd] = capsys.readouterr().err
        assert len(set(lines.values())) == 1, lines
        assert lines["export"].startswith("error: model path ") and lines["export"].count("\n") == 1, lines
    assert lines["export"] == (f"error: model path {fifo} is a FIFO (named pipe), not a regular file; "
                               "expected a .tflite file\n")
    assert not (tmp_path / "o").exists()


def test_export_refuses_an_empty_out_and_writes_nothing_here(fast_device, tmp_path, capsys, model_files,
                                                            monkeypatch):
    """--out '' is no folder (Path('') is the current one): one line, exit 2, and nothing
    written to the current directory."""
    monkeypatch.chdir(tmp_path)
    rc = main(["export", str(model_files["fused_chain"]), "--out", "", "--device", fast_device])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and "--out is empty" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    with pytest.raises(InputError, match="empty"):
        export(str(model_files["fused_chain"]), "", device=fast_device)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_export_again_removes_the_earlier_export_s_files_only(fast_device, tmp_path, model_files):
    """A second export into the same folder leaves no file of the first that the new plan
    does not write (the built liblitecl_delegate.so no longer matches plan.c, the old
    model's sources and constant files: all listed in its manifest's "files"), and keeps
    every file the first did not list, whatever its name (the user's t999.bin too)."""
    out = tmp_path / "e"
    assert main(["export", str(model_files["fused_image_chain"]), "--out", str(out), "--device", fast_device]) == 0
    first = json.loads((out / "manifest.json").read_text())["files"]
    assert any(f.endswith(".bin") for f in first) and any(f.endswith(".cl") for f in first)
    assert "liblitecl_delegate.so" in first and "manifest.json" in first and "src/cl_loader.c" in first
    (out / "liblitecl_delegate.so").write_bytes(b"\x7fELF built for the first plan")
    for abi in ("x86_64", "arm64-v8a"):  # what build.sh writes (the link above points at one)
        (out / "build" / abi).mkdir(parents=True)
        (out / "build" / abi / "liblitecl_delegate.so").write_bytes(b"\x7fELF built for the first plan")
    (out / "build" / "mine.txt").write_text("mine")
    (out / "t999.bin").write_bytes(b"my constant")
    (out / "src" / "notes.txt").write_text("mine")
    (out / "notes.txt").write_text("mine")
    p = tmp_path / "mul.tflite"
    p.write_bytes(chain_model(["float32", ("mul", 2.0)], [4]))  # nothing lowered: no k*.cl
    assert main(["export", str(p), "--out", str(out), "--device", fast_device]) == 1  # nothing to ship
    assert sorted(f.name for f in out.iterdir()) == ["build", "build.sh", "delegate_options.json", "exported_device.json",
                                                     "manifest.json", "notes.txt", "plan.c", "src", "t999.bin"]
    # the first model's built libraries go too (loaded, they ran nothing on OpenCL: a fresh
    # user's report); the user's file in build/ stays
    assert sorted(str(f.relative_to(out)) for f in (out / "build").rglob("*") if f.is_file()) == ["build/mine.txt"]
    assert (out / "src" / "notes.txt").read_text() == "mine" and (out / "t999.bin").read_bytes() == b"my constant"
    m = json.loads((out / "manifest.json").read_text())
    assert m["launches"] == [] and "k000" not in " ".join(m["files"])


def test_export_refuses_a_folder_that_holds_no_earlier_export(fast_device, tmp_path, capsys, model_files):
    """A non-empty folder without an earlier litecl export (no manifest.json, another
    tool's, one that is not JSON) is refused with one line naming it and saying how to
    go on; nothing there is removed or overwritten (export removed the user's k*.cl and
    t*.bin and overwrote build.sh and manifest.json)."""
    good = str(model_files["fused_chain"])
    cases = {"bare": {"k000_mine.cl": "my kernel", "t3.bin": "my data", "build.sh": "my build"},
             "foreign": {"manifest.json": '{"format": "someone-else-1", "files": ["build.sh"]}',
                         "build.sh": "my build"},
             "not_json": {"manifest.json": "not json", "k001_x.cl": "mine"}}
    for name, content in cases.items():
        out = tmp_path / name
        out.mkdir()
        for f, text in content.items():
            (out / f).write_text(text)
        rc = main(["export", good, "--out", str(out), "--device", fast_device])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith(f"error: cannot export to {out}: ") and err.count("\n") == 1, err
        assert "no earlier litecl export" in err and "name a new or empty folder, or empty this one" in err, err
        with pytest.raises(InputError, match="no earlier litecl export") as e:
            export(good, str(out), device=fast_device)
        assert isinstance(e.value, ValueError)
        assert {f.name: f.read_text() for f in out.iterdir()} == content, name
    # an empty folder and a missing one are fine
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "empty", tmp_path / "new"):
        assert export(good, str(out), device=fast_device)["launches"]


def test_export_replaces_only_names_it_writes_of_an_older_or_edited_manifest(fast_device, tmp_path,
                                                                             model_files):
    """A manifest from before "files" (litecl-export-4 as first written): its sources,
    constants and fixed files are replaced. A manifest whose "files" names other files
    (../, the user's notes) removes none of them: only names an export writes go."""
    out = tmp_path / "e"
    assert main(["export", str(model_files["fused_image_chain"]), "--out", str(out), "--device", fast_device]) == 0
    m = json.loads((out / "manifest.json").read_text())
    consts = [t["file"] for t in m["tensors"] if t["role"] == "constant"]
    assert consts
    del m["files"]
    (out / "manifest.json").write_text(json.dumps(m))
    p = tmp_path / "mul.tflite"
    p.write_bytes(chain_model(["float32", ("mul", 2.0)], [4]))
    assert main(["export", str(p), "--out", str(out), "--device", fast_device]) == 1  # nothing to ship
    assert not any((out / f).exists() for f in consts) and not list(out.glob("k*.cl"))
    (tmp_path / "outside.txt").write_text("mine")
    (out / "notes.txt").write_text("mine")
    m = json.loads((out / "manifest.json").read_text())
    m["files"] += ["../outside.txt", "notes.txt", str(tmp_path / "outside.txt")]
    (out / "manifest.json").write_text(json.dumps(m))
    assert main(["export", str(p), "--out", str(out), "--device", fast_device]) == 1  # nothing to ship
    assert (tmp_path / "outside.txt").read_text() == "mine" and (out / "notes.txt").read_text() == "mine"


def test_kernel_add_and_cast_take_target(fast_device, capsys):
    assert main(["kernel", "add", "float32", "--shapes", "2,1,3", "4,1", "--device", fast_device,
                 "--target", "gpu", "--build"]) == 0
    out = capsys.readouterr().out
    assert "// target: gpu" in out and "__kernel void litecl_add(" in out and "// built OK" in out
    assert "[2, 1, 3] + [4, 1] -> [2, 4, 3]" in out and "local size 512" in out
    assert main(["kernel", "add", "int8", "--quant", "0.5:1", "0.25:-2", "0.75:0", "--activation", "RELU",
                 "--device", fast_device, "--target", "cpu", "--build"]) == 0
    out = capsys.readouterr().out
    assert "quantized 0.5:1 0.25:-2 0.75:0" in out and "local size 1" in out and "// built OK" in out
    assert main(["kernel", "cast", "float32", "float16", "--device", fast_device + ":profile=mobile",
                 "--target", "gpu", "--build"]) == 0
    out = capsys.readouterr().out
    assert "// target: gpu" in out and "(profile mobile)" in out and "// built OK" in out
    # float16 ADD runs on OpenCL (LiteRT's semantics: ops/add.py)
    assert main(["kernel", "add", "float16", "--device", fast_device, "--build"]) == 0
    assert "// built OK" in capsys.readouterr().out
    for argv, what in [(["int8"], "--quant"), (["float32", "--shapes", "2", "3"], "do not broadcast"),
                       (["float32", "--quant", "1:0", "1:0", "1:0"], "int8, uint8 and int16"),
                       (["int8", "--quant", "0:0", "1:0", "1:0"], "scale"),
                       (["float32", "--shapes", "2,x", "2"], "shape"),
                       # a value starting "-1,": argparse took it for an option ("expected 2 arguments")
                       (["float32", "--shapes", "-1,3", "4"], "dimensions must be >= 0, got '-1,3'"),
                       (["bfloat16"], ""),
                       (["int16", "--quant", "0.5:3", "0.5:0", "0.5:0"], "zero point")]:
        rc = main(["kernel", "add", *argv, "--device", fast_device])
        err = capsys.readouterr().err
        assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1 and what in err, (argv, err)
        assert err.count("[2]") <= 1, err  # each shape named once (was twice)


def test_export_placement_auto_follows_the_cost_model(tmp_path, fast_device, monkeypatch, capsys):
    # the delegate's cost model (placement="auto"): with a round trip dearer than LiteRT's
    # time for the node, nothing is exported; with a free one, the kernel is, with a line
    # saying the choice is this machine's (a fresh user cross-built it for a board)
    import litecl.placement as pm
    from litecl.placement import Costs

    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model("float32", "int8", [64]))
    for rt, want in ((1e6, 0), (0.0, 1)):
        costs = Costs(device_gbs=1e3, transfer_gbs=1e3, round_trip_us=rt, launch_us=0.0,
                      litert_gbs=1.0, litert_node_us=1.0)
        monkeypatch.setattr(pm, "device_costs", lambda device, c=costs: c)
        out = tmp_path / f"o{want}"
        assert main(["export", str(m), "--out", str(out), "--device", fast_device, "--placement", "auto"]) == 1 - want
        man = json.loads((out / "manifest.json").read_text())
        assert man["placement"] == "auto" and len(man["launches"]) == want and len(man["partitions"]) == want
        said = capsys.readouterr().out
        assert ("placement auto chose the nodes by" in said and "measured costs on this machine" in said) == bool(want)


def test_export_names_what_the_loading_device_needs(tmp_path, fast_device, capsys):
    """A library whose kernels use float16 arithmetic or 64-bit integers is refused whole by
    a device without them; export says so, with the profile that needs neither (a fresh
    user's default export from Intel's runtime would not load on arm64 PoCL)."""
    from litecl.device import open_device  # noqa: PLC0415

    m = tmp_path / "m.tflite"
    m.write_bytes(chain_model(["int64", "float16", ("add", np.full([64], 1.0, np.float16))], [64]))
    caps = open_device(fast_device).caps
    assert main(["export", str(m), "--out", str(tmp_path / "o"), "--device", fast_device]) == 0
    line = next((ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("its kernels need ")), "")
    man = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert bool(line) == bool(man["native"]["needs"]), (line, man["native"]["needs"])
    if caps.int64:
        assert "int64" in man["native"]["needs"] and "64-bit integers" in line and "noint64" in line, line
    assert main(["export", str(m), "--out", str(tmp_path / "p"), "--device", f"{fast_device}:profile=nofp16+noint64"]) in (0, 1)
    man = json.loads((tmp_path / "p" / "manifest.json").read_text())
    assert not set(man["native"].get("needs", [])) & {"fp16", "int64"}, man["native"]


def test_noint64_export_of_a_quantized_add_needs_no_64_bit_integers(tmp_path, fast_device, capsys):
    """The quantized ADD kernel's comment "(no long: embedded profile)" made every noint64
    export with a quantized ADD claim 64-bit integers, so the library refused the devices
    the profile is for, telling the user to export with noint64 (a fresh user's MoveNet).
    What a library needs is read from the kernels' code, not their comments."""
    m = tmp_path / "q.tflite"
    m.write_bytes(add_model("int16", [16], [16], quant=((2.96e-4, 0), (1.39e-4, 0), (3.83e-4, 0))))
    assert main(["export", str(m), "--out", str(tmp_path / "o"), "--device", f"{fast_device}:profile=noint64"]) == 0
    man = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert "int64" not in man["native"]["needs"], man["native"]
    assert not any(ln.startswith("its kernels need ") for ln in capsys.readouterr().out.splitlines())
    assert any("long" in p.read_text() for p in (tmp_path / "o").glob("*.cl"))  # the comment is there


def test_export_that_takes_nothing_says_why(fast_device, tmp_path, capsys, monkeypatch):
    """An export where auto keeps every node on LiteRT names the reason (a fresh user got
    only "no node is lowered"), and the manifest lists each kept node with it."""
    from litecl.placement import Costs

    monkeypatch.setattr("litecl.placement.device_costs", lambda device: Costs(
        device_gbs=1.0, transfer_gbs=1.0, round_trip_us=1e6, launch_us=1.0, litert_gbs=10.0, litert_node_us=0.1))
    p = tmp_path / "cast.tflite"
    p.write_bytes(chain_model(["float32", "int8"], [64]))
    out = tmp_path / "e"
    assert main(["export", str(p), "--out", str(out), "--device", fast_device, "--placement", "auto"]) == 1
    said = capsys.readouterr().out
    assert "no node is lowered to OpenCL" in said and "1 CAST/ADD node(s) kept on LiteRT, e.g. node 0 (CAST): " \
        "kept on LiteRT: OpenCL ~" in said, said
    m = json.loads((out / "manifest.json").read_text())
    assert [(k["index"], k["op"]) for k in m["kept_on_litert"]] == [(0, "CAST")]


def test_the_build_line_pastes_into_a_shell_for_any_folder(fast_device, tmp_path, capsys, model_files):
    """The printed "build it with: sh DIR/build.sh" quotes DIR for the shell (a folder with
    a space and a quote printed as is did not paste: a fresh user's report)."""
    import shlex

    out = tmp_path / "with space" / "dir 'q'"
    out.parent.mkdir()
    assert main(["export", str(model_files["fused_chain"]), "--out", str(out), "--device", fast_device]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("build it with: "))
    words = shlex.split(line[len("build it with: "):].split(" (then ")[0])
    assert words == ["sh", str(out / "build.sh")], line


def test_a_model_file_name_runs_nothing_in_build_sh(fast_device, tmp_path, capsys):
    """build.sh names the model in a comment: a file named "m\nid > PWNED\n.tflite" ended
    the comment, and "id > PWNED" ran when the user ran build.sh (a fresh user's report)."""
    m = tmp_path / "m\ntouch PWNED\n.tflite"
    m.write_bytes(cast_model("float32", "float16", [8]))
    out = tmp_path / "e"
    assert main(["export", str(m), "--out", str(out), "--device", fast_device]) == 0
    text = (out / "build.sh").read_text()
    assert "m\\ntouch PWNED\\n.tflite" in text
    assert all(ln.startswith("#") for ln in text.splitlines()[:8]), text[:600]


def test_exporting_another_model_into_an_export_folder_says_so(fast_device, tmp_path, capsys):
    """A folder holding another model's export is replaced (documented), with one warning
    line naming the model it held (a fresh user's MoveNet export and its builds went
    without a word)."""
    a, b = tmp_path / "a.tflite", tmp_path / "b.tflite"
    a.write_bytes(cast_model("float32", "float16", [8]))
    b.write_bytes(cast_model("float32", "int8", [8]))
    out = tmp_path / "e"
    assert main(["export", str(a), "--out", str(out), "--device", fast_device]) == 0
    assert main(["export", str(a), "--out", str(out), "--device", fast_device]) == 0  # the same model: no word
    assert "warning:" not in capsys.readouterr().err
    assert main(["export", str(b), "--out", str(out), "--device", fast_device]) == 0
    err = capsys.readouterr().err
    assert f"warning: {out} held the export of {a}: replacing it (and its builds) with {b}'s" in err, err
