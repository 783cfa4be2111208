"""Ready at start-up (ui/warmup.py): the app makes what the first Step needs as it starts, a Step
that arrives early waits and is told which stage is running, and the page's status line says so
from the moment it opens."""
import dataclasses
import threading
import time
from types import SimpleNamespace

import gradio as gr
import pytest

from specviz.ui.decode import handlers
from specviz.ui.runtime import warmup
from specviz.ui.runtime.warmup import STAGES, Warmup
from specviz.ui.shared import recordings, run


def _running(stage: int) -> Warmup:
    w = Warmup()
    w._done.clear()
    w.stage, w.started = stage, time.monotonic()
    return w


def _finish(w: Warmup) -> None:
    w.stage, w.ended = len(STAGES), time.monotonic()
    w._done.set()


def test_a_step_before_the_warm_up_is_done_waits_and_says_how_far_along(monkeypatch):
    """ready() blocks while the warm-up runs, telling the progress bar the stage (its number of
    how many, and its name) and the fraction done; it returns once the warm-up ends."""
    w = _running(1)
    monkeypatch.setattr(run, "WARMUP", w)
    seen = []

    def progress(fraction, desc):
        seen.append((fraction, desc))
        if len(seen) == 3:
            _finish(w)

    run.ready(progress)
    assert len(seen) == 3 and not w.running
    fraction, desc = seen[0]
    assert fraction == pytest.approx(1 / len(STAGES))
    assert desc.startswith(f"Getting the app ready, stage 2 of {len(STAGES)}: timing its cost profile")
    assert "Your Step runs as soon as this is done" in desc
    run.ready(lambda *a, **k: pytest.fail("nothing to wait for"))


def test_the_page_says_what_the_warm_up_is_doing_then_that_it_is_ready(monkeypatch):
    """While the warm-up runs the page's status line shows its stage; when it ends, one line says
    the app is ready and what to press; a page opened after it ends gets no such line (one frame
    that leaves the status as it is)."""
    w = _running(0)
    monkeypatch.setattr(handlers, "WARMUP", w)
    request = SimpleNamespace(session_hash="warm-up-page")
    threading.Timer(1.5, _finish, args=(w,)).start()
    lines = list(handlers.warming(request))
    assert len(lines) >= 2 and "stage 1 of" in lines[0] and "loading the model" in lines[0]
    assert "Ready." in lines[-1] and "Press Step" in lines[-1] and "sv-status-ok" in lines[-1]
    assert list(handlers.warming(request)) == [gr.skip()]


def test_a_failed_stage_ends_the_warm_up_with_a_reason_and_the_page_still_opens(monkeypatch):
    """A stage that raises is logged, the warm-up ends (nobody waits forever), and it says what
    failed; a Step then does the work itself."""
    w = Warmup()

    def broken(spec, say=None):
        raise OSError("disk full")

    monkeypatch.setattr(warmup.state.MODELS, "get", broken)
    w.start(recordings.example_settings(), ["hi"]).join(timeout=30)
    assert not w.running and "loading the model" in w.failed and "disk full" in w.failed
    assert "Warm-up stopped" in w.describe()


@pytest.mark.bundled
def test_the_warm_up_leaves_nothing_for_the_first_step_to_make(bundled_target):
    """On the bundled model the warm-up's stages all run: afterwards the cost profile is read back
    without timing, the batched pass costs (timed once the app is ready) are there for a run to
    read, and the example prompt's prefill is there to copy (prefilling it again computes nothing)."""
    from specviz.pricing import batch_costs, costs
    from specviz.ui.runtime.state import MODELS

    MODELS.put("bundled", bundled_target)
    settings = dataclasses.replace(recordings.example_settings(), max_new_tokens=4)
    prompt = recordings.examples()[0]["prompt"]
    w = Warmup()
    stages = []
    real_enter = w.enter
    w.enter = lambda i, detail="": (stages.append(i), real_enter(i, detail))
    w.start(settings, [prompt]).join(timeout=600)
    assert w.failed == "" and not w.running and sorted(set(stages)) == list(range(len(STAGES)))
    costs.forget_cached()
    costs.profile(bundled_target, timer=lambda n: pytest.fail("the profile was timed again"))
    assert batch_costs.cached(bundled_target) is not None
    assert warmup.prefill_examples(settings, [prompt]) == 0


def test_only_the_pages_own_example_is_prefilled_before_ready(monkeypatch):
    """The warm-up's stages prefill the page's first example prompt only; the app says Ready, and
    only then are the shared passes timed and the other example prompts prefilled."""
    w = Warmup()
    calls = []
    target = SimpleNamespace(name="fake")
    monkeypatch.setattr(warmup.state.MODELS, "get", lambda spec, say=None: target)
    monkeypatch.setattr(warmup, "verify_cost", lambda t: None)
    monkeypatch.setattr(warmup.state, "price_head", lambda t: None)
    monkeypatch.setattr(warmup, "prefill_examples", lambda s, prompts: calls.append((list(prompts), w.running)))
    monkeypatch.setattr(Warmup, "_time_batches", staticmethod(lambda t: calls.append(("batches", w.running))))
    w.start(recordings.example_settings(), ["first", "second", "third"]).join(timeout=30)
    assert w.failed == "" and not w.running
    assert calls == [(["first"], True), ("batches", False), (["second", "third"], False)]


@pytest.mark.parametrize("settle", [True, False])
def test_the_apps_start_freezes_what_start_up_made_before_ready_and_a_test_process_does_not(settle, monkeypatch):
    """With settle_gc (app.py's start) the warm-up collects the young generations only (a full
    collection costs 0.3 s of a start) and freezes the objects alive (gc.freeze) after the page's
    example is prefilled and before it says Ready; without it (a test process, whose later garbage
    must stay collectable) the collector is left alone."""
    w = Warmup()
    calls = []
    monkeypatch.setattr(warmup.state.MODELS, "get", lambda spec, say=None: SimpleNamespace(name="fake"))
    monkeypatch.setattr(warmup, "verify_cost", lambda t: None)
    monkeypatch.setattr(warmup.state, "price_head", lambda t: None)
    monkeypatch.setattr(warmup, "prefill_examples", lambda s, prompts: calls.append(("prefill", w.running)))
    monkeypatch.setattr(Warmup, "_time_batches", staticmethod(lambda t: None))
    monkeypatch.setattr(warmup.gc, "collect", lambda *generation: calls.append(("collect", generation, w.running)))
    monkeypatch.setattr(warmup.gc, "freeze", lambda: calls.append(("freeze", w.running)))
    w.start(recordings.example_settings(), ["first"], settle_gc=settle).join(timeout=30)
    expected = [("prefill", True)] + ([("collect", (1,), True), ("freeze", True)] if settle else [])
    assert calls == expected
