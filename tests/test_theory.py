"""Theory against measurement: the S(K) formula, its best K, the measured costs, the batch effect."""
from __future__ import annotations

import itertools
import json
import math

import pytest

import specviz
from specviz import batch_effect, theory
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
    assert theory.expected_tokens_by_depth([0.6] * 7, 7) == pytest.approx(theory.expected_tokens(0.6, 7))


def test_costs_measured_on_a_tiny_pair_are_sane():
    """c, v(K) and the analysis of a draft-model run on a tiny pair are positive, finite and consistent."""
    target, draft = pair(noise=0.05)
    run = specviz.generate(target, PROMPT, method="draft", draft=draft, k=3, max_new_tokens=16, chat=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    c = theory.draft_cost(run, ar)
    assert 0 < c < 20  # the draft is a copy of the target: about one target step per draft step
    v = theory.verify_cost(target, sizes=(1, 2, 4), prefix_len=16, repeats=2)
    assert v.step_s > 0 and all(0 < x < 50 and math.isfinite(x) for x in v.points.values())
    a = theory.analyse(run, ar, v)
    assert a.kind == "chain" and a.k == 3 and a.c == c
    assert a.alpha == run.metrics["acceptance_rate"] and a.measured > 0
    assert [k for k, _ in a.curve] == list(theory.K_RANGE) and a.best in a.curve
    assert a.predicted == pytest.approx(theory.speedup(a.alpha, 3, c, v))


def test_tree_analysis_uses_per_depth_acceptance():
    """A tree run is analysed as a tree: E[accepted] from per-depth acceptance, verify size above K."""
    target, _ = pair()
    proposer = FixedTreeProposer(depth=3, branching=2, vocab=32, seed=1)
    run = specviz.generate(target, PROMPT, method=proposer, k=3, max_new_tokens=16, chat=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    a = theory.analyse(run, ar, theory.VerifyCost({1: 1.1, 8: 1.5}))
    assert a.kind == "tree" and a.verify_tokens > 3
    depth_acc = run.metrics["acceptance_by_position"]
    assert a.expected_len == pytest.approx(theory.expected_tokens_by_depth(depth_acc, 3) - 1)


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
