"""What a target pass costs on this hardware: v(n), a pass over n tokens in units of a one-token pass.

    from specviz.pricing import costs
    prof = costs.profile(target)   # timed once (about 3–5 s), then read from memory or from disk
    prof(5)                        # v(5): measured at SIZES, linear between them; prof(1) == 1
    prof.cost_s(5)                 # seconds: prof.pass_s * prof(5)
    prof.v                         # the measured points {n: v(n)}

This is the one definition of a target pass's cost: the planner decides with it, theory's S(K)
and the Theory & hardware tab read it. n counts every token in the pass, so a verify pass of K
drafts has n = K + 1. Passes are timed at batch 1 on top of a `prefix_len`-token KV cache. Noise
on a shared machine only ever adds time, so each size keeps its fastest pass, and sizes whose
pass came out slower than a larger one's are timed again while the budget lasts. A profile is cached per model,
device, dtype, speed-ups, torch version, hardware and thread count, in memory and in
$SPECVIZ_CACHE_DIR/cost_profiles.json; `refresh=True` measures again.

`work_cost` prices other work in the same unit: a draft head's call, say, as a share of the
one-token pass, timed once per model, hardware and work, and cached beside the profiles, so the
planner reads one fixed number per machine (a seed gives the same run every time).

`pick_dtype` is what `load(dtype="auto")` asks on a CPU: bfloat16 only where the CPU computes it
natively and a timed pass shows it clearly faster than float32, else float32. Also cached.
No UI libraries here.
"""
from __future__ import annotations

import copy
import threading
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from specviz.models.common import cache_root, read_cache_file, write_cache_entry
from specviz.models.loaded import LoadedModel
from specviz.passes import fastpath, speedups
from specviz.pricing.cost_profile import CostProfile, renamed
from specviz.pricing.timing import (
    filler_ids,
    hardware,
    prefix_cache,
    sync,
    timed_pass,
)

SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # up to a LogitSpec tree's 64 nodes
PREFIX_LEN = 200  # tokens already cached: a prompt plus some output, as in the benchmarks
BUDGET_S = 4.0  # seconds of passes in all, warm-up and first round included; re-timing stops past it
FULL_ROUNDS = 3  # times every size is timed, interleaved, while the budget lasts (the first always)
MAX_ROUNDS = 4  # re-timing rounds of suspect sizes at most, however cheap the passes
CACHE_FILE_NAME = "cost_profiles.json"
DTYPE_SIZES = (1, 4)  # a plain step and a typical verify pass decide the dtype
DTYPE_PREFIX = 64  # a short cache is enough to compare two dtypes
BF16_MARGIN = 0.9  # bfloat16 must take under this share of float32's time at every size
DEFAULT = "default"  # cache_file value meaning cache_root() / CACHE_FILE_NAME

Timer = Callable[[int], float]  # seconds of one pass over n new tokens

_MEMORY: dict[str, object] = {}
_LOCK = threading.Lock()


def cache_key(model: LoadedModel, prefix_len: int) -> str:
    dtype = str(model.dtype).removeprefix("torch.")
    # our fast forward changes what a pass costs (fastpath.py), so profiles timed without it do not apply
    fast = ["fast-forward"] if fastpath.in_force(model.model) else []
    tuned = "+".join(speedups.applied(model.model) + fast) or "stock"
    # kernel settings (ONEDNN_MAX_CPU_ISA=AVX2, OMP_*) change what a pass costs; none set keeps the old keys
    kernels = "".join(f"|{k}={v}" for k, v in speedups.kernel_env()) if model.device.type == "cpu" else ""
    return (f"{model.name}|{model.device}|{dtype}|{tuned}|torch {torch.__version__}|"
            f"{hardware(model.device)}{kernels}|prefix {prefix_len}")


def default_cache_file() -> Path:
    return cache_root() / CACHE_FILE_NAME


def _file(cache_file) -> Path | None:
    return default_cache_file() if cache_file == DEFAULT else cache_file


