"""Quantized ADD rounding ties: litecl matches the LiteRT kernels it replaces, bit for bit.

LiteRT's builtin ADD (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``) runs SIMD bodies that round
some operand pairs differently from its reference kernels (``BUILTIN_REF``); which
elements take a body depends on their position (ops/add_quant.py ``quant_add_simd_rule``).
Here every case runs one ADD model through LiteRT's own Interpreter with litecl.Delegate
(the node placed on OpenCL) and through LiteRT alone, with the same resolver, on
``reference="builtin"`` and ``"ref"``, and compares the outputs bit for bit:

- operands: random full-range values, and adversarial ones built from operand pairs on
  which the two kernels differ (found with the numpy model, confirmed by LiteRT: each
  adversarial case asserts that LiteRT's two kernels do differ on it, or, where LiteRT
  computes the reference formula in both, that they do not);
- shapes: same shapes with a tail shorter than a SIMD block, fivefold broadcasts (an inner
  run of y4 elements, and the scalar-broadcast loop over y3), a scalar operand (the fused
  kernel path), a generic broadcast and int16 broadcasts (reference formula in both);
- types: int16 (simple_quantized_ops.tflite's scales, and one with the first input
  shifted), int8 and uint8 (one rounding configuration each, and one output scale ~1000x
  finer than the inputs', where the 8-bit bodies' int16 narrowing wraps);
- devices: every real device conftest offers, in the default and ``noint64`` profiles
  (the 32-bit arithmetic of a device without 64-bit integers).
"""
from __future__ import annotations

import functools
import re
import zlib

import numpy as np
import pytest

import litecl
from litecl.compare import make_interpreter, mismatches
from litecl.ops.add import add_kernel, add_kernel_args
from litecl.ops.add_quant import (QUANT_DTYPES, QuantSimdRule, quant_add_params,
                                  quant_add_reference, quant_add_simd_rule)
from models.builders import add_model

from conftest import REAL_DEVICES, device_params

REFERENCES = ("builtin", "ref")

#: name -> (dtype, ((scale, zero point) of input 1, input 2, output), activation).
CONFIGS = {
    # simple_quantized_ops.tflite's ADD: input 2 rescaled with a shift of -2
    "int16_model": ("int16", ((0.0002964779268950224, 0), (0.00013866049994248897, 0),
                              (0.0003825729072559625, 0)), "NONE"),
    "int16_shift1": ("int16", ((0.05, 0), (0.08, 0), (0.1, 0)), "RELU"),
    "int8": ("int8", ((0.05, -3), (0.08, 10), (0.1, -5)), "NONE"),
    "int8_fine_out": ("int8", ((1.0, 0), (0.001, 0), (0.002, 0)), "RELU"),
    "uint8": ("uint8", ((0.05, 125), (0.08, 138), (0.1, 123)), "RELU6"),
    "uint8_narrow": ("uint8", ((0.5, 131), (0.5, 125), (0.0004, 128)), "NONE"),
}

#: (shape1, shape2) -> what LiteRT's builtin loop does there (for the ids and docs).
SHAPES_8BIT = [
    ((16 * 20 + 13,), (16 * 20 + 13,)),  # one flat loop; a tail of 13 (int8) / 5 (uint8)
    ((3, 1, 37), (3, 5, 37)),            # fivefold, elementwise runs of y4 = 37
    ((4, 45), (4, 1)),                   # fivefold, y4 == 1: scalar broadcast over y3 = 45
    ((6, 1), (6, 29)),                   # the same with the first input broadcast
    ((), (77,)),                         # a scalar operand: litecl's fused-kernel path
    ((1, 3, 1, 17), (2, 3, 4, 17)),      # generic broadcast: the reference formula
]
SHAPES_INT16 = [
    ((16 * 20 + 13,), (16 * 20 + 13,)),  # one flat loop (AddElementwiseInt16)
    ((2, 4, 16), (2, 4, 16)),            # same shapes, a multiple of 16: body everywhere
    ((3, 1, 37), (3, 5, 37)),            # every int16 broadcast: reference_ops in both
    ((), (77,)),
]
#: Every configuration with every shape of its type: LiteRT and the numpy model, no device.
CASES = [(name, s1, s2) for name, (dt, _, _) in CONFIGS.items()
         for s1, s2 in (SHAPES_INT16 if dt == "int16" else SHAPES_8BIT)]
