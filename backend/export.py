"""``litecl export``: every kernel a model runs, with its launch values, as files an app
can use without litecl, plus a plain C99 host program that runs them.

What is exported is what an allocated Executor (backend/executor.py) launches: in
execution order, each lowered node's kernel or fused group's kernel, with the argument
values (``kernel_args()`` of its former/tail plan, ops/tiling.py), global and local size,
and the constant operands it reads. Nodes computed once at allocate (``folded``: all
inputs constant) are exported as ordinary launches marked ``"folded": true``. The
Executor's state is read in one place, ``executor_plan``, so that a change of the
Executor's internals needs one adapted function.

Files written to ``DIR``:

- ``manifest.json`` (fields in README's "Using the kernels in your app");
- ``kNNN_<kernel>.cl``: one OpenCL C file per distinct kernel source;
- ``t<index>.bin``: each constant operand, raw little-endian;
- ``litecl_run.c``, ``litecl_model.h``, ``litecl_model.c``: the C host (OpenCL 1.2 C API
  only; the launch table, kernel sources and constants are C data in litecl_model.c, so
  nothing is parsed at run time). Build: ``cc -O2 -o DIR/run DIR/*.c -lOpenCL``; run:
  ``DIR/run IN_DIR OUT_DIR``.

``target`` ("gpu" or "cpu") picks the LAUNCH row and code path of that device type
(``Caps.is_gpu``) whatever the device is: the generators take capabilities as data, so
``target="gpu", device="pocl:profile=mobile"`` gives the mobile-GPU kernels on a laptop,
built and verified on PoCL.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from .errors import InputError, LiteclError

__all__ = ["Step", "Plan", "executor_plan", "build_manifest", "export", "target_device", "TARGETS",
           "PLACEMENTS"]

TARGETS = ("gpu", "cpu")
PLACEMENTS = ("all", "auto")  # Interpreter(placement=...)
#: manifest.json's "format": bumped when a field changes meaning
FORMAT = "litecl-export-1"
#: the kernels' trailing scalar parameters (ops/codegen.py TILING_PARAMS), all OpenCL uint
_SCALAR_CTYPE = "uint"


@dataclass(frozen=True)
class Step:
    """One kernel launch of an Executor, in execution order.

    kind: "kernel" (one node) or "fused" (a group of nodes, ops/fusion.py); nodes: the
    node indices it implements; source/name: OpenCL C and kernel name; inputs/outputs: the
    tensor indices of its buffer parameters in order (inputs first, then outputs);
    tiling: (n, former_num, former_len, tail_len), the uint parameters after the buffers;
    gsize/lsize: 1-D NDRange; what: a description; folded: computed once at allocate.
    """

    kind: str
    nodes: tuple
    source: str
    name: str
    inputs: tuple
    outputs: tuple
    tiling: tuple
    gsize: tuple
    lsize: tuple
    what: str
    folded: bool = False


@dataclass(frozen=True)
class Plan:
    """What an export needs from an allocated Executor.

    sg: the model.Subgraph (tensors' .name/.dtype/.data, nodes' .op); caps: the Caps the
    kernels were generated for (``Executor.caps``); shapes: tensor -> planned shape of
    every tensor a step touches; steps: the launches in execution order.
    """

    sg: object
    caps: object
    shapes: dict
    steps: list


def executor_plan(ex) -> Plan:
    """The launches of an allocated Executor ``ex`` in execution order, with what they touch.

    The one place that reads the Executor's internals: ``_steps`` (("k", node) for lowered
    nodes), ``_kernels[node]`` (.spec .source/.name/.what, .tiling.kernel_args(), .gsize,
    .lsize), ``_groups`` / ``_member`` (fused groups by leader: .nodes, .inputs, .outputs,
    .source, .tiling, .gsize, .lsize), ``folded``, ``shapes``, ``caps`` and ``sg``.
    Raises LiteclError when ``ex`` is not allocated.
    """
    if not ex.allocated:
        raise LiteclError("export needs an allocated Executor (allocate_tensors first)")
    sg = ex.sg
    out = []
    for kind, i in ex._steps:
        if kind != "k":
            continue
        lead = ex._member.get(i)
        if lead is not None:
            if lead != i:
                continue  # launched with its group's leader
            g = ex._groups[lead]
            ops = ", ".join(f"{sg.nodes[j].op} {j}" for j in g.nodes)
            out.append(Step("fused", tuple(g.nodes), g.source, "litecl_fused", tuple(g.inputs),
                            tuple(g.outputs), tuple(int(v) for v in g.tiling.kernel_args()),
                            tuple(g.gsize), tuple(g.lsize), f"fused: {ops}"))
            continue
        k = ex._kernels[i]
        n = sg.nodes[i]
        out.append(Step("kernel", (i,), k.spec.source, k.spec.name, tuple(n.inputs),
                        (n.outputs[0],), tuple(int(v) for v in k.tiling.kernel_args()),
                        tuple(k.gsize), tuple(k.lsize), k.spec.what, i in ex.folded))
    touched = {t for st in out for t in (*st.inputs, *st.outputs)}
    return Plan(sg, ex.caps, {t: tuple(int(d) for d in ex.current_shapes()[t]) for t in touched}, out)


def target_device(device, target: str | None):
    """``device`` (a litecl Device) as a device of type ``target``: its caps with
    ``is_gpu`` set, so ops/tiling.py's LAUNCH row and the generators' code path are those
    of that type; the context and queue stay the real device's (kernels are built and run
    there). ``nontemporal`` (streaming stores) is probed on CPU devices only, so a GPU
    target has none. None: the device as it is. Raises InputError for another target."""
    from .device import Device  # noqa: PLC0415

    if target is None:
        return device
    if target not in TARGETS:
        raise InputError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    gpu = target == "gpu"
    if device.caps.is_gpu == gpu:
        return device
    caps = replace(device.caps, is_gpu=gpu, nontemporal=device.caps.nontemporal and not gpu)
    return Device(device.device, device.context, device.queue, caps)


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _caps_json(caps) -> dict:
    keep = ("platform", "name", "vendor", "driver", "fp16", "fp64", "int64", "compute_units",
            "max_work_group_size", "is_gpu", "strict_compiler", "profile", "nontemporal",
            "mem_base_addr_align")
    return {k: getattr(caps, k) for k in keep}


def build_manifest(plan: Plan, *, model: str, signature, target: str,
                   placement: str = "all") -> tuple[dict, dict]:
    """(manifest dict, {source: file name}) for an Executor's ``plan``."""
    from . import __version__  # noqa: PLC0415
    from .ops.tiling import launch_config  # noqa: PLC0415

    sg, steps = plan.sg, plan.steps
    written = {t for s in steps for t in s.outputs}
    touched = list(dict.fromkeys([t for s in steps for t in (*s.inputs, *s.outputs)]))
    files: dict[str, str] = {}
    for s in steps:
        if s.source not in files:
            files[s.source] = f"k{len(files):03d}_{s.name}.cl"
    tensors = []
    for t in sorted(touched):
        tt = sg.tensors[t]
        shape = list(plan.shapes[t])
        if tt.data is not None:
            role = "constant"
        elif t in written:
            role = "written"
        else:
            role = "input"
        entry = {"index": t, "name": tt.name, "dtype": tt.dtype.name, "shape": shape,
                 "elements": _numel(shape), "bytes": _numel(shape) * tt.dtype.itemsize, "role": role}
        if role == "constant":
            entry["file"] = f"t{t}.bin"
        tensors.append(entry)
    launches = []
    from .ops.codegen import TILING_PARAMS  # noqa: PLC0415

    for s in steps:
        args = []
        for t in (*s.inputs, *s.outputs):
            kind = "constant" if sg.tensors[t].data is not None else "buffer"
            a = {"kind": kind, "tensor": t, "elements": _numel(plan.shapes[t]),
                 "access": "write" if t in s.outputs else "read"}
            if kind == "constant":
                a["file"] = f"t{t}.bin"
            args.append(a)
        for name, v in zip(TILING_PARAMS, s.tiling):
            args.append({"kind": "scalar", "name": name, "ctype": _SCALAR_CTYPE, "value": v})
        launches.append({
            "kernel": s.name, "source": files[s.source], "build_options": "",
            "kind": s.kind, "what": s.what, "folded": s.folded,
            "nodes": [{"index": i, "op": sg.nodes[i].op} for i in s.nodes],
            "args": args, "global_size": list(s.gsize), "local_size": list(s.lsize),
            "reads": list(dict.fromkeys(s.inputs)), "writes": list(s.outputs),
        })
    caps = plan.caps
    manifest = {
        "format": FORMAT,
        "litecl_version": __version__,
        "model": model,
        "signature": signature,
        "subgraph": sg.index,
        "target": target,
        "device": {"platform": caps.platform, "name": caps.name, "profile": caps.profile or None},
        "caps": _caps_json(caps),
        "launch_row": asdict(launch_config(caps)),
        "placement": placement,
        "lowered_nodes": sorted(i for s in steps for i in s.nodes),
        "tensors": tensors,
        "inputs": [t["index"] for t in tensors if t["role"] == "input"],
        "outputs": [t["index"] for t in tensors if t["role"] == "written"],
        "launches": launches,
    }
    return manifest, files


