"""ADD: numpy broadcasting index arithmetic, fused activations, and the kernel text.

Semantics follow tensorflow/lite/kernels/add.cc and reference_ops::Add:
- float32: ``a + b`` in float, then min(max(x, lo), hi) in std::max/std::min order
  (``x < lo ? lo : x``: a NaN passes through, unlike OpenCL's fmax).
- int32 / int64, and int16 without quantization parameters: two's-complement
  wrap-around (computed in unsigned, which C defines), then the activation clamp.
- int8 / uint8 / int16 (quantized): the fixed-point path in ``add_quant``, with the bits of
  the LiteRT kernels ``caps.reference`` names (builtin: some elements rounded as the
  optimized kernel's SIMD body rounds them, by position; ref: the reference kernel's).
- float16: see ``half_add_text``; semantics measured on LiteRT 2.3.0 (builtin and ref
  resolvers alike, one-op models from models/builders.add_model, 200,000 random half bit
  pattern pairs plus edge values, 800 random shape pairs of rank 1..8):
  the result is the float32 sum rounded once to half (round to nearest even; 0 mismatches
  on the random pairs), then clamped to the activation range, where NONE is [-65504, 65504]
  as float32's [-FLT_MAX, FLT_MAX] (65504 + 65504 = 65504, inf + 1 = 65504, -inf - 1 =
  -65504); RELU [0, 65504], RELU6 [0, 6], RELU_N1_TO_1 [-1, 1]; NaN passes every
  activation. Half subnormals are kept (6e-8 + 6e-8 = 0x0002) and -0.0 + -0.0 = -0.0
  (also under RELU). A NaN operand gives a NaN of its sign (payload dropped: 0x7e00 |
  sign); two NaN operands give the second operand's NaN, except when the second operand
  is broadcast along the innermost dimension (size 1 there, the first's > 1): then the
  first's (``half_nan_rule``; the same in every resolver, no SIMD-position dependence);
  inf + -inf gives 0xfe00 (x86's negative default NaN). Because float32 has 24 >= 2 * 11
  + 2 significand bits, the float32 sum rounded to half is the correctly rounded half sum,
  so native half arithmetic (cl_khr_fp16) and float arithmetic rounded once both give
  LiteRT's bits (measured on the Intel CPU runtime: native half sums keep subnormals
  although it reports CL_DEVICE_HALF_FP_CONFIG without CL_FP_DENORM).
Broadcasting follows numpy up to 8-D (LiteRT: the optimized kernels up to 6-D, its
generic path 7-D and 8-D; above 8 it aborts unless the shapes are equal or, for float32
and 8-bit types, fit its fivefold loop: backend/fallback.py ``_broadcast_abort``); index
arithmetic (ops/broadcast.py) is generated for the shapes known at allocate_tensors, with adjacent
dimensions merged when they broadcast alike.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .broadcast import broadcast_shape, collapse, fivefold, index_code
from .codegen import (NodeOp, capped_half_width, elementwise_kernel, float_literal, int_literal,
                      load_expr, op_kernel_args, op_args, op_preamble, scalar_store, storage_type,
                      tiled_kernel)
from .dtypes import dtype
from .fusion import FusedSpec, fused_kernel

__all__ = ["broadcast_shape", "collapse", "index_code", "activation_range", "add_kernel", "add_op",
           "PLAIN_ADD_TYPES", "QUANT_ADD_TYPES", "add_why_not", "half_nan_rule", "half_add_text"]

PLAIN_ADD_TYPES = ("float32", "float16", "int32", "int64")
QUANT_ADD_TYPES = ("int8", "uint8", "int16")
MAX_RANK = 8  # LiteRT 2.3.0 broadcasts up to 8-D (its generic path), aborts above
MAX_OPTIMIZED_RANK = 6  # the optimized kernels' broadcast loops go up to 6-D

#: Wrapping integer ADD: (unsigned, signed) OpenCL C types per type. int16 is here for an
#: ADD without quantization parameters, which LiteRT runs as plain wrapping arithmetic.
_WRAP_TYPES = {"int16": ("ushort", "short"), "int32": ("uint", "int"), "int64": ("ulong", "long")}


def activation_range(dt: str, activation: str):
    """(lo, hi) of a fused activation for a plain dtype; None where no clamp applies.

    tflite::CalculateActivationRange: NONE [lowest, max], RELU [0, max], RELU6 [0, 6],
    RELU_N1_TO_1 [-1, 1]. For integers lowest..max is a no-op; for float32 it clamps to
    +-FLT_MAX (float16: +-65504), so LiteRT's builtin ADD turns inf + 1 into FLT_MAX (65504)
    even with NONE (measured, models/LITERT_FACTS.md; XNNPACK keeps inf). Raises ValueError for other
    activations (TANH, SIGN_BIT, ...).
    """
    big = float(np.finfo(np.dtype(dt)).max) if dt in ("float32", "float16") else None
    if activation == "NONE":
        return None if big is None else (-big, big)
    if activation == "RELU":
        return (0, big)
    if activation == "RELU6":
        return (0, 6)
    if activation == "RELU_N1_TO_1":
        return (-1, 1)
    raise ValueError(f"fused activation {activation} not supported for ADD")


def add_why_not(dt: str, shapes, activation: str, caps) -> str | None:
    """Why ADD of dtype ``dt`` cannot be lowered (None when it can)."""
    if dt not in PLAIN_ADD_TYPES + QUANT_ADD_TYPES:
        return f"{dt} not supported"
    if dt == "int64" and not caps.int64:
        return "int64 needs 64-bit integers, which the device lacks"
    if activation not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        return f"fused activation {activation} not supported"
    if any(len(s) > MAX_RANK for s in shapes):
        if len({tuple(s) for s in shapes}) == 1 and all(int(d) >= 0 for d in shapes[0]):
            return None  # same static shape: one flat loop, which LiteRT runs at any rank
        return (f"broadcast above {MAX_RANK} dimensions (LiteRT aborts on it outside its "
                "optimized fivefold loop)")
    return None


def _lit(v, ctype: str) -> str:
    """A literal of ``ctype`` (int/uint/long/float/double/half; half: a converted float)."""
    if ctype == "half":
        return f"(half){float_literal(v, 'float')}"
    return float_literal(v, ctype) if ctype in ("float", "double") else int_literal(v, ctype)


def _clamp(x: str, lo, hi, ctype: str) -> str:
    """``x`` clamped as LiteRT's ActivationFunctionWithMinMax clamps (std::max then
    std::min: a NaN passes, -0.0 stays -0.0 at a bound of 0). Floats compare with
    ``isless``: Debian's arm64 PoCL 3.1 (LLVM 15) compiles ``v < 0.0f ? 0.0f : v`` to
    A64's FMAX, which gives +0.0 for -0.0 (measured under qemu; isless keeps it)."""
    lit = lambda v: _lit(v, ctype)  # noqa: E731
    less = (lambda a, b: f"isless({a}, {b})") if ctype in ("float", "half", "double") else (lambda a, b: f"{a} < {b}")
    if lo is not None:
        x = f"({less(x, lit(lo))} ? {lit(lo)} : {x})"
    if hi is not None:
        x = f"({less(lit(hi), x)} ? {lit(hi)} : {x})"
    return x


