"""The run logic Decode and Side by side share: start a session's run (`ensure_run`), advance it by
one cycle (`advance`), stream it to the end (`stream_cycles`), measure its plain baseline
(`stream_baseline`), and say what is on screen (`on_screen`, `render`).

Models load here, in the main process; every model call goes through runtime/work.py. Frames are
dicts of output name → value (views.OUTPUTS); each tab turns them into its own outputs.
"""
from __future__ import annotations

from typing import Iterator

from specviz.decoding.activity import ACTIVITY
from specviz.decoding.runstate import RunState, new_state
from specviz.drafting.sampling import check_settings
from specviz.drafting.vocab_map import vocab_map
from specviz.loading.loader import EMPTY_PROMPT, same_tokenizer
from specviz.ui.runtime import work
from specviz.ui.runtime.limits import check_model_spec, check_pair_memory, check_prompt_text, check_run_settings
from specviz.ui.runtime.settings import RunSettings
from specviz.ui.runtime.state import BASELINES, LIMITS, MODELS, Session, load_with_progress
from specviz.ui.runtime.warmup import WARMUP
from specviz.ui.shared import views

AR_HINT = " Run, or Measure AR baseline, decodes the same prompt plainly for the timing panel."
IDLE_FRAME_S = 0.25  # how often an idle-time baseline looks whether someone else started decoding


def error(message: str) -> dict:
    """A frame that shows `message` as an error and leaves every other output as it is."""
    return views.only(status=views.status_html(message, "error"))


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
                         "(one of the target's family, or of another: it is then drafted through text).")


def needs_loading(settings: RunSettings) -> list[str]:
    specs = [settings.target, settings.draft_spec]
    return [s for s in specs if s and not MODELS.loaded(s)]


def specs(settings: RunSettings) -> tuple[str, str | None]:
    """The models a run needs, as the specs work.py looks them up by."""
    return settings.target, settings.draft_spec


def ensure_run(session: Session, settings: RunSettings, progress) -> str | None:
    """Start a new run unless the session's run already has these settings; say why.

    Models load here, in the main process, never inside a GPU call. The run's first state is
    made from the tokenizers alone (runstate.new_state): no model runs outside ui/runtime/work.py.
    """
    if session.state is not None and session.settings == settings:
        return None
    check_early(settings)
    check_pair_memory(settings.target, settings.draft_spec, loaded=MODELS.loaded)
    target = load_with_progress(settings.target, progress)
    draft = load_with_progress(settings.draft_spec, progress) if settings.draft_spec else None
    state = new_state(target, settings.prompt, settings.decode(), draft)
    if draft is not None and settings.method == "draft" and not same_tokenizer(target, draft):
        vocab_map(target, draft)  # built here, in the main process, so a forked GPU worker finds it made
    check_run_settings(LIMITS, settings.k, settings.max_new_tokens, len(state.prompt_ids))
    restarted = session.state is not None
    session.replace(state, settings)
    head = "Settings changed, so a new run started" if restarted else "New run"
    if draft is not None and draft.n_params > target.n_params:
        head += (f" (note: the draft, {draft.n_params / 1e6:.0f} M parameters, is larger than the target, "
                 f"{target.n_params / 1e6:.0f} M, so it cannot save time)")
    hint = "" if BASELINES.get(settings.ar_key()) else AR_HINT
    return f"{head}: {settings.describe()}.{no_template_note(target, settings.chat)}{hint}"


def no_template_note(target, chat: bool) -> str:
    """A sentence when the chat template was asked for but the target has none (a base model such as
    Gemma 3 270M): the prompt is then decoded as typed, and the page says so."""
    if not chat or getattr(target.tokenizer, "chat_template", None) or target.tokenizer is None:
        return ""
    return (f" {target.name} has no chat template (a base model), so the prompt is decoded as typed: "
            "write the beginning of the text it should continue.")


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


FINISHED = "This run is finished. Press Reset, or change a setting, to start another."


def ready(progress) -> None:
    """Wait for the start-up warm-up (ui/runtime/warmup.py) while it runs, its stage in the progress bar:
    an early Step then reuses its work instead of racing it for the same caches and CPU."""
    if WARMUP.running:
        WARMUP.wait(progress)


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


