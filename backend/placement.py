"""Placement by cost (``placement="auto"``): whether a node that *can* run on OpenCL
(lowering.why_not) *should*, decided like a TFLite delegate's partitioner with a cost
model. Kept apart from why_not on purpose: capability is a property of the node and the
device; cost depends on shapes, on the device's measured speed and on LiteRT's.

Each delegated partition the claimable nodes would form (``groups``) is estimated both
ways, in microseconds, at the shapes LiteRT gives the delegate's Prepare (``estimate``):

- OpenCL: each node's elements at its kind's measured kernel rate (``node_rates``: the
  kernel litecl generates, event-timed on a one-node model at the node's size bucket; a
  fused run priced at its slowest member), the partition's inputs and results across the
  host link (none where the device works in LiteRT's memory in place), one round trip (a
  small write, a kernel and a read with one wait: the fixed price of leaving LiteRT's CPU
  kernels and coming back) and a launch per further kernel;
- LiteRT: each node's elements at its kind's measured LiteRT rate plus a per-node cost.

A partition goes to the device only when its OpenCL estimate is AUTO_MARGIN times below
LiteRT's; the nodes of the others stay on LiteRT with a reason ("kept on LiteRT: OpenCL
~52 us (cold round trip ~45 us) not 1.2x below LiteRT ~3 us, at [1, 1000]"). Partitions of constants only
(computed once) cost nothing at invoke and stay on OpenCL.

The Costs figures are measured once per device and host (``measure_costs``, ~0.3 s), the
rates once per node kind and size bucket; both are kept in litecl's cache (backend/cache.py).
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Costs", "measure_costs", "device_costs", "auto_keep_on_litert", "groups", "estimate", "PLACEMENTS"]

#: Interpreter(placement=...): "all" puts every lowerable node on OpenCL (the default),
#: "auto" only those the cost model expects to be faster there.
PLACEMENTS = ("all", "auto")


@dataclass(frozen=True)
class Costs:
    """Measured speeds of one device and of LiteRT on its host (units in the names)."""

    device_gbs: float        # kernel: bytes read + written per ns, a float4 copy of 16 MiB
    transfer_gbs: float      # host <-> device: write + read of 16 MiB (map on zero-copy devices)
    round_trip_us: float     # 4 KiB write + kernel + read, one wait, after 3 ms of host compute
    launch_us: float         # one more kernel enqueued (no wait)
    litert_gbs: float        # LiteRT builtin CAST float32 -> int32 of 4M elements, in + out bytes
    litert_node_us: float    # LiteRT: one more node in an invoke (16-element CAST chain)
    discrete: bool = False   # device memory across a bus (a discrete GPU): model inputs and
                             # outputs cross it too; elsewhere set/get copy as LiteRT's do

    def opencl_us(self, kernel_bytes: int, boundary_bytes: int, kernels: int = 1) -> float:
        """A delegated partition on OpenCL: its kernels' bytes at the device's bandwidth,
        the boundary bytes across the host link, one round trip and a launch per further
        kernel."""
        return (kernel_bytes / (self.device_gbs * 1e3) + boundary_bytes / (self.transfer_gbs * 1e3)
                + self.round_trip_us + max(kernels - 1, 0) * self.launch_us)

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


#: measure_costs' cold round trip: rounds, and the host compute before each (seconds)
COLD_ROUNDS, COLD_GAP_S = 30, 0.003


def measure_costs(device) -> Costs:
    """Measure ``Costs`` for ``device`` (a litecl Device) now, in this process."""
    import pyopencl as cl  # noqa: PLC0415

    # a queue of its own: on the device's, shared with partitions other threads were running,
    # its clFinish waited for ever on pip's PoCL 3.0 (eight threads making first interpreters)
    with device.exclusive():  # Oclgrind: beside another thread's invoke it crashed
        ctx = device.context
        q = cl.CommandQueue(ctx, device.device)
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
        def round_trip():
            cl.enqueue_copy(q, sa, small, is_blocking=False)
            cl.enqueue_nd_range_kernel(q, ks, (256,), None)
            cl.enqueue_copy(q, small, sb, is_blocking=True)

        # a delegated partition runs after LiteRT's nodes have left the device idle: its round
        # trip is a cold one (PoCL's worker threads asleep: 140-190 us after 3 ms of host
        # compute against 55-76 us back to back on a 2-core VM, bench_native's cold floor; an
        # int16 ADD auto placed on OpenCL by the warm figure ran 1.21x LiteRT's time)
        round_trip()
        ts = []
        for _ in range(COLD_ROUNDS):
            end = time.perf_counter() + COLD_GAP_S
            while time.perf_counter() < end:  # the host busy, as LiteRT's kernels keep it
                pass
            t0 = time.perf_counter()
            round_trip()
            ts.append(time.perf_counter() - t0)
        rt_us = float(np.median(ts)) * 1e6
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
    for buf in (a, b, sa, sb):
        buf.release()
    hu = device.caps.host_unified
    return Costs(discrete=not hu if hu is not None else bool(device.caps.is_gpu),
                 device_gbs=2 * 4 * n / (copy_us * 1e3), transfer_gbs=2 * 4 * n / (xfer_us * 1e3),
                 round_trip_us=rt_us, launch_us=launch_us,
                 litert_gbs=8 * (4 << 20) / (big_us * 1e3), litert_node_us=node_us)


def make_interpreter(content: bytes, num_threads=None):
    """LiteRT's Interpreter on ``content`` with its builtin kernels (no default delegate)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    return Interpreter(model_content=content, num_threads=num_threads,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


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
    key = (device.caps.platform, device.caps.name, device.caps.driver)
    if key in _COSTS:
        return _COSTS[key]
    from .cache import device_identity  # noqa: PLC0415

    ident = device_identity(device.device) + "|" + _host()
    costs = cached_measure("costs-v6", ident, lambda: measure_costs(device), asdict, lambda v: Costs(**v),
                           best=_best_costs, samples=COST_SAMPLES)
    _COSTS[key] = costs
    return costs


