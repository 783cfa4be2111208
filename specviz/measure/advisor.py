"""The pair advisor: which draft (or draft-free method) and which K, for this target, on these prompts
and this machine; measured once, predicted for every K, then checked.

1. **Measure once.** Each candidate decodes the prompts once at a large K (`k_max`) with planning
   off, so every position is drafted and judged. Per draft position i it records, over all cycles:
   - the *conditional* rate, P(accepted at i | position i was reached): accepted_i ÷ reached_i;
   - the *marginal* rate, P(position i accepted): accepted_i ÷ cycles.
   Position i is reached when the cycle drafted at least i deep and positions 1…i−1 were accepted.
   It also measures the draft's own cost and the plain target step (an AR run of the same prompts),
   and reads v(n), the cost of a verify pass over n tokens, from the target's cost profile.
2. **Predict every K.** Accepting at position i does not depend on what was drafted after it, so
   cutting drafts at K keeps positions 1…K as measured. With n_K the mean draft tokens per cycle at
   depth ≤ K (a tree's siblings included),

       S(K) = (1 + Σ_{i=1..K} marginal_i) / (cost_draft(K) + v(n_K + 1)),

   cost_draft(K) = K·c for a method that runs a model per step (c: one step in target steps) and
   c_cycle, its measured drafting per cycle, for a draft-free one. For a chain with a constant rate α
   the numerator is Leviathan et al.'s (1 − α^(K+1)) / (1 − α) (measure/theory.py). The break-even
   rate is the constant α at which S at the candidate's best K would be 1: below it, plain wins.
3. **Check.** The top candidates decode the same prompts for real at their best K, beside plain
   decoding in the same run; a prediction more than `MISS` off the measurement is flagged with the
   likely reason.

The whole profile is plain data (`Profile.to_dict`), which `advise --from FILE` reads back without
a model. No UI libraries here.
"""
from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from specviz.decoding.engine import generate
from specviz.decoding.trace import RunTrace
from specviz.measure.theory import best_k, expected_tokens
from specviz.models.cost_profile import interpolate
from specviz.proposers import REGISTRY, proposer_class, resolve_draft

MISS = 0.15  # a prediction further than this from the measurement is flagged
FORMAT = "specviz-advice/1"


@dataclass
class Candidate:
    """One row of the advice: an engine method and, for method 'draft', the draft model's spec."""
    method: str
    draft: str | None = None

    @classmethod
    def parse(cls, text: str) -> "Candidate":
        """'pld', 'logitspec', 'head', 'hybrid', 'layerskip' or 'draft:SPEC'."""
        text = text.strip()
        method, _, draft = text.partition(":")
        method, draft = resolve_draft(method, draft or None)
        if method != "ar" and method not in REGISTRY:
            raise ValueError(f"'{text}' is not a candidate: use one of {', '.join(REGISTRY)}, or draft:SPEC")
        if method == "draft" and not draft:
            raise ValueError("a draft-model candidate names its model: draft:SPEC (a hub id or 'bundled')")
        return cls(method, draft)

    @property
    def label(self) -> str:
        return f"draft {self.draft}" if self.method == "draft" else self.method


@dataclass
class Measured:
    """One candidate measured once at k_max (see the module docstring)."""
    candidate: Candidate
    k_max: int
    cycles: int
    reached: list[float]
    accepted: list[float]
    nodes_at_depth: list[float]  # mean draft tokens per cycle at depth ≤ d, d = 1…k_max
    c: float  # a draft step in target steps (a model draft) or drafting per cycle (draft-free)
    per_step: bool  # whether c is per draft step
    tokens_per_s: float

    @property
    def conditional(self) -> list[float]:
        return [a / r if r else 0.0 for a, r in zip(self.accepted, self.reached)]

    @property
    def marginal(self) -> list[float]:
        return [a / self.cycles if self.cycles else 0.0 for a in self.accepted]


@dataclass
class Check:
    k: int
    predicted: float
    measured: float
    flag: str = ""  # why the prediction missed by more than MISS, if it did


