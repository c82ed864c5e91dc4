"""litecl.Delegate: a TFLite delegate, written in Python, that runs CAST and ADD nodes as
generated OpenCL kernels inside the user's own LiteRT Interpreter.

LiteRT owns the graph, the memory, the shapes and every other node; this module answers
"which nodes, and why not" at the delegate's Prepare (lowering.why_not on a node view
read from TfLiteContext; placement.py's cost model under ``placement="auto"``), and runs
each delegated partition on litecl's C runtime (backend/runtime.py: the native delegate's
litecl_delegate.c, loaded in process), shaped like TFLite's SimpleDelegate: init (the
nodes to replace: ``_Planner`` and the runtime's partition), prepare (the runtime asks
``_Planner.plan_for`` for the kernel plan at new input shapes, backend/kernels.py, with
its programs from the cache; it resizes the outputs), invoke (the runtime binds LiteRT's
tensor memory, launches and waits, with no Python).

    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    import litecl
    interp = Interpreter(model_path="m.tflite", experimental_delegates=[litecl.Delegate()],
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)

At the C ABI (backend/abi.py): the callbacks are module-level ctypes functions created
once per process (they outlive every interpreter and Delegate), each TfLiteDelegate
struct is kept for the process's life (LiteRT may read it after the Python object is
gone), and no exception leaves a callback: it becomes kTfLiteError, with litecl's
message passed to LiteRT's error reporter (context->ReportError) and kept for
litecl.Interpreter to raise as litecl's own error type.
"""
from __future__ import annotations

import collections
import ctypes as C
import itertools
import os
import sys
import threading
import types
import weakref
from dataclasses import replace

import numpy as np
import pyopencl as cl

from . import abi
from . import selftest as _selftest
from .device import open_device, small_device, small_device_why
from .errors import KernelBuildError, LiteclError, env_flag
from .kernels import build_program, plan_partition
from .lowering import why_not
from .model import Node, Tensor
from . import order as _order
from . import runtime
from . import placement as _placement
from .placement import PLACEMENTS
from .ops.dtypes import BY_C_TYPE, C_TYPE_SCHEMA

__all__ = ["Delegate", "REFERENCES", "DELEGATE_NAME"]

#: What the delegate matches where LiteRT's kernels differ (issue 22 item 6): "builtin" is
#: LiteRT's builtin kernel (BUILTIN_WITHOUT_DEFAULT_DELEGATES / AUTO), "ref" BUILTIN_REF.
REFERENCES = ("builtin", "ref")
DELEGATE_NAME = "litecl OpenCL"
#: partition invokes Delegate.profile_log keeps (the oldest go first)
PROFILE_LOG_MAX = 10000
_OPS = {abi.BUILTIN_ADD: "ADD", abi.BUILTIN_CAST: "CAST"}
#: Delegate's keep_order default; the native delegate's too (litecl_delegate.c
#: LCL_KEEP_ORDER_DEFAULT). Measured: docs/PERFORMANCE.md, benchmarks/bench_keep_order.py
KEEP_ORDER_DEFAULT = "auto"
#: TfLiteAllocationType values whose memory holds a value fixed for the interpreter's life
_CONSTANT_ALLOC = (abi.MMAP_RO, abi.PERSISTENT_RO)
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


#: how long the runtime polls for an invoke's commands before clFinish (us): the native
#: delegate's default (litecl_delegate.c LCL_SPIN_US, wait_done says why)
_SPIN_US = 1000


def _quiet(quiet) -> bool:
    if quiet is not None:
        return bool(quiet)
    return env_flag("LITECL_QUIET")


# ---------------------------------------------------------------------- node views
def _raw_tensor(c, t: int) -> tuple:
    """What litecl reads of tensor ``t`` of context ``c`` (a TfLiteContext), as plain
    values: type, dims, dims_signature, quantization (scales, zero points, dimension)
    or None, is_variable, constant, name. The key of ``_TENSOR_VIEWS``."""
    ts = c.tensors[t]
    q = None
    if ts.quantization.type == 1 and ts.quantization.params:
        p = C.cast(ts.quantization.params, C.POINTER(abi.TfLiteAffineQuantization)).contents
        q = (abi.float_array(p.scale), abi.int_array(p.zero_point), int(p.quantized_dimension))
    shape = abi.int_array(ts.dims)
    return (ts.type, shape, abi.int_array(ts.dims_signature) if ts.dims_signature else shape, q,
            bool(ts.is_variable), ts.allocation_type in _CONSTANT_ALLOC, ts.name)


def _tensor_view(t: int, raw: tuple) -> Tensor:
    """lowering's Tensor for tensor ``t`` read as ``raw`` (``_raw_tensor``; no constant
    data: kernels read constants from LiteRT's memory at invoke)."""
    ctype, shape, sig, q, variable, constant, name = raw
    dt = BY_C_TYPE.get(ctype)
    code = dt.tflite if dt is not None else C_TYPE_SCHEMA.get(ctype, -1)
    scales, zps, qd = np.zeros(0, np.float32), np.zeros(0, np.int64), 0
    if q is not None:
        scales, zps, qd = np.array(q[0], np.float32), np.array(q[1], np.int64), q[2]
    return Tensor(index=t, name=name.decode("utf-8", "replace") if name else "", type_code=code,
                  dtype=dt, shape=shape, shape_signature=sig, buffer=0, data=None, scales=scales,
                  zero_points=zps, quantized_dimension=qd, is_variable=variable, constant=constant)


#: (tensor, raw) -> Tensor view, shared by every context that reads the same values (a
#: view is never modified). With _NODE_VIEWS, what makes a second interpreter of a model
#: cheap to prepare: 80 us of view building per CAST/ADD node became a lookup.
_TENSOR_VIEWS: dict = {}
#: (raw node, raw tensors, tensors_size) -> (Node view, node_key)
_NODE_VIEWS: dict = {}
_VIEWS_MAX = 1 << 16


def _memo_put(memo: dict, key, value):
    if len(memo) >= _VIEWS_MAX:
        memo.clear()
    memo[key] = value
    return value


class _Tensors:
    """``sg.tensors`` for lowering: tensor views of one context, read on first use."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._views: dict = {}

    def __getitem__(self, t: int) -> Tensor:
        v = self._views.get(t)
        if v is None:
            c = self._ctx.contents
            if not 0 <= t < c.tensors_size:
                raise IndexError(f"tensor {t} outside the context's {c.tensors_size}")
            raw = _raw_tensor(c, t)
            v = _TENSOR_VIEWS.get((t, raw))
            if v is None:
                v = _memo_put(_TENSOR_VIEWS, (t, raw), _tensor_view(t, raw))
            self._views[t] = v
        return v


def node_key(n: Node, sg) -> tuple:
    """Everything lowering reads of node ``n`` (op, version, options, and per tensor its
    index, type, quantization, variable and constant flags and declared shape): equal keys
    lower to the same kernels at equal shapes (the plan memo's key)."""
    opts = n.options
    o = (opts.fusedActivationFunction, opts.potScaleInt16) if opts is not None else None
    ts = []
    for t in (*n.inputs, *n.outputs):
        if t < 0:
            ts.append((t,))
            continue
        v = sg.tensors[t]
        ts.append((t, v.type_code, tuple(v.scales.tolist()), tuple(v.zero_points.tolist()),
                   v.quantized_dimension, v.is_variable, v.constant, v.shape_signature))
    return (n.op, n.version, o, len(n.inputs), tuple(ts))


def _raw_node(index: int, node, code: int, version: int) -> tuple:
    """What litecl reads of node ``index`` (a TfLiteNode with builtin ``code``): index,
    code, version, inputs, outputs, and ADD's (activation, pot_scale_int16)."""
    opts = None
    if code == abi.BUILTIN_ADD:
        opts = (0, True)  # the schema's defaults when a model gives no options
        if node.builtin_data:
            p = C.cast(node.builtin_data, C.POINTER(abi.TfLiteAddParams)).contents
            opts = (int(p.activation), bool(p.pot_scale_int16))
    return (index, code, version, abi.int_array(node.inputs), abi.int_array(node.outputs), opts)


def _node_view(raw: tuple) -> Node:
    index, code, version, inputs, outputs, opts = raw
    if opts is not None:
        opts = types.SimpleNamespace(fusedActivationFunction=opts[0], potScaleInt16=opts[1])
    return Node(index=index, opcode=code, op=_OPS.get(code, f"BUILTIN:{code}"), inputs=inputs,
                outputs=outputs, options=opts, options2=None, version=version)


# ---------------------------------------------------------------------- the delegate
_STRUCTS: list = []          # every TfLiteDelegate made: kept for the process's life
_LIVE: dict = {}             # delegate key -> weakref to its Delegate
_KERNELS: dict = {}          # the runtime's partition (kernel user data) -> its planner key
_PLANNERS: dict = {}         # planner key -> _Planner (removed by the kernel's free)
_MAX_RECORDS = 4096          # Prepare records a Delegate keeps of contexts no owner names
_KEYS = itertools.count(1)
_EVENTS = itertools.count(1)  # orders partition frees and pointer fetches (Delegate._freed)
_LOCK = threading.Lock()


def _immortal(obj):
    """``obj`` with a reference that is never dropped: the callbacks and TfLiteDelegate
    structs LiteRT holds pointers to must outlive the module's globals, which Python clears
    at exit before its last garbage collection; an Interpreter freed there (one in a
    reference cycle) calls the kernels' free callback (a freed ctypes thunk: SIGSEGV)."""
    C.pythonapi.Py_IncRef(C.py_object(obj))
    return obj


def _takes(ops, nodes) -> tuple:
    """``Delegate(ops=, nodes=)`` checked: (frozenset of op names or None, {subgraph:
    frozenset of node indices} or None). Raises LiteclError naming what is wrong."""
    if ops is not None:
        if isinstance(ops, str) or not all(isinstance(o, str) for o in ops):
            raise LiteclError(f"ops must be a sequence of operator names such as ('CAST',), got {ops!r}")
        bad = sorted(set(ops) - set(_OPS.values()))
        if bad:
            raise LiteclError(f"ops names {', '.join(bad)}; litecl runs {', '.join(sorted(_OPS.values()))}")
        ops = frozenset(ops)
    if nodes is not None:
        ok = isinstance(nodes, dict) and all(
            isinstance(k, int) and not isinstance(k, bool) and k >= 0 and not isinstance(v, (str, bytes))
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in v) for k, v in nodes.items())
        if not ok:
            raise LiteclError(f"nodes must map subgraph indices to node indices, e.g. {{0: [1, 5]}}, got {nodes!r}")
        nodes = {k: frozenset(v) for k, v in nodes.items()}
    return ops, nodes


