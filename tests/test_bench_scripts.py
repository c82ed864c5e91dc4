"""The benchmark scripts' command lines (benchmarks/*.py), without running a benchmark: a bad
or unusable --device is one `error: ...` line and exit status 2 (common.run_script), every
option's help names its default, and bench_roofline's markdown (the per-size summary, and
--remd rewriting roofline.md from a roofline.json)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
if str(BENCH) not in sys.path:  # the scripts import their shared code as `common`
    sys.path.insert(0, str(BENCH))

import bench_roofline  # noqa: E402

SCRIPTS = ["bench_e2e.py", "bench_latency.py", "bench_roofline.py", "bench_tiling.py", "bench_streaming.py"]


def run_script(script: str, *args, cwd=BENCH) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH / script), *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("script", SCRIPTS)
def test_bad_device_is_one_error_line_and_status_2(script, tmp_path):
    # a spec no machine has: open_device fails fast, before any kernel or model is built
    r = run_script(script, "--device", "nosuchdevice", "--out", tmp_path / "out")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "nosuchdevice" in lines[0]
    assert not (tmp_path / "out").exists()  # nothing written


def test_run_script_turns_litecl_errors_into_status_2(capsys, monkeypatch):
    import common
    import litecl

    monkeypatch.delenv("LITECL_DEBUG", raising=False)

    def bad(argv):
        raise litecl.DeviceError("no device\nat all")

    assert common.run_script(bad) == 2
    assert capsys.readouterr().err == "error: no device at all\n"
    assert common.run_script(lambda argv: 0) == 0

    def bug(argv):  # not a litecl error: a bug keeps its traceback
        raise KeyError("x")

    with pytest.raises(KeyError):
        common.run_script(bug)


def test_latency_help_lists_defaults():
    r = run_script("bench_latency.py", "--help")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())  # argparse wraps help lines
    for opt, default in (("--device", "(default: auto)"), ("--n", "(default 4096)"),
                         ("--runs", "(default 2000)"), ("--out", "(default bench_out)")):
        assert opt in text and default in text, (opt, default, r.stdout)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_option_help_names_its_default(script):
    r = run_script(script, "--help")
    assert r.returncode == 0, r.stderr
    options = r.stdout.split("\noptions:\n", 1)[1]
    # one entry per option (an indented "--name" line and its wrapped help lines)
    entries, cur = [], ""
    for line in options.splitlines():
        if line.startswith("  -"):  # continuation lines are indented further
            entries.append(cur)
            cur = line
        else:
            cur += " " + line.strip()
    entries.append(cur)
    for e in entries[1:]:
        name = e.split()[0].rstrip(",")
        if name in ("-h", "--geometry", "--no-real", "--launch", "--replot", "--remd"):
            continue  # flags and options without a default
        assert "default" in e, (script, e)


@pytest.mark.parametrize("script,args,fragment", [
    ("bench_latency.py", ["--runs", "0"], "--runs"),
    ("bench_latency.py", ["--n", "x"], "--n"),
    ("bench_tiling.py", ["--sizes", "16,x"], "--sizes"),
    ("bench_tiling.py", ["--repeats", "0"], "--repeats"),
    ("bench_tiling.py", ["--warmup", "-1"], "--warmup"),
    ("bench_roofline.py", ["--launch", "gpu.nosuch=1"], "bad --launch"),
    ("bench_roofline.py", ["--launch", "gpu.local_size=x"], "bad --launch"),
    ("bench_roofline.py", ["--remd", "/nonexistent/roofline.json"], "--remd"),
])
def test_bad_arguments_are_usage_errors(script, args, fragment):
    r = run_script(script, *args, "--device", "nosuchdevice")  # the arguments fail first
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert "error:" in last and fragment in last, r.stderr


def _rows():
    """Fake roofline rows: 3 kernels at 2^10 (1 at >= 80% of the adjacent copy, one timed at
    0 s: nan ratios) and 4 at 2^12 (3 at >= 80%)."""
    def row(op, s, d, n, pct, copy):
        return {"op": op, "src": s, "dst": d, "n": n, "seconds": 1e-6, "gbps": copy * pct / 100,
                "roof_pct": pct / 2, "copy_gbps_adjacent": copy, "adjacent_pct": pct}
    nan = float("nan")
    return [row("CAST", "int8", "float32", 1 << 10, 50.0, 10.0),
            row("CAST", "float32", "int8", 1 << 10, 90.0, 20.0),
            row("ADD", "int32", "int32", 1 << 10, nan, 30.0),
            row("CAST", "int8", "float32", 1 << 12, 79.9, 100.0),
            row("CAST", "float32", "int8", 1 << 12, 80.0, 110.0),
            row("ADD", "int32", "int32", 1 << 12, 120.0, 120.0),
            row("ADD", "float32", "float32", 1 << 12, 95.0, 130.0)]


def _summary(md: str) -> dict[str, list[str]]:
    """The per-size table's rows: '2^k' -> the other cells."""
    head = "| size (elements) | kernels | >= 80% of adjacent copy | median % of adjacent copy | " \
           "median adjacent copy GB/s |"
    lines = md.splitlines()
    i = lines.index(head)
    assert lines[i + 1] == "|---|---|---|---|---|"
    out = {}
    for line in lines[i + 2:]:
        if not line.startswith("| 2^"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[cells[0]] = cells[1:]
    return out


def test_roofline_markdown_per_size_summary():
    md = bench_roofline.markdown(_rows(), 75.0, "Test platform: test device; LaunchConfig(...)", 7)
    assert md.startswith("Device: Test platform: test device; LaunchConfig(...); float4 copy roof 75.0 GB/s")
    assert "medians of 7" in md
    summary = _summary(md)
    assert summary == {"2^10": ["3", "1", "70%", "20.0"],  # median of the finite 50, 90
                       "2^12": ["4", "3", "88%", "115.0"]}  # median 87.5 -> 88%
    # the summary comes before the per-kernel table, which lists the largest size only
    assert md.index("| size (elements) |") < md.index("| op | src -> dst | GB/s at 2^12 |")
    per_kernel = md[md.index("| op | src -> dst |"):]
    assert per_kernel.count("| CAST |") == 2 and per_kernel.count("| ADD |") == 2
    assert "| ADD | float32 -> float32 | 123.5 | 48% | 130.0 | 95% |" in per_kernel
    assert md.rstrip().endswith("3 of 4 kernels at >= 80% of the adjacent copy at 2^12.")


def test_roofline_markdown_without_rows():
    md = bench_roofline.markdown([], 10.0, "dev")
    assert md.startswith("Device: dev;") and "No kernels measured." in md


def test_remd_rewrites_markdown_from_json(tmp_path):
    src = tmp_path / "in" / "roofline.json"
    src.parent.mkdir()
    data = {"device": "Fake Device", "copy_gbps": 42.0, "rows": _rows()}
    src.write_text(json.dumps(data, indent=2, default=float))  # as write_outputs writes it (NaN)
    out = tmp_path / "out"
    r = run_script("bench_roofline.py", "--remd", src, "--out", out)
    assert r.returncode == 0, r.stderr
    md = (out / "roofline.md").read_text()
    assert md == bench_roofline.markdown(json.loads(src.read_text())["rows"], 42.0, "Fake Device")
    assert md.startswith("Device: Fake Device; float4 copy roof 42.0 GB/s")
    assert _summary(md)["2^12"] == ["4", "3", "88%", "115.0"]
    assert sorted(p.name for p in out.iterdir()) == ["roofline.md"]  # no plot, no JSON rewritten
    assert src.read_text() == json.dumps(data, indent=2, default=float)  # the JSON is left as it was


def test_remd_rejects_a_json_that_is_not_a_roofline(tmp_path):
    bad = tmp_path / "roofline.json"
    bad.write_text(json.dumps({"device": "d", "copy_gbps": 1.0, "rows": [{"op": "CAST"}]}))
    r = run_script("bench_roofline.py", "--remd", bad, "--out", tmp_path / "out")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "not a readable roofline.json" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("script,args,fragment", [
    ("bench_init.py", ["nosuch.tflite", "--device", "pocl"], "no such model file"),
    ("bench_init.py", ["{m}", "--device", "nosuchdevice"], "nosuchdevice"),
    ("bench_init.py", ["{m}", "--repeats", "0"], "--repeats"),
    ("bench_models.py", ["nosuch.tflite", "--device", "pocl"], "no such model file"),
    ("bench_models.py", ["{m}", "--device", "nosuchdevice"], "nosuchdevice"),
    ("bench_models.py", ["{m}", "--placements", "some"], "--placements"),
])
def test_model_scripts_refuse_in_one_line(script, args, fragment, tmp_path):
    from models.builders import add_model  # noqa: PLC0415

    m = tmp_path / "m.tflite"
    m.write_bytes(add_model("float32", [4], [4]))
    r = run_script(script, *[a.format(m=m) for a in args])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], r.stderr


