"""Everything the page shows, as a dict of output name → value, built from traces by specviz.viz."""
from __future__ import annotations

import html
from functools import lru_cache
from pathlib import Path

import gradio as gr

from specviz import viz
from specviz.decoding.trace import RunTrace

ASSETS = Path(__file__).resolve().parents[3] / "assets"
EXAMPLE_TRACE = ASSETS / "example_trace.json"
EXAMPLE_AR_TRACE = ASSETS / "example_ar_trace.json"

# The Decode tab's output names, in the order decode/layout.py wires them.
CYCLE_VIEWS = ("narration", "tree", "pq", "residual", "cache")
RUN_VIEWS = ("text", "plain_text", "metrics", "timeline", "acceptance")
OUTPUTS = ("status", "cycle") + CYCLE_VIEWS + RUN_VIEWS

LEVELS = ("info", "ok", "warn", "error")
EMPTY_NARRATION = "No cycle yet: press Step for one cycle, or Run to stream to the end."


def status_html(message: str, level: str = "info") -> str:
    """The status box: always visible text, never HTML from the message itself."""
    level = level if level in LEVELS else "info"
    icon = {"info": "ℹ", "ok": "✓", "warn": "⚠", "error": "✕"}[level]
    return (f'<div class="sv-status sv-status-{level}" role="status" aria-live="polite">'
            f'<span class="sv-status-icon" aria-hidden="true">{icon}</span> '
            f'<span class="sv-status-text">{html.escape(message)}</span></div>')


def narration_html(text: str) -> str:
    return f'<p class="sv-narration">{html.escape(text)}</p>'


def slider_update(n_cycles: int, index: int | None):
    """The cycle slider spans the cycles that exist; its value is the cycle on screen."""
    last = max(n_cycles - 1, 0)
    value = last if index is None else min(max(index, 0), last)
    return gr.update(minimum=0, maximum=max(last, 1), value=value, interactive=n_cycles > 1,
                     label=f"Cycle on screen (0–{last})" if n_cycles else "Cycle on screen")


def index_on_screen(run: RunTrace, index: int | None) -> int:
    """The cycle to show: `index` kept in range, or with None the newest cycle, except on the
    precomputed example, which opens on its most instructive cycle (viz.instructive_cycle)."""
    last = len(run.cycles) - 1
    if index is None:
        chosen = viz.instructive_cycle(run) if run is example()[0] else None
        return last if chosen is None else chosen
    return min(max(int(index), 0), last)


def cycle_views(run: RunTrace | None, index: int | None) -> dict:
    """The centre column for one cycle of `run` (see index_on_screen for index None)."""
    if run is None or not run.cycles:
        return {"cycle": slider_update(0, None), "narration": narration_html(EMPTY_NARRATION),
                "tree": None, "pq": None, "residual": None, "cache": ""}
    i = index_on_screen(run, index)
    cycle = run.cycles[i]
    # a suffix match, highlighted; a cross-family draft's seam between the two tokenizers
    narration = narration_html(viz.narrate(cycle)) + viz.match_html(cycle) + viz.seam_html(cycle)
    return {"cycle": slider_update(len(run.cycles), i), "narration": narration,
            "tree": viz.tree_figure(cycle), "pq": viz.pq_figure(cycle),
            "residual": viz.residual_figure(cycle), "cache": viz.cache_html(cycle)}


def run_views(run: RunTrace | None, ar: RunTrace | None) -> dict:
    """The output text and the timing column for the whole run so far."""
    run_or_empty = run if run is not None else RunTrace(method="")
    return {"text": viz.text_html(run_or_empty), "plain_text": run.text if run is not None else "",
            **timing_views(run, ar), "acceptance": viz.acceptance_figure(run_or_empty)}


def timing_views(run: RunTrace | None, ar: RunTrace | None) -> dict:
    return {"metrics": viz.metrics_html(run.metrics if run else None, ar.metrics if ar else None),
            "timeline": viz.timeline_figure(run, ar)}


def full(status: str, level: str, run: RunTrace | None, ar: RunTrace | None, index: int | None = None) -> dict:
    return {"status": status_html(status, level), **cycle_views(run, index), **run_views(run, ar)}


def only(**values) -> dict:
    """An update of some outputs; the others are left as they are."""
    return {name: values.get(name, gr.skip()) for name in OUTPUTS}


def as_tuple(values: dict, names: tuple[str, ...] = OUTPUTS) -> tuple:
    """`values` in the order of a tab's outputs `names`; a name not in it is left as it is."""
    return tuple(values.get(name, gr.skip()) for name in names)


@lru_cache(maxsize=1)
def example() -> tuple[RunTrace | None, RunTrace | None]:
    """The precomputed example run and its AR baseline (scripts/assets/make_example_trace.py)."""
    def read(path: Path) -> RunTrace | None:
        try:
            return RunTrace.from_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, TypeError, KeyError):
            return None
    return read(EXAMPLE_TRACE), read(EXAMPLE_AR_TRACE)


def example_status(run: RunTrace | None) -> str:
    if run is None or not run.cycles:
        return "Press Step for one cycle or Run to stream a whole run. The first model load takes a few seconds."
    s = run.settings
    shown = index_on_screen(run, None)
    what = ("an accepted draft, a rejection and the residual the new token was drawn from"
            if viz.teaches_everything(run.cycles[shown]) else "the cycle that accepted the most")
    return (f"Showing a precomputed example ({s.get('method')} on {s.get('target')}, "
            f"{len(run.cycles)} cycles), opened on cycle {shown}: {what}. Drag the cycle slider to "
            "explore it, or press Step or Run to decode live with the settings on the left.")
