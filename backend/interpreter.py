"""litecl.Interpreter: LiteRT's own Interpreter with litecl's Delegate applied first.

Its API is LiteRT's (ai_edge_litert.interpreter.Interpreter: it is a subclass), so a user
changes one import; what litecl adds: the model verifier in front of LiteRT (LiteRT
crashes on some hostile models), ``reference`` choosing LiteRT's op resolver, the
delegate's options, errors from the delegate raised as litecl's own types, ``placement()``
and ``summary()`` (which nodes run where and why), and ``close()``.
"""
from __future__ import annotations

import math
import operator
import os
import sys
import threading

import numpy as np
from ai_edge_litert import interpreter as _litert

from .delegate import KEEP_ORDER_DEFAULT, Delegate
from .pool import pool_key, pooled, release
from .errors import InputError, LiteclError, NotAllocatedError, PrepareError, ResizedPrepareError
from .cache import max_bytes
from .hostcopy import SPLIT_BYTES, copy_host, host_threads
from .model import litert_abort_reason, load_model, load_read

__all__ = ["Interpreter", "SignatureRunner", "REFERENCES", "MAX_NUM_THREADS"]

#: The largest num_threads LiteRT's Python binding takes (a C int: measured, 2.3.0).
MAX_NUM_THREADS = 2**31 - 1

#: ``reference=`` -> LiteRT's op resolver: "builtin" its builtin kernels without the
#: default XNNPACK delegate (the default), "ref" its reference kernels, "xnnpack" its
#: default configuration (XNNPACK takes the nodes litecl leaves).
REFERENCES = ("builtin", "ref", "xnnpack")
_RESOLVERS = {"builtin": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "ref": "BUILTIN_REF", "xnnpack": "AUTO"}
#: OpResolverType member name -> reference (LiteRT's _get_op_resolver_id: AUTO and
#: BUILTIN share one resolver, which applies XNNPACK)
_RESOLVER_REFERENCE = {"AUTO": "xnnpack", "BUILTIN": "xnnpack", "BUILTIN_REF": "ref",
                       "BUILTIN_WITHOUT_DEFAULT_DELEGATES": "builtin"}


def resolver_type(reference: str):
    """LiteRT's OpResolverType for ``reference`` (REFERENCES)."""
    return getattr(_litert.OpResolverType, _RESOLVERS[reference])


def _check_litert_args(num_threads, preserve_all_tensors, flags: dict) -> None:
    """Refuse, with one line, a num_threads above a C int, which LiteRT's binding refuses
    with a multi-line pybind11 TypeError ("incompatible function arguments", measured
    2.3.0; its own one-line ValueErrors, below 1 or not an int, stay LiteRT's). Raises
    LiteclError."""
    if isinstance(num_threads, int) and not isinstance(num_threads, bool) and num_threads > MAX_NUM_THREADS:
        raise LiteclError(f"num_threads must be at most {MAX_NUM_THREADS} (a C int in LiteRT), got {num_threads}")


def _binding_refused(num_threads, flags: dict) -> LiteclError:
    """LiteRT's pybind11 "incompatible function arguments" TypeError (many lines: the
    overloads, then the arguments) as one line naming what was given. Its flags take what
    Python's truth test reads without a length (None, numbers), not a str or a list."""
    given = ", ".join(f"{k}={v!r}" for k, v in (("num_threads", num_threads), *flags.items()))
    return LiteclError(f"LiteRT's Interpreter refused its arguments ({given}): num_threads is an int "
                       f"from 1 to {MAX_NUM_THREADS} (or -1), each experimental flag True or False")


def _resolve_reference(reference, resolver) -> str:
    """``reference`` from litecl's argument and LiteRT's experimental_op_resolver_type
    (an OpResolverType of ai_edge_litert or tf.lite, matched by member name). Raises
    LiteclError for an unknown value or two arguments that disagree."""
    if resolver is None:
        r = "builtin" if reference is None else reference
        if r not in REFERENCES:
            raise LiteclError(f"unknown reference {r!r}; expected one of {', '.join(REFERENCES)}")
        return r
    name = getattr(resolver, "name", None)
    if type(resolver).__name__ != "OpResolverType" or name not in _RESOLVER_REFERENCE:
        raise LiteclError(f"unrecognized experimental_op_resolver_type {resolver!r}; expected an "
                          f"ai_edge_litert.interpreter.OpResolverType ({', '.join(_RESOLVER_REFERENCE)})")
    mapped = _RESOLVER_REFERENCE[name]
    if reference is not None and reference != mapped:
        raise LiteclError(f"experimental_op_resolver_type {name} means reference={mapped!r}, "
                          f"but reference={reference!r} was given; pass one of them")
    return mapped


_VERIFIED: dict = {}  # (length, hash) -> (Model, its cost): models verified in this process (_memo_put)
_VERIFIED_MAX_BYTES = 256 << 20  # the oldest go first past this much of their cost


