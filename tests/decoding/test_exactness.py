"""Speculative sampling through the whole engine follows the target exactly, whatever the draft.

Checked at T = 0.7 with top-p = 0.9 (and at T = 1) for chains and trees, with a draft model,
the draft head, and deterministic drafts. The expectation comes from tests/helpers/reference.py (numpy,
the nucleus by its definition), never from specviz.drafting.sampling. The same check must fail for every
broken twin of verify.py's rules (tests/helpers/twins.py): that is how we know it can fail.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from specviz.decoding.engine import Decoder
from specviz.decoding.targets import BatchedTarget
from specviz.decoding.trace import BONUS, FROM_DRAFT, RESAMPLED
from specviz.loading.loader import derive_draft, tiny_random
from specviz.proposers import make_proposer
from specviz.proposers.draft_model import DraftModelProposer, shared_calls
from specviz.proposers.head import HeadProposer
from specviz.proposers.suffix import EarlierRuns, SuffixProposer
from specviz.teach.toy import chi_square_p_value
from specviz.training.head_fit import new_head
from tests.helpers import twins
from tests.helpers.reference import exact_joint
from tests.helpers.tiny import FixedTreeProposer, Gathered, TwoChains, run_together

VOCAB = 6  # few enough tokens that the joint of three of them has 216 cells
PROMPT = [1, 2, 3]
N = 600  # runs per check: every twin then fails at p < 1e-6 (four seed blocks tried), the real rules pass
ALPHA = 1e-4  # "follows the target" is rejected below this p-value; seeds are fixed, so no flakes
NUCLEUS, PLAIN = (0.7, 0.9), (1.0, 1.0)  # (temperature, top-p)


@pytest.fixture(scope="module")
def models():
    """build_models(), once per module."""
    return build_models()


def build_models():
    """A tiny target whose p is peaked enough for top-p 0.9 to cut tokens, a noisy draft whose
    drafts are accepted about 40 % of the time, and an untrained head whose q covers tokens 0–3 only."""
    # Two layers make p depend on the context, so a bonus drawn from the wrong row shows.
    target = tiny_random(vocab_size=VOCAB, hidden_size=32, layers=2, heads=2, kv_heads=1, intermediate=64, seed=1)
    with torch.no_grad():
        target.model.lm_head.weight.mul_(10)  # a random model's p is nearly flat; ×10 keeps 2–6 tokens of 6
    draft = derive_draft(target, noise=1.0, seed=2)
    head = new_head(target.model, torch.arange(4), seed=0, intermediate=32)
    return target, draft, head


def _proposer(models, name: str, seed: int):
    """A fresh proposer of the named kind for one run."""
    target, draft, head = models
    make = {
        "chain, draft model": lambda: DraftModelProposer.build(target, draft),
        "tree, draft model": lambda: TwoChains(DraftModelProposer.build(target, draft)),
        "chain, draft head": lambda: HeadProposer(head, target.model),
        "tree, draft head": lambda: TwoChains(HeadProposer(head, target.model)),
        "tree, deterministic drafts": lambda: FixedTreeProposer(depth=2, branching=3, vocab=VOCAB, seed=seed),
        # the paper's way: every candidate kept, so each cycle has at least 3 siblings to try
        "tree, logitspec": lambda: make_proposer("logitspec", target, top_k=3, min_ngram=1, lone_cands=True,
                                                 adaptive=False),
        # a class on one prompt: each run drafts from the runs before it (their sampled outputs),
        # trees of several siblings ranked by how often each continuation came out
        "tree, suffix (a class)": lambda: SuffixProposer(target.model, min_prob=0.0, store=_class_store(seed)),
    }
    return make[name]()


CLASS: dict[str, EarlierRuns] = {}  # one store per check: runs 0…N−1 of one check feed each other


def _class_store(seed: int) -> EarlierRuns:
    """The check's store of earlier runs, emptied when a new check starts (seed 0)."""
    if seed == 0 or "store" not in CLASS:
        CLASS["store"] = EarlierRuns()
    return CLASS["store"]


def run_counts(models, name: str, settings) -> tuple[np.ndarray, Counter]:
    """Counts of the new tokens (t2, t3, t4) over N seeded runs with K = 2, and every token's origin.

    t1 comes from the prefill; t2 and t3 are the first cycle's drafts or their replacements, and
    t4 is that cycle's bonus token when both drafts are accepted.
    """
    target = models[0]
    temperature, top_p = settings
    counts, origins = np.zeros((VOCAB,) * 3), Counter()
    for seed in range(N):
        run = Decoder(target, PROMPT, proposer=_proposer(models, name, seed), k=2, temperature=temperature,
                      top_p=top_p, seed=seed, max_new_tokens=4, chat=False, record=False, plan=False).run()
        counts[tuple(run.token_ids[1:])] += 1
        origins.update(run.origins)
    return counts, origins