class Delegate:
    """A LiteRT delegate running CAST and ADD nodes on an OpenCL device.

    Pass it in LiteRT's ``Interpreter(..., experimental_delegates=[delegate])``
    (ai_edge_litert's or tensorflow's tf.lite), alone or before other delegates: it takes
    the CAST/ADD nodes it can run and leaves every other node to LiteRT (and to the
    delegates after it). One Delegate may serve many interpreters and threads.

    Args:
      device: an OpenCL device spec ("auto", "pocl", "intel", "oclgrind", "nvidia", a
        name substring, optionally ":profile=mobile"), a litecl Device, or None
        (``LITECL_DEVICE`` or auto).
      placement: "all" (default): every node lowering.why_not accepts runs on OpenCL;
        "auto": only partitions placement.py's cost model expects to be faster there.
      reference: the LiteRT kernels to match where LiteRT's own differ: "builtin"
        (default, LiteRT's builtin kernels: its int16 quantized ADD rounds ties as
        add.cc's optimized path) or "ref" (BUILTIN_REF's reference kernels).
      quiet: True silences the "Replacing N out of M node(s)" line on stderr (default:
        ``LITECL_QUIET``, a yes/no variable: 1/true/yes/on or 0/false/no/off, errors.env_flag).
      fuse: one kernel for consecutive delegated nodes over one element space.
      keep_order: "auto" (default), True or False: whether LiteRT's own nodes keep the
        model's order around litecl's partitions (backend/order.py). LiteRT's greedy
        partitioning runs every LiteRT node that does not wait for a delegated node
        before the next partition; True marks LiteRT's nodes might_have_side_effect for
        the ReplaceNodeSubsetsWithDelegateKernels call (its partitioner chains those in
        plan order), only where that leaves litecl's partitions as they are, and puts the
        flags back after it; "auto" does so only where the greedy order would make more
        per-invoke bytes live at once (order.keep_order_pays: pose_detection's
        dequantized weights, 0.8-1.9 ms per invoke faster on PoCL; docs/PERFORMANCE.md).
        A delegate applied before litecl (LiteRT's GPU delegate) keeps its nodes: only
        LiteRT's own are marked, and the order around the other's kernels is dropped
        (subgraph_records' "order_dropped").
      ops: the operators litecl may take, e.g. ("CAST",) (default: every one it lowers,
        CAST and ADD).
      nodes: {subgraph index: [node indices]}: litecl takes only these nodes (default:
        every one); a subgraph not named gives none.
    Placed anywhere in the delegate list: litecl claims from the nodes the delegates
    before it left, in every subgraph; placement() names the CAST/ADD nodes another
    delegate took ("placement": "delegate").
    Raises DeviceError (no such device), LiteclError (bad argument, a LITECL_QUIET that is
    no yes/no value, an untested LiteRT/TensorFlow version, a failed layout self-check):
    all ValueError.
    """

    def __init__(self, device=None, placement: str = "all", *, reference: str = "builtin",
                 quiet=None, fuse: bool = True, keep_order=KEEP_ORDER_DEFAULT, ops=None, nodes=None):
        self.ops, self.nodes = _takes(ops, nodes)
        if placement not in PLACEMENTS:
            raise LiteclError(f"unknown placement {placement!r}; expected one of {', '.join(PLACEMENTS)}")
        if reference not in REFERENCES:
            raise LiteclError(f"unknown reference {reference!r}; expected one of {', '.join(REFERENCES)}")
        if not isinstance(fuse, (bool, np.bool_)):
            raise LiteclError(f"fuse must be True or False, got {fuse!r}")
        if not (isinstance(keep_order, (bool, np.bool_)) or (isinstance(keep_order, str) and keep_order == "auto")):
            raise LiteclError(f"keep_order must be True, False or 'auto', got {keep_order!r}")
        if quiet is not None and not isinstance(quiet, (bool, np.bool_)):
            raise LiteclError(f"quiet must be True, False or None (LITECL_QUIET), got {quiet!r}")
        # a LITECL_QUIET or LITECL_NO_CACHE of no yes/no word: an error here, not in LiteRT's Prepare
        self.quiet = _quiet(quiet)
        env_flag("LITECL_NO_CACHE")  # the flag only: finding the folder cost ~40 us a Delegate
        _self_check()
        self._device = open_device(device)
        self.caps = _caps_for(self.device.caps, reference)
        self.placement_mode = placement
        self.reference = reference
        self.fuse = bool(fuse)
        self.keep_order = keep_order if keep_order == "auto" else bool(keep_order)
        self.memory = _memory_policy(self.device)
        # where small partitions run (device.small_device: PoCL's basic device beside its
        # pthread one), or None; only where partitions work in LiteRT's memory in place
        self.small_device = small_device(self.device) if self.memory.in_place else None
        self._lock = threading.RLock()
        self._records: dict = {}      # context address -> its latest Prepare's record, in order of first Prepare
        self._owned: dict = {}        # owner (Delegate.owning) -> {context address: None}, in that order
        self._parts: dict = {}        # context address -> {planner key: live _Planner} (under _LOCK)
        self._announced: set = set()  # context addresses whose Replacing line was said
        # context address -> the _EVENTS count when its last partition kernel was freed (under
        # _LOCK): LiteRT frees them when the interpreter goes, or when a resize undoes the
        # delegate before Prepare runs again
        self._freed: dict = {}
        # per thread: litecl.Interpreter's key while it drives LiteRT (owning), and the last
        # error a callback raised (take_error); one object: each costs ~1 us to make
        self._owner = self._errors = threading.local()
        # Delegate.stats of partitions already freed (live ones are read from the runtime)
        self._stats = {"in_place": 0, "copied": 0, "staged": 0, "partition_invokes": 0}
        self._profile = False
        self.kernel_times_ns: dict = {}
        #: with ``profile`` on, one dict per partition invoke (the latest PROFILE_LOG_MAX), in
        #: the order they ran: "ctx" (its TfLiteContext address), "partition" (its number),
        #: "device" (name), "host" ((start, end) of its invoke, perf_counter_ns), "spans"
        #: ([(what, start, end)] of the host's own work in it: "wait" for OpenCL, "stage in" /
        #: "stage out" memcpys through pinned memory; perf_counter_ns), "commands" ([(kind "write" | "kernel" |
        #: "copy" | "read", what, bytes, nodes, host ns just before the enqueue, and the
        #: event's queued, start and end on the device's clock, ns)]). bench --trace reads it.
        self.profile_log: collections.deque = collections.deque(maxlen=PROFILE_LOG_MAX)
        self._costs = None            # auto's device_costs, once looked up
        self._key = next(_KEYS)
        # the runtime that runs the partitions (runtime.py: litecl_delegate.c in process)
        self._rt = runtime.load()
        self._native = self._rt.lcl_inprocess_new(self._key, C.cast(_PLAN, C.c_void_p), C.cast(_REPORT, C.c_void_p),
                                                  C.cast(_PROFILE, C.c_void_p), _SPIN_US)
        if not self._native:
            raise LiteclError("out of memory for litecl's runtime")
        weakref.finalize(self, self._rt.lcl_inprocess_free, self._native)
        st = abi.TfLiteDelegate()
        st.data_ = self._key
        st.Prepare = _DELEGATE_PREPARE
        st.CopyFromBufferHandle = _COPY_HANDLE
        st.CopyToBufferHandle = _COPY_HANDLE
        st.FreeBufferHandle = _FREE_HANDLE
        st.flags = abi.ALLOW_DYNAMIC_TENSORS
        with _LOCK:
            _STRUCTS.append(_immortal(st))
            _LIVE[self._key] = weakref.ref(self)
        self._struct = st

    def __repr__(self) -> str:
        return f"litecl.Delegate({self.device!r}, placement={self.placement_mode!r})"

    @property
    def stats(self) -> dict:
        """Tensor bindings at partition invokes: "in_place" (in LiteRT's memory), "copied"
        (through device copies), "staged" (of those, through pinned staging memory); and
        "partition_invokes": invokes of litecl's partition kernels, not of the interpreter
        (one interpreter invoke counts once per delegated partition it runs; a partition in
        a WHILE body once per iteration). Counts the invokes the runner ran in C too."""
        out = dict(self._stats)
        with _LOCK:
            parts = [p for mine in self._parts.values() for p in mine.values()]
        for p in parts:
            for k, v in p.counts().items():
                if k in out:
                    out[k] += v
        return out

    @property
    def device(self):
        """The litecl Device (device.py) the delegate runs on: fixed at construction."""
        return self._device

    @property
    def small_partitions(self) -> str:
        """Where small partitions run, in words: "partitions moving <= 2 MiB run on NAME"
        (small_device, SMALL_PARTITION_BYTES); where PoCL's pthread device has no small
        device, "no small-partition device: WHY" (device.small_device_why); "" on every
        other device, where all partitions run alike."""
        if self.small_device is None:
            why = small_device_why(self.device) if self.memory.in_place else ""
            return f"no small-partition device: {why}" if why else ""
        return (f"partitions moving <= {SMALL_PARTITION_BYTES / 2**20:g} MiB run on "
                f"{self.small_device.caps.name}")

    @property
    def profile(self) -> bool:
        """Event-profile each launch into kernel_times_ns (bench's per-node table) and each
        partition invoke into profile_log (bench --trace): the runtime keeps every
        command's event and reads its times after the invoke's wait."""
        return self._profile

    @profile.setter
    def profile(self, on: bool) -> None:
        if not isinstance(on, (bool, np.bool_)):
            raise LiteclError(f"profile must be True or False, got {on!r}")
        self._profile = bool(on)
        self._rt.lcl_inprocess_profile(self._native, int(self._profile))

    def _device_index(self, dev) -> int:
        """``dev``'s index in the runtime (lcl_inprocess_device: the process's, one per
        queue), registered on first use. Raises LiteclError where the runtime cannot
        reach it."""
        got = _DEVICE_INDEX.get(id(dev))  # Devices live for the process (device.py)
        if got is not None and got[0] is dev:
            return got[1]
        from .device import FORK_MESSAGE  # noqa: PLC0415
        from .ops.tiling import launch_config  # noqa: PLC0415

        loader = runtime.opencl_loader()
        if loader is None:
            raise LiteclError("the OpenCL loader pyopencl uses was not found in the process")
        caps = self.caps if dev is self.device else dev.caps
        row = launch_config(caps)
        err = C.create_string_buffer(1024)
        fork = FORK_MESSAGE.format(device=f"{dev.caps.platform}: {dev.caps.name}")
        i = self._rt.lcl_inprocess_device(
            self._native, loader.encode(), dev.context.int_ptr, dev.queue.int_ptr, dev.device.int_ptr,
            caps.compute_units, caps.max_work_group_size, row.local_size, row.groups_per_cu, row.vec_bytes,
            int(dev.one_thread), fork.encode(), err, len(err))
        if i < 0:
            raise LiteclError(f"litecl's runtime cannot use {dev.caps.name}: {err.value.decode(errors='replace')}")
        _DEVICE_INDEX[id(dev)] = (dev, i)
        return i

    def _get_native_delegate_pointer(self) -> int:
        """The TfLiteDelegate* LiteRT's Interpreter takes (its experimental_delegates API).
        LiteRT's and tf.lite's Interpreter ask for it once per construction, just before
        ModifyGraphWithDelegate runs Prepare for each subgraph (_prepare's announcement)."""
        self._owner.fetched = next(_EVENTS)
        return C.addressof(self._struct)

    # ----------------------------------------------------------------- reports
    def placement(self, owner=None) -> list[dict]:
        """One dict per CAST/ADD node of the latest Prepare of each subgraph LiteRT gave
        this delegate: {"interpreter", "subgraph", "index", "op", "placement":
        "opencl"|"litert"|"delegate" (another delegate, applied before litecl, took it),
        "reason" (why litecl does not run it; "" on OpenCL), "partition" (its
        delegated partition's number in that subgraph, or None), "kernel" (what runs),
        "device" (the OpenCL device name its partition runs on: the delegate's device, or
        its small_device for a small partition; "" until planned and on LiteRT)}.
        Records stay until the Delegate goes, also those of a LiteRT interpreter that has
        been deleted (LiteRT tells a delegate of no deletion when no partition kernel is
        left to free); litecl.Interpreter drops its own when it closes.

        ``interpreter`` numbers the LiteRT interpreters (LiteRT's, tf.lite's or
        litecl.Interpreter's) this delegate was applied to, 0, 1, ... in the order of
        their first Prepare, among those it holds records of; ``subgraph`` is the
        model's subgraph index within that interpreter (LiteRT's
        AcquireSubgraphContext, common.h, read at Prepare). A Delegate shared by two
        interpreters of one model gives rows of interpreter 0 and 1, each from subgraph
        0. ``owner`` (what litecl.Interpreter passes) keeps one interpreter's rows; the
        numbers stay those of the whole delegate."""
        with self._lock:
            return [{**r, "interpreter": n, "subgraph": si}
                    for a, n, si in self._numbered(owner) for r in self._records[a]["rows"]]

    def _numbered(self, owner) -> list[tuple]:
        """[(context address, interpreter number, subgraph index)] of ``owner``'s
        contexts (None: every one), in the order of their first Prepare (under
        self._lock). Interpreters are numbered by their first context among all records."""
        number: dict = {}
        for r in self._records.values():
            number.setdefault(r["place"][0], len(number))
        return [(a, number[self._records[a]["place"][0]], self._records[a]["place"][1])
                for a in self._addrs(owner)]

    def subgraph_records(self, owner=None) -> list[dict]:
        """Per subgraph, in placement()'s order: {"interpreter", "subgraph" (as
        placement() numbers them), "context" (the TfLiteContext address; a partition's
        ``ctx_addr``), "nodes" (M), "claimed" (N), "partitions" (P), "kept_order"
        (whether keep_order kept LiteRT's nodes in the model's order), "order_dropped"
        (then, the kernel nodes of delegates applied before litecl, around which LiteRT's
        greedy order stays: [(node index, name)]), "rows" (placement()'s rows of it,
        copies), "sg" (the tensor views Prepare read:
        ``sg.tensors[t]``)} of the latest Prepare of each context. export reads these
        with partitions(); a partition's ``plan`` is None until LiteRT prepared it (a
        node whose shapes are known only at invoke is planned there)."""
        with self._lock:
            return [{"interpreter": n, "subgraph": si, "context": a,
                     **{k: self._records[a][k] for k in ("nodes", "claimed", "partitions", "kept_order",
                                                         "order_dropped", "sg")},
                     "rows": [{**r, "interpreter": n, "subgraph": si} for r in self._records[a]["rows"]]}
                    for a, n, si in self._numbered(owner)]

    def taken(self, owner=None) -> frozenset:
        """{(subgraph, node index)} of the nodes on OpenCL, subgraphs numbered as
        placement() numbers them within their interpreter: pass ``owner`` where the
        delegate serves several interpreters (their subgraph 0s share the number 0)."""
        with self._lock:
            return frozenset((si, r["index"]) for a, _, si in self._numbered(owner)
                             for r in self._records[a]["rows"] if r["placement"] == "opencl")

    def graph_info(self, owner=None) -> list[dict]:
        """Per subgraph, in placement()'s order and numbering: {"interpreter",
        "subgraph", "nodes" (M), "claimed" (N), "partitions" (P), "kept_order",
        "order_dropped" (subgraph_records says what they are)}."""
        with self._lock:
            return [{"interpreter": n, "subgraph": si,
                     **{k: self._records[a][k] for k in ("nodes", "claimed", "partitions", "kept_order",
                                                         "order_dropped")}}
                    for a, n, si in self._numbered(owner)]

    def partitions(self, owner=None) -> list:
        """The live partition kernels (_Planner) of every interpreter using this
        delegate (or of ``owner``'s), with their current plans (export and bench read these)."""
        with self._lock:
            addrs = self._addrs(owner)
        out = []
        with _LOCK:
            for a in addrs:
                out += sorted(self._parts.get(a, {}).values(), key=lambda p: p.number)
        return out

    def has_partitions(self, owner) -> bool:
        """Whether ``owner``'s contexts have a live partition kernel (partitions(), cheaper)."""
        with self._lock:
            addrs = self._owned.get(owner, ())
            with _LOCK:
                return any(self._parts.get(a) for a in addrs)

    def forget(self, owner) -> None:
        """Drop the records of ``owner``'s contexts (litecl.Interpreter's, when it is
        deleted: its key, id(interpreter), may name another one later)."""
        with self._lock:
            for a in self._owned.pop(owner, ()):
                self._records.pop(a, None)
                self._announced.discard(a)

    def _addrs(self, owner) -> list:
        """Context addresses of ``owner`` (None: of every interpreter), in placement()'s order.

        ``owner`` is litecl.Interpreter's key (``id(interpreter)``, an int) or a
        litecl.Interpreter; anything else (a LiteRT or tf.lite Interpreter, which has no
        key: its rows are told apart by their "interpreter" number) raises LiteclError
        instead of matching nothing."""
        if owner is None:
            return list(self._records)
        if not isinstance(owner, int) or isinstance(owner, bool):
            if getattr(owner, "_litecl", None) is self:
                owner = id(owner)  # a litecl.Interpreter of this delegate
            elif hasattr(owner, "_litecl") and type(owner).__module__.startswith("litecl"):
                raise LiteclError(f"this litecl.Interpreter uses another Delegate ({owner._litecl!r}), "
                                  "not this one: ask its own, interpreter.delegate")
            else:
                raise LiteclError(
                    f"owner must be a litecl.Interpreter or its id(), got {type(owner).__module__}."
                    f"{type(owner).__name__}; for LiteRT's own Interpreter call this without owner: "
                    "each row's \"interpreter\" number tells the interpreters apart")
        return list(self._owned.get(owner, ()))

    def _record(self, addr: int, rec: dict) -> None:
        """Keep ``rec`` as context ``addr``'s latest Prepare (under self._lock), with its
        place, rec["place"]: (its interpreter's key, its subgraph index there). An address
        another owner's context had (a freed interpreter's, reused) starts anew at the end;
        past _MAX_RECORDS records the oldest of no owner go (a LiteRT Interpreter the user
        made tells litecl nothing when it is freed).

        The place comes from LiteRT: during Prepare, ``AcquireSubgraphContext(ctx, k)``
        (common.h) gives subgraph k's context of the same interpreter; the key is
        subgraph 0's context address and the index the k that gives ``addr``. Acquire
        switches subgraph k to its delegate context and Release back to its kernel one,
        so every k below ours is released and ours (in Prepare: in its delegate context
        already) is not: every context LiteRT made reads byte for byte as before
        (measured, LiteRT 2.3.0 and tf.lite 2.21; tests/test_delegate.py). k never passes
        ours, so LiteRT reports no out-of-range index. Where the context has no such
        function, the key is the owner and the index the context's place among that
        owner's (the order LiteRT prepares a model's subgraphs in)."""
        place = None
        c = abi.TfLiteContext.from_address(addr)
        if c.AcquireSubgraphContext and c.ReleaseSubgraphContext:
            acquire = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int, C.POINTER(abi.Ctx))(c.AcquireSubgraphContext)
            release = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int)(c.ReleaseSubgraphContext)
            ctx, got, first = C.cast(addr, abi.Ctx), abi.Ctx(), None
            for k in range(1 << 16):
                if acquire(ctx, k, C.byref(got)) != abi.K_OK:
                    break
                a = C.cast(got, C.c_void_p).value
                first = a if k == 0 else first
                if a == addr:
                    place = (("interpreter", first), k)
                    break
                release(ctx, k)
        old = self._records.get(addr)
        if old is not None and old["owner"] != rec["owner"]:
            self._records.pop(addr)
            self._announced.discard(addr)
            mine = self._owned.get(old["owner"])
            if mine is not None:
                mine.pop(addr, None)
                if not mine:
                    del self._owned[old["owner"]]
        if place is None:
            key = ("owner", rec["owner"])
            place = old["place"] if old is not None and old["place"][0] == key else (
                key, sum(r["place"][0] == key for r in self._records.values()))
        rec["place"] = place
        self._records[addr] = rec
        if rec["owner"] is not None:
            self._owned.setdefault(rec["owner"], {})[addr] = None
        elif len(self._records) > _MAX_RECORDS:
            for a in [a for a, r in self._records.items() if r["owner"] is None and a != addr]:
                del self._records[a]
                self._announced.discard(a)
                if len(self._records) <= _MAX_RECORDS // 2:
                    break

    def owning(self, owner, model=None, declared: bool = False, visible: frozenset = frozenset()):
        """A context manager: Prepares inside it are recorded as ``owner``'s. ``model``: a
        token naming the model LiteRT is preparing (litecl.Interpreter's; None: unknown),
        under which Prepare reuses the decisions of an earlier Prepare of the same model
        in this process (``_PREPARES``) after checking they still hold; ``declared``: the
        tensors still have the model's declared shapes (LiteRT's constructor applying the
        delegate), so the shapes need no check. ``visible``: {(tensor index, name)} that
        must stay LiteRT's tensors (a model's signature tensors that are no subgraph input
        or output): a node writing one stays on LiteRT, since inside a partition LiteRT
        would allocate no memory for it."""
        return _Owning(self._owner, (owner, model, declared, visible))

    def take_error(self):
        """The litecl error a callback raised on this thread since the last call, or None."""
        e = getattr(self._errors, "last", None)
        self._errors.last = None
        return e

    def _fail(self, ctx, e: BaseException) -> int:
        """Keep ``e`` for litecl's entry points, report it through LiteRT, return kTfLiteError."""
        if not isinstance(e, LiteclError):
            e = LiteclError(f"litecl delegate: {type(e).__name__}: {e}")
        self._errors.last = e
        try:
            if ctx and ctx.contents.ReportError:
                ctx.contents.ReportError(ctx, b"%s", (str(e) + "\n").encode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 (reporting must not fail the callback)
            pass
        return abi.K_ERROR

    # ----------------------------------------------------------------- Prepare
    def _device_costs(self):
        """auto's placement.device_costs of this device, looked up once per Delegate (one
        object per device and process: Prepare's memos key by its id)."""
        if self._costs is None:
            self._costs = _placement.device_costs(self.device)
        return self._costs

    def _decide(self, ctx, plan, si=None) -> tuple:
        """(sg, views, keys, rows, claim) of the CAST/ADD nodes of ``plan``: their node
        views and keys by index, a placement row each (also of those a delegate applied
        before litecl took), and the indices litecl takes. ``si``: the subgraph's index
        (for ``nodes``)."""
        c = ctx.contents
        tensors = _Tensors(ctx)
        sg = _Graph(tensors)
        views, keys, rows, claim = {}, {}, [], []
        visible = getattr(self._owner, "visible", frozenset())
        node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
        get, node_r, reg_r, size = c.GetNodeAndRegistration, C.byref(node_p), C.byref(reg_p), c.tensors_size
        wiring = [] if self.placement_mode == "auto" else None  # auto's groups: every node's tensors
        for i in plan:
            if get(ctx, i, node_r, reg_r) != abi.K_OK:
                raise LiteclError(f"LiteRT's GetNodeAndRegistration failed for node {i}")
            reg = reg_p.contents
            code = reg.builtin_code
            if wiring is not None:
                nd = node_p.contents
                wiring.append((i, abi.int_array(nd.inputs), abi.int_array(nd.outputs)))
            if code == abi.BUILTIN_DELEGATE:
                rows += _taken_by_other(ctx, node_p.contents, reg, C.addressof(self._struct))
            if code not in _OPS:
                continue
            raw = _raw_node(i, node_p.contents, code, int(reg.version))
            ts = tuple((t, _raw_tensor(c, t)) for t in (*raw[3], *raw[4]) if 0 <= t < size)
            hit = _NODE_VIEWS.get((raw, ts, size))
            if hit is None:
                n = _node_view(raw)
                _plausible(n, size)
                hit = _memo_put(_NODE_VIEWS, (raw, ts, size), (n, node_key(n, sg)))
            else:
                for t, r in ts:
                    if t not in tensors._views:
                        v = _TENSOR_VIEWS.get((t, r))
                        tensors._views[t] = v if v is not None else _memo_put(
                            _TENSOR_VIEWS, (t, r), _tensor_view(t, r))
            n, nk = hit
            keys[i] = nk
            k = (nk, tuple(r[1] for _, r in ts), id(self.caps))  # one caps object per device and reference: _caps_for
            reason = self._not_asked(n, i, si) or _REASONS.get(k)
            if reason is None:  # why_not, the kernel generated at the declared shapes, the
                # family's self-test on each device a partition may run on
                reason = (why_not(n, sg, self.caps) or _source_problem(n, sg, self.caps)
                          or _selftest.refusal((self.device, self.small_device), n, sg,
                                               [sg.tensors[t].shape for t in n.inputs], self.caps))
                if len(_REASONS) >= 65536:
                    _REASONS.clear()
                _REASONS[k] = reason
            if not reason and visible:
                named = [tensors[t].name for t in n.outputs if t >= 0 and (t, tensors[t].name) in visible]
                if named:
                    reason = (f"writes {named[0]!r}, a signature tensor that is no subgraph input or "
                              "output: LiteRT must allocate it, which it does not inside a partition")
            views[i] = n
            rows.append({"index": i, "op": n.op, "placement": "opencl" if not reason else "litert",
                         "reason": reason, "partition": None, "kernel": "", "device": ""})
            if not reason:
                claim.append(i)
        if claim and self.placement_mode == "auto":
            # auto's answer depends on the claimed nodes (keys: wiring, types, quantization),
            # their tensors' current shapes, the subgraph's wiring (groups) and the device's
            # costs: memoised on those (a LiteRT Interpreter of the user's, which names no
            # model, pays it once)
            costs = self._device_costs()
            wiring = tuple(wiring)
            akey = (id(costs), id(self.caps), self.memory.in_place, self.fuse, wiring,
                    tuple((i, keys[i], tuple(tensors[t].shape for t in (*views[i].inputs, *views[i].outputs)
                                             if t >= 0)) for i in claim))
            hit = _AUTO.get(akey)
            if hit is None or hit[0] is not costs:
                hit = _memo_put(_AUTO, akey, (costs, _placement.auto_keep_on_litert(
                    ctx, [views[i] for i in claim], sg, self, wiring)))
            keep = hit[1]
            for r in rows:
                if r["index"] in keep:
                    r["placement"], r["reason"] = "litert", keep[r["index"]]
            claim = [i for i in claim if i not in keep]
        rows.sort(key=lambda r: r["index"])
        return sg, views, keys, rows, claim

    def _not_asked(self, n, i: int, si) -> str:
        """Why ``ops``/``nodes`` keep node ``i`` (view ``n``) of subgraph ``si`` off
        litecl; "" where they do not."""
        if self.ops is not None and n.op not in self.ops:
            return f"not among ops= ({', '.join(sorted(self.ops))})"
        if self.nodes is not None and i not in self.nodes.get(si, ()):
            return f"not among nodes= of subgraph {si}"
        return ""

    def _prepare(self, ctx) -> int:
        c = ctx.contents
        plan_p = C.POINTER(abi.TfLiteIntArray)()
        if c.GetExecutionPlan(ctx, C.byref(plan_p)) != abi.K_OK:
            raise LiteclError("LiteRT's GetExecutionPlan failed")
        plan = abi.int_array(plan_p)
        if plan and max(plan) >= len(plan) and self._already_delegated(ctx, plan):
            return abi.K_OK  # keep the first application's record (placement())
        size = c.tensors_size
        si = None if self.nodes is None else _subgraph_index(C.addressof(c))
        model, declared = getattr(self._owner, "model", None), getattr(self._owner, "declared", False)
        mkey = costs = None
        if model is not None:
            if self.placement_mode == "auto":  # auto's decisions follow the device's costs
                costs = self._device_costs()
            # the entry holds ``costs``, so no other object takes its id while it lives
            mkey = (model, declared, plan, size, id(self.caps), id(costs), self.placement_mode,
                    self.reference, self.fuse, self.ops,
                    None if self.nodes is None else (si, tuple(sorted(self.nodes.get(si, ())))))
        got = None if mkey is None else _recall(ctx, _PREPARES.get(mkey), declared)
        if got is None:
            got = self._decide(ctx, plan, si)
            if mkey is not None:
                _memo_put(_PREPARES, mkey, (*_remember(*got), costs))
        sg, views, keys, rows, claim = got
        addr = C.addressof(c)
        with self._lock:
            with _LOCK:
                freed = self._freed.pop(addr, None)
            if freed is not None and getattr(self._owner, "fetched", 0) > freed:
                # every partition of this address was freed, then this thread asked for the
                # delegate's pointer: a new interpreter's context at a freed one's address (a
                # resize's undo and redo ask for none), which says its line again
                self._announced.discard(addr)
            rec = {"rows": rows, "views": views, "keys": keys, "nodes": len(plan), "claimed": len(claim),
                   "partitions": 0, "kept_order": False, "order_dropped": [], "sg": sg,
                   "owner": getattr(self._owner, "key", None)}
            self._record(addr, rec)
        if not claim:
            return abi.K_OK
        arr = abi.new_int_array(claim, owned_by_litert=False)
        marked = ()
        if self.keep_order:
            # the decision depends on the graph and its shapes: memoised where LiteRT builds the
            # model's own graph at its declared shapes (a second construction: ~5 ms saved on
            # pose_detection's 291 nodes)
            okey = (mkey, tuple(claim), self.keep_order) if mkey is not None and declared else None
            marked = _ORDERS.get(okey) if okey is not None else None
            if marked is None:
                marked = self._keep_order(ctx, plan, claim)
                if okey is not None:
                    _memo_put(_ORDERS, okey, marked)
            _flag(ctx, marked, True)
        rec["kept_order"] = bool(marked)
        if marked:
            rec["order_dropped"] = _other_kernels(ctx, plan)
        try:
            reg = _registration(self._rt)
            status = c.ReplaceNodeSubsetsWithDelegateKernels(
                ctx, reg, C.cast(arr, C.POINTER(abi.TfLiteIntArray)), C.cast(C.addressof(self._struct), abi.Dlg))
        finally:
            _flag(ctx, marked, False)
        if status != abi.K_OK:
            raise LiteclError("LiteRT refused litecl's node subsets (ReplaceNodeSubsetsWithDelegateKernels)")
        with self._lock:  # said once per context, whichever thread prepares it
            say = addr not in self._announced and not self.quiet
            if say:
                self._announced.add(addr)
        if say:
            sys.stderr.write(f"INFO: Replacing {len(claim)} out of {len(plan)} node(s) with delegate "
                             f"({DELEGATE_NAME}) node, yielding {rec['partitions']} partitions for "
                             "the whole graph.\n")
            sys.stderr.flush()
        return abi.K_OK


    def _keep_order(self, ctx, plan, claim) -> tuple:
        """The nodes of ``plan`` to mark might_have_side_effect for keep_order: LiteRT's
        nodes whose flag is clear, where marking them leaves litecl's partitions as LiteRT
        forms them unmarked and, under "auto", where order.keep_order_pays says so; else ()."""
        c = ctx.contents
        node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
        get, node_r, reg_r = c.GetNodeAndRegistration, C.byref(node_p), C.byref(reg_p)
        taken = set(claim)
        wiring, flagged, codes = [], [], []
        for i in plan:
            if get(ctx, i, node_r, reg_r) != abi.K_OK:
                raise LiteclError(f"LiteRT's GetNodeAndRegistration failed for node {i}")
            nd = node_p.contents
            wiring.append((abi.int_array(nd.inputs), abi.int_array(nd.outputs)))
            flagged.append(bool(nd.might_have_side_effect))
            codes.append(reg_p.contents.builtin_code)
        mine = [i in taken for i in plan]
        was = [k for k, f in enumerate(flagged) if f]
        # LiteRT's own nodes only: a kernel node of a delegate applied before litecl is
        # not marked, so the order around it is LiteRT's greedy one (order_dropped)
        marks = [k for k in range(len(plan)) if flagged[k] or not (mine[k] or codes[k] == abi.BUILTIN_DELEGATE)]
        if len(marks) == len(was):
            return ()
        greedy, kept = _order.partition(wiring, mine, was), _order.partition(wiring, mine, marks)
        if not _order.same_partitions(mine, greedy[0], kept[0]):
            return ()
        if self.keep_order == "auto":
            ts, size = c.tensors, c.tensors_size
            if not _order.keep_order_pays(wiring, mine, codes, lambda t: ts[t].bytes if t < size else 0,
                                          lambda t: t >= size or ts[t].allocation_type in _CONSTANT_ALLOC,
                                          greedy, kept):
                return ()
        return tuple(plan[k] for k in marks if not flagged[k])

    def _already_delegated(self, ctx, plan) -> bool:
        """Whether a node of ``plan`` is a partition kernel of this delegate: LiteRT
        applying it a second time to the same graph (``experimental_delegates=[d, d]``).
        Only called where a delegate changed the plan (a node index past its length:
        LiteRT appends delegate kernel nodes), so a plain Prepare pays one max()."""
        c = ctx.contents
        node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
        mine = C.addressof(self._struct)
        for i in plan:
            if i < len(plan):
                continue
            if c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p)) != abi.K_OK:
                continue
            if node_p.contents.delegate == mine:  # a void*: its address
                if not self.quiet:
                    sys.stderr.write("INFO: litecl: this graph's nodes were already given to this litecl "
                                     "delegate (it is in experimental_delegates twice); the second "
                                     "application claims none\n")
                return True
        return False


