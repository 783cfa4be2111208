"""KV caches and the one rollback function every model's cache goes through."""
from __future__ import annotations

import torch
from transformers import DynamicCache


def new_cache(config) -> DynamicCache:
    return DynamicCache(config=config)


def cache_len(cache: DynamicCache | None) -> int:
    return 0 if cache is None else int(cache.get_seq_length())


def rollback(cache: DynamicCache, keep: int | list[int]) -> None:
    """Keep the first `keep` positions, or exactly the positions listed in `keep` (in order).

    A list is how a tree cycle keeps only its accepted path. transformers 5 refuses a
    positive `crop(n)`, so a length is turned into the negative form it wants.
    """
    if isinstance(keep, int):
        drop = cache_len(cache) - keep
        if drop > 0:
            cache.crop(-drop)
        return
    n = cache_len(cache)
    if keep == list(range(len(keep))):  # a prefix: cropping is cheaper than a gather
        rollback(cache, len(keep))
        return
    for layer in cache.layers:
        if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
            continue
        index = torch.tensor(keep, device=layer.keys.device)
        if layer.keys.shape[-2] != n:
            raise RuntimeError("cache layers disagree on their length; cannot gather a path")
        layer.keys = layer.keys.index_select(-2, index)
        layer.values = layer.values.index_select(-2, index)
