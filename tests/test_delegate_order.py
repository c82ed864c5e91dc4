"""litecl anywhere in the delegate list, and taking only what it is asked to (issue 39):
after a stand-in for LiteRT's GPU delegate (tests/gpu_standin.py: its accept rules are a
table citing the GPU delegate's source; it runs its nodes with LiteRT's own kernels), both
litecl.Delegate and the exported native delegate claim the CAST/ADD nodes the stand-in
left, and no other; ``ops=`` and ``nodes=`` take exactly what they name."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import litecl
from litecl.compare import make_interpreter, mismatches, random_inputs

from conftest import ROOT, SHARED_MODELS, tf_model
from gpu_standin import StandIn
from models.builders import chain_model, multi_op_model

#: stand-in, litecl, stand-in, litecl: the stand-in takes the float MUL/ADD and the
#: float32 <-> int32 CASTs, litecl the int64 ones and float32 -> float16 (the GPU
#: delegate's CAST takes neither), so a stand-in partition sits between two of litecl's
CHAIN = ["float32", ("mul", 2.0), "int64", ("add", 7), "float32", ("add", 0.5), "int32", "float32",
         ("add", 1.5), "float16"]


def _models() -> list:
    out = [("chain", chain_model(CHAIN, (3, 257)))]
    for name in ("add_1d_2d_3d_4d.tflite", "rope.tflite", "coral_mobilenet_v2_1_0_224_quant.tflite",
                 "movenet_singlepose_lightning_int8.tflite", "simple_quantized_ops.tflite", "topo_sort_fork.tflite"):
        if (SHARED_MODELS / name).exists():
            out.append((name, (SHARED_MODELS / name).read_bytes()))
    return out


def _run(it, xs) -> list:
    for d, x in zip(it.get_input_details(), xs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(o["index"]) for o in it.get_output_details()]


def _exact(m: bytes, it, seed: int = 3) -> bool:
    ref = make_interpreter(m)
    ref.allocate_tensors()
    xs = list(random_inputs(ref.get_input_details(), seed=seed).values())
    return all(g.shape == w.shape and not mismatches(g, w).any() for g, w in zip(_run(it, xs), _run(ref, xs)))


def _after_standin(m: bytes, device: str, **kw):
    s, d = StandIn(), litecl.Delegate(device, quiet=True, **kw)
    it = Interpreter(model_content=m, experimental_delegates=[s, d],
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    return s, d, it


def _opencl(d) -> set:
    return {(r["subgraph"], r["index"]) for r in d.placement() if r["placement"] == "opencl"}


@pytest.mark.parametrize("name,m", _models(), ids=[n for n, _ in _models()])
def test_litecl_after_the_gpu_standin_takes_what_it_left(name, m, fast_device):
    """litecl second takes every CAST/ADD the stand-in refused that its why_not accepts
    (what it takes alone, less the stand-in's), names the others as the stand-in's, and
    the model stays bit-exact with LiteRT alone."""
    alone = litecl.Delegate(fast_device, quiet=True)
    it0 = Interpreter(model_content=m, experimental_delegates=[alone],
                      experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it0.allocate_tensors()
    s, d, it = _after_standin(m, fast_device)
    stood = {r["index"] for r in d.placement() if r["placement"] == "delegate"}
    taken = {i for t in s.taken[:1] for i in t}
    rows = {r["index"]: r for r in d.placement()}
    assert stood == {i for i in taken if i in {r["index"] for r in alone.placement()}}, (stood, taken)
    assert all(rows[i]["reason"].startswith("taken by GpuDelegateStandIn") for i in stood)
    assert _opencl(d) == {k for k in _opencl(alone) if k[0] > 0 or k[1] not in taken}
    assert _exact(m, it)


def test_the_chain_cuts_as_expected(fast_device):
    """The chain: the stand-in takes MUL, the float ADDs and the float32 <-> int32 CASTs
    (nodes 0, 4, 5, 6, 7), litecl the int64 CASTs and ADD and the float16 CAST (1, 2, 3,
    8), in two partitions with the stand-in's between them."""
    s, d, it = _after_standin(chain_model(CHAIN, (3, 257)), fast_device)
    assert s.taken[0] == [0, 4, 5, 6, 7]
    assert sorted(i for _, i in _opencl(d)) == [1, 2, 3, 8]
    assert d.subgraph_records()[0]["partitions"] == 2


def test_detector_head_int64_on_litecl_adds_beside_convolutions(fast_device):
    """A YOLO/MobileBERT-like graph (convolutions, a residual ADD, ARG_MAX's int64
    indices cast to float, int64 arithmetic): after the stand-in, litecl takes the int64
    CASTs and ADD (the GPU delegate refuses int64); bit-exact."""
    m = tf_model("detector_head")
    s, d, it = _after_standin(m, fast_device)
    on = {r["index"]: r for r in d.placement() if r["placement"] == "opencl"}
    ops = {r["index"]: r["op"] for r in d.placement()}
    assert on and all(ops[i] in ("CAST", "ADD") for i in on)
    assert _exact(m, it)


def test_ops_and_nodes_take_exactly_what_they_name(fast_device):
    """ops=("CAST",) leaves every ADD with its reason; nodes= takes exactly the nodes
    named (subgraph 0), the others kept off with theirs; bad values are one line."""
    m = chain_model(CHAIN, (3, 257))
    it = litecl.Interpreter(model_content=m, delegate=litecl.Delegate(fast_device, quiet=True, ops=("CAST",)))
    it.allocate_tensors()
    rows = it.placement()
    assert {r["index"] for r in rows if r["placement"] == "opencl"} == {r["index"] for r in rows if r["op"] == "CAST"}
    assert all(r["reason"] == "not among ops= (CAST)" for r in rows if r["op"] == "ADD")
    assert _exact(m, it)
    it = litecl.Interpreter(model_content=m, delegate=litecl.Delegate(fast_device, quiet=True, nodes={0: [2, 5]}))
    it.allocate_tensors()
    rows = it.placement()
    assert {r["index"] for r in rows if r["placement"] == "opencl"} == {2, 5}
    assert all(r["reason"] == "not among nodes= of subgraph 0" for r in rows if r["index"] not in (2, 5))
    assert _exact(m, it)
    # litecl.Interpreter takes them too, as the Delegate's options (a fresh user's report: a
    # TypeError from LiteRT's constructor); beside delegate= they are one line
    it = litecl.Interpreter(model_content=m, device=fast_device, quiet=True, ops=("CAST",), nodes={0: [2, 5]})
    it.allocate_tensors()
    rows = it.placement()
    op = {r["index"]: r["op"] for r in rows}
    assert {r["index"] for r in rows if r["placement"] == "opencl"} == {i for i in (2, 5) if op[i] == "CAST"} != set()
    assert _exact(m, it)
    with pytest.raises(litecl.LiteclError, match="ops given with delegate="):
        litecl.Interpreter(model_content=m, delegate=litecl.Delegate(fast_device, quiet=True), ops=("CAST",))
    for bad in ({"ops": "CAST"}, {"ops": ("MUL",)}, {"nodes": [1, 2]}, {"nodes": {0: "12"}}, {"nodes": {-1: [1]}}):
        with pytest.raises(litecl.LiteclError) as e:
            litecl.Delegate(fast_device, **bad)
        assert "\n" not in str(e.value)
    n = len(litecl.model.load_model(model_content=m).subgraphs[0].nodes)
    # naming what the model lacks: one line, where the model is known (litecl.Interpreter:
    # a subgraph; any Prepare: a node), not every node left to LiteRT without a word
    for nodes, said in (({0: [2, n]}, f"nodes= names node {n} of subgraph 0, which has {n} node(s)"),
                        ({1: [0]}, "nodes= names subgraph 1, but the model has 1 subgraph(s)")):
        with pytest.raises(litecl.LiteclError) as e:
            litecl.Interpreter(model_content=m, delegate=litecl.Delegate(fast_device, quiet=True, nodes=nodes))
        assert said in str(e.value) and "\n" not in str(e.value)
    from ai_edge_litert.interpreter import Interpreter  # noqa: PLC0415 (stock LiteRT: the node only)

    d = litecl.Delegate(fast_device, quiet=True, nodes={0: [n + 5]})
    with pytest.raises(RuntimeError, match=f"nodes= names node {n + 5} of subgraph 0"):
        Interpreter(model_content=m, experimental_delegates=[d])
    # a subgraph the model lacks: counted through LiteRT's AcquireSubgraphContext (was accepted)
    d = litecl.Delegate(fast_device, quiet=True, nodes={0: [2], 3: [1]})
    with pytest.raises(RuntimeError, match=r"^nodes= names subgraph 3, which this model does not have"):
        Interpreter(model_content=m, experimental_delegates=[d])  # first: LiteRT's failed check kept silent
    from models.tf_models import while_cast_model  # noqa: PLC0415 (3 subgraphs)

    w = while_cast_model()
    it = Interpreter(model_content=w, experimental_delegates=[litecl.Delegate(fast_device, quiet=True,
                                                                              nodes={0: [0], 2: [1]})])
    it.allocate_tensors()
    with pytest.raises((ValueError, RuntimeError)) as e:  # the subgraph check left nothing in LiteRT's next error
        it.resize_tensor_input(0, [-5])
        it.allocate_tensors()
    assert "subgraph.cc" not in str(e.value), e.value
    # a node of an operator litecl does not lower (a misremembered index claimed nothing)
    m2 = multi_op_model("cast_mul_cast")
    ops = [x.op for x in litecl.model.load_model(model_content=m2).subgraphs[0].nodes]
    k = ops.index("MUL")
    with pytest.raises(litecl.LiteclError) as e:
        litecl.Interpreter(model_content=m2, device=fast_device, quiet=True, nodes={0: [0, k]})
    assert str(e.value).endswith(f"nodes= names node {k} of subgraph 0, a MUL node: litecl takes CAST and ADD "
                                 "nodes only"), e.value


def test_keep_order_names_the_order_it_drops_around_another_delegate(fast_device):
    """keep_order=True after the stand-in marks only LiteRT's own nodes; the stand-in's
    kernel nodes are named as order constraints dropped, and the model stays exact."""
    m = chain_model(["float32", ("mul", 2.0), "int64", ("sub", 1), "float32", ("add", 0.5), "int32",
                     ("sub", 3), "float16"], (3, 257))
    s, d, it = _after_standin(m, fast_device, keep_order=True)
    rec = d.subgraph_records()[0]
    if rec["kept_order"]:
        assert rec["order_dropped"] and all(n == "GpuDelegateStandIn" for _, n in rec["order_dropped"]), rec
    assert _exact(m, it)


_NATIVE = r"""
import json, sys
sys.path[:0] = sys.argv[4].split(":")
# the stand-in reads LiteRT structs through litecl.abi; the exported .so itself is plain C
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate
from gpu_standin import StandIn
m = open(sys.argv[1], "rb").read()
opts = json.loads(sys.argv[3])
dels = ([StandIn()] if sys.argv[5] == "standin" else []) + [load_delegate(sys.argv[2], opts)]
it = Interpreter(model_content=m, experimental_delegates=dels,
                 experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
ref = Interpreter(model_content=m, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
outs = []
for r in (it, ref):
    r.allocate_tensors()
    rng = np.random.default_rng(5)
    for d in r.get_input_details():
        r.set_tensor(d["index"], (rng.standard_normal(d["shape"]) * 100).astype(d["dtype"]))
    r.invoke()
    outs.append([r.get_tensor(o["index"]) for o in r.get_output_details()])
same = all(g.shape == w.shape and g.tobytes() == w.tobytes() for g, w in zip(*outs))
print(json.dumps({"exact": same}))
"""


def _native(tmp_path, m: bytes, device: str, opts_extra: dict, standin: bool) -> tuple:
    from litecl.cli import main

    if shutil.which(os.environ.get("CC", "cc")) is None:
        pytest.skip("no C compiler to build the exported delegate")
    p = tmp_path / "m.tflite"
    p.write_bytes(m)
    out = tmp_path / "e"
    if not out.exists():
        assert main(["export", str(p), "--out", str(out), "--device", device]) == 0
        r = subprocess.run(["sh", str(out / "build.sh")], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    opts = {**json.loads((out / "exported_device.json").read_text()), **opts_extra}
    r = subprocess.run([sys.executable, "-c", _NATIVE, str(p), str(out / "liblitecl_delegate.so"), json.dumps(opts),
                        f"{ROOT}:{ROOT / 'tests'}", "standin" if standin else "-"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    claimed = [int(x) for x in re.findall(r"Replacing (\d+) out of \d+ node\(s\) with delegate \(litecl", r.stderr)]
    return json.loads(r.stdout.strip().splitlines()[-1])["exact"], sum(claimed), r.stderr


def test_native_after_the_gpu_standin(tmp_path, fast_device):
    """The exported .so loaded after the stand-in: it claims the exported nodes the stand-in
    left (4 of the chain's 8 CAST/ADD: the stand-in took the float ones between), through
    its per-node launches where a partition lost a node, bit-exact."""
    m = chain_model(CHAIN, (3, 257))
    exact, claimed, err = _native(tmp_path, m, fast_device, {}, standin=False)
    assert exact and claimed == 8, err  # alone: all 8 CAST/ADD
    exact, claimed, err = _native(tmp_path, m, fast_device, {}, standin=True)
    assert exact and claimed == 4, err
    assert "taken by a delegate applied before litecl's" in err


def chain_model_nodes(m: bytes) -> list:
    from litecl.model import load_model  # noqa: PLC0415

    return load_model(model_content=m).subgraphs[0].nodes


def test_native_ops_and_nodes(tmp_path, fast_device):
    """Native options ops:CAST and nodes:0=2,5 take exactly what they name; bad values
    are refused with one line."""
    m = chain_model(CHAIN, (3, 257))
    exact, claimed, _ = _native(tmp_path, m, fast_device, {"ops": "CAST"}, standin=False)
    assert exact and claimed == 5  # the chain's five CASTs
    exact, claimed, _ = _native(tmp_path, m, fast_device, {"nodes": "0=2,5"}, standin=False)
    assert exact and claimed == 2
    opts = json.loads((tmp_path / "e" / "exported_device.json").read_text())
    n_nodes = len(chain_model_nodes(m))
    for nodes, said in (("1=0", "nodes names subgraph 1, but m.tflite has 1 subgraph(s)"),
                        (f"0=2,{n_nodes}", f"nodes names node {n_nodes} of subgraph 0, which has {n_nodes} node(s)")):
        r = subprocess.run([sys.executable, "-c", _NATIVE, str(tmp_path / "m.tflite"),
                            str(tmp_path / "e" / "liblitecl_delegate.so"), json.dumps({**opts, "nodes": nodes}),
                            f"{ROOT}:{ROOT / 'tests'}", "-"], capture_output=True, text=True, timeout=300)
        assert r.returncode != 0 and said in r.stderr, r.stderr[-2000:]


def test_nodes_a_delegate_after_litecl_runs_are_named_so(fast_device):
    """CAST/ADD nodes a delegate applied after litecl runs (XNNPACK under reference=
    "xnnpack") read "litert" in placement(), inspect's text and JSON, while LiteRT's graph
    held XNNPACK's kernels (a fresh user's report): they are "delegate", with litecl's own
    reason after who runs them; the outputs stay bit for bit LiteRT's."""
    m = chain_model(["float32", ("add", 1.5), "int32", "float32", ("add", 2.0)], (64,))
    it = litecl.Interpreter(model_content=m, device=fast_device, reference="xnnpack", ops=("CAST",), quiet=True)
    it.allocate_tensors()
    rows = {r["index"]: r for r in it.placement()}
    adds = [r for r in rows.values() if r["op"] == "ADD"]
    assert adds and all(r["placement"] == "delegate" for r in adds), adds
    assert all(r["reason"] == "run by XNNPACK applied after litecl (litecl: not among ops= (CAST))" for r in adds)
    assert all(r["placement"] == "opencl" for r in rows.values() if r["op"] == "CAST")
    plain = litecl.Interpreter(model_content=m, device=fast_device, ops=("CAST",), quiet=True)  # builtin: LiteRT's
    plain.allocate_tensors()
    assert all(r["placement"] == "litert" for r in plain.placement() if r["op"] == "ADD")
    ref = Interpreter(model_content=m, experimental_op_resolver_type=OpResolverType.AUTO)
    ref.allocate_tensors()
    x = np.linspace(-9, 9, 64, dtype=np.float32)
    for r in (it, ref):
        r.set_tensor(r.get_input_details()[0]["index"], x)
        r.invoke()
    got, want = (r.get_tensor(r.get_output_details()[0]["index"]) for r in (it, ref))
    assert got.tobytes() == want.tobytes()
