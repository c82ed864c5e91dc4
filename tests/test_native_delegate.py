"""``litecl export``'s native TFLite delegate: built with the C compiler from DIR/build.sh,
loaded with ``load_delegate(so, options)`` into stock LiteRT in a child process where
litecl and pyopencl cannot be imported (benchmarks/bench_native.py ``run_child``), and
checked bit for bit against LiteRT alone; its Replacing line against the Python
delegate's; its tiling against ops/tiling.py; resizes, a foreign model, bad options; the
LiteRT version check and the context layout check; the aarch64 cross build.

Tests that build need ``cc`` (or $CC); the cross build needs Debian's
gcc-aarch64-linux-gnu (.ci/run installs it): each skips naming the missing compiler.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from litecl.cli import main
from litecl.compare import make_interpreter, random_inputs
from litecl.ops.tiling import launch
from models.builders import add_model, cast_model, chain_model

from conftest import DEVICE_STATUS, ROOT, SHARED_MODELS, tf_model

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_native import median_ci, python_replacing, run_child  # noqa: E402

CC = os.environ.get("CC", "cc")
CROSS = "aarch64-linux-gnu-gcc"

#: (id, --device, --target, runtime that must work)
CONFIGS = [("pocl", "pocl", None, "pocl"), ("intel", "intel", None, "intel"),
           ("pocl-mobile-gpu", "pocl:profile=mobile", "gpu", "pocl")]


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"no C compiler {tool!r} on PATH (.ci/run installs it where apt-get works)")


def _export_build(model: Path, out: Path, device: str, target=None, placement: str = "all", cc: str = CC) -> dict:
    argv = ["export", str(model), "--out", str(out), "--device", device, "--placement", placement]
    assert main(argv + (["--target", target] if target else [])) == 0
    r = subprocess.run(["sh", str(out / "build.sh")], capture_output=True, text=True, env={**os.environ, "CC": cc})
    assert r.returncode == 0, r.stderr
    assert "warning" not in (r.stderr + r.stdout).lower(), r.stderr
    return json.loads((out / "manifest.json").read_text())


def _inputs(model: Path, out: Path) -> Path:
    ref = make_interpreter(model.read_bytes())
    np.savez(out / "inputs.npz", **random_inputs(ref.get_input_details(), seed=0))
    return out / "inputs.npz"


def _models(tmp: Path) -> dict:
    g = {
        "cast_f32_f16": cast_model("float32", "float16", [1999]),
        "fused_chain": chain_model(["float32", "float16", "float32", ("add", 0.25), "int8"], [757]),
        "image_chain": chain_model(["uint8", "float32", ("add", np.linspace(-3, 3, 67).astype(np.float32)),
                                    ("add", 0.5, "RELU6"), "float16", "int64", "float64", "bool"], [3, 67]),
        "quant_add": add_model("int8", [5, 1, 67], [1, 3, 67], activation="RELU6",
                               quant=((0.05, 3), (0.1, -7), (0.08, 2))),
        "int4_cast": cast_model("float32", "int4", [81]),
    }
    out = {}
    for k, v in g.items():
        (tmp / f"{k}.tflite").write_bytes(v)
        out[k] = tmp / f"{k}.tflite"
    for name in ("movenet_singlepose_lightning_int8.tflite", "multi_signature_model.tflite"):
        if (SHARED_MODELS / name).exists():
            out[name.split(".")[0]] = SHARED_MODELS / name
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return _models(tmp_path_factory.mktemp("native_models"))


@pytest.mark.parametrize("config", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_native_delegate_is_bit_exact_in_a_process_without_litecl(config, models, tmp_path):
    cid, device, target, runtime = config
    if DEVICE_STATUS.get(runtime):
        pytest.skip(DEVICE_STATUS[runtime])
    _need(CC)
    bad = []
    for name, model in models.items():
        out = tmp_path / name
        m = _export_build(model, out, device, target)
        res = run_child(out / "liblitecl_delegate.so", model, out / "exported_device.json", _inputs(model, out), 0)
        want = python_replacing(model, device, "all")
        if not res.get("bit_exact") or [tuple(x) for x in res.get("replacing", [])] != want:
            bad.append(f"{name}: {res} python {want}")
        assert m["native"]["subgraphs"], name
    assert not bad, f"{cid}: " + "; ".join(bad)


def test_tiling_in_c_is_ops_tiling_launch(models, tmp_path, fast_device):
    """litecl_delegate.c ``tiling`` (exported as litecl_native_tiling) against
    ops/tiling.py launch() for both LAUNCH rows and Intel's CPU runtime's (group_bytes),
    devices of 1..132 compute units and work-group limits, every tile size, n over the
    tail sizes and 2^24."""
    _need(CC)
    out = tmp_path / "t"
    _export_build(models["cast_f32_f16"], out, fast_device)
    lib = ctypes.CDLL(str(out / "liblitecl_delegate.so"))
    f = lib.litecl_native_tiling
    f.argtypes = [ctypes.c_uint64] + [ctypes.c_int] * 7 + [ctypes.POINTER(ctypes.c_uint64)]
    from litecl.ops.tiling import launch_config

    ns = [0, 1, 31, 32, 33, 80, 81, 757, 1999, 4095, 4096, 65537, 1 << 24, (1 << 24) + 3, 1 << 31]
    ns += [int(x) for x in np.random.default_rng(0).integers(0, 1 << 26, 40)]
    checked = 0
    for gpu, platform in ((False, "Portable Computing Language"), (True, "NVIDIA CUDA"), (False, "Intel(R) OpenCL")):
        row = launch_config(types.SimpleNamespace(is_gpu=gpu, platform=platform))
        assert row.group_bytes or platform != "Intel(R) OpenCL"
        for cu in (1, 2, 16, 132):
            for max_wg in (1, 256, 1024, 4096):
                caps = types.SimpleNamespace(is_gpu=gpu, compute_units=cu, max_work_group_size=max_wg,
                                             platform=platform)
                for tile in (1, 2, 4, 8):
                    for n in ns:
                        t, g, loc = launch(caps, n, tile)
                        got = (ctypes.c_uint64 * 6)()
                        assert f(n, tile, cu, max_wg, row.local_size, row.groups_per_cu, row.vec_bytes,
                                 row.group_bytes, got) == 0
                        assert list(got) == [*t.kernel_args(), g[0], loc[0]], (gpu, cu, max_wg, tile, n)
                        checked += 1
    got = (ctypes.c_uint64 * 6)()
    assert f((1 << 31) + 1, 4, 2, 1, 1, 16, 32, 0, got) == -1  # above MAX_ELEMENTS: refused, as launch()
    assert checked == 3 * 4 * 4 * 4 * len(ns)


RESIZE_CHILD = r'''
import sys
sys.modules["litecl"] = None
sys.modules["pyopencl"] = None
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
import json
so, model, opts, shape = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), json.loads(sys.argv[4])
d = load_delegate(so, opts)
outs = []
for dl in ([], [d]):
    it = Interpreter(model_path=model, experimental_delegates=dl,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    shapes = shape if shape and isinstance(shape[0], list) else [shape]  # [[...], ...]: one per input
    for det, sh in zip(it.get_input_details(), shapes):
        it.resize_tensor_input(det["index"], sh)
    it.allocate_tensors()
    for k, x in enumerate(it.get_input_details()):  # every input: LiteRT leaves them unset
        it.set_tensor(x["index"], (np.random.default_rng(k).standard_normal(x["shape"]) * 300).astype(x["dtype"]))
    it.invoke()
    outs.append([it.get_tensor(o["index"]) for o in it.get_output_details()])
print("EQUAL" if all(a.tobytes() == b.tobytes() for a, b in zip(*outs)) else "DIFFER")
'''


def _child(code: str, *args) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LITECL_QUIET")}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=300, env=env, cwd="/")


@pytest.mark.parametrize("device", ["intel", "pocl"])
def test_without_options_it_runs_on_the_exporting_device_and_names_it(device, tmp_path):
    """Loaded with no options in a process without litecl, the library runs on the device it
    was exported on where this machine reaches it, and one INFO line names the device. A
    fresh user's export on Intel's runtime ran on Debian's PoCL, which the ICD loader lists
    first (Intel's pip runtime is litecl's own ICD), with no word of which device ran."""
    if DEVICE_STATUS.get(device):
        pytest.skip(DEVICE_STATUS[device])
    _need(CC)
    model = tmp_path / "cast.tflite"
    model.write_bytes(chain_model(["float32", "float16", "float32", ("add", 0.25)], [757]))
    out = tmp_path / "out"
    _export_build(model, out, device)
    exported = json.loads((out / "exported_device.json").read_text())["device"]
    (out / "none.json").write_text("{}")
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", model, out / "none.json", "[757]")
    assert r.returncode == 0 and "EQUAL" in r.stdout, (r.stdout, r.stderr[-800:])
    said = [ln for ln in r.stderr.splitlines() if ln.startswith("INFO: litecl: OpenCL device ")]
    assert len(said) == 1 and said[0].startswith(f"INFO: litecl: OpenCL device {exported} (platform "), r.stderr
    assert "exported on" not in said[0], said


def test_resize_keeps_elementwise_nodes_and_leaves_baked_broadcasts_to_litert(tmp_path, fast_device):
    """A resized input: an elementwise chain keeps running on OpenCL with the tiling of the
    new size (computed in C), bit-exact; a broadcast ADD, whose kernel bakes the exported
    shapes, is left to LiteRT at the Prepare LiteRT runs again after the resize (the
    delegate sets no AllowDynamicTensors for a static graph: export.py delegate_flags),
    and the model still runs, bit-exact; at the exported shapes it is claimed again."""
    _need(CC)
    chain = tmp_path / "chain.tflite"
    chain.write_bytes(chain_model(["float32", "float16", "float32", ("add", 0.25), "int8"], [1999]))
    out = tmp_path / "chain"
    assert _export_build(chain, out, fast_device)["native"]["delegate_flags"] == 0
    for n in (757, 1, 33, 4096):
        r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", chain, out / "exported_device.json", json.dumps([n]))
        assert r.returncode == 0 and "EQUAL" in r.stdout, (n, r.stdout, r.stderr[-500:])
        assert "Replacing 4 out of 4 node(s)" in r.stderr and "left to LiteRT" not in r.stderr, r.stderr
    bcast = tmp_path / "bcast.tflite"
    bcast.write_bytes(add_model("float32", [2, 1, 5], [3, 1]))
    out = tmp_path / "bcast"
    _export_build(bcast, out, fast_device)
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", bcast, out / "exported_device.json", "[4, 1, 5]")
    assert r.returncode == 0 and "EQUAL" in r.stdout, (r.stdout, r.stderr[-500:])
    assert "Replacing 1 out of 1 node(s)" in r.stderr  # at construction, the exported shapes
    assert ("INFO: litecl: node 0 left to LiteRT at these input shapes (tensor 0 is [4, 1, 5], exported at "
            "[2, 1, 5]): its kernel compiles in the exported shapes (a broadcast)\n") in r.stderr, r.stderr
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", bcast, out / "exported_device.json", "[2, 1, 5]")
    assert r.returncode == 0 and "EQUAL" in r.stdout and "left to LiteRT" not in r.stderr, r.stderr[-500:]


def _resized_run(out: Path, model: Path, shapes: str) -> subprocess.CompletedProcess:
    """Build ``out``'s library (once) and run RESIZE_CHILD with it at ``shapes`` (JSON),
    asserting it ran and its outputs equal LiteRT's alone; returns the child's result."""
    if not (out / "liblitecl_delegate.so").exists():
        r = subprocess.run(["sh", str(out / "build.sh")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", model, out / "exported_device.json", shapes)
    assert r.returncode == 0 and "EQUAL" in r.stdout, (r.stdout, r.stderr[-800:])
    return r


REFUSED_RESIZE_CHILD = r'''
import sys, json
sys.modules["litecl"] = None
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
so, model, opts = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
it = Interpreter(model_path=model, experimental_delegates=[load_delegate(so, opts)],
                 experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
it.resize_tensor_input(it.get_input_details()[0]["index"], [5])
try:
    it.allocate_tensors()
    print("ALLOCATED")
except RuntimeError as e:
    print("REFUSED", e)
'''


def test_liters_own_errors_come_without_a_line_of_the_delegates(tmp_path, fast_device):
    """A resize LiteRT refuses ([5] + [4]) fails allocate_tensors with LiteRT's own
    message alone: the delegate's Prepare reads the model's node count from the execution
    plan, not by asking for nodes until LiteRT reports one missing (that report then led
    every later error of the interpreter: "node_index < nodes_size was not true")."""
    _need(CC)
    m = tmp_path / "add.tflite"
    m.write_bytes(add_model("float32", [4], [4]))
    out = tmp_path / "add"
    _export_build(m, out, fast_device)
    r = _child(REFUSED_RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json")
    assert r.returncode == 0 and "REFUSED" in r.stdout and "are not broadcastable" in r.stdout, (r.stdout, r.stderr)
    assert "nodes_size" not in r.stdout, r.stdout
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", "[[4], [4]]")
    assert r.returncode == 0 and "EQUAL" in r.stdout and "Replacing 1 out of 1 node(s)" in r.stderr, r.stderr[-500:]


def test_resize_within_the_signature_keeps_the_model_running(tmp_path, fast_device):
    """x [-1, 1] + y [1, -1] (TensorFlow's converter), exported at [1, 1] + [1, 1] (an
    elementwise kernel), resized to [31, 1] + [1, 10]: the operands now broadcast, which the
    elementwise kernel cannot do; LiteRT runs the delegate's Prepare again at the new shapes
    (a static graph), which leaves the node to LiteRT with one line instead of claiming it
    and failing its kernel prepare (was: LiteRT dropped the delegate and allocate_tensors
    raised, found by a fresh user). Resized back to one shape, it is claimed again."""
    _need(CC)
    from conftest import tf_model

    m = tmp_path / "dbadd.tflite"
    m.write_bytes(tf_model("dynamic_broadcast_add"))
    out = tmp_path / "dbadd"
    _export_build(m, out, fast_device)
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", "[[31, 1], [1, 10]]")
    assert r.returncode == 0 and "EQUAL" in r.stdout, r.stderr[-300:]
    assert ("INFO: litecl: node 0 left to LiteRT at these input shapes (tensor 0 is [31, 1], exported at [1, 1]): "
            "its operands broadcast and its kernel is elementwise (exported for operands of one shape)\n") \
        in r.stderr, r.stderr
    assert "failed to prepare" not in r.stderr, r.stderr
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", "[[1, 1], [1, 1]]")
    assert r.returncode == 0 and "EQUAL" in r.stdout, r.stderr[-300:]
    assert "left to LiteRT" not in r.stderr and "Replacing 1 out of 1 node(s)" in r.stderr, r.stderr


def test_resize_keeps_a_same_shape_add_and_names_why_a_broadcast_goes(tmp_path, fast_device):
    """A same-shape ADD's kernel holds at any element count (float32's NaN choice follows
    LiteRT's SIMD body, whose end the kernel computes from the count; it was compiled in,
    and the node left to LiteRT after a resize): after a resize it stays on OpenCL,
    bit-exact; resized into a broadcast ([1] + [512]) it is left to LiteRT with that
    reason (README: which nodes survive a resize)."""
    _need(CC)
    quant = {"int8": ((0.05, 3), (0.07, -9), (0.11, 1)), "int16": ((0.05, 0), (0.07, 0), (0.11, 0))}
    for dtype in ("float32", "int32", "int8", "int16"):
        m = tmp_path / f"add_{dtype}.tflite"
        m.write_bytes(add_model(dtype, [512], [512], quant=quant.get(dtype)))
        out = tmp_path / dtype
        _export_build(m, out, fast_device)
        for n in (757, 1, 33, 0):
            r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", f"[[{n}], [{n}]]")
            assert r.returncode == 0 and "EQUAL" in r.stdout, (dtype, r.stdout, r.stderr[-500:])
            lines = [ln for ln in r.stderr.splitlines() if "litecl" in ln]
            assert lines == ["INFO: Replacing 1 out of 1 node(s) with delegate (litecl OpenCL) node, yielding 1 "
                             "partitions for the whole graph."], (dtype, r.stderr)
    r = _child(RESIZE_CHILD, tmp_path / "float32" / "liblitecl_delegate.so", tmp_path / "add_float32.tflite",
               tmp_path / "float32" / "exported_device.json", "[[1], [512]]")
    assert r.returncode == 0 and "EQUAL" in r.stdout, (r.stdout, r.stderr[-500:])
    assert [ln for ln in r.stderr.splitlines() if "left to LiteRT" in ln] == [
        "INFO: litecl: node 0 left to LiteRT at these input shapes: its operands broadcast and its kernel is "
        "elementwise (exported for operands of one shape), or an operand it reads as one element grew"], r.stderr


def test_an_exported_fused_partition_runs_per_node_where_its_inputs_part_ways(tmp_path, fast_device):
    """Two CASTs of two [-1] inputs, fused into one kernel at export (one element count):
    x resized to [1] beside y [4] failed the partition's prepare and LiteRT dropped the
    delegate for good (a fresh user's report); the partition now runs one launch per node
    at such shapes, bit-exact, and fused again where the shapes agree."""
    from models.builders import _Graph

    _need(CC)
    g = _Graph()
    x = g.tensor("x", "float32", (4,), signature=[-1])
    y = g.tensor("y", "int8", (4,), signature=[-1])
    g.inputs = [x, y]
    g.outputs = [g.cast(x, "int32", "xo"), g.cast(y, "float32", "yo")]
    m = tmp_path / "m.tflite"
    m.write_bytes(g.finish())
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    for shapes in ("[[1], [4]]", "[[4], [4]]", "[[33], [1]]", "[[0], [9]]"):
        r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", shapes)
        assert r.returncode == 0 and "EQUAL" in r.stdout, (shapes, r.stdout, r.stderr[-500:])
        assert "Replacing 2 out of 2 node(s)" in r.stderr and "failed" not in r.stderr, (shapes, r.stderr)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
def test_an_exported_elementwise_add_never_reads_an_operand_as_another_shape(tmp_path, fast_device, dtype):
    """x [-1] + y [-1] exported at [1] + [1] reads both element by element: resized to
    [8] + [1] it read y past its end (a fresh user's wrong results, a segfault at 100,000
    elements); exported at [8, 1] + [1, 1] it splats y: resized to [20, 3] + [20, 3] it
    added y's first element everywhere. Both now leave the node to LiteRT with one line,
    bit-exact; shapes the kernel fits stay on OpenCL."""
    _need(CC)
    quant = ((0.05, 3), (0.07, -9), (0.11, 1)) if dtype == "int8" else None
    m = tmp_path / "m.tflite"
    m.write_bytes(add_model(dtype, [1], [1], quant=quant, dynamic=True))
    out = tmp_path / "one"
    _export_build(m, out, fast_device)
    for shapes, left in (("[[8], [1]]", True), ("[[100000], [1]]", True), ("[[1], [1]]", False),
                         ("[[33], [33]]", False)):
        r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", shapes)
        assert r.returncode == 0 and "EQUAL" in r.stdout, (shapes, r.stdout, r.stderr[-500:])
        assert ("an operand it reads as one element grew" in r.stderr) == left, (shapes, r.stderr)
    m2 = tmp_path / "m2.tflite"
    m2.write_bytes(add_model(dtype, [1, 1], [1, 1], quant=quant, dynamic=True))
    npz = tmp_path / "in.npz"
    np.savez(npz, input1=np.zeros((8, 1), np.dtype(dtype)), input2=np.zeros((1, 1), np.dtype(dtype)))
    out2 = tmp_path / "splat"
    assert main(["export", str(m2), "--out", str(out2), "--device", fast_device, "--inputs", str(npz)]) == 0
    r = subprocess.run(["sh", str(out2 / "build.sh")], capture_output=True, text=True, env={**os.environ, "CC": CC})
    assert r.returncode == 0, r.stderr
    for shapes, left in (("[[20, 3], [20, 3]]", True), ("[[8, 1], [1, 1]]", False), ("[[5, 7], [1, 1]]", False)):
        r = _child(RESIZE_CHILD, out2 / "liblitecl_delegate.so", m2, out2 / "exported_device.json", shapes)
        assert r.returncode == 0 and "EQUAL" in r.stdout, (shapes, r.stdout, r.stderr[-500:])
        assert ("an operand it reads as one element grew" in r.stderr) == left, (shapes, r.stderr)


SEQUENCE_CHILD = r'''
import sys
sys.modules["litecl"] = None
sys.modules["pyopencl"] = None
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
import json
so, model, opts, shapes = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), json.loads(sys.argv[4])
its = [Interpreter(model_path=model, experimental_delegates=dl,
                   experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
       for dl in ([], [load_delegate(so, opts)])]
for k, (shape, flag) in enumerate(shapes):  # one interpreter pair, resized call after call
    x = (np.random.default_rng(k).standard_normal(shape) * 300).astype(np.float32)
    x.reshape(-1)[:4] = [np.nan, -np.nan, -0.0, np.inf][:x.size]
    outs = []
    for it in its:
        fx, fp = sorted(it.get_input_details(), key=lambda d: d["dtype"] == np.bool_)
        it.resize_tensor_input(fx["index"], list(shape))
        it.allocate_tensors()
        it.set_tensor(fx["index"], x)
        it.set_tensor(fp["index"], np.array(flag, np.bool_))
        it.invoke()
        outs.append(it.get_tensor(it.get_output_details()[0]["index"]).tobytes())
    print(shape, flag, "EQUAL" if outs[0] == outs[1] else "DIFFER", flush=True)
'''


def test_an_exported_if_branch_runs_at_every_shape_a_resize_gives(tmp_path, fast_device, capsys):
    """An IF whose branches CAST and ADD a [None, None] input (their tensors carry no -1
    shape signature): the exported library runs both branches at shapes other than the
    exported one, call after call on one interpreter, bit-exact with LiteRT (a fresh
    user's export failed at every other shape, and the next call crashed inside LiteRT)."""
    _need(CC)
    m = tmp_path / "if.tflite"
    m.write_bytes(tf_model("if_dynamic"))
    out = tmp_path / "if"
    _export_build(m, out, fast_device)
    said = capsys.readouterr().out
    # the else branch's x + 2.0, exported at [1, 1] + [] (LiteRT adds those as one shape),
    # broadcasts at any other shape: its kernel compiles that in, and it stays on LiteRT
    assert "subgraph 1: 1 more node(s) that litecl.Delegate claims are left to LiteRT by the native delegate: " \
        "their kernels compile in the exported shapes, and this subgraph (called by an IF or WHILE) takes its " \
        "caller's shapes" in said, said
    assert "subgraph 2: the native delegate claims 3 of its 3 nodes" in said, said
    seq = [[[1, 1], True], [[5, 7], True], [[1, 1], False], [[3, 333], False], [[2, 1], True], [[9, 9], True]]
    r = _child(SEQUENCE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", json.dumps(seq))
    assert r.returncode == 0, r.stderr[-800:]
    assert r.stdout.count("EQUAL") == len(seq), (r.stdout, r.stderr[-800:])
    assert "failed" not in r.stderr, r.stderr[-800:]
    left = {ln for ln in r.stderr.splitlines() if "left to LiteRT" in ln}
    assert "INFO: litecl: node 2 of subgraph 1 left to LiteRT: a called subgraph's shapes follow its caller's " \
        "and its kernel compiles in the exported shapes (a broadcast)" in left, r.stderr[-800:]
    assert all(ln.startswith("INFO: litecl: node 2 ") for ln in left), left
    # every shape static (no -1 in an input's signature): the branch's broadcast stays claimed
    m2 = tmp_path / "if_static.tflite"
    m2.write_bytes(tf_model("if_static"))
    out2 = tmp_path / "if_static"
    _export_build(m2, out2, fast_device)
    said = capsys.readouterr().out
    assert "called by an IF or WHILE" not in said and "claims 1 of its 1 nodes" in said, said


def test_export_summary_says_what_the_native_delegate_claims(models, tmp_path, fast_device, capfd):
    """The printout gives, per subgraph, the nodes the native delegate claims, and apart
    the nodes litecl.Delegate claims that it leaves to LiteRT, with the reason (was:
    '1 launches ... (1 nodes' then '21 nodes in 1 subgraph(s)'); the count is the built
    delegate's own Replacing line. A subgraph whose nodes litecl.Delegate plans only at
    invoke is not called one with nothing delegated (the manifest's note said "takes no
    node"), and LiteRT's warning to export's static-graph probe is not shown."""
    capsys = capfd
    out = tmp_path / "chain"
    assert main(["export", str(models["fused_chain"]), "--out", str(out), "--device", fast_device]) == 0
    said = capsys.readouterr().out.splitlines()
    assert "subgraph 0: the native delegate claims 4 of its 4 nodes at the exported shapes" in said, said
    assert not any("left to LiteRT" in ln for ln in said), said
    m = tmp_path / "dynamic_reshape.tflite"
    m.write_bytes(tf_model("dynamic_reshape"))  # RESHAPE to a shape computed at invoke, then ADD 1
    out = tmp_path / "dyn"
    assert main(["export", str(m), "--out", str(out), "--device", fast_device]) == 1  # nothing to ship
    cap = capsys.readouterr()
    said = cap.out.splitlines()
    assert said[-1].endswith("nothing to ship (exit 1)"), said
    sub = [ln for ln in said if ln.startswith("subgraph ")]
    assert sub == ["subgraph 0: the native delegate claims 0 of its 8 nodes at the exported shapes",
                   "subgraph 0: 1 more node(s) that litecl.Delegate claims are left to LiteRT by the native "
                   "delegate: their input shapes are known only at invoke (litecl.Delegate plans them then) and "
                   "their kernels compile in the exported shapes"], said
    assert not any("nodes in 1 subgraph" in ln for ln in said), said
    note = json.loads((out / "manifest.json").read_text())["note"]
    assert note.startswith("litecl's delegate takes 1 node(s) of this subgraph but plans them only at invoke"), note
    assert f"note: {note}" in said, said
    assert "static-sized tensors" not in cap.err, cap.err
    if shutil.which(CC) is None:
        return
    r = _resized_run(out, m, "[1, 16]")
    assert "Replacing" not in r.stderr and "left to LiteRT: its input shapes are known only at invoke" in r.stderr


def test_another_model_is_refused_with_one_line_and_runs_on_litert(models, tmp_path, fast_device):
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    other = models["fused_chain"]
    res = run_child(out / "liblitecl_delegate.so", other, out / "exported_device.json", _inputs(other, out), 0)
    assert res.get("bit_exact") and res["replacing"] == [], res
    r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", other, out / "exported_device.json", "[757]")
    lines = [ln for ln in r.stderr.splitlines() if "litecl" in ln]
    assert len(lines) == 1 and "is not the one litecl exported from cast_f32_f16.tflite" in lines[0], r.stderr
    assert "litecl claims none of its nodes" in lines[0]
    assert "(1 nodes exported, 4 here)" in lines[0], lines[0]  # no "node count 0 is ..."


def test_another_models_difference_is_named_in_the_models_terms(tmp_path, fast_device):
    """Where a loaded model differs from the exported one, the one line names the
    difference as the schema does: an activation by name, a tensor type by name, a scale
    as a number (an operator by name: the nodes option's test; it said "is 3 here,
    exported 0", "the scale (float bits) of tensor 0 is 1010055512": a fresh user)."""
    from models.builders import add_model

    _need(CC)
    q = ((0.05, 128), (0.04, 120), (0.07, 125))
    base = tmp_path / "base.tflite"
    base.write_bytes(add_model("uint8", (1, 8), (1, 8), quant=q))
    out = tmp_path / "e"
    _export_build(base, out, fast_device)
    others = {"scale": add_model("uint8", (1, 8), (1, 8), quant=((0.011, 128), *q[1:])),
              "act": add_model("uint8", (1, 8), (1, 8), quant=q, activation="RELU6"),
              "type": add_model("float32", (1, 8), (1, 8))}
    want = {"scale": "the scale of tensor 0 is 0.0109999999 here, exported 0.0500000007",
            "act": "the activation of node 0 is RELU6 here, exported NONE",
            "type": "the type of tensor 0 is float32 here, exported uint8"}
    for k, buf in others.items():
        m = tmp_path / f"{k}.tflite"
        m.write_bytes(buf)
        r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, out / "exported_device.json", "[1, 8]")
        lines = [ln for ln in r.stderr.splitlines() if "litecl" in ln]
        assert len(lines) == 1 and want[k] in lines[0], (k, r.stderr)


AFTER_CHILD = r'''
import sys
sys.modules["litecl"] = None
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
import json
so, model, opts = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
first, second = load_delegate(so, {**opts, "quiet": "1"}), load_delegate(so, opts)
it = Interpreter(model_path=model, experimental_delegates=[first, second],
                 experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
it.allocate_tensors()
it.invoke()
print("RAN")
'''


def test_loaded_after_a_delegate_that_took_its_nodes_it_says_so(models, tmp_path, fast_device):
    """Loaded after another delegate (itself, applied first, here) that took every
    exported node: the model's nodes still match by index (the fingerprint reads them, not
    the execution plan), and one INFO line counts the nodes the earlier delegate took; it
    claims none (tests/test_delegate_order.py covers a delegate that leaves some)."""
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["fused_chain"], out, fast_device)
    r = _child(AFTER_CHILD, out / "liblitecl_delegate.so", models["fused_chain"], out / "exported_device.json")
    assert r.returncode == 0 and "RAN" in r.stdout, r.stderr[-800:]
    lines = [ln for ln in r.stderr.splitlines() if "litecl" in ln]
    assert lines == ["INFO: litecl: 4 of the exported CAST/ADD nodes were taken by a delegate applied before "
                     "litecl's"], r.stderr


BAD_OPTIONS = r'''
import sys
sys.modules["litecl"] = None
from ai_edge_litert.interpreter import load_delegate
import json
for opts in json.loads(sys.argv[2]):
    try:
        load_delegate(sys.argv[1], opts)
        print("LOADED")
    except ValueError as e:  # load_delegate appends what report_error was given
        print("REFUSED", json.dumps(str(e).splitlines()[-1]))
'''


def test_bad_options_fail_with_one_line_naming_the_cause(models, tmp_path, fast_device):
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    opts = json.loads((out / "exported_device.json").read_text())
    cases = [{"nope": "1"}, {**opts, "memory": "sometimes"}, {**opts, "library": "/no/such/libOpenCL.so"},
             {**opts, "device": "no such device"}, {**opts, "library": "libc.so.6"}, {**opts, "spin_us": "-5"},
             {**opts, "spin_us": "soon"}, {**opts, "binaries": "maybe"}, {**opts, "quiet": "loud"},
             {**opts, "library": ""}, {**opts, "platform": ""}, {**opts, "device": ""}, {**opts, "memory": ""},
             {**opts, "binaries": ""}, {**opts, "quiet": ""}, {**opts, "spin_us": ""},
             # an empty item or a blank, wherever it is (trailing ones were accepted, leading ones refused)
             {**opts, "ops": "ADD,"}, {**opts, "ops": ",ADD"}, {**opts, "nodes": "0=0;"}, {**opts, "nodes": "0=0,"},
             {**opts, "nodes": ";0=0"}, {**opts, "spin_us": " 5"}, {**opts, "untested_runtime": "maybe"}]
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps(cases))
    rows = r.stdout.splitlines()
    assert [ln.split()[0] for ln in rows] == ["REFUSED"] * len(cases), (r.stdout, r.stderr)
    errs = [json.loads(ln.split(" ", 1)[1]) for ln in rows]
    assert all(e.startswith("litecl: ") for e in errs), errs
    for e, what in zip(errs, ["unknown option \"nope\"", "unknown memory \"sometimes\"", "/no/such/libOpenCL.so",
                              "no OpenCL device for litecl's kernels on platform", "neither clGetPlatformIDs",
                              "spin_us \"-5\" is not a whole number", "spin_us \"soon\" is not",
                              "binaries \"maybe\" is not a yes/no value; expected 1, 0, true, false, yes, no, on or off",
                              "quiet \"loud\" is not a yes/no value", "the library option is empty",
                              "the platform option is empty", "the device option is empty",
                              "the memory option is empty; expected auto", "the binaries option is empty; expected 1, 0",
                              "the quiet option is empty", "the spin_us option is empty",
                              "ops \"ADD,\" names no operator", "ops \",ADD\" names no operator",
                              "nodes \"0=0;\" is not SUBGRAPH=NODE", "nodes \"0=0,\" is not SUBGRAPH=NODE",
                              "nodes \";0=0\" is not SUBGRAPH=NODE", "spin_us \" 5\" is not a whole number",
                              "untested_runtime \"maybe\" is not a yes/no value"]):
        assert what in e, (what, e)
    # a platform or device that is not there: the line names it and what the library has
    assert ", device no such device (" in errs[3] and f'"{opts["device"]}: not the device option' in errs[3], errs[3]
    # yes/no words in any case, as the LITECL_* variables (quiet=TRUE was refused); the other
    # words too, and spaces around the items of ops (a fresh user's "ADD, CAST" was refused)
    good = [{**opts, "binaries": v, "quiet": q} for v, q in (("0", "yes"), ("true", "off"), ("no", "1"), ("TRUE", "Off"))]
    good += [{**opts, "memory": "COPY", "keep_order": "AUTO", "device_type": "Any", "ops": "add, CAST",
              "cache_dir": "NONE"}]
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps(good))
    assert r.stdout.splitlines() == ["LOADED"] * len(good), (r.stdout, r.stderr)
    # a relative cache_dir is the app's current folder ("/" on Android): refused, not made there
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([{**opts, "cache_dir": "NONE-ish"}]))
    assert r.stdout.startswith("REFUSED") and "is not an absolute path" in r.stdout, r.stdout
    assert not Path("/NONE-ish").exists()