def _subgraph_index(addr: int) -> int:
    """The index in its interpreter of the subgraph whose context is at ``addr``, read in
    Prepare through LiteRT's AcquireSubgraphContext (Delegate._record says how). Raises
    LiteclError where the context has none (``nodes=`` cannot be told apart)."""
    c = abi.TfLiteContext.from_address(addr)
    if c.AcquireSubgraphContext and c.ReleaseSubgraphContext:
        acquire = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int, C.POINTER(abi.Ctx))(c.AcquireSubgraphContext)
        release = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int)(c.ReleaseSubgraphContext)
        ctx, got = C.cast(addr, abi.Ctx), abi.Ctx()
        for k in range(1 << 16):
            if acquire(ctx, k, C.byref(got)) != abi.K_OK:
                break
            if C.cast(got, C.c_void_p).value == addr:
                return k
            release(ctx, k)
    raise LiteclError("nodes= needs LiteRT's AcquireSubgraphContext, which this LiteRT does not give "
                      "(its subgraphs cannot be told apart)")


def _taken_by_other(ctx, node, reg, mine: int) -> list:
    """Placement rows of the CAST/ADD nodes a delegate kernel node of another delegate
    (one applied before litecl) replaced: its TfLiteDelegateParams.nodes_to_replace."""
    if not node.builtin_data or node.delegate == mine:
        return []
    name = reg.custom_name.decode("utf-8", "replace") if reg.custom_name else "another delegate"
    params = C.cast(node.builtin_data, C.POINTER(abi.TfLiteDelegateParams)).contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    rows = []
    for j in abi.int_array(params.nodes_to_replace):
        c = ctx.contents
        if c.GetNodeAndRegistration(ctx, j, C.byref(node_p), C.byref(reg_p)) != abi.K_OK:
            continue
        op = _OPS.get(reg_p.contents.builtin_code)
        if op is not None:
            rows.append({"index": j, "op": op, "placement": "delegate", "reason": f"taken by {name}, a delegate "
                         "applied before litecl", "partition": None, "kernel": "", "device": ""})
    return rows