@dataclass(frozen=True)
class FloatAddRules:
    """The bits of LiteRT's float ADD that IEEE 754 leaves to the machine, on one
    architecture (measured with ai-edge-litert 2.3.0's builtin and ref kernels: x86-64
    natively, aarch64 under qemu, ../shared/docs/ARM64.md; tests/test_add.py checks them
    against LiteRT on the host, tests/test_arm64.py in the arm64 userland). Where LiteRT's
    kernels walk the output is ``add_path``'s; what the machine does there is this row's.

    default_nan: {dtype: bits} of inf + -inf (the FPU's default NaN: x86 SSE's is negative,
        A64's positive, ARM ARM FPDefaultNaN).
    simd_nan / broadcast_nan / half_nan: whose NaN two NaN operands give, "first" (the
        operand LiteRT's code adds first: ``AddPath.first``) or "other": in a SIMD body
        (optimized_ops' AddElementwise / BinaryBroadcastFiveFold inner runs, and the
        auto-vectorised loops of reference_ops), where one operand is a broadcast single
        value (AddScalarBroadcast, and innermost-dimension broadcasts), and in the float16
        kernel. The scalar remainder of a run takes "first" on both architectures. A64 FADD
        returns its first operand's NaN (FPProcessNaNs); on x86 SSE's addps/addss return
        their destination's, where the compiler put LiteRT's other operand.
    neon_relu_zero: in optimized_ops' explicit SIMD bodies (``AddPath.neon``) the RELU/RELU6
        lower clamp is vmaxq_f32, and A64 FMAX(-0.0, +0.0) is +0.0 (ARM ARM FPMax); x86's
        NEON_2_SSE emulation and every scalar std::max keep -0.0.
    """

    arch: str
    default_nan: dict
    simd_nan: str
    broadcast_nan: str
    half_nan: str
    neon_relu_zero: bool


