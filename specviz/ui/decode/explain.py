"""'Explain this cycle': Previous / Next through the rules applied in the cycle on screen.

Each step redraws the tree, p-vs-q, residual and cache views with its part highlighted;
the arrow keys press Previous and Next (assets/keys.js). Done restores the plain views.
"""
from __future__ import annotations

import html

import gradio as gr

from specviz import viz
from specviz.ui.runtime.state import session_of
from specviz.ui.shared import views
from specviz.ui.shared.run import on_screen
from specviz.viz.explain_steps import explain_html, explain_steps, explained_views

HINT = ('<div class="sv-explain sv-explain-hint">Press <b>Explain this cycle</b> to walk through the cycle '
        'on screen one rule at a time: proposal, verify pass, each accept or reject, residual or bonus, '
        'rollback. Keys: <kbd>→</kbd> next, <kbd>←</kbd> previous.</div>')
VIEWS = ("tree", "pq", "residual", "cache")


def explain_block() -> dict:
    """The buttons and the step panel, for the centre column under the narration."""
    out = {}
    with gr.Row(elem_id="sv-explain-buttons"):
        out["explain_btn"] = gr.Button("Explain this cycle", size="sm", elem_id="sv-explain-start")
        out["explain_prev"] = gr.Button("◀ Previous", size="sm", elem_id="sv-explain-prev")
        out["explain_next"] = gr.Button("Next ▶", size="sm", elem_id="sv-explain-next")
        out["explain_done"] = gr.Button("Done", size="sm", elem_id="sv-explain-done")
    out["explain"] = gr.HTML(HINT, elem_id="sv-explain")
    out["explain_state"] = gr.State(None)  # (cycle index, step index) on screen, or None
    return out


def wire_explain(comps: dict) -> None:
    outputs = [comps["explain"], comps["explain_state"], *(comps[v] for v in VIEWS)]
    common = dict(outputs=outputs, show_progress="hidden", trigger_mode="always_last")
    comps["explain_btn"].click(start, **common, api_name="explain_start")
    comps["explain_next"].click(forward, inputs=comps["explain_state"], **common, api_name="explain_next")
    comps["explain_prev"].click(back, inputs=comps["explain_state"], **common, api_name="explain_prev")
    comps["explain_done"].click(done, **common, api_name="explain_done")
    # Step, Run, the slider, a lesson or a replay put another cycle on screen: the walk-through ends
    comps["narration"].change(lambda: (HINT, None), outputs=outputs[:2], queue=False, show_progress="hidden",
                              api_visibility="private")


def _cycle_on_screen(request: gr.Request):
    session = session_of(request)
    run = on_screen(session)[0]
    if run is None or not run.cycles:
        return None
    return run.cycles[views.index_on_screen(run, session.view)]  # the example opens on its chosen cycle


def _show(request: gr.Request, state, delta: int) -> tuple:
    cycle = _cycle_on_screen(request)
    if cycle is None:
        return ('<div class="sv-explain">No cycle to explain yet: press Step, or load a lesson.</div>', None,
                *(gr.skip() for _ in VIEWS))
    steps = explain_steps(cycle)
    same = isinstance(state, (list, tuple)) and len(state) == 2 and state[0] == cycle.index
    i = min(max(state[1] + delta, 0), len(steps) - 1) if same else 0
    shown = explained_views(cycle, steps, i)
    return (explain_html(cycle, steps, i), [cycle.index, i], *(shown[v] for v in VIEWS))


def _guarded_show(request: gr.Request, state, delta: int) -> tuple:
    """_show, with a cycle it cannot explain (a damaged replayed file) said in the panel instead of raised."""
    try:
        return _show(request, state, delta)
    except Exception as e:  # noqa: BLE001 -- never let a handler take the page down
        return (f'<div class="sv-explain">This cycle cannot be explained: {html.escape(type(e).__name__)}: '
                f'{html.escape(str(e)[:200])}.</div>', None, *(gr.skip() for _ in VIEWS))


def start(request: gr.Request) -> tuple:
    """Step 1 of the cycle on screen."""
    return _guarded_show(request, None, 0)


def forward(state, request: gr.Request) -> tuple:
    """The next step (the first, if the cycle on screen changed)."""
    return _guarded_show(request, state, 1)


def back(state, request: gr.Request) -> tuple:
    """The previous step (the first, if the cycle on screen changed)."""
    return _guarded_show(request, state, -1)


def done(request: gr.Request) -> tuple:
    """Leave the walk-through: plain views of the cycle on screen."""
    cycle = _cycle_on_screen(request)
    if cycle is None:
        return (HINT, None, *(gr.skip() for _ in VIEWS))
    try:
        return (HINT, None, viz.tree_figure(cycle), viz.pq_figure(cycle), viz.residual_figure(cycle),
                viz.cache_html(cycle))
    except Exception:  # noqa: BLE001 -- a damaged replayed cycle: leave the views as they are
        return (HINT, None, *(gr.skip() for _ in VIEWS))