def _other_kernels(ctx, plan) -> list:
    """[(node index, name)] of the delegate kernel nodes in ``plan``, before litecl's own
    replace any (another delegate's)."""
    c = ctx.contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    out = []
    for i in plan:
        if c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p)) == abi.K_OK \
                and reg_p.contents.builtin_code == abi.BUILTIN_DELEGATE:
            name = reg_p.contents.custom_name
            out.append((i, name.decode("utf-8", "replace") if name else "another delegate"))
    return out


def _flag(ctx, nodes, value: bool) -> None:
    """Set might_have_side_effect to ``value`` on ``nodes`` (node indices) of ``ctx``. Each
    node is looked up by index every time: LiteRT's nodes keep their indices when others
    are replaced, not their addresses (ReplaceNodeSubsetsWithDelegateKernels adds the
    partition kernels' nodes, which can move its node vector: a write through the old
    address corrupted the heap, a crash some interpreters later)."""
    if not nodes:
        return
    c = ctx.contents
    get = c.GetNodeAndRegistration
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    node_r, reg_r = C.byref(node_p), C.byref(reg_p)
    for i in nodes:
        if get(ctx, i, node_r, reg_r) == abi.K_OK and node_p:
            node_p.contents.might_have_side_effect = value


class _Owning:
    """Delegate.owning's context manager: sets the thread's (key, model, declared,
    visible) and puts the previous ones back on exit (a generator-based one cost ~8 us)."""

    __slots__ = ("_local", "_values", "_prev")

    def __init__(self, local, values: tuple):
        self._local, self._values = local, values

    def __enter__(self):
        o = self._local
        self._prev = (getattr(o, "key", None), getattr(o, "model", None), getattr(o, "declared", False),
                      getattr(o, "visible", frozenset()))
        o.key, o.model, o.declared, o.visible = self._values

    def __exit__(self, *exc):
        o = self._local
        o.key, o.model, o.declared, o.visible = self._prev
        return False


