"""The Advise tab: which draft, method and K for this target, on these prompts and this machine.

The measurement is specviz.advise.advisor's, run through work.advise (a GPU call on ZeroGPU) in the
same queue slot as every other model event; the drawing is specviz.viz.advice_figures. The tab opens
on a recorded survey (assets/recorded_advice.json), and a saved survey can be replayed without a
model, so the page paints before anything loads. Its prompts are the typed ones, or Spec-Bench questions
(ui/shared/questions.py), whose ids and categories the survey's summary line keeps.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import gradio as gr

from specviz.advise import advice
from specviz.advise.deploy import ENGINES
from specviz.advise.survey import AUTO
from specviz.loading.loader import EMPTY_PROMPT
from specviz.proposers import specs
from specviz.ui.runtime import work
from specviz.ui.runtime.limits import check_prompt_text, check_run_settings
from specviz.ui.runtime.presets import (
    BUNDLED,
    DEFAULT_METHOD,
    K_RANGE,
    MAX_NEW_RANGE,
    TARGETS,
    TEMPERATURE_RANGE,
    TOP_P_RANGE,
    method_label,
)
from specviz.ui.runtime.state import LIMITS, load_with_progress, session_of
from specviz.ui.shared import guard, questions
from specviz.ui.shared.views import ASSETS, status_html
from specviz.viz import advice_figures as afig
from specviz.viz import deploy_figures as dfig

RECORDED = ASSETS / "recorded_advice.json"


def method_choices() -> list[tuple[str, str]]:
    """The candidates' picker, from the registry: the app's default method as the app runs it (K auto),
    then every method that needs no draft model (those are typed: draft models below)."""
    auto = (f"{method_label(DEFAULT_METHOD)}, K auto (SpecViz's planner, as the app runs it)",
            f"{AUTO}{DEFAULT_METHOD}")
    return [auto, *((s.label, s.name) for s in specs() if not s.needs_draft)]


SEPARATOR = "---"  # a line holding only this separates two prompts
MAX_PROMPTS = 8
QUESTIONS_DEFAULT = 4  # one question from each of the first four leaderboard rows
MAX_CANDIDATES = 8
K_MAX_DEFAULT = 8
MAX_NEW_DEFAULT = 48
INTRO = ("<p class='sv-cmp-intro'>Every candidate decodes the prompts once at K max with planning off, so each "
         "draft depth is judged, and the page shows per depth α_d (acceptance at depth d, conditional) and "
         "reach_d (acceptance at depth d, marginal); 'K auto' runs as the app does, its planner choosing "
         "what to send. From them and the target's measured pass costs it predicts the speedup at every K and "
         "with several runs at once, ranks the candidates, then decodes the best ones for real beside plain "
         "decoding and, where a check is more than 15 % off, names the term of the model of speed that moved it. "
         "Separate prompts with "
         f"a line holding only <code>{SEPARATOR}</code>.</p>")


def _recorded() -> advice.Survey | None:
    try:
        return advice.read(RECORDED)
    except ValueError:
        return None


# What each engine's code boxes hold, and in which language they are highlighted (deploy/'s config
# and command of each engine): (configuration's label, its language, command's label, its language).
CODE_BOXES = {
    "vLLM": ("Configuration: --speculative-config (JSON)", "json", "Command that starts vLLM with it", "shell"),
    "HF generate": ("Configuration: keyword arguments", "python", "Python that decodes with it", "python"),
    "SGLang": ("Configuration: launch_server flags", "shell", "Command that starts SGLang with it", "shell"),
    "llama.cpp": ("Configuration: llama-server flags", "shell", "Command that starts llama-server with it", "shell"),
}
# _paint's values by name, in build's `outputs` order
OUTPUT_NAMES = ("status", "table", "curves", "accept", "concurrency", "download", "deploy", "pick",
                *(f"{part}:{engine}" for engine in ENGINES for part in ("info", "config", "command")),
                "by_batch", "schedule", "checks", "survey")
N_OUTPUTS = len(OUTPUT_NAMES)


def _deploy(survey: advice.Survey | None) -> tuple:
    """The deploy section's values: intro, the pick, each engine's (info, config, command), K by
    requests at once (its HTML and its command box), the checks on the engines, and the survey."""
    labels = dfig.picks(survey) if survey is not None and survey.measured else []
    pick = gr.update(choices=labels, value=labels[0] if labels else None, visible=len(labels) > 1)
    by_batch, schedule = dfig.concurrency_views(survey)
    intro = dfig.intro_html(survey) if survey is not None else ""
    return (intro, pick, *dfig.pick_views(survey, None), by_batch,
            gr.update(value=schedule, visible=bool(schedule)), dfig.checks_html(survey), survey)


def _paint(message: str, level: str, survey: advice.Survey | None, file: str | None = None) -> tuple:
    if survey is None:
        empty = advice.Survey("", 0, {}, "", 0.0, 0.0, {1: 1.0})
        return (status_html(message, level), "", afig.curves_figure(empty), afig.acceptance_figure(empty),
                afig.concurrency_figure(empty), file) + _deploy(None)
    return (status_html(message, level), afig.advice_html(survey), afig.curves_figure(survey),
            afig.acceptance_figure(survey), afig.concurrency_figure(survey), file) + _deploy(survey)


def show_pick(survey: advice.Survey | None, candidate: str | None) -> tuple:
    """Each engine's (info, config, command) for the deployable candidate the visitor picked."""
    return tuple(dfig.pick_views(survey, candidate))


