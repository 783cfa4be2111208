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
from typing import Annotated, Any, Literal

from pydantic import Field, with_config
from typing_extensions import TypedDict

from specviz.decoding.trace import (
    MAX_CYCLES,
    MAX_RUN_NODES,
    MAX_TEXT,
    MAX_TOKEN_ID,
    OLD_CYCLE_NAMES,
    OLD_METRIC_NAMES,
    OLD_SETTING_NAMES,
    Alt,
    CycleTrace,
    RunTrace,
    renamed,
    summarize,
)
from specviz.decoding.upload import PLAIN, UPLOAD_OPEN, Reader, enforced, shown, text, whole

FORMAT, VERSION = "specviz-trace", 1
PAIR_FORMAT = "specviz-pair"  # Side by side's export: two trace documents, "a" and "b"
SPECVIZ_VERSION = "0.1.0"  # the package's version (pyproject.toml), written into exported files
MAX_BYTES = 16 * 1024 * 1024  # a 512-token run with 64-node trees is a few MB; more is not a trace (docs/UPLOADS.md)
KNOWN_VOCAB = {"bundled": 49152, "gemma3-270m": 262144}  # targets whose vocabulary is known without loading them


class TraceFileError(ValueError):
    """A file that is not a readable SpecViz trace; the message says where and why."""


# A file's meta (when and where it was recorded) is a dict: the keys a view reads, and 64 others.
@with_config(UPLOAD_OPEN)
class Meta(TypedDict, total=False, extra_items=PLAIN):
    prompt: text(MAX_TEXT) | None
    focus_cycle: whole(0, MAX_CYCLES - 1) | None


META = Annotated[Meta, Field(max_length=len(Meta.__annotations__) + 64)]


@with_config(UPLOAD_OPEN)
@dataclass
class TraceFile:
    """A trace document: as the file holds it, less its format and version (checked before)."""
    run: RunTrace
    ar: RunTrace | None = None  # the measured plain run of the same prompt, if there was one
    meta: META = field(default_factory=dict)  # when and where it was recorded


@with_config(UPLOAD_OPEN)
@dataclass
class _Side(TraceFile):
    """One side of a Side by side file: a trace document, its format and version checked with it."""
    format: Literal[FORMAT] = FORMAT
    version: whole(0, VERSION) = VERSION


@with_config(UPLOAD_OPEN)
@dataclass
class _Pair:
    """A Side by side file, less its format and version (checked before)."""
    a: _Side
    b: _Side
    meta: META = field(default_factory=dict)


@with_config(UPLOAD_OPEN)
class _Head(TypedDict, total=False):
    """What says which kind of document a file is; the rest of it is not read here."""
    format: Any
    version: Any
    method: Any


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


def _text(text: str | bytes) -> str | bytes:
    """The JSON text within the size cap, as UTF-8; every failure a TraceFileError."""
    if len(text) > MAX_BYTES and enforced():
        raise TraceFileError(f"The file is {len(text) / 1e6:.0f} MB; a SpecViz trace is at most "
                             f"{MAX_BYTES / 1e6:.0f} MB.")
    if isinstance(text, bytes):
        try:
            text.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceFileError("The file is not text (UTF-8): choose a .json trace exported by SpecViz.") from None
    if not text.strip():
        raise TraceFileError("The file is empty: choose a .json trace exported by SpecViz.")
    return text


_WHAT = "a SpecViz trace"
_HEAD = Reader(_Head, {(): "The file"}, _WHAT, TraceFileError)
_BARE = Reader(RunTrace, {(): "The run"}, _WHAT, TraceFileError)
_DOC = Reader(TraceFile, {(): "The file", ("run",): "The run", ("ar",): "The AR baseline"}, _WHAT, TraceFileError)
_PAIR = Reader(_Pair, {(): "The file", **{k: v for s in "ab" for k, v in (
    ((s,), f"Side {s.upper()}: The file"), ((s, "run"), f"Side {s.upper()}: The run"),
    ((s, "ar"), f"Side {s.upper()}: The AR baseline"))}}, _WHAT, TraceFileError)
