"""The delegate's Prepare: which CAST/ADD nodes litecl claims from LiteRT, and why not.

``prepare(delegate, ctx)`` is the TfLiteDelegate's Prepare (delegate.py's callback calls
it): it walks the execution plan, decides per node (``decide``: lowering.why_not on a
node view, the kernel generated at the declared shapes, the family's self-test, the
``ops=``/``nodes=`` choice, placement.py's cost model under ``placement="auto"``),
records the answer (Delegate._record), marks LiteRT's nodes for ``keep_order``
(``keep_order_marks``) and hands the claimed nodes to
ReplaceNodeSubsetsWithDelegateKernels. Decisions are memoised per context key (every
field Prepare reads, ``context_key``) and device (``_PREPARES``, ``_ORDERS``,
``_REASONS``, ``_AUTO``), and the reasons and plans across processes in litecl's cache
(``_prepared``). Module functions taking
the Delegate.
"""
from __future__ import annotations

import collections.abc
import ctypes as C
import numbers
import os
import pickle
import sys
import threading
import time

from . import abi
from . import recall
from . import order as _order
from . import placement as _placement
from . import selftest as _selftest
from . import views as _views
from .errors import LiteclError
from .lowering import why_not
from .model import Node
from .views import (_CONSTANT_ALLOC, _OPS, _Graph, _memo_put, _node_view, _plausible, _raw_node,
                    _raw_tensor, _Tensors, _tensor_view, node_key)


def takes(ops, nodes) -> tuple:
    """``Delegate(ops=, nodes=)`` checked: (frozenset of op names or None, {subgraph:
    frozenset of node indices} or None). Raises LiteclError naming what is wrong."""
    if ops is not None:
        if isinstance(ops, str) or not all(isinstance(o, str) for o in ops):
            raise LiteclError(f"ops must be a sequence of operator names such as ('CAST',), got {ops!r}")
        bad = sorted(set(ops) - set(_OPS.values()))
        if bad:
            raise LiteclError(f"ops names {', '.join(bad)}; litecl runs {', '.join(sorted(_OPS.values()))}")
        ops = frozenset(ops)
    if nodes is not None:
        def index(i) -> bool:  # an int or numpy integer (np.where's), not a bool
            return isinstance(i, numbers.Integral) and not isinstance(i, bool) and i >= 0
        ok = isinstance(nodes, dict) and all(
            index(k) and not isinstance(v, (str, bytes)) and isinstance(v, collections.abc.Iterable)
            and all(index(i) for i in v) for k, v in nodes.items())
        if not ok:
            raise LiteclError(f"nodes must map subgraph indices to node indices, e.g. {{0: [1, 5]}}, got {nodes!r}")
        nodes = {int(k): frozenset(int(i) for i in v) for k, v in nodes.items()}
    return ops, nodes


