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

from specviz.drafting.tree import Source
from specviz.models.families import decoder_layers
from specviz.proposers.draft_model import DraftModelProposer
from specviz.proposers.method_spec import PER_CALL, Knob, MethodSpec, SourceSpec

LAYERSKIP = "layerskip"  # its nodes' source kind
LAYERS_EXAMPLE = "0-9+20-29"  # the one syntax everywhere (CLI, page, survey candidates): indices and ranges


def parse_layers(text: str) -> list[int]:
    """'0-9+20-29' (or with commas, '0-9,20-29') → the kept layer indices, sorted, each once. '+'
    joins parts so that a list of candidates can itself be comma-separated (`layerskip:0-9+20-29`).
    Raises ValueError naming the part that is not an index or a range."""
    out: list[int] = []
    parts = [p.strip() for p in str(text).replace(";", ",").replace("+", ",").split(",")]
    for part in [p for p in parts if p]:
        lo, dash, hi = (x.strip() for x in part.partition("-"))
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"'{part}' is not a number or a range: write layer indices and ranges, "
                             f"e.g. {LAYERS_EXAMPLE}")
        out.extend(range(int(lo), int(hi or lo) + 1))
    if not out:
        raise ValueError(f"no layers given: write indices and ranges, e.g. {LAYERS_EXAMPLE}")
    return sorted(set(out))


def layers_text(layers: list[int]) -> str:
    """[0, 1, 2, 5, 6] → '0-2+5-6', what parse_layers reads back."""
    runs, start = [], layers[0]
    for a, b in zip(layers, list(layers[1:]) + [None]):
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return "+".join(runs)


def default_layers(n: int) -> list[int]:
    """Skip the middle third: on SmolLM2-135M that agreed best among untrained choices. Under three
    layers there is no third to keep at either end: the first layer alone drafts."""
    return [i for i in range(n) if i < n // 3 or i >= n - n // 3] or [0]


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
    spec = MethodSpec(
        "layerskip", "Layer skip (self-draft)", "drafts with a subset of the target's layers", default_k=8,
        paid=PER_CALL, sources=(SourceSpec(LAYERSKIP, "layer skip", by_model=True),),
        knobs=(Knob("layers", "Layers the draft keeps", "layers", default="",
                    info="Indices or ranges such as 0-9, 20-29 (layer 0 must stay). Blank: skip the middle third."),))
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
                       source=Source(LAYERSKIP))
        proposer.layers = layers
        proposer.call_cost = len(layers) / n  # the layers it runs, of the target's
        return proposer