#: the 1-minute load average per core from which a measurement counts as taken on a busy
#: host (``cached_measure``)
BUSY_LOAD = 0.5
#: device_costs is measured by this many processes on a quiet host, each speed the best
#: of them: one slow sample taken quiet (a cold round trip of 202 us, against 57-80 us in
#: two fresh caches) kept auto from a partition litecl ran 1.15x faster, for good
COST_SAMPLES = 3


def _best_costs(a: "Costs", b: "Costs") -> "Costs":
    """Each speed of two Costs samples at its best: the least time, the most bandwidth."""
    return Costs(**{k: (min if k.endswith("_us") else max)(getattr(a, k), getattr(b, k)) if k != "discrete"
                    else a.discrete for k in asdict(a)})


def _load_per_core() -> float:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:
        return 0.0


def cached_measure(name: str, ident: str, measure, dump, load, best=None, samples: int = 1):
    """A measurement kept in litecl's cache (backend/cache.py probe_get/probe_put) with the
    host's load when it was taken (1-minute load average per core). ``measure()`` gives the
    value, ``dump(value)`` its JSON form, ``load(json)`` the value back (an entry it cannot
    read is measured anew).

    A value taken on a busy host (BUSY_LOAD or more per core) is measured again, and kept,
    by the first process that finds the host quieter by 0.25 per core, so the cache
    converges on the quietest moment it saw instead of keeping its first: a fresh user's
    cache held a 271 us round trip taken while other jobs shared the 2 cores (164-200 us
    measured quiet), and auto kept a 4M-element float32 ADD on LiteRT that ran 1.4x faster
    on OpenCL.

    With ``best`` (``best(old, new)``: one value of two), a value is measured again by each
    process that finds the host quiet (below BUSY_LOAD) until ``samples`` were taken, and
    ``best`` of them kept: one outlier taken quiet does not stay.
    """
    from .cache import probe_get, probe_put  # noqa: PLC0415

    now = _load_per_core()
    got = probe_get(name, ident)
    value, n = None, 0
    if isinstance(got, dict) and "value" in got:
        try:
            value = load(got["value"])
            then, n = float(got.get("load", 0.0)), int(got.get("n", 1))
        except (TypeError, ValueError, KeyError):
            value = None
        more = best is not None and n < samples and now < BUSY_LOAD and then < BUSY_LOAD
        if value is not None and not (then >= BUSY_LOAD and now <= then - 0.25) and not more:
            return value
    new = measure()
    if best is not None and value is not None and then < BUSY_LOAD and now < BUSY_LOAD:
        new, n = best(value, new), n + 1  # another quiet sample
    else:
        n = 1
    probe_put(name, ident, {"value": dump(new), "load": now, **({"n": n} if best is not None else {})})
    return new


