"""Trace files: one run (settings, every cycle, timing) and its AR baseline as a JSON document.

A file recorded anywhere replays everywhere: loading needs no model. Bad files fail with a
message that says where and what, e.g. "cycle 3, node 2: 'p' must be a number or null".
Also reads a bare RunTrace, as `python -m specviz generate --json` prints it.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specviz.decoding.schema import (
    Bool,
    Int,
    ListOf,
    MapOf,
    Num,
    Obj,
    Plain,
    SchemaError,
    Text,
    check,
    enforced,
    parse_json,
    shown,
)
from specviz.decoding.settings import MAX_K
from specviz.decoding.trace import (
    ACCEPTED,
    BONUS,
    FROM_DRAFT,
    NOT_REACHED,
    REJECTED,
    RESAMPLED,
    TARGET,
    RunTrace,
    renamed,
    summarize,
)

FORMAT, VERSION = "specviz-trace", 1
PAIR_FORMAT = "specviz-pair"  # Side by side's export: two trace documents, "a" and "b"
SPECVIZ_VERSION = "0.1.0"  # the package's version (pyproject.toml), written into exported files
MAX_BYTES = 16 * 1024 * 1024  # a 512-token run with 64-node trees is a few MB; more is not a trace (README, "Uploads")

# Caps for a file a visitor uploads (README, "Uploads"): the engine's own maximum K, and sizes well
# above any run the app or the command line records, so that reading and drawing stay bounded.
MAX_CYCLES = 8192  # a cycle commits at least one token
MAX_NEW_TOKENS = 8192
MAX_PROMPT_IDS = 65536
MAX_NODES = 512  # draft nodes in one cycle (LogitSpec caps its trees near 64)
MAX_RUN_NODES = 32768  # draft nodes in the whole run
MAX_TOP = 64  # entries of a p/q/residual top list (the recorder writes 5)
MAX_TOKEN_ID = 2 ** 20 - 1  # above every vocabulary SpecViz loads (Gemma 3: 262 144)
MAX_TOKEN_TEXT = 256  # characters of one token's text
MAX_TEXT = 1_000_000  # characters of a run's text, or of a prompt in settings or meta
MAX_SECONDS = 1e6
MAX_RUNS_SHARED = 100_000  # runs in one verify pass, or beside one cycle
KNOWN_VOCAB = {"bundled": 49152}  # targets whose vocabulary is known without loading them

ORIGINS = (FROM_DRAFT, RESAMPLED, BONUS, TARGET)
PROB = Num(0.0, 1.0 + 1e-6, null=True)  # float32 softmax may round a hair above 1
SECONDS = Num(0.0, MAX_SECONDS)
TOKEN = Int(0, MAX_TOKEN_ID)
TOKEN_TEXT = Text(MAX_TOKEN_TEXT)
ALT = Obj({"token": (TOKEN, True), "text": (TOKEN_TEXT, True), "prob": (Num(0.0, 1.0 + 1e-6), True)})
TOP = ListOf(ALT, MAX_TOP)
NODE = Obj({"index": (Int(0, MAX_NODES - 1), True), "token": (TOKEN, True), "text": (TOKEN_TEXT, True),
            "parent": (Int(-1, MAX_NODES - 1), True), "depth": (Int(1, MAX_K), True), "q": (PROB, False),
            "p": (PROB, False), "accept_prob": (PROB, False), "r": (PROB, False),
            "status": (Text(16, choices=(ACCEPTED, REJECTED, NOT_REACHED)), False),
            "p_top": (TOP, False), "q_top": (TOP, False), "source": (Text(64), False),
            "branch": (Int(-1, MAX_NODES), False), "rank": (Int(-1, MAX_TOKEN_ID, null=True), False),
            "ngram": (Int(0, 1024, null=True), False)})
CACHE = MapOf(Int(0, MAX_PROMPT_IDS + MAX_NEW_TOKENS + MAX_NODES), 8, key_len=32)
CYCLE = Obj({"index": (Int(0, MAX_CYCLES - 1), True), "k": (Int(0, MAX_K), True),
             "nodes": (ListOf(NODE, MAX_NODES, label="node"), True),
             "accepted": (ListOf(Int(0, MAX_NODES - 1), MAX_K), False),
             "rejected": (Int(0, MAX_NODES - 1, null=True), False),
             "residual_top": (TOP, False), "new_token": (Obj(ALT.fields, null=True), False),
             "new_kind": (Text(16, choices=(RESAMPLED, BONUS, TARGET)), False),
             "committed": (ListOf(TOKEN, MAX_K + 1), False), "committed_text": (ListOf(TOKEN_TEXT, MAX_K + 1), False),
             "origins": (ListOf(Text(16, choices=ORIGINS), MAX_K + 1), False),
             "cache_before": (CACHE, False), "cache_after": (CACHE, False),
             "draft_s": (SECONDS, False), "verify_s": (SECONDS, False), "other_s": (SECONDS, False),
             "shared_by": (Int(1, MAX_RUNS_SHARED), False),
             "verify_pass_s": (Num(0.0, MAX_SECONDS, null=True), False),
             "concurrent": (Int(0, MAX_RUNS_SHARED), False),
             "served": (MapOf(Plain(), 16, key_len=64, null=True), False),
             "elapsed_s": (SECONDS, False), "total_tokens": (Int(0, MAX_NEW_TOKENS), False),
             "retrieval_hit": (Bool(null=True), False), "offered": (Int(0, 1_000_000, null=True), False),
             "greedy": (Bool(), False), "priced_batch": (Int(1, MAX_RUNS_SHARED), False),
             "sent_alone": (Int(0, MAX_NODES, null=True), False)})
COUNT = Num(0, 1e12, null=True)
RATE = Num(0.0, 1.0 + 1e-6, null=True)
METRICS = Obj({**{key: (COUNT, False) for key in (
    "new_tokens", "prefill_s", "decode_s", "rebuild_s", "rebuilds", "tokens_per_s", "cycles", "mean_accepted_tokens",
    "drafted_tokens", "accepted_tokens", "draft_s", "verify_s", "other_s", "cycles_concurrent", "most_concurrent",
    "shared_passes", "most_shared", "served_requests", "served_prompt_tokens", "served_cached_tokens",
    "sent_per_cycle")},
    "acceptance_rate": (RATE, False), "retrieval_success": (RATE, False), "cycles_sent_share": (RATE, False),
    "acceptance_by_position": (ListOf(RATE, MAX_K), False), "reach_by_position": (ListOf(RATE, MAX_K), False),
    "served_by": (Text(200, null=True), False), "served_top_k": (Int(0, MAX_TOKEN_ID, null=True), False)},
    extra=64)
SETTINGS = Obj({"target": (Text(200, null=True), False), "draft": (Text(200, null=True), False),
                "method": (Text(64, null=True), False), "k": (Int(0, MAX_K, null=True), False),
                "temperature": (Num(0.0, 100.0, null=True), False), "top_p": (Num(0.0, 1.0, null=True), False),
                "seed": (Int(-2 ** 63, 2 ** 64, null=True), False),
                "max_new_tokens": (Int(0, 10 ** 9, null=True), False), "prompt": (Text(MAX_TEXT, null=True), False)},
               extra=64)
RUN = Obj({"method": (Text(64), True), "cycles": (ListOf(CYCLE, MAX_CYCLES, label="cycle"), True),
           "settings": (SETTINGS, False), "prompt_ids": (ListOf(TOKEN, MAX_PROMPT_IDS), False),
           "token_ids": (ListOf(TOKEN, MAX_NEW_TOKENS), False), "text": (Text(MAX_TEXT), False),
           "token_texts": (ListOf(TOKEN_TEXT, MAX_NEW_TOKENS), False),
           "origins": (ListOf(Text(16, choices=ORIGINS), MAX_NEW_TOKENS), False),
           "cycle_of": (ListOf(Int(-1, MAX_CYCLES - 1), MAX_NEW_TOKENS), False),
           "metrics": (METRICS, False), "prefill_s": (SECONDS, False)}, extra=64)
META = Obj({"prompt": (Text(MAX_TEXT, null=True), False), "focus_cycle": (Int(0, MAX_CYCLES - 1, null=True), False)},
           extra=64)


class TraceFileError(ValueError):
    """A file that is not a readable SpecViz trace; the message says where and why."""


@dataclass
class TraceFile:
    run: RunTrace
    ar: RunTrace | None = None  # the measured plain run of the same prompt, if there was one
    meta: dict[str, Any] = field(default_factory=dict)  # when and where it was recorded


def dumps(run: RunTrace, ar: RunTrace | None = None, meta: dict | None = None, **kw) -> str:
    """The document Export writes: format, version, meta, the run and its AR baseline."""
    doc = {"format": FORMAT, "version": VERSION, "meta": dict(meta or {}), "run": run.to_dict(),
           "ar": ar.to_dict() if ar is not None else None}
    return json.dumps(doc, ensure_ascii=False, **kw)


def dumps_pair(a: TraceFile, b: TraceFile, meta: dict | None = None, **kw) -> str:
    """Side by side's Export: both columns, each exactly the document Decode's Export writes."""
    side = lambda t: json.loads(dumps(t.run, t.ar, t.meta))  # noqa: E731
    doc = {"format": PAIR_FORMAT, "version": VERSION, "meta": dict(meta or {}), "a": side(a), "b": side(b)}
    return json.dumps(doc, ensure_ascii=False, **kw)


def read(path: str | Path) -> TraceFile:
    return loads(_read_bytes(path))


def read_pair(path: str | Path) -> tuple[TraceFile, TraceFile, dict]:
    return loads_pair(_read_bytes(path))


def _read_bytes(path: str | Path) -> bytes:
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BYTES and enforced():
        raise TraceFileError(f"The file is {size / 1e6:.0f} MB; a SpecViz trace is at most "
                             f"{MAX_BYTES / 1e6:.0f} MB.")
    return path.read_bytes()


def _parse(text: str | bytes) -> Any:
    """The JSON document in text, within the size cap; every failure a TraceFileError."""
    if len(text) > MAX_BYTES and enforced():
        raise TraceFileError(f"The file is {len(text) / 1e6:.0f} MB; a SpecViz trace is at most "
                             f"{MAX_BYTES / 1e6:.0f} MB.")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceFileError("The file is not text (UTF-8): choose a .json trace exported by SpecViz.") from None
    if not text.strip():
        raise TraceFileError("The file is empty: choose a .json trace exported by SpecViz.")
    return parse_json(text, "a SpecViz trace", TraceFileError)


def _versioned(doc: dict, what: str) -> dict:
    """doc's meta, after checking its version and meta against the schema."""
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
        raise TraceFileError(f"This {what} has format version {shown(version)}; this SpecViz reads "
                             f"version {VERSION}. Update SpecViz, or export the run again.")
    meta = doc.get("meta")
    try:
        check(meta if meta is not None else {}, META, "The file", "meta")
    except SchemaError as e:
        raise TraceFileError(str(e)) from None
    return meta or {}