def first_values() -> tuple:
    """What the tab shows before anyone measures: the recorded survey, said to be recorded."""
    survey = _recorded()
    if survey is None:
        return _paint("Pick a target, candidates and prompts, then press Advise.", "info", None)
    note = (f"Recorded on {survey.measured_at} ({survey.machine}), on the bundled model and six of the public "
            "benchmark prompts. Press Advise to measure on this server; 'python scripts/assets/record_advice.py' "
            "records it anew.")
    return _paint(note, "info", survey)


def parse_prompts(text: str) -> list[str]:
    prompts, lines = [], []
    for line in (text or "").splitlines() + [SEPARATOR]:
        if line.strip() == SEPARATOR:
            if "\n".join(lines).strip():
                prompts.append("\n".join(lines).strip())
            lines = []
        else:
            lines.append(line)
    return prompts


def candidates_of(methods: list[str], drafts: str) -> list[advice.Candidate]:
    out = [advice.Candidate.parse(m) for m in methods or []]
    out += [advice.Candidate.parse(f"draft:{d.strip()}") for d in (drafts or "").split(",") if d.strip()]
    if not out:
        raise ValueError("No candidate: tick at least one method, or name a draft model.")
    if len(out) > MAX_CANDIDATES:
        raise ValueError(f"{len(out)} candidates; this page measures at most {MAX_CANDIDATES} at once.")
    return out


def _save(survey: advice.Survey) -> str:
    path = Path(tempfile.mkdtemp(prefix="specviz-advice-")) / "survey.json"
    advice.save(survey, path)
    return str(path)


def run_advice(target: str, methods: list[str], drafts: str, prompts_text: str, k_max: int, max_new: int,
               temperature: float, top_p: float, check: int, under_concurrency: bool,
               source: str = questions.TYPED, questions_file=None, count: int = QUESTIONS_DEFAULT,
               request: gr.Request = None, progress=gr.Progress()):
    """Measure, predict and check on the typed prompts or the picked questions; stream what it does
    next, and paint the survey when done."""
    session = session_of(request)
    session.measure_stop.clear()
    try:
        spec = (target or BUNDLED).strip() or BUNDLED
        cands = candidates_of(methods, drafts)
        picked = questions.questions_of(source, questions_file, count)
        prompts = [q.prompt for q in picked] if picked else parse_prompts(prompts_text)
        if not prompts:
            raise ValueError(EMPTY_PROMPT)
        if len(prompts) > MAX_PROMPTS:
            raise ValueError(f"{len(prompts)} prompts; this page measures at most {MAX_PROMPTS} (the command line "
                             "takes any number: python -m specviz advise --prompts FILE).")
        for p in prompts:
            check_prompt_text(p, LIMITS)
        check_run_settings(LIMITS, int(k_max), int(max_new))
        options = dict(k_max=int(k_max), max_new_tokens=int(max_new), temperature=float(temperature),
                       top_p=float(top_p), check=int(check),
                       concurrency=advice.CONCURRENCY if under_concurrency else (),
                       prompts_from=questions.described(picked, source) if picked else "")
        yield _paint("Loading the models…", "info", None)
        load_with_progress(spec, progress)  # here, never inside a GPU call
        for c in cands:
            if c.draft:
                load_with_progress(c.draft, progress)
    except guard.USER_ERRORS as e:
        yield _paint(str(e), "error", None)
        return
    survey, stages = None, work.advise(spec, cands, prompts, options)
    try:
        for message, survey in stages:
            if message == "done":
                break
            progress(None, desc=message)
            yield _paint(f"{message[:1].upper()}{message[1:]}…", "info", survey if survey.measured else None)
            if session.measure_stop.is_set():
                yield _paint("Stopped. What was measured so far is shown; there are no checks yet.", "warn",
                             survey if survey.measured else None)
                return
    except Exception as e:  # noqa: BLE001 -- a failed measurement must not take the page down
        yield _paint(guard.message(e, guard.TAB_HINT), "error", survey if survey and survey.measured else None)
        return
    finally:
        stages.close()
    flagged = [k for k, c in survey.checks.items() if c.flag]
    level, note = ("warn", f"Done; the prediction for {', '.join(flagged)} missed by more than 15 % (why: in the "
                           "table).") if flagged else ("ok", "Done: measured, predicted and checked.")
    yield _paint(note, level, survey, _save(survey))


