"""Each kernel family checked on each driver before litecl places a node on it.

A driver can compute a kernel wrong (Debian's arm64 PoCL turned ``v < 0 ? 0 : v`` into
FMAX; LiteRT's own GPU accelerator adds int16 quantized operands without their scales).
Before litecl places a node of a *family* on a device for the first time, it builds the
family's canonical kernel (the node's own generator and lowering, at the family's canonical
shapes: 77 elements, so every vector width has a body and a scalar tail), runs it on the
family's edge values (NaN of both signs, inf, -0.0, subnormals, limits and out-of-range
values) and compares the output with LiteRT's bits for those inputs on this architecture:
``ops/selftest_<arch>.json``, written from LiteRT by models/selftest_tables.py and
committed (tests/test_selftest.py regenerates it and diffs). A family whose bits differ
keeps its nodes on LiteRT with the reason ("this device computes CAST float32->int16 wrong:
3 of 77 edge values"). Where PoCL runs small partitions on its basic device, the family
is checked on both devices. The verdict is kept in memory and in litecl's cache (kind
"selftest", keyed by the device's identity, the canonical kernel's text and the expected
bits), so a later process runs nothing.

A family: the op, its types, activation, broadcast kind ("same" shapes, a "single" value,
"general"), the LiteRT kernels matched (``reference``) and a quantized ADD's path; the
vector width and code path follow from the device's caps.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import threading
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .errors import CHILD_PATH

__all__ = ["Family", "FAMILIES", "family_of", "family_name", "canonical_inputs", "check", "refusal",
           "check_all", "FAULT_ENV"]

#: Test-only: a family name (``family_name``) whose kernels litecl generates wrong (the
#: low bit of every integer result flipped), to prove the self-test refuses such a family.
#: Never set outside tests.
FAULT_ENV = "LITECL_TEST_WRONG_FAMILY"

N = 77  # canonical elements: 4 x 16 + 13, a vector body and a tail for every width
#: canonical operand shapes per ADD broadcast kind
SHAPES = {"same": ((N,), (N,)), "single": ((N,), ()), "general": ((5, 1, 7), (1, 3, 7))}
#: canonical quantization ((scale, zero point) of input 1, input 2, output), per type and path
QUANT = {("int8", "general"): ((0.05, 3), (0.07, -9), (0.11, 1)),
         ("uint8", "general"): ((0.40149, 136), (0.27583, 119), (0.43217, 133)),
         ("int16", "general"): ((2.96e-4, 0), (1.39e-4, 0), (3.83e-4, 0)),
         ("int16", "pot"): ((2.0 ** -10, 0), (2.0 ** -12, 0), (2.0 ** -10, 0))}
ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


class Family(NamedTuple):
    op: str             # "CAST" | "ADD"
    types: tuple        # CAST (src, dst); ADD (dtype,)
    activation: str = ""
    kind: str = ""      # ADD: "same" | "single" | "general"
    reference: str = "builtin"
    quant: str = ""     # ADD: "" plain, "general", "pot"


def family_name(f: Family) -> str:
    if f.op == "CAST":
        return f"CAST {f.types[0]}->{f.types[1]}"
    q = f" quantized ({f.quant} path)" if f.quant else ""
    return f"ADD {f.types[0]}{q} {f.activation} ({f.kind} shapes, {f.reference} kernels)"


def _families() -> tuple:
    from .ops.dtypes import CAST_TYPES

    names = [d.name for d in CAST_TYPES]
    casts = ([(s, d) for s in names for d in names if s != d] + [("complex64", d) for d in names]
             + [(s, "bfloat16") for s in names] + [("bfloat16", d) for d in names]
             + [("float32", t) for t in ("int4", "uint4")] + [(t, "float32") for t in ("int4", "uint4")])
    out = [Family("CAST", p) for p in casts]
    for ref in ("builtin", "ref"):
        for act in ACTIVATIONS:
            for kind in SHAPES:
                out += [Family("ADD", (dt,), act, kind, ref) for dt in ("float32", "float16", "int32", "int64")]
                out += [Family("ADD", (dt,), act, kind, ref, "general") for dt in ("int8", "uint8", "int16")]
            out.append(Family("ADD", ("int16",), act, "same", ref, "pot"))
    return tuple(out)


#: every family the tables hold: the CAST pairs LiteRT's Python API can feed (int2 it
#: cannot) and the ADD matrix
FAMILIES = _families()


def family_of(node, sg, shapes, caps) -> Family | None:
    """The family of a CAST/ADD node view at ``shapes`` (its inputs'), or None."""
    from .lowering import AddLowering  # noqa: PLC0415

    if node.op == "CAST":
        return Family("CAST", (sg.tensors[node.inputs[0]].dtype.name, sg.tensors[node.outputs[0]].dtype.name))
    if node.op != "ADD":
        return None
    dt = sg.tensors[node.outputs[0]].dtype.name
    quant = AddLowering._quant_params(node, sg).path if AddLowering._quantized(node, sg) else ""
    quant = "pot" if quant.startswith("pot") else quant  # add_quant's "pot_int16"
    a, b = (tuple(s) for s in shapes[:2])
    kind = "same" if a == b else "single" if math.prod(a) == 1 or math.prod(b) == 1 else "general"
    ref = getattr(caps, "reference", "builtin")
    return Family("ADD", (dt,), node.activation, kind, ref if ref in ("builtin", "ref") else "builtin", quant)


# ------------------------------------------------------------------------- edge values
_F = [0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 6.0, 7.0, -7.0, 127.9, 128.0, -129.0, 255.5, 256.0, -300.0,
      32767.5, 32768.0, -32769.0, 65504.0, 65519.0, 65520.0, 1e-8, 1e-40, -1e-40, 1e-45, 6e-8, 2.0 ** 24 + 1,
      2.0 ** 31, -2.0 ** 31, 2.0 ** 32, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 1e10, -1e10, 1e39, -1e39,
      3.4028234663852886e38, 1e300, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11]
_I = [0, 1, -1, 2, 5, 6, 7, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, 65535, 65536, 2 ** 31 - 1,
      -2 ** 31, 2 ** 32 - 1, 2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63]


def _edges(name: str) -> np.ndarray:
    """The edge values of type ``name``: for floats NaN of both signs, infinities, zeros of
    both signs, subnormals, ties, and values beyond every narrower type's range."""
    from .ops.dtypes import dtype  # noqa: PLC0415

    d = dtype(name)
    if name == "bool":
        return np.array([0, 1], np.bool_)
    if d.packed_bits:
        lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.np.kind == "i" else (0, (1 << d.bits) - 1)
        return np.arange(lo, hi + 1).astype(d.np)
    if d.np.kind in "iu":
        info = np.iinfo(d.np)
        return np.array([v for v in _I if info.min <= v <= info.max], dtype=object).astype(d.np)
    with np.errstate(over="ignore"):
        f = np.array([np.nan, -np.nan, np.inf, -np.inf, *_F], np.float64).astype(np.float32)
        return f.astype(d.np)


def canonical_inputs(f: Family) -> list:
    """The family's operands (numpy, as LiteRT's Python API takes them): edge values
    cycled from a per-operand rotation, then seeded values of every bit pattern."""
    if f.op == "CAST":
        src = f.types[0]
        if src == "complex64":  # static_cast of an out-of-range real part is undefined
            v = _operand("float32", (N,), 0)
            v = np.where(np.isfinite(v) & (np.abs(v) < 100), v, 0.5).astype(np.float32)
            return [(v + 1j * v[::-1]).astype(np.complex64)]
        return [_operand(src, (N,), 0)]
    s1, s2 = SHAPES[f.kind]
    return [_operand(f.types[0], s1, 1, f.quant), _operand(f.types[0], s2, 5, f.quant)]


def _operand(name: str, shape, salt: int, quant: str = "") -> np.ndarray:
    from .ops.dtypes import dtype  # noqa: PLC0415

    n = max(math.prod(shape), 1) if shape else 1
    e = _edges(name)
    rng = np.random.default_rng(1000 + salt)
    d = dtype(name)
    if name == "bool" or d.packed_bits:
        rand = rng.choice(e, n)
    elif d.np.kind in "iu":
        info = np.iinfo(d.np)
        rand = rng.integers(info.min, info.max, n, dtype=d.np, endpoint=True)
    else:
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[d.np.itemsize]
        rand = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(d.np)
    out = np.concatenate([np.roll(e, salt), rand])[:n] if n > len(e) else np.roll(e, salt)[:n]
    return np.ascontiguousarray(out.astype(d.np)).reshape(shape)


# ------------------------------------------------------------------------- kernels
def canonical_kernel(f: Family, caps):
    """(source, kernel name, elements, tile bytes, int args, output dtype row, output
    shape) of the family's canonical kernel on ``caps``: the lowering a node of the family
    gets, at the canonical shapes."""
    from dataclasses import replace  # noqa: PLC0415

    from .ops import add as add_ops  # noqa: PLC0415
    from .ops.add_quant import quant_add_params  # noqa: PLC0415
    from .ops.codegen import cast_kernel  # noqa: PLC0415
    from .ops.dtypes import dtype  # noqa: PLC0415

    caps = replace(caps, reference=f.reference)
    if f.op == "CAST":
        src, dst = dtype(f.types[0]), dtype(f.types[1])
        source = cast_kernel(src, dst, caps)[0]
        return _faulty(f, source), "litecl_cast", N, min(src.itemsize, dst.itemsize), (), dst, (N,)
    dt = dtype(f.types[0])
    s1, s2 = SHAPES[f.kind]
    quant = None
    if f.quant:
        q = QUANT[(f.types[0], f.quant)]
        quant = quant_add_params(f.types[0], *q, f.activation, pot_scale_int16=f.quant == "pot")
    source = add_ops.add_kernel(f.types[0], s1, s2, f.activation, caps, quant)
    args = add_ops.add_kernel_args(f.types[0], s1, s2, f.activation, caps, quant)
    out = add_ops.broadcast_shape(s1, s2)
    return _faulty(f, source), "litecl_add", math.prod(out), dt.itemsize, args, dt, tuple(out)


def fault_family() -> str:
    return os.environ.get(FAULT_ENV, "")


def _faulty(f: Family, source: str) -> str:
    return faulty(family_name(f), source)


def faulty(name: str, source: str) -> str:
    """The fault switch (FAULT_ENV, test-only) applied to kernel text of family ``name``:
    every ``return EXPR;`` flipped in its low bit (meant for families with integer
    results); else ``source`` as it is."""
    if not fault_family() or fault_family() != name:
        return source
    # "TYPE name(...)\n{ ... return EXPR; }": EXPR ^ (TYPE)(1)
    return re.sub(r"^(\w+) (\w+)\(([^)]*)\)\n\{\n([^{}]*?)    return ([^;]+);\n\}",
                  lambda m: (f"{m[1]} {m[2]}({m[3]})\n{{\n{m[4]}    return ({m[5]}) ^ ({m[1]})(1);\n}}"
                             if not m[1].startswith(("float", "half", "double")) else m[0]),
                  source, flags=re.M)


# ------------------------------------------------------------------------- expected bits
@functools.lru_cache(maxsize=None)
def table(arch: str) -> dict:
    """{family name: output bytes as hex} of LiteRT on the canonical inputs on ``arch``
    (ops/selftest_<arch>.json); {} where there is none."""
    from . import ops  # noqa: PLC0415

    p = Path(ops.__file__).parent / f"selftest_{arch}.json"
    try:
        return json.loads(p.read_text())["families"]
    except (OSError, ValueError, KeyError):
        return {}


def _expected(f: Family, arch: str, out_dt, shape) -> np.ndarray | None:
    hexbits = table(arch).get(family_name(f))
    if hexbits is None:
        return None
    return np.frombuffer(bytes.fromhex(hexbits), out_dt.np).reshape(shape)


# ------------------------------------------------------------------------- running
def run(device, f: Family) -> str:
    """"" when ``device`` gives LiteRT's bits for family ``f``, else why not (one line)."""
    import pyopencl as cl  # noqa: PLC0415

    from .compare import mismatches  # noqa: PLC0415
    from .kernels import build_program, launch_geometry  # noqa: PLC0415

    source, name, n, tile, args, out_dt, shape = canonical_kernel(f, device.caps)
    want = _expected(f, device.caps.arch, out_dt, shape)
    if want is None:
        return ""  # no LiteRT bits for it: nothing to compare (FAMILIES lists every family)
    ins = canonical_inputs(f)
    ctx, q, mf = device.context, device.queue, cl.mem_flags
    k = cl.Kernel(build_program(device, source), name)
    bufs = [cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=np.ascontiguousarray(x).view(np.uint8).ravel()
                      if x.size else np.zeros(1, np.uint8)) for x in ins]
    got = np.zeros(shape, out_dt.np)
    out = cl.Buffer(ctx, mf.READ_WRITE, max(got.nbytes, 1))
    tiling, gsize, lsize = launch_geometry(device.caps, n, tile)
    k.set_args(*bufs, out, *(np.uint32(v) for v in tiling.kernel_args()), *(np.int32(v) for _, v in args))
    with device.exclusive():  # Oclgrind: beside another thread's invoke it crashed
        events = [cl.enqueue_nd_range_kernel(q, k, gsize, lsize), cl.enqueue_copy(q, got, out, is_blocking=False)]
        cl.wait_for_events(events)  # not clFinish alone: rusticl's returns early (litecl_delegate.c wait_done)
        q.finish()
    bad = mismatches(got, want)
    if not bad.any():
        return ""
    return (f"this device computes {family_name(f)} wrong: {int(bad.sum())} of {bad.size} edge values "
            f"(litecl's self-test, backend/selftest.py)")


