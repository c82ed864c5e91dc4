"""litecl.Interpreter's own Delegates, reused: the Delegate a gone Interpreter made serves
the next Interpreter of equal settings (issue 38: a new Delegate and its first Prepare cost
a small model's start-up ~25 of ~90 us). Only a Delegate nothing else refers to, holding no
record, partition or profiling, and not one the garbage collector is freeing, is reused,
reset to a new one's state."""
from __future__ import annotations

import sys

from . import abi
from .delegate import _DEFERRED, _LIVE, Delegate, _quiet
from .device import open_device

#: Delegates litecl.Interpreter made for itself, free again: its interpreter gone and no
#: other reference (``release``): settings key (``pool_key``) -> [Delegate]. The next
#: Interpreter of those settings takes one (``pooled``): a new Delegate and its first
#: Prepare cost a small model's start-up ~25 of ~90 us (weather_v0.1, measured).
_POOL: dict = {}
POOL_MAX = 2  # free Delegates kept per settings


def pool_key(device, placement, reference, quiet, fuse, keep_order, ops, nodes):
    """The key litecl.Interpreter's own Delegate of these arguments is pooled under, or None
    (``ops``/``nodes`` given, or an argument that is no key). Names the device opened and
    LITECL_QUIET read now, so a changed environment gets a Delegate of its own."""
    if ops is not None or nodes is not None:
        return None
    try:
        key = (id(open_device(device)), placement, reference, _quiet(quiet), fuse, keep_order)  # devices: one per process
        hash(key)
    except Exception:  # noqa: BLE001 (Delegate(...) raises the argument's error in its words)
        return None
    return key


def pooled(key) -> Delegate | None:
    """A free Delegate of ``key``, reset to a new one's state, or None."""
    free = _POOL.get(key) if key is not None else None
    while free:
        try:
            d = free.pop()
        except IndexError:  # another thread took the last one
            return None
        if d.device.forked:
            continue
        d._stats = dict.fromkeys(d._stats, 0)
        d.kernel_times_ns = {}
        d.profile_log.clear()
        d._struct.flags = abi.ALLOW_DYNAMIC_TENSORS  # interpreter._price_at_running_shapes may clear it
        d._errors.last = None
        return d
    return None


def release(d: Delegate, key) -> None:
    """Pool ``d``, the Delegate a litecl.Interpreter made for itself under ``key``, after
    that interpreter and LiteRT's went (Interpreter.__del__, which dropped its references
    to it), where nothing else refers to it (a caller's ``interpreter.delegate``, another
    interpreter) and it holds no record, partition or profiling switched on: 3 references
    left, this function's argument, the caller's name and getrefcount's. Not one the
    garbage collector is freeing with its interpreter (its weak references cleared)."""
    if (key is None or sys.getrefcount(d) != 3 or d._records or d._owned or d._parts or d._profile
            or _DEFERRED or d.__dict__.get("_forget_later")):
        return
    ref = _LIVE.get(d._key)
    if ref is None or ref() is not d:  # collected with its interpreter (a reference cycle): the
        return  # collector cleared its weak references, and with them ran its runtime's free
    free = _POOL.setdefault(key, [])
    if len(free) < POOL_MAX:
        free.append(d)
