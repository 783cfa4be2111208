"""Suffix decoding's answer corpus (proposers/corpus.py): it finds the longest n-gram of the context,
never drafts across two answers, reaches only the target whose tokenizer made it, and keeps greedy
output the target's and sampled output the target's distribution."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.trace import NOT_REACHED
from specviz.loading.loader import tiny_random
from specviz.proposers.base import ProposeContext
from specviz.proposers.corpus import FORMAT, SEPARATOR, SUFFIX_CORPUS, Corpus, for_target, read, tokenizer_digest
from specviz.proposers.hybrid import HybridProposer
from specviz.proposers.logitspec import LogitSpecProposer
from specviz.proposers.suffix import EarlierRuns, SuffixProposer
from specviz.teach.toy import chi_square_p_value
from tests.helpers.reference import exact_joint
from tests.helpers.tiny import PROMPTS, hf_greedy, pair, word_tokenizer


def _ctx(ids, prompt_len, k=8, sampling=None):
    return ProposeContext(list(ids), None, k, sampling, prompt_len)


def test_the_longest_ngram_is_looked_up_and_agreement_counted():
    """A context ending in a trigram the corpus holds gets that trigram's occurrences, each with how
    far back it agrees; with no trigram it falls back to the bigram; a lone shared token is no match."""
    corpus = Corpus([[1, 2, 3, 4, 5], [9, 2, 3, 6]], "x")
    found = corpus.occurrences([7, 1, 2, 3])
    assert [(o.after, o.m, o.origin) for o in found] == [(3, 3, SUFFIX_CORPUS)]
    assert sorted((o.text.ids[o.after], o.m) for o in corpus.occurrences([8, 2, 3])) == [(4, 2), (6, 2)]
    assert corpus.occurrences([8, 8, 3]) == []
    assert len(corpus) == 9


def test_a_draft_never_runs_from_one_answer_into_the_next():
    """The continuation of a match stops at the end of its answer: no separator and no token of the
    next answer is drafted, and the match shown holds this answer's tokens alone."""
    corpus = Corpus([[10, 11, 12, 13], [14, 15, 16, 17]], "x")
    proposer = SuffixProposer(None, share=False, corpus=corpus, min_prob=0.0)
    proposer.start([0])
    tree = proposer.propose(_ctx([0, 5, 11, 12], 2, k=8))
    assert tree.tokens == [13]
    assert {s.kind for s in tree.sources} == {SUFFIX_CORPUS}
    assert SEPARATOR not in tree.match.after and SEPARATOR not in tree.match.before
    assert tree.match.after == (13,) and tree.match.before == (10,)


def test_the_own_texts_tree_comes_first_and_the_corpus_adds_a_branch():
    """With a match in the run's own text and one in the corpus, both trees are offered: the run's own
    nodes first, the corpus's continuation as a branch beside them, a repeated token merged."""
    corpus = Corpus([[1, 2, 3, 20, 21]], "x")
    proposer = SuffixProposer(None, share=False, corpus=corpus, min_prob=0.0)
    ids = [1, 2, 3, 30, 31, 7, 1, 2, 3]  # the prompt holds "1 2 3 30 31"; the corpus "1 2 3 20 21"
    proposer.start(ids)
    tree = proposer.propose(_ctx(ids, len(ids), k=4))
    assert tree.tokens[:2] == [30, 31] and tree.source_of(0).kind == "suffix-prompt"
    corpus_nodes = [i for i in range(len(tree)) if tree.source_of(i).kind == SUFFIX_CORPUS]
    assert [tree.tokens[i] for i in corpus_nodes] == [20, 21]
    assert tree.parents[corpus_nodes[0]] == -1


