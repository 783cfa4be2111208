"""Per-cycle traces: what the engine did, as plain data that serialises to JSON and back.

Names follow the papers: p is the target's probability of a token, q the draft's,
`accept_prob` is min(1, p/q) and r the uniform draw it was compared with.
Everything the views show is read from here; nothing is recomputed downstream.

The dataclasses are also the schema of a trace file (decoding/tracefile.py): each field's annotation
carries its bounds, the caps below, and pydantic validates an uploaded file against them
(decoding/upload.py). A new field is written by `to_dict` and read back from its one annotation.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, with_config
from typing_extensions import TypedDict

from specviz.decoding import speed
from specviz.decoding.settings import MAX_K
from specviz.decoding.upload import PLAIN, UPLOAD, UPLOAD_OPEN, entries, items, number, text, whole

# Status of a draft node after verification.
ACCEPTED, REJECTED, NOT_REACHED = "accepted", "rejected", "not_reached"
# Origin of a committed token.
FROM_DRAFT, RESAMPLED, BONUS, TARGET = "draft", "resampled", "bonus", "target"

# Caps for a file a visitor uploads (docs/UPLOADS.md): the engine's own maximum K, and sizes well
# above any run the app or the command line records, so that reading and drawing stay bounded.
MAX_CYCLES = 8192  # a cycle commits at least one token
MAX_NEW_TOKENS = 8192
MAX_PROMPT_IDS = 65536
MAX_NODES = 512  # draft nodes in one cycle (LogitSpec caps its trees near 64)
MAX_BRANCHES = 128  # branches a retrieval draft had before K cut them (LogitSpec: its top-k and one)
MAX_RUN_NODES = 32768  # draft nodes in the whole run (decoding/tracefile.py counts them)
MAX_TOP = 64  # entries of a p/q/residual top list (the recorder writes 5)
MAX_TOKEN_ID = 2 ** 20 - 1  # above every vocabulary SpecViz loads (Gemma 3: 262 144)
MAX_TOKEN_TEXT = 256  # characters of one token's text
MAX_TEXT = 1_000_000  # characters of a run's text, or of a prompt in settings or meta
MAX_SECONDS = 1e6
MAX_RUNS_SHARED = 100_000  # runs in one verify pass, or beside one cycle
# Names a run written before 2026-12-05 may carry, and the ones that replaced them (docs/GLOSSARY.md,
# "Retired names"): runs sharing a pass are "shared", runs overlapping in time "concurrent". A file that
# carries one is read through renamed() below (decoding/tracefile.py).
OLD_CYCLE_NAMES = {"beside": "concurrent", "verify_shared": "shared_by"}
OLD_METRIC_NAMES = {"cycles_beside_others": "cycles_concurrent", "most_beside": "most_concurrent"}
OLD_SETTING_NAMES = {"batch_verify": "share_passes"}


# The annotations' bounded types (upload.py's helpers; named here, since a field called `text`
# would hide the helper inside a class).
TOKEN = whole(0, MAX_TOKEN_ID)
TOKEN_TEXT = text(MAX_TOKEN_TEXT)
PROB = number(0.0, 1.0 + 1e-6)  # float32 softmax may round a hair above 1
SECONDS = number(0.0, MAX_SECONDS)
NODE_INDEX = whole(0, MAX_NODES - 1)
PARENT = whole(-1, MAX_NODES - 1)
DEPTH = whole(1, MAX_K)
STATUS = Literal[ACCEPTED, REJECTED, NOT_REACHED]
ORIGIN = Literal[FROM_DRAFT, RESAMPLED, BONUS, TARGET]
NEW_KIND = Literal[RESAMPLED, BONUS, TARGET]
CACHE = entries(whole(0, MAX_PROMPT_IDS + MAX_NEW_TOKENS + MAX_NODES), 8, key=text(32))
SERVED = entries(PLAIN, 16, key=text(64))
SOURCE = text(64)
NODE_COUNT = whole(0, MAX_NODES)


@with_config(UPLOAD)
@dataclass
class Alt:
    """One entry of a distribution's top list: token id, its text, its probability."""
    token: TOKEN
    text: TOKEN_TEXT
    prob: PROB


TOP = items(Alt, MAX_TOP)
MATCH_TOKENS = 64  # tokens of a suffix match's text kept in a trace: its context, the match, what followed


