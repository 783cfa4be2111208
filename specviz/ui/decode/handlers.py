"""The Decode tab's handlers: Step, Run, Stop, Reset, the cycle slider, the AR baseline, settings
changes and the start-up status line.

Each returns (or yields) a dict of output name → value (views.OUTPUTS); `guarded` turns it into the
tuple decode/layout.py wires, and an error into a message in the status box: the session stays usable.
The run logic itself is shared with Side by side (ui/shared/run.py).
"""
from __future__ import annotations

from typing import Iterator

import gradio as gr

from specviz.decoding.activity import ACTIVITY
from specviz.drafting.vocab_map import vocab_map
from specviz.loading.loader import check_tokenizers, same_tokenizer
from specviz.ui.runtime.settings import from_inputs
from specviz.ui.runtime.state import BASELINES, SESSIONS, load_with_progress, session_of, visitor_key
from specviz.ui.runtime.warmup import WARMUP
from specviz.ui.runtime.zerogpu import on_zero_gpu
from specviz.ui.shared import views
from specviz.ui.shared.guard import RUN_HINT, guarded
from specviz.ui.shared.run import (
    advance,
    check_early,
    ensure_run,
    error,
    loading_frames,
    on_screen,
    ready,
    render,
    stream_baseline,
    stream_cycles,
)

IDLE_MEASURED = "AR baseline measured while the app was idle; the timing panel compares the two."
IDLE_GIVEN_UP = "Another run started decoding, so the AR baseline was left for later: Measure AR baseline times it."
STOPPED = "Stopped. Step or Run continues this run; Reset starts again."
decode_handler = guarded(views.OUTPUTS, RUN_HINT)


# -- Step -----------------------------------------------------------------------------------------
@decode_handler
def step(request: gr.Request, progress=gr.Progress(), **values) -> dict:
    """Run exactly one cycle (the first Step prefills, then runs cycle 0).

    A plain function, not a generator: a Step has one frame, so streaming it buys nothing and
    costs Gradio's generator machinery per event. Loading shows in the progress bar."""
    session = session_of(request)
    return render(session, *advance(session, from_inputs(values), progress))


@decode_handler
def run(request: gr.Request, progress=gr.Progress(), **values) -> Iterator[dict]:
    """Stream cycles to the end, then measure the AR baseline for these settings if not cached."""
    session, settings = session_of(request), from_inputs(values)
    ready(progress)
    yield from loading_frames(settings)
    note = ensure_run(session, settings, progress)
    session.stop.clear()
    generation = session.generation
    if note:
        yield views.only(status=views.status_html(note, "info"))
    yield from stream_cycles(session, settings)
    if session.generation != generation:
        return  # a Reset or a settings change took over this session
    if session.stop.is_set():
        yield render(session, STOPPED, "warn")
        return
    yield from stream_baseline(session, settings, progress)
    if not session.stop.is_set():
        yield render(session, "Run finished; the timing panel compares it with the measured AR baseline.", "ok")


@decode_handler
def baseline_if_idle(request: gr.Request, progress=gr.Progress(), **values) -> Iterator[dict]:
    """After a Step: measure the AR baseline for the run's settings without a click, where that
    costs nobody else's time: no other run of this process is decoding (checked between frames,
    and given up when one starts), and not on ZeroGPU, where it would spend the visitor's GPU quota.
    Otherwise the timing panel says what to press."""
    session, settings = session_of(request), from_inputs(values)
    if (on_zero_gpu() or session.replay is not None or session.example or session.settings != settings
            or BASELINES.get(settings.ar_key()) is not None or ACTIVITY.busy() or session.run() is None):
        yield views.only()  # every output as it is (a generator that yields nothing would blank them)
        return
    session.stop.clear()
    generation = session.generation
    yield from stream_baseline(session, settings, progress, while_idle=True)
    # only the status and the timing panel: the cycle views may have moved on (a Step, the slider)
    ar = BASELINES.get(settings.ar_key())
    if session.generation != generation or ar is None:
        # given up: whoever started decoding (this visitor's next Step, say) writes the status
        yield views.only(status=views.status_html(IDLE_GIVEN_UP, "info")) if session.generation == generation \
            else views.only()
        return
    yield views.only(status=views.status_html(IDLE_MEASURED, "ok"), **views.timing_views(session.run(), ar))


