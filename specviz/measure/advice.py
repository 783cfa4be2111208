"""The pair advisor's arithmetic: what a survey predicts for every K, with several runs at once, and
why a check missed its prediction.

The survey's data and its file are measure/survey.py (re-exported here, where its callers read
them); measuring is measure/advisor.py; everything here is plain data and arithmetic (no torch, no
UI), so a saved survey replays in the app and on the command line without a model.

**Per-position acceptance.** Position i of a draft is *reached* when the cycle drafted at least i
deep and positions 1…i−1 were accepted. Over all cycles of a candidate measured at `k_max`:
- the *conditional* rate, P(accepted at i | position i was reached) = accepted_i ÷ reached_i;
- the *marginal* rate, P(position i accepted) = accepted_i ÷ cycles.

**S(K) for every K from one measurement.** Accepting at position i does not depend on what was
drafted after it, so cutting drafts at K keeps positions 1…K as measured. Costs are in *plain
cycles* (one measured cycle of plain decoding; `pass_share` of it is its one-token target pass).
With n_K the mean draft tokens per cycle at depth ≤ K (siblings included), v(n) a target pass over
n tokens in one-token passes, and o the candidate's own time per cycle outside drafting and its pass,

    S(K) = (1 + Σ_{i=1..K} marginal_i) / (cost_draft(K) + pass_share · v(n_K + 1) + o),

cost_draft(K) = K·c for a method that runs a model per draft call (c: one call), else c, its
measured drafting per cycle. With pass_share = 1 and o = 0 this is Leviathan et al.'s S(K)
(measure/theory.py). The break-even rate is the constant α at which S at the candidate's best K
would be 1. v(n) is timed in the same run at the prompts' mean context length.

**K auto.** A planned candidate (`auto:hybrid`) is measured as SpecViz runs it by default: its
method's K limit, the planner choosing each cycle what to send (decoding/planner.py). Its one point is
S = (1 + Σ_i marginal_i) / (c + pass_share · (s · v(n̄ + 1) + (1 − s)) + o), with s the share of cycles that
sent a draft and n̄ the nodes those sent, c its drafting per cycle: the model of speed of
measure/theory.py with the sizes its planner sent. No engine runs SpecViz's planner, so Deploy writes
the best fixed-K pick.

**Runs at once (concurrency).** With B runs decoding at once every pass is batched: r_B(n) is a
pass of n tokens per run at batch B over a one-token pass at batch 1 (timed). Plain decoding makes
one token per run per pass_share · r_B(1) + (1 − pass_share) plain cycles; a speculative cycle
costs its drafting and own work as at batch 1 (drafts assumed not to batch: so for draft-free
methods, the pessimistic case for a model draft) plus the batched pass, so

    S_B(K) = (1 + Σ_{i≤K} marginal_i) · (pass_share · r_B(1) + 1 − pass_share)
             / (cost_draft(K) + pass_share · r_B(n_K + 1) + o),

which is S(K) at B = 1. A batch fills the compute a run leaves idle, r_B(n)/r_B(1) grows towards n,
and the candidate stops paying at the first B where S_B < 1 at every K.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from specviz.decoding import speed
from specviz.measure.survey import (  # noqa: F401 -- the survey's data: the advisor's callers read it here
    AUTO,
    MISS,
    Candidate,
    Check,
    ConcurrencyCost,
    Measured,
    Survey,
    loads,
    read,
    save,
)
from specviz.measure.theory import best_k, expected_tokens

CONCURRENCY = (1, 2, 4, 8, 16)  # runs at once for the concurrency prediction (the app's class is ~30)


# -- prediction: pure arithmetic ------------------------------------------------------------------
def tokens_per_cycle(m: Measured, k: int) -> float:
    return 1.0 + sum(m.marginal[:min(k, m.k_max)])


def _draft_cost(m: Measured, k: int) -> float:
    return k * m.c if m.per_call else m.c


def _nodes(m: Measured, k: int) -> float:
    k = min(k, m.k_max)
    return m.nodes_at_depth[k - 1] if m.nodes_at_depth else float(k)


def _cycle_cost(m: Measured, k: int, v: Callable[[float], float], pass_share: float) -> float:
    return _draft_cost(m, k) + pass_share * v(_nodes(m, k) + 1) + m.overhead


def predicted_speedup(m: Measured, k: int, v: Callable[[float], float], pass_share: float = 1.0) -> float:
    """S(K) of the module docstring."""
    k = min(k, m.k_max)
    return tokens_per_cycle(m, k) / _cycle_cost(m, k, v, pass_share)


def _planned_passes(m: Measured, v: Callable[[float], float]) -> float:
    """A planned candidate's mean pass: over the nodes a sending cycle sent, v(1) for one that sent nothing."""
    share, nodes = m.sent_share or 0.0, m.sent_nodes or 0.0
    return share * v(nodes + 1) + (1 - share) * v(1)


