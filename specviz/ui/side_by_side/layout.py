"""The Side by side tab's layout and wiring (handlers: side_by_side/handlers.py and sources.py)."""
from __future__ import annotations

import dataclasses

import gradio as gr

from specviz.ui.runtime.presets import MAX_NEW_RANGE, k_default
from specviz.ui.runtime.settings import RunSettings
from specviz.ui.shared.inputs import model_inputs, sampling_inputs, seed_input, wire_draft_follows_target
from specviz.ui.side_by_side.handlers import (
    INPUTS,
    OUTPUTS,
    SIDE_INPUTS,
    SIDE_VIEWS,
    race,
    reset,
    run,
    show_cycle,
    step,
    stop,
    unload,
)
from specviz.ui.side_by_side.pairs import FIRST_PAIR, PAIRS
from specviz.ui.side_by_side.sources import export_pair, first_paint, from_compare, from_link, open_pair, replay_pair


def side_column(name: str, s: RunSettings, first: dict) -> dict:
    """One column: its configuration (collapsible, the same inputs as Decode's) and the same views as
    Decode's centre. The deployment's vLLM-served targets are offered on either side."""
    side = name.lower()
    with gr.Accordion(f"{name}: configuration", open=True):
        out, _ = model_inputs(s, prefix=f"{side}_")
        with gr.Row():
            out.update(sampling_inputs(s, prefix=f"{side}_", min_width=120))
            out.update(seed_input(s, prefix=f"{side}_"))
    prefix = f"sv-{side}"
    views_ = {"status": gr.HTML(first.get("status"), elem_id=f"{prefix}-status"),
              "narration": gr.HTML(first["narration"], elem_id=f"{prefix}-narration"),
              "tree": gr.Plot(first["tree"], show_label=False, elem_id=f"{prefix}-tree"),
              "pq": gr.Plot(first["pq"], show_label=False, elem_id=f"{prefix}-pq"),
              "residual": gr.Plot(first["residual"], show_label=False, elem_id=f"{prefix}-residual"),
              "cache": gr.HTML(first["cache"], elem_id=f"{prefix}-cache"),
              "text": gr.HTML(first["text"], elem_id=f"{prefix}-text")}
    out.update({f"{side}_{k}": v for k, v in views_.items()})
    return out


DEFAULTS = (RunSettings(proposer="draft"), RunSettings(proposer="layerskip", k=k_default("layerskip")))


def _initial(value):
    """A handler's output as a component's first value: gr.skip() (leave it) is empty."""
    return None if isinstance(value, dict) and value.get("__type__") == "update" else value


def _first_settings(first_inputs: dict) -> tuple[RunSettings, RunSettings]:
    """A's and B's inputs as the first pair was recorded with (DEFAULTS where it says nothing)."""
    out = []
    for side, base in zip("ab", DEFAULTS):
        given = {k[2:]: v for k, v in first_inputs.items() if k.startswith(f"{side}_")}
        given["proposer"] = given.pop("method", base.proposer)
        try:
            out.append(dataclasses.replace(base, **{k: v for k, v in given.items() if hasattr(base, k)}))
        except (TypeError, ValueError):  # a recording the pickers cannot show: the defaults
            out.append(base)
    return out[0], out[1]


