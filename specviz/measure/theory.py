"""Leviathan et al.'s predicted speedup, as the paper writes it, and the costs read off a run's trace,
in the words of decoding/speed.py:

    S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + v(K+1)))

with α the acceptance rate, c a draft call in one-token target passes and v(n) a pass over n tokens
(1 in the paper; here the target's cost profile, costs.profile, the planner's curve).

The rest of the theory builds on these: measure/speed_model.py predicts S for every K from a run's
per-depth acceptance, the drafts it sent and the machine's costs (the Theory tab's curve), and
measure/waterfall.py walks from the paper's S(K) to the measured speedup, one replacement a bar,
and puts a run against both (`analyse`).

Pure arithmetic on traces and a cost profile; nothing here times a model. No UI libraries here.
"""
from __future__ import annotations

from typing import Callable

from specviz.decoding import speed
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
def spec_cycles(run: RunTrace):
    return [c for c in run.cycles if c.nodes]


def is_tree(run: RunTrace) -> bool:
    """True when some cycle drafted more tokens than its depth: siblings were verified together."""
    return any(len(c.nodes) > speed.draft_calls(c) for c in spec_cycles(run))


def target_pass_s(ar: RunTrace) -> float:
    """Seconds of one plain target step in the AR run: its verify passes are one token each."""
    cycles = [c for c in ar.cycles if c.verify_s > 0]
    if not cycles:
        raise ValueError("The AR baseline has no decoding step to time: give it more than one new token.")
    return sum(c.verify_s for c in cycles) / len(cycles)


def draft_cost(run: RunTrace, ar: RunTrace) -> float:
    """c: the run's drafting seconds per draft call, over the AR run's seconds per target step."""
    return speed.draft_call_cost(run, target_pass_s(ar)) if spec_cycles(run) else 0.0


def run_verify_factor(run: RunTrace, ar: RunTrace) -> float | None:
    """The run's own v: mean seconds of its verify passes over the AR run's seconds per step."""
    spec = spec_cycles(run)
    if not spec:
        return None
    return sum(c.verify_s for c in spec) / len(spec) / target_pass_s(ar)


def nodes_up_to(run: RunTrace, depth: int) -> float:
    """Mean draft tokens per cycle at depth ≤ `depth` (the verify size if the tree stopped there)."""
    spec = spec_cycles(run)
    if not spec:
        return 0.0
    counts = []
    for c in spec:
        recorded = [n.depth for n in c.nodes if n is not None]
        if recorded:
            counts.append(sum(d <= depth for d in recorded))
        else:  # no node depths kept: assume the tree's width is spread evenly over its depth
            calls = speed.draft_calls(c)
            counts.append(len(c.nodes) * min(depth, calls) / max(calls, 1))
    return sum(counts) / len(counts)

