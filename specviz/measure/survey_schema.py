"""The bounded schema of the advisor's survey (survey.json; profile.json before 2026-12-05), the
file the Advise tab replays from a visitor's upload: every field's type, range and cap, and the
rules between fields (specviz/decoding/schema.py; README, "Uploads")."""
from __future__ import annotations

from specviz.decoding.schema import Bool, Int, ListOf, MapOf, Num, Obj, SchemaError, Text
from specviz.decoding.settings import MAX_K

FORMAT = "specviz-advice/4"
# /1 had no concurrency timing, pair checks or disagreement; /1 and /2 named the concurrency
# timing "load" and a draft call a "step" (OLD_NAMES, OLD_MEASURED_NAMES: they read as /4);
# /4 adds the checks on engines (engine_checks), which older surveys have none of
READS = ("specviz-advice/1", "specviz-advice/2", "specviz-advice/3", FORMAT)
OLD_NAMES = {"load": "concurrency", "load_note": "concurrency_note"}
OLD_MEASURED_NAMES = {"per_step": "per_call"}  # in each entry of "measured"

# Caps for a survey a visitor uploads (README, "Uploads"): a few candidates, K up to the engine's
# maximum, v(n) and the concurrency timing at a bounded number of sizes.
MAX_BYTES = 4 * 1024 * 1024  # the recorded survey is 7 kB
MAX_CANDIDATES = 32
MAX_SIZES = 512  # pass sizes n of v(n) and of the concurrency timing
MAX_PASS = 4096  # largest pass size n (a tree of MAX_K levels is far smaller)
MAX_BATCH = 4096
_LABEL = Text(200)
_COST = Num(0.0, 1e6)
_COUNT = Num(0.0, 1e12)
_CANDIDATE = Obj({"method": (Text(64), True), "draft": (Text(200, null=True), False),
                  "layers": (ListOf(Int(0, 4095), 4096, null=True), False), "planned": (Bool(), False)})
_MEASURED = Obj({"candidate": (_CANDIDATE, True), "k_max": (Int(1, MAX_K), True), "cycles": (Int(0, 10 ** 12), True),
                 "reached": (ListOf(_COUNT, MAX_K), True), "accepted": (ListOf(_COUNT, MAX_K), True),
                 "nodes_at_depth": (ListOf(Num(0.0, 1e6), MAX_K), True), "c": (_COST, True),
                 "per_call": (Bool(), True), "tokens_per_s": (_COST, True), "overhead": (_COST, False),
                 "sent_share": (Num(0.0, 1.0, null=True), False), "sent_nodes": (Num(0.0, 1e6, null=True), False)})
_CHECK = Obj({"k": (Int(1, MAX_K), True), "predicted": (_COST, True), "measured": (_COST, True),
              "flag": (Text(2000), False)})
_FINDING = Obj({"level": (Text(16), False), "message": (Text(2000), True)}, extra=16)
_CONCURRENCY = Obj({"batch_sizes": (ListOf(Int(1, MAX_BATCH), 32), True),
                    "sizes": (ListOf(Int(1, MAX_PASS), MAX_SIZES), True),
                    "pass_s": (ListOf(ListOf(Num(1e-9, 1e4), MAX_SIZES), 32), True),
                    "prefix_len": (Int(0, 10 ** 7), True)},
                   null=True)
_DISAGREEMENT = Obj({"format": (Text(64), True), "candidates": (ListOf(_LABEL, MAX_CANDIDATES), True),
                     "tokens": (Int(0, 10 ** 12), True), "covered": (MapOf(Int(0, 10 ** 12), MAX_CANDIDATES), True),
                     "rescued": (MapOf(MapOf(Int(0, 10 ** 12), MAX_CANDIDATES), MAX_CANDIDATES), True),
                     "union": (Int(0, 10 ** 12), True)}, null=True)