#: On each device: every configuration and every shape at least once, each SIMD form in
#: each loop and each kernel skeleton litecl generates (same-shape elementwise, broadcast
#: index arithmetic, the fused kernel of a scalar operand), so that device builds stay few.
DEVICE_CASES = [
    ("int16_model", *SHAPES_INT16[0]), ("int16_shift1", *SHAPES_INT16[1]),
    ("int16_shift1", *SHAPES_INT16[2]), ("int16_model", *SHAPES_INT16[3]),
    ("int8", *SHAPES_8BIT[0]), ("int8", *SHAPES_8BIT[1]), ("int8", *SHAPES_8BIT[2]),
    ("int8_fine_out", *SHAPES_8BIT[3]),
    ("uint8", *SHAPES_8BIT[1]), ("uint8", *SHAPES_8BIT[3]), ("uint8_narrow", *SHAPES_8BIT[0]),
    ("uint8_narrow", *SHAPES_8BIT[4]), ("int8", *SHAPES_8BIT[5]),
]


def _params(name: str):
    dt, q, act = CONFIGS[name]
    return quant_add_params(dt, *q, act, pot_scale_int16=False)  # builders write it False


@functools.lru_cache(maxsize=None)
def _model(name: str, s1: tuple, s2: tuple) -> bytes:
    dt, q, act = CONFIGS[name]
    return add_model(dt, list(s1), list(s2), activation=act, quant=q)


def _departures(p, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a, b) rows, of the broadcast operands, where the numpy model of LiteRT's builtin
    kernel and of its reference kernel differ (at these shapes: they choose the loop)."""
    d = (quant_add_reference(a, b, p, "builtin") != quant_add_reference(a, b, p, "ref")).ravel()
    out = np.broadcast_shapes(a.shape, b.shape)
    a, b = (np.broadcast_to(x, out).ravel() for x in (a, b))
    return np.stack([a[d], b[d]], axis=1)


@functools.lru_cache(maxsize=None)
def _ties(name: str, form: str) -> np.ndarray:
    """Operand pairs (rows a, b) on which LiteRT's builtin SIMD body of ``form`` rounds
    differently from its reference kernel: every such pair for 8-bit types (all 65536 in a
    layout whose every element takes that body); for int16, random pairs (chunks of 2**20
    until 24 are found: about 1 in 200,000 pairs for the model's scales)."""
    p = _params(name)
    lo, hi = QUANT_DTYPES[p.dtype]
    v = np.arange(lo, hi + 1)
    if p.dtype != "int16":
        if form == "shift_after":  # [1, 256] + [256, 1]: the scalar loop, y3 = 256
            a, b = v[None, :], v[:, None]
        else:  # one flat loop over all pairs
            a, b = (x.ravel() for x in np.meshgrid(v, v))
        rule = quant_add_simd_rule(p, a.shape, b.shape)
        assert rule.form == form and rule.everywhere, rule
        found = _departures(p, a, b)
        assert len(found) > 8, (name, form, len(found))
        return found
    assert form == "combined_shift"  # AddElementwiseInt16, the only int16 body
    rng = np.random.default_rng(7)
    parts = []
    for _ in range(16):
        a, b = (rng.integers(lo, hi + 1, 1 << 20) for _ in range(2))
        parts.append(_departures(p, a, b))
        if sum(len(x) for x in parts) >= 24:
            break
    found = np.concatenate(parts)
    assert len(found) >= 24, (name, len(found))
    return found


@functools.lru_cache(maxsize=None)
def _inputs(name: str, s1: tuple, s2: tuple, kind: str) -> tuple:
    """The two operands: "random" full-range values, or "ties": the operand smaller than
    the output random among values that have tie partners, the other (of the output's
    shape) at each element a partner of the value broadcast there, so every element is a
    tie pair of the body LiteRT's builtin kernel runs at these shapes (where it runs the
    reference formula: of the body its same-shape loop would run)."""
    p = _params(name)
    lo, hi = QUANT_DTYPES[p.dtype]
    rng = np.random.default_rng(zlib.crc32(repr((name, s1, s2, kind)).encode()))
    if kind == "random":
        return tuple(rng.integers(lo, hi + 1, s).astype(p.dtype) for s in (s1, s2))
    out = np.broadcast_shapes(s1, s2)
    rule = quant_add_simd_rule(p, s1, s2) or quant_add_simd_rule(p, (64,), (64,))
    ties = _ties(name, rule.form)
    full = 1 if tuple(s2) == out else 0  # the operand that has the output's shape
    small = 1 - full
    keys, inverse = np.unique(ties[:, small], return_inverse=True)
    partners = [ties[inverse == k, full] for k in range(len(keys))]
    pick = rng.integers(0, len(keys), (s1, s2)[small])
    spread = np.broadcast_to(pick, out).ravel()
    fv = np.array([partners[k][rng.integers(len(partners[k]))] for k in spread])
    ops = [None, None]
    ops[small] = keys[pick].astype(p.dtype)
    ops[full] = fv.reshape(out).astype(p.dtype)
    return tuple(ops)


def _run(interp, inputs) -> np.ndarray:
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), inputs):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