_NOT_A_TRACE = ('This JSON is not a SpecViz trace: expected an exported run ("format": '
                f'"{FORMAT}") or a run with "method" and "cycles" (python -m specviz generate --json).')
_OLD_NAMES = [f'"{k}"'.encode() for k in (*OLD_CYCLE_NAMES, *OLD_METRIC_NAMES, *OLD_SETTING_NAMES)]


def _head(text: str | bytes) -> dict:
    """The document's format, version and method, if it is a JSON object; else a TraceFileError."""
    try:
        return _HEAD(text)
    except TraceFileError as e:
        if str(e).startswith("The file:"):  # valid JSON, but not an object
            raise TraceFileError(_NOT_A_TRACE) from None
        raise


def _version(head: dict, what: str) -> None:
    version = head.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
        raise TraceFileError(f"This {what} has format version {shown(version)}; this SpecViz reads "
                             f"version {VERSION}. Update SpecViz, or export the run again.")


def _upgraded(text: str | bytes, runs) -> str | bytes:
    """A file written before the names changed, with today's names (docs/GLOSSARY.md, "Retired names"); `runs`
    picks the document's runs out of it. Others are returned as they are, unread."""
    raw = text.encode() if isinstance(text, str) else text
    if not any(name in raw for name in _OLD_NAMES):
        return text
    doc = json.loads(raw)
    for holder, key in runs(doc):
        if isinstance(holder, dict) and isinstance(holder.get(key), dict):
            holder[key] = renamed(holder[key])
    return json.dumps(doc, ensure_ascii=False)


def _sides(doc: dict):
    return [(doc, "run"), (doc, "ar")]


def loads(text: str | bytes) -> TraceFile:
    """Parse and check a trace document (or a bare RunTrace): its bounded schema, then its tree rules."""
    text = _text(text)
    head = _head(text)
    if head.get("format") == FORMAT:
        _version(head, "trace")
        trace = _DOC(_upgraded(text, _sides))
        return TraceFile(_run(trace.run, "run"), None if trace.ar is None else _run(trace.ar, "AR baseline"),
                         dict(trace.meta))
    if head.get("format") == PAIR_FORMAT:
        raise TraceFileError("This is a Side by side file (two runs): replay it in the Side by side tab.")
    if "format" not in head and "method" in head:
        return TraceFile(_run(_BARE(_upgraded(text, lambda d: [({"run": d}, "run")])), "run"))
    raise TraceFileError(_NOT_A_TRACE)


def loads_pair(text: str | bytes) -> tuple[TraceFile, TraceFile, dict]:
    """Parse and check a Side by side export: (A, B, meta), each side checked as Decode's file is."""
    text = _text(text)
    head = _head(text)
    if head.get("format") != PAIR_FORMAT:
        raise TraceFileError(f'This JSON is not a Side by side file ("format": "{PAIR_FORMAT}"); a single '
                             "run replays in the Decode tab.")
    _version(head, "Side by side file")
    pair = _PAIR(_upgraded(text, lambda d: [x for s in "ab" if isinstance(d.get(s), dict) for x in _sides(d[s])]))
    sides = []
    for name, side in (("A", pair.a), ("B", pair.b)):
        try:
            sides.append(TraceFile(_run(side.run, "run"), None if side.ar is None else _run(side.ar, "AR baseline"),
                                   dict(side.meta)))
        except TraceFileError as e:
            raise TraceFileError(f"Side {name}: {e}") from None
    return sides[0], sides[1], dict(pair.meta)


