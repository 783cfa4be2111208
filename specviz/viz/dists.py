"""Distributions of one cycle: p against q at each judged draft token, and the residual
norm(max(0, p − q)) the replacement was drawn from."""
from __future__ import annotations

import plotly.graph_objects as go

from specviz.decoding.trace import ACCEPTED, REJECTED, Alt, CycleTrace, NodeTrace
from specviz.viz.style import (
    BLACK,
    ORANGE,
    P_COLOUR,
    Q_COLOUR,
    STATUS,
    FigureSpec,
    bar,
    base_layout,
    label,
    note_figure,
    num,
    scatter,
    top_list,
)
from specviz.viz.tree_figure import nodes_of

DETERMINISTIC_NOTE = "deterministic draft: q = 1 (hatched bars)"
GREEDY_NOTE = "greedy: accept if token = argmax p"
LABEL_CHARS = 14  # tick label length before "…": keeps ticks level at ~8 tokens across


def judged(cycle: CycleTrace) -> list[NodeTrace]:
    """Nodes verification tried, in the order it reached them (depth, then sibling order)."""
    return sorted((n for n in nodes_of(cycle) if n.status in (ACCEPTED, REJECTED)),
                  key=lambda n: (n.depth, n.index))


def unique(labels: list[str], ids: list[int]) -> list[str]:
    """Categorical axes merge equal labels; tell repeats apart by an id."""
    return [f"{lab} #{i}" if labels.count(lab) > 1 else lab for lab, i in zip(labels, ids)]


def _note(fig: FigureSpec, lines: list[str]) -> None:
    if lines:
        fig.add_annotation(text="<br>".join(lines), x=0.01, y=0.98, xref="paper", yref="paper",
                           xanchor="left", yanchor="top", showarrow=False, align="left",
                           bgcolor="rgba(255,255,255,0.85)", font=dict(size=11))


def _pq_hover(n: NodeTrace, greedy: bool) -> str:
    rule = GREEDY_NOTE if greedy else f"min(1, p/q) = {num(n.accept_prob)} · r = {num(n.r)}"
    q = "1 (deterministic)" if n.q is None else num(n.q)
    return (f"{label(n.text)} · {STATUS[n.status][0]}<br>p = {num(n.p)} · q = {q}<br>{rule}"
            f"<br>top-5 p: {top_list(n.p_top)}")


def pq_figure(cycle: CycleTrace) -> go.Figure:
    """Grouped bars of p(x) and q(x) for every judged draft token, with min(1, p/q) and r
    as markers (under greedy: the argmax probability instead)."""
    nodes = judged(cycle)
    title = f"Cycle {cycle.index}: target p vs draft q at each judged token"
    if not nodes:
        return note_figure(title, "No draft this cycle: nothing to compare")
    cats = unique([f"{STATUS[n.status][3]} {label(n.text, LABEL_CHARS)}" for n in nodes], [n.index for n in nodes])
    hover = [_pq_hover(n, cycle.greedy) for n in nodes]
    fig = FigureSpec()
    fig.add_trace(bar(x=cats, y=[n.p or 0.0 for n in nodes], name="p(x) target",
                         marker_color=P_COLOUR, hoverinfo="text", hovertext=hover))
    fig.add_trace(bar(x=cats, y=[1.0 if n.q is None else n.q for n in nodes], name="q(x) draft",
                         marker=dict(color=Q_COLOUR, pattern=dict(shape=["/" if n.q is None else "" for n in nodes])),
                         hoverinfo="text", hovertext=hover))
    if cycle.greedy:
        _markers(fig, cats, nodes, lambda n: n.p_top[0].prob if n.p_top else None,
                 "max p (argmax)", "line-ew", hover)
    else:
        _markers(fig, cats, nodes, lambda n: n.accept_prob, "min(1, p/q)", "diamond", hover)
        _markers(fig, cats, nodes, lambda n: n.r, "r (uniform draw)", "line-ew", hover)
    notes = [GREEDY_NOTE] if cycle.greedy else ["accepted when r < min(1, p/q)"]
    if any(n.q is None for n in nodes):
        notes.append(DETERMINISTIC_NOTE)
    _note(fig, notes)
    base_layout(fig, title, "judged draft token (● accepted, ✕ rejected)", "probability")
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.32], tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1])  # headroom for the notes
    return fig.build()


def _markers(fig, cats, nodes, value, name, symbol, hover) -> None:
    pts = [(c, value(n), h) for c, n, h in zip(cats, nodes, hover) if value(n) is not None]
    if pts:
        fig.add_trace(scatter(x=[c for c, _, _ in pts], y=[v for _, v, _ in pts], mode="markers",
                                 name=name, hoverinfo="text", hovertext=[h for _, _, h in pts],
                                 marker=dict(symbol=symbol, size=16 if symbol == "diamond" else 26,
                                             color=BLACK, line=dict(width=3, color=BLACK))))


def _drawn_from(cycle: CycleTrace) -> tuple[list[Alt], str]:
    """The bars to show and what they are, for a cycle that ended in a rejection."""
    rejected = next((n for n in nodes_of(cycle) if n.index == cycle.rejected), None)
    if cycle.greedy:
        return (rejected.p_top if rejected else []), "greedy: the replacement is argmax p"
    tok = label(rejected.text) if rejected else "the draft"
    if rejected is not None and rejected.q is None:
        return cycle.residual_top, f"p with {tok} removed (deterministic draft), renormalised"
    return cycle.residual_top, f"residual norm(max(0, p − q)) after rejecting {tok}"


def residual_figure(cycle: CycleTrace) -> go.Figure:
    """The distribution the replacement token was drawn from, with the drawn token marked."""
    new = cycle.new_token
    word = "is argmax p" if cycle.greedy else "drawn from p"
    if cycle.rejected is None or new is None:
        what = (f"bonus token {label(new.text)} {word}" if nodes_of(cycle) else
                f"plain target step {label(new.text)} {word}") if new else "no token"
        lead = "No rejection this cycle" if nodes_of(cycle) else "No draft this cycle"
        return note_figure(f"Cycle {cycle.index}: no resampling", f"{lead}: {what}")
    alts, what = _drawn_from(cycle)
    alts = list(alts)
    if all(a.token != new.token for a in alts):
        alts.append(new)  # drawn from outside the top list: still show it
    cats = unique([label(a.text, LABEL_CHARS) for a in alts], [a.token for a in alts])
    drawn = [a.token == new.token for a in alts]
    fig = FigureSpec()
    for is_drawn, name, colour in ((False, "other tokens", P_COLOUR), (True, "drawn (resampled)", ORANGE)):
        pick = [i for i, d in enumerate(drawn) if d == is_drawn]
        fig.add_trace(bar(x=[cats[i] for i in pick], y=[alts[i].prob for i in pick], name=name,
                             marker_color=colour, text=["drawn" if is_drawn else "" for _ in pick],
                             textposition="outside", hoverinfo="text",
                             hovertext=[f"{label(alts[i].text)} (id {alts[i].token}): {num(alts[i].prob)}"
                                        for i in pick]))
    _note(fig, [what])
    base_layout(fig, f"Cycle {cycle.index}: where the replacement came from", "token", "probability")
    fig.update_xaxes(categoryorder="array", categoryarray=cats)
    fig.update_yaxes(range=[0, 1.2], tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1])
    return fig.build()
