"""One forward pass for several runs at once, each with its own KV cache: a ragged pass.

The runs' new tokens go through the model as one sequence of T = n_1 + ... + n_B rows, so every
linear layer, norm and the LM head run once over all of them. Only attention mixes rows, and it
is done per run: `RaggedCache` appends each run's new keys and values to that run's own cache,
and the attention function registered below attends each run's queries to its own keys with its
own mask (a draft tree's, `DraftTree.model_mask`). Nothing is padded and no cache is copied.
Where the model has our fast forward (fastpath.py) the pass runs it, with the same bits as its
modules and a third fewer tensor ops; under a class every op waits for the GIL, so that counts.

It plugs into transformers through its extension points only: a cache object (`update` and
`get_seq_length` are all a decoder layer asks of one) and a wrapper around the model's
attention function, which calls the original unless this thread is in a ragged pass. Models
whose attention is not looked up there (eager attention) report `supports(model)` False, and
their runs are verified one by one.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from specviz.passes import fastpath
from specviz.passes.kvcache import layer_kinds

_ACTIVE = threading.local()  # .layout: the RaggedCache of this thread's pass, if one is running
_WRAPPED = "_specviz_ragged_inner"  # attribute of our wrapper: the function it wraps


@dataclass
class Row:
    """One run's part of a ragged pass: its cache, the tokens to feed, their positions and mask."""
    cache: Any  # the run's DynamicCache; the pass appends the new tokens' keys and values to it
    tokens: list[int]
    position_ids: torch.Tensor  # (1, n)
    mask: Any  # (1, 1, n, past + n) additive mask, or a dict of them by layer kind


class RaggedCache:
    """What the decoder layers see as `past_key_values` in a ragged pass."""

    def __init__(self, rows: list[Row], config):
        self.rows = rows
        # each row's token count: one split per tensor and layer, not a slice per row (under a class
        # every tensor op waits for the GIL, so a pass's time follows its op count: docs/bench/2026-12-05.md)
        self.sizes = [len(row.tokens) for row in rows]
        self.kinds = [kind for kind, _ in layer_kinds(config)]
        self.full: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return 0  # positions come from each row's position_ids, never from here

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Append each row's slice to its own cache; keep what each row attends to for attention."""
        self.full[layer_idx] = [row.cache.update(k, v, layer_idx) for row, k, v in
                                zip(self.rows, keys.split(self.sizes, dim=2), values.split(self.sizes, dim=2))]
        return keys, values

    def attend(self, module, query: torch.Tensor, scaling) -> torch.Tensor:
        """Each row's queries against its own keys: (1, T, heads, head_dim), as attention returns."""
        layer = module.layer_idx
        gqa = getattr(module, "num_key_value_groups", 1) > 1
        outs = []
        # the module's own kind where it says (a layer-skip shell's layers keep their first index,
        # while its config lists the kept layers only), else the config's for this index
        kind = getattr(module, "layer_type", None) or self.kinds[layer]
        for row, q, (k, v) in zip(self.rows, query.split(self.sizes, dim=2), self.full.pop(layer)):
            mask = row.mask[kind] if isinstance(row.mask, dict) else row.mask
            outs.append(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling, enable_gqa=gqa))
        return torch.cat(outs, dim=2).transpose(1, 2).contiguous()


def supports(model: torch.nn.Module) -> bool:
    """True when ragged passes can run on `model` (installing the attention wrapper if needed)."""
    config = getattr(model, "config", None)
    name = getattr(config, "_attn_implementation", None)
    if name in (None, "eager") or getattr(config, "is_encoder_decoder", False):
        return False
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner = ALL_ATTENTION_FUNCTIONS.get(name) if name in ALL_ATTENTION_FUNCTIONS else None
    if inner is None:
        return False
    if not hasattr(inner, _WRAPPED):
        AttentionInterface.register(name, _wrap(inner))
    return True


def _wrap(inner):
    def attention(module, query, key, value, attention_mask, *args, **kwargs):
        layout = getattr(_ACTIVE, "layout", None)
        if layout is None:
            return inner(module, query, key, value, attention_mask, *args, **kwargs)
        return layout.attend(module, query, kwargs.get("scaling")), None

    setattr(attention, _WRAPPED, inner)
    return attention


def keep_outputs(module: torch.nn.Module, kept: list):
    """A forward hook on `module` that appends its output to `kept`, for this thread's calls only
    (returns the hook's handle). The module is shared: a pass another thread makes meanwhile (a
    run verifying alone, the costs being timed) must not put its states among this pass's."""
    me = threading.get_ident()

    def hook(_module, _args, out):
        if threading.get_ident() == me:  # a norm returns a tensor; some decoder layers return a tuple
            kept.append((out[0] if isinstance(out, (tuple, list)) else out)[0])

    return module.register_forward_hook(hook)


class Features:
    """A forward hook, for this thread's passes only, on the final norm `norm`: `rows()` is the latest
    pass's hidden states, one row per token (n, d). Registered here and removed by `remove()`, as
    `keep_outputs`' hooks are."""

    def __init__(self, norm: torch.nn.Module):
        self.kept: list[torch.Tensor] = []
        self.handle = keep_outputs(norm, self.kept)

    def rows(self) -> torch.Tensor:
        return self.kept[-1]

    def remove(self) -> None:
        self.handle.remove()


@torch.inference_mode()
def forward(model: torch.nn.Module, rows: list[Row], hidden_from: torch.nn.Module | None = None,
            vocab: int | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """One pass over every row: (logits per row, (n_i, vocab)), and the rows' hidden states after
    `hidden_from` (the final norm) when it is given. Each row's cache grows by its n_i tokens."""
    if not supports(model):  # also re-installs the wrapper if a later load registered the function again
        raise ValueError("this model's attention cannot run a ragged pass: verify its runs one by one")
    device = model.device
    layout = RaggedCache(rows, model.config)
    ids = torch.tensor([[t for row in rows for t in row.tokens]], device=device)
    positions = torch.cat([row.position_ids.to(device) for row in rows], dim=1)
    placeholder = torch.zeros(1, 1, ids.shape[1], 1, device=device)  # 4-D: transformers builds no mask
    _ACTIVE.layout = layout
    try:
        # our own forward where the model has one (the modules' bits with far fewer ops, fastpath.py)
        fast = fastpath.forward(model, ids, layout, positions, placeholder)
        if fast is None:
            logits, states = _modules(model, ids, positions, placeholder, layout, hidden_from)
        else:
            logits, states = fast[0][0], fast[1][0]
    finally:
        _ACTIVE.layout = None
    if layout.full:  # a layer updated the caches but did not attend through the wrapper
        raise RuntimeError("a ragged pass bypassed its attention: its results are not used")
    logits = logits[:, :vocab] if vocab else logits
    hidden = list(states.split(layout.sizes)) if hidden_from is not None else None
    return list(logits.split(layout.sizes)), hidden


def _modules(model, ids, positions, mask, layout, hidden_from) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logits (T, vocab), hidden (T, width) or None) of the pass through the model's own modules."""
    features = Features(hidden_from) if hidden_from is not None else None
    try:
        out = model(input_ids=ids, position_ids=positions, attention_mask=mask, past_key_values=layout, use_cache=True)
    finally:
        if features is not None:
            features.remove()
    return out.logits[0], (features.rows() if features is not None else None)
