"""The advice checked on the engine it deploys to: predicted from the survey and the engine's own
step costs, then measured on that engine with the configuration deploy/ wrote (issue 43).

**What is predicted, and from what.** The model of speed predicts it (measure/speed_model.py,
`predict_at` at the check's K), as it predicts every number of the advice (advise/advice.py), on the
survey's inputs for the candidate (advise/survey_inputs.py): what each cycle drafted and how deep it
was accepted. Only the costs are the engine's own, timed in the same run on the same machine, never
SpecViz's:

- t₁, the engine's plain decoding, seconds per new token: its plain runs of the check's prompts
  (vLLM: the decode request of each prompt, prefix cached, over its tokens; HF: `generate`'s
  decode time per token, its first token's prefill subtracted);
- Δ, what a step that drafted costs beyond a plain one.
  HF: one forward of the model over n new tokens on a cached context of the prompts' mean length,
  less the same over one token (Δ(n), its cache cropped back after each timing); what generate
  does around the forward is in t₁ already.
  vLLM: its own speculative step at K, timed on the configuration's server on a calibration
  prompt that is not one of the checked ones (engine_runs.CALIBRATION): the server's counters say
  how many of the run's steps drafted and how many tokens they accepted, so the run's decode time,
  less its plain steps at t₁, gives a drafting step's cost, Δ_K = that − t₁. Over HTTP a one-token
  request's own overhead (some 40 ms on 2 cores) hides the few milliseconds a wider forward adds,
  and vLLM's step holds more than its forward (proposer, rejection sampler), so its whole step is
  timed rather than its pass. With B requests at once, t₁ and Δ_K are timed with B in flight.

The model is asked in the engine's plain steps (`engine_inputs`): a cycle that sent n draft tokens
costs v(n + 1) = 1 + Δ(n + 1) / t₁, one that sent none a plain step, 1, and nothing else is priced
(drafting, a cycle's overhead and a plain token's: t₁ holds all of a plain step, Δ all that a
drafting step adds). Its answer is then the cycles' mean tokens times t₁ over their mean cost.

**What is measured.** The same prompts, greedy or as the survey sampled, plain and with the
configuration, medians of `repeats`, each engine warmed first; the speedup is new tokens per second
with the configuration over the same without (decode time: the prompt's prefill left out).
vLLM's acceptance by position comes from its Prometheus counters (a second server runs the
configuration); HF's from its prompt-lookup candidate
generator, watched during the run. A miss of more than MISS (20 %) is flagged with its likely
reason. A server that dies or stalls ends the check with a message; what was measured stays.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from specviz.advise import survey_inputs
from specviz.advise.survey import Measured
from specviz.measure import speed_model as model  # the model of speed: the prediction is its answer

MISS = 0.20  # issue 43: a prediction further than this from the engine's measurement is flagged
HF_ENGINE, VLLM_ENGINE = "HF generate", "vLLM"


@dataclass
class EngineCheck:
    """One configuration predicted and measured on one engine; `error` says why it stopped early,
    and the fields hold what was measured before it did."""
    engine: str
    candidate: str
    k: int
    config: str
    machine: str
    measured_at: str
    concurrency: int = 1  # requests at once
    prompts: int = 0  # prompts measured (all of them unless it stopped early)
    max_new_tokens: int = 0
    step_s: float = 0.0  # t₁: the engine's plain decoding, seconds per new token
    extra_s: dict = field(default_factory=dict)  # n → Δ(n) in seconds
    predicted: float = 0.0
    measured: float = 0.0
    plain_tokens_per_s: float = 0.0
    spec_tokens_per_s: float = 0.0
    predicted_marginal: list = field(default_factory=list)
    measured_marginal: list = field(default_factory=list)
    same_text: bool = True  # the configuration gave the plain run's tokens (greedy)
    flag: str = ""
    error: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        d["extra_s"] = {str(n): s for n, s in self.extra_s.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "EngineCheck":
        d = dict(d)
        d["extra_s"] = {int(n): float(s) for n, s in d.get("extra_s", {}).items()}
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def extra_at(extra_s: dict, n: float) -> float:
    """Δ(n) between the timed sizes (linear; Δ(1) = 0; beyond the largest, the last slope)."""
    points = sorted({1: 0.0, **{int(k): float(v) for k, v in extra_s.items()}}.items())
    if n <= 1:
        return 0.0
    for (a, fa), (b, fb) in zip(points, points[1:]):
        if n <= b:
            return fa + (fb - fa) * (n - a) / (b - a)
    if len(points) < 2:
        return 0.0
    (a, fa), (b, fb) = points[-2], points[-1]
    return fb + (fb - fa) * (n - b) / (b - a)


def engine_inputs(m: Measured) -> model.Inputs:
    """The model's inputs for candidate `m` as the survey keeps them, its costs the engine's: a pass
    priced by the v it is asked with, and nothing else (the module docstring)."""
    return dataclasses.replace(survey_inputs.inputs(m), draft0=0.0, draft1=0.0, over0=0.0, over1=0.0,
                               ar_overhead=0.0, v_scale=1.0)


def predict(m: Measured, k: int, pass_s: float, extra_s: dict) -> float:
    """The model of speed's S at K = k (within the survey's K) for `m`, on the engine's step costs: t₁
    = `pass_s`, Δ(n) from `extra_s`, so v(n) = 1 + Δ(n) / t₁ (the module docstring); 0 without a t₁."""
    if pass_s <= 0:
        return 0.0
    v = functools.cache(lambda n: 1.0 + extra_at(extra_s, n) / pass_s)
    try:
        s = model.predict_at(engine_inputs(m), v, max(1, min(k, m.k_max)))
    except ZeroDivisionError:  # timings that cancel out (a Δ of −t₁): no prediction, not a traceback
        return 0.0
    return s if math.isfinite(s) else 0.0


def sizes_for(k: int) -> list[int]:
    """Pass sizes to time Δ at: up to K + 1, a few points between."""
    return sorted({1, 2, max(2, (k + 2) // 2), k + 1})


def miss_reason(chk: EngineCheck) -> str:
    """Why the check missed by more than MISS, in a sentence; '' when it did not."""
    if not chk.measured or abs(chk.predicted - chk.measured) <= MISS * chk.measured:
        return ""
    accepted_less = (chk.measured_marginal and chk.predicted_marginal
                     and sum(chk.measured_marginal) < 0.8 * sum(chk.predicted_marginal[:len(chk.measured_marginal)]))
    if accepted_less:
        return (f"{chk.engine} accepted less than the survey measured (marginal by position "
                f"{_rates(chk.measured_marginal)} against {_rates(chk.predicted_marginal)}): its method drafts "
                "other tokens than SpecViz's, or these prompts repeat themselves less")
    if chk.predicted > chk.measured:
        return (f"predicted {chk.predicted:.2f}× but measured {chk.measured:.2f}×: {chk.engine}'s speculative steps "
                "cost more on these prompts than Δ says (HF: its drafting and acceptance work around the forward, "
                "not timed; vLLM: longer contexts than the calibration prompt's), or other work on the host "
                "slowed the speculative runs")
    return (f"predicted {chk.predicted:.2f}× but measured {chk.measured:.2f}×: the passes timed for Δ cost more "
            "than the engine's steps did, or the plain runs were slowed by other work on the host")


def _rates(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def marginal_from_counts(accepted_at: list[float], cycles: float, k: int) -> list[float]:
    """Accepted tokens per draft position over drafting cycles, to position k."""
    return [(accepted_at[i] / cycles if cycles and i < len(accepted_at) else 0.0) for i in range(k)]


def median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def finish(chk: EngineCheck, plain: tuple[int, float], spec: tuple[int, float], m: Measured) -> EngineCheck:
    """Fill in the measured speedup (new tokens per second, speculative over plain; `plain` and
    `spec` are (tokens, seconds)) and the prediction from what the check timed."""
    chk.plain_tokens_per_s = plain[0] / plain[1] if plain[1] > 0 else 0.0
    chk.spec_tokens_per_s = spec[0] / spec[1] if spec[1] > 0 else 0.0
    chk.measured = chk.spec_tokens_per_s / chk.plain_tokens_per_s if chk.plain_tokens_per_s else 0.0
    chk.predicted = predict(m, chk.k, chk.step_s, chk.extra_s)
    chk.predicted_marginal = list(m.marginal[:chk.k])
    chk.flag = miss_reason(chk)
    return chk


def table(checks: list[EngineCheck]) -> str:
    """The checks as a markdown table: predicted against measured, with what each came from."""
    lines = ["| engine | configuration | requests at once | prompts | t₁ (ms/token) | predicted | measured | "
             "marginal acceptance by position: survey / engine | note |", "|---|---|---|---|---|---|---|---|---|"]
    for c in checks:
        note = c.error or c.flag or ("within 20 %" if c.measured else "")
        same = "" if c.same_text else " (tokens differ from plain)"
        lines.append(f"| {c.engine} | `{c.config}` | {c.concurrency} | {c.prompts} | {c.step_s * 1e3:.1f} | "
                     f"{c.predicted:.2f}× | {c.measured:.2f}×{same} | {_rates(c.predicted_marginal)} / "
                     f"{_rates(c.measured_marginal) or '–'} | {note} |")
    return "\n".join(lines)
