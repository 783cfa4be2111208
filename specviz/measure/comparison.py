"""Several configurations on one prompt, each timed against the plain (AR) run of its target.

A `Comparison` warms every configuration up once, then times each one `repeats` times, interleaved
within each repeat so that a slow moment of a shared machine hits them alike, and keeps the run
with the median tokens/s. Runs are decoded with trace recording off: this is about speed.
A configuration that cannot load or decode gets its error in its row; the others go on.

Decoding-level code: no UI libraries. specviz/ui/compare.py drives it, specviz/viz/compare_figures.py draws it.
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from specviz.decoding.engine import Decoder
from specviz.decoding.served import served_plain
from specviz.decoding.settings import MAX_K, DecodeSettings
from specviz.decoding.trace import RunTrace
from specviz.drafting.sampling import check_settings, is_greedy
from specviz.loading.loader import LoadedModel
from specviz.proposers import default_k, methods, resolve_draft, resolve_k, unshared

MAX_CONFIGS = 6  # more rows than fit beside one bar chart at a glance
WARMUP_TOKENS = 4  # enough to touch every code path (prefill, a draft, a verify, a rollback)
COLUMNS = ("target", "method", "draft", "K", "temperature")


class Stopped(Exception):
    """The person pressed Stop; rows measured so far stay valid."""


@dataclass(frozen=True)
class Config:
    """One row of the Compare table: what to decode with."""
    target: str
    method: str
    draft: str | None = None
    k: int | None = None  # None: the method's default (proposers.default_k)
    temperature: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "k", resolve_k(self.method, self.k))

    @property
    def greedy(self) -> bool:
        return is_greedy(self.temperature)

    def baseline(self) -> "Config":
        """The AR run this one is measured against: same target, same temperature."""
        return Config(self.target, "ar", None, 1, self.temperature)

    def label(self) -> str:
        name = "AR (plain)" if self.method == "ar" else self.method
        if self.method == "draft":
            name += f" ← {self.draft}"
        parts = [name] + ([] if self.method == "ar" else [f"K={self.k}"])
        parts.append("greedy" if self.greedy else f"T={self.temperature:g}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Shared:
    """What every configuration shares: the prompt, the repeats, and the decoding settings that
    a row does not set (max_new_tokens, seed, top_p, chat). Rows time without traces."""
    prompt: str
    settings: DecodeSettings = DecodeSettings(max_new_tokens=48, record=False)
    repeats: int = 1

    @classmethod
    def of(cls, prompt, repeats: int = 1, **settings) -> "Shared":
        """Shared(prompt, repeats) with DecodeSettings fields given by name, e.g. `seed=1`."""
        return cls(prompt, DecodeSettings.of(**{"max_new_tokens": 48, "record": False, **settings}), repeats)

    def for_row(self, config: "Config", max_new_tokens: int | None = None) -> DecodeSettings:
        """The settings one row decodes with: these, with the row's method, K and temperature."""
        return self.settings.replace(method=config.method, k=config.k, temperature=config.temperature,
                                     max_new_tokens=max_new_tokens or self.settings.max_new_tokens)