def _document(doc: Any) -> TraceFile:
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        meta, ar = _versioned(doc, "trace"), doc.get("ar")
        return TraceFile(_run(doc.get("run"), "run"), None if ar is None else _run(ar, "AR baseline"), meta)
    if isinstance(doc, dict) and "cycles" in doc and "method" in doc:
        return TraceFile(_run(doc, "run"))
    if isinstance(doc, dict) and doc.get("format") == PAIR_FORMAT:
        raise TraceFileError("This is a Side by side file (two runs): replay it in the Side by side tab.")
    raise TraceFileError('This JSON is not a SpecViz trace: expected an exported run ("format": '
                         f'"{FORMAT}") or a run with "method" and "cycles" (python -m specviz generate --json).')


def loads(text: str | bytes) -> TraceFile:
    """Parse and check a trace document (or a bare RunTrace) against the bounded schema."""
    return _document(_parse(text))


def loads_pair(text: str | bytes) -> tuple[TraceFile, TraceFile, dict]:
    """Parse and check a Side by side export: (A, B, meta), each side checked as Decode's file is."""
    doc = _parse(text)
    if not isinstance(doc, dict) or doc.get("format") != PAIR_FORMAT:
        raise TraceFileError(f'This JSON is not a Side by side file ("format": "{PAIR_FORMAT}"); a single '
                             "run replays in the Decode tab.")
    meta = _versioned(doc, "Side by side file")
    sides = []
    for name in ("a", "b"):
        try:
            sides.append(_document(doc.get(name)))
        except TraceFileError as e:
            raise TraceFileError(f"Side {name.upper()}: {e}") from None
    return sides[0], sides[1], meta


