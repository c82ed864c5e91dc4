"""Pictures of what litecl did, each one offline file: the graph as litecl placed it
(``litecl inspect MODEL --html OUT``: HTML with inline SVG, no script, no font to fetch)
and a few invokes on a timeline (``litecl bench MODEL --trace OUT``: Chrome trace-event
JSON, which Perfetto and chrome://tracing open).

The graph is drawn in the order LiteRT runs it (order.partition, LiteRT's partitioner, with
keep_order's marks where the delegate kept the model's order), one row per node, top to
bottom and then the next column; each litecl partition is a box around its nodes. The
timeline comes from Delegate.profile_log: each command's OpenCL profiling event, read by
the C runtime after the partition's wait (backend/runtime.py).
"""
from __future__ import annotations

import html
import json
import math
import time

from .ops.dtypes import BY_NAME
from .order import partition as _partition

__all__ = ["write_graph_page", "graph_steps", "trace_invokes", "trace_events", "write_trace"]

#: how a node runs -> (row fill, bar colour, legend): Okabe-Ito colours, which the
#: colour-blind tell apart
KINDS = {"opencl": ("#d4e8f7", "#0072B2", "litecl OpenCL"),
         "kept": ("#f0f0f0", "#E69F00", "CAST/ADD kept on LiteRT (hover: why)"),
         "litert": ("#f0f0f0", "#9a9a9a", "LiteRT"),
         "delegate": ("#d2efe5", "#009E73", "another delegate (applied after litecl)")}