def _blank(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or str(x).strip() == ""


def _number(x, name: str, where: str) -> float:
    try:
        value = float(str(x).strip())
    except ValueError:
        raise ValueError(f"{where}: {name} must be a number, got '{x}'.") from None
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{where}: {name} must be a finite number.")
    return value


def parse_row(row, index: int) -> Config:
    """A Config from [target, method, draft, K, temperature]; a ValueError names the row and the cell."""
    where = f"Row {index + 1}"
    cells = list(row) + [None] * (len(COLUMNS) - len(row))
    target, method, draft, k, temperature = cells[: len(COLUMNS)]
    method = "" if _blank(method) else str(method).strip().lower().replace("-", "").replace(" ", "")
    if method not in methods():
        raise ValueError(f"{where}: method '{method}' is not one of {', '.join(methods())}.")
    k_value = float(default_k(method)) if _blank(k) else _number(k, "K", where)
    if k_value != int(k_value) or not 1 <= k_value <= MAX_K:
        raise ValueError(f"{where}: K must be a whole number from 1 to {MAX_K}, got {k}.")
    t_value = 0.0 if _blank(temperature) else _number(temperature, "temperature", where)
    try:
        check_settings(t_value, 1.0)
    except ValueError as e:
        raise ValueError(f"{where}: {e}.") from None
    draft = None if _blank(draft) else str(draft).strip()
    if method == "draft" and not draft:
        raise ValueError(f"{where}: the draft method needs a draft model in the draft column.")
    method, draft = resolve_draft(method, draft)  # draft 'head' is the trained head (method head)
    if method == "ar":
        return Config(str(target or "bundled").strip() or "bundled", "ar", None, 1, t_value)
    return Config(str(target or "bundled").strip() or "bundled", method, draft, int(k_value), t_value)


def parse_rows(rows) -> list[Config | str]:
    """Each non-blank row as a Config, or as the message that says what is wrong with it."""
    rows = [list(r) for r in (rows or []) if not all(_blank(x) for x in r)]
    if len(rows) > MAX_CONFIGS:
        raise ValueError(f"At most {MAX_CONFIGS} configurations at once; remove {len(rows) - MAX_CONFIGS}.")
    out: list[Config | str] = []
    for i, row in enumerate(rows):
        try:
            out.append(parse_row(row, i))
        except ValueError as e:
            out.append(str(e))
    return out


def decode(target: LoadedModel, draft: LoadedModel | None, config: Config, shared: Shared,
           max_new_tokens: int | None = None, should_stop: Callable[[], bool] = lambda: False
           ) -> tuple[RunTrace, float]:
    """One timed run of `config`; Stop is checked between cycles. Returns the trace and wall seconds."""
    t0 = time.perf_counter()
    settings = shared.for_row(config, max_new_tokens)
    if config.method == "ar" and target.remote is not None:  # a served target's anchor: its own decoding
        return served_plain(target, shared.prompt, settings), time.perf_counter() - t0
    with unshared():  # a row's timed run must not draft from its own warm-up
        decoder = Decoder(target, shared.prompt, settings, draft)
    for _ in decoder:
        if should_stop():
            raise Stopped
    return decoder.trace(), time.perf_counter() - t0


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first token where two outputs differ (a length difference counts); None if equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass
class Measured:
    """The median run of one configuration, by tokens/s, and the median wall time."""
    run: RunTrace
    wall_s: float
    repeats: int


def median_of(runs: list[tuple[RunTrace, float]]) -> Measured:
    ordered = sorted(runs, key=lambda r: r[0].metrics["tokens_per_s"])
    return Measured(ordered[(len(ordered) - 1) // 2][0], statistics.median(w for _, w in runs), len(runs))


@dataclass
class Comparison:
    """Runs a list of configurations (or their parse errors) against their AR baselines."""
    items: list[Config | str]
    shared: Shared
    errors: dict[Config, str] = field(default_factory=dict)
    runs: dict[Config, list] = field(default_factory=dict)
    done: int = 0
    warm_up: bool = True  # off for a question after the first: the same rows are warm by then

    @property
    def configs(self) -> list[Config]:
        return [c for c in self.items if isinstance(c, Config)]

    def units(self) -> list[Config]:
        """What gets timed: each distinct baseline first, then each distinct configuration."""
        return list(dict.fromkeys([c.baseline() for c in self.configs] + self.configs))

    @property
    def total(self) -> int:
        return len(self.units()) * (int(self.warm_up) + max(self.shared.repeats, 1))

    def _fail(self, config: Config, exc: Exception) -> None:
        message = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
        self.errors[config] = message or type(exc).__name__

    def _models(self, config: Config, get_model) -> tuple[LoadedModel, LoadedModel | None]:
        target = get_model(config.target)
        return target, get_model(config.draft) if config.method == "draft" else None

    def _attempt(self, config: Config, get_model, should_stop, tokens: int | None):
        """Decode once; an error is kept for the row (and its dependants) instead of raised."""
        base = config.baseline()
        if config in self.errors or (base != config and base in self.errors):
            return None
        try:
            target, draft = self._models(config, get_model)
            return decode(target, draft, config, self.shared, tokens, should_stop)
        except Stopped:
            raise
        except Exception as e:  # noqa: BLE001 -- one bad row must not stop the others
            self._fail(config, e)
            return None

    def preload(self, get_model: Callable[[str], LoadedModel]) -> None:
        """Load every row's models up front (where loading is allowed); a failure becomes the row's error."""
        for config in self.units():
            try:
                self._models(config, get_model)
            except Exception as e:  # noqa: BLE001 -- one bad row must not stop the others
                self._fail(config, e)

    def run(self, get_model: Callable[[str], LoadedModel],
            should_stop: Callable[[], bool] = lambda: False) -> Iterator[str]:
        """Warm up, then time; yields a progress message after every decode. May raise Stopped."""
        units = self.units()
        for config in units if self.warm_up else ():
            yield f"Warming up {config.target}: {config.label()}"
            self._attempt(config, get_model, should_stop, WARMUP_TOKENS)
            self.done += 1
        for rep in range(max(self.shared.repeats, 1)):
            for config in units:
                result = self._attempt(config, get_model, should_stop, None)
                if result is not None:
                    self.runs.setdefault(config, []).append(result)
                self.done += 1
                yield f"Repeat {rep + 1}/{self.shared.repeats}: {config.label()} done"

    def measured(self, config: Config) -> Measured | None:
        runs = self.runs.get(config)
        return median_of(runs) if runs else None

    # -- rows for the table --------------------------------------------------------------------
    def rows(self) -> list[dict]:
        """One dict per input row, in order: measured numbers, the lossless verdict, or the error."""
        return [{"index": i + 1, "label": "", "error": item} if isinstance(item, str) else self._row(i, item)
                for i, item in enumerate(self.items)]

    def baseline_rows(self) -> list[dict]:
        """One dict per AR baseline, numbered 0."""
        return [self._row(-1, b) for b in dict.fromkeys(c.baseline() for c in self.configs)]

    def _row(self, i: int, config: Config) -> dict:
        base = config.baseline()
        error = self.errors.get(config) or (f"AR baseline: {self.errors[base]}" if base in self.errors else None)
        row = {"index": i + 1, "label": config.label(), "target": config.target, "method": config.method,
               "draft": config.draft, "k": config.k, "temperature": config.temperature,
               "greedy": config.greedy, "error": error, "lossless": None, "differs_at": None}
        mine, ar = self.measured(config), self.measured(base)
        if mine is None:
            row["pending"] = error is None
            return row
        m = mine.run.metrics
        spec = config.method != "ar"
        row.update(tokens_per_s=m["tokens_per_s"], wall_s=mine.wall_s, cycles=m["cycles"],
                   new_tokens=m["new_tokens"], repeats=mine.repeats,
                   mean_accepted_tokens=m["mean_accepted_tokens"] if spec else None,
                   alpha=m["acceptance_rate"] if spec else None,
                   drafted_tokens=m.get("drafted_tokens") if spec else None,
                   offered_tokens=sum(c.offered or 0 for c in mine.run.cycles) if spec else None,
                   speedup=m["tokens_per_s"] / ar.run.metrics["tokens_per_s"]
                   if ar is not None and ar.run.metrics["tokens_per_s"] > 0 else None)
        if config.greedy and ar is not None:
            diff = first_difference(mine.run.token_ids, ar.run.token_ids)
            row.update(lossless=diff is None, differs_at=diff)
            if diff is not None:
                row["run_token"] = _token_at(mine.run, diff)
                row["ar_token"] = _token_at(ar.run, diff)
        return row


def _token_at(run: RunTrace, i: int) -> str:
    return run.token_texts[i] if i < len(run.token_texts) else "(end of output)"
