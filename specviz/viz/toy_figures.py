"""Figures and panels of the Learn tab's toy distributions (specviz.teach.toy), no model involved."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from specviz.teach import toy
from specviz.viz.panels import row
from specviz.viz.style import (
    BLACK,
    BLUE,
    GREEN,
    ORANGE,
    P_COLOUR,
    Q_COLOUR,
    VERMILLION,
    base_layout,
    esc,
    esc_plot,
    num,
)

TOY_HEIGHT = 330  # one figure beside the sliders at 1280×720


def _ticks(tokens) -> list[str]:
    return [esc_plot(t) for t in tokens]


def toy_pq_figure(st: toy.ToyStats, tokens=toy.TOKENS) -> go.Figure:
    """Bars of p, q and the residual per token, with min(1, p/q) as diamonds."""
    x = _ticks(tokens)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=st.p, name="p target", marker_color=P_COLOUR,
                         hovertemplate="%{x}: p = %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=st.q, name="q draft", marker_color=Q_COLOUR,
                         hovertemplate="%{x}: q = %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=st.residual, name="residual norm(max(0, p − q))",
                         marker=dict(color=ORANGE, pattern_shape="."),
                         hovertemplate="%{x}: residual = %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=st.accept, mode="markers", name="min(1, p/q): accept chance",
                             marker=dict(symbol="diamond", size=13, color=BLACK),
                             hovertemplate="%{x}: accepted with %{y:.3f} when drafted<extra></extra>"))
    title = f"Toy p and q: β = Σ min(p, q) = {st.beta:.3f} = 1 − TV(p, q)"
    base_layout(fig, title, "token", "probability", height=TOY_HEIGHT, legend_above=False)
    fig.update_layout(barmode="group", legend=dict(y=-0.3, yanchor="top", x=0, xanchor="left"),
                      margin=dict(b=90))
    fig.update_yaxes(range=[0, 1.05])
    return fig


def toy_numbers_html(st: toy.ToyStats, tokens=toy.TOKENS) -> str:
    """β, TV and the rejection mass as large numbers, then a per-token table."""
    big = (f'<div class="sv-toy-big" style="display:flex;flex-wrap:wrap;gap:4px 18px;font-size:15px">'
           f'<span>β = Σ min(p, q) = <b data-key="beta">{st.beta:.3f}</b></span>'
           f'<span>TV(p, q) = <b data-key="tv">{st.tv:.3f}</b></span>'
           f'<span>1 − TV = <b>{1 - st.tv:.3f}</b></span>'
           f'<span>rejection chance 1 − β = <b>{1 - st.beta:.3f}</b></span></div>')
    head = row(["token", "p", "q", "min(1, p/q)", "max(0, p − q)", "residual"], "th")
    body = "".join(row([esc(t), num(p), num(q), num(a), num(max(0.0, p - q)), num(r)])
                   for t, p, q, a, r in zip(tokens, st.p, st.q, st.accept, st.residual))
    return (f'<div class="sv-toy-numbers" style="font-size:13px">{big}'
            f'<div style="overflow-x:auto"><table style="border-collapse:collapse;margin-top:4px">'
            f'{head}{body}</table></div></div>')


def _short(rule: str) -> str:
    return rule.split(":")[0]


def monte_carlo_figure(mc: toy.MonteCarlo, p: np.ndarray, q: np.ndarray, tokens=toy.TOKENS) -> go.Figure:
    """The sampled output's frequencies against p and q, with TV and the p-value in the title."""
    x = _ticks(tokens)
    distance, pval = toy.tv(mc.empirical, p), toy.chi_square_p_value(mc.counts, p)
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=mc.empirical, name=f"output of the {_short(rule_name(mc))} rule",
                         marker_color=BLUE, hovertemplate="%{x}: %{y:.4f} of the samples<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=p, name="p target", marker_color=P_COLOUR,
                         hovertemplate="%{x}: p = %{y:.4f}<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=q, name="q draft", marker=dict(color=Q_COLOUR, pattern_shape="/"),
                         hovertemplate="%{x}: q = %{y:.4f}<extra></extra>"))
    title = (f"Monte-Carlo, N = {mc.n:,}: TV(output, p) = {distance:.4f}, "
             f"χ² p-value {_pval(pval)}")
    base_layout(fig, title, "token", "share of samples / probability", height=TOY_HEIGHT, legend_above=False)
    fig.update_layout(barmode="group", legend=dict(y=-0.3, yanchor="top", x=0, xanchor="left"),
                      margin=dict(b=90))
    fig.update_yaxes(range=[0, 1.05])
    return fig


def rule_name(mc: toy.MonteCarlo) -> str:
    return mc.rule if mc.rule in toy.RULES else toy.CORRECT


def _pval(p: float) -> str:
    return "< 0.000001" if p < 1e-6 else f"{p:.3g}"


def monte_carlo_html(mc: toy.MonteCarlo, p: np.ndarray, q: np.ndarray) -> str:
    """The verdict in words: does the output follow p, by the threshold set for N?"""
    threshold = toy.tv_threshold(mc.n, len(p))
    to_p, to_q = toy.tv(mc.empirical, p), toy.tv(mc.empirical, q)
    pval = toy.chi_square_p_value(mc.counts, p)
    follows = to_p < threshold
    mark, colour = ("✓", GREEN) if follows else ("✕", VERMILLION)
    verdict = ("the output follows p" if follows else "the output does not follow p")
    lines = [f'<div style="font-size:16px"><span style="color:{colour};font-weight:700">{mark}</span> '
             f'<b data-key="verdict">{esc(verdict)}</b> ({esc(_short(rule_name(mc)))} rule)</div>',
             f"<div>TV(output, p) = <b data-key=\"tv-p\">{to_p:.4f}</b> "
             f"{'&lt;' if follows else '≥'} {threshold:.4f}, the most an exact sampler drifts "
             f"at N = {mc.n:,} (except once in a million) · TV(output, q) = {to_q:.4f}</div>",
             f"<div>χ² goodness of fit to p: p-value {_pval(pval)} · drafts kept: {mc.accepted / mc.n:.3f} "
             f"(β = {toy.beta(p, q):.3f})</div>",
             f'<div style="opacity:0.8">{esc(toy.RULES[rule_name(mc)])}</div>']
    return f'<div class="sv-mc-summary" style="font-size:13px">{"".join(lines)}</div>'
