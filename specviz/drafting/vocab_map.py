"""Two tokenizers side by side: which draft tokens are also target tokens, and text at the seam.

A draft from another model family numbers its tokens its own way (SmolLM2's 49,152 byte-level
BPE pieces against Gemma 3's 262,144 SentencePiece ones). Two things connect them:

- **Token-level intersection** (sampling). A draft token and a target token are the same when
  they stand for the same text. `VocabMap.to_target[d]` is the target id standing for draft id d's
  text, or -1. Sampling from the draft's q restricted to mapped ids and renormalised, then
  reading the mapped target id, draws from a distribution over target ids that the verifier can
  use as q exactly (Timor et al., ICML 2025, "token-level intersection").
- **Text** (greedy). The draft's tokens are decoded to text and encoded again by the target's
  tokenizer (`retokenize`).

A token's text is read in context, as the text a pair (anchor, token) decodes to after the
anchor's own, so SentencePiece's leading-space markers and byte-level BPE's 'Ġ' both become a
real space. Tokens whose text is empty or a piece of a UTF-8 character (U+FFFD), and special
tokens, are left out of the intersection; end-of-sequence is mapped to end-of-sequence.
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass

import torch

BROKEN = "\ufffd"  # what a lone byte of a multi-byte character decodes to
ANCHOR_TEXT = "a"


def token_texts(tokenizer, n: int) -> list[str | None]:
    """The text of each id below n as it reads after other text; None for special tokens and for
    ids that are no text on their own (empty, or part of a character)."""
    anchor_ids = tokenizer("a", add_special_tokens=False)["input_ids"]
    if not anchor_ids:
        raise ValueError("the tokenizer encodes 'a' to nothing, so its tokens' texts cannot be read")
    anchor = int(anchor_ids[-1])
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pairs = [[anchor, i] for i in range(n)]
    if backend is not None:
        base = backend.decode([anchor], skip_special_tokens=False)
        both = backend.decode_batch(pairs, skip_special_tokens=False)
    else:  # a slow tokenizer: one by one
        base = tokenizer.decode([anchor], skip_special_tokens=False)
        both = [tokenizer.decode(p, skip_special_tokens=False) for p in pairs]
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    out: list[str | None] = []
    for i, text in enumerate(both):
        piece = text[len(base):] if text.startswith(base) else None
        ok = piece and i not in special and BROKEN not in piece
        out.append(piece if ok else None)
    return out


@dataclass
class VocabMap:
    """Draft ids → target ids standing for the same text (-1: none), over the draft's rows."""
    to_target: torch.Tensor  # (draft_rows,) long
    shared: int  # draft ids with a target twin
    target_rows: int

    @classmethod
    def build(cls, target_tok, draft_tok, target_rows: int, draft_rows: int,
              target_eos: set[int], draft_eos: set[int]) -> "VocabMap":
        t_texts = token_texts(target_tok, min(target_rows, len(target_tok)))
        d_texts = token_texts(draft_tok, min(draft_rows, len(draft_tok)))
        first: dict[str, int] = {}
        for i, text in enumerate(t_texts):
            if text is not None and text not in first:
                first[text] = i
        to_target = torch.full((draft_rows,), -1, dtype=torch.long)
        for d, text in enumerate(d_texts):
            if text is not None and text in first:
                to_target[d] = first[text]
        if target_eos and draft_eos:
            eos = min(target_eos)
            for d in draft_eos:
                if d < draft_rows:
                    to_target[d] = eos
        return cls(to_target, int((to_target >= 0).sum()), target_rows)

    def restrict(self, q: torch.Tensor) -> torch.Tensor | None:
        """The draft's q (over its rows) with unmapped ids removed and renormalised; None when no
        mass is left."""
        kept = torch.where(self.to_target[: q.shape[-1]].to(q.device) >= 0, q, torch.zeros_like(q))
        total = float(kept.sum())
        return None if total <= 0 else kept / total

    def on_target(self, q_restricted: torch.Tensor) -> torch.Tensor:
        """A restricted draft q as a distribution over the target's ids (several draft ids with one
        text add up on their target twin)."""
        idx = self.to_target[: q_restricted.shape[-1]].to(q_restricted.device)
        mapped = idx >= 0
        out = torch.zeros(self.target_rows, dtype=q_restricted.dtype, device=q_restricted.device)
        return out.index_add_(0, idx[mapped], q_restricted[mapped])


_MAPS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def vocab_map(target, draft) -> VocabMap:
    """The VocabMap of two LoadedModels, built once per pair of tokenizers in this process."""
    with _LOCK:
        per_target = _MAPS.setdefault(target.tokenizer, weakref.WeakKeyDictionary())
        found = per_target.get(draft.tokenizer)
        if found is None or found.target_rows != target.vocab_size:
            found = per_target[draft.tokenizer] = VocabMap.build(
                target.tokenizer, draft.tokenizer, target.vocab_size, draft.vocab_size,
                set(target.eos_ids), set(draft.eos_ids))
        return found


def text_after(tokenizer, context: list[int], new: list[int]) -> str:
    """The text `new` adds after `context` (the last 8 context ids are read, so a leading space is
    kept as the tokenizer writes it in running text)."""
    tail = list(context[-8:])
    before = tokenizer.decode(tail, skip_special_tokens=False)
    after = tokenizer.decode(tail + list(new), skip_special_tokens=False)
    return after[len(before):] if after.startswith(before) else tokenizer.decode(list(new), skip_special_tokens=False)


def retokenize(tokenizer, committed: list[int], text: str) -> tuple[list[int], int]:
    """`text`, which follows the committed ids, as the target's tokens: (ids, seam), where seam is
    how many committed ids were re-read with it to tokenize the boundary as running text (0 where
    the boundary merges with the last committed token, and the text is tokenized on its own)."""
    for w in (3, 1):
        if len(committed) < w:
            continue
        tail = committed[-w:]
        lead = text_after(tokenizer, committed[:-w], tail)
        ids = tokenizer(lead + text, add_special_tokens=False)["input_ids"]
        if list(ids[:w]) == list(tail):
            return list(ids[w:]), w
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]), 0
