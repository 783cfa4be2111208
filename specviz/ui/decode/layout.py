"""The Decode tab: the lessons above; configuration on the left, one cycle at a time in the centre,
timing on the right. Its components open on the precomputed example run, so the first paint needs
no model. Handlers: decode/handlers.py (and explain.py, lessons.py, export.py beside it).
"""
from __future__ import annotations

import gradio as gr

from specviz.ui.decode import explain, export, handlers, lessons
from specviz.ui.runtime.presets import MAX_NEW_RANGE, k_default, knobs
from specviz.ui.runtime.settings import BASE_INPUTS, RunSettings
from specviz.ui.shared import recordings, views
from specviz.ui.shared.inputs import model_inputs, sampling_inputs, seed_input, wire_draft_follows_target


def config_column(s: RunSettings) -> tuple[dict, list]:
    gr.HTML('<h3 class="sv-h">Configuration</h3>')
    comps, groups = model_inputs(s, with_knobs=True)
    comps["prompt"] = gr.Textbox(value=s.prompt, lines=6, max_lines=16, label="Prompt", elem_id="sv-prompt")
    examples = recordings.examples()
    if examples:
        gr.Examples([[e["prompt"]] for e in examples], inputs=[comps["prompt"]], label="Example prompts",
                    example_labels=[e["label"] for e in examples], cache_examples=False, cache_mode="lazy")
    comps.update(sampling_inputs(s))
    with gr.Row():
        comps.update(seed_input(s))
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
    out.update(export.export_block())
    return out


def build(settings: RunSettings) -> tuple[dict, list, dict]:
    """The tab's contents, inside the page's Decode tab: (inputs, knob groups, outputs and buttons)."""
    run, ar = views.example()
    first = views.full(views.example_status(run), "info", run, ar)
    lesson_comps = lessons.lesson_block()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300, elem_id="sv-config"):
            inputs, groups = config_column(settings)
        with gr.Column(scale=7, min_width=520, elem_id="sv-centre"):
            centre = centre_column(first)
        with gr.Column(scale=3, min_width=320, elem_id="sv-timing"):
            timing = timing_column(first)
    if run is not None and run.cycles:  # the slider starts on the cycle the views show
        centre["cycle"].value = views.index_on_screen(run, None)
        centre["cycle"].maximum = max(len(run.cycles) - 1, 1)
    return inputs, groups, {**centre, **timing, **lesson_comps}


def wire(demo: gr.Blocks, inputs: dict, groups: list, comps: dict, decode: dict) -> None:
    """Connect the buttons, the slider and the settings to the handlers; `decode` holds the
    concurrency kwargs every model event of the page shares."""
    settings = {k: v for k, v in inputs.items() if k in BASE_INPUTS or k in {kn.key for kn in knobs()}}
    outputs = [comps[name] for name in views.OUTPUTS]
    common = dict(inputs_kwargs=settings, outputs=outputs, show_progress_on=[comps["status"]])
    # "once": clicks while a Step is pending are dropped, so an impatient click cannot queue a second
    step_event = comps["step_btn"].click(handlers.step, api_name="step", trigger_mode="once", **common, **decode)
    # then, while nobody else decodes, the AR side of the timing panel without a click
    idle = step_event.then(handlers.baseline_if_idle, api_visibility="private", **common, **decode)
    run_event = comps["run_btn"].click(handlers.run, api_name="run", **common, **decode)
    measure = comps["measure_btn"].click(handlers.measure_baseline, api_name="measure_ar", **common, **decode)
    inputs["load"].click(handlers.load_models, api_name="load_models", **common, **decode)
    comps["stop_btn"].click(handlers.stop, outputs=outputs, cancels=[run_event, measure, idle], api_name="stop",
                            show_progress="hidden")
    comps["reset_btn"].click(handlers.reset, outputs=outputs, cancels=[run_event, measure, idle],
                             api_name="reset", show_progress="hidden")
    comps["cycle"].input(handlers.show_cycle, inputs=[comps["cycle"]], outputs=outputs, api_name="show_cycle",
                         trigger_mode="always_last", show_progress="hidden")
    for comp in settings.values():
        comp.change(handlers.settings_changed, inputs_kwargs=settings, outputs=outputs, queue=False,
                    show_progress="hidden", api_visibility="private")

    def visibility(method: str) -> list:
        """The draft picker and each method's options show only while that method is chosen, and K
        moves to the method's own default (no default caps a method below its best)."""
        return ([gr.update(visible=method == "draft"), gr.update(value=k_default(method))]
                + [gr.update(visible=method == m) for m, _ in groups])

    inputs["method"].change(visibility, inputs=inputs["method"],
                            outputs=[inputs["draft"], inputs["k"], *(g for _, g in groups)],
                            queue=False, show_progress="hidden", api_visibility="private")
    wire_draft_follows_target(inputs)
    demo.unload(handlers.unload)
    # while the start-up warm-up runs, the status line says which stage and for how long
    demo.load(handlers.warming, outputs=[comps["status"]], show_progress="hidden", concurrency_id="warm-up",
              concurrency_limit=None, api_visibility="private")
    explain.wire_explain(comps)
    export.wire_export(comps)
    lessons.wire_lessons(comps, inputs)