@with_config(UPLOAD)
@dataclass
class MatchTrace:
    """Where suffix decoding found the context's suffix (drafting/tree.Match, as texts): the kind of
    text (a SUFFIX_* source: "suffix-prompt", "suffix-output", "suffix-earlier" or "suffix-corpus";
    never whose run), a few tokens before the match there, the matched tokens, what followed them there, and how many
    occurrences agreed that far."""
    found_in: SOURCE
    before: items(TOKEN_TEXT, MATCH_TOKENS) = field(default_factory=list)
    matched: items(TOKEN_TEXT, MATCH_TOKENS) = field(default_factory=list)
    after: items(TOKEN_TEXT, MATCH_TOKENS) = field(default_factory=list)
    count: whole(0, 10 ** 9) = 0


@with_config(UPLOAD)
@dataclass
class SeamTrace:
    """A draft from another family at the seam between the two tokenizers (drafting/tree.Seam, as
    texts): the draft's own tokens, the target tokens their text became (what the nodes are), how
    the nodes were judged ("greedy", or "intersection" with the draft's q kept to `shared` tokens
    both vocabularies have), and why the proposal stops before the draft's text, if it does."""
    draft: items(TOKEN_TEXT, MAX_K) = field(default_factory=list)
    target: items(TOKEN_TEXT, MAX_K) = field(default_factory=list)
    judged: Literal["greedy", "intersection"] = "greedy"
    shared: whole(0, MAX_TOKEN_ID + 1) = 0
    cut: text(200) = ""


@with_config(UPLOAD)
@dataclass
class Skip:
    """A source the hybrid did not compute this cycle (proposers/gate.py) and why: "long-match"
    (retrieval already offered a match as deep as would be sent) or "unpaid" (its recent drafts
    bought no accepted token). viz/narrate.py words it."""
    source: Literal["candidate", "suffix", "head"]
    reason: Literal["long-match", "unpaid"]


@with_config(UPLOAD)
@dataclass
class NodeTrace:
    """One draft token as verification saw it."""
    index: NODE_INDEX
    token: TOKEN
    text: TOKEN_TEXT
    parent: PARENT  # -1: child of the last committed token
    depth: DEPTH  # 1 for the first draft position
    q: PROB | None = None  # draft probability of `token`; None for a deterministic draft
    p: PROB | None = None  # target probability of `token` (after siblings were removed)
    accept_prob: PROB | None = None  # min(1, p/q); p itself for a deterministic draft
    r: PROB | None = None  # the uniform draw; None under greedy decoding
    status: STATUS = NOT_REACHED
    p_top: TOP = field(default_factory=list)
    q_top: TOP = field(default_factory=list)
    # who proposed it (tree.Source as plain fields; viz/ words it): a source kind such as
    # "lookup", "root", "candidate" or "head", the branch (LogitSpec's candidate number, or a greedy
    # head tree node's rank among its siblings), a candidate's logit rank, the n-gram match length.
    # Files from before these fields carry a label in `source`.
    source: SOURCE = ""
    branch: whole(-1, MAX_NODES) = 0
    rank: whole(-1, MAX_TOKEN_ID) | None = None
    ngram: whole(0, 1024) | None = None


@with_config(UPLOAD)
@dataclass
class CycleTrace:
    """One propose → verify → commit → roll back cycle."""
    index: whole(0, MAX_CYCLES - 1)
    k: whole(0, MAX_K)  # the lookahead this cycle was allowed
    nodes: items(NodeTrace, MAX_NODES) = field(default_factory=list)
    accepted: items(NODE_INDEX, MAX_K) = field(default_factory=list)  # node indices on the accepted path
    rejected: NODE_INDEX | None = None  # node whose rejection ended the path
    residual_top: TOP = field(default_factory=list)  # distribution the replacement came from
    new_token: Alt | None = None  # resampled or bonus token (or the plain step's token)
    new_kind: NEW_KIND = TARGET  # RESAMPLED, BONUS or TARGET (no draft)
    committed: items(TOKEN, MAX_K + 1) = field(default_factory=list)
    committed_text: items(TOKEN_TEXT, MAX_K + 1) = field(default_factory=list)
    origins: items(ORIGIN, MAX_K + 1) = field(default_factory=list)  # per committed token
    cache_before: CACHE = field(default_factory=dict)
    cache_after: CACHE = field(default_factory=dict)
    draft_s: SECONDS = 0.0
    verify_s: SECONDS = 0.0
    other_s: SECONDS = 0.0
    # the verify pass: how many runs' requests it answered (1: this run's alone), and its own
    # wall time; verify_s is this run's wait for it, which is longer when it queued behind another
    shared_by: whole(1, MAX_RUNS_SHARED) = 1
    verify_pass_s: SECONDS | None = None
    # the most other runs' cycles that ran in this process during this one (0: alone)
    concurrent: whole(0, MAX_RUNS_SHARED) = 0
    # a served target (vLLM): what the server reported for this pass (prompts, prompt_tokens,
    # cached_tokens, seconds); None for a model in this process
    served: SERVED | None = None
    elapsed_s: SECONDS = 0.0  # prefill plus decode time at the end of this cycle (cache rebuilds excluded)
    total_tokens: whole(0, MAX_NEW_TOKENS) = 0  # new tokens committed so far, this cycle included
    retrieval_hit: bool | None = None  # retrieval proposers: did a lookup find anything
    offered: whole(0, 1_000_000) | None = None  # nodes the proposer offered; `nodes` are those worth a verify pass
    match: MatchTrace | None = None  # suffix decoding: where the context's suffix was found
    seam: SeamTrace | None = None  # a draft from another family: its tokens and the target's
    greedy: bool = True
    # the runs the planner priced this cycle's verify pass for (pricing/batch_costs.py)
    priced_batch: whole(1, MAX_RUNS_SHARED) = 1
    sent_alone: NODE_COUNT | None = None  # at priced_batch > 1: the nodes it would have sent to a pass of its own
    skipped: items(Skip, 8) = field(default_factory=list)  # sources left uncomputed (files before 2026-12-07: none)
    # a retrieval draft sent whole: its branches before K cut them, and the most nodes its proposer
    # merges them into (tree.DraftTree.uncut; None where not kept, and in files before 2026-12-08)
    uncut: items(items(TOKEN, MAX_K), MAX_BRANCHES) | None = None
    uncut_cap: whole(1, MAX_NODES) | None = None

    @property
    def drafted(self) -> int:
        return len(self.nodes)

    @property
    def n_accepted(self) -> int:
        return len(self.accepted)


