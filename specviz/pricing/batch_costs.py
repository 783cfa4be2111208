"""What a verify pass costs when several runs share it: v_B(n), so the planner prices a pass at
the batch it will run in.

With B runs in one pass, each sending n tokens, the pass takes r_B(n) seconds; a run's cycle
waits for the whole pass. So at batch B a run's draft of n - 1 tokens costs v_B(n) = r_B(n) / r_B(1)
batched plain steps, the same unit as v(n) alone. On a CPU r_1(n) is nearly flat in n (a small
pass is weight-bound), while at large B the pass is compute-bound and r_B(n) grows about as n:
then every extra draft token costs nearly a plain step, and the planner sends less. A draft call
(c, in one-token passes alone) is rescaled to the batched unit by r_1(1) / r_B(1).

Timed once per model and machine the way the advisor times its concurrency prediction
(timing.pass_times: B copies of a `prefix_len`-token cache, n new tokens each, fastest of the
repeats), cached beside the cost profile: several seconds for the bundled model on 2 cores, so the app
times it at start-up after it is ready (ui/runtime/warmup.py), and a run only reads it (`cached`): until
it is there, passes are priced as if alone. Between the batch sizes timed, v_B is interpolated in
log B; past the largest, the largest is used.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from specviz.models.loaded import LoadedModel
from specviz.pricing import costs
from specviz.pricing.cost_profile import interpolate
from specviz.pricing.timing import pass_times

BATCHES = (1, 4, 16, 32)  # a class of 30 pressing Step together is the case that matters
SIZES = (1, 3, 9, 17)  # tokens per run: a plain step up to a full hybrid tree
REPEATS = 1  # after pass_times' warm-up pass: the grid is coarse anyway, and it is timed at every start

BatchTimer = Callable[[int, list[int]], dict[int, float]]  # (batch, sizes) -> seconds per size


@dataclass
class BatchCosts:
    """r_B(n) as measured: pass_s[i][j] seconds at batch_sizes[i] with sizes[j] tokens per run."""
    model: str
    batch_sizes: list[int]
    sizes: list[int]
    pass_s: list[list[float]]
    prefix_len: int
    hardware: str = ""
    measured_at: str = ""
    measure_s: float = 0.0

    def _row(self, batch: int) -> tuple[dict[int, float], dict[int, float], float]:
        """(the two measured rows around `batch`, the weight of the upper one) in log B."""
        bs = self.batch_sizes
        batch = min(max(int(batch), bs[0]), bs[-1])
        hi = next(i for i, b in enumerate(bs) if b >= batch)
        lo = max(hi - 1, 0) if bs[hi] > batch else hi
        rows = [dict(zip(self.sizes, self.pass_s[i])) for i in (lo, hi)]
        w = 0.0 if lo == hi else (math.log(batch) - math.log(bs[lo])) / (math.log(bs[hi]) - math.log(bs[lo]))
        return rows[0], rows[1], w

    def pass_at(self, batch: int, n: float) -> float:
        """r_B(n): seconds of a pass with `batch` runs of n tokens each."""
        lo, hi, w = self._row(batch)
        return (1 - w) * interpolate(lo, n) + w * interpolate(hi, n)

    def v_at(self, batch: int) -> Callable[[int], float]:
        """v_B(n) = r_B(n) / r_B(1): a pass over n tokens per run in batched plain steps."""
        step = self.pass_at(batch, 1)
        return lambda n: self.pass_at(batch, n) / step

    def unit_at(self, batch: int) -> float:
        """r_1(1) / r_B(1): a one-token pass alone in batched plain steps (rescales a draft call's c)."""
        return self.pass_at(1, 1) / self.pass_at(batch, 1)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "BatchCosts | None":
        try:
            made = cls(model=str(d["model"]), batch_sizes=[int(b) for b in d["batch_sizes"]],
                       sizes=[int(n) for n in d["sizes"]],
                       pass_s=[[float(x) for x in row] for row in d["pass_s"]], prefix_len=int(d["prefix_len"]),
                       hardware=d.get("hardware", ""), measured_at=d.get("measured_at", ""),
                       measure_s=float(d.get("measure_s", 0.0)))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        shaped = len(made.pass_s) == len(made.batch_sizes) and all(len(r) == len(made.sizes) for r in made.pass_s)
        return made if shaped and made.sizes and made.sizes[0] == 1 and made.batch_sizes[0] == 1 else None


def _key(model: LoadedModel, batches, sizes, prefix_len: int) -> str:
    return (f"batch|{costs.cache_key(model, prefix_len)}|batches {','.join(map(str, batches))}|"
            f"sizes {','.join(map(str, sizes))}")


def cached(model: LoadedModel, prefix_len: int = costs.PREFIX_LEN,
           cache_file: Path | str | None = costs.DEFAULT) -> BatchCosts | None:
    """`model`'s BatchCosts if they were timed already (this process or the cache file), else None:
    never times, so a Step never waits for it."""
    key = _key(model, sorted(set(BATCHES)), sorted(set(SIZES)), prefix_len)
    return costs._cached(key, costs._file(cache_file), BatchCosts.from_dict)


def batch_costs(model: LoadedModel, batches=BATCHES, sizes=SIZES, prefix_len: int = costs.PREFIX_LEN,
                cache_file: Path | str | None = costs.DEFAULT, refresh: bool = False,
                timer: BatchTimer | None = None) -> BatchCosts:
    """`model`'s BatchCosts: from memory, else from the cost cache file, else timed now.
    `timer(batch, sizes)` replaces the real passes (tests)."""
    batches = sorted({1, *(int(b) for b in batches)})
    sizes = sorted({1, *(int(n) for n in sizes)})
    key = _key(model, batches, sizes, prefix_len)
    if not refresh and (hit := costs._cached(key, costs._file(cache_file), BatchCosts.from_dict)) is not None:
        return hit
    timer = timer or (lambda b, ns: pass_times(model, ns, prefix_len=prefix_len, batch=b, repeats=REPEATS))
    t0 = time.perf_counter()
    rows = []
    for b in batches:
        got = timer(b, sizes)
        rows.append([float(got[n]) for n in sizes])
    made = BatchCosts(model.name, batches, sizes, rows, prefix_len, costs.hardware(model.device), costs._now(),
                      round(time.perf_counter() - t0, 3))
    costs._store(key, made, costs._file(cache_file))
    return made
