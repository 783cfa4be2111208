"""The app works under ZeroGPU exactly as in one process.

ZeroGPU runs each `@spaces.GPU` call in a forked worker; only the return value (or each yielded
item) comes back. tests/helpers/fork_gpu.py reproduces that on the CPU, and these tests run the same
work through it and in-process and compare what comes back.
"""
from __future__ import annotations

import json
import pickle
import re

import pytest

import specviz
from specviz.decoding import planner
from specviz.decoding.engine import Decoder
from specviz.decoding.runstate import LIVE, LiveCaches
from specviz.proposers.suffix import EARLIER, unshared
from specviz.ui.runtime import work, zerogpu
from specviz.ui.runtime.state import MODELS
from tests.helpers import fork_gpu
from tests.helpers.tiny import PROMPTS, pair

TINY = "tiny-random:vocab=48,layers=3,seed=5"


@pytest.fixture
def fresh_workers(forked, monkeypatch):
    """As `forked`, with a new worker for every call (ZeroGPU's case when no worker was idle)."""
    monkeypatch.setattr(fork_gpu, "FRESH", True)
    return forked


@pytest.fixture
def tiny_target():
    target, _ = pair(noise=0.3, vocab=48, layers=3, seed=5)
    MODELS.put(TINY, target)
    return target


def _steps(target, n: int, method: str = "pld", temperature: float = 0.0) -> list:
    """n Steps through work.step, as the Step handler makes them; returns the merged state after each."""
    state = Decoder(target, PROMPTS[2] * 3, method=method, temperature=temperature, seed=3, max_new_tokens=40,
                    chat=False).state()
    states = []
    for _ in range(n):
        state = state.merge(work.step((TINY, None), state.light()))
        states.append(state)
    return states


def _comparable(state) -> dict:
    """A state without its timings and probabilities (those are compared with a tolerance)."""
    return {"ids": state.ids, "origins": state.origins, "k": state.k, "rng": state.rng, "done": state.done,
            "cycles": [(c.index, c.committed, [(n.token, n.status, n.r) for n in c.nodes]) for c in state.cycles]}


def _probs(state) -> list[float]:
    """Every p and q the run recorded. A rebuilt cache gives the same logits up to float rounding
    (differences of 1e-9 seen), never another token or draw."""
    return [x if x is not None else -1.0 for c in state.cycles for n in c.nodes for x in (n.p, n.q)]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_steps_in_forked_workers_equal_steps_in_process(tiny_target, fresh_workers, temperature):
    """Steps in fresh forked workers (each rebuilding the cache) give the run Steps in one process give."""
    in_fork = _steps(tiny_target, 6, temperature=temperature)
    zerogpu.use_backend(None)
    LIVE.clear()
    in_process = _steps(tiny_target, 6, temperature=temperature)
    assert [_comparable(s) for s in in_fork] == [_comparable(s) for s in in_process]
    assert _probs(in_fork[-1]) == pytest.approx(_probs(in_process[-1]), abs=1e-6)
    assert in_fork[-1].rebuilds == 5 and in_process[-1].rebuilds == 0
    assert [name for name, _ in fresh_workers] == ["step"] * 6


def test_forked_workers_leave_no_cache_in_the_main_process(tiny_target, fresh_workers):
    """The main process holds only the run's state: the caches a worker built die with it."""
    LIVE.clear()
    states = _steps(tiny_target, 3)
    assert len(LIVE) == 0 and states[-1].run_id not in LIVE
    assert len(pickle.dumps(states[-1].light())) < 20_000


def test_run_streams_its_states_from_one_worker(tiny_target, forked):
    """Run decodes to the end in one forked call, yielding states whose cycles join up without a gap."""
    state = Decoder(tiny_target, PROMPTS[2] * 3, method="logitspec", max_new_tokens=40, chat=False).state()
    chunks = list(work.run((TINY, None), state.light(), 0.0))
    for chunk in chunks:
        state = state.merge(chunk)
    straight = specviz.generate(tiny_target, PROMPTS[2] * 3, method="logitspec", max_new_tokens=40, chat=False)
    assert state.done and state.ids[len(state.prompt_ids):] == straight.token_ids
    assert [c.index for c in state.cycles] == list(range(len(straight.cycles)))
    assert [name for name, _ in forked] == ["run"]
    assert len(chunks) == len(straight.cycles)  # frame_s = 0: one state per cycle


