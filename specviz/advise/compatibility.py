"""Compatibility: before a draft is measured against a target, whether the two can run together
losslessly, and what differs between them that a person should know.

Speculative decoding passes ids, never text: the draft proposes ids, the target judges them, and the
engine reads only the first N = min(target rows, draft rows) columns of both models' logits
(`check_tokenizers` in loading/loader.py). Rows are the LM head's (`vocab_size`, else the config's).

1. **tokens**: every id below N that either tokenizer has must be the same token string in both
   (`convert_ids_to_tokens`); this is `check_tokenizers`' own rule: error, with how many ids differ and
   the first few. Ids cannot pass between such a pair, so the engine drafts through text instead (a
   draft from another family, proposers/cross_draft.py), and the advisor measures it that way. A
   missing tokenizer is an error too, and then neither way works.
2. **special**: bos, eos, pad and unk of the two tokenizers, and the ids each model stops at
   (`eos_ids`). Prompts are encoded by the target's tokenizer and a run stops only at the target's
   end ids, so no difference changes the output: warn. Differing end tokens cost acceptance where
   answers end.
3. **added**: each side's `get_added_vocab()`. An added token whose id holds another token (or none)
   on the other side is an error below N (the ids differ, as in 1), and for the target's also above N
   while the target's model has a row for it (the pair cannot produce it, as in 5). A draft's added
   token above N is never proposed: warn.
4. **chat_template**: the app formats prompts with the target's template and the draft reads the
   same ids, so a different template, or none, matters only to the draft run alone: warn.
5. **vocab_size**: rows against len(tokenizer), on each side and between the models. Ids from
   len(tokenizer) up are padding, never a real token, so padded sizes that differ (Qwen2 1.5B's
   151936 rows, 72B's 152064) are fine, since only the N shared ids are compared: ok. A draft with
   fewer rows than the target has real tokens (ids below both the target's rows and its tokenizer's
   length) is an error even though the engine runs it: the target's tokens from N up are cut from
   its logits, so the pair never produces them and its output is not the target's. Real tokens of
   the draft from N up are never proposed, and a model with fewer rows than its tokenizer has
   tokens cannot read or produce the ids above its rows: warn.

Every topic gives at least one finding, an "ok" one when all is well, so a page can show what was
checked. Messages are plain sentences, no markup. No UI libraries here.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specviz.models.loaded import LoadedModel

LEVELS = ("error", "warn", "ok")
TOPICS = ("tokens", "special", "added", "chat_template", "vocab_size")
SHOWN = 3  # differing ids or tokens named in one message
SPECIALS = ("bos", "eos", "pad", "unk")
SIDES = ("target", "draft")
_ALONE = ("the app formats the prompt with the target's template; the draft sees the same ids, "
          "so this only matters if you run the draft alone.")
# what a differing special token does to a run, by role
_SPECIAL_EFFECT = {
    "bos": ("prompts are encoded with the target's tokenizer, so the draft reads the target's start "
            "token, which it may not have been trained on; acceptance can drop, the output cannot change."),
    "eos": ("a run stops only at the target's end tokens, so where one model would end its answer the "
            "other goes on; expect drafts to be rejected near the end, the output does not change."),
    "pad": "decoding here never feeds a pad token, so this matters only if you run the draft alone.",
    "unk": ("prompts are encoded with the target's tokenizer, so only the target's unknown token can "
            "reach the draft; this matters only if you run the draft alone."),
}


@dataclass(frozen=True)
class Finding:
    """One result of the compatibility review: its level (see LEVELS), its topic, and a sentence to act on."""
    level: str  # "error": the pair cannot run losslessly or at all; "warn": it runs, but read this; "ok"
    topic: str  # one of TOPICS
    message: str


def blocking(findings: Iterable[Finding]) -> bool:
    """Whether any finding is an error: the pair cannot run, or not losslessly."""
    return any(f.level == "error" for f in findings)


def compatibility(target: LoadedModel, draft: LoadedModel) -> list[Finding]:
    """The findings of every topic in the module docstring, in TOPICS order.

    `target` and `draft` are LoadedModel-like: `tokenizer` (may be None), `vocab_size` (or
    `model.config.vocab_size`), `name`, and optionally `eos_ids`.
    """
    tt, dt = target.tokenizer, draft.tokenizer
    rows = {"target": _rows(target), "draft": _rows(draft)}
    shared = min(rows.values())
    if tt is None and dt is None:  # models built without tokenizers (random test twins): ids are all there is
        return [Finding("warn", "tokens", "Neither model has a tokenizer, so ids are taken to mean the same "
                        "tokens in both (as the engine does) and nothing else about them can be checked."),
                *(_topic_eos_ids(target, draft) or [Finding("ok", "special", f"{_stops(target)}.")]),
                *_topic_sizes(target, draft, rows)]
    findings = [_topic_tokens(target, draft, shared)]
    if tt is None or dt is None:
        missing = "target" if tt is None else "draft"
        skipped = f"Not checked: the {missing} has no tokenizer."
        findings += _topic_eos_ids(target, draft) or [Finding("ok", "special", f"{_stops(target)}.")]
        findings += [Finding("warn", "special", skipped), Finding("warn", "added", skipped),
                     Finding("warn", "chat_template", skipped)]
    else:
        findings += _topic_special(target, draft)
        findings += _topic_added(tt, dt, shared, rows["target"])
        findings.append(_topic_template(tt, dt))
    return findings + _topic_sizes(target, draft, rows)


# -- the topics ------------------------------------------------------------------------


def _topic_tokens(target, draft, shared: int) -> Finding:
    tt, dt = target.tokenizer, draft.tokenizer
    if tt is None or dt is None:
        missing = "target" if tt is None else "draft"
        return Finding("error", "tokens", f"The {missing} '{(target if tt is None else draft).name}' has no "
                       "tokenizer, so its ids cannot be checked against the other model's: load it with its "
                       "tokenizer files.")
    n = min(shared, max(len(tt), len(dt)))
    if tt is dt:
        return Finding("ok", "tokens", f"Both models use the same tokenizer, so {_span(0, n - 1)} mean the same "
                       "tokens.")
    t_tokens, d_tokens = _tokens(tt, n), _tokens(dt, n)
    differ = [i for i in range(n) if t_tokens[i] != d_tokens[i]]
    if not differ:
        if n == shared:
            return Finding("ok", "tokens", f"The tokenizers give the same token for each of the {n} ids the two "
                           f"models share ({_span(0, n - 1)}).")
        return Finding("ok", "tokens", f"The tokenizers give the same token for {_span(0, n - 1)}; the models "
                       f"share {shared} ids, and neither tokenizer has a token from {n} up (padding).")
    named = ", ".join(f"id {i} is {_quote(t_tokens[i])} in the target but {_quote(d_tokens[i])} in the draft"
                      for i in differ[:SHOWN])
    more = f", and {len(differ) - SHOWN} more" if len(differ) > SHOWN else ""
    return Finding("error", "tokens", f"The tokenizers differ at {len(differ)} of the {n} ids the pair shares: "
                   f"{named}{more}. Ids cannot pass between them, so the app drafts through text, as a draft "
                   "from another family (exact, with a cost at the seam each cycle); a draft of the target's "
                   "family, with its tokenizer, passes ids directly.")


def _topic_special(target, draft) -> list[Finding]:
    tt, dt = target.tokenizer, draft.tokenizer
    found = []
    for role in SPECIALS:
        t, d = _special(tt, role), _special(dt, role)
        if t != d:
            found.append(Finding("warn", "special", f"The {role} token differs, {_spec(t)} in the target and "
                                 f"{_spec(d)} in the draft: {_SPECIAL_EFFECT[role]}"))
    found += _topic_eos_ids(target, draft)
    if found:
        return found
    listed = ", ".join(f"{role} {_spec(_special(tt, role))}" for role in SPECIALS)
    stops = _stops(target)
    return [Finding("ok", "special", f"The tokenizers have the same special tokens ({listed}); "
                    f"{stops[0].lower()}{stops[1:]}.")]


def _stops(target) -> str:
    """'Both models stop at id 1' (their eos_ids agree, so the target's stand for both)."""
    stops = sorted(getattr(target, "eos_ids", None) or ())
    return f"Both models stop at {_ids(stops)}" if stops else "Neither model has an end id"


def _topic_eos_ids(target, draft) -> list[Finding]:
    t, d = set(getattr(target, "eos_ids", None) or ()), set(getattr(draft, "eos_ids", None) or ())
    if t == d:
        return []
    return [Finding("warn", "special", f"The models stop at different ids, the target at {_ids(t)} and the "
                    f"draft at {_ids(d)}: a run stops only at the target's, so the draft may propose its own "
                    "end where the target goes on, and those drafts are rejected; the output does not change.")]


def _topic_added(tt, dt, shared: int, target_rows: int) -> list[Finding]:
    """Ids of either side's added tokens where the other side has another token, or none, grouped by
    what that costs (see the module docstring)."""
    clash: dict[int, str] = {}
    lost: dict[int, str] = {}
    unused: dict[int, str] = {}
    tokenizers = {"target": tt, "draft": dt}
    added = {side: _added(tok) for side, tok in tokenizers.items()}
    for side, other in zip(SIDES, reversed(SIDES)):
        for text, i in added[side].items():
            there = _token_at(tokenizers[other], i)
            if there == text:
                continue
            elsewhere = added[other].get(text)
            also = f" (the {other} has {text!r} at id {elsewhere})" if elsewhere is not None else ""
            t_token, d_token = (text, there) if side == "target" else (there, text)
            what = f"id {i} is {_quote(t_token)} in the target but {_quote(d_token)} in the draft{also}"
            if i < shared:
                clash.setdefault(i, what)
            elif side == "target" and i < target_rows:
                lost[i] = what
            else:
                unused.setdefault(i, what)
    found = []
    if clash:
        found.append(Finding("error", "added", f"Added tokens differ below id {shared}, where both models' ids "
                             f"must mean the same tokens: {_some(clash)}. The app refuses this pair: use a draft "
                             "whose tokenizer adds the target's tokens at the same ids."))
    if lost:
        found.append(Finding("error", "added", f"Added tokens of the target lie above the {shared} ids the pair "
                             f"shares: {_some(lost)}. The pair can never produce them, so its output is not the "
                             f"target's: use a draft with more than {max(lost)} embedding rows."))
    if unused:
        found.append(Finding("warn", "added", f"Added tokens differ above the {shared} ids the pair shares: "
                             f"{_some(unused)}. The draft never proposes them and the pair never produces "
                             "them, so this only matters if you run the draft alone."))
    if not found:
        n = len(added["target"])
        found.append(Finding("ok", "added", f"Both tokenizers add the same {n} token{'s' * (n != 1)} "
                             "at the same ids."))
    return found


def _topic_template(tt, dt) -> Finding:
    t, d = getattr(tt, "chat_template", None), getattr(dt, "chat_template", None)
    if t == d:
        if t is None:
            return Finding("ok", "chat_template", "Neither tokenizer has a chat template, so prompts are "
                           "encoded as plain text.")
        return Finding("ok", "chat_template", "Both tokenizers have the same chat template.")
    if t is None or d is None:
        has, lacks = ("draft", "target") if t is None else ("target", "draft")
        return Finding("warn", "chat_template", f"The {has} has a chat template but the {lacks} has none: "
                       f"{_ALONE}")
    t_text, d_text = str(t), str(d)
    at = next((i for i, (a, b) in enumerate(zip(t_text, d_text)) if a != b), min(len(t_text), len(d_text)))
    return Finding("warn", "chat_template", f"The chat templates differ from character {at} on "
                   f"({t_text[at:at + 20]!r} in the target, {d_text[at:at + 20]!r} in the draft): {_ALONE}")


def _topic_sizes(target, draft, rows: dict[str, int]) -> list[Finding]:
    models = {"target": target, "draft": draft}
    lengths = {side: None if m.tokenizer is None else len(m.tokenizer) for side, m in models.items()}
    found = []
    for side in SIDES:
        n, r = lengths[side], rows[side]
        if n is not None and r < n:
            found.append(Finding("warn", "vocab_size", f"The {side}'s tokenizer has {n} tokens but its model only "
                                 f"{r} embedding rows, so the model cannot read or produce {_span(r, n - 1)}."))
    shared = min(rows.values())
    sizes = (f"The target has {rows['target']} embedding rows{_tail(target, lengths['target'], rows['target'])} "
             f"and the draft {rows['draft']}{_tail(draft, lengths['draft'], rows['draft'])}")
    if lengths["target"] is None:
        level = "ok" if rows["target"] == rows["draft"] else "warn"
        found.append(Finding(level, "vocab_size", f"{sizes}; without the target's tokenizer, whether ids from "
                             f"{shared} up are real tokens cannot be told."))
        return found
    real = min(rows["target"], lengths["target"])  # ids the target can read and produce
    if rows["draft"] < real:
        found.append(Finding("error", "vocab_size", f"{sizes}: the pair reads only the first {shared} ids, so the "
                             f"target's real {_tokens_at(shared, real - 1)} can never be produced and the output "
                             f"is not the target's. Use a draft with at least {real} embedding rows."))
        return found
    if rows["target"] == rows["draft"]:
        said = f"{sizes}; the pair compares all {shared} ids"
    else:
        said = (f"{sizes}: only the {shared} ids both have are compared, which hold every real token of the "
                "target (ids from a tokenizer's length up are padding, never a real token)")
    draft_real = shared if lengths["draft"] is None else min(rows["draft"], lengths["draft"])
    if draft_real > shared:
        found.append(Finding("warn", "vocab_size", f"{said}; the draft's tokenizer goes on above them, up to "
                             f"id {draft_real - 1}, tokens the draft never proposes, so this only matters if you "
                             "run the draft alone."))
    else:
        found.append(Finding("ok", "vocab_size", f"{said}."))
    return found


# -- reading tokenizers and models -----------------------------------------------------------


def _rows(model) -> int:
    """Embedding rows: the LoadedModel's `vocab_size` (its LM head), else the config's."""
    rows = getattr(model, "vocab_size", None)
    return int(rows if rows is not None else model.model.config.vocab_size)


def _tail(model, length: int | None, rows: int) -> str:
    """' (N tokens in its tokenizer, M in its config)' for the sizes sentence; the config only if it differs."""
    parts = [] if length is None else [f"{length} tokens in its tokenizer"]
    config = getattr(getattr(getattr(model, "model", None), "config", None), "vocab_size", None)
    if config is not None and int(config) != rows:
        parts.append(f"{int(config)} in its config")
    return f" ({', '.join(parts)})" if parts else ""


def _tokens(tok, n: int) -> list[str | None]:
    """The token strings of ids 0..n-1; None for ids the tokenizer does not have."""
    known = min(n, len(tok))
    return list(tok.convert_ids_to_tokens(list(range(known)))) + [None] * (n - known)


def _token_at(tok, i: int) -> str | None:
    return tok.convert_ids_to_tokens(i) if 0 <= i < len(tok) else None


def _added(tok) -> dict[str, int]:
    get = getattr(tok, "get_added_vocab", None)
    return {str(k): int(v) for k, v in get().items()} if get is not None else {}


def _special(tok, role: str) -> tuple[str | None, int | None]:
    text = getattr(tok, f"{role}_token", None)
    i = getattr(tok, f"{role}_token_id", None)
    return (None if text is None else str(text), None if i is None else int(i))


def _spec(token: tuple[str | None, int | None]) -> str:
    text, i = token
    if text is None and i is None:
        return "none"
    return f"{_quote(text)} (id {i})"


def _quote(token: str | None) -> str:
    return "no token" if token is None else repr(token)


def _ids(ids) -> str:
    ids = sorted(ids)
    if not ids:
        return "no id"
    if len(ids) == 1:
        return f"id {ids[0]}"
    return f"ids {', '.join(map(str, ids[:-1]))} and {ids[-1]}"


def _span(first: int, last: int) -> str:
    return f"id {first}" if first == last else f"ids {first} to {last}"


def _tokens_at(first: int, last: int) -> str:
    return f"token at id {first}" if first == last else f"tokens at ids {first} to {last}"


def _some(items: dict[int, str]) -> str:
    """The first SHOWN descriptions by id, and how many more."""
    shown = [items[i] for i in sorted(items)[:SHOWN]]
    more = f", and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return "; ".join(shown) + more
