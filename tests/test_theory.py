"""Theory against measurement: the S(K) formula, its best K, the measured costs, the batch effect."""
from __future__ import annotations

import itertools
import json
import math

import pytest

import specviz
from specviz import batch_effect, theory
from specviz.trace import CycleTrace, NodeTrace, RunTrace
from tests.tiny import FixedTreeProposer, pair

PROMPT = [4, 8, 15, 16, 23, 30, 2, 11, 6, 4, 8, 15]


def closed_form(alpha, k, c, v):
    """S(K) exactly as the issue writes it, independent of theory.py's code."""
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + v(k)))


@pytest.mark.parametrize("alpha,k,c,v,expected", [
    (0.5, 2, 0.1, 1.2, 1.25),  # (1 − 0.125) / (0.5 · (0.2 + 1.2))
    (0.8, 4, 0.05, 1.5, 3.3616 / 1.7),  # (1 − 0.32768) / 0.2 = 3.3616 tokens per cycle
    (0.0, 3, 0.1, 1.0, 1 / 1.3),  # nothing accepted: one token for a whole cycle's cost
    (1.0, 3, 0.0, 2.0, 2.0),  # a perfect free draft: K+1 tokens for a pass that costs 2 steps
])
def test_speedup_matches_hand_computed_values(alpha, k, c, v, expected):
    """S(K) equals values worked out by hand, including α = 0 and the α = 1 limit."""
    assert theory.speedup(alpha, k, c, v) == pytest.approx(expected, rel=1e-12)


def test_verify_cost_interpolates_between_timed_points():
    """v(0) = 1, linear between timed points, and extended along the last slope past them."""
    v = theory.VerifyCost({2: 1.4, 4: 1.8})
    assert [v(0), v(1), v(2), v(3), v(4), v(6)] == pytest.approx([1.0, 1.2, 1.4, 1.6, 1.8, 2.2])


def test_best_k_equals_brute_force_search():
    """best_k picks the K with the largest closed-form S(K) (the smallest K on a plateau), over a grid
    of α, c and v shapes."""
    shapes = [lambda k: 1.0, lambda k: 1 + 0.1 * k, lambda k: 1 + 0.4 * k, lambda k: 1 + 0.02 * k * k]
    for alpha, c, v in itertools.product([0.1, 0.4, 0.6, 0.8, 0.95], [0.0, 0.02, 0.1, 0.5], shapes):
        curve = [(k, theory.speedup(alpha, k, c, v)) for k in theory.K_RANGE]
        values = {k: closed_form(alpha, k, c, v) for k in theory.K_RANGE}
        top = max(values.values())
        brute = min(k for k, s in values.items() if s >= top * (1 - 1e-9))  # smallest K on a plateau
        assert theory.best_k(curve) == (brute, pytest.approx(values[brute]))


def test_tree_tokens_follow_per_depth_acceptance():
    """Tokens per cycle of a tree are 1 + Σ Π a_i; with a constant a they equal the chain formula."""
    assert theory.expected_tokens_by_depth([0.8, 0.5], 2) == pytest.approx(1 + 0.8 + 0.4)
    assert theory.expected_tokens_by_depth([0.8, 0.5], 5) == pytest.approx(2.2)  # unseen depths add nothing
    chain = (1 - 0.6 ** 8) / (1 - 0.6)  # the chain's (1 − α^(K+1)) / (1 − α) at α = 0.6, K = 7
    assert theory.expected_tokens_by_depth([0.6] * 7, 7) == pytest.approx(chain)
    assert theory.expected_tokens(0.6, 7) == pytest.approx(chain)


def _cycle(index: int, depths: list[int], draft_s: float = 0.0, verify_s: float = 0.0) -> CycleTrace:
    nodes = [NodeTrace(index=i, token=0, text="", parent=-1, depth=d) for i, d in enumerate(depths)]
    return CycleTrace(index=index, k=max(depths, default=1), nodes=nodes, draft_s=draft_s, verify_s=verify_s)


