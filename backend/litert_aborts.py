"""What LiteRT aborts the process on instead of returning an error, refused or predicted.

``_check_litert_aborts`` refuses such a model when it is loaded (model.py's checks: an
integer SVDF with non-int16 weights_time or state, a non-positive or non-finite
quantization scale, an ADD/SUB that aborts at the declared shapes);
``litert_abort_reason`` says which ADD/SUB node would abort at given input shapes, for
litecl.Interpreter to ask again after a resize. Measured with LiteRT 2.3.0
(tests/test_hardening.py).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .errors import ModelError

if TYPE_CHECKING:
    from .model import Node, Subgraph


_QUANT_TYPES = ("INT8", "UINT8", "INT16")


def _check_litert_aborts(sub: "Subgraph", where: str) -> None:
    """Refuse what LiteRT 2.3.0 crashes on instead of returning an error, whatever the
    delegate does (measured): a fully integer SVDF whose weights_time or state is not
    int16 (tflite-micro's keyword_scrambled_8bit has int8 ones: heap corruption); an
    8/16-bit quantized tensor whose scale is not a positive finite number; and the ADD/SUB
    nodes ``litert_abort_reason`` names at the shapes LiteRT starts from (subgraph inputs
    and constants as declared; other tensors' shapes are LiteRT's to propagate, and
    litecl.Interpreter checks them after allocate_tensors). litecl's delegate claims none
    of these nodes (lowering.why_not refuses the same parameters), so LiteRT would run
    them: its Prepare aborts on the quantization cases (SIGABRT in allocate_tensors), its
    Eval on the shape cases (in invoke)."""
    for n in sub.nodes:
        if n.op == "SVDF" and len(n.inputs) >= 5 and min(n.inputs[0], n.inputs[2], n.inputs[4]) >= 0 \
                and sub.tensors[n.inputs[0]].type_name == "INT8":
            wt, st = sub.tensors[n.inputs[2]], sub.tensors[n.inputs[4]]
            if (wt.type_name, st.type_name) != ("INT16", "INT16"):
                raise ModelError(
                    f"{where}: subgraph {sub.index} operator {n.index} (SVDF) is fully integer (int8 "
                    f"input) with {wt.type_name.lower()} weights_time and {st.type_name.lower()} "
                    "state; LiteRT's integer SVDF reads both as int16 and corrupts memory on "
                    "others (SIGSEGV/SIGABRT, measured; tflite-micro's kernel takes int8 ones)")
    for t in sub.tensors:
        if t.type_name in _QUANT_TYPES and t.scales.size and not (
                np.all(np.isfinite(t.scales)) and np.all(t.scales > 0)):
            raise ModelError(f"{where}: subgraph {sub.index} tensor {t.index} ({t.name!r}) has "
                             f"quantization scale {t.scales.tolist()[:4]}; scales must be "
                             "positive and finite")
    start = set(sub.inputs)
    for n in sub.nodes:
        if n.op in ("ADD", "SUB"):
            shapes = {t: sub.tensors[t].shape for t in n.inputs
                      if t >= 0 and (t in start or sub.tensors[t].is_constant)}
            why = litert_abort_reason(n, sub, shapes)
            if why:
                raise ModelError(f"{where}: subgraph {sub.index} operator {n.index}: {why}")


def _broadcast_abort(node, sg, s1, s2, reference: str) -> str | None:
    """A broadcasting ADD whose output has more than 8 dimensions: LiteRT 2.3.0 aborts in
    its generic broadcast kernels (at invoke; measured, builtin and ref resolvers, every
    type), except the optimized float32/int8/uint8 kernels when tflite::ProcessBroadcastShapes
    fits the shapes in its fivefold loop (e.g. a 9-D tensor plus a single element)."""
    from .ops.add import fivefold  # noqa: PLC0415

    r = max(len(s1), len(s2))
    e1, e2 = ((1,) * (r - len(s)) + tuple(int(d) for d in s) for s in (s1, s2))
    if r <= 8 or e1 == e2:
        return None
    kind = sg.tensors[node.inputs[1]].type_name  # LiteRT's output type: input2's
    if reference != "ref" and kind in ("FLOAT32", "INT8", "UINT8") and fivefold(e1, e2):
        return None
    return (f"broadcasting ADD of {list(s1)} and {list(s2)}: {r} dimensions (LiteRT aborts on "
            "broadcasts above 8 dimensions outside its optimized fivefold loop)")


def litert_abort_reason(node: "Node", sg: "Subgraph", shapes: dict, reference: str = "builtin") -> str | None:
    """Why LiteRT would abort the process (SIGABRT, not an error) preparing or running
    ADD/SUB ``node`` of ``sg`` whose inputs have ``shapes`` (tensor -> shape; a missing
    tensor's shape is unknown and its shape-dependent cases are not judged) under the op
    resolver ``reference`` ("builtin", "ref" or "xnnpack", which runs ADD as "builtin"),
    or None.

    Measured with LiteRT 2.3.0 (tests/test_hardening.py): a quantized-type SUB with an
    input lacking quantization parameters, an 8-bit ADD with any tensor lacking them, an
    int16 ADD whose output lacks them while an input has them; per-channel scales on an
    8/16-bit ADD; a quantized ADD on the general path whose rescale multipliers, in
    LiteRT's float32 arithmetic, leave (0, 1) (ops.add_quant.general_multipliers_abort: a
    too small output scale, or huge finite scales that overflow float32, e.g. an 8-bit
    output scale of 1e33): all in Prepare. At invoke: an int16 ADD on the power-of-two
    path (pot_scale_int16 and every scale a power of two, by tflite::CheckedLog2) whose
    operands hold different element counts (MatchingElementsSize), and a broadcasting ADD
    above 8 dimensions (``_broadcast_abort``). Non-positive or non-finite scales are
    refused by _check_litert_aborts before this is asked.
    """
    from .ops.add_quant import checked_log2, general_multipliers_abort  # noqa: PLC0415

    if node.op not in ("ADD", "SUB") or len(node.inputs) != 2 or len(node.outputs) != 1 \
            or min(node.inputs) < 0 or node.outputs[0] < 0:
        return None
    known = [shapes.get(t) for t in node.inputs]
    if node.op == "ADD" and None not in known:
        r = _broadcast_abort(node, sg, known[0], known[1], reference)
        if r:
            return r
    ts = [sg.tensors[t] for t in (*node.inputs, node.outputs[0])]
    # Prepare sets output->type = input2->type before anything else (add.cc, sub.cc): an
    # int8 ADD declared with a float32 output runs (and aborts) as int8, measured
    kind = ts[1].type_name
    if kind not in _QUANT_TYPES:
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
    if not all(math.isfinite(x) and x > 0 for x in (s1, s2, so)):
        return None  # _check_litert_aborts refuses these scales
    pot = getattr(node.options, "potScaleInt16", True) is not False
    if kind == "INT16" and pot and all(checked_log2(x)[0] for x in (s1, s2, so)):
        if None not in known:
            n1, n2 = (math.prod(int(d) for d in s) for s in known)
            if n1 != n2:
                return (f"int16 power-of-two-scale ADD of {list(known[0])} and {list(known[1])} "
                        "(LiteRT aborts in MatchingElementsSize on broadcasting)")
        return None
    bad = general_multipliers_abort(s1, s2, so, 15 if kind == "INT16" else 20)
    if bad:
        return f"{kind.lower()} ADD with scales {s1:g}, {s2:g} -> {so:g}: {bad}"
    return None
