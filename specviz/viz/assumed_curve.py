"""The Theory tab's curve past what its run measured: the model of speed (measure/speed_model.py)
grows each draft past the deepest depth D its run drafted to, by the shape the run had at D and
at the deepest α_d. That part is drawn dashed, inside the band from none of the grown levels
accepted to all of them, and the sentence says where the measurement ends. A greedy prompt-lookup
or LogitSpec run kept its drafts uncut and is measured to K = 16 (measure/rebuilt.py): no band.

Built from a waterfall.Analysis as plain data; older analyses without a measured depth get a sentence.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from specviz.viz.style import BLUE

if TYPE_CHECKING:
    from specviz.measure.waterfall import Analysis

BAND_FILL = "rgba(0,114,178,0.15)"  # BLUE, faint


def measured_part(a: Analysis) -> list[tuple[int, float]]:
    """The curve's points at K ≤ D (all of it when the analysis has no band past D)."""
    d = a.measured_depth if a.band else max(k for k, _ in a.curve)
    return [(k, s) for k, s in a.curve if k <= d] or list(a.curve[:1])


def draw(fig: go.Figure, a: Analysis) -> None:
    """Past D, from the last measured point on: the band (S with no grown level accepted, and with
    every one), then the curve dashed inside it."""
    if not a.band:
        return
    k0, s0 = measured_part(a)[-1]
    xs, lows, highs = zip(*([(k0, s0, s0)] + [tuple(b) for b in a.band]))
    fig.add_scatter(x=xs, y=highs, mode="lines", line_width=0, showlegend=False, hoverinfo="skip")
    fig.add_scatter(x=xs, y=lows, mode="lines", line_width=0, fill="tonexty", fillcolor=BAND_FILL,
                    name=f"assumed past depth {a.measured_depth}: acceptance 0 to 1", hoverinfo="skip")
    fig.add_scatter(x=xs, y=[s0] + [s for k, s in a.curve if k > k0], mode="lines+markers", name="assumed S(K)",
                    line=dict(color=BLUE, dash="dash"), hovertemplate="K=%{x}: %{y:.2f}× assumed<extra></extra>")


def sentence(a: Analysis) -> str:
    """Where the curve stops being measured, and what it assumes past there."""
    d = a.measured_depth
    if not d:
        return " This analysis does not say how deep its run drafted, so the curve does not show where it is assumed."
    if not a.band:
        return f" Measured up to depth {d}: the whole curve."
    return (f" Measured up to depth {d}; beyond it, assumed (dashed): each deeper level adds the nodes and model calls "
            f"the run's drafts had at depth {d}, accepted at its α_d; the band runs from none of them accepted to all.")
