"""LogitSpec (arXiv 2507.01449), written from the paper's description: the last logits guess the
token after next, and retrieval continues each guess.

The newest committed token (the root of the tree) was chosen from the last logits. Those same
logits, with the root left out, rank the likely next-next tokens: the candidates. Retrieval
then drafts two kinds of branches from one n-gram pool (ngram_index.py, n = 1..3, latest
occurrence wins):

- branch 0 continues [context, root], the longest matching n-gram first;
- branch i is [cand_i] followed by the continuation of [context, root, cand_i].

Rank-based pruning: higher-ranked candidates keep longer branches, and the whole tree, merged
into a trie so that no two siblings repeat a token, is capped at `capacity` nodes.
"""
from __future__ import annotations

import torch

from ..tree import DraftTree
from .base import ProposeContext, Proposer
from .ngram_index import NgramIndex

TOP_K = 8  # placeholder, tuned below
CAPACITY = 64
BRANCH_LEN = 10
DECAY = 0.5
MAX_NGRAM, MIN_NGRAM = 3, 1
MAX_CONTINUATION = 20  # the paper's pool keeps up to 20 following tokens per n-gram


def branch_lengths(top_k: int, branch_len: int, decay: float) -> list[int]:
    """Nodes kept per branch: branch 0 (the root's continuation), then candidates by rank."""
    return [branch_len] + [max(1, round(branch_len * decay ** i)) for i in range(1, top_k + 1)]


def merge_branches(branches: list[tuple[list[int], list[str]]], capacity: int) -> DraftTree:
    """Insert branches (highest priority first) into a trie of at most `capacity` nodes."""
    tokens: list[int] = []
    parents: list[int] = []
    sources: list[str] = []
    node_of: dict[tuple[int, int], int] = {}  # (parent, token) → node: shared prefixes merge
    for branch, labels in branches:
        parent = -1
        for tok, label in zip(branch, labels):
            node = node_of.get((parent, tok))
            if node is None:
                if len(tokens) >= capacity:
                    break
                node = node_of[(parent, tok)] = len(tokens)
                tokens.append(tok)
                parents.append(parent)
                sources.append(label)
            parent = node
    return DraftTree(tokens, parents, None, sources)


class LogitSpecProposer(Proposer):
    name = "logitspec"
    KNOBS = ("top_k", "capacity", "branch_len", "decay", "max_ngram", "min_ngram", "lone_cands")

    def __init__(self, top_k: int = TOP_K, capacity: int = CAPACITY, branch_len: int = BRANCH_LEN,
                 decay: float = DECAY, max_ngram: int = MAX_NGRAM, min_ngram: int = MIN_NGRAM,
                 lone_cands: bool = True):
        if top_k < 0 or capacity < 1 or not 1 <= branch_len <= MAX_CONTINUATION + 1 or not 0 < decay <= 1:
            raise ValueError("LogitSpec needs top_k ≥ 0, capacity ≥ 1, 1 ≤ branch_len ≤ "
                             f"{MAX_CONTINUATION + 1} and 0 < decay ≤ 1; got {top_k}, {capacity}, "
                             f"{branch_len}, {decay}")
        self.top_k, self.capacity = int(top_k), int(capacity)
        self.lengths = branch_lengths(self.top_k, int(branch_len), float(decay))
        self.lone_cands = bool(lone_cands)
        self.index = NgramIndex(int(min_ngram), int(max_ngram))

    @classmethod
    def build(cls, target=None, draft=None, **knobs):
        unknown = sorted(set(knobs) - set(cls.KNOBS))
        if unknown:
            raise ValueError(f"method 'logitspec' has no option {', '.join(unknown)}; "
                             f"it takes {', '.join(cls.KNOBS)}")
        return cls(**knobs)

    def start(self, ids: list[int]) -> None:
        self.index.reset()
        self.index.update(ids)

    def candidates(self, logits: torch.Tensor, root: int) -> list[tuple[int, int]]:
        """(token, logit rank) of the top-k of the last logits, the root left out."""
        n = min(self.top_k + 1, logits.shape[-1])
        top = torch.topk(logits, n).indices.tolist()
        return [(tok, rank) for rank, tok in enumerate(top, 1) if tok != root][: self.top_k]

    def _retrieve(self, tail: list[int], length: int) -> tuple[list[int], int]:
        """The continuation of committed + tail (longest n-gram first) and the n that matched."""
        match = self.index.lookup(tail)
        if match is None or length < 1:
            return [], 0
        pos, n = match
        return self.index.continuation(pos, length, tail), n

    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.index.update(ctx.ids)
        depth = min(ctx.k, MAX_CONTINUATION)
        cont, n = self._retrieve([], min(self.lengths[0], depth))
        branches = [(cont, [f"root lookup {n}-gram"] * len(cont))] if cont else []
        hit = bool(cont)
        for i, (cand, rank) in enumerate(self.candidates(ctx.last_logits, ctx.ids[-1]), 1):
            cont, n = self._retrieve([cand], min(self.lengths[i], depth) - 1)
            hit = hit or bool(cont)
            if cont or self.lone_cands:
                labels = [f"cand {i} (logit rank {rank})"] + [f"cand {i} lookup {n}-gram"] * len(cont)
                branches.append(([cand] + cont, labels))
        tree = merge_branches(branches, self.capacity)
        tree.retrieval_hit = hit
        return tree
