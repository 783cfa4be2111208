"""The Compare tab and the Theory & hardware tab.

Compare runs up to six configurations on one prompt against their AR baselines
(specviz.measure.comparison); Theory puts one of those runs, or the main view's run, on the predicted
S(K) curve (specviz.measure.theory) and shows the target's cost profile v(n) that the curve and the
planner use (specviz.pricing.costs); the batch-size panel times verify against step (specviz.measure.batch_effect).
Models come from the shared cache in state.py; every event that runs a model joins the same
queue slot as the main view's (the `decode` kwargs layout.py passes in), so timings stay honest.
"""
from __future__ import annotations

import functools

import gradio as gr

from specviz.loading.loader import EMPTY_PROMPT
from specviz.measure import theory
from specviz.measure.comparison import COLUMNS, Comparison, Config, Shared, parse_rows
from specviz.ui import errors, recorded, work
from specviz.ui.limits import check_prompt_text, check_run_settings
from specviz.ui.presets import BUNDLED, K_RANGE, MAX_NEW_RANGE, TARGETS
from specviz.ui.state import BASELINES, LIMITS, load_with_progress, session_of
from specviz.ui.views import status_html
from specviz.viz import compare_figures as cviz

DEFAULT_ROWS = [[BUNDLED, "hybrid", "", 16, 0.0],  # the app's default method first
                [BUNDLED, "pld", "", 16, 0.0], [BUNDLED, "logitspec", "", 16, 0.0],
                [BUNDLED, "draft", BUNDLED, 8, 0.0]]  # the last: a perfect draft that costs a whole target
DEFAULT_PROMPT = "Write the days of the week, one per line, then the months of the year, one per line."
MAX_NEW_DEFAULT = 48  # every configuration and its baseline decode this many: ~4 s each on a 2-core CPU
REPEATS_RANGE = (1, 5)
BATCH_K = 4  # the batch panel's default K: a verify pass of 5 tokens, a typical draft length
MAIN_RUN = "main"  # the theory source that means "the main view's current run"
INTRO = ("<p class='sv-cmp-intro'>Each row is one configuration (method: ar, draft, pld, logitspec, layerskip; "
         "the draft column is read only for method draft). One click warms every row up, then times it "
         "against plain decoding of the same target and temperature, on the same prompt, with trace "
         "recording off. Greedy rows must reproduce the plain output token for token.</p>")


def _error(exc: Exception) -> str:
    """The status box for a failed Compare or Theory event (errors.message; the box escapes it)."""
    return status_html(errors.message(exc, errors.TAB_HINT), "error")


# -- Compare ------------------------------------------------------------------------------------------
def _sources(comparison: Comparison | None):
    """Theory sources: each measured speculative row, then the main view's run."""
    choices = []
    if comparison is not None:
        for i, item in enumerate(comparison.items):
            if isinstance(item, Config) and item.method != "ar" and comparison.measured(item) is not None:
                choices.append((f"Compare row {i + 1}: {item.label()}", str(i)))
    choices.append(("The main view's run", MAIN_RUN))
    return gr.update(choices=choices, value=choices[0][1])


def _frame(message: str, level: str, comparison: Comparison | None, sources: bool = False) -> tuple:
    rows = comparison.rows() if comparison else []
    table = cviz.compare_table_html(rows, comparison.baseline_rows() if comparison else [])
    return (status_html(message, level), table, cviz.speedup_figure(rows),
            _sources(comparison) if sources else gr.skip())


def _summary(comparison: Comparison) -> tuple[str, str]:
    rows = comparison.rows()
    bad = [r for r in rows if r.get("error")]
    alarms = [r for r in rows if r.get("lossless") is False]
    if alarms:
        return (f"Done, but row {', '.join(str(r['index']) for r in alarms)} did not reproduce the AR output: "
                "see the alarm below the row.", "error")
    if bad:
        return f"Done; {len(bad)} row(s) could not run (reason in the table). The others are measured.", "warn"
    best = max((r for r in rows if r.get("speedup")), key=lambda r: r["speedup"], default=None)
    tail = f" Fastest: row {best['index']} at {best['speedup']:.2f}× AR." if best else ""
    return "Done: every row measured." + tail, "ok"


