"""Theory against measurement: Leviathan et al.'s predicted speedup, with the costs measured here.

    S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + v(K)))

- α: the probability that a draft token is accepted, per position (RunTrace.metrics["acceptance_rate"]);
- c: the cost of one draft step over one plain target step, from the run's draft time and the AR run;
- v(K): the cost of a target pass over K+1 tokens over a one-token pass (the paper takes v = 1;
  here it is timed, because on a CPU or a busy GPU it is not 1).

The numerator over (1 − α) is the expected number of tokens a cycle commits. For a tree it is
1 + Σ_d Π_{i≤d} a_i instead, with a_d the trace's acceptance at depth d (a node at that depth on the
accepted path, given the path reached it). Pure arithmetic on traces, except `verify_cost`, which
times target passes through batch_effect.pass_times. No UI libraries here.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Callable

from .batch_effect import REPEATS, pass_times
from .models import LoadedModel
from .trace import RunTrace

K_RANGE = range(1, 17)  # the K axis of the curve: past 16 a small model's verify pass only grows
V_SIZES = (1, 2, 3, 4, 6, 8, 12, 16)  # draft sizes timed for v; others are interpolated
CONTEXT_STEP = 64  # the timed prefix is the run's context rounded up to this, so nearby runs share it

_V_CACHE: dict[tuple, "VerifyCost"] = {}
_V_LOCK = threading.Lock()


# -- the formula ---------------------------------------------------------------------------------
def expected_tokens(alpha: float, k: int) -> float:
    """(1 − α^(K+1)) / (1 − α), written as Σ_{i=0..K} α^i so that α = 1 needs no special case."""
    return sum(alpha ** i for i in range(k + 1))


def expected_tokens_by_depth(acceptance: list[float], k: int) -> float:
    """1 + Σ_{d=1..K} Π_{i≤d} a_i: tokens per cycle from per-depth acceptance (unseen depths add 0)."""
    total, path = 1.0, 1.0
    for a in acceptance[:k]:
        path *= a
        total += path
    return total


def speedup(alpha: float, k: int, c: float, v: float | Callable[[int], float]) -> float:
    """S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + v(K))); `v` is a number or a function of K."""
    cost = k * c + (v(k) if callable(v) else v)
    return expected_tokens(alpha, k) / cost


TIE = 1e-9  # relative: S values this close are a plateau, not a preference


def best_k(curve: list[tuple[int, float]]) -> tuple[int, float]:
    """The (K, S) with the largest S; on a tie (a plateau) the smallest K, which risks less when α drops."""
    top = max(s for _, s in curve)
    return min((point for point in curve if point[1] >= top * (1 - TIE)), key=lambda point: point[0])


@dataclass
class VerifyCost:
    """v(n): a target pass over n+1 tokens over a one-token pass, timed at some n, interpolated between.

    v(0) = 1 by definition. Past the last timed n it grows along the last two points' slope.
    """
    points: dict[int, float]
    step_s: float = 0.0  # seconds of the one-token pass it was measured against

    def __call__(self, n: float) -> float:
        pts = sorted({0: 1.0, **{int(k): float(v) for k, v in self.points.items()}}.items())
        for (n0, v0), (n1, v1) in zip(pts, pts[1:]):
            if n <= n1:
                return v0 + (v1 - v0) * (n - n0) / (n1 - n0)
        if len(pts) < 2:
            return pts[-1][1]
        (n0, v0), (n1, v1) = pts[-2], pts[-1]
        return v1 + max(v1 - v0, 0.0) * (n - n1) / (n1 - n0)


def verify_cost(model: LoadedModel, sizes=V_SIZES, prefix_len: int = CONTEXT_STEP,
                repeats: int = REPEATS) -> VerifyCost:
    """Time target passes of 1 and n+1 tokens after a `prefix_len` cache; cached per model and sizes."""
    sizes = tuple(sorted(set(int(n) for n in sizes)))
    key = (model.name, str(model.device), str(model.dtype), prefix_len, sizes)
    with _V_LOCK:
        if key in _V_CACHE:
            return _V_CACHE[key]
    t = pass_times(model, [1] + [n + 1 for n in sizes], prefix_len=prefix_len, repeats=repeats)
    cost = VerifyCost({n: t[n + 1] / t[1] for n in sizes}, step_s=t[1])
    with _V_LOCK:
        _V_CACHE[key] = cost
    return cost


# -- costs read off the traces --------------------------------------------------------------------
def _spec_cycles(run: RunTrace):
    return [c for c in run.cycles if c.nodes]


def _depth(cycle) -> int:
    """How many draft steps made this cycle's draft: its deepest node (K when nodes were not recorded)."""
    depths = [n.depth for n in cycle.nodes if n is not None]
    return max(depths) if depths else min(cycle.k, len(cycle.nodes))


def is_tree(run: RunTrace) -> bool:
    """True when some cycle drafted more tokens than its depth: siblings were verified together."""
    return any(len(c.nodes) > _depth(c) for c in _spec_cycles(run))


def target_step_s(ar: RunTrace) -> float:
    """Seconds of one plain target step in the AR run: its verify passes are one token each."""
    cycles = [c for c in ar.cycles if c.verify_s > 0]
    if not cycles:
        raise ValueError("The AR baseline has no decoding step to time: give it more than one new token.")
    return sum(c.verify_s for c in cycles) / len(cycles)


