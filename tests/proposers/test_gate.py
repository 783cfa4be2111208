"""The hybrid's gate (specviz/proposers/gate.py): a source is computed only while it pays, the
trace and the narration say what was skipped and why, and decoding stays exact."""
from __future__ import annotations

import numpy as np
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.planner import Planner, key
from specviz.decoding.trace import CycleTrace, NodeTrace, RunTrace, Skip
from specviz.drafting.tree import DraftTree, Source
from specviz.loading.loader import tiny_random
from specviz.proposers import gate
from specviz.proposers.gate import HEAD, LONG_MATCH, SUFFIX, UNPAID, Gate, long_match
from specviz.teach.toy import chi_square_p_value
from specviz.training.head_fit import new_head
from specviz.viz.narrate import narrate
from tests.helpers.reference import exact_joint
from tests.helpers.tiny import PROMPTS, hf_greedy
from tests.proposers.test_hybrid import ALPHA, PROMPT, VOCAB, _hybrid, models  # noqa: F401 (fixture)

HIT, MISS = DraftTree.chain([5], retrieval_hit=True), DraftTree(retrieval_hit=False)


def _gated(target, head):
    """A test hybrid with the gate on (off by default: docs/BENCHMARKS.md, drafting priced by what it buys)."""
    proposer = _hybrid(target, head)
    proposer.gated = True
    return proposer


def _cycle(sources: list[str], accepted: list[int]) -> CycleTrace:
    nodes = [NodeTrace(i, 5, "", -1, 1, source=s) for i, s in enumerate(sources)]
    return CycleTrace(index=0, k=4, nodes=nodes, accepted=accepted)


def test_a_source_that_buys_nothing_is_skipped_and_probed_again():
    """A head whose drafts are never accepted is skipped after four computed cycles, computed again
    PROBE_EVERY cycles later and at once at a new retrieval hit; a head whose drafts are accepted is
    never skipped."""
    g = Gate((HEAD,), head_price=0.3)
    for _ in range(4):
        assert g.skips(MISS, False) == {}
        g.observe(_cycle(["head"], []))
    skipped = 0
    while g.skips(MISS, False) == {HEAD: UNPAID}:
        g.observe(_cycle([], []))
        skipped += 1
    assert skipped == gate.PROBE_EVERY - 1
    g.observe(_cycle(["head"], []))
    assert g.skips(MISS, False) == {HEAD: UNPAID}
    g.observe(_cycle([], []))
    assert g.skips(HIT, False) == {}  # the text changed: a new retrieval hit
    paying = Gate((HEAD,), head_price=0.3)
    for _ in range(20):
        assert paying.skips(MISS, False) == {}
        paying.observe(_cycle(["root", "head"], [1]))


def test_a_long_retrieval_match_skips_the_head_only():
    """Where the planner would send a retrieval chain at least as deep as the head would draft, the
    head is skipped (long-match) and the cheap sources are still computed; a short chain skips nothing."""
    planner = Planner(greedy=True)
    root = Source("root", ngram=3)
    for depth in range(1, 9):
        planner.counts[key(root, depth)] = [48.0, 50.0]
    chain = DraftTree.chain([5, 6, 7, 8, 9, 10], sources=[root] * 6, retrieval_hit=True)
    assert long_match(chain, planner, head_depth=3) and not long_match(chain.limit_depth(2), planner, 3)
    assert not long_match(chain, planner, head_depth=8)
    assert Gate((gate.CANDIDATE, SUFFIX, HEAD)).skips(chain, True) == {HEAD: LONG_MATCH}


