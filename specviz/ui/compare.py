"""The Compare tab: up to six configurations on one prompt, or on each of several Spec-Bench questions
(ui/shared/questions.py: the public subset or an uploaded question file; measure/question_runs.py runs
them), each timed against its AR baseline (specviz.measure.comparison). With questions, the chart is the
speedup by category and method (viz/category_figures.py). Models come from the shared cache
(runtime/state.py); its event joins the same queue slot as every model event of the page (the `decode`
kwargs page.py passes in), so timings stay honest. The Theory & hardware tab explains its measured rows (ui/theory.py).
"""
from __future__ import annotations

import functools

import gradio as gr

from specviz.loading.loader import EMPTY_PROMPT
from specviz.measure.comparison import COLUMNS, Comparison, Config, Shared, parse_rows
from specviz.measure.question_runs import QuestionComparison
from specviz.proposers import methods
from specviz.ui.runtime import work
from specviz.ui.runtime.limits import check_prompt_text, check_run_settings
from specviz.ui.runtime.presets import BUNDLED, MAX_NEW_RANGE
from specviz.ui.runtime.state import LIMITS, load_with_progress, session_of
from specviz.ui.shared import guard, questions, recordings
from specviz.ui.shared.views import status_html
from specviz.viz import category_figures
from specviz.viz import compare_figures as cviz

DEFAULT_ROWS = [[BUNDLED, "hybrid", "", 16, 0.0],  # the app's default method first
                [BUNDLED, "pld", "", 16, 0.0], [BUNDLED, "logitspec", "", 16, 0.0],
                [BUNDLED, "draft", BUNDLED, 8, 0.0]]  # the last: a perfect draft that costs a whole target
DEFAULT_PROMPT = "Write the days of the week, one per line, then the months of the year, one per line."
MAX_NEW_DEFAULT = 48  # every configuration and its baseline decode this many: ~4 s each on a 2-core CPU
REPEATS_RANGE = (1, 5)
QUESTIONS_DEFAULT = 3  # each question times every row and its baseline again: ~1 min a question on a 2-core CPU
MAX_QUESTIONS = 40  # past this a page event runs for an hour; `specviz bench --suite spec-bench` is for more


def intro() -> str:
    """The tab's help, naming every method a row takes (the registry's)."""
    return (f"<p class='sv-cmp-intro'>Each row is one configuration (method: {', '.join(methods())}; the draft "
            "column is read only for method draft). One click warms every row up, "
            "then times it against plain decoding of the same target and temperature, on the same prompt, with trace "
            "recording off. Greedy rows must reproduce the plain output token for token.</p>")


OUTPUTS = ("status", "table", "chart")
compare_handler = guard.guarded(OUTPUTS, guard.TAB_HINT)


# -- handlers -----------------------------------------------------------------------------------------
def _frame(message: str, level: str, comparison: Comparison | QuestionComparison | None) -> dict:
    rows = comparison.rows() if comparison else []
    if isinstance(comparison, QuestionComparison):
        return {"status": status_html(message, level),
                "table": cviz.question_table_html(rows, comparison.baseline_rows()),
                "chart": category_figures.category_figure(category_figures.rows_from_compare(rows))}
    return {"status": status_html(message, level),
            "table": cviz.compare_table_html(rows, comparison.baseline_rows() if comparison else []),
            "chart": cviz.speedup_figure(rows)}


def _summary(comparison: Comparison | QuestionComparison) -> tuple[str, str]:
    if isinstance(comparison, QuestionComparison):
        return _questions_summary(comparison)
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


def _questions_summary(comparison: QuestionComparison) -> tuple[str, str]:
    rows = comparison.rows()
    alarms = [f"row {r['index']} on question {r['question_id']}" for r in rows if r.get("lossless") is False]
    if alarms:
        return (f"Done, but {', '.join(alarms)} did not reproduce the AR output: see the alarms in the table.", "error")
    bad = [r for r in rows if r.get("error")]
    done = f"{len(comparison.questions)} question(s) × {len(comparison.configs)} configuration(s)"
    if bad:
        return f"Done: {done}; {len(bad)} result(s) could not run (reason in the table).", "warn"
    return f"Done: {done} measured; the chart gives each category's geometric mean.", "ok"


def _check_prompts(prompt: str, picked) -> None:
    """The typed prompt, or each question, within the server's limits; a question's refusal names it."""
    if not picked:
        if not (prompt or "").strip():
            raise ValueError(EMPTY_PROMPT)
        check_prompt_text(prompt, LIMITS)
    for q in picked or ():
        try:
            check_prompt_text(q.prompt, LIMITS)
        except ValueError as e:
            raise ValueError(f"Question {q.id} ({q.category}): {e}") from None


def _within_limits(item: Config | str) -> Config | str:
    """The server's K cap, per row: a row over it becomes its error message."""
    if isinstance(item, Config):
        try:
            check_run_settings(LIMITS, item.k, 1)
        except ValueError as e:
            return f"{item.label()}: {e}"
    return item


