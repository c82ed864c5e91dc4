"""What each Prepare of a Delegate decided, per TfLiteContext, and the reports read from it.

``_Records`` is litecl.Delegate's base class: ``_record`` keeps a context's latest
Prepare (claims.prepare calls it) with its place (interpreter, subgraph); placement(),
subgraph_records(), graph_info(), taken() and partitions() read those records, per
interpreter (``owner``) or for every one. ``_record_rows`` and ``_template`` read a record
for the partition kernels (delegate.py _Planner).
"""
from __future__ import annotations

import ctypes as C

from . import recall, runtime
from .errors import LiteclError

#: Prepare records a Delegate keeps of contexts no owner names
_MAX_RECORDS = 4096


class _Events:
    """``next(_EVENTS)``: the process's next event number (litecl_delegate.c
    lcl_next_event, which the Prepares the runtime recalls take too): orders Prepares,
    partition frees and pointer fetches (lcl_recall_freed, _interpreter_key)."""

    def __next__(self) -> int:
        return runtime.load().lcl_next_event()


_EVENTS = _Events()


class _Records:
    """litecl.Delegate's records of its Prepares (``self._records``, ``self._owned``,
    ``self._parts``, ``self._lock``: made by Delegate.__init__; the Replacing lines said:
    the runtime's lcl_announce) and the reports read from them. Each report first records
    the Prepares the runtime recalled (recall.drain)."""

    def placement(self, owner=None) -> list[dict]:
        """One dict per CAST/ADD node of the latest Prepare of each subgraph LiteRT gave
        this delegate: {"interpreter", "subgraph", "index", "op", "placement":
        "opencl"|"litert"|"delegate" (another delegate, applied before litecl, took it),
        "reason" (why litecl does not run it; "" on OpenCL), "partition" (its
        delegated partition's number in that subgraph, or None), "kernel" (what runs),
        "device" (the OpenCL device name its partition runs on: the delegate's device, or
        its small_device for a small partition; "" until planned and on LiteRT)}.
        Records stay until the Delegate goes, also those of a LiteRT interpreter that has
        been deleted (LiteRT tells a delegate of no deletion when no partition kernel is
        left to free), up to 4096 subgraphs of LiteRT's own interpreters: past that, half
        go, those of interpreters known deleted (a new one took their address) first, then
        the oldest, and the numbers below count what is left; litecl.Interpreter drops its
        own when it closes.

        ``interpreter`` numbers the LiteRT interpreters (LiteRT's, tf.lite's or
        litecl.Interpreter's) this delegate was applied to, 0, 1, ... in the order of
        their first Prepare, among those it holds records of; ``subgraph`` is the
        model's subgraph index within that interpreter (LiteRT's
        AcquireSubgraphContext, common.h, read at Prepare). A Delegate shared by two
        interpreters of one model gives rows of interpreter 0 and 1, each from subgraph
        0. ``owner`` (what litecl.Interpreter passes) keeps one interpreter's rows; the
        numbers stay those of the whole delegate. A number is a position at this call, not
        an identity: when an earlier interpreter's records go (litecl.Interpreter's close
        or deletion), the later ones' numbers drop by one."""
        self._settle(owner)  # recall.drain first
        with self._lock:
            return [{**r, "interpreter": n, "subgraph": si}
                    for a, n, si in self._numbered(owner) for r in self._records[a]["rows"]]

    def _settle(self, owner) -> None:
        """Bring ``owner``'s partitions' plans and rows up to date (_Planner.settle: a
        partition the runtime prepared with the plan handed it at init)."""
        from .delegate import _LOCK  # noqa: PLC0415

        recall.drain()
        with self._lock:
            addrs = self._addrs(owner)
        with _LOCK:
            parts = [p for a in addrs for p in self._parts.get(a, {}).values()]
        for p in parts:
            p.settle()

    def _numbered(self, owner) -> list[tuple]:
        """[(context address, interpreter number, subgraph index)] of ``owner``'s
        contexts (None: every one), in the order of their first Prepare (under
        self._lock). Interpreters are numbered by their first context among all records."""
        first: dict = {}  # interpreter key -> its first Prepare
        for r in self._records.values():
            k = r["place"][0]
            first[k] = min(first.get(k, r["born"]), r["born"])
        number = {k: n for n, k in enumerate(sorted(first, key=first.__getitem__))}
        got = [(a, number[self._records[a]["place"][0]], self._records[a]["place"][1])
               for a in self._addrs(owner)]
        return sorted(got, key=lambda x: (x[1], self._records[x[0]]["born"]))

    def subgraph_records(self, owner=None) -> list[dict]:
        """Per subgraph, in placement()'s order: {"interpreter", "subgraph" (as
        placement() numbers them), "context" (the TfLiteContext address; a partition's
        ``ctx_addr``), "nodes" (M), "claimed" (N), "partitions" (P), "kept_order"
        (whether keep_order kept LiteRT's nodes in the model's order), "order_dropped"
        (then, the kernel nodes of delegates applied before litecl, around which LiteRT's
        greedy order stays: [(node index, name)]), "rows" (placement()'s rows of it,
        copies), "sg" (the tensor views Prepare read:
        ``sg.tensors[t]``)} of the latest Prepare of each context ("context" None: a
        freed interpreter's, whose address a new one took). export reads these
        with partitions(); a partition's ``plan`` is None until LiteRT prepared it (a
        node whose shapes are known only at invoke is planned there)."""
        recall.drain()
        with self._lock:
            return [{"interpreter": n, "subgraph": si, "context": a if isinstance(a, int) else None,
                     **{k: self._records[a][k] for k in ("nodes", "claimed", "partitions", "kept_order",
                                                         "order_dropped", "sg")},
                     "rows": [{**r, "interpreter": n, "subgraph": si} for r in self._records[a]["rows"]]}
                    for a, n, si in self._numbered(owner)]

    def taken(self, owner=None) -> frozenset:
        """{(subgraph, node index)} of the nodes on OpenCL, subgraphs numbered as
        placement() numbers them within their interpreter: pass ``owner`` where the
        delegate serves several interpreters (their subgraph 0s share the number 0)."""
        recall.drain()
        with self._lock:
            return frozenset((si, r["index"]) for a, _, si in self._numbered(owner)
                             for r in self._records[a]["rows"] if r["placement"] == "opencl")

    def graph_info(self, owner=None) -> list[dict]:
        """Per subgraph, in placement()'s order and numbering: {"interpreter",
        "subgraph", "nodes" (M), "claimed" (N), "partitions" (P), "kept_order",
        "order_dropped" (subgraph_records says what they are)}."""
        recall.drain()
        with self._lock:
            return [{"interpreter": n, "subgraph": si,
                     **{k: self._records[a][k] for k in ("nodes", "claimed", "partitions", "kept_order",
                                                         "order_dropped")}}
                    for a, n, si in self._numbered(owner)]

    def partitions(self, owner=None) -> list:
        """The live partition kernels (_Planner) of every interpreter using this
        delegate (or of ``owner``'s), with their current plans (export and bench read these)."""
        from .delegate import _LOCK  # noqa: PLC0415

        recall.drain()
        with self._lock:
            addrs = self._addrs(owner)
        out = []
        with _LOCK:
            for a in addrs:
                out += sorted(self._parts.get(a, {}).values(), key=lambda p: p.number)
        for p in out:
            p.settle()
        return out

    def has_partitions(self, owner) -> bool:
        """Whether ``owner``'s contexts have a live partition kernel (partitions(), cheaper).
        A Prepare the runtime recalled is asked in its log first (recall.logged), not
        recorded: the drain that records it (~15 us a model, ~200 us for lyra_quantizer's
        48 partitions, measured) is left to whoever needs the records (placement(), a
        partition's plan or free), as for LiteRT's own Interpreter."""
        from .delegate import _DEFERRED, _LOCK, _free_deferred  # noqa: PLC0415

        if _DEFERRED:  # frees a collection inside a lock put off (delegate._FREE): done now
            _free_deferred()
        logged = recall.logged(self._key, owner)
        if logged:
            return True
        if logged is None:  # a long log, or a drain under way: recorded first
            recall.drain()
        with self._lock:
            addrs = self._owned.get(owner, ())
            with _LOCK:
                return any(self._parts.get(a) for a in addrs)

    def forget(self, owner) -> None:
        """Drop the records of ``owner``'s contexts (litecl.Interpreter's, when it is
        deleted: its key, id(interpreter), may name another one later). Called by a garbage
        collection inside this thread's own locked section (which may be iterating them),
        it is done by the next forget or Prepare instead."""
        if isinstance(owner, int) and not isinstance(owner, bool):  # its Prepares not recorded yet: no owner
            recall.forgotten(self, owner)
        self.__dict__.setdefault("_forget_later", []).append(owner)
        # never waiting: a collection runs this inside any lock (a partition's free holding
        # delegate._LOCK against has_partitions holding this one and waiting for _LOCK)
        if not self._lock._is_owned() and self._lock.acquire(blocking=False):
            try:
                self._forget_now()
            finally:
                self._lock.release()

    def _forget_now(self) -> None:
        """forget()'s work for every owner it was asked for (under self._lock, iterating nothing)."""
        later = self.__dict__.get("_forget_later")
        while later:
            for a in self._owned.pop(later.pop(), ()):
                self._records.pop(a, None)
                self._rt.lcl_announce(self._key, a, 0)

    def _addrs(self, owner) -> list:
        """Context addresses of ``owner`` (None: of every interpreter), in placement()'s order.

        ``owner`` is litecl.Interpreter's key (``id(interpreter)``, an int) or a
        litecl.Interpreter; anything else (a LiteRT or tf.lite Interpreter, which has no
        key: its rows are told apart by their "interpreter" number) raises LiteclError
        instead of matching nothing."""
        if owner is None:
            return list(self._records)
        if not isinstance(owner, int) or isinstance(owner, bool):
            if getattr(owner, "_litecl", None) is self:
                owner = id(owner)  # a litecl.Interpreter of this delegate
            elif hasattr(owner, "_litecl") and type(owner).__module__.startswith("litecl"):
                raise LiteclError(f"this litecl.Interpreter uses another Delegate ({owner._litecl!r}), "
                                  "not this one: ask its own, interpreter.delegate")
            else:
                raise LiteclError(
                    f"owner must be a litecl.Interpreter or its id(), got {type(owner).__module__}."
                    f"{type(owner).__name__}; for LiteRT's own Interpreter call this without owner: "
                    "each row's \"interpreter\" number tells the interpreters apart")
        return list(self._owned.get(owner, ()))

    def _interpreter_key(self, first: int, k: int, rec: dict, fetched: int) -> tuple:
        """The key of the interpreter whose subgraph 0's context is at ``first``, for
        ``rec``, the Prepare of its subgraph ``k``: ("interpreter", first, generation). A
        new interpreter can get a freed one's address; subgraph 0's Prepare starts a new
        generation where a delegate pointer was fetched (an interpreter constructed, on
        this thread) since that address's last Prepare, so the freed one's other
        subgraphs' rows keep their own number instead of joining the new one's; a
        resize's Prepare fetches none and keeps it (``fetched``: the preparing thread's
        last fetch of the pointer). Subgraph k > 0 takes subgraph 0's."""
        zero = self._records.get(first)
        same = zero is not None and zero["place"][0][:2] == ("interpreter", first)
        if k > 0:
            return zero["place"][0] if same else ("interpreter", first, 0)
        if same and fetched < zero["prepared"]:
            return zero["place"][0]
        return ("interpreter", first, rec["prepared"])

    def _record(self, addr: int, rec: dict, place=None, event=None, fetched=None) -> None:
        """Keep ``rec`` as context ``addr``'s latest Prepare (under self._lock), with its
        place, rec["place"]: (its interpreter's key, its subgraph index there). An address
        another owner's context had (a freed interpreter's, reused) starts anew at the end;
        past _MAX_RECORDS records the oldest of no owner go (a LiteRT Interpreter the user
        made tells litecl nothing when it is freed).

        The place comes from LiteRT: during Prepare, ``AcquireSubgraphContext(ctx, k)``
        (common.h) gives subgraph k's context of the same interpreter; the key is
        subgraph 0's context address and the index the k that gives ``addr``. Acquire
        switches subgraph k to its delegate context and Release back to its kernel one,
        so every k below ours is released and ours (in Prepare: in its delegate context
        already) is not: every context LiteRT made reads byte for byte as before
        (measured, LiteRT 2.3.0 and tf.lite 2.21; tests/test_delegate.py). k never passes
        ours, so LiteRT reports no out-of-range index. Where the context has no such
        function, the key is the owner and the index the context's place among that
        owner's (the order LiteRT prepares a model's subgraphs in). A Prepare the runtime
        recalled (recall.py) gives the (k, subgraph 0's address) it read, its event and its
        thread's fetch (``place``, ``event``, ``fetched``)."""
        self._forget_now()  # the owners a collection left (forget)
        if place is None:
            first = C.c_void_p()
            place = (self._rt.lcl_subgraph_place(addr, C.byref(first)), first.value)  # litecl_delegate.c
            event, fetched = next(_EVENTS), getattr(self._owner, "fetched", 0)
        k = place[0]
        rec["prepared"] = event
        place = (self._interpreter_key(place[1], k, rec, fetched), k) if k >= 0 else None
        old = self._records.get(addr)
        rec["born"] = rec["prepared"]
        if old is not None and place is not None and old["place"][0] != place[0]:
            # a freed interpreter's context at this address: its record stays, under a key
            # no context has (placement() keeps its rows and numbers it by its first Prepare)
            self._records.pop(addr)
            if old["owner"] is None:
                self._records[("freed", addr, old["prepared"])] = old
        elif old is not None and old["owner"] == rec["owner"]:
            rec["born"] = old["born"]  # the same context prepared again (a resize)
        if old is not None and old["owner"] != rec["owner"]:
            self._records.pop(addr, None)
            self._rt.lcl_announce(self._key, addr, 0)
            mine = self._owned.get(old["owner"])
            if mine is not None:
                mine.pop(addr, None)
                if not mine:
                    del self._owned[old["owner"]]
        if place is None:
            key = ("owner", rec["owner"])
            place = old["place"] if old is not None and old["place"][0] == key else (
                key, sum(r["place"][0] == key for r in self._records.values()))
        rec["place"] = place
        self._records[addr] = rec
        if rec["owner"] is not None:
            self._owned.setdefault(rec["owner"], {})[addr] = None
        elif len(self._records) > _MAX_RECORDS:  # freed interpreters' first, then the oldest
            freed = [a for a in self._records if not isinstance(a, int)]
            for a in [*freed, *(a for a, r in self._records.items() if r["owner"] is None and a != addr)]:
                if a not in self._records:
                    continue
                del self._records[a]
                if isinstance(a, int):
                    self._rt.lcl_announce(self._key, a, 0)
                if len(self._records) <= _MAX_RECORDS // 2:
                    break


