"""The page: configuration on the left, one cycle at a time in the centre, timing on the right.

Components open on the precomputed example run, so the first paint needs no model.
"""
from __future__ import annotations

import json
import logging

import gradio as gr

from specviz.decoding import tracefile
from specviz.proposers import HEAD_DRAFT
from specviz.ui import callbacks, explain, learn, lessons, memory, replay, sessions, state, views
from specviz.ui.advise_tab import build_advise_tab
from specviz.ui.compare_tab import build_compare_tabs
from specviz.ui.limits import served_targets
from specviz.ui.pair_layout import build_pair_tab, wire_from_compare
from specviz.ui.presets import (
    DEFAULT_METHOD,
    K_RANGE,
    KNOBS,
    MAX_NEW_RANGE,
    METHOD_LABELS,
    METHODS,
    TARGETS,
    TEMPERATURE_RANGE,
    TOP_P_RANGE,
    Knob,
    draft_choices,
    k_default,
)
from specviz.ui.settings import BASE_INPUTS, RunSettings
from specviz.ui.views import ASSETS
from specviz.ui.warmup import WARMUP
from specviz.ui.zerogpu import on_zero_gpu

log = logging.getLogger(__name__)
EXAMPLES = ASSETS / "examples.json"
CSS = ASSETS / "app.css"
HEADER = ASSETS / "header.html"
KEYS_JS = ASSETS / "keys.js"  # arrow keys step through 'Explain this cycle'
# System fonts: the default theme fetches Google Fonts, which an offline machine cannot reach.
THEME = gr.themes.Default(
    primary_hue="blue",
    font=[gr.themes.Font(f) for f in ("system-ui", "Segoe UI", "Roboto", "sans-serif")],
    font_mono=[gr.themes.Font(f) for f in ("ui-monospace", "Menlo", "Consolas", "monospace")])


def decode_events(limits) -> dict:
    """Every event that runs a model shares one group of SPECVIZ_CONCURRENCY slots (limits.py):
    Steps that wait at the same moment share one verify pass, and timings say when they ran
    beside other model calls (ui/work.ACTIVITY)."""
    return dict(concurrency_id="decode", concurrency_limit=limits.concurrency)


def launch_kwargs() -> dict:
    """Gradio 6 takes theme and CSS at launch(); app.py and the tests use the same ones."""
    # run_history off: Gradio 6 would keep every output in the browser and re-serialise it after each
    # event; Export already saves a run. max_file_size: Gradio refuses an upload larger than the largest
    # file a reader accepts (a trace) before it is stored (README, "Uploads").
    return dict(theme=THEME, css_paths=[CSS, ASSETS / "compare.css"], js=KEYS_JS.read_text(encoding="utf-8"),
                run_history=False, max_file_size=tracefile.MAX_BYTES)


def initial_settings() -> RunSettings:
    """The example run's settings, so the page's controls describe what it shows."""
    run = views.example()[0]
    s = dict(run.settings) if run is not None else {}
    fields = RunSettings.__dataclass_fields__
    known = {k: v for k, v in s.items() if k in fields and k not in ("knobs", "draft", "method", "proposer")}
    proposer = s.get("proposer") or s.get("method")  # a run recorded before RunSettings had `proposer`
    if proposer == "head":  # the trained head is offered as a draft in the picker
        proposer, known["draft"] = "draft", HEAD_DRAFT
    elif proposer == "draft" and s.get("draft"):
        known["draft"] = s["draft"]
    known["proposer"] = proposer if proposer in {m for _, m in METHODS} else DEFAULT_METHOD
    prompt = load_examples()[0]["prompt"] if load_examples() else ""
    known.setdefault("prompt", prompt)
    return RunSettings(**known)