def _cycle_rules(c: CycleTrace, where: str, run_len: int | None, vocab: int) -> None:
    """What the schema cannot say alone: the tree's shape, the accepted path, sizes that must agree."""
    nodes = c.nodes
    for i, n in enumerate(nodes):
        here = f"{where}, node {i}"
        if n.index != i or not -1 <= n.parent < i:
            raise TraceFileError(f"{here}: nodes must be numbered 0, 1, … with each parent before its child.")
        depth = 1 if n.parent < 0 else nodes[n.parent].depth + 1
        if n.depth != depth:
            raise TraceFileError(f"{here}: 'depth' must be one more than its parent's ({depth}), "
                                 f"got {shown(n.depth)}.")
        for key in ("p_top", "q_top"):
            _tokens_below(getattr(n, key), vocab, f"{here}, '{key}'")
        if n.token >= vocab:
            raise TraceFileError(f"{here}: a token id is at or above the vocabulary size {vocab}.")
    accepted, rejected = c.accepted, c.rejected
    refs = accepted + ([rejected] if rejected is not None else [])
    if any(not 0 <= i < len(nodes) for i in refs):
        raise TraceFileError(f"{where}: 'accepted' and 'rejected' must name nodes of this cycle (0–{len(nodes) - 1}).")
    path_ok = all(nodes[a].parent == (accepted[j - 1] if j else -1) for j, a in enumerate(accepted))
    if not path_ok or (rejected is not None and nodes[rejected].parent != (accepted[-1] if accepted else -1)):
        raise TraceFileError(f"{where}: 'accepted' must be a path down the tree from its root, and 'rejected' "
                             "a child of its last node.")
    committed = c.committed
    for key in ("committed_text", "origins"):
        if len(getattr(c, key)) not in (0, len(committed)):
            raise TraceFileError(f"{where}: '{key}' must have one entry per committed token ({len(committed)}).")
    if any(t >= vocab for t in committed):
        raise TraceFileError(f"{where}: 'committed' holds a token id at or above the vocabulary size {vocab}.")
    _tokens_below(c.residual_top, vocab, f"{where}, 'residual_top'")
    if c.new_token:
        _tokens_below([c.new_token], vocab, f"{where}, 'new_token'")
    if run_len is not None and enforced():
        bound = run_len + len(nodes)
        for key in ("cache_before", "cache_after"):
            if any(v > bound for v in getattr(c, key).values()):
                raise TraceFileError(f"{where}: '{key}' holds a cache longer than the run's prompt, tokens and "
                                     f"draft ({bound}).")


def _tokens_below(alts: list[Alt], vocab: int, where: str) -> None:
    if any(a.token >= vocab for a in alts):
        raise TraceFileError(f"{where}: a token id is at or above the vocabulary size {vocab}.")


def _run(run: RunTrace, what: str) -> RunTrace:
    """run, after what its schema cannot say alone: sizes that must agree, the tree rules of each cycle."""
    cycles = run.cycles
    if not cycles:
        raise TraceFileError(f"The {what} has no cycles: there is nothing to replay.")
    if sum(len(c.nodes) for c in cycles) > MAX_RUN_NODES and enforced():
        raise TraceFileError(f"The {what} has more than {MAX_RUN_NODES} draft nodes in all; a SpecViz trace has fewer.")
    target = run.settings.get("target")
    vocab = KNOWN_VOCAB.get(target, MAX_TOKEN_ID + 1) if isinstance(target, str) else MAX_TOKEN_ID + 1
    tokens = run.token_ids
    if any(t >= vocab for t in tokens + run.prompt_ids):
        raise TraceFileError(f"The {what}: a token id is at or above {target}'s vocabulary size {vocab}.")
    for key in ("token_texts", "origins", "cycle_of"):
        if len(getattr(run, key)) not in (0, len(tokens)):
            raise TraceFileError(f"The {what}: '{key}' must have one entry per new token ({len(tokens)}).")
    cycle_of = run.cycle_of
    if any(b < a for a, b in zip(cycle_of, cycle_of[1:])) or any(i >= len(cycles) for i in cycle_of):
        raise TraceFileError(f"The {what}: 'cycle_of' must name cycles of this run in order (0–{len(cycles) - 1}).")
    run_len = len(run.prompt_ids) + len(tokens) if run.prompt_ids else None
    for i, c in enumerate(cycles):
        where = f"The {what}, cycle {i}"
        if c.index != i:
            raise TraceFileError(f"{where}: 'index' must be {i} (cycles are numbered 0, 1, … in order).")
        _cycle_rules(c, where, run_len, vocab)
    return run


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