@functools.lru_cache(maxsize=None)
def _litert(name: str, s1: tuple, s2: tuple, kind: str, reference: str) -> np.ndarray:
    return _run(make_interpreter(_model(name, s1, s2), reference=reference),
                _inputs(name, s1, s2, kind))


def _litecl(device: str, name: str, s1: tuple, s2: tuple, kind: str, reference: str):
    d = litecl.Delegate(device, quiet=True, reference=reference)
    it = make_interpreter(_model(name, s1, s2), reference=reference, delegates=[d])
    rows = [r for r in d.placement() if r["op"] == "ADD"]
    assert len(rows) == 1 and rows[0]["placement"] == "opencl", rows
    got = _run(it, _inputs(name, s1, s2, kind))
    assert d.stats["partition_invokes"] == 1  # litecl's kernel ran at the invoke
    return got, rows[0]


def _assert_same(got, want, what, inputs):
    bad = mismatches(got, want)
    if bad.any():
        idx = np.flatnonzero(bad)[:6]
        ops = [np.broadcast_to(x, want.shape).ravel()[idx].tolist() for x in inputs]
        pytest.fail(f"{what}: {int(bad.sum())} of {want.size} differ at {idx.tolist()}; "
                    f"operands {ops} got {got.ravel()[idx].tolist()} want "
                    f"{want.ravel()[idx].tolist()}")


@pytest.mark.parametrize("device", device_params(REAL_DEVICES, ("", "noint64")))
def test_quantized_add_ties_match_litert(device):
    """DEVICE_CASES, both references, random and adversarial operands: litecl's output
    equals LiteRT's with the same resolver, bit for bit, with the ADD on OpenCL."""
    for name, s1, s2 in DEVICE_CASES:
        for kind in ("ties", "random"):
            inputs = _inputs(name, s1, s2, kind)
            for reference in REFERENCES:
                want = _litert(name, s1, s2, kind, reference)
                got, row = _litecl(device, name, s1, s2, kind, reference)
                _assert_same(got, want, f"{device} {name} {s1}+{s2} {kind} {reference} "
                             f"({row['kernel']})", inputs)


