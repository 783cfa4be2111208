"""Event handlers: Step, Run, Stop, Reset, the cycle slider, the AR baseline and settings changes.

Every handler returns (or yields) a dict of output name → value, turned into a tuple by
`views.as_tuple` in layout.py. Errors a person can fix become a message in the status box;
the session stays usable.
"""
from __future__ import annotations

import functools
from typing import Callable, Iterator

import gradio as gr

from specviz.decoding.activity import ACTIVITY
from specviz.decoding.engine import new_state
from specviz.decoding.runstate import RunState
from specviz.drafting.sampling import check_settings
from specviz.loading.loader import EMPTY_PROMPT, check_tokenizers
from specviz.ui import errors, views, work
from specviz.ui.limits import check_model_spec, check_prompt_text, check_run_settings
from specviz.ui.presets import draft_choices
from specviz.ui.settings import RunSettings, from_inputs
from specviz.ui.state import BASELINES, LIMITS, MODELS, SESSIONS, Session, load_with_progress, session_of
from specviz.ui.warmup import WARMUP
from specviz.ui.zerogpu import on_zero_gpu

AR_HINT = " Run, or Measure AR baseline, decodes the same prompt plainly for the timing panel."
IDLE_MEASURED = "AR baseline measured while the app was idle; the timing panel compares the two."
IDLE_GIVEN_UP = "Another run started decoding, so the AR baseline was left for later: Measure AR baseline times it."
IDLE_FRAME_S = 0.25  # how often an idle-time baseline looks whether someone else started decoding
STOPPED = "Stopped. Step or Run continues this run; Reset starts again."


def error(message: str) -> dict:
    return views.only(status=views.status_html(message, "error"))


def guarded(handler: Callable[..., Iterator[dict]]) -> Callable[..., Iterator[tuple]]:
    """Stream a handler's dicts as output tuples; errors end the stream as a status message (errors.message)."""
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            for values in handler(*args, **kwargs):
                yield views.as_tuple(values)
        except Exception as e:  # noqa: BLE001 -- never let a handler take the page down
            yield views.as_tuple(error(errors.message(e, errors.RUN_HINT)))
    return wrapper


def on_screen(session: Session) -> tuple:
    """(run, AR baseline) the views show: a replayed trace, the example, or the session's run."""
    if session.replay is not None:
        return session.replay.run, session.replay.ar
    if session.example:
        return views.example()
    ar = BASELINES.get(session.settings.ar_key()) if session.settings else None
    return session.run(), ar


def render(session: Session, message: str, level: str = "info") -> dict:
    """Every output for the run on screen (see on_screen)."""
    run, ar = on_screen(session)
    return views.full(message, level, run, ar, session.view)


# -- models and decoders --------------------------------------------------------------------------
def check_early(settings: RunSettings) -> None:
    """Cheap checks before any model loads, so a typo does not wait for a download."""
    if not settings.prompt.strip():
        raise ValueError(EMPTY_PROMPT)
    check_prompt_text(settings.prompt, LIMITS)
    check_settings(settings.temperature, settings.top_p)
    check_run_settings(LIMITS, settings.k, settings.max_new_tokens)
    check_model_spec(settings.target, LIMITS)
    if settings.draft_spec:
        check_model_spec(settings.draft_spec, LIMITS)
    if settings.proposer == "draft" and not settings.draft:
        raise ValueError("The draft-model method needs a draft: pick one in 'Draft model' "
                         "(it must share the target's tokenizer).")


def needs_loading(settings: RunSettings) -> list[str]:
    specs = [settings.target, settings.draft_spec]
    return [s for s in specs if s and not MODELS.loaded(s)]


def specs(settings: RunSettings) -> tuple[str, str | None]:
    """The models a run needs, as the specs work.py looks them up by."""
    return settings.target, settings.draft_spec


def ensure_run(session: Session, settings: RunSettings, progress) -> str | None:
    """Start a new run unless the session's run already has these settings; say why.

    Models load here, in the main process, never inside a GPU call. The run's first state is
    made from the tokenizers alone (engine.new_state): no model runs outside ui/work.py.
    """
    if session.state is not None and session.settings == settings:
        return None
    check_early(settings)
    target = load_with_progress(settings.target, progress)
    draft = load_with_progress(settings.draft_spec, progress) if settings.draft_spec else None
    state = new_state(target, settings.prompt, settings.decode(), draft)
    check_run_settings(LIMITS, settings.k, settings.max_new_tokens, len(state.prompt_ids))
    restarted = session.state is not None
    session.replace(state, settings)
    head = "Settings changed, so a new run started" if restarted else "New run"
    if draft is not None and draft.n_params > target.n_params:
        head += (f" (note: the draft, {draft.n_params / 1e6:.0f} M parameters, is larger than the target, "
                 f"{target.n_params / 1e6:.0f} M, so it cannot save time)")
    hint = "" if BASELINES.get(settings.ar_key()) else AR_HINT
    return f"{head}: {settings.describe()}.{hint}"


def loading_frames(settings: RunSettings) -> Iterator[dict]:
    """One status frame while models load (the progress bar shows the detail)."""
    pending = needs_loading(settings)
    if pending:
        yield views.only(status=views.status_html(f"Loading {', '.join(pending)}…", "info"))


