"""LogitSpec (arXiv 2507.01449), written from the paper's description: the last logits guess the
token after next, and retrieval continues each guess.

The newest committed token (the root of the tree) was chosen from the last logits. Those same
logits, with the root left out, rank the likely next-next tokens: the candidates. Retrieval
then drafts two kinds of branches from one n-gram pool (ngram_index.py: n = 1..3, latest
occurrence wins, continuations of up to MAX_CONTINUATION tokens, updated incrementally):

- branch 0 continues [context, root], the longest matching n-gram first;
- branch i is [cand_i] followed by the continuation of [context, root, cand_i].

Rank-based pruning: branch i keeps at most branch_len · decay**i tokens, and the whole tree,
merged into a trie so that no two siblings repeat a token, is capped at `capacity` nodes.

Sizes depend on the device. On a GPU a pass over 64 nodes costs about what one token costs, so
the paper's sizes are used (GPU_DEFAULTS). On a CPU every node costs, so CPU_DEFAULTS keep a
small tree (the top 4 candidates, 16 nodes) and send a candidate only where its own lookup
matched: on this model a bare next-next guess is right a few percent of the time, one that
retrieval backs far more often. Every match is offered (min_ngram 1, no length scaling, no
pausing after misses) and the planner (planner.py) cuts what does not pay; the knobs that turn
those back on stay for the lessons and for study. The replay study and measurements behind
these choices: docs/bench/2026-11-29.md ("how the proposer defaults were tuned") and
docs/bench/2026-11-30.md.
"""
from __future__ import annotations

import torch

from specviz.drafting.tree import DraftTree, Source
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.method_spec import Knob, MethodSpec, SourceSpec
from specviz.proposers.ngram_index import KeepsBackoff, MissBackoff, NgramIndex

MAX_CONTINUATION = 20  # the paper's pool keeps up to 20 following tokens per n-gram
MAX_NGRAM = 3  # the paper's pool: n-grams of 1 to 3 tokens
GPU_DEFAULTS = dict(top_k=64, capacity=64, branch_len=MAX_CONTINUATION, decay=0.5, min_ngram=1,
                    lone_cands=True, scaled_len=False)
# min_ngram 1 and no 2**n cap since the planner (planner.py) cuts what does not pay (see
# prompt_lookup.py for the measurement); candidates still ride only when retrieval backs them.
CPU_DEFAULTS = dict(top_k=4, capacity=16, branch_len=16, decay=0.5, min_ngram=1,
                    lone_cands=False, scaled_len=False, adaptive=False)
ROOT, CANDIDATE = "root", "candidate"  # its nodes' source kinds: branch 0 (retrieved), a candidate's branch
SOURCES = (SourceSpec(ROOT, "lookup", "sky"), SourceSpec(CANDIDATE, "candidate", "yellow"))


def branch_lengths(top_k: int, branch_len: int, decay: float) -> list[int]:
    """Nodes kept per branch: branch 0 (the root's continuation), then candidates by rank."""
    return [branch_len] + [max(1, round(branch_len * decay ** i)) for i in range(1, top_k + 1)]


def merge_branches(branches: list[tuple[list[int], list[Source]]], capacity: int) -> DraftTree:
    """Insert branches (highest priority first) into a trie of at most `capacity` nodes."""
    tokens: list[int] = []
    parents: list[int] = []
    sources: list[Source] = []
    node_of: dict[tuple[int, int], int] = {}  # (parent, token) → node: shared prefixes merge
    for branch, origins in branches:
        parent = -1
        for tok, origin in zip(branch, origins):
            node = node_of.get((parent, tok))
            if node is None:
                if len(tokens) >= capacity:
                    break
                node = node_of[(parent, tok)] = len(tokens)
                tokens.append(tok)
                parents.append(parent)
                sources.append(origin)
            parent = node
    return DraftTree(tokens, parents, None, sources)


