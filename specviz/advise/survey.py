"""The advisor's survey as data: the candidates, what was measured for each, the checks, the
concurrency timing, and the survey.json file that holds them (profile.json before 2026-12-05).

The dataclasses are also the file's schema: each annotation carries its bounds (survey_schema.py's
caps), and `read`/`loads` validate a file against them through pydantic (decoding/upload.py), so a
visitor's upload is refused with a sentence that says where and what. The arithmetic that predicts
from a survey is advise/advice.py; measuring one is advise/advisor.py.
"""
from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import with_config
from typing_extensions import TypedDict

from specviz.advise import survey_schema
from specviz.advise.survey_schema import (
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
from specviz.decoding.upload import PLAIN, UPLOAD, UPLOAD_OPEN, Reader, enforced, entries, items, number, text, whole
from specviz.pricing.cost_profile import interpolate
from specviz.proposers import REGISTRY, resolve_draft

AUTO = "auto:"  # a candidate's prefix for SpecViz's planned decoding ("hybrid, K auto")
MISS = 0.15  # a prediction further than this from the measurement is flagged


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
# (advise/survey_schema.py's caps), and read() validates a file against them.
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
PROBS = items(number(0.0, 1.0), survey_schema.MAX_K)
PER_LEVEL = items(number(0.0, survey_schema.MAX_PASS), survey_schema.MAX_K)
FIT = number(-1e6, 1e6)  # a fitted line's intercept or slope, in one-token passes


@with_config(UPLOAD)
@dataclass
class Shape:
    """Cycles that sent the same draft: its nodes at depth 1, 2, … ([]: it sent nothing), whether it
    filled its K, and the levels a model drafted (a draft call each)."""
    nodes: items(whole(0, survey_schema.MAX_PASS), survey_schema.MAX_K)
    full: bool
    levels: whole(0, survey_schema.MAX_K)
    cycles: whole(1, 10 ** 9)


@with_config(UPLOAD)
@dataclass
class SpeedInputs:
    """What the model of speed reads off a candidate's runs (theory.text_inputs and machine_inputs,
    advise/survey_inputs.py): α_d, reach_d by how deep a cycle's draft went, the drafts sent (as
    shapes), per depth the nodes each source sent and the draft calls, per cycle; and the machine's
    costs in one-token passes."""
    acceptance: PROBS
    reach_by_sent_depth: entries(PROBS, survey_schema.MAX_K, key=K)
    shapes: items(Shape, survey_schema.MAX_SHAPES)
    nodes_by_source: entries(PER_LEVEL, 32)  # source kind (tree.Source.kind) → mean nodes at depth d a cycle
    calls_by_level: PER_LEVEL  # mean draft calls at depth d a cycle
    draft0: FIT
    draft1: FIT
    over0: FIT
    over1: FIT
    ar_overhead: number(0.0, 1e6)
    v_scale: number(1e-3, 1e6)
    # the drafts' shape at the deepest depth sent, which a draft grown past it continues, and the
    # tokens a run made where it stopped at its max new tokens (speed_model.level_shape, Inputs.budget)
    level_nodes: entries(number(0.0, survey_schema.MAX_PASS), 32) = field(default_factory=dict)
    level_keep: entries(number(0.0, 1.0), 32) = field(default_factory=dict)
    level_calls: number(0.0, survey_schema.MAX_K) | None = None
    budget: whole(0, 10 ** 9) = 0


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
    # what the model of speed needs (format /5 on); older surveys derive it (survey_inputs.derived)
    speed_inputs: SpeedInputs | None = None

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
    disagreement: DisagreementRecord | None = None  # advise/disagreement.Disagreement.to_dict()
    disagreement_note: NOTE = ""  # why there is none, when there is none
    pass_share: number(1e-6, 1.0) = 1.0  # the share of a plain cycle that is its one-token target pass
    v_source: NOTE = ""  # where v(n) came from
    engine_checks: ENGINE_CHECKS = field(default_factory=list)  # advise/engine_check.EngineCheck.to_dict()

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


# -- the file ------------------------------------------------------------------------------------
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
