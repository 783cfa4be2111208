"""Speculative sampling on a toy vocabulary: the rule of verify.py, vectorised for Monte-Carlo.

Names follow the papers (see verify.py): p is the target distribution, q the draft's, x a
drafted token, r ~ U(0, 1) its draw, β = Σ min(p, q) the chance that one draft is accepted.
The correct rule is verify.py's own `accept_prob` and `residual`, looked up at call time, so a
change to either changes the toy too; two deliberately broken rules show what goes wrong without
them. No model, no UI: numpy and torch only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from specviz.decoding import verify

TOKENS = ("the", "a", "cat", "dog", "sat", "ran")  # six made-up tokens: few enough to read every bar
MAX_SAMPLES = 100_000  # a Monte-Carlo of this size is quick and resolves TV ≈ 0.01

# Preset name → (p, q) as weights over TOKENS (normalised on use).
PRESETS = {
    "identical": ((30, 25, 20, 12, 8, 5), (30, 25, 20, 12, 8, 5)),
    "close": ((30, 25, 20, 12, 8, 5), (24, 30, 16, 15, 10, 5)),
    "disjoint": ((40, 35, 25, 0, 0, 0), (0, 0, 0, 40, 35, 25)),
    "q too confident": ((30, 25, 20, 12, 8, 5), (80, 8, 5, 3, 2, 2)),
}

CORRECT = "correct: resample from the residual"
RESAMPLE_P = "broken: resample from p"
ACCEPT_ALL = "broken: accept every draft"
RULES = {
    CORRECT: "Accept x with probability min(1, p(x)/q(x)); on rejection draw from norm(max(0, p − q)).",
    RESAMPLE_P: "Accept as above, but on rejection draw from p itself: tokens q already "
                "over-supplies get drawn twice, so they end up too frequent.",
    ACCEPT_ALL: "Keep every draft without checking it: the output is simply q.",
}
FAILURE_RATE = 1e-6  # chance that an exact sampler exceeds `tv_threshold`: a test never flakes
MIN_EXPECTED = 5  # Pearson's rule of thumb: rarer cells are pooled, so the χ² approximation holds


def normalise(weights, name: str = "weights") -> np.ndarray:
    """Non-negative weights → a probability vector (float64); clear errors for unusable input."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)):
        raise ValueError(f"{name} must be a list of finite numbers")
    if np.any(w < 0):
        raise ValueError(f"{name} cannot be negative")
    if w.sum() <= 0:
        raise ValueError(f"{name} must not all be zero: give at least one token some weight")
    return w / w.sum()


