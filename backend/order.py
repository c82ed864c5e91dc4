"""LiteRT's partitioning of a delegate's claim, simulated from the graph, for keep_order.

LiteRT's ReplaceNodeSubsetsWithDelegateKernels partitions the execution plan greedily
(tensorflow/lite/graph_info.cc, PartitionGraphIntoIndependentNodeSubsetsImpl): each node
subset is one kind (delegated or LiteRT's), its kind is that of the first ready node in
plan order, and it takes every node of its kind that is, or becomes, ready (sweeps over
the plan in order until none is added). So LiteRT's nodes that do not wait for a delegated
node run before the first partition, wherever the model put them. Nodes marked
``might_have_side_effect`` are chained in plan order by control edges; keep_order marks
LiteRT's nodes for the call to keep them in the model's order (Delegate's keep_order).

Everything here is pure: ``wiring`` is [(inputs, outputs)] per plan position (tensor
indices, -1 for an omitted input), ``mine`` the positions the delegate claims.
"""
from __future__ import annotations

import heapq

__all__ = ["partition", "same_partitions", "execution_order", "live_peak", "computed_once",
           "keep_order_pays"]


def partition(wiring, mine, marked=()) -> tuple[list[int], list[int]]:
    """LiteRT's greedy partitioning of a plan: (epoch of each plan position, the positions
    in the order the partitioned plan runs them). ``marked``: positions chained by control
    edges in plan order (might_have_side_effect). Within a subset LiteRT appends nodes
    in the order its sweeps reach them: by (sweep, position).

    Linear: the subset of an epoch is the closure of the ready nodes of its kind, so a
    worklist finds it; a node's sweep is the latest of its producers' in the same subset,
    plus one for a producer after it in the plan (the sweep that adds the producer has
    passed it)."""
    n = len(wiring)
    mine = [bool(m) for m in mine]
    marked_set = set(marked)
    producer: dict = {}
    for i, (_, outs) in enumerate(wiring):
        for t in outs:
            if t >= 0:
                producer[t] = i
    users: list[list[int]] = [[] for _ in range(n)]
    waits = [0] * n
    last = -1
    for i, (ins, _) in enumerate(wiring):
        deps = {producer[t] for t in ins if t >= 0 and t in producer}
        deps.discard(i)  # a node reading its own output (malformed): LiteRT would wait forever
        if i in marked_set:
            if last >= 0:
                deps.add(last)
            last = i
        waits[i] = len(deps)
        for p in deps:
            users[p].append(i)
    heaps: tuple[list[int], list[int]] = ([], [])
    for i in range(n):
        if not waits[i]:
            heaps[mine[i]].append(i)
    for h in heaps:
        heapq.heapify(h)
    epoch, sweep, tag, order = [-1] * n, [0] * n, [-1] * n, []
    e = 0
    while heaps[0] or heaps[1]:
        kind = mine[min(h[0] for h in heaps if h)]
        work = heaps[kind]
        done = []
        while work:
            i = heapq.heappop(work)
            epoch[i] = e
            if tag[i] != e:  # no producer in this subset: the first sweep
                sweep[i] = 0
            done.append(i)
            for u in users[i]:
                if mine[u] == kind:
                    if tag[u] != e:
                        tag[u], sweep[u] = e, 0
                    sweep[u] = max(sweep[u], sweep[i] + (i > u))
                waits[u] -= 1
                if not waits[u]:
                    heapq.heappush(heaps[mine[u]], u)
        order += sorted(done, key=lambda i: (sweep[i], i))
        e += 1
    return epoch, order


def same_partitions(mine, a, b) -> bool:
    """Whether epochs ``a`` and ``b`` group the claimed positions into the same subsets,
    in the same order."""
    pa = [a[i] for i in range(len(mine)) if mine[i]]
    pb = [b[i] for i in range(len(mine)) if mine[i]]
    rank = lambda p: {e: k for k, e in enumerate(sorted(set(p)))}  # noqa: E731
    ra, rb = rank(pa), rank(pb)
    return [ra[e] for e in pa] == [rb[e] for e in pb]