def decide(dlg, ctx, plan, si=None) -> tuple:
    """(sg, views, keys, rows, claim) of the CAST/ADD nodes of ``plan``: their node
    views and keys by index, a placement row each (also of those a delegate applied
    before litecl took), and the indices litecl takes. ``si``: the subgraph's index
    (for ``nodes``)."""
    c = ctx.contents
    tensors = _Tensors(ctx)
    sg = _Graph(tensors)
    views, keys, rows, claim = {}, {}, [], []
    visible = getattr(dlg._owner, "visible", frozenset())
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    get, node_r, reg_r, size = c.GetNodeAndRegistration, C.byref(node_p), C.byref(reg_p), c.tensors_size
    wiring = [] if dlg.placement_mode == "auto" else None  # auto's groups: every node's tensors
    found = []  # (index, view, _REASONS key, not_asked's reason)
    for i in plan:
        if get(ctx, i, node_r, reg_r) != abi.K_OK:
            raise LiteclError(f"LiteRT's GetNodeAndRegistration failed for node {i}")
        reg = reg_p.contents
        code = reg.builtin_code
        if wiring is not None:
            nd = node_p.contents
            wiring.append((i, abi.int_array(nd.inputs), abi.int_array(nd.outputs)))
        if code == abi.BUILTIN_DELEGATE:
            rows += _taken_by_other(ctx, node_p.contents, reg, C.addressof(dlg._struct))
        if code not in _OPS:
            continue
        raw = _raw_node(i, node_p.contents, code, int(reg.version))
        ts = tuple((t, _raw_tensor(c, t)) for t in (*raw[3], *raw[4]) if 0 <= t < size)
        hit = _views._NODE_VIEWS.get((raw, ts, size))
        if hit is None:
            n = _node_view(raw)
            _plausible(n, size)
            hit = _memo_put(_views._NODE_VIEWS, (raw, ts, size), (n, node_key(n, sg)))
        else:
            for t, r in ts:
                if t not in tensors._views:
                    v = _views._TENSOR_VIEWS.get((t, r))
                    tensors._views[t] = v if v is not None else _memo_put(
                        _views._TENSOR_VIEWS, (t, r), _tensor_view(t, r))
        n, nk = hit
        keys[i] = nk
        k = (nk, tuple(r[1] for _, r in ts), id(dlg.caps))  # one caps object per device and reference: _caps_for
        found.append((i, n, k, not_asked(dlg, n, i, si)))
    reasons = _reasons(dlg, sg, found)
    for (i, n, _, _), reason in zip(found, reasons):
        if not reason and visible:
            named = [tensors[t].name for t in n.outputs if t >= 0 and (t, tensors[t].name) in visible]
            if named:
                reason = (f"writes {named[0]!r}, a signature tensor that is no subgraph input or "
                          "output: LiteRT must allocate it, which it does not inside a partition")
        views[i] = n
        rows.append({"index": i, "op": n.op, "placement": "opencl" if not reason else "litert",
                     "reason": reason, "partition": None, "kernel": "", "device": ""})
        if not reason:
            claim.append(i)
    if claim and dlg.placement_mode == "auto":
        # auto's answer depends on the claimed nodes (keys: wiring, types, quantization),
        # their tensors' current shapes, the subgraph's wiring (groups) and the device's
        # costs and the LiteRT kernel priced (reference: "xnnpack" shares builtin's caps):
        # memoised on those (a LiteRT Interpreter of the user's, which names no model, pays
        # it once)
        costs = dlg._device_costs()
        wiring = tuple(wiring)
        akey = (id(costs), id(dlg.caps), dlg.reference, dlg.memory.in_place, dlg.fuse, wiring,
                tuple((i, keys[i], tuple(tensors[t].shape for t in (*views[i].inputs, *views[i].outputs)
                                         if t >= 0)) for i in claim))
        hit = _AUTO.get(akey)
        if hit is None or hit[0] is not costs:
            hit = _memo_put(_AUTO, akey, (costs, _placement.auto_keep_on_litert(
                ctx, [views[i] for i in claim], sg, dlg, wiring)))
        keep = hit[1]
        for r in rows:
            if r["index"] in keep:
                r["placement"], r["reason"] = "litert", keep[r["index"]]
        claim = [i for i in claim if i not in keep]
    rows.sort(key=lambda r: r["index"])
    return sg, views, keys, rows, claim


