"""Retrieval proposers (prompt lookup, LogitSpec) and their shared n-gram index, on hand-made ids."""
import types

import pytest
import torch

import specviz
from specviz.drafting.sampling import Sampling
from specviz.drafting.tree import Source
from specviz.proposers import make_proposer
from specviz.proposers.base import ProposeContext
from specviz.proposers.logitspec import LogitSpecProposer, branch_lengths, merge_branches
from specviz.proposers.ngram_index import NgramIndex
from specviz.proposers.prompt_lookup import PromptLookupProposer
from tests.helpers.tiny import PROMPTS, hf_greedy, pair

PHRASE = [10, 11, 12, 13, 14, 15]
IDS = [1, 2] + PHRASE + [3, 4, 5] + PHRASE[:3]  # the phrase's start repeats at the end
VOCAB = 64
PAPER = dict(min_ngram=1, lone_cands=True, scaled_len=False)  # keep every candidate, as the paper does


def ctx(ids, logits=None, k=8):
    logits = torch.zeros(VOCAB) if logits is None else logits
    return ProposeContext(list(ids), logits, k, Sampling(0.0), 2)


def logits_ranking(order):
    """Logits whose descending order starts with `order`."""
    out = torch.zeros(VOCAB)
    for rank, tok in enumerate(order):
        out[tok] = 100.0 - rank
    return out


def cycle(n_nodes, n_accepted):
    return types.SimpleNamespace(nodes=list(range(n_nodes)), accepted=list(range(n_accepted)))


# -- the n-gram index ------------------------------------------------------------------------
def test_index_finds_latest_earlier_occurrence():
    """A repeated n-gram maps to the position after its latest occurrence, never to the end itself."""
    index = NgramIndex(1, 3)
    ids = [7, 8, 9, 1, 7, 8, 9, 2, 7, 8, 9]
    index.update(ids)
    assert index.lookup([]) == (7, 3)  # [7, 8, 9] last seen before position 7 (token 2)
    assert index.continuation(7, 3) == [2, 7, 8]
    assert index.find((9, 5)) is None
    index.update(ids + [4])
    assert index.lookup([]) is None  # [9, 4], [4] and [8, 9, 4] never occurred before


def test_index_update_is_incremental():
    """Appending one token inserts only the n-grams that end before it (≤ max_n), however long the text."""
    index = NgramIndex(1, 3)
    index.update(list(range(500)))
    before = index.updates
    index.update(list(range(500)) + [3])
    assert index.updates - before == 3  # the 1-, 2- and 3-gram ending at token 499
    assert index.lookup([]) == (4, 1)  # [3] was followed by 4 at position 4


def test_index_continues_a_loop_periodically():
    """Reading past the end of the text keeps copying: a loop A B C A B C continues A B C A."""
    index = NgramIndex(1, 3)
    index.update([5, 1, 2, 3, 1, 2, 3])
    pos, n = index.lookup([])
    assert n == 3 and index.continuation(pos, 7) == [1, 2, 3, 1, 2, 3, 1]


def test_index_lookup_with_tail():
    """A query extended by a hypothetical token matches committed + tail and continues after it."""
    index = NgramIndex(1, 3)
    index.update([4, 5, 6, 7, 8, 4, 5])
    assert index.lookup([6]) == (3, 3)
    assert index.continuation(3, 3, tail=[6]) == [7, 8, 4]


# -- prompt lookup ---------------------------------------------------------------------------
def test_pld_copies_what_followed_the_match():
    """The last 3 tokens occurred earlier: the draft is what followed them, cut to num_tokens and K."""
    pld = PromptLookupProposer(num_tokens=4, max_ngram=3)
    pld.start(IDS)
    tree = pld.propose(ctx(IDS, k=8))
    assert tree.is_chain and tree.tokens == PHRASE[3:] + [3]
    assert tree.retrieval_hit and tree.sources[0] == Source("lookup", ngram=3) and tree.q is None
    assert pld.propose(ctx(IDS, k=2)).tokens == PHRASE[3:5]


