"""The target answers verify requests (specviz/decoding/targets.py): one ragged pass for many runs.

On tiny random models of every family we know: a ragged pass gives each run what its own pass
gives; runs decoded together, sharing passes, give their solo tokens; a run alone pays for
nothing else; a failed shared pass leaves every cache as it was and answers each run alone.
"""
from __future__ import annotations

import threading

import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.targets import BatchedTarget, LocalTarget, VerifyRequest, batched
from specviz.drafting.tree import DraftTree
from specviz.models.families import tiny_random
from specviz.passes import ragged
from specviz.passes.kvcache import cache_len, new_cache
from tests.conftest import skip_or_fail
from tests.helpers.tiny import PROMPTS, run_together

FAMILIES = [("llama", {}), ("qwen2", {}), ("gemma3", dict(window=4, layers=4)), ("gpt2", {})]
TREES = [DraftTree([5, 6, 7], [-1, 0, 0]), DraftTree.chain([9, 9, 4]), DraftTree()]


def _prefilled(target, ids):
    cache = new_cache()
    LocalTarget(target).forward(ids, cache)
    return cache


@pytest.mark.parametrize("family,kw", FAMILIES, ids=[f for f, _ in FAMILIES])
def test_a_ragged_pass_gives_each_run_its_own_pass(family, kw):
    """For a tree, a chain and a plain step over caches of different lengths, one ragged pass gives
    each run the logits and the cache its own pass gives (to float rounding), sliding windows included."""
    target = tiny_random(family=family, seed=1, **kw)
    model = target.model
    assert ragged.supports(model)
    solo, rows = [], []
    for prompt, tree in zip(PROMPTS, TREES):
        mine, theirs = _prefilled(target, prompt[:-1]), _prefilled(target, prompt[:-1])
        request = VerifyRequest([prompt[-1]] + tree.tokens, tree, mine, target.vocab_size)
        solo.append((LocalTarget(target).verify(request).logits, mine))
        rows.append(ragged.Row(theirs, request.tokens, tree.position_ids(cache_len(theirs)),
                               tree.model_mask(theirs, model.config, target.dtype)))
    logits, _ = ragged.forward(model, rows)
    for (want, cache), got, row in zip(solo, logits, rows):
        assert got.shape == want.shape
        assert torch.allclose(got, want, atol=1e-5), (got - want).abs().max()
        assert cache_len(row.cache) == cache_len(cache)
        for a, b in zip(cache.layers, row.cache.layers):
            assert torch.allclose(a.keys, b.keys, atol=1e-5) and torch.allclose(a.values, b.values, atol=1e-5)


@pytest.mark.parametrize("method", ["pld", "logitspec", "draft", "layerskip", "hybrid", "suffix", "ar"])
def test_greedy_runs_decoded_together_give_their_solo_tokens(method):
    """Six greedy runs on different prompts, decoded at once through one BatchedTarget that waits
    for all of them, give each run's solo tokens; most of their passes were shared."""
    target = tiny_random(family="llama", vocab_size=48, seed=3)
    draft = specviz.loading.loader.derive_draft(target, noise=0.3, seed=4) if method == "draft" else None
    prompts = [(p * 3)[: 5 + i] for i, p in enumerate(PROMPTS * 2)]
    kw = dict(method=method, k=4, max_new_tokens=24, chat=False, plan=False)  # every offered node is sent
    if method == "layerskip":  # its runs share one shell, so their draft steps share passes too
        kw["layers"] = [0]
    solo = [specviz.generate(target, p, draft=draft, **kw).token_ids for p in prompts]
    shared = BatchedTarget(target, gather=len(prompts), gather_s=2.0)
    runs = run_together(lambda i: Decoder(target, prompts[i], draft=draft, verifier=shared, **kw), len(prompts), shared)
    assert [r.token_ids for r in runs] == solo
    shares = [c.shared_by for r in runs for c in r.cycles]
    assert max(shares) == len(prompts) and shared.shared_passes > 0
    assert sum(s > 1 for s in shares) > len(shares) / 2, shares


