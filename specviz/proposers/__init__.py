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
}

METHODS = ("ar", *REGISTRY)


def make_proposer(method: str, target, draft=None, **knobs):
    """Build the proposer registered under `method`; unknown names get a list of valid ones."""
    if method not in REGISTRY:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(METHODS)}")
    module, cls = REGISTRY[method].split(":")
    proposer_cls = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    return proposer_cls.build(target, draft, **knobs)
