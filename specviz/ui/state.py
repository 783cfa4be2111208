"""Server-side state: models shared by every session, cached AR baselines, one decoder per session.

Nothing here lives in gr.State: Gradio deep-copies a State's initial value per session, and a
model must be loaded once. Sessions are keyed by Gradio's session hash instead.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from .. import models
from ..limits import Limits, check_model_size, check_model_spec
from ..engine import Decoder
from ..trace import RunTrace
from ..tracefile import TraceFile
from .settings import RunSettings

LIMITS = Limits.from_env()
MODEL_CAPACITY = 3  # models kept in memory; a 7B target plus its draft already fill a small GPU
AR_CAPACITY = 64  # cached baselines; each is a few hundred kB of trace
SESSION_CAPACITY = 64  # live decoders; each holds a KV cache, and closed tabs are dropped on unload


class ModelCache:
    """Load each spec once and share it; loading is serialised so two sessions never load twice."""

    def __init__(self, capacity: int = MODEL_CAPACITY, loader: Callable = models.load):
        self.capacity, self.loader = capacity, loader
        self._models: OrderedDict[str, models.LoadedModel] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, spec: str, progress: Callable[[str], None] | None = None) -> models.LoadedModel:
        with self._lock:
            if spec in self._models:
                self._models.move_to_end(spec)
                return self._models[spec]
            # A typed path must not read the server's folders unless the admin allows it,
            # and a model over the size limit is refused from its config, before any download.
            spec = check_model_spec(spec, LIMITS)
            check_model_size(spec, LIMITS)
            loaded = self.loader(spec, progress=progress, allow_local=LIMITS.allow_local)
            self._models[spec] = loaded
            while len(self._models) > self.capacity:
                self._models.popitem(last=False)
            return loaded

    def put(self, spec: str, loaded: models.LoadedModel) -> None:
        """Share a model loaded elsewhere (a test session's, say) under `spec`."""
        with self._lock:
            self._models[spec] = loaded

    def loaded(self, spec: str) -> bool:
        return spec in self._models


class BaselineCache:
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
    """One browser tab's run. `lock` guards the decoder: a cancelled Run may still be mid-cycle."""
    decoder: Decoder | None = None
    settings: RunSettings | None = None
    view: int | None = None  # cycle index on screen; None follows the newest cycle
    example: bool = True  # the precomputed example is on screen until the first run or Reset
    replay: TraceFile | None = None  # a loaded trace or lesson on screen instead of a run (ui/replay.py)
    last_used: float = field(default_factory=time.monotonic)
    generation: int = 0  # bumped whenever the decoder is replaced, so a stale Run stops
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def replace(self, decoder: Decoder | None, settings: RunSettings | None) -> None:
        with self.lock:
            self.decoder, self.settings, self.view, self.example = decoder, settings, None, False
            self.replay = None
            self.generation += 1
            self.stop.set()  # any Run still streaming belongs to the old decoder

    def run(self) -> RunTrace | None:
        """A snapshot of the decoder's run, or None before the first Step."""
        with self.lock:
            return None if self.decoder is None or not self.decoder.cycles else self.decoder.trace()


class SessionStore:
    """Sessions by Gradio session hash, least recently used dropped first."""

    def __init__(self, capacity: int = SESSION_CAPACITY, idle_s: float = LIMITS.session_idle_s):
        self.capacity, self.idle_s = capacity, idle_s
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str | None) -> Session:
        key = key or "anonymous"
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
        """Drop sessions idle longer than idle_s (oldest first), freeing their KV caches."""
        cutoff = time.monotonic() - self.idle_s
        while self._sessions:
            key, oldest = next(iter(self._sessions.items()))
            if oldest.last_used >= cutoff:
                break
            oldest.replace(None, None)
            del self._sessions[key]

    def drop(self, key: str | None) -> None:
        with self._lock:
            self._sessions.pop(key or "anonymous", None)

    def __len__(self) -> int:
        return len(self._sessions)


MODELS = ModelCache()
BASELINES = BaselineCache()
SESSIONS = SessionStore()