def _c_string(text: str) -> str:
    """A C string literal (one source line per literal line) for ``text``."""
    out = []
    for line in text.splitlines(keepends=True):
        esc = []
        for ch in line:
            o = ord(ch)
            if ch == "\\":
                esc.append("\\\\")
            elif ch == '"':
                esc.append('\\"')
            elif ch == "\n":
                esc.append("\\n")
            elif ch == "\t":
                esc.append("\\t")
            elif 32 <= o < 127 and ch != "?":  # '?' could form a trigraph
                esc.append(ch)
            else:
                for b in ch.encode("utf-8"):
                    esc.append(f"\\{b:03o}")
        out.append('    "' + "".join(esc) + '"')
    return "\n".join(out) if out else '    ""'


def _split_lines(text: str, limit: int) -> list[str]:
    """``text`` cut at line ends into pieces of at most ``limit`` characters where lines
    allow (a longer line is cut inside); joined they give ``text``; at least one piece."""
    parts, cur = [], ""
    for line in text.splitlines(keepends=True):
        while len(line) > limit:
            if cur:
                parts.append(cur)
                cur = ""
            parts.append(line[:limit])
            line = line[limit:]
        if len(cur) + len(line) > limit:
            parts.append(cur)
            cur = ""
        cur += line
    if cur or not parts:
        parts.append(cur)
    return parts