def test_pld_keeps_its_copy_uncut():
    """A chain cut at K keeps its whole copy, to num_tokens, as `uncut`: the draft at K is its first K
    tokens, and the draft a deeper K sends from the same match is its first K' (what the model of
    speed rebuilds a draft from); a scaled match's copy stops at its own length (2**n)."""
    pld = PromptLookupProposer(num_tokens=6, max_ngram=3)
    pld.start(IDS)
    short, deep = pld.propose(ctx(IDS, k=2)), pld.propose(ctx(IDS, k=6))
    assert short.uncut == deep.uncut == [deep.tokens] and short.tokens == deep.tokens[:2] and len(deep.tokens) == 6
    assert short.uncut_cap is None
    scaled = PromptLookupProposer(num_tokens=16, max_ngram=2, scaled_len=True)  # a 2-gram match copies 4
    scaled.start(IDS)
    assert len(scaled.propose(ctx(IDS, k=1)).uncut[0]) == 4


def test_pld_no_match_is_an_empty_draft():
    """Without any earlier occurrence of the last token, PLD proposes nothing (a plain step)."""
    pld = PromptLookupProposer()
    ids = list(range(20))
    pld.start(ids)
    tree = pld.propose(ctx(ids))
    assert len(tree) == 0 and tree.retrieval_hit is False


def test_pld_backs_off_after_repeated_misses():
    """After 2 complete misses PLD skips 1 cycle, then 2, then 4; an accepted token resets it."""
    pld = PromptLookupProposer(adaptive=True)  # off by default since the planner decides
    patience = pld.backoff.patience
    pld.start(IDS)
    drafted = []
    for _ in range(patience + 1 + 1 + 2 + 1 + 4):
        tree = pld.propose(ctx(IDS))
        drafted.append(len(tree) > 0)
        pld.observe(cycle(len(tree), 0))  # every draft misses
    assert drafted == [True] * patience + [False] + [True] + [False] * 2 + [True] + [False] * 4
    assert pld.propose(ctx(IDS)).tokens
    pld.observe(cycle(3, 1))  # one accepted token: back to proposing every cycle
    assert pld.backoff.skip == 0 and pld.backoff.next_skip == 1


def test_pld_rejects_unknown_knobs():
    """A misspelt option fails fast and names the option."""
    with pytest.raises(ValueError, match="num_token"):
        make_proposer("pld", None, num_token=3)


# -- LogitSpec -------------------------------------------------------------------------------
def test_logitspec_candidates_are_topk_without_root():
    """Candidates are the top-k of the last logits in rank order, with the root (ids[-1]) left out."""
    ls = LogitSpecProposer(top_k=3)
    root = IDS[-1]
    logits = logits_ranking([root, 40, 41, 42, 43])
    assert ls.candidates(logits, root) == [(40, 2), (41, 3), (42, 4)]
    assert ls.candidates(logits_ranking([40, root, 41, 42]), root) == [(40, 1), (41, 3), (42, 4)]


def test_logitspec_dual_retrieval():
    """Branch 0 continues [context, root]; a candidate's branch is [cand] + continuation of [context, cand]."""
    ls = LogitSpecProposer(top_k=2, branch_len=4, decay=1.0, capacity=64, **PAPER)
    ids = [20, 21, 22, 23, 30, 31, 32, 33, 1, 21, 22]  # root 22; 22 → 23; 1-gram 31 → 32
    ls.start(ids)
    tree = ls.propose(ctx(ids, logits_ranking([22, 31, 50])))
    paths = {tuple(tree.tokens[j] for j in tree.ancestors(i)) for i in range(len(tree)) if not tree.children(i)}
    assert (23, 30, 31, 32) in paths  # continuation of [.., 21, 22]
    assert (31, 32, 33, 1) in paths  # cand 31, then what followed 31
    assert (50,) in paths  # a candidate without retrieval stays a lone next-next guess
    assert tree.retrieval_hit and tree.sources[0] == Source("root", ngram=2)
    first_level = {tree.tokens[i]: tree.sources[i] for i in tree.children(-1)}
    assert first_level[31] == Source("candidate", branch=1, rank=2)
    assert first_level[50] == Source("candidate", branch=2, rank=3)


