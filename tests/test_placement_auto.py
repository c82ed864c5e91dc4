"""Issue 14: placement="auto" (cost model), the whole-model LiteRT passthrough, LiteRT's
time beside litecl's in `litecl bench`, and constant-only producers kept with their
consumers (XNNPACK)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter as LiteRT, OpResolverType

import litecl
from conftest import run_one_input
from litecl.placement import Costs, auto_keep_on_litert
from models import runtime_graphs as rg
from models.builders import cast_model, chain_model, multi_op_model

#: a CPU-device-like profile: OpenCL twice LiteRT's bandwidth, a 45 us round trip
COSTS = Costs(device_gbs=20.0, transfer_gbs=20.0, round_trip_us=45.0, launch_us=2.0,
              segment_us=3.0, litert_gbs=10.0, litert_node_us=0.1)


def _litert(buf):
    return LiteRT(model_content=buf, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)




def test_cost_model_keeps_small_segments_on_litert(fast_device):
    from litecl.device import open_device
    from litecl.partition import partition

    caps = open_device(fast_device).caps
    small = litecl.load_model(model_content=cast_model("float32", "int8", [64])).subgraphs[0]
    _, segs = partition(small, caps)
    keep = auto_keep_on_litert(small, segs, {}, COSTS, set())
    assert list(keep) == [0] and keep[0].startswith("kept on LiteRT: OpenCL ~")
    big = litecl.load_model(model_content=cast_model("float32", "int8", [1 << 22])).subgraphs[0]
    _, segs = partition(big, caps)
    assert auto_keep_on_litert(big, segs, {}, COSTS, set()) == {}  # 20 MB: OpenCL wins
    # a node computed once at allocate costs nothing at invoke: it stays
    const = litecl.load_model(model_content=cast_model("float32", "int8", [64], constant=1.5)).subgraphs[0]
    _, segs = partition(const, caps)
    assert auto_keep_on_litert(const, segs, {}, COSTS, {0}) == {}


@pytest.mark.parametrize("buf", [multi_op_model("alternating", (2, 3, 4)), rg.variable_input(),
                                 rg.write_after_write()], ids=["alternating", "variable", "waw"])
def test_auto_small_model_runs_whole_on_litert_bit_exact(buf, fast_device):
    it = litecl.Interpreter(model_content=buf, device=fast_device, placement="auto")
    it.allocate_tensors()
    ref = _litert(buf)
    ref.allocate_tensors()
    rng = np.random.default_rng(3)
    for _ in range(2):
        for d in ref.get_input_details():
            x = (rng.standard_normal(d["shape"]) * 50).astype(d["dtype"])
            ref.set_tensor(d["index"], x)
            it.set_tensor(d["index"], x)
        ref.invoke()
        it.invoke()
        for d in ref.get_output_details():
            assert it.get_tensor(d["index"]).tobytes() == ref.get_tensor(d["index"]).tobytes()
    pl = it.placement()
    assert all(p["placement"] == "fallback" for p in pl)
    lowered = [p for p in pl if p["op"] in ("CAST", "ADD")]
    assert lowered and all(p["reason"].startswith("kept on LiteRT") for p in lowered)
    assert it._main.ex._pass is not None  # one segment: LiteRT runs the model's own bytes


def test_auto_keeps_large_tensors_on_opencl(fast_device, monkeypatch):
    import litecl.placement as pm

    monkeypatch.setattr(pm, "device_costs", lambda device: COSTS)
    buf = chain_model(["uint8", "float32", ("add", 1.0), "float16"], (1 << 21,))
    x = np.arange(1 << 21, dtype=np.uint64).astype(np.uint8)
    it, got, want = run_one_input(buf, fast_device, x, placement="auto")
    assert [p["placement"] for p in it.placement()] == ["opencl", "opencl", "opencl"]
    assert got.tobytes() == want.tobytes()


def test_placement_is_checked():
    with pytest.raises(litecl.LiteclError, match="unknown placement"):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [4]), placement="gpu")


def test_costs_are_measured_once_and_cached(tmp_path, fast_device):
    from conftest import ROOT

    code = ("import litecl, litecl.placement as p, time; from litecl.device import open_device;"
            "d = open_device(%r); t = time.perf_counter(); c = p.device_costs(d);"
            "print(c.round_trip_us > 0 and c.device_gbs > 0 and c.litert_gbs > 0, time.perf_counter() - t)") % fast_device
    import os

    env = {"LITECL_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, **env)) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
        assert r.stdout.split()[0] == "True"
    assert float(runs[1].stdout.split()[1]) < 0.05  # read from the cache, not measured again
    assert any(tmp_path.rglob("*.bin"))


def test_bench_prints_litert_beside_litecl(tmp_path, fast_device):
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model("cast_mul_cast", (2, 3, 4)))
    r = subprocess.run([sys.executable, "-m", "litecl.cli", "bench", str(p), "--device", fast_device,
                        "--num_runs", "5", "--min_secs", "0", "--warmup_min_secs", "0",
                        "--placement", "auto", "--reference", "ref", "--json", str(tmp_path / "b.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "INFO: LiteRT (ref kernels, same process): count=" in r.stdout
    assert "litecl / LiteRT: median" in r.stdout
    import json

    res = json.loads((tmp_path / "b.json").read_text())
    assert res["litert"]["count"] >= 5 and res["ratio_median"] > 0
    pct = [row["pct"] for row in res["nodes"]]
    assert abs(sum(pct) - 100.0) < 1e-6  # the (other) row makes the column whole
    assert res["nodes"][-1]["node"] == "(other)" or sum(row["avg_ms"] for row in res["nodes"]) >= res["runs"]["avg"] / 1e3


@pytest.mark.parametrize("cmd", ["run", "compare", "inspect"])
def test_cli_placement_and_threads(tmp_path, fast_device, cmd):
    p = tmp_path / "m.tflite"
    p.write_bytes(multi_op_model("alternating", (2, 3, 4)))
    extra = [] if cmd == "inspect" else ["--num_threads", "2"]
    r = subprocess.run([sys.executable, "-m", "litecl.cli", cmd, str(p), "--device", fast_device,
                        "--placement", "auto", *extra], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    if cmd == "inspect":
        assert "kept on LiteRT" in r.stdout


def test_constant_only_producer_joins_its_consumer_segment(fast_device):
    # DEQUANTIZE of a float16 weight (fallback) feeding MUL (fallback) after a CAST: the
    # DEQUANTIZE is ordered just before MUL, in MUL's segment, not in an earlier one
    from ai_edge_litert import schema_py_generated as schema
    from models.builders import _Graph

    g = _Graph()
    x = g.tensor("x", "int32", [4])
    g.inputs = [x]
    w16 = g.constant("w16", "float16", np.array([1.5, 2, -3, 4], np.float16))
    w = g.tensor("w", "float32", [4])
    g.op(schema.BuiltinOperator.DEQUANTIZE, [w16], [w])
    xf = g.cast(x, "float32", "xf")
    y = g.binary("mul", xf, w, "y")
    g.outputs = [y]
    buf = g.finish()
    it = litecl.Interpreter(model_content=buf, device=fast_device)
    order = [p["index"] for p in it.placement()]
    assert order.index(0) == order.index(2) - 1  # DEQUANTIZE right before MUL
    segs = it._main.ex.segments
    assert any(set(s.nodes) == {0, 2} for s in segs)


def test_passthrough_intermediates_follow_preserve_all_tensors(fast_device):
    buf = multi_op_model("alternating", (2, 3, 4))
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    ref = LiteRT(model_content=buf, experimental_preserve_all_tensors=True,
                 experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    ref.allocate_tensors()
    ref.set_tensor(0, x)
    ref.invoke()
    inner = 1  # the first CAST's output: an intermediate
    for preserve in (False, True):
        it = litecl.Interpreter(model_content=buf, device=fast_device, placement="auto",
                                experimental_preserve_all_tensors=preserve)
        it.allocate_tensors()
        assert it._main.ex._pass is not None
        it.set_tensor(0, x)
        it.invoke()
        if preserve:
            assert it.get_tensor(inner).tobytes() == ref.get_tensor(inner).tobytes()
        else:
            with pytest.raises(litecl.InputError, match="internal to a LiteRT"):
                it.get_tensor(inner)


def test_zero_copy_follows_host_unified_memory(fast_device):
    # CL_DEVICE_HOST_UNIFIED_MEMORY decides mapping (CPU runtimes, integrated and mobile
    # GPUs) against copies across a bus (a discrete GPU), not the device type alone
    it = litecl.Interpreter(model_content=cast_model("float32", "int8", [8]), device=fast_device)
    caps = it.device.caps
    assert caps.host_unified is not None
    assert it._main.ex.zero_copy == caps.host_unified
    assert caps.host_unified == (not caps.is_gpu)  # the devices reached here: CPUs, a discrete H200