def accept_probs(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """min(1, p(x)/q(x)) per token, by verify.accept_prob itself (1 where q(x) = 0)."""
    return np.array([verify.accept_prob(float(px), float(qx)) for px, qx in zip(p, q)])


def residual_of(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """norm(max(0, p − q)), computed by verify.residual itself (p when p = q)."""
    out = verify.residual(torch.as_tensor(p, dtype=torch.float64), torch.as_tensor(q, dtype=torch.float64), 0)
    out = out.numpy()
    return out / out.sum()


def beta(p: np.ndarray, q: np.ndarray) -> float:
    """β = Σ min(p, q): the probability that one draft x ~ q is accepted."""
    return float(np.minimum(p, q).sum())


def tv(a: np.ndarray, b: np.ndarray) -> float:
    """Total-variation distance ½ Σ |a − b|."""
    return float(0.5 * np.abs(np.asarray(a) - np.asarray(b)).sum())


def step(p: np.ndarray, q: np.ndarray, x: int, r: float, rule: str = CORRECT) -> tuple[bool, np.ndarray | None]:
    """One draft x with draw r: (accepted, the distribution the replacement is drawn from)."""
    if rule == ACCEPT_ALL:
        return True, None
    # accept x with probability min(1, p(x)/q(x))
    if r < accept_probs(p, q)[x]:
        return True, None
    # rejected: the replacement comes from norm(max(0, p − q)); the broken twin uses p
    return False, residual_of(p, q) if rule == CORRECT else p


def output_distribution(p: np.ndarray, q: np.ndarray, rule: str = CORRECT) -> np.ndarray:
    """Exact distribution of the output token: accepted drafts q·min(1, p/q) = min(p, q),
    plus the rejected mass 1 − β spread over the replacement distribution."""
    if rule == ACCEPT_ALL:
        return q.copy()
    kept = q * accept_probs(p, q)
    replacement = residual_of(p, q) if rule == CORRECT else p
    return kept + (1.0 - kept.sum()) * replacement


@dataclass
class MonteCarlo:
    """N output tokens drawn through a rule: counts per token and how many drafts were kept."""
    counts: np.ndarray
    accepted: int
    rule: str

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def empirical(self) -> np.ndarray:
        return self.counts / max(self.n, 1)


def monte_carlo(p: np.ndarray, q: np.ndarray, n: int, seed: int = 0, rule: str = CORRECT) -> MonteCarlo:
    """Draw n drafts x ~ q and put each through `rule`, all at once; one seeded generator."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}: choose one of {', '.join(RULES)}")
    if not 1 <= int(n) <= MAX_SAMPLES:
        raise ValueError(f"the number of samples must be from 1 to {MAX_SAMPLES}, got {n}")
    rng = np.random.default_rng(int(seed))
    k = len(p)
    x = rng.choice(k, size=int(n), p=q)
    r = rng.random(int(n))
    if rule == ACCEPT_ALL:
        ok = np.ones(int(n), dtype=bool)
    else:
        ok = r < accept_probs(p, q)[x]  # accept x with probability min(1, p(x)/q(x))
    out = x.copy()
    rejected = int((~ok).sum())
    if rejected:
        replacement = residual_of(p, q) if rule == CORRECT else p
        out[~ok] = rng.choice(k, size=rejected, p=replacement)
    return MonteCarlo(np.bincount(out, minlength=k), int(ok.sum()), rule)


def tv_threshold(n: int, k: int = len(TOKENS), failure_rate: float = FAILURE_RATE) -> float:
    """A TV distance an exact sampler stays under at n samples, except with `failure_rate`.

    E[TV(p̂, p)] ≤ ½ Σ √(p_i / n) ≤ ½ √(k / n) (Cauchy–Schwarz); one sample moves TV by at
    most 1/n, so P(TV > E + t) ≤ exp(−2 n t²) (McDiarmid), which sets t.
    """
    return 0.5 * math.sqrt(k / n) + math.sqrt(math.log(1 / failure_rate) / (2 * n))


def chi_square_p_value(counts, p) -> float:
    """Pearson's goodness-of-fit p-value of the counts against p (arrays or tensors, any shape).

    Cells expected fewer than MIN_EXPECTED times are pooled into one; a count on a token with
    p = 0 gives 0, since no sampler that follows p can produce it.
    """
    counts = np.asarray(counts, dtype=np.float64).ravel()
    p = np.asarray(p, dtype=np.float64).ravel()
    if counts[p <= 0].sum() > 0:
        return 0.0
    n = counts.sum()
    expected = n * p / p.sum()
    big = expected >= MIN_EXPECTED
    obs, exp = list(counts[big]), list(expected[big])
    if expected[~big].sum() > 0:
        obs.append(counts[~big].sum())
        exp.append(expected[~big].sum())
    obs, exp = np.array(obs), np.array(exp)
    dof = len(obs) - 1
    if n == 0 or dof < 1:
        return 1.0
    stat = float(((obs - exp) ** 2 / exp).sum())
    # the chi-square survival function with dof degrees of freedom is Q(dof/2, stat/2)
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


@dataclass
class ToyStats:
    """Everything the Learn tab shows about one (p, q) pair."""
    p: np.ndarray
    q: np.ndarray
    accept: np.ndarray  # min(1, p/q) per token
    residual: np.ndarray  # norm(max(0, p − q))
    beta: float
    tv: float


def stats(p: np.ndarray, q: np.ndarray) -> ToyStats:
    return ToyStats(p, q, accept_probs(p, q), residual_of(p, q), beta(p, q), tv(p, q))


def preset(name: str) -> tuple[np.ndarray, np.ndarray]:
    """The (p, q) of a preset, normalised."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}: choose one of {', '.join(PRESETS)}")
    wp, wq = PRESETS[name]
    return normalise(wp, "p"), normalise(wq, "q")