DUPLICATE_KEYS = r'''
import ctypes as C, sys
sys.modules["litecl"] = None
import ai_edge_litert.interpreter  # the runtime the library checks for
lib = C.CDLL(sys.argv[1])
f = lib.tflite_plugin_create_delegate
f.restype = C.c_void_p
f.argtypes = [C.POINTER(C.c_char_p), C.POINTER(C.c_char_p), C.c_size_t, C.c_void_p]
msgs = []
REPORT = C.CFUNCTYPE(None, C.c_char_p)(lambda m: msgs.append(m.decode()))
keys = (C.c_char_p * 2)(b"quiet", b"quiet")
values = (C.c_char_p * 2)(b"1", b"0")
print("CREATED" if f(keys, values, 2, C.cast(REPORT, C.c_void_p)) else "REFUSED " + " ".join(msgs))
'''


def test_an_option_given_twice_is_refused(models, tmp_path, fast_device):
    """The plugin API takes key and value arrays: a key given twice was accepted and the
    last value silently won (a fresh user's app)."""
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    r = _child(DUPLICATE_KEYS, out / "liblitecl_delegate.so")
    assert r.stdout.strip() == "REFUSED litecl: the quiet option is given twice", (r.stdout, r.stderr)


PLANTED = r'''
#include <stdio.h>
__attribute__((constructor)) static void planted(void) {
    FILE *f = fopen(MARKER, "w");
    if (f) fclose(f);
}
'''


