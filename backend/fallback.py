"""Fallback: a segment of nodes becomes a valid sub-model run by LiteRT's Interpreter.

The sub-model is packed with flatbuffers from the schema object tree: subgraph 0 holds
the segment's operators and the tensors they touch (re-indexed), its inputs are the
tensors the segment reads but neither produces nor holds as constants, its outputs the
tensors it produces that anything outside needs. Segments that call other subgraphs
(WHILE, IF, CALL_ONCE, ...) keep every original subgraph, shifted by one, so LiteRT
runs the control flow exactly as in the whole model.
"""
from __future__ import annotations

import copy
import hashlib
from functools import lru_cache
from pathlib import Path

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from . import cache
from .model import Model

__all__ = ["build_submodel", "make_interpreter", "litert_abort_reason"]


def _shift_refs(op, delta: int) -> None:
    for opts in (op.builtinOptions, getattr(op, "builtinOptions2", None)):
        if opts is None:
            continue
        for k, v in list(vars(opts).items()):
            if k.endswith("SubgraphIndex") and isinstance(v, int):
                setattr(opts, k, v + delta)
            elif k.endswith("SubgraphIndices") and v is not None:
                setattr(opts, k, [int(x) + delta for x in v])


def _inline(model: Model, ob) -> "schema.BufferT":
    """A copy of buffer ``ob`` holding its bytes inline: a buffer stored after the
    flatbuffer (``offset`` > 1, LiteRT's large-model layout) points into the original
    file, which the sub-model is not."""
    nb = schema.BufferT()
    if ob.offset and ob.offset > 1:
        nb.data = np.frombuffer(model.raw, np.uint8, int(ob.size), int(ob.offset))
    else:
        nb.data = ob.data
    return nb


#: Sub-models of models larger than this are packed every time, not cached: a model's
#: sub-models hold about its weights, so the cache grows by about the model's size per
#: model run under placement "all".
SUBMODEL_CACHE_MAX_BYTES = 32 << 20


@lru_cache(maxsize=None)
def _packer_version() -> str:
    """What the packed bytes depend on besides the model and the segment: this module's
    code and the schema and flatbuffers versions (a change gives new cache keys)."""
    import ai_edge_litert  # noqa: PLC0415

    return "|".join((hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
                     str(getattr(ai_edge_litert, "__version__", "?")),
                     str(getattr(flatbuffers, "__version__", "?"))))


def build_submodel(model: Model, subgraph: int, nodes: list[int], inputs: list[int],
                   outputs: list[int]) -> bytes:
    """Pack nodes ``nodes`` of subgraph ``subgraph`` as a one-entry-subgraph model.

    inputs/outputs: tensor indices of the original subgraph, in the order the sub-model's
    inputs/outputs will have. Returns the .tflite bytes. The bytes are a function of the
    model's bytes and these arguments, so they are kept in litecl's cache (cache.py) keyed
    by both: packing through the schema's object API took 2-6 ms a segment (MoveNet's 20:
    35-90 ms), reading the cached bytes ~0.1 ms (measured). Models over
    SUBMODEL_CACHE_MAX_BYTES are packed every time.
    """
    key = (f"{model.sha256()}|{subgraph}|{list(nodes)}|{list(inputs)}|{list(outputs)}|"
           f"{_packer_version()}")
    if len(model.raw) > SUBMODEL_CACHE_MAX_BYTES:
        return _pack_submodel(model, subgraph, nodes, inputs, outputs)
    content = cache.load_blob("submodels", key)
    if content is None:
        content = _pack_submodel(model, subgraph, nodes, inputs, outputs)
        cache.store_blob("submodels", key, content)
    return content