# A run's settings and metrics are dicts (DecodeSettings.options, summarize below), so their schema is
# a TypedDict: the keys a view reads, bounded, and up to 64 others of any small value (PLAIN).
@with_config(UPLOAD_OPEN)
class Settings(TypedDict, total=False, extra_items=PLAIN):
    target: text(200) | None
    draft: text(200) | None
    method: text(64) | None
    k: whole(0, MAX_K) | None
    temperature: number(0.0, 100.0) | None
    top_p: number(0.0, 1.0) | None
    seed: whole(-2 ** 63, 2 ** 64) | None
    max_new_tokens: whole(0, 10 ** 9) | None
    prompt: text(MAX_TEXT) | None


COUNT = Annotated[int | float, Field(ge=0, le=1e12)]  # a count or seconds: an int stays an int
RATE = number(0.0, 1.0 + 1e-6)
_COUNTS = ("new_tokens", "prefill_s", "decode_s", "rebuild_s", "rebuilds", "tokens_per_s", "cycles",
           "mean_accepted_tokens", "drafted_tokens", "accepted_tokens", "draft_s", "verify_s", "other_s",
           "cycles_concurrent", "most_concurrent", "shared_passes", "most_shared", "served_requests",
           "served_prompt_tokens", "served_cached_tokens", "sent_per_cycle")
_RATES = ("acceptance_rate", "retrieval_success", "cycles_sent_share")
Metrics = with_config(UPLOAD_OPEN)(TypedDict("Metrics", {
    **{key: COUNT | None for key in _COUNTS},
    **{key: RATE | None for key in _RATES},
    "acceptance_by_position": items(RATE | None, MAX_K), "reach_by_position": items(RATE | None, MAX_K),
    "served_by": text(200) | None, "served_top_k": whole(0, MAX_TOKEN_ID) | None,
}, total=False, extra_items=PLAIN))
SETTINGS = Annotated[Settings, Field(max_length=len(Settings.__annotations__) + 64)]
METRICS = Annotated[Metrics, Field(max_length=len(Metrics.__annotations__) + 64)]
NEW_TOKENS = items(TOKEN, MAX_NEW_TOKENS)
RUN_TEXT = text(MAX_TEXT)
METHOD = text(64)
CYCLE_NUMBER = whole(-1, MAX_CYCLES - 1)


@with_config(UPLOAD_OPEN)
@dataclass
class RunTrace:
    """A whole run: settings, tokens, text, cycles and metrics (a file's other fields are ignored)."""
    method: METHOD
    settings: SETTINGS = field(default_factory=dict)
    prompt_ids: items(TOKEN, MAX_PROMPT_IDS) = field(default_factory=list)
    token_ids: NEW_TOKENS = field(default_factory=list)  # new tokens only
    text: RUN_TEXT = ""
    token_texts: items(TOKEN_TEXT, MAX_NEW_TOKENS) = field(default_factory=list)  # per new token, decoded alone
    origins: items(ORIGIN, MAX_NEW_TOKENS) = field(default_factory=list)  # per new token
    cycle_of: items(CYCLE_NUMBER, MAX_NEW_TOKENS) = field(default_factory=list)  # per new token, -1: the prefill
    cycles: items(CycleTrace, MAX_CYCLES) = field(default_factory=list)
    metrics: METRICS = field(default_factory=dict)
    prefill_s: SECONDS = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunTrace":
        d = renamed(d)
        d["cycles"] = [_cycle_from_dict(c) for c in d.get("cycles", [])]
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_json(cls, s: str) -> "RunTrace":
        return cls.from_dict(json.loads(s))