class LogitSpecProposer(KeepsBackoff, Proposer):
    """Knobs: `top_k` candidates, tree `capacity`, `branch_len` of branch 0 and rank `decay`;
    `max_ngram`; `min_ngram`, the shortest match that keeps a branch (candidates count
    themselves) and lets a draft be sent; `lone_cands` keeps candidates retrieval cannot back;
    `scaled_len` caps branch 0 at 2**(n+1) tokens for an n-token match; `adaptive` pauses
    after repeated misses. Defaults: CPU_DEFAULTS, or GPU_DEFAULTS when the target is on a GPU.
    """
    spec = MethodSpec(
        "logitspec", "LogitSpec", "drafts a tree from the last logits' guesses at the token after next",
        default_k=16, sources=SOURCES,
        knobs=(Knob("top_k", "Next-next candidates from the last logits", "int", 0, 64,
                    info="Top-k of the last logits, the root left out; 0 keeps only the root's branch."),
               Knob("capacity", "Tree size cap (nodes)", "int", 1, 128),
               Knob("branch_len", "Nodes in the first branch", "int", 1, 21,
                    info="Lower-ranked candidates keep fewer (rank-based pruning)."),
               Knob("decay", "Branch length decay per rank", "float", 0.05, 1.0, 0.05),
               Knob("max_ngram", "Longest n-gram matched", "int", 1, 6)))
    KNOBS = ("top_k", "capacity", "branch_len", "decay", "max_ngram", "min_ngram", "lone_cands",
             "scaled_len", "adaptive")

    def __init__(self, top_k: int = 4, capacity: int = 16, branch_len: int = 16, decay: float = 0.5,
                 max_ngram: int = MAX_NGRAM, min_ngram: int = 1, lone_cands: bool = False,
                 scaled_len: bool = False, adaptive: bool = False):  # CPU_DEFAULTS, what the app runs here
        if top_k < 0 or capacity < 1 or not 1 <= branch_len <= MAX_CONTINUATION or not 0 < decay <= 1:
            raise ValueError("LogitSpec needs top_k ≥ 0, capacity ≥ 1, 1 ≤ branch_len ≤ "
                             f"{MAX_CONTINUATION} and 0 < decay ≤ 1; got {top_k}, {capacity}, "
                             f"{branch_len}, {decay}")
        if not 1 <= min_ngram <= max_ngram:
            raise ValueError(f"LogitSpec needs 1 ≤ min_ngram ≤ max_ngram, got {min_ngram} and {max_ngram}")
        self.top_k, self.capacity, self.min_ngram = int(top_k), int(capacity), int(min_ngram)
        self.lengths = branch_lengths(self.top_k, int(branch_len), float(decay))
        self.lone_cands, self.scaled_len, self.adaptive = bool(lone_cands), bool(scaled_len), bool(adaptive)
        self.index = NgramIndex(1, int(max_ngram))  # 1-grams too: a candidate's own token is a query
        self.backoff = MissBackoff()

    @classmethod
    def build(cls, target=None, draft=None, **knobs):
        cls.check_knobs(knobs)
        on_gpu = target is not None and getattr(target.device, "type", "cpu") != "cpu"
        return cls(**{**(GPU_DEFAULTS if on_gpu else CPU_DEFAULTS), **knobs})

    def start(self, ids: list[int]) -> None:
        self.index.reset()
        self.index.update(ids)
        self.backoff.reset()

    def candidates(self, logits: torch.Tensor, root: int) -> list[tuple[int, int]]:
        """(token, logit rank) of the top-k of the last logits, the root left out."""
        n = min(self.top_k + 1, logits.shape[-1])
        top = torch.topk(logits, n).indices.tolist()
        return [(tok, rank) for rank, tok in enumerate(top, 1) if tok != root][: self.top_k]

    def _retrieve(self, tail: list[int], length: int) -> tuple[list[int], int]:
        """The continuation of committed + tail (longest n-gram first) and the n that matched (0: none)."""
        match = self.index.lookup(tail)
        if match is None:
            return [], 0
        pos, n = match
        return self.index.continuation(pos, length, tail), n

    def _branches(self, ctx: ProposeContext, depth: int, candidates: bool = True) -> tuple[list, bool]:
        """Branch 0, then (with `candidates`) one branch per candidate, as (tokens, sources); and
        whether retrieval hit."""
        branches, hit = [], False
        cont, n = self._retrieve([], min(self.lengths[0], depth))
        if n >= self.min_ngram:
            if self.scaled_len:  # a longer match earns a longer branch (a short one misses often)
                cont = cont[: 2 ** (n + 1)]
            branches.append((cont, [Source(ROOT, ngram=n)] * len(cont)))
            hit = True
        if not candidates:
            return branches, hit
        for i, (cand, rank) in enumerate(self.candidates(ctx.last_logits, ctx.ids[-1]), 1):
            cont, n = self._retrieve([cand], min(self.lengths[i], depth) - 1)
            if n >= self.min_ngram or self.lone_cands:  # n counts cand: 2 means [root, cand] seen
                own = Source(CANDIDATE, branch=i, rank=rank)
                branches.append(([cand] + cont, [own] + [Source(CANDIDATE, branch=i, ngram=n)] * len(cont)))
                hit = hit or n > 0
        return branches, hit

    def propose(self, ctx: ProposeContext, candidates: bool = True) -> DraftTree:
        """The tree; `candidates=False` drafts branch 0 alone (prompt lookup), without reading the
        logits (the hybrid's gate: a tree with candidates starts with the same branch 0)."""
        self.index.update(ctx.ids)
        if self.adaptive and self.backoff.skipping():
            return DraftTree()
        branches, hit = self._branches(ctx, MAX_CONTINUATION, candidates)  # each to its own length
        depth = min(ctx.k, MAX_CONTINUATION)
        tree = merge_branches([(tokens[:depth], origins[:depth]) for tokens, origins in branches], self.capacity)
        tree.retrieval_hit, tree.uncut, tree.uncut_cap = hit, [tokens for tokens, _ in branches], self.capacity
        return tree
