"""Checks run inside the arm64 userland (.ci/arm64-userland run python tests/arch_checks.py
WHAT), against arm64 LiteRT alone; tests/test_arm64.py drives them from the host. Each
prints one JSON line: {"checked": N, "bad": [...], ...}.

- ``rules``: ops/add.py's row of this architecture (FloatAddRules: nan_rule, half_nan_rule, zero_rule,
  the default NaN) against LiteRT's own float ADD on random shape pairs of rank 1..8 and
  edge pairs at tails 1-9 past each SIMD block, both operand orders, every activation,
  builtin and ref kernels (no OpenCL device).
- ``kernels``: litecl's generated kernels for every CAST pair and the ADD matrix (edge
  values of both NaN signs, both operand orders, broadcast and not, every activation,
  tails past each SIMD block), planned as the delegate plans them (kernels.plan_partition
  on the device's caps) and launched with the plan's former/tail geometry, on the arm64
  OpenCL device. PoCL compiles one program in 2-10 s under qemu, so the kernels are
  batched into a few programs (each kernel's identifiers renamed apart).
- ``models``: the shared models and edge-value ADD models through ``litecl.Interpreter``
  (the delegate itself), against LiteRT alone.
- ``native DIR...``: each DIR an export cross-built on the host (liblitecl_delegate.so for
  aarch64, delegate_options.json and a ``model`` file naming the model), loaded into arm64
  LiteRT with ``load_delegate``, against LiteRT alone.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from litecl.compare import make_interpreter, mismatches  # noqa: E402
from models.builders import add_model, cast_model  # noqa: E402

ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
QUANT = {"int8": ((0.05, 3), (0.07, -9), (0.11, 1)), "uint8": ((0.40149, 136), (0.27583, 119), (0.43217, 133)),
         "int16": ((2.96e-4, 0), (1.39e-4, 0), (3.83e-4, 0))}
#: same-shape lengths: 1-9 past the SIMD blocks of LiteRT's kernels (4: float32 builtin;
#: 8: float32 ref, uint8; 16: int8, int16 quantized)
LENGTHS = (1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 19, 24, 25, 33, 41)
#: broadcasts both ways: a single value, the innermost dimension, the fivefold loop's runs,
#: the slow 4-D path, 5-D to 8-D
BROADCASTS = [((1,), (17,)), ((), (9,)), ((4, 17), (17,)), ((4, 1), (4, 17)), ((3, 1, 5), (1, 4, 5)),
              ((9, 5), (9, 1)), ((5, 1, 7), (5, 3, 7)), ((2, 3, 4, 9), (2, 1, 4, 1)),
              ((2, 1, 3, 1, 9), (1, 2, 1, 4, 9)), ((2, 1, 2, 1, 2, 9), (1, 2, 1, 2, 1, 9)),
              ((2, 1, 1, 1, 1, 1, 9), (1, 2, 1, 1, 1, 1, 9)), ((2, 1, 2, 1, 2, 1, 2, 3), (1, 2, 1, 2, 1, 2, 1, 1))]
BROADCASTS += [(b, a) for a, b in BROADCASTS]
F32_BITS = [0x7FC00000, 0xFFC00000, 0x7FC00123, 0xFFC00456, 0x7F800000, 0xFF800000, 0, 0x80000000,
            0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF, 1, 0x80000001, 0x40E00000, 0x40C00000]
F16_BITS = [0x7E00, 0xFE00, 0x7E12, 0xFE34, 0x7C00, 0xFC00, 0, 0x8000, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
            1, 0x8001, 0x4700, 0x4600]


def _litert(m: bytes, ins: list, reference: str) -> np.ndarray:
    it = make_interpreter(m, reference=reference)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), ins):
        it.set_tensor(d["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _float_inputs(dt: str, s1, s2, seed: int) -> list:
    """Operand sets for a float ADD: every position NaN+ with NaN-, both ways; -0 + -0;
    inf + -inf; then seeded mixes of the edge bit patterns."""
    np_t, u_t, bits = ((np.float32, np.uint32, F32_BITS) if dt == "float32" else (np.float16, np.uint16, F16_BITS))
    full = lambda s, b: np.full(s, b, u_t).view(np_t)  # noqa: E731
    sets = [[full(s1, bits[0]), full(s2, bits[1])], [full(s1, bits[1]), full(s2, bits[0])],
            [full(s1, bits[7]), full(s2, bits[7])], [full(s1, bits[4]), full(s2, bits[5])]]
    rng = np.random.default_rng(seed)
    for _ in range(2):
        sets.append([np.array(rng.choice(bits, math.prod(s) or 0), u_t).reshape(s).view(np_t) for s in (s1, s2)])
    return sets


def check_rules() -> dict:
    from litecl.ops.add import FLOAT_ADD_RULES, half_nan_rule, host_arch, nan_rule, zero_rule

    row = FLOAT_ADD_RULES[host_arch()]
    bad, n = [], 0
    rng = np.random.default_rng(3)
    pairs = [((k,), (k,)) for k in LENGTHS] + BROADCASTS
    while len(pairs) < 400:
        r = int(rng.integers(1, 9))
        o = [int(rng.choice([1, 2, 3, 4, 5, 7, 9])) for _ in range(r)]
        s1 = tuple(d if rng.random() < 0.6 else 1 for d in o)
        s2 = tuple(d if rng.random() < 0.6 else 1 for d in o)
        if math.prod(np.broadcast_shapes(s1, s2)) <= 3000:
            pairs.append((s1, s2))
    for dt, np_t, u_t, sign in (("float32", np.float32, np.uint32, 31), ("float16", np.float16, np.uint16, 15)):
        for k, (s1, s2) in enumerate(pairs):
            for act in (ACTS if k < len(LENGTHS) + len(BROADCASTS) else ("NONE",)):
                m = add_model(dt, list(s1), list(s2), activation=act)
                for ref in ("builtin", "ref"):
                    n += 1
                    nb = int(math.prod(np.broadcast_shapes(s1, s2)))
                    got = _litert(m, [np.full(s1, 0xFFC00000 if dt == "float32" else 0xFE00, u_t).view(np_t),
                                      np.full(s2, 0x7FC00000 if dt == "float32" else 0x7E00, u_t).view(np_t)], ref)
                    who = np.where((got.view(u_t).ravel() >> sign) & 1, "a", "b")
                    if dt == "float32":
                        rule = nan_rule(s1, s2, ref, row)
                        i = np.arange(nb)
                        want = (np.full(nb, rule) if rule in ("a", "b") else
                                np.where(i % rule[1] < rule[1] - rule[1] % rule[3], "b" if rule[2] == "a" else "a", rule[2]))
                    else:
                        want = np.full(nb, half_nan_rule(s1, s2, row))
                    if (who != want).any():
                        bad.append(["nan", dt, ref, act, s1, s2, "".join(who[:40]), "".join(want[:40])])
                    if act in ("RELU", "RELU6"):  # -0 + -0: where it turns +0
                        zb = 1 << sign
                        got = _litert(m, [np.full(s1, zb, u_t).view(np_t), np.full(s2, zb, u_t).view(np_t)], ref)
                        plus = ~np.signbit(got).ravel()
                        zr = zero_rule(s1, s2, ref, act, row) if dt == "float32" else None
                        i = np.arange(nb)
                        wplus = (i % zr[0] < zr[0] - zr[0] % zr[1]) if zr else np.zeros(nb, bool)
                        if (plus != wplus).any():
                            bad.append(["zero", dt, ref, act, s1, s2, plus.astype(int).tolist()[:40]])
                    if k < len(LENGTHS):  # inf + -inf: the default NaN, bits and all
                        inf = 0x7F800000 if dt == "float32" else 0x7C00
                        got = _litert(m, [np.full(s1, inf, u_t).view(np_t), np.full(s2, inf | (1 << sign), u_t).view(np_t)], ref)
                        if set(got.view(u_t).ravel().tolist()) != {row.default_nan[dt]}:
                            bad.append(["default NaN", dt, ref, act, s1, s2, sorted(set(got.view(u_t).ravel().tolist()))])
    return {"checked": n, "bad": bad[:20], "n_bad": len(bad)}


# ---------------------------------------------------------------------------- kernels
def _add_cases():
    """(dt, s1, s2, act, reference) of the ADD matrix: float32 (whose NaN and signed-zero
    bits differ by architecture) at every length and broadcast, activation and reference;
    the others at fewer (their bits are the same on both: ../shared/docs/ARM64.md)."""
    out = []
    for dt in ("float32", "float16", "int32", "int64", "int8", "uint8", "int16"):
        quant = dt in QUANT
        lengths = LENGTHS if dt == "float32" else (1, 9, 16, 17, 25, 33) if quant else (1, 5, 9, 17)
        acts = ACTS if dt == "float32" else ("NONE", "RELU") if dt == "float16" else ("NONE", "RELU6")
        refs = ("builtin", "ref") if dt == "float32" or quant else ("builtin",)
        shapes = [((k,), (k,)) for k in lengths] + (BROADCASTS if dt in ("float32", "float16") else BROADCASTS[:6])
        out += [(dt, tuple(s1), tuple(s2), act, ref) for s1, s2 in shapes for act in acts for ref in refs]
    return out


def _add_inputs(dt, s1, s2, seed):
    if dt in ("float32", "float16"):
        return _float_inputs(dt, s1, s2, seed)
    from test_add import values

    return [[values(dt, s1, seed + k), values(dt, s2, seed + k + 1)] for k in range(2)]


def _rename(source: str, k: int) -> str:
    """``source`` with every litecl_* identifier suffixed ``_k{k}``, and the include guards
    of shared helpers (LITECL_QUANT_V16: add_quant.quant_add_cl_vector_functions) with
    them, so each kernel defines its own renamed helpers: many kernels in one program."""
    source = re.sub(r"\bLITECL_QUANT_V(\w+)", lambda mt: f"LITECL_QUANT_V{mt.group(1)}_K{k}", source)
    return re.sub(r"\blitecl_(\w+)", lambda mt: f"litecl_{mt.group(1)}_k{k}", source)


def check_kernels(device_spec: str, per_program: int) -> dict:
    import pyopencl as cl

    import litecl
    from litecl.kernels import plan_partition
    from litecl.model import load_model
    from test_cast import PAIRS, edge_values

    from dataclasses import replace

    dev = litecl.open_device(device_spec)
    cases = []  # (model, ins list, reference)
    for s, d in PAIRS:
        if s in ("int4", "uint4", "int2", "bfloat16") or d in ("int4", "uint4", "int2", "bfloat16"):
            continue  # packed and bfloat16 types: litert's Python API; covered on x86
        for n in (1, 33):
            cases.append(("cast", s, d, n, cast_model(s, d, [n]), [[edge_values(s, n)]], "builtin"))
    for seed, (dt, s1, s2, act, ref) in enumerate(_add_cases()):
        m = add_model(dt, list(s1), list(s2), activation=act, quant=QUANT.get(dt))
        cases.append(("add", dt, (s1, s2, act), ref, m, _add_inputs(dt, s1, s2, seed), ref))
    launches, bad, skipped = [], [], []
    for ci, (kind, a, b, c, m, ins_sets, ref) in enumerate(cases):
        mod = load_model(model_content=m)
        sg = mod.subgraphs[0]
        shapes = {t: tuple(sg.tensors[t].shape) for t in sg.inputs}
        caps = replace(dev.caps, reference=ref)
        from litecl.lowering import why_not

        w = why_not(sg.nodes[0], sg, caps)
        if w:
            skipped.append([kind, a, b, str(c), w])
            continue
        plan = plan_partition(sg.nodes, sg, shapes, caps, keep=set(sg.outputs), constants=set(), fuse=False)
        (ln,) = plan.launches
        launches.append((ci, ln, plan, sg))
    launches = launches[:int(os.environ.get("LITECL_ARCH_CHECK_MAX", len(launches)))]
    from litecl.device import small_device

    devices = [dev] + ([small_device(dev)] if small_device(dev) is not None else [])
    n, build_s = 0, 0.0
    for on in devices:
        n_on, b_on = _run_batched(cl, on, launches, cases, per_program, bad)
        n, build_s = n + n_on, build_s + b_on
    return {"checked": n, "kernels": len(launches), "programs": math.ceil(len(launches) / per_program),
            "build_s": round(build_s, 1), "bad": bad[:30], "n_bad": len(bad), "skipped": skipped[:10],
            "n_skipped": len(skipped), "devices": [f"{d.caps.platform}: {d.caps.name}" for d in devices],
            "arch": dev.caps.arch}


def _run_batched(cl, dev, launches, cases, per_program, bad) -> tuple:
    """Build ``launches`` in programs of ``per_program`` kernels on ``dev``, run each on its
    case's operand sets, append mismatches with LiteRT to ``bad``; (runs, build seconds)."""
    from test_cast import _out_of_reference_contract

    t0 = time.time()
    programs = {}
    for start in range(0, len(launches), per_program):
        chunk = launches[start:start + per_program]
        src = "\n".join(_rename(ln.source, ci) for ci, ln, _, _ in chunk)
        prg = cl.Program(dev.context, src).build(options=[])
        for ci, ln, _, _ in chunk:
            programs[ci] = cl.Kernel(prg, f"{ln.name}_k{ci}")
    build_s = time.time() - t0
    q, mf = dev.queue, cl.mem_flags
    n = 0
    for ci, ln, plan, sg in launches:
        kind, a, b, c, m, ins_sets, ref = cases[ci]
        for ins in ins_sets:
            want = _litert(m, ins, ref)
            bufs = []
            for t, x in zip(ln.inputs, ins):
                x = np.ascontiguousarray(x)
                bufs.append(cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x) if x.nbytes
                            else cl.Buffer(dev.context, mf.READ_ONLY, 4))
            out = np.zeros(want.shape, want.dtype)
            ob = cl.Buffer(dev.context, mf.READ_WRITE, max(out.nbytes, 4))
            k = programs[ci]
            k.set_args(*bufs, ob, *(np.uint32(v) for v in ln.tiling.kernel_args()), *(np.int32(v) for _, v in ln.args))
            if ln.n:
                cl.enqueue_nd_range_kernel(q, k, ln.gsize, ln.lsize)
            if out.nbytes:
                cl.enqueue_copy(q, out, ob)
            q.finish()
            n += 1
            diff = mismatches(out, want)
            if kind == "cast":
                diff &= ~_out_of_reference_contract(a, b, ins[0])
            if diff.any():
                i = int(np.flatnonzero(diff.ravel())[0])
                bad.append([dev.caps.name, kind, a, b, str(c), ref, int(diff.sum()), i, repr(out.ravel()[i]),
                            repr(want.ravel()[i])])
    return n, build_s