def _host() -> str:
    import platform  # noqa: PLC0415

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        model = ""
    import os  # noqa: PLC0415

    return f"{platform.machine()}|{model}|{os.cpu_count()}"


#: A partition goes to OpenCL only when its estimate is this many times below LiteRT's.
#: The estimates come from measured per-kind rates (node_rates): on the 16M models they
#: were 0.80-1.57x of the measured invoke on PoCL 3.1 and 0.74-1.03x on the H200
#: (benchmarks/cost_model_check.py, 2026-12-01); 1.5 (the margin of the bandwidth-only
#: model, off by up to 4x) kept f32->f16 on LiteRT at 3.7 ms against LiteRT's 7.3.
AUTO_MARGIN = 1.2


def groups(nodes, wiring=None) -> list[list]:
    """The claimed ``nodes`` (node views, execution order) split into the connected groups
    LiteRT's partitioner makes of them: nodes joined through a tensor one writes and the
    other reads. ``wiring``: (index, inputs, outputs) of every node of the subgraph; with
    it, a member B reading member A's result joins A only when no path leads from A to B
    through a node LiteRT keeps (LiteRT's partitioner puts such a pair in two partitions:
    MobileNet V2's residual ADDs, where A feeds both B and the convolutions before B).
    Without it such pairs are joined, and the estimate counts a round trip too few."""
    parent = {n.index: n.index for n in nodes}
    through = _through_kept(nodes, wiring) if wiring else {}

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    writer = {t: n.index for n in nodes for t in n.outputs}
    for n in nodes:
        for t in n.inputs:
            if t in writer and n.index not in through.get(writer[t], ()):
                parent[root(n.index)] = root(writer[t])
    out: dict = {}
    for n in nodes:
        out.setdefault(root(n.index), []).append(n)
    return list(out.values())


def _through_kept(nodes, wiring) -> dict:
    """claimed node index -> the claimed nodes a path from it reaches through at least one
    node that is not claimed (``wiring``: (index, inputs, outputs) of every node)."""
    claimed = {n.index for n in nodes}
    readers: dict = {}
    for i, ins, _ in wiring:
        for t in ins:
            if t >= 0:
                readers.setdefault(t, []).append(i)
    outs = {i: o for i, _, o in wiring}
    out: dict = {}
    for n in nodes:
        seen, todo, hit = set(), [r for t in n.outputs if t >= 0 for r in readers.get(t, ()) if r not in claimed], set()
        while todo:  # unclaimed nodes downstream of n, and the claimed ones they feed
            i = todo.pop()
            if i in seen:
                continue
            seen.add(i)
            for t in outs.get(i, ()):
                for r in readers.get(t, ()) if t >= 0 else ():
                    if r in claimed:
                        hit.add(r)
                    elif r not in seen:
                        todo.append(r)
        out[n.index] = hit
    return out