_VERDICTS: dict = {}
#: A family's run at a time. A cached verdict "PoCL's basic device computes CAST
#: int64->float32 wrong: 76 of 77" came from one run among tests running many threads and
#: processes at once (the same family ran right in a fresh process): a refusal is now run
#: twice, one run at a time, before it is kept on disk.
_RUN_LOCK = threading.Lock()


def _run_checked(device, f: Family) -> str:
    """``run``, a kernel the driver cannot build or run being the refusal's reason."""
    try:
        return run(device, f)
    except Exception as e:  # noqa: BLE001 (a kernel the driver cannot build or run: refused)
        return (f"this device fails litecl's self-test of {family_name(f)}: "
                f"{type(e).__name__}: {' '.join(str(e).split())[:200]}")


def check(device, f: Family) -> str:
    """``run``'s verdict for ``f`` on ``device``, once per process and, through litecl's
    cache, once per device identity, canonical kernel and expected bits."""
    from .cache import device_identity, load_blob, store_blob  # noqa: PLC0415

    k = (id(device), f)
    if k in _VERDICTS:
        return _VERDICTS[k]
    # the canonical kernel's text follows from the family, the caps and litecl's generators:
    # keyed by those, a cached verdict costs no generation (the disk read alone)
    want = table(device.caps.arch).get(family_name(f), "")
    caps = json.dumps({k: sorted(v) if isinstance(v, frozenset) else v for k, v in vars(device.caps).items()},
                      sort_keys=True, default=str)
    key = hashlib.sha256("\0".join([device_identity(device.device), caps, _code_hash(), repr(f),
                                    fault_family(), want]).encode()).hexdigest()
    got = load_blob("selftest", key)
    try:
        verdict = json.loads(got)["verdict"] if got is not None else None
    except (ValueError, KeyError, TypeError):
        verdict = None
    if verdict is None:
        with _RUN_LOCK:  # one family run at a time in the process
            verdict = _run_checked(device, f)
            if verdict:  # confirmed before it is kept for every later process: a "computes
                verdict = _run_checked(device, f)  # wrong" once came from one bad run (below)
        store_blob("selftest", key, json.dumps({"verdict": verdict}).encode())
    _VERDICTS[k] = verdict
    return verdict