@decode_handler
def measure_baseline(request: gr.Request, progress=gr.Progress(), **values) -> Iterator[dict]:
    """Measure (or reuse) the AR baseline for the current settings without touching the run."""
    session, settings = session_of(request), from_inputs(values)
    check_early(settings)
    ready(progress)
    yield from loading_frames(settings)
    session.stop.clear()
    yield from stream_baseline(session, settings, progress)
    ar = BASELINES.get(settings.ar_key())
    run = None if session.example else session.run()
    if ar is not None and session.settings != settings:
        yield views.only(status=views.status_html("AR baseline measured for the settings on the left; "
                                                  "Step or Run to compare.", "ok"),
                         **views.timing_views(run, ar))
    elif ar is not None:
        yield render(session, f"AR baseline: {ar.metrics['tokens_per_s']:.1f} tokens/s, measured.", "ok")


# -- Stop, Reset, the slider ----------------------------------------------------------------------
def stop(request: gr.Request) -> tuple:
    """Ask a streaming Run to stop after its current cycle (the event is also cancelled)."""
    session = session_of(request)
    session.stop.set()
    return views.as_tuple(views.only(status=views.status_html(STOPPED, "warn")))


def reset(request: gr.Request) -> tuple:
    """Drop the session's run; the next Step or Run starts afresh with the settings on the left."""
    session = session_of(request)
    session.replace(None, None)
    return views.as_tuple(render(session, "Reset. Press Step for one cycle or Run to stream a new run.", "info"))


def show_cycle(cycle, request: gr.Request) -> tuple:
    """Show an earlier cycle in every cycle view; Step and Run return to the newest."""
    session = session_of(request)
    run = on_screen(session)[0]
    if run is None or not run.cycles:
        return views.as_tuple(views.only())
    try:
        index = min(max(int(cycle or 0), 0), len(run.cycles) - 1)
        values = views.cycle_views(run, index)
    except Exception as e:  # noqa: BLE001 -- a replayed file's cycle must not take the page down
        return views.as_tuple(error(f"Cycle {cycle} cannot be drawn: {type(e).__name__}: {str(e)[:200]}. "
                                    "The other cycles still can; Reset starts a live run."))
    session.view = index
    values.pop("cycle")  # the slider already shows it; rewriting it would fight the drag
    note = f"Showing cycle {index} of 0–{len(run.cycles) - 1}. Step or Run continues from the newest cycle."
    return views.as_tuple(views.only(status=views.status_html(note, "info"), **values))


# -- Settings and models --------------------------------------------------------------------------
def settings_changed(request: gr.Request, **values) -> tuple:
    """A changed setting ends the current run at once, with a message saying so."""
    session = session_of(request)
    try:
        settings = from_inputs(values)
    except ValueError:
        settings = None  # half-typed input: the run no longer matches it either
    if session.state is None or settings == session.settings:
        return views.as_tuple(views.only())
    session.replace(None, None)
    return views.as_tuple(render(session, "Settings changed, so the run was reset. "
                                          "Press Step or Run to start with the new settings.", "warn"))


@decode_handler
def load_models(request: gr.Request, progress=gr.Progress(), **values) -> Iterator[dict]:
    """Load the target (and draft) now, and say whether they share a tokenizer or the draft is
    another family's (drafted through text, proposers/cross_draft.py)."""
    settings = from_inputs(values)
    yield from loading_frames(settings)
    target = load_with_progress(settings.target, progress)
    message = f"Loaded target {target.name} ({target.n_params / 1e6:.0f} M parameters, {target.dtype})."
    if settings.draft_spec:
        draft = load_with_progress(settings.draft_spec, progress)
        if same_tokenizer(target, draft):
            message += f" Draft {draft.name} shares its tokenizer ({check_tokenizers(target, draft)} ids)."
        else:
            shared = vocab_map(target, draft).shared
            message += (f" Draft {draft.name} is from another family: its tokens become the target's through "
                        f"text, and under sampling its q is kept to the {shared:,} tokens both vocabularies share.")
    yield views.only(status=views.status_html(message, "ok"))


def unload(request: gr.Request) -> None:
    """The tab closed: free its run state and any KV cache this process holds for it."""
    SESSIONS.drop(visitor_key(request))


# -- the start-up warm-up -------------------------------------------------------------------------
def warming(request: gr.Request) -> Iterator[str]:
    """The page's status line while the start-up warm-up runs (from the moment the page opens),
    then one line saying it is ready; nothing when the app was ready already."""
    if not WARMUP.running:
        yield gr.skip()  # a generator that yields nothing would blank the status line
        return
    while WARMUP.running:
        yield views.status_html(WARMUP.describe(), "info")
        WARMUP.wait(timeout_s=1.0)
    if session_of(request).state is None:  # a Step that waited for it shows its own status
        yield views.status_html(f"{WARMUP.describe()} Press Step for one cycle or Run for a whole run.", "ok")
