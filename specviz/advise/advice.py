"""The pair advisor's predictions: what a survey predicts for every K, for K auto, with several runs
at once, the break-even rate, and the terms a check is explained by.

**One model.** Every predicted number here is the model of speed's (measure/speed_model.py, `predict_at`
and `predict`) on the `Inputs` the survey keeps for a candidate (advise/survey_inputs.py: kept by a
survey of format /5, derived from the means of an older one). This module chooses what to ask the
model and ranks its answers; it has no formula of its own for a speedup, and
tests/advise/test_advisor.py fails if one comes back. The survey's data and its file are
advise/survey.py (re-exported here, where its callers read them); measuring is advise/advisor.py.
Plain data and arithmetic (no torch, no UI), so a saved survey replays in the app and on the command
line without a model.

**Every K.** A candidate is measured once at `k_max` with planning off, so each cycle sent what it
drafted: S(K) = predict_at(x, v, K) for K = 1…k_max, every cycle's draft cut at K. Past D, the
deepest depth the survey judged (`measured_depth`), acceptance is the model's assumption, and the
report says so ("measured up to depth D; beyond it, assumed").

**K auto.** A planned candidate (`auto:hybrid`) is measured as SpecViz runs it by default, its
method's K limit with the planner choosing what to send: its one point is predict_at(x, v, None),
every cycle as the planner sent it. No engine runs SpecViz's planner, so Deploy writes the best
fixed-K pick; the pick here is whatever is predicted fastest, fixed K or planned.

**Break-even.** The constant acceptance α, the same at every depth (x's α_d all α, and no reach by
sent depth, so that reach_d = α^d), at which predict_at at the candidate's best K is 1, the drafts
sent and the costs as measured: found by bisection on the model's answers.

**Runs at once (concurrency).** With B runs decoding at once every target pass is batched: r_B(n) is a
pass of n tokens per run at batch B over a one-token pass at batch 1 (timed, `ConcurrencyCost`). The
model is asked with v = r_B, so its cycle prices the verify pass at batch B, and drafting and the rest
as at batch 1 (drafts assumed not to batch: so for draft-free methods, the pessimistic case for a
model draft). Its baseline, a plain token at 1 + o_AR one-token passes, is r_B(1) + o_AR at batch B
(the pass batches, the rest does not), so the model's answer is taken against that baseline:

    S_B(K) = predict_at(x, r_B, K) · (r_B(1) + o_AR) / (1 + o_AR),

which is S(K) at B = 1 (r_1 = v). A batch fills the compute a run leaves idle, r_B(n)/r_B(1) grows
towards n, and the candidate stops paying at the first B where S_B < 1 at every K.

**A check's terms.** The model's answer is τ · (1 + o_AR) / cost, cost = drafting + the verify pass +
the rest. Each term is read off the model by asking it again with one part switched off: τ with every
cost but a one-token pass set to nothing; drafting and the rest as what the cost loses without them;
the verify pass as what is left. All in one-token passes; a check's measured terms are in the same unit.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass
from typing import Callable

from specviz.advise import survey_inputs
from specviz.advise.survey import (  # noqa: F401 -- the survey's data: the advisor's callers read it here
    AUTO,
    MISS,
    Candidate,
    Check,
    ConcurrencyCost,
    Measured,
    Shape,
    SpeedInputs,
    Survey,
    loads,
    read,
    save,
)
from specviz.advise.survey_inputs import measured_depth  # noqa: F401 -- the report reads it here
from specviz.decoding import speed
from specviz.measure import speed_model as model  # the model of speed: every prediction below is its answer
from specviz.measure.theory import best_k

CONCURRENCY = (1, 2, 4, 8, 16)  # runs at once for the concurrency prediction (the app's class is ~30)


def inputs(m: Measured, pass_share: float = 1.0) -> model.Inputs:
    """The model's inputs for `m` (pass_share: the survey's, for an older survey's derived costs)."""
    return survey_inputs.inputs(m, pass_share)


_ANSWERS: dict = {}  # the model's answers the views of a survey asked for, by question (_remembered)
MEMO = 4096  # answers kept at most


