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

Beside this module: the Prepare's decisions are claims.py's, the node and tensor views
views.py's, the records of each Prepare and the reports read from them records.py's
(Delegate's base class), and the per-device memory policy memory.py's.
"""
from __future__ import annotations

import collections
import ctypes as C
import itertools
import sys
import threading
import weakref
from dataclasses import replace

import numpy as np

from . import abi
from . import claims
from .cache import max_bytes
from .device import _OPEN, open_device, small_device, small_device_why, warn_if_refused
from .errors import KernelBuildError, LiteclError, env_flag, raised_by_app
from . import kernels
from .kernels import build_program, plan_built
from .memory import _Memory, _memory_policy  # noqa: F401  (_Memory re-exported)
from . import recall, runtime
from .recall import _Expected  # noqa: F401 (claims.py, tests)
from .runtime import c_plan as _c_plan  # tests patch delegate._c_plan
from . import placement as _placement
from .placement import PLACEMENTS
from .records import _EVENTS, _Records, _record_rows, _template
from .views import _CONSTANT_ALLOC, _Cleared, _memo_put, layout_check

__all__ = ["Delegate", "REFERENCES", "DELEGATE_NAME"]

#: What the delegate matches where LiteRT's kernels differ (issue 22 item 6): "builtin"
#: (BUILTIN_WITHOUT_DEFAULT_DELEGATES / AUTO), "ref" BUILTIN_REF, "xnnpack" (Delegate's doc)
REFERENCES = ("builtin", "ref", "xnnpack")
DELEGATE_NAME = "litecl OpenCL"
#: partition invokes Delegate.profile_log keeps (the oldest go first)
PROFILE_LOG_MAX = 10000
#: Delegate's keep_order default; the native delegate's too (litecl_delegate.c
#: LCL_KEEP_ORDER_DEFAULT). Measured: docs/PERFORMANCE.md, benchmarks/bench_keep_order.py
KEEP_ORDER_DEFAULT = "auto"


#: how long the runtime polls for an invoke's commands before clFinish (us); -1: the row
#: of the device's runtime (litecl_delegate.c SPIN_ROWS: 0 for Intel's CPU runtime, else
#: 1000; wait_done says why), as the native delegate without its spin_us option
_SPIN_US = -1


def _quiet(quiet) -> bool:
    if quiet is not None:
        return bool(quiet)
    return env_flag("LITECL_QUIET")


# ---------------------------------------------------------------------- the delegate
_STRUCTS: list = []          # every TfLiteDelegate made: kept for the process's life
_LIVE: dict = {}             # delegate key -> weakref to its Delegate
_KERNELS: dict = {}          # the runtime's partition (kernel user data) -> its planner key
_PLANNERS: dict = {}         # planner key -> _Planner (removed by the kernel's free)
_KEYS = itertools.count(1)   # delegate keys; partitions' planner keys come from _new_keys
_LOCK = threading.RLock()  # RLock: _FREE asks whether its own thread holds it
#: a partition's preset made its plan (_Planner.settle) or replaced by the planner's answer
#: (plan_for), one at a time: placement() in one thread while interpreters of the same
#: Delegate were prepared in others raised TypeError (a preset cleared between its check
#: and its use: a fresh user's report)
_SETTLE_LOCK = threading.RLock()


def _prepare_thunk(rt):
    """The TfLiteDelegate Prepare every Delegate's struct holds: the runtime's
    lcl_inprocess_prepare (a Prepare it can recall runs there, any other is
    _DELEGATE_PREPARE), one ctypes object for the process."""
    if not _THUNK:
        _THUNK.append(_immortal(abi.DELEGATE_PREPARE(C.cast(rt.lcl_inprocess_prepare, C.c_void_p).value)))
    return _THUNK[0]


_THUNK: list = []


def _immortal(obj):
    """``obj`` with a reference that is never dropped: the callbacks and TfLiteDelegate
    structs LiteRT holds pointers to must outlive the module's globals, which Python clears
    at exit before its last garbage collection; an Interpreter freed there (one in a
    reference cycle) calls the kernels' free callback (a freed ctypes thunk: SIGSEGV)."""
    C.pythonapi.Py_IncRef(C.py_object(obj))
    return obj


class Delegate(_Records):
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
        add.cc's optimized path), "ref" (BUILTIN_REF's reference kernels) or "xnnpack"
        (builtin's bits where LiteRT's default resolver applies XNNPACK after litecl:
        "auto" prices XNNPACK's kernel, which runs what litecl leaves; README).
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
        every one); a subgraph not named gives none. A node index past its subgraph's
        nodes fails that subgraph's Prepare with LiteclError (LiteRT's RuntimeError
        outside litecl.Interpreter); so does a subgraph the model lacks (subgraph 0's
        Prepare asks LiteRT's AcquireSubgraphContext for the highest one named).
    Placed anywhere in the delegate list: litecl claims from the nodes the delegates
    before it left, in every subgraph; placement() names the CAST/ADD nodes another
    delegate took ("placement": "delegate").
    Raises DeviceError (no such device), LiteclError (bad argument, a LITECL_QUIET that is
    no yes/no value, an untested LiteRT/TensorFlow version, a failed layout self-check):
    all ValueError.
    """

    def __init__(self, device=None, placement: str = "all", *, reference: str = "builtin",
                 quiet=None, fuse: bool = True, keep_order=KEEP_ORDER_DEFAULT, ops=None, nodes=None):
        self.ops, self.nodes = claims.takes(ops, nodes)
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
        max_bytes()  # a bad LITECL_CACHE_MAX_BYTES: an error here, as litecl.Interpreter's (a fresh user)
        layout_check()
        self._device = warn_if_refused(open_device(device), self.quiet)
        self.caps = _caps_for(self.device.caps, "ref" if reference == "ref" else "builtin")  # xnnpack: builtin's
        self.placement_mode, self.reference, self.fuse = placement, reference, bool(fuse)
        self.keep_order = keep_order if keep_order == "auto" else bool(keep_order)
        self.memory = _memory_policy(self.device)
        # where small partitions run (device.small_device: PoCL's basic device beside its
        # pthread one), or None; only where partitions work in LiteRT's memory in place
        self.small_device = small_device(self.device) if self.memory.in_place else None
        self._lock = threading.RLock()
        self._records: dict = {}      # context address (a freed one's: ("freed", address, n)) -> its latest Prepare's record
        self._owned: dict = {}        # owner (Delegate.owning) -> {context address: None}, in that order
        self._parts: dict = {}        # context address -> {planner key: live _Planner} (under _LOCK)
        # the runtime keeps which contexts' Replacing line was said (lcl_announce) and when
        # a context's last partition kernel was freed (lcl_recall_freed: LiteRT frees them
        # when the interpreter goes, or when a resize undoes the delegate before Prepare)
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
        self._native = self._rt.lcl_inprocess_new(self._key, _PLAN, _REPORT, _PROFILE, _SPIN_US, _INIT)
        if not self._native:
            raise LiteclError("out of memory for litecl's runtime")
        # not at exit: an Interpreter's __del__ after the exit hooks still calls the runtime with it
        weakref.finalize(self, self._rt.lcl_inprocess_free, self._native).atexit = False
        st = abi.TfLiteDelegate()
        st.data_ = self._key
        # the runtime's: a Prepare it can recall runs there, any other is _DELEGATE_PREPARE
        st.Prepare = _prepare_thunk(self._rt)
        st.CopyFromBufferHandle = _COPY_HANDLE
        st.CopyToBufferHandle = _COPY_HANDLE
        st.FreeBufferHandle = _FREE_HANDLE
        st.flags = abi.ALLOW_DYNAMIC_TENSORS
        with _LOCK:
            _STRUCTS.append(_immortal(st))
            # the entry goes with the Delegate (a new Delegate per LiteRT interpreter kept every
            # one's: ~0.6 KB each with the Prepare thunk, a fresh user's report); the struct stays
            _LIVE[self._key] = weakref.ref(self, lambda _, key=self._key: _LIVE.pop(key, None))
        self._struct = st
        if self._rt.lcl_recall_bind(self._native, C.addressof(st), C.cast(_DELEGATE_PREPARE, C.c_void_p),
                                    C.addressof(_registration(self._rt)), int(not self.quiet)):
            raise LiteclError("out of memory for litecl's runtime")

    def __setattr__(self, name, value):
        # none of the caller's: litecl's partitions hold their Delegate until LiteRT frees them,
        # so an attribute leading back to the interpreter (a callback of the object holding
        # it) kept both alive for good, ~95 KB an interpreter (a fresh user's report)
        if "_struct" in self.__dict__ and name not in self.__dict__ and not hasattr(type(self), name):
            raise AttributeError(f"litecl.Delegate takes no attribute of yours ({name!r}): its partitions hold it "
                                 "until LiteRT frees them, so a reference back to an interpreter would keep both "
                                 "alive; keep it on your own object")
        object.__setattr__(self, name, value)

    @property
    def quiet(self) -> bool:
        """Whether the "Replacing N out of M node(s)" line is silenced."""
        return self._quiet

    @quiet.setter
    def quiet(self, value) -> None:
        self._quiet = bool(value)
        if getattr(self, "_struct", None) is not None:  # the runtime says it for recalled Prepares
            self._rt.lcl_recall_bind_say(self._key, int(not self._quiet))

    def __repr__(self) -> str:
        return f"litecl.Delegate({self.device!r}, placement={self.placement_mode!r})"

    def __getstate__(self):  # copy.copy gave an alias of every part, refused once the original went
        raise TypeError("a litecl.Delegate cannot be pickled or copied (it holds the OpenCL device and "
                        "LiteRT's delegate struct); create a new one with the same arguments")

    @property
    def stats(self) -> dict:
        """Tensor bindings at partition invokes: "in_place" (in LiteRT's memory), "copied"
        (through device copies), "staged" (of those, through pinned staging memory); and
        "partition_invokes": invokes of litecl's partition kernels, not of the interpreter
        (one interpreter invoke counts once per delegated partition it runs; a partition in
        a WHILE body once per iteration). Counts the invokes the runner ran in C too."""
        recall.drain()
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
        return (f"partitions moving <= {kernels.SMALL_PARTITION_BYTES / 2**20:g} MiB run on "
                f"{self.small_device.caps.name}")

    @property
    def profile(self) -> bool:
        """Event-profile each launch into kernel_times_ns (bench's per-node table: {(the
        TfLiteContext address, the launch's node indices): its latest kernel time, ns}; a
        context's entries go when its partitions are freed) and each partition invoke into
        profile_log (bench --trace): the runtime keeps every command's event and reads its
        times after the invoke's wait."""
        return self._profile

    @profile.setter
    def profile(self, on: bool) -> None:
        if not isinstance(on, (bool, np.bool_)):
            raise LiteclError(f"profile must be True or False, got {on!r}")
        self._profile = bool(on)
        self._rt.lcl_inprocess_profile(self._native, int(self._profile))

    def _device_index(self, dev) -> int:
        """``dev``'s index in the runtime (device_index, with this delegate's caps for its
        own device). Raises LiteclError where the runtime cannot reach it."""
        return device_index(dev, self.caps if dev is self.device else dev.caps)

    def _get_native_delegate_pointer(self) -> int:
        """The TfLiteDelegate* LiteRT's Interpreter takes (its experimental_delegates API).
        LiteRT's and tf.lite's Interpreter ask for it once per construction, just before
        ModifyGraphWithDelegate runs Prepare for each subgraph (claims.prepare's announcement)."""
        self._owner.fetched = ev = next(_EVENTS)
        self._rt.lcl_recall_fetched(self._key, ev, recall.settings_number(self))  # a Prepare the runtime recalls reads it
        return C.addressof(self._struct)

    def owning(self, owner, visible: frozenset = frozenset()):
        """A context manager: Prepares inside it are recorded as ``owner``'s. ``visible``:
        {(tensor index, name)} that must stay LiteRT's tensors (a model's signature tensors
        that are no subgraph input or output): a node writing one stays on LiteRT, since
        inside a partition LiteRT would allocate no memory for it."""
        return _Owning(self, (owner, visible))

    def take_error(self):
        """The litecl error a callback raised on this thread since the last call, or None."""
        e = getattr(self._errors, "last", None)
        self._errors.last = None
        return e

    def _fail(self, ctx, e: BaseException) -> int:
        """Keep ``e`` for litecl's entry points, report it through LiteRT, return kTfLiteError;
        an app's own (a signal handler's: errors.raised_by_app) is raised again as itself."""
        _raise_later(e, any_kind=raised_by_app(e))
        if not isinstance(e, LiteclError):
            e = LiteclError(f"litecl delegate: {type(e).__name__}: {e}")
        # kept without its frames (raised again in litecl's type, from None): with LiteRT's own Interpreter
        # nobody takes it, and they kept a failed interpreter alive, ~105 KB each (a fresh user's report)
        e.__traceback__ = e.__context__ = e.__cause__ = None
        self._errors.last = None if sys.getprofile() is _raise_outside else e  # one armed is the error: none stale
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

class _Owning:
    """Delegate.owning's context manager: sets the thread's (key, visible) and puts the
    previous ones back on exit (a generator-based one cost ~8 us)."""

    __slots__ = ("_d", "_values", "_prev")

    def __init__(self, d, values: tuple):
        self._d, self._values = d, values

    def __enter__(self):
        d = self._d
        o = d._owner
        self._prev = (getattr(o, "key", None), getattr(o, "visible", frozenset()))
        o.key, o.visible = self._values
        d._rt.lcl_recall_own(d._key, *recall.owner_salt(*self._values))  # the runtime's recalled Prepares'

    def __exit__(self, *exc):
        d = self._d
        o = d._owner
        o.key, o.visible = self._prev
        d._rt.lcl_recall_own(d._key, *recall.owner_salt(*self._prev))
        return False


_CAPS: dict = {}  # (id of a device's caps, reference) -> (those caps, the delegate's)


def _caps_for(caps, reference: str):
    """``caps`` with ``reference`` set, one object per device caps and reference, kept for
    the process's life: Prepare's memos key by its id."""
    got = _CAPS.get((id(caps), reference))
    if got is None or got[0] is not caps:
        got = _CAPS[(id(caps), reference)] = (caps, replace(caps, reference=reference))
    return got[1]


# ---------------------------------------------------------------------- partition kernel
#: profile_log's name of each command kind (litecl_plan.h lcl_profile_cmd.kind) and host span
_KIND_NAMES = ("write", "kernel", "copy", "read")
_SPAN_NAMES = ("stage in", "wait", "stage out")


#: (id(record views), nodes, outputs) -> (views, _template's answer): _Planner's fields
_TEMPLATES: dict = {}
#: (plan key, outputs, the runtime's input key (bytes) or (input shapes, constants),
#: delegate settings (_settings)) -> (caps, device, small device, plan, the device it runs
#: on, its _C_PLANS entry): plan_for's answers
_PLANNED: dict = {}
#: entries of _PLANNED and _C_PLANS: ~11 KB each with the plan's C arrays; at the views'
#: bound (65,536) a model fed 40,000 input lengths held 450 MB (a fresh user's report)
_PLANS_MAX = 4096
#: (plan key, outputs, delegate settings) -> (caps, device, small device, the runtime's input
#: key as int32s, plan, device, _C_PLANS entry): each partition's latest plan_for answer,
#: which _INIT hands the runtime with a partition of the same nodes (lcl_partition_new's
#: preset): a second construction plans without a callback per partition
_PRESETS: dict = _Cleared()  # views._Cleared: _Expected reads its clear() count

#: id(Device) -> (that Device, its index in the runtime): Delegate._device_index
_DEVICE_INDEX: dict = {}


def device_index(dev, caps=None) -> int:
    """``dev``'s (a litecl Device) index in the runtime (lcl_inprocess_device: the process's,
    one per queue), registered on first use with ``caps``' launch row (default dev.caps).
    Raises LiteclError where the runtime cannot reach it."""
    got = _DEVICE_INDEX.get(id(dev))  # Devices live for the process (device.py)
    if got is not None and got[0] is dev:
        return got[1]
    from .device import FORK_MESSAGE  # noqa: PLC0415
    from .ops.tiling import launch_config  # noqa: PLC0415

    loader = runtime.opencl_loader()
    if loader is None:
        raise LiteclError("the OpenCL loader pyopencl uses was not found in the process")
    caps = caps or dev.caps
    row = launch_config(caps)
    err = C.create_string_buffer(1024)
    fork = FORK_MESSAGE.format(device=f"{dev.caps.platform}: {dev.caps.name}")
    i = runtime.load().lcl_inprocess_device(
        None, loader.encode(), dev.context.int_ptr, dev.queue.int_ptr, dev.device.int_ptr,
        caps.compute_units, caps.max_work_group_size, row.local_size, row.groups_per_cu, row.vec_bytes,
        row.group_bytes, int(dev.one_thread), fork.encode(), err, len(err))
    if i < 0:
        raise LiteclError(f"litecl's runtime cannot use {dev.caps.name}: {err.value.decode(errors='replace')}")
    _DEVICE_INDEX[id(dev)] = (dev, i)
    return i
#: (id(plan), runtime device index, in_place, align) -> (plan, _c_plan's struct, what it
#: points into): one C copy per plan (_Planner.plan_for); the plan is kept, so no other
#: takes its id while the entry lives
_C_PLANS: dict = {}


def _new_keys(n: int) -> int:
    """The first of ``n`` new consecutive planner keys (the runtime's: recalled Prepares take theirs there)."""
    return runtime.load().lcl_new_keys(n)


def _settings(d: Delegate) -> tuple:
    """What plan_for's answer depends on besides the partition and its shapes: delegate
    ``d``'s caps, fuse, devices (with the size that sends a partition to the small one,
    kernels.SMALL_PARTITION_BYTES) and memory policy (objects by id: the memo entries hold them)."""
    small = None if d.small_device is None else (id(d.small_device), kernels.SMALL_PARTITION_BYTES)
    return (id(d.caps), d.fuse, id(d.device), small, d.memory.in_place, d.memory.align)


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
        outs = abi.int_array(params.output_tensors)
        self.given = (nodes, outs)    # as LiteRT gave them (_Expected)
        views = rec["views"]  # shared by every record a Prepare memo recalls (claims._recall)
        tkey = (id(views), nodes, outs)
        t = _TEMPLATES.get(tkey)
        if t is None or t[0] is not views:
            t = _memo_put(_TEMPLATES, tkey, (views, *_template(rec, nodes, outs)))
        _, self.nodes, self.inputs, self.outputs, self.key = t
        # what a plan is memoised on: the nodes with their keys, and the outputs LiteRT reads
        # (two graphs of equal nodes where only one reads a fused intermediate plan apart)
        self.pkey = (self.key, tuple(self.outputs))
        self.sg = rec["sg"]
        rows = _record_rows(rec)
        for i in nodes:
            r = rows.get(i)
            if r is not None:
                r["partition"] = self.number
        self.plan = None
        self.dev = delegate.device
        self.handle = None            # the runtime's partition (lcl_partition_new)
        self._c = None                # the current plan as the runtime reads it (_c_plan)
        self._preset = None           # (plan, device, _C_PLANS entry) handed to the runtime at init

    def plan_for(self, ctx, shape_key: bytes | None, out) -> None:
        """Fill ``out`` (a pointer to runtime.Plan) with the launches for the context's current
        input shapes (``shape_key``: the runtime's key of them, or None). Raises LiteclError (a
        plan or a kernel build that fails)."""
        d = self.delegate
        sets = _settings(d)
        # the same partition at the same shapes on the same delegate settings: an earlier
        # plan_for's answer (plan, device, C plan), looked up once
        pkey = (*self.pkey, shape_key, sets) if shape_key is not None else None
        got = _PLANNED.get(pkey) if pkey is not None else None
        if got is None or got[0] is not d.caps or got[1] is not d.device or got[2] is not d.small_device:
            tensors = ctx.contents.tensors
            shapes, consts = {}, set()
            for t in self.inputs:
                ts = tensors[t]
                shapes[t] = abi.int_array(ts.dims)
                if ts.allocation_type in _CONSTANT_ALLOC:
                    consts.add(t)
            if pkey is None:
                pkey = (*self.pkey, (tuple(shapes.items()), frozenset(consts)), sets)
            got = _memo_put(_PLANNED, pkey, (d.caps, d.device, d.small_device, *self._plan(shapes, consts)),
                            _PLANS_MAX)
        plan, dev, hit = got[3:]
        if shape_key is not None:
            preset = _memo_put(_PRESETS, (*self.pkey, sets), (d.caps, d.device, d.small_device, shape_key, plan,
                                                              dev, hit))
            slot = self.__dict__.get("_slot")
            if slot is not None:  # made from an _Expected's template: its own preset too
                slot[0].keep(sets, slot[1], preset, d)
        with _SETTLE_LOCK:
            self._use(plan, dev, hit, out)

    def _plan(self, shapes: dict, consts: set) -> tuple:
        """(plan, the device it runs on, its _C_PLANS entry) at input ``shapes`` with
        ``consts`` constant. Raises LiteclError (a plan or a kernel build that fails)."""
        d = self.delegate
        plan, dev, programs = plan_built(d, self.nodes, self.sg, shapes, consts, self.outputs, self.key,
                                         build_program)  # the name tests patch
        mem = d.memory if dev is d.device else _memory_policy(dev)
        index = d._device_index(dev)
        # one C copy per plan, device and memory policy: the runtime only reads it, and
        # plan_partition hands every partition of equal nodes and shapes the same plan
        ckey = (id(plan), index, mem.in_place, mem.align)
        hit = _C_PLANS.get(ckey)
        if hit is None or hit[0] is not plan:
            hit = _memo_put(_C_PLANS, ckey, (plan, *_c_plan(plan, programs, index, mem)), _PLANS_MAX)
        return plan, dev, hit

    def preset(self) -> tuple:
        """(the runtime's input key as bytes, its C plan) of the latest plan_for answer for a
        partition of these nodes on this delegate's settings, making it this partition's
        (placement() rows); (None, None) where there is none."""
        d = self.delegate
        got = _PRESETS.get((*self.pkey, _settings(d)))
        if got is None or got[0] is not d.caps or got[1] is not d.device or got[2] is not d.small_device:
            return None, None
        key, plan, dev, hit = got[3:]
        self._preset = (plan, dev, hit)
        return key, C.byref(hit[1])

    def settle(self) -> None:
        """Make the preset this partition's plan (``plan``, ``dev``, placement() rows) once
        the runtime prepared the partition with it: it asks no planner then. Reports and
        profiles call it before reading them."""
        with _SETTLE_LOCK:  # another thread's placement() or planner (plan_for) may be here
            preset = self._preset
            if preset is not None and self.handle and self.delegate._rt.lcl_partition_on_preset(self.handle):
                self._use(*preset, None)
                self._preset = None

    def _use(self, plan, dev, hit, out) -> None:
        """Make ``plan`` (on ``dev``; ``hit``: its _C_PLANS entry) this partition's: copy
        its C plan to ``out``, write the claimed nodes' kernel and device rows."""
        self.plan, self.dev, self._c = plan, dev, hit
        if out is not None:  # the planner's answer: the runtime drops its preset
            self._preset = None
            C.memmove(out, C.byref(hit[1]), C.sizeof(hit[1]))
        d = self.delegate
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
        self.settle()
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


def _raise_later(e: BaseException, any_kind: bool = False) -> None:
    """A KeyboardInterrupt or SystemExit (Ctrl-C, a signal handler's sys.exit) that landed
    in a callback, which LiteRT only sees as a failed node: raised again, as itself, in
    this thread at its first Python event outside litecl's callbacks (once LiteRT's call
    returns), as it is without litecl (a fresh user's server caught the RuntimeError and
    kept serving), by a profile hook (sys.setprofile; the one it replaces is put back then).
    ``any_kind``: any exception (an app's signal handler's, errors.raised_by_app). One armed
    whose hook is gone (a signal's exception inside the hook unsets it) is replaced."""
    if not (any_kind or isinstance(e, (KeyboardInterrupt, SystemExit))) or sys.getprofile() is _raise_outside:
        return
    _LATER.e, _LATER.prev = e, sys.getprofile()
    sys.setprofile(_raise_outside)


def _unraisable(u, _prev=sys.unraisablehook) -> None:
    """sys.unraisablehook: an exception raised in a litecl callback before its ``try`` (a
    signal handler's, at the first instruction: ctypes printed "Exception ignored" and a
    SIGTERM was lost, a fresh user's report) is raised again as itself once LiteRT's call
    returns (_raise_later). Any other: the hook this one replaced."""
    if (u.err_msg or "").endswith("ctypes callback function") and getattr(u.object, "__module__", None) == __name__:
        _raise_later(u.exc_value, any_kind=True)
        return
    _prev(u)


sys.unraisablehook = _unraisable


def _raise_outside(frame, event, arg):
    f = frame
    while f is not None:  # still inside a callback (ours, or another LiteRT calls after it)
        if f.f_code.co_name in _CALLBACKS and f.f_code.co_filename == __file__:
            return
        f = f.f_back
    e, _LATER.e = _LATER.e, None
    sys.setprofile(_LATER.prev)
    raise e


_LATER = threading.local()
_CALLBACKS = frozenset({"_DELEGATE_PREPARE", "_INIT", "_PLAN", "_FREE", "_REPORT", "_PROFILE", "_raise_outside",
                        "_unraisable"})


def _report_unowned(ctx, e: BaseException) -> int:
    _raise_later(e)
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
        recall.drain()  # the runtime's recalled Prepares are recorded before this one
        _free_deferred()
        with d._lock:
            return claims.prepare(d, ctx)
    except BaseException as e:  # noqa: BLE001 (nothing may leave a ctypes callback)
        return d._fail(ctx, e) if d is not None else _report_unowned(ctx, e)


@_immortal
@runtime.INIT
def _INIT(ctx, buffer, length, out):  # noqa: N802
    try:
        params = abi.TfLiteDelegateParams.from_address(buffer)
        d = _delegate_of(params.delegate.contents.data_ or 0)
        part = _Planner(d, ctx, params)
        key = _new_keys(1)
        order = [n.index for n in part.nodes]
        arr = (C.c_int * max(1, len(order)))(*order)
        with _LOCK:
            _PLANNERS[key] = part
        # ctypes pointers pass as void* as they are (a C.cast each cost ~0.7 us)
        pkey, pplan = part.preset()
        handle = d._rt.lcl_partition_new(d._native, ctx, key, arr, len(order), params.output_tensors,
                                         d._device_index(d.device), pplan, pkey,
                                         -1 if pkey is None else len(pkey) // 4)
        if not handle:
            with _LOCK:
                _PLANNERS.pop(key, None)
            raise d.take_error() or LiteclError("litecl's runtime could not make the partition")
        part.handle = handle
        with _LOCK:
            _KERNELS[handle] = key
            d._parts.setdefault(part.ctx_addr, {})[key] = part
        rec = d._records.get(part.ctx_addr)  # none: a recalled Prepare's (recall.py), LiteRT formed others
        made = rec.get("made") if rec is not None else None
        if made is not None:  # a Prepare learning its partitions (_Expected.learn)
            made.append(part)
        out[0] = handle
        return 0
    except BaseException as e:  # noqa: BLE001
        _report_unowned(ctx, e)
        return 1  # *out NULL: LiteRT then fails the kernel's prepare (no user data)


#: partition kernels LiteRT freed while this thread held _LOCK: a garbage collection inside
#: a _LOCK block finalised a dead interpreter, whose free waited for the lock its own thread
#: held (a hang of the CI's system leg in has_partitions). Freed by the next _FREE or Prepare.
_DEFERRED: list = []


def _free_deferred() -> None:
    if _LOCK._is_owned() or recall.draining():
        return
    batch = []
    while _DEFERRED:
        batch.append(_DEFERRED.pop())
    for b in batch:  # one still waiting for the next drain goes back (_free)
        _free(b)


@_immortal
@abi.FREE
def _FREE(ctx, buffer):  # noqa: N802
    try:
        if _LOCK._is_owned() or recall.draining():  # a collection inside this thread's own
            _DEFERRED.append(buffer or 0)           # _LOCK block or drain: later, outside it
            return
        _free(buffer or 0)
        _free_deferred()
    except BaseException as e:  # noqa: BLE001 (free returns nothing: LiteRT cannot be told; the
        _raise_later(e)         # device buffers then go with the process)


def _free(buffer: int) -> None:
    """The partition kernel ``buffer``'s free: its rows settled, its counts kept, its
    device memory released (the runtime's lcl_partition_free)."""
    if buffer and buffer not in _KERNELS and recall.pending() and not recall.drain(wait=False):
        # a recalled Prepare's partition whose planner is not made yet, while another thread
        # records the log: freed after that drain (which runs _free_deferred); never waiting
        # for it here (a collection runs this inside any lock: placement()'s deadlocked)
        _DEFERRED.append(buffer)
        return
    with _LOCK:
        key = _KERNELS.pop(buffer or 0, None)
        part = _PLANNERS.pop(key, None)
        if part is not None:
            d = part.delegate
            part.settle()  # its placement() rows outlive it
            for k, v in part.counts().items():
                if k in d._stats:
                    d._stats[k] += v
            mine = d._parts.get(part.ctx_addr)
            if mine is not None:
                mine.pop(key, None)
                if not mine:
                    del d._parts[part.ctx_addr]
                    # its kernel times go with it (a later interpreter's context at the same
                    # address wrote another kernel's time under the key: a fresh user's report)
                    for k in [k for k in list(d.kernel_times_ns) if k[0] == part.ctx_addr]:
                        d.kernel_times_ns.pop(k, None)
                    d._rt.lcl_recall_freed(d._key, part.ctx_addr, next(_EVENTS))
    if part is not None:
        part.handle = None
        if not part.delegate.device.forked:  # in a fork()ed child an OpenCL call would hang
            part.delegate._rt.lcl_partition_free(buffer)
    elif buffer and key is None and not _forked():
        # a recalled Prepare's partition whose planner was never made: its Delegate went first
        # (a collection freed both; the drain then skips it): its device memory goes now
        # (~13-24 KB an interpreter stayed behind, a fresh user's report)
        runtime.load().lcl_partition_free(buffer)


def _forked() -> bool:
    """Whether this process is a fork()ed child of one that opened a device (device.py;
    imported at the top: _FREE runs inside collections, where no import may run)."""
    return any(dev.forked for dev in list(_OPEN.values()))


@_immortal
@runtime.PLANNER
def _PLAN(key, ctx, shape_key, n_key, out):  # noqa: N802
    part = None
    try:
        part = _PLANNERS.get(key)
        if part is None:  # a partition of a Prepare the runtime recalled: its planner made now
            recall.drain()
            part = _PLANNERS.get(key)
        if part is None:
            raise LiteclError("litecl partition kernel missing (its init failed)")
        part.plan_for(ctx, C.string_at(shape_key, 4 * n_key) if shape_key and n_key >= 0 else None, out)
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
        if part is None:  # a recalled Prepare's (recall.py)
            recall.drain()
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
        # init: the runtime's (an expected partition, _Expected), which calls _INIT for others
        reg.init = abi.INIT(C.cast(lib.lcl_inprocess_init, C.c_void_p).value)
        reg.free = _FREE
        reg.prepare = abi.PREPARE(C.cast(lib.lcl_kernel_prepare, C.c_void_p).value)
        reg.invoke = abi.INVOKE(C.cast(lib.lcl_kernel_invoke, C.c_void_p).value)
        reg.builtin_code = abi.BUILTIN_DELEGATE
        reg.custom_name = _NAME_BYTES
        reg.version = 1
        _REGISTRATIONS.append(_immortal(reg))
    return _REGISTRATIONS[0]


_NAME_BYTES = DELEGATE_NAME.encode()
