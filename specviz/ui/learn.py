"""The Learn tab: toy p and q on six tokens, the numbers of the rule, and a Monte-Carlo check
that the output follows p (and that a broken rule does not). No model needed."""
from __future__ import annotations

import gradio as gr
import numpy as np

from specviz.teach import toy
from specviz.viz.style import esc
from specviz.viz.toy_figures import monte_carlo_figure, monte_carlo_html, toy_numbers_html, toy_pq_figure

DEFAULT_PRESET = "q too confident"  # the case the lossless claim is most surprising for
N_DEFAULT = 20_000  # resolves TV ≈ 0.02 in a few milliseconds
WEIGHT_MAX = 100  # sliders are weights in percent; they are normalised, so they need not sum to 100

INTRO = ("<p class=\"sv-learn-intro\">Speculative sampling keeps a drafted token x with probability "
         "min(1, p(x)/q(x)) and, when it rejects, draws a replacement from the residual "
         "norm(max(0, p − q)). The claim: the output follows the target p exactly, whatever the draft q. "
         "Set p and q below (or pick a preset), then draw samples through the rule and compare. "
         "The broken rules show why the residual is needed.</p>")
MC_HINT = '<div class="sv-mc-summary">Press <b>Draw samples</b> to run the Monte-Carlo check.</div>'


def _sliders(name: str, values: np.ndarray, colour_word: str) -> list:
    gr.HTML(f'<div class="sv-toy-head"><b>{esc(name)}</b> ({esc(colour_word)}): weights, normalised</div>')
    return [gr.Slider(0, WEIGHT_MAX, value=round(float(v) * WEIGHT_MAX), step=1, label=f"{name[0]}({tok})",
                      min_width=120, elem_id=f"sv-toy-{name[0]}-{i}")
            for i, (tok, v) in enumerate(zip(toy.TOKENS, values))]


def build() -> dict:
    """The tab's components, inside the page's Learn tab (`wire` connects them)."""
    p, q = toy.preset(DEFAULT_PRESET)
    st = toy.stats(p, q)
    gr.HTML(INTRO)
    preset = gr.Radio(list(toy.PRESETS), value=DEFAULT_PRESET, label="Preset", elem_id="sv-toy-preset")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300, elem_id="sv-toy-controls"):
            with gr.Row():
                with gr.Column(min_width=120):
                    ps = _sliders("p target", p, "sky blue")
                with gr.Column(min_width=120):
                    qs = _sliders("q draft", q, "purple")
        with gr.Column(scale=5, min_width=300, elem_id="sv-toy-views"):
            numbers = gr.HTML(toy_numbers_html(st), elem_id="sv-toy-numbers")
            pq_plot = gr.Plot(toy_pq_figure(st), show_label=False, elem_id="sv-toy-pq")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300, elem_id="sv-mc-controls"):
            n = gr.Slider(100, toy.MAX_SAMPLES, value=N_DEFAULT, step=100, label="N: samples to draw",
                          elem_id="sv-mc-n")
            rule = gr.Radio(list(toy.RULES), value=toy.CORRECT, label="Rule", elem_id="sv-mc-rule")
            seed = gr.Number(value=0, precision=0, label="Seed", elem_id="sv-mc-seed")
            draw = gr.Button("Draw samples", variant="primary", elem_id="sv-mc-run")
        with gr.Column(scale=5, min_width=300, elem_id="sv-mc-views"):
            summary = gr.HTML(MC_HINT, elem_id="sv-mc-summary")
            mc_plot = gr.Plot(None, show_label=False, elem_id="sv-mc")
    drawn = gr.State(False)  # once drawn, the Monte-Carlo follows every change of p, q or the rule
    return dict(preset=preset, weights=[*ps, *qs], n=n, rule=rule, seed=seed, draw=draw, drawn=drawn,
                numbers=numbers, pq_plot=pq_plot, summary=summary, mc_plot=mc_plot)


def wire(c: dict) -> None:
    """The sliders, the preset and the rule redraw at once; Draw samples runs the Monte-Carlo check."""
    weights, n, rule, seed, drawn = c["weights"], c["n"], c["rule"], c["seed"], c["drawn"]
    preset, draw, summary, mc_plot = c["preset"], c["draw"], c["summary"], c["mc_plot"]
    mc_in = [n, rule, seed, drawn]
    views = [c["numbers"], c["pq_plot"], summary, mc_plot]
    quick = dict(show_progress="hidden", trigger_mode="always_last")
    for s in weights:
        s.input(update, inputs=[*weights, *mc_in], outputs=views, **quick, api_visibility="private")
    preset.input(load_preset, inputs=[preset, *mc_in], outputs=[*weights, *views], **quick, api_name="toy_preset")
    for comp in (rule, n):
        comp.input(update, inputs=[*weights, *mc_in], outputs=views, **quick, api_visibility="private")
    draw.click(draw_samples, inputs=[*weights, n, rule, seed], outputs=[summary, mc_plot, drawn], **quick,
               api_name="toy_monte_carlo")


def _pq(values) -> tuple[np.ndarray, np.ndarray]:
    k = len(toy.TOKENS)
    return (toy.normalise([v or 0 for v in values[:k]], "p"),
            toy.normalise([v or 0 for v in values[k:2 * k]], "q"))


def _problem(message: str) -> str:
    return f'<div class="sv-status sv-status-error" role="status">✕ {esc(message)}</div>'


def _mc(p, q, n, rule, seed) -> tuple[str, object]:
    mc = toy.monte_carlo(p, q, int(n or N_DEFAULT), int(seed or 0), rule or toy.CORRECT)
    return monte_carlo_html(mc, p, q), monte_carlo_figure(mc, p, q)


def update(*values) -> tuple:
    """Numbers and figure for the weights on screen; the Monte-Carlo too once it has been drawn."""
    *weights, n, rule, seed, drawn = values
    try:
        p, q = _pq(weights)
    except ValueError as e:
        return _problem(str(e)), gr.skip(), gr.skip(), gr.skip()
    st = toy.stats(p, q)
    mc = _mc(p, q, n, rule, seed) if drawn else (gr.skip(), gr.skip())
    return (toy_numbers_html(st), toy_pq_figure(st), *mc)


def load_preset(name: str, n, rule, seed, drawn) -> tuple:
    """Set every slider to the preset, and redraw."""
    p, q = toy.preset(name)
    weights = [round(float(v) * WEIGHT_MAX) for v in (*p, *q)]
    return (*weights, *update(*weights, n, rule, seed, drawn))


def draw_samples(*values) -> tuple:
    """Draw N samples through the chosen rule and plot them against p and q."""
    *weights, n, rule, seed = values
    try:
        p, q = _pq(weights)
        summary, fig = _mc(p, q, n, rule, seed)
    except ValueError as e:
        return _problem(str(e)), gr.skip(), gr.skip()
    return summary, fig, True