@dataclass
class Profile:
    """Everything the advice rests on, as data: reloadable without a model."""
    target: str
    prompts: int
    settings: dict
    machine: str
    ar_tokens_per_s: float
    step_s: float
    v: dict[int, float]  # the cost profile's v(n) at n = 1…
    measured: list[Measured] = field(default_factory=list)
    checks: dict[str, Check] = field(default_factory=dict)
    measured_at: str = ""

    def v_of(self, n: float) -> float:
        return interpolate(self.v, n)

    def to_dict(self) -> dict:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "Profile":
        if d.get("format") != FORMAT:
            raise ValueError(f"not a SpecViz advice profile (format {d.get('format')!r}, expected {FORMAT!r})")
        d = {k: v for k, v in d.items() if k != "format"}
        d["v"] = {int(n): float(x) for n, x in d["v"].items()}
        d["measured"] = [Measured(**{**m, "candidate": Candidate(**m["candidate"])}) for m in d["measured"]]
        d["checks"] = {k: Check(**c) for k, c in d.get("checks", {}).items()}
        return cls(**d)


# -- prediction: pure arithmetic ------------------------------------------------------------------
def predicted_speedup(m: Measured, k: int, v: Callable[[float], float]) -> float:
    """S(K) of the module docstring."""
    k = min(k, m.k_max)
    tokens = 1.0 + sum(m.marginal[:k])
    draft = k * m.c if m.per_step else m.c
    nodes = m.nodes_at_depth[k - 1] if m.nodes_at_depth else float(k)
    return tokens / (draft + v(nodes + 1))


def curve(m: Measured, v: Callable[[float], float]) -> list[tuple[int, float]]:
    return [(k, predicted_speedup(m, k, v)) for k in range(1, m.k_max + 1)]


def break_even(m: Measured, k: int, v: Callable[[float], float]) -> float | None:
    """The constant per-position rate α at which S(k) = 1 (None: it loses even at α = 1)."""
    nodes = m.nodes_at_depth[k - 1] if m.nodes_at_depth else float(k)
    cost = (k * m.c if m.per_step else m.c) + v(nodes + 1)
    if expected_tokens(1.0, k) < cost:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens(mid, k) < cost else (lo, mid)
    return hi


def ranked(profile: Profile) -> list[tuple[Measured, int, float]]:
    """(candidate, best K, predicted S there), best first."""
    rows = [(m, *best_k(curve(m, profile.v_of))) for m in profile.measured]
    return sorted(rows, key=lambda r: -r[2])


# -- measurement -------------------------------------------------------------------------------------
def count_positions(runs: list[RunTrace], k_max: int) -> tuple[int, list[float], list[float], list[float]]:
    """(cycles, reached_i, accepted_i, mean nodes at depth ≤ i) over every cycle of the runs."""
    cycles = [c for run in runs for c in run.cycles]
    reached, accepted = [0.0] * k_max, [0.0] * k_max
    for c in cycles:
        depths = [n.depth for n in c.nodes]
        deepest = max(depths, default=0)
        for i in range(1, min(deepest, k_max) + 1):
            if c.n_accepted >= i - 1:
                reached[i - 1] += 1
            if c.n_accepted >= i:
                accepted[i - 1] += 1
    nodes = [statistics.fmean(sum(d <= i for d in (n.depth for n in c.nodes)) for c in cycles) if cycles else 0.0
             for i in range(1, k_max + 1)]
    return len(cycles), reached, accepted, nodes


def _decode_all(target, draft, prompts, **kw) -> tuple[list[RunTrace], float]:
    runs = [generate(target, p, draft=draft, **kw) for p in prompts]
    tokens = sum(len(r.token_ids) - 1 for r in runs)
    seconds = sum(r.metrics["decode_s"] for r in runs)
    return runs, tokens / seconds if seconds > 0 else 0.0