def test_the_exporting_machines_library_is_opened_only_from_a_path_no_one_else_can_write(models, tmp_path,
                                                                                          fast_device):
    """The library names the OpenCL library the export used (an absolute path) and opens
    it last: a library planted at that path ran inside the app where anyone could create
    it (a fresh user planted one under /tmp). It is opened only where the file and the
    folders above it are this user's or root's and no one else can write them."""
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    plan = (out / "plan.c").read_text()
    exported = json.loads((out / "manifest.json").read_text())["native"]["exported_device"]["library"]
    assert f'"{exported}"' in plan, exported  # a path, or a name (Debian PoCL: libpocl.so.2.10.0)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)  # others can write it (no sticky bit)
    planted, marker = open_dir / "libOpenCL-planted.so", tmp_path / "ran"
    src = tmp_path / "planted.c"
    src.write_text(PLANTED)
    r = subprocess.run([CC, "-shared", "-fPIC", f'-DMARKER="{marker}"', "-o", str(planted), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (out / "plan.c").write_text(plan.replace(f'"{exported}"', f'"{planted}"'))
    r = subprocess.run(["sh", str(out / "build.sh")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    # no device matches: every library is tried, the exporting machine's last
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([{"device": "no such device"}]))
    assert r.stdout.startswith("REFUSED"), (r.stdout, r.stderr)
    assert not marker.exists(), "the planted library ran"
    assert "can be written by others" in r.stdout and str(planted) in r.stdout, r.stdout


QUIET_CHILD = r'''
import sys
sys.modules["litecl"] = None
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
import json
so, model, opts = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
try:
    d = load_delegate(so, {**opts, **json.loads(sys.argv[4])})
except ValueError as e:  # load_delegate appends what report_error was given
    print("REFUSED", str(e).splitlines()[-1])
    raise SystemExit
Interpreter(model_path=model, experimental_delegates=[d],
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES).allocate_tensors()
print("RAN")
'''


def test_litecl_quiet_is_read_as_litecl_delegate_reads_it(models, tmp_path, fast_device):
    """LITECL_QUIET follows errors.env_flag here too: 0 or OFF (any case, blanks around)
    or empty print the Replacing line, yes or 1 silence it, and another value is refused
    naming the variable unless the quiet option is given (it took "OFF" and "maybe" as
    yes)."""
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)

    def child(value: str, options: str = "{}") -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["LITECL_QUIET"] = value
        return subprocess.run([sys.executable, "-c", QUIET_CHILD, str(out / "liblitecl_delegate.so"),
                               str(models["cast_f32_f16"]), str(out / "exported_device.json"), options],
                              capture_output=True, text=True, timeout=300, env=env, cwd="/")

    for value, quiet in (("0", False), (" OFF ", False), ("", False), ("Yes", True), ("1", True)):
        r = child(value)
        assert r.stdout.strip() == "RAN", (value, r.stdout, r.stderr[-800:])
        assert ("Replacing 1 out of 1 node(s)" in r.stderr) is not quiet, (value, r.stderr)
    r = child("maybe")
    assert r.stdout.strip() == ("REFUSED litecl: LITECL_QUIET must be one of 1, 0, true, false, yes, no, on "
                                "or off (or unset), got 'maybe'"), (r.stdout, r.stderr[-800:])
    r = child("maybe", '{"quiet": "0"}')  # the option wins, as litecl.Delegate(quiet=False)
    assert r.stdout.strip() == "RAN" and "Replacing 1 out of 1 node(s)" in r.stderr, (r.stdout, r.stderr[-800:])


def test_a_platform_that_is_not_there_is_named_with_the_platforms_found(models, tmp_path, fast_device):
    """The platform option names no platform of the library: one line naming the platform
    asked for and the library's platforms (it said 'no OpenCL device <the device> on
    platform <it>', as if the device were missing)."""
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    opts = json.loads((out / "exported_device.json").read_text())
    cases = [{**opts, "platform": "No Such Platform"}, {**opts, "platform": opts["platform"].lower()[:8]}]
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps(cases))
    rows = r.stdout.splitlines()
    assert [ln.split()[0] for ln in rows] == ["REFUSED", "LOADED"], (r.stdout, r.stderr)
    e = json.loads(rows[0].split(" ", 1)[1])
    head = (f'litecl: no OpenCL device for litecl\'s kernels on platform No Such Platform, device {opts["device"]} '
            f'(libraries tried: "{opts["library"]}"; platforms: ')
    assert e.startswith(head) and e.endswith("; set the library, platform, device or device_type option)"), e
    assert f'"{opts["platform"]}"' in e[len(head):], e  # an ICD loader may list several


def test_messages_name_a_long_library_path_whole(models, tmp_path, fast_device):
    """A library path of ~400 bytes (a venv deep in a home folder) and a long platform
    name appear whole in the refusal: the messages cut them at 80 and 60 bytes."""
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    opts = json.loads((out / "exported_device.json").read_text())
    if "/" not in opts["library"]:
        pytest.skip(f"the export names a library by name ({opts['library']}), not by path")
    deep = tmp_path.joinpath(*["a-long-folder-name-of-a-user-venv"] * 12)
    deep.parent.mkdir(parents=True)
    deep.symlink_to(Path(opts["library"]).parent)  # the library's own folder: its $ORIGIN siblings
    lib = deep / Path(opts["library"]).name
    wanted = "No Such Platform " + "x" * 200
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([{**opts, "library": str(lib),
                                                                         "platform": wanted}]))
    (row,) = r.stdout.splitlines()
    e = json.loads(row.split(" ", 1)[1])
    assert len(str(lib)) > 400 and f'on platform {wanted}, device ' in e and f'(libraries tried: "{lib}"; ' in e, e


