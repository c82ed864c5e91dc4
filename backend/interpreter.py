"""litecl.Interpreter: LiteRT's Interpreter API over the OpenCL + fallback executor.

Method names and detail-dict keys are LiteRT's (ai_edge_litert.interpreter), so a user
changes one import. Threading rule: an Interpreter and its signature runners must be used
from one thread at a time; separate Interpreters may run in separate threads (each has
its own tensors and LiteRT sub-interpreters; the OpenCL queue of a device is shared and
pyopencl serialises enqueues).
"""
from __future__ import annotations

import functools
import threading
import time

import numpy as np

from .device import open_device
from .errors import InputError, LiteclError, ModelError, NotAllocatedError, ResizedPrepareError
from .executor import Executor, _Replan
from .model import load_model, shape_too_big
from .partition import summary_lines

__all__ = ["Interpreter", "SignatureRunner", "MAX_NUM_THREADS"]

#: The largest num_threads LiteRT's Python binding takes (a C int: 2**31 gave a pybind
#: TypeError; 2**31 - 1 builds and runs, measured with ai-edge-litert 2.3.0).
MAX_NUM_THREADS = 2**31 - 1


#: numpy types LiteRT's details give for tensor types outside litecl's dtype table
_OTHER_TYPES = {"STRING": np.bytes_}


def _details(t, shape) -> dict:
    scales = t.scales.astype(np.float32)
    zps = t.zero_points.astype(np.int32)
    q = (float(scales[0]), int(zps[0])) if scales.size == 1 and zps.size >= 1 else (0.0, 0)
    return {
        "name": t.name,
        "index": t.index,
        "shape": np.array(shape, dtype=np.int32),
        "shape_signature": np.array(t.shape_signature, dtype=np.int32),
        "dtype": t.dtype.np.type if t.dtype is not None else _OTHER_TYPES.get(t.type_name),
        "quantization": q,
        "quantization_parameters": {"scales": scales, "zero_points": zps,
                                    "quantized_dimension": t.quantized_dimension,
                                    "block_size": t.block_size},
        "sparsity_parameters": {},
    }


#: Methods the passthrough fast path replaces on an Interpreter (Interpreter._maybe_fast).
_FAST_METHODS = ("set_tensor", "get_tensor", "invoke")


class _Graph:
    """One entry subgraph: its executor, current input shapes, allocation state."""

    def __init__(self, interp: "Interpreter", index: int):
        self.interp = interp
        self.index = index
        self.sg = interp._model.subgraphs[index]
        self.forced: dict = {}
        self.ex = self._executor()
        self.input_shapes = {t: tuple(self.sg.tensors[t].shape) for t in self.sg.inputs}
        self.allocated = False

    @property
    def allocated(self) -> bool:
        return self._allocated

    @allocated.setter
    def allocated(self, value: bool) -> None:
        self._allocated = value
        if not value and self.index == 0:  # shapes or plan changing: the checked methods again
            self.interp._drop_fast()

    def _executor(self) -> Executor:
        i = self.interp
        return Executor(i._model, self.index, i._device, i._num_threads, i._strict, self.forced,
                        i._reference, fuse=i._fuse, preserve_all_tensors=i._preserve,
                        placement=i._placement)

    def allocate(self) -> None:
        if self.index == 0:
            self.interp._drop_fast()
        for _ in range(len(self.sg.nodes) + 1):
            try:
                self.ex.allocate(self.input_shapes)
                self.allocated = True
                return
            except _Replan as r:  # a kernel failed to build: that node falls back
                self._replan(r)
            except ModelError as e:  # shapes LiteRT or a kernel refuses
                resized = {t: s for t, s in self.input_shapes.items() if s != self.sg.tensors[t].shape}
                if not resized:
                    raise
                shown = ", ".join(f"tensor {t} ({self.sg.tensors[t].name!r}) from "
                                  f"{list(self.sg.tensors[t].shape)} to {list(s)}"
                                  for t, s in resized.items())
                cls = ResizedPrepareError if isinstance(e, RuntimeError) else InputError
                raise cls(f"after resizing {shown}: {e}") from None
        raise LiteclError("could not place the graph after repeated kernel build failures")

    def _replan(self, r: "_Replan") -> None:
        self.forced[r.node] = r.reason
        self.ex.close()
        self.ex = self._executor()
        self.allocated = False

    def invoke(self) -> None:
        if not self.allocated:
            raise NotAllocatedError("call allocate_tensors() before invoke()")
        try:
            self.ex.invoke()
        except _Replan as r:  # a shape known only now gave a kernel that does not build
            old = self.ex
            inputs = {t: old.get(t) for t in self.sg.inputs if t in old.on_host or t in old.on_device}
            self._replan(r)
            self.allocate()
            for t, v in inputs.items():
                self.ex.set_input(t, v)
            self.ex.invoke()

    def close(self) -> None:
        self.ex.close()
        self.allocated = False

    def tensor_index(self, index) -> int:
        if type(index) is int and 0 <= index < len(self.sg.tensors):  # the common case, fast
            return index
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise InputError(f"tensor index must be an int, got {type(index).__name__}")
        index = int(index)
        if not 0 <= index < len(self.sg.tensors):
            raise InputError(f"tensor index {index} out of range; subgraph {self.index} has "
                             f"{len(self.sg.tensors)} tensors")
        return index

    def check_value(self, t: int, value, resize_ok: bool = False) -> np.ndarray:
        tensor = self.sg.tensors[t]
        if (type(value) is np.ndarray and tensor.dtype is not None and value.dtype == tensor.dtype.np
                and not tensor.dtype.packed_bits and value.shape == self.input_shapes.get(t, tensor.shape)):
            return value  # the common case, fast (sub-byte types have range checks below)
        if tensor.dtype is None:
            raise InputError(f"tensor {t} ({tensor.name!r}) has type {tensor.type_name}, which litecl cannot set")
        arr = np.asarray(value)
        if arr.dtype != tensor.dtype.np and arr.dtype.newbyteorder("=") == tensor.dtype.np:
            arr = arr.astype(tensor.dtype.np)  # the same type in the other byte order: its values
        if arr.dtype != tensor.dtype.np:
            raise InputError(f"tensor {t} ({tensor.name!r}) expects {tensor.dtype.name}, got {arr.dtype}")
        if tensor.dtype.packed_bits:  # LiteRT's Python API (measured): int4/uint4 as int8/uint8
            lo, hi = tensor.dtype.min, tensor.dtype.max  # in range; int2 not at all
            if tensor.dtype.name == "int2":
                raise InputError(f"tensor {t} ({tensor.name!r}) has type INT2, which LiteRT's Python "
                                 "API cannot set either")
            if arr.size and (int(arr.min()) < lo or int(arr.max()) > hi):
                raise InputError(f"tensor {t} ({tensor.name!r}): values for {tensor.type_name} must be "
                                 f"between {lo} and {hi} (passed as {arr.dtype}, one value per byte)")
        want = self.input_shapes.get(t, tensor.shape)
        if tuple(arr.shape) != tuple(want):
            if resize_ok:  # LiteRT's SignatureRunner resizes to whatever it is given
                return arr
            raise InputError(f"tensor {t} ({tensor.name!r}) expects shape {list(want)}, got {list(arr.shape)}")
        return arr


