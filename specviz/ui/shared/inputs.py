"""The settings inputs, built one way for every tab that decodes: Decode's configuration column and
each of Side by side's two columns (one set of labels and ranges, from runtime/presets.py).

Names are RunSettings' input names (runtime/settings.BASE_INPUTS and each knob's key), prefixed per
column (`prefix`: "" for Decode, "a_" and "b_" for Side by side); element ids are `sv-` plus the
prefix with a dash ("sv-target", "sv-a-target").
"""
from __future__ import annotations

import gradio as gr

from specviz.ui.runtime.limits import served_targets
from specviz.ui.runtime.presets import (
    K_RANGE,
    TARGETS,
    TEMPERATURE_RANGE,
    TOP_P_RANGE,
    Knob,
    draft_choices,
    knobs,
    method_label,
    methods,
)
from specviz.ui.runtime.settings import RunSettings
from specviz.ui.runtime.state import LIMITS

TARGET_INFO = "A preset, any hub id (owner/name) or a local model folder."
SERVED_INFO = " The 'served by vLLM' targets run on this deployment's vLLM server."
DRAFT_INFO = ("For the draft-model proposer: a preset or any hub id. One of another family (another tokenizer) is "
              "drafted through text, and the narration shows the seam.")


def _id(prefix: str, name: str) -> str:
    return f"sv-{prefix.replace('_', '-')}{name.replace('_', '-')}"


def knob_input(knob: Knob):
    """One proposer option as its input: a text box for layer ranges, a checkbox, or a slider."""
    info = knob.info or None
    if knob.kind == "layers":
        return gr.Textbox(value=knob.initial() or "", label=knob.label, info=info, max_lines=1)
    if knob.kind == "bool":
        return gr.Checkbox(value=bool(knob.initial()), label=knob.label, info=info)
    return gr.Slider(knob.minimum, knob.maximum, value=knob.initial(), step=knob.step,
                     precision=0 if knob.kind == "int" else None, label=knob.label, info=info)


def draft_update(target: str | None, draft: str | None):
    """The draft picker after the target changed: the drafts offered for its family, the chosen
    one kept when it is among them."""
    choices = draft_choices(target)
    values = [v for _, v in choices]
    return gr.update(choices=choices, value=draft if draft in values else (values[0] if values else None))


def model_inputs(s: RunSettings, prefix: str = "", with_knobs: bool = False) -> tuple[dict, list]:
    """Target, proposer, draft, K and adaptive K, named with `prefix`. With `knobs`, also each
    method's options in an accordion of its own, and the draft picker shown only for the draft
    method (decode/layout.py switches them); returns (inputs, [(method, accordion), ...]). The methods
    and their options are the registry's (proposers/__init__.py), read as the page is built."""
    served = served_targets(LIMITS)  # targets served by vLLM, from the deployment's list
    comps = {"target": gr.Dropdown(TARGETS + served, value=s.target, allow_custom_value=True, label="Target model",
                                   info=TARGET_INFO + (SERVED_INFO if served else ""), elem_id=_id(prefix, "target"))}
    comps["method"] = gr.Radio(methods(), value=s.proposer, label="Proposer (how drafts are made)",
                               elem_id=_id(prefix, "method"))
    choices = draft_choices(s.target)
    comps["draft"] = gr.Dropdown(choices, value=s.draft or (choices[0][1] if choices else None),
                                 allow_custom_value=True, label="Draft model", info=DRAFT_INFO,
                                 visible=not with_knobs or s.proposer == "draft", elem_id=_id(prefix, "draft"))
    groups = []
    options = knobs() if with_knobs else []
    for method in dict.fromkeys(k.method for k in options):
        with gr.Accordion(f"{method_label(method)} options", open=False, visible=s.proposer == method) as group:
            for knob in (k for k in options if k.method == method):
                comps[knob.key] = knob_input(knob)
        groups.append((method, group))
    comps["k"] = gr.Slider(*K_RANGE, value=s.k, step=1, precision=0, label="K: draft length per cycle",
                           info="Tokens drafted per cycle (tree depth for LogitSpec).", elem_id=_id(prefix, "k"))
    comps["adaptive_k"] = gr.Checkbox(value=s.adaptive_k, label="Adaptive K (+2 after a full accept, −1 after a miss)")
    return {prefix + k: v for k, v in comps.items()}, groups


def sampling_inputs(s: RunSettings, prefix: str = "", min_width: int = 160) -> dict:
    """Temperature and top-p, named with `prefix`."""
    comps = {"temperature": gr.Slider(*TEMPERATURE_RANGE, value=s.temperature, step=0.05, label="Temperature",
                                      info="0 = greedy (argmax); above 0 samples.", min_width=min_width),
             "top_p": gr.Slider(*TOP_P_RANGE, value=s.top_p, step=0.01, label="Top-p",
                                info="Applied identically to p and q before they are compared.", min_width=min_width)}
    return {prefix + k: v for k, v in comps.items()}


def seed_input(s: RunSettings, prefix: str = "") -> dict:
    return {prefix + "seed": gr.Number(value=s.seed, precision=0, label="Seed", min_width=90)}


def wire_draft_follows_target(inputs: dict, prefix: str = "") -> None:
    """A changed target offers the drafts for its family (`draft_update`)."""
    inputs[prefix + "target"].change(draft_update, inputs=[inputs[prefix + "target"], inputs[prefix + "draft"]],
                                     outputs=inputs[prefix + "draft"], queue=False, show_progress="hidden",
                                     api_visibility="private")