def _c_bytes(data: bytes) -> str:
    rows = []
    for i in range(0, len(data), 24):
        rows.append("    " + ",".join(f"0x{b:02x}" for b in data[i:i + 24]))
    return ",\n".join(rows)


_HEADER = """\
/* Generated by litecl export: the launch table of litecl_run.c (see manifest.json). */
#ifndef LITECL_MODEL_H
#define LITECL_MODEL_H

#include <stddef.h>

enum { LITECL_INPUT = 0, LITECL_CONSTANT = 1, LITECL_WRITTEN = 2 };
enum { LITECL_ARG_BUFFER = 0, LITECL_ARG_UINT = 1 };

typedef struct {
    int index;                  /* tensor index in the model's subgraph */
    const char *name;
    size_t bytes;               /* element count x itemsize */
    int role;                   /* LITECL_INPUT, LITECL_CONSTANT or LITECL_WRITTEN */
    const unsigned char *data;  /* LITECL_CONSTANT: its bytes (little-endian) */
} litecl_tensor;

typedef struct {
    int kind;                   /* LITECL_ARG_BUFFER: tensor slot; LITECL_ARG_UINT: value */
    int tensor;                 /* position in litecl_tensors */
    unsigned int value;
} litecl_arg;

typedef struct {
    int source;                 /* position in litecl_sources */
    const char *kernel;
    int num_args;
    const litecl_arg *args;
    size_t global_size;         /* 1-D NDRange: work-groups x local size */
    size_t local_size;
} litecl_launch;

extern const char *const *const litecl_sources[];  /* each: litecl_source_parts[i] strings */
extern const int litecl_source_parts[];
extern const char *const litecl_source_files[];
extern const int litecl_num_sources;
extern const litecl_tensor litecl_tensors[];
extern const int litecl_num_tensors;
extern const litecl_launch litecl_launches[];
extern const int litecl_num_launches;

#endif
"""