def _parse_shape(g: _Graph, t: int, tensor_size, strict: bool) -> tuple:
    """A new shape for input ``t`` as LiteRT's resize_tensor_input takes it: a 1-D
    sequence of non-negative int32 values; with ``strict``, the rank and every dimension
    that is not -1 in shape_signature must stay."""
    tensor = g.sg.tensors[t]
    what = f"tensor {t} ({tensor.name!r})"
    try:
        a = np.asarray(tensor_size)
    except Exception:  # ragged nesting and the like
        a = np.asarray([None])
    if a.ndim != 1 or not (a.dtype.kind in "iu" or (a.dtype.kind == "f" and a.size == 0)):
        raise InputError(f"{what}: new shape must be a 1-D sequence of integers, got {tensor_size!r}")
    shape = tuple(int(x) for x in a)
    if any(not 0 <= d < 2**31 for d in shape):
        raise InputError(f"{what}: dimensions must be in [0, 2**31), got {list(shape)}")
    why = shape_too_big(shape, tensor.dtype.itemsize if tensor.dtype is not None else 1)
    if why:
        raise InputError(f"{what}: new shape {list(shape)} {why}")
    sig = tensor.shape_signature
    if strict and not _fits_signature(shape, sig):
        raise InputError(f"{what}: strict resize may change only the dimensions that are -1 in "
                         f"shape_signature {list(sig)}, got {list(shape)}")
    return shape


def _fits_signature(shape, sig) -> bool:
    return len(shape) == len(sig) and all(s == -1 or s == d for s, d in zip(sig, shape))


#: The op resolver each OpResolverType name selects, as LiteRT 2.3.0 resolves it:
#: AUTO and BUILTIN share one id (the builtin resolver with XNNPACK applied).
_RESOLVER_REFERENCE = {"AUTO": "xnnpack", "BUILTIN": "xnnpack", "BUILTIN_REF": "ref",
                       "BUILTIN_WITHOUT_DEFAULT_DELEGATES": "builtin"}

#: LiteRT Interpreter flags litecl takes only at their default (False).
_LITERT_FALSE_FLAGS = ("experimental_disable_delegate_clustering",
                       "experimental_default_delegate_latest_features",
                       "experimental_compress_quantization_zero_points",
                       "experimental_disable_delegate_node_fusion",
                       "experimental_force_delegate_node_profiling")


