"""The Learn tab's toy sampler: its correct rule is verify.py's rule and reproduces p; the same
check fails when one of verify.py's rules is swapped for a broken twin (tests/helpers/twins.py); and
the broken rules the Learn tab offers drift from p where they must."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from specviz.decoding.verify import verify_sampling
from specviz.drafting.tree import DraftTree
from specviz.teach import toy
from tests.helpers import twins

N = toy.MAX_SAMPLES
# Which broken rule drifts from p on which preset. Resampling from p is only wrong when some
# drafts are accepted and some rejected: with p = q nothing is rejected, and with disjoint
# supports the residual *is* p. Accepting every draft is wrong whenever q ≠ p.
DRIFTS = {
    (toy.RESAMPLE_P, "identical"): False, (toy.RESAMPLE_P, "close"): True,
    (toy.RESAMPLE_P, "disjoint"): False, (toy.RESAMPLE_P, "q too confident"): True,
    (toy.ACCEPT_ALL, "identical"): False, (toy.ACCEPT_ALL, "close"): True,
    (toy.ACCEPT_ALL, "disjoint"): True, (toy.ACCEPT_ALL, "q too confident"): True,
}


def random_pairs(n: int = 20, k: int = 6, seed: int = 0):
    """Random (p, q) pairs, some with zeros, so the identities hold beyond the presets."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        wp, wq = rng.random(k) * (rng.random(k) > 0.2), rng.random(k) * (rng.random(k) > 0.2)
        wp[0], wq[1] = wp[0] + 0.1, wq[1] + 0.1  # never all zero
        yield toy.normalise(wp), toy.normalise(wq)


@pytest.mark.parametrize("name", list(toy.PRESETS))
def test_correct_rule_output_follows_p(name):
    """100 000 samples through the correct rule: TV(output, p) is under the threshold for N
    and the chi-square test does not reject p."""
    p, q = toy.preset(name)
    mc = toy.monte_carlo(p, q, N, seed=1)
    assert mc.n == N
    assert toy.tv(mc.empirical, p) < toy.tv_threshold(N), (name, toy.tv(mc.empirical, p))
    assert toy.chi_square_p_value(mc.counts, p) > 1e-4


# verify.py's twins that a single draft can show: the toy has no bonus token to draw from a wrong row
VERIFY_TWINS = [name for name, (attr, _) in twins.TWINS.items() if attr != "verify_sampling"]


@pytest.mark.parametrize("twin", VERIFY_TWINS)
@pytest.mark.parametrize("name", ["close", "q too confident"])
def test_the_check_fails_when_a_rule_of_verify_breaks(monkeypatch, name, twin):
    """With one of verify.py's rules swapped for a broken twin, the toy's correct rule (which
    calls verify.py) no longer reproduces p: TV exceeds the threshold and chi-square rejects p."""
    twins.install(monkeypatch, twin)
    p, q = toy.preset(name)
    mc = toy.monte_carlo(p, q, N, seed=1)
    assert toy.tv(mc.empirical, p) > toy.tv_threshold(N), toy.tv(mc.empirical, p)
    assert toy.chi_square_p_value(mc.counts, p) < 1e-6


@pytest.mark.parametrize("rule,name", list(DRIFTS))
def test_broken_rules_drift_from_p_where_they_must(rule, name):
    """The Learn tab's broken rules teach what they claim: each one's output exceeds the TV
    threshold (and fails the chi-square test) on every preset where it changes the output
    distribution; where it does not, it matches p exactly."""
    p, q = toy.preset(name)
    mc = toy.monte_carlo(p, q, N, seed=1, rule=rule)
    distance = toy.tv(mc.empirical, p)
    if DRIFTS[(rule, name)]:
        assert distance > toy.tv_threshold(N), (rule, name, distance)
        assert toy.chi_square_p_value(mc.counts, p) < 1e-6
    else:
        assert np.allclose(toy.output_distribution(p, q, rule), p)
        assert distance < toy.tv_threshold(N)


@pytest.mark.parametrize("rule", list(toy.RULES))
def test_monte_carlo_matches_the_exact_output_distribution(rule):
    """For every rule and preset, the sampled output is within the threshold of the rule's
    exact output distribution, so the plot's numbers are the rule's and not noise."""
    for name in toy.PRESETS:
        p, q = toy.preset(name)
        mc = toy.monte_carlo(p, q, N, seed=2, rule=rule)
        assert toy.tv(mc.empirical, toy.output_distribution(p, q, rule)) < toy.tv_threshold(N), name


