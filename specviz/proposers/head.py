"""The project's own draft head (specviz/head/model.py) proposes a chain, each token sampled from its own q.

The head needs the target's last hidden state, which the engine's forward does not return. A
forward hook on the target's final norm keeps that norm's latest output; the proposer reads it
right after each target pass, in `start` (the prefill) and `observe` (the verify pass), and keeps
the one row ctx.last_logits came from. Row j of a verify pass over [newest] + draft is the hidden
state after feed[j], so that row is 0 when nothing was accepted, else 1 + the last accepted node.
"""
from __future__ import annotations

import threading
import weakref

import torch

from specviz.head.model import DEFAULT_PATH, check_target, load_head, target_parts
from specviz.decoding.tree import DraftTree
from specviz.proposers.base import ProposeContext, Proposer


class _Capture(threading.local):
    """The latest output of one module, per thread (two decoders in two threads never mix)."""
    latest: torch.Tensor | None = None

    def hook(self, module, args, output) -> None:
        self.latest = output


_CAPTURES: "weakref.WeakKeyDictionary[torch.nn.Module, _Capture]" = weakref.WeakKeyDictionary()


def capture_output(module: torch.nn.Module) -> _Capture:
    """One hook per module, shared by every proposer on that target (runs never stack hooks)."""
    cap = _CAPTURES.get(module)
    if cap is None:
        cap = _Capture()
        module.register_forward_hook(cap.hook)
        _CAPTURES[module] = cap
    return cap


_HEADS: dict[tuple, torch.nn.Module] = {}  # loaded heads by (file, dtype, device); frozen, so shared


class HeadProposer(Proposer):
    """Autoregressive drafting: each draft step feeds the head its own predicted hidden state."""
    name = "head"
    paid_per_step = True
    step_cost = 0.07  # one head step in target steps, measured on the bundled model (docs/HEAD.md)
    KNOBS = ("path",)

    def __init__(self, head, target_model: torch.nn.Module, label: str = "head"):
        embed, norm, lm_head = target_parts(target_model)
        self.head, self.embed, self.label = head, embed, label
        self.vocab = lm_head.weight.shape[0]
        # the frozen target LM head, restricted to the head's vocabulary subset
        self.w = lm_head.weight.detach()[head.vocab_ids].to(next(head.parameters()).dtype)
        self.capture = capture_output(norm)
        self.f: torch.Tensor | None = None  # the target hidden state ctx.last_logits came from

    @classmethod
    def build(cls, target, draft=None, path=None, **knobs):
        if draft is not None:
            raise ValueError("method 'head' drafts with the project's trained head; do not pass a draft model")
        cls.check_knobs(knobs)
        key = (str(path or DEFAULT_PATH), str(target.dtype), str(target.device))
        head = _HEADS.get(key)
        if head is None:  # read once per process; a forked GPU worker inherits it with the target
            head = _HEADS[key] = load_head(path, dtype=target.dtype, device=target.device)
        check_target(head, target.model, path or DEFAULT_PATH)
        return cls(head, target.model)

    # -- the target's hidden states ------------------------------------------------------------
    def _rows(self, expected: int) -> torch.Tensor:
        """Hidden states [T, d] of the target pass that just ran; T must be what the engine fed."""
        out = self.capture.latest
        if out is None or out.shape[0] != 1 or out.shape[1] != expected:
            got = None if out is None else tuple(out.shape)
            raise RuntimeError(f"the draft head expected the target's final norm to have just seen "
                               f"{expected} positions, but it saw {got}: was the target run elsewhere "
                               f"between the verify pass and the head?")
        return out[0]

    def start(self, ids: list[int]) -> None:
        self.f = self._rows(len(ids) - 1)[-1]  # the prefill fed ids[:-1]; its last row chose ids[-1]

    def observe(self, cycle) -> None:
        row = 1 + cycle.accepted[-1] if cycle.accepted else 0  # the engine's verdict.final_row
        self.f = self._rows(1 + len(cycle.nodes))[row]

    # The hidden state travels as data: a rebuilt cache's prefill would give it again, but
    # only up to float rounding, and the next draft must not depend on where the call ran.
    def state(self) -> dict:
        return {"f": None if self.f is None else self.f.detach().to("cpu", copy=True)}

    def set_state(self, state: dict) -> None:
        f = state.get("f")
        self.f = None if f is None else f.to(self.embed.weight.device)

    def rebuild(self, ids: list[int]) -> None:
        """Nothing to rebuild: the head keeps no cache, and its one hidden state comes with the state."""

    # -- drafting ------------------------------------------------------------------------------
    def _q(self, pred: torch.Tensor, sampling) -> tuple[int, torch.Tensor]:
        """(x, q): q is the processed head distribution over the whole vocabulary, 0 off the subset."""
        logits = pred @ self.w.T
        q_sub = sampling.display_probs(logits) if sampling.greedy else sampling.probs(logits)
        j = int(q_sub.argmax()) if sampling.greedy else sampling.draw(q_sub)
        q = torch.zeros(self.vocab, dtype=q_sub.dtype, device=q_sub.device)
        q[self.head.vocab_ids] = q_sub
        return int(self.head.vocab_ids[j]), q

    @torch.inference_mode()
    def propose(self, ctx: ProposeContext) -> DraftTree:
        f, x = self.f, ctx.ids[-1]
        tokens, qs = [], []
        for _ in range(ctx.k):
            pred = self.head(f, self.embed(torch.tensor(x, device=f.device)).to(f.dtype))
            x, q = self._q(pred, ctx.sampling)
            tokens.append(x)
            qs.append(q)
            f = pred  # the next step reads the head's own guess of the hidden state
        return DraftTree.chain(tokens, qs, sources=[self.label] * len(tokens))
