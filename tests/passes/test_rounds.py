"""Model drafts taken together (passes/rounds.py): the draft head's and a draft model's calls of
runs drafting at the same moment run as one batch, and each run gets its own call back.

On tiny random models: batched calls equal solo calls (to float rounding), caches included; a
call alone is the plain call bit for bit; a failed shared draft pass puts the caches back; greedy
runs drafting together give their solo tokens. Exactness of sampled runs with shared drafts is
in test_exactness.py.
"""
from __future__ import annotations

import threading

import pytest
import torch

from specviz.decoding.engine import Decoder
from specviz.decoding.targets import BatchedTarget
from specviz.loading.loader import derive_draft
from specviz.models.families import tiny_random
from specviz.passes import ragged
from specviz.passes.kvcache import cache_len, new_cache
from specviz.proposers.draft_model import DraftModelProposer, _plain, shared_calls
from specviz.proposers.head import HeadProposer
from specviz.training.head_fit import new_head
from tests.helpers.tiny import PROMPTS, Gathered, run_together


def _at_once(fn, args: list) -> list:
    """fn(*a) for each a, each in its own thread, started together; the results in order."""
    out = [None] * len(args)

    def go(i):
        try:
            out[i] = fn(*args[i])
        except Exception as e:  # noqa: BLE001 -- the test looks at what each thread got
            out[i] = e

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(args))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return out


def _head(target):
    return HeadProposer(new_head(target.model, torch.arange(20), seed=0, intermediate=32), target.model)


def test_head_calls_taken_together_give_each_run_its_own_call():
    """Four runs' head calls gathered into one batch give each run the predicted hidden state and
    the subset logits its own call gives, and the round answered all four together."""
    target = tiny_random(family="llama", seed=11)
    calls = _head(target).calls
    d = calls.head.cfg.hidden
    rows = [(torch.randn(d, generator=torch.Generator().manual_seed(i)), 3 + i) for i in range(4)]
    _check_one_round(calls, rows)


def _check_one_round(calls, requests) -> None:
    """The head calls `requests` ((f, x) rows or (F, xs) frontiers), gathered into one round, each
    get what their own call gives: the predicted hidden states and subset logits, shapes included."""
    with torch.inference_mode():
        solo = [calls.one(f, x) if f.dim() == 1 else calls.many(f, x) for f, x in requests]
    gathered = Gathered([calls.rounds], len(requests))
    try:
        answers = _at_once(lambda f, x: calls.rounds.submit((f, x)), requests)
    finally:
        gathered.close()
    assert calls.rounds.most_shared == len(requests) and calls.rounds.shared_passes == 1
    for (want_pred, want_logits), got in zip(solo, answers):
        assert not isinstance(got, Exception), got
        assert got[0].shape == want_pred.shape and got[1].shape == want_logits.shape
        assert torch.allclose(got[0], want_pred, atol=1e-5) and torch.allclose(got[1], want_logits, atol=1e-5)


def test_a_trees_frontier_and_a_chain_call_share_a_round():
    """A greedy head tree sends its frontier as one request of several rows; gathered with two
    one-row chain calls, the round answers all three, 5 rows in one batch, and each request gets
    the rows its own call gives (a frontier's rows in order)."""
    target = tiny_random(family="llama", seed=15)
    calls = _head(target).calls
    d = calls.head.cfg.hidden
    gen = torch.Generator().manual_seed(5)
    requests = [(torch.randn(d, generator=gen), 4), (torch.randn(3, d, generator=gen), [1, 2, 3]),
                (torch.randn(d, generator=gen), 7)]
    _check_one_round(calls, requests)


def test_every_run_on_one_head_meets_in_the_same_rounds():
    """Two proposers built on the same head and target share one set of rounds (and one subset LM
    head); another head gets its own."""
    target = tiny_random(family="llama", seed=12)
    head = new_head(target.model, torch.arange(20), seed=0, intermediate=32)
    a, b = HeadProposer(head, target.model), HeadProposer(head, target.model)
    other = _head(target)
    assert a.calls is b.calls and a.calls.w is b.calls.w
    assert other.calls is not a.calls


FAMILIES = [("llama", {}), ("gemma3", dict(window=4, layers=4)), ("gpt2", {})]


