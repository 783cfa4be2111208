"""The draft head's training prompts (assets/head/prompts_train*.txt) are written for the purpose:
none shares a run of eight words with a benchmark prompt or a held-out prompt, which would let
the head learn the very answers it is measured on."""
from __future__ import annotations

import re

import pytest

from specviz.training.head_data import ASSETS, TRAIN_PROMPTS, read_prompts

RUN = 8  # words
# Written on 2026-12-04, before this rule, and trained on by the shipped head: it shares its opening
# eight words, "write a python function that returns the n-th", with the benchmark's code-3 (the
# n-th prime), while its task differs. Rewording it now would change the file's digest, and with it
# the key of every cached training pass over the file (head_data.build_data). Every later file
# follows the rule with no exception.
KNOWN = {"prompts_train_3.txt": ["Write a Python function that returns the n-th triangular number."]}


def runs(text: str, n: int = RUN) -> set[tuple[str, ...]]:
    """Every run of n consecutive words of `text`, lowercased, punctuation kept."""
    words = re.sub(r"\s+", " ", text.lower()).split()
    return {tuple(words[i: i + n]) for i in range(len(words) - n + 1)}


def shared(prompts: list[str], others: list[str]) -> list[str]:
    """The prompts of `prompts` that share a run of RUN words with any of `others`."""
    seen = set().union(*(runs(o) for o in others)) if others else set()
    return [p for p in prompts if runs(p) & seen]


def test_the_check_finds_a_planted_overlap():
    """The check is able to fail: a training prompt that quotes eight words of a benchmark prompt
    is found, and one that shares only seven is not."""
    bench = ["Summarise the following report about the harbour in two short sentences please."]
    quoted = "Rewrite: the following report about the harbour in two short sentences, politely."
    seven = "Write the following report about the harbour in brief."
    assert shared([quoted, seven], bench) == [quoted]


def test_training_files_are_found():
    """Every prompts_train*.txt in the assets is a training file, and there are several."""
    assert len(TRAIN_PROMPTS) >= 3
    assert all(read_prompts(f) for f in TRAIN_PROMPTS)


@pytest.mark.parametrize("path", TRAIN_PROMPTS, ids=lambda p: p.name)
def test_no_training_prompt_quotes_a_heldout_prompt(path):
    """No training prompt shares eight consecutive words with a held-out prompt."""
    assert shared(read_prompts(path), read_prompts(ASSETS / "prompts_heldout.txt")) == []


@pytest.mark.parametrize("path", TRAIN_PROMPTS, ids=lambda p: p.name)
def test_no_training_prompt_quotes_a_benchmark_prompt(path, bench_prompts):
    """No training prompt shares eight consecutive words with a public benchmark prompt, but for the
    one written before the rule (KNOWN), which is still where it was."""
    assert shared(read_prompts(path), [p["prompt"] for p in bench_prompts]) == KNOWN.get(path.name, [])
