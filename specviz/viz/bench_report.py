"""HTML report of a bench run: speedup over HF plain generate, per prompt and variant, and by Spec-Bench
category when the prompts carry categories (viz/category_figures.py)."""
from __future__ import annotations

import html

import plotly.graph_objects as go

from specviz.decoding.speed import label
from specviz.viz.category_figures import category_figure, rows_from_bench


def speedup_figure(report: dict) -> go.Figure:
    prompts = list(report["results"])
    fig = go.Figure()
    for v in report["variants"]:
        if v == "hf":
            continue
        ys = [report["results"][p][v]["tokens_per_s"] / report["results"][p]["hf"]["tokens_per_s"]
              for p in prompts]
        fig.add_bar(name=v, x=prompts, y=ys)
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="HF plain generate")
    fig.update_layout(title="Speedup over HF plain generate, per prompt (median of repeats)",
                      xaxis_title="prompt", yaxis_title="× HF plain tokens/s", barmode="group",
                      template="plotly_white", legend_title="variant")
    return fig


def report_html(report: dict) -> str:
    rows = "".join(
        "<tr>" + f"<td>{html.escape(v)}</td>" + "".join(
            f"<td>{html.escape(f'{x:.3g}' if isinstance(x, float) else str(x))}</td>"
            for x in (s.get("tokens_per_s_median"), s.get("speedup_vs_hf"), s.get("worst_vs_hf"),
                      s.get("speedup_vs_hf_pld"), s.get("mean_accepted_tokens"), s.get("acceptance_rate"),
                      s.get("identical_to_hf")))
        + "</tr>" for v, s in report["summary"].items())
    head = "".join(f"<th>{h}</th>" for h in ("variant", "tok/s", "× HF", "worst × HF", "× HF PLD",
                                              label("mean_accepted_tokens"), label("acceptance_rate"),
                                              "identical to HF"))
    machine = html.escape(", ".join(f"{k}: {v}" for k, v in report["machine"].items()))
    return ("<!doctype html><meta charset='utf-8'><title>SpecViz bench</title>"
            f"<h1>SpecViz bench</h1><p>{machine}</p><table border='1' cellpadding='4'>"
            f"<tr>{head}</tr>{rows}</table>" + _speedups(report) + _by_category(report))


def _speedups(report: dict) -> str:
    """The per-prompt chart over HF plain; a run without that anchor (--anchors none, a served target) has none."""
    if "hf" not in report.get("variants", ()):
        return "<p>No chart: HF plain generate did not run (see --anchors).</p>"
    return speedup_figure(report).to_html(full_html=False, include_plotlyjs=True)


def _by_category(report: dict) -> str:
    """The category chart over HF plain, when the prompts have categories and HF plain ran."""
    if not any((report.get("prompts") or {}).values()) or "hf" not in report.get("variants", ()):
        return ""
    figure = category_figure(rows_from_bench(report), baseline="HF plain generate")
    return figure.to_html(full_html=False, include_plotlyjs=False)
