"""Placement by cost (``placement="auto"``): whether a node that *can* run on OpenCL
(lowering.why_not) *should*, decided like a TFLite delegate's partitioner with a cost
model. Kept apart from why_not on purpose: capability is a property of the node and the
device; cost depends on shapes, on the device's measured speed and on LiteRT's.

Each candidate OpenCL segment (a maximal run of lowerable nodes in execution order) is
estimated both ways, in microseconds:

- OpenCL: kernel bytes / the device's copy bandwidth + bytes crossing the host boundary
  / its transfer bandwidth + one round trip (a small write, a kernel and a read with one
  wait: the fixed price of leaving LiteRT and coming back);
- LiteRT: the same nodes' bytes / LiteRT's CAST/ADD bandwidth on this host + a per-node
  cost.

A segment goes to the device only when its OpenCL estimate is below LiteRT's; the nodes
of the others stay on LiteRT with a reason ("kept on LiteRT: OpenCL ~52 us (round trip
~45 us) >= LiteRT ~3 us"), and their neighbouring LiteRT segments merge. Nodes computed
once at allocate (all inputs constant) cost nothing at invoke and stay on OpenCL.

The four figures are measured once per device and host (``measure_costs``, ~0.3 s) and
kept in litecl's cache (backend/cache.py), so later processes read them.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Costs", "measure_costs", "device_costs", "auto_keep_on_litert", "PLACEMENTS"]

#: Interpreter(placement=...): "all" puts every lowerable node on OpenCL (the default),
#: "auto" only those the cost model expects to be faster there.
PLACEMENTS = ("all", "auto")


@dataclass(frozen=True)
class Costs:
    """Measured speeds of one device and of LiteRT on its host (units in the names)."""

    device_gbs: float        # kernel: bytes read + written per ns, a float4 copy of 16 MiB
    transfer_gbs: float      # host <-> device: write + read of 16 MiB (map on zero-copy devices)
    round_trip_us: float     # 4 KiB write + kernel + read, one wait
    launch_us: float         # one more kernel enqueued (no wait)
    segment_us: float        # one more LiteRT segment: set_tensor + invoke + get_tensor, 16 elements
    litert_gbs: float        # LiteRT builtin CAST float32 -> int32 of 4M elements, in + out bytes
    litert_node_us: float    # LiteRT: one more node in an invoke (16-element CAST chain)
    discrete: bool = False   # device memory across a bus (a discrete GPU): model inputs and
                             # outputs cross it too; elsewhere set/get copy as LiteRT's do

    def opencl_us(self, kernel_bytes: int, boundary_bytes: int, kernels: int = 1) -> float:
        """A segment on OpenCL: its kernels' bytes at the device's bandwidth, the
        boundary bytes across the host link, one round trip, a launch per further
        kernel, and the LiteRT segment its placement splits off."""
        return (kernel_bytes / (self.device_gbs * 1e3) + boundary_bytes / (self.transfer_gbs * 1e3)
                + self.round_trip_us + max(kernels - 1, 0) * self.launch_us + self.segment_us)

    def litert_us(self, kernel_bytes: int, nodes: int) -> float:
        return kernel_bytes / (self.litert_gbs * 1e3) + nodes * self.litert_node_us


def _median_us(f, runs: int) -> float:
    f()  # warm-up
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)) * 1e6


def measure_costs(device) -> Costs:
    """Measure ``Costs`` for ``device`` (a litecl Device) now, in this process."""
    import pyopencl as cl  # noqa: PLC0415

    from .fallback import make_interpreter  # noqa: PLC0415

    q, ctx = device.queue, device.context
    src = "__kernel void c(__global const float4* a, __global float4* b) { b[get_global_id(0)] = a[get_global_id(0)]; }"
    prg = cl.Program(ctx, src).build()
    k = cl.Kernel(prg, "c")
    mf = cl.mem_flags
    n = 4 << 20  # floats: 16 MiB
    a = cl.Buffer(ctx, mf.READ_WRITE, 4 * n)
    b = cl.Buffer(ctx, mf.READ_WRITE, 4 * n)
    k.set_args(a, b)
    copy_us = _median_us(lambda: (cl.enqueue_nd_range_kernel(q, k, (n // 4,), None), q.finish()), 5)
    host = np.zeros(n, np.float32)
    xfer_us = _median_us(lambda: (cl.enqueue_copy(q, a, host), cl.enqueue_copy(q, host, a)), 3)
    small = np.zeros(1024, np.float32)
    sa = cl.Buffer(ctx, mf.READ_WRITE, small.nbytes)
    sb = cl.Buffer(ctx, mf.READ_WRITE, small.nbytes)
    ks = cl.Kernel(prg, "c")
    ks.set_args(sa, sb)
    rt_us = _median_us(lambda: (cl.enqueue_copy(q, sa, small, is_blocking=False),
                                cl.enqueue_nd_range_kernel(q, ks, (256,), None),
                                cl.enqueue_copy(q, small, sb, is_blocking=True)), 50)
    if device.caps.host_unified or (device.caps.host_unified is None and not device.caps.is_gpu):
        xfer_us = min(xfer_us, copy_us)  # zero-copy buffers: a map, no copy across a bus
    launch_us = _median_us(lambda: [cl.enqueue_nd_range_kernel(q, ks, (256,), None) for _ in range(10)], 20) / 10
    q.finish()

    big = make_interpreter(_cast_chain(1, 4 << 20), 1)
    big.allocate_tensors()
    big.set_tensor(big.get_input_details()[0]["index"], np.ones(4 << 20, np.float32))
    big_us = _median_us(big.invoke, 5)
    one, many = (make_interpreter(_cast_chain(k_, 16), 1) for k_ in (1, 9))
    for it in (one, many):
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], np.ones(16, np.float32))
    node_us = max((_median_us(many.invoke, 200) - _median_us(one.invoke, 200)) / 8, 0.05)
    x16 = np.ones(16, np.float32)
    i0, o0 = one.get_input_details()[0]["index"], one.get_output_details()[0]["index"]
    seg_us = _median_us(lambda: (one.set_tensor(i0, x16), one.invoke(), one.get_tensor(o0)), 200)
    for buf in (a, b, sa, sb):
        buf.release()
    hu = device.caps.host_unified
    return Costs(discrete=not hu if hu is not None else bool(device.caps.is_gpu),
                 device_gbs=2 * 4 * n / (copy_us * 1e3), transfer_gbs=2 * 4 * n / (xfer_us * 1e3),
                 round_trip_us=rt_us, launch_us=launch_us, segment_us=seg_us,
                 litert_gbs=8 * (4 << 20) / (big_us * 1e3), litert_node_us=node_us)


def _cast_chain(k: int, n: int) -> bytes:
    """A model of ``k`` CAST nodes on ``n`` elements, float32 -> int32 -> float32 ...:
    what LiteRT's per-node and per-byte costs are measured on."""
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415

    types = [schema.TensorType.FLOAT32 if i % 2 == 0 else schema.TensorType.INT32 for i in range(k + 1)]
    tensors = []
    for i, ty in enumerate(types):
        t = schema.TensorT()
        t.name, t.type, t.shape, t.buffer = f"t{i}", ty, [n], 0
        tensors.append(t)
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = schema.BuiltinOperator.CAST
    code.version = 1
    ops = []
    for i in range(k):
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = 0, [i], [i + 1]
        ops.append(op)
    sg = schema.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs = tensors, ops, [0], [k]
    m = schema.ModelT()
    m.version, m.operatorCodes, m.subgraphs, m.buffers = 3, [code], [sg], [schema.BufferT()]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


