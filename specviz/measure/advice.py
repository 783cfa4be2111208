"""The pair advisor's data and arithmetic: what was measured, what it predicts, and the report.

Measuring is specviz/measure/advisor.py; everything here is plain data and arithmetic (no torch,
no UI), so a saved survey replays in the app and on the command line without a model.

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

import dataclasses
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Literal

from pydantic import with_config
from typing_extensions import TypedDict

from specviz.decoding import speed
from specviz.decoding.upload import PLAIN, UPLOAD, UPLOAD_OPEN, Reader, enforced, entries, items, number, text, whole
from specviz.measure import survey_schema
from specviz.measure.survey_schema import (
    BIG_COUNT,
    COST,
    ENGINE_CHECKS,
    FINDINGS,
    FORMAT,
    LABEL,
    MAX_BATCH,
    MAX_CANDIDATES,
    MAX_SIZES,
    NOTE,
    PASS_SIZE,
    READS,
    DisagreementRecord,
    K,
)
from specviz.measure.theory import best_k, expected_tokens
from specviz.pricing.cost_profile import interpolate
from specviz.proposers import REGISTRY, resolve_draft

MISS = 0.15  # a prediction further than this from the measurement is flagged
AUTO = "auto:"  # a candidate's prefix for SpecViz's planned decoding ("hybrid, K auto")
CONCURRENCY = (1, 2, 4, 8, 16)  # runs at once for the concurrency prediction (the app's class is ~30)


def _layers_text(layers: list[int]) -> str:
    """[0, 1, 2, 5, 6] → '0-2+5-6' ('+', not ',', so a list of candidates can be comma-separated)."""
    runs, start = [], layers[0]
    for a, b in zip(layers, layers[1:] + [None]):
        if b != a + 1:
            runs.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return "+".join(runs)


def _parse_layers(text: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"[+,]", text):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            raise ValueError(f"'{text}' is not a layer list: write indices and ranges, e.g. layerskip:0-9+20-29")
        lo, hi = int(m[1]), int(m[2] or m[1])
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


# The dataclasses below are also the survey file's schema: each annotation carries its bounds
# (measure/survey_schema.py's caps), and read() validates a file against them.
LAYERS = items(whole(0, 4095), 4096)
DRAFT_SPEC = text(200)


@with_config(UPLOAD)
@dataclass
class Candidate:
    """One row of the advice: an engine method; for 'draft' the draft model's spec, for
    'layerskip' optionally the kept layers."""
    method: text(64)
    draft: DRAFT_SPEC | None = None
    layers: LAYERS | None = None
    planned: bool = False  # "K auto": SpecViz's planner chooses what to send each cycle (decoding/planner.py)

    @classmethod
    def parse(cls, text: str) -> "Candidate":
        """'pld', 'logitspec', 'head', 'hybrid', 'layerskip', 'layerskip:0-9+20-29' or 'draft:SPEC'; with
        'auto:' before any of them, that method as SpecViz runs it by default, its planner on ('K auto')."""
        text = text.strip()
        if text.startswith(AUTO):
            return dataclasses.replace(cls.parse(text[len(AUTO):]), planned=True)
        method, _, rest = text.partition(":")
        if method == "layerskip":
            return cls(method, None, _parse_layers(rest) if rest.strip() else None)
        method, draft = resolve_draft(method, rest or None)
        if method != "ar" and method not in REGISTRY:
            raise ValueError(f"'{text}' is not a candidate: use one of {', '.join(REGISTRY)}, or draft:SPEC")
        if method == "draft" and not draft:
            raise ValueError("a draft-model candidate names its model: draft:SPEC (a hub id or 'bundled')")
        return cls(method, draft)

    @property
    def label(self) -> str:
        if self.layers:
            base = f"layerskip[{_layers_text(self.layers)}]"
        else:
            base = f"draft {self.draft}" if self.method == "draft" else self.method
        return f"{base}, K auto" if self.planned else base

    @property
    def knobs(self) -> dict:
        return {"layers": list(self.layers)} if self.layers else {}


BY_POSITION = items(number(0.0, 1e12), survey_schema.MAX_K)
NODES_AT_DEPTH = items(number(0.0, 1e6), survey_schema.MAX_K)


@with_config(UPLOAD)
@dataclass
class Measured:
    """One candidate measured once at k_max (see the module docstring)."""
    candidate: Candidate
    k_max: K
    cycles: BIG_COUNT
    reached: BY_POSITION
    accepted: BY_POSITION
    nodes_at_depth: NODES_AT_DEPTH  # mean draft tokens per cycle at depth ≤ d, d = 1…k_max
    c: COST  # a draft call (a model draft) or drafting per cycle (draft-free), in plain cycles
    per_call: bool  # whether c is per draft call (a model drafting one level) or per cycle
    tokens_per_s: COST
    overhead: COST = 0.0  # o: time per cycle outside drafting and the target pass, in plain cycles
    # a planned candidate (K auto): the share of cycles that sent a draft, and the mean nodes of those
    sent_share: number(0.0, 1.0) | None = None
    sent_nodes: number(0.0, 1e6) | None = None

    @property
    def conditional(self) -> list[float]:
        return [a / r if r else 0.0 for a, r in zip(self.accepted, self.reached)]

    @property
    def marginal(self) -> list[float]:
        return [a / self.cycles if self.cycles else 0.0 for a in self.accepted]


@with_config(UPLOAD)
@dataclass
class Check:
    k: K
    predicted: COST
    measured: COST
    flag: NOTE = ""  # why the prediction missed by more than MISS, if it did


PASS_S = number(1e-9, 1e4)  # seconds of a pass, or of a plain cycle


@with_config(UPLOAD)
@dataclass
class ConcurrencyCost:
    """Seconds of one target pass over n tokens per run (`pass_s[i][j]`: batch_sizes[i], sizes[j]),
    timed in this process with a cache of `prefix_len` tokens per run; sizes[0] is 1, a one-token pass."""
    batch_sizes: items(whole(1, MAX_BATCH), 32)
    sizes: items(PASS_SIZE, MAX_SIZES)
    pass_s: items(items(PASS_S, MAX_SIZES), 32)
    prefix_len: whole(0, 10 ** 7)

    def one_token_s(self, i: int) -> float:
        """Seconds of a one-token pass per run at batch_sizes[i]."""
        return self.pass_s[i][0]

    def pass_at(self, i: int, n: float) -> float:
        return interpolate(dict(zip(self.sizes, self.pass_s[i])), n)


V = entries(number(1e-6, 1e6), MAX_SIZES, key=PASS_SIZE)


@with_config(UPLOAD)
@dataclass
class Survey:
    """Everything the advice rests on, as data: reloadable without a model."""
    target: LABEL
    prompts: whole(0, 10 ** 6)
    settings: entries(PLAIN, 64)
    machine: text(500)
    ar_tokens_per_s: COST
    step_s: PASS_S  # one plain cycle, measured: the unit of every cost here
    v: V  # v(n) at n = 1…: a pass over n tokens in one-token passes
    measured: items(Measured, MAX_CANDIDATES) = field(default_factory=list)
    checks: entries(Check, MAX_CANDIDATES) = field(default_factory=dict)
    measured_at: text(64) = ""
    pairs: FINDINGS = field(default_factory=dict)  # draft label → pair-check findings
    refused: entries(NOTE, MAX_CANDIDATES) = field(default_factory=dict)  # candidate label → why it was not measured
    concurrency: ConcurrencyCost | None = None
    concurrency_note: NOTE = ""  # why there is no concurrency prediction, when there is none
    disagreement: DisagreementRecord | None = None  # measure/disagreement.Disagreement.to_dict()
    disagreement_note: NOTE = ""  # why there is none, when there is none
    pass_share: number(1e-6, 1.0) = 1.0  # the share of a plain cycle that is its one-token target pass
    v_source: NOTE = ""  # where v(n) came from
    engine_checks: ENGINE_CHECKS = field(default_factory=list)  # measure/engine_check.EngineCheck.to_dict()

    def v_of(self, n: float) -> float:
        return interpolate(self.v, n)

    def to_dict(self) -> dict:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "Survey":
        """A survey from its JSON form (an older format's names mapped to today's), checked against
        its schema (the dataclasses' annotations) and rules first."""
        return loads(json.dumps(d))


@with_config(UPLOAD)
@dataclass
class _SurveyFile(Survey):
    """A survey as its file holds it: with its format."""
    format: Literal[READS] = FORMAT


@with_config(UPLOAD_OPEN)
class _Head(TypedDict, total=False):
    format: object


_WHAT = "an advice survey"
_HEAD = Reader(_Head, {(): "The survey"}, _WHAT)
_SURVEY = Reader(_SurveyFile, {(): "The survey"}, _WHAT)


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



def save(survey: Survey, path: Path) -> None:
    Path(path).write_text(json.dumps(survey.to_dict(), indent=1), encoding="utf-8")


def read(path: Path) -> Survey:
    """A saved survey.json (or profile.json from before 2026-12-05); a file that is not one (too
    large, not JSON, outside the schema) is a ValueError whose message says where and what."""
    try:
        if (size := Path(path).stat().st_size) > survey_schema.MAX_BYTES and enforced():
            raise ValueError(f"The file is {size / 1e6:.0f} MB; an advice survey is at most "
                             f"{survey_schema.MAX_BYTES / 1e6:.0f} MB.")
        return loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"Cannot read the advice survey {Path(path).name}: {e}") from None


def loads(text: str | bytes) -> Survey:
    """A survey from its JSON text; text that is not one (too large, not JSON, outside the schema or
    its rules) is a ValueError whose message says where and what."""
    if len(text) > survey_schema.MAX_BYTES and enforced():
        raise ValueError(f"The text is {len(text) / 1e6:.0f} MB; an advice survey is at most "
                         f"{survey_schema.MAX_BYTES / 1e6:.0f} MB.")
    try:
        got = _HEAD(text).get("format")
    except ValueError as e:
        if not str(e).startswith("The survey:"):  # not JSON
            raise
        got = None
    if got not in READS:
        raise ValueError(f"not a SpecViz advice survey (format {str(got)[:40]!r}, expected {FORMAT!r})")
    if got != FORMAT:
        text = json.dumps(survey_schema.upgraded(json.loads(text)))
    try:
        read = _SURVEY(text)
    except ValueError as e:
        raise ValueError(f"the advice survey is damaged: {str(e)[len('The survey') + 2:]} measure it again.") from None
    if broken := survey_schema.survey_rules(read):
        raise ValueError(f"the advice survey is damaged: {broken[2:]} measure it again.")
    return Survey(**{f.name: getattr(read, f.name) for f in dataclasses.fields(Survey)})