def test_bench_init_times_litecl_beside_litert(tmp_path, fast_device):
    """Every model LiteRT runs gets a row with both figures; one LiteRT cannot run is named
    and left out of the totals."""
    from models.builders import add_model, cast_model  # noqa: PLC0415

    (tmp_path / "a.tflite").write_bytes(add_model("float32", [4], [4]))
    (tmp_path / "b.tflite").write_bytes(cast_model("float32", "int8", [33]))
    (tmp_path / "bad.tflite").write_bytes(b"not a model at all, just bytes")
    out = tmp_path / "init.json"
    r = run_script("bench_init.py", tmp_path, "--device", fast_device, "--repeats", "2", "--json", out)
    assert r.returncode == 0, r.stderr
    rows = json.loads(out.read_text())
    assert [x["model"] for x in rows] == ["a.tflite", "b.tflite"]
    assert all(x[k] > 0 for x in rows for k in ("litecl_ms", "litert_ms", "first_litecl_ms", "first_litert_ms"))
    assert "bad.tflite" in r.stdout and "LiteRT builtin cannot run it" in r.stdout
    assert "over 2 models" in r.stdout


def test_bench_e2e_takes_the_placement(tmp_path, fast_device):
    r = run_script("bench_e2e.py", "--device", fast_device, "--placement", "auto", "--size", "64",
                   "--small", "8", "--no-real", "--rounds", "1", "--per-round", "1", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "e2e.md").read_text()
    assert "placement auto" in md
    rows = json.loads((tmp_path / "e2e.json").read_text())["rows"]
    assert all(x["partitions"] == 0 and x["opencl_nodes"] == 0 for x in rows)  # 64 elements: auto keeps them on LiteRT