def build(prompt: str) -> dict:
    """The tab's components, inside the page's Side by side tab (`wire` connects them): the views by
    output name, "inputs" (both columns' and the shared ones, by input name) and the buttons. It opens
    on the first ready-made pair, painted here once (sources.first_paint), as Decode opens on its example."""
    shown, first_inputs = first_paint()  # recordings missing: empty columns, and the status says why
    prompt = first_inputs.get("prompt") or prompt
    gr.HTML('<div class="sv-lesson-hint">Two configurations on one prompt, cycle by cycle. Open a '
            'ready-made pair (no model needed), or set A and B and press Step. A link with '
            '<code>?pair=KEY</code> opens a pair directly.</div>')
    with gr.Row():
        chooser = gr.Dropdown([(p.title, p.key) for p in PAIRS], value=FIRST_PAIR.key if first_inputs else None,
                              label="Ready-made pair",
                              elem_id="sv-pair-choose", scale=3)
        open_btn = gr.Button("Open pair", size="sm", elem_id="sv-pair-open", scale=1)
    shared = {"prompt": gr.Textbox(value=prompt, lines=3, max_lines=10, label="Prompt (both columns)",
                                   elem_id="sv-pair-prompt")}
    with gr.Row():
        shared["max_new_tokens"] = gr.Slider(*MAX_NEW_RANGE, value=first_inputs.get("max_new_tokens", 32), step=1,
                                             precision=0,
                                             label="Max new tokens (both)")
        shared["chat"] = gr.Checkbox(value=first_inputs.get("chat", True), label="Apply the chat template (both)")
    comps = {"pair_status": gr.HTML(_initial(shown.get("pair_status")), elem_id="sv-pair-status")}
    with gr.Row():
        step_btn = gr.Button("Step both", variant="primary", elem_id="sv-pair-step")
        run_btn = gr.Button("Run both", variant="primary", elem_id="sv-pair-run")
        stop_btn = gr.Button("Stop", variant="stop", elem_id="sv-pair-stop")
        reset_btn = gr.Button("Reset", elem_id="sv-pair-reset")
        race_btn = gr.Button("Race", elem_id="sv-pair-race")
    comps["diff"] = gr.HTML(_initial(shown.get("diff")), elem_id="sv-pair-diff")
    slider = shown.get("cycle") or {}  # an update: its maximum and value
    comps["cycle"] = gr.Slider(0, max(slider.get("maximum") or 1, 1), value=slider.get("value") or 0, step=1,
                               precision=0, label="Cycle on screen (both)", elem_id="sv-pair-cycle")
    with gr.Row(equal_height=False):
        for name, s in zip("AB", _first_settings(first_inputs)):
            with gr.Column(min_width=420, elem_id=f"sv-pair-{name.lower()}"):
                side = name.lower()
                comps.update(side_column(name, s, {k: _initial(shown.get(f"{side}_{k}")) for k in SIDE_VIEWS}))
    with gr.Row(equal_height=False):
        comps["summary"] = gr.HTML(_initial(shown.get("summary")), elem_id="sv-pair-summary")
        comps["race"] = gr.Plot(_initial(shown.get("race")), show_label=False, elem_id="sv-pair-race-chart")
    with gr.Row():
        export_btn = gr.Button("Export both as JSON", size="sm", elem_id="sv-pair-export")
        export_file = gr.File(label="Exported pair", visible=False, interactive=False)
        replay_file = gr.File(label="Replay both (.json from Export both)", file_types=[".json"],
                              type="filepath", elem_id="sv-pair-replay")
    comps["inputs"] = {**{k: comps.pop(k) for k in [f"{s}_{i}" for s in "ab" for i in SIDE_INPUTS]}, **shared}
    comps.update(chooser=chooser, open_btn=open_btn, step_btn=step_btn, run_btn=run_btn, stop_btn=stop_btn,
                 reset_btn=reset_btn, race_btn=race_btn, export_btn=export_btn, export_file=export_file,
                 replay_file=replay_file)
    return comps


def wire(demo: gr.Blocks, tabs: gr.Tabs, c: dict, decode: dict) -> None:
    """Connect the tab; `decode` is the model events' shared concurrency group, `tabs` the page's tabs
    (a shared ?pair= link selects this one)."""
    inputs = c["inputs"]
    outputs = [c[name] for name in OUTPUTS]
    common = dict(inputs_kwargs=inputs, outputs=outputs, show_progress_on=[c["pair_status"]])
    c["step_btn"].click(step, api_name="pair_step", trigger_mode="once", **common, **decode)
    run_event = c["run_btn"].click(run, api_name="pair_run", **common, **decode)
    c["stop_btn"].click(stop, outputs=outputs, cancels=[run_event], api_name="pair_stop", show_progress="hidden")
    c["reset_btn"].click(reset, outputs=outputs, cancels=[run_event], api_name="pair_reset", show_progress="hidden")
    c["race_btn"].click(race, outputs=outputs, api_name="pair_race", show_progress="hidden")
    c["cycle"].input(show_cycle, inputs=[c["cycle"]], outputs=outputs, api_name="pair_show_cycle",
                     trigger_mode="always_last", show_progress="hidden")
    c["export_btn"].click(export_pair, outputs=[c["export_file"], c["pair_status"]], api_name="pair_export",
                          show_progress="hidden")
    c["replay_file"].upload(replay_pair, inputs=c["replay_file"], outputs=outputs, api_name="pair_replay",
                            show_progress="hidden")
    with_inputs = outputs + [inputs[k] for k in INPUTS]
    c["open_btn"].click(open_pair, inputs=[c["chooser"]], outputs=with_inputs, api_name="pair_open",
                        show_progress="hidden")
    c["chooser"].input(open_pair, inputs=[c["chooser"]], outputs=with_inputs, show_progress="hidden",
                       api_visibility="private")
    for side in "ab":
        wire_draft_follows_target(inputs, prefix=f"{side}_")
    demo.load(from_link, outputs=[tabs, c["chooser"], *with_inputs], queue=False, show_progress="hidden",
              api_visibility="private")
    demo.unload(unload)


def wire_from_compare(compare: dict, tabs: gr.Tabs, inputs: dict, status) -> None:
    """Compare's 'Open these two rows in Side by side' button."""
    compare["to_pair"].click(from_compare, inputs=[compare[k] for k in ("rows", "pair_a", "pair_b", "prompt",
                                                                        "max_new_tokens", "chat")],
                             outputs=[tabs, *(inputs[k] for k in INPUTS), status], api_name="compare_to_pair",
                             show_progress="hidden")