def test_only_the_tokenizer_that_made_it_gets_it(tmp_path):
    """for_target hands the corpus to a target whose tokenizer has the digest written in the file and to
    no other; a file that is not a corpus is an error that says how to rebuild it."""
    target = pair(vocab=40, seed=3)[0]
    target.tokenizer = word_tokenizer(40)
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"format": FORMAT, "tokenizer": tokenizer_digest(target.tokenizer),
                                "answers": [[5, 6, 7]]}))
    assert for_target(target, path) is not None
    other = pair(vocab=40, seed=3)[0]
    other.tokenizer = word_tokenizer(40, swap=(5, 6))
    assert for_target(other, path) is None
    assert for_target(target, tmp_path / "none.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match="corpus_build"):
        read(bad)


def _corpus(vocab: int, seed: int, answers: int = 40, length: int = 12) -> Corpus:
    rng = random.Random(seed)
    return Corpus([[rng.randrange(vocab) for _ in range(length)] for _ in range(answers)], "x")


def test_greedy_runs_with_the_corpus_are_the_targets():
    """Suffix decoding and the hybrid, each drafting from a corpus of the target's own answers to other
    prompts, give HF generate's greedy tokens, and corpus nodes were sent and accepted (the corpus is
    exercised, not bypassed)."""
    target = pair(vocab=48, layers=3, seed=21)[0]
    rng = random.Random(0)
    corpus = Corpus([hf_greedy(target, [rng.randrange(4, 48) for _ in range(4)], 30) for _ in range(30)], "x")
    accepted = set()
    for prompt in PROMPTS:
        for make in (lambda: SuffixProposer(target.model, share=False, corpus=corpus),
                     lambda: HybridProposer(LogitSpecProposer(adaptive=False), None,
                                            SuffixProposer(target.model, share=False, corpus=corpus))):
            run = specviz.generate(target, prompt, proposer=make(), max_new_tokens=24, chat=False)
            assert run.token_ids == hf_greedy(target, prompt, 24)
            accepted |= {c.nodes[i].source for c in run.cycles for i in c.accepted}
    assert SUFFIX_CORPUS in accepted


VOCAB, PROMPT, N, ALPHA = 6, [1, 2, 1, 2, 3], 800, 1e-4


def _peaked():
    """A peaked tiny target (top-p 0.9 cuts tokens), as test_hybrid.py's."""
    target = tiny_random(vocab_size=VOCAB, hidden_size=32, layers=2, heads=2, kv_heads=1, intermediate=64, seed=1)
    with torch.no_grad():
        target.model.lm_head.weight.mul_(10)
    return target


def _p_value(target, corpus: Corpus, sent: list[int]) -> float:
    """χ² p-value of tokens 2–4 of N seeded suffix runs (T = 0.7, top-p 0.9) drafting from `corpus`,
    against the exact joint; `sent` counts the corpus nodes verification judged."""
    counts = np.zeros((VOCAB,) * 3)
    for seed in range(N):
        proposer = SuffixProposer(target.model, share=False, corpus=corpus, min_prob=0.0, store=EarlierRuns())
        run = Decoder(target, PROMPT, proposer=proposer, k=3, temperature=0.7, top_p=0.9, seed=seed,
                      max_new_tokens=4, chat=False, record=False, plan=False).run()
        counts[tuple(run.token_ids[1:])] += 1
        sent[0] += sum(n.source == SUFFIX_CORPUS and n.status != NOT_REACHED for c in run.cycles for n in c.nodes)
    exact = exact_joint(target.model, PROMPT, 4, 0.7, 0.9).sum(axis=0)
    return chi_square_p_value(counts.ravel(), exact.ravel() * N)


def test_sampled_runs_drafting_from_the_corpus_follow_the_target():
    """Corpus nodes are point masses judged by the recursive rule: N sampled runs follow the target's
    joint distribution of tokens 2–4 (χ²; its power: the broken twin below fails it), and corpus
    nodes were judged in them."""
    target = _peaked()
    sent = [0]
    assert _p_value(target, _corpus(VOCAB, seed=1, answers=60, length=8), sent) > ALPHA
    assert sent[0] > N, sent


def test_a_corpus_node_judged_as_a_draw_is_caught(monkeypatch):
    """The check's power: corpus nodes judged as if drawn from a uniform q (min(1, p/q) instead of the
    point mass's rule) break exactness, and the same check rejects it."""
    target = _peaked()
    real = SuffixProposer.propose

    def as_draws(self, ctx):
        tree = real(self, ctx)
        if len(tree):
            tree.q = [torch.full((VOCAB,), 1.0 / VOCAB) for _ in range(len(tree))]
        return tree

    monkeypatch.setattr(SuffixProposer, "propose", as_draws)
    assert _p_value(target, _corpus(VOCAB, seed=1, answers=60, length=8), [0]) < ALPHA
