"""Side by side: what two runs of one prompt say together, built from their traces only.

- `first_difference`: where the outputs first differ and why, or that they agree (the lossless
  badge: same target, greedy on both sides, identical tokens so far);
- `race_figure`: tokens against wall-clock seconds for A, B and each target's plain decoding, with a
  line at the race clock when a finished pair is replayed on one clock;
- `summary_html`: each side's speedup, τ, α and acceptance by depth, the conditional α_d and the
  marginal reach_d labelled apart (decoding/speed.py);
- `at_time`: a run as it stood at a wall-clock second, for the race replay.
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from specviz.decoding import speed
from specviz.decoding.trace import RunTrace
from specviz.viz.metrics import speedup
from specviz.viz.panels import row
from specviz.viz.runs import progress
from specviz.viz.style import BLACK, BLUE, GREY, YELLOW, FigureSpec, base_layout, esc, esc_plot, note_figure, scatter

SIDES = ("A", "B")
COLOURS = {"A": BLUE, "B": "#D55E00"}  # Okabe–Ito blue and vermillion
AR_DASH = {"A": "dash", "B": "dot"}
MAX_POSITIONS = 8  # acceptance-by-position columns shown; deeper ones are rare


@dataclass(frozen=True)
class Side:
    """One column as the comparison needs it: its run so far (None before a Step), its plain
    baseline if measured, and what it is (target, greedy, a label)."""
    run: RunTrace | None
    ar: RunTrace | None
    target: str
    greedy: bool
    label: str


@dataclass(frozen=True)
class Difference:
    """Where A's and B's outputs first differ; `position` None while they agree."""
    position: int | None
    compared: int  # tokens both sides have so far
    lossless: bool  # same target, both greedy: the outputs must agree
    sentence: str  # plain text: difference_html escapes it
    level: str  # "ok", "info" or "error" (an exact pair that differs: a bug)


def first_difference(a: Side, b: Side) -> Difference:
    ids_a = a.run.token_ids if a.run else []
    ids_b = b.run.token_ids if b.run else []
    n = min(len(ids_a), len(ids_b))
    at = next((i for i in range(n) if ids_a[i] != ids_b[i]), None)
    exact = a.target == b.target and a.greedy and b.greedy
    if not n:
        return Difference(None, 0, exact, "No tokens on both sides yet: press Step.", "info")
    if at is None:
        if exact:
            return Difference(None, n, True, f"The first {n} tokens are identical, as they must be: "
                                             "the same target decoding greedily gives the same output whatever "
                                             "the proposer.", "ok")
        return Difference(None, n, False, f"The first {n} tokens agree so far.", "info")
    word = lambda run: repr(run.token_texts[at]) if at < len(run.token_texts) else "?"  # noqa: E731
    where = f"The outputs first differ at token {at + 1} (A {word(a.run)}, B {word(b.run)})"
    if exact:
        return Difference(at, n, True, f"{where}, although the same target decodes greedily on both sides: "
                                       "that is a bug in a proposer or the verifier, not speculation.", "error")
    if a.target != b.target:
        why = "the targets differ, so their outputs may"
    else:
        why = ("sampling: each side draws its own tokens (a different seed, K or proposer changes which "
               "random numbers meet which choices), and both still follow the target's distribution")
    return Difference(at, n, False, f"{where}: {why}.", "info")


def _conditional(run: RunTrace) -> list[float]:
    return [r for r in (run.metrics or {}).get("acceptance_by_position") or [] if isinstance(r, (int, float))]


def _marginal(run: RunTrace) -> list[float]:
    """reach_d (decoding/speed.py), from the cycles, so a file from before the metric still shows it."""
    return speed.by_depth(run.cycles)[1]


def _rates(xs: list[float]) -> str:
    shown = ", ".join(f"{x:.0%}" for x in xs[:MAX_POSITIONS])
    return (shown + (" …" if len(xs) > MAX_POSITIONS else "")) or "–"


def summary_html(a: Side, b: Side) -> str:
    """A table: each side's configuration, tokens per cycle, α, acceptance by position (conditional
    and marginal), tokens/s and speedup over its target's plain decoding. Its cells wrap: the table
    shares its row with the race chart."""
    def cells(fn) -> list[str]:
        return [fn(side) if side.run is not None else "–" for side in (a, b)]

    def sp(side: Side) -> str:
        s = speedup(side.run.metrics, side.ar.metrics if side.ar else None)
        return "– (Run both measures plain decoding)" if s is None else f"<b>{s:.2f}×</b>"

    swatch = lambda name: f'<span style="color:{COLOURS[name]}">■</span> {name}'  # noqa: E731
    lines = [(["", swatch("A"), swatch("B")], "th"),
             (["configuration", esc(a.label), esc(b.label)], "td"),
             ([speed.label("mean_accepted_tokens")]
              + cells(lambda s: f"{s.run.metrics.get('mean_accepted_tokens', 0):.2f}"), "td"),
             ([speed.label("acceptance_rate")]
              + cells(lambda s: f"{s.run.metrics.get('acceptance_rate', 0):.2f}"), "td"),
             ([speed.label("acceptance_by_position")] + cells(lambda s: _rates(_conditional(s.run))), "td"),
             ([speed.label("reach_by_position")] + cells(lambda s: _rates(_marginal(s.run))), "td"),
             (["tokens / s"] + cells(lambda s: f"{s.run.metrics.get('tokens_per_s', 0):.1f}"), "td"),
             (["speedup over its target's plain decoding"] + cells(sp), "td")]
    body = "".join(row(cells_, tag, wrap=True) for cells_, tag in lines)
    return f'<table class="sv-pair-summary" style="border-collapse:collapse;font-size:13px">{body}</table>'


def difference_html(d: Difference) -> str:
    badge = {"ok": "✓ lossless", "error": "✕ not lossless", "info": "≠" if d.position is not None else "="}[d.level]
    return (f'<div class="sv-pair-diff sv-status sv-status-{d.level}" data-position="{d.position or ""}">'
            f'<b>{badge}</b> {esc(d.sentence)}</div>')


# Prefill is left out of both sides: when both columns decode one prompt on one target, the second
# copies the first's prefill (decoding/prefills.py) and would start the race at 0 s.
RACE_AXIS = "decode seconds (prefill left out of both sides: one side may copy the other's prefill)"


def race_figure(a: Side, b: Side, clock: float | None = None) -> go.Figure:
    """Tokens against wall-clock seconds for both runs and their targets' plain runs; `clock`
    draws the race replay's current second."""
    title = "Race: tokens over wall-clock time"
    if a.run is None and b.run is None:
        return note_figure(title, "No run yet: press Step or Run, or open a ready-made pair")
    fig = FigureSpec()
    ars_drawn: set[int] = set()
    for name, side in zip(SIDES, (a, b)):
        if side.run is not None:
            xs, ys = progress(side.run, prefill=False)
            fig.add_trace(scatter(x=xs, y=ys, mode="lines+markers", line_shape="hv",
                                  name=esc_plot(f"{name}: {side.label}"),
                                  line=dict(color=COLOURS[name], width=2.5), marker=dict(size=5),
                                  hovertemplate=f"%{{x:.2f}} s: %{{y}} tokens<extra>{name}</extra>"))
        if side.ar is not None and id(side.ar) not in ars_drawn:
            ars_drawn.add(id(side.ar))  # one plain line when both sides share a target's baseline
            xs, ys = progress(side.ar, prefill=False)
            who = "both targets" if a.ar is b.ar else f"{name}'s target"
            fig.add_trace(scatter(x=xs, y=ys, mode="lines", line_shape="hv", name=esc_plot(f"plain decoding, {who}"),
                                  line=dict(color=BLACK if a.ar is b.ar else COLOURS[name], width=1.5,
                                            dash=AR_DASH[name]),
                                  hovertemplate=f"%{{x:.2f}} s: %{{y}} tokens<extra>plain, {name}</extra>"))
    if clock is not None:
        fig.add_trace(scatter(x=[clock, clock], y=[0, _most_tokens(a, b)], mode="lines",
                              name=f"race clock {clock:.2f} s", line=dict(color=YELLOW, width=3), hoverinfo="skip"))
    base_layout(fig, title, RACE_AXIS, "tokens generated", legend_above=False)
    fig.update_layout(legend=dict(orientation="v", x=0.02, xanchor="left", y=0.98, yanchor="top",
                                  bgcolor="rgba(255,255,255,0.8)", bordercolor=GREY))
    fig.update_xaxes(rangemode="tozero")
    fig.update_yaxes(rangemode="tozero")
    return fig.build()