def _cycle_rules(c: dict, where: str, run_len: int | None, vocab: int) -> None:
    """What the schema cannot say alone: the tree's shape, the accepted path, sizes that must agree."""
    nodes = c["nodes"]
    for i, n in enumerate(nodes):
        here = f"{where}, node {i}"
        if n["index"] != i or not -1 <= n["parent"] < i:
            raise TraceFileError(f"{here}: nodes must be numbered 0, 1, … with each parent before its child.")
        depth = 1 if n["parent"] < 0 else nodes[n["parent"]]["depth"] + 1
        if n["depth"] != depth:
            raise TraceFileError(f"{here}: 'depth' must be one more than its parent's ({depth}), "
                                 f"got {shown(n['depth'])}.")
        for key in ("p_top", "q_top"):
            _tokens_below(n.get(key, []), vocab, f"{here}, '{key}'")
        _tokens_below([n], vocab, here)
    accepted, rejected = list(c.get("accepted", [])), c.get("rejected")
    refs = accepted + ([rejected] if rejected is not None else [])
    if any(not 0 <= i < len(nodes) for i in refs):
        raise TraceFileError(f"{where}: 'accepted' and 'rejected' must name nodes of this cycle (0–{len(nodes) - 1}).")
    path_ok = all(nodes[a]["parent"] == (accepted[j - 1] if j else -1) for j, a in enumerate(accepted))
    if not path_ok or (rejected is not None and nodes[rejected]["parent"] != (accepted[-1] if accepted else -1)):
        raise TraceFileError(f"{where}: 'accepted' must be a path down the tree from its root, and 'rejected' "
                             "a child of its last node.")
    committed = c.get("committed", [])
    for key in ("committed_text", "origins"):
        if key in c and len(c[key]) not in (0, len(committed)):
            raise TraceFileError(f"{where}: '{key}' must have one entry per committed token ({len(committed)}).")
    if any(t >= vocab for t in committed):
        raise TraceFileError(f"{where}: 'committed' holds a token id at or above the vocabulary size {vocab}.")
    _tokens_below(c.get("residual_top", []), vocab, f"{where}, 'residual_top'")
    if c.get("new_token"):
        _tokens_below([c["new_token"]], vocab, f"{where}, 'new_token'")
    if run_len is not None and enforced():
        bound = run_len + len(nodes)
        for key in ("cache_before", "cache_after"):
            if any(v > bound for v in c.get(key, {}).values()):
                raise TraceFileError(f"{where}: '{key}' holds a cache longer than the run's prompt, tokens and "
                                     f"draft ({bound}).")