def _remembered(ask: tuple, m: Measured, costs: object, compute: Callable[[], object]):
    """compute(), kept for the same question, candidate (every field, as repr writes it), pass costs
    and model of speed (a test that swaps the model's predict_at gets fresh answers): the Advise views,
    the report and Deploy ask the model the same questions many times. Pass costs that are not a
    survey's own (`costs` None) are not kept."""
    if costs is None:
        return compute()
    key = (ask, hashlib.blake2b(repr(m).encode(), digest_size=16).digest(), costs, model.predict_at)
    if key not in _ANSWERS:
        if len(_ANSWERS) >= MEMO:
            _ANSWERS.clear()
        _ANSWERS[key] = compute()
    return _ANSWERS[key]


def _costs_of(v: Callable[[float], float]) -> tuple | None:
    """A survey's v_of as data (its v table), to key what the model answered with it; None for another v."""
    owner = getattr(v, "__self__", None)
    return tuple(owner.v.items()) if isinstance(owner, Survey) and getattr(v, "__func__", None) is Survey.v_of else None


def _answer(x: model.Inputs, v: Callable[[float], float], k: int | None) -> float:
    """The model's S; a hostile file's costs that sum to nothing give 0, not a traceback."""
    try:
        s = model.predict_at(x, v, k)
    except ZeroDivisionError:
        return 0.0
    return s if s == s and abs(s) != float("inf") else 0.0


def _k(m: Measured, k: int | None) -> int | None:
    """What the model is asked for: None (every draft as sent) for a planned candidate or k None, else
    K within the survey's."""
    return None if m.candidate.planned or k is None else max(1, min(k, m.k_max))


def speedup_at(m: Measured, k: int | None, v: Callable[[float], float], pass_share: float = 1.0) -> float:
    """S at K = k (a planned candidate: as its planner sent), the model's answer."""
    return _remembered(("at", _k(m, k), pass_share), m, _costs_of(v),
                       lambda: _answer(inputs(m, pass_share), functools.cache(v), _k(m, k)))


def curve(m: Measured, v: Callable[[float], float], pass_share: float = 1.0) -> list[tuple[int, float]]:
    """S at every K up to k_max; a planned candidate has one point, at its K limit, where its planner chose."""
    def compute() -> list[tuple[int, float]]:
        x, price = inputs(m, pass_share), functools.cache(v)
        if m.candidate.planned:
            return [(m.k_max, _answer(x, price, None))]
        return [(k, _answer(x, price, k)) for k in range(1, m.k_max + 1)]
    return list(_remembered(("curve", pass_share), m, _costs_of(v), compute))


BISECTIONS = 16  # the break-even α to 2^-16: the table shows two decimals


def break_even(m: Measured, k: int, v: Callable[[float], float], pass_share: float = 1.0) -> float | None:
    """The constant α_d = α at which the model's S at K = k is 1 (None: it loses even at α = 1)."""
    def compute() -> float | None:
        x, price = inputs(m, pass_share), functools.cache(v)
        depth = max([k, 1] + [max(d, default=0) for d in x.sent])
        at = lambda alpha: _answer(dataclasses.replace(x, acceptance=[alpha] * depth,  # noqa: E731
                                                       reach_by_sent_depth={}), price, _k(m, k))
        if at(1.0) < 1.0:
            return None
        lo, hi = 0.0, 1.0
        for _ in range(BISECTIONS):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if at(mid) < 1.0 else (lo, mid)
        return hi
    return _remembered(("break-even", k, pass_share), m, _costs_of(v), compute)


def ranked(survey: Survey) -> list[tuple[Measured, int, float]]:
    """(candidate, best K, predicted S there), best first: fixed K and planned alike, by the model's S."""
    rows = [(m, *best_k(curve(m, survey.v_of, survey.pass_share))) for m in survey.measured]
    return sorted(rows, key=lambda r: -r[2])


def concurrent_speedup(m: Measured, k: int, timed: ConcurrencyCost, i: int, pass_share: float = 1.0) -> float:
    """S_B(K) of the module docstring at batch timed.batch_sizes[i]: the model asked with v = r_B, against
    a plain token at r_B(1) + o_AR."""
    return _concurrent(inputs(m, pass_share), m, k, timed, i)


