"""Server-side state: models shared by every session, cached AR baselines, one run state per session
(with its last comparison), and the loader every handler uses.

Nothing here lives in gr.State: Gradio deep-copies a State's initial value per session, and a
model must be loaded once. Sessions are keyed by Gradio's session hash instead.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from specviz.decoding.planner import PROFILE_MIN_PARAMS, verify_cost
from specviz.decoding.runstate import LIVE, RunState
from specviz.decoding.trace import RunTrace
from specviz.decoding.tracefile import TraceFile
from specviz.loading import loader as models
from specviz.proposers import remember
from specviz.proposers.head import HeadProposer
from specviz.ui.runtime import memory
from specviz.ui.runtime.limits import Limits, check_model_size, check_model_spec
from specviz.ui.runtime.presets import BUNDLED
from specviz.ui.runtime.settings import RunSettings
from specviz.ui.runtime.zerogpu import model_device, on_zero_gpu

if TYPE_CHECKING:
    from specviz.measure.comparison import Comparison

log = logging.getLogger(__name__)
LIMITS = Limits.from_env()
LIVE.idle_s, LIVE.capacity = LIMITS.cache_idle_s, LIMITS.live_runs
MODEL_CAPACITY = 3  # models kept in memory; a 7B target plus its draft already fill a small GPU
AR_CAPACITY = 64  # cached baselines; each is a few hundred kB of trace
SESSION_CAPACITY = LIMITS.sessions  # sessions' run states (KV caches are runstate.LIVE's); closed tabs go on unload


def price_head(target: models.LoadedModel) -> None:
    """Build the trained head beside `target` once, which times its step on this machine and caches
    the number (HeadProposer._priced), so the first hybrid Step does not. A missing or unfitting
    head is not a load error: the Step that asks for it says what is wrong."""
    try:
        HeadProposer.build(target)
    except (models.ModelLoadError, ValueError) as e:
        log.info("draft head not priced at load: %s", e)


class ModelPool:
    """Load each spec once and share it. One lock per spec: a model loading never holds up
    the Steps of sessions whose models are already here, and two sessions never load one twice."""

    def __init__(self, capacity: int = MODEL_CAPACITY, loader: Callable = models.load):
        self.capacity, self.loader = capacity, loader
        self._models: OrderedDict[str, models.LoadedModel] = OrderedDict()
        self._lock = threading.Lock()  # guards the dicts only, never a load
        self._loading: dict[str, threading.Lock] = {}

    def get(self, spec: str, progress: Callable[[str], None] | None = None) -> models.LoadedModel:
        found = self._hit(spec)
        if found is not None:
            return found
        # A typed path must not read the server's folders unless the admin allows it,
        # and a model over the size limit is refused from its config, before any download.
        spec = check_model_spec(spec, LIMITS)
        with self._lock:
            spec_lock = self._loading.setdefault(spec, threading.Lock())
        with spec_lock:
            found = self._hit(spec)
            if found is not None:
                return found
            check_model_size(spec, LIMITS)
            where = {"device": model_device()} if model_device() else {}
            loaded = self.loader(spec, progress=progress, allow_local=LIMITS.allow_local, **where)
            if not on_zero_gpu():  # there the main process has no GPU: a worker times it (once; on disk)
                if progress is not None and loaded.n_params >= PROFILE_MIN_PARAMS:
                    progress(f"Pricing {spec}'s passes on this machine (timed once, then read from the cache)…")
                verify_cost(loaded)  # the planner's v(n): measured now, at load, not in the first Step
                if spec == BUNDLED:
                    price_head(loaded)  # and what its trained head's step costs (hybrid, head)
            self.put(spec, loaded)
            return loaded

    def _hit(self, spec: str) -> models.LoadedModel | None:
        with self._lock:
            if spec in self._models:
                self._models.move_to_end(spec)
                return self._models[spec]
        return None

    def peek(self, spec: str) -> models.LoadedModel | None:
        """A loaded model without taking any lock: safe in a process forked while another thread held it."""
        found = self._models.get(spec)
        if found is None:
            try:
                found = self._models.get(check_model_spec(spec, LIMITS))
            except ValueError:
                return None
        return found

    def put(self, spec: str, loaded: models.LoadedModel) -> None:
        """Share a model under `spec` (a test session's, say); the least recently used makes room."""
        with self._lock:
            self._models[spec] = loaded
            self._models.move_to_end(spec)
            while len(self._models) > self.capacity:
                self._models.popitem(last=False)

    def loaded(self, spec: str) -> bool:
        return self.peek(spec) is not None


class BaselineStore:
    """Measured AR runs keyed by RunSettings.ar_key(), so a second Run does not pay again."""

    def __init__(self, capacity: int = AR_CAPACITY):
        self.capacity = capacity
        self._runs: OrderedDict[tuple, RunTrace] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> RunTrace | None:
        with self._lock:
            return self._runs.get(key)

    def put(self, key: tuple, run: RunTrace) -> None:
        with self._lock:
            self._runs[key] = run
            while len(self._runs) > self.capacity:
                self._runs.popitem(last=False)


@dataclass
class Session:
    """One browser tab's run, as data: its state lives here, its KV caches wherever it last ran.

    `lock` guards the state: a cancelled Run may still be handing one back.
    """
    state: RunState | None = None
    settings: RunSettings | None = None
    view: int | None = None  # cycle index on screen; None follows the newest cycle
    example: bool = True  # the precomputed example is on screen until the first run or Reset
    replay: TraceFile | None = None  # a loaded trace or lesson on screen instead of a run (ui/shared/replay.py)
    last_used: float = field(default_factory=time.monotonic)
    generation: int = 0  # bumped whenever the run is replaced, so a stale Run stops
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.RLock = field(default_factory=threading.RLock)
    # The Compare tab's last comparison (the Theory tab's sources), and the Stop of the tabs that
    # measure (Compare, Theory & hardware, Advise), apart from Decode's run: a new run leaves them be.
    # Dropped with the session.
    comparison: Comparison | None = None
    measure_stop: threading.Event = field(default_factory=threading.Event)

    def replace(self, state: RunState | None, settings: RunSettings | None) -> None:
        with self.lock:
            if self.state is not None:
                LIVE.drop(self.state.run_id)  # this process's caches of the old run, if it has any
            self.state, self.settings, self.view, self.example = state, settings, None, False
            self.replay = None
            self.generation += 1
            self.stop.set()  # any Run still streaming belongs to the old run

    def adopt(self, later: RunState, generation: int) -> bool:
        """Merge a state a model call returned, unless the run was replaced meanwhile."""
        with self.lock:
            if generation != self.generation or self.state is None:
                return False
            self.state = self.state.merge(later)
            self.view = None
            settings = self.settings
        if later.done and settings is not None:  # on ZeroGPU the worker's own store is lost with it
            target = MODELS.peek(settings.target)
            if target is not None:
                remember(target.model, later)  # the store of a method that learns across runs
        return True

    def run(self) -> RunTrace | None:
        """The run so far, or None before the first cycle."""
        with self.lock:
            return None if self.state is None or not self.state.cycles else self.state.trace()


ANONYMOUS = "anonymous"  # the key of a request without a session hash (a script calling a function directly)


def visitor_key(request) -> str:
    """The key a visitor's sessions are stored under: Gradio's session hash of their page."""
    return getattr(request, "session_hash", None) or ANONYMOUS


class SessionStore:
    """Sessions by visitor key (`visitor_key`), least recently used dropped first."""

    def __init__(self, capacity: int = SESSION_CAPACITY, idle_s: float = LIMITS.session_idle_s):
        self.capacity, self.idle_s = capacity, idle_s
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str | None) -> Session:
        key = key or ANONYMOUS
        with self._lock:
            self._free_idle()
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = Session()
            session.last_used = time.monotonic()
            self._sessions.move_to_end(key)
            while len(self._sessions) > self.capacity:
                self._sessions.popitem(last=False)
            return session

    def _free_idle(self) -> None:
        """Drop sessions idle longer than idle_s (oldest first), and idle runs' KV caches sooner."""
        LIVE.sweep()
        cutoff = time.monotonic() - self.idle_s
        while self._sessions:
            key, oldest = next(iter(self._sessions.items()))
            if oldest.last_used >= cutoff:
                break
            oldest.replace(None, None)
            del self._sessions[key]

    def drop(self, key: str | None) -> None:
        with self._lock:
            session = self._sessions.pop(key or ANONYMOUS, None)
        if session is not None:
            session.replace(None, None)  # frees this process's KV caches of its run

    def __len__(self) -> int:
        return len(self._sessions)