@compare_handler
def compare(rows, prompt: str, max_new_tokens: int, repeats: int, seed: int, chat: bool,
            source: str = questions.TYPED, questions_file=None, count: int = QUESTIONS_DEFAULT,
            request: gr.Request = None, progress=gr.Progress()):
    """Warm up, then time every configuration `repeats` times against its AR baseline, on the typed
    prompt or on each picked question; stream the table."""
    session = session_of(request)  # keeps these tabs' last Comparison and Stop flag
    session.measure_stop.clear()
    try:
        picked = questions.questions_of(source, questions_file, count)
        _check_prompts(prompt, picked)
        items = [_within_limits(x) for x in parse_rows(rows.values.tolist() if hasattr(rows, "values") else rows)]
        if not items:
            raise ValueError("No configuration: fill at least one row (target, method, draft, K, temperature).")
        shared = Shared.of(prompt, max_new_tokens=int(max_new_tokens or MAX_NEW_DEFAULT), seed=int(seed or 0),
                           chat=chat is not False, repeats=int(repeats or 1))
        check_run_settings(LIMITS, 1, shared.settings.max_new_tokens)
    except guard.USER_ERRORS as e:
        yield _frame(str(e), "error", None)
        return
    comparison = session.comparison = (QuestionComparison(items, picked, shared) if picked
                                       else Comparison(items, shared))
    yield _frame("Starting: models load first, then every row warms up once.", "info", comparison)
    comparison.preload(functools.partial(load_with_progress, progress=progress))  # never inside a GPU call
    chunks = work.compare(comparison)
    try:
        for message, comparison in chunks:
            session.comparison = comparison
            progress((comparison.done, comparison.total), desc=message)
            yield _frame(f"{message} ({comparison.done}/{comparison.total})", "info", comparison)
            if session.measure_stop.is_set():
                yield _frame("Stopped. Rows measured so far are shown; the rest were not run.", "warn", comparison)
                return
    finally:
        chunks.close()
    yield _frame(*_summary(comparison), comparison)


def stop(request: gr.Request) -> str:
    """Ask a running comparison to stop after the current cycle."""
    session_of(request).measure_stop.set()
    return status_html("Stopping after the current cycle…", "warn")


# -- Theory -------------------------------------------------------------------------------------------
# -- layout -------------------------------------------------------------------------------------------
def _layout() -> dict:
    gr.HTML(intro())
    c = {"rows": gr.Dataframe(DEFAULT_ROWS, headers=list(COLUMNS), datatype=["str", "str", "str", "number", "number"],
                              type="array", interactive=True,  # row_limits is not implemented in Gradio 6.31
                              label="Configurations (up to six rows)", elem_id="sv-cmp-rows")}
    c["prompt"] = gr.Textbox(DEFAULT_PROMPT, lines=3, max_lines=10, label="Prompt (the same for every row)",
                             elem_id="sv-cmp-prompt")
    c.update(questions.build("cmp", QUESTIONS_DEFAULT, MAX_QUESTIONS))
    with gr.Row():
        c["max_new_tokens"] = gr.Slider(*MAX_NEW_RANGE, value=MAX_NEW_DEFAULT, step=1, precision=0,
                                        label="Max new tokens", min_width=160, elem_id="sv-cmp-maxnew")
        c["repeats"] = gr.Slider(*REPEATS_RANGE, value=1, step=1, precision=0, label="Repeats (median kept)",
                                 min_width=160)
        c["seed"] = gr.Number(0, precision=0, label="Seed", min_width=100)
        c["chat"] = gr.Checkbox(True, label="Chat template", min_width=120)
    with gr.Row():
        c["go"] = gr.Button("Compare", variant="primary", elem_id="sv-cmp-go")
        c["stop"] = gr.Button("Stop", variant="stop", elem_id="sv-cmp-stop")
    with gr.Row():  # wired by the page to the Side by side tab (side_by_side/layout.wire_from_compare)
        c["pair_a"] = gr.Number(1, precision=0, label="Row for A", min_width=90, elem_id="sv-cmp-pair-a")
        c["pair_b"] = gr.Number(2, precision=0, label="Row for B", min_width=90, elem_id="sv-cmp-pair-b")
        c["to_pair"] = gr.Button("Open these two rows in Side by side", size="sm", elem_id="sv-cmp-to-pair")
    first = recordings.compare_values()  # recorded results until the first Compare
    c["status"] = gr.HTML(first["status"], elem_id="sv-cmp-status")
    c["table"] = gr.HTML(first["table"], elem_id="sv-cmp-table")
    c["chart"] = gr.Plot(first["chart"], show_label=False, elem_id="sv-cmp-chart")
    return c


def build() -> dict:
    """The tab's components, inside the page's Compare tab (`wire` connects them; the page wires two
    of them to the Side by side tab, and the Compare event to the Theory tab's sources)."""
    return _layout()


def wire(c: dict, decode: dict) -> None:
    """Compare measures in the page's shared group of model events (`decode`); Stop stops it. The
    Compare event is kept as c["event"] for the page."""
    inputs = [c[k] for k in ("rows", "prompt", "max_new_tokens", "repeats", "seed", "chat", "source",
                             "questions_file", "count")]
    c["event"] = c["go"].click(compare, inputs=inputs, outputs=[c[k] for k in OUTPUTS], api_name="compare",
                               show_progress_on=[c["status"]], **decode)
    c["stop"].click(stop, outputs=c["status"], cancels=[c["event"]], api_name="compare_stop", show_progress="hidden")
