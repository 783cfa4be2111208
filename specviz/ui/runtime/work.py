"""What runs a model: pure functions of (model specs, state) that return the new state.

Each is wrapped by zerogpu.on_gpu, so on ZeroGPU it runs in a forked worker: it may read the
models the main process loaded before the call (fork shares them), must not load any, and
sends back only what it returns or yields. KV caches it builds are parked in its own process
(runstate.LIVE) and may be gone next time; Decoder.resume rebuilds them with one prefill.
"""
from __future__ import annotations

import time
from typing import Iterator

from specviz.advise import advisor
from specviz.decoding import planner
from specviz.decoding.engine import Decoder
from specviz.decoding.runstate import RunState
from specviz.decoding.served import served_plain
from specviz.decoding.trace import RunTrace
from specviz.loading.loader import LoadedModel
from specviz.measure import batch_effect
from specviz.measure.comparison import Comparison
from specviz.pricing.costs import CostProfile
from specviz.ui.runtime.state import MODELS
from specviz.ui.runtime.zerogpu import ModelNotInWorker, on_gpu

FRAME_S = 0.12  # least time between streamed frames: faster than the eye needs, cheap to send
# GPU seconds asked for. ZeroGPU admits a call only if the visitor's quota left covers the request
# and serves short requests first, so ask for what the work needs, measured (docs/ZEROGPU.md,
# scripts/gpu_call_costs.py): in a forked worker on one CPU thread a Step took 0.4-1.1 s, a fresh
# worker's Step on a 2048-token prompt 9.5 s, a Run 0.015-0.065 s a token; a GPU is faster. A
# worker still busy zerogpu.DEADLINE_MARGIN_S past its request ends itself.
STEP_S = 10  # one cycle, plus one prefill if this worker has no cache for the run
PER_TOKEN_S = 0.1  # per new token to decode
MAX_S = 240  # beyond this ZeroGPU refuses anonymous visitors' requests anyway


def model(spec: str | None) -> LoadedModel | None:
    """A model the main process loaded before this call; never loaded here. On ZeroGPU a worker
    forked before that load lacks it: zerogpu.on_gpu then calls again in a fresh worker."""
    if spec is None:
        return None
    loaded = MODELS.peek(spec)
    if loaded is None:
        raise ModelNotInWorker(f"Model '{spec}' is not loaded in this process any more (the model pool "
                             "made room for another): press the button again to reload it.")
    return loaded


def _seconds(tokens: int, base: float = STEP_S) -> int:
    return int(min(MAX_S, base + PER_TOKEN_S * max(tokens, 0)))


# -- the main view ----------------------------------------------------------------------------------
def step_duration(specs: tuple, state: RunState) -> int:
    return STEP_S


@on_gpu(duration=step_duration)
def step(specs: tuple, state: RunState) -> RunState:
    """One cycle of the run in `state` (given without its trace); returns the state after it."""
    target, draft = model(specs[0]), model(specs[1])
    decoder = Decoder.resume(target, state, draft)
    try:
        decoder.step()
    finally:
        decoder.park()
    return decoder.state()


@on_gpu(duration=step_duration)
def prefill(specs: tuple, state: RunState) -> bool:
    """Prefill the run's prompt into this process's shared prefills (decoding/prefills.py) and
    drop the run: the page's example prompts at start-up, so a class's first Steps copy them.
    True when the prefill was computed here, False when it was already kept."""
    decoder = Decoder.resume(model(specs[0]), state, model(specs[1]))
    decoder.prefill()
    return not decoder.prefill_shared


def run_duration(specs: tuple, state: RunState, frame_s: float = FRAME_S) -> int:
    left = int(state.options.get("max_new_tokens", 128)) - len(state.origins)
    return _seconds(left)