#: One row per architecture LiteRT runs on (``platform.machine()`` names, normalised by
#: ``arch_of``). Rules that differ by architecture live here and only here.
FLOAT_ADD_RULES = {
    "x86_64": FloatAddRules("x86_64", {"float32": 0xFFC00000, "float16": 0xFE00}, simd_nan="other",
                            broadcast_nan="other", half_nan="other", neon_relu_zero=False),
    "aarch64": FloatAddRules("aarch64", {"float32": 0x7FC00000, "float16": 0x7E00}, simd_nan="first",
                             broadcast_nan="first", half_nan="first", neon_relu_zero=True),
}
_ARCH_NAMES = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def arch_of(machine: str) -> str:
    """The FLOAT_ADD_RULES row name of ``machine`` (platform.machine(): x86_64, AMD64,
    aarch64, arm64). Raises ValueError for an architecture litecl has no row for."""
    arch = _ARCH_NAMES.get(machine.strip().lower())
    if arch is None:
        raise ValueError(f"no float ADD rules for architecture {machine!r}: litecl measured LiteRT "
                         f"on {', '.join(FLOAT_ADD_RULES)}")
    return arch


def host_arch() -> str:
    """This process's architecture: the one the LiteRT it loads computes on."""
    import platform  # noqa: PLC0415

    return arch_of(platform.machine())


def arch_define(arch: str) -> str:
    """The preprocessor name a program is built with (``-DLITECL_ARCH_X86_64``) to select
    ``arch``'s text in an ``arch_source`` program."""
    return f"LITECL_ARCH_{arch.upper()}"


def arch_source(texts: dict) -> str:
    """One program text for the architectures of ``texts`` ({arch: OpenCL C}): the text
    where all agree, else each under ``#if defined(LITECL_ARCH_<ARCH>)`` (the native
    delegate builds with the -D option of the architecture it is compiled for, which is
    LiteRT's: litecl_delegate.c LCL_ARCH_OPTION), and an #error for any other."""
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    parts = [f"#{'if' if i == 0 else 'elif'} defined({arch_define(a)})\n{t}" for i, (a, t) in enumerate(texts.items())]
    return "\n".join([*parts, "#else\n#error \"litecl: build with -DLITECL_ARCH_<ARCH>, the architecture "
                                "LiteRT runs on\"\n#endif\n"])


def rules_for(caps) -> FloatAddRules:
    """The row of ``caps.arch`` (the architecture LiteRT runs on; the host's where unset)."""
    return FLOAT_ADD_RULES[getattr(caps, "arch", "") or host_arch()]


class AddPath(NamedTuple):
    """How LiteRT's float32 ADD kernel walks the output for two input shapes: what the
    bits IEEE 754 leaves open depend on, with FloatAddRules' row.

    kind: "simd" (runs of ``run`` elements, a SIMD body over the first run - run % block,
    then a scalar remainder), "broadcast" (one operand a single value over runs of
    ``run``; its NaN choice is the same at every position), or "scalar".
    first: the operand LiteRT's code adds first ("a" or "b").
    neon: the body is optimized_ops' explicit vector code (its clamp is vmaxq/vminq), not
    a loop the compiler vectorised."""

    kind: str
    first: str
    run: int = 1
    block: int = 1
    neon: bool = False


def add_path(shape1, shape2, reference: str = "builtin") -> AddPath:
    """The AddPath of a float32 ADD of ``shape1`` + ``shape2`` under LiteRT's
    ``reference`` kernels (the same on every architecture; measured with ai-edge-litert 2.x).

    builtin (optimized_ops): same shapes run as one flat elementwise loop (first a, block
    4); a broadcast that tflite::ProcessBroadcastShapes fits in its fivefold loop runs the
    innermost run of equal dims (y4) elementwise with the fast-broadcasting operand first,
    or, with y4 == 1, broadcasts that operand as a single value over runs of y3; other
    broadcasts up to 8-D run reference_ops' loop (its trailing dimensions both operands
    share vectorised 8 wide, the first operand first), with a broadcast innermost dimension
    a single-value broadcast of that operand. ``ref`` (reference_ops) vectorises the
    trailing dimensions both operands share with an 8-wide body (same shapes: the flat
    tensor). Checked against LiteRT on random shape pairs of rank 1..8 (tests/test_add.py;
    session 25: 1,600 pairs at 5-D and 6-D, where a loop over the innermost dimension
    alone was wrong on 4.7%)."""
    r = max(len(shape1), len(shape2), 1)
    e1 = (1,) * (r - len(shape1)) + tuple(int(d) for d in shape1)
    e2 = (1,) * (r - len(shape2)) + tuple(int(d) for d in shape2)
    if 0 in e1 or 0 in e2:
        return AddPath("scalar", "a")  # no elements: nothing to choose
    if e1 == e2:
        return AddPath("simd", "a", int(math.prod(e1)), 8 if reference == "ref" else 4, reference != "ref")
    if reference == "ref":
        return _last_dim_path(e1, e2, 8)
    five = fivefold(e1, e2)
    if five is not None:  # the fivefold loop
        fast, y = five
        if y[4] > 1:
            return AddPath("simd", fast, y[4], 4, True)
        return AddPath("broadcast", fast, y[3], 4, True)
    if r > MAX_OPTIMIZED_RANK:  # 7-D and 8-D: the generic path, reference_ops' loop
        return _last_dim_path(e1, e2, 8)
    if e1[-1] != e2[-1]:
        return AddPath("broadcast", "a" if e1[-1] == 1 else "b")
    # reference_ops' loop up to 6-D, as at 7-D and 8-D ([2, 3, 4, 9] + [1, 3, 1, 9]: the
    # first 8 of each run of 9 take the other operand's NaN on x86-64; [3, 5, 4, 8, 1, 2] +
    # [1, 5, 1, 8, 1, 2]: runs of 16 across the shared 1; fresh users' reports)
    return _last_dim_path(e1, e2, 8)


