"""Timing target passes, the one way every measurement here does it: a filler prompt, a prefilled
KV cache, one pass timed (with CUDA synchronised) and rolled back, the fastest of repeats kept;
and the name of the hardware a timing belongs to (the JSON caches that keep timings on disk are
models/common.py's read_cache_file and write_cache_entry).

Used by costs.py (v(n)) and by specviz.measure.batch_effect. No UI libraries here.
"""
from __future__ import annotations

import platform
import time

import torch

from specviz.models.loaded import LoadedModel
from specviz.passes import fastpath, speedups
from specviz.passes.kvcache import new_cache, rollback


def hardware(device: torch.device) -> str:
    """The processor a timing belongs to, with the thread count that shapes a CPU's numbers."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_name()}, {torch.get_num_threads()} threads"


def cpu_name() -> str:
    for line in speedups.cpuinfo().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so a timer measures the pass and not just its launch."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def filler_ids(model: LoadedModel, batch: int, n: int, offset: int = 0) -> torch.Tensor:
    """A fixed, ordinary-looking block of ids; the cost of a pass does not depend on which ids."""
    ids = (torch.arange(n, device=model.device) * 7 + 11 + offset) % model.vocab_size
    return ids.unsqueeze(0).expand(batch, n).contiguous()


def _pass(model: LoadedModel, ids: torch.Tensor, cache, keep: int = 0) -> None:
    """One pass as a run makes it: our fast forward where the model has one (batch 1), else the modules."""
    if fastpath.forward(model.model, ids, cache, keep=keep) is None:
        model.model(input_ids=ids, past_key_values=cache, use_cache=True, **({"logits_to_keep": keep} if keep else {}))


@torch.inference_mode()
def prefix_cache(model: LoadedModel, prefix_len: int, batch: int = 1):
    """A KV cache holding `prefix_len` tokens per row: one prefill at batch 1, copied to every row."""
    cache = new_cache()
    # logits for the last row only: the prefix's own logits are never read, and the head is costly
    _pass(model, filler_ids(model, 1, prefix_len), cache, keep=1)
    if batch > 1:
        for layer in cache.layers:
            if getattr(layer, "keys", None) is not None and layer.keys.numel():
                layer.keys = layer.keys.repeat(batch, 1, 1, 1)
                layer.values = layer.values.repeat(batch, 1, 1, 1)
    return cache


@torch.inference_mode()
def timed_pass(model: LoadedModel, cache, ids: torch.Tensor, prefix_len: int) -> float:
    """Seconds of one pass over `ids` on top of `cache`, which is rolled back to `prefix_len` after."""
    sync(model.device)
    t0 = time.perf_counter()
    _pass(model, ids, cache)
    sync(model.device)
    elapsed = time.perf_counter() - t0
    rollback(cache, prefix_len)
    return elapsed


def pass_times(model: LoadedModel, sizes, prefix_len: int, batch: int = 1, repeats: int = 5) -> dict[int, float]:
    """Seconds of one target pass over n new tokens, for each n in `sizes`, after a warm-up.

    Sizes are interleaved within each repeat, and the fastest repeat is kept: other work on a
    shared machine only ever adds time to a pass, so the minimum is the least noisy estimate.
    """
    sizes = sorted(set(int(n) for n in sizes))
    if not sizes or sizes[0] < 1 or repeats < 1:
        raise ValueError("pass_times needs token counts ≥ 1 and repeats ≥ 1")
    cache = prefix_cache(model, prefix_len, batch)
    feeds = {n: filler_ids(model, batch, n, offset=prefix_len) for n in sizes}
    for n in sizes:  # the first pass of a shape pays for allocation and kernel choice
        timed_pass(model, cache, feeds[n], prefix_len)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            times[n].append(timed_pass(model, cache, feeds[n], prefix_len))
    return {n: min(ts) for n, ts in times.items()}