def _reasons(dlg, sg, found: list) -> list:
    """The reason each node of ``found`` ((index, view, _REASONS key, not_asked's reason)
    items) stays on LiteRT, "" where it need not: not_asked's, else why_not, the kernel
    generated at the declared shapes, the family's self-test on each device a partition
    may run on. Kept in _REASONS and, for a later process, in litecl's cache, one entry
    per set of nodes (``_prepared``) that also keeps their partitions' plans (``sg.kept``,
    kernels.plan_partition): a first Interpreter of a model reads its reasons and plans
    instead of generating every kernel twice (MoveNet: decide 16 -> 5 ms, session 25)."""
    asked = [x for x, f in enumerate(found) if not f[3]]
    got = [_REASONS.get(found[x][2]) for x in asked]
    if None in got:
        entry = _prepared(dlg, [found[x][2] for x in asked])
        if entry is not None and len(entry[1]["reasons"]) == len(asked):
            got = entry[1]["reasons"]
        else:
            t0 = time.perf_counter()
            got = [r if r is not None else
                   why_not(n, sg, dlg.caps) or _source_problem(n, sg, dlg.caps)
                   or _selftest.refusal((dlg.device, dlg.small_device), n, sg,
                                        [sg.tensors[t].shape for t in n.inputs], dlg.caps)
                   for r, n in zip(got, (found[x][1] for x in asked))]
            if time.perf_counter() - t0 < PREPARED_MIN_SECONDS:
                entry = None
            elif entry is not None:
                entry[1].update(reasons=got, plans={})
                keep_prepared(entry)
        sg.kept = entry
        if len(_REASONS) + len(asked) >= 65536:
            _REASONS.clear()
        for x, r in zip(asked, got):
            _REASONS[found[x][2]] = r
    out = [f[3] for f in found]
    for x, r in zip(asked, got):
        out[x] = r
    return out


#: Sets of nodes decided in less than this (seconds) get no cache entry, nor their plans:
#: an entry costs a read of ~0.1-0.3 ms, and tests make thousands of tiny models (the
#: suite wrote 11,000 entries, 65 MB, without this rule; model.MODEL_CACHE_MIN_SECONDS)
PREPARED_MIN_SECONDS = 0.002


def _prepared(dlg, ks: list):
    """(cache key, {"reasons": [...], "plans": {plan key: PartitionPlan}}) of the nodes
    of keys ``ks`` on ``dlg``'s devices, as kept by an earlier process (empty when none);
    None when litecl's cache is off."""
    from .cache import cache_root, load_blob  # noqa: PLC0415

    if cache_root() is None:
        return None
    try:
        key = _reasons_key(dlg, ks)
    except OSError:  # a source file gone (litecl replaced while it runs): nothing kept
        return None
    blob = load_blob("prepared", key)
    try:
        entry = pickle.loads(blob) if blob is not None else None
    except Exception:  # noqa: BLE001 (an entry written by another litecl: decided again)
        entry = None
    ok = (isinstance(entry, dict) and isinstance(entry.get("reasons"), list)
          and all(isinstance(r, str) for r in entry["reasons"]) and isinstance(entry.get("plans"), dict))
    return key, entry if ok else {"reasons": [], "plans": {}}


def keep_prepared(entry) -> None:
    """Write a Prepare's cache entry (``_prepared``) back after it changed."""
    from .cache import store_blob  # noqa: PLC0415

    try:
        blob = pickle.dumps(entry[1], protocol=pickle.HIGHEST_PROTOCOL)
    except RuntimeError:  # another thread's plan added meanwhile: its own write follows
        return
    store_blob("prepared", entry[0], blob)


def _reasons_key(dlg, ks: list) -> str:
    """The cache key of the reasons of nodes ``ks`` (_REASONS keys: node key and tensors
    as LiteRT holds them) on ``dlg``'s devices and caps: cache.derived_key over the code
    that decides (_deciding's files) and the self-test's fault switch."""
    from .cache import derived_key  # noqa: PLC0415

    return derived_key(dlg.caps, [d.device for d in (dlg.device, dlg.small_device) if d is not None],
                       _deciding(), _selftest.fault_family(), [k[:2] for k in ks])


def _deciding() -> tuple:
    """The source files a node's reason and kernels follow from: ops/ (its .py files and
    self-test tables), lowering.py, selftest.py and compare.py (the self-test's judge),
    claims.py, kernels.py, views.py (the node views lowering reads)."""
    global _DECIDING
    if _DECIDING is None:
        from . import ops  # noqa: PLC0415

        ops_dir, here = os.path.dirname(ops.__file__), os.path.dirname(__file__)
        _DECIDING = (*sorted(os.path.join(ops_dir, f) for f in os.listdir(ops_dir)
                             if f.endswith(".py") or f.startswith("selftest_") and f.endswith(".json")),
                     *(os.path.join(here, f) for f in ("lowering.py", "selftest.py", "compare.py", "claims.py",
                                                       "kernels.py", "views.py")))
    return _DECIDING