def _resolve_reference(reference, resolver_type) -> str:
    """``reference`` from litecl's argument and LiteRT's experimental_op_resolver_type
    (an OpResolverType of ai_edge_litert or tf.lite, matched by member name). Raises
    LiteclError for an unknown resolver type or two arguments that disagree."""
    if resolver_type is None:
        return "builtin" if reference is None else reference
    name = getattr(resolver_type, "name", None)
    if type(resolver_type).__name__ != "OpResolverType" or name not in _RESOLVER_REFERENCE:
        raise LiteclError(f"unrecognized experimental_op_resolver_type {resolver_type!r}; expected "
                          f"an ai_edge_litert.interpreter.OpResolverType "
                          f"({', '.join(_RESOLVER_REFERENCE)})")
    mapped = _RESOLVER_REFERENCE[name]
    if reference is not None and reference != mapped:
        raise LiteclError(f"experimental_op_resolver_type {name} means reference={mapped!r}, "
                          f"but reference={reference!r} was given; pass one of them")
    return mapped


def _check_litert_flags(delegates, flags: dict) -> None:
    """LiteRT constructor arguments litecl has no counterpart for: accepted at their
    defaults, refused otherwise (LiteclError). Unknown keywords are a TypeError, as a
    missing parameter would be."""
    for k in flags:
        if k not in _LITERT_FALSE_FLAGS:
            raise TypeError(f"Interpreter() got an unexpected keyword argument {k!r}")
    for k, v in flags.items():
        if not isinstance(v, (bool, np.bool_)):
            raise LiteclError(f"{k} must be True or False, got {v!r}")
        if v:
            raise LiteclError(f"{k}=True is not supported: litecl places nodes itself "
                              "(it is the delegate); leave it False")
    if delegates is None:
        return
    try:
        n = len(delegates)
    except TypeError:
        raise LiteclError(f"experimental_delegates must be a list of delegates or None, got "
                          f"{type(delegates).__name__}") from None
    if n:
        raise LiteclError(f"experimental_delegates: litecl takes no LiteRT delegate (got {n}); "
                          "it is the delegate itself: nodes it cannot run on OpenCL run on "
                          "LiteRT's CPU kernels. Pass None or [] (or use ai_edge_litert's "
                          "Interpreter for that delegate)")


