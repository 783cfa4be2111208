"""The chain rule of verify.py, on its own, follows the target's distribution exactly.

The expectation comes from tests/helpers/reference.py, not from specviz.drafting.sampling; the same test fails
when the replacement is drawn from p instead of the residual (tests/helpers/twins.py). The whole engine,
chains and trees, every proposer kind and every broken twin, is checked in test_exactness.py.
"""
import numpy as np
import pytest
import torch

import specviz
import specviz.decoding.verify as verify_mod
from specviz.drafting.sampling import Sampling, probs_from_logits
from specviz.drafting.tree import DraftTree
from specviz.teach.toy import chi_square_p_value, tv, tv_threshold
from tests.helpers import twins
from tests.helpers.drafts import drafted, rejected
from tests.helpers.reference import nucleus
from tests.helpers.tiny import pair

ALPHA = 1e-3  # reject "follows p" below this p-value; seeds are fixed, so no flakiness


# -- the pure rule on synthetic distributions (fast, many samples) -------------------------
V = 5


def _tables(seed=0):
    g = torch.Generator().manual_seed(seed)
    rand = lambda *s: torch.randn(*s, V, generator=g) * 1.5
    return rand(), rand(V), rand(V, V), rand(), rand(V)  # p1, p2|x1, p3|x1,x2, q1, q2|x1


def _sample_pairs(n, temperature=1.0, top_p=1.0):
    """Joint of the first two output tokens of one K=2 chain cycle (continued by p if short),
    and that joint worked out by the reference."""
    lp1, lp2, lp3, lq1, lq2 = _tables()
    s = Sampling(temperature, top_p, seed=1)
    P = lambda logits: probs_from_logits(logits, temperature, top_p)  # what the engine feeds verify
    counts = np.zeros(V * V)
    for _ in range(n):
        q1 = P(lq1)
        x1 = s.draw(q1)
        q2 = P(lq2[x1])
        x2 = s.draw(q2)
        logits = torch.stack([lp1, lp2[x1], lp3[x1, x2]])
        v = verify_mod.verify_sampling(DraftTree.chain([x1, x2], [q1, q2]), logits, s)
        out = [[x1, x2][i] for i in v.accepted] + [v.new_token]
        if len(out) == 1:  # the next cycle would draw the second token from p(· | y1)
            out.append(s.draw(P(lp2[out[0]])))
        counts[out[0] * V + out[1]] += 1
    ref = lambda logits: nucleus(logits.numpy(), temperature, top_p)
    exact = (ref(lp1)[:, None] * np.stack([ref(lp2[a]) for a in range(V)])).reshape(-1)
    return counts, exact


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_chain_rule_follows_p(temperature, top_p):
    """The chain rule's output pair (y1, y2) follows p(y1)·p(y2|y1): chi-square does not reject it at
    N = 20 000, and TV stays under the bound an exact sampler exceeds with probability 1e-6."""
    counts, exact = _sample_pairs(20_000, temperature, top_p)
    assert chi_square_p_value(counts, exact) > ALPHA
    assert tv(counts / counts.sum(), exact) < tv_threshold(20_000, V * V)


def test_chain_rule_test_catches_broken_residual(monkeypatch):
    """The same test fails when the replacement is drawn from p instead of the residual."""
    twins.install(monkeypatch, "resample from p")
    counts, exact = _sample_pairs(20_000)
    assert chi_square_p_value(counts, exact) < ALPHA


# -- reproducibility through the engine ---------------------------------------------------------
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def small_pair():
    # a noisy draft disagrees often, so rejections and residual draws are frequent
    return pair(noise=3.0, vocab=6, seed=3)


@pytest.mark.drafts
def test_same_seed_same_output_different_seed_differs(small_pair):
    """Sampling with drafts sent, rejected and replaced from the residual is reproducible from its
    seed, and another seed gives another output (plan=False: the same-size draft would otherwise
    send nothing)."""
    target, draft = small_pair
    kw = dict(method="draft", draft=draft, k=3, temperature=1.0, max_new_tokens=30, chat=False, plan=False)
    first = specviz.generate(target, PROMPT, seed=7, **kw)
    a = first.token_ids
    assert drafted(first) > 0 and rejected(first) > 0
    assert specviz.generate(target, PROMPT, seed=7, **kw).token_ids == a
    assert specviz.generate(target, PROMPT, seed=8, **kw).token_ids != a
