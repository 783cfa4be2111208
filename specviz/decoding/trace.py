"""Per-cycle traces: what the engine did, as plain data that serialises to JSON and back.

Names follow the papers: p is the target's probability of a token, q the draft's,
`accept_prob` is min(1, p/q) and r the uniform draw it was compared with.
Everything the views show is read from here; nothing is recomputed downstream.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from specviz.decoding import speed

# Status of a draft node after verification.
ACCEPTED, REJECTED, NOT_REACHED = "accepted", "rejected", "not_reached"
# Origin of a committed token.
FROM_DRAFT, RESAMPLED, BONUS, TARGET = "draft", "resampled", "bonus", "target"


@dataclass
class Alt:
    """One entry of a distribution's top list: token id, its text, its probability."""
    token: int
    text: str
    prob: float


@dataclass
class NodeTrace:
    """One draft token as verification saw it."""
    index: int
    token: int
    text: str
    parent: int  # -1: child of the last committed token
    depth: int  # 1 for the first draft position
    q: float | None = None  # draft probability of `token`; None for a deterministic draft
    p: float | None = None  # target probability of `token` (after siblings were removed)
    accept_prob: float | None = None  # min(1, p/q); p itself for a deterministic draft
    r: float | None = None  # the uniform draw; None under greedy decoding
    status: str = NOT_REACHED
    p_top: list[Alt] = field(default_factory=list)
    q_top: list[Alt] = field(default_factory=list)
    # who proposed it (tree.Source as plain fields; viz/ words it): a SourceKind value such as
    # "lookup", "root", "candidate" or "head", the branch (LogitSpec's candidate number, or a greedy
    # head tree node's rank among its siblings), a candidate's logit rank, the n-gram match length.
    # Files from before these fields carry a label in `source`.
    source: str = ""
    branch: int = 0
    rank: int | None = None
    ngram: int | None = None


@dataclass
class CycleTrace:
    """One propose → verify → commit → roll back cycle."""
    index: int
    k: int  # the lookahead this cycle was allowed
    nodes: list[NodeTrace] = field(default_factory=list)
    accepted: list[int] = field(default_factory=list)  # node indices on the accepted path
    rejected: int | None = None  # node whose rejection ended the path
    residual_top: list[Alt] = field(default_factory=list)  # distribution the replacement came from
    new_token: Alt | None = None  # resampled or bonus token (or the plain step's token)
    new_kind: str = TARGET  # RESAMPLED, BONUS or TARGET (no draft)
    committed: list[int] = field(default_factory=list)
    committed_text: list[str] = field(default_factory=list)
    origins: list[str] = field(default_factory=list)  # per committed token
    cache_before: dict[str, int] = field(default_factory=dict)
    cache_after: dict[str, int] = field(default_factory=dict)
    draft_s: float = 0.0
    verify_s: float = 0.0
    other_s: float = 0.0
    # the verify pass: how many runs' requests it answered (1: this run's alone), and its own
    # wall time; verify_s is this run's wait for it, which is longer when it queued behind another
    shared_by: int = 1
    verify_pass_s: float | None = None
    concurrent: int = 0  # the most other runs' cycles that ran in this process during this one (0: alone)
    # a served target (vLLM): what the server reported for this pass (prompts, prompt_tokens,
    # cached_tokens, seconds); None for a model in this process
    served: dict | None = None
    elapsed_s: float = 0.0  # prefill plus decode time at the end of this cycle (cache rebuilds excluded)
    total_tokens: int = 0  # new tokens committed so far, this cycle included
    retrieval_hit: bool | None = None  # retrieval proposers: did a lookup find anything
    offered: int | None = None  # nodes the proposer offered; `nodes` are those worth a verify pass
    greedy: bool = True
    priced_batch: int = 1  # the runs the planner priced this cycle's verify pass for (pricing/batch_costs.py)
    sent_alone: int | None = None  # at priced_batch > 1: the nodes it would have sent to a pass of its own

    @property
    def drafted(self) -> int:
        return len(self.nodes)

    @property
    def n_accepted(self) -> int:
        return len(self.accepted)


@dataclass
class RunTrace:
    """A whole run: settings, tokens, text, cycles and metrics."""
    method: str
    settings: dict[str, Any] = field(default_factory=dict)
    prompt_ids: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)  # new tokens only
    text: str = ""
    token_texts: list[str] = field(default_factory=list)  # per new token, as the tokenizer decodes it alone
    origins: list[str] = field(default_factory=list)  # per new token
    cycle_of: list[int] = field(default_factory=list)  # per new token, -1 for the prefill token
    cycles: list[CycleTrace] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    prefill_s: float = 0.0

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


# Names a run written before 2026-12-05 may carry, and the ones that replaced them (docs/GLOSSARY.md,
# "Retired names"): runs sharing a pass are "shared", runs overlapping in time "concurrent".
OLD_CYCLE_NAMES = {"beside": "concurrent", "verify_shared": "shared_by"}
OLD_METRIC_NAMES = {"cycles_beside_others": "cycles_concurrent", "most_beside": "most_concurrent"}
OLD_SETTING_NAMES = {"batch_verify": "share_passes"}


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
