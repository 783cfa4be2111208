"""Shared prefills: runs that start on the same prompt ids with the same model reuse one prefill.

A class pressing Step on one of the page's example prompts would otherwise prefill it once per
student. A prefill is a pure function of the weights and the ids, so its result (the KV cache, the
logits the first new token is chosen from, and the target's hidden state there) is kept in this
process, read-only, and every run that starts on those ids takes its own copy: the run's tokens
and draws are exactly those of its own prefill, and nothing it does later reaches the copy kept.
"""
from __future__ import annotations

import copy
import os
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch

PREFILL_CAPACITY = 8  # prompts kept per process: the page's examples and a few more (MBs each)


@dataclass
class Prefill:
    """One prompt's prefill: its cache and the last row's logits and hidden state (or None)."""
    cache: Any
    logits: torch.Tensor
    hidden: torch.Tensor | None
    # the first token's distribution by (temperature, top_p), shared by the kept prefill and every
    # copy of it: a class at T 0.7 computes the nucleus over the vocabulary once, not once a student
    first_probs: dict = field(default_factory=dict, repr=False, compare=False)

    def first_token(self, sampling) -> int:
        """The run's first new token, as `sampling.pick(self.logits)` gives it: the same
        distribution (computed once per settings, read-only) and the run's own draw from it."""
        if sampling.greedy:
            return sampling.pick(self.logits)
        key = (float(sampling.temperature), float(sampling.top_p))
        probs = self.first_probs.get(key)
        if probs is None:
            probs = self.first_probs.setdefault(key, sampling.probs(self.logits))
        return sampling.draw(probs)


class SharedPrefills:
    """Prefills by (model, prompt ids), least recently used dropped first. Entries hold a weak
    reference to their model, so a model freed (and another loaded at its address) never hits."""

    def __init__(self, capacity: int = PREFILL_CAPACITY, wait_s: float = 60.0):
        self.capacity, self.wait_s = capacity, wait_s
        self._items: OrderedDict[tuple, tuple[weakref.ref, Prefill]] = OrderedDict()
        self._lock = threading.Lock()
        # prefills being computed: a class starting together computes one, the others wait for it
        self._pending: dict[tuple, threading.Event] = {}
        self.hits = 0

    def take(self, model: torch.nn.Module, ids: list[int], need_hidden: bool) -> Prefill | None:
        """A copy of the prefill of `ids` on `model`, or None: then the caller prefills and must
        `put` it (or `release` on failure). One kept without a hidden state does not serve a
        caller that needs one. While one caller computes
        a prefill, the others asking for it wait for that one (up to `wait_s`) instead of computing it again."""
        key = (id(model), tuple(ids))
        while True:
            with self._lock:
                found = self._items.get(key)
                if found is not None and found[0]() is model and (not need_hidden or found[1].hidden is not None):
                    self._items.move_to_end(key)
                    self.hits += 1
                    kept = found[1]
                    break
                event = self._pending.get(key)
                if event is None:  # nobody computes it: this caller does
                    self._pending[key] = threading.Event()
                    return None
            if not event.wait(self.wait_s):
                return None  # the one computing it is slow: compute it here too
        return Prefill(_copy(kept.cache), kept.logits.clone(),
                       None if kept.hidden is None else kept.hidden.clone(), kept.first_probs)

    def put(self, model: torch.nn.Module, ids: list[int], prefill: Prefill) -> None:
        """Keep a copy of `prefill` (the caller goes on mutating its own cache); wake the waiters."""
        kept = Prefill(_copy(prefill.cache), prefill.logits.detach().clone(),
                       None if prefill.hidden is None else prefill.hidden.detach().clone(), prefill.first_probs)
        key = (id(model), tuple(ids))
        with self._lock:
            self._items[key] = (weakref.ref(model), kept)
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        self.release(model, ids)

    def release(self, model: torch.nn.Module, ids: list[int]) -> None:
        """The prefill this caller took on is done or failed: whoever waits for it looks again."""
        with self._lock:
            event = self._pending.pop((id(model), tuple(ids)), None)
        if event is not None:
            event.set()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            pending, self._pending = list(self._pending.values()), {}
            self.hits = 0
        for event in pending:
            event.set()

    def __len__(self) -> int:
        return len(self._items)


def _copy(cache):
    """A DynamicCache of ours is copied layer by layer; any other cache object, deeply."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    from specviz.passes.kvcache import GrowingCache, GrowingLayer, copy_cache

    plain = type(cache) in (DynamicCache, GrowingCache) and all(type(layer) in (DynamicLayer, GrowingLayer)
                                                                for layer in cache.layers)
    return copy_cache(cache) if plain else copy.deepcopy(cache)


PREFILLS = SharedPrefills()


def _fresh_lock_in_child() -> None:
    """A forked GPU worker starts with only the calling thread: it gets a lock nobody holds."""
    PREFILLS._lock = threading.Lock()
    PREFILLS._pending = {}


os.register_at_fork(after_in_child=_fresh_lock_in_child)
