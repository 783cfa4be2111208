"""The one small interface every proposer implements."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from specviz.drafting.sampling import Sampling
from specviz.drafting.tree import DRAFT, DraftTree, Source
from specviz.proposers.method_spec import PER_CALL, MethodSpec


@dataclass
class ProposeContext:
    """What a proposer may look at when it drafts.

    ids: every committed token, prompt first; ids[-1] is the newest, not yet in the target cache.
    last_logits: the target's raw logits (1-D, shared vocabulary) from which ids[-1] was chosen.
    k: the deepest draft this cycle may use (already capped by the token budget).
    """
    ids: list[int]
    last_logits: torch.Tensor
    k: int
    sampling: Sampling
    prompt_len: int
    planner: object | None = None  # planner.Planner: a proposer that drafts with a model may ask it for K
    # the target's final hidden state (after its final norm) at the position last_logits came from;
    # only for a proposer whose needs_hidden is True, else None
    last_hidden: torch.Tensor | None = None
    # True: other runs in this process may draft at the same moment, and a proposer that runs a
    # model may run its calls in one batch with theirs (passes/rounds.py); the app's runs set it
    share_passes: bool = False


class Proposer:
    """Drafts tokens for the target to verify.

    Subclasses declare `spec` (a MethodSpec: its name, label, knobs, sources, …), implement
    `propose`, and, if they keep a KV cache of their own, `rollback` and `cache_len`. Adding a
    method is its file, one line in REGISTRY (proposers/__init__.py) and its test.
    """
    spec: MethodSpec | None = None  # a registered method's identity; its `name` and `paid_per_call` follow it
    name = "base"
    source = Source(DRAFT)  # who its nodes say proposed them (the planner keys by it)
    paid_per_call = False  # True when each draft call runs a model: K is then chosen before drafting
    needs_hidden = False  # True: the engine hands it ProposeContext.last_hidden
    call_cost = 0.0  # one draft call in one-token target passes, for the planner
    KNOBS: tuple[str, ...] = ()  # the keyword options `build` takes
    # (source, reason) pairs it left uncomputed in the cycle it last drafted (the hybrid's gate.py)
    skipped: tuple[tuple[str, str], ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "spec" in cls.__dict__ and cls.spec is not None:  # a class that declares its own spec
            cls.name, cls.paid_per_call = cls.spec.name, cls.spec.paid == PER_CALL

    @classmethod
    def check_knobs(cls, knobs: dict) -> None:
        """Refuse options this method does not take, naming the ones it does."""
        unknown = sorted(set(knobs) - set(cls.KNOBS))
        if unknown:
            takes = f"it takes {', '.join(cls.KNOBS)}" if cls.KNOBS else "it takes none"
            raise ValueError(f"method '{cls.name}' has no option {', '.join(unknown)}; {takes}")

    def start(self, ids: list[int]) -> None:
        """Called once per run, after the prefill, with the prompt and the first new token."""

    def propose(self, ctx: ProposeContext) -> DraftTree:
        raise NotImplementedError

    def rollback(self, committed_len: int) -> None:
        """Forget cached state beyond what the committed tokens justify."""

    def cache_len(self) -> int | None:
        """Length of this proposer's own KV cache, or None if it keeps none."""
        return None

    def observe(self, cycle) -> None:
        """Sees each finished CycleTrace, e.g. to adapt its draft length."""

    def finish(self, run_id: str, ids: list[int], prompt_len: int) -> None:
        """Called once when the run has ended, with every committed id (the prompt's first)."""

    # -- a run's state as data (runstate.py): what survives a process boundary ----------------
    def state(self) -> dict:
        """What this proposer knows that the committed ids cannot rebuild (plain data)."""
        return {}

    def set_state(self, state: dict) -> None:
        """Take back what `state()` returned."""

    def rebuild(self, ids: list[int]) -> None:
        """Rebuild indexes and caches from the committed ids, in a process that has none."""
        self.start(ids)
