"""Shared prefills: a run that starts on a prompt another run already prefilled (same model object)
starts from a copy of that prefill, and decodes exactly as if it had prefilled itself."""
import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.prefills import PREFILLS
from specviz.loading.loader import tiny_random
from tests.helpers.tiny import PROMPTS, pair


def _draws(run) -> list:
    """Every decision of the run, and the cache lengths it saw (a stale cache shows there first)."""
    return [([(n.token, n.status, n.r) for n in c.nodes], c.committed, c.cache_before) for c in run.cycles]


@pytest.fixture(autouse=True)
def empty_store():
    PREFILLS.clear()
    yield
    PREFILLS.clear()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_shared_prefill_gives_the_runs_own_tokens_and_draws(temperature):
    """The second run on a prompt takes the first run's prefill (the store counts a hit, the model
    runs no prompt pass) and its tokens and every draw equal a run that prefilled alone; the first
    run's later cycles, which change its own cache, never reach the copy kept."""
    target, _ = pair(noise=0.3, vocab=48, layers=3)
    kw = dict(method="pld", k=4, temperature=temperature, seed=3, max_new_tokens=30, chat=False)
    prompt = PROMPTS[2] * 3
    alone = specviz.generate(target, prompt, **kw)  # share_prefill off: nothing kept
    assert len(PREFILLS) == 0
    first = specviz.generate(target, prompt, share_prefill=True, **kw)
    calls = []
    hook = target.model.register_forward_pre_hook(lambda m, a, kw_: calls.append(kw_["input_ids"].shape[1]),
                                                  with_kwargs=True)
    decoder = Decoder(target, prompt, share_prefill=True, **kw)
    second = decoder.run()
    hook.remove()
    assert PREFILLS.hits == 1 and decoder.prefill_shared and decoder.state().prefill_shared
    assert len(target.encode(prompt, chat=False)) not in calls  # no pass over the whole prompt
    for run in (first, second):
        assert run.token_ids == alone.token_ids and _draws(run) == _draws(alone)


def test_another_model_or_prompt_never_hits():
    """A prefill is kept for its model object and ids only: another model with the same name, or
    another prompt, prefills for itself."""
    a, _ = pair(vocab=48, layers=2, seed=1)
    b, _ = pair(vocab=48, layers=2, seed=2)
    assert a.name == b.name
    kw = dict(method="ar", max_new_tokens=4, chat=False, share_prefill=True)
    specviz.generate(a, PROMPTS[0], **kw)
    other_model = Decoder(b, PROMPTS[0], **kw)
    other_model.run()
    other_prompt = Decoder(a, PROMPTS[1], **kw)
    other_prompt.run()
    assert PREFILLS.hits == 0 and not other_model.prefill_shared and not other_prompt.prefill_shared
    assert torch.is_tensor(PREFILLS.take(a.model, a.encode(PROMPTS[0], chat=False), False).logits)


def test_runs_starting_together_compute_one_prefill():
    """Six runs that start on the same prompt at the same moment (a class pressing Step) compute the
    prefill once: five of them wait for it and take copies, and all six give the solo tokens."""
    import threading

    from tests.helpers.tiny import run_together

    target, _ = pair()
    prompt = PROMPTS[2] * 4
    solo = specviz.generate(target, prompt, method="pld", k=3, max_new_tokens=12, chat=False).token_ids
    PREFILLS.clear()
    calls, lock, real = [], threading.Lock(), target.model.forward

    def counted(*args, **kw):  # count the passes over the whole prompt
        if kw.get("input_ids") is not None and kw["input_ids"].shape[1] == len(prompt):
            with lock:
                calls.append(1)
            threading.Event().wait(0.2)  # a prefill takes a while: the others arrive meanwhile
        return real(*args, **kw)

    target.model.forward = counted
    try:
        runs = run_together(lambda i: Decoder(target, prompt, method="pld", k=3, max_new_tokens=12, chat=False,
                                              share_prefill=True), 6)
    finally:
        del target.model.forward
    assert len(calls) == 1 and PREFILLS.hits == 5
    assert all(r.token_ids == solo for r in runs)


def test_a_failed_prefill_lets_the_waiting_runs_compute_their_own():
    """When the run computing a shared prefill fails, a run waiting for it is released at once and
    prefills by itself, rather than waiting for a result that never comes."""
    import threading
    import time

    target, _ = pair()
    assert PREFILLS.take(target.model, [1, 2, 3], False) is None  # this caller now computes it
    got, took = [], []

    def waiter():
        t0 = time.perf_counter()
        got.append(PREFILLS.take(target.model, [1, 2, 3], False))
        took.append(time.perf_counter() - t0)

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.2)
    assert thread.is_alive()  # it waits for the prefill in progress
    PREFILLS.release(target.model, [1, 2, 3])  # the computing caller failed
    thread.join(timeout=5)
    assert got == [None] and took[0] < 5


