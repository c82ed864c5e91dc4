"""What litecl.Delegate decides and plans for a model, with nothing run: export's plan.

``ModelPlan(model, delegate, visible)`` applies a probe delegate to a plain LiteRT
Interpreter of the model (LiteRT owns the graph: its subgraphs, partitions and shapes).
At each subgraph's Prepare the probe reads the context as litecl.Delegate's Prepare does
(claims.decide, claims.keep_order_marks; export.fingerprint, what the native delegate
compares at load) and hands LiteRT the same node subsets with kernels of its own. At
``allocate(signature)`` LiteRT prepares those kernels at the shapes it propagated; each
plans its partition there as litecl.Delegate's planner does (kernels.plan_built: the same
plan, device and fused-or-not answer) and resizes the outputs LiteRT reads to the plan's
shapes, as the runtime's kernel_prepare. Nothing is invoked and nothing is made on the
device but programs. A partition LiteRT does not prepare at allocate (shapes known only
at invoke) has no plan, as in litecl.Delegate.
"""
from __future__ import annotations

import ctypes as C
import types

from . import abi, claims
from .errors import InputError, LiteclError
from .kernels import plan_built
from .records import _record_rows, _template
from .views import _CONSTANT_ALLOC

_KEEP: list = []  # the probe's callbacks and registration: LiteRT may hold them to the end


