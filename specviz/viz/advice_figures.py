"""The Advise view: the ranked table, predicted S(K) per candidate with the checked points, acceptance
by draft position (conditional and marginal, labelled apart) and the speedup with several runs at once.

Built from an advice.Survey only (plain data), so a recorded survey paints before any model
loads. Candidate labels and model names may be typed by people, so all of them are escaped.
"""
from __future__ import annotations

import plotly.graph_objects as go

from specviz.advise import advice, advice_report
from specviz.decoding import speed
from specviz.viz.style import (
    BLACK,
    BLUE,
    GREEN,
    GREY,
    ORANGE,
    PURPLE,
    SKY,
    VERMILLION,
    YELLOW,
    base_layout,
    esc,
    esc_plot,
    note_figure,
)

PALETTE = (BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY, BLACK, YELLOW)  # one per candidate, in order
CONDITIONAL = speed.label("acceptance_by_position")  # the glossary's words (decoding/speed.py)
MARGINAL = speed.label("reach_by_position")


def _colours(survey: advice.Survey) -> dict[str, str]:
    return {m.candidate.label: PALETTE[i % len(PALETTE)] for i, m in enumerate(survey.measured)}


def curves_figure(survey: advice.Survey) -> go.Figure:
    """Predicted S(K) for every K per candidate; a star where a check measured it for real."""
    title = "Predicted speedup S(K) over plain decoding, with the checked points"
    if not survey.measured:
        return note_figure(title, "No candidate measured yet.")
    colour, fig = _colours(survey), go.Figure()
    for m in survey.measured:
        label = m.candidate.label
        ks, ss = zip(*advice.curve(m, survey.v_of, survey.pass_share))
        fig.add_scatter(x=ks, y=ss, mode="lines+markers", name=esc_plot(label), line_color=colour[label],
                        hovertemplate=f"{esc_plot(label)}, K=%{{x}}: %{{y:.2f}}× predicted<extra></extra>")
        chk = survey.checks.get(label)
        if chk is not None:
            fig.add_scatter(x=[chk.k], y=[chk.measured], mode="markers", showlegend=False,
                            marker=dict(symbol="star", size=15, color=colour[label], line=dict(width=1, color=BLACK)),
                            hovertemplate=f"{esc_plot(label)}, K=%{{x}}: %{{y:.2f}}× measured<extra></extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color=GREY, annotation_text="plain = 1×")
    base_layout(fig, title, "K (draft depth)", "× plain tokens/s")
    fig.update_yaxes(rangemode="tozero")
    return fig


def acceptance_figure(survey: advice.Survey) -> go.Figure:
    """Per draft position: the conditional rate (solid) and the marginal rate (dotted), per candidate."""
    title = "Acceptance by draft position: conditional (solid) and marginal (dotted)"
    if not survey.measured:
        return note_figure(title, "No candidate measured yet.")
    colour, fig = _colours(survey), go.Figure()
    for m in survey.measured:
        label = m.candidate.label
        xs = list(range(1, m.k_max + 1))
        for ys, kind, dash in ((m.conditional, CONDITIONAL, "solid"), (m.marginal, MARGINAL, "dot")):
            fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=esc_plot(f"{label}, {kind.split(':')[0]}"),
                            line=dict(color=colour[label], dash=dash),
                            hovertemplate=f"{esc_plot(label)}<br>{esc_plot(kind)}<br>i=%{{x}}: %{{y:.2f}}"
                                          "<extra></extra>")
    base_layout(fig, title, "draft position i", "rate")
    fig.update_yaxes(range=[0, 1.05])
    return fig


def concurrency_figure(survey: advice.Survey) -> go.Figure:
    """Best predicted speedup at each number of runs decoding at once; below 1× plain wins."""
    title = "Predicted speedup with several runs at once (best K at each batch size)"
    rows = advice.under_concurrency(survey)
    if not rows:
        return note_figure(title, survey.concurrency_note or "No concurrency timed: the batched passes were not timed.")
    colour, fig = _colours(survey), go.Figure()
    for m, points, _ in rows:
        label = m.candidate.label
        bs, ks, ss = zip(*points)
        fig.add_scatter(x=bs, y=ss, mode="lines+markers", name=esc_plot(label), line_color=colour[label],
                        customdata=ks,
                        hovertemplate=f"{esc_plot(label)}<br>%{{x}} runs: %{{y:.2f}}× at K=%{{customdata}}"
                                      "<extra></extra>")
    fig.add_hline(y=1.0, line_dash="dot", line_color=GREY, annotation_text="plain = 1×")
    base_layout(fig, title, "runs decoding at once (batch size)", "× plain tokens/s")
    sizes = survey.concurrency.batch_sizes
    fig.update_xaxes(type="log", tickvals=sizes, ticktext=[str(b) for b in sizes])
    fig.update_yaxes(rangemode="tozero")
    return fig


def _list(title: str, items: list[str]) -> str:
    if not items:
        return ""
    lis = "".join(f"<li>{esc(x)}</li>" for x in items)
    return f'<h4 class="sv-h">{esc(title)}</h4><ul class="sv-advice-list">{lis}</ul>'


def advice_html(survey: advice.Survey) -> str:
    """The recommendation, the ranked table and the sentences: pair check, load, disagreement."""
    rows = []
    for i, (m, k, s_k) in enumerate(advice.ranked(survey), 1):
        be = advice.break_even(m, k, survey.v_of, survey.pass_share)
        chk = survey.checks.get(m.candidate.label)
        checked = "–" if chk is None else f"{chk.measured:.2f}× {advice_report.at_k(m, chk.k)}"
        flag = f'<div class="sv-advice-flag">⚠ {esc(chk.flag)}</div>' if chk is not None and chk.flag else ""
        unit = "per draft call" if m.per_call else "per cycle"
        rows.append(f"<tr><td>{i}</td><td>{esc(m.candidate.label)}</td><td>{esc(advice_report.k_cell(m, k))}</td>"
                    f"<td>{esc(advice_report.predicted_cell(m, k, s_k))}</td>"
                    f"<td>{esc(advice_report.measured_cell(m))}</td>"
                    f"<td>{advice_report.break_even_cell(m, be)}</td><td>{m.c:.3f} {unit}</td>"
                    f"<td>{esc(checked)}{flag}</td></tr>")
    table = ("<table class='sv-advice-table'><thead><tr><th>#</th><th>candidate</th><th>best K</th>"
             "<th>predicted</th><th title='past the deepest draft depth the survey judged, acceptance is the "
             "model of speed&#39;s assumption'>what is measured</th>"
             "<th title='the constant acceptance rate below which plain decoding wins'>"
             "break-even α</th><th>draft cost c</th><th>checked: measured</th></tr></thead><tbody>"
             + "".join(rows) + "</tbody></table>")
    return (f'<p class="sv-advice-pick"><strong>{esc(advice_report.recommendation(survey))}</strong></p>'
            f'<p class="sv-batch-where">{esc(advice_report.summary(survey))}</p>{table}'
            + _list("Pair check", advice_report.findings(survey))
            + _list("Runs at once", advice_report.concurrency_sentences(survey))
            + _list("Where the candidates disagree", advice_report.disagreement_sentences(survey)))
