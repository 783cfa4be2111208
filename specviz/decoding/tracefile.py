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

from specviz.decoding.trace import (ACCEPTED, BONUS, NOT_REACHED, REJECTED, RESAMPLED, TARGET, RunTrace, summarize)

FORMAT, VERSION = "specviz-trace", 1
SPECVIZ_VERSION = "0.1.0"  # the package's version (pyproject.toml), written into exported files
MAX_BYTES = 32 * 1024 * 1024  # a 512-token run with 64-node trees is a few MB; more is not a trace

NUM, INT, STR, LIST, DICT, BOOL = "a number", "a whole number", "text", "a list", "an object", "true or false"
# field → (kind, may be null, required). Fields left out take the dataclass default.
RUN_FIELDS = {"method": (STR, False, True), "cycles": (LIST, False, True), "settings": (DICT, False, False),
              "prompt_ids": (LIST, False, False), "token_ids": (LIST, False, False), "text": (STR, False, False),
              "token_texts": (LIST, False, False), "origins": (LIST, False, False),
              "cycle_of": (LIST, False, False), "metrics": (DICT, False, False), "prefill_s": (NUM, False, False)}
CYCLE_FIELDS = {"index": (INT, False, True), "k": (INT, False, True), "nodes": (LIST, False, True),
                "accepted": (LIST, False, False), "rejected": (INT, True, False),
                "residual_top": (LIST, False, False), "new_token": (DICT, True, False),
                "new_kind": (STR, False, False), "committed": (LIST, False, False),
                "committed_text": (LIST, False, False), "origins": (LIST, False, False),
                "cache_before": (DICT, False, False), "cache_after": (DICT, False, False),
                "draft_s": (NUM, False, False), "verify_s": (NUM, False, False), "other_s": (NUM, False, False),
                "verify_shared": (INT, False, False), "verify_pass_s": (NUM, True, False),
                "beside": (INT, False, False), "served": (DICT, True, False),
                "elapsed_s": (NUM, False, False), "total_tokens": (INT, False, False),
                "retrieval_hit": (BOOL, True, False), "greedy": (BOOL, False, False)}
NODE_FIELDS = {"index": (INT, False, True), "token": (INT, False, True), "text": (STR, False, True),
               "parent": (INT, False, True), "depth": (INT, False, True), "q": (NUM, True, False),
               "p": (NUM, True, False), "accept_prob": (NUM, True, False), "r": (NUM, True, False),
               "status": (STR, False, False), "p_top": (LIST, False, False), "q_top": (LIST, False, False),
               "source": (STR, False, False), "branch": (INT, False, False), "rank": (INT, True, False),
               "ngram": (INT, True, False)}
ALT_FIELDS = {"token": (INT, False, True), "text": (STR, False, True), "prob": (NUM, False, True)}
STATUSES = (ACCEPTED, REJECTED, NOT_REACHED)
KINDS = (RESAMPLED, BONUS, TARGET)


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


def read(path: str | Path) -> TraceFile:
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise TraceFileError(f"The file is {size / 1e6:.0f} MB; a SpecViz trace is at most "
                             f"{MAX_BYTES / 1e6:.0f} MB.")
    return loads(path.read_bytes())


def loads(text: str | bytes) -> TraceFile:
    """Parse and check a trace document (or a bare RunTrace)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise TraceFileError("The file is not text (UTF-8): choose a .json trace exported by SpecViz.") from None
    if not text.strip():
        raise TraceFileError("The file is empty: choose a .json trace exported by SpecViz.")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceFileError(f"The file is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}).") from None
    if isinstance(doc, dict) and doc.get("format") == FORMAT:
        version = doc.get("version")
        if not isinstance(version, int) or version > VERSION:
            raise TraceFileError(f"This trace has format version {version!r}; this SpecViz reads "
                                 f"version {VERSION}. Update SpecViz, or export the run again.")
        ar = doc.get("ar")
        meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
        return TraceFile(_run(doc.get("run"), "run"), None if ar is None else _run(ar, "AR baseline"), meta)
    if isinstance(doc, dict) and "cycles" in doc and "method" in doc:
        return TraceFile(_run(doc, "run"))
    raise TraceFileError('This JSON is not a SpecViz trace: expected an exported run ("format": '
                         f'"{FORMAT}") or a run with "method" and "cycles" (python -m specviz generate --json).')


def _kind_ok(value, kind: str) -> bool:
    if kind == NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == INT:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, {STR: str, LIST: list, DICT: dict, BOOL: bool}[kind])


def _check(d, fields: dict, where: str) -> None:
    if not isinstance(d, dict):
        raise TraceFileError(f"{where}: expected an object, got {type(d).__name__}.")
    for name, (kind, nullable, required) in fields.items():
        if name not in d:
            if required:
                raise TraceFileError(f"{where}: the field '{name}' is missing.")
            continue
        value = d[name]
        if value is None and nullable:
            continue
        if not _kind_ok(value, kind):
            null = " or null" if nullable else ""
            raise TraceFileError(f"{where}: '{name}' must be {kind}{null}, got {json.dumps(value)[:40]}.")


def _check_list(items, fields: dict, where: str) -> None:
    for i, item in enumerate(items):
        _check(item, fields, f"{where} {i}")


def _check_cycle(c: dict, where: str) -> None:
    _check(c, CYCLE_FIELDS, where)
    nodes = c["nodes"]
    for i, n in enumerate(nodes):
        here = f"{where}, node {i}"
        _check(n, NODE_FIELDS, here)
        if n["index"] != i or not -1 <= n["parent"] < i:
            raise TraceFileError(f"{here}: nodes must be numbered 0, 1, … with each parent before its child.")
        if n.get("status", NOT_REACHED) not in STATUSES:
            raise TraceFileError(f"{here}: 'status' must be one of {', '.join(STATUSES)}.")
        _check_list(n.get("p_top", []), ALT_FIELDS, f"{here}, p_top entry")
        _check_list(n.get("q_top", []), ALT_FIELDS, f"{here}, q_top entry")
    refs = list(c.get("accepted", [])) + ([c["rejected"]] if c.get("rejected") is not None else [])
    if any(not _kind_ok(i, INT) or not 0 <= i < len(nodes) for i in refs):
        raise TraceFileError(f"{where}: 'accepted' and 'rejected' must name nodes of this cycle (0–{len(nodes) - 1}).")
    if c.get("new_kind", TARGET) not in KINDS:
        raise TraceFileError(f"{where}: 'new_kind' must be one of {', '.join(KINDS)}.")
    if c.get("new_token") is not None:
        _check(c["new_token"], ALT_FIELDS, f"{where}, new_token")
    _check_list(c.get("residual_top", []), ALT_FIELDS, f"{where}, residual_top entry")


def _run(d, what: str) -> RunTrace:
    _check(d, RUN_FIELDS, f"The {what}")
    if not d["cycles"]:
        raise TraceFileError(f"The {what} has no cycles: there is nothing to replay.")
    for i, c in enumerate(d["cycles"]):
        _check_cycle(c, f"The {what}, cycle {i}")
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
