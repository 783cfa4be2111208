"""Whole-run figures: tokens against wall-clock time, and acceptance by draft position."""
from __future__ import annotations

import plotly.graph_objects as go

from specviz.decoding.speed import label
from specviz.decoding.trace import RESAMPLED, CycleTrace, RunTrace
from specviz.viz.style import BLACK, BLUE, FigureSpec, bar, base_layout, esc_plot, note_figure, scatter


def progress(run: RunTrace, prefill: bool = True) -> tuple[list[float], list[int]]:
    """(seconds, tokens so far): the prefill commits token 1, then each cycle ends a step. With
    `prefill=False` the clock starts after the prefill (decode time only)."""
    start = 0.0 if prefill else run.prefill_s
    xs, ys = [run.prefill_s - start], [1 if run.token_ids or run.cycles else 0]
    for c in run.cycles:
        xs.append(c.elapsed_s - start)
        ys.append(c.total_tokens)
    return xs, ys


def teaches_everything(cycle: CycleTrace) -> bool:
    """An accepted draft, a rejection, a resampled new token and the residual it came from: every
    rule of a cycle at once. Under greedy decoding there is no residual, so no cycle qualifies."""
    return (bool(cycle.accepted) and cycle.rejected is not None and cycle.new_kind == RESAMPLED
            and cycle.new_token is not None and not cycle.greedy and len(cycle.residual_top) >= 2)


def instructive_cycle(run: RunTrace | None) -> int | None:
    """The cycle a newcomer should see first: one that teaches everything, and of those the one
    whose replacement was not the draft's favourite alternative (the residual visibly differs from
    p), then the earliest. Without such a cycle the one with most accepted drafts; None when empty."""
    if run is None or not run.cycles:
        return None
    cycles = list(enumerate(run.cycles))
    full = [(i, c) for i, c in cycles if teaches_everything(c)]
    if full:
        return min(full, key=lambda ic: (not _residual_moved(ic[1]), ic[0]))[0]
    return max(cycles, key=lambda ic: (len(ic[1].accepted), ic[1].rejected is not None, -ic[0]))[0]


def _residual_moved(cycle: CycleTrace) -> bool:
    """The residual's top token differs from p's top token at the rejected node: q reshaped p."""
    rejected = next((n for n in cycle.nodes if n.index == cycle.rejected), None)
    return bool(rejected and rejected.p_top and cycle.residual_top[0].token != rejected.p_top[0].token)


def _run_name(run: RunTrace, fallback: str) -> str:
    return esc_plot(f"{fallback} ({run.method})" if run.method and run.method != "ar" else fallback)


def timeline_figure(spec: RunTrace | None, ar: RunTrace | None) -> go.Figure:
    """Tokens generated against decode seconds for the speculative and the plain run; tokens
    arrive at the end of each cycle, so the lines are steps."""
    title = "Tokens generated over time"
    if spec is None and ar is None:
        return note_figure(title, "No run yet: press Step or Run")
    fig = FigureSpec()
    if spec is not None:
        xs, ys = progress(spec)
        fig.add_trace(scatter(x=xs, y=ys, mode="lines+markers", line_shape="hv",
                                 name=_run_name(spec, "speculative"),
                                 line=dict(color=BLUE, width=2.5), marker=dict(symbol="circle", size=6),
                                 hovertemplate="%{x:.2f} s: %{y} tokens<extra>speculative</extra>"))
    if ar is not None:
        xs, ys = progress(ar)
        fig.add_trace(scatter(x=xs, y=ys, mode="lines", line_shape="hv", name="autoregressive",
                                 line=dict(color=BLACK, width=2, dash="dash"),
                                 hovertemplate="%{x:.2f} s: %{y} tokens<extra>autoregressive</extra>"))
    base_layout(fig, title, "wall-clock seconds (prefill included)", "tokens generated", legend_above=False)
    # the lines climb to the right, so the top left is free for the legend (in the narrow timing
    # column a legend beside the title would cover it)
    fig.update_layout(legend=dict(orientation="v", x=0.02, xanchor="left", y=0.98, yanchor="top",
                                  bgcolor="rgba(255,255,255,0.8)"))
    fig.update_xaxes(rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    return fig.build()


def acceptance_figure(run: RunTrace) -> go.Figure:
    """α_d at each draft depth (decoding/speed.py), with α across all depths."""
    title = "Acceptance rate by draft position"
    rates = list((run.metrics or {}).get("acceptance_by_position") or [])
    if not rates:
        return note_figure(title, "No draft positions judged yet", "draft position", "acceptance rate")
    positions = list(range(1, len(rates) + 1))
    fig = FigureSpec()
    fig.add_trace(bar(x=positions, y=rates, name=esc_plot(label("acceptance_by_position")), marker_color=BLUE,
                         text=[f"{r:.0%}" for r in rates], textposition="outside",
                         hovertemplate="position %{x}: %{y:.0%} accepted<extra></extra>"))
    alpha = (run.metrics or {}).get("acceptance_rate")
    if isinstance(alpha, (int, float)):
        fig.add_trace(scatter(x=[0.5, len(rates) + 0.5], y=[alpha, alpha], mode="lines",
                                 name=esc_plot(f"{label('acceptance_rate')} = {alpha:.2f}"),
                                 line=dict(color=BLACK, dash="dot"),
                                 hoverinfo="skip"))
    base_layout(fig, title, "draft position", "acceptance rate")
    fig.update_xaxes(tickmode="linear", dtick=1 if len(rates) <= 16 else 4)
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%")
    return fig.build()