def replay(file) -> tuple:
    """A saved survey.json (or an older profile.json), shown without a model."""
    if file is None:
        return (gr.skip(),) * N_OUTPUTS
    name = Path(getattr(file, "name", file)).name
    try:
        survey = advice.read(Path(getattr(file, "name", file)))
        return _paint(f"Replayed {name}: measured {survey.measured_at} ({survey.machine}); no model ran.", "ok",
                      survey)
    except ValueError as e:
        return _paint(f"Could not replay {name}: {e}", "error", None)
    except Exception as e:  # noqa: BLE001 -- a hostile file must not take the page down
        return _paint(f"Could not replay {name}: it is not a survey SpecViz can draw ({type(e).__name__}: "
                      f"{str(e)[:200]}).", "error", None)


def stop(request: gr.Request) -> str:
    session_of(request).measure_stop.set()
    return status_html("Stopping after the current piece of work…", "warn")


def build(examples: list[str]) -> dict:
    """The tab's components, inside the page's Advise tab (`wire` connects them); `examples` are the
    page's example prompts, the first three of which fill the prompt box."""
    gr.HTML(INTRO)
    with gr.Row():
        target = gr.Dropdown(TARGETS, value=BUNDLED, allow_custom_value=True, label="Target", min_width=240,
                             elem_id="sv-adv-target")
        choices = method_choices()
        methods = gr.CheckboxGroup(choices, value=[name for _, name in choices],
                                   label="Draft-free and built-in candidates", elem_id="sv-adv-methods")
        drafts = gr.Textbox("", label="Draft models (comma-separated specs)", max_lines=1,
                            info="Each is checked against the target's tokenizer first.", elem_id="sv-adv-drafts")
    prompts = gr.Textbox(f"\n{SEPARATOR}\n".join(examples[:3]), lines=6, max_lines=16, label="Prompts",
                         elem_id="sv-adv-prompts")
    picker = questions.build("adv", QUESTIONS_DEFAULT, MAX_PROMPTS, typed="Typed prompts")
    with gr.Row():
        k_max = gr.Slider(*K_RANGE, value=min(K_MAX_DEFAULT, K_RANGE[1]), step=1, precision=0, label="K max",
                          elem_id="sv-adv-kmax")
        max_new = gr.Slider(*MAX_NEW_RANGE, value=MAX_NEW_DEFAULT, step=1, precision=0, label="Max new tokens",
                            elem_id="sv-adv-maxnew")
        temperature = gr.Slider(*TEMPERATURE_RANGE, value=0.0, step=0.05, label="Temperature",
                                elem_id="sv-adv-temp")
        top_p = gr.Slider(*TOP_P_RANGE, value=1.0, step=0.05, label="Top-p", elem_id="sv-adv-topp")
        check = gr.Slider(0, 4, value=2, step=1, precision=0, label="Check the best N for real",
                          elem_id="sv-adv-check")
        under_concurrency = gr.Checkbox(True, label="Predict with runs at once (times batched passes)",
                                 elem_id="sv-adv-concurrency-on")
    with gr.Row():
        go = gr.Button("Advise", variant="primary", elem_id="sv-adv-go")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="sv-adv-stop")
        upload = gr.File(label="Replay a survey.json", file_types=[".json"], height=90,
                         elem_id="sv-adv-upload")
    first = first_values()
    status = gr.HTML(first[0], elem_id="sv-adv-status")
    html = gr.HTML(first[1], elem_id="sv-adv-table")
    with gr.Row(equal_height=False):
        curves = gr.Plot(first[2], show_label=False, elem_id="sv-adv-curves")
        accept = gr.Plot(first[3], show_label=False, elem_id="sv-adv-accept")
    loadp = gr.Plot(first[4], show_label=False, elem_id="sv-adv-concurrency")
    deploy = _deploy_section(first)
    download = gr.File(label="This survey (JSON: advise --from reads it)", interactive=False,
                       elem_id="sv-adv-download")
    return dict(inputs=[target, methods, drafts, prompts, k_max, max_new, temperature, top_p, check,
                        under_concurrency, *(picker[k] for k in ("source", "questions_file", "count"))],
                outputs=[status, html, curves, accept, loadp, download, *deploy],
                go=go, stop=stop_btn, upload=upload, status=status, deploy=deploy)