@pytest.mark.parametrize("name,s1,s2", CASES, ids=[f"{n}-{s1}+{s2}" for n, s1, s2 in CASES])
def test_model_predicts_both_kernels(name, s1, s2):
    """No device: quant_add_reference(..., reference) equals LiteRT's kernels, and the
    adversarial operands make them differ exactly where quant_add_simd_rule says LiteRT
    runs a SIMD body (so the device test compares inputs on which a litecl that ignored
    the reference, or chose the wrong elements, would fail)."""
    p = _params(name)
    rule = quant_add_simd_rule(p, s1, s2, "builtin")
    assert quant_add_simd_rule(p, s1, s2, "ref") is None
    for kind in ("ties", "random"):
        inputs = _inputs(name, s1, s2, kind)
        outs = {}
        for reference in REFERENCES:
            outs[reference] = _litert(name, s1, s2, kind, reference)
            _assert_same(quant_add_reference(*inputs, p, reference), outs[reference],
                         f"numpy model {name} {s1}+{s2} {kind} {reference}", inputs)
        if kind != "ties":
            continue
        differ = mismatches(outs["builtin"], outs["ref"]).ravel()
        if rule is None:
            assert not differ.any(), "LiteRT's kernels differ where the rule says they agree"
            continue
        at = np.arange(differ.size) % rule.run < rule.simd
        assert differ[at].all(), (name, s1, s2, differ[at].mean())  # every planted tie
        assert not differ[~at].any()  # the tails: the reference formula


def test_rule_positions():
    """quant_add_simd_rule's loops, by hand from LiteRT's sources (add.cc,
    ProcessBroadcastShapes, BinaryBroadcastFiveFold): run lengths, blocks, forms."""
    p8, pu8, p16 = _params("int8"), _params("uint8"), _params("int16_model")
    r = quant_add_simd_rule(p8, (333,), (333,))
    assert (r.form, r.run, r.block, r.simd) == ("combined_shift", 333, 16, 320)
    r = quant_add_simd_rule(pu8, (333,), (333,))
    assert (r.form, r.run, r.block, r.simd) == ("shift_after", 333, 8, 328)
    assert quant_add_simd_rule(p8, (3, 1, 37), (3, 5, 37)).run == 37
    assert quant_add_simd_rule(p8, (4, 45), (4, 1)) == QuantSimdRule("shift_after", 45, 8)
    assert quant_add_simd_rule(pu8, (4, 1), (4, 45)) == QuantSimdRule("shift_after", 45, 8)
    assert quant_add_simd_rule(p8, (1, 3, 1, 17), (2, 3, 4, 17)) is None  # generic
    assert quant_add_simd_rule(p8, (15,), (15,)) is None  # no full block
    assert quant_add_simd_rule(p16, (3, 1, 37), (3, 5, 37)) is None  # int16 broadcast
    assert quant_add_simd_rule(p16, (1, 64), (64,)).everywhere  # extended shapes equal
    assert quant_add_simd_rule(p16, (64,), (64,), "xnnpack") == QuantSimdRule("combined_shift",
                                                                              64, 16)
    pot = quant_add_params("int16", (2.0**-10, 0), (2.0**-13, 0), (2.0**-10, 0))
    assert pot.path == "pot_int16" and quant_add_simd_rule(pot, (64,), (64,)) is None
    with pytest.raises(ValueError, match="reference must be one of"):
        quant_add_simd_rule(p8, (64,), (64,), "neon")


def test_kernel_text_follows_the_reference():
    """The generated ADD kernel: "ref" is the reference formula alone; "builtin" adds the
    SIMD body, chosen by the element index where runs have a tail, and under noint64 the
    text holds no 64-bit type (the device tests run it on each device)."""
    from dataclasses import replace  # noqa: PLC0415

    from litecl.device import Caps  # noqa: PLC0415

    caps = Caps("p", "d", "v", "1", frozenset(), False, False, True, 4, 256, False)
    p = _params("int16_model")
    ref = add_kernel("int16", (333,), (333,), "NONE", replace(caps, reference="ref"), p)
    assert "_sb" not in ref and not re.search(r"const uint i[,)]", ref)
    for int64 in (True, False):
        # one run over the whole output: the body's end (320 of 333) is computed from the
        # element count, so every length shares the text (an exported kernel holds at any)
        src = add_kernel("int16", (333,), (333,), "NONE", replace(caps, int64=int64), p)
        assert "(i) < (uint)(count - count % 16u)" in src and src != ref, src[-400:]
        assert not any(n == "litecl_add_op_sb" for n, _ in add_kernel_args(
            "int16", (333,), (333,), "NONE", replace(caps, int64=int64), p))
        for n in (335, 320, 7, 1):
            assert src == add_kernel("int16", (n,), (n,), "NONE", replace(caps, int64=int64), p), n
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", src, flags=re.S)  # comments dropped
        assert bool(re.search(r"\b(u?long\d*|\d+U?L+)\b", code)) == int64, int64
    every = add_kernel("int16", (2, 4, 16), (2, 4, 16), "NONE", caps, p)
    assert "% 128u" not in every and every == add_kernel("int16", (333,), (333,), "NONE", caps, p)
    assert add_kernel("int16", (3, 1, 37), (3, 5, 37), "NONE", caps, p) == add_kernel(
        "int16", (3, 1, 37), (3, 5, 37), "NONE", replace(caps, reference="ref"), p)