def _last_dim_path(e1, e2, block: int) -> AddPath:
    """The innermost loop: over the trailing dimensions both operands share (merged),
    vectorised, the first operand first; when the innermost dimension is broadcast in one
    operand, a single-value broadcast of it."""
    if e1[-1] != e2[-1]:
        return AddPath("broadcast", "a" if e1[-1] == 1 else "b")
    run, i = 1, len(e1) - 1
    while i >= 0 and e1[i] == e2[i]:
        run *= e1[i]
        i -= 1
    return AddPath("simd", "a", run, block)


def _other(x: str) -> str:
    return "b" if x == "a" else "a"


def nan_rule(shape1, shape2, reference: str = "builtin", rules: FloatAddRules | None = None):
    """Which operand's NaN a float32 ADD returns when both are NaN, as LiteRT does it on
    ``rules``' architecture (default: this host's): "a", "b", or ("pos", L, x, block): in
    each run of L output elements, the first L - L % block (the SIMD body) take the
    operand other than x, the rest (the scalar remainder) take x."""
    rules = rules or FLOAT_ADD_RULES[host_arch()]
    p = add_path(shape1, shape2, reference)
    if p.kind == "scalar":
        return p.first
    if p.kind == "broadcast":
        return p.first if rules.broadcast_nan == "first" else _other(p.first)
    if rules.simd_nan == "first":
        return p.first
    return ("pos", p.run, p.first, p.block)


def zero_rule(shape1, shape2, reference: str, activation: str, rules: FloatAddRules):
    """Where a float32 ADD under RELU/RELU6 turns -0.0 into +0.0 (FloatAddRules
    neon_relu_zero: A64's FMAX in optimized_ops' SIMD bodies): (L, block), the first
    L - L % block elements of each run of L; None where -0.0 stays."""
    if not rules.neon_relu_zero or activation not in ("RELU", "RELU6"):
        return None
    p = add_path(shape1, shape2, reference)
    return (p.run, p.block) if p.neon else None


def half_nan_rule(shape1, shape2, rules: FloatAddRules | None = None) -> str:
    """Whose NaN a float16 ADD of two NaNs returns in LiteRT 2.3.0 ("a" or "b"), at every
    position, on ``rules``' architecture (default: this host's). The kernel adds the
    first operand first unless the second is broadcast along the innermost dimension
    (size 1 there while the first operand's is larger); x86 then gives the other's NaN,
    aarch64 that one's. Measured on 800 random shape pairs of rank 1..8, builtin and ref
    resolvers (tests/test_add.py test_half_nan_rule_predicts_litert)."""
    rules = rules or FLOAT_ADD_RULES[host_arch()]
    r = max(len(shape1), len(shape2), 1)
    e1 = (1,) * (r - len(shape1)) + tuple(int(d) for d in shape1)
    e2 = (1,) * (r - len(shape2)) + tuple(int(d) for d in shape2)
    first = "b" if e2[-1] == 1 and e1[-1] > 1 else "a"
    return first if rules.half_nan == "first" else _other(first)


def _half_types(caps) -> tuple[str, str, str]:
    """(value type, its bits' type, the default NaN's bits) of float16 ADD arithmetic:
    native half with cl_khr_fp16, else float (the sum rounded once at the store, which
    keeps the default NaN's sign: FloatAddRules.default_nan)."""
    nan = rules_for(caps).default_nan
    return ("half", "ushort", f"{nan['float16']:#06x}") if caps.fp16 else ("float", "uint", f"{nan['float32']:#010x}u")