_CAPS: dict = {}  # (id of a device's caps, reference) -> (those caps, the delegate's)


def _caps_for(caps, reference: str):
    """``caps`` with ``reference`` set, one object per device caps and reference, kept for
    the process's life: Prepare's memos key by its id."""
    got = _CAPS.get((id(caps), reference))
    if got is None or got[0] is not caps:
        got = _CAPS[(id(caps), reference)] = (caps, replace(caps, reference=reference))
    return got[1]


_REASONS: dict = {}  # (node key, shapes, caps) -> why it stays on LiteRT ("": it need not)
_AUTO: dict = {}  # (costs, caps, in place, fuse, wiring, claimed nodes and shapes) -> (costs, auto's keep)
#: (model token, execution plan, tensors_size, device, placement, reference, fuse) ->
#: ``_remember``'s record of what Prepare decided there. A second Interpreter of a model
#: then reads only the CAST/ADD nodes' codes and their tensors' shapes (42 real models:
#: 1 us a node of the plan and ~25 us a CAST/ADD node saved).
_PREPARES: dict = {}
#: (_PREPARES' key, claimed nodes, keep_order) -> the nodes Delegate._keep_order marks
#: (only for a model's own graph at its declared shapes)
_ORDERS: dict = {}


def _remember(sg, views, keys, rows, claim) -> tuple:
    """What ``_recall`` needs to redo a Prepare's decisions without deciding: the tensor
    views read and, to check, each one's (constant, shape) and each node's builtin code."""
    tviews = dict(sg.tensors._views)
    checks = tuple((t, v.constant, v.shape) for t, v in tviews.items())
    codes = tuple((i, n.opcode) for i, n in views.items())
    return tviews, checks, codes, views, keys, tuple(dict(r) for r in rows), tuple(claim)


