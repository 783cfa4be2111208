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
from dataclasses import dataclass
from typing import Any

import torch

PREFILL_CAPACITY = 8  # prompts kept per process: the page's examples and a few more (MBs each)


@dataclass
class Prefill:
    """One prompt's prefill: its cache and the last row's logits and hidden state (or None)."""
    cache: Any
    logits: torch.Tensor
    hidden: torch.Tensor | None


class SharedPrefills:
    """Prefills by (model, prompt ids), least recently used dropped first. Entries hold a weak
    reference to their model, so a model freed (and another loaded at its address) never hits."""

    def __init__(self, capacity: int = PREFILL_CAPACITY):
        self.capacity = capacity
        self._items: OrderedDict[tuple, tuple[weakref.ref, Prefill]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0

    def take(self, model: torch.nn.Module, ids: list[int], need_hidden: bool) -> Prefill | None:
        """A copy of the prefill of `ids` on `model`, or None (then the caller prefills and puts)."""
        key = (id(model), tuple(ids))
        with self._lock:
            found = self._items.get(key)
            if found is None or found[0]() is not model or (need_hidden and found[1].hidden is None):
                return None
            self._items.move_to_end(key)
            self.hits += 1
            kept = found[1]
        return Prefill(copy.deepcopy(kept.cache), kept.logits.clone(),
                       None if kept.hidden is None else kept.hidden.clone())

    def put(self, model: torch.nn.Module, ids: list[int], prefill: Prefill) -> None:
        """Keep a copy of `prefill` (the caller goes on mutating its own cache)."""
        kept = Prefill(copy.deepcopy(prefill.cache), prefill.logits.detach().clone(),
                       None if prefill.hidden is None else prefill.hidden.detach().clone())
        with self._lock:
            self._items[(id(model), tuple(ids))] = (weakref.ref(model), kept)
            self._items.move_to_end((id(model), tuple(ids)))
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.hits = 0

    def __len__(self) -> int:
        return len(self._items)


PREFILLS = SharedPrefills()


def _fresh_lock_in_child() -> None:
    """A forked GPU worker starts with only the calling thread: it gets a lock nobody holds."""
    PREFILLS._lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock_in_child)
