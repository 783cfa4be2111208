"""A draft model from another family: its tokenizer is not the target's (method "draft" picks it
when the two tokenizers differ).

The draft reads the committed text in its own tokens (decoded from the target's ids, encoded
again with its tokenizer; its KV cache keeps the longest prefix that did not change) and drafts
a chain of its own tokens. What reaches the verifier are target tokens:

- **greedy**: the draft's tokens are decoded to text, and the text is encoded with the target's
  tokenizer, its boundary read together with the last committed tokens (`vocab_map.retokenize`).
  The last target token is dropped unless the draft stopped at its end of sequence: the draft's
  text may end inside a longer target token. Text the target's tokenizer cannot encode (its
  unknown token) ends the draft there. The target checks every token, so the output is
  the target's greedy output whatever the draft proposes.
- **sampling**: each draft token is drawn from the draft's q restricted to the tokens both
  vocabularies share (`VocabMap.restrict`) and renormalised; its target twin is the node, and
  that restricted q, written over the target's ids, is the q it is judged with. Drawing from
  that q and judging with it is the usual rule, so the output follows the target's distribution.
  Drafting stops where the restricted q has no mass left.

Each tree carries its `Seam` (the draft's tokens as texts, the target ids, how they were judged) for the page.
"""
from __future__ import annotations

import torch

from specviz.drafting.tree import DRAFT, DraftTree, Seam, Source
from specviz.drafting.vocab_map import VocabMap, retokenize, text_after, vocab_map
from specviz.passes.kvcache import cache_len, new_cache, rollback
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.draft_model import _plain


class CrossDraftProposer(Proposer):
    """A draft model whose tokenizer differs from the target's."""
    name = "draft"
    paid_per_call = True

    def __init__(self, target, draft, vmap: VocabMap):
        self.target_tok, self.draft_tok = target.tokenizer, draft.tokenizer
        self.model, self.device = draft.model, draft.device
        self.vmap = vmap
        self.draft_eos = set(draft.eos_ids)
        self.target_unk = getattr(target.tokenizer, "unk_token_id", None)  # what text it cannot encode becomes
        self.source = Source(DRAFT)
        self.cache, self.fed = None, []  # the draft's cache and the draft ids it holds

    @classmethod
    def build(cls, target, draft=None, **knobs):
        if draft is None:
            raise ValueError("method 'draft' needs a draft model")
        if target.tokenizer is None or draft.tokenizer is None:
            missing = "target" if target.tokenizer is None else "draft"
            raise ValueError(f"the {missing} model has no tokenizer, so a draft from another family cannot be "
                             "turned into its tokens: pick a model that comes with its tokenizer")
        cls.check_knobs(knobs)
        vmap = vocab_map(target, draft)
        if vmap.shared == 0:
            raise ValueError(f"draft '{draft.name}' and target '{target.name}' have no token text in common, so "
                             "the draft cannot propose anything the target can judge: pick another draft")
        proposer = cls(target, draft, vmap)
        proposer.call_cost = draft.n_params / max(target.n_params, 1)
        return proposer

    def start(self, ids: list[int]) -> None:
        self.cache, self.fed = new_cache(), []

    def rebuild(self, ids: list[int]) -> None:
        self.start(ids)

    def cache_len(self) -> int | None:
        return None if self.cache is None else cache_len(self.cache)

    def _context(self, ids: list[int]) -> list[int]:
        """The committed text in the draft's own tokens (its special tokens, such as a BOS, added)."""
        text = self.target_tok.decode(ids, skip_special_tokens=True)
        return list(self.draft_tok(text, add_special_tokens=True)["input_ids"]) or [0]

    @torch.inference_mode()
    def _catch_up(self, context: list[int]) -> torch.Tensor:
        """The draft's logits after `context`: its cache cut back to the prefix it shares with what
        it held, then the rest fed (at least the newest token, whose logits are wanted)."""
        same = 0
        for a, b in zip(self.fed, context):
            if a != b:
                break
            same += 1
        same = min(same, len(context) - 1)
        rollback(self.cache, same)
        self.fed = list(context)
        return _plain(self.model, self.cache, context[same:], self.device)

    @torch.inference_mode()
    def _step(self, token: int) -> torch.Tensor:
        self.fed.append(token)
        return _plain(self.model, self.cache, [token], self.device)

    def propose(self, ctx: ProposeContext) -> DraftTree:
        if self.cache is None:
            self.start(ctx.ids)
        context = self._context(ctx.ids)
        logits = self._catch_up(context)
        if ctx.sampling.greedy:
            return self._greedy(ctx, context, logits)
        return self._sampled(ctx, context, logits)

    def _texts(self, context: list[int], drafted: list[int]) -> tuple[str, ...]:
        """Each drafted token's text as it reads after the context and the tokens before it."""
        return tuple(text_after(self.draft_tok, context + drafted[:i], [x]) for i, x in enumerate(drafted))

    def _greedy(self, ctx: ProposeContext, context: list[int], logits: torch.Tensor) -> DraftTree:
        drafted: list[int] = []
        for j in range(ctx.k):
            x = int(logits.argmax())
            drafted.append(x)
            if x in self.draft_eos:
                break
            if j + 1 < ctx.k:
                logits = self._step(x)
        ended = drafted[-1] in self.draft_eos
        body = drafted[:-1] if ended else drafted
        text = text_after(self.draft_tok, context, body)
        tokens, seam = retokenize(self.target_tok, ctx.ids, text) if text else ([], 0)
        cut = ""
        if self.target_unk is not None and self.target_unk in tokens:  # text the target cannot encode
            tokens, ended = tokens[: tokens.index(self.target_unk)], False
            cut = "the draft's text has characters the target's tokenizer cannot encode; the proposal stops there"
        elif not ended and len(tokens) > 1:
            tokens = tokens[:-1]  # the draft's text may stop inside the last one
            cut = "the last target token is left out: the draft's text may stop inside it"
        if ended and int(self.vmap.to_target[drafted[-1]]) >= 0:  # its end of sequence, as the target's
            tokens = tokens + [int(self.vmap.to_target[drafted[-1]])]
        if len(tokens) > ctx.k:
            tokens, cut = tokens[: ctx.k], f"cut to K = {ctx.k} target tokens"
        seam_info = Seam(self._texts(context, drafted), tuple(tokens), True, self.vmap.shared, cut)
        return DraftTree.chain(tokens, sources=[self.source] * len(tokens), seam=seam_info)

    def _sampled(self, ctx: ProposeContext, context: list[int], logits: torch.Tensor) -> DraftTree:
        tokens, qs, drafted, cut = [], [], [], ""
        for j in range(ctx.k):
            q = self.vmap.restrict(ctx.sampling.probs(logits))
            if q is None:  # every token the draft would draw is one the target lacks
                cut = "every token the draft could draw here is missing from the target's vocabulary"
                break
            x = ctx.sampling.draw(q)
            drafted.append(x)
            tokens.append(int(self.vmap.to_target[x]))
            qs.append(self.vmap.on_target(q))
            if x in self.draft_eos:
                break
            if j + 1 < ctx.k:
                logits = self._step(x)
        seam_info = Seam(self._texts(context, drafted), tuple(tokens), False, self.vmap.shared, cut)
        return DraftTree.chain(tokens, qs, sources=[self.source] * len(tokens), seam=seam_info)