_DECIDING = None


def not_asked(dlg, n, i: int, si) -> str:
    """Why ``ops``/``nodes`` keep node ``i`` (view ``n``) of subgraph ``si`` off
    litecl; "" where they do not."""
    if dlg.ops is not None and n.op not in dlg.ops:
        return f"not among ops= ({', '.join(sorted(dlg.ops))})"
    if dlg.nodes is not None and i not in dlg.nodes.get(si, ()):
        return f"not among nodes= of subgraph {si}"
    return ""


def prepare(dlg, ctx) -> int:
    """The TfLiteDelegate's Prepare for ``dlg`` (litecl.Delegate) on context ``ctx``."""
    from .delegate import DELEGATE_NAME, _Expected, _registration  # noqa: PLC0415

    c = ctx.contents
    plan_p = C.POINTER(abi.TfLiteIntArray)()
    if c.GetExecutionPlan(ctx, C.byref(plan_p)) != abi.K_OK:
        raise LiteclError("LiteRT's GetExecutionPlan failed")
    plan = abi.int_array(plan_p)
    if plan and max(plan) >= len(plan) and already_delegated(dlg, ctx, plan):
        return abi.K_OK  # keep the first application's record (placement())
    size = c.tensors_size
    si = None
    if dlg.nodes is not None:
        si = _subgraph_index(C.addressof(c))
        if si == 0:  # once per interpreter
            _check_subgraphs_named(C.addressof(c), dlg.nodes)
    if si is not None and dlg.nodes.get(si):
        n_model = _model_nodes(ctx, plan)
        bad = sorted(i for i in dlg.nodes[si] if i >= n_model)
        if bad:  # a typo that would leave every node to LiteRT without a word
            raise LiteclError(f"nodes= names node {bad[0]} of subgraph {si}, which has {n_model} node(s) "
                              f"(0..{n_model - 1})")
        _named_nodes_are_lowered(ctx, si, dlg.nodes[si])
    costs = dlg._device_costs() if dlg.placement_mode == "auto" else None  # auto follows the device's costs
    # the entry holds ``costs``, so no other object takes its id while it lives
    mkey = (context_key(dlg._rt, ctx), id(dlg.caps), id(costs), dlg.placement_mode, dlg.reference, dlg.fuse,
            dlg.ops, None if dlg.nodes is None else (si, tuple(sorted(dlg.nodes.get(si, ())))),
            getattr(dlg._owner, "visible", frozenset()))
    memo = _PREPARES.get(mkey)
    got = _recall(ctx, memo)
    if got is None:
        got = decide(dlg, ctx, plan, si)
        # the last item: keep_order's marks -> the partitions LiteRT formed (_Expected)
        memo = _memo_put(_PREPARES, mkey, (*_remember(*got), costs, {}), _PREPARES_MAX)
    sg, views, keys, rows, claim = got
    addr = C.addressof(c)
    with dlg._lock:
        freed = dlg._rt.lcl_recall_freed(dlg._key, addr, 0)
        if freed and getattr(dlg._owner, "fetched", 0) > freed:
            # every partition of this address was freed, then this thread asked for the
            # delegate's pointer: a new interpreter's context at a freed one's address (a
            # resize's undo and redo ask for none), which says its line again (the
            # runtime's recalled Prepares follow this rule too: litecl_delegate.c)
            dlg._rt.lcl_announce(dlg._key, addr, 0)
        rec = {"rows": rows, "views": views, "keys": keys, "nodes": len(plan), "claimed": len(claim),
               "partitions": 0, "kept_order": False, "order_dropped": [], "sg": sg,
               "owner": getattr(dlg._owner, "key", None)}
        dlg._record(addr, rec)
    if not claim:
        recall.offer(dlg, mkey, memo, (), None, None, claim, len(plan))
        return abi.K_OK
    arr = _int_array(tuple(claim))
    marked, hit = (), None
    if dlg.keep_order:
        # the decision depends on the graph, its shapes and flags (all in the context key: a
        # second construction saved ~5 ms on pose_detection's 291 nodes)
        okey = (mkey, tuple(claim), dlg.keep_order)
        hit = _ORDERS.get(okey)
        if hit is None:
            marked = keep_order_marks(dlg, ctx, plan, claim)
            hit = _memo_put(_ORDERS, okey, (marked, _other_kernels(ctx, plan) if marked else []), _PREPARES_MAX)
        marked = hit[0]
        rec["order_dropped"] = list(hit[1])
        _flag(dlg._rt, ctx, marked, True)
    rec["kept_order"] = bool(marked)
    expected = memo[-1].get(marked)
    if expected is None:
        expected = memo[-1][marked] = _Expected()
    state, status = None, abi.K_ERROR
    try:
        state = expected.begin(dlg, rec)
        reg = _registration(dlg._rt)
        status = c.ReplaceNodeSubsetsWithDelegateKernels(
            ctx, reg, C.cast(arr, C.POINTER(abi.TfLiteIntArray)), C.cast(C.addressof(dlg._struct), abi.Dlg))
    finally:
        _flag(dlg._rt, ctx, marked, False)
        expected.end(dlg, rec, addr, state, status == abi.K_OK)
    if status != abi.K_OK:
        raise LiteclError("LiteRT refused litecl's node subsets (ReplaceNodeSubsetsWithDelegateKernels)")
    recall.offer(dlg, mkey, memo, marked, expected, hit, claim, len(plan))  # the next one in C
    # said once per context, whichever thread prepares it
    say = not dlg.quiet and dlg._rt.lcl_announce(dlg._key, addr, 1)
    if say:
        sys.stderr.write(f"INFO: Replacing {len(claim)} out of {len(plan)} node(s) with delegate "
                         f"({DELEGATE_NAME}) node, yielding {rec['partitions']} partitions for "
                         "the whole graph.\n")
        sys.stderr.flush()
    return abi.K_OK