def estimate(group, sg, costs: Costs, in_place: bool, rates=None,
             fused: bool = True, run_rate=None) -> tuple[float, float, bool]:
    """(OpenCL us, LiteRT us, constant) for one delegated partition at its declared
    shapes. OpenCL: each node's elements at its kind's measured kernel rate (``rates``:
    node index -> (OpenCL ns, LiteRT ns) per element, ``node_rates``; without it, kernel
    bytes at the device's copy bandwidth), the partition's inputs and outputs across the
    host link unless the device works in LiteRT's memory in place, one round trip (the
    wait that ends every delegated partition's invoke) and a launch per further kernel;
    ``fused``: consecutive nodes over one element count are one kernel, priced at
    ``run_rate(nodes)`` (ns per element of that fused kernel, measured: ``run_rate``
    below) where it gives one, else at its slowest member (u8->f32 +1 ->f16 at 16M on
    PoCL: the sum estimated 17.5 ms for 5.2 ms, the slowest member 4.9 ms for 3.0).
    LiteRT: each node's elements at its kind's measured LiteRT rate (else the bytes at its
    CAST rate) plus a per-node cost. ``constant``: every input is a constant (computed
    once, free at invoke)."""
    def nbytes(t):
        tt = sg.tensors[t]
        if t < 0 or tt.dtype is None:
            return 0
        return math.prod(tt.shape) * tt.dtype.itemsize

    produced = {t for n in group for t in n.outputs}
    ins = {t for n in group for t in n.inputs if t >= 0 and t not in produced}
    read_inside = {t for n in group for t in n.inputs}
    constant = all(sg.tensors[t].is_constant for t in ins)
    # what crosses: the inputs that are not constants (uploaded once) and the results no
    # member reads (a result a member reads stays in the partition's device buffers)
    boundary = 0 if in_place else sum(nbytes(t) for t in ins if not sg.tensors[t].is_constant) \
        + sum(nbytes(t) for t in produced - read_inside)
    if rates is None:
        kernel = sum(nbytes(t) for n in group for t in (*n.inputs, *n.outputs))
        return costs.opencl_us(kernel, boundary, len(group)), costs.litert_us(kernel, len(group)), constant
    ocl = lit = 0.0
    runs: list = []  # consecutive nodes over one element count: one fused kernel (kernels.py)
    for n in group:
        elems = _elements(n, sg)
        o, li = rates[n.index]
        lit += elems * li / 1e3
        if fused and runs and runs[-1][0] == elems:
            runs[-1][1] = max(runs[-1][1], o)  # intermediates stay in registers: the
            runs[-1][2].append(n)              # slowest member's pass, not the sum
            continue
        runs.append([elems, o, [n]])
    for r in runs:
        measured = run_rate(r[2]) if run_rate is not None and len(r[2]) > 1 else None
        if measured is not None:
            r[1] = measured
    ocl = sum(e * o for e, o, _ in runs) / 1e3
    ocl += boundary / (costs.transfer_gbs * 1e3) + costs.round_trip_us + max(len(runs) - 1, 0) * costs.launch_us
    return ocl, lit + len(group) * costs.litert_node_us, constant


_RATES: dict = {}


def rate_bucket(elems: int) -> int:
    """The size node_rates measures a node of ``elems`` elements at: the next power of 4,
    within [2^16, 2^24]. Rates per element depend on size (caches: LiteRT's float32 ADD ran
    at 0.17 ns per element at 2^20 and 0.6 ns at 2^24 on this project's 2-core host)."""
    b = 1 << 16
    while b < elems and b < (1 << 24):
        b <<= 2
    return b


def rate_key(n, sg) -> tuple:
    """What decides a node's speed: op, tensor types, activation, power-of-two option and
    quantization (which picks the kernel path), not its shapes."""
    ts = [sg.tensors[t] for t in (*n.inputs, *n.outputs)]
    q = tuple((tuple(float(x) for x in t.scales[:1]), tuple(int(z) for z in t.zero_points[:1])) for t in ts)
    o = n.options
    return (n.op, tuple(t.type_code for t in ts), getattr(o, "fusedActivationFunction", 0),
            bool(getattr(o, "potScaleInt16", True)), q)


def _elements(n, sg) -> int:
    return max(math.prod(sg.tensors[n.outputs[0]].shape), 1)


#: a broadcasting ADD is measured at between this many output elements and BROADCAST_MAX
BROADCAST_MIN, BROADCAST_MAX = 1 << 16, 1 << 22


