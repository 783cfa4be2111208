"""A run's state is plain data: resumed anywhere, with or without its KV caches, it goes on the same.

This is what lets the app run on ZeroGPU, where each model call is a forked process whose
memory is thrown away: the caches are an optimisation, the state is the run.
"""
import pickle

import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.runstate import LiveCaches, RunState
from specviz.proposers import methods, spec
from specviz.proposers.suffix import EARLIER
from tests.helpers.methods import run_kwargs, use_twin_head
from tests.helpers.tiny import PROMPTS, pair

METHODS = list(methods())  # every registered method and plain decoding
N = 40  # tokens per run: enough cycles of every kind (accept, reject, bonus, plain step)


def _run(target, draft, method, temperature, drop_every_cycle, live):
    """Decode one run a cycle per call, resuming from the pickled state each time."""
    prompt = PROMPTS[2] * 3  # repeats, so the retrieval proposers find matches
    kw = dict(method=method, k=4, temperature=temperature, top_p=0.9 if temperature else 1.0, seed=7,
              max_new_tokens=N, chat=False, **run_kwargs(method, draft))
    draft = kw.pop("draft", None)
    state = Decoder(target, prompt, draft=draft, **kw).state()
    while not state.done:
        state = pickle.loads(pickle.dumps(state))  # what crosses a process boundary
        decoder = Decoder.resume(target, state.light(), draft=draft, live=live)
        decoder.step()
        decoder.park(live)
        if drop_every_cycle:
            live.clear()
        state = state.merge(decoder.state())
    return state


def _one_earlier_run(target, method) -> None:
    """Suffix decoding's store (the one store a method learns in) as each compared run finds it: one
    earlier run on the same prompt (a run feeds the store as it ends, so without this the second run
    would draft from the first)."""
    if method != "ar" and spec(method).learns:
        EARLIER.clear()
        EARLIER.record(target.model, PROMPTS[2] * 3, [2, 11, 6, 4] * 6, "an earlier run")


def _draws(state: RunState) -> list:
    """Every random or greedy decision of the run: statuses, draws r and chosen tokens."""
    return [([(n.token, n.status, n.r) for n in c.nodes], c.committed, c.new_token.token if c.new_token else None)
            for c in state.cycles]


@pytest.mark.parametrize("method", [m if m == "ar" else pytest.param(m, marks=pytest.mark.drafts) for m in METHODS])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_dropping_caches_after_every_cycle_changes_nothing(method, temperature, monkeypatch, tmp_path):
    """With the KV caches dropped after every cycle (rebuilt by one prefill), the tokens, origins and
    every draw are the same as with the caches kept, and the same as an uninterrupted run; every
    method but AR sends drafts, so the draws compared include drafts judged. The head (alone and in
    the hybrid) is an untrained one made for the twin."""
    target, draft = pair(noise=0.3, vocab=48, layers=3)
    use_twin_head(monkeypatch, target, tmp_path)
    _one_earlier_run(target, method)
    kept = _run(target, draft, method, temperature, False, LiveCaches())
    _one_earlier_run(target, method)
    dropped = _run(target, draft, method, temperature, True, LiveCaches())
    _one_earlier_run(target, method)
    straight = specviz.generate(target, PROMPTS[2] * 3, method=method, k=4,
                                temperature=temperature, top_p=0.9 if temperature else 1.0, seed=7,
                                max_new_tokens=N, chat=False, **run_kwargs(method, draft))
    assert kept.rebuilds == 0 and dropped.rebuilds == dropped.n_cycles - 1
    assert method == "ar" or sum(len(c.nodes) for c in dropped.cycles) > 0, "no draft was sent"
    assert dropped.ids == kept.ids
    assert dropped.ids[len(dropped.prompt_ids):] == straight.token_ids
    assert dropped.origins == kept.origins == straight.origins
    assert _draws(dropped) == _draws(kept)
    assert [c.committed for c in straight.cycles] == [c.committed for c in dropped.cycles]


@pytest.mark.drafts
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_run_resumed_after_a_classmate_ended_drafts_from_what_it_started_with(temperature):
    """Suffix decoding after a class fed its store (three runs on the prompt): a run resumed from its
    pickled state after every cycle, while a classmate's run on the same prompt ended after its
    first cycle (so each resume finds a grown store, as a ZeroGPU worker forked later would), gives
    the tokens and every draw of the classmate's own uninterrupted run, which drafted from the
    store as it was when both started."""
    target, _ = pair(noise=0.3, vocab=48, layers=3, seed=21)
    prompt = PROMPTS[2] * 3
    kw = dict(method="suffix", k=4, temperature=temperature, seed=7, max_new_tokens=N, chat=False, plan=False)
    EARLIER.clear()
    for seed in (1, 2, 3):  # the class so far: its outputs feed the store as each run ends
        specviz.generate(target, prompt, **{**kw, "seed": seed, "temperature": 1.0})
    state = Decoder(target, prompt, **kw).state()
    state = state.merge(_resumed_step(target, state))  # the run's first cycle pins the store it drafts from
    straight = specviz.generate(target, prompt, **kw)  # same seed: it ends, and feeds the store
    assert sum(EARLIER.entry(target.model, prompt).weights) == 4  # the class's three, then the classmate
    while not state.done:
        state = state.merge(_resumed_step(target, state))
    assert state.ids[len(state.prompt_ids):] == straight.token_ids
    assert _draws(state) == _draws(straight)
    assert any(n.source == "suffix-earlier" for c in state.cycles for n in c.nodes)
    EARLIER.clear()


