"""A separate draft model proposes a chain of K tokens, each sampled from its own q.

With other runs drafting on the same draft model at the same moment (ProposeContext.share_passes),
their calls go through it as one ragged pass (passes/ragged.py, passes/rounds.py), each over its
own cache; a call alone is the plain pass.
"""
from __future__ import annotations

import weakref

import torch

from specviz.drafting.tree import DRAFT, DraftTree, Source
from specviz.passes import fastpath, ragged
from specviz.passes.kvcache import cache_len, new_cache, rollback, undo_pass
from specviz.passes.rounds import Rounds, Slot
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.method_spec import DRAFT_MODEL, PER_CALL, MethodSpec, SourceSpec

MAX_CALL_TOKENS = 512  # tokens in one shared draft pass (a run catching up may bring many)


def _plain(model: torch.nn.Module, cache, tokens: list[int], device=None, last_only: bool = False) -> torch.Tensor:
    """The last row's logits of one pass of `model` over `tokens`, appended to `cache`: our own
    forward where the draft has one (passes/fastpath.py, the modules' bits), else its modules.
    `last_only` runs the LM head on that row alone (a long prefill's other rows are never read)."""
    ids = torch.tensor([tokens], device=device or model.device)
    fast = fastpath.forward(model, ids, cache, keep=1 if last_only else 0)
    if fast is not None:
        return fast[0][0, -1]
    out = model(input_ids=ids, past_key_values=cache, use_cache=True, **({"logits_to_keep": 1} if last_only else {}))
    return out.logits[0, -1]


class _SharedCalls:
    """The draft model's calls of every run waiting at the same moment, as one ragged pass."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.rounds = Rounds(self._batch, size=lambda r: len(r[1]), max_size=MAX_CALL_TOKENS)

    @torch.inference_mode()
    def _batch(self, slots: list[Slot]) -> int:
        if len(slots) > 1:
            before = [cache_len(s.request[0]) for s in slots]
            try:
                logits, _ = ragged.forward(self.model, [self._row(*s.request) for s in slots])
            except Exception:  # noqa: BLE001 -- put every cache back; each call runs alone below
                for slot, n in zip(slots, before):
                    undo_pass(slot.request[0], n)
            else:
                for slot, rows in zip(slots, logits):
                    slot.settle(rows[-1])
                return len(slots)
        for slot in slots:
            try:
                slot.settle(_plain(self.model, *slot.request))
            except Exception as e:  # noqa: BLE001 -- it belongs to the request's own thread
                slot.settle(error=e)
        return 1

    def _row(self, cache, tokens: list[int]) -> ragged.Row:
        chain, model = DraftTree.chain(tokens[1:]), self.model
        mask = chain.model_mask(cache, model.config, model.dtype, model.device)
        return ragged.Row(cache, tokens, chain.position_ids(cache_len(cache), model.device), mask)


_SHARED: "weakref.WeakKeyDictionary[torch.nn.Module, _SharedCalls]" = weakref.WeakKeyDictionary()


def shared_calls(model: torch.nn.Module) -> _SharedCalls | None:
    """The one _SharedCalls of this process for `model`, or None when it cannot run ragged passes."""
    if not ragged.supports(model):
        return None
    if model not in _SHARED:
        _SHARED[model] = _SharedCalls(model)
    return _SHARED[model]


class DraftModelProposer(Proposer):
    """Autoregressive drafting with a KV cache of its own, rolled back after every cycle."""
    spec = MethodSpec(
        "draft", "Draft model", "drafts with a smaller model, of the target's family or, through text, another's",
        default_k=8, paid=PER_CALL, deploys_as=DRAFT_MODEL, needs_draft=True,
        sources=(SourceSpec(DRAFT, "draft model", by_model=True),))

    def __init__(self, model: torch.nn.Module, config, vocab: int, device, source: Source = Source(DRAFT)):
        self.model, self.config, self.vocab, self.device = model, config, vocab, device
        self.source = source
        self.cache = None

    @classmethod
    def build(cls, target, draft=None, **knobs):
        if draft is None:
            raise ValueError("method 'draft' needs a draft model: pick one in the draft picker")
        cls.check_knobs(knobs)
        proposer = cls(draft.model, draft.model.config, min(target.vocab_size, draft.vocab_size), draft.device)
        proposer.call_cost = draft.n_params / max(target.n_params, 1)  # a step costs about its weights
        return proposer

    def start(self, ids: list[int]) -> None:
        self.cache = new_cache()

    @torch.inference_mode()
    def _logits(self, tokens: list[int], share_passes: bool = False) -> torch.Tensor:
        shared = shared_calls(self.model) if share_passes else None
        if shared is not None:
            return shared.rounds.submit((self.cache, tokens))[: self.vocab]
        return _plain(self.model, self.cache, tokens, self.device)[: self.vocab]

    def propose(self, ctx: ProposeContext) -> DraftTree:
        # catch up on every committed token the draft has not seen yet (at least the newest)
        logits = self._logits(ctx.ids[cache_len(self.cache):], ctx.share_passes)
        tokens, qs = [], []
        for j in range(ctx.k):
            q = ctx.sampling.display_probs(logits) if ctx.sampling.greedy else ctx.sampling.probs(logits)
            x = int(q.argmax()) if ctx.sampling.greedy else ctx.sampling.draw(q)
            tokens.append(x)
            qs.append(q)
            if j + 1 < ctx.k:
                logits = self._logits([x], ctx.share_passes)
        return DraftTree.chain(tokens, qs, sources=[self.source] * len(tokens))

    @torch.inference_mode()
    def rebuild(self, ids: list[int]) -> None:
        """One prefill of every committed token but the newest, as after a rollback."""
        self.start(ids)
        if len(ids) > 1:
            _plain(self.model, self.cache, ids[:-1], self.device, last_only=True)

    def rollback(self, committed_len: int) -> None:
        # positions past the newest committed token's predecessor may hold rejected drafts
        rollback(self.cache, min(cache_len(self.cache), committed_len - 1))

    def cache_len(self) -> int | None:
        return cache_len(self.cache)