def _recall(ctx, memo, declared: bool):
    """``_decide``'s answer from ``memo`` (``_remember``), or None when there is none or a
    node's builtin code, or a tensor's shape or constness, differs in ``ctx`` now (not
    checked where ``declared``: LiteRT's constructor building the graph from the same model
    bytes, whose node codes and shapes the memo's were)."""
    if memo is None:
        return None
    tviews, checks, codes, views, keys, rows, claim, _ = memo
    c = ctx.contents
    tensors = c.tensors
    for t, const, shape in () if declared else checks:
        ts = tensors[t]
        if (ts.allocation_type in _CONSTANT_ALLOC) != const or abi.int_array(ts.dims) != shape:
            return None
    if codes and not declared:  # declared: the model's own graph, as LiteRT built it from the same bytes
        node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
        get, node_r, reg_r = c.GetNodeAndRegistration, C.byref(node_p), C.byref(reg_p)
        for i, code in codes:
            if get(ctx, i, node_r, reg_r) != abi.K_OK or reg_p.contents.builtin_code != code:
                return None
    tv = _Tensors(ctx)
    tv._views.update(tviews)
    # node views and keys are only read after Prepare: shared with the memo; a row is
    # written only by its partition ("partition", "kernel"): the claimed nodes' are copies
    if claim:
        taken = set(claim)
        rows = [dict(r) if r["index"] in taken else r for r in rows]
    return _Graph(tv), views, keys, list(rows), list(claim)


class _Graph:
    """What lowering reads as a subgraph inside a delegate: ``tensors`` (a _Tensors)."""

    __slots__ = ("tensors",)

    def __init__(self, tensors):
        self.tensors = tensors


def _plausible(n: Node, tensors_size: int) -> None:
    """Cheap per-node layout check (a struct mirror that drifted reads garbage here)."""
    if not n.outputs or any(not -1 <= t < tensors_size for t in (*n.inputs, *n.outputs)) \
            or not 0 < n.version < 1000:
        raise LiteclError(f"node {n.index} ({n.op}) reads as inputs {list(n.inputs)}, outputs "
                          f"{list(n.outputs)}, version {n.version} with {tensors_size} tensors: "
                          "LiteRT's structs do not match litecl's mirror")


def _source_problem(n: Node, sg, caps) -> str:
    """Generate the node's kernel at its declared shapes: a node whose kernel cannot be
    generated (a shape the launch cannot reach) stays on LiteRT, with the reason."""
    from .lowering import kernel_spec  # noqa: PLC0415

    shapes = [sg.tensors[t].shape for t in n.inputs]
    if any(len(s) == 0 and sg.tensors[t].shape_signature != s for s, t in zip(shapes, n.inputs)):
        return ""
    try:
        kernel_spec(n, sg, shapes, caps)
    except ValueError as e:
        return str(e)
    return ""


# ---------------------------------------------------------------------- memory
class _Memory:
    """How a device reaches LiteRT's tensor memory: ``in_place`` with ``align`` (bytes a
    pointer must be aligned to for a USE_HOST_PTR buffer over it to be the same memory,
    measured), else copies through device buffers."""

    def __init__(self, in_place: bool, align: int):
        self.in_place, self.align = in_place, align


_POLICIES: dict = {}


def _memory_policy(device) -> _Memory:
    """``_measure_memory`` once per device and process."""
    got = _POLICY_OF.get(id(device))  # first by the Device object (caps.key is computed)
    if got is not None and got[0] is device:
        return got[1]
    # is_gpu too: caps.key does not hold it, and a GPU's policy is not measured
    key = (device.context.int_ptr, device.caps.key, device.caps.is_gpu)
    m = _POLICIES.get(key)
    if m is None:
        m = _POLICIES[key] = _measure_memory(device)
    _POLICY_OF[id(device)] = (device, m)
    return m


_POLICY_OF: dict = {}  # id(Device) -> (that Device, its policy)


#: The in-place probe's kernels: a copy out of a buffer, and a fill into one.
_ALIAS_PROBE = ("__kernel void litecl_copy(__global const uint* a, __global uint* o) { o[get_global_id(0)] = a[get_global_id(0)]; }\n"
                "__kernel void litecl_fill(__global uint* a, const uint v) { a[get_global_id(0)] = v; }\n")


def _measure_memory(device) -> _Memory:
    """Measure, once per device: the smallest alignment (64, 128, 4096 bytes) at which a
    USE_HOST_PTR buffer is the host memory itself (a zero-copy device: CPU runtimes):
    a kernel reads what the host wrote after the buffer was made, and the host reads what
    a kernel wrote, after clFinish, with no map in between. A map alone proves nothing:
    the spec has it return the host pointer of every USE_HOST_PTR buffer, and Mesa's
    rusticl 22.3 keeps a copy it writes back only at a map, or when the command's event is
    queried or released (after clFinish, a kernel's output was stale in 100 of 100 runs).
    GPUs, host-unified or not, get copies (their USE_HOST_PTR caching is allowed to keep
    a device-side copy)."""
    caps = device.caps
    if caps.is_gpu:
        return _Memory(False, 0)
    q, ctx = device.queue, device.context
    try:
        from .kernels import build_program  # noqa: PLC0415

        prg = build_program(device, _ALIAS_PROBE)
    except Exception:  # noqa: BLE001 (a device that cannot build: copies)
        return _Memory(False, 0)
    raw = np.zeros(3 * 4096, np.uint32)
    base = raw.ctypes.data
    for align in (64, 128, 4096):
        off = (-base) % 4096 + align if align < 4096 else (-base) % 4096
        view = raw[off // 4:off // 4 + 1024]
        if view.ctypes.data % align or (align < 4096 and view.ctypes.data % (2 * align) == 0):
            continue
        if _aliases(ctx, q, prg, view):
            return _Memory(True, align)
    return _Memory(False, 0)


def _aliases(ctx, q, prg, view: np.ndarray) -> bool:
    """Whether a USE_HOST_PTR buffer over ``view`` (uint32) is ``view`` itself for kernels."""
    n = view.size
    try:
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR, hostbuf=view)
        out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, view.nbytes)
        got = np.empty(n, np.uint32)
        ok, events = True, []  # each event kept until after the check: rusticl wrote its
        # copy back to the host memory when an event was queried or released (measured)
        for pattern in (0x1234567, 0x89ABCDE):  # the host writes, a kernel reads
            view[:] = np.arange(n, dtype=np.uint32) ^ pattern
            events.append(cl.Kernel(prg, "litecl_copy")(q, (n,), None, buf, out))
            events.append(cl.enqueue_copy(q, got, out, is_blocking=False))
            cl.wait_for_events(events)
            q.finish()
            ok = ok and bool((got == view).all())
        events.append(cl.Kernel(prg, "litecl_fill")(q, (n,), None, buf, np.uint32(0xC0FFEE)))  # a kernel writes
        cl.wait_for_events(events)  # not clFinish alone: litecl_delegate.c wait_done
        q.finish()
        ok = ok and bool((view == 0xC0FFEE).all())
        del events
        buf.release()
        out.release()
        return ok
    except cl.Error:
        return False


