"""The page: the header and the tabs in order (Decode, Learn, Side by side, Compare, Theory & hardware,
Advise), the wiring between tabs, and the server-side start (runtime/). Each tab builds and wires
itself (its module or folder in specviz/ui); no tab imports another, so what crosses tabs is here.
"""
from __future__ import annotations

import logging

import gradio as gr

from specviz.decoding import tracefile
from specviz.ui import advise, compare, learn, theory
from specviz.ui.decode import layout as decode_tab
from specviz.ui.runtime import lazy_state, memory, state
from specviz.ui.runtime.warmup import WARMUP
from specviz.ui.runtime.zerogpu import on_zero_gpu
from specviz.ui.shared import recordings
from specviz.ui.shared.views import ASSETS
from specviz.ui.side_by_side import layout as side_by_side_tab

log = logging.getLogger(__name__)
CSS = ASSETS / "app.css"
HEADER = ASSETS / "header.html"
KEYS_JS = ASSETS / "keys.js"  # arrow keys step through 'Explain this cycle'
# System fonts: the default theme fetches Google Fonts, which an offline machine cannot reach.
THEME = gr.themes.Default(
    primary_hue="blue",
    font=[gr.themes.Font(f) for f in ("system-ui", "Segoe UI", "Roboto", "sans-serif")],
    font_mono=[gr.themes.Font(f) for f in ("ui-monospace", "Menlo", "Consolas", "monospace")])


def decode_events(limits) -> dict:
    """Every event that runs a model, on every tab, shares one group of SPECVIZ_CONCURRENCY slots
    (runtime/limits.py): Steps that wait at the same moment share one verify pass, and timings say
    when they ran beside other model calls (decoding/activity.ACTIVITY)."""
    return dict(concurrency_id="decode", concurrency_limit=limits.concurrency)


def launch_kwargs() -> dict:
    """Gradio 6 takes theme and CSS at launch(); app.py and the tests use the same ones."""
    # run_history off: Gradio 6 would keep every output in the browser and re-serialise it after each
    # event; Export already saves a run. max_file_size: Gradio refuses an upload larger than the largest
    # file a reader accepts (a trace) before it is stored (docs/UPLOADS.md).
    return dict(theme=THEME, css_paths=[CSS, ASSETS / "compare.css"], js=KEYS_JS.read_text(encoding="utf-8"),
                run_history=False, max_file_size=tracefile.MAX_BYTES)


def start_runtime(warm_up: bool, settle_gc: bool = False) -> None:
    """The server side, before any tab is built. `warm_up`: make what the first Step needs now, in
    the background (runtime/warmup.py; app.py asks for it unless SPECVIZ_WARM_UP=0; never on ZeroGPU);
    `settle_gc`: end the warm-up by freezing what start-up made out of the garbage collector's sight
    (warmup.settle_garbage_collector; app.py's process only)."""
    limits = state.LIMITS
    memory.tune_allocator()  # before a class's passes, so their large tensors are given back
    state.preload(limits.preload)  # on ZeroGPU: before any worker forks, in the main thread
    state.start_sweeper()  # idle runs' KV caches are freed even when no request comes
    lazy_state.lazy_sessions()  # a new visitor's first event renders no config it does not need
    lazy_state.skip_absent_imports()  # Gradio's per-event imports of plotting libraries we lack
    if warm_up and not on_zero_gpu():
        WARMUP.start(recordings.example_settings(), [e["prompt"] for e in recordings.examples()], settle_gc)


def build_demo(warm_up: bool = False, settle_gc: bool = False) -> gr.Blocks:
    """The whole page (see the module docstring); `warm_up` and `settle_gc` as in start_runtime."""
    start_runtime(warm_up, settle_gc)
    limits = state.LIMITS
    decode = decode_events(limits)
    settings = recordings.example_settings()
    with gr.Blocks(title="SpecViz: speculative decoding, one cycle at a time", fill_width=True) as demo:
        gr.HTML(HEADER.read_text(encoding="utf-8") if HEADER.is_file() else "<h1>SpecViz</h1>")
        with gr.Tabs(elem_id="sv-tabs") as tabs:
            with gr.Tab("Decode", id="decode", elem_id="sv-tab-decode"):
                inputs, groups, decoding = decode_tab.build(settings)
            with gr.Tab("Learn", id="learn", elem_id="sv-tab-learn"):
                learning = learn.build()
            # after Learn: on a phone the tab bar folds the last tabs into a menu, and Learn stays in view
            with gr.Tab("Side by side", id="pair", elem_id="sv-tab-pair"):
                pair = side_by_side_tab.build(settings.prompt)
            with gr.Tab("Compare", id="compare", elem_id="sv-tab-compare"):
                comparing = compare.build()
            with gr.Tab("Theory & hardware", id="theory", elem_id="sv-tab-theory"):
                explaining = theory.build()
            with gr.Tab("Advise", id="advise", elem_id="sv-tab-advise"):
                advising = advise.build([e["prompt"] for e in recordings.examples()])
        decode_tab.wire(demo, inputs, groups, decoding, decode)
        learn.wire(learning)
        side_by_side_tab.wire(demo, tabs, pair, decode)
        compare.wire(comparing, decode)
        theory.wire(explaining, decode)
        advise.wire(advising, decode)
        # across tabs: Compare's rows open in Side by side, and its measured rows become Theory's sources
        side_by_side_tab.wire_from_compare(comparing, tabs, pair["inputs"], pair["pair_status"])
        comparing["event"].then(theory.sources, outputs=explaining["source"], show_progress="hidden",
                                api_visibility="private")
    # An explicit size on every hardware: left unset, Gradio on ZeroGPU holds one waiting event in all.
    # Queue positions sent every status_update_s, not on every event's start (runtime/limits.py)
    rate = limits.status_update_s if limits.status_update_s > 0 else "auto"  # a negative wait would spin
    demo.queue(max_size=limits.queue_size, status_update_rate=rate)
    return demo