def half_add_text(activation: str, caps, fn: str, rule: str, w: int = 0) -> str:
    """float16 ADD (see the module docstring) as ``fn``: scalar (w == 0) or on ``w``-wide
    vectors. Inputs as load_expr / vcomponent give them (half with cl_khr_fp16, else float
    from vload_half, exact); returns the stored component (half, or float that the store
    rounds to nearest even: clamping before that rounding gives the same half, as the
    bounds are halves and rounding is monotonic). NaN results are chosen on bits (a NaN
    operand by ``rule``, inf + -inf the negative default NaN), so no device's NaN
    canonicalization changes their signs."""
    t, u, dnan = _half_types(caps)
    lo, hi = activation_range("float16", activation)
    first, second = ("y", "x") if rule == "b" else ("x", "y")  # the NaN that wins is tested first
    if not w:
        c = _clamp("v", lo, hi, t)
        return (f"{t} {fn}(const {t} x, const {t} y)\n{{\n"
                f"    const {t} v = x + y;\n"
                f"    const {t} c = {c};\n"
                f"    return as_{t}(({u})(isnan({first}) ? as_{u}({first}) : isnan({second}) ? as_{u}({second})\n"
                f"                  : isnan(v) ? ({u}){dnan} : as_{u}(c)));\n}}\n")  # ushort ?: is int
    tv, uv = f"{t}{w}", f"{u}{w}"
    lo_v, hi_v = f"({tv})({_lit(lo, t)})", f"({tv})({_lit(hi, t)})"
    return (f"{tv} {fn}(const {tv} x, const {tv} y)\n{{\n"
            f"    {tv} v = x + y;\n"
            f"    const {uv} nan_v = as_{uv}(isnan(v));\n"  # isnan: intN for float, shortN for half
            f"    v = select(v, {lo_v}, isless(v, {lo_v}));\n"  # isless: _clamp
            f"    v = select(v, {hi_v}, isless({hi_v}, v));\n"
            f"    {uv} r = select(as_{uv}(v), ({uv})({dnan}), nan_v);\n"
            f"    r = select(r, as_{uv}({second}), as_{uv}(isnan({second})));\n"
            f"    r = select(r, as_{uv}({first}), as_{uv}(isnan({first})));\n"
            f"    return as_{tv}(r);\n}}\n")


#: float32's quiet bit: LiteRT's add returns a NaN operand quieted (x86-64 and aarch64 set it
#: on a signalling one: 0x7f800001 + 1 is 0x7fc00001), litecl its bits chosen in integers
_QUIET = "0x00400000u"


def _both_nan(rule, flat: int = 0) -> str:
    """The scalar condition "y is NaN and the rule takes y's NaN", without a constant
    operand when the rule is fixed (NVIDIA's compiler warns on ``&& 0``)."""
    pick = _nan_pick(rule, "i", 0, flat)
    return {"0": "0", "1": "isnan(y)"}.get(pick, f"(isnan(y) && {pick})")


def _nan_pick(rule, i: str, w: int = 0, flat: int = 0) -> str:
    """The prefer-b flag of ``nan_rule`` for element index ``i`` (int 0/1, or an intN
    mask for a vector of indices); ``flat``: _in_body's."""
    if rule in ("a", "b"):
        if w:
            return f"(int{w})({-1 if rule == 'b' else 0})"
        return "1" if rule == "b" else "0"
    _, n, x, block = rule
    op = "<" if x == "a" else ">="  # the body (i % L < L - L % block) takes the operand other than x
    return _in_body(i, n, block, w, op, flat)


def _in_body(i: str, n: int, block: int, w: int = 0, op: str = "<", flat: int = 0) -> str:
    """Element ``i`` (a uint, or a uintN of indices) lies in the SIMD body of its run of
    ``n``: i % n < n - n % block (``op`` ">=": in the scalar remainder). ``flat`` n: the
    run is the whole output (same shapes: i < n), so the body's end is computed from the
    launch's element count (_COUNT, the tiling's n) and the text is the same at every
    length: one program for a service's many lengths, and an exported kernel that holds
    at any element count. Otherwise, where the body covers every run (n % block == 0) or
    none (n < block), the answer is a constant, so no kernel divides by n per element
    (1/-1 true, 0 false)."""
    u = f"uint{w if w else ''}"
    if flat and flat == n:
        return f"({i} {op} ({u})({_COUNT} - {_COUNT} % {block}u))"
    body = n - n % block
    if body in (0, n):
        true = (body == n) == (op == "<")
        return (f"(int{w})({-1 if true else 0})" if w else "1" if true else "0")
    if w:
        return f"(({i} % ({u})({n}u)) {op} ({u})({n - n % block}u))"
    return f"(({i} % {n}u) {op} {n - n % block}u)"


