"""Recalled Prepares: litecl.Delegate's Prepare of a context equal to one its Python
Prepare decided before runs in the C runtime, without calling Python
(litecl_delegate.c ``lcl_inprocess_prepare``: the context's key looked up, keep_order's
marks flagged, the partitions LiteRT formed before expected, LiteRT's
ReplaceNodeSubsetsWithDelegateKernels called). Start-up is then LiteRT's partitioning and
the partitions' init (issue 38: a second construction of MoveNet ~0.3 ms instead of ~0.6).

``offer`` keeps a Python Prepare in the runtime (claims.prepare calls it); the runtime
logs each Prepare it recalls, and ``drain`` records those as Python's own Prepare would
have (the context's record for placement(), its partitions' planners) before anything
reads the records or the partitions: the reports (records.py), the planner and the
partition kernels' free (delegate.py). A delegate's kept Prepares name its settings
implicitly (one table per delegate); a litecl.Interpreter's construction (Delegate.owning)
and ``nodes=`` are always Python's.
"""
from __future__ import annotations

import ctypes as C
import itertools
import threading
import weakref

from . import abi, runtime

_TOKENS = itertools.count(1)
#: held while the log is recorded: one thread records it, in the order the runtime logged
_DRAIN_LOCK = threading.RLock()
_HEAD = (C.c_int64 * 11)()
_MADE: list = [(C.c_void_p * 64)()]


def offer(dlg, mkey: tuple, memo: tuple, marked: tuple, expected, order_hit, claim: list, nodes: int) -> None:
    """Keep the Prepare claims.prepare just made for ``dlg`` in the runtime: key ``mkey``
    (claims._PREPARES'), decisions ``memo``, keep_order's ``marked`` nodes and their
    ``order_hit`` (claims._ORDERS' entry), the partitions ``expected`` (delegate._Expected,
    learnt), ``claim`` the replaced nodes of a plan of ``nodes``. Only where Python would
    decide the same again from the key alone: no owner (a litecl.Interpreter's records name
    it), no ``nodes=``, nothing ``visible``."""
    if dlg.nodes is not None or mkey[-1] or getattr(dlg._owner, "key", None) is not None:
        return
    if claim and (expected is None or expected.parts is None):
        return
    _put(dlg, (mkey, memo, marked, expected, order_hit, claim, nodes))


def _put(dlg, args: tuple) -> None:
    mkey, memo, marked, expected, order_hit, claim, nodes = args
    entries, ints, presets = expected._table(dlg) if claim else (None, (C.c_int32 * 1)(), [])
    n = len(expected.parts) if claim else 0
    token = next(_TOKENS)
    dlg._recalls[token] = (memo, marked, expected, (entries, ints, presets), order_hit, nodes)
    if claim:
        expected.tokens.append((weakref.ref(dlg), token, args))
    key = mkey[0]
    arr = (C.c_int * max(1, len(claim)))(*claim)
    marks = (C.c_int * max(1, len(marked)))(*marked)
    if dlg._rt.lcl_recall_put(dlg._key, key, len(key) // 4, arr, len(claim), marks, len(marked), entries,
                              ints, len(ints), n, nodes, token):
        dlg._recalls.pop(token, None)  # out of memory: Python prepares it again


def refresh(tokens: list) -> None:
    """Keep the Prepares of ``tokens`` ([(weakref to the Delegate, token, offer's arguments)])
    again with their partitions' new presets (delegate._Expected.keep: the runtime's copy
    hands the old ones; the first interpreter's plans come after its Prepare offered)."""
    old, tokens[:] = list(tokens), []
    for ref, _, args in old:
        d = ref()
        if d is not None:
            _put(d, args)  # the runtime drops the one of the same key


def forget(tokens: list) -> None:
    """Drop the kept Prepares of ``tokens`` (refresh's): _PRESETS was emptied; Python's
    next Prepare of each offers it again."""
    while tokens:
        ref, token, _ = tokens.pop()
        d = ref()
        if d is not None:
            d._rt.lcl_recall_forget(d._key, token)
def draining() -> bool:
    """Whether this thread is recording the log (a collection inside ``drain``)."""
    return _DRAIN_LOCK._is_owned()


def drain() -> None:
    """Record every Prepare the runtime recalled since the last drain, in its order. Does
    nothing inside a drain or a block holding delegate._LOCK on this thread (a collection
    there): the next call does it."""
    rt = runtime.load()
    if not _pending(rt):
        return
    from .delegate import _LOCK  # noqa: PLC0415

    if _LOCK._is_owned() or draining():
        return
    with _DRAIN_LOCK:
        while True:
            got = rt.lcl_recall_next(_HEAD, _MADE[0], len(_MADE[0]))
            if got == 0:
                return
            if got < 0:
                _MADE[0] = (C.c_void_p * (-got))()
                continue
            _record(tuple(_HEAD), list(_MADE[0][:max(0, _HEAD[9])]))


def _pending(rt) -> int:
    global _PENDING
    if _PENDING is None:
        _PENDING = C.c_int.in_dll(rt, "lcl_recall_pending")
    return _PENDING.value


_PENDING = None


def _record(head: tuple, made: list) -> None:
    """What claims.prepare records after its decisions, for one recalled Prepare."""
    from . import claims  # noqa: PLC0415
    from .delegate import _LIVE, _LOCK  # noqa: PLC0415

    dkey, token, event, base, addr, first, place, status, said, n, fetched = head
    ref = _LIVE.get(dkey)
    d = ref() if ref is not None else None
    if d is None:
        return
    if n < 0:  # the runtime dropped it: its presets need not live
        d._recalls.pop(token, None)
        return
    memo, marked, expected, (entries, ints, presets), order_hit, nodes = d._recalls[token]
    ctx = C.cast(addr, C.POINTER(abi.TfLiteContext))
    sg, views, keys, rows, claim = claims._recall(ctx, memo)
    rec = {"rows": rows, "views": views, "keys": keys, "nodes": nodes, "claimed": len(claim),
           "partitions": 0, "kept_order": False, "order_dropped": [], "sg": sg, "owner": None}
    with d._lock:  # the runtime applied claims.prepare's rule on freed addresses
        d._record(addr, rec, place=(place, first or None), event=event, fetched=fetched)
    if not claim:
        return
    rec["order_dropped"] = list(order_hit[1]) if order_hit else []
    rec["kept_order"] = bool(marked)
    rec["partitions"] = n
    expected.end(d, rec, addr, (base, made, presets, entries, ints), status == abi.K_OK, recalled=True)
