"""Greedy speculative decoding must reproduce plain greedy decoding token for token."""
import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from tests.helpers.drafts import drafted
from tests.helpers.tiny import PROMPTS, FixedTreeProposer, hf_greedy, pair

N = 24


@pytest.fixture(scope="module")
def tiny():
    return pair(noise=0.3)


def test_ar_equals_hf_generate(tiny):
    """Our plain AR loop gives exactly what transformers' generate(do_sample=False) gives."""
    target, _ = tiny
    for prompt in PROMPTS:
        run = specviz.generate(target, prompt, method="ar", max_new_tokens=N, chat=False)
        assert run.token_ids == hf_greedy(target, prompt, N)
        assert len(run.cycles) == N - 1  # the prefill commits the first token


@pytest.mark.drafts
@pytest.mark.parametrize("k", [1, 2, 4, 7])
def test_draft_greedy_is_lossless(tiny, k):
    """A draft model at any K gives the target's greedy tokens exactly, and some drafts get accepted."""
    target, draft = tiny
    accepted = 0
    for prompt in PROMPTS:
        run = specviz.generate(target, prompt, method="draft", draft=draft, k=k, max_new_tokens=N, chat=False,
                               plan=False)
        assert run.token_ids == hf_greedy(target, prompt, N)
        accepted += run.metrics["accepted_tokens"]
    assert accepted > 0


@pytest.mark.drafts
@pytest.mark.parametrize("layers", [[0], [0, 1]])
def test_layerskip_greedy_is_lossless(layers):
    """Layer-skip self-drafting (first layer only, and all layers) is lossless under greedy, with drafts sent."""
    target = pair()[0]
    for prompt in PROMPTS:
        run = specviz.generate(target, prompt, method="layerskip", k=3, layers=layers,
                               max_new_tokens=N, chat=False, plan=False)
        assert run.token_ids == hf_greedy(target, prompt, N)
        assert drafted(run) > 0
    if layers == [0, 1]:  # the full stack is the target itself: every draft is accepted
        assert run.metrics["acceptance_rate"] == 1.0


@pytest.mark.drafts
@pytest.mark.parametrize("depth,branching", [(1, 1), (2, 3), (4, 2), (6, 4)])
def test_tree_greedy_is_lossless(tiny, depth, branching):
    """Verifying random trees (one pass, tree mask, cache gather) keeps greedy output exact."""
    target, _ = tiny
    for prompt in PROMPTS:
        proposer = FixedTreeProposer(depth, branching, vocab=target.vocab_size, seed=depth)
        run = specviz.generate(target, prompt, proposer=proposer, k=depth, max_new_tokens=N, chat=False, plan=False)
        assert run.token_ids == hf_greedy(target, prompt, N)
        assert drafted(run) > 0


@pytest.mark.drafts
def test_caches_hold_committed_tokens_after_rejection(tiny):
    """After every cycle both caches cover only committed tokens, and the next logits match a fresh pass."""
    target, draft = tiny
    dec = Decoder(target, PROMPTS[2], method="draft", draft=draft, k=5, max_new_tokens=N, chat=False, plan=False)
    rejections = 0
    for cycle in dec:
        rejections += cycle.rejected is not None
        assert cycle.cache_after["target"] == len(dec.ids) - 1
        assert cycle.cache_after["draft"] <= len(dec.ids) - 1
        with torch.inference_mode():
            fresh = target.model(torch.tensor([dec.ids[:-1]])).logits[0, -1]
            draft_len = dec.proposer.cache_len()
            fresh_keys = draft.model(torch.tensor([dec.ids[:draft_len]]), use_cache=True).past_key_values
        assert torch.allclose(dec.last_logits, fresh, atol=1e-4)
        assert torch.allclose(dec.proposer.cache.layers[0].keys, fresh_keys.layers[0].keys, atol=1e-4)
    assert rejections > 0


@pytest.mark.drafts
def test_tree_cache_keeps_only_accepted_path(tiny):
    """After a partial acceptance in a tree, the target cache equals a fresh pass over the committed tokens."""
    target, _ = tiny
    dec = Decoder(target, PROMPTS[0], proposer=FixedTreeProposer(4, 3, vocab=32, seed=1), k=4,
                  max_new_tokens=N, chat=False, plan=False)
    partial = 0
    for cycle in dec:
        partial += 0 < len(cycle.accepted) and cycle.rejected is not None
        with torch.inference_mode():
            fresh = target.model(torch.tensor([dec.ids[:-1]]), use_cache=True)
        assert torch.allclose(dec.last_logits, fresh.logits[0, -1], atol=1e-4)
        assert torch.allclose(dec.cache.layers[1].values, fresh.past_key_values.layers[1].values, atol=1e-4)
    assert partial > 0


@pytest.mark.drafts
def test_eos_stops_and_budget_is_exact(tiny):
    """With a draft model's drafts sent (plan=False: a same-size twin costs as much as the target, so
    the planner would send none), decoding stops right after an end-of-sequence token, and never
    exceeds max_new_tokens, however many tokens a cycle could accept."""
    target, draft = tiny
    ref = specviz.generate(target, PROMPTS[0], method="ar", max_new_tokens=N, chat=False).token_ids
    eos = ref[10]
    target.eos_ids = {eos}
    try:
        run = specviz.generate(target, PROMPTS[0], method="draft", draft=draft, k=6, max_new_tokens=N, chat=False,
                               plan=False)
        assert run.token_ids == ref[: ref.index(eos) + 1]
        assert drafted(run) > 0
    finally:
        target.eos_ids = set()
    for k in (1, 3, 8):
        run = specviz.generate(target, PROMPTS[1], method="draft", draft=draft, k=k, max_new_tokens=7, chat=False,
                               plan=False)
        assert len(run.token_ids) == 7
        assert drafted(run) > 0


@pytest.mark.drafts
def test_suffix_greedy_is_lossless(tiny):
    """Suffix decoding, its store holding earlier runs on the same prompts (each prompt decoded
    twice), gives the target's greedy tokens exactly, and some drafts get accepted."""
    target, _ = tiny
    accepted = 0
    for prompt in PROMPTS:
        for _ in range(2):
            run = specviz.generate(target, prompt, method="suffix", max_new_tokens=N, chat=False, plan=False)
            assert run.token_ids == hf_greedy(target, prompt, N)
            accepted += run.metrics["accepted_tokens"]
    assert accepted > 0