#: the uint parameter of an ADD whose NaN, signed-zero or rounding rule splits the whole
#: output at the SIMD body's end (_in_body's ``flat``): the launch's element count
#: (codegen.NodeOp.wants_count), from which the function computes that end
_COUNT = "count"


def _flat(shapes, rule, zero) -> int:
    """The output's size where a float32 ADD's position rule (nan_rule's ("pos", ...),
    zero_rule's) runs over the whole output (same shapes), else 0: the kernel then reads
    the body's end from the element count (_in_body)."""
    n = numel(broadcast_shape(shapes[0], shapes[1]))
    runs = ([(rule[1], rule[3])] if rule not in ("a", "b") else []) + ([tuple(zero)] if zero else [])
    split = [(L, b) for L, b in runs if L == n]
    assert len({b for _, b in split}) <= 1, split  # one body end: nan and zero rules share the block
    return n if split else 0


def add_op(dt: str, activation: str, caps, quant=None, fn: str = "litecl_add_op",
           shapes=None) -> NodeOp:
    """ADD as a NodeOp: ``fn(x, y)`` over two elements as ``load_expr`` gives them,
    returning the stored output element. float32 with ``shapes`` (the two input shapes)
    takes the element index too (``fn(x, y, i)``): NaN operands pass through with their
    sign (one NaN: it; two: ``nan_rule``'s choice), inf + -inf gives the default NaN, and
    RELU/RELU6 of -0.0 the signed zero (``zero_rule``), of the architecture ``caps.arch``
    names (FloatAddRules: LiteRT's bits differ between x86-64 and aarch64); any device
    (NVIDIA returns a canonical NaN otherwise) then gives the same bits. A quantized ADD follows the LiteRT
    kernels ``caps.reference`` names (add_quant.quant_add_simd_rule: under "builtin" some
    elements take the optimized kernel's SIMD rounding, chosen by position, and then ``fn``
    takes the index too). Raises ValueError for an unsupported dtype, a quantized type
    without ``quant`` (add_quant.QuantAddParams), or a general quantized ADD without
    ``shapes`` under a reference other than "ref"."""
    d = dtype(dt)
    st = storage_type(d, caps)
    if dt in ("float32", "float16") and shapes is None:
        raise ValueError(f"{dt} ADD needs the input shapes: LiteRT's NaN and signed-zero bits depend "
                         "on where its kernel walks them (add_path)")
    if dt == "float32":
        rules, reference = rules_for(caps), getattr(caps, "reference", "builtin")
        rule = nan_rule(shapes[0], shapes[1], reference, rules)
        zero = zero_rule(shapes[0], shapes[1], reference, activation, rules)
        val = _clamp("v", *(activation_range(dt, activation) or (None, None)), "float")
        flat = _flat(shapes, rule, zero)
        # the NaN cases choose bits in integers: NVIDIA canonicalizes NaNs in float
        # selects folded into min/max
        body = _in_body("i", *zero, 0, "<", flat) if zero else "0"
        cbits = "as_uint(c)" if body == "0" else f"(c == 0.0f && {body} ? 0u : as_uint(c))"
        param = f", const uint {_COUNT}" if flat else ""
        text = (f"float {fn}(const float x, const float y, const uint i{param})\n{{\n"
                "    const float v = x + y;\n"
                f"    const float c = {val};\n"
                f"    return as_float(isnan(x) ? ({_both_nan(rule, flat)} ? as_uint(y) : as_uint(x)) | {_QUIET}\n"
                f"                    : isnan(y) ? as_uint(y) | {_QUIET} : isnan(v) ? {rules.default_nan['float32']:#010x}u"
                f" : {cbits});\n}}\n")
        vec = (lambda w: add_vector_fn(dt, activation, caps, f"{fn}_v{w}", w, (rule, zero, flat)))
        return NodeOp(fn, text, (d, d), d, d.middle, (), False, vec=vec, wants_index=True,
                      wants_count=bool(flat))
    if dt == "float16":
        rule = half_nan_rule(*shapes, rules_for(caps))
        return NodeOp(fn, half_add_text(activation, caps, fn, rule), (d, d), d, _half_types(caps)[0],
                      half=caps.fp16, vec=lambda w: half_add_text(activation, caps, f"{fn}_v{w}", rule, w))
    if dt in ("int32", "int64") or (dt == "int16" and quant is None):
        ut, ct = _WRAP_TYPES[dt]
        val = _clamp("v", *(activation_range(dt, activation) or (None, None)), ct)
        text = (f"{ct} {fn}(const {ct} x, const {ct} y)\n{{\n"
                f"    const {ct} v = as_{ct}(({ut})(({ut})x + ({ut})y));\n    return {val};\n}}\n")
    elif dt in QUANT_ADD_TYPES:
        from .add_quant import quant_add_cl_expr, quant_add_simd_rule  # noqa: PLC0415

        if quant is None:
            raise ValueError(f"quantized ADD {dt} needs quantization parameters")
        reference = getattr(caps, "reference", "builtin")
        if shapes is None and reference != "ref" and quant.path == "general":
            raise ValueError(f"quantized ADD {dt} needs the input shapes: LiteRT's builtin "
                             "kernel rounds some elements by their position")
        # the elements LiteRT's builtin kernel computes in its SIMD body (add_quant)
        rule = quant_add_simd_rule(quant, *shapes, reference, flat=True) if shapes is not None else None
        # one run over the whole output (same shapes): its SIMD body's end is computed from
        # the element count (_in_body's flat), the text the same at every length
        flat = rule is not None and rule.run == numel(broadcast_shape(*shapes))
        index = rule is not None and (flat or not rule.everywhere)
        # the constants, as int arguments: equal ADDs share a program
        expr, args = quant_add_cl_expr(quant, 'qa', 'qb', rule, 'i', flat=flat)
        params = (f", const uint {_COUNT}" if flat else "") + "".join(f", const int {n}" for n, _ in args)
        text = (f"LITECL_INLINE {st} {fn}(const int qa, const int qb{', const uint i' if index else ''}{params})\n{{\n"
                f"    return ({st})({expr});\n}}\n")

        def vec(w: int) -> str:  # the same on w-wide vectors (add_quant.quant_add_cl_vector_functions)
            from .add_quant import quant_add_cl_vector_functions  # noqa: PLC0415

            vexpr, _ = quant_add_cl_expr(quant, 'qa', 'qb', rule, 'i', w, flat=flat)
            return (quant_add_cl_vector_functions(w, caps.int64)
                    + f"LITECL_INLINE {st}{w} {fn}_v{w}(const int{w} qa, const int{w} qb"
                    f"{f', const uint{w} i' if index else ''}{params})\n{{\n"
                    f"    return convert_{st}{w}({vexpr});\n}}\n")
        return NodeOp(fn, text, (d, d), d, d.middle, (), True, vec=vec, wants_index=index, wants_count=flat,
                      args=args)
    else:
        raise ValueError(f"ADD of {dt} not supported")
    vec = lambda w: add_vector_fn(dt, activation, caps, f"{fn}_v{w}", w)  # noqa: E731
    return NodeOp(fn, text, (d, d), d, d.middle, (), False, vec=vec)