def test_durations_follow_the_work(tiny_target, forked):
    """A Step asks ZeroGPU for less time than a Run of many tokens, which asks for less than the cap."""
    state = Decoder(tiny_target, PROMPTS[0], method="pld", max_new_tokens=256, chat=False).state()
    work.step((TINY, None), state.light())
    next(iter(work.run((TINY, None), state.light())))
    (_, step_s), (_, run_s) = forked
    assert step_s == work.STEP_S < run_s <= work.MAX_S


def test_a_model_missing_in_the_worker_is_a_clear_error(forked):
    """A call never loads a model: one the main process did not load is a message saying what to do."""
    target, _ = pair(vocab=32)
    state = Decoder(target, PROMPTS[0], method="ar", chat=False).state()
    with pytest.raises(specviz.loading.loader.ModelLoadError, match="press the button again"):
        work.step(("tiny-random:vocab=32,seed=99", None), state.light())


# -- the draft head and the hybrid on the bundled model: caches dropped after every cycle -------------
def _decisions(cycles) -> list:
    """Every decision of a run: each node's token, status and draw r, what was committed, the new token."""
    return [([(n.token, n.status, n.r) for n in c.nodes], c.committed, c.new_token.token if c.new_token else None)
            for c in cycles]


def _straight_and_resumed(target, kw: dict) -> tuple:
    """(state, straight): a run resumed from its pickled state with no cache after every cycle, and
    the same run uninterrupted."""
    prompt = "List three colours of the rainbow. Red, orange, yellow: list three colours of the rainbow."
    with unshared():  # neither run drafts from the other's output (the hybrid's suffix store)
        start = Decoder(target, prompt, **kw).state()  # its prices travel in it (planner.state)
        straight = Decoder.resume(target, pickle.loads(pickle.dumps(start.light())), live=LiveCaches()).run()
        state = start
        live = LiveCaches()  # never parked into: each resume finds no cache and rebuilds it
        while not state.done:
            decoder = Decoder.resume(target, pickle.loads(pickle.dumps(state.light())), live=live)
            decoder.step()
            state = state.merge(decoder.state())
    return state, straight


@pytest.mark.bundled
@pytest.mark.slow
@pytest.mark.parametrize("method,temperature", [("head", 0.0), ("head", 0.8), ("hybrid", 0.0),
                                                ("hybrid", 0.8)],
                         ids=["head-0.0", "head-0.8", "hybrid-0.0", "hybrid-0.8"])
def test_head_with_caches_dropped_every_cycle(bundled_target, method, temperature, monkeypatch):
    """The trained head's run, and the hybrid's (the app's default: retrieval beside the head),
    resumed from its pickled state with no cache after every cycle, gives the tokens and every draw
    of the same run uninterrupted (the head's hidden state and the planner's prices travel in the
    state, so whatever this process timed since the run began cannot change its choices), head nodes
    included.

    Greedy, every node sent is compared with the planner's read of the head's q left out (it is
    there to rank a greedy tree's nodes, planner.py `confidence`), the tokens with it in. With
    two threads a pass over a rebuilt cache gives q in other last bits than the uninterrupted run's
    pass (its sums are split across threads in another order; one thread gave the same bits), and
    where two sizes to send are within rounding of each other a resumed greedy run may send another:
    measured on an Intel Xeon with AMX (2026-12-07), cycle 10 sent 6 nodes instead of 9, the three
    left out all rejected, and with the read left out every node was the same. Greedy tokens do not
    depend on what is sent; sampled choices read counts only, never q."""
    kw = dict(method=method, k=4, temperature=temperature, seed=11, max_new_tokens=24)
    if not temperature:
        state, straight = _straight_and_resumed(bundled_target, kw)
        assert state.ids[len(state.prompt_ids):] == straight.token_ids
        monkeypatch.setattr(planner.Planner, "confidence", lambda self, tree: [None] * len(tree))
    state, straight = _straight_and_resumed(bundled_target, kw)
    assert state.ids[len(state.prompt_ids):] == straight.token_ids
    assert state.origins == straight.origins
    assert _decisions(state.cycles) == _decisions(straight.cycles)
    assert state.rebuilds == len(state.cycles) - 1 > 0
    sources = [n.source for c in state.cycles for n in c.nodes]
    assert "head" in sources  # the head drafted: its hidden state had to survive every resume
    if method == "hybrid":
        assert set(sources) - {"head"}, "no retrieval node: the run did not exercise the hybrid"
    if temperature:
        assert any(n.r is not None for c in state.cycles for n in c.nodes)  # draws were made and compared


