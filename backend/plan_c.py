"""The plan.c ``litecl export`` writes: the native delegate's tables (backend/native/
litecl_plan.h) for one model as C text.

``native_plan`` turns litecl.Interpreter's prepared delegate (its subgraph records and
partition plans) into plan.c: every program's source for each architecture
(``_arch_texts``) and binary, the launches and their shape rules (``_shape_generic``,
``_fixed_elements``), the fingerprints and the tested LiteRT versions
(``tested_versions``); the C literals come from ``_c_string`` and ``_c_bytes``.
"""
from __future__ import annotations

import os
import re
from dataclasses import replace

import numpy as np

from .errors import InputError


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _c_string(text: str) -> str:
    """``text`` as C string literal lines (ASCII; other bytes as octal escapes)."""
    lines = []
    for line in text.encode("utf-8", "surrogateescape").split(b"\n"):  # a file name: its own bytes
        esc = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92, 63) else f"\\{b:03o}" for b in line)
        lines.append(f'"{esc}\\n"')
    if text and not text.endswith("\n"):
        lines[-1] = lines[-1][:-3] + '"'
    return "\n    ".join(lines) if lines else '""'


def _comment(text: str) -> str:
    """``text`` inside a C comment: what is not printable escaped (a file name that is not
    UTF-8, a newline), and no ``*/`` to end the comment early."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text)).replace("*/", "*\\/")


def _c_bytes(data: bytes) -> str:
    rows = [", ".join(str(b) for b in data[i:i + 24]) for i in range(0, len(data), 24)]
    return "{\n    " + ",\n    ".join(rows) + "\n}"


def _q(s) -> str:
    return _c_string(str(s)) if s is not None else "NULL"


def _shape_generic(launch, nodes, sg, shapes: dict, caps, keep, constants, fuse) -> bool:
    """Whether ``launch``'s source holds for other element counts: every operand has the
    output's shape or is one element (a scalar the kernel splats: x + 0.25), so no
    broadcast index arithmetic is compiled in, and planning the same nodes with that
    shape replaced by another gives the same source. Otherwise the kernel runs at the
    exported shapes only (litecl_delegate.c declines others)."""
    from .kernels import plan_partition  # noqa: PLC0415

    e = tuple(shapes[launch.outputs[0]])
    if any(tuple(shapes[t]) != e and _numel(shapes[t]) != 1 for t in (*launch.inputs, *launch.outputs)):
        return False
    if any(tuple(shapes[t]) != e for t in launch.outputs):
        return False
    alt_shape = (_numel(e) + 37,)
    ins = {t: (alt_shape if tuple(shapes[t]) == e else tuple(shapes[t]))
           for n in nodes for t in n.inputs if t >= 0 and t in shapes and
           not any(t in m.outputs for m in nodes[:nodes.index(n)])}
    try:
        plan = plan_partition(nodes, sg, ins, caps, keep=keep, constants=constants, fuse=fuse)
    except Exception:  # noqa: BLE001 (a shape the nodes refuse: not generic)
        return False
    same = [ln for ln in plan.launches if ln.nodes == launch.nodes]
    return len(same) == 1 and same[0].source == launch.source and same[0].name == launch.name


def _fixed_elements(launch, nodes, sg, shapes: dict, caps, keep, constants, fuse) -> int:
    """Why a launch that is not ``_shape_generic`` runs at the exported shapes only
    (lcl_launch.fixed_elements, named in the delegate's INFO line): N > 0 when every
    operand has the output's shape and the source is the same when those shapes are
    flattened to their N elements (only the element count is compiled in: a float32 ADD,
    whose NaN choice follows LiteRT's SIMD body and tail, a quantized ADD); 0 when an
    operand has another shape (a broadcast); -1 otherwise."""
    from .kernels import plan_partition  # noqa: PLC0415

    e = tuple(shapes[launch.outputs[0]])
    if any(tuple(shapes[t]) != e for t in (*launch.inputs, *launch.outputs)):
        return 0
    n = _numel(e)
    if n < 1:
        return -1
    ins = {t: ((n,) if tuple(shapes[t]) == e else tuple(shapes[t]))
           for m in nodes for t in m.inputs if t >= 0 and t in shapes and
           not any(t in k.outputs for k in nodes[:nodes.index(m)])}
    try:
        plan = plan_partition(nodes, sg, ins, caps, keep=keep, constants=constants, fuse=fuse)
    except Exception:  # noqa: BLE001 (a shape the nodes refuse)
        return -1
    same = [ln for ln in plan.launches if ln.nodes == launch.nodes]
    return n if len(same) == 1 and same[0].source == launch.source else -1


def tested_versions() -> dict:
    """{distribution: [version prefix, ...]}: the LiteRT / TensorFlow versions whose TFLite
    structs litecl's delegates were checked against (backend/abi.py TESTED, the one list;
    written into plan.c, which refuses any other at tflite_plugin_create_delegate, and
    into the manifest)."""
    from .abi import TESTED  # noqa: PLC0415

    return {dist: list(prefixes) for dist, prefixes in TESTED.items()}


def native_plan(d, subgraphs: list, model: str, library: str, target: str,
                flags: int = 1) -> tuple[str, dict]:
    """(plan.c text, summary) of litecl.Delegate ``d``'s decisions and plans for a model:
    ``subgraphs`` as model_plan.ModelPlan.subgraphs after allocate (every subgraph LiteRT
    prepared, in its order, with its fingerprint, claimed nodes, partitions and their
    plans where LiteRT prepared them, else planned here at the declared shapes, as the
    delegate would), one unfused launch per claimed node, every distinct program's source
    and (where the device gives it) binary."""
    import pyopencl as cl  # noqa: PLC0415

    from .kernels import build_program, plan_partition  # noqa: PLC0415
    from .ops.add import arch_define  # noqa: PLC0415
    from .runtime import type_tables_c  # noqa: PLC0415
    from .ops.tiling import LAUNCH, launch_config  # noqa: PLC0415

    caps, dev = d.caps, d.device
    ints: list[int] = []

    def span(values) -> str:
        off = len(ints)
        ints.extend(int(v) for v in values)
        return f"{{{off}, {len(values)}}}"

    programs: dict = {}  # source (every architecture's: arch_source) -> (index, name)
    blobs: list = []  # C arrays of the self-test families' inputs and expected bits
    launches_c, parts_c, subs_c = [], [], []
    portable: dict = {}  # id(Launch) -> its program text for every architecture

    def planned(nodes, shapes, keep, consts, fuse, plan=None):
        """``plan`` (else planned here) at ``shapes`` on ``caps``, its launches' program
        texts for every architecture kept in ``portable``."""
        plan = plan or plan_partition(nodes, sg, shapes, caps, keep=keep, constants=consts, fuse=fuse)
        for ln, text in zip(plan.launches, _arch_texts(plan, nodes, sg, shapes, caps, keep, consts, fuse)):
            portable[id(ln)] = (text, ln)  # the launch kept: its id stays its own
        return plan

    def prog(ln) -> int:
        src = portable[id(ln)][0]
        if src not in programs:
            programs[src] = (len(programs), ln.name)
        return programs[src][0]

    needs = {"local": 1, "alloc": 0}  # the largest work-group and buffer the launches use

    families: dict = {}  # family -> (index, C initializer): the self-tests of the single launches

    def family(node, shapes) -> int:
        """LCL_FAMILIES index of ``node``'s self-test family (its canonical kernel a program of
        its own, its edge inputs and both architectures' LiteRT bits), or -1."""
        from . import selftest as S  # noqa: PLC0415
        from .ops.add import FLOAT_ADD_RULES, arch_source  # noqa: PLC0415

        f = S.family_of(node, sg, [shapes[t] for t in node.inputs if t >= 0], caps)
        if f is None or any(S.family_name(f) not in S.table(a) for a in FLOAT_ADD_RULES):
            return -1
        if f not in families:
            texts = {a: S.canonical_kernel(f, replace(caps, arch=a))[0] for a in FLOAT_ADD_RULES}
            _, name, n, tile, args, out_dt, _ = S.canonical_kernel(f, caps)
            src = arch_source(texts)
            if src not in programs:
                programs[src] = (len(programs), name)
            ins = [np.ascontiguousarray(x).tobytes() for x in S.canonical_inputs(f)]
            exp = [bytes.fromhex(S.table(a)[S.family_name(f)]) for a in ("x86_64", "aarch64")]
            k = len(families)
            blobs.extend([f"static const unsigned char F{k}I{j}[{max(len(b), 1)}] = {_c_bytes(b or bytes(1))};"
                          for j, b in enumerate(ins)] +
                         [f"static const unsigned char F{k}E{j}[{max(len(b), 1)}] = {_c_bytes(b or bytes(1))};"
                          for j, b in enumerate(exp)])
            kind = {"float16": 2, "bfloat16": 3, "float32": 4, "complex64": 4, "float64": 8}.get(out_dt.name, 0)
            inputs = ", ".join(f"F{k}I{j}" for j in range(len(ins))) or "NULL"
            sizes = ", ".join(str(len(b)) for b in ins) or "0"
            families[f] = (k, f"{{{_q(S.family_name(f))}, {programs[src][0]}, {n}, {tile}, "
                              f"{span([v for _, v in args])}, {len(ins)}, {{{inputs}}}, {{{sizes}}}, "
                              f"{{F{k}E0, F{k}E1}}, {len(exp[0])}, {kind}}}")
        return families[f][0]

    def launch_c(ln, shapes, generic, dynamic=False, fixed=0, fam=-1, callee=False) -> str:
        needs["local"] = max(needs["local"], *(int(x) for x in ln.lsize or (1,)))
        needs["alloc"] = max(needs["alloc"], *(_numel(shapes[t]) * sg.tensors[t].dtype.itemsize
                                                for t in (*ln.inputs, *ln.outputs) if t in shapes))
        # shape_fixed: 0 elementwise, 1 the exported shapes compiled in, 2 the same but the
        # Python delegate planned it only at invoke (shapes unknown at allocate): declined;
        # 3 the same as 1 in a called subgraph: declined (litecl_plan.h); fixed: why
        # (_fixed_elements)
        tile = 32 // ln.tiling.align_num
        shp = [x for t in ln.inputs for x in (len(shapes[t]), *shapes[t])]
        launches_c.append(f"{{{prog(ln)}, {tile}, {0 if generic else 2 if dynamic else 3 if callee else 1}, {span(ln.nodes)}, {span(ln.inputs)}, "
                          f"{span(ln.outputs)}, {span(shp)}, {0 if generic else fixed}, {span([v for _, v in ln.args])}, "
                          f"{fam}}}")
        return launches_c[-1]

    from .abi import ALLOW_DYNAMIC_TENSORS  # noqa: PLC0415
    summary = {"subgraphs": []}
    # subgraphs an IF or WHILE calls in a model whose inputs resize (a -1 in a shape
    # signature): their shapes follow the caller's (no -1 in their own signatures), so a
    # kernel compiling in its shapes stays on LiteRT there
    from .model import load_model  # noqa: PLC0415
    graphs = load_model(model).subgraphs
    callees = {r for g in graphs for n in g.nodes for r in n.subgraph_refs()} if any(
        -1 in (g.tensors[t].shape_signature or ()) for g in graphs for t in g.inputs) else set()
    for si, rec in enumerate(subgraphs):
        fp = rec["fingerprint"]
        claimed = sorted(r["index"] for r in rec["rows"] if r["placement"] == "opencl")
        sg = rec["sg"]
        first_part = len(parts_c)
        part_rows = []
        dynamic_nodes = set()
        for p in rec["parts"]:
            consts = {t for t in p.inputs if sg.tensors[t].constant}
            plan = p.plan
            if plan is None:  # not planned at allocate (dynamic shapes, a signature never allocated)
                dynamic_nodes.update(n.index for n in p.nodes)
                shapes = {t: tuple(sg.tensors[t].shape) for t in p.inputs}
            else:
                shapes = {t: tuple(plan.shapes[t]) for t in p.inputs}
            # fused as the delegate planned it (it unfuses a group the compiler refuses)
            fused = d.fuse if plan is None else any(len(ln.nodes) > 1 for ln in plan.launches)
            plan = planned(p.nodes, shapes, set(p.outputs), consts, fused, plan)
            first = len(launches_c)
            for ln in plan.launches:
                generic = _shape_generic(ln, p.nodes, sg, plan.shapes, caps, set(p.outputs), consts, d.fuse)
                fixed = 0 if generic else _fixed_elements(ln, p.nodes, sg, plan.shapes, caps, set(p.outputs),
                                                          consts, d.fuse)
                launch_c(ln, plan.shapes, generic, fixed=fixed)
            nodes = sorted(n.index for n in p.nodes)
            parts_c.append(f"{{{span(nodes)}, {first}, {len(plan.launches)}}}")
            part_rows.append({"nodes": nodes, "launches": len(plan.launches), "shapes": plan.shapes,
                              "p": p})
        # one unfused launch per claimed node, at the shapes of its partition's plan
        first_single = len(launches_c)
        at_invoke = []  # claimed by litecl.Delegate, left to LiteRT by the native delegate
        at_construction = []  # the same, for a kernel exported at shapes other than the model's
        # claimed, compiling in its shapes, in a graph whose delegate LiteRT keeps across a
        # resize (AllowDynamicTensors), with an operand a resize may change (a -1 in its
        # shape signature): allocate_tensors fails for them at other shapes (BirdNET FP32
        # at batch 2)
        fixed_across_resize = []
        in_callee = []  # claimed, compiling in its shapes, in a called subgraph: left to LiteRT
        for i in claimed:
            pr = next(r for r in part_rows if i in r["nodes"])
            n = next(n for n in pr["p"].nodes if n.index == i)
            shapes = {t: tuple(pr["shapes"][t]) for t in n.inputs if t >= 0}
            consts = {t for t in shapes if sg.tensors[t].constant}
            plan = planned([n], shapes, set(n.outputs), consts, False)
            (ln,) = plan.launches
            generic = _shape_generic(ln, [n], sg, plan.shapes, caps, set(n.outputs), consts, False)
            e = tuple(plan.shapes[ln.outputs[0]])
            # shapes known only at invoke: only a kernel whose operands all share the output's
            # shape follows them (a one-element operand may grow: a broadcast then)
            if i in dynamic_nodes and any(tuple(plan.shapes[t]) != e for t in ln.inputs):
                generic = False
            # operands of other shape signatures, one with a -1 (x [-1, 1] + [[1, 2]]
            # exported at [1, 1]): a resize makes them broadcast. One of one element for
            # good (no -1: x [-1] + 1.5) stays a splat at any count
            sigs = {s for s in (tuple(sg.tensors[t].shape_signature or sg.tensors[t].shape) for t in ln.inputs)
                    if -1 in s or _numel(s) != 1}
            if len(sigs) > 1 and any(-1 in x for x in sigs):
                generic = False
            fixed = 0 if generic else _fixed_elements(ln, [n], sg, plan.shapes, caps, set(n.outputs), consts, False)
            dynamic = i in dynamic_nodes and not generic
            callee = si in callees and not generic and not dynamic
            launch_c(ln, plan.shapes, generic, dynamic=dynamic, fixed=fixed, fam=family(n, plan.shapes),
                     callee=callee)
            if dynamic and flags & ALLOW_DYNAMIC_TENSORS:  # litecl_delegate.c delegate_prepare declines it
                at_invoke.append(i)
            elif callee:  # declined too
                in_callee.append(i)
            elif not generic and flags & ALLOW_DYNAMIC_TENSORS and any(
                    tuple(plan.shapes[t]) != tuple(sg.tensors[t].shape) for t in ln.inputs):
                # LiteRT prepares such a graph's delegate once, at construction, at the
                # model's shapes (the views' shapes: read there), never after a resize: a
                # kernel compiling in the shapes export was given stays on LiteRT
                at_construction.append(i)
            elif not generic and flags & ALLOW_DYNAMIC_TENSORS and any(
                    -1 in tuple(sg.tensors[t].shape_signature or ()) for t in ln.inputs):
                fixed_across_resize.append(i)
        subs_c.append(f"{{{span(fp)}, {span(claimed)}, {rec['nodes']}, {first_part}, "
                      f"{len(parts_c) - first_part}, {first_single}}}")
        # claimed: litecl.Delegate's nodes; native_claimed: the native delegate's at the
        # exported shapes; left_at_invoke + left_at_construction: the difference (a graph
        # whose delegate sets AllowDynamicTensors, a kernel that compiles in its shapes, and
        # shapes known only at invoke, or export given shapes other than the model's)
        summary["subgraphs"].append({"subgraph": si, "nodes": rec["nodes"], "claimed": len(claimed),
                                     "partitions": rec["partitions"],
                                     "native_claimed": len(claimed) - len(at_invoke) - len(at_construction)
                                     - len(in_callee),
                                     "left_at_invoke": at_invoke, "left_at_construction": at_construction,
                                     "left_in_callee": in_callee,
                                     "fixed_across_resize": fixed_across_resize})
    # programs: the source, and the device's binary (loaded first; the source when the
    # runtime refuses it, litecl_delegate.c ``program``)
    prog_c, bins = [], []
    for source, (k, name) in programs.items():
        binary = None
        try:  # built for this machine's architecture (LCL_PLAN.binary_arch)
            prg = build_program(dev, f"#define {arch_define(caps.arch)}\n{source}")
            binary = prg.get_info(cl.program_info.BINARIES)[0]
        except Exception:  # noqa: BLE001 (no binary: the delegate builds the source)
            binary = None
        if binary:
            bins.append(f"static const unsigned char BIN{k}[{len(binary)}] = {_c_bytes(binary)};")
        prog_c.append(f"{{{_q(name)}, {_c_string(source)},\n     {len(source.encode())}, "
                      f"{f'LCL_BIN(BIN{k}, {len(binary)})' if binary else 'NULL, 0'}}}")
    if bins:  # only a library for the exporting machine's architecture can load them: a cross
        # build leaves them out (an arm64 MoveNet library was 87% x86-64 binaries: a fresh user)
        macro = _ARCH_MACROS[caps.arch]
        bins = [f"#if defined({macro})", "#define LCL_BIN(b, n) b, n", *bins, "#else",
                "#define LCL_BIN(b, n) NULL, 0", "#endif"]
    row = launch_config(caps)
    mem = d.memory
    tested = [x for dist, prefixes in tested_versions().items() for v in prefixes for x in (dist, v)]
    refused = [x for row in refused_devices() for x in row]
    # what the loading device must have (litecl_delegate.c device_lacks refuses one without)
    code = [_COMMENTS.sub(" ", p) for p in programs]  # a comment naming "long" needs nothing
    uses = [k for k in ("fp16", "fp64", "int64") if any(_USES[k].search(p) for p in code)]
    text = "\n".join([
        f"/* litecl's native delegate plan for {_comment(os.path.basename(model))}: written by litecl export",
        f" * (backend/plan_c.py native_plan) for {_comment(caps.platform)}: {_comment(caps.name)}"
        f"{' (profile ' + caps.profile + ')' if caps.profile else ''}, target {target}. Do not edit. */",
        '#include "litecl_plan.h"', "",
        *bins, *blobs, "",
        f"const int32_t LCL_INTS[{max(1, len(ints))}] = {{{', '.join(map(str, ints)) or '0'}}};",
        *type_tables_c(), *_op_names_c(),
        "/* (distribution, version prefix): the LiteRT / TensorFlow versions the structs were checked",
        " * against (backend/abi.py TESTED); tflite_plugin_create_delegate refuses any other */",
        "/* ops/tiling.py LAUNCH: (local_size, groups_per_cu) of \"cpu\", then \"gpu\" */",
        f"static const int32_t TYPE_ROWS[4] = {{{', '.join(str(v) for k in ('cpu', 'gpu') for v in (LAUNCH[k].local_size, LAUNCH[k].groups_per_cu))}}};",
        f"static const char *const TESTED[{max(1, len(tested))}] = {{{', '.join(map(_q, tested)) or 'NULL'}}};",
        "/* (platform, device, driver version, why): this machine's devices whose compiler failed",
        " * litecl's probe (device.py probe_compiler); the delegate never picks them */",
        f"static const char *const REFUSED[{max(1, len(refused))}] = {{{', '.join(map(_q, refused)) or 'NULL'}}};",
        "const lcl_program LCL_PROGRAMS[] = {\n    " + (",\n    ".join(prog_c) or '{"", "", 0, NULL, 0}')
        + "\n};",
        "const lcl_launch LCL_LAUNCHES[] = {\n    " + (",\n    ".join(launches_c) or
                                                    "{0, 1, 0, {0, 0}, {0, 0}, {0, 0}, {0, 0}, 0, {0, 0}, -1}") + "\n};",
        "const lcl_partition LCL_PARTITIONS[] = {\n    " + (",\n    ".join(parts_c) or "{{0, 0}, 0, 0}")
        + "\n};",
        "const lcl_family LCL_FAMILIES[] = {\n    " + (",\n    ".join(v[1] for v in families.values()) or
                                                  '{"", 0, 0, 1, {0, 0}, 0, {NULL, NULL}, {0, 0}, {NULL, NULL}, 0, 0}')
        + "\n};",
        "const lcl_subgraph LCL_SUBGRAPHS[] = {\n    " + (",\n    ".join(subs_c) or
                                                      "{{0, 0}, {0, 0}, 0, 0, 0, 0}") + "\n};",
        "const lcl_plan_info LCL_PLAN = {",
        f"    {_q(library)}, {_q(caps.platform)}, {_q(caps.name)},",
        f"    {_q(os.path.basename(model))}, {_q(_version())}, {_q(target)},",
        f"    {int(mem.in_place)}, {int(mem.align or 0)},",
        f"    {row.local_size}, {row.groups_per_cu}, {row.vec_bytes}, {row.group_bytes}, {caps.compute_units}, "
        f"{caps.max_work_group_size},",
        f"    {len(subs_c)}, {len(prog_c)}, PACKED, LCL_N_PACKED, SIZES, LCL_N_SIZES,",
        f"    {int(flags)}, TESTED, {len(tested) // 2},",
        f"    {', '.join(str(int(k in uses)) for k in ('fp16', 'fp64', 'int64'))}, "
        f"{needs['local']}, {float(needs['alloc'])!r},",
        f"    {len(families)}, {_q(caps.arch)}, REFUSED, {len(refused) // 4}, TYPE_ROWS",
        "};", ""])
    summary.update(programs=len(prog_c), binaries=len(bins), launches=len(launches_c), delegate_flags=int(flags),
                   needs=uses,
                   tested_versions=tested_versions(), refused_devices=[list(r) for r in refused_devices()])
    return text, summary


def _op_names_c() -> list[str]:
    """LCL_OP_NAMES (each builtin operator's name by its code, from the installed LiteRT's
    schema: the native delegate's messages name a node's operator, e.g. "a QUANTIZE node",
    not "builtin operator 114") and LCL_N_OP_NAMES: C lines."""
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    codes = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}
    names = [codes.get(i, "") for i in range(max(codes) + 1)]
    return [f"const char *const LCL_OP_NAMES[{len(names)}] = {{{', '.join(_q(n) for n in names)}}};",
            f"const int32_t LCL_N_OP_NAMES = {len(names)};"]


