"""The project's own draft head (specviz/head/model.py) proposes a chain, each token sampled from its own q.

The head reads the target's final hidden state at the position ctx.last_logits came from. It asks
for it with `needs_hidden`, and the engine, which ran that pass and knows which row it committed
from, hands it over as ctx.last_hidden (and keeps it in the run's state). The head keeps nothing.
"""
from __future__ import annotations

import weakref

import torch

from specviz.head.model import DEFAULT_PATH, check_target, load_head, target_parts
from specviz.drafting.tree import DraftTree, Source, SourceKind
from specviz.models.remote import HIDDEN_REFUSED
from specviz.models.rounds import Rounds, Slot
from specviz.proposers.base import ProposeContext, Proposer


_HEADS: dict[tuple, torch.nn.Module] = {}  # loaded heads by (file, dtype, device); frozen, so shared


class _Steps:
    """One head step for many runs: the rows that wait at the same moment go through the head and
    the subset LM head as one batch (models/rounds.py). A row alone runs exactly as before.

    Shared per (head, target LM head), so it also holds the frozen LM head restricted to the head's
    vocabulary subset, gathered once, not once per run (a Step that starts a run would copy megabytes)."""

    def __init__(self, head, embed: torch.nn.Module, lm_head: torch.nn.Module):
        self.head, self.embed = head, embed
        self.w = lm_head.weight.detach()[head.vocab_ids].to(next(head.parameters()).dtype)
        self.rounds = Rounds(self._batch, max_size=MAX_ROWS)

    def one(self, f: torch.Tensor, x: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the predicted hidden state, its subset logits) for hidden state `f` and next token `x`."""
        pred = self.head(f, self.embed(torch.tensor(x, device=f.device)).to(f.dtype))
        return pred, pred @ self.w.T

    @torch.inference_mode()
    def _batch(self, slots: list[Slot]) -> int:
        if len(slots) == 1:
            slots[0].settle(self.one(*slots[0].request))
            return 1
        f = torch.stack([s.request[0] for s in slots])
        x = torch.tensor([s.request[1] for s in slots], device=f.device)
        pred = self.head(f, self.embed(x).to(f.dtype))
        logits = pred @ self.w.T
        for i, slot in enumerate(slots):
            slot.settle((pred[i], logits[i]))
        return len(slots)


MAX_ROWS = 64  # runs in one head round: 30 rows cost 3 rows' time here (docs/BENCHMARKS.md)
_STEPS: "weakref.WeakKeyDictionary[torch.nn.Module, tuple]" = weakref.WeakKeyDictionary()


def _steps(head, embed: torch.nn.Module, lm_head: torch.nn.Module) -> _Steps:
    """The one _Steps of this process for (head, LM head)."""
    kept = _STEPS.get(lm_head)
    if kept is None or kept[0]() is not head:
        kept = _STEPS[lm_head] = (weakref.ref(head), _Steps(head, embed, lm_head))
    return kept[1]


class HeadProposer(Proposer):
    """Autoregressive drafting: each draft step feeds the head its own predicted hidden state."""
    name = "head"
    source = Source(SourceKind.HEAD)
    paid_per_step = True
    needs_hidden = True
    step_cost = 0.07  # one head step in target steps, measured on the bundled model (docs/HEAD.md)
    KNOBS = ("path",)

    def __init__(self, head, target_model: torch.nn.Module):
        embed, _norm, lm_head = target_parts(target_model)
        self.head = head
        self.vocab = lm_head.weight.shape[0]
        self.steps = _steps(head, embed, lm_head)

    @classmethod
    def build(cls, target, draft=None, path=None, **knobs):
        if draft is not None:
            raise ValueError("method 'head' drafts with the project's trained head; do not pass a draft model")
        cls.check_knobs(knobs)
        if getattr(target, "remote", None) is not None:
            raise ValueError(HIDDEN_REFUSED)
        key = (str(path or DEFAULT_PATH), str(target.dtype), str(target.device))
        head = _HEADS.get(key)
        if head is None:  # read once per process; a forked GPU worker inherits it with the target
            head = _HEADS[key] = load_head(path, dtype=target.dtype, device=target.device)
        check_target(head, target.model, path or DEFAULT_PATH)
        return cls(head, target.model)

    # -- drafting ------------------------------------------------------------------------------
    def _q(self, logits: torch.Tensor, sampling) -> tuple[int, torch.Tensor]:
        """(x, q) from subset logits: q is the processed head distribution over the whole
        vocabulary, 0 off the subset."""
        q_sub = sampling.display_probs(logits) if sampling.greedy else sampling.probs(logits)
        j = int(q_sub.argmax()) if sampling.greedy else sampling.draw(q_sub)
        q = torch.zeros(self.vocab, dtype=q_sub.dtype, device=q_sub.device)
        q[self.head.vocab_ids] = q_sub
        return int(self.head.vocab_ids[j]), q

    @torch.inference_mode()
    def propose(self, ctx: ProposeContext) -> DraftTree:
        f, x = ctx.last_hidden, ctx.ids[-1]
        if f is None:
            raise RuntimeError("the draft head needs ctx.last_hidden: the engine hands it over to "
                               "proposers whose needs_hidden is True")
        tokens, qs = [], []
        for _ in range(ctx.k):
            # with other runs drafting beside this one, their steps go through the head together
            pred, logits = self.steps.rounds.submit((f, x)) if ctx.together else self.steps.one(f, x)
            x, q = self._q(logits, ctx.sampling)
            tokens.append(x)
            qs.append(q)
            f = pred  # the next step reads the head's own guess of the hidden state
        return DraftTree.chain(tokens, qs, sources=[self.source] * len(tokens))