def test_export_writes_the_delegate_files(models, tmp_path, fast_device):
    out = tmp_path / "e"
    assert main(["export", str(models["quant_add"]), "--out", str(out), "--device", fast_device]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert {"build.sh", "plan.c", "src", "delegate_options.json", "exported_device.json", "manifest.json"} <= set(names)
    # the options as written load anywhere: no library or device of this machine in them
    assert json.loads((out / "delegate_options.json").read_text()) == {}
    assert sorted(p.name for p in (out / "src").iterdir()) == sorted(
        ["litecl_delegate.c", "cl_loader.c", "cl_loader.h", "litert_check.c", "litert_check.h", "tflite_abi.h",
         "litecl_plan.h"])
    opts = json.loads((out / "exported_device.json").read_text())
    assert set(opts) == {"library", "platform", "device"}
    import litecl

    caps = litecl.open_device(fast_device).caps
    assert (opts["platform"], opts["device"]) == (caps.platform, caps.name)
    build = (out / "build.sh").read_text()
    assert "cc=${CC:-cc}" in build and "$cc -std=c99 -Wall -Wextra -Werror" in build and "-ldl" in build
    assert "-lOpenCL" not in build and '-o "build/$abi/liblitecl_delegate.so"' in build
    m = json.loads((out / "manifest.json").read_text())
    assert m["native"]["options"] == {} and m["native"]["exported_device"] == opts
    assert m["native"]["library"] == "liblitecl_delegate.so"
    # the tested versions come from backend/abi.py TESTED, the one list, into plan.c and the manifest
    from litecl.abi import TESTED

    assert m["native"]["tested_versions"] == {k: list(v) for k, v in TESTED.items()}
    pairs = ", ".join(f'"{k}", "{v}"' for k, vs in TESTED.items() for v in vs)
    assert f"static const char *const TESTED[{2 * sum(map(len, TESTED.values()))}] = {{{pairs}}};" in (
        out / "plan.c").read_text()
    # a broadcast ADD's kernel bakes its shapes: marked so in plan.c (shape_fixed 1)
    assert m["native"]["launches"] == 2 and m["native"]["programs"] >= 1


def test_built_library_needs_only_libc(models, tmp_path, fast_device):
    _need(CC)
    if shutil.which("readelf") is None:
        pytest.skip("no readelf on PATH")
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    r = subprocess.run(["readelf", "-d", str(out / "liblitecl_delegate.so")], capture_output=True, text=True)
    needed = sorted(ln.split("[")[1].rstrip("]") for ln in r.stdout.splitlines() if "(NEEDED)" in ln)
    assert all(n.startswith(("libc.so", "libdl.so", "ld-linux")) for n in needed), needed
    r = subprocess.run(["readelf", "--dyn-syms", "-W", str(out / "liblitecl_delegate.so")], capture_output=True,
                       text=True)
    exported = {ln.split()[-1] for ln in r.stdout.splitlines() if " GLOBAL " in ln and " UND " not in ln}
    assert exported == {"tflite_plugin_create_delegate", "tflite_plugin_destroy_delegate", "litecl_native_tiling",
                        "litecl_native_programs_built"}  # the last two for tests


def test_cross_build_for_arm64_is_warning_free(models, tmp_path, fast_device):
    _need(CROSS)
    out = tmp_path / "e"
    _export_build(models["fused_chain"], out, fast_device, cc=CROSS)
    head = (out / "build" / "arm64-v8a" / "liblitecl_delegate.so").read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 183  # EM_AARCH64
    if shutil.which("readelf"):  # what an Android or arm64 board needs beside it: libc and libdl only
        r = subprocess.run(["readelf", "-d", str(out / "build" / "arm64-v8a" / "liblitecl_delegate.so")],
                           capture_output=True, text=True)
        needed = sorted(ln.split("[")[1].rstrip("]") for ln in r.stdout.splitlines() if "(NEEDED)" in ln)
        # (glibc 2.34+ holds dlopen in libc: -ldl adds no libdl entry there)
        assert needed and {n.split(".so")[0] for n in needed} <= {"libc", "libdl"}, needed
    # a cross build leaves the host's: only a build for this machine links DIR/liblitecl_delegate.so
    assert not (out / "liblitecl_delegate.so").exists()
    # the exporting device's program binaries (for this machine's architecture) stay out of
    # an arm64 library (MoveNet's was 87% x86-64 binaries: a fresh user's app)
    import re  # noqa: PLC0415

    plan = (out / "plan.c").read_text()
    # each program binary's bytes (a window from its middle): in the host's build, never in
    # the arm64 one (a size comparison assumed both architectures' code equal in size:
    # Intel's smaller binaries fell under it, its arm64 code being the larger)
    blobs = [bytes(int(v) for v in body.split(",") if v.strip())
             for body in re.findall(r"static const unsigned char BIN\d+\[\d+\] = \{([^}]*)\}", plan)]
    arm = (out / "build" / "arm64-v8a" / "liblitecl_delegate.so").read_bytes()
    _export_build(models["fused_chain"], out, fast_device)
    if blobs:  # a runtime that gives binaries
        assert "#if defined(__x86_64__)" in plan or "#if defined(__aarch64__)" in plan
        host = (out / "build" / "x86_64" / "liblitecl_delegate.so").read_bytes()
        for b in blobs:
            window = b[len(b) // 2: len(b) // 2 + 256]
            assert window in host and window not in arm, len(b)
    assert (out / "liblitecl_delegate.so").resolve() == (out / "build" / "x86_64" / "liblitecl_delegate.so").resolve()
    # the export again removed the arm64 build of the earlier plan.c (a stale one ran another
    # model's plan: nothing on OpenCL); the host build made only the host's
    assert not (out / "build" / "arm64-v8a" / "liblitecl_delegate.so").exists()


@pytest.mark.parametrize("cc", [CC, CROSS])
def test_build_sh_takes_cflags_after_its_own_and_builds_warning_free_at_each_level(cc, models, tmp_path,
                                                                                  fast_device):
    """DIR/build.sh keeps -std=c99 -Wall -Wextra -Werror and appends $CFLAGS after them: a
    user's ``CFLAGS="-O0 -g" sh build.sh`` builds, with debug info. The C is warning-free
    at -O0 -g, -O1, -O2, -O3, -Os and -Og (gcc's -Wformat-truncation warned on the build
    log's first line at every level but -O2 and -O3), natively and for arm64."""
    _need(cc)
    out = tmp_path / "e"
    _export_build(models["quant_add"], out, fast_device, cc=cc)  # no CFLAGS: litecl's flags alone
    build = (out / "build.sh").read_text()
    assert "-std=c99 -Wall -Wextra -Werror -O2" in build
    assert build.index("-Werror") < build.index("${CFLAGS:-}")
    so = out / "build" / ("arm64-v8a" if cc == CROSS else "x86_64") / "liblitecl_delegate.so"
    for flags in ("-O0 -g", "-O1", "-O2", "-O3", "-Os", "-Og"):
        so.unlink()
        r = subprocess.run(["sh", str(out / "build.sh")], capture_output=True, text=True,
                           env={**os.environ, "CC": cc, "CFLAGS": flags})
        assert r.returncode == 0 and "warning" not in r.stderr.lower(), (flags, r.stderr)
        assert so.is_file(), flags
        if flags == "-O0 -g" and shutil.which("readelf"):
            sections = subprocess.run(["readelf", "-S", "-W", str(so)], capture_output=True, text=True).stdout
            assert ".debug_info" in sections  # the user's -g reached the compiler


def test_untested_litert_version_is_refused_with_one_line(models, tmp_path, fast_device, monkeypatch):
    """Built with a tested list that does not hold the installed LiteRT (export writes
    backend/abi.py TESTED; here replaced for this export only): tflite_plugin_create_delegate
    returns NULL, load_delegate raises ValueError with the line, and the same one line is
    on stderr (an app that falls back to the CPU on ValueError still shows why); nothing
    crashes. Built with the real list, the installed LiteRT passes (every other test)."""
    _need(CC)
    import importlib.metadata as md

    from litecl import plan_c

    monkeypatch.setattr(plan_c, "tested_versions", lambda: {"ai-edge-litert": ["9.9."], "tensorflow": ["9.8."]})
    out = tmp_path / "e"
    m = _export_build(models["cast_f32_f16"], out, fast_device)
    assert m["native"]["tested_versions"] == {"ai-edge-litert": ["9.9."], "tensorflow": ["9.8."]}
    opts = json.loads((out / "exported_device.json").read_text())
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([opts]))
    assert r.returncode == 0, r.stderr[-800:]
    (row,) = r.stdout.splitlines()
    assert row.startswith("REFUSED "), (r.stdout, r.stderr)
    said = json.loads(row.split(" ", 1)[1])
    v = md.version("ai-edge-litert")
    assert said.startswith(f"litecl: ai-edge-litert {v} (") and said.endswith(
        "is not a version litecl's native delegate was checked against (ai-edge-litert 9.9.x; tensorflow 9.8.x): "
        "its TFLite C structs may differ; install a tested version (or, at your risk, the option "
        "untested_runtime=yes)"), said
    lines = [ln for ln in r.stderr.splitlines() if "litecl" in ln]
    assert lines == [f"ERROR: {said}"], r.stderr
    # the user's choice (tflite-runtime 2.14 on a board ran MoveNet bit-exact: a fresh user's
    # report): one WARNING line, and the per-Prepare layout check stands guard
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([{**opts, "untested_runtime": "yes"}]))
    assert r.stdout.splitlines() == ["LOADED"], (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if "litecl" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"WARNING: litecl: ai-edge-litert {v} (") and \
        "untested_runtime is on: litecl relies on each Prepare's check" in lines[0], r.stderr


