"""Proposers: one file each, behind `Proposer` (base.py). Register a new one with one line."""
from __future__ import annotations

import importlib

# method name → "module:Class". Modules load lazily so a proposer's imports cost nothing until used.
REGISTRY = {
    "draft": "draft_model:DraftModelProposer",
    "layerskip": "layer_skip:LayerSkipProposer",
    "pld": "prompt_lookup:PromptLookupProposer",
    "logitspec": "logitspec:LogitSpecProposer",
    "head": "head:HeadProposer",
    "hybrid": "hybrid:HybridProposer",
    "suffix": "suffix:SuffixProposer",
}

METHODS = ("ar", *REGISTRY)
# method "draft" with a draft from another family (a tokenizer of its own): not a method of its own
CROSS_DRAFT = "cross_draft:CrossDraftProposer"

# Default K per method: the most a cycle may draft. The planner (planner.py) sends less when
# less pays, so a default only has to stay out of a method's way: retrieval drafts are tuned
# for up to 16 tokens (prompt_lookup.py, logitspec.py); model drafts rarely pay past 8 here.
DEFAULT_K = {"ar": 1, "draft": 8, "head": 8, "layerskip": 8, "pld": 16, "logitspec": 16, "hybrid": 16,
             "suffix": 16}


def default_k(method) -> int:
    """The K a method gets when none is given (a ready-made proposer gets 8)."""
    return DEFAULT_K.get(method if isinstance(method, str) else getattr(method, "name", ""), 8)


def resolve_k(method, k: int | None) -> int:
    """`k`, or the method's default when it is None: the one place "no K given" is decided."""
    return default_k(method) if k is None else k

# In a draft-model picker, this name stands for the project's trained draft head (method "head"):
# it drafts with its own q like any draft model, but it is not a model to load from a spec.
HEAD_DRAFT = "head"


def resolve_draft(method: str, draft: str | None) -> tuple[str, str | None]:
    """(engine method, draft spec to load) for a method and a draft picker's value."""
    if method == "draft" and draft is not None and draft.strip() == HEAD_DRAFT:
        return "head", None
    return method, draft if method == "draft" else None


def proposer_class(method: str):
    """The Proposer class registered under `method`; unknown names get a list of valid ones."""
    if method not in REGISTRY:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    module, cls = REGISTRY[method].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def make_proposer(method: str, target, draft=None, **knobs):
    """Build the proposer registered under `method`; unknown names get a list of valid ones. A draft
    model whose tokenizer is not the target's (another family) gets the cross-family proposer."""
    if method == "draft" and draft is not None:
        from specviz.loading.loader import same_tokenizer

        if not same_tokenizer(target, draft):  # drafted through text
            module, cls = CROSS_DRAFT.split(":")
            return getattr(importlib.import_module(f"{__name__}.{module}"), cls).build(target, draft, **knobs)
    return proposer_class(method).build(target, draft, **knobs)
