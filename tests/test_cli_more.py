"""CLI details: argument validation, inputs files, output paths, signatures, --version,
help texts, fixed-shape inputs (--resize) and --full-range inputs."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # models/ (builders) is not an installed package
    sys.path.insert(0, str(ROOT))

from ai_edge_litert import schema_py_generated as schema  # noqa: E402
import flatbuffers  # noqa: E402

import litecl  # noqa: E402
from litecl.cli import _parser  # noqa: E402
from litecl.compare import random_inputs  # noqa: E402
from models.builders import (_AlignedBufferT, add_model, cast_model, multi_op_model,  # noqa: E402
                            unpreparable_add_model)

from conftest import DEVICE_STATUS  # noqa: E402

CLI = [sys.executable, "-m", "litecl.cli"]
DEV = "intel"

needs_intel = pytest.mark.skipif(bool(DEVICE_STATUS.get(DEV)), reason=DEVICE_STATUS.get(DEV) or "")


def run_cli(*args, cwd=None):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True,
                          env=dict(os.environ), timeout=600, cwd=cwd)


def one_error(r, *fragments):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "internal error" not in lines[0] and "Traceback" not in r.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    return lines[0]


def two_signature_model() -> bytes:
    """Signature "add" runs subgraph 0 (one ADD: 1/1 node on OpenCL), "norm" runs
    subgraph 1 (CAST, MUL, ADD, CAST: 3/4 on OpenCL, in 2 partitions)."""
    a = schema.ModelT.InitFromPackedBuf(bytearray(add_model("float32", [4], [4])), 0)
    b = schema.ModelT.InitFromPackedBuf(bytearray(multi_op_model("cast_mul_cast", (4,))), 0)
    nbuf, nops = len(a.buffers), len(a.operatorCodes)
    sg = b.subgraphs[0]
    for t in sg.tensors:
        if t.buffer:
            t.buffer += nbuf
    for op in sg.operators:
        op.opcodeIndex += nops
    a.subgraphs.append(sg)
    a.operatorCodes += b.operatorCodes
    bufs = []
    for buf in a.buffers + b.buffers:  # keep constant data 16-byte aligned
        if buf.data is not None and len(buf.data):
            nb = _AlignedBufferT()
            nb.data = np.asarray(buf.data, dtype=np.uint8)
            buf = nb
        bufs.append(buf)
    a.buffers = bufs
    a.signatureDefs[0].signatureKey = "add"
    sd = b.signatureDefs[0]
    sd.signatureKey = "norm"
    sd.subgraphIndex = 1
    a.signatureDefs.append(sd)
    builder = flatbuffers.Builder(0)
    builder.Finish(a.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


@pytest.fixture
def model(tmp_path):
    p = tmp_path / "cast.tflite"
    p.write_bytes(cast_model("float32", "int8", [4]))
    return p


@pytest.fixture
def sigmodel(tmp_path):
    p = tmp_path / "sigs.tflite"
    p.write_bytes(two_signature_model())
    return p


# ------------------------------------------------------------------ 1, 5: argument checks
@pytest.mark.parametrize("args,fragment", [
    (["run", "{m}", "--seed", "-1"], "argument --seed"),
    (["compare", "{m}", "--seed", "-3"], "argument --seed"),
    (["bench", "{m}", "--seed", "x"], "argument --seed"),
    (["bench", "{m}", "--num_runs", "0"], "argument --num_runs"),
    (["bench", "{m}", "--num_runs", "-5"], "argument --num_runs"),
    (["bench", "{m}", "--num_runs", "1000001"], "argument --num_runs"),
    (["bench", "{m}", "--num-runs", str(10**30)], "<= 1000000, got 1000000000000000000000000000000"),
    (["bench", "{m}", "--warmup_runs", "-1"], "argument --warmup_runs"),
    (["bench", "{m}", "--min_secs", "-1"], "argument --min_secs"),
    (["bench", "{m}", "--min_secs", "nan"], "argument --min_secs"),
    (["bench", "{m}", "--warmup_min_secs", "-0.5"], "argument --warmup_min_secs"),
    (["bench", "{m}", "--max_secs", "inf"], "argument --max_secs"),
    (["bench", "{m}", "--profile_runs", "-1"], "argument --profile_runs"),
    (["bench", "{m}", "--profile_runs", "10001"], "<= 10000, got 10001"),
    (["bench", "{m}", "--warmup_runs", "1000001"], "<= 1000000, got 1000001"),
    (["bench", "{m}", "--num_threads", "0"], "argument --num_threads"),
])
def test_bad_numbers_are_usage_errors(model, args, fragment):
    line = one_error(run_cli(*[a.format(m=model) for a in args]), fragment)
    assert ">= 0" in line or ">= 1" in line or ">= -1" in line


# ------------------------------------------------------------------ 2: inputs files
def test_num_runs_is_bounded():
    """bench --num_runs had no upper bound (every run's time is kept, for litecl and LiteRT):
    now at most 1000000, as its help says, with the reason."""
    p = _parser()
    assert p.parse_args(["bench", "m.tflite", "--num-runs", "1000000"]).num_runs == 10**6
    bench = next(a for a in p._subparsers._group_actions[0].choices["bench"]._actions if a.dest == "num_runs")
    assert "1000000" in bench.help.replace(",", "") and "kept" in bench.help, bench.help


def test_npy_and_non_npz_inputs(model, tmp_path):
    npy = tmp_path / "x.npy"
    np.save(npy, np.zeros(4, np.float32))
    one_error(run_cli("run", model, "--device", DEV, "--inputs", npy),
              "expected a .npz archive of arrays keyed by input name", ".npy")
    line = one_error(run_cli("compare", model, "--device", DEV, "--inputs", model),
                     "not an .npz archive", "expected a .npz archive of arrays keyed by input name")
    assert "pickle" not in line
    one_error(run_cli("run", model, "--device", DEV, "--inputs", tmp_path), "directory")


def test_random_input_options_beside_inputs_are_refused(model, tmp_path, fast_device):
    """--full-range and --seed choose random inputs; beside --inputs they were ignored
    without a word (a fresh user's report): one error line, exit 2, for run, compare and
    bench; each alone still works."""
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.zeros(4, np.float32))
    for cmd in ("run", "compare", "bench"):
        extra = ["--full-range"] if cmd != "bench" else []
        line = one_error(run_cli(cmd, model, "--device", fast_device, "--inputs", npz, "--seed", "5", *extra),
                         "--inputs gives them")
        assert ("--full-range and --seed" if extra else "--seed chooses") in line
    assert run_cli("run", model, "--device", fast_device, "--seed", "5", "--full-range").returncode == 0


def test_cache_dir_with_a_tilde_or_relative_is_one_absolute_folder(tmp_path, monkeypatch):
    """LITECL_CACHE_DIR="~/x" made a folder named "~" in the current folder, and a relative
    one moved with the current folder (a fresh user's report): "~" is expanded and a
    relative folder made absolute once."""
    from litecl import cache

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LITECL_CACHE_DIR", "~/litecl-cache")
    assert cache.cache_root() == tmp_path / "litecl-cache"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LITECL_CACHE_DIR", "rel-cache")
    root = cache.cache_root()
    monkeypatch.chdir("/")
    assert cache.cache_root() == root == tmp_path / "rel-cache"


# ------------------------------------------------------------------ 3, 4: output paths
def test_unwritable_outputs_fail_before_running(model, tmp_path):
    r = run_cli("bench", model, "--device", DEV, "--json", "/nonexistent/dir/x.json")
    one_error(r, "/nonexistent/dir/x.json", "does not exist")
    assert "Running benchmark" not in r.stdout
    r = run_cli("run", model, "--device", DEV, "--output", tmp_path / "missing" / "o.npz")
    one_error(r, "does not exist")
    assert r.stdout == ""
    r = run_cli("run", model, "--device", DEV, "--output", tmp_path)
    one_error(r, "directory")


@needs_intel
def test_output_without_extension_reports_real_path(model, tmp_path):
    r = run_cli("run", model, "--device", DEV, "--output", "out_noext", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out_noext.npz").exists() and not (tmp_path / "out_noext").exists()
    assert "wrote out_noext.npz" in r.stdout
    r = run_cli("run", model, "--device", DEV, "--output", "o.npz", cwd=tmp_path)
    assert r.returncode == 0 and "wrote o.npz\n" in r.stdout
    with np.load(tmp_path / "o.npz") as z:
        assert z["output"].dtype == np.int8 and z["output"].shape == (4,)


# ------------------------------------------------------------------ 6: signatures, device
@needs_intel
def test_compare_counts_the_signature_subgraph(sigmodel):
    r = run_cli("compare", sigmodel, "--device", DEV, "--signature", "norm")
    assert r.returncode == 0, r.stdout + r.stderr
    head = r.stdout.splitlines()[0]
    assert "nodes on OpenCL: 3/4 in 2 partition(s)" in head and "signature: norm" in head
    caps = litecl.open_device(DEV).caps
    assert f"device: {caps.platform}: {caps.name}" in head
    r = run_cli("compare", sigmodel, "--device", DEV, "--signature", "add", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["opencl_nodes"] == 1 and rep["nodes"] == 1 and rep["signature"] == "add"
    assert rep["device"] == {"platform": caps.platform, "name": caps.name, "profile": None}


@needs_intel
def test_inspect_signature(sigmodel):
    r = run_cli("inspect", sigmodel, "--device", DEV, "--signature", "norm")
    assert r.returncode == 0, r.stderr
    assert "subgraph 1: Replacing 3 out of 4 node(s)" in r.stdout and "subgraph 0:" not in r.stdout
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.split()[3:4] in (["opencl"], ["litert"])]
    assert [row[:4] for row in rows] == [["1", "0", "CAST", "opencl"], ["1", "2", "ADD", "opencl"],
                                         ["1", "3", "CAST", "opencl"]]
    r = run_cli("inspect", sigmodel, "--device", DEV, "--signature", "add", "--json")
    rep = json.loads(r.stdout)
    assert [n["subgraph"] for n in rep["nodes"]] == [0] and isinstance(rep["device"], dict)
    assert set(rep["device"]) == {"platform", "name", "profile"}
    r = run_cli("inspect", sigmodel, "--device", DEV + ":profile=mobile", "--json")
    rep = json.loads(r.stdout)
    # one signature at a time, as compare runs it: subgraph 0 (signature "add") by default
    assert len(rep["nodes"]) == 1 and rep["device"]["profile"] == "mobile"
    assert rep["subgraph"] == 0 and rep["other_signatures"] == ["norm"]
    one_error(run_cli("inspect", sigmodel, "--device", DEV, "--signature", "nope"), "nope")


@needs_intel
def test_bench_json_device_object(model, tmp_path):
    out = tmp_path / "b.json"
    r = run_cli("bench", model, "--device", DEV, "--json", out, "--num_runs", "1", "--warmup_runs", "0",
                "--min_secs", "0", "--warmup_min_secs", "0", "--profile_runs", "1")
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    assert set(rep["device"]) == {"platform", "name", "profile"} and rep["runs"]["count"] >= 1


@needs_intel
def test_bench_times_the_invoke_and_reports_the_copies_apart(tmp_path):
    """benchmark_model's "Inference" and the ratio are the invoke's; a run's set_tensor and
    get_tensor copies are reported apart (with them in, a model of large outputs measured
    litecl.Interpreter's threaded get_tensor: bench said 0.79x where the invoke alone was
    ~5x, a fresh user's report). A 4M-element uint8 -> float32 CAST: reading its 16 MB
    output costs more than the invoke's share of it on either side."""
    m = tmp_path / "big.tflite"
    m.write_bytes(cast_model("uint8", "float32", (1 << 22,)))
    out = tmp_path / "b.json"
    r = run_cli("bench", m, "--device", DEV, "--json", out, "--num_runs", "5", "--warmup_runs", "1",
                "--min_secs", "0", "--warmup_min_secs", "0", "--profile_runs", "0")
    assert r.returncode == 0, r.stderr
    rep = json.loads(out.read_text())
    for k in ("runs", "litert"):
        inv, whole = rep[k], rep[f"{k}_with_copies"]
        assert inv["count"] == whole["count"] >= 5 and inv["median"] < whole["median"], (k, inv, whole)
    assert rep["ratio_median"] == rep["runs"]["median"] / rep["litert"]["median"]
    lines = r.stdout.splitlines()
    (inf,) = [ln for ln in lines if ln.startswith("INFO: Inference timings in us:")]
    assert inf.endswith(f"Inference (avg): {rep['runs']['avg']:.0f}"), inf
    assert any(ln.startswith("INFO: the API's copies (set every input, read every output") for ln in lines)
    (ratio,) = [ln for ln in lines if ln.startswith("INFO: litecl / LiteRT: invoke median")]
    assert "with the copies median" in ratio, ratio


# ------------------------------------------------------------------ 7, 8: version, help
def test_version():
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"litecl {litecl.__version__}"


def _all_parsers(p, path=("litecl",)):
    yield path, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sp in a.choices.items():
                yield from _all_parsers(sp, path + (name,))


def test_every_argument_has_help():
    seen = 0
    for path, p in _all_parsers(_parser()):
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            assert a.help and a.help.strip(), (path, a.dest)
            seen += 1
    assert seen > 30
    names = {path: {o for a in p._actions for o in a.option_strings} for path, p in _all_parsers(_parser())}
    assert {"--signature", "--json"} <= names[("litecl", "inspect")]
    assert {"--resize", "--full-range"} <= names[("litecl", "run")] & names[("litecl", "compare")]


# ------------------------------------------------------------------ 9: fixed shapes
@needs_intel
@pytest.mark.parametrize("cmd", ["run", "compare"])
def test_fixed_shape_input_needs_resize(model, tmp_path, cmd):
    inp = tmp_path / "s.npz"
    np.savez(inp, input=np.float32(1.5))
    one_error(run_cli(cmd, model, "--device", DEV, "--inputs", inp), "'input'", "[4]", "got []", "--resize")
    r = run_cli(cmd, model, "--device", DEV, "--inputs", inp, "--resize")
    assert r.returncode == 0, r.stdout + r.stderr


@needs_intel
def test_dynamic_dimension_resizes(tmp_path):
    m = tmp_path / "d.tflite"
    m.write_bytes(cast_model("float32", "int8", [4, 2], dynamic=True))
    inp = tmp_path / "d.npz"
    np.savez(inp, input=np.arange(14, dtype=np.float32).reshape(7, 2))
    r = run_cli("compare", m, "--device", DEV, "--inputs", inp)
    assert r.returncode == 0, r.stdout + r.stderr
    np.savez(inp, input=np.zeros((7, 3), np.float32))  # dimension 1 is fixed
    one_error(run_cli("run", m, "--device", DEV, "--inputs", inp), "'input'", "[4, 2]", "[7, 3]", "[-1, 2]")


@needs_intel
def test_signature_fixed_shape(sigmodel, tmp_path):
    inp = tmp_path / "s.npz"
    np.savez(inp, input1=np.zeros([2, 4], np.float32), input2=np.zeros([4], np.float32))
    one_error(run_cli("run", sigmodel, "--device", DEV, "--signature", "add", "--inputs", inp),
              "'input1'", "[4]", "[2, 4]")


# ------------------------------------------------------------------ 10: --full-range
def test_random_inputs_full_range():
    details = [{"name": n, "dtype": np.dtype(t), "shape": np.array([1 << 20])}
               for n, t in (("f32", "float32"), ("f16", "float16"), ("i16", "int16"),
                            ("u16", "uint16"), ("i32", "int32"), ("b", "bool"), ("c", "complex64"))]
    mild = random_inputs(details, 0)
    full = random_inputs(details, 0, full_range=True)
    assert all(np.isfinite(mild[n]).all() for n in ("f32", "f16"))
    assert mild["i16"].max() < 10
    assert np.isinf(full["f16"]).any()  # 2 of 2^16 patterns (f32: 2 of 2^32, too rare to test)
    for n in ("f32", "f16"):
        v = full[n]
        assert np.isnan(v).any() and (np.abs(v[np.isfinite(v)]) > 1e4).any()
        assert ((v != 0) & (np.abs(v) < np.finfo(v.dtype).tiny)).any()  # subnormals
    assert (np.signbit(full["f16"]) & (full["f16"] == 0)).any()  # -0.0
    assert full["i16"].min() < -10000 and full["i16"].max() > 10000 and full["u16"].max() > 60000
    assert 0 <= mild["i32"].min() and mild["i32"].max() < 10  # indices stay valid by default
    assert full["i32"].min() < -(1 << 30) and full["i32"].max() > 1 << 30  # issue 16: full range
    assert full["b"].dtype == np.bool_ and full["c"].dtype == np.complex64
    again = random_inputs(details, 0, full_range=True)
    assert all(np.array_equal(full[k].view(np.uint8), again[k].view(np.uint8)) for k in full)


@needs_intel
@pytest.mark.parametrize("src,dst", [("float16", "float32"), ("float32", "int16"), ("int16", "float16")])
def test_compare_full_range(tmp_path, src, dst):
    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model(src, dst, [2048]))
    r = run_cli("compare", m, "--device", DEV, "--full-range", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["all_bit_exact"]
    r = run_cli("run", m, "--device", DEV, "--full-range", "--seed", "3")
    assert r.returncode == 0, r.stderr


@needs_intel
@pytest.mark.parametrize("sig", ["encode", "decode"])
def test_bench_signature(sig, tmp_path):
    from conftest import shared_model

    m = shared_model("lyra_quantizer.tflite")
    out = tmp_path / "b.json"
    r = run_cli("bench", m, "--device", DEV, "--signature", sig, "--json", out, "--num_runs", "2",
                "--warmup_runs", "0", "--min_secs", "0", "--warmup_min_secs", "0", "--profile_runs", "1")
    assert r.returncode == 0, r.stderr
    assert f"INFO: signature: {sig}" in r.stdout
    rep = json.loads(out.read_text())
    assert rep["runs"]["count"] >= 2 and rep["litert"]["count"] >= 2 and rep["signature"] == sig
    # the runner's invoke timed apart from its call (which sets, invokes and reads)
    for k in ("runs", "litert"):
        assert rep[f"{k}_with_copies"]["count"] == rep[k]["count"]
        assert 0 < rep[k]["min"] <= rep[f"{k}_with_copies"]["max"], rep
    # the rows are the launches of the signature's subgraph's delegated partitions, in
    # order: every node the delegate placed on OpenCL there, once (decode: subgraph 0, encode 1)
    it = litecl.Interpreter(model_path=str(m), device=DEV, quiet=True)
    si = {"decode": 0, "encode": 1}[sig]
    want = [p["index"] for p in it.placement() if p["subgraph"] == si and p["placement"] == "opencl"]
    rows = [row for row in rep["launches"] if row["node"] != "(other)"]
    assert {row["subgraph"] for row in rows} == {si}
    assert sorted(i for row in rows for i in row["nodes"]) == want
    assert [row["partition"] for row in rows] == sorted(row["partition"] for row in rows)
    assert any(row["avg_ms"] > 0 for row in rows)  # event-profiled kernel times
    assert f"INFO: subgraph {si}: Replacing {len(want)} out of" in r.stdout
    one_error(run_cli("bench", m, "--device", DEV, "--signature", "nope"), "signature")


@pytest.mark.parametrize("script,args,fragment", [
    ("bench_roofline.py", ["--sizes", "abc"], "--sizes"),
    ("bench_roofline.py", ["--sizes", "40"], "0..30"),
    ("bench_roofline.py", ["--pairs", "float32:bogus"], "argument --pairs: bad pairs"),
    ("bench_roofline.py", ["--repeats", "0"], "--repeats"),
    ("bench_e2e.py", ["--size", "-3"], "--size"),
    ("bench_e2e.py", ["--rounds", "x"], "--rounds"),
])
def test_benchmark_scripts_reject_bad_arguments_in_one_line(script, args, fragment):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args, "--device", DEV],
                       capture_output=True, text=True, timeout=300, cwd=ROOT / "benchmarks")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert fragment in r.stderr.strip().splitlines()[-1]


@needs_intel
def test_inspect_and_bench_show_fused_kernels(tmp_path):
    """A fused CAST-ADD-CAST chain: inspect names the group; bench's per-launch table
    times the one kernel that runs the three nodes."""
    import json

    from models.builders import chain_model

    p = tmp_path / "chain.tflite"
    p.write_bytes(chain_model(["uint8", "float32", ("add", np.float32(1.0), "NONE"), "float16"], (4096,)))
    r = run_cli("inspect", p, "--device", DEV)
    assert r.returncode == 0 and "Fused into one OpenCL kernel: subgraph 0 nodes 0, 1, 2 (CAST, ADD, CAST)." in r.stdout
    r = run_cli("inspect", p, "--device", DEV, "--json")
    assert json.loads(r.stdout)["fused"] == [{"subgraph": 0, "nodes": [0, 1, 2], "ops": ["CAST", "ADD", "CAST"]}]
    out = tmp_path / "b.json"
    r = run_cli("bench", p, "--device", DEV, "--num_runs", "3", "--min_secs", "0", "--warmup_runs", "1",
                "--warmup_min_secs", "0", "--json", out)
    assert r.returncode == 0, r.stderr
    table = r.stdout[r.stdout.index("Run Order"):].splitlines()
    (row,) = [ln for ln in table if "CAST+ADD+CAST" in ln]
    assert row.split()[1] == "0-2" and "fused: one kernel for nodes 0, 1, 2" in row
    first = json.loads(out.read_text())["launches"][0]
    assert first["node"] == "CAST+ADD+CAST" and first["nodes"] == [0, 1, 2] and first["runs"] == 10
    assert first["avg_ms"] > 0 and not first["folded"]


@needs_intel
def test_unwritable_output_paths_fail_before_running(tmp_path):
    """/proc passes permission checks as root but takes no new files: refused up front,
    and a writable new path is not left behind by the check."""
    p = tmp_path / "m.tflite"
    p.write_bytes(cast_model("float32", "float16", [8]))
    for args in (("bench", p, "--json", "/proc/x.json"), ("run", p, "--output", "/proc/x.npz")):
        r = run_cli(*args, "--device", DEV)
        one_error(r, "cannot write")
        assert "x." in r.stderr
    r = run_cli("bench", p, "--device", DEV, "--json", tmp_path / "b.json", "--num_runs", "2", "--min_secs", "0",
                "--warmup_min_secs", "0")
    assert r.returncode == 0 and (tmp_path / "b.json").exists()


@needs_intel
def test_signature_input_names_without_signature_get_a_hint(tmp_path):
    from conftest import shared_model

    m = shared_model("multi_signature_model.tflite")
    npz = tmp_path / "in.npz"
    np.savez(npz, a=np.ones([10, 10], np.float32), b=np.ones([10, 10], np.float32))
    one_error(run_cli("run", m, "--device", DEV, "--inputs", npz),  # every signature taking them
              "signatures 'add', 'mul', 'sub' take those inputs: pass --signature with one of them")
    r = run_cli("run", m, "--device", DEV, "--inputs", npz, "--signature", "add")
    assert r.returncode == 0, r.stderr
    r = run_cli("bench", m, "--device", DEV, "--num_threads", "1", "--num_runs", "1", "--min_secs", "0",
                "--warmup_min_secs", "0")
    assert r.returncode == 0, r.stderr
    # without --signature, run and bench say which one ran (subgraph 0) and name the others
    note = "INFO: subgraph 0 (signature 'add') ran; the model has signatures 'add', 'mul', 'sub'"
    assert r.stdout.startswith(note), r.stdout
    r = run_cli("run", m, "--device", DEV)
    assert r.returncode == 0 and note in r.stderr and "INFO" not in r.stdout, (r.stdout, r.stderr)


def test_npz_inputs_in_the_other_byte_order_are_read_by_value(tmp_path, fast_device):
    """As Interpreter.set_tensor does (test_user_reports): the values, not the bytes."""
    m = tmp_path / "m.tflite"
    m.write_bytes(add_model("int32", [4], [4]))
    x = np.arange(4, dtype=">i4")
    np.savez(tmp_path / "in.npz", input1=x, input2=x)
    r = run_cli("run", m, "--device", fast_device, "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz")
    assert r.returncode == 0, r.stderr
    (out,) = np.load(tmp_path / "o.npz").values()
    assert out.tolist() == [0, 2, 4, 6]


def test_bench_profile_runs_zero_skips_the_table(model, tmp_path, fast_device):
    out = tmp_path / "b.json"
    r = run_cli("bench", model, "--device", fast_device, "--json", out, "--num_runs", "1",
                "--warmup_runs", "0", "--min_secs", "0", "--warmup_min_secs", "0", "--profile_runs", "0")
    assert r.returncode == 0, r.stderr
    assert "Run Order" not in r.stdout and "litecl / LiteRT" in r.stdout
    assert json.loads(out.read_text())["launches"] == []


def test_bench_names_streaming_stores_once():
    """bench's "what" column said "streaming stores" twice for a single-node launch
    (lowering's description has it already); a fused launch's gets it once."""
    import types

    from litecl.bench import _streaming_note

    src = "... __builtin_nontemporal_store(x, p) ..."
    single = types.SimpleNamespace(source=src, what="ADD float32 NONE, streaming stores")
    fused = types.SimpleNamespace(source=src, what="fused: one kernel for nodes 0, 1")
    plain = types.SimpleNamespace(source="b[i] = a[i];", what="CAST float32->int8")
    assert _streaming_note(single) == "" and _streaming_note(fused) == ", streaming stores"
    assert _streaming_note(plain) == ""


@pytest.mark.parametrize("command", ["run", "compare", "bench"])
def test_a_tensor_name_that_is_not_utf8_is_named_as_such(tmp_path, command):
    """LiteRT runs a model whose input name is not UTF-8, but its Python API's
    get_input_details cannot decode the name: the commands say so in one line instead of
    passing on the codec's message."""
    obj = schema.ModelT.InitFromPackedBuf(bytearray(cast_model("float32", "int8", [2, 3])), 0)
    obj.subgraphs[0].tensors[0].name = b"in\xffput"
    b = flatbuffers.Builder(1024)
    b.Finish(obj.Pack(b), file_identifier=b"TFL3")
    p = tmp_path / "badname.tflite"
    p.write_bytes(bytes(b.Output()))
    one_error(run_cli(command, p, "--device", "pocl" if not DEVICE_STATUS.get("pocl") else "auto"),
              "cannot read a tensor name of this model: it is not UTF-8", "b'in\\xffput'")


@pytest.mark.parametrize("argv", [["run", "{m}", "--inputs", ""], ["run", "{m}", "--output", " "],
                                  ["bench", "{m}", "--json", ""], ["compare", "{m}", "--inputs", ""]])
def test_an_empty_file_option_is_refused(tmp_path, fast_device, argv):
    """An empty --inputs/--output/--json (an unset shell variable) is one error line, exit
    2: it ran random inputs, or wrote nothing, and exited 0 (a trial's report)."""
    from models.builders import cast_model  # noqa: PLC0415

    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model("float32", "int32", [8]))
    r = subprocess.run([sys.executable, "-m", "litecl.cli", *[a.format(m=m) for a in argv], "--device", fast_device],
                       capture_output=True, text=True, timeout=120, env=dict(os.environ, LITECL_NO_SUPERVISOR="1"))
    assert r.returncode == 2, (r.returncode, r.stderr)
    flag = argv[2]
    assert r.stderr.strip().splitlines() == [f"error: {flag} is empty: name the file (or leave the option out)"], r.stderr


def test_get_tensor_while_python_exits(tmp_path, fast_device):
    """A large get_tensor from an atexit hook (litecl's host copy is split over threads,
    which Python refuses to start at exit) copies in one thread instead of raising."""
    code = f"""
import atexit, numpy as np, litecl
from models.builders import cast_model
it = litecl.Interpreter(model_content=cast_model("float32", "int32", [3000, 512]), device={fast_device!r}, quiet=True)
it.allocate_tensors()
it.set_tensor(it.get_input_details()[0]["index"], np.full((3000, 512), 7.5, np.float32))
it.invoke()
def last():
    out = it.get_tensor(it.get_output_details()[0]["index"])
    print("ok", int(out.sum()) == 3000 * 512 * 7, flush=True)
atexit.register(last)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd=str(Path(__file__).resolve().parents[1]),
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                           [str(Path(__file__).resolve().parents[1]), *filter(None, [os.environ.get("PYTHONPATH")])])))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-1500:]
    assert r.stdout.strip() == "ok True", r.stdout


def _no_operator_empty_output() -> bytes:
    """A model of no operators whose output int32[0, 4] is a tensor of its own with an
    empty buffer (TensorFlow's converter makes one of ``a + tf.zeros([0, 4], tf.int32)``):
    LiteRT refuses to read that output ("Invalid tensor size.")."""
    from models.builders import _model  # noqa: PLC0415

    m = _model(cast_model("int32", "float32", [0, 4]))
    sg = m.subgraphs[0]
    sg.operators = []
    out = sg.tensors[sg.outputs[0]]
    out.type = sg.tensors[sg.inputs[0]].type
    out.buffer = len(m.buffers)
    buf = schema.BufferT()
    buf.data = []  # present and empty, as the converter writes it (absent: LiteRT allocates it)
    m.buffers.append(buf)
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_an_output_litert_cannot_read_is_one_error_line(tmp_path):
    """compare and run on an output LiteRT refuses to read: one error line naming it and
    LiteRT's words, exit 2 (it was an internal error); inspect does not claim it reads as
    an empty array."""
    path = tmp_path / "empty_out.tflite"
    path.write_bytes(_no_operator_empty_output())
    for cmd in ("compare", "run"):
        r = run_cli(cmd, path, "--device", DEV)
        assert r.returncode == 2, (cmd, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: LiteRT cannot read output") \
            and "Invalid tensor size" in lines[0] and "internal error" not in lines[0], (cmd, r.stderr)
    r = run_cli("inspect", path, "--device", DEV)
    assert r.returncode == 0, r.stderr
    assert "reads as an empty array (as in LiteRT)" not in r.stdout and "refuses to read it" in r.stdout


@needs_intel
def test_compare_says_why_no_node_ran_on_opencl(tmp_path):
    """A compare where litecl takes nothing says why in a note (the reason most CAST/ADD
    nodes stay on LiteRT, with the count), not only "nodes on OpenCL: 0/1"."""
    m = tmp_path / "c64.tflite"
    m.write_bytes(cast_model("int64", "float32", [7]))
    r = run_cli("compare", m, "--device", f"{DEV}:profile=noint64")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nodes on OpenCL: 0/1" in r.stdout
    notes = [ln for ln in r.stdout.splitlines() if ln.startswith("note: no CAST/ADD node ran on OpenCL")]
    assert len(notes) == 1 and "1 of 1 stay on LiteRT because int64 needs 64-bit integers" in notes[0], r.stdout
    r = run_cli("compare", m, "--device", DEV)
    assert r.returncode == 0 and "nodes on OpenCL: 1/1" in r.stdout and "note: no CAST/ADD" not in r.stdout, r.stdout


@needs_intel
def test_inspect_inputs_plans_at_their_shapes(tmp_path):
    """inspect --inputs runs the model once on them: the placement and kernel rows are
    those of the given shapes (a CAST whose first dimension is known only at invoke);
    without it, the declared shapes. Inputs that do not match the model are one error."""
    m = tmp_path / "dyn.tflite"
    m.write_bytes(cast_model("float32", "int8", [4, 3], dynamic=True))
    r = run_cli("inspect", m, "--device", DEV, "--json")
    assert r.returncode == 0, r.stderr
    (node,) = json.loads(r.stdout)["nodes"]
    assert node["inputs"][0]["shape"] == [4, 3], node
    name = node["inputs"][0]["name"]
    np.savez(tmp_path / "in.npz", **{name: np.ones((9, 3), np.float32)})
    r = run_cli("inspect", m, "--device", DEV, "--json", "--inputs", tmp_path / "in.npz")
    assert r.returncode == 0, r.stderr
    (node,) = json.loads(r.stdout)["nodes"]
    assert node["inputs"][0]["shape"] == [9, 3] and node["placement"] == "opencl" and node["kernel"], node
    np.savez(tmp_path / "bad.npz", nope=np.ones((9, 3), np.float32))
    one_error(run_cli("inspect", m, "--device", DEV, "--inputs", tmp_path / "bad.npz"), "unknown input name")


@needs_intel
def test_compare_names_the_differing_outputs_and_litert_s_reused_intermediate(tmp_path):
    """A signature that also names an intermediate tensor (found by a fresh user): LiteRT
    alone reuses its memory for a later node's result, so its "mid" is not the tensor's
    value. compare says which outputs differ (1 of 2, by name), not "all outputs", and
    notes that litecl's "mid" equals LiteRT's with experimental_preserve_all_tensors."""
    import flatbuffers

    from models.builders import chain_model

    base = chain_model(["float32", ("add", np.float32(1.5)), "int32", ("add", np.int32(3)), "float16"], (2, 3))
    m = schema.ModelT.InitFromPackedBuf(bytearray(base), 0)
    idx = next(i for i, t in enumerate(m.subgraphs[0].tensors) if t.name.decode() == "t2_cast_int32")
    tm = schema.TensorMapT()
    tm.name, tm.tensorIndex = "mid", idx
    m.signatureDefs[0].outputs.append(tm)
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    p = tmp_path / "mid_sig.tflite"
    p.write_bytes(bytes(b.Output()))
    key = m.signatureDefs[0].signatureKey.decode()
    r = run_cli("compare", p, "--device", DEV, "--signature", key)
    out = r.stdout
    assert r.returncode == 1 and "1 of 2 output(s) DIFFER (mid)" in out, out + r.stderr
    assert "note: mid: litecl's value equals LiteRT's with experimental_preserve_all_tensors" in out, out


def test_bench_runs_signature_inputs_at_their_shapes(tmp_path):
    """bench with an .npz keyed by signature input names allocates at those shapes, as
    run and compare do (it once allocated at the declared ones, which LiteRT cannot
    prepare here)."""
    m = tmp_path / "m.tflite"
    m.write_bytes(unpreparable_add_model())
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.arange(3, dtype=np.float32), y=np.full(3, 0.5, np.float32))
    for cmd in ("run", "compare", "bench"):
        extra = ("--num_runs", "1", "--min_secs", "0", "--warmup_min_secs", "0") if cmd == "bench" else ()
        r = run_cli(cmd, m, "--device", DEV, "--inputs", npz, *extra)
        assert r.returncode == 0, (cmd, r.stderr)
    # without inputs: one error that says which shapes it tried and what to pass
    one_error(run_cli("bench", m, "--device", DEV, "--num_runs", "1"), "declared shapes", "--inputs FILE.npz")


def test_compare_says_which_signature_has_no_cast_or_add():
    from conftest import shared_model  # noqa: PLC0415

    r = run_cli("compare", shared_model("multi_signature_model.tflite"), "--device", DEV)
    assert r.returncode == 0, r.stderr
    for sig in ("mul", "sub"):
        assert f"note: the subgraph of signature '{sig}' has no CAST or ADD node" in r.stdout, r.stdout
    assert "the model has no CAST or ADD node" not in r.stdout


def _gather_model() -> bytes:
    """GATHER of a constant [10] at int32 indices [3] (the input), then a CAST to float16:
    an index out of range fails LiteRT's invoke."""
    from models.builders import _Graph  # noqa: PLC0415

    g = _Graph()
    params = g.constant("params", "float32", np.arange(10, dtype=np.float32))  # random int32: [0, 10)
    idx = g.tensor("idx", "int32", (3,))
    mid = g.tensor("mid", "float32", (3,))
    out = g.tensor("out", "float16", (3,))
    g.op(schema.BuiltinOperator.GATHER, [params, idx], [mid], options_type=schema.BuiltinOptions.GatherOptions,
         options=schema.GatherOptionsT())
    g.op(schema.BuiltinOperator.CAST, [mid], [out])
    g.inputs, g.outputs = [idx], [out]
    return g.finish()


@needs_intel
def test_full_range_inputs_litert_cannot_run_say_so(tmp_path):
    """compare --full-range on a model whose integer input is an index: LiteRT alone fails,
    and the error says the values are the cause (it named only the shapes), with LiteRT's
    run-together messages parted ("out of boundsNode number ..." before)."""
    m = tmp_path / "gather.tflite"
    m.write_bytes(_gather_model())
    assert run_cli("compare", m, "--device", DEV).returncode == 0  # indices in range: runs, bit-exact
    line = one_error(run_cli("compare", m, "--device", DEV, "--full-range"),
                     "LiteRT without the delegate cannot run the model", "(--full-range: integers the model uses as "
                     "indices or sizes are then mostly out of range)", "--inputs FILE.npz")
    assert "; Node number 0 (GATHER) failed to invoke" in line and "boundsNode" not in line, line


def test_an_output_file_never_overwrites_the_model_or_the_inputs(tmp_path):
    """bench --json/--trace, inspect --html and run --output naming the model (or the
    inputs file) this command reads: one error line before any work, the file intact (a
    fresh user's tab completion replaced a model with JSON, exit 0)."""
    m = tmp_path / "m.tflite"
    m.write_bytes(add_model("float32", [4], [4]))
    raw = m.read_bytes()
    ins = tmp_path / "in.npz"
    np.savez(ins, **{"x": np.ones(4, np.float32)})
    for args, flag in ((("bench", m, "--json", m), "JSON file"), (("bench", m, "--trace", m), "trace file"),
                       (("inspect", m, "--html", tmp_path / "." / "m.tflite"), "HTML file"),
                       (("run", m, "--inputs", ins, "--output", tmp_path / "in"), "outputs file")):
        one_error(run_cli(*args, "--device", "oclgrind"), f"cannot write {flag}", "which this command reads")
        assert m.read_bytes() == raw
    assert np.load(ins)["x"].tolist() == [1.0] * 4
    one_error(run_cli("bench", m, "--json", tmp_path / "o", "--trace", tmp_path / "o", "--device", "oclgrind"),
              "--json and --trace both name")


def test_an_inputs_file_with_a_member_that_is_no_npy_array_is_one_error(tmp_path):
    """A zip whose member is not an .npy array (numpy hands it back as bytes): one error
    line naming the entry, not "internal error (AttributeError ...)" (a fresh user's)."""
    import zipfile

    m = tmp_path / "m.tflite"
    m.write_bytes(add_model("float32", [4], [4]))
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr("x.npy", b"not an array")
    one_error(run_cli("run", m, "--inputs", bad, "--device", "oclgrind"), "entry 'x' is no .npy array")


def test_a_model_this_litert_lacks_an_operator_of_gets_no_inputs_hint(tmp_path):
    """compare and export of a model with a custom operator no resolver has: LiteRT's
    words without the "give inputs it runs with --inputs" or "give the shapes it runs at"
    hint, which no inputs file can satisfy (fresh users' reports: mediapipe's
    selfie_segmentation); export says this LiteRT lacks an operator the model uses."""
    from models.builders import custom_op_model

    m = tmp_path / "custom.tflite"
    m.write_bytes(custom_op_model())
    line = one_error(run_cli("compare", m, "--device", "oclgrind"), "unresolved custom op")
    assert "--inputs" not in line, line
    line = one_error(run_cli("export", m, "--out", tmp_path / "e", "--device", "oclgrind"), "unresolved custom op",
                     "this LiteRT lacks an operator the model uses")
    assert "--inputs" not in line, line
    # inspect too, and no reference="xnnpack" hint: that resolver has MediaPipe's ops only
    # (a fresh user's Coral edgetpu-custom-op models got both)
    line = one_error(run_cli("inspect", m, "--device", "oclgrind"), "unresolved custom op")
    assert "--inputs" not in line and "reference=" not in line, line


def test_a_file_whose_size_reads_zero_but_holds_bytes_is_read():
    """/proc/self/status (procfs reports size 0): "not a TFLite model", not "empty file"."""
    import pathlib

    if not pathlib.Path("/proc/self/status").exists():
        pytest.skip("no /proc here")
    from litecl.model import ModelError, load_model

    with pytest.raises(ModelError, match="not a TFLite model"):
        load_model("/proc/self/status")


def _named_add(x_name: str, y_name: str, out_name: str) -> bytes:
    from ai_edge_litert import schema_py_generated as S

    from models.builders import _Graph

    g = _Graph()
    x, y = g.tensor(x_name, "float32", (4,)), g.tensor(y_name, "float32", (4,))
    out = g.tensor(out_name, "float32", (4,))
    g.op(S.BuiltinOperator.ADD, [x, y], [out], options_type=S.BuiltinOptions.AddOptions, options=S.AddOptionsT())
    g.inputs, g.outputs = [x, y], [out]
    return g.finish()


def test_names_from_the_model_reach_the_terminal_escaped_and_twin_inputs_are_refused(tmp_path, fast_device):
    """A tensor name holding terminal escapes is printed escaped by compare and run (a
    fresh user's crafted name cleared the screen and recoloured lines); two inputs of one
    name with --inputs: one error (both took the same array, exit 0)."""
    m = tmp_path / "evil.tflite"
    m.write_bytes(_named_add("x", "y", "o\x1b[2J\x1b[31mRED"))
    for cmd in ("compare", "run"):
        r = run_cli(cmd, m, "--device", fast_device)
        assert r.returncode == 0 and "\x1b" not in r.stdout and "\\x1b[2J" in r.stdout, (cmd, r.stdout, r.stderr)
    twins = tmp_path / "twins.tflite"
    twins.write_bytes(_named_add("x", "x", "out"))
    ins = tmp_path / "x.npz"
    np.savez(ins, x=np.ones(4, np.float32))
    one_error(run_cli("run", twins, "--inputs", ins, "--device", fast_device), "several inputs named 'x'")


def test_bench_table_counts_every_launch_of_a_while_body(fast_device):
    """launch_profile sums a WHILE body's launches over the run (7 iterations: 7 launches a
    run); it kept the last iteration's time only, so a fresh user's 100-iteration loop read
    0.13% of the inference."""
    from conftest import tf_model
    from litecl.bench import launch_profile

    it = litecl.Interpreter(model_content=tf_model("while_cast"), device=fast_device, quiet=True)
    it.allocate_tensors()
    x, n = it.get_input_details()
    it.set_tensor(x["index"], np.arange(5, dtype=np.float32))
    it.set_tensor(n["index"], np.array(7, np.int32))
    rows = launch_profile(it.delegate, it.invoke, runs=2)
    body = [r for r in rows if r["subgraph"] not in (0, None)]
    assert body and all(r["per_run"] == 7 and r["runs"] == 2 for r in body), rows
    assert all(r["per_run"] == 1 for r in rows if r["subgraph"] == 0), rows


def test_a_symbolic_link_to_nothing_is_named_as_such(tmp_path):
    """A link loop, or a link whose target is gone, given as the model: one error naming
    the link (it read "model file not found", although the path is there)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "gone").symlink_to(tmp_path / "missing.tflite")
    for link in ("a", "gone"):
        for cmd in (("compare",), ("export", "--out", tmp_path / "e")):
            one_error(run_cli(cmd[0], tmp_path / link, *cmd[1:]), "is a symbolic link that leads to no file")


def test_a_name_over_the_file_system_s_limit_is_an_error_about_the_file(tmp_path, capsys, fast_device):
    """A path whose name is longer than the file system allows (ENAMETOOLONG): one `error:`
    line naming the file and the reason, exit 2 (it said "internal error", a litecl bug,
    for the model path and export's --out; a fresh user's report)."""
    from litecl.cli import main
    from models.builders import cast_model

    long = "x" * 300
    assert main(["run", str(tmp_path / f"{long}.tflite")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read model path ") and err.rstrip().endswith("File name too long"), err
    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model("float32", "int32", [4]))
    assert main(["export", str(m), "--out", str(tmp_path / long), "--device", fast_device]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and err.rstrip().endswith("File name too long"), err


@pytest.mark.parametrize("where", ["/dev/stdout", "/dev/null", "-"])
def test_run_output_refuses_a_device_or_dash(where, tmp_path, capsys, fast_device):
    """`litecl run --output /dev/stdout` wrote a new regular file /dev/stdout.npz (as root),
    `--output -` a file ./-.npz: one error line now, exit 2, nothing written."""
    from litecl.cli import main
    from models.builders import cast_model

    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model("float32", "int32", [4]))
    before = set(os.listdir("/dev"))
    assert main(["run", str(m), "--output", where, "--device", fast_device]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot write outputs file {where}: it is "), err
    assert set(os.listdir("/dev")) == before and not os.path.exists("-.npz")


def test_compare_refuses_shapes_litert_aborts_on_as_run_does(tmp_path):
    """--inputs at a 9-D broadcast of a dynamic ADD: run refused it with one line, compare
    ran LiteRT alone into its abort (SIGABRT; the process itself without the supervisor,
    a fresh user's). Now compare says run's line, exit 2, with or without the supervisor."""
    m = tmp_path / "add9.tflite"
    m.write_bytes(add_model("float32", (1,) * 9, (1,) * 9, dynamic=True))
    npz = tmp_path / "in9.npz"
    np.savez(npz, input1=np.ones((2, 1, 2, 1, 2, 1, 2, 1, 2), np.float32),
             input2=np.ones((1, 2, 1, 2, 1, 2, 1, 2, 1), np.float32))
    for env in ({}, {"LITECL_NO_SUPERVISOR": "1"}):
        r = subprocess.run(CLI + ["compare", str(m), "--inputs", str(npz)], capture_output=True, text=True,
                           timeout=300, env={**os.environ, **env})
        err = [ln for ln in r.stderr.splitlines() if not ln.startswith("WARNING")]
        assert r.returncode == 2 and err[-1].startswith("error: ") and "above 8 dimensions" in err[-1], r.stderr
        assert "crashed" not in r.stderr


def test_a_signature_runner_refuses_a_second_thread(sigmodel):
    """Two threads on one litecl.Interpreter's signature runner: the second gets the
    Interpreter's "in use by another thread" LiteclError, as invoke does (they raced in
    LiteRT: a segfault in 2 of 4 runs, a fresh user's), and the runner works after."""
    it = litecl.Interpreter(model_path=sigmodel, quiet=True)
    name = next(iter(it.get_signature_list()))
    run = it.get_signature_runner(name)
    args = {k: np.ones(v["shape"], v["dtype"]) for k, v in run.get_input_details().items()}
    it._busy.acquire()
    try:
        with pytest.raises(litecl.LiteclError, match="in use by another thread"):
            run(**args)
    finally:
        it._busy.release()
    assert run(**args)


def test_a_file_named_with_a_trailing_slash_is_refused(tmp_path):
    """casts.tflite/ names a folder; the OS refuses it (ENOTDIR) and pathlib dropped the
    slash, so litecl read the file (a fresh user's): one error line, as for the API."""
    m = tmp_path / "casts.tflite"
    m.write_bytes(cast_model("int8", "int16", [4]))
    one_error(run_cli("run", f"{m}/"), "ends with a slash")
    with pytest.raises(litecl.ModelError, match="ends with a slash"):
        litecl.Interpreter(model_path=f"{m}/", quiet=True)
    assert run_cli("run", m).returncode == 0


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_model_litert_refuses_at_any_shape_says_so(tmp_path, dynamic):
    """An int16 ADD with power-of-two scales whose input shifts are both non-zero (LiteRT's
    add.cc refuses it in Prepare): export named the shapes as the problem, "give the shapes
    it runs at", which no inputs file can satisfy (a fresh user's report). Fixed input
    shapes: LiteRT refuses the model itself; -1 ones: it also fails with each -1 at 2."""
    from models.builders import add_model

    m = tmp_path / "pot.tflite"
    m.write_bytes(add_model("int16", [4], [4], quant=((0.5, 0), (0.25, 0), (1.0, 0)), pot_scale_int16=True,
                            dynamic=dynamic))
    line = one_error(run_cli("export", m, "--out", tmp_path / "e", "--device", "oclgrind"), "input1_shift")
    if dynamic:
        assert "nor with each -1 of them at 2" in line, line
    else:
        assert "its input shapes are fixed: LiteRT refuses the model itself" in line and "--inputs" not in line, line


@needs_intel
def test_a_signature_s_unwritten_output_is_named_as_its_table_row():
    """compare --signature encode (lyra_quantizer): the note on an output no operator
    writes names it as the table's row does, the signature's name, with its tensor
    beside it (it named the tensor alone: a fresh user's report)."""
    from conftest import shared_model

    r = run_cli("compare", shared_model("lyra_quantizer.tflite"), "--device", DEV, "--signature", "encode")
    assert r.returncode == 0, r.stderr
    assert "note: output 'output_1' (tensor 'StatefulPartitionedCall_1:1', int32[]) is written by no operator: " \
        "it is a constant of the model" in r.stdout, r.stdout