def test_logitspec_min_ngram_2_keeps_only_backed_candidates():
    """With min_ngram = 2 a candidate rides only if [root, cand] occurred before, and a context with
    no match of 2+ tokens gets no draft at all. (The CPU default is now 1: the planner cuts.)"""
    ls = LogitSpecProposer.build(None, min_ngram=2)
    ids = [20, 21, 22, 23, 30, 22, 31, 32, 5, 21, 22]  # root 22: [21, 22] → 23; [22, 31] seen
    ls.start(ids)
    tree = ls.propose(ctx(ids, logits_ranking([22, 40, 31, 41])))
    first_level = {tree.tokens[i]: tree.sources[i] for i in tree.children(-1)}
    assert set(first_level) == {23, 31}  # 40 and 41 are unbacked guesses
    assert first_level[31] == Source("candidate", branch=2, rank=3)
    lone = [7, 8, 9, 22]  # 22 never occurred before, nor did [22, cand]
    ls.start(lone)
    assert len(ls.propose(ctx(lone, logits_ranking([22, 40, 7])))) == 0


def test_logitspec_defaults_follow_the_device():
    """On a GPU target the paper's sizes apply (top 64, 64 nodes); on a CPU the measured small ones."""
    gpu = LogitSpecProposer.build(types.SimpleNamespace(device=torch.device("cuda")))
    cpu = LogitSpecProposer.build(types.SimpleNamespace(device=torch.device("cpu")), capacity=5)
    assert (gpu.top_k, gpu.capacity, gpu.lone_cands) == (64, 64, True)
    assert (cpu.top_k, cpu.capacity, cpu.lone_cands) == (4, 5, False)


def test_logitspec_tree_respects_capacity_and_is_a_trie():
    """The tree never exceeds `capacity`, siblings never repeat a token, and parents come first."""
    ids = [int(x) for x in torch.randint(0, 12, (300,), generator=torch.Generator().manual_seed(0))]
    for capacity in (1, 5, 16, 64):
        ls = LogitSpecProposer(top_k=10, capacity=capacity, branch_len=8, **PAPER)
        ls.start(ids)
        tree = ls.propose(ctx(ids, torch.randn(VOCAB, generator=torch.Generator().manual_seed(1)), k=8))
        assert 0 < len(tree) <= capacity
        siblings = [(tree.parents[i], tree.tokens[i]) for i in range(len(tree))]
        assert len(set(siblings)) == len(siblings)
        assert all(p < i for i, p in enumerate(tree.parents))
        assert max(tree.depths) <= 8


def test_logitspec_keeps_its_branches_uncut_and_they_rebuild_its_tree_at_every_k():
    """The branches kept uncut, each cut at K and merged under the kept cap, give the very tree the
    proposer sends at that K, for every K from 1 to 20 and every cap: what the model of speed rebuilds
    a LogitSpec draft at another K from (measure/rebuilt.py)."""
    from specviz.measure.rebuilt import tree_at
    ids = [int(x) for x in torch.randint(0, 12, (300,), generator=torch.Generator().manual_seed(0))]
    logits = torch.randn(VOCAB, generator=torch.Generator().manual_seed(1))
    for capacity in (5, 16, 64):
        ls = LogitSpecProposer(top_k=6, capacity=capacity, branch_len=16, **PAPER)
        ls.start(ids)
        uncut = ls.propose(ctx(ids, logits, k=1))
        assert uncut.uncut_cap == capacity and len(uncut.uncut) > 1 and max(map(len, uncut.uncut)) == 16
        for k in range(1, 21):
            sent, rebuilt = ls.propose(ctx(ids, logits, k=k)), tree_at(uncut, k)
            assert (rebuilt.tokens, rebuilt.parents) == (sent.tokens, sent.parents) and sent.uncut == uncut.uncut