_RATES = ListOf(Num(0.0, 1e6), MAX_K)
_ENGINE_CHECK = Obj({"engine": (Text(64), True), "candidate": (_LABEL, True), "k": (Int(1, MAX_K), True),
                     "config": (Text(4000), True), "machine": (Text(500), True), "measured_at": (Text(64), True),
                     "concurrency": (Int(1, MAX_BATCH), False), "prompts": (Int(0, 10 ** 6), False),
                     "max_new_tokens": (Int(0, 10 ** 6), False), "step_s": (_COST, False),
                     "extra_s": (MapOf(_COST, 64, int_keys=True, max_key=MAX_PASS), False),
                     "predicted": (_COST, False), "measured": (_COST, False), "plain_tokens_per_s": (_COST, False),
                     "spec_tokens_per_s": (_COST, False), "predicted_marginal": (_RATES, False),
                     "measured_marginal": (_RATES, False), "same_text": (Bool(), False), "flag": (Text(2000), False),
                     "error": (Text(2000), False)})
SURVEY = Obj({"format": (Text(64, choices=READS), True), "target": (_LABEL, True), "prompts": (Int(0, 10 ** 6), True),
               "settings": (Obj({}, extra=64), True), "machine": (Text(500), True),
               "ar_tokens_per_s": (_COST, True), "step_s": (Num(1e-9, 1e4), True),
               "v": (MapOf(Num(1e-6, 1e6), MAX_SIZES, int_keys=True, max_key=MAX_PASS), True),
               "measured": (ListOf(_MEASURED, MAX_CANDIDATES, label="candidate"), False),
               "checks": (MapOf(_CHECK, MAX_CANDIDATES), False), "measured_at": (Text(64), False),
               "pairs": (MapOf(ListOf(_FINDING, 64), MAX_CANDIDATES), False),
               "refused": (MapOf(Text(2000), MAX_CANDIDATES), False), "concurrency": (_CONCURRENCY, False),
               "concurrency_note": (Text(2000), False), "disagreement": (_DISAGREEMENT, False),
               "disagreement_note": (Text(2000), False), "pass_share": (Num(1e-6, 1.0), False),
               "v_source": (Text(2000), False), "engine_checks": (ListOf(_ENGINE_CHECK, 64), False)})


def upgraded(d: dict) -> dict:
    """A survey of an older format with today's names (a survey of today's, as it is)."""
    if d.get("format") == FORMAT:
        return d
    d = {OLD_NAMES.get(k, k): v for k, v in d.items()}
    if isinstance(d.get("measured"), list):
        d["measured"] = [{OLD_MEASURED_NAMES.get(k, k): v for k, v in m.items()} if isinstance(m, dict) else m
                         for m in d["measured"]]
    return d


def survey_rules(d: dict) -> None:
    """What the schema cannot say alone: lengths that must agree, names that must exist."""
    if not d["v"]:
        raise SchemaError("The survey: 'v' needs at least one pass size.")
    for i, m in enumerate(d.get("measured", [])):
        k = m["k_max"]
        if len(m["reached"]) != k or len(m["accepted"]) != k or len(m["nodes_at_depth"]) not in (0, k):
            raise SchemaError(f"The survey: candidate {i}: 'reached', 'accepted' and 'nodes_at_depth' must have "
                              f"k_max ({k}) entries.")
    timed = d.get("concurrency")
    if timed:
        sizes, batches = timed["sizes"], timed["batch_sizes"]
        if not sizes or not batches or len(timed["pass_s"]) != len(batches) \
                or any(len(row) != len(sizes) for row in timed["pass_s"]):
            raise SchemaError("The survey: 'concurrency': 'pass_s' must have a row per batch size and a column "
                              "per size.")
    dis = d.get("disagreement")
    if dis:
        names = dis["candidates"]
        if len(set(names)) != len(names) or set(dis["covered"]) != set(names) or set(dis["rescued"]) != set(names) \
                or any(set(r) != set(names) - {a} for a, r in dis["rescued"].items()):
            raise SchemaError("The survey: 'disagreement': 'covered' and 'rescued' must name exactly its candidates, "
                              "each once.")
