"""Executing a partitioned subgraph: OpenCL segments on the device, fallback segments on
LiteRT sub-interpreters, tensors kept on the device between lowered nodes.

Host <-> device transfers happen only at fallback boundaries, for model inputs, and when
a model output is read. Kernels are generated and built at ``allocate`` for the shapes
known then, constant operands are uploaded once, and nodes whose inputs are all constant
(e.g. a CAST of a weight) are computed once at ``allocate``.

Run-time shapes (LiteRT's dynamic tensors): a fallback segment's output whose shape LiteRT
can know only by running it (shape_signature with -1 after planning, or no memory after
LiteRT's allocate: RESHAPE to a computed shape, SHAPE -> ... -> RESHAPE, UNIQUE, WHERE) is
marked dynamic, and so is everything computed from it. Steps reading a dynamic tensor are
"planned at run time": prepared at invoke, once the real shapes are known (never at a
placeholder shape), and prepared again only when a shape differs from the one they were
planned for (programs come from a cache keyed by source, so a shape seen before costs no
build).

Variable tensors (``is_variable``) live in this executor's host memory: every fallback
segment that touches one takes it as an input and gives it back as an output, so its value
persists across segments and invokes, and set_tensor on a variable input is kept (as LiteRT).
"""
from __future__ import annotations

import re
import time
import warnings
import weakref
from dataclasses import dataclass, field, replace

import numpy as np
import pyopencl as cl

from .cache import device_identity, forget_binary, load_binary, store_binary
from .device import Caps, build_binary, build_source
from .errors import InputError, KernelBuildError, LiteclError, ModelError, PrepareError, UnsupportedError
from .fallback import build_submodel, litert_abort_reason, make_interpreter
from .hostcopy import copy_host
from .lowering import KernelSpec, kernel_spec, node_op, output_shapes
from .model import Model
from .ops.tiling import launch as tiling_launch
from .ops.tiling import streams
from .partition import OPENCL, dependencies, partition

__all__ = ["Executor", "build_program", "launch_geometry"]

# litecl reports build failures itself (KernelBuildError, fallback reasons); pyopencl's
# warning about any compiler chatter (Intel prints remarks) would only be noise, and
# warnings.catch_warnings() is not thread-safe for concurrent builds
warnings.filterwarnings("ignore", category=cl.CompilerWarning)

_PROGRAMS: dict = {}


def build_program(device, source: str) -> "cl.Program":
    """Build (or reuse) a program for ``source`` on ``device``.

    Built programs are cached per context in memory (each distinct source is built once
    per process), and their binaries on disk (backend/cache.py: a later process loads
    the binary, 1-2 ms instead of 80-115 ms on PoCL). Raises KernelBuildError with the
    build log.
    """
    key = (device.context.int_ptr, source)
    prg = _PROGRAMS.get(key)
    if prg is None:
        ident = device_identity(device.device)
        binary = load_binary(ident, source)
        if binary is not None:
            try:
                prg = build_binary(device.context, device.device, binary)
            except cl.Error:  # a binary this driver no longer takes: build from source
                forget_binary(ident, source)
                prg = None
        if prg is not None:
            _PROGRAMS[key] = prg
            return prg
        try:
            prg = build_source(device.context, source)  # caches checked, warnings quiet (device.py)
            try:
                store_binary(ident, source, prg.get_info(cl.program_info.BINARIES)[0])
            except cl.Error:
                pass  # a runtime that gives no binary: nothing to keep
        except cl.Error as e:  # RuntimeError subclasses carry the log in their text
            log = str(e)
            first = next((ln.strip() for ln in log.splitlines() if "error" in ln.lower()), log.splitlines()[0] if log else "")
            raise KernelBuildError(f"kernel build failed on {device.caps.name}: {first[:200]}",
                                   source=source, log=log) from None
        _PROGRAMS[key] = prg
    return prg


def launch_geometry(caps, n: int, tile_bytes: int, block_dim: int | None = None):
    """(tiling, global size, local size) for ``n`` elements: ``ops.tiling.launch`` with the
    device type's measured ``LAUNCH`` row (local size, work-groups per compute unit)."""
    return tiling_launch(caps, n, tile_bytes, block_dim)


# Tensors up to this size (bytes) are staged through host arrays with non-blocking
# copies, so that one invoke costs one wait on the queue; larger ones are mapped on CPU
# devices (zero-copy). Measured on PoCL 3.1 (2-core VM): each blocking map, read or
# finish costs 35-47 us, the copies of 4K elements ~1 us.
SMALL_BYTES = 256 * 1024
#: LiteRT's words when a numpy view of its tensors is held across a call that may move them.
VIEWS_HELD = ("there is at least 1 reference to internal data in the interpreter in the form of a "
              "numpy array from tensor(); hold the function tensor() returns, not the array "
              "(LiteRT's rule)")
#: On devices without host-unified memory (discrete GPUs), host copies of tensors up to
#: this size live in pinned memory (DMA straight from and to it) and outputs this small
#: are read back before invoke's one wait. benchmarks/bench_e2e.py --pinned-max A/Bs it:
#: on the H200, 16M-element models with 256 KiB -> unlimited: f32->f16 34.8 -> 24.3 ms,
#: i64->f16 56.9 -> 38.8, ADD f32 66.6 -> 45.9, u8->f32+1->f16 18.0 -> 13.6, u8->f32
#: 25.6 -> 26.2; 4K-element models 79 -> 64-70 us. Larger tensors stay pageable, so that
#: one model cannot pin more than this per tensor.
PINNED_BYTES = 256 << 20


def _launch(queue, k, args: tuple, gsize, lsize):
    """Enqueue kernel object ``k`` (a _Kernel or _Fused), setting its arguments only when
    they changed since its last launch (a cl_kernel keeps them): pyopencl's per-call
    argument setting costs ~20 us per launch on the Intel CPU runtime."""
    last = k.last_args
    if last is None or len(last) != len(args) or any(
            (a is not b) if isinstance(a, cl.MemoryObjectHolder) else a != b
            for a, b in zip(args, last)):
        k.kernel.set_args(*args)
        k.last_args = args
    return cl.enqueue_nd_range_kernel(queue, k.kernel, gsize, lsize)


