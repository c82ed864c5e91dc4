"""Executing a partitioned subgraph: OpenCL segments on the device, fallback segments on
LiteRT sub-interpreters, tensors kept on the device between lowered nodes.

Host <-> device transfers happen only at fallback boundaries, for model inputs, and when
a model output is read. Kernels are generated and built at ``allocate`` for the shapes
known then (and re-planned if a dynamic shape changes), constant operands are uploaded
once, and nodes whose inputs are all constant (e.g. a CAST of a weight) are computed once
at ``allocate``.
"""
from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass, field, replace

import numpy as np
import pyopencl as cl

from .device import Caps
from .errors import InputError, KernelBuildError, LiteclError, ModelError, PrepareError, UnsupportedError
from .fallback import build_submodel, litert_abort_reason, make_interpreter
from .lowering import KernelSpec, kernel_spec, node_op, output_shapes
from .model import Model
from .ops.tiling import launch as tiling_launch
from .ops.tiling import streams
from .partition import OPENCL, partition

__all__ = ["Executor", "build_program", "launch_geometry"]

# litecl reports build failures itself (KernelBuildError, fallback reasons); pyopencl's
# warning about any compiler chatter (Intel prints remarks) would only be noise, and
# warnings.catch_warnings() is not thread-safe for concurrent builds
warnings.filterwarnings("ignore", category=cl.CompilerWarning)

_PROGRAMS: dict = {}


def build_program(device, source: str) -> "cl.Program":
    """Build (or reuse) a program for ``source`` on ``device``.

    Built programs are cached per context in memory, and pyopencl caches binaries on disk
    keyed by source, device and driver version. Raises KernelBuildError with the build log.
    """
    key = (device.context.int_ptr, source)
    prg = _PROGRAMS.get(key)
    if prg is None:
        try:
            with warnings.catch_warnings():  # pyopencl warns on any compiler chatter
                warnings.simplefilter("ignore")
                prg = cl.Program(device.context, source).build()
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
    shapes_key: tuple = ()
    in_index: list = field(default_factory=list)
    out_index: list = field(default_factory=list)
    out_details: list = field(default_factory=list)


