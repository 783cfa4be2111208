"""The advisor's survey file (survey.json; profile.json before 2026-12-05), the file the Advise tab
replays from a visitor's upload: its format names, its caps, the schema of the parts a Survey keeps
as dicts, and the rules between fields that no single field's bounds can say (docs/UPLOADS.md).

The Survey dataclasses in advise/survey.py are the schema: their annotations carry these caps, and
survey.read validates a file against them through pydantic (decoding/upload.py).
"""
from __future__ import annotations

from typing import Any

from pydantic import with_config
from typing_extensions import Required, TypedDict

from specviz.decoding.settings import MAX_K
from specviz.decoding.upload import PLAIN, UPLOAD, UPLOAD_OPEN, entries, items, number, text, whole

FORMAT = "specviz-advice/5"
# /1 had no concurrency timing, pair checks or disagreement; /1 and /2 named the concurrency
# timing "load" and a draft call a "step" (OLD_NAMES, OLD_MEASURED_NAMES: they read as /5);
# /4 adds the checks on engines (engine_checks), which older surveys have none of; /5 keeps per
# candidate what the model of speed needs (speed_inputs), which older ones derive from their means
READS = ("specviz-advice/1", "specviz-advice/2", "specviz-advice/3", "specviz-advice/4", FORMAT)
OLD_NAMES = {"load": "concurrency", "load_note": "concurrency_note"}
OLD_MEASURED_NAMES = {"per_step": "per_call"}  # in each entry of "measured"

# Caps for a survey a visitor uploads (docs/UPLOADS.md): a few candidates, K up to the engine's
# maximum, v(n) and the concurrency timing at a bounded number of sizes.
MAX_BYTES = 4 * 1024 * 1024  # the recorded survey is 7 kB
MAX_CANDIDATES = 32
MAX_SIZES = 512  # pass sizes n of v(n) and of the concurrency timing
MAX_PASS = 4096  # largest pass size n (a tree of MAX_K levels is far smaller)
MAX_BATCH = 4096
MAX_SHAPES = 4096  # distinct drafts a candidate sent (a few hundred in a survey of 8 prompts)
MAX_SHAPE_NODES = 200_000  # nodes over a candidate's shapes, each counted once: bounds the model's work

# The bounded types of the survey's fields (advice.py's annotations use them).
LABEL = text(200)
NOTE = text(2000)
COST = number(0.0, 1e6)
BIG_COUNT = whole(0, 10 ** 12)
K = whole(1, MAX_K)
PASS_SIZE = whole(1, MAX_PASS)
RATES = items(number(0.0, 1e6), MAX_K)


# A Survey keeps three parts as the dicts their writers make (the advisor's pair-check findings,
# advise/disagreement.Disagreement.to_dict, advise/engine_check.EngineCheck.to_dict), and
# engine_check.py imports advice.py: so their schema is a TypedDict here, not their dataclass.
@with_config(UPLOAD_OPEN)
class Finding(TypedDict, total=False, extra_items=PLAIN):
    level: text(16)
    message: Required[NOTE]


@with_config(UPLOAD)
class DisagreementRecord(TypedDict):
    format: text(64)
    candidates: items(LABEL, MAX_CANDIDATES)
    tokens: BIG_COUNT
    covered: entries(BIG_COUNT, MAX_CANDIDATES)
    rescued: entries(entries(BIG_COUNT, MAX_CANDIDATES), MAX_CANDIDATES)
    union: BIG_COUNT


@with_config(UPLOAD)
class EngineCheckRecord(TypedDict, total=False):
    engine: Required[text(64)]
    candidate: Required[LABEL]
    k: Required[K]
    config: Required[text(4000)]
    machine: Required[text(500)]
    measured_at: Required[text(64)]
    concurrency: whole(1, MAX_BATCH)
    prompts: whole(0, 10 ** 6)
    max_new_tokens: whole(0, 10 ** 6)
    step_s: COST
    extra_s: entries(COST, 64, key=PASS_SIZE)
    predicted: COST
    measured: COST
    plain_tokens_per_s: COST
    spec_tokens_per_s: COST
    predicted_marginal: RATES
    measured_marginal: RATES
    same_text: bool
    flag: NOTE
    error: NOTE


FINDINGS = entries(items(Finding, 64), MAX_CANDIDATES)
ENGINE_CHECKS = items(EngineCheckRecord, 64)


def upgraded(d: dict) -> dict:
    """A survey of an older format with today's names (a survey of today's, as it is)."""
    if d.get("format") == FORMAT:
        return d
    d = {OLD_NAMES.get(k, k): v for k, v in d.items()}
    if isinstance(d.get("measured"), list):
        d["measured"] = [{OLD_MEASURED_NAMES.get(k, k): v for k, v in m.items()} if isinstance(m, dict) else m
                         for m in d["measured"]]
    return d


def survey_rules(s: Any) -> str | None:
    """What the fields' bounds cannot say alone, in a Survey: lengths that must agree, names that
    must exist. The first rule it breaks, in words (after "The survey"), or None."""
    if not s.v:
        return ": 'v' needs at least one pass size."
    for i, m in enumerate(s.measured):
        k = m.k_max
        if len(m.reached) != k or len(m.accepted) != k or len(m.nodes_at_depth) not in (0, k):
            return f", candidate {i}: 'reached', 'accepted' and 'nodes_at_depth' must have k_max ({k}) entries."
        if m.speed_inputs is not None and sum(sum(shape.nodes) for shape in m.speed_inputs.shapes) > MAX_SHAPE_NODES:
            return f", candidate {i}: 'speed_inputs' holds more than {MAX_SHAPE_NODES} nodes over its shapes."
    timed = s.concurrency
    if timed:
        if not timed.sizes or not timed.batch_sizes or len(timed.pass_s) != len(timed.batch_sizes) \
                or any(len(row) != len(timed.sizes) for row in timed.pass_s):
            return ": 'concurrency': 'pass_s' must have a row per batch size and a column per size."
    dis = s.disagreement
    if dis:
        names = dis["candidates"]
        if len(set(names)) != len(names) or set(dis["covered"]) != set(names) or set(dis["rescued"]) != set(names) \
                or any(set(r) != set(names) - {a} for a, r in dis["rescued"].items()):
            return ": 'disagreement': 'covered' and 'rescued' must name exactly its candidates, each once."
    return None