def keep_order_marks(dlg, ctx, plan, claim) -> tuple:
    """The nodes of ``plan`` to mark might_have_side_effect for keep_order: LiteRT's
    nodes whose flag is clear, where marking them leaves litecl's partitions as LiteRT
    forms them unmarked and, under "auto", where order.keep_order_pays says so; else ()."""
    c = ctx.contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    get, node_r, reg_r = c.GetNodeAndRegistration, C.byref(node_p), C.byref(reg_p)
    taken = set(claim)
    wiring, flagged, codes = [], [], []
    for i in plan:
        if get(ctx, i, node_r, reg_r) != abi.K_OK:
            raise LiteclError(f"LiteRT's GetNodeAndRegistration failed for node {i}")
        nd = node_p.contents
        wiring.append((abi.int_array(nd.inputs), abi.int_array(nd.outputs)))
        flagged.append(bool(nd.might_have_side_effect))
        codes.append(reg_p.contents.builtin_code)
    mine = [i in taken for i in plan]
    was = [k for k, f in enumerate(flagged) if f]
    # LiteRT's own nodes only: a kernel node of a delegate applied before litecl is
    # not marked, so the order around it is LiteRT's greedy one (order_dropped)
    marks = [k for k in range(len(plan)) if flagged[k] or not (mine[k] or codes[k] == abi.BUILTIN_DELEGATE)]
    if len(marks) == len(was):
        return ()
    greedy, kept = _order.partition(wiring, mine, was), _order.partition(wiring, mine, marks)
    if not _order.same_partitions(mine, greedy[0], kept[0]):
        return ()
    if dlg.keep_order == "auto":
        ts, size = c.tensors, c.tensors_size
        if not _order.keep_order_pays(wiring, mine, codes, lambda t: ts[t].bytes if t < size else 0,
                                      lambda t: t >= size or ts[t].allocation_type in _CONSTANT_ALLOC,
                                      greedy, kept):
            return ()
    return tuple(plan[k] for k in marks if not flagged[k])