GROUP = 8  # runs decoded at once when their verify passes are batched


def run_counts_batched(models, name: str, settings, plan: bool = False,
                       n: int = N) -> tuple[np.ndarray, Counter, list[int]]:
    """run_counts over n runs (N unless told), decoded GROUP at a time in threads whose verify passes one
    BatchedTarget per group answers together (it waits for the whole group), and whose draft calls
    (a draft model's, the head's) run together too: the app's class at once. Also returns how many
    requests each cycle's pass answered."""
    target = models[0]
    temperature, top_p = settings
    counts, origins, shares = np.zeros((VOCAB,) * 3), Counter(), []
    for first in range(0, n, GROUP):
        group = min(GROUP, n - first)
        shared = BatchedTarget(target)
        # drafts wait briefly: runs near their end draft fewer steps than the others
        drafting = [_draft_rounds(models, name)] if name in DRAFTING else []
        gathered = Gathered([shared.rounds] + drafting, group, [5.0] + [0.05] * len(drafting))

        def make(i):
            seed = first + i
            return Decoder(target, PROMPT, proposer=_proposer(models, name, seed), k=2, temperature=temperature,
                           top_p=top_p, seed=seed, max_new_tokens=4, chat=False, record=False, plan=plan,
                           verifier=shared, share_passes=True)
        try:
            for run in run_together(make, group, gathered):
                counts[tuple(run.token_ids[1:])] += 1
                origins.update(run.origins)
                shares += [c.shared_by for c in run.cycles]
        finally:
            gathered.close()
    return counts, origins, shares


def p_value(models, name: str, settings) -> tuple[float, Counter]:
    """χ² p-value of the sampled (t2, t3, t4) against the target's exact joint, and the origins."""
    counts, origins = run_counts(models, name, settings)
    expected = exact_joint(models[0].model, PROMPT, 4, *settings).sum(0)  # t1 summed out
    return chi_square_p_value(counts, expected), origins


CASES = [(name, NUCLEUS) for name in ("chain, draft model", "tree, draft model", "chain, draft head",
                                      "tree, draft head", "tree, deterministic drafts", "tree, logitspec",
                                      "tree, suffix (a class)")]
CASES += [("chain, draft model", PLAIN), ("tree, deterministic drafts", PLAIN)]


@pytest.mark.parametrize("name,settings", CASES, ids=[f"{n}, T={t}, top-p={p}" for n, (t, p) in CASES])
def test_sampled_tokens_follow_the_target(models, name, settings):
    """(t2, t3, t4) over N seeded runs follow the target's exact joint (χ² p > ALPHA), and the runs
    met every outcome, each in at least one run in 20: accepted drafts, resampled tokens, bonus tokens."""
    p, origins = p_value(models, name, settings)
    assert p > ALPHA, p
    assert min(origins[FROM_DRAFT], origins[RESAMPLED], origins[BONUS]) >= N / 20, origins


BATCHED = ["chain, draft model", "tree, draft head", "tree, logitspec"]
DRAFTING = ["chain, draft model", "tree, draft head"]  # the cases whose drafts run a model


def _draft_rounds(models, name: str):
    """The process's shared rounds of the case's draft calls."""
    target, draft, head = models
    return shared_calls(draft.model).rounds if name == "chain, draft model" else \
        HeadProposer(head, target.model).calls.rounds


@pytest.mark.parametrize("name", BATCHED)
def test_sampled_tokens_follow_the_target_with_shared_verify_passes(models, name):
    """The same check with the runs' verify passes and draft calls shared GROUP at a time
    (BatchedTarget, passes/rounds.py): batching changes no rule, so (t2, t3, t4) still follow the
    target's exact joint; and passes and draft calls were shared."""
    before = _draft_rounds(models, name).shared_passes if name in DRAFTING else 0
    counts, origins, shares = run_counts_batched(models, name, NUCLEUS)
    expected = exact_joint(models[0].model, PROMPT, 4, *NUCLEUS).sum(0)
    assert chi_square_p_value(counts, expected) > ALPHA
    assert max(shares) == GROUP and sum(s > 1 for s in shares) > len(shares) / 2, Counter(shares)
    if name in DRAFTING:
        assert _draft_rounds(models, name).shared_passes > before + N / GROUP


# Runs of the load-aware check: with the planner pricing some passes at 32 runs, fewer drafts are
# sent, and at N = 600 "resample from p" gave p = 0.04; at 1,200 every twin fails (that one at 5e-10).
LOAD_N = 1200