def _within_limits(item: Config | str) -> Config | str:
    """The server's K cap, per row: a row over it becomes its error message."""
    if isinstance(item, Config):
        try:
            check_run_settings(LIMITS, item.k, 1)
        except ValueError as e:
            return f"{item.label()}: {e}"
    return item


def compare(rows, prompt: str, max_new_tokens: int, repeats: int, seed: int, chat: bool,
            request: gr.Request, progress=gr.Progress()):
    """Warm up, then time every configuration `repeats` times against its AR baseline; stream the table."""
    session = session_of(request)  # keeps these tabs' last Comparison and Stop flag
    session.compare_stop.clear()
    try:
        if not (prompt or "").strip():
            raise ValueError(EMPTY_PROMPT)
        check_prompt_text(prompt, LIMITS)
        items = [_within_limits(x) for x in parse_rows(rows.values.tolist() if hasattr(rows, "values") else rows)]
        if not items:
            raise ValueError("No configuration: fill at least one row (target, method, draft, K, temperature).")
        shared = Shared.of(prompt, max_new_tokens=int(max_new_tokens or MAX_NEW_DEFAULT), seed=int(seed or 0),
                           chat=chat is not False, repeats=int(repeats or 1))
        check_run_settings(LIMITS, 1, shared.settings.max_new_tokens)
    except errors.USER_ERRORS as e:
        yield _frame(str(e), "error", None)
        return
    comparison = session.comparison = Comparison(items, shared)
    yield _frame("Starting: models load first, then every row warms up once.", "info", comparison)
    comparison.preload(functools.partial(load_with_progress, progress=progress))  # never inside a GPU call
    chunks = work.compare(comparison)
    try:
        for message, comparison in chunks:
            session.comparison = comparison
            progress((comparison.done, comparison.total), desc=message)
            yield _frame(f"{message} ({comparison.done}/{comparison.total})", "info", comparison)
            if session.compare_stop.is_set():
                yield _frame("Stopped. Rows measured so far are shown; the rest were not run.", "warn",
                             comparison, True)
                return
    finally:
        chunks.close()
    yield _frame(*_summary(comparison), comparison, True)


def stop(request: gr.Request) -> str:
    """Ask a running comparison or measurement to stop after the current cycle."""
    session_of(request).compare_stop.set()
    return status_html("Stopping after the current cycle…", "warn")


# -- Theory -------------------------------------------------------------------------------------------
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


def explain(source: str, request: gr.Request, progress=gr.Progress()):
    """Read α and c off the run's traces, v(n) from its target's cost profile (the planner's), and
    draw S(K) with the run on it, and the profile with the run's verify pass on it."""
    try:
        spec, run, ar = _main_run(request) if source == MAIN_RUN else _compare_run(request, source)
        load_with_progress(spec, progress)
        progress(None, desc="Reading the target's cost profile v(n)…")
        prof = work.verify_cost(spec)
        analysis = theory.analyse(run, ar, prof)
    except Exception as e:  # noqa: BLE001 -- a failed measurement must not take the page down
        return _error(e), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
    note = (f"v(n) is the curve the planner uses for {spec} ({prof.dtype}, {prof.device}): "
            f"{cviz.cost_source(prof)}; α, c and the overhead from the run's trace.")
    return (status_html(note, "ok"), cviz.theory_figure(analysis), cviz.theory_html(analysis),
            cviz.cost_figure(prof, analysis.verify_tokens + 1), cviz.waterfall_figure(analysis),
            cviz.waterfall_html(analysis))


def batch(target: str, k: int, refresh: bool, request: gr.Request, progress=gr.Progress()):
    """Time one plain step and one verify pass of K+1 tokens at batch 1…32 (cached per model and device)."""
    try:
        spec = (target or BUNDLED).strip() or BUNDLED
        load_with_progress(spec, progress)
        progress(None, desc="Timing batch sizes 1 to 32…")
        effect = work.batch(spec, int(k), bool(refresh))
    except Exception as e:  # noqa: BLE001 -- likewise
        return _error(e), gr.skip(), gr.skip()
    word = "Read from the cache" if effect.cached else "Measured now"
    return (status_html(f"{word}: tick 'Measure again' to re-time it.", "ok"),
            cviz.batch_figure(effect), cviz.batch_html(effect))