def already_delegated(dlg, ctx, plan) -> bool:
    """Whether a node of ``plan`` is a partition kernel of this delegate: LiteRT
    applying it a second time to the same graph (``experimental_delegates=[d, d]``).
    Only called where a delegate changed the plan (a node index past its length:
    LiteRT appends delegate kernel nodes), so a plain Prepare pays one max()."""
    c = ctx.contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    mine = C.addressof(dlg._struct)
    for i in plan:
        if i < len(plan):
            continue
        if c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p)) != abi.K_OK:
            continue
        if node_p.contents.delegate == mine:  # a void*: its address
            if not dlg.quiet:
                sys.stderr.write("INFO: litecl: this graph's nodes were already given to this litecl "
                                 "delegate (it is in experimental_delegates twice); the second "
                                 "application claims none\n")
            return True
    return False


def _named_nodes_are_lowered(ctx, si: int, nodes) -> None:
    """Raise LiteclError where ``nodes`` (nodes= of subgraph ``si``) names a node of an
    operator litecl does not lower (a misremembered index claimed nothing without a word)."""
    from .lowering import LOWERINGS  # noqa: PLC0415
    from .model import OP_NAMES  # noqa: PLC0415

    c = ctx.contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    for i in sorted(nodes):
        if c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p)) != abi.K_OK:
            raise LiteclError(f"LiteRT's GetNodeAndRegistration failed for node {i}")
        name = OP_NAMES.get(reg_p.contents.builtin_code, f"operator {reg_p.contents.builtin_code}")
        if name not in LOWERINGS:
            raise LiteclError(f"nodes= names node {i} of subgraph {si}, a {name} node: litecl takes "
                              f"{' and '.join(LOWERINGS)} nodes only")


def _model_nodes(ctx, plan) -> int:
    """The model's node count in this context: the execution plan's length where no
    delegate applied before, else the first delegate kernel's index (LiteRT keeps every
    model node at its index and appends kernels from N on; as litecl_delegate.c
    fingerprint_matches reads it)."""
    c = ctx.contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    kernels = [i for i in plan if i >= len(plan)
               and c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p)) == abi.K_OK
               and reg_p.contents.builtin_code == abi.BUILTIN_DELEGATE]
    return min(kernels) if kernels else len(plan)


def _subgraph_index(addr: int) -> int:
    """The index in its interpreter of the subgraph whose context is at ``addr``, read in
    Prepare through LiteRT's AcquireSubgraphContext (Delegate._record says how). Raises
    LiteclError where the context has none (``nodes=`` cannot be told apart)."""
    c = abi.TfLiteContext.from_address(addr)
    if c.AcquireSubgraphContext and c.ReleaseSubgraphContext:
        acquire = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int, C.POINTER(abi.Ctx))(c.AcquireSubgraphContext)
        release = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int)(c.ReleaseSubgraphContext)
        ctx, got = C.cast(addr, abi.Ctx), abi.Ctx()
        for k in range(1 << 16):
            if acquire(ctx, k, C.byref(got)) != abi.K_OK:
                break
            if C.cast(got, C.c_void_p).value == addr:
                return k
            release(ctx, k)
    raise LiteclError("nodes= needs LiteRT's AcquireSubgraphContext, which this LiteRT does not give "
                      "(its subgraphs cannot be told apart)")