MODELS = ModelPool()
BASELINES = BaselineStore()
SESSIONS = SessionStore()


def session_of(request) -> Session:
    """The Decode tab's session of a Gradio request (Compare, Theory and Advise keep theirs in it too)."""
    return SESSIONS.get(visitor_key(request))


def load_with_progress(spec: str, progress=None) -> models.LoadedModel:
    """MODELS.get for a handler, here in the main process: its loading steps go to `progress`,
    Gradio's progress tracker, when there is one."""
    def say(msg: str) -> None:
        if progress is not None:
            progress(None, desc=msg)
    return MODELS.get(spec, say)


def preload(specs) -> None:
    """Load `specs` now (SPECVIZ_PRELOAD; on ZeroGPU the bundled model), in the calling thread:
    at start-up, before any GPU worker forks. A failure is logged and the page still opens; the
    first Step that needs the model tries again and says what went wrong."""
    for spec in specs:
        try:
            MODELS.get(spec, log.info)
        except Exception:  # noqa: BLE001 -- start-up must not fail on a model; the Step reports it
            log.exception("Could not preload model %r at start-up", spec)


def start_sweeper(every_s: float = 30.0, trim_s: float = 5.0) -> None:
    """Free idle runs' KV caches even when no request comes to trigger it, and give the memory
    freed back to the system every few seconds (once per process)."""
    global _sweeper
    if _sweeper is not None:
        return

    def loop() -> None:
        swept = time.monotonic()
        while True:
            time.sleep(trim_s)
            if time.monotonic() - swept >= every_s:
                LIVE.sweep()
                swept = time.monotonic()
            memory.give_back()

    _sweeper = threading.Thread(target=loop, name="specviz-cache-sweeper", daemon=True)
    _sweeper.start()


_sweeper: threading.Thread | None = None