def test_a_run_alone_passes_alone_and_exactly_as_before():
    """With nobody else waiting, the batched target runs the request at once and alone: the same
    logits, bit for bit, as a LocalTarget's pass, and the answer says it was not shared."""
    target = tiny_random(family="llama", seed=5)
    tree = TREES[0]
    answers = []
    for verifier in (LocalTarget(target), BatchedTarget(target)):
        cache = _prefilled(target, PROMPTS[2][:-1])
        answers.append(verifier.verify(VerifyRequest([PROMPTS[2][-1]] + tree.tokens, tree, cache, 32)))
    assert torch.equal(answers[0].logits, answers[1].logits)
    assert answers[1].shared == 1


def test_the_app_setting_shares_one_target_per_model():
    """batch_verify=True routes a Decoder's passes to the one BatchedTarget of its model; the default
    (timing runs) keeps them its own."""
    target = tiny_random(family="llama", seed=6)
    assert Decoder(target, PROMPTS[0], method="pld", chat=False, share_passes=True).verifier is batched(target)
    assert isinstance(Decoder(target, PROMPTS[0], method="pld", chat=False).verifier, LocalTarget)
    assert not isinstance(Decoder(target, PROMPTS[0], method="pld", chat=False).verifier, BatchedTarget)


def test_a_failed_shared_pass_puts_the_caches_back_and_answers_each_alone(monkeypatch):
    """When the ragged pass raises after it has already written into the caches, every cache is cut
    back to its length before, and each request gets its own solo pass's answer."""
    target = tiny_random(family="llama", seed=7)

    def broken(model, rows, *args, **kw):
        for row in rows:  # half done: the first layer's keys written, then a failure
            k = torch.zeros(1, 2, len(row.tokens), 16)
            row.cache.update(k, k, 0)
        raise RuntimeError("out of memory")

    monkeypatch.setattr(ragged, "forward", broken)
    shared = BatchedTarget(target, gather=3, gather_s=2.0)
    answers, lengths = [None] * 3, []
    caches = [_prefilled(target, p[:-1]) for p in PROMPTS]
    lengths = [cache_len(c) for c in caches]

    def go(i):
        tree = TREES[i]
        answers[i] = shared.verify(VerifyRequest([PROMPTS[i][-1]] + tree.tokens, tree, caches[i], 32))

    threads = [threading.Thread(target=go, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for i, (answer, tree) in enumerate(zip(answers, TREES)):
        fresh = _prefilled(target, PROMPTS[i][:-1])
        want = LocalTarget(target).verify(VerifyRequest([PROMPTS[i][-1]] + tree.tokens, tree, fresh, 32))
        assert answer.shared == 1 and torch.equal(answer.logits, want.logits)
        assert cache_len(caches[i]) == lengths[i] + 1 + len(tree)


def test_one_requests_error_reaches_only_its_own_run():
    """A request that cannot be verified (a token outside the vocabulary) raises in its own thread;
    the run waiting beside it gets its answer."""
    target = tiny_random(family="llama", seed=8)
    shared = BatchedTarget(target, gather=2, gather_s=2.0)
    results = {}

    def go(name, tokens):
        cache = _prefilled(target, PROMPTS[0])
        try:
            results[name] = shared.verify(VerifyRequest(tokens, DraftTree.chain(tokens[1:]), cache, 32))
        except Exception as e:  # noqa: BLE001 -- the test looks at which thread got what
            results[name] = e

    threads = [threading.Thread(target=go, args=("good", [3, 4, 5])),
               threading.Thread(target=go, args=("bad", [3, 999]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert isinstance(results["bad"], IndexError)
    assert results["good"].logits.shape == (3, 32)


def test_a_ragged_pass_keeps_its_own_hidden_states_while_another_thread_passes():
    """The hidden rows a ragged pass hands back (read by a hook on the shared final norm) are its
    own even when another thread runs the same model meanwhile (a run verifying alone, the costs
    being timed): here a plain pass runs in a second thread after this pass's norm, before its
    LM head, and the hidden rows still equal those of the same pass made undisturbed."""
    from specviz.models.families import final_norm

    target = tiny_random(seed=3)
    model, norm = target.model, final_norm(target.model)

    def rows():
        out = []
        for prompt in PROMPTS[:2]:
            cache = _prefilled(target, prompt[:-1])
            out.append(ragged.Row(cache, [prompt[-1], 4], torch.tensor([[len(prompt) - 1, len(prompt)]]), None))
        return out

    _, want = ragged.forward(model, rows(), norm)
    interfered = []

    def other_pass(_module, _args):
        if not interfered:  # once: the second thread's pass runs the model, and so the norm, too
            interfered.append(1)
            t = threading.Thread(target=lambda: model(input_ids=torch.tensor([[1, 2, 3]])))
            t.start()
            t.join()

    disturbed = rows()  # prefilled before the hook: only the ragged pass below meets it
    handle = model.lm_head.register_forward_pre_hook(other_pass)
    try:
        _, got = ragged.forward(model, disturbed, norm)
    finally:
        handle.remove()
    assert interfered
    assert [g.shape for g in got] == [w.shape for w in want]
    assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_a_ragged_pass_runs_our_fast_forward_with_the_modules_bits(monkeypatch):
    """On a Llama with the CPU speed-ups (as `load` gives it) a ragged pass runs our fast forward,
    not the modules, and gives every run the same logits, hidden rows and cache, bit for bit, as the
    same ragged pass through the modules: a tree, a chain and a plain step over caches of different lengths."""
    from specviz.passes import fastpath, speedups

    if not speedups._onednn_works():
        skip_or_fail("this torch build has no oneDNN linear, so no fast forward")
    target = tiny_random(family="llama", seed=2)
    speedups.apply(target.model)
    model, norm = target.model, target.model.model.norm
    assert fastpath.of(model) is not None

    def rows():
        out = []
        for prompt, tree in zip(PROMPTS, TREES):
            cache = _prefilled(target, prompt[:-1])
            out.append(ragged.Row(cache, [prompt[-1]] + tree.tokens, tree.position_ids(cache_len(cache)),
                                  tree.model_mask(cache, model.config, target.dtype)))
        return out

    calls = []
    real = fastpath.FastForward.__call__
    monkeypatch.setattr(fastpath.FastForward, "__call__",
                        lambda self, *a, **kw: calls.append(1) or real(self, *a, **kw))
    fast_rows = rows()
    calls.clear()  # the prefills ran it too
    fast = ragged.forward(model, fast_rows, norm)
    assert calls == [1]
    monkeypatch.setattr(fastpath, "forward", lambda *a, **kw: None)  # the modules, as before
    module_rows = rows()
    modules = ragged.forward(model, module_rows, norm)
    for got, want in zip(fast[0] + fast[1], modules[0] + modules[1]):
        assert got.shape == want.shape and torch.equal(got, want)
    for a, b in zip(fast_rows, module_rows):
        for x, y in zip(a.cache.layers, b.cache.layers):
            assert torch.equal(x.keys, y.keys) and torch.equal(x.values, y.values)


def test_a_layer_skip_shells_ragged_pass_gives_each_run_its_own_pass():
    """On a model with sliding and full layers, a layer-skip shell keeping layers 0, 2 and 3 (so its
    config lists three layer kinds while its layers keep their first indices) gives each run in a
    ragged pass the logits of its own pass, to float rounding."""
    from specviz.proposers.layer_skip import self_draft

    target = tiny_random(family="gemma3", window=4, layers=4, seed=8)
    shell = self_draft(target.model, [0, 2, 3])
    assert ragged.supports(shell)
    want, rows = [], []
    for prompt in PROMPTS:
        mine, theirs = new_cache(), new_cache()
        with torch.inference_mode():
            shell(input_ids=torch.tensor([prompt[:-1]]), past_key_values=mine, use_cache=True)
            shell(input_ids=torch.tensor([prompt[:-1]]), past_key_values=theirs, use_cache=True)
            want.append(shell(input_ids=torch.tensor([prompt[-1:]]), past_key_values=mine, use_cache=True).logits[0])
        chain = DraftTree.chain([])
        rows.append(ragged.Row(theirs, prompt[-1:], chain.position_ids(cache_len(theirs)),
                               chain.model_mask(theirs, shell.config, target.dtype)))
    got, _ = ragged.forward(shell, rows)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-5), (g - w).abs().max()
