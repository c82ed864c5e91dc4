"""The sweep's report, from DIR/results.jsonl alone: DIR/report.md and DIR/report.html.

The HTML is one offline file (inline CSS and SVG, no script): a model x device matrix
(exact / differs / error / refused; the model column and the header row stay in view as
it scrolls), each cell's reason on hover (its title) and by a link to its row in the
reasons table; then plots: litecl's median time over LiteRT's per model and device, the
CAST/ADD nodes on OpenCL, and with bench rows the per-partition cost in round-trip floors.
The Markdown holds the same tables (GitHub shows no inline SVG: the plots' numbers are a
table there).
"""
from __future__ import annotations

import html
import math
from pathlib import Path

from .errors import LiteclError

__all__ = ["write_report"]

STATUSES = ("exact", "differs", "error", "refused")
#: a dot per device column: colours told apart by the colour-blind (Okabe-Ito)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 4px}h2{font-size:15px;margin:20px 0 6px}
table{border-collapse:separate;border-spacing:0}td,th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}
.scroll{max-height:72vh;overflow:auto;border:1px solid #ccc;display:inline-block;max-width:100%}
.matrix thead th{position:sticky;top:0;background:#f4f4f4;z-index:2;white-space:nowrap}
.matrix .m{position:sticky;left:0;background:#fff;z-index:1;max-width:34em;overflow:hidden;
 text-overflow:ellipsis;white-space:nowrap;font-weight:normal}
.matrix thead th.m{z-index:3;background:#f4f4f4}
.matrix td{text-align:center;white-space:nowrap}td a{color:inherit}
.exact{background:#d9f0d3}.differs{background:#fdd49e}.error{background:#f4a582}.refused{background:#e0e0e0}
tr:target td{outline:2px solid #0072B2}.why td{vertical-align:top}.why td.r{max-width:60em}
svg text{font:11px system-ui,sans-serif}
"""


def latest(rows: list[dict]) -> list[dict]:
    """The last row of each model path x device x kind x reference x placement."""
    from .sweep import identity  # noqa: PLC0415

    return list({identity(r): r for r in rows}.values())


def _column(r: dict) -> str:
    k = r["key"]
    extra = [x for x, default in ((k["reference"], "builtin"), (k["placement"], "all")) if x != default]
    return r["device"] + (f" ({', '.join(extra)})" if extra else "")


class _Data:
    """The rows as a matrix: models (by name), device columns (in first-seen order),
    cells, the distinct reasons with anchors."""

    def __init__(self, rows: list[dict]):
        self.rows = rows
        checks = [r for r in rows if r["kind"] == "check"]
        self.cols = list(dict.fromkeys(_column(r) for r in checks))
        names = {r["path"]: r["name"] for r in rows}
        self.models = sorted(names, key=lambda p: (names[p], p))
        self.names = names
        self.cell = {(r["path"], _column(r)): r for r in checks}
        self.bench = {(r["path"], _column(r)): r for r in rows if r["kind"] == "bench"}
        self.why: dict = {}   # (status, reason) -> [anchor, cells, models]
        self.kept: dict = {}  # reason a node stays on LiteRT -> [anchor, nodes, models]
        for r in checks:
            if r["status"] != "exact":
                self._note(self.why, (r["status"], r["reason"]), "why", 1, r)
            for n in r.get("placement", []):
                if n["placement"] != "opencl":
                    self._note(self.kept, f"{n['op']}: {n['reason']}", "kept", 1, r)

    @staticmethod
    def _note(table, key, prefix, count, r) -> None:
        e = table.setdefault(key, [f"{prefix}-{len(table) + 1}", 0, {}])
        e[1] += count
        e[2][r["name"]] = None

    def anchor(self, r: dict) -> str | None:
        if r["status"] != "exact":
            return self.why[(r["status"], r["reason"])][0]
        kept = [n for n in r.get("placement", []) if n["placement"] != "opencl"]
        return self.kept[f"{kept[0]['op']}: {kept[0]['reason']}"][0] if kept else None

    def hover(self, r: dict) -> str:
        """A cell's whole story in one line: status, reason, nodes, outputs."""
        parts = [r["status"] + (f": {r['reason']}" if r["reason"] else "")]
        if "nodes" in r:
            parts.append(f"{r['opencl_nodes']} of {r['cast_add_nodes']} CAST/ADD nodes on OpenCL "
                         f"({r['nodes']} nodes, {r['partitions']} partitions)")
            kept = {}
            for n in r["placement"]:
                if n["placement"] != "opencl":
                    kept[f"{n['op']}: {n['reason']}"] = kept.get(f"{n['op']}: {n['reason']}", 0) + 1
            parts += [f"kept on LiteRT ({k}x) {why}" for why, k in kept.items()]
        b = self.bench.get((r["path"], _column(r)))
        if b and b["status"] == "ok":
            parts.append(f"litecl/LiteRT median {b['ratio_median']:.2f}x")
        return "; ".join(parts) + f" [{r['name']} on {_column(r)}, {r['seconds']:.1f} s]"

    def tally(self, col: str) -> dict:
        return {s: sum(1 for m in self.models if (c := self.cell.get((m, col))) and c["status"] == s)
                for s in STATUSES}

    def series(self, rows: dict, value) -> dict:
        """{model path: {column: value(row)}} for the rows of ``rows`` where value is a number."""
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
    md.write_text(_markdown(d), encoding="utf-8")
    page.write_text(_html(d), encoding="utf-8")
    return md, page


def _bench_value(key):
    return lambda r: r.get(key) if r["status"] == "ok" else None


# -- Markdown ---------------------------------------------------------------------------

def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _markdown(d: _Data) -> str:
    out = [f"# litecl sweep: {len(d.models)} models x {len(d.cols)} devices", "",
           f"From results.jsonl alone ({len(d.rows)} rows): {_md(d.versions())}. "
           "Plots: report.html.", "",
           "| device | " + " | ".join(STATUSES) + " |", "|---|" + "---:|" * len(STATUSES)]
    out += [f"| {_md(c)} | " + " | ".join(str(v) for v in d.tally(c).values()) + " |" for c in d.cols]
    out += ["", "## Matrix", "", "| model | " + " | ".join(_md(c) for c in d.cols) + " |",
            "|---|" + "---|" * len(d.cols)]
    for m in d.models:
        cells = []
        for c in d.cols:
            r = d.cell.get((m, c))
            a = r and d.anchor(r)
            cells.append("" if r is None else f"[{r['status']}](#{a})" if a else r["status"])
        out.append(f"| {_md(d.names[m])} | " + " | ".join(cells) + " |")
    for title, table, count in (("Reasons", d.why, "cells"), ("CAST/ADD nodes kept on LiteRT", d.kept, "nodes")):
        if table:
            out += ["", f"## {title}", "", f"| # | reason | {count} | models |", "|---|---|---:|---|"]
            out += [f"| <a id=\"{a}\"></a>{a} | {_md(k if isinstance(k, str) else f'{k[0]}: {k[1]}')} | {n} | "
                    f"{_md(', '.join(list(ms)[:5]) + (f' and {len(ms) - 5} more' if len(ms) > 5 else ''))} |"
                    for k, (a, n, ms) in table.items()]
    if d.bench:
        out += ["", "## Bench", "", "| model | device | litecl median us | LiteRT median us | litecl / LiteRT | "
                "partitions | floor us | floors per partition |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for (m, c), b in sorted(d.bench.items(), key=lambda kv: (d.names[kv[0][0]], kv[0][1])):
            if b["status"] != "ok":
                out.append(f"| {_md(d.names[m])} | {_md(c)} | error: {_md(b['reason'])} | | | | | |")
                continue
            fpp = "-" if b["floors_per_partition"] is None else f"{b['floors_per_partition']:.2f}"
            out.append(f"| {_md(d.names[m])} | {_md(c)} | {b['litecl_median_us']:.0f} | {b['litert_median_us']:.0f} | "
                       f"{b['ratio_median']:.2f} | {b['partitions']} | {b['floor_us']:.1f} | {fpp} |")
    return "\n".join(out) + "\n"


# -- HTML -------------------------------------------------------------------------------

def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _html(d: _Data) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in d.cols)
    counts = "".join(f"<tr><th>{_e(c)}</th>" + "".join(f"<td class=\"{s}\">{v}</td>" for s, v in d.tally(c).items())
                     + "</tr>" for c in d.cols)
    body = []
    for m in d.models:
        cells = []
        for c in d.cols:
            r = d.cell.get((m, c))
            if r is None:
                cells.append("<td></td>")
                continue
            a = d.anchor(r)
            label = f"<a href=\"#{a}\">{r['status']}</a>" if a else r["status"]
            cells.append(f"<td class=\"{r['status']}\" title=\"{_e(d.hover(r))}\">{label}</td>")
        body.append(f"<tr><th class=\"m\" title=\"{_e(m)}\">{_e(d.names[m])}</th>{''.join(cells)}</tr>")
    parts = [f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>litecl sweep</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>litecl sweep: {len(d.models)} models &times; {len(d.cols)} devices</h1>",
             f"<p>From results.jsonl alone ({len(d.rows)} rows): {_e(d.versions())}. Hover a cell for its "
             "reason; a cell's link leads to the reason's row below.</p>",
             "<table class=\"counts\"><tr><th>device</th>" + "".join(f"<th>{s}</th>" for s in STATUSES)
             + f"</tr>{counts}</table>",
             f"<h2>Matrix</h2><div class=\"scroll\"><table class=\"matrix\"><thead><tr><th class=\"m\">model</th>"
             f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"]
    for title, table, count in (("Reasons", d.why, "cells"), ("CAST/ADD nodes kept on LiteRT", d.kept, "nodes")):
        if table:
            rows = "".join(f"<tr id=\"{a}\"><td>{a}</td><td class=\"r\">{_e(k if isinstance(k, str) else f'{k[0]}: {k[1]}')}"
                           f"</td><td>{n}</td><td>{_e(', '.join(list(ms)[:8]))}{f' and {len(ms) - 8} more' if len(ms) > 8 else ''}"
                           "</td></tr>" for k, (a, n, ms) in table.items())
            parts.append(f"<h2>{title}</h2><table class=\"why\"><tr><th>#</th><th>reason</th><th>{count}</th>"
                         f"<th>models</th></tr>{rows}</table>")
    nodes = d.series(d.cell, lambda r: r.get("opencl_nodes"))
    total = {p: max(r.get("cast_add_nodes", 0) for (q, _), r in d.cell.items() if q == p) for p in nodes}
    plots = [("litecl median time over LiteRT's (bench rows; 1 = as fast)",
              d.series(d.bench, _bench_value("ratio_median")), {"log": True, "line": 1.0}),
             ("CAST/ADD nodes on OpenCL (dots) of the model's CAST/ADD nodes (grey bar)", nodes, {"bars": total}),
             ("per-partition cost in round-trip floors: (litecl - LiteRT median) / partitions / floor",
              d.series(d.bench, _bench_value("floors_per_partition")), {"line": 0.0})]
    for title, series, opts in plots:
        svg = _dot_plot(series, d, **opts) if series else "<p>No rows to plot (bench rows need --bench).</p>"
        parts.append(f"<h2>{_e(title)}</h2>{svg}")
    return "\n".join(parts) + "\n</body></html>\n"


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ts = [m * 10.0 ** e for e in range(a, b + 1) for m in ((1, 2, 5) if b - a <= 2 else (1,))]
    else:
        step = 10 ** math.floor(math.log10((hi - lo) / 4))
        step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (step * m) <= 8)
        ts = [k * step for k in range(math.ceil(lo / step), math.floor(hi / step) + 1)]
    return [t for t in ts if lo <= t <= hi]


def _dot_plot(series: dict, d: _Data, log: bool = False, line: float | None = None,
              bars: dict | None = None) -> str:
    """Inline SVG: a row per model (its name at the left), a dot per device column in
    that column's colour on one x axis (log: a log scale); ``bars`` (model -> value) grey
    behind the dots; ``line``: a dashed vertical line at that x."""
    models = [m for m in d.models if m in series]
    vals = [v for m in models for v in series[m].values()] + list((bars or {}).values())
    vals += [line] if line is not None else []
    if log:
        vals = [v for v in vals if v > 0]
        lo, hi = min(vals) / 1.25, max(vals) * 1.25
    else:
        lo, hi = min(min(vals), 0.0), max(max(vals), 1.0) * 1.05
    left, width, top, row = 300, 1200, 34, 14
    plot_w = width - left - 20
    height = top + row * len(models) + 30

    def x(v):
        f = (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) if log else (v - lo) / (hi - lo)
        return left + f * plot_w
    out = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\">"]
    for k, col in enumerate(d.cols):  # the legend
        out.append(f"<circle cx=\"{left + 8 + 180 * k}\" cy=\"12\" r=\"4\" fill=\"{PALETTE[k % len(PALETTE)]}\"/>"
                   f"<text x=\"{left + 16 + 180 * k}\" y=\"16\">{_e(col[:24])}</text>")
    for t in _ticks(lo, hi, log):
        out.append(f"<line x1=\"{x(t):.1f}\" x2=\"{x(t):.1f}\" y1=\"{top - 4}\" y2=\"{height - 26}\" stroke=\"#eee\"/>"
                   f"<text x=\"{x(t):.1f}\" y=\"{height - 12}\" text-anchor=\"middle\">{t:g}</text>")
    if line is not None and lo <= line <= hi:
        out.append(f"<line x1=\"{x(line):.1f}\" x2=\"{x(line):.1f}\" y1=\"{top - 4}\" y2=\"{height - 26}\" "
                   "stroke=\"#555\" stroke-dasharray=\"4 3\"/>")
    for i, m in enumerate(models):
        y = top + row * i + row / 2
        name = d.names[m] if len(d.names[m]) <= 46 else "\u2026" + d.names[m][-45:]
        out.append(f"<text x=\"{left - 8}\" y=\"{y + 4:.1f}\" text-anchor=\"end\"><title>{_e(m)}</title>{_e(name)}</text>")
        if bars and bars.get(m):
            out.append(f"<rect x=\"{x(0):.1f}\" y=\"{y - 4:.1f}\" width=\"{x(bars[m]) - x(0):.1f}\" height=\"8\" fill=\"#ddd\"/>")
        for k, col in enumerate(d.cols):
            v = series[m].get(col)
            if v is not None and (v > 0 or not log):
                out.append(f"<circle cx=\"{x(v):.1f}\" cy=\"{y:.1f}\" r=\"3.5\" fill=\"{PALETTE[k % len(PALETTE)]}\" "
                           f"fill-opacity=\"0.85\"><title>{_e(d.names[m])} on {_e(col)}: {v:.3g}</title></circle>")
    return "\n".join(out) + "</svg>"