def _check_subgraphs_named(addr: int, named) -> None:
    """Raise LiteclError where subgraph ``max(named)`` (nodes=' subgraph indices) is not in
    the interpreter of the context at ``addr`` (LiteRT's subgraphs are numbered 0..n-1).
    Only the highest is asked for. A missing one makes LiteRT's AcquireSubgraphContext
    report its failed check ("tflite/core/subgraph.cc:722 static_cast<size_t>(subgraph_index)
    < subgraphs_->size() was not true."), which LiteRT's reporter put ahead of litecl's
    line: the context's ReportError is silenced around the question (the callback runs
    on the thread preparing this interpreter, which nothing else reports through then)."""
    top = max(named, default=0)
    c = abi.TfLiteContext.from_address(addr)
    if top == 0 or not (c.AcquireSubgraphContext and c.ReleaseSubgraphContext):
        return
    acquire = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int, C.POINTER(abi.Ctx))(c.AcquireSubgraphContext)
    release = C.CFUNCTYPE(C.c_int, abi.Ctx, C.c_int)(c.ReleaseSubgraphContext)
    ctx, got = C.cast(addr, abi.Ctx), abi.Ctx()
    field = C.c_void_p.from_address(addr + abi.TfLiteContext.ReportError.offset)
    said = field.value
    field.value = C.cast(_SILENT, C.c_void_p).value
    try:
        found = acquire(ctx, top, C.byref(got)) == abi.K_OK
    finally:
        field.value = said
    if found:
        release(ctx, top)
        return
    raise LiteclError(f"nodes= names subgraph {top}, which this model does not have")


@abi.REPORT_ERROR
def _SILENT(ctx, fmt, arg):  # noqa: N802 (a C callback's constant); _check_subgraphs_named's
    pass


def _taken_by_other(ctx, node, reg, mine: int) -> list:
    """Placement rows of the CAST/ADD nodes a delegate kernel node of another delegate
    (one applied before litecl) replaced: its TfLiteDelegateParams.nodes_to_replace."""
    if not node.builtin_data or node.delegate == mine:
        return []
    name = reg.custom_name.decode("utf-8", "replace") if reg.custom_name else "another delegate"
    params = C.cast(node.builtin_data, C.POINTER(abi.TfLiteDelegateParams)).contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    rows = []
    for j in abi.int_array(params.nodes_to_replace):
        c = ctx.contents
        if c.GetNodeAndRegistration(ctx, j, C.byref(node_p), C.byref(reg_p)) != abi.K_OK:
            continue
        op = _OPS.get(reg_p.contents.builtin_code)
        if op is not None:
            rows.append({"index": j, "op": op, "placement": "delegate", "reason": f"taken by {name}, a delegate "
                         "applied before litecl", "partition": None, "kernel": "", "device": ""})
    return rows


def _other_kernels(ctx, plan) -> list:
    """[(node index, name)] of the delegate kernel nodes in ``plan``, before litecl's own
    replace any (another delegate's)."""
    c = ctx.contents
    node_p, reg_p = C.POINTER(abi.TfLiteNode)(), C.POINTER(abi.TfLiteRegistration)()
    out = []
    for i in plan:
        if c.GetNodeAndRegistration(ctx, i, C.byref(node_p), C.byref(reg_p)) == abi.K_OK \
                and reg_p.contents.builtin_code == abi.BUILTIN_DELEGATE:
            name = reg_p.contents.custom_name
            out.append((i, name.decode("utf-8", "replace") if name else "another delegate"))
    return out


def _flag(rt, ctx, nodes, value: bool) -> None:
    """Set might_have_side_effect to ``value`` on ``nodes`` (node indices) of ``ctx``
    (the runtime library ``rt``'s lcl_flag_nodes: each node looked up by index every time,
    since ReplaceNodeSubsetsWithDelegateKernels can move LiteRT's node vector; a write
    through an old address corrupted the heap, a crash some interpreters later)."""
    if nodes:
        rt.lcl_flag_nodes(ctx, C.byref(_int_array(nodes), 4), len(nodes), int(value))


_ARRAYS: dict = {}  # a tuple of ints -> its TfLiteIntArray (ctypes; LiteRT only reads them)


def _int_array(values: tuple):
    """``values`` as a TfLiteIntArray (abi.new_int_array), one per tuple: Prepare hands
    the same claims and marks to LiteRT at every construction."""
    got = _ARRAYS.get(values)
    if got is None:
        got = _memo_put(_ARRAYS, values, abi.new_int_array(values, owned_by_litert=False), _PREPARES_MAX)
    return got


