"""Kernel plans of a delegated partition, and the programs that run them.

``plan_partition`` is pure: from the partition's nodes (lowering's node views), the
current tensor shapes and the device caps it returns the launches (generated source,
former/tail tiling, global and local size, which tensors each reads and writes) and the
output shapes. Running a plan decides nothing (backend/delegate.py binds memory and
enqueues). ``build_program`` turns a source into a program through the caches.
"""
from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, replace

import pyopencl as cl

from .cache import device_identity, forget_binary, load_binary, store_binary
from .device import build_binary, build_source
from .errors import InputError, KernelBuildError, LiteclError, PrepareError
from .lowering import kernel_spec, node_op, output_shapes
from .ops.tiling import launch as tiling_launch
from .ops.tiling import streams

__all__ = ["Launch", "PartitionPlan", "plan_partition", "build_program", "launch_geometry"]

# litecl reports build failures itself (KernelBuildError, reasons in placement()); pyopencl's
# warning about compiler chatter (Intel prints remarks) would only be noise
warnings.filterwarnings("ignore", category=cl.CompilerWarning)

_PROGRAMS: dict = {}
_KERNEL_NAME = re.compile(r"__kernel\s+void\s+(\w+)\s*\(")


def build_program(device, source: str) -> "cl.Program":
    """Build (or reuse) a program for ``source`` on ``device``.

    Built programs are cached per context in memory (each distinct source is built once
    per process), and their binaries on disk (backend/cache.py: a later process loads
    the binary, 1-2 ms instead of 80-115 ms on PoCL). Raises KernelBuildError with the
    build log.
    """
    key = (device.context.int_ptr, source)
    prg = _PROGRAMS.get(key)
    if prg is not None:
        return prg
    with device.exclusive():  # Oclgrind: two threads' builds at once broke its LLVM module
        prg = _PROGRAMS.get(key) or _build(device, source)
    _PROGRAMS[key] = prg
    return prg


def _build(device, source: str) -> "cl.Program":
    """build_program's build: from the binary cache, else from source (and cached)."""
    prg = None
    ident = device_identity(device.device)
    binary = load_binary(ident, source)
    if binary is not None:
        try:
            prg = build_binary(device.context, device.device, binary)
            have = set(prg.get_info(cl.program_info.KERNEL_NAMES).split(";"))
            if not set(_KERNEL_NAME.findall(source)) <= have:
                prg = None  # another program's binary (PoCL's binaries name an entry of its
                # own kernel cache, which can change under them): clCreateKernel failed
                # with INVALID_KERNEL_NAME on it
        except cl.Error:  # a binary this driver no longer takes: build from source
            prg = None
        if prg is None:
            forget_binary(ident, source)
    if prg is None:
        try:
            prg = build_source(device.context, source)  # caches checked, warnings quiet (device.py)
            try:
                store_binary(ident, source, prg.get_info(cl.program_info.BINARIES)[0])
            except cl.Error:
                pass  # a runtime that gives no binary: nothing to keep
        except cl.Error as e:  # RuntimeError subclasses carry the log in their text
            log = str(e)
            first = next((ln.strip() for ln in log.splitlines() if "error" in ln.lower()),
                         log.splitlines()[0] if log else "")
            raise KernelBuildError(f"kernel build failed on {device.caps.name}: {first[:200]}",
                                   source=source, log=log) from None
    return prg


