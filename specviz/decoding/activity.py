"""Which cycles ran alone: a count of the cycles running in this process at each moment.

Every Decoder cycle is a span here. A span ends knowing the most other cycles that ran beside it
at any moment, so a timing can say whether other runs of this process ran beside it, and how
many, rather than presenting time inflated by other people's work as a method's speed.
"""
from __future__ import annotations

import threading


class Span:
    __slots__ = ("concurrent",)

    def __init__(self, concurrent: int):
        self.concurrent = concurrent  # the most other spans open at any moment while this one was


class Activity:
    def __init__(self):
        self._lock = threading.Lock()
        self._open: set[Span] = set()

    def begin(self) -> Span:
        with self._lock:
            span = Span(len(self._open))
            for other in self._open:
                other.concurrent = max(other.concurrent, len(self._open))
            self._open.add(span)
            return span

    def busy(self) -> bool:
        """Whether some cycle is running in this process now."""
        with self._lock:
            return bool(self._open)

    def end(self, span: Span) -> int:
        """Close `span`; the most other spans it ran beside."""
        with self._lock:
            self._open.discard(span)
            return span.concurrent


ACTIVITY = Activity()  # every Decoder in this process (on ZeroGPU: in this worker)