# ---------------------------------------------------------------------- partition kernel
#: profile_log's name of each command kind (litecl_plan.h lcl_profile_cmd.kind) and host span
_KIND_NAMES = ("write", "kernel", "copy", "read")
_SPAN_NAMES = ("stage in", "wait", "stage out")


def _record_order(rec: dict) -> dict:
    """node index -> its position in the execution plan, of a Prepare's record (made once
    per record: every partition of the subgraph asks)."""
    got = rec.get("order")
    if got is None:
        got = rec["order"] = {i: k for k, i in enumerate(rec["views"])}
    return got


def _record_rows(rec: dict) -> dict:
    """node index -> its placement() row, of a Prepare's record (made once per record)."""
    got = rec.get("by_index")
    if got is None:
        got = rec["by_index"] = {r["index"]: r for r in rec["rows"]}
    return got


#: id(Device) -> (that Device, its index in the runtime): Delegate._device_index
_DEVICE_INDEX: dict = {}
#: (id(plan), runtime device index, in_place, align) -> (plan, _c_plan's struct, what it
#: points into): one C copy per plan (_Planner.plan_for); the plan is kept, so no other
#: takes its id while the entry lives
_C_PLANS: dict = {}


def _c_plan(plan, programs: list, device: int, memory: "_Memory"):
    """``plan`` (kernels.PartitionPlan) on runtime device ``device`` with ``memory`` as
    litecl_plan.h's lcl_inprocess_plan: (the Plan struct, what it points into, kept alive
    while the runtime may read it)."""
    ints: list = []

    def span(values) -> "runtime.Span":
        off = len(ints)
        ints.extend(int(v) for v in values)
        return runtime.Span(off, len(values))

    launches = (runtime.Launch * max(1, len(plan.launches)))()
    for i, ln in enumerate(plan.launches):
        launches[i] = runtime.Launch(i, 32 // ln.tiling.align_num, 0, span(ln.nodes), span(ln.inputs),
                                     span(ln.outputs), span(()), 0, span([v for _, v in ln.args]), -1)
    arr = (C.c_int32 * max(1, len(ints)))(*ints)
    progs = (C.c_void_p * max(1, len(programs)))(*[p.int_ptr for p in programs])
    names = (C.c_char_p * max(1, len(plan.launches)))(*[ln.name.encode() for ln in plan.launches])
    out = runtime.Plan(C.cast(arr, C.POINTER(C.c_int32)), C.cast(launches, C.POINTER(runtime.Launch)),
                       len(plan.launches), C.cast(progs, C.POINTER(C.c_void_p)),
                       C.cast(names, C.POINTER(C.c_char_p)), device, int(memory.in_place), int(memory.align or 0))
    return out, (arr, launches, progs, names, programs)


class _Planner:
    """One delegated partition of one interpreter, as litecl's C runtime asks for it: its
    nodes (in the execution plan's order), and at each change of its input shapes the
    plan (kernels.plan_partition), its programs and its device (``plan``). The runtime
    (litecl_delegate.c kernel_prepare / kernel_invoke) does the rest."""

    def __init__(self, delegate: Delegate, ctx, params):
        self.delegate = delegate
        self.ctx_addr = C.addressof(ctx.contents)
        rec = delegate._records[self.ctx_addr]
        rec["partitions"] += 1
        self.number = rec["partitions"] - 1
        nodes = abi.int_array(params.nodes_to_replace)
        # in the execution plan's order: LiteRT lists them in its partitioner's order,
        # which may put a node before one the model runs first (CAST z -> x listed
        # before the ADD reading x)
        views, order, rows = rec["views"], _record_order(rec), _record_rows(rec)
        self.nodes = [views[i] for i in sorted(nodes, key=order.__getitem__)]
        self.sg = rec["sg"]
        for i in nodes:
            r = rows.get(i)
            if r is not None:
                r["partition"] = self.number
        produced, inputs = set(), []
        for n in self.nodes:
            inputs += [t for t in n.inputs if t >= 0 and t not in produced]
            produced.update(n.outputs)
        self.inputs = list(dict.fromkeys(inputs))
        self.outputs = [t for t in abi.int_array(params.output_tensors) if t >= 0]
        self.key = tuple(rec["keys"][n.index] for n in self.nodes)
        self.plan = None
        self.dev = delegate.device
        self.handle = None            # the runtime's partition (lcl_partition_new)
        self._c = None                # the current plan as the runtime reads it (_c_plan)

    def plan_for(self, ctx, out) -> None:
        """Fill ``out`` (a pointer to runtime.Plan) with the launches for the context's current input
        shapes. Raises LiteclError (a plan or a kernel build that fails)."""
        c = ctx.contents
        d = self.delegate
        tensors = c.tensors
        shapes, consts = {}, set()
        for t in self.inputs:
            ts = tensors[t]
            shapes[t] = abi.int_array(ts.dims)
            if ts.allocation_type in _CONSTANT_ALLOC:
                consts.add(t)
        fuse = d.fuse
        while True:
            plan = plan_partition(self.nodes, self.sg, shapes, d.caps, keep=set(self.outputs),
                                  constants=consts, fuse=fuse, key=self.key)
            dev = d.device
            if d.small_device is not None and plan.bytes_moved <= SMALL_PARTITION_BYTES:
                dev = d.small_device
            try:
                programs = [build_program(dev, ln.source) for ln in plan.launches]
                break
            except KernelBuildError:  # a fused kernel the compiler refuses: unfused
                if not fuse or not any(len(ln.nodes) > 1 for ln in plan.launches):
                    raise
                fuse = False
        self.plan, self.dev = plan, dev
        mem = d.memory if dev is d.device else _memory_policy(dev)
        index = d._device_index(dev)
        # one C copy per plan, device and memory policy: the runtime only reads it, and
        # plan_partition hands every partition of equal nodes and shapes the same plan
        ckey = (id(plan), index, mem.in_place, mem.align)
        hit = _C_PLANS.get(ckey)
        if hit is None or hit[0] is not plan:
            hit = _memo_put(_C_PLANS, ckey, (plan, *_c_plan(plan, programs, index, mem)))
        self._c = hit
        C.memmove(out, C.byref(hit[1]), C.sizeof(hit[1]))
        rec = d._records.get(self.ctx_addr)
        rows = _record_rows(rec) if rec is not None else {}
        for ln in plan.launches:
            for i in ln.nodes:
                if i in rows:
                    rows[i]["kernel"] = ln.what + (" (constant inputs: computed once)" if ln.folded else "")
                    rows[i]["device"] = dev.caps.name

    def counts(self) -> dict:
        """What the runtime counted for this partition (runtime.COUNTS)."""
        got = (C.c_int64 * len(runtime.COUNTS))()
        if self.handle:
            self.delegate._rt.lcl_partition_counts(self.handle, got)
        return dict(zip(runtime.COUNTS, got))

    @property
    def launches_run(self) -> int:
        """Kernels this partition has enqueued."""
        return self.counts()["launches"]

    def profiled(self, cmds, n: int, spans, n_spans: int, t0: int, t1: int) -> None:
        """One profiled invoke (the runtime's profiler callback) into Delegate.profile_log
        and kernel_times_ns."""
        d, plan = self.delegate, self.plan
        commands = []
        for c in cmds[:n]:
            ln = plan.launches[c.launch] if c.kind == 1 and plan is not None and c.launch < len(plan.launches) else None
            if ln is not None and c.end:
                d.kernel_times_ns[(self.ctx_addr, ln.nodes)] = c.end - c.start
            commands.append((_KIND_NAMES[c.kind], ln.what if ln is not None else "", int(c.bytes),
                             ln.nodes if ln is not None else (), int(c.host_ns), int(c.queued), int(c.start),
                             int(c.end)))
        d.profile_log.append({
            "ctx": self.ctx_addr, "partition": self.number, "device": self.dev.caps.name, "host": (t0, t1),
            "spans": [(_SPAN_NAMES[s.kind], int(s.t0), int(s.t1)) for s in spans[:n_spans]],
            "commands": commands})


# ---------------------------------------------------------------------- callbacks
def _delegate_of(key: int) -> Delegate:
    ref = _LIVE.get(key)
    d = ref() if ref is not None else None
    if d is None:
        raise LiteclError("the litecl.Delegate this interpreter was given no longer exists; keep it "
                          "alive as long as the interpreter (LiteRT's Interpreter holds it in "
                          "experimental_delegates)")
    return d


def _report_unowned(ctx, e: BaseException) -> int:
    try:
        if ctx and ctx.contents.ReportError:
            ctx.contents.ReportError(ctx, b"%s", f"litecl delegate: {e}\n".encode("utf-8", "replace"))
    except Exception:  # noqa: BLE001
        pass
    return abi.K_ERROR


@_immortal
@abi.DELEGATE_PREPARE
def _DELEGATE_PREPARE(ctx, dlg):  # noqa: N802
    d = None
    try:
        d = _delegate_of(dlg.contents.data_ or 0)
        d.device.check_usable()
        with d._lock:
            return d._prepare(ctx)
    except BaseException as e:  # noqa: BLE001 (nothing may leave a ctypes callback)
        return d._fail(ctx, e) if d is not None else _report_unowned(ctx, e)