def _tokens_below(alts: list[dict], vocab: int, where: str) -> None:
    if any(a["token"] >= vocab for a in alts):
        raise TraceFileError(f"{where}: a token id is at or above the vocabulary size {vocab}.")


def _run(d, what: str) -> RunTrace:
    if isinstance(d, dict):
        d = renamed(d)  # a file written before the names changed reads as before
    try:
        check(d, RUN, f"The {what}")
    except SchemaError as e:
        raise TraceFileError(str(e)) from None
    cycles = d["cycles"]
    if not cycles:
        raise TraceFileError(f"The {what} has no cycles: there is nothing to replay.")
    if sum(len(c["nodes"]) for c in cycles) > MAX_RUN_NODES and enforced():
        raise TraceFileError(f"The {what} has more than {MAX_RUN_NODES} draft nodes in all; a SpecViz trace has fewer.")
    target = (d.get("settings") or {}).get("target")
    vocab = KNOWN_VOCAB.get(target, MAX_TOKEN_ID + 1) if isinstance(target, str) else MAX_TOKEN_ID + 1
    tokens = d.get("token_ids", [])
    if any(t >= vocab for t in tokens + d.get("prompt_ids", [])):
        raise TraceFileError(f"The {what}: a token id is at or above {target}'s vocabulary size {vocab}.")
    for key in ("token_texts", "origins", "cycle_of"):
        if key in d and len(d[key]) not in (0, len(tokens)):
            raise TraceFileError(f"The {what}: '{key}' must have one entry per new token ({len(tokens)}).")
    cycle_of = d.get("cycle_of", [])
    if any(b < a for a, b in zip(cycle_of, cycle_of[1:])) or any(i >= len(cycles) for i in cycle_of):
        raise TraceFileError(f"The {what}: 'cycle_of' must name cycles of this run in order (0–{len(cycles) - 1}).")
    run_len = len(d["prompt_ids"]) + len(tokens) if d.get("prompt_ids") else None
    for i, c in enumerate(cycles):
        where = f"The {what}, cycle {i}"
        if c["index"] != i:
            raise TraceFileError(f"{where}: 'index' must be {i} (cycles are numbered 0, 1, … in order).")
        _cycle_rules(c, where, run_len, vocab)
    try:
        return RunTrace.from_dict(d)
    except (TypeError, KeyError, ValueError) as e:
        raise TraceFileError(f"The {what} could not be read: {e}.") from None


def prefix(run: RunTrace, i: int) -> RunTrace:
    """The run as it stood after cycle i: its cycles, its tokens, its metrics so far."""
    cycles = run.cycles[: i + 1]
    if run.cycle_of:
        n = sum(1 for c in run.cycle_of if c <= cycles[-1].index)
    else:  # an older trace: the prefill's token plus each cycle's commits
        n = min(len(run.token_ids), 1 + sum(len(c.committed) for c in cycles))
    texts = run.token_texts[:n]
    out = dataclasses.replace(run, token_ids=run.token_ids[:n], token_texts=texts, origins=run.origins[:n],
                              cycle_of=run.cycle_of[:n], cycles=cycles, text="".join(texts))
    out.metrics = summarize(cycles, n, cycles[-1].elapsed_s)
    return out
