"""Prompt lookup decoding (PLD): copy what followed the latest earlier occurrence of the last n-gram.

Like transformers' `prompt_lookup_num_tokens`, it matches the last n tokens (n = max_ngram
down to min_ngram) in the prompt and the output, and drafts a chain of up to `num_tokens`
tokens (never more than K). Unlike it, the latest occurrence wins (recent text predicts
best) and the n-gram index is updated incrementally (see ngram_index.py).

Adaptivity, so that open-ended prompts do not slow down: after `patience` complete misses
in a row it skips proposing (a plain step, no verify pass paid for a draft) for 1 cycle,
then 2, 4, ... up to MAX_SKIP; any accepted token resets this.

Defaults (tuned by TUNING below): num_tokens=NUM_TOKENS, max_ngram=MAX_NGRAM.
"""
from __future__ import annotations

from ..tree import DraftTree
from .base import ProposeContext, Proposer
from .ngram_index import NgramIndex

NUM_TOKENS = 10  # placeholder, tuned below
MAX_NGRAM = 3
MIN_NGRAM = 1
PATIENCE = 2  # complete misses in a row before skipping
MAX_SKIP = 16  # longest skip, in cycles: a lookup is cheap, so retry now and then


class PromptLookupProposer(Proposer):
    name = "pld"

    def __init__(self, num_tokens: int = NUM_TOKENS, max_ngram: int = MAX_NGRAM,
                 min_ngram: int = MIN_NGRAM, adaptive: bool = True):
        if num_tokens < 1:
            raise ValueError(f"num_tokens must be ≥ 1, got {num_tokens}")
        self.num_tokens, self.adaptive = int(num_tokens), bool(adaptive)
        self.index = NgramIndex(int(min_ngram), int(max_ngram))
        self._reset_backoff()

    @classmethod
    def build(cls, target=None, draft=None, **knobs):
        allowed = {"num_tokens", "max_ngram", "min_ngram", "adaptive"}
        unknown = sorted(set(knobs) - allowed)
        if unknown:
            raise ValueError(f"method 'pld' has no option {', '.join(unknown)}; "
                             f"it takes {', '.join(sorted(allowed))}")
        return cls(**knobs)

    def _reset_backoff(self) -> None:
        self.misses = 0  # complete misses in a row
        self.skip = 0  # cycles left to skip
        self.backoff = 1  # length of the next skip

    def start(self, ids: list[int]) -> None:
        self.index.reset()
        self.index.update(ids)
        self._reset_backoff()

    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.index.update(ctx.ids)
        if self.skip > 0:
            self.skip -= 1
            return DraftTree()
        match = self.index.lookup([])
        if match is None:
            return DraftTree(retrieval_hit=False)
        pos, n = match
        tokens = self.index.continuation(pos, min(self.num_tokens, ctx.k))
        return DraftTree.chain(tokens, sources=[f"lookup {n}-gram"] * len(tokens), retrieval_hit=True)

    def observe(self, cycle) -> None:
        if not self.adaptive or not cycle.nodes:
            return
        if cycle.accepted:
            self._reset_backoff()
            return
        self.misses += 1
        if self.misses >= PATIENCE:  # keeps missing: skip, and skip longer each time
            self.skip = self.backoff
            self.backoff = min(2 * self.backoff, MAX_SKIP)