@dataclass
class _Kernel:
    spec: KernelSpec
    kernel: object
    tiling: object
    gsize: tuple
    lsize: tuple
    last_args: tuple | None = None


@dataclass
class _Fused:
    """A run of lowered nodes over one element space, launched as one kernel."""

    nodes: list           # member nodes in order; nodes[0] launches the group
    inputs: list          # external input tensors (kernel parameters in0..)
    outputs: list         # tensors written to global memory (out0..)
    in_shapes: list       # the inputs' shapes this kernel was generated for
    kernel: object = None
    tiling: object = None
    gsize: tuple = ()
    lsize: tuple = ()
    source: str = ""
    last_args: tuple | None = None


@dataclass
class _Fallback:
    nodes: list
    inputs: list
    outputs: list
    interp: object = None
    shapes_key: tuple | None = None   # input shapes it was prepared for; None: not yet
    in_index: list = field(default_factory=list)
    out_index: list = field(default_factory=list)
    out_details: list = field(default_factory=list)
    passthrough: bool = False  # the segment is the whole of subgraph 0: the model's own bytes


class Executor:
    """Runs one subgraph of ``model`` on ``device``.

    Tensors are identified by their index in the subgraph. Use ``allocate(shapes)``, then
    ``set_input``/``invoke``/``get``.
    """

    def __init__(self, model: Model, subgraph: int, device, num_threads=None,
                 strict: bool = False, force_fallback: dict | None = None,
                 reference: str = "builtin", fuse: bool = True,
                 preserve_all_tensors: bool = False, placement: str = "all"):
        self.model = model
        self.fuse = fuse
        self.preserve_all_tensors = preserve_all_tensors
        # zero-copy (tensors in host-allocatable buffers that set_tensor/get_tensor map,
        # no upload or download copy) where the device shares host memory (CPU runtimes, integrated and
        # mobile GPUs: CL_DEVICE_HOST_UNIFIED_MEMORY); unknown: by device type
        hu = device.caps.host_unified
        self.zero_copy = hu if hu is not None else not device.caps.is_gpu
        self._groups: dict[int, _Fused] = {}   # leader node -> group
        self._member: dict[int, int] = {}      # node -> its group's leader
        self.sg = model.subgraphs[subgraph]
        self.device = device
        self.caps = replace(device.caps, reference=reference)
        self.num_threads = num_threads
        self.reference = reference
        self.strict = strict
        deps = dependencies(self.sg)
        self.placements, self.segments = partition(self.sg, self.caps, force_fallback, deps=deps)
        if placement == "auto":  # the cost decision, apart from what can run (placement.py)
            from .placement import auto_keep_on_litert, device_costs  # noqa: PLC0415

            keep = auto_keep_on_litert(self.sg, self.segments, {}, device_costs(device),
                                       self._constant_only_nodes())
            if keep:
                self.placements, self.segments = partition(
                    self.sg, self.caps, {**keep, **(force_fallback or {})}, base=self.placements,
                    deps=deps)
        self.build_failures: dict[int, str] = {}
        self._steps: list = []
        self._kernels: dict[int, _Kernel] = {}
        self.shapes: dict[int, tuple] = {}
        self.host: dict[int, np.ndarray] = {}
        self.dev: dict[int, cl.Buffer] = {}
        self._dev_cap: dict[int, int] = {}
        self.on_device: set = set()   # tensors whose current value lives on the device
        self.on_host: set = set()     # tensors whose current value is in self.host
        self.folded: set = set()      # nodes computed once at allocate
        self.dynamic: set = set()     # tensors whose shape is known only at invoke
        self.const_dev: dict[int, cl.Buffer] = {}
        self.kernel_times_ns: dict[int, int] = {}
        self.segment_times_ns: dict[int, int] = {}
        self.profile = False
        self.allocated = False
        self.buffers_created = 0      # cl.Buffer allocations over this executor's life
        self._writes: dict = {}       # tensor -> event of its last non-blocking upload
        self._pinned: dict = {}       # tensor -> (pinned buffer, its mapped array), GPUs
        self._prefetch = list(dict.fromkeys(t for t in model.subgraphs[subgraph].outputs if t >= 0))
        self._boundaries()

    def _constant_only_nodes(self) -> set:
        """OpenCL nodes whose inputs are all constant, or outputs of such nodes: computed
        once at allocate (what allocate() folds)."""
        on = {p.index for p in self.placements if p.placement == OPENCL}
        out: set = set()
        made: set = set()
        for n in self.sg.nodes:
            if n.index in on and all(t >= 0 and (self.sg.tensors[t].is_constant or t in made)
                                     for t in n.inputs):
                out.add(n.index)
                made.update(n.outputs)
        return out

    # ----------------------------------------------------------------- planning
    def _boundaries(self) -> None:
        sg = self.sg
        consumers: dict[int, set] = {}
        for n in sg.nodes:
            for t in n.inputs:
                if t >= 0:
                    consumers.setdefault(t, set()).add(n.index)
        outs = set(sg.outputs)
        self.variables = [t.index for t in sg.tensors if t.is_variable]
        self._steps = []
        for seg in self.segments:
            if seg.placement == OPENCL:
                for i in seg.nodes:
                    self._steps.append(("k", i))
                continue
            members = set(seg.nodes)
            produced, ins = set(), []
            for i in seg.nodes:
                n = sg.nodes[i]
                for t in n.inputs:
                    if (t >= 0 and t not in produced and t not in ins
                            and not sg.tensors[t].is_constant):
                        ins.append(t)
                produced.update(t for t in n.outputs if t >= 0)
            outs_seg = [t for i in seg.nodes for t in sg.nodes[i].outputs
                        if t >= 0 and (t in outs or consumers.get(t, set()) - members)]
            # variables the segment touches come in and go out: their state is ours
            touched = {t for i in seg.nodes for t in (*sg.nodes[i].inputs, *sg.nodes[i].outputs)}
            state = [t for t in self.variables if t in touched]
            ins += [t for t in state if t not in ins]
            outs_seg += state
            self._steps.append(("f", _Fallback(list(seg.nodes), ins, list(dict.fromkeys(outs_seg)))))
        self._pass = None  # the LiteRT interpreter when the whole model is one segment
        self._shapes_stale = [False]  # dynamic outputs' shapes not read since an invoke
        self._viewed: set = set()  # inputs whose host array tensor() handed out
        self._views: list = []  # weak references to the arrays view() returned
        self._invoked = False  # passthrough: outputs have values only after an invoke
        if (self.sg.index == 0 and len(self._steps) == 1 and self._steps[0][0] == "f"
                and len(self._steps[0][1].nodes) == len(sg.nodes)):
            f = self._steps[0][1]
            # the model as it is: LiteRT runs its own bytes, tensor indices unchanged
            f.inputs, f.outputs, f.passthrough = list(sg.inputs), list(sg.outputs), True

    def _const(self, t: int):
        return self.sg.tensors[t].data

    def allocate(self, input_shapes: dict[int, tuple]) -> None:
        """Plan every step for the given input shapes: build kernels, create fallback
        sub-interpreters, upload constants, compute constant-only nodes once."""
        if self._pass is not None and self.views_alive():  # LiteRT would move memory under them
            raise LiteclError(f"allocate_tensors: {VIEWS_HELD}")
        old_shapes = getattr(self, "shapes", {})
        self._viewed = set()  # a view from before is of arrays this allocation may replace
        self._invoked = False
        self.shapes = {}
        for t in self.sg.inputs:
            self.shapes[t] = tuple(input_shapes.get(t, self.sg.tensors[t].shape))
        for tensor in self.sg.tensors:
            if tensor.is_constant:
                self.shapes[tensor.index] = tuple(tensor.shape)
            elif tensor.is_variable:
                self.shapes.setdefault(tensor.index, tuple(tensor.shape))
        self.folded = set()
        self.dynamic = set()
        # inputs set before and not resized keep their values, as LiteRT's do
        kept = {t for t in self.sg.inputs if old_shapes.get(t) == self.shapes[t]}
        self.on_device = set(getattr(self, "on_device", ())) & kept
        self.on_host = set(getattr(self, "on_host", ())) & kept
        self.reset_variables()
        for kind, step in self._steps:
            if kind == "k":
                if self._reads_dynamic(self.sg.nodes[step].inputs):
                    self._defer(self.sg.nodes[step].outputs)
                else:
                    self._plan_kernel(step)
            elif self._reads_dynamic(step.inputs):
                self._defer(step.outputs)
                step.shapes_key = None
            else:
                self._plan_fallback(step)
        self.allocated = True
        first = self._steps[0][1] if self._steps and self._steps[0][0] == "f" else None
        self._pass = first.interp if first is not None and first.passthrough else None
        self._dynamic_outputs = [t for t in self.sg.outputs
                                 if t in self.dynamic or -1 in self.sg.tensors[t].shape_signature]
        # computed once: nodes whose inputs are all constant (or folded)
        for kind, step in self._steps:
            if kind == "k" and step not in self.build_failures:
                n = self.sg.nodes[step]
                if all(t in self.const_dev or self._is_folded_tensor(t) for t in n.inputs):
                    self._run_kernel(step)
                    self.folded.add(step)
        self._fuse_all()

    def _reads_dynamic(self, tensors) -> bool:
        return any(t in self.dynamic for t in tensors if t >= 0)

    def _defer(self, outputs) -> None:
        """Mark a step's outputs dynamic: the step is planned at run time. Their shapes
        stay the ones the model declares until then (what get_output_details reports,
        as LiteRT reports a dynamic tensor's placeholder shape)."""
        for t in outputs:
            if t >= 0 and not self.sg.tensors[t].is_variable:
                self.dynamic.add(t)
                self.shapes.setdefault(t, tuple(self.sg.tensors[t].shape))

    def planned_at_run_time(self, node: int) -> bool:
        """True when node ``node`` reads a tensor whose shape is known only at invoke."""
        return self._reads_dynamic(self.sg.nodes[node].inputs)

    def reset_variables(self) -> None:
        """Every variable tensor back to its initial value: LiteRT's ResetVariableTensor
        (tflite/core/subgraph.cc, called by AllocateTensors and reset_all_variables)
        fills it with zeros, or with the zero point for int8."""
        for t in self.variables:
            tensor = self.sg.tensors[t]
            if tensor.dtype is None:
                continue  # resource/variant handles: LiteRT's own state
            fill = int(tensor.zero_points[0]) if tensor.type_name == "INT8" and tensor.zero_points.size else 0
            self.host[t] = np.full(self.shapes.get(t, tensor.shape), fill, tensor.dtype.np)
            self.on_host.add(t)
            self.on_device.discard(t)

    # ----------------------------------------------------------------- fusion
    def _fuse_all(self, after_invoke: bool = False) -> None:
        """Group consecutive lowered nodes with one output shape into fused kernels.
        Nodes planned at run time join groups only ``after_invoke`` (at the real shapes).

        Each member's inputs are either produced inside the group (same element space) or
        read from global memory, broadcast if need be; an intermediate tensor is written
        only if a node outside the group or a subgraph output needs it. A group whose
        kernel does not build is left unfused (each node keeps its own kernel)."""
        self._groups, self._member = {}, {}
        if not self.fuse:
            return
        run: list = []
        shape = None
        touched: set = set()  # tensors the run reads or writes
        for kind, step in self._steps + [("end", None)]:
            if kind == "k" and step not in self.folded and step in self._kernels \
                    and (after_invoke or not self.planned_at_run_time(step)):
                n = self.sg.nodes[step]
                out = tuple(self.shapes[n.outputs[0]])
                # a node writing a tensor the run already read or wrote starts a new run:
                # one kernel cannot keep the order of two writes, or of a read and a write
                if run and out == shape and not touched & set(n.outputs):
                    run.append(step)
                    touched.update(n.inputs, n.outputs)
                    continue
                self._make_group(run)
                run, shape, touched = [step], out, set(n.inputs) | set(n.outputs)
            else:
                self._make_group(run)
                run, shape, touched = [], None, set()

    def _make_group(self, nodes: list) -> None:
        if len(nodes) < 2:
            return
        from .ops.fusion import FusedSpec, fused_kernel  # noqa: PLC0415

        sg = self.sg
        members = set(nodes)
        produced = {t: j for j, i in enumerate(nodes) for t in sg.nodes[i].outputs}
        needed_outside = set(sg.outputs) | (set(produced) if self.preserve_all_tensors else set())
        for n in sg.nodes:
            if n.index not in members:
                needed_outside.update(t for t in n.inputs if t >= 0)
        inputs: list = []
        steps = []
        for j, i in enumerate(nodes):
            n = sg.nodes[i]
            args = []
            for t in n.inputs:
                if t in produced and produced[t] < j:
                    args.append(("t", produced[t]))
                else:
                    if t not in inputs:
                        inputs.append(t)
                    args.append(("in", inputs.index(t)))
            shapes = [tuple(self.shapes[t]) for t in n.inputs]
            steps.append((node_op(n, sg, shapes, self.caps, f"litecl_n{i}_op"), tuple(args)))
        outputs = [t for t in produced if t in needed_outside]
        caps = self._caps_for(inputs + outputs)
        dts = lambda ts: [sg.tensors[t].dtype for t in ts]  # noqa: E731
        spec = FusedSpec(tuple(self.shapes[sg.nodes[nodes[0]].outputs[0]]),
                         tuple((d, tuple(self.shapes[t])) for d, t in zip(dts(inputs), inputs)),
                         tuple(steps),
                         tuple((produced[t], d) for d, t in zip(dts(outputs), outputs)))
        try:
            source = fused_kernel(spec, caps)
            prg = build_program(self.device, source)
            n_el = _numel(spec.out_shape)
            tile = min(d.itemsize for d in dts(inputs) + dts(outputs))
            tiling, gsize, lsize = launch_geometry(self.caps, n_el, tile)
        except (KernelBuildError, ValueError):
            return  # stay unfused: every member has its own kernel already
        try:
            kern = cl.Kernel(prg, "litecl_fused")
        except cl.Error:  # see _plan_kernel: stay unfused
            return
        g = _Fused(list(nodes), inputs, outputs, [tuple(self.shapes[t]) for t in inputs],
                   kern, tiling, gsize, lsize, source)
        self._groups[nodes[0]] = g
        for i in nodes:
            self._member[i] = nodes[0]

    def _run_fused(self, g: _Fused) -> None:
        ins = [self._device_in(t) for t in g.inputs]
        outs = []
        for t in g.outputs:
            nbytes = _numel(self.shapes[t]) * self.sg.tensors[t].dtype.itemsize
            outs.append(self._dev_buffer(t, nbytes))
        if g.tiling.total_length:
            args = (*ins, *outs, *(np.uint32(v) for v in g.tiling.kernel_args()))
            ev = _launch(self.device.queue, g, args, g.gsize, g.lsize)
            if self.profile:
                ev.wait()
                self.kernel_times_ns[g.nodes[0]] = ev.profile.end - ev.profile.start
        for t in g.outputs:
            self.on_device.add(t)
            self.on_host.discard(t)

    def _caps_for(self, tensors) -> Caps:
        """self.caps, with ``streaming`` set when a kernel touching ``tensors`` (at their
        planned shapes) moves more bytes than the device's cache keeps (ops/tiling.py
        ``streams``)."""
        footprint = sum(_numel(self.shapes[t]) * self.sg.tensors[t].dtype.itemsize
                        for t in set(tensors) if t >= 0 and t in self.shapes)
        return replace(self.caps, streaming=True) if streams(self.caps, footprint) else self.caps

    def _is_folded_tensor(self, t: int) -> bool:
        return any(t in self.sg.nodes[i].outputs for i in self.folded)

    def _shape_of(self, t: int) -> tuple:
        if t not in self.shapes:
            raise InputError(f"tensor {t} ({self.sg.tensors[t].name!r}) has no known shape")
        return self.shapes[t]

    def _plan_kernel(self, i: int) -> None:
        n = self.sg.nodes[i]
        shapes = [self._shape_of(t) for t in n.inputs]
        try:
            out = output_shapes(n, self.sg, shapes)
        except ValueError as e:  # e.g. ADD inputs that do not broadcast
            if isinstance(e, LiteclError):
                raise
            raise PrepareError(f"node {i} ({n.op}): {e}") from None
        for t, s in zip(n.outputs, out):
            self.shapes[t] = tuple(s)
        k = self._kernels.get(i)
        if k is not None and k.spec is not None and k.tiling.total_length == _numel(out[0]) \
                and getattr(k, "in_shapes", None) == shapes:
            return
        try:
            spec = kernel_spec(n, self.sg, shapes, self._caps_for(list(n.inputs) + list(n.outputs)))
            prg = build_program(self.device, spec.source)
        except KernelBuildError as e:
            if self.strict:
                raise
            lines = [ln for ln in e.log.splitlines() if ln.strip()]
            errors = [ln for ln in lines if "error" in ln.lower()]  # first: warnings can fill the cut
            log = " ".join(" ".join(errors + [ln for ln in lines if ln not in errors]).split())
            self.build_failures[i] = f"{e}; build log: {log[:600]}" + ("..." if len(log) > 600 else "")
            raise _Replan(i, self.build_failures[i]) from None
        try:
            tiling, gsize, lsize = launch_geometry(self.caps, spec.n, spec.tile_bytes)
        except ValueError as e:  # e.g. more elements than the kernels' indices reach
            if self.strict:
                raise UnsupportedError(f"node {i} ({n.op}): {e}") from None
            self.build_failures[i] = f"no OpenCL launch: {e}"
            raise _Replan(i, self.build_failures[i]) from None
        try:
            kern = cl.Kernel(prg, spec.name)
        except cl.Error as e:  # Oclgrind 21.10 builds llvm.fshl but cannot create the kernel
            if self.strict:
                raise KernelBuildError(f"node {i} ({n.op}): creating the kernel failed: {e}",
                                       source=spec.source) from None
            self.build_failures[i] = f"creating the kernel failed on {self.caps.name}: {str(e)[:300]}"
            raise _Replan(i, self.build_failures[i]) from None
        kobj = _Kernel(spec, kern, tiling, gsize, lsize)
        kobj.in_shapes = shapes  # type: ignore[attr-defined]
        self._kernels[i] = kobj
        for t in n.inputs:
            if self.sg.tensors[t].data is not None and t not in self.const_dev:
                self.const_dev[t] = self._upload_new(self.sg.tensors[t].data)

    def _shaped_by_values(self, f: _Fallback) -> set:
        """Tensors of segment ``f`` whose shape LiteRT knows only by running it, beyond
        those it leaves without memory at allocate_tensors (``_has_memory``): outputs of
        the ops that take their output shape from an operand's values and alias their
        input's memory (RESHAPE, EXPAND_DIMS: LiteRT 2.3.0 reports the declared shape
        and keeps the input's data pointer, measured), when that operand is not a
        constant, and everything the segment computes from such a tensor."""
        out: set = set()
        for i in f.nodes:
            n = self.sg.nodes[i]
            ins = [t for t in n.inputs if t >= 0]
            operand = _SHAPE_OPERAND.get(n.op)
            by_values = (operand is not None and len(n.inputs) > operand and n.inputs[operand] >= 0
                         and not self.sg.tensors[n.inputs[operand]].is_constant)
            if by_values or any(t in out for t in ins):
                out.update(t for t in n.outputs if t >= 0)
        return out

    def _check_aborts(self, f: _Fallback) -> None:
        """ModelError where LiteRT would abort the process preparing the segment: its
        nodes at the shapes known now (segment inputs, constants), and every node of
        the subgraphs it calls at their declared shapes."""
        for i in f.nodes:
            r = litert_abort_reason(self.sg.nodes[i], self.sg, self.shapes, self.reference)
            if r:
                raise ModelError(f"node {i} ({self.sg.nodes[i].op}): {r}")
        if any(self.sg.nodes[i].subgraph_refs() for i in f.nodes):
            for sub in self.model.subgraphs:
                for n in sub.nodes:
                    r = litert_abort_reason(n, sub, {t: sub.tensors[t].shape for t in n.inputs}, self.reference)
                    if r:
                        raise ModelError(f"subgraph {sub.index} node {n.index} ({n.op}): {r}")

    def _plan_fallback(self, f: _Fallback) -> None:
        shapes = tuple(self._shape_of(t) for t in f.inputs)
        if f.interp is None or f.shapes_key != shapes:
            self._check_aborts(f)
            unset = sorted({self.sg.tensors[t].type_name for t in f.inputs
                            if self.sg.tensors[t].dtype is not None and self.sg.tensors[t].dtype.name == "int2"})
            if unset:  # LiteRT's set_tensor refuses INT2 ("expected type INT2"), even as int8
                raise ModelError(f"LiteRT cannot run nodes {_ranges(f.nodes)}: their inputs include "
                                 f"{', '.join(unset)} tensors, which LiteRT's Python API cannot pass")
            try:
                if f.interp is None:
                    content = self.model.raw if f.passthrough else \
                        build_submodel(self.model, self.sg.index, f.nodes, f.inputs, f.outputs)
                    f.interp = make_interpreter(content, self.num_threads, self.reference,
                                                preserve_all_tensors=f.passthrough and self.preserve_all_tensors)
                details = f.interp.get_input_details()
                f.in_index = [d["index"] for d in details]
                for d, s in zip(details, shapes):
                    if tuple(d["shape"]) != s:
                        f.interp.resize_tensor_input(d["index"], list(s), strict=False)
                f.interp.allocate_tensors()
                f.out_details = f.interp.get_output_details()
            except (RuntimeError, ValueError) as e:  # LiteRT refuses the segment
                if isinstance(e, LiteclError):
                    raise
                ops = sorted({self.sg.nodes[i].op for i in f.nodes})
                msg = " ".join(str(e).split())[:300] or type(e).__name__
                odd = sorted({self.sg.tensors[t].type_name for t in (*f.inputs, *f.outputs)
                              if self.sg.tensors[t].dtype is None})
                if odd:  # e.g. FLOAT8_E4M3FN: no numpy type litecl knows for it
                    msg += f" (its boundary tensors include {', '.join(odd)}, which LiteRT's Python API cannot pass)"
                cls = PrepareError if isinstance(e, RuntimeError) else ModelError  # as LiteRT's
                raise cls(f"LiteRT cannot prepare nodes {_ranges(f.nodes)} ({', '.join(ops)}): "
                                 f"{msg}") from None
            f.out_index = [d["index"] for d in f.out_details]
            f.shapes_key = shapes
        computed = self._shaped_by_values(f)
        for t, d in zip(f.outputs, f.out_details):
            self.shapes[t] = tuple(int(x) for x in d["shape"])
            if self.sg.tensors[t].is_variable:
                continue
            if t in computed or not _has_memory(f.interp, d):
                self.dynamic.add(t)

    # ----------------------------------------------------------------- memory
    def _upload_new(self, arr: np.ndarray) -> "cl.Buffer":
        a = np.ascontiguousarray(arr)
        mf = cl.mem_flags
        self.buffers_created += 1
        if a.nbytes == 0:
            return cl.Buffer(self.device.context, mf.READ_ONLY, 1)
        return cl.Buffer(self.device.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)

    def _dev_buffer(self, t: int, nbytes: int) -> "cl.Buffer":
        if self._dev_cap.get(t, -1) < nbytes:
            old = self.dev.pop(t, None)
            if old is not None:
                old.release()  # OpenCL keeps it alive until queued commands are done
            self.buffers_created += 1
            flags = cl.mem_flags.READ_WRITE | (cl.mem_flags.ALLOC_HOST_PTR if self.zero_copy else 0)
            self.dev[t] = cl.Buffer(self.device.context, flags, max(nbytes, 1))
            self._dev_cap[t] = nbytes
        return self.dev[t]

    def _host_array(self, t: int) -> np.ndarray:
        dt = self.sg.tensors[t].dtype.np
        shape = self.shapes[t]
        a = self.host.get(t)
        if a is None or a.shape != shape or a.dtype != dt:
            nbytes = _numel(shape) * dt.itemsize
            if not self.zero_copy and 0 < nbytes <= PINNED_BYTES:
                a = self._pinned_array(t, shape, dt)
            else:
                a = np.empty(shape, dt)
            self.host[t] = a
        return a

    def _pinned_array(self, t: int, shape: tuple, dt) -> np.ndarray:
        """A host array in pinned memory (an ALLOC_HOST_PTR buffer mapped once, for the
        executor's life): GPU copies from and to it DMA directly, with no staging copy in
        the driver (measured on the H200: write + kernel + read of 4K floats 67 -> 49 us)."""
        old = self._pinned.pop(t, None)
        if old is not None and not self.views_alive():  # a held view keeps its mapping alive
            old[1].base.release(self.device.queue)
            old[0].release()
        nbytes = _numel(shape) * dt.itemsize
        buf = cl.Buffer(self.device.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, nbytes)
        self.buffers_created += 1
        arr, _ = cl.enqueue_map_buffer(self.device.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                       0, shape, dt, is_blocking=True)
        self._pinned[t] = (buf, arr)
        return arr

    def _device_in(self, t: int) -> "cl.Buffer":
        if t in self.const_dev:
            return self.const_dev[t]
        if t in self.on_device:
            return self.dev[t]
        if t not in self.on_host:
            raise InputError(f"tensor {t} ({self.sg.tensors[t].name!r}) was not set")
        a = np.ascontiguousarray(self.host[t])
        buf = self._dev_buffer(t, a.nbytes)
        if a.nbytes:
            self._writes[t] = cl.enqueue_copy(self.device.queue, buf, a, is_blocking=False)
        self.on_device.add(t)
        return buf

    def _to_host(self, t: int) -> np.ndarray:
        if t in self.on_host:
            return self.host[t]
        const = self.sg.tensors[t].data
        if const is not None:
            return const
        if t in self.on_device or t in self.const_dev:
            a = self._host_array(t)
            src = self.dev.get(t) if t in self.on_device else self.const_dev[t]
            if a.nbytes:
                cl.enqueue_copy(self.device.queue, a, src, is_blocking=True)
            self.on_host.add(t)
            return a
        shape = self.shapes.get(t)
        if shape is None and not any(t in n.outputs for n in self.sg.nodes):
            shape = tuple(self.sg.tensors[t].shape)  # no producer: the model's own shape
        if shape is not None and _numel(shape) == 0 and self.sg.tensors[t].dtype is not None:
            return np.empty(shape, self.sg.tensors[t].dtype.np)  # nothing to compute
        inside = [f.nodes for kind, f in self._steps if kind == "f"
                  and any(t in self.sg.nodes[i].outputs for i in f.nodes) and t not in f.outputs]
        if inside:
            raise InputError(f"tensor {t} ({self.sg.tensors[t].name!r}) is internal to a LiteRT "
                             "fallback segment; litecl keeps only the tensors that cross a "
                             "segment boundary")
        inner = [g for g in self._groups.values()
                 if any(t in self.sg.nodes[i].outputs for i in g.nodes) and t not in g.outputs]
        if inner:
            raise InputError(f"tensor {t} ({self.sg.tensors[t].name!r}) is an intermediate of a fused "
                             "kernel and is not written; pass experimental_preserve_all_tensors=True")
        raise InputError(f"tensor {t} ({self.sg.tensors[t].name!r}) has no value yet")

    # ----------------------------------------------------------------- running
    def _mapped(self, t: int, flags):
        """The device buffer of ``t`` mapped as an array of its shape (zero-copy devices)."""
        d = self.sg.tensors[t].dtype.np
        shape = tuple(self.shapes[t])
        buf = self._dev_buffer(t, _numel(shape) * d.itemsize)
        arr, _ = cl.enqueue_map_buffer(self.device.queue, buf, flags, 0, shape, d, is_blocking=True)
        return arr

    def set_input(self, t: int, value: np.ndarray) -> None:
        if self._pass is not None:  # the whole model on LiteRT: straight into its tensor
            self._pass.set_tensor(t, value)
            self.on_host.add(t)
            return
        ev = self._writes.pop(t, None)
        if ev is not None:
            ev.wait()  # a queued upload may still be reading the host array
        if (self.zero_copy and value.nbytes > SMALL_BYTES and self._only_kernels_read(t)
                and t not in self._viewed):
            arr = self._mapped(t, cl.map_flags.WRITE_INVALIDATE_REGION)
            try:
                copy_host(arr, value)  # split over host threads when large
            finally:
                arr.base.release(self.device.queue)
            self.on_device.add(t)
            self.on_host.discard(t)
            return
        a = self._host_array(t)
        copy_host(a, value)  # split over host threads when large (backend/hostcopy.py)
        self.on_host.add(t)
        self.on_device.discard(t)

    def _run_kernel(self, i: int) -> None:
        n = self.sg.nodes[i]
        k = self._kernels[i]
        ins = [self._device_in(t) for t in n.inputs]
        out_t = n.outputs[0]
        nbytes = _numel(self.shapes[out_t]) * self.sg.tensors[out_t].dtype.itemsize
        if i in self.folded:
            return
        out = self._dev_buffer(out_t, nbytes)
        if k.spec.n:
            args = (*ins, out, *(np.uint32(v) for v in k.tiling.kernel_args()))
            ev = _launch(self.device.queue, k, args, k.gsize, k.lsize)
            if self.profile:
                ev.wait()
                self.kernel_times_ns[i] = ev.profile.end - ev.profile.start
        self.on_device.add(out_t)
        self.on_host.discard(out_t)

    def _run_fallback(self, f: _Fallback) -> None:
        interp = f.interp
        for t, idx in zip(f.inputs, f.in_index):
            interp.set_tensor(idx, self._to_host(t))
        t0 = time.perf_counter_ns()
        try:
            interp.invoke()
        except RuntimeError as e:  # LiteRT numbers the sub-model's nodes: name the model's
            msg = re.sub(r"Node number (\d+) \(", lambda m: f"Node number {f.nodes[int(m.group(1))]} ("
                         if int(m.group(1)) < len(f.nodes) else m.group(0), str(e))
            raise RuntimeError(msg) from None
        if self.profile:
            self.segment_times_ns[f.nodes[0]] = time.perf_counter_ns() - t0
        for t, idx in zip(f.outputs, f.out_index):
            v = interp.get_tensor(idx)
            self.shapes[t] = v.shape
            self.host[t] = v
            self.on_host.add(t)
            self.on_device.discard(t)

    def invoke(self) -> None:
        """Run every step once. Inputs must have been set with set_input."""
        if self._pass is not None:
            self._invoke_passthrough()
            return
        for t in self._viewed:  # tensor() views: the caller may have written them
            self.on_host.add(t)
            self.on_device.discard(t)
        for t in self.sg.inputs:
            if t not in self.on_host and t not in self.on_device and self.sg.tensors[t].data is None:
                raise InputError(f"input tensor {t} ({self.sg.tensors[t].name!r}) was not set")
        refuse = False
        for kind, step in self._steps:
            if kind == "k":
                n = self.sg.nodes[step]
                if step in self.folded:
                    continue
                lead = self._member.get(step)
                if lead is not None:
                    g = self._groups[lead]
                    if [tuple(self.shapes[t]) for t in g.inputs] == g.in_shapes:
                        if lead == step:
                            self._run_fused(g)
                        continue
                    # a dynamic shape changed: run unfused now, fuse again afterwards
                    self._groups, self._member, refuse = {}, {}, True
                shapes = [tuple(self.shapes[t]) for t in n.inputs]
                if shapes != getattr(self._kernels.get(step), "in_shapes", None):
                    self._plan_kernel(step)  # planned at run time, or a shape changed
                    refuse = refuse or self.fuse
                self._run_kernel(step)
            else:
                shapes = tuple(tuple(self.shapes[t]) for t in step.inputs)
                if shapes != step.shapes_key:
                    self._plan_fallback(step)
                self._run_fallback(step)
        # small outputs are read back now (non-blocking, before the one wait) so that
        # get_tensor does not wait on the queue again
        for t in self._prefetch:
            if t in self.on_device and t not in self.on_host and t in self.dev:
                a = self._host_array(t)
                if 0 < a.nbytes <= (SMALL_BYTES if self.zero_copy else PINNED_BYTES):
                    cl.enqueue_copy(self.device.queue, a, self.dev[t], is_blocking=False)
                    self.on_host.add(t)  # valid once finish() below returns
        # synchronous like LiteRT's Invoke(): outputs are complete when invoke returns
        self.device.queue.finish()
        self._writes.clear()  # every upload is done (waiting on a done event costs ~25 us on NVIDIA)
        if refuse:
            self._fuse_all(after_invoke=True)

    def _only_kernels_read(self, t: int) -> bool:
        """True when no fallback segment reads ``t`` (so it need not stay on the host)."""
        ro = getattr(self, "_host_readers", None)
        if ro is None:
            ro = self._host_readers = {x for kind, f in self._steps if kind == "f" for x in f.inputs}
        return t not in ro

    def _invoke_passthrough(self) -> None:
        """The whole model is one LiteRT segment run on the model's own bytes: LiteRT
        keeps every tensor (variables included), litecl only forwards."""
        for t in self.sg.inputs:
            if t not in self.on_host and not self.sg.tensors[t].is_variable:
                raise InputError(f"input tensor {t} ({self.sg.tensors[t].name!r}) was not set")
        if self._dynamic_outputs and self._views and self.views_alive():
            raise RuntimeError(VIEWS_HELD)
        t0 = time.perf_counter_ns()
        # LiteRT's invoke() first checks (by the pybind wrapper's reference count) that no
        # numpy view into its tensors exists; the passthrough fast path holds the wrapper's
        # bound methods, so litecl calls Invoke itself and checks its own views: held
        # across an invoke that may reallocate (dynamic outputs) they are refused, as LiteRT
        self._pass._interpreter.Invoke()
        self._invoked = True
        if self.profile:
            self.segment_times_ns[self.sg.nodes[0].index] = time.perf_counter_ns() - t0
        self._shapes_stale[0] = bool(self._dynamic_outputs)  # read when asked for

    def current_shapes(self) -> dict:
        """``shapes`` (tensor index -> shape tuple), with the shapes of dynamic outputs
        brought up to date after a passthrough invoke (LiteRT's TensorSize)."""
        if self._shapes_stale[0] and self._pass is not None:
            for t in self._dynamic_outputs:
                self.shapes[t] = tuple(self._pass._interpreter.TensorSize(t, 0).tolist())
            self._shapes_stale[0] = False
        return self.shapes

    def view(self, t: int) -> np.ndarray:
        """Interpreter.tensor()'s array: the host array of ``t`` itself (see there).
        Raises InputError for int4/uint4/int2 tensors (packed: no one-value-per-byte view)
        and as get() does."""
        tensor = self.sg.tensors[t]
        if tensor.dtype is not None and tensor.dtype.packed_bits:
            raise InputError(f"tensor {t} ({tensor.name!r}) is {tensor.type_name}, stored packed: it has "
                             "no view; use set_tensor()/get_tensor() (LiteRT's view of it is wrong)")
        if tensor.is_constant:  # read-only: writing would change the model's own bytes
            v = np.array(self.get(t), copy=True)
            v.setflags(write=False)
            return v[()] if v.ndim == 0 else v
        if self._pass is not None:
            if t not in self.sg.inputs:
                self.get(t)  # litecl's checks (internal tensors, no value yet) and errors first
            elif not tensor.is_variable:
                self.on_host.add(t)
            v = self._pass.tensor(t)()
        elif t in self.sg.inputs and not tensor.is_variable and tensor.dtype is not None:
            ev = self._writes.pop(t, None)
            if ev is not None:
                ev.wait()  # an upload may still read the staging
            # the current value (read back if it is only on the device), in its host array
            v = self._to_host(t) if t in self.on_host or t in self.on_device else self._host_array(t)
            self._viewed.add(t)  # re-uploaded from this array at every invoke
            self.on_host.add(t)
            self.on_device.discard(t)
        else:
            v = self._to_host(t)
            v = v if type(v) is np.ndarray else np.asarray(v)
        if type(v) is not np.ndarray or v.ndim == 0:
            return v[()] if type(v) is np.ndarray else v  # 0-d: a numpy scalar, as LiteRT's
        if self._pass is None:
            v = v.view()  # a new array object over the same memory: its life is the caller's
        self._views.append(weakref.ref(v))
        return v

    def views_alive(self) -> bool:
        """True while an array view() returned is still referenced."""
        self._views = [r for r in self._views if r() is not None]
        return bool(self._views)

    def get(self, t: int) -> np.ndarray:
        """A host copy of tensor ``t``'s current value (one copy: mapped on CPU devices,
        read straight into the result on GPUs)."""
        if self._pass is not None:  # LiteRT answers for its own tensors
            tensor = self.sg.tensors[t]
            if not (self.preserve_all_tensors or t in self.sg.inputs or t in self.sg.outputs
                    or tensor.is_constant or tensor.is_variable):
                raise InputError(f"tensor {t} ({tensor.name!r}) is internal to a LiteRT fallback "
                                 "segment; pass experimental_preserve_all_tensors=True to keep it")
            if t in self.sg.outputs and not self._invoked and not (tensor.is_constant or tensor.is_variable
                                                                   or t in self.sg.inputs):
                raise InputError(f"tensor {t} ({tensor.name!r}) has no value yet: call invoke() first")
            try:
                return self._pass.get_tensor(t)
            except ValueError as e:
                raise InputError(f"tensor {t} ({self.sg.tensors[t].name!r}): {e}") from None
        if t in self.on_device and t not in self.on_host and t in self.dev:
            d = self.sg.tensors[t].dtype.np
            shape = tuple(self.shapes[t])
            if not _numel(shape):
                return np.empty(shape, d)
            if self.zero_copy:
                arr = self._mapped(t, cl.map_flags.READ)
                try:
                    out = np.empty(shape, d)
                    copy_host(out, arr)  # split over host threads when large
                    return out
                finally:
                    arr.base.release(self.device.queue)
            out = np.empty(shape, d)
            cl.enqueue_copy(self.device.queue, out, self.dev[t], is_blocking=True)
            return out
        src = self._to_host(t)
        if type(src) is not np.ndarray or src.dtype.hasobject:
            return np.array(src, copy=True)
        out = np.empty(src.shape, src.dtype)
        copy_host(out, src)  # split over host threads when large
        return out

    def finish(self) -> None:
        self.device.queue.finish()

    def live_buffers(self) -> int:
        """Device buffers this executor holds now."""
        return len(self.dev) + len(self.const_dev) + len(self._pinned)

    def close(self) -> None:
        """Release device buffers, kernels and LiteRT sub-interpreters (idempotent). Built
        programs stay in the process-wide cache (keyed by source), as pyopencl's do."""
        for ev in self._writes.values():
            ev.wait()
        self._writes.clear()
        self.device.queue.finish()
        if not self.views_alive():  # else the views keep their mappings (freed with them)
            for buf, arr in self._pinned.values():
                arr.base.release(self.device.queue)
                buf.release()
        self._pinned.clear()
        self.device.queue.finish()
        for buf in (*self.dev.values(), *self.const_dev.values()):
            buf.release()
        self.dev.clear()
        self.const_dev.clear()
        self._dev_cap.clear()
        self._kernels.clear()
        self._groups, self._member = {}, {}
        for kind, step in self._steps:
            if kind == "f":
                step.interp = None
        self.host.clear()
        self.on_device, self.on_host = set(), set()
        self.allocated = False


class _Replan(Exception):
    def __init__(self, node: int, reason: str):
        super().__init__(reason)
        self.node = node
        self.reason = reason


def _ranges(nodes, limit: int = 6) -> str:
    """[3, 4, 5, 9] -> '3-5, 9'; at most ``limit`` runs, then '...'."""
    out, run = [], []
    for i in sorted(nodes):
        if run and i != run[-1] + 1:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
            run = []
        run.append(i)
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else f"{run[0]}")
    return ", ".join(out[:limit]) + (", ..." if len(out) > limit else "")


#: op -> the input whose values give the output's shape, for ops LiteRT runs in place
#: (their output keeps memory at allocate_tensors although its shape is not known yet)
_SHAPE_OPERAND = {"RESHAPE": 1, "EXPAND_DIMS": 1}


def _has_memory(interp, detail: dict) -> bool:
    """False when LiteRT left the tensor without memory after allocate_tensors (a
    dynamic tensor: its producer resizes it at invoke). The Python API says so by
    raising ValueError "Tensor data is null" from get_tensor."""
    try:
        interp.get_tensor(detail["index"])
    except ValueError:
        return False
    return True


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