@pytest.mark.bundled
def test_example_prompts_prefilled_at_start_up_are_copied_by_the_first_step(bundled_target):
    """The start-up warm-up's last stage (warmup.prefill_examples) computes each example prompt's
    prefill once at the page's settings; a session's first Step on one of them then copies it
    (prefill_shared), and a second warm-up computes nothing."""
    import dataclasses

    from specviz.ui.runtime import work
    from specviz.ui.runtime.state import MODELS
    from specviz.ui.runtime.warmup import prefill_examples
    from specviz.ui.shared import recordings, run

    MODELS.put("bundled", bundled_target)
    settings = dataclasses.replace(recordings.example_settings(), max_new_tokens=4)
    prompts = [e["prompt"] for e in recordings.examples()][:2]
    assert prefill_examples(settings, prompts) == 2
    assert prefill_examples(settings, prompts) == 0
    s = dataclasses.replace(settings, prompt=prompts[1])
    start = specviz.decoding.runstate.new_state(bundled_target, s.prompt, s.decode())
    later = work.step(run.specs(s), start)
    assert later.prefill_shared and later.origins


def test_a_copied_cache_holds_the_same_positions_apart_and_grows_in_place():
    """copy_cache of a prefill (every layer one shape: the path that copies all layers together)
    gives keys and values equal to the original's in storage of its own; the next pass on the copy
    appends inside the copy's spare room, leaves the original untouched, and gives the same logits
    as the same pass on the original."""
    from specviz.passes.kvcache import GrowingLayer, copy_cache, new_cache

    target = tiny_random(vocab_size=32, layers=3, seed=4)
    cache = new_cache()
    with torch.inference_mode():
        target.model(input_ids=torch.tensor([[1, 5, 9, 2, 7]]), past_key_values=cache, use_cache=True)
        copy = copy_cache(cache)
        assert len(copy.layers) == len(cache.layers) == 3
        for mine, theirs in zip(copy.layers, cache.layers):
            assert type(mine) is GrowingLayer
            assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)
            assert mine.keys.data_ptr() != theirs.keys.data_ptr()
        before = [layer.keys.clone() for layer in cache.layers]
        rooms = [layer._room[0].data_ptr() for layer in copy.layers]
        step = torch.tensor([[4]])
        on_copy = target.model(input_ids=step, past_key_values=copy, use_cache=True).logits
        on_original = target.model(input_ids=step, past_key_values=cache, use_cache=True).logits
    assert torch.equal(on_copy, on_original)
    assert [layer._room[0].data_ptr() for layer in copy.layers] == rooms  # appended in place
    assert all(layer.keys.shape[-2] == 6 for layer in copy.layers)
    assert all(torch.equal(layer.keys[..., :5, :], b) for layer, b in zip(cache.layers, before))


def test_a_copied_cache_is_cut_in_one_go_to_what_layer_by_layer_cuts_give():
    """A cache copied together (every shared prefill's copy) is rolled back and cut to a tree's path
    in a handful of tensor ops for all layers, and then holds exactly what the same cuts give layer
    by layer on an equal cache; after a layer regrew out of the shared buffer, cuts go layer by layer
    and still agree, and the cache lets the buffer go."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from specviz.passes.kvcache import copy_cache, keep_path, new_cache, rollback

    class Ops(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Ops.n += 1
            return func(*args, **(kwargs or {}))

    target = tiny_random(vocab_size=32, layers=4, seed=5)
    prefill = new_cache()
    with torch.inference_mode():
        target.model(input_ids=torch.tensor([[1, 5, 9, 2, 7]]), past_key_values=prefill, use_cache=True)
        together, apart = copy_cache(prefill), copy_cache(prefill)
        apart._whole = apart._whole_rooms = None  # the layer-by-layer way, as before

        def grow(n):
            for cache in (together, apart):
                target.model(input_ids=torch.arange(n)[None] % 29 + 3, past_key_values=cache, use_cache=True)

        def agree():
            for a, b in zip(together.layers, apart.layers):
                assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)

        grow(6)
        ops = []
        for cut in (lambda c: keep_path(c, 5, [6, 8, 9]), lambda c: rollback(c, 7)):
            for cache in (together, apart):
                Ops.n = 0
                with Ops():
                    cut(cache)
                ops.append(Ops.n)
            agree()
        assert together._whole is not None
        assert ops[0] <= 12 < ops[1] and ops[2] <= 6 < ops[3], ops
        grow(300)  # past the spare room: every layer regrows into a buffer of its own
        keep_path(together, 300, [302, 305])
        keep_path(apart, 300, [302, 305])
        agree()
        assert together._whole is None


def test_a_class_on_one_prefill_computes_the_first_tokens_distribution_once(monkeypatch):
    """Runs sharing a prefill at T > 0 compute the first token's distribution once per settings
    (the nucleus over the whole vocabulary), not once a run; each run's first token is still its
    own draw, equal to what a run that prefilled alone picks with the same seed, for every seed."""
    from specviz.drafting import sampling as sampling_mod

    target, _ = pair(noise=0.3, vocab=48, layers=2)
    kw = dict(method="ar", temperature=0.9, top_p=0.8, max_new_tokens=2, chat=False)
    prompt = PROMPTS[1]
    alone = {seed: specviz.generate(target, prompt, seed=seed, **kw).token_ids for seed in range(12)}
    computed = []
    real = sampling_mod.Sampling.probs
    monkeypatch.setattr(sampling_mod.Sampling, "probs", lambda self, logits: computed.append(1) or real(self, logits))
    shared = {seed: Decoder(target, prompt, seed=seed, share_prefill=True, **kw) for seed in range(12)}
    for decoder in shared.values():
        decoder.prefill()
    firsts = len(computed)
    assert PREFILLS.hits == 11 and firsts == 1
    assert all(d.ids[-1] == alone[seed][0] for seed, d in shared.items())
    assert len({alone[seed][0] for seed in alone}) > 1  # the seeds draw different first tokens
