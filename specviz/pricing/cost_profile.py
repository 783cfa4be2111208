"""A target pass's cost as plain data: `CostProfile`, v(n) for a pass over n tokens in units of a
one-token pass, and `as_planned`, the reading the planner decides with.

No torch and no transformers here, so the drawing layer can take a profile as data. costs.py
measures profiles; decoding/planner.py and measure/theory.py read them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable

PROFILE_MIN_PARAMS = 10_000_000  # below this a model is not timed (the tests' tiny ones): priors stand in
OLD_NAMES = {"step_s": "pass_s"}  # files written before 2026-12-06 called the one-token pass a "step"


def renamed(d: dict) -> dict:
    """A stored profile, cost or batch effect with today's keys (an old key yields to a new one)."""
    return {OLD_NAMES.get(k, k): v for k, v in d.items() if OLD_NAMES.get(k) not in d}


def interpolate(v: dict[int, float], n: float) -> float:
    """v(n) from measured sizes: linear between them, and along the last segment past the largest."""
    pts = sorted(v.items())
    if n <= pts[0][0]:
        return pts[0][1]
    for (n0, v0), (n1, v1) in zip(pts, pts[1:]):
        if n <= n1:
            return v0 + (v1 - v0) * (n - n0) / (n1 - n0)
    (n0, v0), (n1, v1) = pts[-2], pts[-1]
    return v1 + max(v1 - v0, 0.0) * (n - n1) / (n1 - n0)


@dataclass
class CostProfile:
    """v(n) of one model on one device and dtype; `pass_s` is the one-token pass it is relative to."""
    model: str
    device: str
    dtype: str
    prefix_len: int
    pass_s: float
    v: dict[int, float]
    hardware: str = ""
    speedups: list[str] = field(default_factory=list)
    measured_at: str = ""
    measure_s: float = 0.0  # seconds spent timing passes
    cached: bool = field(default=False, compare=False)  # True when read back rather than measured now

    def __call__(self, n: float) -> float:
        """v(n), linear between measured sizes and along the last segment past the largest."""
        return interpolate(self.v, n)

    def cost_s(self, n: float) -> float:
        """Seconds of a pass over n tokens."""
        return self.pass_s * self(n)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("cached")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CostProfile | None":
        try:
            d = {k: v for k, v in renamed(d).items() if k in cls.__dataclass_fields__ and k != "cached"}
            d["v"] = {int(n): float(x) for n, x in d["v"].items()}  # JSON keys are strings
            return cls(**d, cached=True)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def as_planned(v: Callable[[float], float], n_max: int) -> list[float]:
    """v(1), …, v(n_max) as the planner reads them: v(1) = 1 by definition, no pass below it, and
    no pass dearer than a larger one. Noise on a shared machine only ever adds time, and a pass
    over more tokens costs at least as much as one over fewer, so each measured v(m) is an upper
    bound on every smaller pass's cost: v(n) reads as the least of them, over every n' ≥ n up to
    the largest measured size (or n_max, if larger). One slow timing therefore cannot make the
    planner take every larger pass as dear (a running maximum from the left would)."""
    top = max(getattr(v, "v", None) or {n_max: 0})
    horizon = max(n_max, top)
    raw = [float(v(n)) for n in range(1, horizon + 1)]
    out, least = [0.0] * horizon, float("inf")
    for i in range(horizon - 1, -1, -1):
        least = min(least, raw[i])
        out[i] = max(1.0, least)
    out[0] = 1.0
    return out[:n_max]