def refused_devices() -> list[tuple[str, str, str, str]]:
    """(platform, device, driver version, the probe's error) of each OpenCL device of this
    machine whose compiler fails litecl's probe (device.py probe_compiler): plan.c's REFUSED,
    which the native delegate never picks. pip's PoCL 3.0 on AMD Zen 4 fails the probe with
    an error, and aborts the process building litecl's CAST kernels (LLVM "Cannot select")."""
    from .device import _all_devices, probe_compiler  # noqa: PLC0415

    out = []
    for d in _all_devices():
        why = probe_compiler(d)
        if why:
            out.append((d.platform.name.strip(), d.name.strip(), d.driver_version.strip(), why.splitlines()[0][:200]))
    return out


#: what a kernel's text uses that a device may lack (litecl_delegate.c device_lacks)
_USES = {"fp16": re.compile(r"cl_khr_fp16 : enable"), "fp64": re.compile(r"cl_khr_fp64 : enable"),
         "int64": re.compile(r"\bu?long\d*\b")}
_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
#: the compiler's macro of each FLOAT_ADD_RULES architecture (LCL_ARCH in litecl_delegate.c)
_ARCH_MACROS = {"x86_64": "__x86_64__", "aarch64": "__aarch64__"}


def _arch_texts(plan, nodes, sg, shapes, caps, keep, consts, fuse) -> list[str]:
    """Per launch of ``plan`` (planned on ``caps``): its program text for every
    architecture of ops/add.py FLOAT_ADD_RULES (``arch_source``: LiteRT's float ADD bits
    differ between x86-64 and aarch64, and the native delegate runs where LiteRT does, not
    where it was exported). Raises InputError if another architecture's plan launches
    other kernels (it never should: only kernel text depends on it)."""
    from .kernels import plan_partition  # noqa: PLC0415
    from .ops.add import FLOAT_ADD_RULES, arch_source  # noqa: PLC0415

    texts = {}
    for arch in FLOAT_ADD_RULES:
        other = plan if arch == caps.arch else plan_partition(
            nodes, sg, shapes, replace(caps, arch=arch), keep=keep, constants=consts, fuse=fuse)
        if [(ln.name, ln.nodes) for ln in other.launches] != [(ln.name, ln.nodes) for ln in plan.launches]:
            raise InputError(f"nodes {[n.index for n in nodes]}: the {arch} plan launches other kernels")
        texts[arch] = [ln.source for ln in other.launches]
    return [arch_source({a: t[i] for a, t in texts.items()}) for i in range(len(plan.launches))]


def _version() -> str:
    from . import __version__  # noqa: PLC0415

    return __version__