def execution_order(wiring, mine, epoch, order) -> list[tuple[tuple, tuple]]:
    """The partitioned plan as [(inputs, outputs)]: LiteRT's nodes as they are, each
    delegated subset one node reading what its nodes read from outside it and writing
    what they write that a node outside it reads or no node reads (LiteRT allocates
    those; the rest stay inside the partition)."""
    subset: dict = {}
    for i in order:
        if mine[i]:
            subset.setdefault(epoch[i], []).append(i)
    outside: dict = {}  # tensor -> the epochs of delegated subsets reading it, or None: a LiteRT node does
    for i, (ins, _) in enumerate(wiring):
        for t in ins:
            if not mine[i]:
                outside[t] = None
            elif outside.get(t, ()) is not None:
                outside.setdefault(t, set()).add(epoch[i])
    out = []
    for i in order:
        if not mine[i]:
            out.append((tuple(wiring[i][0]), tuple(wiring[i][1])))
            continue
        members = subset.pop(epoch[i], None)
        if members is None:
            continue
        made = {t for j in members for t in wiring[j][1]}
        ins = tuple(dict.fromkeys(t for j in members for t in wiring[j][0] if t not in made))
        outs = tuple(t for j in members for t in wiring[j][1]
                     if t not in outside or outside[t] is None or outside[t] - {epoch[i]})
        out.append((ins, outs))
    return out


def live_peak(steps, nbytes, constant) -> int:
    """The most bytes of non-constant tensors live at once over ``steps`` ([(inputs,
    outputs)] in execution order): a tensor lives from the step that writes it (the
    first step, for one no step writes: a graph input) to the last step that reads it
    (the last step, for one no step reads: a graph output). ``nbytes(t)``, ``constant(t)``:
    a tensor's size and whether it is a constant (no arena memory)."""
    written, read = {}, {}
    for k, (ins, outs) in enumerate(steps):
        for t in outs:
            written.setdefault(t, k)
        for t in ins:
            read[t] = k
    end = len(steps) - 1
    delta = [0] * (len(steps) + 1)
    for t in {t for ins, outs in steps for t in (*ins, *outs) if t >= 0 and not constant(t)}:
        a = written.get(t, 0)
        b = max(read.get(t, end), a)
        delta[a] += nbytes(t)
        delta[b + 1] -= nbytes(t)
    peak = cur = 0
    for d in delta:
        cur += d
        peak = max(peak, cur)
    return peak


#: LiteRT kernels that compute their output once, at the first invoke, into persistent
#: memory (no arena bytes): DEQUANTIZE of a constant (dequantize.cc) and DENSIFY
#: (densify.cc). Measured (LiteRT 2.3.0): pose_detection's 106 DEQUANTIZEs of constants
#: and 38 DENSIFYs have kTfLiteArenaRwPersistent outputs after allocate_tensors; its 38
#: DEQUANTIZEs of DENSIFY outputs write the arena at every invoke.
BUILTIN_DEQUANTIZE, BUILTIN_DENSIFY = 6, 124


def computed_once(wiring, codes, constant) -> set:
    """Tensors written by a node LiteRT runs once (above): no arena bytes, no work per
    invoke. ``codes``: each plan position's builtin code."""
    out = set()
    for (ins, outs), code in zip(wiring, codes):
        if code == BUILTIN_DENSIFY or (code == BUILTIN_DEQUANTIZE and all(constant(t) for t in ins if t >= 0)):
            out.update(t for t in outs if t >= 0)
    return out


def keep_order_pays(wiring, mine, codes, nbytes, constant, greedy, kept) -> bool:
    """keep_order="auto"'s rule: keep LiteRT's nodes in the model's order where LiteRT's
    greedy partitioning (``greedy``: partition()'s answer) would make more bytes of
    per-invoke tensors live at once than the model's order (``kept``). LiteRT's arena
    planner places tensors by the partitioned plan, so nodes moved ahead of the first
    partition keep their outputs alive (and out of cache) until their readers run.
    Measured (PoCL, 2-core VM, load 0.5-2.5, against the greedy order in paired rounds,
    benchmarks/bench_keep_order.py, results/pocl/keep_order.md): pose_detection (live peak
    14.7 -> 6.5 MB, LiteRT's arena 15.6 -> 7.1 MB: 38 DEQUANTIZEs of DENSIFY'd weights
    moved ahead of the first ADD) -0.8..-1.9 ms per invoke of ~38-53 in six runs;
    face_detection_full_range_sparse (5.4 -> 3.6 MB) -0.28..-0.51 ms of ~12-17;
    frontend_sl_v1 (3.50 -> 3.37 MB) within noise. Where the peak is the same, keeping
    the order was neither faster nor slower (face_detection_short_range, rope,
    star_trek: -64..+31 us), and in 16 models it moves no node an invoke runs (only
    DEQUANTIZEs of constants: computed_once)."""
    once = computed_once(wiring, codes, constant)
    const = lambda t: constant(t) or t in once  # noqa: E731
    peak = lambda p: live_peak(execution_order(wiring, mine, *p), nbytes, const)  # noqa: E731
    return peak(greedy) > peak(kept)
