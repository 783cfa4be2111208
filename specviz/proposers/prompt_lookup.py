"""Prompt lookup decoding (PLD): copy what followed the latest earlier occurrence of the last n-gram.

Like transformers' `prompt_lookup_num_tokens`, it matches the last n tokens (n = max_ngram
down to min_ngram) in the prompt and the output and drafts the tokens that followed, as a
chain of at most `num_tokens` (and never more than K). Unlike it, the latest occurrence wins
(recent text predicts best) and the n-gram index is updated incrementally (ngram_index.py).

Two knobs are off by default and stay for the lessons and for study: `scaled_len` drafts at
most 2**n tokens for an n-token match (a short match misses often), and `adaptive` skips
drafting for a while after repeated complete misses (MissBackoff). Since cost-aware drafting
(planner.py) the defaults offer every match at full length and let the planner cut what does
not pay. How the defaults were chosen, with the replay study behind the older ones:
docs/bench/2026-11-29.md ("how the proposer defaults were tuned") and docs/bench/2026-11-30.md.
"""
from __future__ import annotations

from specviz.drafting.tree import DraftTree, Source
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.method_spec import NGRAM, Knob, MethodSpec, SourceSpec
from specviz.proposers.ngram_index import KeepsBackoff, MissBackoff, NgramIndex

NUM_TOKENS = 16  # longest draft; a 4-gram match earns 16 (2**4)
MAX_NGRAM = 4  # 35 matches of 4+ tokens on the public prompts: 34 drafted a right first token
MIN_NGRAM = 1  # the planner (planner.py) now drops what does not pay, so every match is offered
LOOKUP = "lookup"  # its nodes' source kind: copied after an n-gram match


class PromptLookupProposer(KeepsBackoff, Proposer):
    spec = MethodSpec(
        "pld", "Prompt lookup (n-gram)", "copies what followed the latest earlier occurrence of the last n-gram",
        default_k=16, deploys_as=NGRAM, sources=(SourceSpec(LOOKUP, "lookup", "sky"),),
        knobs=(Knob("num_tokens", "Tokens copied per match", "int", 1, 32,
                    info="Longest draft one lookup copies (K caps it too)."),
               Knob("max_ngram", "Longest n-gram matched", "int", 1, 6,
                    info="Tries the last n tokens, from this n down to the shortest below."),
               Knob("min_ngram", "Shortest n-gram matched", "int", 1, 6,
                    info="1 also copies after a single matching token: more drafts, more misses."),
               Knob("adaptive", "Back off after misses (plain steps, no wasted verify)", "bool")))
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
        copy = self.index.continuation(pos, min(self.num_tokens, 2 ** n) if self.scaled_len else self.num_tokens)
        tokens = copy[: ctx.k]
        return DraftTree.chain(tokens, sources=[Source(LOOKUP, ngram=n)] * len(tokens), retrieval_hit=True,
                               uncut=[copy])