NO_LITERT_CHILD = r"""
import ctypes as C, json, sys
sys.modules["litecl"] = None
sys.modules["ai_edge_litert"] = None   # no LiteRT wheel loaded: no version to find
so, opts = C.CDLL(sys.argv[1]), json.load(open(sys.argv[2]))
n = len(opts)
keys = (C.c_char_p * n)(*[k.encode() for k in opts])
values = (C.c_char_p * n)(*[str(v).encode() for v in opts.values()])
so.tflite_plugin_create_delegate.restype = C.c_void_p
d = so.tflite_plugin_create_delegate(keys, values, n, None)
print("CREATED" if d else "REFUSED", flush=True)
PREPARE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p)
prepare = PREPARE(C.cast(d + 8, C.POINTER(C.c_void_p))[0])   # TfLiteDelegate.Prepare
# a TfLiteContext (200 bytes) as a runtime with other structs would lay it out: a count
# and data pointers where litecl reads function pointers
heap = [C.create_string_buffer(64) for _ in range(25)]
ctx = (C.c_void_p * 25)(*[C.addressof(b) for b in heap])
ctx[0] = 3
print("PREPARE", prepare(C.addressof(ctx), d), flush=True)
so.tflite_plugin_destroy_delegate.argtypes = [C.c_void_p]
so.tflite_plugin_destroy_delegate(d)
print("DONE")
"""


def test_without_a_litert_version_it_says_so_and_a_context_of_other_structs_is_declined(models, tmp_path,
                                                                                       fast_device):
    """No version to read (no LiteRT wheel loaded, no TfLiteVersion: as in an Android app):
    create says so in one line and loads; its Prepare then checks the context's layout
    and declines one whose function pointers are not code, with one line and no call
    into it (kTfLiteOk: LiteRT keeps the graph), no crash."""
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, fast_device)
    r = _child(NO_LITERT_CHILD, out / "liblitecl_delegate.so", out / "exported_device.json")
    assert r.returncode == 0 and r.stdout.split() == ["CREATED", "PREPARE", "0", "DONE"], (r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if "litecl" in ln]
    assert lines == [
        "INFO: litecl: no TFLite runtime version found in this process (no ai_edge_litert, tensorflow or "
        "tflite_runtime wheel loaded, no TfLiteVersion symbol): litecl relies on each Prepare's check that LiteRT's "
        "TfLiteContext reads as its structs expect",
        "WARNING: litecl: LiteRT's TfLiteContext does not read as litecl's TFLite structs (tflite_abi.h) expect "
        "(its GetExecutionPlan is not code of a loaded library); litecl claims none of its nodes"], r.stderr


def test_median_interval_is_the_order_statistics_around_the_median():
    """benchmarks/bench_native.py median_ci: ranks n/2 -+ 0.98 sqrt(n) of the sorted values;
    over many samples of a known distribution it holds the true median 93-98% of the time."""
    assert median_ci(range(1, 101)) == (40.0, 61.0)  # n = 100: ranks 40 and 61 (of 1..100)
    rng = np.random.default_rng(0)
    held = sum(lo <= 0.0 <= hi for lo, hi in (median_ci(rng.standard_cauchy(60)) for _ in range(2000)))
    assert 0.93 <= held / 2000 <= 0.98, held


def test_bench_child_times_pairs_in_chunks_with_a_floor_around_each(models, tmp_path, fast_device):
    """run_child's timing protocol (chunks on "go", the floor measured between them, "stop"):
    at least 40 pairs, the median difference and its interval, the same over the floor."""
    _need(CC)
    out = tmp_path / "e"
    model = models["cast_f32_f16"]
    _export_build(model, out, fast_device)
    floors = []
    res = run_child(out / "liblitecl_delegate.so", model, out / "exported_device.json", _inputs(model, out), 0.2,
                    floor=lambda: floors.append(1) or 50.0, partitions=1, tol_floors=10.0, max_secs=5.0)
    assert res.get("bit_exact") and res["replacing"] == [(1, 1, 1)], res
    assert res["pairs"] >= 40 and len(floors) >= 2 and res["floor_us"] == 50.0, res
    lo, hi = res["diff_ci_us"]
    assert lo <= res["diff_us"] <= hi and abs(res["diff_floors"] - res["diff_us"] / 50.0) < 1e-9, res
    assert {"litert_us", "native_us", "diff_litert_first_us", "diff_native_first_us", "loadavg_1min"} <= set(res)


def test_keep_order_option_is_bit_exact_and_claims_the_same(tmp_path, fast_device):
    """keep_order=1 (LiteRT's own nodes stay in the model's order: marked
    might_have_side_effect for the ReplaceNodeSubsetsWithDelegateKernels call, their flags
    put back after; litecl_delegate.c keep_order_begin): on models whose partitions it
    leaves as they are (CL | CPU | CL | CPU | CL, and a fan-out across partitions) the
    Replacing line is the default's and the outputs are LiteRT's, also after a resize (a
    new Prepare); a bad value is refused with one line naming the option."""
    _need(CC)
    from models.builders import multi_op_model  # noqa: PLC0415

    for pattern, shape in (("alternating", [2, 3, 4]), ("fanout_mixed", [2, 3, 4])):
        m = tmp_path / f"{pattern}.tflite"
        m.write_bytes(multi_op_model(pattern, tuple(shape)))
        out = tmp_path / pattern
        _export_build(m, out, fast_device)
        opts = json.loads((out / "exported_device.json").read_text())
        lines = {}
        for keep in ("0", "1"):
            f = tmp_path / f"{pattern}_{keep}.json"
            f.write_text(json.dumps({**opts, "keep_order": keep}))
            for sh in (shape, [5, 7, 3]):
                r = _child(RESIZE_CHILD, out / "liblitecl_delegate.so", m, f, json.dumps(sh))
                assert r.returncode == 0 and "EQUAL" in r.stdout, (pattern, keep, sh, r.stderr[-500:])
                lines[(keep, tuple(sh))] = [ln for ln in r.stderr.splitlines() if "Replacing" in ln]
        assert lines[("0", tuple(shape))] == lines[("1", tuple(shape))] != [], lines
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([{**opts, "keep_order": "maybe"},
                                                                        {**opts, "keep_order": ""}]))
    rows = r.stdout.splitlines()
    assert len(rows) == 2 and all(x.startswith("REFUSED") and "keep_order" in x and "or auto" in x for x in rows), rows


#: LiteRT's partitioned plan as a delegate applied after the native one sees it (a ctypes
#: probe, no litecl): [[node, builtin code, might_have_side_effect]], and whether the
#: outputs equal LiteRT alone's
PROBE_CHILD = r'''
import ctypes as C, json, sys
sys.modules["litecl"] = None
sys.modules["pyopencl"] = None
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
so, model, opts, off = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), json.loads(sys.argv[4])
PLAN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p))
NODE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int, C.POINTER(C.c_void_p), C.POINTER(C.c_void_p))
plans = []
@C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p)
def prepare(ctx, dlg):
    fp = C.cast(ctx, C.POINTER(C.c_void_p))
    arr, nd, reg = C.c_void_p(), C.c_void_p(), C.c_void_p()
    PLAN(fp[off["plan"] // 8])(ctx, C.byref(arr))
    ints = C.cast(arr, C.POINTER(C.c_int))
    rows = []
    for k in range(ints[0]):
        NODE(fp[off["node"] // 8])(ctx, ints[1 + k], C.byref(nd), C.byref(reg))
        rows.append([ints[1 + k], C.c_int32.from_address(reg.value + off["code"]).value,
                     C.c_bool.from_address(nd.value + off["flag"]).value])
    plans.append(rows)
    return 0
st = (C.c_void_p * 7)()   # TfLiteDelegate: data_, Prepare, 3 buffer-handle functions, flags, builder
st[1], st[5] = C.cast(prepare, C.c_void_p), 1   # AllowDynamicTensors
probe = type("Probe", (), {"_get_native_delegate_pointer": lambda self: C.addressof(st)})()
outs = []
for dl in ([], [load_delegate(so, opts), probe]):
    it = Interpreter(model_path=model, experimental_delegates=dl,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for k, x in enumerate(it.get_input_details()):
        it.set_tensor(x["index"], (np.random.default_rng(k).standard_normal(x["shape"]) * 3).astype(x["dtype"]))
    it.invoke()
    outs.append([it.get_tensor(o["index"]).tobytes() for o in it.get_output_details()])
print(json.dumps({"plan": plans[0], "equal": outs[0] == outs[1]}))
'''