def add_vector_fn(dt: str, activation: str, caps, fn: str, w: int, rules=None) -> str:
    """The plain (not quantized) ADD on ``w``-wide vectors: the values add_op's scalar
    function gives, per component. Inputs as loaded (int for int16), result in the storage
    type. The activation clamp is two selects with the scalar's comparisons, so NaN passes
    through as it does there (and in LiteRT's ActivationFunctionWithMinMax)."""
    lo, hi = activation_range(dt, activation) or (None, None)
    if dt == "float32":
        ct, body = "float", f"    {'float'}{w} v = x + y;\n"
        lit = lambda v: float_literal(v, "float")  # noqa: E731
        args = f"const float{w} x, const float{w} y"
        if rules is not None:  # NaN signs and zeros as the scalar form (add_op), after the clamp
            args += f", const uint{w} i" + (f", const uint {_COUNT}" if rules[2] else "")
    else:
        ut, ct = _WRAP_TYPES[dt]
        lt = dtype(dt).middle  # what a load gives (int for int16)
        body = f"    {ct}{w} v = as_{ct}{w}(convert_{ut}{w}(x) + convert_{ut}{w}(y));\n"
        lit = lambda v: int_literal(v, ct)  # noqa: E731
        args = f"const {lt}{w} x, const {lt}{w} y"
    less = (lambda a, b: f"isless({a}, {b})") if dt == "float32" else (lambda a, b: f"{a} < {b}")  # _clamp
    if lo is not None:
        body += f"    v = select(v, ({ct}{w})({lit(lo)}), {less('v', f'({ct}{w})({lit(lo)})')});\n"
    if hi is not None:
        body += f"    v = select(v, ({ct}{w})({lit(hi)}), {less(f'({ct}{w})({lit(hi)})', 'v')});\n"
    if dt == "float32" and rules is not None:
        u = f"uint{w}"
        rule, zero, flat = rules
        dnan = rules_for(caps).default_nan["float32"]
        if zero:  # -0.0 in the body becomes +0.0 (zero_rule)
            body += f"    v = select(v, ({ct}{w})(0.0f), (v == ({ct}{w})(0.0f)) & {_in_body('i', *zero, w, '<', flat)});\n"
        body += (f"    const int{w} nx = isnan(x), ny = isnan(y), ns = isnan(x + y);\n"
                 f"    {u} r = select(as_{u}(v), ({u})({dnan:#010x}u), ns);\n"
                 f"    r = select(r, as_{u}(y) | {_QUIET}, ny);\n"
                 f"    r = select(r, as_{u}(x) | {_QUIET}, nx & ~(ny & {_nan_pick(rule, 'i', w, flat)}));\n"
                 f"    return as_float{w}(r);\n}}\n")
        return f"{ct}{w} {fn}({args})\n{{\n{body}"
    return f"{ct}{w} {fn}({args})\n{{\n{body}    return v;\n}}\n"