_REASONS: dict = {}  # (node key, shapes, caps) -> why it stays on LiteRT ("": it need not)
_AUTO: dict = {}  # (costs, caps, reference, in place, fuse, wiring, claimed nodes and shapes) -> (costs, auto's keep)
#: (context_key, device, costs, placement, reference, fuse, ops, nodes, visible) ->
#: ``_remember``'s record of what Prepare decided there. A second interpreter of a model
#: (litecl's or LiteRT's own) then reads the context in one C call.
_PREPARES: dict = {}
_PREPARES_MAX = 1024  # entries of _PREPARES and _ORDERS: a key holds the context's bytes (MoveNet: ~10 KB)
#: (_PREPARES' key, claimed nodes, keep_order) -> (the nodes keep_order_marks marks, the
#: delegate kernels before litecl's where it marks any: order_dropped)
_ORDERS: dict = {}


def _remember(sg, views, keys, rows, claim) -> tuple:
    """What ``_recall`` needs to redo a Prepare's decisions without deciding."""
    return dict(sg.tensors._views), views, keys, tuple(dict(r) for r in rows), tuple(claim)


def _recall(ctx, memo):
    """``decide``'s answer from ``memo`` (``_remember``), or None when there is none. The
    memo's key holds the context's key (``context_key``), so nothing needs checking."""
    if memo is None:
        return None
    tviews, views, keys, rows, claim, _, _ = memo
    tv = _Tensors(ctx)
    tv._views.update(tviews)
    # node views and keys are only read after Prepare: shared with the memo; a row is
    # written only by its partition ("partition", "kernel"): the claimed nodes' are copies
    if claim:
        taken = set(claim)
        rows = [dict(r) if r["index"] in taken else r for r in rows]
    return _Graph(tv), views, keys, list(rows), list(claim)


def context_key(rt, ctx) -> bytes:
    """Everything Prepare reads of context ``ctx``, as bytes: the execution plan's nodes,
    the CAST/ADD nodes' tensors in full, every tensor's allocation type and size (the
    runtime library ``rt``'s lcl_context_key, litecl_delegate.c, one C call). Contexts with
    equal keys get equal decisions, in any interpreter of the process, LiteRT's own
    included. Raises LiteclError when LiteRT fails a lookup."""
    buf = getattr(_KEY_BUF, "buf", None)
    if buf is None:
        buf = _KEY_BUF.buf = (C.c_int32 * 4096)()
    while True:
        n = rt.lcl_context_key(ctx, buf, len(buf))
        if n < 0:
            raise LiteclError("LiteRT's GetExecutionPlan or GetNodeAndRegistration failed")
        if n <= len(buf):
            return C.string_at(buf, 4 * n)
        buf = _KEY_BUF.buf = (C.c_int32 * n)()


_KEY_BUF = threading.local()  # each thread's room for lcl_context_key


def _source_problem(n: Node, sg, caps) -> str:
    """Generate the node's kernel at its declared shapes: a node whose kernel cannot be
    generated (a shape the launch cannot reach) stays on LiteRT, with the reason."""
    from .lowering import kernel_spec  # noqa: PLC0415
    from .ops.broadcast import NotBroadcastable  # noqa: PLC0415

    shapes = [sg.tensors[t].shape for t in n.inputs]
    if any(len(s) == 0 and sg.tensors[t].shape_signature != s for s, t in zip(shapes, n.inputs)):
        return ""
    try:
        kernel_spec(n, sg, shapes, caps)
    except ValueError as e:
        # inputs that do not broadcast at declared shapes meant to vary (-1): the shapes
        # they run at decide (the planner refuses those, as LiteRT's own ADD): kept off
        # here, the node stayed on LiteRT after a resize that fixed them (a fresh user's)
        if isinstance(e, NotBroadcastable) and any(-1 in tuple(sg.tensors[t].shape_signature or ()) for t in n.inputs):
            return ""
        return str(e)
    return ""
