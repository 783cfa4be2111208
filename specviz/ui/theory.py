"""The Theory & hardware tab: a run, the Decode tab's or a measured Compare row, on the predicted S(K)
curve and the waterfall from the paper's formula to its measured speedup (specviz.measure.waterfall);
the target's cost profile v(n) that the curve and the planner use (specviz.pricing.costs); and the
batch-size panel, which times a verify pass against a plain one-token pass (specviz.measure.batch_effect).
"""
from __future__ import annotations

import gradio as gr

from specviz.measure import waterfall
from specviz.measure.comparison import Config
from specviz.ui.runtime import work
from specviz.ui.runtime.presets import BUNDLED, K_RANGE, TARGETS
from specviz.ui.runtime.state import BASELINES, load_with_progress, session_of
from specviz.ui.shared import guard, recordings
from specviz.ui.shared.views import status_html
from specviz.viz import compare_figures as cviz

BATCH_K = 4  # the batch panel's default K: a verify pass of 5 tokens, a typical draft length
MAIN_RUN = "main"  # the source that means "the Decode tab's current run"
THEORY_OUTPUTS = ("theory_status", "theory_plot", "theory_html", "cost_plot", "waterfall_plot", "waterfall_html")
BATCH_OUTPUTS = ("batch_status", "batch_plot", "batch_html")
theory_handler = guard.guarded(THEORY_OUTPUTS, guard.TAB_HINT, status="theory_status")
batch_handler = guard.guarded(BATCH_OUTPUTS, guard.TAB_HINT, status="batch_status")


# -- handlers -----------------------------------------------------------------------------------------
def _main_run(request: gr.Request | None):
    session = session_of(request)
    run = None if session.example else session.run()
    if run is None or session.settings is None:
        raise ValueError("The main view has no run yet: press Run there (it measures the AR baseline too).")
    ar = BASELINES.get(session.settings.ar_key())
    if ar is None:
        raise ValueError("The main view's run has no AR baseline yet: press 'Measure AR baseline' there.")
    return session.settings.target, run, ar


def _compare_run(request: gr.Request | None, source: str):
    comparison = session_of(request).comparison
    try:
        config = comparison.items[int(source)]
        mine, ar = comparison.measured(config), comparison.measured(config.baseline())
    except (AttributeError, IndexError, TypeError, ValueError):
        mine = ar = None
    if mine is None or ar is None:
        raise ValueError("That Compare row has no measured run: press Compare on the Compare tab first.")
    return config.target, mine.run, ar.run


@theory_handler
def explain(source: str, request: gr.Request, progress=gr.Progress()) -> dict:
    """Read α and c off the run's traces, v(n) from its target's cost profile (the planner's), and
    draw S(K) with the run on it, and the profile with the run's verify pass on it."""
    spec, run, ar = _main_run(request) if source == MAIN_RUN else _compare_run(request, source)
    load_with_progress(spec, progress)
    progress(None, desc="Reading the target's cost profile v(n)…")
    prof = work.verify_cost(spec)
    analysis = waterfall.analyse(run, ar, prof)
    note = (f"v(n) is the curve the planner uses for {spec} ({prof.dtype}, {prof.device}): "
            f"{cviz.cost_source(prof)}; α, c and the overhead from the run's trace.")
    return {"theory_status": status_html(note, "ok"), "theory_plot": cviz.theory_figure(analysis),
            "theory_html": cviz.theory_html(analysis), "cost_plot": cviz.cost_figure(prof, analysis.verify_tokens + 1),
            "waterfall_plot": cviz.waterfall_figure(analysis), "waterfall_html": cviz.waterfall_html(analysis)}


@batch_handler
def batch(target: str, k: int, refresh: bool, request: gr.Request, progress=gr.Progress()) -> dict:
    """Time one plain one-token pass and one verify pass of K+1 tokens at batch 1…32 (cached per model
    and device)."""
    spec = (target or BUNDLED).strip() or BUNDLED
    load_with_progress(spec, progress)
    progress(None, desc="Timing batch sizes 1 to 32…")
    effect = work.batch(spec, int(k), bool(refresh))
    word = "Read from the cache" if effect.cached else "Measured now"
    return {"batch_status": status_html(f"{word}: tick 'Measure again' to re-time it.", "ok"),
            "batch_plot": cviz.batch_figure(effect), "batch_html": cviz.batch_html(effect)}