def load_examples() -> list[dict]:
    try:
        return json.loads(EXAMPLES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []


def knob_input(knob: Knob):
    info = knob.info or None
    if knob.kind == "layers":
        return gr.Textbox(value=knob.initial() or "", label=knob.label, info=info, max_lines=1)
    if knob.kind == "bool":
        return gr.Checkbox(value=bool(knob.initial()), label=knob.label, info=info)
    return gr.Slider(knob.minimum, knob.maximum, value=knob.initial(), step=knob.step,
                     precision=0 if knob.kind == "int" else None, label=knob.label, info=info)


def method_inputs(s: RunSettings) -> tuple[dict, list]:
    """The draft picker and each method's knob group, visible only while that method is chosen."""
    choices = draft_choices(s.target)
    value = s.draft or (choices[0][1] if choices else None)
    comps = {"draft": gr.Dropdown(choices, value=value, allow_custom_value=True,
                                  label="Draft model", visible=s.proposer == "draft", elem_id="sv-draft",
                                  info="Must share the target's tokenizer: a preset or any hub id.")}
    groups = []
    for method in dict.fromkeys(k.method for k in KNOBS):
        with gr.Accordion(f"{METHOD_LABELS[method]} options", open=False, visible=s.proposer == method) as group:
            for knob in (k for k in KNOBS if k.method == method):
                comps[knob.key] = knob_input(knob)
        groups.append((method, group))
    return comps, groups


def config_column(s: RunSettings) -> tuple[dict, list]:
    gr.HTML('<h3 class="sv-h">Configuration</h3>')
    served = served_targets(state.LIMITS)  # targets served by vLLM, from the deployment's list
    info = "A preset, any hub id (owner/name) or a local model folder."
    if served:
        info += " The 'served by vLLM' targets run on this deployment's vLLM server."
    comps = {"target": gr.Dropdown(TARGETS + served, value=s.target, allow_custom_value=True, label="Target model",
                                   info=info,
                                   elem_id="sv-target")}
    comps["method"] = gr.Radio(METHODS, value=s.proposer, label="Proposer (how drafts are made)")
    knob_comps, groups = method_inputs(s)
    comps.update(knob_comps)
    comps["k"] = gr.Slider(*K_RANGE, value=s.k, step=1, precision=0, label="K: draft length per cycle",
                           info="Tokens drafted per cycle (tree depth for LogitSpec).")
    comps["adaptive_k"] = gr.Checkbox(value=s.adaptive_k, label="Adaptive K (+2 after a full accept, −1 after a miss)")
    comps["prompt"] = gr.Textbox(value=s.prompt, lines=6, max_lines=16, label="Prompt", elem_id="sv-prompt")
    examples = load_examples()
    if examples:
        gr.Examples([[e["prompt"]] for e in examples], inputs=[comps["prompt"]], label="Example prompts",
                    example_labels=[e["label"] for e in examples], cache_examples=False, cache_mode="lazy")
    comps["temperature"] = gr.Slider(*TEMPERATURE_RANGE, value=s.temperature, step=0.05,
                                     label="Temperature", info="0 = greedy (argmax); above 0 samples.")
    comps["top_p"] = gr.Slider(*TOP_P_RANGE, value=s.top_p, step=0.01, label="Top-p",
                               info="Applied identically to p and q before they are compared.")
    with gr.Row():
        comps["seed"] = gr.Number(value=s.seed, precision=0, label="Seed", min_width=100)
        comps["max_new_tokens"] = gr.Slider(*MAX_NEW_RANGE, value=s.max_new_tokens, step=1, precision=0,
                                            label="Max new tokens", min_width=160, elem_id="sv-max-new")
    comps["chat"] = gr.Checkbox(value=s.chat, label="Apply the chat template to the prompt")
    comps["load"] = gr.Button("Load models now", size="sm")
    return comps, groups


def centre_column(first: dict) -> dict:
    out = {"status": gr.HTML(first["status"], elem_id="sv-status")}
    with gr.Row(elem_id="sv-buttons"):
        out["step_btn"] = gr.Button("Step", variant="primary", elem_id="sv-step")
        out["run_btn"] = gr.Button("Run", variant="primary", elem_id="sv-run")
        out["stop_btn"] = gr.Button("Stop", variant="stop", elem_id="sv-stop")
        out["reset_btn"] = gr.Button("Reset", variant="secondary", elem_id="sv-reset")
    out["cycle"] = gr.Slider(0, 1, value=0, step=1, precision=0, label="Cycle on screen", elem_id="sv-cycle")
    out["narration"] = gr.HTML(first["narration"], elem_id="sv-narration")
    out.update(explain.explain_block())
    out["tree"] = gr.Plot(first["tree"], show_label=False, elem_id="sv-tree")
    with gr.Row():
        out["pq"] = gr.Plot(first["pq"], show_label=False, elem_id="sv-pq")
        out["residual"] = gr.Plot(first["residual"], show_label=False, elem_id="sv-residual")
    out["cache"] = gr.HTML(first["cache"], elem_id="sv-cache")
    gr.HTML('<h3 class="sv-h">Output text</h3>')
    out["text"] = gr.HTML(first["text"], elem_id="sv-text")
    with gr.Accordion("Output as plain text (to copy)", open=False):
        out["plain_text"] = gr.Textbox(first["plain_text"], show_label=False, lines=4, interactive=False,
                                       buttons=["copy"], elem_id="sv-plain")
    return out


def timing_column(first: dict) -> dict:
    gr.HTML('<h3 class="sv-h">Timing: speculative vs plain decoding</h3>')
    out = {"measure_btn": gr.Button("Measure AR baseline", size="sm", elem_id="sv-measure")}
    out["metrics"] = gr.HTML(first["metrics"], elem_id="sv-metrics")
    out["timeline"] = gr.Plot(first["timeline"], show_label=False, elem_id="sv-timeline")
    out["acceptance"] = gr.Plot(first["acceptance"], show_label=False, elem_id="sv-acceptance")
    out.update(replay.export_block())
    return out


def build_demo(warm_up: bool = False) -> gr.Blocks:
    """The page. `warm_up`: make what the first Step needs now, in the background (ui/warmup.py;
    app.py asks for it unless SPECVIZ_WARM_UP=0; never on ZeroGPU)."""
    limits = state.LIMITS
    memory.tune_allocator()  # before a class's passes, so their large tensors are given back
    state.preload(limits.preload)  # on ZeroGPU: before any worker forks, in the main thread
    state.start_sweeper()  # idle runs' KV caches are freed even when no request comes
    sessions.lazy_sessions()  # a new visitor's first event renders no config it does not need
    sessions.skip_absent_imports()  # Gradio's per-event imports of plotting libraries we lack
    if warm_up and not on_zero_gpu():
        WARMUP.start(initial_settings(), [e["prompt"] for e in load_examples()])
    decode = decode_events(limits)
    run, ar = views.example()
    first = views.full(views.example_status(run), "info", run, ar)
    settings = initial_settings()
    with gr.Blocks(title="SpecViz: speculative decoding, one cycle at a time", fill_width=True) as demo:
        gr.HTML(HEADER.read_text(encoding="utf-8") if HEADER.is_file() else "<h1>SpecViz</h1>")
        with gr.Tabs(elem_id="sv-tabs") as tabs:
            with gr.Tab("Decode", id="decode", elem_id="sv-tab-decode"):
                lesson_comps = lessons.lesson_block()
                with gr.Row(equal_height=False):
                    with gr.Column(scale=3, min_width=300, elem_id="sv-config"):
                        inputs, groups = config_column(settings)
                    with gr.Column(scale=7, min_width=520, elem_id="sv-centre"):
                        centre = centre_column(first)
                    with gr.Column(scale=3, min_width=320, elem_id="sv-timing"):
                        timing = timing_column(first)
            with gr.Tab("Learn", id="learn", elem_id="sv-tab-learn"):
                learn.build_learn_tab()
            # after Learn: on a phone the tab bar folds the last tabs into a menu, and Learn stays in view
            pair = build_pair_tab(demo, tabs, decode, settings.prompt)
            compare = build_compare_tabs(decode)  # the Compare and Theory & hardware tabs
            wire_from_compare(compare, tabs, pair["inputs"], pair["status"])
            build_advise_tab(decode, [e["prompt"] for e in load_examples()])
        if run is not None and run.cycles:  # the slider starts on the cycle the views show
            centre["cycle"].value = views.index_on_screen(run, None)
            centre["cycle"].maximum = max(len(run.cycles) - 1, 1)
        comps = {**centre, **timing, **lesson_comps}
        wire(demo, inputs, groups, comps, decode)
        # while the start-up warm-up runs, the status line says which stage and for how long
        demo.load(callbacks.warming, outputs=[comps["status"]], show_progress="hidden", concurrency_id="warm-up",
                  concurrency_limit=None, api_visibility="private")
        explain.wire_explain(comps)
        replay.wire_export(comps)
        lessons.wire_lessons(comps, inputs)
    # An explicit size on every hardware: left unset, Gradio on ZeroGPU holds one waiting event in all.
    # Queue positions sent every status_update_s, not on every event's start (limits.py)
    rate = limits.status_update_s if limits.status_update_s > 0 else "auto"  # a negative wait would spin
    demo.queue(max_size=limits.queue_size, status_update_rate=rate)
    return demo


def wire(demo: gr.Blocks, inputs: dict, groups: list, comps: dict, decode: dict) -> None:
    """Connect the buttons, the slider and the settings to the handlers."""
    settings = {k: v for k, v in inputs.items() if k in BASE_INPUTS or k in {kn.key for kn in KNOBS}}
    outputs = [comps[name] for name in views.OUTPUTS]
    common = dict(inputs_kwargs=settings, outputs=outputs, show_progress_on=[comps["status"]])
    # "once": clicks while a Step is pending are dropped, so an impatient click cannot queue a second
    step_event = comps["step_btn"].click(callbacks.step, api_name="step", trigger_mode="once", **common, **decode)
    # then, while nobody else decodes, the AR side of the timing panel without a click
    idle = step_event.then(callbacks.baseline_if_idle, api_visibility="private", **common, **decode)
    run_event = comps["run_btn"].click(callbacks.run, api_name="run", **common, **decode)
    measure = comps["measure_btn"].click(callbacks.measure_baseline, api_name="measure_ar", **common, **decode)
    inputs["load"].click(callbacks.load_models, api_name="load_models", **common, **decode)
    comps["stop_btn"].click(callbacks.stop, outputs=outputs, cancels=[run_event, measure, idle], api_name="stop",
                            show_progress="hidden")
    comps["reset_btn"].click(callbacks.reset, outputs=outputs, cancels=[run_event, measure, idle],
                             api_name="reset", show_progress="hidden")
    comps["cycle"].input(callbacks.show_cycle, inputs=[comps["cycle"]], outputs=outputs, api_name="show_cycle",
                         trigger_mode="always_last", show_progress="hidden")
    for comp in settings.values():
        comp.change(callbacks.settings_changed, inputs_kwargs=settings, outputs=outputs, queue=False,
                    show_progress="hidden", api_visibility="private")

    def visibility(method: str) -> list:
        """The draft picker and each method's options show only while that method is chosen, and K
        moves to the method's own default (no default caps a method below its best)."""
        return ([gr.update(visible=method == "draft"), gr.update(value=k_default(method))]
                + [gr.update(visible=method == m) for m, _ in groups])

    inputs["method"].change(visibility, inputs=inputs["method"],
                            outputs=[inputs["draft"], inputs["k"], *(g for _, g in groups)],
                            queue=False, show_progress="hidden", api_visibility="private")
    inputs["target"].change(callbacks.target_changed, inputs=[inputs["target"], inputs["draft"]],
                            outputs=inputs["draft"], queue=False, show_progress="hidden", api_visibility="private")
    demo.unload(callbacks.unload)