@pytest.mark.bundled
@pytest.mark.slow
def test_the_sampled_hybrid_resumed_after_a_class_fed_the_store(bundled_target):
    """After a class fed suffix decoding's store (three runs on the prompt), the sampled hybrid's run,
    resumed from its pickled state with no cache after every cycle while a classmate's run of the
    same seed ended after its first cycle (each resume finds a grown store, as a ZeroGPU worker
    forked later would), gives the tokens and every draw of the classmate's uninterrupted run: a
    run drafts from the store as it was at its first cycle, wherever it is resumed."""
    kw = dict(method="hybrid", k=4, temperature=0.8, seed=11, max_new_tokens=24)
    prompt = "List three colours of the rainbow. Red, orange, yellow: list three colours of the rainbow."
    EARLIER.clear()
    for seed in (1, 2, 3):  # the class so far: each run feeds the store as it ends
        specviz.generate(bundled_target, prompt, **{**kw, "seed": seed})
    live = LiveCaches()  # never parked into: each resume finds no cache and rebuilds it

    def resumed_step(state):
        decoder = Decoder.resume(bundled_target, pickle.loads(pickle.dumps(state.light())), live=live)
        decoder.step()
        return state.merge(decoder.state())

    state = resumed_step(Decoder(bundled_target, prompt, **kw).state())  # its first cycle reads the store
    straight = specviz.generate(bundled_target, prompt, **kw)  # the classmate: it ends and feeds the store
    assert sum(EARLIER.entry(bundled_target.model, bundled_target.encode(prompt, True)).weights) == 4
    while not state.done:
        state = resumed_step(state)
    EARLIER.clear()
    assert state.ids[len(state.prompt_ids):] == straight.token_ids
    assert _decisions(state.cycles) == _decisions(straight.cycles)
    assert "suffix-earlier" in {n.source for c in state.cycles for n in c.nodes}  # it drafted from the class


# -- the app through its API, in one process and under the forked stand-in ---------------------------
gradio_client = pytest.importorskip("gradio_client")
from tests.helpers.app_client import named  # noqa: E402 -- the app itself is conftest.py's app_url

SHORT = dict(prompt="Write the days of the week, one per line: Monday, Tuesday, Wednesday.", max_new_tokens=24,
             method="pld")
ROWS = {"headers": ["target", "method", "draft", "K", "temperature"],
        "data": [["bundled", "pld", "", 4, 0.0], ["bundled", "logitspec", "", 4, 0.0]]}


def _export_path(client) -> str:
    file, _status = client.predict(api_name="/export")
    return file["value"] if isinstance(file, dict) else file  # an update carries the file as its value


def _export(client) -> dict:
    return json.loads(open(_export_path(client), encoding="utf-8").read())


def _run_part(run: dict) -> dict:
    """What two runs of the same settings must share: everything but timings and float rounding."""
    return {"tokens": run["token_ids"], "origins": run["origins"], "text": run["text"],
            "cycles": [(c["index"], c["committed"], [(n["token"], n["status"], n["r"]) for n in c["nodes"]])
                       for c in run["cycles"]]}


