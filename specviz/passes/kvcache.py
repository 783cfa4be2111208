"""KV caches and the one rollback function every model's cache goes through.

Our caches keep every position in every layer, sliding-window layers included: the model's
own mask applies the window, and a rollback can always return to any earlier length. (A
transformers sliding layer keeps only its window, so once full it cannot be cropped: the
verify pass it just saw has pushed out positions the rolled-back cache needs again.)

`rollback` also takes caches whose layers hold different lengths: layers a layer-skip draft
never runs stay empty, and a transformers sliding layer that records its past
(`activate_past_recording`) holds only its window plus the latest pass.

A target served elsewhere (vLLM) has a `TokenCache`: only the token ids the server was sent as
this run's context, since the server keeps the keys and values (its prefix cache). Every function
here takes one too, so the engine rolls back both kinds the same way.
"""
from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

FULL, SLIDING = "full_attention", "sliding_attention"


class GrowingLayer(DynamicLayer):
    """A DynamicLayer that appends in place. transformers' own concatenates the whole layer with
    each pass's new states, so every pass copies the cache, a cost that grows with the context
    (docs/bench/2026-12-02.md, "the cache's append"). This one writes into spare room at the
    end of a buffer and shows `keys` and `values` as views of its first positions; a rollback that
    slices keeps them views, so the next pass writes right after the kept prefix. When `keys` is no
    longer such a view (a gather, a sliding layer's trim, a caller's own tensor), the next pass copies
    it into a new buffer once. The numbers are the same as concatenating: only where they live changes."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._room: tuple[torch.Tensor, torch.Tensor] | None = None  # (keys, values) buffers

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        held = 0 if self.keys is None or self.keys.numel() == 0 else self.keys.shape[-2]
        total = held + key_states.shape[-2]
        if not self._fits(key_states, held, total):
            self._regrow(key_states, value_states, held, total)
        keys, values = self._room
        keys[..., held:total, :] = key_states
        values[..., held:total, :] = value_states
        self.keys, self.values = keys[..., :total, :], values[..., :total, :]
        return self.keys, self.values

    def _fits(self, new: torch.Tensor, held: int, total: int) -> bool:
        """Whether `keys` is still a view of the buffer's first positions, with room for `total`."""
        room = self._room
        if room is None or total > room[0].shape[-2] or room[0].shape[:-2] != new.shape[:-2]:
            return False
        if room[0].is_inference() and not torch.is_inference_mode_enabled():
            return False  # an inference tensor takes in-place writes only in inference mode
        if held == 0:
            return True
        return all(t.data_ptr() == buf.data_ptr() and t.stride() == buf.stride()
                   for t, buf in zip((self.keys, self.values), room))

    def _regrow(self, key_states: torch.Tensor, value_states: torch.Tensor, held: int, total: int) -> None:
        """A new buffer with room to spare (half as much again, at least 256 positions), holding `keys`."""
        size = total + max(256, total // 2)
        room = []
        for old, new in ((self.keys, key_states), (self.values, value_states)):
            buf = new.new_empty((*new.shape[:-2], size, new.shape[-1]))
            if held:
                buf[..., :held, :] = old
            room.append(buf)
        self._room = (room[0], room[1])

    def reset(self) -> None:
        self._room = None
        super().reset()


class GrowingCache(DynamicCache):
    """A DynamicCache of GrowingLayers: what `new_cache` makes."""

    def __init__(self):
        super().__init__()
        self.layer_class_to_replicate = GrowingLayer
        self._whole = self._whole_rooms = None  # every layer's one buffer, where _copy_together made one


def new_cache() -> DynamicCache:
    """An empty cache whose layers keep every position (see the module docstring for why) and
    append in place (GrowingLayer): no config is taken, since the layer kinds a config names only
    change the mask, which the model builds from its own config."""
    return GrowingCache()


class TokenCache:
    """A served target's cache as this process sees it: the run's context ids (see the module
    docstring). `served` keeps what the server last reported about its own cache."""

    def __init__(self, ids: list[int] | None = None):
        self.ids: list[int] = list(ids or [])
        self.served: dict = {}


def cache_len(cache: DynamicCache | TokenCache | None) -> int:
    """Positions the cache has seen: its longest layer (skipped or windowed layers hold fewer)."""
    if cache is None:
        return 0
    if isinstance(cache, TokenCache):
        return len(cache.ids)
    return max((int(layer.get_seq_length()) for layer in cache.layers), default=0)


def layer_kinds(config) -> list[tuple[str, int | None]]:
    """(kind, sliding window or None) per decoder layer, as the model's config declares them."""
    cfg = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    window = getattr(cfg, "sliding_window", None)
    kinds = getattr(cfg, "layer_types", None)
    if kinds is None:  # no per-layer list: the whole model slides when it has a window (as Mistral)
        kinds = [SLIDING if window else FULL] * int(cfg.num_hidden_layers)
    return [(kind, window if kind == SLIDING else None) for kind in kinds]


def rollback(cache: DynamicCache, keep: int | list[int]) -> None:
    """Keep the first `keep` positions, or exactly the positions listed in `keep` (in order).

    A list is how a tree cycle keeps only its accepted path. Each layer is cut by slicing, not
    with transformers' `crop`, which refuses positive lengths and full sliding layers.
    """
    if isinstance(cache, TokenCache):
        cache.ids = cache.ids[:keep] if isinstance(keep, int) else [cache.ids[p] for p in keep]
        return
    n = cache_len(cache)
    if isinstance(keep, int):
        keep = min(keep, n)  # still visit every layer: a recording sliding layer trims to its window
    elif keep == list(range(len(keep))):  # a prefix: slicing is cheaper than a gather
        keep = len(keep)
    whole = _together(cache, n) if isinstance(keep, int) else None
    if whole is not None:  # every layer in one cut
        _views(cache, whole, keep)
        return
    for layer in cache.layers:
        if getattr(layer, "keys", None) is not None and layer.keys.numel() > 0:
            _keep_in_layer(layer, n, keep)


def keep_path(cache: DynamicCache, n: int, path: list[int]) -> None:
    """Keep the first `n` positions, then the positions in `path` (each ≥ n, in order): what a tree
    cycle keeps. The path's entries move down next to the prefix in place and the layer is cut,
    so the cost is that of the path, whatever the context length. A layer that no longer holds
    every position (a sliding one) takes the general `rollback`."""
    if not path:
        rollback(cache, n)
        return
    if any(p < n for p in path):
        raise ValueError(f"the path must lie after the kept prefix of {n} positions, got {path}")
    if isinstance(cache, TokenCache):
        rollback(cache, list(range(n)) + list(path))
        return
    total = cache_len(cache)
    indices: dict = {}  # the path as a tensor, made once per device, not once per layer
    with torch.inference_mode():  # the pass made these tensors in inference mode: in-place is allowed here
        whole = _together(cache, total)
        if whole is not None:  # every layer's path moved by one gather and one copy
            m = n + len(path)
            whole[..., n:m, :] = whole.index_select(-2, torch.tensor(path, device=whole.device))
            _views(cache, whole, m)
            return
        for layer in cache.layers:
            if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
                continue
            if layer.keys.shape[-2] != total or getattr(layer, "is_sliding", False):
                _keep_in_layer(layer, total, list(range(n)) + list(path))
                continue
            device = layer.keys.device
            index = indices.get(device)
            if index is None:
                index = indices[device] = torch.tensor(path, device=device)
            m = n + len(path)
            for t in (layer.keys, layer.values):
                t[..., n:m, :] = t.index_select(-2, index)
            layer.keys, layer.values = layer.keys[..., :m, :], layer.values[..., :m, :]


def _together(cache, total: int) -> torch.Tensor | None:
    """The one buffer (layers, keys/values, batch, heads, room, head dim) that `_copy_together` put
    every layer of `cache` in, while each layer still shows its first `total` positions from it;
    else None. A layer that regrew has left it, and then the cache lets the buffer go (`_whole`)."""
    whole = getattr(cache, "_whole", None)
    if whole is None:
        return None
    rooms = cache._whole_rooms
    if len(cache.layers) != len(rooms):
        cache._whole = cache._whole_rooms = None
        return None
    for layer, room in zip(cache.layers, rooms):
        if getattr(layer, "_room", None) is not room:
            cache._whole = cache._whole_rooms = None
            return None
        for t, buf in zip((layer.keys, layer.values), room):
            if t.shape[-2] != total or t.data_ptr() != buf.data_ptr() or t.stride() != buf.stride():
                return None
    return whole


def _views(cache, whole: torch.Tensor, m: int) -> None:
    """Every layer shows its first `m` positions of `whole`: five tensor operations for all of them
    (a layer at a time it was two or more each, and under a class every operation waits for the GIL)."""
    cut = whole[..., :m, :]
    for layer, keys, values in zip(cache.layers, cut[:, 0].unbind(0), cut[:, 1].unbind(0)):
        layer.keys, layer.values = keys, values


def _keep_in_layer(layer, n: int, keep: int | list[int]) -> None:
    """Cut one layer, which holds the last `held` of the cache's `n` positions."""
    held = layer.keys.shape[-2]
    first = n - held  # first position this layer still holds
    if first and not getattr(layer, "is_sliding", False):
        raise ValueError(f"a cache layer holds {held} positions but the cache has seen {n}: "
                         "only sliding-window layers may hold fewer")
    if isinstance(keep, int):
        total = keep
        end = max(keep - first, 0)
        keys, values = layer.keys[..., :end, :], layer.values[..., :end, :]
    else:
        total = len(keep)
        index = torch.tensor([p - first for p in keep if p >= first], device=layer.keys.device)
        keys, values = layer.keys.index_select(-2, index), layer.values.index_select(-2, index)
    _store(layer, keys, values, total)


def _store(layer, keys: torch.Tensor, values: torch.Tensor, total: int) -> None:
    """Put the cut states back; a sliding layer keeps its window and must still have all of it."""
    window = getattr(layer, "sliding_window", None) if getattr(layer, "is_sliding", False) else None
    need = total if window is None else min(total, window - 1)
    if keys.shape[-2] < need:
        raise ValueError("this cache cannot be rolled back: a sliding-window layer has already dropped "
                         "positions the shorter context needs again. Build caches with "
                         "specviz.passes.kvcache.new_cache, or call activate_past_recording() on this one.")
    if window is not None:
        keys, values = keys[..., keys.shape[-2] - need:, :], values[..., values.shape[-2] - need:, :]
        layer.cumulative_length = total
    layer.keys, layer.values = keys, values


def undo_pass(cache: DynamicCache, n: int) -> None:
    """Back to the first `n` positions after a pass that failed part-way, when some layers took its
    tokens and others did not (a cache from new_cache: every layer keeps every position)."""
    if isinstance(cache, TokenCache):
        cache.ids = cache.ids[:n]
        return
    for layer in cache.layers:
        if getattr(layer, "keys", None) is not None and layer.keys.numel() > 0 and layer.keys.shape[-2] > n:
            layer.keys, layer.values = layer.keys[..., :n, :], layer.values[..., :n, :]


def copy_cache(cache: DynamicCache) -> DynamicCache:
    """An independent copy: the same positions in every layer, in new tensors (a deepcopy walks
    every object of the cache in Python, several times slower on a class's first Steps).

    A cache whose layers all hold the same shape (every shared prefill) is copied in a handful of
    tensor operations, into one buffer with a GrowingLayer's spare room after each layer's
    positions; layer by layer it took about ten operations a layer, and on a busy server every
    operation gives up the GIL and waits to get it back, so 100 first Steps spent more time on
    these copies than the model spent on their passes."""
    if isinstance(cache, TokenCache):
        return TokenCache(cache.ids)
    layers = list(cache.layers)
    if _same_shape(layers):
        return _copy_together(layers)
    out = new_cache()
    for i, layer in enumerate(layers):
        if getattr(layer, "keys", None) is not None and layer.keys.numel() > 0:
            out.update(layer.keys.clone(), layer.values.clone(), i)
    return out


def _same_shape(layers: list) -> bool:
    """Whether every layer is a plain full layer holding keys and values of one shape, dtype and device."""
    if not layers or any(type(layer) not in (DynamicLayer, GrowingLayer) for layer in layers):
        return False
    first = layers[0].keys
    if first is None or first.dim() != 4 or first.numel() == 0:
        return False
    return all(layer.keys is not None and layer.values is not None
               and layer.keys.shape == first.shape == layer.values.shape
               and layer.keys.dtype == first.dtype == layer.values.dtype
               and layer.keys.device == first.device == layer.values.device for layer in layers)


def _copy_together(layers: list) -> DynamicCache:
    """`copy_cache` of layers that `_same_shape` accepts: one buffer, two stacked copies."""
    shape = layers[0].keys.shape
    held = shape[-2]
    size = held + max(256, held // 2)  # the spare room GrowingLayer._regrow would give
    room = layers[0].keys.new_empty((len(layers), 2, *shape[:-2], size, shape[-1]))
    room[:, 0, :, :, :held] = torch.stack([layer.keys for layer in layers])
    room[:, 1, :, :, :held] = torch.stack([layer.values for layer in layers])
    # each layer's views in two unbinds apiece, not five indexings a layer
    rooms_k, rooms_v = room[:, 0].unbind(0), room[:, 1].unbind(0)
    keys, values = room[:, 0, :, :, :held].unbind(0), room[:, 1, :, :, :held].unbind(0)
    out = new_cache()
    for i in range(len(layers)):
        layer = GrowingLayer()
        layer.dtype, layer.device, layer.is_initialized = room.dtype, room.device, True
        layer._room, layer.keys, layer.values = (rooms_k[i], rooms_v[i]), keys[i], values[i]
        out.layers.append(layer)
    out._whole, out._whole_rooms = room, [layer._room for layer in out.layers]  # rollbacks cut all at once
    return out


