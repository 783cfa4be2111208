"""Every registered method on a tiny twin, set up from its spec alone: the draft a method that needs one
gets (a draft derived from the target), the planner off where drafting is paid per call (a draft
call there costs about a target pass, so the planner would send nothing), and an untrained draft head
made for the twin standing where the shipped one does, so the head and the hybrid's head draft here
as they do on the bundled model. Nothing in it names a method: a new one runs here as it is."""
from __future__ import annotations

import torch

from specviz.head.model import save_head
from specviz.proposers import spec
from specviz.proposers.method_spec import PER_CALL
from specviz.training.head_fit import new_head


def use_twin_head(monkeypatch, target, folder, subset: int = 16) -> None:
    """Until the test ends, the draft head is an untrained one for `target` (its first `subset` token
    ids), read from `folder`, wherever a method asks for the shipped one."""
    from specviz.head import model
    from specviz.proposers import head

    path = folder / "twin-head.safetensors"
    subset = min(subset, target.vocab_size)
    save_head(new_head(target.model, torch.arange(subset), seed=0, intermediate=32), path, dtype=torch.float32)
    for module in (model, head):  # where the head's file is looked up, and where the proposer keys it
        monkeypatch.setattr(module, "DEFAULT_PATH", path)


def run_kwargs(method: str, draft) -> dict:
    """generate()'s or Decoder's keywords that make `method` send drafts on a twin: its draft model if
    its spec needs one, and the planner off where each draft call runs a model."""
    if method == "ar":
        return {}
    s = spec(method)
    return dict(draft=draft if s.needs_draft else None, **(dict(plan=False) if s.paid == PER_CALL else {}))