def test_sampled_tokens_follow_the_target_with_load_aware_drafting(models, monkeypatch):
    """Shared verify passes with the planner on, each pass priced at a batch that changes from
    cycle to cycle (1 or 32 runs, drawn by a generator apart from the runs' own): what is sent
    changes with the load, never how it is judged, so (t2, t3, t4) over LOAD_N runs still follow
    the target's exact joint; and the load did change what was sent."""
    counts, sent = load_aware_counts(models, monkeypatch)
    expected = exact_joint(models[0].model, PROMPT, 4, *NUCLEUS).sum(0)
    assert chi_square_p_value(counts, expected) > ALPHA
    assert sum(d > 0 for d in sent) > LOAD_N / 20, Counter(sent)


def load_aware_counts(models, monkeypatch, n: int = LOAD_N) -> tuple[np.ndarray, list[int]]:
    """(t2, t3, t4) counts of the load-aware check's n runs (tree, logitspec, planner on, shared
    passes priced at a load of 1 or 32 runs drawn per cycle), and per cycle the nodes the load cut."""
    import random

    from specviz.decoding import engine
    from tests.pricing.test_batch_costs import crowd_costs

    loads, sent = random.Random(7), []
    monkeypatch.setattr(engine, "batch_cost", lambda target: crowd_costs())
    monkeypatch.setattr(BatchedTarget, "expected_batch", lambda self: loads.choice([1, 32]))
    real_step = Decoder._step

    def watched(self):
        cycle = real_step(self)
        if cycle is not None and cycle.sent_alone is not None:
            sent.append(cycle.sent_alone - cycle.drafted)
        return cycle

    monkeypatch.setattr(Decoder, "_step", watched)
    counts, _, _ = run_counts_batched(models, "tree, logitspec", NUCLEUS, plan=True, n=n)
    return counts, sent


# The two checks above with a broken rule: batching or pricing by load could hide a wrong rule from
# them (a rule skipped on the shared path would pass unseen), so each must fail for every twin.
@pytest.mark.parametrize("twin", list(twins.TWINS))
@pytest.mark.parametrize("name", BATCHED)
def test_the_shared_pass_check_fails_for_every_broken_rule(models, monkeypatch, name, twin):
    """With one of verify.py's rules swapped for a broken twin, the shared-verify-pass check (the
    runs' passes answered GROUP at a time) rejects the output (χ² p < ALPHA), with the passes still
    shared: the check can see a wrong rule on the path the class takes."""
    twins.install(monkeypatch, twin)
    counts, _, shares = run_counts_batched(models, name, NUCLEUS)
    expected = exact_joint(models[0].model, PROMPT, 4, *NUCLEUS).sum(0)
    assert max(shares) == GROUP  # the twin ran on shared passes, not alone
    p = chi_square_p_value(counts, expected)
    assert p < ALPHA, p


@pytest.mark.parametrize("twin", list(twins.TWINS))
def test_the_load_aware_check_fails_for_every_broken_rule(models, monkeypatch, twin):
    """With one of verify.py's rules swapped for a broken twin, the load-aware check (planner on,
    passes priced at a changing load) rejects the output (χ² p < ALPHA), with drafts still sent.
    Resampling from p instead of the residual differs from the rule only where a draft was rejected,
    so that twin gets three times the runs: at LOAD_N its p came out 1.2e-4 in a full-suite run (the
    threads' order decides which run gets which load, so the counts are not the same in every run)."""
    twins.install(monkeypatch, twin)
    n = LOAD_N * (3 if twin == "resample from p" else 1)
    counts, sent = load_aware_counts(models, monkeypatch, n)
    expected = exact_joint(models[0].model, PROMPT, 4, *NUCLEUS).sum(0)
    assert sum(d > 0 for d in sent) > n / 20, Counter(sent)  # as in the check: the load still cut drafts
    p = chi_square_p_value(counts, expected)
    assert p < ALPHA, p


@pytest.mark.parametrize("twin", list(twins.TWINS))
@pytest.mark.parametrize("name", ["chain, draft model", "tree, draft head", "tree, deterministic drafts",
                                  "tree, suffix (a class)"])
def test_the_check_fails_for_every_broken_rule(models, monkeypatch, name, twin):
    """With one of verify.py's rules swapped for a broken twin, the same check at T = 0.7 and
    top-p = 0.9 rejects the output (χ² p < ALPHA)."""
    twins.install(monkeypatch, twin)
    p, _ = p_value(models, name, NUCLEUS)
    assert p < ALPHA, p