@functools.lru_cache(maxsize=None)
def _code_hash() -> str:
    """A hash of the sources the canonical kernels come from (ops/, the lowering, this) and
    of the comparison that judges their output (compare.py: an edit there changed verdicts
    that stayed cached, a fresh user's report)."""
    from . import ops  # noqa: PLC0415

    h = hashlib.sha256()
    files = sorted(Path(ops.__file__).parent.glob("*.py")) + [Path(__file__), Path(__file__).with_name("lowering.py"),
                                                              Path(__file__).with_name("compare.py")]
    for p in files:
        h.update(p.read_bytes())
    return h.hexdigest()


def refusal(devices, node, sg, shapes, caps) -> str:
    """Why ``node`` must stay on LiteRT because a device of ``devices`` (the delegate's, and
    its small-partition device) computes its family wrong; "" otherwise."""
    f = family_of(node, sg, shapes, caps)
    if f is None:
        return ""
    for d in devices:
        if d is None:
            continue
        why = check(d, f)
        if why:
            return why if len(devices) == 1 or d is devices[0] else f"{why[:-1]} on {d.caps.name})"
    return ""


def check_all(device) -> list:
    """[(family name, verdict)] of every family on ``device`` (``litecl devices --check``)."""
    out = []
    for f in FAMILIES:
        try:
            out.append((family_name(f), check(device, f)))
        except Exception as e:  # noqa: BLE001
            out.append((family_name(f), f"{type(e).__name__}: {e}"))
    return out