def profile(model: LoadedModel, sizes=SIZES, prefix_len: int = PREFIX_LEN, budget_s: float = BUDGET_S,
            cache_file: Path | str | None = DEFAULT, refresh: bool = False,
            timer: Timer | None = None) -> CostProfile:
    """The cost profile of `model` as loaded: from memory, else from `cache_file`, else timed now.

    `timer(n)` replaces the real pass (tests); `cache_file=None` keeps the result in memory only.
    """
    sizes = sorted(set(int(n) for n in sizes) | {1})
    # the rounds in the key: a profile timed by the older one-round rule is timed again
    key = f"{cache_key(model, prefix_len)}|sizes {','.join(map(str, sizes))}|rounds {FULL_ROUNDS}"
    if not refresh and (hit := _cached(key, _file(cache_file), CostProfile.from_dict)) is not None:
        return hit
    times, spent = measure(timer or pass_timer(model, prefix_len), sizes, budget_s)
    dtype = str(model.dtype).removeprefix("torch.")
    prof = CostProfile(model=model.name, device=str(model.device), dtype=dtype, prefix_len=prefix_len,
                       pass_s=times[1], v={n: times[n] / times[1] for n in sizes},
                       hardware=hardware(model.device), speedups=speedups.applied(model.model),
                       measured_at=_now(), measure_s=round(spent, 3))
    _store(key, prof, _file(cache_file))
    return prof


def pass_timer(model: LoadedModel, prefix_len: int) -> Timer:
    """Times real passes of `model` over n new tokens on one shared `prefix_len`-token cache."""
    cache = prefix_cache(model, prefix_len)
    feeds: dict[int, torch.Tensor] = {}

    def one_pass(n: int) -> float:
        if n not in feeds:
            feeds[n] = filler_ids(model, 1, n, offset=prefix_len)
        return timed_pass(model, cache, feeds[n], prefix_len)
    return one_pass


def measure(timer: Timer, sizes: list[int], budget_s: float = BUDGET_S) -> tuple[dict[int, float], float]:
    """The fastest pass per size, and the pass time spent; suspect sizes are timed again.

    After a warm-up pass of the largest size (which allocates what every smaller pass needs),
    every size is timed in FULL_ROUNDS interleaved rounds (a later round only while the budget
    lasts): a burst of other work can inflate several neighbouring sizes at once and leave them in
    order, so no single round is trusted (on an AMD EPYC one round put v(16) at 1.95, three
    quiet ones at 1.34–1.70). Each round after that re-times the one-token pass (every v divides by
    it) and every size slower than some larger size; those rounds stop when, after the first, no
    size is out of order, or when the budget is spent, or after MAX_ROUNDS.
    """
    spent = timer(sizes[-1])
    best: dict[int, float] = {}
    for full in range(FULL_ROUNDS):
        if full and spent >= budget_s:
            break
        for n in sizes:
            t = timer(n)
            spent += t
            best[n] = min(best.get(n, t), t)
    for round_ in range(MAX_ROUNDS):
        again = _suspects(best, sizes)
        if spent >= budget_s or (round_ and again == sizes[:1]):
            break
        for n in again:
            t = timer(n)
            spent += t
            best[n] = min(best[n], t)
    return best, spent


def _suspects(best: dict[int, float], sizes: list[int]) -> list[int]:
    """The one-token pass and every size whose pass took longer than a larger size's."""
    later = [min(best[m] for m in sizes[i + 1:]) for i in range(len(sizes) - 1)] + [float("inf")]
    return [sizes[0]] + [n for n, floor in zip(sizes[1:], later[1:]) if best[n] > floor]


WORK_REPEATS = 15  # timings of the work priced by work_cost, after a warm-up; the fastest is kept


@dataclass
class WorkCost:
    """What `work_cost` measured: `cost` is one run of the work in one-token passes of the model."""
    work: str
    cost: float
    work_s: float
    pass_s: float
    hardware: str = ""
    measured_at: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "WorkCost | None":
        try:
            d = renamed(d)
            return cls(work=str(d["work"]), cost=float(d["cost"]), work_s=float(d["work_s"]),
                       pass_s=float(d["pass_s"]), hardware=d.get("hardware", ""),
                       measured_at=d.get("measured_at", ""))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def work_cost(model: LoadedModel, work: str, run: Callable[[], object], repeats: int = WORK_REPEATS,
              cache_file: Path | str | None = DEFAULT, refresh: bool = False,
              timer: Timer | None = None, clock: Callable[[], float] = time.perf_counter) -> WorkCost:
    """The cost of `run()` in one-token passes of `model` (its profile's `pass_s`), on this hardware.

    `work` names what `run` does (its key in the cache, with the model's `cache_key`): the fastest
    of `repeats` runs after a warm-up, as the profile keeps the fastest pass. A cached cost is
    always given in the current profile's unit (its seconds over the current one-token pass).
    `timer` replaces the profile's real passes and `clock` the wall clock (tests)."""
    key = f"work|{work}|{cache_key(model, PREFIX_LEN)}"
    pass_s = profile(model, cache_file=cache_file, timer=timer).pass_s
    # a cost priced against a profile that has since been timed again is expressed in the profile
    # the planner now reads: the work's measured seconds over its one-token pass, timing nothing
    # (so a run's price never depends on when, in a process, it was asked for)
    hit = None if refresh else _cached(key, _file(cache_file), WorkCost.from_dict)
    if hit is not None and hit.pass_s != pass_s:
        hit = replace(hit, cost=hit.work_s / pass_s, pass_s=pass_s)
        _store(key, hit, _file(cache_file))
    if hit is not None:
        return hit
    run()
    best = float("inf")
    for _ in range(max(int(repeats), 1)):
        sync(model.device)
        t0 = clock()
        run()
        sync(model.device)
        best = min(best, clock() - t0)
    cost = WorkCost(work, best / pass_s, best, pass_s, hardware(model.device), _now())
    _store(key, cost, _file(cache_file))
    return cost