# -- layout -------------------------------------------------------------------------------------------
def _compare_tab() -> dict:
    gr.HTML(INTRO)
    c = {"rows": gr.Dataframe(DEFAULT_ROWS, headers=list(COLUMNS), datatype=["str", "str", "str", "number", "number"],
                              type="array", interactive=True,  # row_limits is not implemented in Gradio 6.31
                              label="Configurations (up to six rows)", elem_id="sv-cmp-rows")}
    c["prompt"] = gr.Textbox(DEFAULT_PROMPT, lines=3, max_lines=10, label="Prompt (the same for every row)",
                             elem_id="sv-cmp-prompt")
    with gr.Row():
        c["max_new_tokens"] = gr.Slider(*MAX_NEW_RANGE, value=MAX_NEW_DEFAULT, step=1, precision=0,
                                        label="Max new tokens", min_width=160)
        c["repeats"] = gr.Slider(*REPEATS_RANGE, value=1, step=1, precision=0, label="Repeats (median kept)",
                                 min_width=160)
        c["seed"] = gr.Number(0, precision=0, label="Seed", min_width=100)
        c["chat"] = gr.Checkbox(True, label="Chat template", min_width=120)
    with gr.Row():
        c["go"] = gr.Button("Compare", variant="primary", elem_id="sv-cmp-go")
        c["stop"] = gr.Button("Stop", variant="stop", elem_id="sv-cmp-stop")
    with gr.Row():  # wired by the Side by side tab (ui/pair_tab.wire_from_compare)
        c["pair_a"] = gr.Number(1, precision=0, label="Row for A", min_width=90, elem_id="sv-cmp-pair-a")
        c["pair_b"] = gr.Number(2, precision=0, label="Row for B", min_width=90, elem_id="sv-cmp-pair-b")
        c["to_pair"] = gr.Button("Open these two rows in Side by side", size="sm", elem_id="sv-cmp-to-pair")
    first = recorded.compare_values()  # recorded results until the first Compare
    c["status"] = gr.HTML(first["status"], elem_id="sv-cmp-status")
    c["table"] = gr.HTML(first["table"], elem_id="sv-cmp-table")
    c["chart"] = gr.Plot(first["chart"], show_label=False, elem_id="sv-cmp-chart")
    return c


def _theory_tab() -> dict:
    gr.HTML('<h3 class="sv-h">Theory against measurement</h3>')
    t = {"source": gr.Dropdown([("The main view's run", MAIN_RUN)], value=MAIN_RUN, label="Run to explain",
                               info="A measured Compare row, or the main view's run and its AR baseline.")}
    with gr.Row():
        t["explain"] = gr.Button("Put it on the theory curve", variant="primary", elem_id="sv-theory-go")
        t["stop"] = gr.Button("Stop", variant="stop")
    first = {**recorded.theory_values(), **recorded.cost_values(), **recorded.batch_values()}  # until measured here
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


def build_compare_tabs(decode: dict) -> dict:
    """Add the Compare and Theory & hardware tabs to the Blocks being built; `decode` holds the
    concurrency kwargs every model event shares. Returns the Compare tab's components."""
    with gr.Tab("Compare", id="compare", elem_id="sv-tab-compare"):
        c = _compare_tab()
    with gr.Tab("Theory & hardware", id="theory", elem_id="sv-tab-theory"):
        t = _theory_tab()
    inputs = [c[k] for k in ("rows", "prompt", "max_new_tokens", "repeats", "seed", "chat")]
    run = c["go"].click(compare, inputs=inputs, outputs=[c["status"], c["table"], c["chart"], t["source"]],
                        api_name="compare", show_progress_on=[c["status"]], **decode)
    c["stop"].click(stop, outputs=c["status"], cancels=[run], api_name="compare_stop", show_progress="hidden")
    theory_out = [t["theory_status"], t["theory_plot"], t["theory_html"], t["cost_plot"], t["waterfall_plot"],
                  t["waterfall_html"]]
    why = t["explain"].click(explain, inputs=t["source"], outputs=theory_out, api_name="theory",
                             show_progress_on=[t["theory_status"]], **decode)
    measure = t["measure"].click(batch, inputs=[t["target"], t["k"], t["refresh"]],
                                 outputs=[t["batch_status"], t["batch_plot"], t["batch_html"]],
                                 api_name="batch_effect", show_progress_on=[t["batch_status"]], **decode)
    t["stop"].click(stop, outputs=t["batch_status"], cancels=[why, measure], api_name=False, show_progress="hidden")
    return c
