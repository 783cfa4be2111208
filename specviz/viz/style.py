"""Shared look and text safety for every view: palette, marker symbols, escaping, number format.

Colours are Okabe–Ito (safe for the common colour-vision deficiencies), and each status or
origin also has its own marker symbol, glyph and underline style, so colour is never the only cue.
"""
from __future__ import annotations

import html
import textwrap

import plotly.graph_objects as go
import plotly.io as pio

from specviz.decoding.trace import ACCEPTED, BONUS, FROM_DRAFT, NOT_REACHED, REJECTED, RESAMPLED, TARGET

# Okabe–Ito colours; the three left over (sky blue, reddish purple, yellow) mark p, q and timing.
BLUE, VERMILLION, GREY, ORANGE, GREEN, BLACK = "#0072B2", "#D55E00", "#999999", "#E69F00", "#009E73", "#000000"
SKY, PURPLE, YELLOW = "#56B4E9", "#CC79A7", "#F0E442"
# by name, for what names its colour as data (a proposer's SourceSpec.colour)
PALETTE = {"blue": BLUE, "vermillion": VERMILLION, "grey": GREY, "orange": ORANGE, "green": GREEN,
           "black": BLACK, "sky": SKY, "purple": PURPLE, "yellow": YELLOW}
ROOT_COLOUR = "#555555"  # the committed prefix: neutral, not a verdict
P_COLOUR, Q_COLOUR = SKY, PURPLE

# status → (legend name, colour, plotly symbol, glyph used in HTML and tick labels)
STATUS = {
    ACCEPTED: ("accepted", BLUE, "circle", "●"),
    REJECTED: ("rejected", VERMILLION, "x", "✕"),
    NOT_REACHED: ("not reached", GREY, "circle-open", "○"),
    RESAMPLED: ("resampled", ORANGE, "star", "★"),
    BONUS: ("bonus", GREEN, "diamond", "◆"),
    TARGET: ("plain target", BLACK, "square", "■"),
}

# origin of a committed token → (legend name, colour, underline style); the style is the non-colour cue
ORIGIN = {
    FROM_DRAFT: ("accepted draft", BLUE, "2px solid"),
    RESAMPLED: ("resampled", ORANGE, "2px dashed"),
    BONUS: ("bonus", GREEN, "3px double"),
    TARGET: ("plain target", GREY, "1px dotted"),
}

FIG_HEIGHT = 340  # fits two stacked figures beside the config column at 1280×720
MARGIN = dict(l=50, r=10, t=50, b=45)
LEGEND_TOP = 96  # top margin with the legend between title and plot: the title and 3 legend rows
# plotly's mode bar (zoom, pan, download…) shows in a figure's top-right corner on hover; a strip this
# deep above the title keeps it off the title (the bar is 22 px of buttons, 2 px from the top)
MODEBAR_STRIP = 26
TITLE_PAD = 8  # between the strip and the title
NOTE_CHARS = 36  # line length of a figure's centred note: fits a 390 px phone screen at 14 px


# Markdown and LaTeX markers, written as entities: they look the same in HTML, but a page that
# passes the fragment through Markdown or KaTeX can no longer typeset model text.
_MARKUP = str.maketrans({"$": "&#36;", "*": "&#42;", "_": "&#95;", "`": "&#96;", "\\": "&#92;"})


def esc(text: str) -> str:
    """Escape model or prompt text for HTML (tags, quotes, and Markdown/LaTeX markers)."""
    return html.escape(text, quote=True).translate(_MARKUP)


