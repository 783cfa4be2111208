"""A datastore for suffix decoding: the target's own answers to other prompts, shipped with the project.

Suffix decoding (suffix.py) drafts what followed the context's suffix in the prompt, the run's output
and earlier runs on the same prompt. A small model answers in set phrases ("Here are some…", "**Step 1:**",
"In conclusion,"), and a run's own text holds few of them early on. So for the bundled model the project
ships a corpus of its own greedy answers to prompts written for the draft head's training
(assets/head/prompts_train*.txt: never a benchmark question), built by `python -m specviz.training.corpus_build`,
and suffix decoding also drafts from the longest n-gram of the context found there (REST, He et al.,
NAACL 2024, drafts from a datastore the same way; written here from its description).

Exactness: the corpus is fixed data and a draft from it depends only on the committed ids, so its nodes
are point masses (q = None) like every retrieval node, and verification stays exact under sampling.
It does not learn: a benchmark's repeats cannot draft from each other through it.

The file names the tokenizer it was made with (a digest of its whole vocabulary); a target whose tokenizer
differs gets no corpus, never ids that mean other tokens.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import weakref
from pathlib import Path

from specviz.proposers.suffix_index import Occurrence, Text, agreement

FORMAT = "specviz-answer-corpus/1"
DEFAULT_PATH = Path(__file__).resolve().parents[2] / "assets" / "corpus" / "bundled-answers.json"
SUFFIX_CORPUS = "suffix-corpus"  # its nodes' source kind
KEYS = (3, 2)  # n-gram lengths looked up, the longest first: a single shared token says little here
PER_KEY = 64  # occurrences read per lookup (the first in the file): a common trigram occurs hundreds of times
SEPARATOR = -1  # between answers in the searched text, so no match runs from one answer into the next


class Corpus:
    """Answers as one searchable text, indexed by the n-grams of KEYS ending at each position."""

    def __init__(self, answers: list[list[int]], tokenizer_digest: str, path: str = ""):
        self.text = Text(origin=SUFFIX_CORPUS)
        for answer in answers:
            self.text.ids.extend(int(t) for t in answer)
            self.text.ids.append(SEPARATOR)
        self.digest, self.path = tokenizer_digest, path
        self.answers = len(answers)
        ids = self.text.ids
        self.index: dict[tuple[int, ...], list[int]] = {}
        for n in KEYS:
            for j in range(n - 1, len(ids) - 1):  # an occurrence needs a continuation after it
                gram = tuple(ids[j - n + 1: j + 1])
                if SEPARATOR in gram or ids[j + 1] == SEPARATOR:
                    continue
                at = self.index.setdefault(gram, [])
                if len(at) < PER_KEY:
                    at.append(j)

    def __len__(self) -> int:
        return len(self.text.ids) - self.answers  # tokens, separators left out

    def occurrences(self, context: list[int]) -> list[Occurrence]:
        """Where the longest KEYS n-gram ending the context occurs, each with how far back it agrees
        (at most suffix_index.MAX_MATCH), as suffix_index.occurrences gives them for the other texts."""
        for n in KEYS:
            if len(context) < n:
                continue
            found = self.index.get(tuple(context[-n:]))
            if found:
                ids = self.text.ids
                return [Occurrence(self.text, j + 1, agreement(ids, j, context), 1, SUFFIX_CORPUS) for j in found]
        return []


def tokenizer_digest(tokenizer) -> str:
    """A digest of the whole vocabulary, id by id: equal only where every id means the same token."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    return hashlib.sha256("\n".join(str(t) for t in tokens).encode("utf-8")).hexdigest()[:16]


_LOADED: dict[str, Corpus | None] = {}
_DIGESTS: dict[int, tuple] = {}  # id(tokenizer) → (a weak reference to it, its digest): hashing takes tens of ms
_LOCK = threading.Lock()


def _fresh_lock() -> None:
    global _LOCK
    _LOCK = threading.Lock()


os.register_at_fork(after_in_child=_fresh_lock)  # a lock held by another thread at a fork would stay held in the child


def read(path: Path | str = DEFAULT_PATH) -> Corpus:
    """The corpus in `path`; ValueError with what to do where the file is not one."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not a readable answer corpus ({e}); rebuild it with "
                         "`python -m specviz.training.corpus_build`") from e
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("answers"), list):
        raise ValueError(f"{path} is not a {FORMAT} file; rebuild it with `python -m specviz.training.corpus_build`")
    return Corpus(data["answers"], str(data.get("tokenizer", "")), str(path))


def for_target(target, path: Path | str = DEFAULT_PATH) -> Corpus | None:
    """The shipped corpus where `target`'s tokenizer is the one it was made with, else None (a hub
    model, a tiny test model, or no file). Read once per process and shared: it is never written to."""
    tokenizer = getattr(target, "tokenizer", None)
    if tokenizer is None or not Path(path).is_file():
        return None
    key = str(path)
    with _LOCK:
        if key not in _LOADED:
            try:
                _LOADED[key] = read(path)
            except ValueError:
                _LOADED[key] = None
        corpus = _LOADED[key]
        if corpus is None:
            return None
        held = _DIGESTS.get(id(tokenizer))
        if held is not None and held[0]() is tokenizer:
            digest = held[1]
        else:  # new, or another object now at a freed one's address
            digest = tokenizer_digest(tokenizer)
            _DIGESTS[id(tokenizer)] = (weakref.ref(tokenizer), digest)
    return corpus if digest == corpus.digest else None