_RUN_C = r"""/* Generated by litecl export. A self-contained C99 host for the kernels of one model.
 *
 * Build: cc -O2 -o DIR/run with every .c file of DIR and -lOpenCL (any ICD loader, OpenCL 1.2 API)
 * Run:   DIR/run IN_DIR OUT_DIR
 *   reads IN_DIR/t<index>.bin (raw little-endian) for every tensor the kernels read that
 *   no kernel writes and that is not a stored constant, runs every launch in order on the
 *   first OpenCL device (or the first whose platform or device name contains
 *   $LITECL_RUN_DEVICE, case-insensitive), and writes OUT_DIR/t<index>.bin for every
 *   tensor the kernels write. A launch whose element count n is 0 is not enqueued. When a
 *   kernel's local size exceeds what the device allows for it, the local size is lowered
 *   and the work-group count kept (the kernels stride by their local size).
 * Errors: one line on stderr, exit status 1 (2 for bad arguments).
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "litecl_model.h"

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "litecl_run: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

#define CHECK(call, what) do { cl_int e_ = (call); if (e_ != CL_SUCCESS) fail("%s failed (OpenCL error %d)", what, (int)e_); } while (0)

static int contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle), i, j;
    for (i = 0; hay[i]; i++) {
        for (j = 0; j < n && hay[i + j]; j++)
            if (tolower((unsigned char)hay[i + j]) != tolower((unsigned char)needle[j])) break;
        if (j == n) return 1;
    }
    return n == 0;
}

static cl_device_id pick_device(void)
{
    cl_platform_id plats[64];
    cl_uint np = 0, p;
    const char *want = getenv("LITECL_RUN_DEVICE");
    if (clGetPlatformIDs(64, plats, &np) != CL_SUCCESS || np == 0)
        fail("no OpenCL platform found");
    if (np > 64) np = 64;
    for (p = 0; p < np; p++) {
        cl_device_id devs[64];
        cl_uint nd = 0, d;
        char pname[512] = "";
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS) continue;
        if (nd > 64) nd = 64;
        clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof pname - 1, pname, NULL);
        for (d = 0; d < nd; d++) {
            char dname[512] = "";
            clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
            if (!want || contains_ci(pname, want) || contains_ci(dname, want)) return devs[d];
        }
    }
    fail("no OpenCL device matches LITECL_RUN_DEVICE=%s", want ? want : "");
    return NULL;
}

static char *path_of(const char *dir, int index)
{
    size_t n = strlen(dir) + 32;
    char *p = (char *)malloc(n);
    if (!p) fail("out of memory");
    sprintf(p, "%s/t%d.bin", dir, index);
    return p;
}

static unsigned char *read_input(const char *dir, const litecl_tensor *t)
{
    char *path = path_of(dir, t->index);
    FILE *f = fopen(path, "rb");
    unsigned char *buf = (unsigned char *)malloc(t->bytes ? t->bytes : 1);
    size_t got;
    if (!f) fail("cannot open input %s (tensor %d %s)", path, t->index, t->name);
    if (!buf) fail("out of memory reading %s (%lu bytes)", path, (unsigned long)t->bytes);
    got = fread(buf, 1, t->bytes, f);
    if (got != t->bytes || fgetc(f) != EOF)
        fail("%s must hold exactly %lu bytes (tensor %d %s)", path, (unsigned long)t->bytes, t->index, t->name);
    fclose(f);
    free(path);
    return buf;
}

int main(int argc, char **argv)
{
    const unsigned int one = 1;
    cl_device_id dev;
    cl_context ctx;
    cl_command_queue q;
    cl_program *progs;
    cl_mem *mems;
    cl_int err;
    int i, k;

    if (argc != 3) {
        fprintf(stderr, "usage: %s IN_DIR OUT_DIR\n", argv[0]);
        return 2;
    }
    if (*(const unsigned char *)&one != 1) fail("this host is big-endian; the tensor files are little-endian");
    dev = pick_device();
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CHECK(err, "clCreateContext");
    q = clCreateCommandQueue(ctx, dev, 0, &err);
    CHECK(err, "clCreateCommandQueue");

    progs = (cl_program *)calloc((size_t)litecl_num_sources + 1, sizeof *progs);
    mems = (cl_mem *)calloc((size_t)litecl_num_tensors + 1, sizeof *mems);
    if (!progs || !mems) fail("out of memory");
    /* inputs first: a missing or short file is reported before any compile */
    for (i = 0; i < litecl_num_tensors; i++) {
        const litecl_tensor *t = &litecl_tensors[i];
        size_t size = t->bytes ? t->bytes : 1;
        if (t->role == LITECL_WRITTEN || t->bytes == 0) {
            mems[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, size, NULL, &err);
        } else {
            unsigned char *data = t->role == LITECL_INPUT ? read_input(argv[1], t) : (unsigned char *)t->data;
            mems[i] = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, size, data, &err);
            if (t->role == LITECL_INPUT) free(data);
        }
        CHECK(err, "clCreateBuffer");
    }
    for (i = 0; i < litecl_num_sources; i++) {
        progs[i] = clCreateProgramWithSource(ctx, (cl_uint)litecl_source_parts[i], (const char **)litecl_sources[i],
                                             NULL, &err);
        CHECK(err, "clCreateProgramWithSource");
        if (clBuildProgram(progs[i], 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
            size_t n = 0;
            char *log, *line, *e;
            clGetProgramBuildInfo(progs[i], dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &n);
            log = (char *)calloc(n + 1, 1);
            if (log) clGetProgramBuildInfo(progs[i], dev, CL_PROGRAM_BUILD_LOG, n, log, NULL);
            line = log ? log : (char *)"";
            e = log ? strstr(log, "error") : NULL;
            if (e) { while (e > log && e[-1] != '\n') e--; line = e; }
            if ((e = strchr(line, '\n')) != NULL) *e = 0;
            fprintf(stderr, "litecl_run: building %s failed: %.300s\n", litecl_source_files[i], line);
            return 1;
        }
    }
    for (k = 0; k < litecl_num_launches; k++) {
        const litecl_launch *l = &litecl_launches[k];
        cl_kernel kern = clCreateKernel(progs[l->source], l->kernel, &err);
        size_t local = l->local_size, groups = l->global_size / l->local_size, max_local = 0, global;
        unsigned int n = 0;
        int seen_scalar = 0;
        if (err != CL_SUCCESS) fail("clCreateKernel %s failed (OpenCL error %d)", l->kernel, (int)err);
        for (i = 0; i < l->num_args; i++) {
            const litecl_arg *a = &l->args[i];
            if (a->kind == LITECL_ARG_BUFFER) {
                CHECK(clSetKernelArg(kern, (cl_uint)i, sizeof(cl_mem), &mems[a->tensor]), "clSetKernelArg");
            } else {
                cl_uint v = a->value;
                if (!seen_scalar) { n = v; seen_scalar = 1; }  /* the first scalar: element count n */
                CHECK(clSetKernelArg(kern, (cl_uint)i, sizeof(cl_uint), &v), "clSetKernelArg");
            }
        }
        if (n > 0) {
            CHECK(clGetKernelWorkGroupInfo(kern, dev, CL_KERNEL_WORK_GROUP_SIZE, sizeof max_local, &max_local, NULL),
                  "clGetKernelWorkGroupInfo");
            if (max_local > 0 && local > max_local) local = max_local;
            global = groups * local;
            err = clEnqueueNDRangeKernel(q, kern, 1, NULL, &global, &local, 0, NULL, NULL);
            if (err != CL_SUCCESS) fail("launch %d (%s) failed (OpenCL error %d)", k, l->kernel, (int)err);
        }
        clReleaseKernel(kern);
    }
    CHECK(clFinish(q), "clFinish");
    for (i = 0; i < litecl_num_tensors; i++) {
        const litecl_tensor *t = &litecl_tensors[i];
        unsigned char *buf;
        char *path;
        FILE *f;
        if (t->role != LITECL_WRITTEN) continue;
        buf = (unsigned char *)malloc(t->bytes ? t->bytes : 1);
        if (!buf) fail("out of memory (%lu bytes)", (unsigned long)t->bytes);
        if (t->bytes)
            CHECK(clEnqueueReadBuffer(q, mems[i], CL_TRUE, 0, t->bytes, buf, 0, NULL, NULL), "clEnqueueReadBuffer");
        path = path_of(argv[2], t->index);
        f = fopen(path, "wb");
        if (!f) fail("cannot write %s (tensor %d %s)", path, t->index, t->name);
        if (fwrite(buf, 1, t->bytes, f) != t->bytes || fclose(f) != 0) fail("cannot write %s", path);
        free(path);
        free(buf);
    }
    for (i = 0; i < litecl_num_tensors; i++) clReleaseMemObject(mems[i]);
    for (i = 0; i < litecl_num_sources; i++) clReleaseProgram(progs[i]);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
"""