def test_same_shape_kernels_run_the_vector_form():
    """A same-shape quantized ADD's vector loop calls the op's vector form once per vector
    (add_quant.quant_add_cl_vector_functions), not the scalar op lane by lane, which
    Intel's CPU runtime left unvectorized (MoveNet's ADD kernels 8x slower); the scalar op
    stays for the tail. Its lane indices, where the SIMD rule needs them, are a uintN."""
    from dataclasses import replace  # noqa: PLC0415

    from litecl.device import Caps  # noqa: PLC0415

    caps = Caps("p", "d", "v", "1", frozenset(), False, False, True, 4, 256, False)
    for dt, model in (("int16", "int16_model"), ("int8", "int8")):
        p = _params(model)
        for int64 in (True, False):
            src = add_kernel(dt, (333,), (333,), "NONE", replace(caps, int64=int64), p)
            body = src[src.index("for (uint k = lid"):]
            assert "litecl_add_op_v16(" in body, body[:400]
            assert body.count("litecl_add_op(") == 1  # the tail's scalar call only
            assert "#ifndef LITECL_QUANT_V16" in src
        if dt == "int16":
            assert "const uint16 i" in src  # this model's SIMD rule picks elements by index


def test_constants_are_kernel_arguments_so_equal_adds_share_a_program(fast_device):
    """A quantized ADD's scales and zero points are int arguments of its kernel, not
    literals: two ADDs of one dtype, path and shape with other constants have one program
    (MoveNet: 20 programs were 6), each launch passing its own values, bit-exact with
    LiteRT (test_add_quant.py runs the same expression over every 8-bit operand pair on
    each device)."""
    from litecl.ops.add import add_kernel_args  # noqa: PLC0415
    from litecl.ops.add_quant import quant_add_cl_expr  # noqa: PLC0415

    dev = litecl.open_device(fast_device)
    for a, b in (("int8", "int8_fine_out"), ("uint8", "uint8_narrow")):
        pa, pb = _params(a), _params(b)
        assert add_kernel(pa.dtype, (333,), (333,), "RELU", dev.caps, pa) == add_kernel(
            pb.dtype, (333,), (333,), "RELU", dev.caps, pb)
        va = add_kernel_args(pa.dtype, (333,), (333,), "RELU", dev.caps, pa)
        vb = add_kernel_args(pb.dtype, (333,), (333,), "RELU", dev.caps, pb)
        assert [n for n, _ in va] == [n for n, _ in vb] and va != vb
        text, args = quant_add_cl_expr(pa, "x", "y", None, "i")
        assert not re.search(r"\d{4,}", text) and dict(args)["m1"] == pa.input1_multiplier
    # one Delegate, two models whose ADDs differ only in their constants: one program
    d = litecl.Delegate(fast_device, quiet=True)
    sources = []
    for name in ("int8", "int8_fine_out"):
        s = ((16 * 20 + 13,), (16 * 20 + 13,))
        it = make_interpreter(_model(name, *s), delegates=[d])
        got = _run(it, _inputs(name, *s, "random"))
        _assert_same(got, _litert(name, *s, "random", "builtin"), name, _inputs(name, *s, "random"))
        (p,) = d.partitions(owner=None)[-1:]
        sources.append(p.plan.launches[0].source)
        del it
    assert sources[0] == sources[1]
