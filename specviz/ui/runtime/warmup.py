"""Ready at start-up: everything the page's first Step needs, made in the background as the app
starts, with its progress on the page and in the log.

On a fresh machine the first Step after `python app.py` used to pay for all of it: converting the
bundled model, timing its cost profile, pricing the draft head, and prefilling the prompt. Spaces
restart often, so the first class after a restart paid it. Here the app does it once, at start-up,
in the stages below, prefilling only the page's own example prompt (the one a class presses); then,
with the app already answering, it times the costs of passes shared by several runs (AFTER), which
load-aware drafting reads once they are there, and prefills the other example prompts
(AFTER_PREFILLS). A Step pressed before the stages are done
waits for it, and its progress bar says which stage is running and how far along the warm-up is;
the page's status line says the same from the moment it opens. Nothing here changes what a Step
computes: each stage fills a cache a Step would otherwise fill itself.

SPECVIZ_WARM_UP=0 turns it off (app.py reads it); not on ZeroGPU, whose main process has no GPU.
"""
from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from typing import Callable

from specviz.decoding.planner import PROFILE_MIN_PARAMS, batch_cost, verify_cost
from specviz.decoding.runstate import new_state
from specviz.ui.runtime import state, work
from specviz.ui.runtime.settings import RunSettings

log = logging.getLogger(__name__)

STAGES = ("loading the model", "timing its cost profile", "pricing the draft head",
          "prefilling the example prompt")
# after the app is ready: Steps price alone until the first is done, and a Step on another example
# prefills it itself until the second is
AFTER = "timing passes shared by several runs"
AFTER_PREFILLS = "prefilling the other example prompts"
POLL_S = 0.5


def prefill_examples(settings: RunSettings, prompts: list[str]) -> int:
    """Prefill each example prompt at the page's settings (models loaded here, the pass in
    ui/runtime/work.py), so a class's first Steps on it copy one prefill; returns how many were computed.
    A prompt that fails is logged and skipped."""
    done = 0
    for prompt in prompts:
        try:
            s = dataclasses.replace(settings, prompt=prompt)
            target = state.MODELS.get(s.target, log.info)
            draft = state.MODELS.get(s.draft_spec, log.info) if s.draft_spec else None
            done += work.prefill((s.target, s.draft_spec), new_state(target, prompt, s.decode(), draft))
        except Exception:  # noqa: BLE001 -- a warm-up must never stop the page
            log.exception("Could not prefill the example prompt %r", prompt[:40])
    return done


def settle_garbage_collector() -> None:
    """Move every object alive now (the libraries' modules, the model, the page: over half a million
    the collector tracks) out of the cyclic collector's sight with `gc.freeze`. Python's full
    collections otherwise walk all of them while holding the GIL: 0.3 s at a time, in the middle of
    a class's Steps, which all stop meanwhile (measured: docs/BENCHMARKS.md, "A lecture hall on the
    page's defaults"). Only the young generations are collected first (1 ms): a full collection here
    found 0 to 20 unreachable objects in 0.29 s of a start, so whatever garbage it would free is
    not worth its time, and stays frozen. What is frozen stays alive, as it would anyway; later
    objects are collected as before."""
    gc.collect(1)
    gc.freeze()


