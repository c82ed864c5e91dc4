"""A stand-in for LiteRT's GPU delegate, for tests of litecl placed after it.

It claims the nodes TFLite's GPU delegate accepts, by the rules in ``RULES`` (each citing
the GPU delegate's source; convolutions excepted, see there), and runs them with LiteRT's own kernels (each replaced node's
registration prepare and invoke, in model order), so a model through it gives LiteRT's
bits: what litecl takes after it, and how the graph is cut, is what these tests look at.
Like the GPU delegate it takes the largest group of nodes it can as one kernel per
partition LiteRT forms.
"""
from __future__ import annotations

import ctypes as C

from litecl import abi

NAME = b"GpuDelegateStandIn"
_LIBC = C.CDLL(None)
_LIBC.calloc.restype = C.c_void_p

#: LiteRT TfLiteType codes (DELEGATE.md)
F32, I32, U8, I64, BOOL, I16, I8, F16 = 1, 2, 3, 4, 6, 7, 9, 10

#: What TFLite's GPU delegate (tensorflow/lite/delegates/gpu) takes, op by op:
#: builtin code -> (max version, accepted (input types, output type) or None for any of
#: FLOAT_TYPES, runtime inputs required, the source of the rule).
RULES = {
    # tensorflow/lite/tools/versioning/gpu_compatibility.cc, CheckGpuDelegateCompatibility,
    # case kTfLiteBuiltinCast: one runtime input (CheckInputsOutputs(op_sig, 1, 1)); bool ->
    # float16/float32, float16/float32 -> bool, {float32, int32} -> {float32, int32}
    53: {"max_version": 9, "runtime_inputs": 1,
         "types": {(BOOL, F16), (BOOL, F32), (F16, BOOL), (F32, BOOL), (F32, F32), (F32, I32), (I32, F32), (I32, I32)},
         "source": "gpu_compatibility.cc CheckGpuDelegateCompatibility: kTfLiteBuiltinCast"},
    # delegates/gpu/common/model_builder.cc AddOperationParser::IsSupported:
    # CheckMaxSupportedOpVersion(registration, 2), two inputs; float or 8-bit quantized
    # tensors (model_builder.cc GetOpsToReplace, quantized models allowed by default)
    0: {"max_version": 2, "runtime_inputs": None, "types": "float_or_quant",
        "source": "model_builder.cc AddOperationParser::IsSupported (version <= 2)"},
    # CONV_2D and DEPTHWISE_CONV_2D (model_builder.cc, versions <= 6) are the GPU
    # delegate's too, but not this stand-in's: it runs nodes with LiteRT's own kernels
    # outside the execution plan, where LiteRT allocates no temporaries (CONV_2D's im2col
    # failed "Conv im2col buffer not allocated"), so convolutions stay on LiteRT's CPU
    # kernels here and the graph is cut around them as well
    # model_builder.cc ElementwiseOperationParser for MUL: CheckMaxSupportedOpVersion 3
    18: {"max_version": 3, "runtime_inputs": None, "types": "float_or_quant",
         "source": "model_builder.cc MulOperationParser (version <= 3)"},
}
FLOAT_TYPES = {F32, F16}
QUANT_TYPES = {U8, I8}
#: delegates/gpu/common/model_builder_helper.cc ExtractTensorShape: ranks 1 to 4 (BHWC);
#: higher ranks are refused ("has bad input dims size")
MAX_RANK = 4


def accepts(ctx, node, reg) -> bool:
    """Whether the GPU delegate's rules (RULES) take this node."""
    rule = RULES.get(reg.builtin_code)
    if rule is None or reg.version > rule["max_version"]:
        return False
    c = ctx.contents
    ins = [t for t in abi.int_array(node.inputs) if t >= 0]
    outs = list(abi.int_array(node.outputs))
    tensors = [c.tensors[t] for t in ins + outs]
    if any(t.dims and t.dims.contents.size > MAX_RANK for t in tensors):
        return False
    runtime = [t for t in ins if c.tensors[t].allocation_type != abi.MMAP_RO]
    if rule["runtime_inputs"] is not None and len(runtime) != rule["runtime_inputs"]:
        return False
    if rule["types"] == "float_or_quant":
        kinds = {c.tensors[t].type for t in runtime + outs}
        return kinds <= FLOAT_TYPES or kinds <= QUANT_TYPES
    return (c.tensors[ins[0]].type, c.tensors[outs[0]].type) in rule["types"]


