"""Speedup by Spec-Bench category and method: the leaderboard's table as a heatmap with its numbers on it.

`category_figure(rows)` takes plain rows, one per (question, method): `{"question_id", "category", "method",
"speedup"}`. Two adapters make them: `rows_from_compare` from the Compare tab's measured rows (speedup over
our own AR run of the same target), `rows_from_bench` from a `specviz bench` report (speedup over one of its
anchors, HF plain `generate` unless told). A category's cell is the geometric mean of its questions' speedups,
so one fast question cannot carry a row and ×2 and ×0.5 cancel; the hover says how many questions it holds.
The rows are the leaderboard's (measure/specbench.group_rows): "Multi-turn conversation" for MT-bench's eight
categories, then translation, summarization, …, and "Overall" last.
"""
from __future__ import annotations

import math
from collections import defaultdict

import plotly.graph_objects as go

from specviz.measure.bench_summary import geomean
from specviz.measure.specbench import ALL, group_rows, missing_rows
from specviz.viz.style import BLUE, VERMILLION, base_layout, esc_plot, note_figure

CELL_HEIGHT = 34  # one category row: the number written on it stays readable at 12 px
SPAN = 1.0  # the colour saturates at 2**±SPAN: ×0.5 is full vermillion, ×2 full blue, ×1 white


def rows_from_compare(rows: list[dict]) -> list[dict]:
    """Compare's measured rows that carry a question (a Spec-Bench run), as the figure's rows; a row
    with an error, still pending or without a question is left out, and so is an AR row (its own
    baseline: 1× by definition). Methods are named by their row's configuration (with its row number
    when two rows share one)."""
    done = [r for r in rows if r.get("question_id") is not None and r.get("speedup") and not r.get("error")
            and r.get("method") != "ar"]
    labels = {(r["index"], r["label"]) for r in done}
    counts = defaultdict(int)
    for _, label in labels:
        counts[label] += 1
    return [{"question_id": str(r["question_id"]), "category": r.get("category") or "",
             "method": r["label"] if counts[r["label"]] == 1 else f"#{r['index']} {r['label']}",
             "speedup": float(r["speedup"])} for r in done]


def rows_from_bench(report: dict, anchor: str = "hf") -> list[dict]:
    """A bench report's (question, variant) speedups over `anchor`'s tokens/s on the same question;
    every variant but the anchor is a method. A ValueError says when the anchor was not run."""
    variants = report.get("variants") or sorted({v for r in report["results"].values() for v in r})
    if anchor not in variants:
        raise ValueError(f"The bench report has no '{anchor}' anchor to divide by; it ran {', '.join(variants)}.")
    categories = report.get("prompts") or {}
    out = []
    for qid, by_variant in report["results"].items():
        base = (by_variant.get(anchor) or {}).get("tokens_per_s")
        if not base:
            continue
        for variant in variants:
            tps = (by_variant.get(variant) or {}).get("tokens_per_s")
            if variant != anchor and tps:
                out.append({"question_id": str(qid), "category": categories.get(qid, ""), "method": variant,
                            "speedup": tps / base})
    return out


def category_table(rows: list[dict], split_mt: bool = False) -> tuple[list[str], list[str], dict]:
    """(leaderboard rows in order, methods in first-seen order, {(row, method): (geometric mean, n)}).
    A question counts in its category's row and in "Overall"; a row with no question is left out."""
    methods = list(dict.fromkeys(r["method"] for r in rows))
    categories = {r["question_id"]: r["category"] for r in rows}
    groups = group_rows(categories, split_mt)
    cells = {}
    for name, ids in groups.items():
        members = set(ids)
        for m in methods:
            xs = [r["speedup"] for r in rows if r["method"] == m and r["question_id"] in members and r["speedup"] > 0]
            if xs:
                cells[name, m] = (geomean(xs), len(xs))
    return list(groups), methods, cells


def _colour(s: float | None) -> float | None:
    """log2 of the speedup, clipped to ±SPAN, so the scale is symmetric about ×1."""
    return None if s is None else max(-SPAN, min(SPAN, math.log2(s)))


def category_figure(rows: list[dict], baseline: str = "our own AR decoding", split_mt: bool = False,
                    title: str | None = None) -> go.Figure:
    """The heatmap: one row per leaderboard category ("Overall" last), one column per method, the
    speedup written in each cell (blue above ×1, vermillion below). Leaderboard rows with no question
    here are named under the chart."""
    title = title or f"Speedup by Spec-Bench category over {esc_plot(baseline)}"
    if not rows:
        return note_figure(title, "No measured question yet: pick Spec-Bench or a question file and press Compare.")
    names, methods, cells = category_table(rows, split_mt)
    z = [[_colour(cells.get((n, m), (None, 0))[0]) for m in methods] for n in names]
    text = [[f"{cells[n, m][0]:.2f}×" if (n, m) in cells else "–" for m in methods] for n in names]
    hover = [[f"{esc_plot(n)} · {esc_plot(m)}<br>{cells[n, m][0]:.2f}× (geometric mean of {cells[n, m][1]} "
              f"question{'s' if cells[n, m][1] != 1 else ''})" if (n, m) in cells else f"{esc_plot(n)}: not run"
              for m in methods] for n in names]
    ys = [f"<b>{ALL}</b>" if n == ALL else esc_plot(n) for n in names]
    fig = go.Figure(go.Heatmap(
        z=z, x=[esc_plot(m) for m in methods], y=ys, text=text, texttemplate="%{text}", textfont=dict(size=13),
        customdata=hover, hovertemplate="%{customdata}<extra></extra>", zmin=-SPAN, zmax=SPAN, zmid=0,
        colorscale=[[0.0, VERMILLION], [0.5, "#FFFFFF"], [1.0, BLUE]], xgap=2, ygap=2,
        colorbar=dict(title=dict(text="×"), tickvals=[-1, 0, 1], ticktext=["0.5×", "1×", "2×"], thickness=12)))
    known = [r["category"] for r in rows if r["category"]]
    absent = missing_rows({r["question_id"]: r["category"] for r in rows}, split_mt) if known else []
    if absent:  # under the title: plotly never wraps, and a note under the axis is cut on a short figure
        title += f"<br><span style='font-size:11px'>No question here from: {esc_plot(', '.join(absent))}</span>"
    base_layout(fig, title, "method", "", height=max(200, 90 + CELL_HEIGHT * len(names)), legend_above=False)
    fig.update_yaxes(autorange="reversed", automargin=True)
    fig.update_xaxes(side="bottom", automargin=True)
    return fig