@on_gpu(duration=run_duration)
def run(specs: tuple, state: RunState, frame_s: float = FRAME_S) -> Iterator[RunState]:
    """Decode to the end in one call, so its timing has no gaps; yield the state every frame_s.

    Each yielded state carries only the cycles since the previous one (merge with RunState.merge).
    """
    target, draft = model(specs[0]), model(specs[1])
    decoder = Decoder.resume(target, state, draft)
    sent, shown = 0, time.perf_counter()
    try:
        while decoder.step() is not None:
            if decoder.done or time.perf_counter() - shown >= frame_s:
                yield decoder.state(since=sent)
                sent, shown = len(decoder.cycles), time.perf_counter()
        if sent < len(decoder.cycles) or not decoder.cycles:
            yield decoder.state(since=sent)
    finally:
        decoder.park()


def baseline_duration(spec: str, prompt_ids: list[int], options: dict, frame_s: float = FRAME_S) -> int:
    return _seconds(int(options.get("max_new_tokens", 128)))


@on_gpu(duration=baseline_duration)
def baseline(spec: str, prompt_ids: list[int], options: dict, frame_s: float = FRAME_S) -> Iterator[RunTrace]:
    """Plain decoding of the same prompt and sampling settings, measured; yields the trace so far.
    A target served by vLLM decodes it itself (decoding/served.py), in one go."""
    target = model(spec)
    if target.remote is not None:
        yield served_plain(target, prompt_ids, method="ar", **options)
        return
    decoder = Decoder(target, prompt_ids, method="ar", **options)
    shown = time.perf_counter()
    for cycle in decoder:
        if time.perf_counter() - shown >= frame_s and not decoder.done:
            shown = time.perf_counter()
            yield decoder.trace()
    yield decoder.trace()


# -- Compare and Theory -----------------------------------------------------------------------------
def compare_duration(comparison: Comparison) -> int:
    runs = comparison.total
    return _seconds(runs * comparison.shared.settings.max_new_tokens)


@on_gpu(duration=compare_duration)
def compare(comparison: Comparison) -> Iterator[tuple[str, Comparison]]:
    """Warm up and time every row; yields (progress message, the comparison so far)."""
    for message in comparison.run(model):
        yield message, comparison


def verify_cost_duration(spec: str) -> int:
    return STEP_S  # read from memory after the load timed it; timing afresh takes about 3–5 s


@on_gpu(duration=verify_cost_duration)
def verify_cost(spec: str) -> CostProfile:
    """The target's cost profile v(n), n = 1…64: the very curve its planner decides with
    (planner.verify_cost: measured once at load, then cached; a fixed prior for tiny models)."""
    return planner.verify_cost(model(spec))


def batch_duration(spec: str, k: int, refresh: bool) -> int:
    return MAX_S // 2


@on_gpu(duration=batch_duration)
def batch(spec: str, k: int, refresh: bool):
    """Verify against plain step at batch sizes 1…32 (cached on disk per model and device)."""
    if model(spec).remote is not None:
        raise ValueError("The batch effect times the target's passes in this process; a target served by vLLM "
                         "batches on its server. Measure it there, or pick a target that runs here.")
    return batch_effect.measure_batch_effect(model(spec), k=int(k), cache_file=batch_effect.default_cache_file(),
                                             refresh=bool(refresh))


# -- Advise -----------------------------------------------------------------------------------------
def advise_duration(target: str, candidates: list, prompts: list[str], options: dict) -> int:
    runs = len(prompts) * (len(candidates) + 1 + 2 * int(options.get("check", 2)))  # measure, anchor, checks
    return _seconds(runs * int(options.get("max_new_tokens", 48)), base=STEP_S + 30)  # + the batched passes


@on_gpu(duration=advise_duration)
def advise(target: str, candidates: list, prompts: list[str], options: dict):
    """The advisor's measurement (advise/advisor.py); yields (what it does next, the survey so far)."""
    target_model = model(target)
    yield from advisor.measure_stages(target_model, candidates, prompts, model, planner.verify_cost(target_model),
                                     **options)