def test_native_transfer_floor_pieces(fast_device, tmp_path):
    """bench_native's transfer floor: partition_bytes gives each partition's bytes in (not
    constants) and out, staged_round_trip_us a round trip that grows with them."""
    import bench_native
    import numpy as np

    from models.builders import add_model

    m = tmp_path / "m.tflite"
    m.write_bytes(add_model("float32", [1000], [1000], const2=1.0))  # one input of 4000 bytes, a constant
    ins = {"input1": np.ones(1000, np.float32)}
    assert bench_native.partition_bytes(m, fast_device, "all", ins) == [(4000, 4000)]
    import litecl

    dev = litecl.open_device(fast_device)
    small = bench_native.staged_round_trip_us(dev, 16384, 16384, runs=20)
    big = bench_native.staged_round_trip_us(dev, 32 << 20, 32 << 20, runs=5)
    assert 0 < small < big


def test_delegate_models_tflite_and_exclude(tmp_path):
    """delegate_models --tflite runs tensorflow's tf.lite.Interpreter on both sides;
    --exclude skips a file by name (tf.lite alone segfaults on openwakeword's
    melspectrogram under XNNPACK, a crash no try can catch)."""
    import importlib.util

    # found, not imported: tensorflow in the test process makes a later Oclgrind program
    # build segfault (two LLVMs in one process; test_cast's Oclgrind test after this one)
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (the test extra installs it)")
    from models.builders import cast_model

    (tmp_path / "a.tflite").write_bytes(cast_model("float32", "int8", [33]))
    (tmp_path / "b.tflite").write_bytes(cast_model("uint8", "float32", [81]))
    r = subprocess.run([sys.executable, str(BENCH / "delegate_models.py"), "--tflite", "--exclude", "b.tflite",
                        str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tf.lite reference builtin" in r.stdout and "b.tflite" in r.stdout and "excluded" in r.stdout
    assert "1 models LiteRT runs: 1 bit-exact" in r.stdout, r.stdout


def test_bench_delegate_reports_invoke_and_copies_apart(tmp_path, fast_device):
    """bench_delegate: per model the invoke alone (and its per-partition cost in floors)
    and the API's copies apart; the large models' invoke and output reads apart, with the
    placement litecl chose."""
    from models.builders import chain_model  # noqa: PLC0415

    (tmp_path / "a.tflite").write_bytes(chain_model(["uint8", "float32", ("mul", 0.5), "float16"], [81]))
    out = tmp_path / "d.json"
    r = run_script("bench_delegate.py", tmp_path, "--device", fast_device, "--skip-init", "--secs", "0.05",
                   "--size", "4096", "--json", out)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(out.read_text())
    (row,) = res["models"]["rows"]
    assert row["partitions"] == 2 and all(row[k] > 0 for k in ("litert_us", "litecl_us", "litert_copies_us",
                                                                "litecl_copies_us"))
    assert len(res["large"]) == 5
    for x in res["large"]:
        assert all(x[k] > 0 for k in ("litert_invoke_ms", "litecl_invoke_ms", "litert_read_ms", "litecl_read_ms"))
    assert "invoke alone" in r.stdout
    assert res["round_trip_us"] > 0 and res["round_trip_back_to_back_us"] > 0
    assert isinstance(row["slow_kernels"], list) and row["per_partition_floors_without_slow_kernels"] is not None
    assert "slower than LiteRT running its node(s) alone" in r.stdout


def test_node_model_runs_the_named_nodes_alone():
    """common.node_model: a model of just the named nodes, their other inputs its inputs,
    what they write its outputs; LiteRT gives the same values as those nodes give inside
    the whole model."""
    import numpy as np  # noqa: PLC0415
    from common import node_model  # noqa: PLC0415
    from litecl.compare import make_interpreter  # noqa: PLC0415
    from models.builders import chain_model  # noqa: PLC0415

    raw = chain_model(["uint8", "float32", ("mul", 0.5), "float16"], [81])
    whole = make_interpreter(raw)
    whole.allocate_tensors()
    x = np.arange(81, dtype=np.uint8)
    whole.set_tensor(whole.get_input_details()[0]["index"], x)
    whole.invoke()
    sub = make_interpreter(node_model(raw, 0, [2]))  # the last CAST: float32 -> float16
    sub.allocate_tensors()
    (i,), (o,) = sub.get_input_details(), sub.get_output_details()
    assert i["dtype"] == np.float32 and o["dtype"] == np.float16
    sub.set_tensor(i["index"], x.astype(np.float32) * 0.5)
    sub.invoke()
    assert np.array_equal(sub.get_tensor(o["index"]), whole.get_tensor(whole.get_output_details()[0]["index"]))
