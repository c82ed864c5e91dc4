"""What a first-time user trips on (issue 16): LiteRT code that must run unchanged,
device names, flag spellings, full-range inputs, degenerate models, inspect."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import litecl
from models.builders import cast_model, multi_op_model

from conftest import shared_model


def _litert(**kw):
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Interpreter(**kw)


# ------------------------------------------------------------------------------------------
# LiteRT parity of the constructor and the op details
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("delegates", [None, [], ()])
def test_no_delegate_is_accepted(fast_device, delegates):
    """Code that adds a delegate conditionally passes None or [] (LiteRT: ``if
    experimental_delegates:``)."""
    m = cast_model("float32", "int8", [3])
    _litert(model_content=m, experimental_delegates=delegates).allocate_tensors()
    it = litecl.Interpreter(model_content=m, experimental_delegates=delegates, device=fast_device)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], np.array([1.5, -2.5, 300], np.float32))
    it.invoke()
    assert it.get_tensor(it.get_output_details()[0]["index"]).tolist() == [1, -2, 127]


class _FakeDelegate:
    def _get_native_delegate_pointer(self):
        return 0


@pytest.mark.parametrize("delegates", [_FakeDelegate(), "gpu"])
def test_delegates_not_in_a_list_are_refused_clearly(fast_device, delegates):
    with pytest.raises(litecl.LiteclError, match="experimental_delegates must be a list"):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [3]),
                           experimental_delegates=delegates, device=fast_device)


def test_further_delegates_come_after_litecl_s(fast_device):
    """experimental_delegates are LiteRT's and applied after litecl's: a second
    litecl.Delegate finds nothing left to take; a broken one fails as LiteRT says."""
    m = multi_op_model("cast_mul_cast")
    second = litecl.Delegate(fast_device, quiet=True)
    it = litecl.Interpreter(model_content=m, experimental_delegates=[second], device=fast_device, quiet=True)
    assert it.delegate.graph_info()[0]["claimed"] == 3
    # only delegate nodes left: the second names the first's CAST/ADD nodes as another delegate's
    assert second.graph_info()[0]["claimed"] == 0
    assert second.placement() and all(r["placement"] == "delegate" and r["reason"].startswith("taken by litecl OpenCL")
                                      for r in second.placement())
    it.allocate_tensors()
    with pytest.raises(RuntimeError, match="Null delegate"):
        litecl.Interpreter(model_content=m, experimental_delegates=[_FakeDelegate()], device=fast_device)


def test_op_resolver_type_maps_onto_reference(fast_device):
    """LiteRT's resolver ids (interpreter.py _get_op_resolver_id): AUTO and BUILTIN share
    one (XNNPACK applied), BUILTIN_REF the reference kernels, BUILTIN_WITHOUT_DEFAULT_
    DELEGATES the optimized kernels alone."""
    from ai_edge_litert.interpreter import OpResolverType  # noqa: PLC0415

    m = multi_op_model("cast_mul_cast")
    want = {OpResolverType.AUTO: "xnnpack", OpResolverType.BUILTIN: "xnnpack",
            OpResolverType.BUILTIN_REF: "ref",
            OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES: "builtin"}
    assert set(want) == set(OpResolverType)
    x = np.linspace(-3, 3, 24, dtype=np.float32)
    for kind, ref in want.items():
        it = litecl.Interpreter(model_content=m, experimental_op_resolver_type=kind,
                                device=fast_device)
        assert it._reference == ref
        it.allocate_tensors()
        peer = _litert(model_content=m, experimental_op_resolver_type=kind)
        peer.allocate_tensors()
        for interp in (it, peer):
            d = interp.get_input_details()[0]
            interp.set_tensor(d["index"], x.reshape(d["shape"]).astype(d["dtype"]))
            interp.invoke()
        o = peer.get_output_details()[0]["index"]
        assert np.array_equal(it.get_tensor(o), peer.get_tensor(o)), kind
        # the same name given twice agrees
        litecl.Interpreter(model_content=m, experimental_op_resolver_type=kind, reference=ref,
                           device=fast_device)
    assert litecl.Interpreter(model_content=m, device=fast_device)._reference == "builtin"


@pytest.mark.parametrize("kw, match", [
    ({"experimental_op_resolver_type": "ref"}, "unrecognized experimental_op_resolver_type"),
    ({"experimental_op_resolver_type": 2}, "unrecognized experimental_op_resolver_type"),
    ({"experimental_op_resolver_type": "BUILTIN_REF", "reference": "xnnpack"}, "unrecognized"),
])
def test_op_resolver_type_refusals(fast_device, kw, match):
    with pytest.raises(litecl.LiteclError, match=match):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [3]), device=fast_device, **kw)


def test_op_resolver_type_conflicting_with_reference(fast_device):
    from ai_edge_litert.interpreter import OpResolverType  # noqa: PLC0415

    with pytest.raises(litecl.LiteclError, match="means reference='ref'.*reference='builtin'"):
        litecl.Interpreter(model_content=cast_model("float32", "int8", [3]), device=fast_device,
                           experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                           reference="builtin")


def test_litert_flags_are_litert_s(fast_device):
    """LiteRT's keyword flags go to LiteRT as they are: accepted where LiteRT accepts
    them, and the model still runs with the delegate; an unknown one is LiteRT's TypeError."""
    m = cast_model("float32", "int8", [3])
    flags = ("experimental_disable_delegate_clustering",
             "experimental_compress_quantization_zero_points",
             "experimental_disable_delegate_node_fusion",
             "experimental_force_delegate_node_profiling")
    x = np.array([1.5, -2.5, 300], np.float32)
    for f in flags:
        for on in (False, True):
            _litert(model_content=m, **{f: on}).allocate_tensors()
            it = litecl.Interpreter(model_content=m, device=fast_device, **{f: on})
            it.allocate_tensors()
            it.set_tensor(it.get_input_details()[0]["index"], x)
            it.invoke()
            assert it.get_tensor(it.get_output_details()[0]["index"]).tolist() == [1, -2, 127], f
            assert it.delegate.graph_info()[0]["claimed"] == 1, f
    with pytest.raises(TypeError, match="unexpected keyword argument 'experimental_bogus'"):
        litecl.Interpreter(model_content=m, device=fast_device, experimental_bogus=True)