def model_c(manifest: dict, files: dict[str, str], constants: dict[int, bytes]) -> str:
    """litecl_model.c: the manifest's sources, tensors (constants' bytes) and launches as
    C data for litecl_run.c."""
    out = ['/* Generated by litecl export from manifest.json: do not edit. */',
           '#include "litecl_model.h"', ""]
    srcs = list(files.items())
    for i, (src, _) in enumerate(srcs):
        # ISO C99 compilers need take only 4095 characters per string literal: a source is
        # passed to clCreateProgramWithSource as several strings, which it concatenates
        parts = _split_lines(src, 3000)
        out.append(f"static const char *const source_{i}[] = {{\n"
                   + ",\n".join(_c_string(part) for part in parts) + "\n};")
    out.append("const char *const *const litecl_sources[] = {"
               + ", ".join(f"source_{i}" for i in range(len(srcs))) + (", 0" if not srcs else "") + "};")
    out.append("const int litecl_source_parts[] = {"
               + ", ".join(str(len(_split_lines(src, 3000))) for src, _ in srcs) + (", 0" if not srcs else "") + "};")
    out.append("const char *const litecl_source_files[] = {"
               + ", ".join(json.dumps(f) for _, f in srcs) + (", 0" if not srcs else "") + "};")
    out.append(f"const int litecl_num_sources = {len(srcs)};")
    slot = {}
    rows = []
    role = {"input": "LITECL_INPUT", "constant": "LITECL_CONSTANT", "written": "LITECL_WRITTEN"}
    for j, t in enumerate(manifest["tensors"]):
        slot[t["index"]] = j
        data = "0"
        if t["role"] == "constant" and t["bytes"]:
            out.append(f"static const unsigned char const_{t['index']}[] = {{\n{_c_bytes(constants[t['index']])}}};")
            data = f"const_{t['index']}"
        rows.append(f"    {{{t['index']}, {_c_string(t['name']).strip()}, {t['bytes']}u, {role[t['role']]}, {data}}}")
    out.append("const litecl_tensor litecl_tensors[] = {\n" + ",\n".join(rows or ["    {0, 0, 0, 0, 0}"]) + "\n};")
    out.append(f"const int litecl_num_tensors = {len(rows)};")
    src_index = {f: i for i, (_, f) in enumerate(srcs)}
    lrows = []
    for k, ln in enumerate(manifest["launches"]):
        args = []
        for a in ln["args"]:
            if a["kind"] == "scalar":
                args.append(f"{{LITECL_ARG_UINT, 0, {int(a['value'])}u}}")
            else:
                args.append(f"{{LITECL_ARG_BUFFER, {slot[a['tensor']]}, 0u}}")
        out.append(f"static const litecl_arg args_{k}[] = {{{', '.join(args)}}};")
        lrows.append(f"    {{{src_index[ln['source']]}, {json.dumps(ln['kernel'])}, {len(args)}, args_{k}, "
                     f"{ln['global_size'][0]}u, {ln['local_size'][0]}u}}")
    out.append("const litecl_launch litecl_launches[] = {\n" + ",\n".join(lrows or ["    {0, 0, 0, 0, 0, 0}"]) + "\n};")
    out.append(f"const int litecl_num_launches = {len(lrows)};")
    return "\n".join(out) + "\n"