def add_kernel(dt: str, shape1, shape2, activation: str, caps, quant=None,
               name: str = "litecl_add", vec_bytes: int | None = None,
               skeleton: str = "tiled") -> str:
    """OpenCL C of a tiled ADD ``name(a, b, out, n, former_num, ...)``.

    dt: "float32" | "float16" | "int32" | "int64" | "int8" | "uint8" | "int16"; shape1/shape2: input
    shapes (broadcast like numpy); quant: add_quant.QuantAddParams for
    quantized types (None with int16: plain wrapping arithmetic, as LiteRT runs an int16 ADD
    without quantization parameters).
    The per-element arithmetic is one function ``name_op(a, b)``; same-shape ADD loads
    ``vector_width`` elements at a time (vec_bytes defaults to the device type's LAUNCH
    row), broadcasting ADD is fusion.fused_kernel's (rows of the innermost dimension as
    vectors; with ``vec_bytes`` given, element by element). skeleton: see elementwise_kernel.
    Raises ValueError for shapes that do not broadcast or an unsupported dtype.
    """
    from .tiling import launch_config, vector_width  # noqa: PLC0415

    d = dtype(dt)
    out_shape = broadcast_shape(shape1, shape2)
    pre_idx, (ia, ib) = index_code(out_shape, [shape1, shape2])
    st = storage_type(d, caps)
    op = add_op(dt, activation, caps, quant, f"{name}_op", (tuple(shape1), tuple(shape2)))
    fn = op.fn
    pre = op_preamble([op], caps) + "\n"
    if ia == "i" and ib == "i":  # same shape: vector loads
        vb = vec_bytes if vec_bytes is not None else launch_config(caps).vec_bytes
        w = vector_width((d.itemsize,), vb)
        if dt == "float16" and vec_bytes is None and capped_half_width(caps, True, True):
            w = min(w, launch_config(caps).half_width)
        vtext = op.vec(w) if (op.vec and w > 1 and skeleton == "tiled") else None
        if vtext:
            pre += vtext + "\n"
        return elementwise_kernel(name, [("a", d), ("b", d)], ("out", d), fn, op.out_vtype, caps,
                                  pre, w, skeleton, op.vfn(w) if vtext else None,
                                  index_arg=op.wants_index, args=tuple(op_args(op)), count_arg=op.wants_count)
    if skeleton == "tiled" and vec_bytes is None:
        # a broadcast: the fused kernel generator splats a single element across vectors
        # (x + scalar constant, a common pattern) and reads rows as vectors (fusion._row_width)
        spec = FusedSpec(tuple(out_shape), ((d, tuple(shape1)), (d, tuple(shape2))),
                         ((op, (("in", 0), ("in", 1))),), ((0, d),))
        return fused_kernel(spec, caps, name)
    idx_arg = ", i" if op.wants_index else ""
    idx_arg += (", n" if op.wants_count else "") + "".join(f", {a}" for a in op_args(op))
    body = scalar_store(d, caps, "out", "i",
                        f"{fn}({load_expr(d, caps, 'a', ia)}, {load_expr(d, caps, 'b', ib)}{idx_arg})",
                        op.out_vtype)
    if pre_idx:
        body = pre_idx + "\n" + body
    params = [f"__global const {st}* restrict a", f"__global const {st}* restrict b",
              f"__global {st}* restrict out"]
    return tiled_kernel(name, params, body, pre, int_args=op_args(op))


def add_kernel_args(dt: str, shape1, shape2, activation: str, caps, quant=None,
                    name: str = "litecl_add") -> tuple:
    """((parameter name, int32 value), ...) that ``add_kernel``'s kernel of the same
    arguments takes after the tiling's four (a quantized ADD's constants,
    codegen.NodeOp.args; () otherwise)."""
    return op_kernel_args([add_op(dt, activation, caps, quant, f"{name}_op", (tuple(shape1), tuple(shape2)))])


def numel(shape) -> int:
    return int(math.prod(shape)) if len(shape) else 1