def test_litert_positional_arguments(fast_device):
    """LiteRT's order: model_path, model_content, experimental_delegates, num_threads,
    experimental_op_resolver_type, experimental_preserve_all_tensors (with which LiteRT
    gives each delegated node its own partition, so every tensor stays readable)."""
    from ai_edge_litert.interpreter import OpResolverType  # noqa: PLC0415

    m = multi_op_model("cast_mul_cast")
    it = litecl.Interpreter(None, m, None, 2, OpResolverType.BUILTIN_REF, True, device=fast_device)
    assert it._reference == "ref" and it.delegate.reference == "ref"
    assert it.delegate.graph_info() == [{"interpreter": 0, "subgraph": 0, "nodes": 4, "claimed": 3, "partitions": 3,
                                         "kept_order": False, "order_dropped": []}]
    plain = litecl.Interpreter(model_content=m, device=fast_device)
    assert plain.delegate.graph_info()[0]["partitions"] == 2  # ADD and CAST share one


@pytest.mark.parametrize("n", [True, 1, 2])
def test_num_threads_as_litert(fast_device, n):
    """LiteRT: isinstance(True, int) holds and it runs int(num_threads or 1) threads."""
    m = multi_op_model("cast_mul_cast")
    _litert(model_content=m, num_threads=n).allocate_tensors()
    it = litecl.Interpreter(model_content=m, num_threads=n, device=fast_device)
    it.allocate_tensors()
    it.invoke()


@pytest.mark.parametrize("name", ["rope.tflite", "lyra_quantizer.tflite",
                                  "movenet_singlepose_lightning_int8.tflite",
                                  "mixed_input_model.tflite"])
