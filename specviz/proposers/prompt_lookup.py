"""Prompt lookup decoding (PLD): copy what followed the latest earlier occurrence of the last n-gram.

Like transformers' `prompt_lookup_num_tokens`, it matches the last n tokens (n = max_ngram
down to min_ngram) in the prompt and the output and drafts the tokens that followed, as a
chain of at most `num_tokens` (and never more than K). Unlike it, the latest occurrence wins
(recent text predicts best), the n-gram index is updated incrementally (ngram_index.py), a
match of n tokens drafts at most 2**n tokens (a short match misses often), and after repeated
complete misses it skips drafting for a while (MissBackoff), so open-ended prompts do not slow down.

Since cost-aware drafting (planner.py) and the CPU speed-ups (speedups.py, v(n) ≈ 1 up to ~8
tokens), the defaults offer every match at full length and let the planner cut: min_ngram 1, no
2**n cap, no skipping (measured 2026-11-30: 1.97× HF plain against 1.76× for the old defaults
below, on 4 public prompts; docs/BENCHMARKS.md). The knobs stay for the lessons and for study.

The earlier defaults, tuned offline on the 16 public prompts (bundled SmolLM2-135M, greedy, 128 new tokens,
K = 20), replaying each prompt's reference output and pricing each cycle by a verify cost
measured here (fp32, one thread, 200-token cache: 1 token 56 ms, 2: ~80, 8: 100, 16: 126,
32: 180, 64: 284). Modelled speed-up over plain decoding, geometric mean [worst, best]:

- HF-like (num_tokens=10, n = 3..1, no skipping):          1.44× [0.76, 5.01], 1.78 tok/cycle
- + min_ngram=2 (1-gram matches were right 24 % of the time, E[accepted] 0.73, below the ~1
  a 10-token draft needs to pay for itself; 2-grams: 54 %, 2.2; 3-grams: 86 %, 5.5):  1.53× [0.91, 4.61]
- + draft ≤ 2**n tokens, num_tokens=16, max_ngram=4:         1.59× [0.95, 5.20]
- + skipping after misses (the defaults):                    1.59× [0.96, 5.20], 1.61 tok/cycle
  (num_tokens 10 / 20: 1.54× / 1.59×; the engine's K caps drafts: K = 4 gives 1.43×, K = 8 1.51×).
"""
from __future__ import annotations

from specviz.drafting.tree import DraftTree, Source, SourceKind
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.ngram_index import KeepsBackoff, MissBackoff, NgramIndex

NUM_TOKENS = 16  # longest draft; a 4-gram match earns 16 (2**4)
MAX_NGRAM = 4  # 35 matches of 4+ tokens on the public prompts: 34 drafted a right first token
MIN_NGRAM = 1  # the planner (planner.py) now drops what does not pay, so every match is offered


class PromptLookupProposer(KeepsBackoff, Proposer):
    name = "pld"
    KNOBS = ("num_tokens", "max_ngram", "min_ngram", "adaptive", "scaled_len")

    def __init__(self, num_tokens: int = NUM_TOKENS, max_ngram: int = MAX_NGRAM,
                 min_ngram: int = MIN_NGRAM, adaptive: bool = False, scaled_len: bool = False):
        if int(num_tokens) < 1:
            raise ValueError(f"num_tokens must be ≥ 1, got {num_tokens}")
        self.num_tokens, self.adaptive = int(num_tokens), bool(adaptive)
        self.scaled_len = bool(scaled_len)  # an n-token match drafts at most 2**n tokens
        self.index = NgramIndex(int(min_ngram), int(max_ngram))
        self.backoff = MissBackoff()

    @classmethod
    def build(cls, target=None, draft=None, **knobs):
        cls.check_knobs(knobs)
        return cls(**knobs)

    def start(self, ids: list[int]) -> None:
        self.index.reset()
        self.index.update(ids)
        self.backoff.reset()

    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.index.update(ctx.ids)
        if self.adaptive and self.backoff.skipping():
            return DraftTree()
        match = self.index.lookup([])
        if match is None:
            return DraftTree(retrieval_hit=False)
        pos, n = match
        tokens = self.index.continuation(pos, min(self.num_tokens, 2 ** n if self.scaled_len else ctx.k, ctx.k))
        return DraftTree.chain(tokens, sources=[Source(SourceKind.LOOKUP, ngram=n)] * len(tokens), retrieval_hit=True)
