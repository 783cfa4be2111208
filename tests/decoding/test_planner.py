"""Cost-aware drafting (specviz/decoding/planner.py): send what pays, nothing when nothing pays, and stay exact."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.planner import PRIOR_V, PROFILE_MIN_PARAMS, Planner, key, verify_cost
from specviz.drafting.tree import DraftTree, Source
from specviz.loading.loader import derive_draft, tiny_random
from specviz.pricing.cost_profile import CostProfile
from specviz.proposers.draft_model import DraftModelProposer
from specviz.teach.toy import chi_square_p_value
from tests.helpers.reference import exact_joint
from tests.helpers.tiny import PROMPTS, hf_greedy

LOOKUP, HEAD = Source("lookup", ngram=3), Source("head")
CHAIN = DraftTree.chain([5, 6, 7, 8], sources=[LOOKUP] * 4)


def _planner_with(rate: float, reached: int = 50, v=PRIOR_V) -> Planner:
    planner = Planner(greedy=True, v=v)
    for depth in range(1, 9):
        planner.counts[key(LOOKUP, depth)] = [rate * reached, float(reached)]
    return planner


def test_nothing_is_sent_when_nothing_pays():
    """With sources accepted 10 % of the time, no draft pays for v(2) = 1.41: the tree sent is empty."""
    assert len(_planner_with(0.1).prune(CHAIN)) == 0


def test_a_reliable_source_is_sent_whole():
    """With sources accepted 95 % of the time, the whole 4-token chain pays and is sent."""
    assert _planner_with(0.95).prune(CHAIN).tokens == CHAIN.tokens


def test_a_middling_source_is_cut_where_it_stops_paying():
    """At 60 %, P(depth d) = 0.6^d. Where each token costs 0.3 steps more (v(n) = 0.7 + 0.3 n), the
    first node pays (1.6 / 1.3 > 1) and the second does not (1.96 / 1.6 < 1.6 / 1.3): one node is sent.
    Where v is nearly flat from 2 to 8 tokens (this CPU's shape), all four pay."""
    steep = _planner_with(0.6, v=lambda n: 0.7 + 0.3 * n).prune(CHAIN)
    assert steep.tokens == CHAIN.tokens[:1]
    assert _planner_with(0.6).prune(CHAIN).tokens == CHAIN.tokens


def test_a_likely_branch_goes_ahead_of_an_unlikely_one_before_it():
    """A tree whose first branch is a 6-token retrieval chain accepted 20 % of the time and whose
    second is a 3-token head chain accepted 90 %: with v(n) = 0.7 + 0.3 n the planner sends the head
    chain, not a prefix of the tree (which would have to start with the unlikely chain)."""
    retrieval = DraftTree.chain([5, 6, 7, 8, 9, 10], sources=[LOOKUP] * 6)
    head = DraftTree.chain([11, 12, 13], sources=[HEAD] * 3)
    tree = DraftTree(retrieval.tokens + head.tokens, retrieval.parents + [-1, 6, 7],
                     sources=retrieval.sources + head.sources)
    planner = Planner(greedy=False, v=lambda n: 0.7 + 0.3 * n)
    for depth in range(1, 9):
        planner.counts[key(LOOKUP, depth)] = [10.0, 50.0]
        planner.counts[key(HEAD, depth)] = [45.0, 50.0]
    sent = planner.prune(tree)
    assert sent.tokens == [11, 12, 13] and sent.parents == [-1, 0, 1]


def test_greedy_confidence_is_the_nodes_own_q():
    """Under greedy decoding a node's finest key is its source, depth and its own q(x), not max q:
    a head tree's second choice (q 0.3 beside a first choice of 0.6) is counted in its own bucket,
    and under sampling no confidence key is used at all."""
    q = torch.tensor([0.0, 0.6, 0.3, 0.1])
    tree = DraftTree([1, 2], [-1, -1], [q, q], [HEAD, Source("head", branch=1)])
    greedy = Planner(greedy=True)
    assert greedy.keys(tree, 0, 1)[-1].endswith("|3") and greedy.keys(tree, 1, 1)[-1].endswith("|1")
    assert greedy.keys(tree, 0, 1)[0] != greedy.keys(tree, 1, 1)[0]  # the branch keys the source
    assert Planner(greedy=False).keys(tree, 1, 1) == [key(tree.source_of(1), 1)]


def test_an_unseen_greedy_node_starts_from_its_share_of_the_top_q():
    """Before any counts, a greedy node with a q is estimated at 0.5 × q(x) / max q (a third choice
    at 0.06 beside a first at 0.6: 0.05; the first choice itself: 0.5), a node without a q at the
    prior's 0.5; under sampling every node starts at 0.5. A fine key without counts leans on its
    coarse key: after 20 rejections of the source at that depth, the node is below a tenth of that."""
    q = torch.tensor([0.0, 0.6, 0.3, 0.06, 0.04])
    tree = DraftTree([3, 1, 7], [-1, -1, -1], [q, q, None],
                     [Source("head", branch=2), HEAD, LOOKUP])
    greedy = Planner(greedy=True)
    assert greedy.path_values(tree) == pytest.approx([0.05, 0.5, 0.5])
    assert Planner(greedy=False).path_values(tree) == pytest.approx([0.5, 0.5, 0.5])
    greedy.counts[key(tree.source_of(0), 1)] = [0.0, 20.0]
    assert greedy.path_values(tree)[0] < 0.005


def test_an_unsent_depth_starts_where_the_depth_above_stands():
    """A depth with no counts is centred on the estimate one depth up, not on 0.5: after a lookup
    source was accepted 19 times in 20 at depths 1 to 3, its depth-4 to 6 nodes (never sent) are
    estimated at depth 3's rate, about 0.95, so a 6-node chain's tail is worth a place; with no counts
    at all the chain decays as 0.5^d. Under sampling too (the rule reads counts only); a head's
    second choice at depth 2 leans on the first choice's depth-1 rate, scaled by its q share."""
    chain = DraftTree.chain([5, 6, 7, 8, 9, 10], sources=[LOOKUP] * 6)
    for greedy in (True, False):
        planner = Planner(greedy=greedy)
        assert planner.path_values(chain) == pytest.approx([0.5 ** d for d in range(1, 7)])
        for depth in (1, 2, 3):
            planner.counts[key(LOOKUP, depth)] = [19.0, 20.0]
        path = planner.path_values(chain)
        r1 = (19 + 1) / 22  # 19 of 20 under Beta(1, 1)
        r2 = (19 + 2 * r1) / 22  # the prior's two observations centred on the depth above
        r3 = (19 + 2 * r2) / 22
        assert [path[i] / (path[i - 1] if i else 1.0) for i in range(6)] == pytest.approx([r1, r2, r3, r3, r3, r3])
        assert path[5] > 0.6  # with 0.5 at every unseen depth it would be under 0.22
    q = torch.tensor([0.0, 0.8, 0.4])
    tree = DraftTree([1, 2], [-1, 0], [q, q], [HEAD, Source("head", branch=1)])
    planner = Planner(greedy=True)
    planner.counts[key(HEAD, 1)] = [9.0, 10.0]  # the first choice at depth 1: (9 + 1) / 12
    assert planner.path_values(tree)[1] / planner.path_values(tree)[0] == pytest.approx(10 / 12 * 0.5)


def test_a_model_draft_beside_a_reliable_retrieval_chain_drafts_nothing():
    """Beside a 4-token retrieval chain accepted 95 % of the time, a head accepted 60 % whose step
    costs 0.1 target steps drafts nothing (its tokens would rank last and not pay their drafting);
    with nothing beside it, it drafts."""
    planner = Planner(greedy=False, c=0.1, v=lambda n: 0.7 + 0.3 * n)
    for depth in range(1, 9):
        planner.counts[key(LOOKUP, depth)] = [95.0, 100.0]
        planner.counts[key(HEAD, depth)] = [60.0, 100.0]
    assert planner.depth(HEAD, 8, offered=CHAIN) == 0
    assert planner.depth(HEAD, 8) >= 1


def test_a_pruned_source_is_tried_again_later():
    """Counts of a source offered but not sent shrink towards the prior, until it is sent again."""
    planner = _planner_with(0.1, reached=10)
    rounds = 0
    while not len(planner.prune(CHAIN)):
        planner.observe(CHAIN, DraftTree(), [])
        rounds += 1
        assert rounds < 100
    assert rounds > 1


def test_model_drafts_choose_k_before_drafting():
    """A draft call as costly as a target step never pays (K = 0); a cheap one with a good record does."""
    costly, cheap = Planner(greedy=True, c=1.0), Planner(greedy=True, c=0.05)
    for planner in (costly, cheap):
        for depth in range(1, 9):
            planner.counts[key(HEAD, depth)] = [45.0, 50.0]
    assert costly.depth(HEAD, 8) == 0
    assert cheap.depth(HEAD, 8) >= 2


def test_small_models_plan_with_the_prior_and_real_ones_with_their_profile(monkeypatch):
    """Tiny test models get PRIOR_V (v(1) = 1, linear between its points); a model of real size gets
    the cost profile costs.py measures for it."""
    assert PRIOR_V(1) == 1.0 and PRIOR_V(3) == pytest.approx((1.41 + 1.48) / 2)
    tiny = tiny_random(vocab_size=32, layers=1)
    assert verify_cost(tiny) is PRIOR_V
    measured = object()
    monkeypatch.setattr("specviz.pricing.costs.profile", lambda model: measured)
    monkeypatch.setattr(tiny, "n_params", PROFILE_MIN_PARAMS)
    assert verify_cost(tiny) is measured


def test_planned_greedy_runs_stay_lossless():
    """With the planner choosing what to send, every method still gives HF's greedy tokens, and
    the planner did send drafts (some accepted) and cut some: a planner that sends nothing, or no
    planner at all, fails this."""
    target = tiny_random(vocab_size=48, layers=3, seed=4)
    draft = derive_draft(target, noise=0.2, seed=5, layers=1)
    cut = 0
    for method in ("draft", "pld", "logitspec"):
        sent = accepted = 0
        for prompt in PROMPTS:
            # The draft model declared cheap (c = 0.05): at its true cost here (0.37 target steps,
            # its embeddings as big as the target's) the planner rightly never drafts with it,
            # and its runs would be plain decoding.
            given = dict(proposer=_proposer((target, draft))) if method == "draft" else dict(method=method)
            run = specviz.generate(target, prompt * 3, **given, k=4, max_new_tokens=30, chat=False)
            assert run.token_ids == hf_greedy(target, prompt * 3, 30)
            sent += sum(len(c.nodes) for c in run.cycles)
            accepted += sum(len(c.accepted) for c in run.cycles)
            cut += sum(c.offered - len(c.nodes) for c in run.cycles)
        assert sent > 0 and accepted > 0, (method, sent, accepted)
    assert cut > 0  # the planner chose: some offered nodes were not sent


# -- exactness under sampling, with its twin -----------------------------------------------------------
VOCAB, PROMPT, N, ALPHA = 6, [1, 2, 3], 2500, 1e-4  # N: the peeking twin fails at p ≈ 1e-6 (measured)


@pytest.fixture(scope="module")
def sampling_models():
    """A peaked tiny target (top-p 0.9 cuts tokens) and a noisy draft of it that accepts about half."""
    target = tiny_random(vocab_size=VOCAB, hidden_size=32, layers=2, heads=2, kv_heads=1, intermediate=64, seed=1)
    with torch.no_grad():
        target.model.lm_head.weight.mul_(10)
    return target, derive_draft(target, noise=1.0, seed=2)


def _proposer(models):
    """The draft model, declared cheap (c = 0.05 target steps) so that the planner drafts with it."""
    proposer = DraftModelProposer.build(*models)
    proposer.call_cost = 0.05
    return proposer


def _p_value(models) -> tuple[float, int, int]:
    """χ² p-value of the planned runs' tokens 2–4 against the target's exact joint, the draft
    positions the planner chose not to send, and the draft nodes it sent."""
    target = models[0]
    counts, cut, sent = np.zeros((VOCAB,) * 3), 0, 0
    for seed in range(N):
        decoder = Decoder(target, PROMPT, proposer=_proposer(models), k=6, temperature=0.7,
                          top_p=0.9, seed=seed, max_new_tokens=4, chat=False, record=False)
        run = decoder.run()
        counts[tuple(run.token_ids[1:])] += 1
        cut += sum(c.k - len(c.nodes) for c in run.cycles)  # K chosen below the limit, or nodes cut
        sent += sum(len(c.nodes) for c in run.cycles)
    exact = exact_joint(target.model, PROMPT, 4, 0.7, 0.9).sum(axis=0)
    return chi_square_p_value(counts.ravel(), exact.ravel() * N), cut, sent


def test_planned_sampling_follows_the_target(sampling_models):
    """At T = 0.7, top-p 0.9, with the planner choosing K and cutting drafts, the output is exact."""
    p, cut, sent = _p_value(sampling_models)
    assert cut > 0 and sent > N
    assert p > ALPHA


def test_a_planner_that_peeks_at_the_draw_is_caught(sampling_models, monkeypatch):
    """A planner that sends a sampled node only when it happens to be q's most likely token biases the
    output, and the same check rejects it: the planner must decide without looking at the drafts."""
    def peeking(self, tree):
        keep = []
        for i in range(len(tree)):
            q = tree.q_of(i)
            if (tree.parents[i] < 0 or tree.parents[i] in keep) and tree.tokens[i] == int(q.argmax()):
                keep.append(i)
        return tree.subset(keep)

    monkeypatch.setattr(Planner, "prune", peeking)
    p, _, sent = _p_value(sampling_models)
    assert sent > 0
    assert p < ALPHA


def test_each_method_gets_its_own_default_k():
    """Without k, prompt lookup and LogitSpec may draft 16 tokens and model drafts 8; a given k wins."""
    target = tiny_random(vocab_size=48, layers=2, seed=4)
    draft = derive_draft(target, layers=1)
    assert Decoder(target, PROMPTS[0], method="pld", chat=False).k == 16
    assert Decoder(target, PROMPTS[0], method="logitspec", chat=False).k == 16
    assert Decoder(target, PROMPTS[0], method="draft", draft=draft, chat=False).k == 8
    assert Decoder(target, PROMPTS[0], method="pld", k=3, chat=False).k == 3


# -- the prices a run started with travel in its state ----------------------------------------------
CHEAP = CostProfile(model="m", device="cpu", dtype="float32", prefix_len=200, pass_s=0.05,
                    v={1: 1.0, 2: 1.05, 4: 1.1, 8: 1.2, 16: 1.5})
DEAR = CostProfile(model="m", device="cpu", dtype="float32", prefix_len=200, pass_s=0.05,
                   v={1: 1.0, 2: 1.9, 4: 3.0, 8: 5.0, 16: 9.0})


def test_a_resumed_planner_prices_as_the_run_started():
    """A planner set from a state keeps that state's v(n) and c, not those of the process it resumes
    in (a ZeroGPU worker, or a process that timed its passes again since): v at every size and c equal
    the first planner's, so the same counts send the same draft."""
    first = Planner(greedy=True, v=CHEAP, c=0.1)
    first.counts[key(LOOKUP, 1)] = [30.0, 50.0]
    later = Planner(greedy=True, v=DEAR, c=0.7)
    later.set_state(first.state())
    assert [later.v(n) for n in range(1, 40)] == [first.v(n) for n in range(1, 40)]
    assert later.c == first.c == 0.1
    assert later.prune(CHAIN).tokens == first.prune(CHAIN).tokens
    assert Planner(greedy=True, v=DEAR).prune(CHAIN).tokens != first.prune(CHAIN).tokens  # the prices matter here


def test_a_state_without_prices_keeps_this_process_prices():
    """A state saved before prices travelled (counts only) leaves the resuming planner's own v and c."""
    later = Planner(greedy=True, v=DEAR, c=0.7)
    later.set_state({"counts": {key(LOOKUP, 1): [1.0, 2.0]}})
    assert later.v(4) == DEAR(4) and later.c == 0.7 and later.counts == {key(LOOKUP, 1): [1.0, 2.0]}


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_a_run_resumed_after_its_prices_changed_goes_on_draw_for_draw(monkeypatch, temperature):
    """A sampled (and a greedy) run resumed every cycle while this process's v(n) changes under it (as
    when a profile is timed again, or a forked worker times its own) gives every token and draw of the
    same run uninterrupted: the prices travel in the run's state. Failed before they did."""
    target = tiny_random(vocab_size=32, layers=2, seed=0)
    kw = dict(method="pld", k=4, temperature=temperature, seed=5, max_new_tokens=24, chat=False)
    monkeypatch.setattr("specviz.decoding.engine.verify_cost", lambda t: CHEAP)
    start = Decoder(target, [4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6], **kw).state()
    straight = Decoder.resume(target, pickle.loads(pickle.dumps(start))).run()
    monkeypatch.setattr("specviz.decoding.engine.verify_cost", lambda t: DEAR)  # a dear pass: send less
    state = start
    while not state.done:
        decoder = Decoder.resume(target, pickle.loads(pickle.dumps(state.light())))
        decoder.step()
        state = state.merge(decoder.state())
    assert sum(len(c.nodes) for c in straight.cycles) > 0  # drafts were sent, so prices decided something
    assert state.ids[len(state.prompt_ids):] == straight.token_ids
    assert [[(n.token, n.status, n.r) for n in c.nodes] for c in state.cycles] == \
        [[(n.token, n.status, n.r) for n in c.nodes] for c in straight.cycles]