def draft_cost(run: RunTrace, ar: RunTrace) -> float:
    """c: the run's drafting seconds per draft step, over the AR run's seconds per target step."""
    spec = _spec_cycles(run)
    steps = sum(_depth(c) for c in spec)
    if not steps:
        return 0.0
    return sum(c.draft_s for c in spec) / steps / target_step_s(ar)


def run_verify_factor(run: RunTrace, ar: RunTrace) -> float | None:
    """The run's own v: mean seconds of its verify passes over the AR run's seconds per step."""
    spec = _spec_cycles(run)
    if not spec:
        return None
    return sum(c.verify_s for c in spec) / len(spec) / target_step_s(ar)


def nodes_up_to(run: RunTrace, depth: int) -> float:
    """Mean draft tokens per cycle at depth ≤ `depth` (the verify size if the tree stopped there)."""
    spec = _spec_cycles(run)
    if not spec:
        return 0.0
    counts = []
    for c in spec:
        recorded = [n.depth for n in c.nodes if n is not None]
        if recorded:
            counts.append(sum(d <= depth for d in recorded))
        else:  # no node depths kept: assume the tree's width is spread evenly over its depth
            counts.append(len(c.nodes) * min(depth, _depth(c)) / max(_depth(c), 1))
    return sum(counts) / len(counts)


# -- the whole comparison ---------------------------------------------------------------------------
@dataclass
class Analysis:
    """One run set against the theory: its measured point, the predicted curve and the best K."""
    kind: str  # "chain" (S(K) as written) or "tree" (tokens per cycle from per-depth acceptance)
    method: str
    k: int  # the run's K (a tree's depth limit)
    alpha: float  # per-position acceptance rate of the run
    acceptance: list[float]  # a_d per depth
    expected_len: float  # expected accepted draft tokens per cycle at the run's K
    c: float
    v_k: float  # timed v at the run's verify size
    v_run: float | None  # the same factor read off the run's own verify passes
    verify_tokens: float  # draft tokens per verify pass in the run (K for a chain)
    predicted: float  # S at the run's K
    measured: float | None  # the run's tokens/s over the AR run's
    overhead_share: float  # of the run's decode time, outside drafting and verifying
    curve: list[tuple[int, float]] = field(default_factory=list)
    best: tuple[int, float] = (1, 0.0)


def _chain_curve(alpha: float, c: float, v: VerifyCost, ks) -> list[tuple[int, float]]:
    return [(k, speedup(alpha, k, c, v)) for k in ks]


def _tree_curve(run: RunTrace, acceptance: list[float], c: float, v: VerifyCost, ks) -> list[tuple[int, float]]:
    return [(k, expected_tokens_by_depth(acceptance, k) / (k * c + v(nodes_up_to(run, k)))) for k in ks]


def analyse(run: RunTrace, ar: RunTrace, v: VerifyCost, ks=K_RANGE) -> Analysis:
    """Measure α (or per-depth acceptance), c and v from the traces and put the run on the curve."""
    if not _spec_cycles(run):
        raise ValueError("This run drafted nothing, so there is no α to measure: pick a run with a proposer.")
    m = run.metrics
    k = int(run.settings.get("k") or max(c.k for c in run.cycles))
    acceptance = list(m.get("acceptance_by_position") or [])
    alpha = float(m.get("acceptance_rate") or 0.0)
    c = draft_cost(run, ar)
    tree = is_tree(run)
    if tree:
        curve = _tree_curve(run, acceptance, c, v, ks)
        verify_tokens = nodes_up_to(run, k)
        expected = expected_tokens_by_depth(acceptance, k) - 1
        predicted = (expected + 1) / (k * c + v(verify_tokens))
    else:
        curve = _chain_curve(alpha, c, v, ks)
        verify_tokens, expected, predicted = float(k), expected_tokens(alpha, k) - 1, speedup(alpha, k, c, v)
    ar_rate = ar.metrics.get("tokens_per_s") or 0.0
    decode_s = m.get("decode_s") or 0.0
    other = decode_s - (m.get("draft_s") or 0.0) - (m.get("verify_s") or 0.0)
    return Analysis(kind="tree" if tree else "chain", method=run.method, k=k, alpha=alpha, acceptance=acceptance,
                    expected_len=expected, c=c, v_k=v(verify_tokens), v_run=run_verify_factor(run, ar),
                    verify_tokens=verify_tokens, predicted=predicted,
                    measured=m["tokens_per_s"] / ar_rate if ar_rate else None,
                    overhead_share=max(other, 0.0) / decode_s if decode_s > 0 else 0.0,
                    curve=curve, best=best_k(curve))


def context_len(run: RunTrace) -> int:
    """The run's mean cache length, rounded up to CONTEXT_STEP, as the prefix for timing v."""
    mean = len(run.prompt_ids) + len(run.token_ids) / 2
    return int(-(-mean // CONTEXT_STEP) * CONTEXT_STEP)


def sizes_for(run: RunTrace) -> tuple[int, ...]:
    """V_SIZES, plus the run's own verify size when a tree makes it larger than those."""
    if not is_tree(run):
        return V_SIZES
    top = round(nodes_up_to(run, 1 << 30))  # the whole tree
    return tuple(sorted(set(V_SIZES) | {n for n in (24, 32, 48, 64, top) if 0 < n <= top}))