def test_draft_cost_is_seconds_per_draft_step_over_a_target_step():
    """c = drafting seconds / draft steps / the AR run's seconds per step, on traces with times set
    by hand: chains of 3 (0.6 s over 6 steps) against 0.05 s per target step give c = 2; a tree
    counts its depth as its steps, not its nodes; cycles that drafted nothing are left out."""
    ar = RunTrace("ar", cycles=[_cycle(i, [], verify_s=0.05) for i in range(4)])
    chain = RunTrace("draft", cycles=[_cycle(0, [1, 2, 3], 0.3), _cycle(1, [1, 2, 3], 0.3), _cycle(2, [], 0.2)])
    assert theory.draft_cost(chain, ar) == pytest.approx(2.0)
    tree = RunTrace("draft", cycles=[_cycle(0, [1, 1, 2, 2], 0.2)])  # two draft steps, four nodes
    assert theory.draft_cost(tree, ar) == pytest.approx(2.0)


def test_verify_cost_is_a_pass_over_a_one_token_pass(monkeypatch):
    """v(n) is the time of a pass over n + 1 tokens (the newest plus n drafts) divided by a 1-token
    pass, and step_s is the 1-token time (pass times set by hand, nothing timed)."""
    times = {1: 0.02, 2: 0.025, 3: 0.03, 5: 0.04}
    monkeypatch.setattr(theory, "pass_times", lambda model, sizes, **kw: {n: times[n] for n in sizes})
    monkeypatch.setattr(theory, "_V_CACHE", {})
    v = theory.verify_cost(pair()[0], sizes=(1, 2, 4), prefix_len=16, repeats=2)
    assert v.step_s == 0.02 and v.points == pytest.approx({1: 1.25, 2: 1.5, 4: 2.0})


def test_chain_run_is_analysed_at_its_own_alpha_and_costs():
    """A draft-model run is analysed as a chain at its K, α and c, and its predicted speedup is
    S(K) at those values."""
    target, draft = pair(noise=0.05)
    # plan=False: the planner would rightly not draft with a draft as costly as the target
    run = specviz.generate(target, PROMPT, method="draft", draft=draft, k=3, max_new_tokens=16, chat=False,
                           plan=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    v = theory.VerifyCost({1: 1.1, 4: 1.4}, step_s=0.01)
    a = theory.analyse(run, ar, v)
    assert a.kind == "chain" and a.k == 3 and a.c == theory.draft_cost(run, ar)
    assert a.alpha == run.metrics["acceptance_rate"] and a.measured > 0
    assert [k for k, _ in a.curve] == list(theory.K_RANGE) and a.best in a.curve
    assert a.predicted == pytest.approx(closed_form(a.alpha, 3, a.c, v))


def test_tree_analysis_uses_per_depth_acceptance():
    """A tree run is analysed as a tree: E[accepted] from per-depth acceptance, verify size above K."""
    target, _ = pair()
    proposer = FixedTreeProposer(depth=3, branching=2, vocab=32, seed=1)
    run = specviz.generate(target, PROMPT, method=proposer, k=3, max_new_tokens=16, chat=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    a = theory.analyse(run, ar, theory.VerifyCost({1: 1.1, 8: 1.5}))
    assert a.kind == "tree" and a.verify_tokens > 3
    depth_acc = run.metrics["acceptance_by_position"]
    reached = [math.prod(depth_acc[:d]) for d in range(1, min(3, len(depth_acc)) + 1)]  # P(depth d accepted)
    assert a.expected_len == pytest.approx(sum(reached))


def test_batch_effect_gives_a_ratio_per_batch_size_and_is_cached(tmp_path, monkeypatch):
    """One ratio per batch size; a second call reads the cache (memory, then the JSON file) without timing."""
    batch_effect.forget_cached()
    target, _ = pair()
    path = tmp_path / "batch_effect.json"
    effect = batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, repeats=1,
                                               cache_file=path)
    assert effect.batch_sizes == [1, 2, 4] and len(effect.ratio) == 3 and not effect.cached
    assert all(r > 0 and math.isfinite(r) for r in effect.ratio)
    assert batch_effect.cache_key(target, 3) in json.loads(path.read_text())

    def no_timing(*a, **kw):
        raise AssertionError("timed again instead of using the cache")

    monkeypatch.setattr(batch_effect, "pass_times", no_timing)
    again = batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, cache_file=path)
    assert again.cached and again.ratio == effect.ratio
    batch_effect.forget_cached()
    from_file = batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, cache_file=path)
    assert from_file.cached and from_file.ratio == pytest.approx(effect.ratio)
    with pytest.raises(AssertionError, match="timed again"):
        batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, cache_file=path,
                                          refresh=True)
    batch_effect.forget_cached()