#: layout in px: a node's row, a column's width, the partition label's tab, columns at most
ROW, COL_W, TAB, COLS, GAP = 16, 236, 32, 5, 14
CSS = """body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}h1{font-size:18px;margin:0 0 4px}
h2{font-size:14px;margin:18px 0 6px}p{margin:2px 0}.key span{display:inline-block;margin-right:14px}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;border-radius:2px}
svg text{font:11px system-ui,sans-serif;fill:#222}svg .io{fill:#0b4f80}svg .p{font-weight:bold;font-size:10px;fill:#0072B2}
"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _nbytes(operand: dict) -> int:
    """Bytes LiteRT holds for an operand (inspect's {"dtype", "shape"}; sub-byte types packed)."""
    dt = BY_NAME.get(operand.get("dtype") or "")
    if dt is None or operand.get("shape") is None:
        return 0
    n = math.prod(operand["shape"])
    return -(-n * dt.packed_bits // 8) if dt.packed_bits else n * dt.itemsize


def _size(n: int) -> str:
    """Bytes in a few characters: 512 B, 108 KiB, 1.2 MiB."""
    if n < 1024:
        return f"{n} B"
    k = n / 1024
    return f"{k:.3g} KiB" if k < 1024 else f"{k / 1024:.3g} MiB"


# -- the graph ----------------------------------------------------------------------------

#: LiteRT's own might_have_side_effect marks (subgraph.cc, OpMightHaveSideEffect): a node
#: with a resource tensor, IF, WHILE, CALL_ONCE; its partitioner keeps those in plan order
_SIDE_EFFECT_OPS = ("IF", "WHILE", "CALL_ONCE")


def _side_effect(sg, n) -> bool:
    return n.op in _SIDE_EFFECT_OPS or any(sg.tensors[t].type_name == "RESOURCE" for t in (*n.inputs, *n.outputs) if t >= 0)


def graph_steps(sg, rows: dict, kept_order: bool) -> list:
    """Subgraph ``sg``'s nodes as LiteRT runs them with litecl's partitions: a node index
    for each node LiteRT runs (or another delegate), ("partition", number, [node indices])
    for each litecl partition, at its first node. ``rows``: node index -> inspect's row
    (placement() with operands); ``kept_order``: the delegate kept LiteRT's nodes in the
    model's order (subgraph_records)."""
    mine = [rows.get(n.index, {}).get("partition") is not None for n in sg.nodes]
    marked = [n.index for n in sg.nodes if (kept_order and not mine[n.index]) or _side_effect(sg, n)]
    _, order = _partition([(n.inputs, n.outputs) for n in sg.nodes], mine, marked)
    steps, boxes = [], {}
    for i in order:
        if not mine[i]:
            steps.append(i)
            continue
        p = rows[i]["partition"]
        if p not in boxes:
            boxes[p] = ("partition", p, [])
            steps.append(boxes[p])
        boxes[p][2].append(i)
    return steps


def other_delegate_nodes(interp, sg, litecl: set) -> set:
    """Subgraph 0's nodes another delegate runs (one applied after litecl, XNNPACK under
    --reference xnnpack): LiteRT appends a node per delegated subset after the model's
    nodes; its subset is what its outputs are computed from, back to its inputs. Empty
    where LiteRT's wrapper does not tell."""
    w = getattr(interp, "_interpreter", None)
    try:
        extra = [(set(w.NodeInputs(k)), list(w.NodeOutputs(k))) for k in range(len(sg.nodes), w.NumNodes())]
    except Exception:  # noqa: BLE001  (another LiteRT wrapper: no colour for other delegates)
        return set()
    producer = {t: n.index for n in sg.nodes for t in n.outputs}
    out: set = set()
    for stop, todo in extra:
        got: set = set()
        while todo:
            t = todo.pop()
            i = producer.get(t)
            if i is not None and t not in stop and i not in got:
                got.add(i)
                todo += [x for x in sg.nodes[i].inputs if x >= 0]
        if not got & litecl:
            out |= got
    return out


def _crossing(sg, members: list, rows: dict) -> tuple[dict, dict]:
    """Per node of a partition, the operands crossing its boundary: ({node: inputs from
    LiteRT}, {node: outputs to LiteRT}); constants (uploaded once) left out."""
    inside = set(members)
    made = {t for i in members for t in sg.nodes[i].outputs}
    outside = {t for n in sg.nodes if n.index not in inside for t in n.inputs} | set(sg.outputs)
    ins: dict = {}
    outs: dict = {}
    seen: set = set()
    for i in members:
        for o in rows[i]["inputs"]:
            t = o["index"]
            if t >= 0 and t not in made and t not in seen and not sg.tensors[t].is_constant:
                seen.add(t)
                ins.setdefault(i, []).append(o)
        outs[i] = [o for o in rows[i]["outputs"] if o["index"] in outside]
    return ins, outs


def _operands(sg, tensors) -> str:
    return ", ".join(f"{sg.tensors[t].type_name.lower()}{list(sg.tensors[t].shape)}" for t in tensors if t >= 0)


def _listed(what: str, ops: list) -> list[str]:
    return [f"{what}: {o['name']} {o['dtype']}{o['shape']} = {_nbytes(o):,} B" for o in ops]


def _node_title(sg, i: int, row: dict | None, kind: str, ins: list, outs: list) -> str:
    n = sg.nodes[i]
    if row and row.get("inputs") is not None:  # a CAST/ADD: the shapes it ran at (inspect's rows; --inputs)
        ops = [", ".join(f"{o['dtype']}{list(o['shape'])}" for o in row[k]) for k in ("inputs", "outputs")]
    else:  # another node: its declared shapes
        ops = [_operands(sg, n.inputs), _operands(sg, n.outputs)]
    lines = [f"node {i}: {n.op}  {ops[0]} -> {ops[1]}"]
    if kind == "opencl":
        lines.append(f"litecl OpenCL, partition {row['partition']}")
        how = [row["kernel"] or "planned at invoke (its input shapes are known only then)"]
        how += ["folded: constant inputs, computed once"] * bool(row.get("folded"))
        how += [f"fused into one kernel with nodes {row['fused_with']}"] * bool(row.get("fused_with"))
        lines.append("kernel: " + "; ".join(how))
        lines += _listed("in from LiteRT", ins) + _listed("out to LiteRT", outs)
    elif kind == "kept":
        lines.append(f"LiteRT: {row['reason']}")
    else:
        lines.append((row or {}).get("reason") or "another delegate runs it" if kind == "delegate" else "LiteRT runs it")
    return "\n".join(lines)


def _node(x: int, y: int, sg, i: int, rows: dict, kind: str, ins=(), outs=()) -> str:
    """One node's row: colour bar, index and op (with its output type on litecl's nodes),
    the bytes crossing a partition boundary (down: in, up: out) at the right."""
    fill, bar, _ = KINDS[kind]
    row, n = rows.get(i), sg.nodes[i]
    marks = " ".join(s for s in (f"\u2193{_size(sum(map(_nbytes, ins)))}" if ins else "",
                                 f"\u2191{_size(sum(map(_nbytes, outs)))}" if outs else "") if s)
    label = f"{i} {n.op}" + (f" {row['outputs'][0]['dtype']}" if row and row["outputs"] else "")
    room = (COL_W - TAB - 12 - 6 * len(marks)) // 6  # 11-px text: about 6 px a character
    label = label if len(label) <= room else label[:max(int(room) - 1, 1)] + "\u2026"
    part = f' data-partition="{row["partition"]}"' if kind == "opencl" else ""
    w = COL_W - TAB
    return (f'<g class="node" data-index="{i}" data-kind="{kind}"{part}>'
            f'<title>{_e(_node_title(sg, i, row, kind, ins, outs))}</title>'
            f'<rect x="{x + TAB}" y="{y}" width="{w}" height="{ROW - 2}" fill="{fill}"/>'
            f'<rect x="{x + TAB}" y="{y}" width="4" height="{ROW - 2}" fill="{bar}"/>'
            f'<text x="{x + TAB + 8}" y="{y + 11}">{_e(label)}</text>'
            + (f'<text class="io" x="{x + COL_W - 4}" y="{y + 11}" text-anchor="end">{marks}</text>' if marks else "")
            + "</g>")


def _box(x: int, y: int, sg, step, rows: dict, si: int) -> str:
    """A litecl partition: a box around its nodes' rows, its number in the tab."""
    _, p, members = step
    ins, outs = _crossing(sg, members, rows)
    nin, nout = sum(len(v) for v in ins.values()), sum(len(v) for v in outs.values())
    bin_, bout = (sum(_nbytes(o) for v in d.values() for o in v) for d in (ins, outs))
    h = len(members) * ROW + 4
    title = (f"litecl partition {p} (subgraph {si}): {len(members)} node(s) {', '.join(map(str, members))}\n"
             f"in from LiteRT: {nin} tensor(s), {bin_:,} B; out to LiteRT: {nout} tensor(s), {bout:,} B")
    body = "".join(_node(x, y + 2 + k * ROW, sg, i, rows, "opencl", ins.get(i, ()), outs.get(i, ()))
                   for k, i in enumerate(members))
    return (f'<g class="partition" data-partition="{p}" data-nodes="{" ".join(map(str, members))}">'
            f'<title>{_e(title)}</title><rect x="{x}" y="{y}" width="{COL_W}" height="{h - 2}" rx="4" '
            f'fill="#eef6fc" stroke="#0072B2" stroke-width="1.5"/>'
            f'<text class="p" x="{x + 4}" y="{y + 13}">P{p}</text>{body}</g>')


def _columns(heights: list) -> tuple[list, int, int]:
    """Each block's (column, y) flowing top to bottom, then the next column, at most COLS
    columns, no block split: (places, columns, column height in px)."""
    cap = max(max(heights), math.ceil((sum(heights) + 2 * len(heights)) / COLS))
    while True:
        col, y, places = 0, 0, []
        for h in heights:
            if y and y + h > cap:
                col, y = col + 1, 0
            places.append((col, y))
            y += h + 2
        if col < COLS:
            return places, col + 1, cap
        cap += ROW


def _svg(sg, si: int, steps: list, rows: dict, others: set) -> str:
    heights = [ROW if isinstance(s, int) else len(s[2]) * ROW + 4 for s in steps]
    places, ncols, cap = _columns(heights or [ROW])
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" data-subgraph="{si}" width="{ncols * (COL_W + GAP) - GAP + 2}" '
           f'height="{cap + 6}" role="img"><g transform="translate(1,1)">']  # the boxes' strokes inside
    for s, (c, y) in zip(steps, places):
        x = c * (COL_W + GAP)
        if isinstance(s, int):
            kind = "delegate" if s in others else "kept" if s in rows else "litert"
            out.append(_node(x, y, sg, s, rows, kind))
        else:
            out.append(_box(x, y, sg, s, rows, si))
    return "\n".join(out) + "</g></svg>"


def write_graph_page(path, interp, nodes: list, keep: set, *, title: str, facts: list) -> None:
    """Write inspect's page to ``path``: per subgraph in ``keep`` its nodes in execution
    order, coloured by where they run (litecl OpenCL, LiteRT, another delegate), litecl's
    partitions boxed, tensors crossing a partition boundary marked with their bytes,
    each CAST/ADD's kernel or reason on hover. ``nodes``: inspect's rows (placement()
    with operands); ``facts``: lines said under the title (device, the Replacing lines).
    Raises OSError where the file cannot be written."""
    records = {r["subgraph"]: r for r in interp.delegate.subgraph_records(id(interp))}
    key = "".join(f'<span><i style="background:{bar}"></i>{_e(what)}</span>' for _, bar, what in KINDS.values())
    parts = [f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>litecl inspect: {_e(title)}'
             f"</title><style>{CSS}</style></head><body><h1>{_e(title)}</h1>"
             + "".join(f"<p>{_e(f)}</p>" for f in facts)
             + f'<p class="key">{key}<span>\u2193 / \u2191 bytes into / out of a partition per invoke '
             "(P: litecl partition; hover a node or box for details)</span></p>"]
    for si in sorted(keep):
        sg = interp._model.subgraphs[si]
        rows = {r["index"]: r for r in nodes if r["subgraph"] == si}
        litecl = {i for i, r in rows.items() if r["partition"] is not None}
        others = other_delegate_nodes(interp, sg, litecl) if si == 0 else set()
        steps = graph_steps(sg, rows, records.get(si, {}).get("kept_order", False))
        boxes = sum(not isinstance(s, int) for s in steps)
        parts.append(f"<h2>subgraph {si}{' ' + _e(sg.name) if sg.name else ''}: {len(sg.nodes)} nodes in "
                     f"execution order (top to bottom, then the next column): {len(litecl)} on litecl OpenCL in "
                     f"{boxes} partitions, {len(others)} on another delegate, "
                     f"{len(sg.nodes) - len(litecl) - len(others)} on LiteRT</h2>")
        parts.append(_svg(sg, si, steps, rows, others))
    # a name that is not UTF-8 (a file name Linux allows: its bytes as surrogates) is
    # written escaped, not refused halfway through the page
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        f.write("\n".join(parts) + "\n</body></html>\n")


# -- the timeline -------------------------------------------------------------------------

#: invokes bench --trace records
TRACE_RUNS = 3
#: what the trace's event names mean (its otherData)
LEGEND = {"invoke N": "one run: set the inputs, LiteRT's invoke, read the outputs",
          "partition N": "a litecl partition's invoke on the host (binding LiteRT's tensors, enqueueing, waiting); "
                         "on an OpenCL queue's thread, its commands from first start to last end",
          "wait": "the host blocked on OpenCL (clWaitForEvents, clFinish)",
          "stage in / stage out": "the host's memcpy into / out of pinned staging memory (GPUs)",
          "LiteRT": "the host between partitions: LiteRT's own nodes, and Python before and after the invoke",
          "write / read / copy": "host-to-device / device-to-host / device copies (none where the device reads "
                                 "LiteRT's memory in place)"}


def trace_invokes(delegate, run, runs: int = TRACE_RUNS) -> list:
    """Call ``run()`` ``runs`` times with ``delegate.profile`` on: per call ((start, end)
    perf_counter_ns, [profile_log's dicts of the partition invokes it made])."""
    was, out = delegate.profile, []
    delegate.profile = True
    try:
        for _ in range(runs):
            delegate.profile_log.clear()
            t0 = time.perf_counter_ns()
            run()
            out.append(((t0, time.perf_counter_ns()), list(delegate.profile_log)))
    finally:
        delegate.profile = was
    return out


def _timed(run, runs: int) -> list:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        run()
        out.append((t0, time.perf_counter_ns()))
    return out


#: ns each event is shrunk by per nesting depth, at both ends: readers turn microseconds
#: into ns with a rounding error of about 1 ns (Perfetto truncates ts * 1000), so a child
#: that ends where its parent does, or a span that starts where the one before it ends,
#: could read as overlapping; 2 ns a level keeps them nested at any such rounding
SLACK_NS = 2


def trace_events(invokes: list, names: dict, alone: list = ()) -> list:
    """Chrome trace events (complete "X" events, microseconds from the first invoke, on
    perf_counter's clock) of ``invokes`` (trace_invokes'): process 1 thread 1, the host:
    each invoke, in it each litecl partition (in it its waits and staging copies) and LiteRT's
    spans between them; a thread per OpenCL device: each partition's commands (copies,
    kernels) from its profiling events, the device clock anchored at the partition's first
    enqueue (its queued time read as the host time just before it). ``names``: context
    address -> subgraph number; ``alone``: (start, end) ns of LiteRT alone's invokes
    (process 2). Metadata events name the processes and threads."""
    origin = invokes[0][0][0] if invokes else 0
    evs: list = []
    tids: dict = {}

    def x(name, t0, t1, depth, pid=1, tid=1, **args):
        cut = min(SLACK_NS * depth, (t1 - t0) // 2)
        evs.append({"name": name, "ph": "X", "ts": (t0 + cut - origin) / 1e3, "dur": (t1 - t0 - 2 * cut) / 1e3,
                    "pid": pid, "tid": tid, **({"args": args} if args else {})})

    dev_end: dict = {}
    for k, ((t0, t1), recs) in enumerate(invokes):
        x(f"invoke {k}", t0, t1, 0)
        at = t0
        for r in recs:
            si = names.get(r["ctx"], "?")
            label = f"partition {r['partition']}" + (f" (subgraph {si})" if si != 0 else "")
            if r["host"][0] > at:
                x("LiteRT", at, r["host"][0], 1)
            x(label, *r["host"], 1)
            for what, w0, w1 in r["spans"]:
                x(what, w0, w1, 2)
            at = r["host"][1]
            _device_spans(x, label, r, tids.setdefault(r["device"], len(tids) + 2), dev_end)
        if t1 > at:
            x("LiteRT", at, t1, 1)
    for k, (t0, t1) in enumerate(alone):
        x(f"invoke {k}", t0, t1, 0, pid=2)
    meta = [("process_name", 1, 0, "litecl (LiteRT with litecl's delegate)"), ("thread_name", 1, 1, "host")]
    meta += [("thread_name", 1, tid, f"OpenCL queue: {dev} (profiling events)") for dev, tid in tids.items()]
    meta += [("process_name", 2, 0, "LiteRT alone (same inputs)"), ("thread_name", 2, 1, "host")] * bool(alone)
    return [{"name": n, "ph": "M", "ts": 0, "pid": p, "tid": t, "args": {"name": v}} for n, p, t, v in meta] + evs


def _device_spans(x, label: str, rec: dict, tid: int, dev_end: dict) -> None:
    """A partition's commands on its device's thread, the device clock moved onto the
    host's: never before the host enqueued them, never before the thread's last span."""
    cmds = sorted((c for c in rec["commands"] if c[6] and c[7] >= c[6]), key=lambda c: c[6])  # a runtime may leave 0s
    if not cmds:
        return
    first = min(cmds, key=lambda c: c[5])
    shift = max(first[4] - first[5], dev_end.get(tid, 0) + 4 * SLACK_NS - cmds[0][6])
    start, end = cmds[0][6] + shift, max(c[7] for c in cmds) + shift
    x(label, start, end, 0, tid=tid)
    at = start
    for kind, what, n, nodes, _, queued, s, e in cmds:
        s1 = max(s + shift, at)  # an in-order queue: a runtime's overlap of a few ns is clamped
        at = max(e + shift, s1)
        args = {"nodes": list(nodes), "queued_to_start_us": (s - queued) / 1e3} if kind == "kernel" else {"bytes": n}
        x(f"kernel: {what}" if kind == "kernel" else f"{kind} {_size(n)}", s1, at, 1, tid=tid, **args)
    dev_end[tid] = end


def write_trace(path, delegate, run, *, names: dict, ref_run=None, about: dict | None = None) -> int:
    """Record TRACE_RUNS invokes of ``run`` (and of ``ref_run``, LiteRT alone) and write
    them as Chrome trace JSON to ``path`` ({"traceEvents", "displayTimeUnit",
    "otherData": ``about``}). Returns the number of events. Raises OSError where the file
    cannot be written."""
    invokes = trace_invokes(delegate, run)
    alone = _timed(ref_run, TRACE_RUNS) if ref_run is not None else []
    events = trace_events(invokes, names, alone)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms", "otherData": {**(about or {}), "legend": LEGEND}},
                  f, allow_nan=False)
    return len(events)
