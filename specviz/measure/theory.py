"""Theory against measurement: Leviathan et al.'s predicted speedup, with the costs measured here.

    S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + v(K+1)))

- α: the probability that a draft token is accepted, per position (RunTrace.metrics["acceptance_rate"]);
- c: the cost of one draft call over one plain target step, from the run's draft time and the AR run;
- v(n): the cost of a target pass over n tokens over a one-token pass, so a verify pass of K drafts
  (plus the newest token) costs v(K+1). The paper takes it as 1; here it is the target's cost
  profile (costs.profile: timed once per model, device and dtype, then cached), the same curve
  the planner decides with, because on a CPU or a busy GPU it is not 1.

The numerator over (1 − α) is the expected number of tokens a cycle commits. For a tree it is
1 + Σ_d Π_{i≤d} a_i instead, with a_d the trace's acceptance at depth d (a node at that depth on the
accepted path, given the path reached it). Pure arithmetic on traces and a cost profile; nothing
here times a model. No UI libraries here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from specviz.decoding.trace import RunTrace

K_RANGE = range(1, 17)  # the K axis of the curve: past 16 a small model's verify pass only grows
PassCost = Callable[[float], float]  # v(n), n = tokens in the pass, v(1) = 1: a costs.CostProfile


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
    """S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + v_K)), with v_K the cost of a verify pass of K drafts in
    plain steps: a number, or a function of K (`analyse` passes K ↦ v(K+1) of a cost profile)."""
    cost = k * c + (v(k) if callable(v) else v)
    return expected_tokens(alpha, k) / cost


TIE = 1e-9  # relative: S values this close are a plateau, not a preference


def best_k(curve: list[tuple[int, float]]) -> tuple[int, float]:
    """The (K, S) with the largest S; on a tie (a plateau) the smallest K, which risks less when α drops."""
    top = max(s for _, s in curve)
    return min((point for point in curve if point[1] >= top * (1 - TIE)), key=lambda point: point[0])


# -- costs read off the traces --------------------------------------------------------------------
def _spec_cycles(run: RunTrace):
    return [c for c in run.cycles if c.nodes]


def _depth(cycle) -> int:
    """How many draft calls made this cycle's draft: its deepest node (K when nodes were not recorded)."""
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
    """c: the run's drafting seconds per draft call, over the AR run's seconds per target step."""
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
    v_k: float  # v(n) of the run's verify pass, n = its draft tokens + 1, from the cost profile
    v_run: float | None  # the same factor read off the run's own verify passes
    verify_tokens: float  # draft tokens per verify pass in the run (K for a chain)
    predicted: float  # S at the run's K
    measured: float | None  # the run's tokens/s over the AR run's
    overhead_share: float  # of the run's decode time, outside drafting and verifying
    curve: list[tuple[int, float]] = field(default_factory=list)
    best: tuple[int, float] = (1, 0.0)


def _chain_curve(alpha: float, c: float, v: PassCost, ks) -> list[tuple[int, float]]:
    return [(k, speedup(alpha, k, c, lambda drafts: v(drafts + 1))) for k in ks]


def _tree_curve(run: RunTrace, acceptance: list[float], c: float, v: PassCost, ks) -> list[tuple[int, float]]:
    return [(k, expected_tokens_by_depth(acceptance, k) / (k * c + v(nodes_up_to(run, k) + 1))) for k in ks]


def analyse(run: RunTrace, ar: RunTrace, v: PassCost, ks=K_RANGE) -> Analysis:
    """Measure α (or per-depth acceptance) and c from the traces and put the run on the curve.

    `v` is the target's cost profile, v(n) for a pass over n tokens (costs.profile, or what
    planner.verify_cost gives): a verify pass of K drafts costs v(K+1), a tree's v(its nodes + 1).
    """
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
    else:
        curve = _chain_curve(alpha, c, v, ks)
        verify_tokens, expected = float(k), expected_tokens(alpha, k) - 1
    v_k = v(verify_tokens + 1)  # the pass holds the drafts and the newest committed token
    predicted = (expected + 1) / (k * c + v_k)
    ar_rate = ar.metrics.get("tokens_per_s") or 0.0
    decode_s = m.get("decode_s") or 0.0
    other = decode_s - (m.get("draft_s") or 0.0) - (m.get("verify_s") or 0.0)
    return Analysis(kind="tree" if tree else "chain", method=run.method, k=k, alpha=alpha, acceptance=acceptance,
                    expected_len=expected, c=c, v_k=v_k, v_run=run_verify_factor(run, ar),
                    verify_tokens=verify_tokens, predicted=predicted,
                    measured=m["tokens_per_s"] / ar_rate if ar_rate else None,
                    overhead_share=max(other, 0.0) / decode_s if decode_s > 0 else 0.0,
                    curve=curve, best=best_k(curve))