def rebuild_note(before: RunState, after: RunState) -> str:
    """A sentence when the call had to rebuild the KV caches (a new worker, or idle caches freed)."""
    if after.rebuilds <= before.rebuilds:
        return ""
    ms = 1000 * (after.rebuild_s - before.rebuild_s)
    return (f" This call first rebuilt the KV cache: one prefill of {len(before.ids) - 1} tokens, "
            f"{ms:.0f} ms, shown apart from decode time.")


def current(session: Session) -> tuple[RunState, int]:
    with session.lock:
        return session.state, session.generation


# -- Step -----------------------------------------------------------------------------------------
def step(request: gr.Request, progress=gr.Progress(), **values) -> tuple:
    """Run exactly one cycle (the first Step prefills, then runs cycle 0).

    A plain function, not a generator: a Step has one frame, so streaming it buys nothing and
    costs Gradio's generator machinery per event. Loading shows in the progress bar."""
    try:
        return views.as_tuple(_step(session_of(request), from_inputs(values), progress))
    except Exception as e:  # noqa: BLE001 -- never let a handler take the page down
        return views.as_tuple(error(errors.message(e, errors.RUN_HINT)))


def _step(session: Session, settings: RunSettings, progress) -> dict:
    return render(session, *advance(session, settings, progress))


FINISHED = "This run is finished. Press Reset, or change a setting, to start another."


def ready(progress) -> None:
    """Wait for the start-up warm-up (ui/warmup.py) while it runs, its stage in the progress bar:
    an early Step then reuses its work instead of racing it for the same caches and CPU."""
    if WARMUP.running:
        WARMUP.wait(progress)


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


def advance(session: Session, settings: RunSettings, progress) -> tuple[str, str]:
    """One cycle of the session's run (started first if the settings changed): (message, level).
    Decode's Step and each column of Side by side call this."""
    ready(progress)
    note = ensure_run(session, settings, progress)
    state, generation = current(session)
    if state.done:
        return FINISHED, "warn"
    later = work.step(specs(settings), state.light())
    if not session.adopt(later, generation):  # a Reset or a settings change took over meanwhile
        return "A Reset or a changed setting replaced this run while it stepped.", "info"
    done = " The run is finished." if later.done else ""
    message = note or (f"Cycle {later.n_cycles - 1} done." if later.n_cycles > state.n_cycles
                       else "The prefill chose the only token asked for.")
    return message + rebuild_note(state, later) + done, "ok"


# -- Run and the AR baseline ----------------------------------------------------------------------
def stream_cycles(session: Session, settings: RunSettings) -> Iterator[dict]:
    """Decode to the end (or a Stop) in one model call, showing a frame per state it sends back."""
    state, generation = current(session)
    chunks = work.run(specs(settings), state.light())
    try:
        for later in chunks:
            if not session.adopt(later, generation):
                return
            yield render(session, f"Running… cycle {later.n_cycles - 1}, {len(later.origins)} tokens."
                         + rebuild_note(state, later), "info")
            state = later
            if session.stop.is_set():
                return
    finally:
        chunks.close()


def stream_baseline(session: Session, settings: RunSettings, progress, while_idle: bool = False) -> Iterator[dict]:
    """Decode the same prompt and settings plainly (method "ar"), measured, then cache it.
    `while_idle`: give up, caching nothing, as soon as another run of this process decodes (the
    measurement must not take their time, nor be slowed by theirs)."""
    key = settings.ar_key()
    if BASELINES.get(key) is not None:
        return
    target = load_with_progress(settings.target, progress)
    options = dict(temperature=settings.temperature, top_p=settings.top_p, seed=settings.seed,
                   max_new_tokens=settings.max_new_tokens)
    frames = work.baseline(settings.target, target.encode(settings.prompt, settings.chat), options,
                           frame_s=IDLE_FRAME_S if while_idle else work.FRAME_S)
    run, ar = session.run(), None
    how = " while the app is idle" if while_idle else ""
    try:
        for ar in frames:
            if session.stop.is_set() or (while_idle and ACTIVITY.busy()):
                return
            status = views.status_html(f"Measuring the AR baseline{how}… {len(ar.token_ids)} tokens.", "info")
            yield views.only(status=status, **views.timing_views(run, ar))
    finally:
        frames.close()
    if ar is not None:
        BASELINES.put(key, ar)


@guarded
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


@guarded
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


@guarded
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


@guarded
def load_models(request: gr.Request, progress=gr.Progress(), **values) -> Iterator[dict]:
    """Load the target (and draft) now and check that they share a tokenizer."""
    settings = from_inputs(values)
    yield from loading_frames(settings)
    target = load_with_progress(settings.target, progress)
    message = f"Loaded target {target.name} ({target.n_params / 1e6:.0f} M parameters, {target.dtype})."
    if settings.draft_spec:
        draft = load_with_progress(settings.draft_spec, progress)
        vocab = check_tokenizers(target, draft)
        message += f" Draft {draft.name} shares its tokenizer ({vocab} ids)."
    yield views.only(status=views.status_html(message, "ok"))


def target_changed(target: str, draft: str | None):
    """Offer the drafts that share the new target's tokenizer."""
    choices = draft_choices(target)
    values = [v for _, v in choices]
    keep = draft if draft in values else (values[0] if values else None)
    return gr.update(choices=choices, value=keep)


def unload(request: gr.Request) -> None:
    """The tab closed: free its run state and any KV cache this process holds for it."""
    SESSIONS.drop(getattr(request, "session_hash", None))