def _resumed_step(target, state: RunState) -> RunState:
    """One cycle in a process that has no cache of the run (as a fresh ZeroGPU worker)."""
    decoder = Decoder.resume(target, pickle.loads(pickle.dumps(state.light())), live=LiveCaches())
    decoder.step()
    return decoder.state()


def test_rebuild_time_is_its_own_item():
    """A rebuild's prefill is counted in rebuild_s, never in decode_s or the prefill."""
    target, _ = pair(vocab=32)
    state = Decoder(target, PROMPTS[0], method="pld", max_new_tokens=12, chat=False).state()
    live = LiveCaches()
    for _ in range(3):
        decoder = Decoder.resume(target, state.light(), live=live)
        decoder.step()
        state = state.merge(decoder.state())  # never parked: every call after the first rebuilds
    m = state.trace().metrics
    assert m["rebuilds"] == 2 and m["rebuild_s"] > 0
    assert m["decode_s"] == pytest.approx(sum(c.draft_s + c.verify_s + c.other_s for c in state.cycles))
    assert m["prefill_s"] == state.prefill_s > 0


def test_tokens_per_second_leaves_the_prefill_out():
    """tokens_per_s is the tokens the cycles committed over the cycles' time; the prefill's token is apart."""
    target, _ = pair(vocab=32)
    run = specviz.generate(target, PROMPTS[0], method="ar", max_new_tokens=10, chat=False)
    m = run.metrics
    assert m["new_tokens"] == 10 and m["cycles"] == 9
    assert m["tokens_per_s"] == pytest.approx(9 / m["decode_s"])
    assert run.cycles[-1].elapsed_s == pytest.approx(m["prefill_s"] + m["decode_s"])


def test_parked_caches_are_used_only_at_the_same_length():
    """A parked cache is taken only by the run and committed length it was parked at, and idle ones go."""
    live = LiveCaches(capacity=2, idle_s=10)
    live.put("a", 5, "cache-a", None)
    assert live.take("a", 6) is None and "a" not in live  # a stale length is dropped, never reused
    live.put("a", 5, "cache-a", None)
    assert live.take("a", 5).cache == "cache-a"
    live.put("b", 1, "x", None)
    live.put("c", 1, "y", None)
    live.put("d", 1, "z", None)
    assert "b" not in live and len(live) == 2  # least recently used first
    assert live.sweep(now=float("inf")) == 2 and len(live) == 0


def test_state_pickles_small_without_its_trace():
    """The light state (no trace) that travels into a call stays small: ids and one row of logits."""
    target, _ = pair(vocab=32)
    decoder = Decoder(target, PROMPTS[0], method="pld", max_new_tokens=20, chat=False)
    decoder.run()
    state = decoder.state()
    assert len(state.cycles) == decoder.n_cycles > 0
    light = pickle.dumps(state.light())
    assert len(light) < 20_000
    assert pickle.loads(light).cycles == []
    with pytest.raises(ValueError, match="another run"):
        state.merge(Decoder(target, PROMPTS[0], method="pld", chat=False).state())


def test_rng_state_round_trips():
    """The generator's state taken out of one run and put into another gives the same next draws."""
    target, _ = pair(vocab=32)
    a = Decoder(target, PROMPTS[1], method="ar", temperature=1.0, seed=3, max_new_tokens=30, chat=False)
    for _ in range(5):
        a.step()
    b = Decoder.resume(target, pickle.loads(pickle.dumps(a.state())), live=LiveCaches())
    assert torch.equal(torch.rand(4, generator=a.sampling.generator), torch.rand(4, generator=b.sampling.generator))


@pytest.mark.drafts
@pytest.mark.parametrize("method", ["pld", "draft"])
def test_a_new_run_is_made_from_tokenizers_alone(method):
    """runstate.new_state runs no model and reads no weight (the models' weights are on the meta device,
    where reading a value fails, and a forward pass fails the test), and a run resumed from it
    decodes exactly as Decoder's own start does, draw for draw."""
    from specviz.decoding.runstate import new_state
    from specviz.decoding.settings import DecodeSettings

    target, draft = pair(noise=0.3, vocab=48, layers=3)
    settings = DecodeSettings.of(method=method, k=4, temperature=1.0, top_p=0.9, seed=7, max_new_tokens=N,
                                 chat=False, plan=method != "draft")  # a same-size draft: the planner sends none
    prompt = PROMPTS[2] * 3
    hollow_target, hollow_draft = pair(noise=0.3, vocab=48, layers=3)
    for hollow in (hollow_target, hollow_draft):
        hollow.model.to("meta")
        hollow.model.register_forward_pre_hook(lambda *a: pytest.fail("new_state ran a model"))
    start = new_state(hollow_target, prompt, settings, hollow_draft if method == "draft" else None)
    assert start.ids == start.prompt_ids == target.encode(prompt, chat=False) and not start.started
    state = start
    while not state.done:
        decoder = Decoder.resume(target, state.light(), draft=draft if method == "draft" else None,
                                 live=LiveCaches())
        decoder.step()
        state = state.merge(decoder.state())
    straight = specviz.generate(target, prompt, settings, draft=draft if method == "draft" else None)
    assert state.ids[len(state.prompt_ids):] == straight.token_ids
    assert any(c.nodes for c in state.cycles), "no draft was sent"
    assert _draws(state) == [([(n.token, n.status, n.r) for n in c.nodes], c.committed,
                              c.new_token.token if c.new_token else None) for c in straight.cycles]