def _concurrent(x: model.Inputs, m: Measured, k: int, timed: ConcurrencyCost, i: int) -> float:
    unit = timed.one_token_s(0)
    r = functools.cache(lambda n: timed.pass_at(i, n) / unit)  # r_B(n)
    return _answer(x, r, _k(m, k)) * (r(1) + x.ar_overhead) / (1 + x.ar_overhead)


def under_concurrency(survey: Survey) -> list[tuple[Measured, list[tuple[int, int, float]], int | None]]:
    """Per candidate: (batch size, best K there, S_B) for every measured batch size, and the first
    batch size at which it no longer pays (None: it pays at every one measured)."""
    if survey.concurrency is None:
        return []
    timed, out = survey.concurrency, []
    for m in survey.measured:
        def compute(m=m) -> list[tuple[int, int, float]]:
            points, x = [], inputs(m, survey.pass_share)
            for i, b in enumerate(timed.batch_sizes):
                ks = [m.k_max] if m.candidate.planned else range(1, m.k_max + 1)
                points.append((b, *best_k([(k, _concurrent(x, m, k, timed, i)) for k in ks])))
            return points
        points = list(_remembered(("concurrency", survey.pass_share), m, repr(timed), compute))
        out.append((m, points, next((b for b, _, s in points if s < 1.0), None)))
    return out


@dataclass
class Terms:
    """A cycle's terms of the model of speed, in one-token passes: τ, drafting, the pass, the rest; and
    the plain decoding speed the speedup is taken against."""
    tau: float
    draft: float
    verify: float
    overhead: float
    ar_tokens_per_s: float


def predicted_terms(m: Measured, k: int | None, v: Callable[[float], float], pass_share: float,
                    ar_tokens_per_s: float) -> Terms:
    """The terms the model predicts for `m` at K = k, each read off its answers (the module docstring)."""
    x, at, v = inputs(m, pass_share), _k(m, k), functools.cache(v)
    off = dict(draft0=0.0, draft1=0.0, over0=0.0, over1=0.0)
    tau = _answer(dataclasses.replace(x, **off, v_scale=1.0, ar_overhead=0.0), lambda n: 1.0, at)

    def cost(**zero) -> float:  # the model's mean cycle cost with the given parts switched off
        s = _answer(dataclasses.replace(x, **zero), v, at)
        return tau * (1 + x.ar_overhead) / s if s > 0 else 0.0

    whole = cost()
    draft = whole - cost(draft0=0.0, draft1=0.0)
    overhead = whole - cost(over0=0.0, over1=0.0)
    return Terms(tau, draft, whole - draft - overhead, overhead, ar_tokens_per_s)


TERM_WORDS = {"tau": speed.label("mean_accepted_tokens"), "draft": "drafting", "verify": "the verify pass",
              "overhead": "the rest of a cycle (overhead)"}


def explained_miss(predicted: float, measured: float, want: Terms, got: Terms) -> str:
    """Why a check missed its prediction by more than MISS, from the model's terms: the term whose
    change moved S the most, with both values; '' when it did not miss."""
    if not measured or abs(predicted - measured) <= MISS * measured:
        return ""
    cost = want.draft + want.verify + want.overhead
    effects = {"tau": got.tau / want.tau - 1 if want.tau else 0.0}
    effects.update({name: -(getattr(got, name) - getattr(want, name)) / cost if cost else 0.0
                    for name in ("draft", "verify", "overhead")})
    effects["plain"] = got.ar_tokens_per_s / want.ar_tokens_per_s - 1 if want.ar_tokens_per_s else 0.0
    name = max(effects, key=lambda n: abs(effects[n]))
    head = f"predicted {predicted:.2f}× but measured {measured:.2f}×: "
    if name == "plain":
        return head + (f"plain decoding ran at {got.ar_tokens_per_s:.1f} tokens/s in the check against "
                       f"{want.ar_tokens_per_s:.1f} in the survey, which moves every speedup ({effects[name]:+.0%})")
    unit = " tokens" if name == "tau" else " one-token passes"
    return head + (f"{TERM_WORDS[name]} was {getattr(got, name):.2f} against the {getattr(want, name):.2f} "
                   f"predicted{unit} a cycle, the term that moved S most ({effects[name]:+.0%})")