def _most_tokens(a: Side, b: Side) -> int:
    runs = [r for s in (a, b) for r in (s.run, s.ar) if r is not None]
    return max((len(r.token_ids) for r in runs), default=1)


def decode_clock(run: RunTrace, cycle) -> float:
    """Seconds from the end of the run's prefill to the end of `cycle`: the race's clock."""
    return cycle.elapsed_s - run.prefill_s


def race_end(a: Side, b: Side) -> float:
    """The decode second at which the slower of the two runs finished."""
    return max((decode_clock(s.run, s.run.cycles[-1]) for s in (a, b) if s.run is not None and s.run.cycles),
               default=0.0)


def cycles_by(run: RunTrace, second: float) -> int:
    """How many of the run's cycles had ended `second` decode seconds after its prefill."""
    return sum(1 for c in run.cycles if decode_clock(run, c) <= second)


def leader(a: Side, b: Side, second: float) -> str:
    """Who had more tokens at `second`, in words."""
    def tokens(side: Side) -> int:
        if side.run is None:
            return 0
        done = [c for c in side.run.cycles if decode_clock(side.run, c) <= second]
        return done[-1].total_tokens if done else 1  # the prefill's token is there when the clock starts
    ta, tb = tokens(a), tokens(b)
    if ta == tb:
        return f"At {second:.2f} s both have {ta} tokens."
    ahead = "A" if ta > tb else "B"
    return f"At {second:.2f} s {ahead} leads, {max(ta, tb)} tokens to {min(ta, tb)}."