def test_keep_order_auto_decides_as_the_python_delegate(tmp_path, fast_device):
    """keep_order no / yes / auto and the default (none given): LiteRT's partitioned plan
    behind the native delegate is the one order.partition predicts for the order the
    Python delegate keeps with the same setting (the default: KEEP_ORDER_DEFAULT), every
    node's might_have_side_effect is clear again, and the outputs are LiteRT's. "auto"
    keeps the order only where the greedy order makes more per-invoke bytes live at once
    (weights_model(True): yes; its constant weights, run once: no; split_model: the
    partitions would change, never)."""
    _need(CC)
    import litecl  # noqa: PLC0415
    from litecl import abi  # noqa: PLC0415
    from litecl.delegate import KEEP_ORDER_DEFAULT  # noqa: PLC0415
    from test_keep_order import _simulated, _wiring, split_model, weights_model  # noqa: PLC0415

    off = {"plan": abi.TfLiteContext.GetExecutionPlan.offset, "node": abi.TfLiteContext.GetNodeAndRegistration.offset,
           "code": abi.TfLiteRegistration.builtin_code.offset, "flag": abi.TfLiteNode.might_have_side_effect.offset}
    settings = {"0": False, "1": True, "auto": "auto", None: KEEP_ORDER_DEFAULT}
    decided = {}
    for name, raw in (("per_invoke", weights_model(True)), ("once", weights_model(False)), ("split", split_model())):
        m = tmp_path / f"{name}.tflite"
        m.write_bytes(raw)
        out = tmp_path / name
        _export_build(m, out, fast_device)
        opts = json.loads((out / "exported_device.json").read_text())
        assert "keep_order" not in opts
        wiring = _wiring(raw)
        for value, py in settings.items():
            d = litecl.Delegate(fast_device, quiet=True, keep_order=py)
            make_interpreter(raw, delegates=[d])
            claimed = {r["index"] for r in d.placement() if r["placement"] == "opencl"}
            kept = d.subgraph_records()[0]["kept_order"]
            f = tmp_path / f"{name}_{value}.json"
            f.write_text(json.dumps(opts if value is None else {**opts, "keep_order": value}))
            r = _child(PROBE_CHILD, out / "liblitecl_delegate.so", m, f, json.dumps(off))
            assert r.returncode == 0, r.stderr[-800:]
            got = json.loads(r.stdout)
            assert got["equal"] and not any(flag for _, _, flag in got["plan"]), (name, value, got)
            live = [i if i < len(wiring) else "D" for i, _, _ in got["plan"]]
            assert live == _simulated(wiring, claimed, kept), (name, value, live)
            decided[(name, value)] = kept
    assert decided == {(n, v): (v in ("1", "auto", None) and n == "per_invoke") or (v == "1" and n == "once")
                       for n in ("per_invoke", "once", "split") for v in settings}, decided


TF_THEN_NATIVE = """
import json, sys
import numpy as np
import tensorflow as tf  # noqa: F401  (exports its LLVM process-wide, before the delegate loads)
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
so, model, opts = sys.argv[1:4]
dlg = load_delegate(so, json.load(open(opts)))
R = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
outs = []
for dels in ([], [dlg]):
    it = Interpreter(model_path=model, experimental_op_resolver_type=R, experimental_delegates=dels)
    it.allocate_tensors()
    rng = np.random.default_rng(0)
    for d in it.get_input_details():
        it.set_tensor(d["index"], rng.integers(0, 255, d["shape"]).astype(d["dtype"]))
    it.invoke()
    outs.append([it.get_tensor(o["index"]).tobytes() for o in it.get_output_details()])
assert outs[0] == outs[1]
print("OK")
"""


def test_loaded_after_tensorflow_it_runs_bit_exact(models, tmp_path):
    """TensorFlow imported, then the PoCL delegate loaded (tf.lite users do so): Debian's
    PoCL links its own LLVM and clang, whose static initialisers ran into TensorFlow's
    LLVM and segfaulted at load (a fresh user's report); cl_loader.c opens the runtime
    with RTLD_DEEPBIND where TensorFlow is mapped, and with no options the ICD loader's
    vendor libraries too. MoveNet, bit for bit with LiteRT."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("tensorflow is not installed (the test extra has it)")
    if DEVICE_STATUS.get("pocl"):
        pytest.skip(DEVICE_STATUS["pocl"])
    if "movenet_singlepose_lightning_int8" not in models:
        pytest.skip("the shared MoveNet model is absent")
    _need(CC)
    out = tmp_path / "mv"
    _export_build(models["movenet_singlepose_lightning_int8"], out, "pocl")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", POCL_CACHE_DIR=str(tmp_path / "pocl"))
    env.pop("PYTHONPATH", None)
    none = tmp_path / "no_options.json"
    none.write_text("{}")
    # the exporting device's options, then none: the library then opens the ICD loader,
    # which opened Debian's PoCL plainly and segfaulted (a fresh user's report); cl_loader.c
    # opens the loader's vendor libraries first with RTLD_DEEPBIND where TensorFlow is mapped
    for opts in (out / "exported_device.json", none):
        r = subprocess.run([sys.executable, "-c", TF_THEN_NATIVE, str(out / "liblitecl_delegate.so"),
                            str(models["movenet_singlepose_lightning_int8"]), str(opts)],
                           capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
        assert r.returncode == 0, f"{opts.name}: rc={r.returncode}: {r.stderr[-1500:]}"
        assert r.stdout.strip().endswith("OK"), r.stdout


def test_llvm_exporters_are_the_python_side_s():
    """cl_loader.c's LLVM_EXPORTERS names the libraries device.py's _LLVM_EXPORTERS names."""
    import re

    from litecl import device

    src = (ROOT / "backend" / "native" / "cl_loader.c").read_text()
    block = src[src.index("LLVM_EXPORTERS[] = {"):].split("};", 1)[0]
    assert tuple(re.findall(r'"([^"]+)"', block)) == device._LLVM_EXPORTERS



def _family_index(out: Path, name: str) -> int:
    """LCL_FAMILIES index of family ``name`` in an export's plan.c."""
    rows = (out / "plan.c").read_text().split("const lcl_family LCL_FAMILIES[] = {\n", 1)[1].split("\n};", 1)[0]
    names = [ln.strip().split('"')[1] for ln in rows.splitlines() if ln.strip().startswith('{"')]
    return names.index(name)


START_CHILD = r"""
import ctypes, sys, json
import numpy as np
sys.modules["litecl"] = None
from ai_edge_litert.interpreter import Interpreter, load_delegate
so, model = sys.argv[1], sys.argv[2]
d = load_delegate(so, json.loads(sys.argv[3]))
it = Interpreter(model_path=model, experimental_delegates=[d] * (2 if sys.argv[4:] == ["twice"] else 1))
ref = Interpreter(model_path=model)
it.allocate_tensors(); ref.allocate_tensors()
x = np.concatenate([np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 1e-40, 4e4, -4e4, 3e9], np.float32),
                    np.random.default_rng(0).normal(0, 3e4, 1990).astype(np.float32)])
for i in (it, ref):
    i.set_tensor(i.get_input_details()[0]["index"], x); i.invoke()
same = all(np.array_equal(it.get_tensor(o["index"]).view(np.uint8), ref.get_tensor(o["index"]).view(np.uint8))
           for o in it.get_output_details())
print("EXACT" if same else "DIFFER", "BUILT", ctypes.CDLL(so).litecl_native_programs_built())
"""


def _start(out: Path, model: Path, options: dict, cache: Path, *more: str, env=None) -> tuple[bool, int, str]:
    """(bit-exact, programs built from source, stderr) of one process that loads the
    exported library with ``options`` and runs ``model`` beside LiteRT alone (``more``:
    "twice", the delegate twice in experimental_delegates), its default cache folder under
    ``cache`` (XDG_CACHE_HOME; the caller's LITECL_CACHE_DIR and LITECL_NO_CACHE left out
    unless ``env`` gives them)."""
    base = {k: v for k, v in os.environ.items() if k not in ("LITECL_CACHE_DIR", "LITECL_NO_CACHE")}
    r = subprocess.run([sys.executable, "-c", START_CHILD, str(out / "liblitecl_delegate.so"), str(model),
                        json.dumps(options), *more], capture_output=True, text=True, timeout=300,
                       env={**base, "XDG_CACHE_HOME": str(cache), **(env or {})}, cwd=out)
    assert r.returncode == 0 and "BUILT" in r.stdout, r.stderr[-800:]
    return "EXACT" in r.stdout, int(r.stdout.split("BUILT")[1]), r.stderr


def _int16_chain(tmp: Path) -> Path:
    m = tmp / "chain.tflite"
    m.write_bytes(chain_model(["float32", "int16", "int32"], [1999]))
    return m


def test_the_same_library_twice_in_the_delegate_list_says_so(tmp_path, fast_device):
    """experimental_delegates=[n, n]: the second application finds the first one's kernels
    and says so (it said 2 nodes "were taken by a delegate applied before litecl's"), as
    litecl.Delegate does; bit-exact."""
    _need(CC)
    m = _int16_chain(tmp_path)
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    exact, _, err = _start(out, m, {}, tmp_path / "cache", "twice")
    assert exact and "Replacing 2 out of 2" in err and "applied before" not in err, err
    assert err.count("taken by this same litecl delegate (it is in the delegate list twice)") == 1, err


def test_a_family_made_wrong_at_build_time_is_declined_and_the_model_stays_exact(tmp_path, fast_device):
    """Built with -DLITECL_TEST_WRONG_FAMILY=K (test-only, never an option): the family's
    programs return their integer results with the low bit flipped; the native self-test
    finds it, leaves that node to LiteRT with the reason, keeps the other node, and the
    outputs stay LiteRT's bit for bit. Built without it, both nodes are claimed."""
    _need(CC)
    m = _int16_chain(tmp_path)
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    k = _family_index(out, "CAST float32->int16")
    exact, _, err = _start(out, m, {}, tmp_path / "cache")
    assert exact and "Replacing 2 out of 2" in err and "left to LiteRT" not in err, err
    r = subprocess.run(["sh", str(out / "build.sh")], capture_output=True, text=True,
                       env={**os.environ, "CFLAGS": f"-DLITECL_TEST_WRONG_FAMILY={k}"})
    assert r.returncode == 0, r.stderr
    exact, _, err = _start(out, m, {}, tmp_path / "cache")
    lines = [ln for ln in err.splitlines() if "left to LiteRT" in ln]
    assert exact and "Replacing 1 out of 2" in err, err
    assert len(lines) == 1 and "node 0 left to LiteRT" in lines[0], err
    assert "computes CAST float32->int16 wrong" in lines[0] and "of 77 edge values" in lines[0], lines


def test_an_unwritable_cache_dir_is_said_once_and_the_model_runs_exact(tmp_path, fast_device):
    """cache_dir naming something no folder can be made at (a file): the delegate runs on,
    bit-exact, building from source, and says so in one WARNING line naming the folder,
    as litecl's Python cache warns once (backend/cache.py)."""
    _need(CC)
    m = _int16_chain(tmp_path)
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    exact, built, err = _start(out, m, {"binaries": "0", "cache_dir": str(blocker)}, tmp_path / "cache")
    lines = [ln for ln in err.splitlines() if "cache folder" in ln]
    assert exact and built >= 1, err
    assert len(lines) == 1 and lines[0].startswith(f"WARNING: litecl: the cache folder {blocker} is not a folder;"), err
    # a folder below a file: no folder can be made there
    exact, built, err = _start(out, m, {"cache_dir": str(blocker / "sub")}, tmp_path / "cache")
    lines = [ln for ln in err.splitlines() if "cannot write to the cache folder" in ln]
    # with the exported binaries (the exporting device) no program is built from source:
    # the line names what each process does again (a fresh user's said "builds its programs")
    assert exact and built == 0 and len(lines) == 1 and "self-test" in lines[0] and "from source" not in lines[0], err
    # a folder that is there but takes no file (procfs answers ENOENT): not "No such file"
    if os.path.isdir("/proc/self") and os.stat("/proc").st_uid == os.getuid():
        exact, _, err = _start(out, m, {"cache_dir": "/proc"}, tmp_path / "cache")
        lines = [ln for ln in err.splitlines() if "cannot write to the cache folder" in ln]
        assert exact and len(lines) == 1 and "(the folder takes no new file)" in lines[0], err
    exact, _, err = _start(out, m, {"binaries": "0", "cache_dir": str(tmp_path / "ok")}, tmp_path / "cache")
    assert exact and "cache folder" not in err, err
    # a folder others can write is neither read nor written (a binary planted there ran in
    # place of the kernel, and a planted "ok" verdict passed the self-test: a fresh user's report)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    exact, built, err = _start(out, m, {"binaries": "0", "cache_dir": str(shared)}, tmp_path / "cache")
    lines = [ln for ln in err.splitlines() if "cache folder" in ln]
    assert exact and built >= 1 and len(lines) == 1 and "others can write it; litecl does not use it" in lines[0], err
    assert not list(shared.iterdir())


