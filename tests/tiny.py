"""Shared helpers for tests on tiny random models (no network, milliseconds per forward)."""
from __future__ import annotations

import torch

from specviz.models import derive_draft, tiny_random
from specviz.proposers.base import Proposer
from specviz.tree import DraftTree

PROMPTS = [[1, 5, 9, 2, 7], [3, 3, 3], [4, 8, 15, 16, 23, 30, 2, 11, 6]]


def pair(noise: float = 0.05, vocab: int = 32, seed: int = 0, layers: int = 2):
    """A tiny target and a draft derived from it; `noise` controls how often they agree."""
    target = tiny_random(vocab_size=vocab, layers=layers, seed=seed)
    return target, derive_draft(target, noise=noise, seed=seed + 1)


def hf_greedy(target, prompt_ids, n):
    """Plain greedy decoding by transformers' own generate, as the reference."""
    out = target.model.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=n,
                                min_new_tokens=n, pad_token_id=0, eos_token_id=None)
    return out[0, len(prompt_ids):].tolist()


class FixedTreeProposer(Proposer):
    """Proposes a random tree of given depth and branching each cycle (deterministic drafts)."""
    name = "fixed-tree"

    def __init__(self, depth=3, branching=2, vocab=32, seed=0):
        self.depth, self.branching, self.vocab = depth, branching, vocab
        self.gen = torch.Generator().manual_seed(seed)

    def propose(self, ctx):
        tokens, parents = [], []
        frontier = [-1]
        for _ in range(min(self.depth, ctx.k)):
            nxt = []
            for par in frontier:
                picks = torch.randperm(self.vocab, generator=self.gen)[: self.branching].tolist()
                if par == -1:  # make the first level sometimes right, so paths get accepted
                    picks[0] = int(ctx.last_logits.argmax())
                for tok in picks:
                    tokens.append(tok)
                    parents.append(par)
                    nxt.append(len(tokens) - 1)
            frontier = nxt[:1] + nxt[1:2]
        return DraftTree(tokens, parents)


def chi2_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson chi-square goodness-of-fit p-value (cells with tiny expectation pooled)."""
    from scipy.stats import chisquare
    n = counts.sum().item()
    expected = probs * n
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum().reshape(1)]).double()
    exp = torch.cat([expected[big], expected[~big].sum().reshape(1)]).double()
    if exp[-1] < 1e-9:
        obs, exp = obs[:-1], exp[:-1]
    exp = exp * obs.sum() / exp.sum()
    return float(chisquare(obs.numpy(), exp.numpy()).pvalue)


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())