# ---------------------------------------------------------------------------- models
def check_models(device_spec: str, paths: list) -> dict:
    from litecl.compare import random_inputs

    rows, bad = [], []
    edge = [("float32", (17,), (17,), "RELU"), ("float32", (9,), (), "NONE"), ("float32", (4, 17), (4, 1), "RELU6"),
            ("float16", (17,), (17,), "NONE"), ("float16", (4, 1), (4, 17), "RELU")]
    items = [(p, None) for p in paths] + [(None, e) for e in edge]
    for path, e in items:
        if path:
            m = Path(path).read_bytes()
            probe = make_interpreter(m)
            probe.allocate_tensors()
            sets = [list(random_inputs(probe.get_input_details(), seed=1).values())]
            name = Path(path).name
        else:
            dt, s1, s2, act = e
            m = add_model(dt, list(s1), list(s2), activation=act)
            sets = _float_inputs(dt, s1, s2, 5)
            name = f"ADD {dt} {s1}+{s2} {act}"
        try:
            on, ok = _exact_through_litecl(m, sets, device_spec)
        except Exception as e:  # noqa: BLE001 (a row: the next model still runs)
            on, ok = -1, f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        rows.append([name, on, ok])
        if ok is not True:
            bad.append([name, ok])
    return {"checked": len(rows), "rows": rows, "bad": bad}