def test_logitspec_pruning_favours_high_ranks():
    """Branch lengths never grow with rank; merging keeps the first branches whole under a tight cap."""
    lengths = branch_lengths(6, 8, 0.5)
    assert lengths[0] == 8 and lengths == sorted(lengths, reverse=True) and lengths[-1] >= 1
    tree = merge_branches([([1, 2, 3], ["a"] * 3), ([1, 2, 4], ["b"] * 3), ([5, 6], ["c"] * 2)], 4)
    assert tree.tokens == [1, 2, 3, 4] and tree.parents == [-1, 0, 1, 1]


def test_logitspec_pool_update_is_incremental():
    """Each proposal indexes only the newly committed tokens (at most max_ngram insertions per token)."""
    ids = list(range(2, 400))
    ls = LogitSpecProposer()
    ls.start(ids)
    before = ls.index.updates
    ls.propose(ctx(ids + [7, 8], torch.zeros(VOCAB * 8)))
    assert ls.index.updates - before <= 2 * 3


def test_logitspec_rejects_unknown_knobs():
    """A misspelt option fails fast and names the option."""
    with pytest.raises(ValueError, match="topk"):
        make_proposer("logitspec", None, topk=4)


# -- end to end on a tiny random model -------------------------------------------------------
N = 32


@pytest.fixture(scope="module")
def tiny_refs():
    """A tiny target and its greedy reference per prompt (one looping prompt so lookups hit)."""
    target = pair(vocab=32)[0]
    prompts = PROMPTS + [[5, 6, 7, 8, 5, 6, 7, 8, 5, 6]]
    return target, [(p, hf_greedy(target, p, N)) for p in prompts]


VARIANTS = [("pld", {}), ("pld", {"num_tokens": 2, "max_ngram": 1, "min_ngram": 1}),
            ("logitspec", {}), ("logitspec", {"top_k": 3, "capacity": 6, **PAPER})]


@pytest.mark.parametrize("method,knobs", VARIANTS)
def test_retrieval_greedy_is_lossless(tiny_refs, method, knobs):
    """Greedy decoding with either retrieval proposer equals transformers' greedy output, and drafts get accepted."""
    target, refs = tiny_refs
    accepted = 0
    for prompt, ref in refs:
        run = specviz.generate(target, prompt, method=method, k=6, max_new_tokens=N, chat=False,
                               record=False, **knobs)
        assert run.token_ids == ref
        assert run.metrics["retrieval_success"] is not None  # counted even when nodes are not recorded
        accepted += run.metrics["accepted_tokens"]
    assert accepted > 0


@pytest.mark.parametrize("method", ["pld", "logitspec", "layerskip", "draft", "hybrid", "suffix"])
def test_an_unknown_option_names_the_ones_the_method_takes(method):
    """One option check for every proposer: an unknown option is refused, naming what it takes."""
    from specviz.proposers import make_proposer

    target, draft = pair()
    with pytest.raises(ValueError, match=rf"method '{method}' has no option bogus; it takes"):
        make_proposer(method, target, draft if method == "draft" else None, bogus=1)


def test_runs_on_one_target_and_layers_share_one_layer_skip_shell():
    """Layer-skip proposers built for the same target and layers share one shell (so one fast
    forward and one round of batched draft steps, not one per run); other layers get their own;
    after the target's LM head is replaced, the next proposer gets a new shell that uses it."""
    from specviz.loading.loader import tiny_random
    from specviz.proposers.layer_skip import LayerSkipProposer

    target = tiny_random(family="llama", layers=4, seed=7)
    first, second = (LayerSkipProposer.build(target, layers=[0, 1, 3]) for _ in range(2))
    other = LayerSkipProposer.build(target, layers=[0, 3])
    assert first.model is second.model
    assert other.model is not first.model
    config = target.model.config
    target.model.set_output_embeddings(torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False))
    renewed = LayerSkipProposer.build(target, layers=[0, 1, 3])
    assert renewed.model is not first.model
    assert renewed.model.get_output_embeddings() is target.model.get_output_embeddings()
