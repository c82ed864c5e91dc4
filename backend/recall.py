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
partition kernels' free (delegate.py). The kept Prepares are the process's, each with the
number of its Delegate's settings (``settings_number``): one Delegate's serves another of
equal settings (litecl.Interpreter makes one per construction). A Prepare inside
Delegate.owning (a litecl.Interpreter's) is recalled from one kept with the same visible
tensors and logged with its owner; ``nodes=`` is always Python's.
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
_HEAD = (C.c_int64 * 14)()
_BUFS: list = [(C.c_void_p * 64)(), (C.c_int32 * 256)()]  # made, the extra partitions' ints


def offer(dlg, mkey: tuple, memo: tuple, marked: tuple, expected, order_hit, claim: list, nodes: int) -> None:
    """Keep the Prepare claims.prepare just made for ``dlg`` in the runtime: key ``mkey``
    (claims._PREPARES'), decisions ``memo``, keep_order's ``marked`` nodes and their
    ``order_hit`` (claims._ORDERS' entry), the partitions ``expected`` (delegate._Expected,
    learnt), ``claim`` the replaced nodes of a plan of ``nodes``. Only where Python would
    decide the same again from the key alone and its owner's visible tensors (a
    litecl.Interpreter's: the runtime logs its owner, whose records name it): no ``nodes=``."""
    salt = owner_salt(getattr(dlg._owner, "key", None), mkey[-1])[1]
    settings = settings_number(dlg)
    if salt < 0 or settings < 0:
        return
    if claim and (expected is None or expected.parts is None):
        return
    _put(dlg, (mkey, memo, marked, expected, order_hit, claim, nodes, salt, settings))


#: the kept Prepares' tokens -> what drain records with them (the runtime's table serves
#: every Delegate of equal settings: each litecl.Interpreter makes its own)
_KEPT: dict = {}
#: delegate settings (settings_number's key) -> (their number, the _PRESETS memo then)
_SETTINGS: dict = {}


def settings_number(d) -> int:
    """The number of Delegate ``d``'s settings that a Prepare's decisions depend on (the
    key of claims.prepare's memo less the context and the owner's visible tensors, and
    keep_order and _settings: its devices and memory policy; objects by id, each kept for
    the process): a Prepare one Delegate kept serves another of equal settings. -1 (Python
    prepares) for ``nodes=`` or past 4096 settings. The plans its partitions were handed
    come from delegate._PRESETS as it is now: emptied or replaced, a kept Prepare serves no
    new one (_Expected._table forgets it at the next Python Prepare; a test's replaced memo
    handed a later Delegate its broken plan)."""
    from .delegate import _PRESETS, _settings  # noqa: PLC0415

    if d.nodes is not None:
        return -1
    k = (id(d.caps), id(d._costs) if d.placement_mode == "auto" else None, d.placement_mode, d.reference,
         d.fuse, d.ops, d.keep_order, _settings(d), id(_PRESETS), getattr(_PRESETS, "cleared", 0))
    got = _SETTINGS.get(k)
    if got is None:
        if len(_SETTINGS) >= 4096:
            return -1
        got = _SETTINGS.setdefault(k, (len(_SETTINGS), _PRESETS))  # the memo kept: its id no other's
    return got[0]


#: Delegate.owning's visible tensor sets -> their salt (1, 2, ...: the runtime keys kept
#: Prepares by it too); the empty set is 0
_SALTS: dict = {frozenset(): 0}


def owner_salt(owner, visible: frozenset) -> tuple:
    """(owner, salt) as the runtime takes them (lcl_recall_own): the owner's id (0 for
    none), the salt of its ``visible`` tensors; salt -1 (Python prepares) for an owner that
    is not an int or a set past 4096 (each kept for the process)."""
    if owner is not None and not isinstance(owner, int):
        return 0, -1
    salt = _SALTS.get(visible)
    if salt is None:
        if len(_SALTS) >= 4096:
            return 0, -1
        salt = _SALTS.setdefault(visible, len(_SALTS))
    return owner or 0, salt


def _put(dlg, args: tuple) -> None:
    mkey, memo, marked, expected, order_hit, claim, nodes, salt, settings = args
    entries, ints, presets = expected._table(dlg) if claim else (None, (C.c_int32 * 1)(), [])
    n = len(expected.parts) if claim else 0
    token = next(_TOKENS)
    _KEPT[token] = (memo, marked, expected, (entries, ints, presets), order_hit, nodes)
    if claim:  # the runtime keeps one per key, salt and settings: an earlier one it replaces
        # leaves the list (each holds its ~20 KB context key: a Delegate per interpreter
        # grew the process by 22 KB an interpreter, a fresh user's 20,000)
        expected.tokens[:] = [t for t in expected.tokens if t[2][7:] != (salt, settings)]
        expected.tokens.append((weakref.ref(dlg), token, args))
    key = mkey[0]
    arr = (C.c_int * max(1, len(claim)))(*claim)
    marks = (C.c_int * max(1, len(marked)))(*marked)
    if dlg._rt.lcl_recall_put(settings, key, len(key) // 4, arr, len(claim), marks, len(marked), entries,
                              ints, len(ints), n, nodes, token, salt):
        _KEPT.pop(token, None)  # out of memory: Python prepares it again


def refresh(tokens: list, alive=None) -> None:
    """Keep the Prepares of ``tokens`` ([(weakref to the Delegate, token, offer's arguments)])
    again with their partitions' new presets (delegate._Expected.keep: the runtime's copy
    hands the old ones; the first interpreter's plans come after its Prepare offered).
    One whose Delegate is gone is kept again through ``alive`` (the Delegate whose plan
    changed them) where its settings are that one's: a Delegate per interpreter (as
    litecl.Interpreter makes) recalled its first's Prepare with no plans, asking the planner
    at every construction (start-up 2.0x LiteRT's instead of 1.4x, bench_delegate)."""
    old, tokens[:] = list(tokens), []
    for ref, token, args in old:
        d = ref()
        if d is None and alive is not None and settings_number(alive) == args[8]:
            d = alive
        if d is not None:
            _put(d, args)  # the runtime drops the one of the same key
        else:
            tokens.append((ref, token, args))  # for a later Delegate of its settings


def forget(tokens: list) -> None:
    """Drop the kept Prepares of ``tokens`` (refresh's): _PRESETS was emptied; Python's
    next Prepare of each offers it again."""
    rt = runtime.load() if tokens else None
    while tokens:
        rt.lcl_recall_forget(tokens.pop()[1])
def forget_all() -> None:
    """Drop every kept Prepare (the next Prepare of each context is Python's again)."""
    runtime.load().lcl_recall_forget(-1)


def pending() -> bool:
    """Whether the runtime logged Prepares no drain recorded yet (no lock taken: a
    collection may ask inside any; before the first drain nothing was recalled)."""
    return _PENDING is not None and bool(_PENDING.value)


def forgotten(d, owner: int) -> None:
    """Delegate ``d``'s ``owner`` (litecl.Interpreter's id) is gone: its Prepares still in
    the runtime's log are recorded with no owner (lcl_recall_disown), and so are those a
    drain under way took from it before now (their Prepare's event is earlier): the id may
    name a new interpreter, whose rows alone it must own. Never waits (a collection)."""
    d._rt.lcl_recall_disown(d._key, owner)
    if _RECORDING:
        _FORGOTTEN[(d._key, owner)] = d._rt.lcl_next_event()


#: (Delegate key, owner) -> the event of its forget, while a drain is under way (``forgotten``)
_FORGOTTEN: dict = {}


def logged(dkey: int, owner) -> bool | None:
    """Whether the runtime's log holds a Prepare it recalled for Delegate key ``dkey`` and
    ``owner`` (litecl.Interpreter's id, as Delegate.owning gives it) that made partitions;
    None (drain, then ask the records) where that is not known: the log past LOGGED_SCAN
    entries (one scan each call), or another thread recording it (its entries leave the
    log before they are recorded)."""
    if not isinstance(owner, int) or _PENDING is None:
        return None
    n = _PENDING.value
    if n > LOGGED_SCAN:
        return None
    if n and runtime.load().lcl_recall_logged(dkey, owner):
        return True
    # a drain sets _RECORDING before it takes an entry and clears it once recorded: asked
    # after the scan, it covers an entry taken before the scan and not recorded yet
    return None if _RECORDING else False


#: recall.logged scans the log up to this long; a longer one is recorded instead
LOGGED_SCAN = 64


def draining() -> bool:
    """Whether this thread is recording the log (a collection inside ``drain``)."""
    return _DRAIN_LOCK._is_owned()


def drain(wait: bool = True) -> bool:
    """Record every Prepare the runtime recalled since the last drain, in its order; True
    when the log is empty after it. Does nothing inside a drain or a block holding
    delegate._LOCK on this thread (a collection there): the next call does it. ``wait``
    False (a partition's free, which a collection runs inside any lock): nothing either
    while another thread records the log, which may be waiting for a Delegate's lock this
    thread holds (a deadlock: placement()'s collection freed an interpreter, a fresh user)."""
    # the log empty and no other thread recording what it took from it (its entries leave
    # the log before their planners are made: a partition's planner then went missing,
    # "litecl partition kernel missing", 1 of 3 threads constructing MoveNet)
    if _PENDING is not None and not _PENDING.value and not _RECORDING:
        return True
    rt = runtime.load()
    if not _pending(rt) and not _RECORDING:
        return True
    if _delegate_lock()._is_owned() or draining() or not _DRAIN_LOCK.acquire(blocking=wait):
        return False
    try:
        _RECORDING.append(1)
        _drain(rt)
    finally:
        _FORGOTTEN.clear()  # every Prepare taken before a forget is recorded now
        _RECORDING.clear()
        _DRAIN_LOCK.release()
    from .delegate import _free_deferred  # noqa: PLC0415

    _free_deferred()  # frees that waited for this drain
    return True


def _delegate_lock():
    """delegate._LOCK, looked up once (no import statement inside a collection)."""
    if not _LOCKS:
        from .delegate import _LOCK  # noqa: PLC0415

        _LOCKS.append(_LOCK)
    return _LOCKS[0]


_LOCKS: list = []
#: non-empty while a thread records the log (under _DRAIN_LOCK)
_RECORDING: list = []


def _drain(rt) -> None:
    """drain's work, under _DRAIN_LOCK."""
    while True:
        made, ints = _BUFS
        got = rt.lcl_recall_next(_HEAD, made, len(made), ints, len(ints))
        if got == 0:
            return
        if got < 0:  # room for it
            _BUFS[:] = [(C.c_void_p * (2 * (_HEAD[9] + _HEAD[11])))(), (C.c_int32 * (2 * _HEAD[12]))()]
            continue
        n, extra = max(0, _HEAD[9]), _HEAD[11]
        _record(tuple(_HEAD), list(made[:n]), list(made[n:n + extra]), list(ints[:_HEAD[12]]))


def _pending(rt) -> int:
    global _PENDING
    if _PENDING is None:
        _PENDING = C.c_int.in_dll(rt, "lcl_recall_pending")
    return _PENDING.value


_PENDING = None


def _record(head: tuple, made: list, extra: list = (), extra_ints: list = ()) -> None:
    """What claims.prepare records after its decisions, for one recalled Prepare (``extra``:
    the partitions it did not expect, ``extra_ints`` their keys, nodes and outputs: _extras)."""
    from . import claims  # noqa: PLC0415
    from .delegate import _LIVE  # noqa: PLC0415

    dkey, token, event, base, addr, first, place, status, said, n, fetched = head[:11]
    owner = head[13] or None  # -1: an owner gone before the drain (lcl_recall_disown): no rows kept
    if _FORGOTTEN and _FORGOTTEN.get((dkey, owner), -1) > event:
        owner = -1  # gone while this drain held its Prepare (forgotten)
    if n < 0:  # the runtime dropped it: its presets need not live
        _KEPT.pop(token, None)
        return
    if owner == -1 and n == 0 and not extra:
        return  # no rows kept and no partition to make a planner for (its context may be gone)
    ref = _LIVE.get(dkey)
    d = ref() if ref is not None else None
    if d is None:
        return
    memo, marked, expected, (entries, ints, presets), order_hit, nodes = _KEPT[token]
    ctx = C.cast(addr, C.POINTER(abi.TfLiteContext))
    sg, views, keys, rows, claim = claims._recall(ctx, memo)
    rec = {"rows": rows, "views": views, "keys": keys, "nodes": nodes, "claimed": len(claim),
           "partitions": 0, "kept_order": False, "order_dropped": [], "sg": sg, "owner": owner}
    if owner != -1:
        with d._lock:  # the runtime applied claims.prepare's rule on freed addresses
            d._record(addr, rec, place=(place, first or None), event=event, fetched=fetched)
    if not claim:
        return
    rec["order_dropped"] = list(order_hit[1]) if order_hit else []
    rec["kept_order"] = bool(marked)
    rec["partitions"] = n
    if status == abi.K_OK:
        _extras(d, ctx, extra, extra_ints)
    expected.end(d, rec, addr, (base, made, presets, entries, ints), status == abi.K_OK, recalled=True)


def _extras(d, ctx, handles: list, ints: list) -> None:
    """The _Planners of the partitions a recalled Prepare did not expect (litecl_delegate.c
    recall_extra: an equal context key, other subgraph outputs), as _INIT makes them in
    Python's Prepare, numbered after the expected ones."""
    from .delegate import _KERNELS, _LOCK, _PLANNERS, _Planner  # noqa: PLC0415

    k = 0
    for h in handles:
        key = (ints[k] & 0xFFFFFFFF) | (ints[k + 1] << 32)
        nodes = ints[k + 3:k + 3 + ints[k + 2]]
        k += 3 + len(nodes)
        outs = ints[k + 1:k + 1 + ints[k]]
        k += 1 + len(outs)
        arrays = [abi.new_int_array(tuple(v), owned_by_litert=False) for v in (nodes, outs)]
        params = abi.TfLiteDelegateParams()
        params.nodes_to_replace, params.output_tensors = (C.cast(a, C.POINTER(abi.TfLiteIntArray)) for a in arrays)
        part = _Planner(d, ctx, params)  # reads them now (arrays alive)
        part.handle = h
        with _LOCK:
            _PLANNERS[key] = part
            _KERNELS[h] = key
            d._parts.setdefault(part.ctx_addr, {})[key] = part


#: a _Planner's fields equal in every interpreter of one Prepare memo entry (_Expected)
_TEMPLATE_FIELDS = ("nodes", "inputs", "outputs", "key", "pkey", "given")


class _Expected:
    """The partitions LiteRT formed for one Prepare memo entry (claims._PREPARES, per
    keep_order marks): an equal context gets the same ones, so a later Prepare hands the
    runtime their nodes, outputs and presets (lcl_inprocess_expect) and the runtime's
    init (lcl_inprocess_init) makes each without a Python callback; their _Planners are
    made from templates after ReplaceNodeSubsetsWithDelegateKernels (``begin``, ``end``).
    A partition LiteRT forms otherwise goes through _INIT as before."""

    def __init__(self) -> None:
        self.parts = None             # per partition in LiteRT's init order: _TEMPLATE_FIELDS
        self.tables: dict = {}        # _settings -> _table's answer
        #: _settings -> per partition its preset (as _PRESETS' values) or None: the plan the
        #: runtime prepared that partition of this entry with last (_Planner.plan_for), so
        #: two models with equal partitions at other shapes keep one each
        self.presets: dict = {}
        self.version = 0              # changes of ``presets``
        self.source = (None, 0)       # (the _PRESETS dict, its ``cleared``) they were copied from
        self.tokens: list = []        # the runtime's recalled Prepares made from ``tables`` (recall.offer)

    def begin(self, d: Delegate, rec: dict):
        """Before ReplaceNodeSubsetsWithDelegateKernels for record ``rec``: hand the runtime
        the expected partitions, or (no parts learnt yet) have _INIT list what it makes.
        Returns what ``end`` takes."""
        from .delegate import _new_keys  # noqa: PLC0415

        if self.parts is None:
            rec["made"] = []
            return None
        n = len(self.parts)
        entries, ints, presets = self._table(d)
        base, made = _new_keys(n), (C.c_void_p * n)()
        rec["partitions"] = n  # _INIT numbers a partition nobody expected after these
        d._rt.lcl_inprocess_expect(d._native, C.addressof(d._struct), entries, ints, n, base, made)
        # the runtime reads ``entries`` and ``ints`` until ``end``: held here, since another
        # thread's _table may replace this table meanwhile (a preset kept at a resize), which
        # freed them under this Replace (a Bus error with two threads resizing: a fresh user's report)
        return base, made, presets, entries, ints

    def end(self, d: Delegate, rec: dict, addr: int, state, ok: bool, recalled: bool = False) -> None:
        """After ReplaceNodeSubsetsWithDelegateKernels (``ok``: it succeeded): learn the
        partitions _INIT made, or make the _Planners of those the runtime made (also for
        a Prepare the runtime ``recalled``: recall.drain)."""
        from .delegate import _KERNELS, _LOCK, _PLANNERS, _Planner, _record_rows  # noqa: PLC0415

        if state is None:
            made = rec.pop("made", None)
            if ok and made:
                self.parts = [{k: getattr(p, k) for k in _TEMPLATE_FIELDS} for p in made]
            return
        if not recalled:
            d._rt.lcl_inprocess_expect(d._native, None, None, None, 0, 0, None)
        if not ok:  # LiteRT may have freed them already: leaked, never a dangling handle
            return
        base, made, presets = state[:3]
        rows, sg, dev = _record_rows(rec), rec["sg"], d.device
        parts = []
        new = _Planner.__new__
        for i, (t, h) in enumerate(zip(self.parts, made)):
            if not h:
                continue
            p = new(_Planner)
            p.__dict__ = {**t, "delegate": d, "ctx_addr": addr, "number": i, "sg": sg, "handle": h,
                          "plan": None, "dev": dev, "_c": None, "_preset": presets[i], "_slot": (self, i)}
            for j in t["given"][0]:
                r = rows.get(j)
                if r is not None:
                    r["partition"] = i
            parts.append(p)
        with _LOCK:
            mine = d._parts.setdefault(addr, {})
            for p in parts:
                _PLANNERS[base + p.number] = p
                _KERNELS[p.handle] = base + p.number
                mine[base + p.number] = p
            everyone = sorted(mine.values(), key=lambda q: q.number)
        if len(parts) != len(self.parts) or len(everyone) != len(parts):  # LiteRT formed others
            for k, p in enumerate(everyone):  # numbered 0.. again, rows with them
                p.number = k
                for j in p.given[0]:
                    r = rows.get(j)
                    if r is not None:
                        r["partition"] = k
            rec["partitions"] = len(everyone)

    def _table(self, d: Delegate) -> tuple:
        """(runtime.Expected array, its ints, per partition its preset (plan, device,
        _C_PLANS entry) or None) for ``d``'s settings: built again when a partition's
        preset changed (``keep``), the settings' devices are others, or _PRESETS was
        emptied or replaced. A partition without a preset of its own takes _PRESETS' entry
        for its nodes (the latest plan of equal nodes anywhere)."""
        from .delegate import _PRESETS, _settings  # noqa: PLC0415

        sets = _settings(d)
        memo = _PRESETS  # tests put a plain dict in its place
        source = (memo, getattr(memo, "cleared", 0))
        if self.source[0] is not source[0] or self.source[1] != source[1]:
            self.presets, self.source = {}, source  # copied from a memo since emptied
            self.version += 1
            forget(self.tokens)
        got = self.tables.get(sets)
        if got is not None and got[0] is d.caps and got[1] is d.device and got[2] is d.small_device \
                and got[3] == self.version:
            return got[4:]
        own = self.presets.setdefault(sets, [None] * len(self.parts))
        for i, t in enumerate(self.parts):
            if own[i] is None:
                own[i] = memo.get((*t["pkey"], sets))
        used = own
        ints: list = []

        def span(values) -> "runtime.Span":
            off = len(ints)
            ints.extend(values)
            return runtime.Span(off, len(values))

        entries = (runtime.Expected * len(self.parts))()
        presets = []
        index = d._device_index(d.device)
        for e, t, pre in zip(entries, self.parts, used):
            nodes, outs = t["given"]
            e.nodes, e.order, e.outputs, e.device = span(nodes), span([n.index for n in t["nodes"]]), span(outs), index
            if pre is not None and pre[0] is d.caps and pre[1] is d.device and pre[2] is d.small_device:
                key, plan, dev, hit = pre[3:]
                e.preset_key = span(memoryview(key).cast("i").tolist())
                e.preset = C.pointer(hit[1])
                presets.append((plan, dev, hit))
            else:
                presets.append(None)
        arr = (C.c_int32 * max(1, len(ints)))(*ints)
        self.tables[sets] = (d.caps, d.device, d.small_device, self.version, entries, arr, presets)
        return entries, arr, presets

    def keep(self, sets: tuple, index: int, preset: tuple, d=None) -> None:
        """Partition ``index``'s latest plan_for answer on settings ``sets`` (as _PRESETS'
        values), planned for Delegate ``d``."""
        own = self.presets.get(sets)
        if own is not None and own[index] is not preset:
            own[index] = preset
            self.version += 1
            refresh(self.tokens, d)  # the runtime's copies hand the old preset