_CHILD = (CHILD_PATH + "import json, sys\nfrom litecl import open_device, selftest\n"
          "rows = selftest.check_all(open_device(sys.argv[1]))\n"
          "print(json.dumps({'checked': len(rows), 'failed': {n: v for n, v in rows if v}}))\n")


def check_devices(devices: list, timeout: float = 900) -> list:
    """``litecl devices --check``: for each (spec, device description) of ``devices``,
    every family checked in a child process (a runtime that crashes or hangs there is that
    device's row, not the end of the run): [{spec, device, checked, failed {family: why},
    error}]."""
    import signal  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    rows = []
    for spec, desc in devices:
        row = {"spec": spec, "device": desc, "checked": 0, "failed": {}, "error": ""}
        try:
            r = subprocess.run([sys.executable, "-c", _CHILD, spec], capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
            if r.returncode < 0:
                sig = -r.returncode
                name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
                row["error"] = f"the runtime crashed during the check ({name})"
            elif r.returncode:
                tail = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
                row["error"] = f"the check failed: {tail[:300]}"
            else:
                row.update(json.loads(r.stdout.strip().splitlines()[-1]))
        except subprocess.TimeoutExpired:
            row["error"] = f"the check did not finish in {timeout:g} s"
        rows.append(row)
    return rows