@dataclass
class DtypeChoice:
    """What `pick_dtype` chose and the fastest pass times (seconds) that chose it."""
    dtype: str
    times: dict[str, dict[int, float]]
    hardware: str = ""
    measured_at: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "DtypeChoice | None":
        try:
            times = {dt: {int(n): float(t) for n, t in ts.items()} for dt, ts in d["times"].items()}
            return cls(dtype=str(d["dtype"]), times=times, hardware=d.get("hardware", ""),
                       measured_at=d.get("measured_at", ""))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None


def pick_dtype(model: LoadedModel, timer: Callable[[torch.dtype, int], float] | None = None,
               native: bool | None = None, cache_file: Path | str | None = DEFAULT,
               refresh: bool = False) -> torch.dtype:
    """float32 or bfloat16 for a float32 `model` on a CPU (other devices keep their dtype).

    bfloat16 only where the CPU has it natively (`native`, detected when None) and its passes of
    DTYPE_SIZES tokens all take under BF16_MARGIN of float32's. `timer(dtype, n)` replaces the
    real passes (tests). The choice is cached like a profile.
    """
    if model.device.type != "cpu" or model.dtype != torch.float32:
        return model.dtype
    if not (speedups.native_bf16() if native is None else native):
        return torch.float32
    key = f"dtype|{cache_key(model, DTYPE_PREFIX)}"
    choice = None if refresh else _cached(key, _file(cache_file), DtypeChoice.from_dict)
    if choice is None:
        times = _time_dtypes(timer or _dtype_timer(model))
        faster = all(times["bfloat16"][n] < BF16_MARGIN * times["float32"][n] for n in DTYPE_SIZES)
        choice = DtypeChoice("bfloat16" if faster else "float32", times, hardware(model.device), _now())
        _store(key, choice, _file(cache_file))
    return getattr(torch, choice.dtype)


def _time_dtypes(timer: Callable[[torch.dtype, int], float], repeats: int = 3) -> dict[str, dict[int, float]]:
    """Fastest pass per dtype and size, interleaved, after one warm-up round."""
    best: dict[str, dict[int, float]] = {"float32": {}, "bfloat16": {}}
    for r in range(repeats + 1):
        for name, ts in best.items():
            for n in DTYPE_SIZES:
                t = timer(getattr(torch, name), n)
                if r:
                    ts[n] = min(ts.get(n, t), t)
    return best


def _dtype_timer(model: LoadedModel) -> Callable[[torch.dtype, int], float]:
    """Real passes of `model` and of a bfloat16 copy of it (the original is not touched)."""
    twin = replace(model, model=copy.deepcopy(model.model).to(torch.bfloat16), dtype=torch.bfloat16)
    timers = {torch.float32: pass_timer(model, DTYPE_PREFIX), torch.bfloat16: pass_timer(twin, DTYPE_PREFIX)}
    return lambda dtype, n: timers[dtype](n)


def _cached(key: str, path: Path | None, parse):
    with _LOCK:
        hit = _MEMORY.get(key)
    if hit is None and path is not None:
        hit = parse(read_cache_file(path).get(key) or {})
        if hit is not None:
            with _LOCK:
                _MEMORY[key] = hit
    if hit is not None and hasattr(hit, "cached"):
        hit = copy.copy(hit)
        hit.cached = True
    return hit


def _store(key: str, value, path: Path | None) -> None:
    with _LOCK:
        _MEMORY[key] = value
    if path is not None:
        write_cache_entry(path, key, value)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def forget_cached() -> None:
    """Empty the in-memory cache (files stay)."""
    with _LOCK:
        _MEMORY.clear()