def test_a_short_or_unsure_match_keeps_the_head():
    """A match that is not the longest n-gram, or whose chain the planner's counts accept that deep
    less often than LONG_SURE, is not long: the head is computed where its tokens may be accepted."""
    planner = Planner(greedy=True)
    full, short = Source("root", ngram=3), Source("root", ngram=2)
    for depth in range(1, 9):
        planner.counts[key(full, depth)] = [48.0, 50.0]
        planner.counts[key(short, depth)] = [48.0, 50.0]
    assert long_match(DraftTree.chain([5, 6, 7, 8, 9, 10], sources=[full] * 6), planner, 3)
    assert not long_match(DraftTree.chain([5, 6, 7, 8, 9, 10], sources=[short] * 6), planner, 3)
    unsure = Planner(greedy=True)
    for depth in range(1, 9):  # 0.9 per depth sends 6 deep, but reaches depth 3 only 0.73 of the time
        unsure.counts[key(full, depth)] = [45.0, 50.0]
    chain = DraftTree.chain([5, 6, 7, 8, 9, 10], sources=[full] * 6)
    assert max(unsure.prune(chain).depths) >= 3 and not long_match(chain, unsure, 3)


def test_gated_greedy_runs_stay_lossless_and_the_trace_says_what_was_skipped(monkeypatch):
    """With the gate made eager (any source judged after one cycle, at a price no draft meets), greedy
    hybrid runs still give HF generate's tokens; their cycles record skipped sources, which survive a
    trip through JSON and which the narration words; a run without a planner skips nothing."""
    monkeypatch.setattr(gate, "MIN_TRIED", 0.5)
    monkeypatch.setattr(gate, "MIN_GAIN", 10.0)
    target = tiny_random(vocab_size=48, layers=3, seed=4)
    head = new_head(target.model, torch.arange(48), seed=1, intermediate=32)
    seen = set()
    for prompt in PROMPTS:
        run = specviz.generate(target, prompt * 3, proposer=_gated(target, head), k=6, max_new_tokens=30,
                               chat=False)
        assert run.token_ids == hf_greedy(target, prompt * 3, 30)
        seen |= {(s.source, s.reason) for c in run.cycles for s in c.skipped}
    assert (HEAD, UNPAID) in seen
    again = RunTrace.from_json(run.to_json())
    assert [c.skipped for c in again.cycles] == [c.skipped for c in run.cycles]
    cycle = next(c for c in again.cycles if c.skipped)
    assert "Not computed:" in narrate(cycle) and "bought no accepted token" in narrate(cycle)
    plain = specviz.generate(target, PROMPTS[0] * 3, proposer=_gated(target, head), k=6, max_new_tokens=30,
                             chat=False, plan=False)
    assert not any(c.skipped for c in plain.cycles)
    ungated = specviz.generate(target, PROMPTS[0] * 3, proposer=_hybrid(target, head), k=6, max_new_tokens=30,
                               chat=False)  # the default, gate off: every source computed
    assert not any(c.skipped for c in ungated.cycles)


def test_the_narration_words_a_long_match():
    """A cycle whose head was skipped for a long retrieval match says so in words."""
    cycle = CycleTrace(index=3, k=4, skipped=[Skip("head", "long-match")])
    assert "Not computed: the head's calls, since prompt lookup already offered a match" in narrate(cycle)


def test_gated_sampling_follows_the_target(models, monkeypatch):  # noqa: F811 (the fixture)
    """Sampled hybrid runs (T = 0.7, top-p 0.9, planner on) whose gate skips sources from past
    counts (made eager as above) give the target's distribution (χ² over tokens 2–4 of N runs)."""
    monkeypatch.setattr(gate, "MIN_TRIED", 0.5)
    monkeypatch.setattr(gate, "MIN_GAIN", 10.0)
    target, head = models
    n, counts, skipping = 800, np.zeros((VOCAB,) * 3), 0
    for seed in range(n):
        run = Decoder(target, PROMPT, proposer=_gated(target, head), k=2, temperature=0.7, top_p=0.9, seed=seed,
                      max_new_tokens=6, chat=False, record=False).run()
        counts[tuple(run.token_ids[1:4])] += 1  # 6 tokens: later cycles, with a record, draft some
        skipping += any(c.skipped for c in run.cycles)
    assert skipping > n // 4  # the gate did act in many runs
    exact = exact_joint(target.model, PROMPT, 4, 0.7, 0.9).sum(axis=0)
    assert chi_square_p_value(counts.ravel(), exact.ravel() * n) > ALPHA