def probe_shapes(n, sg) -> dict:
    """{tensor: shape} node_rates measures ``n`` at: every operand and the result at (N,),
    N the rate_bucket of its elements (the same-shape kernel, LiteRT's elementwise loop);
    for an ADD whose operands broadcast (neither a single value, which splats), its own
    shapes with the outer dimensions scaled so the result has BROADCAST_MIN to
    BROADCAST_MAX elements and the inner ones kept (they pick litecl's kernel, its vector
    width and LiteRT's broadcast path). Priced as a same-shape ADD, a float32
    [500000,37] + [1,37] stayed on OpenCL under auto at 68 ms against LiteRT's 9.3 ms on
    Intel's CPU runtime, [N,37] + [N,1] 46 against 11 (a fresh user's report)."""
    ts = (*n.inputs, n.outputs[0])
    same = {t: (rate_bucket(_elements(n, sg)),) for t in ts}
    if n.op != "ADD" or len(n.inputs) != 2 or min(n.inputs) < 0:
        return same
    a, b = (tuple(int(d) for d in sg.tensors[t].shape) for t in n.inputs)
    if a == b or math.prod(a) <= 1 or math.prod(b) <= 1:
        return same
    try:
        out = list(np.broadcast_shapes(a, b))
    except ValueError:
        return same
    if not out or 0 in out:
        return same
    ins = [[1] * (len(out) - len(s)) + list(s) for s in (a, b)]
    for i in range(len(out) - 1):  # the outer dimensions shrink, the innermost is kept
        total = math.prod(out)
        if total <= BROADCAST_MAX:
            break
        if out[i] > 1:
            d = max(1, out[i] * BROADCAST_MAX // total)
            for s in ins:
                s[i] = d if s[i] == out[i] else s[i]
            out[i] = d
    if math.prod(out) < BROADCAST_MIN and len(out) < 6:  # a leading dimension both operands run along
        k = -(-BROADCAST_MIN // math.prod(out))
        out, ins = [k, *out], [[k, *s] for s in ins]
    probe = {n.inputs[0]: tuple(ins[0]), n.inputs[1]: tuple(ins[1]), n.outputs[0]: tuple(out)}
    from .litert_aborts import litert_abort_reason  # noqa: PLC0415

    # shapes LiteRT would abort the process on (a broadcast above 8 dimensions, an int16
    # power-of-two ADD of unequal counts) are never timed: the same-shape probe then
    return same if litert_abort_reason(n, sg, probe) else probe


def node_rates(delegate, n, sg) -> tuple[float, float]:
    """(OpenCL kernel ns, LiteRT ns) per output element for nodes like ``n`` on
    ``delegate``'s device and this host: measured once on a one-node model of
    ``rate_bucket`` elements (the kernel litecl generates for it, event-timed; LiteRT's own
    kernel under the delegate's reference) on ``probe_values`` in alternating rounds, the
    median of each (``_RATE_ROUNDS``), kept in this process and in litecl's cache.

    Alternating rounds because a rate is measured once and kept: medians of one side
    after the other, taken while another process shared the 2 cores, were cached as 4.8
    ms for a u8->f32 kernel that runs in 3.0 ms (LiteRT: 4.5 and 3.5 ms). Medians, not
    minimums: a kernel's time in a model is compared with its median, and on this
    project's VM the fastest of 9 runs of one kernel is 0.6-0.9x their median."""
    from .cache import device_identity  # noqa: PLC0415

    shapes = probe_shapes(n, sg)
    N = math.prod(shapes[n.outputs[0]])
    ins = tuple(shapes[t] for t in n.inputs)
    # a broadcast's own shapes; else the bucket (N) alone
    key = (delegate.device.caps.key, delegate.reference, N if len(set(ins)) == 1 else ins, rate_key(n, sg))
    r = _RATES.get(key)
    if r is None:
        import hashlib  # noqa: PLC0415

        from .kernels import _caps_for  # noqa: PLC0415
        from .lowering import kernel_spec  # noqa: PLC0415

        # the kernel's text too: a rate measured on another version of litecl's kernel is
        # not this one's (quantized ADD's constants as arguments made it 1.5-10x slower
        # on PoCL until inlined, and the H200 kept the slow rate)
        ts = (*n.inputs, n.outputs[0])
        src = kernel_spec(n, sg, list(ins), _caps_for(delegate.caps, sg, shapes, ts)).source
        ident = device_identity(delegate.device.device) + "|" + _host()
        name = "rates-v6|" + repr(key) + "|" + hashlib.sha256(src.encode()).hexdigest()[:16]

        def pair(v):
            a, b = v
            return float(a), float(b)
        r = cached_measure(name, ident, lambda: _measure_rates(delegate, n, sg, shapes), list, pair)
        _RATES[key] = r
    return r


#: rounds of each side in ``_measure_rates`` after one warm-up round
_RATE_ROUNDS = 7


def probe_values(dtype, N: int) -> np.ndarray:
    """N values of ``dtype`` (a litecl DType) for the rate probes: seeded pseudo-random,
    in the range data of that type has (integers over their type's range, wider ones
    within 16 bits; floats normal with sigma 100; bools half true), not zeros.

    Why not zeros: a kernel's time depends on the data. On PoCL 3.1 (this project's
    2-core EPYC VM) the 16M u8 -> f32 CAST ran in 0.74-0.90 ms on zero input against
    3.3-3.5 ms on random bytes, and the float32 ADD 3.3 against 4.6 ms; rates measured on
    zeros estimated 1.39 ms for a kernel that ran 2.6 ms in the model (1.87x)."""
    rng = np.random.default_rng(0x11EC1)
    if dtype.kind == "bool":
        return rng.integers(0, 2, N, dtype=np.uint8).astype(dtype.np)
    if dtype.kind in ("int", "uint"):
        b = min(dtype.bits, 16)
        lo, hi = (-(1 << (b - 1)), (1 << (b - 1)) - 1) if dtype.kind == "int" else (0, (1 << b) - 1)
        return rng.integers(lo, hi, N, endpoint=True).astype(dtype.np)
    if dtype.kind == "complex":
        return (rng.standard_normal(N) * 100 + 1j * rng.standard_normal(N) * 100).astype(dtype.np)
    return (rng.standard_normal(N) * 100).astype(dtype.np)


def _measure_rates(delegate, n, sg, shapes: dict) -> tuple[float, float]:
    """(OpenCL, LiteRT) ns per result element of ``n`` at ``shapes`` (probe_shapes)."""
    N = math.prod(shapes[n.outputs[0]])
    kernel = _kernel_run(delegate, n, sg, shapes)
    litert = _litert_run(delegate, n, sg, shapes)
    try:
        kernel(), litert()  # warm-up: first touches, program caches
        ks, ls = [], []
        for _ in range(_RATE_ROUNDS):
            ks.append(kernel())
            ls.append(litert())
        return float(np.median(ks)) / N, float(np.median(ls)) / N
    finally:
        kernel.release()


def _kernel_run(delegate, n, sg, shapes: dict):
    """A callable launching the kernel of ``n`` at ``shapes`` (probe_shapes) once and
    returning its event-timed ns; ``.release()`` frees its buffers."""
    from .kernels import _single  # noqa: PLC0415

    # the caps a partition plan gives this kernel at these shapes (streaming stores when
    # its footprint passes the cache: 16M float ADD 7.5 ms without, 4.6 ms with)
    return _launch_run(delegate, _single(n, sg, shapes, delegate.caps), shapes, sg)


def _launch_run(delegate, launch, shapes, sg):
    """A callable enqueueing ``launch`` (kernels.Launch) once on buffers of ``shapes``
    holding ``probe_values`` and returning the kernel's event-timed ns; ``.release()``
    frees its buffers."""
    import pyopencl as cl  # noqa: PLC0415

    from .kernels import build_program  # noqa: PLC0415

    dev = delegate.device
    ts = (*launch.inputs, *launch.outputs)
    k = cl.Kernel(build_program(dev, launch.source), launch.name)
    bufs = []
    with dev.exclusive():  # a one-thread device: not beside another thread's invoke
        for t in ts:
            v = probe_values(sg.tensors[t].dtype, max(math.prod(shapes[t]), 1))
            bufs.append(cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, v.nbytes))
            cl.enqueue_copy(dev.queue, bufs[-1], v)
        dev.queue.finish()
    k.set_args(*bufs, *(np.uint32(v) for v in launch.tiling.kernel_args()),
               *(np.int32(v) for _, v in launch.args))

    def run() -> float:
        with dev.exclusive():
            ev = cl.enqueue_nd_range_kernel(dev.queue, k, launch.gsize, launch.lsize)
            ev.wait()
        return float(ev.profile.end - ev.profile.start)

    def release():
        for b in bufs:
            b.release()
    run.release = release
    return run


_RUN_RATES: dict = {}


def run_rate(delegate, run, sg) -> float | None:
    """OpenCL ns per element of the one fused kernel litecl generates for ``run`` (two or
    more consecutive nodes over one element count, kernels.plan_partition), measured like
    ``node_rates`` (event-timed, median of ``_RATE_ROUNDS`` after a warm-up, at the
    run's ``rate_bucket``) and kept in this process and litecl's cache, keyed by the
    kernel's text. None where the run does not fuse into one kernel or reads a
    broadcast operand other than a single value (its members' rates price it then).

    Why measured: a fused kernel reads the run's inputs and writes its result once, but
    does every member's arithmetic; neither the sum of the members' rates nor the slowest
    one prices it. PoCL 3.1, 16M u8 -> f32, +1, -> f16: the members 3.3, 4.6 and 2.7 ms,
    the fused kernel 3.0 ms (priced at the slowest member: 0.61x)."""
    import hashlib  # noqa: PLC0415

    from .cache import device_identity  # noqa: PLC0415
    from .kernels import plan_partition  # noqa: PLC0415

    elems = _elements(run[-1], sg)
    N = rate_bucket(elems)
    produced = {t for n in run for t in n.outputs}
    shapes = {}
    for n in run:
        for t in n.inputs:
            if t < 0 or t in produced:
                continue
            m = math.prod(sg.tensors[t].shape)
            if m == elems:
                shapes[t] = (N,)
            elif m == 1:
                shapes[t] = tuple(sg.tensors[t].shape)
            else:
                return None
    try:
        plan = plan_partition(run, sg, shapes, delegate.caps, keep=set(run[-1].outputs), constants=set())
    except Exception:  # noqa: BLE001 -- a run the planner refuses at the probe's shapes: unpriced
        return None
    if len(plan.launches) != 1 or len(plan.launches[0].nodes) != len(run):
        return None
    launch = plan.launches[0]
    key = (delegate.device.caps.key, N, launch.source)
    r = _RUN_RATES.get(key)
    if r is None:
        ident = device_identity(delegate.device.device) + "|" + _host()
        name = f"run-rate-v3|{N}|" + hashlib.sha256(launch.source.encode()).hexdigest()[:16]

        def measure() -> float:
            kernel = _launch_run(delegate, launch, plan.shapes, sg)
            try:
                kernel()
                return float(np.median([kernel() for _ in range(_RATE_ROUNDS)])) / N
            finally:
                kernel.release()
        r = cached_measure(name, ident, measure, float, float)
        _RUN_RATES[key] = r
    return r


def _litert_run(delegate, n, sg, shapes: dict):
    """A callable invoking LiteRT's own kernel for ``n`` at ``shapes`` (probe_shapes; a
    one-node model, the delegate's resolver) once and returning the ns it took."""
    import flatbuffers  # noqa: PLC0415
    from ai_edge_litert import schema_py_generated as schema  # noqa: PLC0415
    from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: PLC0415

    tensors = []
    for i, t in enumerate((*n.inputs, n.outputs[0])):
        v = sg.tensors[t]
        tt = schema.TensorT()
        tt.name, tt.type, tt.shape, tt.buffer = f"t{i}", v.type_code, list(shapes[t]), 0
        if v.scales.size:
            tt.quantization = schema.QuantizationParametersT()
            tt.quantization.scale = [float(v.scales[0])]
            tt.quantization.zeroPoint = [int(v.zero_points[0]) if v.zero_points.size else 0]
        tensors.append(tt)
    code = schema.OperatorCodeT()
    code.builtinCode = code.deprecatedBuiltinCode = n.opcode
    code.version = n.version
    op = schema.OperatorT()
    op.opcodeIndex, op.inputs, op.outputs = 0, list(range(len(n.inputs))), [len(n.inputs)]
    if n.op == "ADD":
        op.builtinOptionsType = schema.BuiltinOptions.AddOptions
        op.builtinOptions = schema.AddOptionsT()
        op.builtinOptions.fusedActivationFunction = n.options.fusedActivationFunction
        op.builtinOptions.potScaleInt16 = n.options.potScaleInt16
    g = schema.SubGraphT()
    g.tensors, g.operators, g.inputs, g.outputs = tensors, [op], op.inputs, op.outputs
    m = schema.ModelT()
    m.version, m.operatorCodes, m.subgraphs, m.buffers = 3, [code], [g], [schema.BufferT()]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    kind = {"ref": OpResolverType.BUILTIN_REF, "xnnpack": OpResolverType.AUTO}.get(
        delegate.reference, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)  # AUTO: XNNPACK's kernel
    it = Interpreter(model_content=bytes(b.Output()), experimental_op_resolver_type=kind)
    it.allocate_tensors()
    for d, t in zip(it.get_input_details(), n.inputs):
        it.set_tensor(d["index"], probe_values(sg.tensors[t].dtype, math.prod(shapes[t])).reshape(d["shape"]))

    def run() -> float:
        t0 = time.perf_counter_ns()
        it.invoke()
        return float(time.perf_counter_ns() - t0)
    return run


def _bytes_moved(group, sg) -> int:
    """What a partition of ``group`` reads and writes per invoke at the declared shapes
    (kernels.PartitionPlan.bytes_moved, before planning: each node's operands and
    results; a node of constants only runs once and moves nothing per invoke)."""
    total = 0
    for n in group:
        if all(t < 0 or sg.tensors[t].is_constant for t in n.inputs):
            continue
        for t in (*n.inputs, *n.outputs):
            if t >= 0 and sg.tensors[t].dtype is not None:
                total += math.prod(sg.tensors[t].shape) * sg.tensors[t].dtype.itemsize
    return total


#: auto's reason names the LiteRT kernel priced where it is not the builtin one
_PRICED = {"xnnpack": " (XNNPACK)", "ref": " (reference kernels)"}


def auto_keep_on_litert(ctx, nodes, sg, delegate, wiring=None) -> dict:
    """node index -> reason, for the claimable ``nodes`` that LiteRT should keep under
    placement "auto": whole partitions (``groups``, with the subgraph's ``wiring``) whose
    OpenCL estimate is not AUTO_MARGIN times below LiteRT's, each priced with the costs of
    the device it would run on (the delegate's small device for a partition moving at
    most SMALL_PARTITION_BYTES). Partitions of constants only stay on OpenCL (computed
    once)."""
    from .kernels import SMALL_PARTITION_BYTES  # noqa: PLC0415

    big = device_costs(delegate.device)
    # a partition moving at most SMALL_PARTITION_BYTES runs on the small device (PoCL's
    # basic one: delegate.py _Planner.plan_for), and pays that device's round trip
    small = device_costs(delegate.small_device) if delegate.small_device is not None else None
    out: dict = {}
    for g in groups(nodes, wiring):
        if all(sg.tensors[t].is_constant for n in g for t in n.inputs
               if t >= 0 and t not in {o for m in g for o in m.outputs}):
            continue  # computed once: free at invoke
        costs = small if small is not None and _bytes_moved(g, sg) <= SMALL_PARTITION_BYTES else big
        rates = {n.index: node_rates(delegate, n, sg) for n in g}
        ocl, lit, _ = estimate(g, sg, costs, delegate.memory.in_place, rates, delegate.fuse,
                               lambda run: run_rate(delegate, run, sg))
        if ocl * AUTO_MARGIN < lit:
            continue
        # the shape priced: the Prepare's (a graph with invoke-time shapes, or a Delegate
        # shared by interpreters of other shapes, runs at others)
        at = list(sg.tensors[g[0].outputs[0]].shape)
        why = (f"kept on LiteRT: OpenCL ~{ocl:.0f} us (cold round trip ~{costs.round_trip_us:.0f} us) "
               f"not {AUTO_MARGIN}x below LiteRT ~{lit:.0f} us{_PRICED.get(delegate.reference, '')}, at {at}")
        out.update({n.index: why for n in g})
    return out
