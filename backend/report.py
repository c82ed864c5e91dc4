"""The sweep's report, from DIR/results.jsonl alone: DIR/report.md and DIR/report.html.

The HTML is one offline file (inline CSS and SVG, no script): a model x device matrix
(exact / differs / error / refused; the header row and the model column stay in view as
it scrolls) whose cells give their reason on hover (title) and link to its row in the
reasons table and to the model's inspect page (the graph as litecl placed it, written by
the sweep); then plots: litecl's median time over LiteRT's per model and device, the
CAST/ADD nodes on OpenCL, and the per-partition cost in round-trip floors (bench rows).
The Markdown has the same tables, and the bench numbers as a table (no inline SVG there).
"""
from __future__ import annotations

import html
import math
import os
from pathlib import Path

from .errors import LiteclError

__all__ = ["write_report"]

STATUSES = ("exact", "differs", "error", "refused")
#: the reasons tables, by their anchors' prefix
TITLES = {"why": "Reasons", "kept": "CAST/ADD nodes kept on LiteRT"}
#: a dot per device column, colours the colour-blind tell apart (Okabe-Ito)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}h1{font-size:18px;margin:0 0 4px}
h2{font-size:15px;margin:20px 0 6px}table{border-collapse:separate;border-spacing:0}
td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}
.scroll{max-height:70vh;overflow:auto;border:1px solid #ccc;display:inline-block;max-width:100%}
.matrix thead th{position:sticky;top:0;background:#f4f4f4;z-index:2;white-space:nowrap}
.matrix .m{position:sticky;left:0;background:#fff;z-index:1;max-width:30em;overflow:hidden;
text-overflow:ellipsis;white-space:nowrap;font-weight:normal}.matrix thead th.m{z-index:3;background:#f4f4f4}
.m small{color:#888;margin-left:.6em}.matrix td{text-align:center;white-space:nowrap}td a{color:inherit}
a.g{font-size:11px;color:#0072B2}.exact{background:#d9f0d3}.differs{background:#fdd49e}.error{background:#f4a582}.refused{background:#e0e0e0}
tr:target td{outline:2px solid #0072B2}.matrix tbody tr{scroll-margin-top:26px}.why td{vertical-align:top}svg text{font:11px system-ui,sans-serif}
"""


def latest(rows: list[dict]) -> list[dict]:
    """The last row of each model path x device x kind x reference x placement."""
    from .sweep import identity  # noqa: PLC0415

    return list({identity(r): r for r in rows}.values())


def _column(r: dict) -> str:
    k = r["key"]
    extra = [x for x, default in ((k["reference"], "builtin"), (k["placement"], "all")) if x != default]
    return r["device"] + (f" ({', '.join(extra)})" if extra else "")


def _kept(r: dict) -> list[str]:
    """The reason of each CAST/ADD node of a check row that stays on LiteRT."""
    return [f"{n['op']}: {n['reason']}" for n in r.get("placement", []) if n["placement"] != "opencl"]


class _Data:
    """The rows as a matrix: models (those with an error or a difference first, then by
    name), device columns (first seen first), cells,
    bench rows, and each distinct reason with its anchor."""

    def __init__(self, rows: list[dict]):
        self.rows = rows
        checks = [r for r in rows if r["kind"] == "check"]
        self.cols = list(dict.fromkeys(_column(r) for r in checks))
        self.names = {r["path"]: r["name"] for r in rows}
        self.cell = {(r["path"], _column(r)): r for r in checks}
        bad = {p for (p, _), r in self.cell.items() if r["status"] in ("error", "differs")}
        self.models = sorted(self.names, key=lambda p: (p not in bad, self.names[p], p))  # trouble first
        # rows stay in results.jsonl after their file goes (each sweep keeps the rows it did
        # not run): a model no longer on disk is marked, not shown as if just swept
        self.gone = {p for p in self.names if not os.path.lexists(p)}
        self.bench = {(r["path"], _column(r)): r for r in rows if r["kind"] == "bench"}
        # table (anchor prefix) -> reason -> [anchor, count, {model names}]
        self.reasons: dict = {"why": {}, "kept": {}}
        for r in checks:
            for table, texts in (("why", [f"{r['status']}: {r['reason']}"] if r["status"] != "exact" else []),
                                 ("kept", _kept(r))):
                for t in texts:
                    e = self.reasons[table].setdefault(t, [f"{table}-{len(self.reasons[table]) + 1}", 0, {}])
                    e[1] += 1
                    e[2][r["name"]] = None

    def anchor(self, r: dict) -> str | None:
        if r["status"] != "exact":
            return self.reasons["why"][f"{r['status']}: {r['reason']}"][0]
        kept = _kept(r)
        return self.reasons["kept"][kept[0]][0] if kept else None

    def hover(self, r: dict) -> str:
        """A cell's story in one line: status and reason, nodes, nodes kept and why, speed."""
        parts = [r["status"] + (f": {r['reason']}" if r["reason"] else "")]
        if "nodes" in r:
            parts.append(f"{r['opencl_nodes']} of {r['cast_add_nodes']} CAST/ADD nodes on OpenCL "
                         f"({r['nodes']} nodes, {r['partitions']} partitions)")
            kept = _kept(r)
            parts += [f"kept on LiteRT: {kept.count(t)}x {t}" for t in dict.fromkeys(kept)]
        b = self.bench.get((r["path"], _column(r)))
        if b and b["status"] == "ok":
            parts.append(f"litecl/LiteRT median {b['ratio_median']:.2f}x")
        return "; ".join(parts) + f" [{r['name']} on {_column(r)}, {r['seconds']:.1f} s]"

    def tally(self, col: str) -> list[int]:
        return [sum(1 for m in self.models if (c := self.cell.get((m, col))) and c["status"] == s) for s in STATUSES]

    def series(self, rows: dict, value) -> dict:
        """{model path: {column: value(row)}} where ``value(row)`` is a finite number."""
        out: dict = {}
        for (path, col), r in rows.items():
            v = value(r)
            if isinstance(v, (int, float)) and math.isfinite(v):
                out.setdefault(path, {})[col] = float(v)
        return out

    def versions(self) -> str:
        ks = [r["key"] for r in self.rows]
        what = {"litecl": {f"{k['litecl']} (source {k['source']})" for k in ks}, "LiteRT": {k["litert"] for k in ks},
                "reference": {k["reference"] for k in ks}, "placement": {k["placement"] for k in ks}}
        return "; ".join(f"{name} {', '.join(sorted(v))}" for name, v in what.items())

    def reason_rows(self, limit: int):
        """(table title, [(anchor, reason, count, models text)]) of each non-empty table."""
        for prefix, table in self.reasons.items():
            if table:
                yield TITLES[prefix], [(a, t, n, ", ".join(list(ms)[:limit]) + (f" and {len(ms) - limit} more" if len(ms) > limit else ""))
                              for t, (a, n, ms) in table.items()]


def write_report(folder) -> tuple[Path, Path]:
    """Write FOLDER/report.md and FOLDER/report.html from FOLDER/results.jsonl; returns
    their paths. Raises LiteclError where the folder holds no results."""
    from .sweep import RESULTS, read_results  # noqa: PLC0415

    folder = Path(folder)
    rows = latest(read_results(folder))
    if not rows:
        raise LiteclError(f"no results in {folder / RESULTS}: run litecl sweep MODELS --device SPEC --out {folder} first")
    d = _Data(rows)
    md, page = folder / "report.md", folder / "report.html"
    # a model path that is not UTF-8 (its bytes as surrogates) is written escaped
    md.write_text(_markdown(d), encoding="utf-8", errors="backslashreplace")
    page.write_text(_html(d), encoding="utf-8", errors="backslashreplace")
    return md, page


def _gone(d: _Data) -> str:
    """The heading's note of models whose file is no longer on disk, or ""."""
    return f" ({len(d.gone)} of them no longer on disk, marked gone)" if d.gone else ""


def _md(text) -> str:
    """``text`` as one table cell of plain text: the cell separator escaped, HTML a
    Markdown viewer would render (a model file named <img onerror=...>) as entities."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\n", " "))


def _markdown(d: _Data) -> str:
    out = [f"# litecl sweep: {len(d.models)} models x {len(d.cols)} devices{_gone(d)}", "",
           f"From results.jsonl alone ({len(d.rows)} rows): {_md(d.versions())}. Plots: report.html.", "",
           "| device | " + " | ".join(STATUSES) + " |", "|---|" + "---:|" * len(STATUSES)]
    out += [f"| {_md(c)} | " + " | ".join(map(str, d.tally(c))) + " |" for c in d.cols]
    out += ["", "## Matrix", "", "| model | " + " | ".join(map(_md, d.cols)) + " |", "|---|" + "---|" * len(d.cols)]
    for m in d.models:
        rs = [d.cell.get((m, c)) for c in d.cols]
        out.append(f"| {_md(d.names[m])}{' (gone)' if m in d.gone else ''} | " + " | ".join(
            "" if r is None else (f"[{r['status']}](#{d.anchor(r)})" if d.anchor(r) else r["status"])
            + "".join(f" [{_md(t)}]({p})" for t, p in _pages(r)) for r in rs) + " |")
    for title, rows in d.reason_rows(5):
        out += ["", f"## {title}", "", "| # | reason | count | models |", "|---|---|---:|---|"]
        out += [f'| <a id="{a}"></a>{a} | {_md(t)} | {n} | {_md(ms)} |' for a, t, n, ms in rows]
    if d.bench:
        out += ["", "## Bench", "", "| model | device | litecl median us | LiteRT median us | litecl / LiteRT | "
                "partitions | floor us | floors per partition |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for (m, c), b in sorted(d.bench.items(), key=lambda kv: (d.names[kv[0][0]], kv[0][1])):
            if b["status"] != "ok":
                out.append(f"| {_md(d.names[m])} | {_md(c)} | {_md(b['status'] + ': ' + b['reason'])} | | | | | |")
                continue
            fpp = "-" if b["floors_per_partition"] is None else f"{b['floors_per_partition']:.2f}"
            name = d.names[m] + (f" (signature {b['signature']})" if b.get("signature") else "")
            out.append(f"| {_md(name)} | {_md(c)} | {b['litecl_median_us']:.0f} | {b['litert_median_us']:.0f} | "
                       f"{b['ratio_median']:.2f} | {b['partitions']} | {b['floor_us']:.1f} | {fpp} |")
    return "\n".join(out) + "\n"


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _pages(r: dict) -> list[tuple[str, str]]:
    """(label, path) of a check row's inspect pages (litecl inspect --html, one per signature)."""
    pages = r.get("pages") or []
    return [("graph" if len(pages) == 1 or sig is None else f"graph {sig}", path) for sig, path in pages]


def _cell(d: _Data, r: dict | None) -> str:
    if r is None:
        return "<td></td>"
    a = d.anchor(r)
    label = f'<a href="#{a}">{r["status"]}</a>' if a else r["status"]
    label += "".join(f' <a class="g" href="{_e(p)}" title="the graph as litecl placed it">{_e(t)}</a>' for t, p in _pages(r))
    return f'<td class="{r["status"]}" title="{_e(d.hover(r))}">{label}</td>'


def _html(d: _Data) -> str:
    name = {m: f"{_e(d.names[m].rsplit('/', 1)[-1])}{' (gone)' if m in d.gone else ''}"
               f"<small>{_e(d.names[m].rpartition('/')[0])}</small>" for m in d.models}
    body = "".join(f'<tr id="model-{i + 1}"><th class="m" title="{_e(m)}">{name[m]}</th>'
                   + "".join(_cell(d, d.cell.get((m, c))) for c in d.cols) + "</tr>" for i, m in enumerate(d.models))
    counts = "".join(f"<tr><th>{_e(c)}</th>" + "".join(f'<td class="{s}">{v}</td>' for s, v in zip(STATUSES, d.tally(c)))
                     + "</tr>" for c in d.cols)
    parts = [f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>litecl sweep</title>'
             f"<style>{CSS}</style></head><body><h1>litecl sweep: {len(d.models)} models &times; {len(d.cols)} "
             f"devices{_e(_gone(d))}</h1><p>From results.jsonl alone ({len(d.rows)} rows): {_e(d.versions())}. Hover a cell for "
             "its reason; its link leads to the reason's row below.</p>",
             "<table><tr><th>device</th>" + "".join(f"<th>{s}</th>" for s in STATUSES) + f"</tr>{counts}</table>",
             '<h2>Matrix</h2><div class="scroll"><table class="matrix"><thead><tr><th class="m">model</th>'
             + "".join(f"<th>{_e(c)}</th>" for c in d.cols) + f"</tr></thead><tbody>{body}</tbody></table></div>"]
    for title, rows in d.reason_rows(8):
        parts.append(f'<h2>{title}</h2><table class="why"><tr><th>#</th><th>reason</th><th>count</th><th>models</th></tr>'
                     + "".join(f'<tr id="{a}"><td>{a}</td><td>{_e(t)}</td><td>{n}</td><td>{_e(ms)}</td></tr>'
                               for a, t, n, ms in rows) + "</table>")
    nodes = d.series(d.cell, lambda r: r.get("opencl_nodes"))
    total = {p: max(r.get("cast_add_nodes", 0) for (q, _), r in d.cell.items() if q == p) for p in nodes}
    for title, series, opts in (
            ("litecl's median time over LiteRT's (bench rows; 1: as fast)",
             d.series(d.bench, lambda r: r.get("ratio_median")), {"scale": "log", "line": 1.0}),
            ("CAST/ADD nodes on OpenCL (dots), of the model's CAST/ADD nodes (grey bars)", nodes, {"bars": total}),
            ("per-partition cost in round-trip floors: (litecl - LiteRT median) / partitions / floor (bench rows)",
             d.series(d.bench, lambda r: r.get("floors_per_partition")), {"scale": "symlog", "line": 0.0})):
        parts.append(f"<h2>{_e(title)}</h2>" + (_dot_plot(series, d, **opts) if series else "<p>No rows to plot "
                                                "(time and floors come from bench rows: litecl sweep --bench).</p>"))
    return "\n".join(parts) + "\n</body></html>\n"


#: value -> axis position of each plot scale; symlog: log10(1 + |v|) with v's sign (negatives
#: and outliers of both signs on one readable axis)
SCALES = {"linear": lambda v: v, "log": math.log10,
          "symlog": lambda v: math.copysign(math.log10(1 + abs(v)), v)}


def _ticks(lo: float, hi: float, scale: str, px) -> list[float]:
    """Round values in [lo, hi] for the axis, at least 45 px apart (``px``: value -> x)."""
    if scale == "linear":
        step = 10 ** math.floor(math.log10((hi - lo) / 4))
        step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (step * m) <= 8)
        ts = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
    else:  # 1, 2, 5 times powers of ten (and 0, negatives on symlog); the powers alone where they are 3 or more
        ts = sorted({g * m * 10.0 ** e for e in range(-4, 8) for m in (1, 2, 5) for g in (1, -1)} | {0.0})
        ts = [t for t in ts if lo <= t <= hi and (t > 0 or scale == "symlog")]
        ones = [t for t in ts if t == 0 or math.log10(abs(t)).is_integer()]
        ts = ones if len(ones) >= 3 else ts
    out: list = []
    for t in ts:
        if not out or px(t) - px(out[-1]) >= 45:
            out.append(t)
    return out


def _dot_plot(series: dict, d: _Data, scale: str = "linear", line: float | None = None,
              bars: dict | None = None) -> str:
    """Inline SVG: a row per model (its name at the left), a dot per device column in that
    column's colour on one x axis (``scale``: a key of SCALES), each column 2 px lower than
    the one before (equal values stay visible); ``bars`` (model -> value) grey behind the
    dots; ``line``: a dashed vertical line at that x."""
    models = [m for m in d.models if m in series]
    cols = [(k, c) for k, c in enumerate(d.cols) if any(c in series[m] for m in models)]  # colours stay put
    f = SCALES[scale]
    vals = [f(v) for v in [v for m in models for v in series[m].values()] + list((bars or {}).values())
            + [line] * (line is not None) if v > 0 or scale != "log"]
    pad = 0.05 * ((max(vals) - min(vals)) or 1.0)
    lo, hi = min(vals) - pad, max(vals) + pad
    left, width, top, row = 300, 1200, 34, 14
    height = top + row * len(models) + 30

    def x(v):
        return left + (f(v) - lo) / (hi - lo) * (width - left - 20)
    inverse = {"linear": lambda t: t, "log": lambda t: 10 ** t,
               "symlog": lambda t: math.copysign(10 ** abs(t) - 1, t)}[scale]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    out += [f'<circle cx="{left + 8 + 180 * i}" cy="12" r="4" fill="{PALETTE[k % len(PALETTE)]}"/>'
            f'<text x="{left + 16 + 180 * i}" y="16">{_e(c[:26])}</text>' for i, (k, c) in enumerate(cols)]
    out += [f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top - 4}" y2="{height - 26}" stroke="#eee"/>'
            f'<text x="{x(t):.1f}" y="{height - 12}" text-anchor="middle">{t:g}</text>'
            for t in _ticks(inverse(lo), inverse(hi), scale, x)]
    if line is not None:
        out.append(f'<line x1="{x(line):.1f}" x2="{x(line):.1f}" y1="{top - 4}" y2="{height - 26}" stroke="#555" '
                   'stroke-dasharray="4 3"/>')
    for i, m in enumerate(models):
        y, name = top + row * i + row / 2, d.names[m]
        short = name if len(name) <= 46 else "\u2026" + name[-45:]
        out.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end"><title>{_e(m)}</title>{_e(short)}</text>')
        if bars and bars.get(m):  # linear scale
            out.append(f'<rect x="{x(0):.1f}" y="{y - 4:.1f}" width="{x(bars[m]) - x(0):.1f}" height="8" fill="#ddd"/>')
        out += [f'<circle cx="{x(v):.1f}" cy="{y + 2 * i - len(cols) + 1:.1f}" r="3.5" fill="{PALETTE[k % len(PALETTE)]}" '
                f'fill-opacity="0.85"><title>{_e(name)} on {_e(c)}: {v:.3g}</title></circle>'  # equal values: a column
                for i, (k, c) in enumerate(cols) if (v := series[m].get(c)) is not None and (v > 0 or scale != "log")]
    return "\n".join(out) + "</svg>"