def wire(c: dict, decode: dict) -> None:
    """Advise measures (in the page's shared group of model events, `decode`), Stop stops it, a
    survey file replays, and the deployable pick switches the engines' configurations."""
    outputs, status, deploy = c["outputs"], c["status"], c["deploy"]
    event = c["go"].click(run_advice, inputs=c["inputs"], outputs=outputs, api_name="advise",
                          show_progress_on=[status], **decode)
    c["stop"].click(stop, outputs=status, cancels=[event], api_name="advise_stop", show_progress="hidden")
    c["upload"].upload(replay, inputs=c["upload"], outputs=outputs, api_name="advise_replay", show_progress="hidden")
    pick, survey = deploy[1], deploy[-1]
    pick.input(show_pick, inputs=[survey, pick], outputs=deploy[2:2 + 3 * len(ENGINES)], api_visibility="private",
               show_progress="hidden")


def _deploy_section(first: tuple) -> list:
    """The deploy section's components, filled from `first` (_paint's values), in _deploy's order."""
    values = iter(first[6:])
    intro = gr.HTML(next(values), elem_id="sv-adv-deploy")
    start = next(values)
    pick = gr.Dropdown(start["choices"], value=start["value"], visible=start["visible"], label="Deployable candidate",
                       interactive=True, elem_id="sv-adv-pick")
    boxes = []
    with gr.Tabs(elem_id="sv-adv-engines"):
        for engine in ENGINES:
            config_label, config_lang, command_label, command_lang = CODE_BOXES[engine]
            key = engine.split()[0].lower().replace(".", "")
            with gr.Tab(engine, elem_id=f"sv-adv-engine-{key}"):
                boxes.append(gr.HTML(next(values), elem_id=f"sv-adv-info-{key}"))
                boxes.append(gr.Code(next(values), language=config_lang, label=config_label, lines=1, max_lines=6,
                                     interactive=False, wrap_lines=True, show_line_numbers=False, buttons=["copy"],
                                     elem_id=f"sv-adv-config-{key}"))
                boxes.append(gr.Code(next(values), language=command_lang, label=command_label, lines=1,
                                     max_lines=12, interactive=False, wrap_lines=True, show_line_numbers=False,
                                     buttons=["copy"], elem_id=f"sv-adv-command-{key}"))
    by_batch = gr.HTML(next(values), elem_id="sv-adv-bybatch")
    sched = next(values)
    schedule = gr.Code(sched["value"], language="shell", label="vLLM with K by requests at once", lines=1,
                       max_lines=8, interactive=False, wrap_lines=True, show_line_numbers=False, buttons=["copy"],
                       visible=sched["visible"], elem_id="sv-adv-schedule")
    checks = gr.HTML(next(values), elem_id="sv-adv-checks")
    survey = gr.State(next(values))
    return [intro, pick, *boxes, by_batch, schedule, checks, survey]