class ModelPlan:
    """The probe on ``model_content`` (bytes of a model litecl's verifier accepted) for
    litecl.Delegate ``delegate``'s settings; ``visible``: the signature tensors that stay
    LiteRT's (Delegate.owning). ``subgraphs``: per subgraph LiteRT prepared, in its order,
    {"subgraph" (the model's index), "context" (the probe's context address), "fingerprint"
    (export.fingerprint), "nodes" (M), "claimed" (N), "partitions" (P), "kept_order",
    "rows" (placement()'s rows), "sg" (tensor views: valid until close()), "parts"}; a part
    has number, nodes (node views in the execution plan's order), inputs, outputs, key, sg,
    ctx_addr, plan (kernels.PartitionPlan, None until prepared), dev, constants ({tensor:
    its bytes as LiteRT holds them at prepare}). Raises LiteclError (a lookup, plan or
    build that fails) or InputError (LiteRT refuses the model)."""

    def __init__(self, model_content: bytes, delegate, visible: frozenset = frozenset(),
                 flags: int = abi.ALLOW_DYNAMIC_TENSORS):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

        self.subgraphs: list = []
        self._d, self._parts, self._errors = delegate, [], []
        self._by_addr: dict = {}
        cbs = (abi.DELEGATE_PREPARE(self._prepare), abi.INIT(self._init), abi.PREPARE(self._kernel_prepare),
               abi.INVOKE(lambda ctx, node: abi.K_ERROR), abi.FREE(lambda ctx, buf: None))
        reg = abi.TfLiteRegistration()
        reg.init, reg.prepare, reg.invoke, reg.free = cbs[1:]
        reg.builtin_code, reg.custom_name, reg.version = abi.BUILTIN_DELEGATE, b"litecl export probe", 1
        st = abi.TfLiteDelegate()
        st.Prepare, st.flags = cbs[0], flags  # as litecl.Delegate's (``flags``: _price_at_running_shapes)
        self._reg = reg
        _KEEP.append((cbs, reg, st))
        holder = types.SimpleNamespace(_get_native_delegate_pointer=lambda: C.addressof(st))
        try:
            with delegate.owning(None, visible=visible):
                self.interpreter = Interpreter(
                    model_content=model_content, experimental_delegates=[holder],
                    experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        except (RuntimeError, ValueError) as e:
            self._raise(e)

    def allocate(self, signature=None, shapes=None) -> None:
        """allocate_tensors for ``signature``'s subgraph (None: the primary one), as
        export.allocate: LiteRT prepares the probe's kernels there, which plan."""
        from .export import allocate  # noqa: PLC0415

        try:
            allocate(self.interpreter, signature, shapes)
        except RuntimeError as e:
            # other shapes cannot help an operator this LiteRT lacks (an app's custom op)
            lacks = "unresolved custom op" in str(e).lower()
            self._raise(e, " (this LiteRT lacks an operator the model uses, which export needs in order to "
                        "plan the model; an app's own custom ops are not known to it)" if lacks else
                        "" if shapes else self._elsewhere(signature))
        if self._errors:
            self._raise(None)

    def _elsewhere(self, signature) -> str:
        """The hint after allocate failed at the declared shapes: where the inputs admit no
        other shape, LiteRT refuses the model itself; where it fails with every -1 of the
        inputs' shape signatures at 2 as well, that is said beside the --inputs hint (an
        int16 ADD LiteRT's own Prepare refuses got "give the shapes it runs at" alone: a
        fresh user)."""
        from .export import allocate  # noqa: PLC0415

        hint = " at its declared input shapes; give the shapes it runs at (litecl export --inputs FILE.npz)"
        alt = {x["name"]: [2 if v == -1 else int(v) for v in x["shape_signature"]]
               for x in self.interpreter.get_input_details() if -1 in tuple(x.get("shape_signature", ()))}
        if not alt:
            return " (its input shapes are fixed: LiteRT refuses the model itself)" if signature is None else hint
        if signature is not None:
            return hint
        try:
            allocate(self.interpreter, None, alt)
        except Exception:  # noqa: BLE001 (LiteRT's refusal again, in any words)
            return (" at its declared input shapes, nor with each -1 of them at 2 (if it runs at other shapes, "
                    "give them: litecl export --inputs FILE.npz)")
        return hint

    def close(self) -> None:
        self.interpreter = None

    def _raise(self, e, hint: str = ""):
        if self._errors:
            raise self._errors[0] from None
        raise InputError(f"LiteRT cannot prepare the model{hint}: {' '.join(str(e).split())}") from None

    def _prepare(self, ctx, dlg) -> int:
        from .export import fingerprint  # noqa: PLC0415

        try:
            c, d = ctx.contents, self._d
            plan_p = C.POINTER(abi.TfLiteIntArray)()
            if c.GetExecutionPlan(ctx, C.byref(plan_p)) != abi.K_OK:
                raise LiteclError("LiteRT's GetExecutionPlan failed")
            plan = abi.int_array(plan_p)
            addr = C.addressof(c)
            si = claims._subgraph_index(addr)
            fp = fingerprint(ctx)  # before the replace: what the native delegate reads
            sg, views, keys, rows, claim = claims.decide(d, ctx, plan, si)
            sub = {"subgraph": si, "context": addr, "fingerprint": fp, "nodes": len(plan), "claimed": len(claim),
                   "partitions": 0, "kept_order": False, "rows": rows, "sg": sg, "parts": [], "views": views,
                   "keys": keys}
            self.subgraphs.append(sub)
            self._by_addr[addr] = sub
            if not claim:
                return abi.K_OK
            marks = claims.keep_order_marks(d, ctx, plan, claim) if d.keep_order else ()
            sub["kept_order"] = bool(marks)
            claims._flag(d._rt, ctx, marks, True)
            try:
                status = c.ReplaceNodeSubsetsWithDelegateKernels(
                    ctx, self._reg, C.cast(claims._int_array(tuple(claim)), C.POINTER(abi.TfLiteIntArray)), dlg)
            finally:
                claims._flag(d._rt, ctx, marks, False)
            if status != abi.K_OK:
                raise LiteclError("LiteRT refused litecl's node subsets (ReplaceNodeSubsetsWithDelegateKernels)")
            return abi.K_OK
        except BaseException as e:  # noqa: BLE001 (nothing may leave a ctypes callback)
            self._errors.append(e)
            return abi.K_ERROR

    def _init(self, ctx, buffer, length):
        try:
            params = abi.TfLiteDelegateParams.from_address(buffer)
            addr = C.addressof(ctx.contents)
            sub = self._by_addr[addr]
            nodes, outs = abi.int_array(params.nodes_to_replace), abi.int_array(params.output_tensors)
            ordered, inputs, outputs, key = _template(sub, nodes, outs)
            part = types.SimpleNamespace(number=len(sub["parts"]), nodes=ordered, inputs=inputs, outputs=outputs,
                                         key=key, sg=sub["sg"], ctx_addr=addr, plan=None, dev=None, constants={})
            rows = _record_rows(sub)
            for i in nodes:
                if i in rows:
                    rows[i]["partition"] = part.number
            sub["parts"].append(part)
            sub["partitions"] += 1
            self._parts.append(part)
            return len(self._parts)  # the kernel's user_data: 1 + its index
        except BaseException as e:  # noqa: BLE001
            self._errors.append(e)
            return None

    def _kernel_prepare(self, ctx, node) -> int:
        try:
            part = self._parts[(node.contents.user_data or 0) - 1]
            c = ctx.contents
            ts = c.tensors
            shapes, consts = {}, set()
            for t in part.inputs:
                shapes[t] = abi.int_array(ts[t].dims)
                if ts[t].allocation_type in _CONSTANT_ALLOC:
                    consts.add(t)
                    part.constants[t] = C.string_at(ts[t].data, ts[t].bytes) if ts[t].data else b""
            part.plan, part.dev, _ = plan_built(self._d, part.nodes, part.sg, shapes, consts, part.outputs, part.key)
            for t in part.outputs:  # the outputs LiteRT reads: at the plan's shapes
                want = [int(x) for x in part.plan.shapes[t]]
                if abi.int_array(ts[t].dims) != tuple(want) and c.ResizeTensor(
                        ctx, C.cast(C.addressof(ts[t]), C.POINTER(abi.TfLiteTensor)),
                        abi.new_int_array(want, owned_by_litert=True)) != abi.K_OK:
                    raise LiteclError(f"LiteRT could not resize tensor {t}")
            return abi.K_OK
        except BaseException as e:  # noqa: BLE001
            self._errors.append(e)
            return abi.K_ERROR