def _scenario(url: str) -> dict:
    """Step ×3, the slider back to cycle 1, Run to the end, Measure AR, Export, replay, Compare, a lesson."""
    from specviz.ui.decode.lessons import LESSONS
    from specviz.ui.runtime.state import BASELINES

    BASELINES._runs.clear()  # each scenario measures its own baseline (earlier tests may have cached one)
    client = gradio_client.Client(url, verbose=False)
    seen = {"steps": [named(client.predict(api_name="/step", **SHORT))["narration"] for _ in range(3)]}
    seen["slider"] = named(client.predict(1, api_name="/show_cycle"))["narration"]
    seen["run"] = named(client.predict(api_name="/run", **SHORT))["text"]
    ar_status = named(client.predict(api_name="/measure_ar", **SHORT))["status"]
    seen["ar"] = re.sub(r"[0-9.]+ tokens/s", "N tokens/s", ar_status)  # a measured speed differs run to run
    exported = _export(client)
    seen["export"] = _run_part(exported["run"])
    seen["export_ar"] = exported["ar"]["token_ids"] if exported.get("ar") else None
    path = _export_path(client)
    seen["replay"] = named(client.predict(gradio_client.handle_file(path), api_name="/replay"))["narration"]
    table = client.predict(ROWS, SHORT["prompt"], 12, 1, 0, True, api_name="/compare")[1]
    rows = [line for line in table.split("<tr") if "sv-cmp-row" in line]
    seen["compare"] = [(row.split("</td><td>")[1], "lossless ✓" in row) for row in rows]  # timings differ
    lesson = "/lesson_" + LESSONS[0].key.replace("-", "_")
    seen["lesson"] = named(client.predict(api_name=lesson)[: 12])["narration"]
    return seen


@pytest.mark.bundled
@pytest.mark.slow
def test_the_app_under_forked_workers_shows_what_it_shows_in_one_process(app_url, forked, monkeypatch):  # noqa: F811
    """Through the API, every view of the scenario is the same with each GPU call in a forked worker
    as in one process, and the main process kept no KV cache of the forked runs.

    The planner's verify costs v(n) are fixed for both: measured, they depend on the thread count,
    and a forked worker runs torch on one thread (zerogpu's fork fix), so a measured profile would
    differ between the two for a reason that has nothing to do with the process boundary."""
    from specviz.decoding import engine, planner

    monkeypatch.setattr(engine, "verify_cost", lambda target: planner.PRIOR_V)
    LIVE.clear()
    under_fork = _scenario(app_url)
    assert len(LIVE) == 0  # every cache was built in a worker
    names = {name for name, _ in forked}
    zerogpu.use_backend(None)
    LIVE.clear()
    in_process = _scenario(app_url)
    assert under_fork["steps"][2].startswith("Cycle 2") or "Cycle 2" in under_fork["steps"][2]
    assert "Cycle 1" in under_fork["slider"]
    assert under_fork == in_process
    assert under_fork["compare"] == [("pld, K=4, greedy", True), ("logitspec, K=4, greedy", True)]
    assert {"step", "run", "baseline", "compare"} <= names


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_cross_family_draft_steps_in_forked_workers_as_in_one_process(fresh_workers, temperature):
    """A draft from another family (its own tokenizer) stepped in fresh forked workers, each rebuilding its
    caches and finding the vocabulary map the main process built, gives the run one process gives,
    greedy and sampled, seams included."""
    from specviz.drafting.vocab_map import vocab_map
    from tests.proposers.test_cross_draft import cross_pair

    target, draft, _, _ = cross_pair()
    specs = ("tiny-cross-target", "tiny-cross-draft")
    MODELS.put(specs[0], target), MODELS.put(specs[1], draft)
    vocab_map(target, draft)  # as ensure_run builds it, before any worker forks

    def steps() -> list:
        state = Decoder(target, "w5 w9 w12 w7 w30", method="draft", draft=draft, k=3, temperature=temperature,
                        seed=4, max_new_tokens=20, chat=False, plan=False).state()
        out = []
        for _ in range(5):
            state = state.merge(work.step(specs, state.light()))
            out.append(state)
        return out

    in_fork = steps()
    zerogpu.use_backend(None)
    LIVE.clear()
    in_process = steps()
    assert [_comparable(s) for s in in_fork] == [_comparable(s) for s in in_process]
    assert [c.seam for c in in_fork[-1].cycles] == [c.seam for c in in_process[-1].cycles]
    assert any(c.seam is not None and c.nodes for c in in_fork[-1].cycles)
    assert [name for name, _ in fresh_workers] == ["step"] * 5
