"""A run's state as plain data, and this process's KV caches as an optimisation beside it.

`RunState` holds everything a run needs to go on: the options, the prompt and committed ids,
their origins, the random generator's state, adaptive K, what the proposer cannot rebuild
from the ids, the timing so far and the trace. It pickles, so it survives the process
boundary of a ZeroGPU call (each `@spaces.GPU` call runs in a forked worker and only its
return value comes back).

KV caches are not part of it. `LiveCaches` keeps them per process, keyed by run and committed
length; any call may find them gone, and the engine then rebuilds them with one prefill of the
committed tokens (engine.Decoder.rebuild), with the same tokens and draws either way.

Here, too, a run's state goes in and out of an engine.Decoder: `new_state` starts one before any
model runs, `state_of` takes a decoder's out (Decoder.state), and `resume` builds a decoder that
goes on from one (Decoder.resume). The cycle itself is engine.py's.
"""
from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz.decoding.settings import DecodeSettings
from specviz.decoding.trace import CycleTrace, RunTrace, summarize
from specviz.drafting.sampling import Sampling
from specviz.loading.loader import LoadedModel, same_tokenizer

LIVE_CAPACITY = 8  # runs whose caches one process keeps: a few active tabs, not every idle one
LIVE_IDLE_S = 120.0  # an untouched run's caches are freed after this; its state stays with its owner


@dataclass
class RunState:
    """Everything needed to continue a run (see the module docstring)."""
    run_id: str
    options: dict[str, Any]  # the Decoder's keyword arguments: method, k, temperature, ..., knobs
    shown: dict[str, Any]  # the options as the trace shows them (model names included): RunTrace.settings
    prompt_ids: list[int]
    ids: list[int]  # prompt, then every committed token
    origins: list[str] = field(default_factory=list)  # per new token
    cycle_of: list[int] = field(default_factory=list)  # per new token
    token_texts: list[str] = field(default_factory=list)  # per new token
    text: str = ""  # the new tokens decoded together
    n_cycles: int = 0
    k: int = 0  # the current K: set from the settings by new_state (adaptive K moves it)
    rng: bytes = b""  # torch.Generator.get_state()
    last_logits: torch.Tensor | None = None  # CPU float32: the target logits ids[-1] was chosen from
    last_hidden: torch.Tensor | None = None  # the target's final hidden state there (for the draft head)
    proposer: dict[str, Any] = field(default_factory=dict)  # what the proposer cannot rebuild from ids
    planner: dict[str, Any] = field(default_factory=dict)  # cost-aware drafting's counts and pass costs
    done: bool = False
    prefill_s: float = 0.0  # the prompt pass that chose the first new token
    prefill_shared: bool = False  # that pass was another run's, copied (decoding/prefills.py)
    decode_s: float = 0.0  # cycles only: no prefill, no cache rebuilds
    rebuild_s: float = 0.0  # prefills that rebuilt a cache some call found empty
    rebuilds: int = 0
    cycles: list[CycleTrace] = field(default_factory=list)

    @property
    def started(self) -> bool:
        """True once the prefill has committed the first new token."""
        return bool(self.origins) or self.done

    def light(self) -> "RunState":
        """The state without its trace: what travels into a call that runs a model."""
        return dataclasses.replace(self, cycles=[])

    def merge(self, later: "RunState") -> "RunState":
        """`later` came back from a call given self.light(): its cycles follow ours."""
        if later.run_id != self.run_id:
            raise ValueError("a state from another run cannot be merged into this one")
        return dataclasses.replace(later, cycles=self.cycles + later.cycles)

    def trace(self) -> RunTrace:
        """The RunTrace of the run so far (no model needed)."""
        new = self.ids[len(self.prompt_ids):]
        run = RunTrace(method=str(self.options.get("method", "")), settings=dict(self.shown),
                       prompt_ids=list(self.prompt_ids), token_ids=list(new), text=self.text,
                       token_texts=list(self.token_texts), origins=list(self.origins),
                       cycle_of=list(self.cycle_of), cycles=list(self.cycles), prefill_s=self.prefill_s)
        run.metrics = summarize(self.cycles, len(new), self.decode_s, self.prefill_s, self.rebuild_s,
                                self.rebuilds)
        return run


@dataclass
class Parked:
    """One run's caches between calls, valid only at `length` committed tokens."""
    length: int
    cache: Any
    proposer: Any
    used: float = field(default_factory=time.monotonic)


class LiveCaches:
    """This process's KV caches by run id; least recently used and idle entries are dropped."""

    def __init__(self, capacity: int = LIVE_CAPACITY, idle_s: float = LIVE_IDLE_S):
        self.capacity, self.idle_s = capacity, idle_s
        self._items: OrderedDict[str, Parked] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, run_id: str, length: int, cache, proposer) -> None:
        with self._lock:
            self._items[run_id] = Parked(length, cache, proposer)
            self._items.move_to_end(run_id)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def take(self, run_id: str, length: int) -> Parked | None:
        """The run's caches if they hold exactly `length` committed tokens; they leave the store."""
        with self._lock:
            parked = self._items.pop(run_id, None)
        return parked if parked is not None and parked.length == length else None

    def drop(self, run_id: str | None) -> None:
        with self._lock:
            self._items.pop(run_id, None)

    def sweep(self, now: float | None = None) -> int:
        """Free the caches of runs idle longer than idle_s; returns how many were freed."""
        cutoff = (time.monotonic() if now is None else now) - self.idle_s
        with self._lock:
            stale = [key for key, p in self._items.items() if p.used < cutoff]
            for key in stale:
                del self._items[key]
        return len(stale)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __contains__(self, run_id: str) -> bool:
        return run_id in self._items

    def __len__(self) -> int:
        return len(self._items)