def test_the_second_start_compiles_nothing_and_a_damaged_cache_file_is_rebuilt(tmp_path, fast_device):
    """binaries off (as on a device that is not the exporting one): the first start builds
    its programs from source and keeps them in cache_dir; a second process builds none; a
    damaged cache file is said in one INFO line, removed and built again; bit-exact each
    time."""
    _need(CC)
    m = _int16_chain(tmp_path)
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    cache = tmp_path / "cache"
    opts = {"binaries": "0", "cache_dir": str(cache)}
    exact, first, _ = _start(out, m, opts, cache)
    assert exact and first >= 1 and list(cache.glob("litecl-*.bin")), first
    exact, second, err = _start(out, m, opts, cache)
    assert exact and second == 0 and "refused" not in err, err
    for victim in cache.glob("litecl-*.bin"):  # every one: the self-tests' verdicts are cached too
        data = victim.read_bytes()
        victim.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    exact, third, err = _start(out, m, opts, cache)
    lines = [ln for ln in err.splitlines() if "building from source" in ln]
    assert exact and third >= 1 and len(lines) == 1, err  # one line per process
    # its checksum is wrong: the runtime never saw it (was "refused by ... (OpenCL error 0)")
    assert "the damaged cache file" in lines[0] and str(cache) in lines[0], lines
    assert "does not hold what litecl wrote" in lines[0] and "OpenCL error" not in lines[0], lines
    exact, fourth, err = _start(out, m, opts, cache)
    assert exact and fourth == 0 and "building from source" not in err, err


def test_a_cached_program_whose_kernel_takes_other_arguments_is_rebuilt(tmp_path, fast_device):
    """Two cached programs whose kernels share a name (litecl_fused) but not their
    parameters, swapped: the runtime built each, so every Prepare failed at clSetKernelArg,
    in every process, until the folder was cleared by hand (a fresh user's report). The
    kernel's parameter count is checked against its source: the file is refused, removed
    and built again, with one INFO line; bit-exact."""
    _need(CC)
    m = tmp_path / "two.tflite"
    m.write_bytes(chain_model(["float32", "float16", "float32", ("mul", 2.0), "int32",
                               ("add", np.full([1999], 3, np.int32)), "float32"], [1999]))
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    cache = tmp_path / "cache"
    opts = {"binaries": "0", "cache_dir": str(cache)}
    exact, built, _ = _start(out, m, opts, cache)
    assert exact and built >= 2
    fused = [f for f in cache.glob("litecl-*.bin") if b"litecl_fused" in f.read_bytes()]
    assert len(fused) == 2, fused
    a, b = (f.read_bytes() for f in fused)
    fused[0].write_bytes(b)
    fused[1].write_bytes(a)
    exact, built, err = _start(out, m, opts, cache)
    lines = [ln for ln in err.splitlines() if "building from source" in ln]
    assert exact and built >= 1 and len(lines) == 1 and "(OpenCL error -42)" in lines[0], err
    exact, built, err = _start(out, m, opts, cache)
    assert exact and built == 0 and "building from source" not in err, err


DAEMONS_AT_EXIT = r"""
import sys, threading, time
import numpy as np
sys.modules["litecl"] = None
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
so, model = sys.argv[1:3]
def loop():
    it = Interpreter(model_path=model, experimental_delegates=[load_delegate(so, {"quiet": "1"})],
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    while True:
        it.invoke()
for _ in range(4):
    threading.Thread(target=loop, daemon=True).start()
time.sleep(float(sys.argv[3]))
print("main done", flush=True)
"""


def test_daemon_threads_invoking_at_exit_do_not_crash(models, tmp_path, fast_device):
    """The process exits while daemon threads invoke through the exported library: exit()
    tore the OpenCL runtime down under a thread inside clEnqueueNDRangeKernel (SIGSEGV in 6
    of 20 processes, a fresh user's report and here). The library's atexit handler
    (lcl_exit_now, registered when it opens a device) stops new OpenCL work and waits for
    the work in flight."""
    _need(CC)
    if "movenet_singlepose_lightning_int8" not in models:
        pytest.skip("the shared MoveNet model is absent")
    out = tmp_path / "mv"
    # Intel's runtime, where it crashed (its teardown at exit); else the fast device
    _export_build(models["movenet_singlepose_lightning_int8"], out,
                  "intel" if not DEVICE_STATUS.get("intel") else fast_device)
    for k in range(8):
        r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", DAEMONS_AT_EXIT, str(out / "liblitecl_delegate.so"),
                            str(models["movenet_singlepose_lightning_int8"]), str(0.1 + 0.05 * k)],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert r.returncode == 0 and "main done" in r.stdout, (k, r.returncode, r.stderr[-1500:])


@pytest.mark.parametrize("name", ["variable_cast", "while_cast"])
def test_nodes_without_outputs_or_leaving_one_out_are_read_as_any_node(name, tmp_path, fast_device):
    """A node with no outputs (ASSIGN_VARIABLE, CALL_ONCE: resource variables) or with an
    unused output left out as -1 (TensorFlow's WHILE) is a valid TFLite node: the native
    delegate claims what export says it claims, bit-exact, with no word of mismatched
    structs. It read every node with the CAST/ADD check (outputs present and >= 0) and
    claimed nothing in such a subgraph, blaming the structs (a fresh user's report)."""
    _need(CC)
    model = tmp_path / f"{name}.tflite"
    model.write_bytes(tf_model(name))
    out = tmp_path / name
    m = _export_build(model, out, fast_device)
    promised = sum(s["native_claimed"] for s in m["native"]["subgraphs"])
    assert promised > 0, m["native"]["subgraphs"]
    res = run_child(out / "liblitecl_delegate.so", model, out / "exported_device.json", _inputs(model, out), 0)
    assert res.get("bit_exact"), res
    assert "does not read as" not in json.dumps(res), res
    assert sum(r[0] for r in res.get("replacing", [])) == promised, (res, m["native"]["subgraphs"])


def test_export_plans_at_the_shapes_an_inputs_file_gives(tmp_path, fast_device, capsys):
    """`litecl export --inputs NPZ` plans at the arrays' shapes, not the model's: a
    broadcast ADD exported at [2, 1, 5] + [3, 1] (declared [4, 1, 5] + [3, 1]) lists those
    shapes in the manifest; the built delegate leaves the node to LiteRT at the declared
    shapes, naming why, and claims it, bit-exact, once the app resizes to the exported
    ones. A name the model's inputs lack, and a .npz that is no archive, are one error line."""
    model = tmp_path / "bcast.tflite"
    model.write_bytes(add_model("float32", [4, 1, 5], [3, 1]))
    npz = tmp_path / "in.npz"
    np.savez(npz, input1=np.zeros((2, 1, 5), np.float32), input2=np.zeros((3, 1), np.float32))
    out = tmp_path / "ex"
    assert main(["export", str(model), "--out", str(out), "--device", fast_device, "--inputs", str(npz)]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert {t["name"]: t["shape"] for t in m["tensors"] if t["role"] == "input"} == \
        {"input1": [2, 1, 5], "input2": [3, 1]}, m["tensors"]
    bad = tmp_path / "bad.npz"
    np.savez(bad, nope=np.zeros((2,), np.float32))
    capsys.readouterr()
    assert main(["export", str(model), "--out", str(tmp_path / "ex2"), "--device", fast_device,
                 "--inputs", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: 'nope' is not an input of the model; its inputs: input1, input2"], err
    empty = tmp_path / "empty.npz"
    np.savez(empty)
    assert main(["export", str(model), "--out", str(tmp_path / "ex3"), "--device", fast_device,
                 "--inputs", str(empty)]) == 2
    assert capsys.readouterr().err.strip() == ("error: no input shapes given (an --inputs file with no arrays): "
                                               "name the inputs to plan at")
    from litecl.errors import InputError
    from litecl.export import export

    with pytest.raises(InputError, match=r"shape \[2147483648, 1, 5\] is not a list of integers from 0 to 2\^31 - 1"):
        export(str(model), str(tmp_path / "ex4"), device=fast_device, shapes={"input1": [2**31, 1, 5]})
    if shutil.which(CC) is None:
        return
    r = _resized_run(out, model, "[[4, 1, 5], [3, 1]]")
    assert "INFO: litecl: node 0 left to LiteRT at these input shapes" in r.stderr, r.stderr
    assert "Replacing" not in r.stderr, r.stderr
    # constructed at the declared shapes (left to LiteRT there), resized: claimed
    r = _resized_run(out, model, "[[2, 1, 5], [3, 1]]")
    assert r.stderr.rstrip().splitlines()[-1].startswith("INFO: Replacing 1 out of 1 node(s)"), r.stderr


def test_export_at_other_shapes_of_a_graph_with_invoke_time_shapes_says_what_stays(tmp_path, fast_device, capsys):
    """A graph with invoke-time shapes (its delegate sets AllowDynamicTensors) is prepared
    by LiteRT once, at construction, at the model's own shapes: a kernel that compiles in
    the shapes `--inputs` gave (a broadcast float32 ADD) is left to LiteRT there
    and never claimed after the app's resize. Export says so (left_at_construction, one
    line) instead of counting it as claimed (melspectrogram: "claims 1", the library
    none; a fresh user's report), and exits 1 as an export with nothing to ship (it
    exited 0 saying "build it with"); the app's run is bit-exact with no Replacing line."""
    model = tmp_path / "m.tflite"
    model.write_bytes(tf_model("add_then_dynamic"))
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.zeros((32, 1), np.float32))
    out = tmp_path / "ex"
    assert main(["export", str(model), "--out", str(out), "--device", fast_device, "--inputs", str(npz)]) == 1
    said = capsys.readouterr().out
    assert "the native delegate would take no node at the exported shapes" in said and "nothing to ship (exit 1)" \
        in said and "build it with" not in said, said
    (g,) = json.loads((out / "manifest.json").read_text())["native"]["subgraphs"]
    assert g["native_claimed"] == 0 and len(g["left_at_construction"]) == 1 and len(g["left_at_invoke"]) == 1, g
    assert "subgraph 0: the native delegate claims 0 of its 6 nodes at the exported shapes" in said, said
    assert "LiteRT prepares this graph's delegate once, at the model's own shapes" in said, said
    if shutil.which(CC) is None:
        return
    r = _resized_run(out, model, "[32, 1]")
    assert "Replacing" not in r.stderr, r.stderr


def test_devices_passed_over_name_each_device_once_whole(models, tmp_path):
    """Every device the library saw is named among those passed over, also one whose name is
    part of another's (Intel's runtime calls this CPU "AMD EPYC", PoCL "pthread-...-AMD
    EPYC": a substring check left Intel's out)."""
    if DEVICE_STATUS.get("intel") or DEVICE_STATUS.get("pocl"):
        pytest.skip("needs Intel's runtime and PoCL: " + (DEVICE_STATUS.get("intel") or DEVICE_STATUS["pocl"]))
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, "intel")
    opts = json.loads((out / "exported_device.json").read_text())
    # the system ICD loader's devices (Debian's PoCL where installed; not litecl's own ICD
    # folder, which lists Intel's first), then the exported library's
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LITECL_QUIET", "OCL_ICD_VENDORS")}
    r = subprocess.run([sys.executable, "-c", BAD_OPTIONS, str(out / "liblitecl_delegate.so"),
                        json.dumps([{"device": "zzz"}])], capture_output=True, text=True, timeout=300, env=env, cwd="/")
    (row,) = r.stdout.splitlines()
    seen = json.loads(row.split(" ", 1)[1]).split("devices passed over: ", 1)[1]
    assert f'"{opts["device"]}: not the device option\'s"' in seen, seen


def test_a_device_whose_compiler_failed_the_probe_at_export_is_never_picked(models, tmp_path, monkeypatch):
    """plan.c lists the exporting machine's devices whose compiler fails litecl's probe
    (pip's PoCL 3.0 on AMD Zen 4: an error there, while building litecl's CAST kernels its
    LLVM aborted the app that loaded the library); the library passes them over, saying
    why. Here PoCL stands in for such a device."""
    if DEVICE_STATUS.get("intel") or DEVICE_STATUS.get("pocl"):
        pytest.skip("needs Intel's runtime and PoCL: " + (DEVICE_STATUS.get("intel") or DEVICE_STATUS["pocl"]))
    _need(CC)
    from litecl import export, plan_c
    from litecl.device import open_device

    pocl = open_device("pocl").device
    row = (pocl.platform.name.strip(), pocl.name.strip(), pocl.driver_version.strip(), "unknown target CPU (a stand-in)")
    monkeypatch.setattr(plan_c, "refused_devices", lambda: [row])
    model = tmp_path / "cast.tflite"
    model.write_bytes(cast_model("float32", "int32", [757]))  # no cl_khr_fp16 needed: PoCL could run it
    out = tmp_path / "e"
    m = _export_build(model, out, "intel")
    assert m["native"]["refused_devices"] == [list(row)]
    # PoCL's own library: where no ICD loader is installed (pip's runtimes only) the
    # library's search would not reach it
    lib = export.opencl_library(row[0], row[1])
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so",
               json.dumps([{"library": lib, "platform": row[0], "device": row[1]}]))
    (line,) = r.stdout.splitlines()
    assert line.startswith("REFUSED") and (f'"{row[1]}: its compiler failed litecl\'s probe on the exporting machine '
                                           f'({row[3]})"') in json.loads(line.split(" ", 1)[1]), line


