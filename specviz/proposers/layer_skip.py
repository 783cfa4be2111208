"""Layer-skip self-drafting: the target's own embeddings, a subset of its layers, its norm and head.

No weights are copied: the draft is a thin shell whose modules are the target's. It keeps a
KV cache of its own, sized like the target's so each shared layer writes at its usual index.
"""
from __future__ import annotations

import copy

import torch

from specviz.drafting.tree import Source, SourceKind
from specviz.models.families import decoder_layers
from specviz.proposers.draft_model import DraftModelProposer


def default_layers(n: int) -> list[int]:
    """Skip the middle third: on SmolLM2-135M that agreed best among untrained choices."""
    return [i for i in range(n) if i < n // 3 or i >= n - n // 3]


def self_draft(model: torch.nn.Module, layers: list[int]) -> torch.nn.Module:
    """A model object that runs only `layers` of `model`, sharing every module."""
    try:
        base, attr = decoder_layers(model)
    except ValueError as e:
        raise ValueError(f"layer skip does not apply to this model: {e}") from None
    stack = getattr(base, attr)
    n = len(stack)
    if not layers or sorted(set(layers)) != list(layers) or layers[0] != 0 or layers[-1] >= n:
        raise ValueError(f"layers must be increasing indices from 0 to {n - 1} that keep layer 0, got {layers}")
    config = copy.deepcopy(model.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in layers]
    with torch.device("meta"):
        shell = type(model)(config)
    for name, module in base.named_children():
        setattr(shell.base_model, name, module)
    # each kept layer keeps its own index, so it reads and writes its usual slot of the cache
    setattr(shell.base_model, attr, torch.nn.ModuleList(stack[i] for i in layers))
    shell.set_output_embeddings(model.get_output_embeddings())
    return shell.eval()


class LayerSkipProposer(DraftModelProposer):
    name = "layerskip"
    KNOBS = ("layers",)

    @classmethod
    def build(cls, target, draft=None, layers=None, **knobs):
        cls.check_knobs(knobs)
        if getattr(target, "remote", None) is not None:
            raise ValueError("Layer skip drafts with the target's own layers, which a vLLM-served target "
                             "does not have here: pick prompt lookup, LogitSpec or a draft model.")
        n = target.model.config.num_hidden_layers
        layers = default_layers(n) if layers is None else [int(i) for i in layers]
        shell = self_draft(target.model, layers)
        proposer = cls(shell, target.model.config, target.vocab_size, target.device,
                       source=Source(SourceKind.LAYERSKIP))
        proposer.layers = layers
        proposer.call_cost = len(layers) / n  # the layers it runs, of the target's
        return proposer

