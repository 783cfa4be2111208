"""Suffix decoding (proposers/suffix.py, suffix_index.py): the index counts what a suffix tree counts,
trees are ranked by frequency, a run learns from earlier runs on exactly its target and prompt and
from no other, and greedy output stays the target's."""
from __future__ import annotations

import random

import pytest

import specviz
from specviz.decoding.engine import Decoder
from specviz.proposers import make_proposer
from specviz.proposers.base import ProposeContext
from specviz.proposers.suffix import EarlierRuns, SuffixProposer
from specviz.proposers.suffix_index import MAX_MATCH, Text, grow, occurrences
from tests.helpers.tiny import PROMPTS, hf_greedy, pair

N = 30


def _ctx(ids, prompt_len, k=8):
    return ProposeContext(list(ids), None, k, None, prompt_len)


def _count(texts, pattern) -> int:
    """How many times `pattern` occurs in `texts`, by brute force: what a suffix tree counts at its node."""
    n = len(pattern)
    return sum(1 for t in texts for j in range(len(t) - n + 1) if t[j: j + n] == pattern)


def test_counts_are_a_suffix_trees_counts():
    """On random texts over 4 tokens, every node of a tree grown with no node budget or probability
    limit counts as many occurrences as a suffix tree holds for the matched suffix followed by the
    node's path; the matched suffix is the longest suffix of the context found with a continuation."""
    rng = random.Random(0)
    for _ in range(20):
        texts = [[rng.randrange(4) for _ in range(40)] for _ in range(3)]
        context = [rng.randrange(4) for _ in range(6)]
        found = [o for t in texts for o in occurrences(Text(t), context, 1, lambda a: "suffix-earlier")]
        m = max(o.m for o in found)
        assert m == max(n for n in range(1, 7) if any(_count([t[:-1]], context[-n:]) for t in texts))
        grown = grow([o for o in found if o.m >= m], m, 3, 10 ** 6, 0.0)
        paths = {-1: context[len(context) - m:]}
        for i, (tok, par) in enumerate(zip(grown.tree.tokens, grown.tree.parents)):
            paths[i] = paths[par] + [tok]
            assert grown.counts[i] == _count(texts, paths[i]), (paths[i], grown.counts[i])
        assert len(grown.tree) > 0 and m <= MAX_MATCH


def test_the_tree_ranks_continuations_by_frequency():
    """Earlier runs that continued a shared prefix with token 7 three times and with 8 once draft 7
    first (branch 0, the larger share), 8 second (branch 1); with min_prob 0.3, 8 (a 1/4 share) is left out."""
    store = EarlierRuns()
    model = pair()[0].model
    prompt = [1, 2, 3]
    for i, after in enumerate([7, 7, 8, 7]):
        store.record(model, prompt, [4, 5, after, 9 + i], f"run{i}")
    proposer = SuffixProposer(model, store=store, min_prob=0.0)
    tree = proposer.propose(_ctx(prompt + [4, 5], 3))
    level2 = [(tok, src.branch) for tok, par, src in zip(tree.tokens, tree.parents, tree.sources) if par == -1]
    assert level2 == [(7, 0), (8, 1)]
    assert all(s.kind == "suffix-earlier" for s in tree.sources)
    assert tree.match.found_in == "suffix-earlier" and tree.match.count == 4
    pruned = SuffixProposer(model, store=store, min_prob=0.3).propose(_ctx(prompt + [4, 5], 3))
    assert 8 not in [t for t, p in zip(pruned.tokens, pruned.parents) if p == -1]


def test_a_repeated_output_is_kept_once_and_counted():
    """Thirty identical outputs are one text of weight 30 (memory stays bounded), and a run id
    recorded twice (the worker and the main process) counts once."""
    store, model = EarlierRuns(), pair()[0].model
    for i in range(30):
        store.record(model, [1, 2], [3, 4, 5], f"s{i}")
    store.record(model, [1, 2], [3, 4, 5], "s0")
    entry = store.entry(model, [1, 2])
    assert len(entry.texts) == 1 and entry.weights == [30]