def _renamed_keys(d, names: dict[str, str]):
    if not isinstance(d, dict) or not names.keys() & d.keys():
        return d
    return {names.get(k, k): v for k, v in d.items()}


def renamed(d: dict[str, Any]) -> dict[str, Any]:
    """A copy of a run's dict with the old names above replaced by the new (new data is unchanged);
    anything that is not the expected shape is left for the caller's checks."""
    d = dict(d)
    for key, names in (("metrics", OLD_METRIC_NAMES), ("settings", OLD_SETTING_NAMES)):
        if key in d:
            d[key] = _renamed_keys(d[key], names)
    if isinstance(d.get("cycles"), list):
        d["cycles"] = [_renamed_keys(c, OLD_CYCLE_NAMES) for c in d["cycles"]]
    return d


def _alts(xs) -> list[Alt]:
    return [Alt(**a) for a in xs or []]


def _cycle_from_dict(d: dict[str, Any]) -> CycleTrace:
    d = dict(d)
    nodes = []
    for n in d.get("nodes", []):
        n = dict(n)
        n["p_top"], n["q_top"] = _alts(n.get("p_top")), _alts(n.get("q_top"))
        nodes.append(NodeTrace(**n))
    d["nodes"] = nodes
    d["residual_top"] = _alts(d.get("residual_top"))
    d["new_token"] = Alt(**d["new_token"]) if d.get("new_token") else None
    d["match"] = MatchTrace(**d["match"]) if d.get("match") else None
    d["seam"] = SeamTrace(**d["seam"]) if d.get("seam") else None
    d["skipped"] = [Skip(**x) for x in d.get("skipped") or []]
    names = {f.name for f in dataclasses.fields(CycleTrace)}
    return CycleTrace(**{k: v for k, v in d.items() if k in names})


def summarize(cycles: list[CycleTrace], new_tokens: int, decode_s: float, prefill_s: float = 0.0,
              rebuild_s: float = 0.0, rebuilds: int = 0) -> dict[str, Any]:
    """Metrics of the contract, computed from the cycles.

    decode_s is the time spent in cycles (draft, verify, bookkeeping): not the prefill that
    chose the first new token (prefill_s), nor prefills that rebuilt a KV cache a call found
    empty (rebuild_s). tokens_per_s is the tokens those cycles committed per decode second,
    so the first token, which the prefill chose, is not counted in it.

    α, τ (mean_accepted_tokens), the by-depth curves and what was sent are defined once, in
    decoding/speed.py, and counted there.
    """
    spec = [c for c in cycles if c.nodes]
    accepted = sum(c.n_accepted for c in spec)
    hits = [c.retrieval_hit for c in cycles if c.retrieval_hit is not None]
    committed = sum(len(c.committed) for c in cycles)
    served = [c.served for c in cycles if c.served]
    out = {
        "new_tokens": new_tokens,
        "prefill_s": prefill_s,
        "decode_s": decode_s,
        "rebuild_s": rebuild_s,
        "rebuilds": rebuilds,
        "tokens_per_s": committed / decode_s if decode_s > 0 else 0.0,
        "cycles": len(cycles),
        **speed.counts(cycles),  # acceptance_rate α, mean_accepted_tokens τ, by depth, sent
        "drafted_tokens": sum(c.drafted for c in cycles),
        "accepted_tokens": accepted,
        "retrieval_success": sum(hits) / len(hits) if hits else None,
        "draft_s": sum(c.draft_s for c in cycles),
        "verify_s": sum(c.verify_s for c in cycles),
        "other_s": sum(c.other_s for c in cycles),
        # under load: cycles that ran beside other runs' cycles, and those whose pass was shared
        "cycles_concurrent": sum(1 for c in cycles if c.concurrent > 0),
        "most_concurrent": max((c.concurrent for c in cycles), default=0),
        "shared_passes": sum(1 for c in cycles if c.shared_by > 1),
        "most_shared": max((c.shared_by for c in cycles), default=1),
    }
    if served:  # a target served by vLLM: what its prefix cache saved
        out.update(served_requests=len(served), served_prompt_tokens=sum(d.get("prompt_tokens", 0) for d in served),
                   served_cached_tokens=sum(d.get("cached_tokens", 0) for d in served),
                   served_top_k=served[-1].get("top_k"))
    return out