def sources(request: gr.Request):
    """The runs this tab can explain: each measured speculative row of the visitor's last Compare,
    then the main view's run (after a Compare, the page calls this)."""
    comparison = session_of(request).comparison
    choices = []
    if comparison is not None:
        for i, item in enumerate(comparison.items):
            if isinstance(item, Config) and item.method != "ar" and comparison.measured(item) is not None:
                choices.append((f"Compare row {i + 1}: {item.label()}", str(i)))
    choices.append(("The main view's run", MAIN_RUN))
    return gr.update(choices=choices, value=choices[0][1])


def stop(request: gr.Request) -> str:
    """Ask a running explanation or batch measurement to stop (the events are cancelled)."""
    session_of(request).measure_stop.set()
    return status_html("Stopping…", "warn")




# -- layout -------------------------------------------------------------------------------------------
def _layout() -> dict:
    gr.HTML('<h3 class="sv-h">Theory against measurement</h3>')
    # custom values allowed: the choices grow after a Compare (`sources`, through the page), and an API
    # caller names a row by its index; `explain` refuses a row that was not measured, with a message
    t = {"source": gr.Dropdown([("The main view's run", MAIN_RUN)], value=MAIN_RUN, label="Run to explain",
                               allow_custom_value=True,
                               info="A measured Compare row, or the main view's run and its AR baseline.")}
    with gr.Row():
        t["explain"] = gr.Button("Put it on the theory curve", variant="primary", elem_id="sv-theory-go")
        t["stop"] = gr.Button("Stop", variant="stop")
    # recorded results until measured here
    first = {**recordings.theory_values(), **recordings.cost_values(), **recordings.batch_values()}
    t["theory_status"] = gr.HTML(first["theory_status"], elem_id="sv-theory-status")
    with gr.Row(equal_height=False):
        t["theory_plot"] = gr.Plot(first["theory_plot"], show_label=False, elem_id="sv-theory-plot")
        t["theory_html"] = gr.HTML(first["theory_html"], elem_id="sv-theory-html")
    with gr.Row(equal_height=False):
        t["waterfall_plot"] = gr.Plot(first["waterfall_plot"], show_label=False, elem_id="sv-waterfall-plot")
        t["waterfall_html"] = gr.HTML(first["waterfall_html"], elem_id="sv-waterfall-html")
    gr.HTML('<h3 class="sv-h">Cost of a target pass on this hardware</h3>')
    t["cost_plot"] = gr.Plot(first["cost_plot"], show_label=False, elem_id="sv-cost-plot")
    gr.HTML(cviz.cost_caption_html(), elem_id="sv-cost-caption")
    gr.HTML('<h3 class="sv-h">Batch-size effect</h3>')
    with gr.Row():
        t["target"] = gr.Dropdown(TARGETS, value=BUNDLED, allow_custom_value=True, label="Model", min_width=240)
        t["k"] = gr.Slider(*K_RANGE, value=BATCH_K, step=1, precision=0, label="K (the verify pass holds K+1 tokens)")
        t["refresh"] = gr.Checkbox(False, label="Measure again (ignore the cache)")
    t["measure"] = gr.Button("Measure batch sizes 1 to 32", elem_id="sv-batch-go")
    t["batch_status"] = gr.HTML(first["batch_status"], elem_id="sv-batch-status")
    with gr.Row(equal_height=False):
        t["batch_plot"] = gr.Plot(first["batch_plot"], show_label=False, elem_id="sv-batch-plot")
        t["batch_html"] = gr.HTML(first["batch_html"], elem_id="sv-batch-html")
    return t


def build() -> dict:
    """The tab's components, inside the page's Theory & hardware tab (`wire` connects them; the page
    points `source` at the Compare tab's rows)."""
    return _layout()


def wire(t: dict, decode: dict) -> None:
    """Explain and the batch-size measurement run in the page's shared group of model events; Stop stops either."""
    why = t["explain"].click(explain, inputs=t["source"], outputs=[t[k] for k in THEORY_OUTPUTS], api_name="theory",
                             show_progress_on=[t["theory_status"]], **decode)
    measure = t["measure"].click(batch, inputs=[t["target"], t["k"], t["refresh"]],
                                 outputs=[t[k] for k in BATCH_OUTPUTS], api_name="batch_effect",
                                 show_progress_on=[t["batch_status"]], **decode)
    t["stop"].click(stop, outputs=t["batch_status"], cancels=[why, measure], api_name=False, show_progress="hidden")