def measure(target, candidates: list[Candidate], prompts: list[str], get_model: Callable[[str], object],
            v, k_max: int = 8, max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
            check: int = 2, progress: Callable[[str], None] = print) -> Profile:
    """Measure every candidate once at k_max, then check the `check` best at their best K."""
    settings = dict(k_max=k_max, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=0)
    common = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=0, plan=False,
                  record=False)
    progress("plain decoding (the anchor)…")
    ar_runs, ar_rate = _decode_all(target, None, prompts, method="ar", **common)
    steps = [c.verify_s for r in ar_runs for c in r.cycles if c.verify_s > 0]
    step_s = statistics.fmean(steps) if steps else 0.0
    profile = Profile(target=target.name, prompts=len(prompts), settings=settings, machine=machine(),
                      ar_tokens_per_s=ar_rate, step_s=step_s, v={n: float(v(n)) for n in range(1, 4 * k_max + 2)},
                      measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    for cand in candidates:
        progress(f"measuring {cand.label} at K = {k_max}…")
        draft = get_model(cand.draft) if cand.draft else None
        runs, rate = _decode_all(target, draft, prompts, method=cand.method, k=k_max, **common)
        n, reached, accepted, nodes = count_positions(runs, k_max)
        per_step = bool(proposer_class(cand.method).paid_per_step)
        drafting = [c for r in runs for c in r.cycles if c.nodes]
        draft_s = sum(c.draft_s for c in drafting)
        depth = sum(max(nd.depth for nd in c.nodes) for c in drafting)
        unit = depth if per_step else len(drafting)
        c = draft_s / unit / step_s if unit and step_s else 0.0
        profile.measured.append(Measured(cand, k_max, n, reached, accepted, nodes, c, per_step, rate))
    for m, k, predicted in ranked(profile)[:check]:
        progress(f"checking {m.candidate.label} at K = {k}…")
        draft = get_model(m.candidate.draft) if m.candidate.draft else None
        _, rate = _decode_all(target, draft, prompts, method=m.candidate.method, k=k, **common)
        _, ar_again = _decode_all(target, None, prompts, method="ar", **common)
        measured = rate / ar_again if ar_again else 0.0
        profile.checks[m.candidate.label] = Check(k, predicted, measured, miss_reason(predicted, measured, m))
    return profile


def miss_reason(predicted: float, measured: float, m: Measured) -> str:
    """Why a prediction missed by more than MISS, in a sentence; '' when it did not."""
    if not measured or abs(predicted - measured) <= MISS * measured:
        return ""
    if predicted > measured:
        return (f"predicted {predicted:.2f}× but measured {measured:.2f}×: time outside the model passes "
                "(Python per cycle, the host's load) is not in the formula, and it weighs more when a cycle "
                "commits few tokens")
    return (f"predicted {predicted:.2f}× but measured {measured:.2f}×: the cost profile's v(n) is higher than "
            "this run's passes cost, or the plain run was slowed by the host's load")


def machine() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name"))
        flags = next(line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags"))
        return f"{name} ({', '.join(f for f in ('avx2', 'avx512f', 'amx_tile') if f in flags)})"
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


# -- the report ------------------------------------------------------------------------------------
def report(profile: Profile) -> str:
    """The ranked table, per-position rates (conditional and marginal, labelled) and the checks, in markdown."""
    s = profile.settings
    lines = [f"Target {profile.target}, {profile.prompts} prompts, T = {s.get('temperature')}, top-p = "
             f"{s.get('top_p')}, {s.get('max_new_tokens')} new tokens, measured once at K = {s.get('k_max')} "
             f"with planning off; {profile.machine}; {profile.measured_at}. Plain decoding: "
             f"{profile.ar_tokens_per_s:.1f} tokens/s.", "",
             "| rank | candidate | best K | predicted speedup | break-even α | c | checked: measured speedup |",
             "|---|---|---|---|---|---|---|"]
    for i, (m, k, s_k) in enumerate(ranked(profile), 1):
        be = break_even(m, k, profile.v_of)
        chk = profile.checks.get(m.candidate.label)
        checked = "–" if chk is None else f"{chk.measured:.2f}× at K = {chk.k}" + (f" ⚠ {chk.flag}" if chk.flag else "")
        unit = "per step" if m.per_step else "per cycle"
        lines.append(f"| {i} | {m.candidate.label} | {k} | {s_k:.2f}× | {'none' if be is None else f'{be:.2f}'} | "
                     f"{m.c:.3f} {unit} | {checked} |")
    lines += ["", "Acceptance by draft position, measured at K = k_max:", "",
              "| candidate | conditional: P(accepted at i given i reached) | marginal: P(position i accepted) |",
              "|---|---|---|"]
    for m in profile.measured:
        lines.append(f"| {m.candidate.label} | {', '.join(f'{x:.2f}' for x in m.conditional)} | "
                     f"{', '.join(f'{x:.2f}' for x in m.marginal)} |")
    return "\n".join(lines)


def save(profile: Profile, path: Path) -> None:
    Path(path).write_text(json.dumps(profile.to_dict(), indent=1), encoding="utf-8")


def load(path: Path) -> Profile:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"Cannot read the advice profile {path}: {e}") from None
    return Profile.from_dict(data)