def test_beta_is_one_minus_tv_and_the_acceptance_rate():
    """β = Σ min(p, q) = 1 − TV(p, q) on presets and random pairs, and the share of drafts the
    Monte-Carlo keeps matches β."""
    pairs = [toy.preset(n) for n in toy.PRESETS] + list(random_pairs())
    for p, q in pairs:
        assert toy.beta(p, q) == pytest.approx(1 - toy.tv(p, q), abs=1e-12)
        assert toy.beta(p, q) == pytest.approx(float((q * toy.accept_probs(p, q)).sum()), abs=1e-12)
    for name in toy.PRESETS:
        p, q = toy.preset(name)
        mc = toy.monte_carlo(p, q, N, seed=3)
        assert abs(mc.accepted / N - toy.beta(p, q)) < toy.tv_threshold(N, k=2), name
    assert toy.beta(*toy.preset("identical")) == pytest.approx(1.0)
    assert toy.beta(*toy.preset("disjoint")) == pytest.approx(0.0)


def test_exact_output_of_the_correct_rule_is_p():
    """min(p, q) + (1 − β)·norm(max(0, p − q)) = p for every pair: the algebra of losslessness."""
    for p, q in [toy.preset(n) for n in toy.PRESETS] + list(random_pairs(seed=5)):
        assert np.allclose(toy.output_distribution(p, q), p, atol=1e-12)


class Scripted:
    """A stand-in for Sampling: p comes straight from the test, r is fixed, draws are recorded."""
    greedy = False

    def __init__(self, p: np.ndarray, r: float):
        self.p, self.r, self.drawn_from = torch.as_tensor(p, dtype=torch.float64), r, []

    def probs(self, logits):
        return self.p.clone()

    def uniform(self) -> float:
        return self.r

    def draw(self, probs) -> int:
        self.drawn_from.append(probs)
        return 0


@pytest.mark.parametrize("name", list(toy.PRESETS))
def test_toy_step_is_the_rule_of_verify_sampling(name):
    """For every drafted token and draws r just under, at and over min(1, p/q), the toy step
    and verify.verify_sampling make the same decision and resample from the same distribution."""
    p, q = toy.preset(name)
    qt = torch.as_tensor(q, dtype=torch.float64)
    for x in np.flatnonzero(q > 0):
        a = toy.accept_probs(p, q)[x]
        for r in {max(a - 1e-9, 0.0), a, min(a + 1e-9, 1 - 1e-12), 0.5}:
            sampling = Scripted(p, r)
            verdict = verify_sampling(DraftTree.chain([int(x)], q=[qt]), torch.zeros(2, len(p)), sampling)
            accepted, replacement = toy.step(p, q, int(x), r)
            assert (verdict.nodes[0].status == "accepted") == accepted, (name, x, r)
            assert verdict.nodes[0].accept_prob == pytest.approx(a)
            if not accepted:
                assert np.allclose(verdict.residual.numpy(), replacement)
                assert np.allclose(sampling.drawn_from[-1].numpy(), replacement)


def test_chi_square_p_value_matches_scipy_and_pools_rare_cells():
    """With every cell expected at least 5 times it equals scipy's Pearson test; cells expected
    fewer times are pooled into one first; a count on a token with p = 0 gives 0."""
    from scipy.stats import chisquare

    p = np.array([0.4, 0.3, 0.2, 0.1])
    counts = np.array([48, 25, 19, 8])
    assert toy.chi_square_p_value(counts, p) == pytest.approx(chisquare(counts, 100 * p).pvalue, rel=1e-9)
    rare = np.array([0.5, 0.46, 0.02, 0.02])  # the last two are expected twice each in 100 draws
    counts = np.array([52, 40, 5, 3])
    pooled = chisquare([52, 40, 8], [50, 46, 4]).pvalue
    assert toy.chi_square_p_value(counts, rare) == pytest.approx(pooled, rel=1e-9)
    assert toy.chi_square_p_value(torch.tensor([50, 49, 1]), torch.tensor([0.5, 0.5, 0.0])) == 0.0


def test_bad_weights_and_settings_fail_with_a_message():
    """All-zero or negative weights, an unknown rule and N out of range are refused by name."""
    with pytest.raises(ValueError, match="not all be zero"):
        toy.normalise([0, 0, 0], "p")
    with pytest.raises(ValueError, match="negative"):
        toy.normalise([1, -1], "q")
    p, q = toy.preset("close")
    with pytest.raises(ValueError, match="unknown rule"):
        toy.monte_carlo(p, q, 10, rule="magic")
    with pytest.raises(ValueError, match="from 1 to"):
        toy.monte_carlo(p, q, toy.MAX_SAMPLES + 1)
    assert toy.tv_threshold(100_000) < toy.tv_threshold(1_000) < 0.2