@_immortal
@abi.INIT
def _INIT(ctx, buffer, length):  # noqa: N802
    try:
        params = abi.TfLiteDelegateParams.from_address(buffer)
        d = _delegate_of(params.delegate.contents.data_ or 0)
        part = _Planner(d, ctx, params)
        key = next(_KEYS)
        order = [n.index for n in part.nodes]
        arr = (C.c_int * max(1, len(order)))(*order)
        with _LOCK:
            _PLANNERS[key] = part
        handle = d._rt.lcl_partition_new(d._native, C.cast(ctx, C.c_void_p), key, arr, len(order),
                                         C.cast(params.output_tensors, C.c_void_p), d._device_index(d.device))
        if not handle:
            with _LOCK:
                _PLANNERS.pop(key, None)
            raise d.take_error() or LiteclError("litecl's runtime could not make the partition")
        part.handle = handle
        with _LOCK:
            _KERNELS[handle] = key
            d._parts.setdefault(part.ctx_addr, {})[key] = part
        return handle
    except BaseException as e:  # noqa: BLE001
        _report_unowned(ctx, e)
        return None  # LiteRT then fails the kernel's prepare (no user data)


@_immortal
@abi.FREE
def _FREE(ctx, buffer):  # noqa: N802
    try:
        with _LOCK:
            key = _KERNELS.pop(buffer or 0, None)
            part = _PLANNERS.pop(key, None)
            if part is not None:
                d = part.delegate
                for k, v in part.counts().items():
                    if k in d._stats:
                        d._stats[k] += v
                mine = d._parts.get(part.ctx_addr)
                if mine is not None:
                    mine.pop(key, None)
                    if not mine:
                        del d._parts[part.ctx_addr]
                        freed = d._freed  # newest last, oldest dropped past the bound
                        freed.pop(part.ctx_addr, None)
                        freed[part.ctx_addr] = next(_EVENTS)
                        if len(freed) > _MAX_RECORDS:
                            del freed[next(iter(freed))]
        if part is not None:
            part.handle = None
            if not part.delegate.device.forked:  # in a fork()ed child an OpenCL call would hang
                part.delegate._rt.lcl_partition_free(buffer)
    except BaseException:  # noqa: BLE001 (free returns nothing: LiteRT cannot be told; the
        pass                # device buffers then go with the process)


@_immortal
@runtime.PLANNER
def _PLAN(key, ctx, out):  # noqa: N802
    part = None
    try:
        part = _PLANNERS.get(key)
        if part is None:
            raise LiteclError("litecl partition kernel missing (its init failed)")
        part.plan_for(ctx, out)
        return 0
    except BaseException as e:  # noqa: BLE001
        if part is not None:
            part.delegate._fail(ctx, e)
        else:
            _report_unowned(ctx, e)
        return 1


@_immortal
@runtime.REPORTER
def _REPORT(key, ctx, message):  # noqa: N802
    text = (message or b"").decode("utf-8", "replace")
    e = LiteclError(text[len("litecl: "):] if text.startswith("litecl: ") else text)
    try:
        _delegate_of(key)._fail(ctx, e)
    except BaseException:  # noqa: BLE001 (nothing may leave a ctypes callback: the Delegate is
        _report_unowned(ctx, e)  # gone, so LiteRT's reporter alone carries the message)


@_immortal
@runtime.PROFILER
def _PROFILE(key, cmds, n, spans, n_spans, t0, t1):  # noqa: N802
    try:
        part = _PLANNERS.get(key)
        if part is not None:
            part.profiled(cmds, n, spans, n_spans, t0, t1)
    except BaseException:  # noqa: BLE001 (nothing may leave a ctypes callback: the invoke
        pass                # succeeded; only its profile_log entry is lost)


@_immortal
@abi.COPY_HANDLE
def _COPY_HANDLE(ctx, dlg, handle, tensor):  # noqa: N802
    # litecl sets no buffer handle (outputs are written to LiteRT's memory at invoke), so
    # LiteRT never has a stale tensor of ours to sync
    return abi.K_ERROR


@_immortal
@abi.FREE_HANDLE
def _FREE_HANDLE(ctx, dlg, handle):  # noqa: N802
    return None


_REGISTRATIONS: list = []


def _registration(lib) -> "abi.TfLiteRegistration":
    """The partition kernel's registration: init and free here (the planner's side), prepare
    and invoke the runtime's. LiteRT copies it, but keeps pointing at ``custom_name`` (its
    error messages name the node by it): one object for the process's life."""
    if not _REGISTRATIONS:
        reg = abi.TfLiteRegistration()
        reg.init, reg.free = _INIT, _FREE
        reg.prepare = abi.PREPARE(C.cast(lib.lcl_kernel_prepare, C.c_void_p).value)
        reg.invoke = abi.INVOKE(C.cast(lib.lcl_kernel_invoke, C.c_void_p).value)
        reg.builtin_code = abi.BUILTIN_DELEGATE
        reg.custom_name = _NAME_BYTES
        reg.version = 1
        _REGISTRATIONS.append(_immortal(reg))
    return _REGISTRATIONS[0]


_NAME_BYTES = DELEGATE_NAME.encode()


# ---------------------------------------------------------------------- self-check
_CHECKED: list = []


def _self_check() -> None:
    """Once per process: the installed LiteRT is a tested version, and its context reads
    correctly through litecl's mirror (a built-in two-tensor ADD model: tensor count,
    names, types, shapes, quantization, the node's builtin code, version and options).
    Raises LiteclError naming what differs."""
    if _CHECKED:
        return
    abi.check_sizes()
    v = abi.check_versions("ai-edge-litert")
    if "tensorflow" in sys.modules:  # tf.lite's interpreter would call us too
        abi.check_versions("tensorflow")
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    seen: dict = {}

    @abi.DELEGATE_PREPARE
    def probe(ctx, dlg):
        try:
            c = ctx.contents
            plan_p = C.POINTER(abi.TfLiteIntArray)()
            c.GetExecutionPlan(ctx, C.byref(plan_p))
            node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
            c.GetNodeAndRegistration(ctx, abi.int_array(plan_p)[0], C.byref(node_p), C.byref(reg_p))
            reg = reg_p.contents
            n = _node_view(_raw_node(0, node_p.contents, reg.builtin_code, int(reg.version)))
            ts = [_tensor_view(t, _raw_tensor(c, t)) for t in range(c.tensors_size)]
            seen.update(size=c.tensors_size, op=n.op, version=n.version, inputs=n.inputs,
                        outputs=n.outputs, act=n.options.fusedActivationFunction,
                        tensors=[(t.name, t.dtype.name if t.dtype else None, t.shape,
                                  [round(float(s), 6) for s in t.scales], [int(z) for z in t.zero_points])
                                 for t in ts])
        except BaseException as e:  # noqa: BLE001
            seen["error"] = repr(e)
        return abi.K_OK

    st = abi.TfLiteDelegate()
    st.Prepare = probe
    holder = types.SimpleNamespace(_get_native_delegate_pointer=lambda: C.addressof(st))
    Interpreter(model_content=_SELF_CHECK_MODEL, experimental_delegates=[holder],
                experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    want = {"size": 3, "op": "ADD", "version": 1, "inputs": (0, 1), "outputs": (2,), "act": 1,
            "tensors": [("a", "int8", (1, 3), [0.5], [1]), ("b", "int8", (1, 3), [0.25], [-2]),
                        ("out", "int8", (1, 3), [1.0], [3])]}
    bad = {k: seen.get(k) for k in want if seen.get(k) != want[k]}
    if bad or "error" in seen:
        raise LiteclError(f"ai-edge-litert {v}: its TfLiteContext does not read as litecl's mirror "
                          f"expects ({seen.get('error') or bad}); litecl's delegate cannot run here")
    _STRUCTS.append(_immortal((st, probe)))
    _CHECKED.append(True)


def _self_check_model() -> bytes:
    """An int8 ADD (RELU) of two [1, 3] tensors a (0.5, 1), b (0.25, -2) -> out (1.0, 3),
    written with the schema's object API (the same bytes every time)."""
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as s  # noqa: PLC0415

    m = s.ModelT()
    m.version = 3
    m.buffers = [s.BufferT()]
    oc = s.OperatorCodeT()
    oc.builtinCode = oc.deprecatedBuiltinCode = s.BuiltinOperator.ADD
    oc.version = 1
    m.operatorCodes = [oc]
    g = s.SubGraphT()
    g.tensors = []
    for name, sc, zp in (("a", 0.5, 1), ("b", 0.25, -2), ("out", 1.0, 3)):
        t = s.TensorT()
        t.name, t.type, t.shape, t.buffer = name.encode(), s.TensorType.INT8, [1, 3], 0
        t.quantization = s.QuantizationParametersT()
        t.quantization.scale, t.quantization.zeroPoint = [sc], [zp]
        g.tensors.append(t)
    op = s.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, [0, 1], [2]
    op.builtinOptionsType = s.BuiltinOptions.AddOptions
    op.builtinOptions = s.AddOptionsT()
    op.builtinOptions.fusedActivationFunction = s.ActivationFunctionType.RELU
    g.operators, g.inputs, g.outputs = [op], [0, 1], [2]
    m.subgraphs = [g]
    b = flatbuffers.Builder(256)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


_SELF_CHECK_MODEL = _self_check_model()