def _once(text: str) -> str:
    """LiteRT's error text said once where it is one message repeated (its reporter
    gathers every report: the delegate's redo after a resize, _price_at_running_shapes,
    allocates twice and reports a failure twice, run together)."""
    n = len(text)
    for k in range(2, 5):
        if n % k == 0 and text == text[: n // k] * k:
            return text[: n // k]
    return text


def _price_at_running_shapes(delegate: Delegate, model) -> None:
    """Under placement="auto", this Interpreter's own ``delegate`` allows no dynamic
    tensors where LiteRT takes such a delegate on ``model`` (a graph whose shapes are
    known before invoke; export.delegate_flags, asked once per model): LiteRT then
    propagates the shapes before the delegate's Prepare, and after resize_tensor_input
    undoes the delegate and prepares it again, so auto prices every node at the shapes
    it runs at. With the flag LiteRT keeps the first decision across resizes, made at the
    declared shapes (a [-1, 1000] CAST run at [2000, 1000] stayed on LiteRT as "~0 us"
    of LiteRT). A shared Delegate (delegate=, or stock LiteRT) keeps the flag: its
    decisions are those of the shapes its first Prepare saw. Only a model with an input
    whose shape signature has a -1 (a dimension meant to vary) asks: the static delegate
    costs LiteRT an allocation at construction (auto's start-up over the 34 models of
    bench_delegate: 1.77x LiteRT's, 2.0x had every model asked)."""
    from .export import delegate_flags  # noqa: PLC0415

    if model._static is None:
        varies = any(-1 in tuple(sg.tensors[t].shape_signature or ()) for sg in model.subgraphs for t in sg.inputs
                     if 0 <= t < len(sg.tensors))
        model._static = varies and delegate_flags(model.raw) == 0
    if model._static:
        delegate._struct.flags = 0


def _verified(model_path, model_content):
    """load_model's verified Model, memoised in the process by content (a hit costs reading
    the file, a hash and a comparison of the bytes, not the verifier)."""
    if model_path is not None and model_content is None:
        from .model import _read  # noqa: PLC0415

        try:
            content, key = _read(model_path)  # refuses FIFOs, devices, directories first; (bytes, identity)
        except Exception:  # noqa: BLE001 (load_model says why, in its words)
            return load_model(model_path, None)
        hit = _memo_get(content, key)
        if hit is not None:
            return hit
        where = os.fsdecode(model_path) if isinstance(model_path, bytes) else str(model_path)
        return _memo_put(load_read(content, key, where), key)  # the file read once
    if model_path is None and isinstance(model_content, (bytes, bytearray, memoryview)):
        hit = _memo_get(model_content)
        return hit if hit is not None else _memo_put(load_model(None, model_content))
    return load_model(model_path, model_content)




def _visible(model) -> frozenset:
    """{(tensor index, name)} of ``model``'s signature tensors that are no input or output
    of their subgraph (Delegate.owning's ``visible``: their producers stay on LiteRT)."""
    if model._visible is None:
        out = set()
        for sig in model.signatures:
            if not 0 <= sig.subgraph < len(model.subgraphs):
                continue
            sg = model.subgraphs[sig.subgraph]
            edge = {*sg.inputs, *sg.outputs}
            out.update((t, sg.tensors[t].name) for t in (*sig.inputs.values(), *sig.outputs.values())
                       if t not in edge and 0 <= t < len(sg.tensors))
        model._visible = frozenset(out)
    return model._visible


def _litert_text(e: Exception, reference: str) -> str:
    """LiteRT's error text on one line, each repeated message once (_once); where LiteRT
    lacks a custom op and the resolver is not LiteRT's default, a hint: the default's
    XNNPACK resolves MediaPipe's (selfie_segmentation's Convolution2DTransposeBias ran
    under stock LiteRT and failed under litecl.Interpreter: a fresh user's report)."""
    text = _once(" ".join(str(e).split()))
    if reference != "xnnpack" and "unresolved custom op" in text.lower() and any(op in text for op in _XNNPACK_OPS):
        text += (" (reference=\"xnnpack\", LiteRT's default resolver, has MediaPipe's custom ops such as "
                 "Convolution2DTransposeBias)")
    return text


#: the custom ops LiteRT's default resolver runs through XNNPACK (MediaPipe's): no other
#: custom op (edgetpu-custom-op, an app's own) is in any of LiteRT's resolvers
_XNNPACK_OPS = ("Convolution2DTransposeBias", "MaxPoolingWithArgmax2D", "MaxUnpooling2D")


def _refuse_constant(model, t) -> None:
    """Refuse set_tensor on a constant tensor of subgraph 0 (LiteclError, a ValueError as
    LiteRT's set_tensor errors): LiteRT writes the value into the model's bytes, which
    litecl.Interpreter shares among the interpreters of one model (_verified), and litecl's
    kernels upload constants once: a fresh user's ADD kept the old constant while LiteRT's
    MUL took the new one, and another interpreter of the model got it. LiteRT's own
    model_path interpreter crashes there (read-only memory)."""
    ro = model._readonly
    if ro is None:
        ro = model._readonly = frozenset(x.index for x in model.subgraphs[0].tensors if x.is_constant) \
            if model.subgraphs else frozenset()
    try:
        hit = operator.index(t) in ro
    except TypeError:  # LiteRT's set_tensor says what is wrong with such an index
        return
    if hit:
        raise LiteclError(f"Cannot set tensor: tensor {t} ({model.subgraphs[0].tensors[t].name!r}) is a constant "
                          "of the model: its data is the model's bytes, shared by every litecl.Interpreter of "
                          "the model, and OpenCL kernels read it once (LiteRT's model_path interpreter crashes "
                          "here); build the model with another constant")


def _memo_get(content, file_key: str | None = None):
    """The memoised Model of ``content``; ``file_key``: the identity of the file it was
    just read from (model._identity), which finds the entry without hashing the bytes
    (a read's new bytes object is hashed anew: ~0.2 ms a MB of model_path at every
    construction, measured). The bytes are compared either way."""
    b = bytes(content) if not isinstance(content, bytes) else content
    k = _BY_FILE.get(file_key) if file_key is not None else None
    m = _VERIFIED.get(k if k is not None else (len(b), hash(b)))
    return m[0] if m is not None and m[0].raw == b else None


def _memo_put(model, file_key: str | None = None):
    """Keep ``model`` for _memo_get, the oldest going first past _VERIFIED_MAX_BYTES of
    their cost: the model's bytes and ~MEMO_OBJECT_BYTES a tensor and a node for its parsed
    objects (a 0.9 KB model held ~7 KB: a cap on the bytes alone let small models grow
    the process by GBs, a fresh user's report)."""
    raw = model.raw if isinstance(model.raw, bytes) else bytes(model.raw)
    cost = len(raw) + MEMO_OBJECT_BYTES * sum(len(sg.tensors) + len(sg.nodes) for sg in model.subgraphs)
    key = (len(raw), hash(raw))
    if key in _VERIFIED:
        _MEMO_HELD[0] -= _VERIFIED.pop(key)[1]
    while _VERIFIED and _MEMO_HELD[0] + cost > _VERIFIED_MAX_BYTES:
        _MEMO_HELD[0] -= _VERIFIED.pop(next(iter(_VERIFIED)))[1]
    _VERIFIED[key] = (model, cost)
    _MEMO_HELD[0] += cost
    if file_key is not None:
        if len(_BY_FILE) >= _BY_FILE_MAX:
            _BY_FILE.clear()
        _BY_FILE[file_key] = key
    return model


#: a model file's identity (model._identity: path, device, inode, size, times) -> its
#: _VERIFIED key; emptied at _BY_FILE_MAX entries (a gone entry only costs a hash)
_BY_FILE: dict = {}
_BY_FILE_MAX = 4096


#: what one tensor or node of a parsed Model holds in Python objects, about (measured:
#: add_model's 3 tensors and 1 node held ~6 KB beside its 0.9 KB of bytes)
MEMO_OBJECT_BYTES = 1536
_MEMO_HELD = [0]  # the costs of _VERIFIED's models


_CLOSED = "this Interpreter was closed; create a new one"


class _Closed:
    """Stands for LiteRT's wrapper after close(): any use is a one-line LiteclError."""

    def __getattr__(self, name):
        raise LiteclError(_CLOSED)


_IN_USE = "this Interpreter is in use by another thread; give each thread its own Interpreter (LiteRT's rule)"


def _busy_error(interp) -> str:
    """Why a call found the interpreter's lock held: another thread's call, or its close()
    (a worker invoking while the owner closed it was told of a threading rule it kept)."""
    return _CLOSED if getattr(interp, "_closing", False) else _IN_USE


class Interpreter(_litert.Interpreter):
    """LiteRT's Interpreter with CAST and ADD nodes on OpenCL (litecl.Delegate).

    Args (LiteRT's first six, in LiteRT's positions, then litecl's keywords):
      model_path / model_content: the model (exactly one); checked by litecl's verifier
        first (ModelError), since LiteRT crashes on some malformed models.
      experimental_delegates: further LiteRT delegates, applied after litecl's.
      num_threads, experimental_preserve_all_tensors, and LiteRT's other keyword flags:
        passed to LiteRT as they are.
      experimental_op_resolver_type: LiteRT's resolver; or ``reference``: "builtin"
        (default: builtin kernels, no XNNPACK), "ref" (BUILTIN_REF), "xnnpack" (LiteRT's
        default: XNNPACK takes the nodes litecl leaves). The delegate matches the same
        kernels (int16 quantized ADD ties: "ref" matches BUILTIN_REF, else builtin).
      device, placement ("all" | "auto"), fuse, keep_order, quiet, ops, nodes:
        litecl.Delegate's (``nodes=`` naming a subgraph the model lacks: LiteclError).
      delegate: an existing litecl.Delegate to use instead of making one (its own
        options then apply).
    Raises ModelError (bad model), DeviceError (no such device), LiteclError (bad
    option, or an error inside the delegate, in its own type): all ValueError; LiteRT's
    own errors as LiteRT raises them.
    """

    def __init__(self, model_path=None, model_content=None, experimental_delegates=None,
                 num_threads=None, experimental_op_resolver_type=None,
                 experimental_preserve_all_tensors: bool = False, *, device=None,
                 reference: str | None = None, placement: str = "all", fuse: bool = True,
                 keep_order=KEEP_ORDER_DEFAULT, quiet=None, ops=None, nodes=None, delegate: Delegate | None = None,
                 **litert_flags):
        self._closed = True  # until LiteRT's constructor has run (close() and __del__)
        self._busy = threading.Lock()
        reference = _resolve_reference(reference, experimental_op_resolver_type)
        host_threads(), max_bytes()  # a bad LITECL_HOST_THREADS/LITECL_CACHE_MAX_BYTES: an error now
        _check_litert_args(num_threads, experimental_preserve_all_tensors, litert_flags)
        model = _verified(model_path, model_content)
        if delegate is None:
            self._pool_key = pool_key(device, placement, reference, quiet, fuse, keep_order, ops, nodes)
            delegate = pooled(self._pool_key) or Delegate(device, placement, reference=reference, quiet=quiet, fuse=fuse,
                                                           keep_order=keep_order, ops=ops, nodes=nodes)
            if placement == "auto":
                _price_at_running_shapes(delegate, model)
        elif not isinstance(delegate, Delegate):
            raise LiteclError(f"delegate must be a litecl.Delegate, got {type(delegate).__name__}")
        else:
            given = [k for k, v, d in (("device", device, None), ("placement", placement, "all"),
                                       ("fuse", fuse, True), ("keep_order", keep_order, KEEP_ORDER_DEFAULT),
                                       ("quiet", quiet, None), ("ops", ops, None), ("nodes", nodes, None))
                     if v is not d and v != d]
            if given:
                raise LiteclError(f"{', '.join(given)} given with delegate=: they are the Delegate's "
                                  "options; pass them to litecl.Delegate(...)")
            if (delegate.reference == "ref") != (reference == "ref"):  # its nodes would give other kernels' bits
                raise LiteclError(f"delegate= matches reference {delegate.reference!r}, the Interpreter runs "
                                  f"{reference!r}: give both the same reference")
        missing = sorted(si for si in (delegate.nodes or {}) if si >= len(model.subgraphs))
        if missing:  # the model is known here (a Delegate alone cannot tell)
            raise LiteclError(f"nodes= names subgraph {missing[0]}, but the model has {len(model.subgraphs)} "
                              f"subgraph(s) (0..{len(model.subgraphs) - 1})")
        if experimental_delegates is not None and not isinstance(experimental_delegates, (list, tuple)):
            raise LiteclError(f"experimental_delegates must be a list of delegates or None, got "
                              f"{type(experimental_delegates).__name__}")
        if any(d is delegate for d in experimental_delegates or ()):
            raise LiteclError("experimental_delegates holds litecl's own delegate, which "
                              "litecl.Interpreter applies first already")
        self._litecl = delegate
        self._model, self._later = model, bool(experimental_delegates)
        self._reference = reference
        self._plain_invoke = False  # until allocate_tensors decides (_wrap)
        # a delegate that allows no dynamic tensors has LiteRT allocate at construction
        # (_price_at_running_shapes): invoke still waits for allocate_tensors, as LiteRT's
        self._unallocated = delegate._struct.flags == 0
        self._plain_get = True
        try:
            with delegate.owning(id(self), visible=_visible(model)):
                super().__init__(model_content=model.raw,
                                 experimental_delegates=[delegate, *(experimental_delegates or [])],
                                 num_threads=num_threads,
                                 experimental_op_resolver_type=resolver_type(reference),
                                 experimental_preserve_all_tensors=experimental_preserve_all_tensors,
                                 **litert_flags)
        except (RuntimeError, ValueError) as e:
            self._raise_delegate_error(e, PrepareError)
        except TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
            flags = dict(litert_flags, experimental_preserve_all_tensors=experimental_preserve_all_tensors)
            raise _binding_refused(num_threads, flags) from None
        self._closed = False

    def _raise_delegate_error(self, e: Exception, kind=None, resized: bool = False):
        """Raise litecl's error a callback kept, else ``kind`` (with LiteRT's text) or
        ``e``. ``resized``: an input no longer has the model's shape, so a PrepareError
        is the resize's (ResizedPrepareError). LiteRT's "not ready" at invoke becomes
        NotAllocatedError with LiteRT's message (a RuntimeError too, as LiteRT's)."""
        err = self._litecl.take_error()
        if err is not None:
            if resized and isinstance(err, PrepareError) and not isinstance(err, ResizedPrepareError):
                raise ResizedPrepareError(f"{err} (at the shapes resize_tensor_input gave)") from None
            raise err from None
        if kind is not None and isinstance(e, RuntimeError):
            raise kind(_litert_text(e, self._reference) or "LiteRT failed to prepare the model") from None
        if isinstance(e, RuntimeError) and "model that is not ready" in str(e):
            raise NotAllocatedError(str(e)) from None  # LiteRT's words, litecl's type
        raise e

    # ------------------------------------------------------------------ LiteRT API
    def allocate_tensors(self):
        """LiteRT's allocate_tensors. Raises PrepareError (ResizedPrepareError where
        resize_tensor_input changed an input's shape) where a node, LiteRT's own included,
        cannot be prepared, with LiteRT's text (both a ValueError and a RuntimeError); an
        error inside litecl's kernels in its own type."""
        if not self._busy.acquire(blocking=False):
            raise LiteclError(_busy_error(self))
        try:
            self._litecl.device.check_usable()
            self._wrap(invoke=True, get_tensor=True)  # litecl's until decided again
            with self._litecl.owning(id(self), visible=self._model._visible):
                out = super().allocate_tensors()
            shapes = _input_shapes(self, 0)
            _refuse_litert_abort(self, 0, shapes)  # LiteRT would abort in invoke at these shapes
            self._big_tensors = None  # get_tensor's sizes, looked up again
            # nothing of litecl's runs at invoke: LiteRT's own invoke (a 2 us model paid
            # 0.17 us for the wrapper, measured); no tensor large enough for copy_host:
            # LiteRT's own get_tensor
            self._wrap(invoke=self._litecl.has_partitions(id(self)),
                       get_tensor=_may_hold_big_tensors(self, shapes))
            self._unallocated = False
            self._allocated = True
            return out
        except RuntimeError as e:
            if getattr(e, "litert_aborts", False):  # litecl's own refusal, already in its type
                raise
            # LiteRT's own node failing to prepare raises a bare RuntimeError: litecl's
            # type for it (a ValueError and a RuntimeError), the resize's where an input
            # no longer has the model's shape
            resized = _resized(self)
            self._raise_delegate_error(e, ResizedPrepareError if resized else PrepareError, resized=resized)
        finally:
            self._busy.release()

    def _wrap(self, invoke: bool, get_tensor: bool) -> None:
        """Whether invoke and get_tensor do litecl's work (``invoke``: a partition on
        OpenCL, or LiteRT's "not ready" to raise as NotAllocatedError; ``get_tensor``: a
        tensor large enough for copy_host) or go straight to LiteRT's wrapper, as LiteRT's
        own methods do, after one attribute read.

        Flags, not a switch of ``__class__`` (on CPython 3.11 that turns the instance's
        attribute values into a dict, and every attribute read LiteRT's set_tensor, invoke
        and get_tensor make costs more: sine_float set + invoke + get 1.11x LiteRT with the
        class switched, measured) nor methods in the instance's attributes (a bound one
        makes a reference cycle; a weakly bound one fails in ``Interpreter(...).invoke()``)."""
        self._plain_invoke = not invoke
        self._plain_get = not get_tensor

    def resize_tensor_input(self, input_index, tensor_size, strict=False):
        """LiteRT's resize_tensor_input; until the next allocate_tensors, invoke raises
        NotAllocatedError (LiteRT's "not ready" in litecl's type). A size LiteRT refuses
        raises what LiteRT raises (tests/test_hardening.py test_misuse_is_litert_s_error)."""
        self._plain_invoke = False
        return super().resize_tensor_input(input_index, tensor_size, strict)

    def invoke(self):
        """LiteRT's invoke; an error inside litecl's kernels raises its own type, LiteRT's
        "not ready" NotAllocatedError (a RuntimeError). Where litecl has nothing to do at
        invoke (no partition: _wrap) LiteRT's own two calls after one flag (every model
        pays this method, including one whose nodes all stay on LiteRT)."""
        if self._plain_invoke:
            try:
                self._ensure_safe()
                self._interpreter.Invoke()
            except RuntimeError as e:
                self._raise_delegate_error(e)
            return
        busy = self._busy
        if not busy.acquire(False):
            raise LiteclError(_busy_error(self))
        try:
            if self._litecl.device.forked:
                self._litecl.device.check_usable()
            if self._unallocated:
                raise NotAllocatedError("Invoke called on model that is not ready.")  # LiteRT's words
            self._ensure_safe()
            self._interpreter.Invoke()
        except RuntimeError as e:
            self._raise_delegate_error(e)
        finally:
            busy.release()

    def tensor(self, tensor_index):
        """LiteRT's tensor(); its view of a tensor inside a litecl partition says why it has no data."""
        return _explained_view(self, super().tensor(tensor_index), tensor_index, 0)

    def get_tensor(self, tensor_index, subgraph_index=0):
        """LiteRT's get_tensor. A numeric tensor of hostcopy.SPLIT_BYTES or more (of
        subgraph 0, not sparse) is copied out of LiteRT's view of it (tensor()) into a new
        numpy array by hostcopy.copy_host: LiteRT's own copy goes to fresh malloc'd memory
        and page-faults (16M float32: 37 ms, this way 11 ms; 16M float16: 18 -> 5 ms,
        measured on a 2-core VM); the same bytes, shape and dtype. Every other call, and
        every error, is LiteRT's get_tensor. Which tensors are that large is looked up
        once per allocate_tensors (a small tensor pays ~0.12 us for the lookup).

        The array a large read returns is kept, and the next read of that tensor copies
        into it again when nothing else refers to it any more (no name, container, view or
        buffer of the caller's: its reference count says so), as a fresh array would be:
        a fresh 32 MB array page-faults in 4-33 ms on this VM (glibc maps every block
        over 32 MB anew), a kept one is written in 3.5 ms. It costs the memory of one
        such array per large tensor until close()."""
        if self._plain_get:  # no tensor that large (_wrap): LiteRT's get_tensor
            try:
                return self._interpreter.GetTensor(tensor_index, subgraph_index)
            except ValueError as e:
                raise _no_data_error(self, e, tensor_index, subgraph_index) from None
        if type(tensor_index) is int and type(subgraph_index) is int and subgraph_index == 0:
            big = self._big_tensors
            if big is None:
                big = self._big_tensors = {}
            fast = big.get(tensor_index)
            if fast is None:
                fast = big[tensor_index] = _is_big(self, tensor_index)
            if fast and self._busy.acquire(blocking=False):  # an invoke holds it: LiteRT's path
                try:
                    out = _copy_big(self, tensor_index)
                finally:
                    self._busy.release()
                if out is not None:
                    return out
        try:
            return self._interpreter.GetTensor(tensor_index, subgraph_index)  # LiteRT's get_tensor, whole
        except ValueError as e:
            raise _no_data_error(self, e, tensor_index, subgraph_index) from None

    _big_tensors = None  # tensor index -> get_tensor copies it itself (since allocate_tensors)

    _spare_arrays = None  # tensor index -> the array get_tensor last returned for it

    def set_tensor(self, tensor_index, value):
        _refuse_constant(self._model, tensor_index)
        return super().set_tensor(tensor_index, value)

    def get_signature_runner(self, signature_key=None):
        runner = super().get_signature_runner(signature_key)
        runner.__class__ = SignatureRunner
        del runner.__dict__["_interpreter_wrapper"]  # read through the Interpreter (close())
        return runner

    # ------------------------------------------------------------------ litecl extras
    @property
    def delegate(self) -> Delegate:
        """The litecl.Delegate this Interpreter applied."""
        return self._litecl

    @property
    def device(self):
        return self._litecl.device

    def placement(self) -> list[dict]:
        """Per CAST/ADD node of every subgraph: {"interpreter", "subgraph", "index", "op",
        "placement": "opencl"|"litert"|"delegate", "reason", "partition", "kernel", "device"}
        (litecl.Delegate.placement, for this Interpreter's contexts: ``subgraph`` is the
        model's subgraph index; ``interpreter`` is the delegate's number for this
        Interpreter, 0 unless it shares a Delegate, ``delegate=``). LiteclError after close()."""
        if self._closed:
            raise LiteclError(_CLOSED)
        return _after_litecl(self, self._litecl.placement(id(self)))

    def summary(self) -> list[str]:
        """TFLite delegate-style log lines: the nodes kept on LiteRT and why, then per
        subgraph "Replacing N out of M node(s) with delegate (litecl OpenCL) node,
        yielding P partitions". LiteclError after close()."""
        if self._closed:
            raise LiteclError(_CLOSED)
        return summary_lines(self._litecl, id(self))

    def close(self) -> None:
        """Release LiteRT's interpreter and litecl's device memory now (idempotent); any
        later call raises LiteclError."""
        if getattr(self, "_closed", True):
            return
        self._closing = True  # another thread's call waiting on _busy says so (_busy_error)
        with self._busy:
            self._closed = True
            self._spare_arrays = None
            self._interpreter = _Closed()
            self._delegates = None
        self._litecl.forget(id(self))  # its rows leave a shared Delegate's placement() now

    _pool_key = None  # the settings its own Delegate is pooled under (pool.pool_key), if it made one
    _allocated = False  # allocate_tensors succeeded once

    def __del__(self):
        _finalize(self, _litert.Interpreter.__del__)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        raise TypeError("a litecl.Interpreter cannot be pickled or copied (it holds LiteRT's "
                        "interpreter and device buffers); pass the model bytes and create a new one")


def _after_litecl(interp: Interpreter, rows: list) -> list:
    """``rows`` (placement()'s) with subgraph 0's CAST/ADD nodes that a delegate applied
    after litecl runs (XNNPACK under reference="xnnpack", experimental_delegates) as
    "delegate", litecl's own reason after who runs it: they read "litert" while LiteRT's
    graph held their delegate kernels (a fresh user's report; pictures.other_delegate_nodes
    finds them from LiteRT's appended kernel nodes)."""
    from .pictures import other_delegate_nodes  # noqa: PLC0415

    left = [r for r in rows if r["subgraph"] == 0 and r["placement"] == "litert"]
    if not left or not interp._model.subgraphs:
        return rows
    mine = {r["index"] for r in rows if r["subgraph"] == 0 and r["placement"] == "opencl"}
    others = other_delegate_nodes(interp, interp._model.subgraphs[0], mine)
    who = "XNNPACK" if interp._reference == "xnnpack" and not interp._later else "a delegate"
    for r in left:
        if r["index"] in others:
            r["placement"] = "delegate"
            r["reason"] = f"run by {who} applied after litecl" + (f" (litecl: {r['reason']})" if r["reason"] else "")
    return rows


def _finalize(interp: Interpreter, litert_del) -> None:
    """Interpreter.__del__: its records leave its Delegate (id(interp) may name another
    Interpreter next), LiteRT's ``litert_del`` frees LiteRT's interpreter (and with it the
    partitions), then the Delegate it made goes to the next Interpreter of its settings
    (pool.release). Nothing leaves it."""
    d = interp.__dict__.get("_litecl")
    if d is not None:
        try:
            d.forget(id(interp))
        except Exception:  # noqa: BLE001 (nothing may leave __del__)
            pass
    litert_del(interp)
    if d is not None and interp._pool_key is not None:
        try:
            interp.__dict__.pop("_litecl", None)
            interp.__dict__.pop("_delegates", None)
            release(d, interp._pool_key)
        except Exception:  # noqa: BLE001
            pass


def _copy_big(interp: Interpreter, tensor_index: int):
    """get_tensor's copy of a tensor of SPLIT_BYTES or more (under interp._busy): into the
    array the last read returned where nothing else refers to it (2 references: the local
    name and getrefcount's argument), else a new one; None where LiteRT's view of it is
    not such a tensor (LiteRT's get_tensor then answers, in its words)."""
    view = None
    try:
        try:
            view = interp._interpreter.tensor(interp._interpreter, tensor_index)
        except Exception:  # noqa: BLE001 (LiteRT's get_tensor says why)
            return None
        if view is None or view.nbytes < SPLIT_BYTES or view.dtype.kind not in "biufc":
            return None
        spare = interp._spare_arrays
        if spare is None:
            spare = interp._spare_arrays = {}
        out = spare.pop(tensor_index, None)
        if out is None or sys.getrefcount(out) != 2 or out.shape != view.shape \
                or out.dtype != view.dtype or not out.flags.writeable or out.base is not None:
            out = np.empty(view.shape, view.dtype)
        copy_host(out, view)  # LiteclError for a bad LITECL_HOST_THREADS
        spare[tensor_index] = out
        return out
    finally:
        del view  # no reference to LiteRT's memory outlives the call (its _ensure_safe)


def _explained_view(interp: Interpreter, view, t, si):
    """LiteRT's tensor() accessor ``view``, whose "Tensor data is null. Run allocate_tensors()
    first" for a tensor a litecl partition writes inside itself is _no_data_error's (it sent
    a fresh user back to allocate_tensors, which cannot help)."""
    def get():
        try:
            return view()
        except ValueError as e:
            raise _no_data_error(interp, e, t, si) from None
    return get


def _no_data_error(interp: Interpreter, e: ValueError, t, si) -> ValueError:
    """LiteRT's "Tensor data is null. Run allocate_tensors() first" for a tensor that a node
    litecl runs writes inside its partition, in litecl's words (LiteRT allocates no memory
    for those; allocate_tensors does not help: a fresh user's report); else ``e``."""
    if "data is null" not in str(e) or interp._unallocated or not interp._allocated:
        return e  # before allocate_tensors every tensor is (a fresh user's report)
    try:
        sg = interp._model.subgraphs[si]
        if t in sg.outputs or t in sg.inputs:  # LiteRT allocates a partition's inputs and outputs
            return e
        inside = any(r["placement"] == "opencl" and r.get("subgraph", 0) == si and t in sg.nodes[r["index"]].outputs
                     for r in interp.placement())
    except Exception:  # noqa: BLE001 (LiteRT's words then)
        return e
    if not inside:
        return e
    return InputError(f"tensor {t} of subgraph {si} has no data: a node litecl runs on OpenCL writes it inside "
                      "its partition, where LiteRT allocates no memory; create the Interpreter with "
                      "experimental_preserve_all_tensors=True to read it")


def _resized(interp: Interpreter) -> bool:
    """Whether an input of subgraph 0 has other shapes than the model declares."""
    try:
        sg = interp._model.subgraphs[0]
        return _input_shapes(interp, 0) != tuple(tuple(sg.tensors[t].shape) for t in sg.inputs if t >= 0)
    except Exception:  # noqa: BLE001 (only chooses the error type)
        return False


def _may_hold_big_tensors(interp: Interpreter, shapes: tuple) -> bool:
    """Whether get_tensor's copy_host path can apply: a tensor of subgraph 0 of
    SPLIT_BYTES or more at these shapes (or of a type litecl does not know). Memoised
    on the model by subgraph 0's input shapes ``shapes`` (_input_shapes; LiteRT
    derives the other shapes from them): walking every tensor cost ~0.4 ms a model.
    A tensor whose shape LiteRT learns only at invoke and which grows to SPLIT_BYTES
    there is read by LiteRT's own get_tensor (the same bytes, its slower copy): the
    wrapper cost every read of every model with a -1 in a shape signature ~0.25 us
    (a 2 us model 1.12x LiteRT, measured)."""
    w, sg = interp._interpreter, interp._model.subgraphs[0]
    key = (SPLIT_BYTES, shapes)
    memo = interp._model._big
    hit = memo.get(key)
    if hit is None:
        hit = False
        for t in sg.tensors:
            if t.dtype is None or math.prod(
                    int(d) for d in w.TensorSize(t.index, 0)) * t.dtype.itemsize >= SPLIT_BYTES:
                hit = True
                break
        if len(memo) < 64:
            memo[key] = hit
    return hit


def _is_big(interp: Interpreter, t: int) -> bool:
    """Whether get_tensor copies tensor ``t`` of subgraph 0 itself (hostcopy.copy_host)."""
    try:
        w = interp._interpreter
        n = int(np.prod(w.TensorSize(t, 0), dtype=np.int64)) * np.dtype(w.TensorType(t, 0)).itemsize
        return n >= SPLIT_BYTES and not w.TensorSparsityParameters(t, 0)
    except Exception:  # noqa: BLE001 (a bad index: LiteRT's get_tensor raises)
        return False


class SignatureRunner(_litert.SignatureRunner):
    """LiteRT's SignatureRunner; an error inside litecl's kernels raises its own type."""

    # LiteRT's runner keeps its own reference to the interpreter's wrapper; this one reads
    # it from the Interpreter, so close() frees LiteRT's interpreter (and litecl's
    # kernels) while a runner lives, and the runner's later calls are close()'s LiteclError
    _interpreter_wrapper = property(lambda self: self._interpreter._interpreter)
    _checked = None  # the input shapes __call__ last checked

    def __call__(self, **kwargs):
        busy = self._interpreter._busy  # one thread at a time, as invoke (LiteRT's rule; two
        if not busy.acquire(False):     # threads on one runner segfaulted: a fresh user's)
            raise LiteclError(_busy_error(self._interpreter))
        try:
            shapes = [(k, getattr(v, "shape", None)) for k, v in kwargs.items()]
            if shapes != self._checked and len(kwargs) == len(self._inputs) and all(
                    k in self._inputs and s is not None for k, s in shapes):
                # LiteRT's own resize and allocate first (its __call__ repeats them at no
                # cost), then litecl's check of the shapes LiteRT would abort on in invoke;
                # once per new set of input shapes (LiteRT propagates the rest from them)
                for k, v in kwargs.items():
                    self._interpreter_wrapper.ResizeInputTensor(
                        self._inputs[k], np.array(v.shape, dtype=np.int32), False, self._subgraph_index)
                with self._interpreter._litecl.owning(id(self._interpreter)):
                    self._interpreter_wrapper.AllocateTensors(self._subgraph_index)
                _refuse_litert_abort(self._interpreter, self._subgraph_index,
                                     _input_shapes(self._interpreter, self._subgraph_index))
                self._checked = shapes
            with self._interpreter._litecl.owning(id(self._interpreter)):
                return super().__call__(**kwargs)
        except RuntimeError as e:
            if getattr(e, "litert_aborts", False):  # litecl's own refusal, already in its type
                raise
            self._interpreter._raise_delegate_error(e)
        finally:
            busy.release()


# ---------------------------------------------------------------------- LiteRT's aborts
# LiteRT 2.3.0 aborts the process in invoke (SIGABRT, not an error) on some ADD shapes
# (model.litert_abort_reason: a broadcast above 8 dimensions outside its fivefold loop, an
# int16 power-of-two-scale ADD whose operands hold different element counts). load_model
# refuses them at the shapes a model starts from; a resize (or propagated shapes) can make
# them, and litecl's delegate leaves such an ADD to LiteRT (lowering refuses those shapes
# too). So after LiteRT's own allocate_tensors, the ADDs LiteRT will run are checked at
# the shapes LiteRT propagated; on a hit the subgraph is left in LiteRT's own "not ready"
# state (invoke: LiteRT's RuntimeError "Invoke called on model that is not ready.") until
# an allocate_tensors at other shapes passes, and the error names the node.
def _reachable(model, root: int) -> list:
    seen, todo = [], [root]
    while todo:
        s = todo.pop()
        if s not in seen and 0 <= s < len(model.subgraphs):
            seen.append(s)
            todo += [r for n in model.subgraphs[s].nodes for r in n.subgraph_refs()]
    return seen


def _input_shapes(interp, root: int) -> tuple:
    """The current shapes of subgraph ``root``'s inputs, as LiteRT holds them (the memo
    keys of _litert_abort and _may_hold_big_tensors)."""
    w = interp._interpreter
    return tuple(tuple(w.TensorSize(t, root).tolist()) for t in interp._model.subgraphs[root].inputs if t >= 0)


def _litert_abort(interp, root: int, shapes: tuple) -> str | None:
    """Why LiteRT would abort invoking subgraph ``root`` of ``interp`` at its current
    shapes (an ADD of ``root`` or of a subgraph it calls that litecl did not take), or None.
    The ADDs that would abort at these shapes are memoised on the model by root, resolver
    and ``root``'s input shapes ``shapes`` where no reachable subgraph has a shape known
    only at invoke (LiteRT derives every other shape from those), else by every reachable
    ADD's input shapes; the ones litecl took are then left out (looked up only when there
    is one)."""
    model = interp._model
    reach = model._aborts.get(("reach", root))
    if reach is None:  # the ADDs invoking root runs, and whether their subgraphs have static shapes
        r = _reachable(model, root)
        reach = model._aborts[("reach", root)] = (
            tuple((s, n) for s in r for n in model.subgraphs[s].nodes
                  if n.op == "ADD" and len(n.inputs) == 2 and min(n.inputs) >= 0),
            not any(d < 0 for s in r for t in model.subgraphs[s].tensors for d in t.shape_signature))
    adds, static = reach
    if not adds:
        return None
    key = hits = now = None
    if static:
        key = (root, interp._reference, shapes)
    else:  # by the ADDs' own input shapes (a dynamic model: ~40 us a model instead of ~300)
        w = interp._interpreter
        now = [tuple(tuple(w.TensorSize(t, s).tolist()) for t in n.inputs) for s, n in adds]
        key = (root, interp._reference, "adds", tuple(now))
    hits = model._aborts.get(key)
    if hits is None:
        w = interp._interpreter
        if now is None:
            now = [tuple(tuple(w.TensorSize(t, s).tolist()) for t in n.inputs) for s, n in adds]
        hits = []
        for (s, n), sh in zip(adds, now):
            r = litert_abort_reason(n, model.subgraphs[s], dict(zip(n.inputs, sh)), interp._reference)
            if r:
                hits.append((s, n.index, r))
        hits = tuple(hits)
        if len(model._aborts) < 256:
            model._aborts[key] = hits
    if not hits:
        return None
    taken: frozenset = frozenset()
    if len(interp._litecl.graph_info(id(interp))) == len(model.subgraphs):  # one context per subgraph
        taken = interp._litecl.taken(id(interp))
    for s, i, r in hits:
        if (s, i) not in taken:
            return f"subgraph {s} operator {i}: {r}"
    return None


def _refuse_litert_abort(interp, root: int, shapes: tuple) -> None:
    """Raise PrepareError (ResizedPrepareError when an input of ``root`` no longer has
    its declared shape) where LiteRT would abort invoking ``root`` (its inputs' current
    shapes ``shapes``: _input_shapes), leaving it not ready."""
    why = _litert_abort(interp, root, shapes)
    if why is None:
        return
    w, sg = interp._interpreter, interp._model.subgraphs[root]
    t = next(t for t in (*sg.inputs, *(o for n in sg.nodes for o in n.outputs))
             if t >= 0 and not sg.tensors[t].is_constant)
    shape = np.array(w.TensorSize(t, root), np.int32)
    w.ResizeInputTensor(t, np.append(shape, 1).astype(np.int32), False, root)  # away and back:
    w.ResizeInputTensor(t, shape, False, root)  # same shapes, LiteRT's state "not ready"
    resized = any(tuple(int(d) for d in w.TensorSize(i, root)) != sg.tensors[i].shape for i in sg.inputs)
    del w  # the traceback keeps this frame: no reference to LiteRT's wrapper (its _ensure_safe)
    kind = ResizedPrepareError if resized else PrepareError
    err = kind(f"{why}; litecl refuses it before LiteRT runs it (call allocate_tensors again "
               "after resizing to other shapes)")
    err.litert_aborts = True  # litecl compare: no run of LiteRT alone at these shapes either
    raise err


def summary_lines(delegate: Delegate, owner=None) -> list[str]:
    """What litecl's delegate did (for ``owner``'s contexts: Delegate.placement), in the
    words of TFLite's delegates."""
    rows = delegate.placement(owner)
    kept = [r for r in rows if r["placement"] != "opencl"]
    lines = []
    # placement="auto"'s choices (placement.auto_keep_on_litert: "kept on LiteRT: ...") are
    # nodes litecl could run, apart from those it cannot
    for head, group in (("Following operations are not supported by litecl OpenCL delegate:",
                         [r for r in kept if not r["reason"].startswith("kept on LiteRT:")]),
                        ('Following operations are left on LiteRT by placement="auto" (its cost model):',
                         [r for r in kept if r["reason"].startswith("kept on LiteRT:")])):
        if group:
            lines.append(head)
            lines += list(dict.fromkeys(f"{r['op']}: {r['reason']}" for r in group))
    for g in delegate.graph_info(owner):
        lines.append(f"subgraph {g['subgraph']}: Replacing {g['claimed']} out of {g['nodes']} node(s) "
                     f"with delegate (litecl OpenCL) node, yielding {g['partitions']} partitions.")
    return lines