def _exact_through_litecl(m: bytes, sets: list, device_spec: str) -> tuple:
    """(CAST/ADD nodes on OpenCL, every output bit-exact on every operand set) of model
    ``m`` through litecl.Interpreter against LiteRT alone."""
    import litecl

    it = litecl.Interpreter(model_content=m, device=device_spec, quiet=True)
    it.allocate_tensors()
    on = sum(r["placement"] == "opencl" for r in it.placement())
    ref = make_interpreter(m)
    ref.allocate_tensors()
    ok = True
    for ins in sets:
        outs = []
        for r in (ref, it):
            for d, x in zip(r.get_input_details(), ins):
                r.set_tensor(d["index"], x)
            r.invoke()
            outs.append([r.get_tensor(d["index"]) for d in r.get_output_details()])
        ok = ok and all(g.dtype == w.dtype and g.shape == w.shape and not mismatches(g, w).any()
                        for g, w in zip(outs[1], outs[0]))
    it.close()
    return on, ok


def check_native(dirs: list) -> dict:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType, load_delegate

    from litecl.compare import random_inputs

    rows, bad = [], []
    for d in map(Path, dirs):
        m = (d / "model").read_text().strip()
        opts = json.loads((d / "delegate_options.json").read_text())
        dlg = load_delegate(str(d / "build" / "arm64-v8a" / "liblitecl_delegate.so"), opts)
        it = Interpreter(model_path=m, experimental_delegates=[dlg],
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        it.allocate_tensors()
        ref = make_interpreter(Path(m).read_bytes())
        ref.allocate_tensors()
        ins = list(random_inputs(ref.get_input_details(), seed=2).values())
        extra = d / "inputs.npz"
        sets = [ins] + ([list(np.load(extra).values())] if extra.exists() else [])
        ok = True
        for xs in sets:
            outs = []
            for r in (it, ref):
                for det, x in zip(r.get_input_details(), xs):
                    r.set_tensor(det["index"], x)
                r.invoke()
                outs.append([r.get_tensor(det["index"]) for det in r.get_output_details()])
            ok = ok and all(g.shape == w.shape and not mismatches(g, w).any() for g, w in zip(*outs))
        rows.append([Path(m).name, ok])
        if not ok:
            bad.append(Path(m).name)
    return {"checked": len(rows), "rows": rows, "bad": bad}


def main(argv: list) -> int:
    what = argv[0]
    spec = os.environ.get("LITECL_ARM64_DEVICE", "pocl")
    if what == "rules":
        out = check_rules()
    elif what == "kernels":
        out = check_kernels(spec, int(os.environ.get("LITECL_ARM64_PER_PROGRAM", "80")))
    elif what == "models":
        out = check_models(spec, argv[1:])
    elif what == "native":
        out = check_native(argv[1:])
    else:
        raise SystemExit(f"unknown check {what!r}")
    print(json.dumps(out, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
