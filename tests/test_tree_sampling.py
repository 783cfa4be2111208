"""Sampling through tree verification (recursive rejection over deterministic siblings) follows p exactly."""
import pytest
import torch

import specviz
import specviz.verify
from specviz.engine import Decoder
from tests.tiny import FixedTreeProposer, chi2_pvalue, pair, tv

VOCAB = 8
PROMPT = [1, 6, 3]
N = 1200  # runs per variant: the broken rule shows at p ~ 1e-20 at this N, the correct one passes


@pytest.fixture(scope="module")
def target():
    return pair(vocab=VOCAB)[0]


@torch.inference_mode()
def exact_marginals(model) -> tuple[torch.Tensor, torch.Tensor]:
    """By enumeration under the target at temperature 1: P(t2, t3) (flattened) and P(t4)."""
    v, n = VOCAB, len(PROMPT)
    seqs = torch.tensor([PROMPT + [a, b, c] for a in range(v) for b in range(v) for c in range(v)])
    p = torch.softmax(model(seqs).logits.double(), dim=-1)  # [v³, n + 3, v]
    p1 = p[0, n - 1]
    p2 = p[:: v * v, n]  # [t1, t2]
    p3 = p[::v, n + 1].reshape(v, v, v)  # [t1, t2, t3]
    p4 = p[:, n + 2].reshape(v, v, v, v)  # [t1, t2, t3, t4]
    joint = p1[:, None, None, None] * p2[:, :, None, None] * p3[..., None] * p4
    return joint.sum((0, 3)).flatten(), joint.sum((0, 1, 2))


def sample_counts(target, make_method) -> tuple[torch.Tensor, torch.Tensor]:
    """Counts of (t2, t3) and of t4 over N seeded runs of 4 new tokens at temperature 1."""
    pairs, fourth = torch.zeros(VOCAB * VOCAB), torch.zeros(VOCAB)
    for seed in range(N):
        method, knobs = make_method(seed)
        dec = Decoder(target, PROMPT, method=method, k=2, temperature=1.0, seed=seed, max_new_tokens=4,
                      chat=False, record=False, **knobs)
        ids = dec.run().token_ids
        pairs[ids[1] * VOCAB + ids[2]] += 1
        fourth[ids[3]] += 1
    return pairs, fourth


METHODS = {
    "fixed-tree": lambda seed: (FixedTreeProposer(depth=2, branching=3, vocab=VOCAB, seed=seed), {}),
    # the paper's way: every candidate kept, so each cycle has at least 3 siblings to try
    "logitspec": lambda seed: ("logitspec", {"top_k": 3, "min_ngram": 1, "lone_cands": True, "adaptive": False}),
}


@pytest.mark.parametrize("name", list(METHODS))
def test_tree_sampling_follows_target(target, monkeypatch, name):
    """Tokens 2–4 sampled through multi-child tree verification follow the exact target marginals
    (chi-square p > 1e-3); the same check rejects a broken rule that leaves a rejected sibling
    in p (p < 1e-6), so the test can fail.
    """
    exact_pairs, exact_fourth = exact_marginals(target.model)
    pairs, fourth = sample_counts(target, METHODS[name])
    assert chi2_pvalue(pairs, exact_pairs) > 1e-3 and chi2_pvalue(fourth, exact_fourth) > 1e-3
    assert tv(pairs / N, exact_pairs) < 0.15  # coarse: sampling noise alone is ~0.08 over 64 cells

    # broken: after a rejection, the next sibling (and the final draw) still sees the old p
    monkeypatch.setattr(specviz.verify, "residual", lambda p, q, x: p)
    pairs, fourth = sample_counts(target, METHODS[name])
    assert min(chi2_pvalue(pairs, exact_pairs), chi2_pvalue(fourth, exact_fourth)) < 1e-6