class StandIn:
    """The stand-in delegate: pass ``delegate`` in experimental_delegates (before
    litecl's). ``taken`` lists, per Prepare, the node indices it claimed."""

    def __init__(self):
        self.taken: list = []
        self._parts: dict = {}
        self._outs: dict = {}
        self._keep = []

        @abi.DELEGATE_PREPARE
        def prepare(ctx, dlg):
            try:
                return self._prepare(ctx, dlg)
            except BaseException:  # noqa: BLE001 (nothing may leave a callback)
                return abi.K_ERROR

        @abi.INIT
        def init(ctx, buf, length):
            # GetNodeAndRegistration is forbidden in a kernel's prepare and invoke (LiteRT's
            # kernel context), and node addresses move as LiteRT adds nodes: each replaced
            # node and registration is copied here, in the delegate context, with a
            # temporaries array of its own (a kernel's prepare frees and replaces it)
            try:
                c = ctx.contents
                params = C.cast(buf, C.POINTER(abi.TfLiteDelegateParams)).contents
                n_p, r_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
                copies = []
                for i in abi.int_array(params.nodes_to_replace):
                    if c.GetNodeAndRegistration(ctx, i, C.byref(n_p), C.byref(r_p)) != abi.K_OK:
                        return None
                    node, reg = abi.TfLiteNode(), abi.TfLiteRegistration()
                    C.memmove(C.addressof(node), C.addressof(n_p.contents), C.sizeof(node))
                    C.memmove(C.addressof(reg), C.addressof(r_p.contents), C.sizeof(reg))
                    node.temporaries = C.cast(_LIBC.calloc(1, 8), C.POINTER(abi.TfLiteIntArray))
                    copies.append((node, reg))
                key = len(self._parts) + 1
                self._parts[key] = copies
                self._outs[key] = set(abi.int_array(params.output_tensors))
                return key
            except BaseException:  # noqa: BLE001
                return None

        def each(ctx, node_p, what):
            try:
                key = node_p.contents.user_data
                for node, reg in self._parts[key]:
                    fn = getattr(reg, what)
                    if what == "prepare":
                        # a tensor between two of its nodes gets no memory from LiteRT (it is
                        # inside the partition, as on a GPU): dynamic, so the op's resize
                        # in its prepare allocates it
                        for t in abi.int_array(node.outputs):
                            if t not in self._outs[key]:
                                ctx.contents.tensors[t].allocation_type = abi.DYNAMIC
                    if fn and abi.PREPARE(fn)(ctx, C.pointer(node)) != abi.K_OK:
                        return abi.K_ERROR
                return abi.K_OK
            except BaseException:  # noqa: BLE001
                return abi.K_ERROR

        @abi.PREPARE
        def kprepare(ctx, node_p):
            return each(ctx, node_p, "prepare")

        @abi.INVOKE
        def kinvoke(ctx, node_p):
            return each(ctx, node_p, "invoke")

        reg = abi.TfLiteRegistration()
        reg.init, reg.prepare, reg.invoke = init, kprepare, kinvoke
        reg.builtin_code = abi.BUILTIN_DELEGATE
        reg.custom_name = NAME
        reg.version = 1
        st = abi.TfLiteDelegate()
        st.Prepare = prepare
        self._reg, self._struct = reg, st
        self._keep += [prepare, init, kprepare, kinvoke, reg, st]

    def _prepare(self, ctx, dlg) -> int:
        c = ctx.contents
        plan_p = C.POINTER(abi.TfLiteIntArray)()
        if c.GetExecutionPlan(ctx, C.byref(plan_p)) != abi.K_OK:
            return abi.K_ERROR
        n_p, r_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
        take = []
        for i in abi.int_array(plan_p):
            if c.GetNodeAndRegistration(ctx, i, C.byref(n_p), C.byref(r_p)) != abi.K_OK:
                return abi.K_ERROR
            if accepts(ctx, n_p.contents, r_p.contents):
                take.append(i)
        self.taken.append(take)
        if not take:
            return abi.K_OK
        arr = abi.new_int_array(take, owned_by_litert=False)
        return c.ReplaceNodeSubsetsWithDelegateKernels(ctx, self._reg, C.cast(arr, C.POINTER(abi.TfLiteIntArray)),
                                                       C.cast(C.addressof(self._struct), abi.Dlg))

    def _get_native_delegate_pointer(self) -> int:
        return C.addressof(self._struct)