LIVE = LiveCaches()


def _fresh_lock_in_child() -> None:
    """A forked GPU worker starts with only the calling thread: a lock another thread held at
    the fork would stay held forever, so the worker gets a new one."""
    LIVE._lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)


# -- a run's state in and out of a decoder -----------------------------------------------------------
def new_state(target: LoadedModel, prompt, settings: DecodeSettings, draft: LoadedModel | None = None) -> RunState:
    """A run before its prefill, as data: a pure function of the models' tokenizers, the prompt and
    the settings. It checks them and encodes the prompt but runs no model and reads no weight, so
    the main process can start a run on ZeroGPU; the first Step builds the proposer in its worker."""
    if draft is not None and settings.method == "draft":
        same_tokenizer(target, draft)  # refuses a model without a tokenizer; another family's draft is fine
    prompt_ids = target.encode(prompt, settings.chat)
    options = settings.options()
    shown = dict(target=target.name, draft=None if draft is None else draft.name,
                 **{n: v for n, v in options.items() if n != "record"})
    rng = Sampling(settings.temperature, settings.top_p, settings.seed).generator.get_state()
    return RunState(run_id=uuid.uuid4().hex, options=options, shown=shown, prompt_ids=list(prompt_ids),
                    ids=list(prompt_ids), k=int(settings.k), rng=rng.numpy().tobytes())


def state_of(dec, since: int = 0) -> RunState:
    """A decoder's run (engine.Decoder) as plain data; its trace holds the cycles from `since` on (0: all)."""
    logits = None if dec.last_logits is None else dec.last_logits.detach().float().to("cpu", copy=True)
    # in its own dtype: the next draft must not depend on where the call ran
    hidden = None if dec.last_hidden is None else dec.last_hidden.detach().to("cpu", copy=True)
    return RunState(
        run_id=dec.run_id, options=dict(dec.options), shown=dict(dec.shown),
        prompt_ids=list(dec.prompt_ids), ids=list(dec.ids), origins=list(dec.origins),
        cycle_of=list(dec.cycle_of), token_texts=list(dec.token_texts),
        text=dec.target.decode(dec.ids[len(dec.prompt_ids):]), n_cycles=dec.n_cycles, k=dec.k,
        last_hidden=hidden, rng=dec.sampling.generator.get_state().numpy().tobytes(), last_logits=logits,
        proposer=dec.proposer.state() if dec.proposer is not None else {}, done=dec.done,
        planner=dec.planner.state() if dec.planner is not None else {},
        prefill_s=dec.prefill_s, prefill_shared=dec.prefill_shared,
        decode_s=dec.elapsed - dec.prefill_s, rebuild_s=dec.rebuild_s,
        rebuilds=dec.rebuilds, cycles=list(dec.cycles[since:]))


def resume(make, target: LoadedModel, state: RunState, draft: LoadedModel | None = None,
           live: LiveCaches = LIVE, verifier=None):
    """A decoder built by `make` (engine.Decoder or a subclass) that goes on from `state`: with this
    process's parked caches if they match, else with none, and the first step rebuilds them."""
    parked = live.take(state.run_id, len(state.ids))
    ready = parked.proposer if parked is not None else None
    dec = make(target, state.prompt_ids, draft=draft, proposer=ready, verifier=verifier, **state.options)
    _load(dec, state)
    if parked is not None:
        dec.cache = parked.cache
    else:  # the proposer's own state goes in after the rebuild has rebuilt the rest of it
        dec.proposer_state = dict(state.proposer)
    return dec


def _load(dec, state: RunState) -> None:
    """Set a fresh decoder's run to `state`: tokens, draws, K, timings, the proposer's and planner's state."""
    dec.run_id, dec.shown = state.run_id, dict(state.shown)
    dec.ids, dec.origins, dec.cycle_of = list(state.ids), list(state.origins), list(state.cycle_of)
    dec.token_texts, dec.cycles, dec.n_cycles = list(state.token_texts), list(state.cycles), state.n_cycles
    dec.k, dec.done = state.k, state.done
    if state.rng:
        dec.sampling.generator.set_state(torch.frombuffer(bytearray(state.rng), dtype=torch.uint8))
    if state.last_logits is not None:
        dec.last_logits = state.last_logits.to(dec.target.device)
    if state.last_hidden is not None and dec.wants_hidden:
        dec.last_hidden = state.last_hidden.to(dec.target.device)
    dec.prefill_s, dec.rebuild_s, dec.rebuilds = state.prefill_s, state.rebuild_s, state.rebuilds
    dec.prefill_shared = state.prefill_shared
    dec.elapsed = state.prefill_s + state.decode_s
    if dec.proposer is not None and state.started:
        dec.proposer.set_state(state.proposer)
    if dec.planner is not None:
        dec.planner.set_state(state.planner)