def planned_speedup(m: Measured, v: Callable[[float], float], pass_share: float = 1.0) -> float:
    """S of a planned candidate (K auto) as its planner sent: 1 + Σ_d reach_d tokens a cycle, for its
    drafting, its overhead and its mean pass, the model of speed of measure/theory.py with the sent
    sizes averaged."""
    return tokens_per_cycle(m, m.k_max) / (m.c + pass_share * _planned_passes(m, v) + m.overhead)


def curve(m: Measured, v: Callable[[float], float], pass_share: float = 1.0) -> list[tuple[int, float]]:
    """S at every K; a planned candidate has one point, at its K limit, where its planner chose."""
    if m.candidate.planned:
        return [(m.k_max, planned_speedup(m, v, pass_share))]
    return [(k, predicted_speedup(m, k, v, pass_share)) for k in range(1, m.k_max + 1)]


def break_even(m: Measured, k: int, v: Callable[[float], float], pass_share: float = 1.0) -> float | None:
    """The constant per-position rate α at which S(k) = 1 (None: it loses even at α = 1)."""
    cost = _cycle_cost(m, k, v, pass_share)
    if expected_tokens(1.0, k) < cost:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens(mid, k) < cost else (lo, mid)
    return hi


def ranked(survey: Survey) -> list[tuple[Measured, int, float]]:
    """(candidate, best K, predicted S there), best first."""
    rows = [(m, *best_k(curve(m, survey.v_of, survey.pass_share))) for m in survey.measured]
    return sorted(rows, key=lambda r: -r[2])


def concurrent_speedup(m: Measured, k: int, timed: ConcurrencyCost, i: int, pass_share: float = 1.0) -> float:
    """S_B(K) of the module docstring at batch timed.batch_sizes[i]."""
    k = min(k, m.k_max)
    r = lambda n: timed.pass_at(i, n) / timed.one_token_s(0)  # noqa: E731 -- r_B(n)
    plain = pass_share * r(1) + 1.0 - pass_share
    if m.candidate.planned:  # as its planner sent at batch 1 (the app's planner re-prices at the batch)
        return planned_speedup(m, r, pass_share) * plain
    return tokens_per_cycle(m, k) * plain / _cycle_cost(m, k, r, pass_share)


def under_concurrency(survey: Survey) -> list[tuple[Measured, list[tuple[int, int, float]], int | None]]:
    """Per candidate: (batch size, best K there, S_B) for every measured batch size, and the first
    batch size at which it no longer pays (None: it pays at every one measured)."""
    if survey.concurrency is None:
        return []
    out = []
    for m in survey.measured:
        points = []
        for i, b in enumerate(survey.concurrency.batch_sizes):
            ks = [m.k_max] if m.candidate.planned else range(1, m.k_max + 1)
            k, s = best_k([(k, concurrent_speedup(m, k, survey.concurrency, i, survey.pass_share)) for k in ks])
            points.append((b, k, s))
        out.append((m, points, next((b for b, _, s in points if s < 1.0), None)))
    return out


@dataclass
class Terms:
    """A cycle's terms of the model of speed, in plain cycles: τ, drafting, the pass, the rest; and the
    plain decoding speed the speedup is taken against."""
    tau: float
    draft: float
    verify: float
    overhead: float
    ar_tokens_per_s: float


def predicted_terms(m: Measured, k: int, v: Callable[[float], float], pass_share: float,
                    ar_tokens_per_s: float) -> Terms:
    """The terms the survey predicted for `m` at K = k."""
    if m.candidate.planned:
        return Terms(tokens_per_cycle(m, m.k_max), m.c, pass_share * _planned_passes(m, v), m.overhead,
                     ar_tokens_per_s)
    k = min(k, m.k_max)
    return Terms(tokens_per_cycle(m, k), _draft_cost(m, k), pass_share * v(_nodes(m, k) + 1), m.overhead,
                 ar_tokens_per_s)


TERM_WORDS = {"tau": speed.label("mean_accepted_tokens"), "draft": "drafting", "verify": "the verify pass",
              "overhead": "the rest of a cycle (overhead)"}


def explained_miss(predicted: float, measured: float, want: Terms, got: Terms) -> str:
    """Why a check missed its prediction by more than MISS, from the waterfall's terms: the term whose
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
    return head + (f"{TERM_WORDS[name]} was {getattr(got, name):.2f} against the {getattr(want, name):.2f} "
                   f"predicted{' plain cycles' if name != 'tau' else ' tokens'} a cycle, the term that moved S most "
                   f"({effects[name]:+.0%})")