def esc_plot(text: str) -> str:
    """Escape text for plotly labels and hover: plotly parses a subset of HTML and `$…$` as TeX."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("$", "&#36;")


def visible(text: str) -> str:
    """Make whitespace visible in a short label: ␣ for edge spaces, ↵ newline, ⇥ tab, ∅ empty."""
    if text == "":
        return "∅"
    text = text.replace("\r", "␍").replace("\n", "↵").replace("\t", "⇥")
    core = text.strip(" ")
    if not core:
        return "␣" * len(text)
    lead = len(text) - len(text.lstrip(" "))
    trail = len(text) - len(text.rstrip(" "))
    return "␣" * lead + core + "␣" * trail


def label(text: str, limit: int | None = None) -> str:
    """A token as a plotly label: whitespace made visible, cut to `limit` characters (before
    escaping, so no entity is split), then escaped."""
    shown = visible(text)
    if limit is not None and len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return esc_plot(shown)


def quote(text: str) -> str:
    """A token in plain prose, e.g. narration: quoted, with newline and tab written as escapes."""
    return "'" + text.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + "'"


def num(x: float | None) -> str:
    """Two decimals, or three significant digits when that would round a non-zero to 0.00."""
    if x is None:
        return "–"
    return f"{x:.3g}" if 0 < abs(x) < 0.005 else f"{x:.2f}"


# The trace types our figures draw. Their theme is plotly_white's, with the defaults of only these
# types: plotly copies the template into every figure and its JSON, and plotly_white's styles for
# the other 38 types (heatmaps, maps, 3-D...) were 4 KB of each figure, five figures a Step, each
# built, copied and sent to every student of a class. Drawing a new type? Add it here.
TRACE_TYPES = ("bar", "heatmap", "scatter")  # heatmap: the Spec-Bench category chart


def _theme(base: str = "plotly_white", kinds=TRACE_TYPES) -> go.layout.Template:
    full = pio.templates[base]
    return go.layout.Template(layout=full.layout, data={kind: getattr(full.data, kind) for kind in kinds})


# Set once: passing template= per figure deep-copies the theme each time, for every figure.
pio.templates["specviz"] = _theme()
pio.templates.default = "specviz"


def _merge(into: dict, new: dict) -> dict:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value
    return into


class FigureSpec:
    """Traces, layout and annotations gathered first and made into a go.Figure once (`.build()`).

    plotly re-validates the figure on every add_trace and update_* call, so a figure built one
    call at a time costs about three times one built by a single constructor call; a Step redraws
    five figures. Layout keys are nested dicts (no plotly "magic underscores").
    """

    def __init__(self):
        self.traces: list = []
        self.layout: dict = {}
        self.annotations: list[dict] = []

    def add_trace(self, trace) -> None:
        self.traces.append(trace)

    def add_annotation(self, **kw) -> None:
        self.annotations.append(kw)

    def update_layout(self, **kw) -> "FigureSpec":
        _merge(self.layout, kw)
        return self

    def update_xaxes(self, **kw) -> None:
        _merge(self.layout.setdefault("xaxis", {}), kw)

    def update_yaxes(self, **kw) -> None:
        _merge(self.layout.setdefault("yaxis", {}), kw)

    def build(self) -> go.Figure:
        layout = dict(self.layout, annotations=self.annotations) if self.annotations else self.layout
        return go.Figure(data=self.traces, layout=layout, _validate=VALIDATE)


# plotly checks every property as it is set: most of a Step's figure time, paid by every Step of a
# class. The figures here are fixed code, so they are built unchecked, and tests/viz/test_viz.py builds
# every one of them checked (VALIDATE on), where a wrong property fails.
VALIDATE = False


def scatter(**kw) -> go.Scatter:
    return go.Scatter(_validate=VALIDATE, **kw)


def bar(**kw) -> go.Bar:
    return go.Bar(_validate=VALIDATE, **kw)


def base_layout(fig, title: str, x_title: str, y_title: str, height: int = FIG_HEIGHT, legend_above: bool = True):
    """Title, axis titles, size and margins; the legend sits in a row under the title.

    With `legend_above` the top margin is deep enough for a legend that wraps to three rows (a
    narrow column), and the title is pinned to the top so the two never overlap. Figures that
    place their legend elsewhere, or have none, pass False. Above the title a strip is left for
    plotly's mode bar, so it never covers the title; `height` is the figure without that strip.
    """
    # One update call: each of plotly's update_* calls validates afresh (milliseconds apiece), and a
    # Step redraws five figures. None of our figures has a second x or y axis.
    margin = dict(MARGIN, t=(LEGEND_TOP if legend_above else MARGIN["t"]) + MODEBAR_STRIP)
    fig.update_layout(title=dict(text=title, x=0.01, y=1.0, yref="container", yanchor="top",
                                 pad=dict(t=MODEBAR_STRIP + TITLE_PAD), font=dict(size=14)),
                      height=height + (margin["t"] - MARGIN["t"]), margin=margin, hoverlabel=dict(align="left"),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0,
                                  font=dict(size=11)),
                      xaxis=dict(title=dict(text=x_title)), yaxis=dict(title=dict(text=y_title)))
    return fig


def note_figure(title: str, message: str, x_title: str = "", y_title: str = "") -> go.Figure:
    """An empty figure that says, in its middle, why there is nothing to draw."""
    fig = base_layout(FigureSpec(), title, x_title, y_title, legend_above=False)
    # plotly never wraps text: break it on spaces so a phone-width figure shows all of it
    lines = textwrap.wrap(message, NOTE_CHARS, break_long_words=False, break_on_hyphens=False)
    fig.add_annotation(text="<br>".join(lines) or message, x=0.5, y=0.5, xref="paper", yref="paper",
                       showarrow=False, font=dict(size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig.build()


def top_list(alts, n: int = 5) -> str:
    """`' the' 0.31, ' a' 0.12, …` for hover text, escaped."""
    return ", ".join(f"{label(a.text)} {num(a.prob)}" for a in alts[:n]) or "–"