_COSTS: dict = {}


def device_costs(device) -> Costs:
    """``Costs`` of ``device``: from this process, else litecl's cache, else measured
    (and stored). The cache key is the device's identity (backend/cache.py) and the
    host's processor."""
    from .cache import device_identity, probe_get, probe_put  # noqa: PLC0415

    key = (device.caps.platform, device.caps.name, device.caps.driver)
    if key in _COSTS:
        return _COSTS[key]
    ident = device_identity(device.device) + "|" + _host()
    got = probe_get("costs-v3", ident)
    try:
        costs = Costs(**got)
    except TypeError:
        costs = measure_costs(device)
        probe_put("costs-v3", ident, asdict(costs))
    _COSTS[key] = costs
    return costs


def _host() -> str:
    import platform  # noqa: PLC0415

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        model = ""
    import os  # noqa: PLC0415

    return f"{platform.machine()}|{model}|{os.cpu_count()}"


#: A segment goes to OpenCL only when its estimate is this many times below LiteRT's: the
#: estimates price every kernel at copy bandwidth and every LiteRT node at its CAST rate,
#: and were measured off by up to 2x (simple_quantized_ops' int16 ADD, PoCL 2026-12-01:
#: estimated 137 us on OpenCL against 140 us on LiteRT; measured 1.19x slower on OpenCL).
AUTO_MARGIN = 1.5


def auto_keep_on_litert(sg, segments, shapes: dict, costs: Costs, folded: set) -> dict:
    """node -> reason, for the nodes of OpenCL segments that LiteRT should keep.

    sg: the Subgraph; segments: partition's segments (execution order); shapes: tensor ->
    shape (declared or allocated); folded: nodes computed once at allocate.
    """
    def nbytes(t):
        tt = sg.tensors[t]
        if t < 0 or tt.dtype is None:
            return 0
        return math.prod(shapes.get(t, tt.shape)) * tt.dtype.itemsize

    readers: dict[int, set] = {}  # tensor -> the nodes reading it
    for n in sg.nodes:
        for t in n.inputs:
            readers.setdefault(t, set()).add(n.index)
    out: dict = {}
    for seg in segments:
        if seg.placement != "opencl":
            continue
        live = [i for i in seg.nodes if i not in folded]
        if not live:
            continue
        produced = {t for i in live for t in sg.nodes[i].outputs}
        kernel = sum(nbytes(t) for i in live for t in (*sg.nodes[i].inputs, *sg.nodes[i].outputs))
        members = set(seg.nodes)
        model_io = set(sg.inputs) | set(sg.outputs)
        # tensors crossing to or from LiteRT segments; the model's own inputs and outputs
        # only across a bus (elsewhere set_tensor/get_tensor copy them as LiteRT's do)
        crossing = {t for i in live for t in sg.nodes[i].inputs
                    if t >= 0 and t not in produced and not sg.tensors[t].is_constant}
        crossing |= {t for t in produced if readers.get(t, members) - members or t in sg.outputs}
        boundary = sum(nbytes(t) for t in crossing if costs.discrete or t not in model_io)
        ocl = costs.opencl_us(kernel, boundary, len(live))
        lit = costs.litert_us(kernel, len(live))
        if ocl * AUTO_MARGIN >= lit:
            why = (f"kept on LiteRT: OpenCL ~{ocl:.0f} us (round trip ~{costs.round_trip_us:.0f} us) "
                   f"not {AUTO_MARGIN}x below LiteRT ~{lit:.0f} us")
            out.update({i: why for i in live})
    return out
