"""A separate draft model proposes a chain of K tokens, each sampled from its own q."""
from __future__ import annotations

import torch

from specviz.models.kvcache import cache_len, new_cache, rollback
from specviz.drafting.tree import DraftTree, Source, SourceKind
from specviz.proposers.base import ProposeContext, Proposer


class DraftModelProposer(Proposer):
    """Autoregressive drafting with a KV cache of its own, rolled back after every cycle."""
    name = "draft"
    paid_per_step = True

    def __init__(self, model: torch.nn.Module, config, vocab: int, device, source: Source = Source(SourceKind.DRAFT)):
        self.model, self.config, self.vocab, self.device = model, config, vocab, device
        self.source = source
        self.cache = None

    @classmethod
    def build(cls, target, draft=None, **knobs):
        if draft is None:
            raise ValueError("method 'draft' needs a draft model: pick one that shares the target's tokenizer")
        cls.check_knobs(knobs)
        proposer = cls(draft.model, draft.model.config, min(target.vocab_size, draft.vocab_size), draft.device)
        proposer.step_cost = draft.n_params / max(target.n_params, 1)  # a step costs about its weights
        return proposer

    def start(self, ids: list[int]) -> None:
        self.cache = new_cache()

    @torch.inference_mode()
    def _logits(self, tokens: list[int]) -> torch.Tensor:
        out = self.model(input_ids=torch.tensor([tokens], device=self.device),
                         past_key_values=self.cache, use_cache=True)
        return out.logits[0, -1, : self.vocab]

    def propose(self, ctx: ProposeContext) -> DraftTree:
        # catch up on every committed token the draft has not seen yet (at least the newest)
        logits = self._logits(ctx.ids[cache_len(self.cache):])
        tokens, qs = [], []
        for j in range(ctx.k):
            q = ctx.sampling.display_probs(logits) if ctx.sampling.greedy else ctx.sampling.probs(logits)
            x = int(q.argmax()) if ctx.sampling.greedy else ctx.sampling.draw(q)
            tokens.append(x)
            qs.append(q)
            if j + 1 < ctx.k:
                logits = self._logits([x])
        return DraftTree.chain(tokens, qs, sources=[self.source] * len(tokens))

    @torch.inference_mode()
    def rebuild(self, ids: list[int]) -> None:
        """One prefill of every committed token but the newest, as after a rollback."""
        self.start(ids)
        if len(ids) > 1:
            self.model(input_ids=torch.tensor([ids[:-1]], device=self.device), past_key_values=self.cache,
                       use_cache=True, logits_to_keep=1)

    def rollback(self, committed_len: int) -> None:
        # positions past the newest committed token's predecessor may hold rejected drafts
        rollback(self.cache, min(cache_len(self.cache), committed_len - 1))

    def cache_len(self) -> int | None:
        return cache_len(self.cache)
