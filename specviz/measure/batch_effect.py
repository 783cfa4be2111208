"""What one target pass costs: K+1 tokens against one, measured on this hardware, at batch 1 to 32.

Speculative decoding wins because a pass over K+1 tokens costs about as much as a pass over one
while the accelerator has idle compute. Batching fills that idle compute, so the ratio
verify / step rises with the batch size, and the win shrinks. `pass_times` is the one timing
primitive (theory.py uses it too for v(K)); `measure_batch_effect` caches its answer per
(model, device, dtype, K) in memory and, when given a file, on disk.

No UI libraries here: the figure is specviz.viz.compare_figures.batch_figure.
"""
from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from specviz.loading.loader import LoadedModel, cache_root
from specviz.models.common import read_cache_file, write_cache_entry
from specviz.pricing.cost_profile import renamed
from specviz.pricing.timing import hardware, pass_times

BATCH_SIZES = (1, 2, 4, 8, 16, 32)  # 32 already saturates a small GPU for a 1 B model
PREFIX_LEN = 64  # tokens already in the KV cache: a short prompt, as in the app's examples
REPEATS = 5  # timed passes per size; the fastest is kept (see pass_times)
CACHE_FILE_NAME = "batch_effect.json"

_MEMORY: dict[str, "BatchEffect"] = {}
_LOCK = threading.Lock()


@dataclass
class BatchEffect:
    """Seconds per target pass of one token (`pass_s`) and of K+1 tokens (`verify_s`) per batch size."""
    model: str
    device: str
    dtype: str
    k: int
    prefix_len: int
    batch_sizes: list[int]
    pass_s: list[float]
    verify_s: list[float]
    measured_at: str = ""
    hardware: str = ""
    cached: bool = field(default=False, compare=False)  # True when read back rather than measured now

    @property
    def ratio(self) -> list[float]:
        """verify / step per batch size: v(K) at that batch size."""
        return [v / s for v, s in zip(self.verify_s, self.pass_s)]

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("cached")
        return d


def cache_key(model: LoadedModel, k: int) -> str:
    return f"{model.name}|{model.device}|{str(model.dtype).removeprefix('torch.')}|K={int(k)}"


def default_cache_file() -> Path:
    """The on-disk cache beside the converted models ($SPECVIZ_CACHE_DIR or ~/.cache/specviz)."""
    return cache_root() / CACHE_FILE_NAME


def _from_dict(d: dict) -> BatchEffect | None:
    try:
        d = renamed(d)
        return BatchEffect(**{k: d[k] for k in ("model", "device", "dtype", "k", "prefix_len", "batch_sizes",
                                                 "pass_s", "verify_s", "measured_at", "hardware")}, cached=True)
    except (KeyError, TypeError, AttributeError):
        return None


def _fits(effect: BatchEffect | None, batch_sizes, prefix_len: int) -> bool:
    return effect is not None and list(effect.batch_sizes) == list(batch_sizes) and effect.prefix_len == prefix_len


def cached_batch_effect(model: LoadedModel, k: int, batch_sizes=BATCH_SIZES, prefix_len: int = PREFIX_LEN,
                        cache_file: Path | None = None) -> BatchEffect | None:
    """A stored result for this model, device, dtype and K, from memory or else the file; None if none."""
    key = cache_key(model, k)
    with _LOCK:
        hit = _MEMORY.get(key)
    if _fits(hit, batch_sizes, prefix_len):
        return replace(hit, cached=True)
    hit = _from_dict(read_cache_file(cache_file).get(key) or {})
    if _fits(hit, batch_sizes, prefix_len):
        with _LOCK:
            _MEMORY[key] = hit
        return hit
    return None


def measure_batch_effect(model: LoadedModel, k: int = 4, batch_sizes=BATCH_SIZES, prefix_len: int = PREFIX_LEN,
                         repeats: int = REPEATS, cache_file: Path | None = None, refresh: bool = False,
                         progress: Callable[[int, int, int], None] | None = None) -> BatchEffect:
    """Time one plain step and one verify pass of K+1 tokens at each batch size (cached unless `refresh`).

    `progress(done, total, batch)` is called before each batch size is measured.
    """
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"K must be a whole number ≥ 1, got {k!r}")
    batch_sizes = [int(b) for b in batch_sizes]
    if not refresh and (hit := cached_batch_effect(model, k, batch_sizes, prefix_len, cache_file)):
        return hit
    step, verify = [], []
    for i, b in enumerate(batch_sizes):
        if progress is not None:
            progress(i, len(batch_sizes), b)
        t = pass_times(model, (1, k + 1), batch=b, prefix_len=prefix_len, repeats=repeats)
        step.append(t[1])
        verify.append(t[k + 1])
    effect = BatchEffect(model=model.name, device=str(model.device),
                         dtype=str(model.dtype).removeprefix("torch."), k=k, prefix_len=prefix_len,
                         batch_sizes=batch_sizes, pass_s=step, verify_s=verify,
                         measured_at=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                         hardware=hardware(model.device))
    key = cache_key(model, k)
    with _LOCK:
        _MEMORY[key] = effect
    if cache_file is not None:
        write_cache_entry(cache_file, key, effect)
    return effect


def forget_cached() -> None:
    """Empty the in-memory cache (the file stays), e.g. after the hardware changed under a test."""
    with _LOCK:
        _MEMORY.clear()
