"""How a device reaches LiteRT's tensor memory: the delegate's memory policy.

``_memory_policy(device)`` measures once per device whether an OpenCL buffer made over
LiteRT's memory (USE_HOST_PTR) is that memory (``in_place``, with the pointer alignment
it needs), else partitions copy through device buffers (``_Memory``).
"""
from __future__ import annotations

import numpy as np
import pyopencl as cl


class _Memory:
    """How a device reaches LiteRT's tensor memory: ``in_place`` with ``align`` (bytes a
    pointer must be aligned to for a USE_HOST_PTR buffer over it to be the same memory,
    measured), else copies through device buffers."""

    def __init__(self, in_place: bool, align: int):
        self.in_place, self.align = in_place, align


_POLICIES: dict = {}


def _memory_policy(device) -> _Memory:
    """``_measure_memory`` once per device and process, its answer kept on disk per
    device and driver (``_remembered_memory``)."""
    got = _POLICY_OF.get(id(device))  # first by the Device object (caps.key is computed)
    if got is not None and got[0] is device:
        return got[1]
    # is_gpu too: caps.key does not hold it, and a GPU's policy is not measured
    key = (device.context.int_ptr, device.caps.key, device.caps.is_gpu)
    m = _POLICIES.get(key)
    if m is None:
        m = _POLICIES[key] = _remembered_memory(device)
    _POLICY_OF[id(device)] = (device, m)
    return m


_POLICY_OF: dict = {}  # id(Device) -> (that Device, its policy)


#: the on-disk probe (backend/cache.py) holding _measure_memory's answer per device and driver
_PROBE = "memory-policy-v1"


def _remembered_memory(device) -> _Memory:
    """``_measure_memory``'s answer for ``device`` from litecl's disk cache (a probe keyed
    by the device's platform, name and driver versions, cache.device_identity), else
    measured and kept there: the measurement builds a kernel and runs six, ~10 ms of
    every process's first Interpreter (Intel's runtime, measured). A GPU, or a device
    that cannot build the probe (copies), is not kept."""
    from .cache import device_identity, probe_get, probe_put  # noqa: PLC0415

    if device.caps.is_gpu:
        return _Memory(False, 0)
    ident = device_identity(device.device)
    got = probe_get(_PROBE, ident)
    if isinstance(got, list) and len(got) == 2 and got[1] in (0, 64, 128, 4096) and got[0] in (True, False) \
            and bool(got[0]) == bool(got[1]):
        return _Memory(bool(got[0]), int(got[1]))
    m, measured = _measure_memory(device, with_status=True)
    if measured:
        probe_put(_PROBE, ident, [m.in_place, m.align])
    return m


#: The in-place probe's kernels: a copy out of a buffer, and a fill into one.
_ALIAS_PROBE = ("__kernel void litecl_copy(__global const uint* a, __global uint* o) { o[get_global_id(0)] = a[get_global_id(0)]; }\n"
                "__kernel void litecl_fill(__global uint* a, const uint v) { a[get_global_id(0)] = v; }\n")


def _measure_memory(device, with_status: bool = False):
    """Measure, once per device: the smallest alignment (64, 128, 4096 bytes) at which a
    USE_HOST_PTR buffer is the host memory itself (a zero-copy device: CPU runtimes):
    a kernel reads what the host wrote after the buffer was made, and the host reads what
    a kernel wrote, after clFinish, with no map in between. A map alone proves nothing:
    the spec has it return the host pointer of every USE_HOST_PTR buffer, and Mesa's
    rusticl 22.3 keeps a copy it writes back only at a map, or when the command's event is
    queried or released (after clFinish, a kernel's output was stale in 100 of 100 runs).
    GPUs, host-unified or not, get copies (their USE_HOST_PTR caching is allowed to keep
    a device-side copy). ``with_status``: (policy, whether it was measured: not for a GPU
    or a device that cannot build the probe)."""
    def done(m: _Memory, measured: bool):
        return (m, measured) if with_status else m

    caps = device.caps
    if caps.is_gpu:
        return done(_Memory(False, 0), False)
    q, ctx = device.queue, device.context
    try:
        from .kernels import build_program  # noqa: PLC0415

        prg = build_program(device, _ALIAS_PROBE)
    except Exception:  # noqa: BLE001 (a device that cannot build: copies)
        return done(_Memory(False, 0), False)
    raw = np.zeros(3 * 4096, np.uint32)
    base = raw.ctypes.data
    for align in (64, 128, 4096):
        off = (-base) % 4096 + align if align < 4096 else (-base) % 4096
        view = raw[off // 4:off // 4 + 1024]
        if view.ctypes.data % align or (align < 4096 and view.ctypes.data % (2 * align) == 0):
            continue
        with device.exclusive():  # a one-thread device: not beside another thread's invoke
            aliases = _aliases(ctx, q, prg, view)
        if aliases:
            return done(_Memory(True, align), True)
    return done(_Memory(False, 0), True)


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