FORK_CHILD = r"""
import os, sys, numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
R = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
d = load_delegate(sys.argv[1], {})
def run():
    it = Interpreter(model_path=sys.argv[2], experimental_delegates=[d], experimental_op_resolver_type=R)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.ones(757, np.float32))
    it.invoke()
run()  # the parent opened the device
pid = os.fork()
if pid == 0:
    try:
        run()
        print("CHILD RAN", flush=True)
    except Exception as e:
        print("CHILD ERROR", " ".join(str(e).split()), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("device", ["pocl", "intel"])
def test_an_interpreter_in_a_fork_child_is_one_error_not_a_hang(device, tmp_path):
    """The exported library in a child fork()ed after the parent opened the device: one
    error line naming fork(), as litecl.Delegate says (a fresh user's pre-fork server
    blocked for good in PoCL's clWaitForEvents: its worker threads are gone in the child)."""
    if DEVICE_STATUS.get(device):
        pytest.skip(DEVICE_STATUS[device])
    _need(CC)
    model = tmp_path / "cast.tflite"
    model.write_bytes(cast_model("float32", "int32", [757]))
    out = tmp_path / "out"
    _export_build(model, out, device)
    r = _child(FORK_CHILD, out / "liblitecl_delegate.so", model)
    (line,) = [ln for ln in r.stdout.splitlines() if ln.startswith("CHILD")]
    assert line.startswith("CHILD ERROR") and "fork()ed after the OpenCL device" in line \
        and "'spawn' or 'forkserver'" in line, (r.stdout, r.stderr[-800:])


NULL_OPTIONS_CHILD = r"""
import ctypes as C, sys
so = C.CDLL(sys.argv[1])
so.tflite_plugin_create_delegate.restype = C.c_void_p
so.tflite_plugin_create_delegate.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_void_p]
print("NULL ARRAYS", so.tflite_plugin_create_delegate(None, None, 2, None), flush=True)
keys = (C.c_char_p * 2)(b"quiet", None)
values = (C.c_char_p * 2)(b"1", b"1")
print("NULL KEY", so.tflite_plugin_create_delegate(keys, values, 2, None), flush=True)
"""


def test_null_option_arrays_at_the_c_entry_are_refused_not_a_crash(tmp_path, fast_device):
    """tflite_plugin_create_delegate with NULL key/value arrays or a NULL key (a C caller
    outside LiteRT's loader; a fresh user's test segfaulted): NULL and one ERROR line."""
    _need(CC)
    model = tmp_path / "cast.tflite"
    model.write_bytes(cast_model("float32", "int32", [33]))
    out = tmp_path / "out"
    _export_build(model, out, fast_device)
    r = _child(NULL_OPTIONS_CHILD, out / "liblitecl_delegate.so")
    assert r.returncode == 0, (r.returncode, r.stderr[-800:])
    assert r.stdout.split("\n")[:2] == ["NULL ARRAYS None", "NULL KEY None"], r.stdout
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("ERROR: litecl:")]
    assert errors == ["ERROR: litecl: 2 options given without their keys array",
                      "ERROR: litecl: option 1 has no key (a NULL pointer)"], r.stderr


def test_an_export_needing_fp16_on_a_device_without_it_names_the_profile_to_export_with(models, tmp_path):
    """A float16 CAST exported on Intel's runtime (cl_khr_fp16) and loaded where only
    PoCL (no cl_khr_fp16) is reached: one line naming the capability and the export
    profile that runs without it (a fresh user's load said only "set the library,
    platform, device or device_type option", none of which can help)."""
    if DEVICE_STATUS.get("intel") or DEVICE_STATUS.get("pocl"):
        pytest.skip("needs Intel's runtime and PoCL: " + (DEVICE_STATUS.get("intel") or DEVICE_STATUS["pocl"]))
    from litecl import export
    from litecl.device import open_device

    pocl = open_device("pocl")
    if pocl.caps.fp16:
        pytest.skip("this PoCL has cl_khr_fp16")
    _need(CC)
    out = tmp_path / "e"
    _export_build(models["cast_f32_f16"], out, "intel")
    lib = export.opencl_library(pocl.caps.platform, pocl.caps.name)
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([{"library": lib}]))
    (line,) = r.stdout.splitlines()
    assert line.startswith("REFUSED") and "no cl_khr_fp16" in line and "this export's kernels need float16 " \
        "(cl_khr_fp16): for devices without it export again with --device SPEC:profile=nofp16" in line, line


def test_export_warns_of_kernels_a_resize_of_a_dynamic_graph_breaks(tmp_path, fast_device, capsys):
    """A graph with invoke-time shapes (its delegate keeps AllowDynamicTensors, so LiteRT
    keeps the delegate's nodes across a resize) exported at its declared shape: its
    broadcast ADD compiles in the shapes and its operand has a -1 dimension, so at another
    length allocate_tensors fails. Export says so in a warning line (a fresh user's
    BirdNET FP32 export broke batched inference with nothing said at export)."""
    model = tmp_path / "m.tflite"
    model.write_bytes(tf_model("add_then_dynamic"))
    out = tmp_path / "ex"
    assert main(["export", str(model), "--out", str(out), "--device", fast_device]) == 0
    err = capsys.readouterr().err
    (g,) = json.loads((out / "manifest.json").read_text())["native"]["subgraphs"]
    assert g["fixed_across_resize"] and g["native_claimed"] >= 1, g
    assert "compile in the exported shapes, and LiteRT keeps this graph's delegate across resize_tensor_input" \
        in err and "export at the shapes the app runs (--inputs FILE.npz)" in err, err


def test_the_nodes_option_names_cast_and_add_nodes_only(tmp_path, fast_device):
    """nodes naming a node of another operator (a MUL) is refused at load in one line, as
    litecl.Delegate's nodes= (a fresh user's "0=1,5" on MoveNet loaded and claimed
    nothing without a word); a CAST's index loads."""
    from models.builders import multi_op_model

    _need(CC)
    m = tmp_path / "m.tflite"
    m.write_bytes(multi_op_model("cast_mul_cast"))
    from litecl.model import load_model

    ops = [x.op for x in load_model(str(m)).subgraphs[0].nodes]
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    mul, cast = ops.index("MUL"), ops.index("CAST")
    r = _child(BAD_OPTIONS, out / "liblitecl_delegate.so", json.dumps([{"nodes": f"0={cast},{mul}"},
                                                                       {"nodes": f"0={cast}"}]))
    refused, loaded = r.stdout.splitlines()
    assert refused.startswith("REFUSED") and f"nodes names node {mul} of subgraph 0, a MUL node: litecl takes " \
        "CAST and ADD nodes only" in refused, refused  # the operator named (it said "builtin operator 18")
    assert loaded == "LOADED", r.stdout


def test_a_while_that_grows_its_state_exports_a_dynamic_delegate(tmp_path, fast_device, capsys):
    """A WHILE whose state grows (a concat in its body) is a static graph at its declared
    x [1] and a dynamic one at [5]: the export probed only the declared shapes, gave its
    library no AllowDynamicTensors, and LiteRT refused it at allocate_tensors after the
    app's resize with an empty RuntimeError, also when exported --inputs at [5] (a fresh
    user's report). Now the shapes it runs at decide: with --inputs the app's run at them
    is LiteRT's bit for bit; without, every -1 at 2 is probed and the library says in one
    line, at invoke, that its compiled-in kernel wants an export at those shapes."""
    model = tmp_path / "while.tflite"
    model.write_bytes(tf_model("while_grow"))
    npz = tmp_path / "in.npz"
    np.savez(npz, x=np.arange(5, dtype=np.float32), n=np.array([3], np.int32))
    for name, extra in (("at", ["--inputs", str(npz)]), ("bare", [])):
        out = tmp_path / name
        assert main(["export", str(model), "--out", str(out), "--device", fast_device, *extra]) == 0
        assert json.loads((out / "manifest.json").read_text())["native"]["delegate_flags"] == 1, name
    if shutil.which(CC) is None:
        return
    _resized_run(tmp_path / "at", model, "[[5], [1]]")


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_a_one_element_operand_stays_a_splat_after_a_resize(tmp_path, fast_device, dtype):
    """x [-1] + a one-element constant (a scalar: the bias pattern; a [1] operand of a
    quantized ADD), exported at [8] and run at [31], 0 and 757: the kernel splats it at
    any count, so the node stays on OpenCL (README), bit-exact; it was left to LiteRT as
    "a broadcast" at every other size (a fresh user's report: the shape-signature rule
    counted the one-element operand as one that may grow)."""
    q = ((0.5, 3), (0.25, 1), (0.75, 2)) if dtype == "uint8" else None
    model = tmp_path / "m.tflite"
    model.write_bytes(add_model(dtype, [8], [1] if dtype == "uint8" else [], quant=q, dynamic=True, const2=3))
    npz = tmp_path / "in.npz"
    np.savez(npz, input1=np.zeros(8, np.dtype(dtype)))
    out = tmp_path / "ex"
    assert main(["export", str(model), "--out", str(out), "--device", fast_device, "--inputs", str(npz)]) == 0
    if shutil.which(CC) is None:
        return
    for n in (31, 0, 757):
        r = _resized_run(out, model, f"[{n}]")
        assert "left to LiteRT" not in r.stderr, r.stderr[-600:]


def test_the_exported_library_caches_where_litecl_does(tmp_path, fast_device):
    """LITECL_CACHE_DIR names the library's default cache folder too ($LITECL_CACHE_DIR/native:
    it wrote to ~/.cache/litecl/native beside a user's own folder, a fresh user's report),
    and LITECL_NO_CACHE=1 keeps none; the cache_dir option still wins."""
    _need(CC)
    m = _int16_chain(tmp_path)
    out = tmp_path / "e"
    _export_build(m, out, fast_device)
    own, xdg = tmp_path / "own", tmp_path / "xdg"
    opts = {"binaries": "0"}
    exact, built, _ = _start(out, m, opts, xdg, env={"LITECL_CACHE_DIR": str(own)})
    assert exact and built > 0 and any((own / "native").iterdir()) and not (xdg / "litecl").exists()
    exact, built, _ = _start(out, m, opts, xdg, env={"LITECL_CACHE_DIR": str(own)})
    assert exact and built == 0  # read back from $LITECL_CACHE_DIR/native
    for _ in range(2):
        exact, built, _ = _start(out, m, opts, xdg, env={"LITECL_NO_CACHE": "1"})
        assert exact and built > 0 and not (xdg / "litecl").exists()
    given = tmp_path / "given"
    exact, built, _ = _start(out, m, {**opts, "cache_dir": str(given)}, xdg, env={"LITECL_CACHE_DIR": str(own)})
    assert exact and built > 0 and any(given.iterdir())