@pytest.mark.parametrize("family,kw", FAMILIES, ids=[f for f, _ in FAMILIES])
def test_draft_calls_taken_together_give_each_run_its_own_call(family, kw):
    """Three runs' draft-model calls over caches of different lengths (one empty, catching up on a
    whole prompt) in one ragged pass give each run the last-row logits and the cache its own call
    gives, sliding windows included."""
    model = tiny_random(family=family, seed=13, **kw).model
    calls = shared_calls(model)
    assert calls is not None
    solo_caches, shared_caches, feeds = [], [], []
    for i, prompt in enumerate(PROMPTS):
        a, b = new_cache(), new_cache()
        if i:  # the first run has an empty cache and feeds its whole prompt
            for cache in (a, b):
                _plain(model, cache, prompt[:-1])
        solo_caches.append(a)
        shared_caches.append(b)
        feeds.append(prompt if i == 0 else prompt[-1:])
    with torch.inference_mode():
        solo = [_plain(model, c, f) for c, f in zip(solo_caches, feeds)]
    gathered = Gathered([calls.rounds], 3)
    before = calls.rounds.shared_passes
    try:
        answers = _at_once(lambda c, f: calls.rounds.submit((c, f)), list(zip(shared_caches, feeds)))
    finally:
        gathered.close()
    assert calls.rounds.shared_passes == before + 1
    for want, got, a, b in zip(solo, answers, solo_caches, shared_caches):
        assert not isinstance(got, Exception), got
        assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
        assert cache_len(a) == cache_len(b)
        for la, lb in zip(a.layers, b.layers):
            assert torch.allclose(la.keys, lb.keys, atol=1e-5) and torch.allclose(la.values, lb.values, atol=1e-5)


def test_a_draft_call_alone_is_the_plain_call_bit_for_bit():
    """With nobody else drafting, a call taken 'together' runs at once and alone: the head's and
    the draft model's logits equal the plain call's exactly."""
    target = tiny_random(family="llama", seed=14)
    calls = _head(target).calls
    f = torch.randn(calls.head.cfg.hidden)
    with torch.inference_mode():
        assert torch.equal(calls.rounds.submit((f, 5))[1], calls.one(f, 5)[1])
        model = derive_draft(target, noise=0.3, seed=1).model
        caches = [new_cache(), new_cache()]
        plain = _plain(model, caches[0], PROMPTS[0])
        alone = shared_calls(model).rounds.submit((caches[1], PROMPTS[0]))
    assert torch.equal(alone, plain)


def test_a_failed_shared_draft_pass_puts_the_caches_back_and_calls_each_alone(monkeypatch):
    """When the ragged draft pass raises after writing into the caches, each cache is cut back and
    each run gets its own plain call: the logits and cache length of a call on a fresh copy."""
    model = tiny_random(family="llama", seed=15).model

    def broken(m, rows, *args, **kw):
        for row in rows:
            k = torch.zeros(1, 2, len(row.tokens), 16)
            row.cache.update(k, k, 0)
        raise RuntimeError("out of memory")

    monkeypatch.setattr(ragged, "forward", broken)
    calls = shared_calls(model)
    caches, lengths = [], []
    for p in PROMPTS:
        c = new_cache()
        _plain(model, c, p[:-1])
        caches.append(c)
        lengths.append(cache_len(c))
    gathered = Gathered([calls.rounds], 3)
    try:
        got = _at_once(lambda c, t: calls.rounds.submit((c, t)), [(c, p[-1:]) for c, p in zip(caches, PROMPTS)])
    finally:
        gathered.close()
    for i, p in enumerate(PROMPTS):
        fresh = new_cache()
        _plain(model, fresh, p[:-1])
        assert torch.equal(got[i], _plain(model, fresh, p[-1:]))
        assert cache_len(caches[i]) == lengths[i] + 1


@pytest.mark.parametrize("method", ["draft", "head"])
def test_greedy_runs_drafting_together_give_their_solo_tokens(method):
    """Five greedy runs on different prompts, drafting and verifying together (the app's setting,
    with every round told to wait for all of them), give each run's solo tokens, and their draft
    calls were shared."""
    target = tiny_random(family="llama", vocab_size=48, seed=16)
    draft = derive_draft(target, noise=0.3, seed=17)
    head = new_head(target.model, torch.arange(48), seed=0, intermediate=32)

    def proposer():
        return DraftModelProposer.build(target, draft) if method == "draft" else HeadProposer(head, target.model)

    prompts = [(p * 3)[: 5 + i] for i, p in enumerate(PROMPTS + PROMPTS[:2])]
    kw = dict(k=3, max_new_tokens=20, chat=False, plan=False)
    solo = [Decoder(target, p, proposer=proposer(), **kw).run().token_ids for p in prompts]
    verifier = BatchedTarget(target)
    drafting = proposer()
    draft_rounds = drafting.calls.rounds if method == "head" else shared_calls(draft.model).rounds
    before = draft_rounds.shared_passes
    gathered = Gathered([verifier.rounds, draft_rounds], len(prompts), [5.0, 0.2])  # runs near their end draft less
    try:
        runs = run_together(lambda i: Decoder(target, prompts[i], proposer=proposer(), verifier=verifier,
                                              share_passes=True, **kw), len(prompts), gathered)
    finally:
        gathered.close()
    assert [r.token_ids for r in runs] == solo
    assert draft_rounds.shared_passes > before and draft_rounds.most_shared == len(prompts)