class Executor:
    """Runs one subgraph of ``model`` on ``device``.

    Tensors are identified by their index in the subgraph. Use ``allocate(shapes)``, then
    ``set_input``/``invoke``/``get``.
    """

    def __init__(self, model: Model, subgraph: int, device, num_threads=None,
                 strict: bool = False, force_fallback: dict | None = None,
                 reference: str = "builtin", fuse: bool = True,
                 preserve_all_tensors: bool = False):
        self.model = model
        self.fuse = fuse
        self.preserve_all_tensors = preserve_all_tensors
        # CPU devices: tensors live in host-allocatable buffers that set_tensor/get_tensor
        # map (no upload or download copy); GPUs copy across the bus
        self.zero_copy = not device.caps.is_gpu
        self._groups: dict[int, _Fused] = {}   # leader node -> group
        self._member: dict[int, int] = {}      # node -> its group's leader
        self.sg = model.subgraphs[subgraph]
        self.device = device
        self.caps = replace(device.caps, reference=reference)
        self.num_threads = num_threads
        self.reference = reference
        self.strict = strict
        self.placements, self.segments = partition(self.sg, self.caps, force_fallback)
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

    # ----------------------------------------------------------------- planning
    def _boundaries(self) -> None:
        sg = self.sg
        consumers: dict[int, set] = {}
        for n in sg.nodes:
            for t in n.inputs:
                if t >= 0:
                    consumers.setdefault(t, set()).add(n.index)
        outs = set(sg.outputs)
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
                    tt = sg.tensors[t] if t >= 0 else None
                    if (t >= 0 and t not in produced and t not in ins and tt.data is None
                            and not tt.is_variable):
                        ins.append(t)
                produced.update(t for t in n.outputs if t >= 0)
            outs_seg = [t for i in seg.nodes for t in sg.nodes[i].outputs
                        if t >= 0 and (t in outs or consumers.get(t, set()) - members)]
            self._steps.append(("f", _Fallback(list(seg.nodes), ins, list(dict.fromkeys(outs_seg)))))

    def _const(self, t: int):
        return self.sg.tensors[t].data

    def allocate(self, input_shapes: dict[int, tuple]) -> None:
        """Plan every step for the given input shapes: build kernels, create fallback
        sub-interpreters, upload constants, compute constant-only nodes once."""
        old_shapes = getattr(self, "shapes", {})
        self.shapes = {}
        for t in self.sg.inputs:
            self.shapes[t] = tuple(input_shapes.get(t, self.sg.tensors[t].shape))
        for tensor in self.sg.tensors:
            if tensor.data is not None:
                self.shapes[tensor.index] = tensor.data.shape
        self.folded = set()
        # inputs set before and not resized keep their values, as LiteRT's do
        kept = {t for t in self.sg.inputs if old_shapes.get(t) == self.shapes[t]}
        self.on_device = set(getattr(self, "on_device", ())) & kept
        self.on_host = set(getattr(self, "on_host", ())) & kept
        for kind, step in self._steps:
            if kind == "k":
                self._plan_kernel(step)
            else:
                self._plan_fallback(step)
        self.allocated = True
        # computed once: nodes whose inputs are all constant (or folded)
        for kind, step in self._steps:
            if kind == "k" and step not in self.build_failures:
                n = self.sg.nodes[step]
                if all(t in self.const_dev or self._is_folded_tensor(t) for t in n.inputs):
                    self._run_kernel(step)
                    self.folded.add(step)
        self._fuse_all()

    # ----------------------------------------------------------------- fusion
    def _fuse_all(self) -> None:
        """Group consecutive lowered nodes with one output shape into fused kernels.

        Each member's inputs are either produced inside the group (same element space) or
        read from global memory, broadcast if need be; an intermediate tensor is written
        only if a node outside the group or a subgraph output needs it. A group whose
        kernel does not build is left unfused (each node keeps its own kernel)."""
        self._groups, self._member = {}, {}
        if not self.fuse:
            return
        run: list = []
        shape = None
        for kind, step in self._steps + [("end", None)]:
            if kind == "k" and step not in self.folded:
                out = tuple(self.shapes[self.sg.nodes[step].outputs[0]])
                if run and out == shape:
                    run.append(step)
                    continue
                self._make_group(run)
                run, shape = [step], out
            else:
                self._make_group(run)
                run, shape = [], None

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
        g = _Fused(list(nodes), inputs, outputs, [tuple(self.shapes[t]) for t in inputs],
                   cl.Kernel(prg, "litecl_fused"), tiling, gsize, lsize, source)
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
        kern = cl.Kernel(prg, spec.name)
        kobj = _Kernel(spec, kern, tiling, gsize, lsize)
        kobj.in_shapes = shapes  # type: ignore[attr-defined]
        self._kernels[i] = kobj
        for t in n.inputs:
            if self.sg.tensors[t].data is not None and t not in self.const_dev:
                self.const_dev[t] = self._upload_new(self.sg.tensors[t].data)

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
                    content = build_submodel(self.model, self.sg.index, f.nodes, f.inputs, f.outputs)
                    f.interp = make_interpreter(content, self.num_threads, self.reference)
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
        for t, d in zip(f.outputs, f.out_details):
            self.shapes[t] = tuple(int(x) for x in d["shape"])

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
            if not self.zero_copy and 0 < nbytes <= SMALL_BYTES:
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
        if old is not None:
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
        ev = self._writes.pop(t, None)
        if ev is not None:
            ev.wait()  # a queued upload may still be reading the host array
        if self.zero_copy and value.nbytes > SMALL_BYTES and self._only_kernels_read(t):
            arr = self._mapped(t, cl.map_flags.WRITE_INVALIDATE_REGION)
            try:
                np.copyto(arr, value, casting="no")
            finally:
                arr.base.release(self.device.queue)
            self.on_device.add(t)
            self.on_host.discard(t)
            return
        a = self._host_array(t)
        np.copyto(a, value, casting="no")
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
                if shapes != getattr(self._kernels[step], "in_shapes", None):
                    self._plan_kernel(step)  # a dynamic shape changed
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
                if 0 < a.nbytes <= SMALL_BYTES:
                    cl.enqueue_copy(self.device.queue, a, self.dev[t], is_blocking=False)
                    self.on_host.add(t)  # valid once finish() below returns
        # synchronous like LiteRT's Invoke(): outputs are complete when invoke returns
        self.device.queue.finish()
        self._writes.clear()  # every upload is done (waiting on a done event costs ~25 us on NVIDIA)
        if refuse:
            self._fuse_all()

    def _only_kernels_read(self, t: int) -> bool:
        """True when no fallback segment reads ``t`` (so it need not stay on the host)."""
        ro = getattr(self, "_host_readers", None)
        if ro is None:
            ro = self._host_readers = {x for kind, f in self._steps if kind == "f" for x in f.inputs}
        return t not in ro

    def get(self, t: int) -> np.ndarray:
        """A host copy of tensor ``t``'s current value (one copy: mapped on CPU devices,
        read straight into the result on GPUs)."""
        if t in self.on_device and t not in self.on_host and t in self.dev:
            d = self.sg.tensors[t].dtype.np
            shape = tuple(self.shapes[t])
            if not _numel(shape):
                return np.empty(shape, d)
            if self.zero_copy:
                arr = self._mapped(t, cl.map_flags.READ)
                try:
                    return np.array(arr, copy=True)
                finally:
                    arr.base.release(self.device.queue)
            out = np.empty(shape, d)
            cl.enqueue_copy(self.device.queue, out, self.dev[t], is_blocking=True)
            return out
        return np.array(self._to_host(t), copy=True)

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


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n