def _open_graph(model: str, device, signature, fuse: bool, placement: str = "all"):
    """(Interpreter, allocated Executor, signature key or None) for ``model``."""
    from .interpreter import Interpreter  # noqa: PLC0415

    interp = Interpreter(model_path=model, device=device, fuse=fuse, placement=placement)
    try:
        return _allocate(interp, model, device, signature, fuse)
    except BaseException:
        interp.close()
        raise


def _allocate(interp, model: str, device, signature, fuse: bool):
    if signature is not None:
        sigs = interp.get_signature_list()
        if signature not in sigs:
            raise InputError(f"unknown signature {signature!r}; the model has {sorted(sigs) or 'none'}")
        interp.get_signature_runner(signature).allocate_tensors()
        si = next(s.subgraph for s in interp._model.signatures if s.key == signature)
    else:
        if not interp._model.subgraphs[0].inputs and interp.get_signature_list():
            signature = next(iter(interp.get_signature_list()))  # as `litecl run` picks
            return _allocate(interp, model, device, signature, fuse)
        interp.allocate_tensors()
        si = 0
    return interp, interp._graph(si).ex, signature


def export(model: str, out_dir: str, *, device=None, target: str | None = None,
           signature: str | None = None, placement: str = "all", fuse: bool = True) -> dict:
    """Write the kernels of ``model`` (a .tflite path) to ``out_dir`` and return the manifest.

    device: a spec or litecl Device (default ``LITECL_DEVICE`` / auto); target: "gpu" or
    "cpu" (default: the device's type), see ``target_device``; signature: run that
    signature's subgraph (default subgraph 0, or the first signature when subgraph 0 has no
    inputs); placement: "all" (every node litecl can lower runs on OpenCL) or "auto" (only
    what the cost model puts there: backend/placement.py); fuse: as the
    Interpreter's. ``out_dir`` is created if missing; files of an earlier export there
    (``k*.cl``, ``t*.bin``) are removed first. A model with no lowered node gives an empty
    ``launches`` list (and no C host).

    Raises InputError (bad target, placement, signature, an out_dir that is a file or not
    writable), ModelError / litecl errors from loading and allocating the model.
    """
    from .device import open_device  # noqa: PLC0415

    if placement not in PLACEMENTS:
        raise InputError(f"unknown placement {placement!r}; expected one of {', '.join(PLACEMENTS)}")
    if target is not None and target not in TARGETS:
        raise InputError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"cannot export to {out_dir}: it is not a folder")
    if not os.path.isfile(model):
        raise InputError(f"model file not found: {model}" if not os.path.exists(model)
                         else f"cannot read model {model}: not a file")
    dev = target_device(open_device(device), target)
    interp, ex, signature = _open_graph(model, dev, signature, fuse, placement)
    try:
        plan = executor_plan(ex)
        steps = plan.steps
        manifest, files = build_manifest(plan, model=os.path.abspath(model), signature=signature,
                                         target="gpu" if dev.caps.is_gpu else "cpu", placement=placement)
        tensors = plan.sg.tensors
        constants = {t["index"]: np.ascontiguousarray(tensors[t["index"]].data).astype(
                     tensors[t["index"]].dtype.np.newbyteorder("<"), copy=False).tobytes()
                     for t in manifest["tensors"] if t["role"] == "constant"}
    finally:
        interp.close()
    if not steps:
        manifest["note"] = "no node of this model is lowered to OpenCL: nothing to export"
    try:
        out.mkdir(parents=True, exist_ok=True)
        for old in (*out.glob("k[0-9][0-9][0-9]_*.cl"), *out.glob("t[0-9]*.bin"),
                    *(out / f for f in ("litecl_run.c", "litecl_model.c", "litecl_model.h"))):
            if old.is_file():
                old.unlink()
        for src, name in files.items():
            (out / name).write_text(src)
        for t, data in constants.items():
            (out / f"t{t}.bin").write_bytes(data)
        if steps:
            (out / "litecl_model.h").write_text(_HEADER)
            (out / "litecl_model.c").write_text(model_c(manifest, files, constants))
            (out / "litecl_run.c").write_text(_RUN_C)
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    except OSError as e:
        raise InputError(f"cannot write to {out_dir}: {e.strerror or e}") from None
    return manifest