def launch_geometry(caps, n: int, tile_bytes: int, block_dim: int | None = None):
    """(tiling, global size, local size) for ``n`` elements: ``ops.tiling.launch`` with the
    device type's measured ``LAUNCH`` row (local size, work-groups per compute unit)."""
    return tiling_launch(caps, n, tile_bytes, block_dim)


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a partition plan.

    nodes: the model's node indices it computes (several: a fused group); inputs,
    outputs: tensor indices of its buffer parameters, in order (then the tiling's four
    uint arguments, then ``args``: (name, int32 value) pairs); source/name: the program text (the cache
    key) and kernel name;
    tiling, gsize, lsize: former/tail plan and NDRange (ops/tiling.py); n: elements;
    what: a description for placement() and inspect; folded: every input is a constant
    (or folded), so it runs once per plan, not per invoke.
    """

    nodes: tuple
    inputs: tuple
    outputs: tuple
    source: str
    name: str
    tiling: object
    gsize: tuple
    lsize: tuple
    n: int
    what: str
    folded: bool = False
    args: tuple = ()  # ((name, int32 value), ...) after the tiling's four (KernelSpec.args)


@dataclass(frozen=True)
class PartitionPlan:
    """The launches of a partition, in order, and every tensor shape they produce."""

    launches: tuple
    shapes: dict  # tensor -> shape, inputs and every node output
    #: bytes the per-invoke launches read and write (folded ones run once): where the
    #: partition runs (delegate.py SMALL_PARTITION_BYTES)
    bytes_moved: int = 0


def _numel(shape) -> int:
    return math.prod(int(d) for d in shape)


def _caps_for(caps, sg, shapes, tensors):
    """caps with ``streaming`` when a kernel's footprint exceeds the device's cache
    (ops/tiling.py ``streams``)."""
    footprint = sum(_numel(shapes[t]) * sg.tensors[t].dtype.itemsize
                    for t in set(tensors) if t >= 0 and t in shapes)
    return replace(caps, streaming=True) if streams(caps, footprint) else caps


_PLANS: dict = {}
_MAX_PLANS = 4096


def plan_partition(nodes, sg, in_shapes: dict, caps, *, keep: set, constants: set,
                   fuse: bool = True, key=None) -> PartitionPlan:
    """``_plan_partition``, memoised on ``key`` (a hashable description of the nodes'
    semantics and tensor indices, from the caller) with the shapes, caps and options:
    the same partition at the same shapes plans once per process."""
    if key is None:
        return _plan_partition(nodes, sg, in_shapes, caps, keep=keep, constants=constants, fuse=fuse)
    k = (key, tuple(sorted(in_shapes.items())), frozenset(keep), frozenset(constants), caps, fuse)
    plan = _PLANS.get(k)
    if plan is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[k] = _kept_plan(getattr(sg, "kept", None), k, lambda: _plan_partition(
            nodes, sg, in_shapes, caps, keep=keep, constants=constants, fuse=fuse))
    return plan


def _kept_plan(kept, k: tuple, make) -> PartitionPlan:
    """``make()``'s plan, read from or added to ``kept`` (the Prepare's cache entry,
    claims._prepared; None: no cache) under plan_partition's memo key ``k`` (the entry's
    own key holds the caps, devices and deciding sources). A plan that raises is not kept."""
    if kept is None:
        return make()
    key, shapes, keep, constants, _, fuse = k
    pk = repr((key, shapes, sorted(keep), sorted(constants), fuse))
    plans = kept[1]["plans"]
    plan = plans.get(pk)
    if not isinstance(plan, PartitionPlan):
        plan = make()
        if len(plans) < KEPT_PLANS:
            from .claims import keep_prepared  # noqa: PLC0415

            plans[pk] = plan
            keep_prepared(kept)
    return plan


#: The plans a Prepare's cache entry keeps (its partitions at the shapes they ran at): a
#: model resized to ever new shapes would rewrite an ever larger entry at each one
KEPT_PLANS = 64


def _plan_partition(nodes, sg, in_shapes: dict, caps, *, keep: set, constants: set,
                    fuse: bool = True) -> PartitionPlan:
    """Plan the kernels of one delegated partition.

    nodes: node views (lowering's Node) in execution order; sg: the tensor view
    (``sg.tensors[t]``); in_shapes: shape of every tensor the partition reads from
    outside; keep: tensors something outside the partition reads (LiteRT's partition
    outputs; with experimental_preserve_all_tensors every output); constants: tensors
    whose value is fixed (read-only constants). Consecutive nodes over one output shape
    become one fused kernel (ops/fusion.py) when ``fuse``.
    Raises PrepareError for shapes a node refuses (ADD inputs that do not broadcast),
    InputError for shapes the kernels refuse (a resize), KernelBuildError from fusion
    never (a fused group that does not generate stays unfused).
    """
    shapes = dict(in_shapes)
    for n in nodes:
        try:
            outs = output_shapes(n, sg, [shapes[t] for t in n.inputs])
        except KeyError as e:
            raise InputError(f"node {n.index} ({n.op}): tensor {e} has no known shape") from None
        except ValueError as e:
            if isinstance(e, LiteclError):
                raise
            raise PrepareError(f"node {n.index} ({n.op}): {e}") from None
        for t, s in zip(n.outputs, outs):
            shapes[t] = tuple(int(d) for d in s)
    folded_t = set(constants)
    runs: list = []  # groups of nodes, each one launch
    run, shape, touched = [], None, set()
    for n in nodes:
        out = shapes[n.outputs[0]]
        if fuse and run and out == shape and not touched & set(n.outputs):
            run.append(n)
            touched.update(n.inputs, n.outputs)
            continue
        if run:
            runs.append(run)
        run, shape, touched = [n], out, set(n.inputs) | set(n.outputs)
    if run:
        runs.append(run)
    launches = []
    for run in runs:
        members = {n.index for n in run}
        needed = set(keep) | {t for n in nodes if n.index not in members for t in n.inputs}
        pieces = _fused(run, sg, shapes, caps, needed) if len(run) > 1 else None
        for launch in pieces or [_single(n, sg, shapes, caps) for n in run]:
            folded = all(t in folded_t for t in launch.inputs)
            if folded:
                folded_t.update(launch.outputs)
            launches.append(replace(launch, folded=folded))
    moved = sum(_numel(shapes[t]) * sg.tensors[t].dtype.itemsize
                for ln in launches if not ln.folded for t in (*ln.inputs, *ln.outputs) if t in shapes)
    return PartitionPlan(tuple(launches), shapes, moved)


def _single(n, sg, shapes, caps) -> Launch:
    ins = [shapes[t] for t in n.inputs]
    spec = kernel_spec(n, sg, ins, _caps_for(caps, sg, shapes, list(n.inputs) + list(n.outputs)))
    try:
        tiling, gsize, lsize = launch_geometry(caps, spec.n, spec.tile_bytes)
    except ValueError as e:  # more elements than the kernels' indices reach: the node cannot be
        # prepared at these shapes (a RuntimeError too, as LiteRT's allocate_tensors raises: an
        # InputError alone escaped an app's `except RuntimeError`, a fresh user's report)
        raise PrepareError(f"node {n.index} ({n.op}): {e}") from None
    return Launch((n.index,), tuple(n.inputs), (n.outputs[0],), spec.source, spec.name,
                  tiling, gsize, lsize, spec.n, spec.what, args=spec.args)


def _fused(run, sg, shapes, caps, keep: set):
    """One launch for ``run`` (nodes over one element space), or None when the fused
    kernel cannot be generated (each node then has its own)."""
    from .ops.fusion import FusedSpec, fused_kernel, fused_kernel_args  # noqa: PLC0415

    produced = {t: j for j, n in enumerate(run) for t in n.outputs}
    later_reads = set()
    inputs: list = []
    steps = []
    for j, n in enumerate(run):
        args = []
        for t in n.inputs:
            if t in produced and produced[t] < j:
                args.append(("t", produced[t]))
            else:
                if t not in inputs:
                    inputs.append(t)
                args.append(("in", inputs.index(t)))
        # named by position, not node index: equal groups elsewhere share the program
        steps.append((node_op(n, sg, [shapes[t] for t in n.inputs], caps, f"litecl_s{j}_op"),
                      tuple(args)))
        later_reads.update(n.inputs)
    outputs = [t for t in produced if t in keep]
    if not outputs:
        return None
    dts = lambda ts: [sg.tensors[t].dtype for t in ts]  # noqa: E731
    spec = FusedSpec(shapes[run[0].outputs[0]],
                     tuple((d, shapes[t]) for d, t in zip(dts(inputs), inputs)),
                     tuple(steps), tuple((produced[t], d) for d, t in zip(dts(outputs), outputs)))
    try:
        source = fused_kernel(spec, _caps_for(caps, sg, shapes, inputs + outputs))
        n_el = _numel(spec.out_shape)
        tile = min(d.itemsize for d in dts(inputs) + dts(outputs))
        tiling, gsize, lsize = launch_geometry(caps, n_el, tile)
    except ValueError:
        return None
    what = "fused: one kernel for nodes " + ", ".join(str(n.index) for n in run)
    return [Launch(tuple(n.index for n in run), tuple(inputs), tuple(outputs), source,
                   "litecl_fused", tiling, gsize, lsize, n_el, what, args=fused_kernel_args(spec))]

#: a partition whose kernels read and write at most this many bytes runs on the
#: delegate's small_device (device.py: PoCL's basic device beside its pthread one: a
#: kernel runs in the thread that enqueues it instead of waking worker threads); a larger
#: one on the device's threads. benchmarks/bench_small_device.py, one float32 ADD
#: partition after LiteRT's nodes, its cost over LiteRT alone (results/pocl,
#: results/h200/small_device_h200_host.json; docs/PERFORMANCE.md, session 12): on the
#: H200 host's 16 cores (pip's PoCL 3.0) 0.75 MiB cost 290 us on pthread against 90 on
#: basic, 3 MiB 273 against 306, 6 MiB 265 against 538; on a 2-core VM basic was the
#: faster at every size up to 48 MiB. Fewer cores move the crossing up.
SMALL_PARTITION_BYTES = 2 << 20


def plan_built(d, nodes: list, sg, shapes: dict, consts: set, outputs, key, build=None) -> tuple:
    """(plan, the device it runs on, its programs) of the partition of ``nodes`` (in the
    execution plan's order) writing ``outputs`` that LiteRT reads, at input ``shapes`` with
    ``consts`` constant, on delegate ``d``'s settings: kernels.plan_partition (``key``: its
    memo key), a small partition on ``d.small_device``, and a fused kernel the compiler
    refuses planned unfused; ``build``: build_program's stand-in. Raises LiteclError (a
    plan or a kernel build that fails)."""
    build = build or build_program
    fuse = d.fuse
    while True:
        plan = plan_partition(nodes, sg, shapes, d.caps, keep=set(outputs), constants=consts, fuse=fuse, key=key)
        dev = d.device
        if d.small_device is not None and plan.bytes_moved <= SMALL_PARTITION_BYTES:
            dev = d.small_device
        try:
            return plan, dev, [build(dev, ln.source) for ln in plan.launches]
        except KernelBuildError:  # a fused kernel the compiler refuses: unfused
            if not fuse or not any(len(ln.nodes) > 1 for ln in plan.launches):
                raise
            fuse = False