def _exclusive(method):
    """One thread at a time per Interpreter (LiteRT's rule too): a second thread gets a
    LiteclError instead of racing on the shared buffers (PoCL segfaulted on 4 threads
    invoking one Interpreter, measured). Re-entrant within a thread.

    The outermost call also takes the Interpreter's token (``_token``), which the
    passthrough fast path's invoke takes instead of the lock (Interpreter._maybe_fast):
    a checked call never overlaps a fast invoke in another thread, nor the reverse."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        interp = getattr(self, "_interp", self)  # a SignatureRunner's Interpreter
        if not interp._closed:
            interp._device.check_usable()  # a child of fork(): OpenCL would never return
        lock = interp._lock
        if not lock.acquire(blocking=False):
            if interp._closing:
                raise LiteclError("this Interpreter is being closed by another thread; create a "
                                  "new one")
            raise LiteclError(_IN_USE)
        try:
            outer = interp._depth == 0
            if outer:
                if not interp._token:  # a fast invoke runs in another thread
                    raise LiteclError(_IN_USE)
                interp._token.pop()
            interp._depth += 1
            try:
                return method(self, *args, **kwargs)
            finally:
                interp._depth -= 1
                if outer:
                    interp._token.append(1)
        finally:
            lock.release()
    return wrapper


_IN_USE = "this Interpreter is in use by another thread; give each thread its own Interpreter (LiteRT's rule)"


class Interpreter:
    """Run a .tflite model with CAST/ADD on OpenCL and every other node on LiteRT.

    Threading: use an Interpreter (and its signature runners) from one thread at a time.
    Separate Interpreters may run concurrently in separate threads, on the same device or
    not: each owns its tensors, device buffers, kernels and LiteRT sub-interpreters; they
    share only the device's context and in-order queue (OpenCL calls are thread-safe)
    and the cache of built programs. LiteRT's Interpreter has the same rule.

    Lifetime: ``close()`` (or leaving a ``with`` block) releases device buffers, kernels
    and LiteRT sub-interpreters at once; any later call raises LiteclError.

    Args:
      model_path: path of a .tflite file; or model_content: its bytes (exactly one).
      device: an OpenCL device spec ("auto", "pocl", "intel", "oclgrind", "nvidia", a
        name substring, optionally ":profile=mobile"), a litecl Device, or None
        (``LITECL_DEVICE`` or auto).
      num_threads: threads for the LiteRT fallback sub-interpreters.
      strict: raise instead of falling back when a generated kernel fails to build.
      reference: the LiteRT op resolver that runs fallback segments: "builtin" (default,
        LiteRT's kernels without XNNPACK), "ref" (reference kernels) or "xnnpack".
      fuse: compile each run of lowered nodes over one element space into one kernel
        (default). Fused intermediates that nothing outside the group reads are never
        written, so get_tensor() on them fails unless experimental_preserve_all_tensors
        (LiteRT's flag of the same name) is set, which writes every tensor computed on
        OpenCL. Tensors internal to a LiteRT fallback segment are never kept.
      num_threads: None or an int in [1, MAX_NUM_THREADS], for the fallback
        sub-interpreters (ai-edge-litert 2.3.0 raises "num_threads should >= 1" for -1 and
        0, and a pybind TypeError above a C int, measured; else InputError); True is an
        int there and runs as 1, so here too.
      experimental_delegates: LiteRT's argument; None or an empty list (code that adds a
        delegate conditionally) is accepted. A delegate is refused (LiteclError): litecl
        places the nodes itself and its fallback segments run LiteRT's CPU kernels.
      experimental_op_resolver_type: a LiteRT ``OpResolverType``, mapped onto
        ``reference`` as LiteRT resolves it (interpreter.py ``_get_op_resolver_id``):
        BUILTIN_WITHOUT_DEFAULT_DELEGATES -> "builtin", BUILTIN_REF -> "ref", AUTO and
        BUILTIN (which apply XNNPACK) -> "xnnpack". Unset (None): ``reference`` decides,
        "builtin" by default (not LiteRT's AUTO: XNNPACK computes other bits).
        Giving both with different meanings raises LiteclError.
      experimental_disable_delegate_clustering, experimental_default_delegate_latest_features,
        experimental_compress_quantization_zero_points, experimental_disable_delegate_node_fusion,
        experimental_force_delegate_node_profiling: LiteRT's flags, accepted when False
        (their default); True raises LiteclError (litecl has no such behaviour).
      The first six parameters take LiteRT's positions.
      placement: "all" (default): every node that can run on OpenCL does; "auto": only
        the runs of nodes the cost model (backend/placement.py: the device's measured
        bandwidth and round trip against LiteRT's, cached on disk) expects to be faster
        there; the rest stay on LiteRT, placement() saying why.
    Raises ModelError (bad model), DeviceError (no such device), InputError (bad
    num_threads), LiteclError (bad reference), KernelBuildError (strict on a device that cannot build
    kernels): all ValueError.
    allocate_tensors() raises ModelError when LiteRT or a kernel refuses the model's own
    shapes, InputError when they refuse shapes set by resize_tensor_input().
    """

    def __init__(self, model_path=None, model_content=None, experimental_delegates=None,
                 num_threads=None, experimental_op_resolver_type=None,
                 experimental_preserve_all_tensors: bool = False, *, device=None,
                 strict: bool = False, reference: str | None = None, fuse: bool = True,
                 placement: str = "all", **litert_flags):
        from .fallback import REFERENCES  # noqa: PLC0415
        from .placement import PLACEMENTS  # noqa: PLC0415

        self._lock = threading.RLock()
        self._token = [1]  # taken by the outermost checked call and by a fast invoke
        self._depth = 0  # nesting of checked calls in the thread holding the lock
        self._closing = False  # close() waits for the lock: other threads' calls fail fast

        for name, flag in (("fuse", fuse), ("strict", strict),
                           ("experimental_preserve_all_tensors", experimental_preserve_all_tensors)):
            if not isinstance(flag, (bool, np.bool_)):
                raise LiteclError(f"{name} must be True or False, got {flag!r}")
        self._fuse = bool(fuse)
        self._preserve = bool(experimental_preserve_all_tensors)
        _check_litert_flags(experimental_delegates, litert_flags)

        reference = _resolve_reference(reference, experimental_op_resolver_type)
        if reference not in REFERENCES:
            raise LiteclError(f"unknown reference {reference!r}; expected one of {', '.join(REFERENCES)}")
        self._reference = reference
        if placement not in PLACEMENTS:
            raise LiteclError(f"unknown placement {placement!r}; expected one of {', '.join(PLACEMENTS)}")
        self._placement = placement
        from . import cache  # noqa: PLC0415
        from .hostcopy import host_threads  # noqa: PLC0415

        host_threads()  # a bad LITECL_HOST_THREADS is an error now, not at the first large copy
        cache.max_bytes()  # and a bad LITECL_CACHE_MAX_BYTES, not at the first store
        self._model = load_model(model_path, model_content)
        if num_threads is not None:  # LiteRT's own checks, at construction
            if not isinstance(num_threads, int):  # a bool is one, as LiteRT takes it
                raise InputError(f"num_threads must be an int or None, got {type(num_threads).__name__}")
            if not 1 <= num_threads <= MAX_NUM_THREADS:
                raise InputError(f"num_threads must be >= 1 and <= {MAX_NUM_THREADS} (LiteRT takes a "
                                 f"C int), got {num_threads}")
            num_threads = int(num_threads)  # True is 1, as LiteRT's int(num_threads or 1)
        self._device = open_device(device)
        self._num_threads = num_threads
        self._strict = strict
        if strict and self._device.caps.compiler_error:
            from .errors import KernelBuildError  # noqa: PLC0415

            raise KernelBuildError(f"strict: {self._device.caps.platform}: {self._device.caps.name} "
                                   f"cannot build kernels ({self._device.caps.compiler_error})")
        self._graphs: dict[int, _Graph] = {}
        self._closed = False
        self._graph(0)

    # ------------------------------------------------------------------ internals
    def _drop_fast(self) -> None:
        """Back to the checked set_tensor/get_tensor/invoke (see _maybe_fast)."""
        d = self.__dict__
        for name in _FAST_METHODS:
            d.pop(name, None)
        live = d.pop("_fast_live", None)
        if live:
            live.clear()

    def _maybe_fast(self) -> None:
        """The passthrough fast path (issue 14: tiny models were 1.2-5.7x LiteRT from
        ~1.4 us of checks per call).

        When subgraph 0 runs whole on LiteRT (no OpenCL segment: the model's own bytes in
        one LiteRT interpreter) and it has been invoked once, set_tensor, get_tensor
        and invoke become closures that call LiteRT's own
        SetTensor/GetTensor/Invoke directly for the common case: an int index of an input
        (set) or of a readable tensor (get, as the checked path allows), an ndarray of
        the input's dtype and shape, the Interpreter open and not in use by another
        thread. Outputs whose shape LiteRT knows only by running (dynamic) get it from
        LiteRT's TensorSize when next asked for (Executor.current_shapes). Everything
        else (a wrong type, shape or index, a closed Interpreter, another thread,
        profiling) takes the checked path, so errors stay the same.
        Dropped by allocate_tensors, resize_tensor_input, a re-plan and close."""
        g = self._graphs.get(0)
        if g is None or self._closed or not g.allocated or "invoke" in self.__dict__:
            return
        ex = g.ex
        if ex._pass is None or any(
                t not in ex.on_host and not g.sg.tensors[t].is_variable for t in g.sg.inputs):
            return
        sg = g.sg
        lite = ex._pass._interpreter  # LiteRT's pybind InterpreterWrapper
        # LiteRT's own resize/allocate refuse while anything else holds the wrapper (its
        # reference count stands for numpy views), so its bound methods live in this list,
        # which _drop_fast empties: a closure held by the caller then takes the checked path
        live = self._fast_live = [lite.SetTensor, lite.GetTensor, lite.Invoke]
        del lite
        dynamic, stale = bool(ex._dynamic_outputs), ex._shapes_stale
        dtypes = {t: sg.tensors[t].dtype.np for t in sg.inputs
                  if sg.tensors[t].dtype is not None and not sg.tensors[t].dtype.packed_bits
                  and not sg.tensors[t].is_variable}
        readable = frozenset(
            t.index for t in sg.tensors
            if t.dtype is not None
            and (self._preserve or t.index in sg.inputs or t.index in sg.outputs
                 or t.is_constant or t.is_variable))
        cls = type(self)
        checked_set, checked_get, checked_invoke = cls.set_tensor, cls.get_tensor, cls.invoke
        me = self

        # LiteRT's SetTensor checks the index, numpy type number and shape itself; a
        # ValueError from it is re-raised by the checked path with litecl's message. The
        # dtype must be the very dtype object (a byte-swapped float32 has float32's type
        # number, and LiteRT would copy its bytes as they are).
        # Threads: SetTensor and GetTensor hold the GIL throughout, so the only call they
        # can overlap is an Invoke (which releases it). The token (one item, popped and
        # appended: atomic under the GIL) is out while any Invoke or checked call runs:
        # then set/get take the checked path, which fails cleanly in another thread.
        # allocate_tensors, resize and close also clear ``live`` first.
        token = self._token

        ndarray = np.ndarray

        def set_tensor(tensor_index, value):
            if live and token and type(value) is ndarray:
                try:  # KeyError: not an input; TypeError: an unhashable index
                    if value.dtype is dtypes[tensor_index] and type(tensor_index) is int:
                        live[0](tensor_index, value)
                        return
                except (KeyError, TypeError, ValueError):
                    pass
            return checked_set(me, tensor_index, value)

        def get_tensor(tensor_index, subgraph_index=0):
            if live and token and subgraph_index == 0:
                try:
                    if tensor_index in readable and type(tensor_index) is int:
                        return live[1](tensor_index, 0)
                except TypeError:  # an unhashable index: the checked path says what is wrong
                    pass
            return checked_get(me, tensor_index, subgraph_index)

        # two forms of invoke, so that the common one (no output sized at run time) tests
        # nothing it does not need: each test is ~50-100 instructions of a ~16,000-instruction
        # inference (callgrind, benchmarks/callgrind_inference.py)
        if dynamic:
            def invoke():
                if not ex.profile:
                    try:
                        token.pop()
                    except IndexError:  # another thread is in a call: the checked path says so
                        return checked_invoke(me)
                    try:
                        if live and not (ex._views and ex.views_alive()):  # token held: stays
                            live[2]()
                            stale[0] = True  # shapes LiteRT knows only now: read when asked for
                            return
                    finally:
                        token.append(1)
                return checked_invoke(me)
        else:
            def invoke():
                if not ex.profile:
                    try:
                        token.pop()
                    except IndexError:  # another thread is in a call: the checked path says so
                        return checked_invoke(me)
                    try:
                        if live:  # read with the token held: no checked call can clear it now
                            live[2]()
                            return
                    finally:
                        token.append(1)
                return checked_invoke(me)

        for f, name in ((set_tensor, "set_tensor"), (get_tensor, "get_tensor"), (invoke, "invoke")):
            f.__name__ = f.__qualname__ = name
            f.__doc__ = getattr(cls, name).__doc__
        self.__dict__.update(set_tensor=set_tensor, get_tensor=get_tensor, invoke=invoke)

    def _check_open(self) -> None:
        if self._closed:
            raise LiteclError("this Interpreter was closed; create a new one")

    @property
    def _main(self) -> _Graph:
        g = self._graphs.get(0)
        if g is not None and not self._closed:
            return g
        return self._graph(0)

    def _graph(self, index: int) -> _Graph:
        self._check_open()
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)) \
                or not 0 <= index < len(self._model.subgraphs):
            raise InputError(f"subgraph index {index!r} out of range; model has "
                             f"{len(self._model.subgraphs)} subgraphs")
        if index not in self._graphs:
            self._graphs[index] = _Graph(self, index)
        return self._graphs[index]

    def _entry_subgraphs(self) -> list[int]:
        self._check_open()
        out = [0] + [s.subgraph for s in self._model.signatures]
        return list(dict.fromkeys(out))

    # ------------------------------------------------------------------ LiteRT API
    @property
    def device(self):
        self._check_open()
        return self._device

    @_exclusive
    def allocate_tensors(self) -> None:
        """Plan kernels and fallback sub-models for the current input shapes."""
        self._main.allocate()

    def get_input_details(self) -> list[dict]:
        g = self._main
        return [_details(g.sg.tensors[t], g.input_shapes[t]) for t in g.sg.inputs]

    def get_output_details(self) -> list[dict]:
        g = self._main
        return [_details(g.sg.tensors[t], g.ex.current_shapes().get(t, g.sg.tensors[t].shape))
                for t in g.sg.outputs]

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict]:
        """Details of every tensor of a subgraph with a numpy type (as LiteRT's)."""
        g = self._graph(int(subgraph_index))
        return [_details(t, g.ex.current_shapes().get(t.index, t.shape)) for t in g.sg.tensors
                if t.dtype is not None]

    def _get_op_details(self, op_index) -> dict:
        """LiteRT's _get_op_details: node ``op_index`` of subgraph 0 as {"index",
        "op_name", "inputs", "outputs" (int32 arrays of tensor indices, -1 for an omitted
        input, as LiteRT), "operand_types", "result_types" (numpy types of the present
        tensors)}. op_name is the builtin name, or a custom op's custom_code."""
        g = self._main
        if isinstance(op_index, (bool, np.bool_)) or not isinstance(op_index, (int, np.integer)) \
                or not 0 <= int(op_index) < len(g.sg.nodes):
            raise InputError(f"op index {op_index!r} out of range; subgraph 0 has "
                             f"{len(g.sg.nodes)} nodes")
        n = g.sg.nodes[int(op_index)]

        def types(ts):  # LiteRT's: the tensor details' dtype
            return [_details(g.sg.tensors[t], g.sg.tensors[t].shape)["dtype"] for t in ts if t != -1]

        return {"index": n.index,
                "op_name": n.op.split(":", 1)[1] if n.op.startswith("CUSTOM:") else n.op,
                "inputs": np.array(n.inputs, np.int32), "outputs": np.array(n.outputs, np.int32),
                "operand_types": types(n.inputs), "result_types": types(n.outputs)}

    def _get_ops_details(self) -> list[dict]:
        """LiteRT's _get_ops_details: _get_op_details of every node of subgraph 0, in
        the model's order (litecl's execution order is ``placement()``'s)."""
        return [self._get_op_details(i) for i in range(len(self._main.sg.nodes))]

    def num_subgraphs(self) -> int:
        """LiteRT's num_subgraphs(): subgraphs in the model."""
        self._check_open()
        return len(self._model.subgraphs)

    @_exclusive
    def set_tensor(self, tensor_index, value) -> None:
        """Copy ``value`` into an input tensor. Raises InputError on a wrong index, dtype
        or shape (the message names the tensor, what was expected and what was given)."""
        g = self._main
        t = g.tensor_index(tensor_index)
        if t not in g.sg.inputs:
            raise InputError(f"tensor {t} ({g.sg.tensors[t].name!r}) is not an input; inputs are {list(g.sg.inputs)}")
        if not g.allocated:
            raise InputError("call allocate_tensors() before set_tensor()")
        g.ex.set_input(t, g.check_value(t, value))

    @_exclusive
    def get_tensor(self, tensor_index, subgraph_index: int = 0) -> np.ndarray:
        """A copy of a tensor's current value (inputs, outputs, constants, intermediates
        that crossed a boundary); a 0-d tensor as a numpy scalar, as LiteRT returns it."""
        g = self._main if subgraph_index == 0 and type(subgraph_index) is int else self._graph(int(subgraph_index))
        t = g.tensor_index(tensor_index)
        if not g.allocated:
            raise InputError("call allocate_tensors() before get_tensor()")
        v = g.ex.get(t)
        return v[()] if type(v) is np.ndarray and v.ndim == 0 else v

    def tensor(self, tensor_index):
        """LiteRT's ``tensor(i)``: a function returning a numpy view of tensor ``i``, LiteRT's
        zero-copy way to fill inputs and read outputs.

        As in LiteRT, hold the function, not the array: call it again after
        allocate_tensors(), resize_tensor_input() and (for outputs) invoke().
        - An input's view is its host staging (pinned memory on a discrete GPU): what is
          written into it is the input at the next invoke() (uploaded then; no set_tensor
          copy). Taking the view counts as setting the input until the next
          allocate_tensors().
        - An output's (or a boundary tensor's) view is its host copy after the last
          invoke (on a discrete GPU the pinned array the DMA wrote; elsewhere read back
          once); what is written into it is what get_tensor() returns until the next
          invoke, as in LiteRT.
        - A constant's value and 0-d tensors are returned as copies (read-only; a 0-d one
          as a numpy scalar, as LiteRT's). A model run whole on LiteRT returns LiteRT's own
          view; where its outputs are sized at invoke, invoke() refuses while such a view
          is held (RuntimeError, LiteRT's rule), instead of LiteRT moving the memory under
          it. Views held over close() or a re-plan keep their memory alive.
        Raises InputError as get_tensor() does (bad index, internal tensor, no value yet,
        not allocated) and for int4/uint4/int2 tensors (packed: LiteRT's view is wrong)."""
        self._graph(0).tensor_index(tensor_index)
        return functools.partial(self._tensor_view, tensor_index)

    @_exclusive
    def _tensor_view(self, tensor_index) -> np.ndarray:
        g = self._main
        t = g.tensor_index(tensor_index)
        if not g.allocated:
            raise InputError("call allocate_tensors() before tensor()")
        return g.ex.view(t)

    @_exclusive
    def resize_tensor_input(self, input_index, tensor_size, strict: bool = False) -> None:
        """Change an input's shape; takes effect at the next allocate_tensors().

        strict=True allows only dimensions that are -1 in shape_signature (LiteRT's rule).
        """
        g = self._main
        t = g.tensor_index(input_index)
        if t not in g.sg.inputs:
            raise InputError(f"tensor {t} ({g.sg.tensors[t].name!r}) is not an input; inputs are "
                             f"{list(g.sg.inputs)}")
        shape = _parse_shape(g, t, tensor_size, strict)
        if shape != g.input_shapes[t]:
            g.input_shapes[t] = shape
            g.allocated = False

    @_exclusive
    def invoke(self) -> None:
        """Run subgraph 0. Raises InputError when allocate_tensors() was not called or an
        input was not set; RuntimeError when LiteRT fails in a fallback node (as LiteRT)."""
        g = self._main
        g.invoke()
        if g.ex._pass is not None:
            self._maybe_fast()

    @_exclusive
    def reset_all_variables(self) -> None:
        """LiteRT's reset_all_variables: every variable tensor back to its initial value.
        Variable tensors are kept by the executor between segments (reset to LiteRT's
        initial value); resource variables live in LiteRT sub-interpreters, reset too."""
        self._check_open()
        for g in self._graphs.values():
            g.ex.reset_variables()  # variable tensors: their state lives in the executor
            for kind, step in g.ex._steps:
                if kind == "f" and step.interp is not None:
                    step.interp.reset_all_variables()  # resource variables: in LiteRT

    def get_signature_list(self) -> dict:
        self._check_open()
        return {s.key: {"inputs": list(s.inputs), "outputs": list(s.outputs)}
                for s in self._model.signatures}

    def get_signature_runner(self, signature_key=None) -> "SignatureRunner":
        self._check_open()
        sigs = {s.key: s for s in self._model.signatures}
        if signature_key is None:
            if len(sigs) != 1:
                raise InputError(f"signature_key is None and model has {len(sigs)} signatures; "
                                 "None is only allowed with exactly 1")
            signature_key = next(iter(sigs))
        if signature_key not in sigs:
            raise InputError(f"invalid signature_key {signature_key!r}; model has {sorted(sigs)}")
        return SignatureRunner(self, sigs[signature_key])

    # ------------------------------------------------------------------ litecl extras
    def placement(self) -> list[dict]:
        """Per node: {"subgraph", "index", "op", "placement": "opencl"|"fallback",
        "reason"} in execution order, for every entry subgraph; nodes of subgraphs called
        by control flow are listed as fallback."""
        out = []
        entries = self._entry_subgraphs()
        for si in entries:
            out += [p.as_dict() for p in self._graph(si).ex.placements]
        for sg in self._model.subgraphs:
            if sg.index in entries:
                continue
            out += [{"subgraph": sg.index, "index": n.index, "op": n.op, "placement": "fallback",
                     "reason": "inside a subgraph called by control flow (runs in LiteRT)"}
                    for n in sg.nodes]
        return out

    def summary(self) -> list[str]:
        """TFLite delegate-style log lines about what runs where."""
        from .partition import Placement  # noqa: PLC0415

        ps = [Placement(**p) for p in self.placement()]
        segs = {si: self._graph(si).ex.segments for si in self._entry_subgraphs()}
        return summary_lines(ps, segs)

    def __getstate__(self):
        raise TypeError("a litecl.Interpreter cannot be pickled or copied (it holds device buffers and "
                        "LiteRT sub-interpreters); pass the model bytes and create a new one")

    def close(self) -> None:
        """Release device buffers, kernels and LiteRT sub-interpreters now (idempotent).
        Any later call on this Interpreter or its signature runners raises LiteclError.

        Called from another thread while a call runs (invoke, allocate_tensors, ...),
        close() waits for that call to finish: releasing buffers under a running kernel
        aborted PoCL ("PTHREAD ERROR in can_run_command") and crashed Intel's runtime
        (measured)."""
        self._closing = True
        with self._lock:  # the lock every call holds (_exclusive); re-entrant
            self._drop_fast()
            while self._depth == 0 and not self._token:  # a fast invoke still runs
                time.sleep(0.001)
            if self._closed:
                return
            self._closed = True  # calls that were waiting for the lock now fail cleanly
            for g in self._graphs.values():
                g.close()
            self._graphs.clear()
            self._model = None  # the file's bytes and its object tree

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SignatureRunner:
    """LiteRT's SignatureRunner: ``runner(**inputs) -> {output name: array}``."""

    def __init__(self, interp: Interpreter, sig):
        self._interp = interp
        self._lock = interp._lock  # one thread at a time for the Interpreter and its runners
        self._sig = sig
        self._graph = interp._graph(sig.subgraph)

    @property
    def _g(self) -> _Graph:
        self._interp._check_open()
        return self._graph

    def get_input_details(self) -> dict:
        g = self._g
        return {k: _details(g.sg.tensors[t], g.input_shapes.get(t, g.ex.current_shapes().get(t, g.sg.tensors[t].shape)))
                for k, t in self._sig.inputs.items()}

    def get_output_details(self) -> dict:
        g = self._g
        return {k: _details(g.sg.tensors[t], g.ex.current_shapes().get(t, g.sg.tensors[t].shape))
                for k, t in self._sig.outputs.items()}

    @_exclusive
    def allocate_tensors(self) -> None:
        self._g.allocate()

    @_exclusive
    def resize_input(self, input_name: str, new_shape) -> None:
        g = self._g
        if input_name not in self._sig.inputs:
            raise InputError(f"invalid input name {input_name!r}; signature has {list(self._sig.inputs)}")
        t = self._sig.inputs[input_name]
        shape = _parse_shape(g, t, new_shape, strict=False)
        if shape != g.input_shapes[t]:
            g.input_shapes[t] = shape
            g.allocated = False

    @_exclusive
    def __call__(self, **kwargs) -> dict:
        g, sig = self._g, self._sig
        if set(kwargs) != set(sig.inputs):
            missing = sorted(set(sig.inputs) - set(kwargs))
            extra = sorted(set(kwargs) - set(sig.inputs))
            raise InputError(f"signature {sig.key!r} expects inputs {sorted(sig.inputs)}"
                             + (f"; missing {missing}" if missing else "")
                             + (f"; unknown {extra}" if extra else ""))
        values = {}
        for name, v in kwargs.items():
            t = sig.inputs[name]
            if t not in g.sg.inputs:
                # a signature input that is no subgraph input: LiteRT's runner writes the
                # tensor in place (no resize: "Dimension mismatch" otherwise); a node that
                # produces it overwrites the value when invoked, as in LiteRT
                arr = g.check_value(t, v)
                if g.sg.tensors[t].is_constant:
                    raise InputError(f"signature input {name!r} is tensor {t} "
                                     f"({g.sg.tensors[t].name!r}), a constant")
                if not any(t in n.outputs for n in g.sg.nodes):
                    values[t] = arr
                continue
            arr = g.check_value(t, v, resize_ok=True)
            values[t] = arr
            if tuple(arr.shape) != tuple(g.input_shapes[t]):
                g.input_shapes[t] = tuple(arr.shape)
                g.allocated = False
        if not g.allocated:
            g.allocate()
        for t, arr in values.items():
            g.ex.set_input(t, arr)
        g.invoke()
        return {k: g.ex.get(t) for k, t in sig.outputs.items()}