@pytest.mark.parametrize("share", [True, False])
def test_greedy_suffix_is_lossless_and_learns_from_earlier_runs(share):
    """Greedy suffix decoding gives HF generate's tokens, the first run and the repeats alike; with
    `share`, a second run on the same prompt drafts from the first (suffix-earlier nodes) and commits
    more tokens per cycle; without it, it drafts exactly as the first run did."""
    target = pair(vocab=48, layers=3, seed=11)[0]
    for prompt in PROMPTS:
        runs = [specviz.generate(target, prompt * 2, method="suffix", max_new_tokens=N, chat=False, share=share)
                for _ in range(2)]
        for run in runs:
            assert run.token_ids == hf_greedy(target, prompt * 2, N)
        sources = {n.source for c in runs[1].cycles for n in c.nodes}
        if share:
            assert "suffix-earlier" in sources
            assert len(runs[1].cycles) < len(runs[0].cycles)
        else:
            assert "suffix-earlier" not in sources
            assert [c.committed for c in runs[1].cycles] == [c.committed for c in runs[0].cycles]


def test_the_hybrid_offers_suffix_nodes_and_stays_lossless():
    """The hybrid (no trained head on a tiny target) adds suffix decoding's nodes: a second greedy run
    on the same prompt sends suffix-earlier nodes and still gives HF generate's tokens."""
    target = pair(vocab=48, layers=3, seed=12)[0]
    prompt = PROMPTS[2] * 2
    for _ in range(2):
        run = specviz.generate(target, prompt, method="hybrid", max_new_tokens=N, chat=False)
        assert run.token_ids == hf_greedy(target, prompt, N)
    assert "suffix-earlier" in {n.source for c in run.cycles for n in c.nodes}
    with pytest.raises(ValueError, match="has no option"):
        make_proposer("suffix", target, bogus=1)


SECRET = "My locker code is Quokka Zeppelin 4471 and nobody may know it."


@pytest.mark.bundled
def test_a_secret_in_one_prompt_never_reaches_a_run_on_another(bundled_target):
    """Privacy: after a run whose prompt holds a secret (and whose output repeats it), a run on a
    different prompt drafts exactly as it does with an empty store, and no node of its draft trees
    is from an earlier run or spells the secret's rarest tokens; a run on the secret's own prompt,
    by contrast, drafts from the earlier run (suffix-earlier nodes)."""
    kw = dict(method="suffix", max_new_tokens=40, record=True)
    private = f"Repeat this sentence twice, exactly: {SECRET}"
    other = "Repeat this sentence twice, exactly: the weather is mild today."
    alone = specviz.generate(bundled_target, other, **kw, share=False)
    first = specviz.generate(bundled_target, private, **kw)
    assert "Quokka" in first.text  # the secret is in the earlier run's output too
    after = specviz.generate(bundled_target, other, **kw)
    secret_ids = set(bundled_target.tokenizer.encode(" Quokka Zeppelin 4471", add_special_tokens=False))
    secret_ids -= set(bundled_target.encode(other, True)) | set(after.token_ids)
    assert secret_ids  # tokens the other run has no business drafting
    for cycle in after.cycles:
        for node in cycle.nodes:
            assert node.source != "suffix-earlier" and node.token not in secret_ids
        assert cycle.match is None or cycle.match.found_in != "suffix-earlier"
    assert [[n.token for n in c.nodes] for c in after.cycles] == [[n.token for n in c.nodes] for c in alone.cycles]
    again = specviz.generate(bundled_target, private, **kw)
    assert "suffix-earlier" in {n.source for c in again.cycles for n in c.nodes}
    assert again.token_ids == first.token_ids


def test_a_different_target_is_a_different_store():
    """Two targets given the same prompt keep separate earlier runs: the store is keyed by the model."""
    store = EarlierRuns()
    a, b = pair(seed=1)[0].model, pair(seed=2)[0].model
    store.record(a, [1, 2], [3, 4], "x")
    assert store.entry(b, [1, 2]).texts == [] and len(store.entry(a, [1, 2]).texts) == 1


def test_a_run_of_the_engine_feeds_the_store_when_it_ends():
    """A run decoded by the engine records its output once, at its end; a proposer built with
    share=False records nothing."""
    target = pair(vocab=48, seed=13)[0]
    store = EarlierRuns()
    decoder = Decoder(target, PROMPTS[0], proposer=SuffixProposer(target.model, store=store), max_new_tokens=8,
                      chat=False)
    decoder.step()
    assert store.entry(target.model, PROMPTS[0]).texts == []
    run = decoder.run()
    assert store.entry(target.model, PROMPTS[0]).texts[0].ids == PROMPTS[0] + run.token_ids
    quiet = EarlierRuns()
    Decoder(target, PROMPTS[1], proposer=SuffixProposer(target.model, store=quiet, share=False), max_new_tokens=8,
            chat=False).run()
    assert quiet.entry(target.model, PROMPTS[1]).texts == []
