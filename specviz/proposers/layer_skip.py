"""Layer-skip self-drafting: the target's own embeddings, a subset of its layers, its norm and head.

No weights are copied: the draft is a thin shell whose modules are the target's. It keeps a
KV cache of its own, sized like the target's so each shared layer writes at its usual index.
Runs of the same target and layers share one shell (`shared_self_draft`), and so its fast
forward and one round of draft calls: a class's draft calls go through ragged passes together
instead of each run's alone.
"""
from __future__ import annotations

import copy
import threading
import weakref

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


# per target model: its shells by the layers they keep
_SHELLS: "weakref.WeakKeyDictionary[torch.nn.Module, dict[tuple[int, ...], torch.nn.Module]]" = \
    weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def shared_self_draft(model: torch.nn.Module, layers: list[int]) -> torch.nn.Module:
    """This process's one `self_draft(model, layers)`, made again only when the target's modules
    changed since (a replaced LM head, embeddings, norm or layer)."""
    with _LOCK:
        shells = _SHELLS.setdefault(model, {})
        shell = shells.get(tuple(layers))
        if shell is None or not _still_of(shell, model, layers):
            shell = shells[tuple(layers)] = self_draft(model, list(layers))
        return shell


def _still_of(shell: torch.nn.Module, model: torch.nn.Module, layers: list[int]) -> bool:
    """Whether every module of `shell` is still the one `model` has in its place."""
    base, attr = decoder_layers(model)
    if shell.get_output_embeddings() is not model.get_output_embeddings():
        return False
    if any(getattr(shell.base_model, name, None) is not module for name, module in base.named_children()
           if name != attr):
        return False
    stack = getattr(base, attr)
    return all(mine is stack[i] for mine, i in zip(getattr(shell.base_model, attr), layers))


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
        shell = shared_self_draft(target.model, layers)
        proposer = cls(shell, target.model.config, target.vocab_size, target.device,
                       source=Source(SourceKind.LAYERSKIP))
        proposer.layers = layers
        proposer.call_cost = len(layers) / n  # the layers it runs, of the target's
        return proposer