class Warmup:
    """The warm-up's progress, read by Steps that arrive early and by the page's status line."""

    def __init__(self):
        self.stage = -1  # index into STAGES of the one running; len(STAGES) when done
        self.detail = ""
        self.started = self.ended = None
        self.failed = ""  # what went wrong, if a stage failed: the Step then does the work itself
        self.target = None  # the spec being warmed
        self.settle_gc = False  # the app's own start: freeze what start-up made (settle_garbage_collector)
        self._done = threading.Event()
        self._done.set()  # nothing to wait for until started

    @property
    def running(self) -> bool:
        return not self._done.is_set()

    def fraction(self) -> float:
        return max(self.stage, 0) / len(STAGES)

    def describe(self) -> str:
        """One line for a person: which stage of how many, and for how long so far."""
        if not self.running:
            return "Ready." if not self.failed else f"Warm-up stopped ({self.failed}); a Step does what is left."
        spent = time.monotonic() - (self.started or time.monotonic())
        detail = f" ({self.detail})" if self.detail else ""
        return (f"Getting the app ready, stage {self.stage + 1} of {len(STAGES)}: {STAGES[self.stage]}{detail}… "
                f"{spent:.0f} s so far. Your Step runs as soon as this is done.")

    def enter(self, i: int, detail: str = "") -> None:
        self.stage, self.detail = i, detail
        log.info("SpecViz warm-up %d/%d: %s%s", i + 1, len(STAGES), STAGES[i], f" ({detail})" if detail else "")

    def run(self, settings: RunSettings, prompts: list[str]) -> None:
        """Every stage in turn, for the page's starting settings; a failed stage is logged and ends
        the warm-up (the Step that needs the work does it and says what went wrong)."""
        self.started, self.target = time.monotonic(), settings.target
        try:
            self.enter(0, settings.target)
            target = state.MODELS.get(settings.target, log.info)  # also prices the head (state.price_head)
            self.enter(1)
            verify_cost(target)
            self.enter(2)
            state.price_head(target)
            self.enter(3)
            prefill_examples(settings, prompts[:1])  # the page's own: what a class presses first
            if self.settle_gc:
                settle_garbage_collector()
        except Exception as e:  # noqa: BLE001 -- a warm-up must never stop the page
            self.failed = f"{STAGES[max(self.stage, 0)]}: {type(e).__name__}: {e}"
            log.exception("SpecViz warm-up failed at %s", STAGES[max(self.stage, 0)])
        finally:
            self.ended = time.monotonic()
            self.stage = len(STAGES)
            self._done.set()
            log.info("SpecViz warm-up %s in %.1f s", "stopped" if self.failed else "done", self.ended - self.started)
        if not self.failed:
            self._time_batches(target)
            if prompts[1:]:
                log.info("SpecViz, the app being ready: %s", AFTER_PREFILLS)
                prefill_examples(settings, prompts[1:])

    @staticmethod
    def _time_batches(target) -> None:
        """The costs of passes shared by several runs, for load-aware drafting (pricing/batch_costs.py),
        timed once the app is ready: until they are there a crowded pass is priced as if alone."""
        from specviz.pricing import batch_costs

        if target.n_params < PROFILE_MIN_PARAMS or target.remote is not None or batch_cost(target) is not None:
            return
        started = time.monotonic()
        log.info("SpecViz, the app being ready: %s", AFTER)
        try:
            batch_costs.batch_costs(target)
            log.info("SpecViz: %s done in %.1f s; crowded passes are now priced as crowded", AFTER,
                     time.monotonic() - started)
        except Exception:  # noqa: BLE001 -- load-aware pricing is an improvement, never a condition
            log.exception("SpecViz: %s failed; passes stay priced as if alone", AFTER)

    def start(self, settings: RunSettings, prompts: list[str], settle_gc: bool = False) -> threading.Thread:
        """Run the stages in a thread; `settle_gc` (the app's start, not a test process, whose
        later garbage must stay collectable) ends them with settle_garbage_collector."""
        self.settle_gc = settle_gc
        self._done.clear()
        self.stage = 0
        thread = threading.Thread(target=self.run, args=(settings, prompts), name="specviz-warmup", daemon=True)
        thread.start()
        return thread

    def wait(self, progress: Callable | None = None, timeout_s: float = 600.0) -> None:
        """Block until the warm-up is done (at most `timeout_s`), telling `progress` how far along it is."""
        deadline = time.monotonic() + timeout_s
        while self.running and time.monotonic() < deadline:
            if progress is not None:
                progress(self.fraction(), desc=self.describe())
            self._done.wait(POLL_S)


WARMUP = Warmup()