def test_litecl_interpreter_is_litert_with_the_delegate(shared_models, fast_device, name):
    """litecl.Interpreter(model) is LiteRT's Interpreter with litecl.Delegate first and
    BUILTIN_WITHOUT_DEFAULT_DELEGATES (the package docstring's equivalence): the same
    ops, the delegate's nodes included, and the same claims."""
    from ai_edge_litert.interpreter import OpResolverType  # noqa: PLC0415

    path = shared_model(name)
    ours = litecl.Interpreter(model_path=path, device=fast_device)
    d = litecl.Delegate(fast_device)
    theirs = _litert(model_path=str(path), experimental_delegates=[d], experimental_op_resolver_type=
                     OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    a, b = ours._get_ops_details(), theirs._get_ops_details()
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x["index"] == y["index"] and x["op_name"] == y["op_name"]
        for k in ("inputs", "outputs"):
            assert x[k].tolist() == y[k].tolist(), (k, x, y)
    assert any(x["op_name"] == "DELEGATE" for x in a) == any(g["claimed"] for g in d.graph_info())
    assert ours.delegate.graph_info() == d.graph_info()
    assert ours.placement() == d.placement()


# ------------------------------------------------------------------------------------------
# Devices: gpu / cpu by type, the auto choice and each device's spec
# ------------------------------------------------------------------------------------------

def test_cpu_and_gpu_select_by_device_type():
    import pyopencl as cl  # noqa: PLC0415

    from litecl.device import _all_devices, _auto_order, probe_compiler  # noqa: PLC0415

    devices = _all_devices()
    gpus = [d for d in devices if d.type == cl.device_type.GPU]
    cpus = [d for d in _auto_order(devices) if d not in gpus and d.type & cl.device_type.CPU]
    for spec, pool in (("gpu", gpus), ("cpu", cpus)):
        if not pool:
            with pytest.raises(litecl.DeviceError, match=f"no OpenCL {spec.upper()} device found"):
                litecl.open_device(spec)
            continue
        want = next((d for d in pool if not probe_compiler(d)), pool[0])
        dev = litecl.open_device(spec + ":profile=mobile")
        assert dev.device.int_ptr == want.int_ptr and dev.caps.profile == "mobile"
        assert dev.caps.is_gpu == (spec == "gpu")


def test_spec_of_selects_each_device():
    from litecl.device import _all_devices, _select, spec_of  # noqa: PLC0415

    devices = _all_devices()
    for d in devices:
        spec = spec_of(d)
        twins = [e for e in devices if (e.platform.name, e.name) == (d.platform.name, d.name)]
        if spec is None:
            assert len(twins) > 1, d.name  # only an identical earlier device hides it
            continue
        assert _select(spec).int_ptr == d.int_ptr, (spec, d.name)


def test_cli_devices_marks_auto_and_prints_specs():
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    from litecl.device import _all_devices, auto_device, spec_of  # noqa: PLC0415

    cli = [sys.executable, "-m", "litecl.cli", "devices"]
    rows = json.loads(subprocess.run(cli + ["--json"], capture_output=True, text=True,
                                     timeout=300, check=True).stdout)
    devices = _all_devices()
    auto = auto_device()
    assert [r["spec"] for r in rows] == [spec_of(d) for d in devices]
    assert [r["auto"] for r in rows] == [d.int_ptr == auto.int_ptr for d in devices]
    assert sum(r["auto"] for r in rows) == 1
    text = subprocess.run(cli, capture_output=True, text=True, timeout=300, check=True).stdout
    lines = text.splitlines()[1:1 + len(rows)]
    starred = [ln for ln in lines if ln.startswith("*")]
    assert len(starred) == 1
    k = lines.index(starred[0])
    assert rows[k]["auto"] and rows[k]["name"] in starred[0]
    for ln, r in zip(lines, rows):
        assert ln[2:].split("  ")[0].strip().strip("'") == r["spec"], (ln, r)
    assert "--device auto (the default)" in text


# ------------------------------------------------------------------------------------------
# CLI: both flag spellings; --full-range over every integer type
# ------------------------------------------------------------------------------------------

def _cli(*args, timeout=300):
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    return subprocess.run([sys.executable, "-m", "litecl.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def _parsers(p):
    import argparse  # noqa: PLC0415

    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                yield from _parsers(sub)


def test_every_multiword_flag_has_both_spellings():
    from litecl.cli import _parser  # noqa: PLC0415

    seen = 0
    for p in _parsers(_parser()):
        for a in p._actions:
            for o in a.option_strings:
                if o.startswith("--") and ("-" in o[2:] or "_" in o[2:]):
                    seen += 1
                    for other in ("--" + o[2:].replace("_", "-"), "--" + o[2:].replace("-", "_")):
                        assert other in a.option_strings, (p.prog, o)
    assert seen >= 2 * 9  # full-range, num_threads, warmup_runs, ... in both spellings


def test_both_spellings_run(fast_device, tmp_path):
    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model("float32", "int8", [64]))
    fast = ["0", "--min_secs", "0", "--warmup-min-secs", "0", "--profile-runs", "1"]
    for spelling in ("--num-runs", "--num_runs"):
        r = _cli("bench", m, "--device", fast_device, spelling, "2", "--warmup-runs", *fast,
                 "--num-threads", "1")
        assert r.returncode == 0, r.stderr
    for spelling in ("--full-range", "--full_range"):
        r = _cli("compare", m, "--device", fast_device, spelling)
        assert r.returncode == 0, r.stdout + r.stderr


def test_random_inputs_full_range_covers_every_integer_type():
    from litecl.compare import random_inputs  # noqa: PLC0415

    types = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
    details = [{"name": t, "dtype": np.dtype(t), "shape": np.array([1 << 16])} for t in types]
    mild = random_inputs(details, 1)
    full = random_inputs(details, 1, full_range=True)
    for t in types:
        info = np.iinfo(t)
        v = full[t].astype(np.float64)
        assert full[t].dtype == np.dtype(t)
        # uniform over the type: the extreme eighths both appear
        assert v.min() < info.min + (info.max - info.min) / 8 and v.max() > info.max - (info.max - info.min) / 8, t
        if np.dtype(t).itemsize > 1:
            assert mild[t].min() >= 0 and mild[t].max() < 10, t  # the plain default stays [0, 10)


@pytest.mark.parametrize("src,dst", [("int64", "int32"), ("int64", "float16"), ("int32", "int8")])
def test_full_range_cli_reaches_wraparound(fast_device, tmp_path, src, dst):
    """From the CLI, --full-range now feeds int64/int32 values beyond every narrower type:
    CAST's wrap-around and rounding are compared with LiteRT."""
    m = tmp_path / "m.tflite"
    m.write_bytes(cast_model(src, dst, [4096]))
    r = _cli("compare", m, "--device", fast_device, "--full-range", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "o.npz"
    r = _cli("run", m, "--device", fast_device, "--full-range", "--output", out)
    assert r.returncode == 0, r.stderr
    v = np.load(out)["output"].astype(np.float64)
    info = np.iinfo(dst) if dst != "float16" else None
    if info is not None:
        assert v.min() < info.min / 2 and v.max() > info.max / 2  # wrapped values, all over
    else:
        assert np.isinf(v).any()  # int64 beyond 65504 rounds to inf


# ------------------------------------------------------------------------------------------
# Code: no import cycle among the kernel generators; no stale import guard
# ------------------------------------------------------------------------------------------

def _ops_imports() -> dict[str, set]:
    """ops module -> the ops modules it imports (at top level or inside functions)."""
    import ast  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    import litecl.ops  # noqa: PLC0415

    root = Path(litecl.ops.__file__).parent
    mods = {p.stem for p in root.glob("*.py")}
    out = {}
    for p in root.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
        out[p.stem] = deps & mods
    return out


def test_ops_modules_import_no_cycle():
    graph = _ops_imports()
    assert "broadcast" in graph["fusion"] and "add" not in graph["fusion"]
    state: dict = {}

    def visit(m, path):
        if state.get(m) == "done":
            return
        assert state.get(m) != "open", f"import cycle: {' -> '.join(path + [m])}"
        state[m] = "open"
        for d in sorted(graph[m]):
            visit(d, path + [m])
        state[m] = "done"

    for m in sorted(graph):
        visit(m, [])


def test_no_quantized_not_supported_guard():
    import inspect as pyinspect  # noqa: PLC0415

    import litecl.lowering  # noqa: PLC0415
    import litecl.ops.add  # noqa: PLC0415

    for mod in (litecl.lowering, litecl.ops.add):
        assert "not supported yet" not in pyinspect.getsource(mod)


# ------------------------------------------------------------------------------------------
# inspect: per node, one signature at a time
# ------------------------------------------------------------------------------------------

def _inspect_json(path, device, *extra):
    import json  # noqa: PLC0415

    r = _cli("inspect", path, "--device", device, "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_inspect_shows_types_shapes_kernel_and_partition(fast_device, tmp_path):
    """Each CAST/ADD node: model index, op, operand types and shapes, placement, its
    delegated partition and the kernel (conversion chain) or the reason; a fused group
    names its members. The MUL is LiteRT's and not listed."""
    from models.builders import chain_model  # noqa: PLC0415

    p = tmp_path / "chain.tflite"
    p.write_bytes(chain_model(["uint8", "float32", ("add", np.float32(1.0), "NONE"), ("mul", 2.0),
                               "float16"], (4096,)))
    rep = _inspect_json(p, fast_device)
    nodes = rep["nodes"]
    assert [(n["index"], n["op"], n["placement"], n["partition"]) for n in nodes] == \
        [(0, "CAST", "opencl", 0), (1, "ADD", "opencl", 0), (3, "CAST", "opencl", 1)]
    cast = nodes[0]
    assert cast["inputs"][0]["dtype"] == "uint8" and cast["inputs"][0]["shape"] == [4096]
    assert cast["outputs"][0]["dtype"] == "float32"
    assert cast["kernel"] == "CAST uint8->float32 via int -> float" and not cast["folded"]
    assert cast["fused_with"] == [0, 1]  # CAST + ADD, then MUL on LiteRT
    assert nodes[1]["inputs"][1]["shape"] == [] and "ADD float32 NONE" in nodes[1]["kernel"]
    assert nodes[2]["fused_with"] is None and nodes[2]["kernel"].startswith("CAST float32->float16")
    assert rep["graphs"] == [{"subgraph": 0, "nodes": 4, "claimed": 3, "partitions": 2, "kept_order": False,
                              "order_dropped": []}]
    assert rep["fused"] == [{"subgraph": 0, "nodes": [0, 1], "ops": ["CAST", "ADD"]}]
    text = _cli("inspect", p, "--device", fast_device).stdout
    assert "uint8[4096] -> float32[4096]" in text
    assert "kernel: CAST uint8->float32 via int -> float; fused: one kernel for nodes 0, 1" in text
    assert "Fused into one OpenCL kernel: subgraph 0 nodes 0, 1 (CAST, ADD)." in text
    assert "MUL" not in text


def test_inspect_marks_folded_constant_nodes(fast_device, tmp_path):
    p = tmp_path / "c.tflite"
    p.write_bytes(cast_model("int32", "float32", [5], constant=np.arange(5)))
    n = _inspect_json(p, fast_device)["nodes"][0]
    assert n["placement"] == "opencl" and n["folded"]
    assert "folded (constant inputs: computed once" in _cli("inspect", p, "--device", fast_device).stdout


def test_inspect_rows_are_the_delegate_s_placement(shared_models, fast_device):
    """inspect reads the delegate's decisions: its rows are placement() of the same
    model, in LiteRT's execution order, with the same partitions and reasons."""
    path = shared_model("rope.tflite")
    rep = _inspect_json(path, fast_device)
    it = litecl.Interpreter(model_path=path, device=fast_device, quiet=True)
    it.allocate_tensors()
    keys = ("subgraph", "index", "op", "placement", "reason", "partition")
    assert [{k: n[k] for k in keys} for n in rep["nodes"]] == [{k: p[k] for k in keys} for p in it.placement()]
    assert rep["summary"] == it.summary()


def test_inspect_counts_one_signature_as_compare(shared_models, fast_device):
    """Lyra: inspect without --signature shows one signature, not the sum of both, with
    the counts compare gives that signature (compare checks both, each named); the other
    one is named."""
    import json  # noqa: PLC0415

    path = shared_model("lyra_quantizer.tflite")
    rep = _inspect_json(path, fast_device)
    cmp = json.loads(_cli("compare", path, "--device", fast_device, "--json").stdout)
    assert sorted(c["signature"] for c in cmp["signatures"]) == sorted([rep["signature"], *rep["other_signatures"]])
    cmp = next(c for c in cmp["signatures"] if c["signature"] == rep["signature"])
    assert sum(g["nodes"] for g in rep["graphs"]) == cmp["nodes"]
    assert sum(n["placement"] == "opencl" for n in rep["nodes"]) == cmp["opencl_nodes"]
    assert rep["other_signatures"]
    for key in litecl.Interpreter(model_path=path, device=fast_device).get_signature_list():
        one = _inspect_json(path, fast_device, "--signature", key)
        c = json.loads(_cli("compare", path, "--device", fast_device, "--json", "--signature", key).stdout)
        assert key not in one["other_signatures"] and {n["subgraph"] for n in one["nodes"]} == {one["subgraph"]}
        assert f"Replacing {c['opencl_nodes']} out of {c['nodes']} node(s)" in one["summary"][-1]
        assert f"yielding {c['partitions']} partitions" in one["summary"][-1]


# ------------------------------------------------------------------------------------------
# A degenerate model: an empty output no operator writes
# ------------------------------------------------------------------------------------------

def _no_operator_model(shape, with_input: bool, buffer: int) -> bytes:
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    m = schema.ModelT()
    m.version = 3
    m.buffers = [schema.BufferT(), schema.BufferT()]
    sg = schema.SubGraphT()
    tensors = []
    if with_input:
        x = schema.TensorT()
        x.name, x.shape, x.type, x.buffer = b"x", [2, 3], 0, 0
        tensors.append(x)
    y = schema.TensorT()
    y.name, y.shape, y.type, y.buffer = b"Identity", list(shape), 0, buffer
    tensors.append(y)
    sg.tensors, sg.operators = tensors, []
    sg.inputs, sg.outputs = ([0] if with_input else []), [len(tensors) - 1]
    m.subgraphs, m.operatorCodes = [sg], []
    b = flatbuffers.Builder(0)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


@pytest.mark.parametrize("with_input", [True, False])
@pytest.mark.parametrize("buffer", [0, 1])
def test_empty_output_without_operators_reads_as_litert(fast_device, with_input, buffer):
    """LiteRT 2.3.0 returns an empty [0, 3] array for such an output (measured); litecl
    used to say "has no value yet"."""
    from ai_edge_litert.interpreter import OpResolverType  # noqa: PLC0415

    m = _no_operator_model([0, 3], with_input, buffer)
    outs = []
    for interp in (_litert(model_content=m, experimental_op_resolver_type=
                           OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES),
                   litecl.Interpreter(model_content=m, device=fast_device)):
        interp.allocate_tensors()
        for d in interp.get_input_details():
            interp.set_tensor(d["index"], np.ones(d["shape"], np.float32))
        interp.invoke()
        outs.append(interp.get_tensor(interp.get_output_details()[0]["index"]))
    assert outs[0].shape == outs[1].shape == (0, 3) and outs[0].dtype == outs[1].dtype


def test_cli_says_what_a_no_operator_model_is(fast_device, tmp_path):
    p = tmp_path / "empty.tflite"
    p.write_bytes(_no_operator_model([0, 3], True, 0))
    for cmd in ("inspect", "compare"):
        r = _cli(cmd, p, "--device", fast_device)
        assert r.returncode == 0, r.stderr
        assert "note: subgraph 0 has no operators" in r.stdout
        assert "output 'Identity' (float32[0, 3]) is written by no operator" in r.stdout
        assert "empty array" in r.stdout


def test_nonempty_unwritten_output_is_refused(fast_device):
    """LiteRT gives "Tensor data is null" at get_tensor; litecl refuses the model."""
    with pytest.raises(litecl.ModelError, match="is no input, constant, variable or operator output"):
        litecl.Interpreter(model_content=_no_operator_model([2, 3], True, 0), device=fast_device)