def _pack_submodel(model: Model, subgraph: int, nodes: list[int], inputs: list[int],
                   outputs: list[int]) -> bytes:
    """build_submodel without the cache."""
    src = model.obj
    sg = src.subgraphs[subgraph]
    ops = [copy.copy(sg.operators[i]) for i in nodes]
    calls = any(model.subgraphs[subgraph].nodes[i].subgraph_refs() for i in nodes)

    used: list[int] = []
    seen = set()

    def use(t):
        if t >= 0 and t not in seen:
            seen.add(t)
            used.append(t)

    for t in inputs:
        use(t)
    for op in ops:
        for t in list(op.inputs if op.inputs is not None else []) + list(op.outputs if op.outputs is not None else []):
            use(int(t))
        for t in op.intermediates if op.intermediates is not None else []:
            use(int(t))
    for t in outputs:
        use(t)
    remap = {t: i for i, t in enumerate(used)}

    new = schema.ModelT()
    new.version = src.version or 3
    new.operatorCodes = src.operatorCodes
    new.description = "litecl fallback segment"
    if calls:  # every subgraph comes along, so every buffer keeps its index
        buffers = [_inline(model, ob) for ob in src.buffers]
        bremap = None
    else:
        buffers = [schema.BufferT()]
        bremap = {0: 0}
    tensors = []
    for t in used:
        tt = copy.copy(sg.tensors[t])
        b = int(tt.buffer)
        if bremap is not None:
            if b not in bremap:
                bremap[b] = len(buffers)
                buffers.append(_inline(model, src.buffers[b]))
            tt.buffer = bremap[b]
        tensors.append(tt)
    for op in ops:
        op.inputs = [remap[int(t)] if t >= 0 else -1 for t in (op.inputs if op.inputs is not None else [])]
        op.outputs = [remap[int(t)] for t in (op.outputs if op.outputs is not None else [])]
        if op.intermediates is not None:
            op.intermediates = [remap[int(t)] for t in op.intermediates]
    seg = schema.SubGraphT()
    seg.tensors = tensors
    seg.operators = ops
    seg.inputs = [remap[t] for t in inputs]
    seg.outputs = [remap[t] for t in outputs]
    seg.name = "litecl_segment"
    subgraphs = [seg]
    if calls:
        for op in ops:
            op.builtinOptions = copy.deepcopy(op.builtinOptions)
            if getattr(op, "builtinOptions2", None) is not None:
                op.builtinOptions2 = copy.deepcopy(op.builtinOptions2)
            _shift_refs(op, 1)
        for other in src.subgraphs:
            o = copy.copy(other)
            o.operators = []
            for op in other.operators or []:
                op2 = copy.copy(op)
                op2.builtinOptions = copy.deepcopy(op.builtinOptions)
                if getattr(op, "builtinOptions2", None) is not None:
                    op2.builtinOptions2 = copy.deepcopy(op.builtinOptions2)
                _shift_refs(op2, 1)
                o.operators.append(op2)
            subgraphs.append(o)
    new.subgraphs = subgraphs
    new.buffers = buffers
    b = flatbuffers.Builder(1024)
    b.Finish(new.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _broadcast_abort(node, sg, shapes: dict, reference: str) -> str | None:
    """A broadcasting ADD whose output has more than 8 dimensions: LiteRT 2.3.0 aborts in
    its generic broadcast kernels (measured, builtin and ref resolvers, every type), except
    the optimized float32/int8/uint8 kernels when tflite::ProcessBroadcastShapes fits the
    shapes in its fivefold loop (e.g. a 9-D tensor plus a single element)."""
    from .ops.add import fivefold  # noqa: PLC0415

    if node.op != "ADD" or len(node.inputs) != 2 or min(node.inputs) < 0:
        return None
    s1, s2 = (shapes.get(t, sg.tensors[t].shape) for t in node.inputs)
    if s1 is None or s2 is None:
        return None
    r = max(len(s1), len(s2))
    e1, e2 = ((1,) * (r - len(s)) + tuple(int(d) for d in s) for s in (s1, s2))
    if r <= 8 or e1 == e2:
        return None
    kind = sg.tensors[node.inputs[1]].type_name  # LiteRT's output type: input2's
    if reference != "ref" and kind in ("FLOAT32", "INT8", "UINT8") and fivefold(e1, e2):
        return None
    return (f"broadcasting ADD of {list(s1)} and {list(s2)}: {r} dimensions (LiteRT aborts on "
            "broadcasts above 8 dimensions outside its optimized fivefold loop)")


def litert_abort_reason(node, sg, shapes: dict, reference: str = "builtin") -> str | None:
    """Why LiteRT would abort the process (SIGABRT, not an error) preparing or running
    ``node`` with input shapes ``shapes`` (tensor -> shape; unknown ones may be missing,
    then the declared shape counts) under the op resolver ``reference``, or None.

    Measured with LiteRT 2.3.0 (tests/test_hardening.py): a quantized-type SUB with an
    input lacking quantization parameters, an 8-bit ADD with any tensor lacking them, an
    int16 ADD whose output lacks them while an input has them; a quantized ADD on the
    general path whose rescale multipliers, in LiteRT's float32 arithmetic, leave (0, 1)
    (ops.add_quant.general_multipliers_abort: a too small output scale, or huge finite
    scales that overflow float32, e.g. an 8-bit output scale of 1e33); an int16
    ADD on the power-of-two path (pot_scale_int16 and every scale a power of two, by
    tflite::CheckedLog2) whose operands hold different element counts
    (MatchingElementsSize); a broadcasting ADD above 8 dimensions (``_broadcast_abort``).
    Non-positive or non-finite scales are refused by model.py.
    """
    from .ops.add_quant import checked_log2, general_multipliers_abort  # noqa: PLC0415

    r = _broadcast_abort(node, sg, shapes, reference)
    if r:
        return r

    if node.op not in ("ADD", "SUB") or len(node.inputs) != 2 or len(node.outputs) != 1 \
            or min(node.inputs) < 0:
        return None
    ts = [sg.tensors[t] for t in (*node.inputs, node.outputs[0])]
    # Prepare sets output->type = input2->type before anything else (add.cc, sub.cc): an
    # int8 ADD declared with a float32 output runs (and aborts) as int8, measured
    kind = ts[1].type_name
    if kind not in ("INT8", "UINT8", "INT16"):
        return None
    if node.op == "ADD" and any(t.scales.size > 1 for t in ts):
        return (f"per-channel quantization on a {kind.lower()} ADD tensor (LiteRT aborts on it; "
                "ADD takes per-tensor scales)")
    q1, q2, qo = (t.scales.size > 0 for t in ts)  # LiteRT reads a missing scale as 0
    if node.op == "SUB":
        aborts = not (q1 and q2)
    elif kind == "INT16":  # without any quantization: plain int16 arithmetic
        aborts = not qo and (q1 or q2)
    else:
        aborts = not (q1 and q2 and qo)
    if aborts:
        return (f"{kind.lower()} {node.op} with quantization parameters on "
                f"{sum((q1, q2, qo))} of its 3 tensors (LiteRT aborts on it)")
    if node.op == "SUB" or not (q1 and q2 and qo):
        return None
    s1, s2, so = (float(t.scales[0]) for t in ts)
    if not all(np.isfinite(x) and x > 0 for x in (s1, s2, so)):
        return None  # model.py refuses these scales
    pot = getattr(node.options, "potScaleInt16", True) is not False
    if kind == "INT16" and pot and all(checked_log2(x)[0] for x in (s1, s2, so)):
        known = [shapes.get(t) for t in node.inputs]
        if all(s is not None for s in known):
            n1, n2 = (int(np.prod(s, dtype=np.int64)) for s in known)
            if n1 != n2:
                return (f"int16 power-of-two-scale ADD of {list(known[0])} and {list(known[1])} "
                        "(LiteRT aborts in MatchingElementsSize on broadcasting)")
        return None
    bad = general_multipliers_abort(s1, s2, so, 15 if kind == "INT16" else 20)
    if bad:
        return f"{kind.lower()} ADD with scales {s1:g}, {s2:g} -> {so:g}: {bad}"
    return None


#: LiteRT op resolvers litecl can run against (``reference=``):
#: "builtin": LiteRT's builtin (optimized) kernels without the default XNNPACK delegate,
#:   the default; "ref": LiteRT's reference kernels (BUILTIN_REF: slow, the definition of
#:   each op); "xnnpack": LiteRT's default configuration (XNNPACK delegate).
REFERENCES = ("builtin", "ref", "xnnpack")


def make_interpreter(content: bytes, num_threads=None, reference: str = "builtin",
                     preserve_all_tensors: bool = False):
    """A LiteRT Interpreter over model bytes, with the op resolver named by ``reference``
    (see REFERENCES); ``preserve_all_tensors`` is LiteRT's
    experimental_preserve_all_tensors. Raises ValueError for an unknown reference."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    kinds = {"builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
             "ref": OpResolverType.BUILTIN_REF, "xnnpack": OpResolverType.AUTO}
    if reference not in kinds:
        raise ValueError(f"unknown reference {reference!r}; expected one of {', '.join(REFERENCES)}")
    return Interpreter(model_content=content, num_threads=num_threads,
                       experimental_op_resolver_type=kinds[reference],
                       experimental_preserve_all_tensors=preserve_all_tensors)
