"""Rounds: the requests that wait at the same moment, from any number of threads, handled by one call.

The first thread to arrive when nothing runs handles its own request at once (alone: it pays
nothing extra). Requests that arrive while a round runs wait; when it ends, one of them handles
all of them in the next round. Nobody waits for a round that is not needed, except when `gather`
asks for it (tests and studies that need rounds shared for certain).

Three users: the target's verify passes (decoding/targets.py), the draft head's calls and a draft
model's calls (proposers/). Each gives a `handle(slots)` that sets every slot's answer (or error)
and returns how many requests it answered together, which the counters keep.
"""
from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any, Callable

RECENT_S = 2.0  # a round that ended this recently still says how many runs are stepping together

_ALL: "weakref.WeakSet[Rounds]" = weakref.WeakSet()  # every Rounds of this process, for the fork hook


class Slot:
    """One request in a round; `handle` sets its answer, or its error for the caller to raise."""

    def __init__(self, request: Any):
        self.request = request
        self.answer: Any = None
        self.error: BaseException | None = None
        self.done = False

    def settle(self, answer: Any = None, error: BaseException | None = None) -> None:
        self.answer, self.error, self.done = answer, error, True


class Rounds:
    """Leader/follower batching of requests into rounds (see the module docstring)."""

    def __init__(self, handle: Callable[[list[Slot]], int], size: Callable[[Any], int] = lambda r: 1,
                 max_size: int = 64, gather: int = 1, gather_s: float = 0.0):
        """`size` weighs a request and a round holds at most `max_size` of weight (one request
        always fits); `gather` > 1 makes a round wait up to `gather_s` for that many requests."""
        self.handle, self.size, self.max_size = handle, size, max_size
        self.gather, self.gather_s = gather, gather_s
        self._fresh()
        _ALL.add(self)
        self.passes = self.shared_passes = 0  # rounds run, and rounds that answered > 1 request together
        self.most_shared = 0
        self._last = (0, 0.0)  # (requests the latest round answered, when it ended)

    def _fresh(self) -> None:
        self._cond = threading.Condition()
        self._waiting: list[Slot] = []
        self._busy = False

    def submit(self, request: Any) -> Any:
        """The answer to `request`, handled alone or in a round with others; raises its error."""
        slot, batch = Slot(request), None
        with self._cond:
            self._waiting.append(slot)
            if self.gather > 1:
                self._cond.notify_all()  # a thread gathering requests counts this one
            deadline = time.monotonic() + self.gather_s
            while not slot.done and (self._busy or self._gathering(deadline)):
                self._cond.wait(timeout=max(deadline - time.monotonic(), 0.001) if not self._busy else None)
            if not slot.done:  # nothing running: this thread runs the next round
                batch, self._busy = self._take(slot), True
        if batch is not None:
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        if slot.error is not None:
            raise slot.error
        return slot.answer

    def expected(self, recent_s: float = RECENT_S) -> int:
        """The requests the next round will likely hold: those waiting now plus one more, or as many
        as the latest round answered if it ended within `recent_s` (a crowd keeps coming back)."""
        with self._cond:
            waiting = len(self._waiting) + 1
        answered, ended = self._last
        return max(waiting, answered if time.monotonic() - ended <= recent_s else 1)

    def leave(self) -> None:
        """One of the threads a gather waits for has finished: from now on, wait for one fewer."""
        with self._cond:
            self.gather = max(1, self.gather - 1)
            self._cond.notify_all()

    def _gathering(self, deadline: float) -> bool:
        """Still waiting for more requests before a round (only when `gather` asks for it)."""
        if self.gather <= 1:
            return False
        if len(self._waiting) >= self.gather or time.monotonic() >= deadline:
            self._cond.notify_all()  # the waiting threads re-check: one of them runs the round
            return False
        return True

    def _take(self, own: Slot) -> list[Slot]:
        """The waiting requests that fit one round, oldest first, this thread's own always among them."""
        batch, weight = [own], self.size(own.request)
        for slot in self._waiting:
            if slot is not own and weight + self.size(slot.request) <= self.max_size:
                batch.append(slot)
                weight += self.size(slot.request)
        self._waiting = [s for s in self._waiting if s not in batch]
        return batch

    def _run(self, batch: list[Slot]) -> None:
        try:
            answered = self.handle(batch)
        except BaseException as e:  # noqa: BLE001 -- every waiting thread gets it, not only this one
            for slot in batch:
                if not slot.done:
                    slot.settle(error=e)
            raise
        self.passes += 1
        self._last = (answered, time.monotonic())
        if answered > 1:
            self.shared_passes += 1
        self.most_shared = max(self.most_shared, answered)
        for slot in batch:
            if not slot.done:
                slot.settle(error=RuntimeError("a batched round left this request unanswered"))


def _fresh_in_child() -> None:
    """A forked GPU worker starts with only the calling thread: no round runs there and nobody
    waits, so every Rounds gets a new lock and an empty queue (a held one would hang for ever)."""
    for rounds in list(_ALL):
        rounds._fresh()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_in_child)