def _record_order(rec: dict) -> dict:
    """node index -> its position in the execution plan, of a Prepare's record (made once
    per record: every partition of the subgraph asks)."""
    got = rec.get("order")
    if got is None:
        got = rec["order"] = {i: k for k, i in enumerate(rec["views"])}
    return got


def _record_rows(rec: dict) -> dict:
    """node index -> its placement() row, of a Prepare's record (made once per record)."""
    got = rec.get("by_index")
    if got is None:
        got = rec["by_index"] = {r["index"]: r for r in rec["rows"]}
    return got


def _template(rec: dict, nodes: tuple, outs: tuple) -> tuple:
    """(nodes in the execution plan's order, inputs, outputs, plan memo key) of the
    partition LiteRT makes of ``nodes`` writing ``outs``, from a Prepare's record ``rec``
    (_Planner: the same for every record a Prepare memo recalls)."""
    # in the execution plan's order: LiteRT lists them in its partitioner's order, which
    # may put a node before one the model runs first (CAST z -> x listed before the ADD
    # reading x)
    views, order = rec["views"], _record_order(rec)
    ordered = tuple(views[i] for i in sorted(nodes, key=order.__getitem__))
    produced, inputs = set(), []
    for n in ordered:
        inputs += [t for t in n.inputs if t >= 0 and t not in produced]
        produced.update(n.outputs)
    # the plan memo's key: each node's index with its key, since a plan's launches name
    # their nodes (placement()'s kernel rows, kernel_times_ns): two models with equal
    # tensors whose ADD is node 0 in one and node 1 in the other plan apart
    key = tuple((n.index, rec["keys"][n.index]) for n in ordered)
    return list(ordered), tuple(dict.fromkeys(inputs)), [t for t in outs if t >= 0], key
