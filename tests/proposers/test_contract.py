"""The contract every registered method keeps (issue 66), parametrized over proposers.REGISTRY: greedy
output equal to HF's on a tiny twin and on the bundled model, sampled output that follows the target
(χ², with a broken rule shown failing), a run resumed in another process going on draw for draw, a
place in every picker and the CLI's choices, rows in docs/API.md and docs/GLOSSARY.md, and a word and a
colour for each of its sources.

A tests-only toy method (tests/helpers/toy_proposer.py), registered by one entry in the `method`
fixture, keeps the same contract and shows up in the same pickers: adding a method is its file, one
registry line and its test. How each method runs on the twin comes from its spec (tests/helpers/methods.py).
"""
from __future__ import annotations

import pickle
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.trace import FROM_DRAFT, NodeTrace
from specviz.proposers import REGISTRY, spec, specs, unshared
from specviz.teach.toy import chi_square_p_value
from specviz.viz.style import PALETTE
from specviz.viz.tree_figure import source_colour, source_kind
from tests.decoding.test_exactness import ALPHA, NUCLEUS, VOCAB, build_models
from tests.helpers import fork_gpu, toy_proposer, twins
from tests.helpers.drafts import drafted
from tests.helpers.methods import run_kwargs, use_twin_head
from tests.helpers.reference import exact_joint
from tests.helpers.tiny import PROMPTS, hf_greedy, pair

ROOT = Path(__file__).resolve().parents[2]
TOY = toy_proposer.NAME
NAMES = [*REGISTRY, TOY]  # every registered method, and the toy registered by one entry
N = 24  # new tokens of a greedy or resumed run
PROMPT = PROMPTS[2] * 3  # repeats, so the retrieval methods find matches
RUNS = 600  # sampled runs per χ² check, as tests/decoding/test_exactness.py: a broken rule fails at p < 1e-6
SAMPLED_PROMPT = [1, 2, 3, 1, 2, 3, 1, 2]  # repeats, so every method drafts at the first cycle
BUNDLED_PROMPT = "List the days of the week, one per line."
each = pytest.mark.parametrize("method", NAMES, indirect=True)


@pytest.fixture
def method(request, monkeypatch):
    """The method's name; for the toy, its one registry entry, added for the test."""
    if request.param == TOY:
        monkeypatch.setitem(REGISTRY, TOY, toy_proposer.ENTRY)
    return request.param


@pytest.fixture(scope="module")
def twin():
    return pair(noise=0.3, vocab=48, layers=3, seed=5)


@pytest.fixture
def on_twin(twin, monkeypatch, tmp_path):
    """The twin, with an untrained draft head for it where the shipped head stands."""
    use_twin_head(monkeypatch, twin[0], tmp_path)
    return twin


# -- exactness --------------------------------------------------------------------------------------
@pytest.mark.drafts
@each
def test_greedy_output_is_hfs_on_a_tiny_twin(method, on_twin):
    """Greedy decoding with the method gives transformers' greedy tokens on a tiny twin, with drafts sent."""
    target, draft = on_twin
    with unshared():
        run = specviz.generate(target, PROMPT, method=method, k=4, max_new_tokens=N, chat=False,
                               **run_kwargs(method, draft))
    assert run.token_ids == hf_greedy(target, PROMPT, N)
    assert drafted(run) > 0


@pytest.fixture(scope="module")
def bundled_reference(bundled_target):
    """transformers' greedy continuation of BUNDLED_PROMPT (chat template applied)."""
    ids = bundled_target.encode(BUNDLED_PROMPT, chat=True)
    eos = sorted(bundled_target.eos_ids)
    with torch.inference_mode():
        out = bundled_target.model.generate(torch.tensor([ids], device=bundled_target.device), do_sample=False,
                                            max_new_tokens=N, eos_token_id=eos, pad_token_id=eos[0])
    return out[0, len(ids):].tolist()


@pytest.mark.bundled
@pytest.mark.drafts
@each
def test_greedy_output_is_hfs_on_the_bundled_model(method, bundled_target, bundled_reference):
    """Greedy decoding with the method (the shipped head; the model as its own draft) gives
    transformers' greedy tokens on the bundled model for one short prompt, with drafts sent."""
    with unshared():
        run = specviz.generate(bundled_target, BUNDLED_PROMPT, method=method, k=4, max_new_tokens=N, chat=True,
                               record=False, **run_kwargs(method, bundled_target))
    assert run.token_ids == bundled_reference
    assert drafted(run) > 0


@pytest.fixture(scope="module")
def peaked():
    """test_exactness's target (VOCAB tokens, p peaked enough for top-p to cut) and its noisy draft."""
    target, draft, _ = build_models()
    return target, draft


def sampled(method: str, target, draft) -> tuple[np.ndarray, Counter]:
    """Counts of the new tokens (t2, t3, t4) over RUNS seeded runs at T = 0.7, top-p = 0.9, K = 2,
    planner off (every draft judged), and every token's origin."""
    counts, origins = np.zeros((VOCAB,) * 3), Counter()
    kw = {**run_kwargs(method, draft), "plan": False}
    with unshared():
        for seed in range(RUNS):
            run = Decoder(target, SAMPLED_PROMPT, method=method, k=2, temperature=NUCLEUS[0], top_p=NUCLEUS[1],
                          seed=seed, max_new_tokens=4, chat=False, record=False, **kw).run()
            counts[tuple(run.token_ids[1:])] += 1
            origins.update(run.origins)
    return counts, origins


def p_value(method: str, models) -> tuple[float, Counter]:
    counts, origins = sampled(method, *models)
    expected = exact_joint(models[0].model, SAMPLED_PROMPT, 4, *NUCLEUS).sum(0)  # t1 summed out
    return chi_square_p_value(counts, expected), origins


@pytest.mark.drafts
@pytest.mark.slow
@each
def test_sampled_output_follows_the_target(method, peaked, monkeypatch, tmp_path):
    """(t2, t3, t4) over RUNS seeded runs follow the target's exact joint (χ² p > ALPHA), with drafts
    accepted in at least one run in 20, so the rule was exercised."""
    use_twin_head(monkeypatch, peaked[0], tmp_path, subset=4)
    p, origins = p_value(method, peaked)
    assert p > ALPHA, p
    assert origins[FROM_DRAFT] >= RUNS / 20, origins


@pytest.mark.drafts
@pytest.mark.slow
@each
def test_the_sampled_check_fails_for_a_broken_rule(method, peaked, monkeypatch, tmp_path):
    """With verify.py's acceptance replaced by "accept every draft", the same check rejects the
    method's output (χ² p < ALPHA): the check can see a wrong rule through each method's drafts."""
    use_twin_head(monkeypatch, peaked[0], tmp_path, subset=4)
    twins.install(monkeypatch, "accept every draft")
    p, _ = p_value(method, peaked)
    assert p < ALPHA, p


# -- a run's state --------------------------------------------------------------------------------
TWIN: dict = {}  # the twin and its draft, which a forked worker inherits


def _finish(state):
    """In a forked worker: resume the run from its state (no caches) and decode it to the end."""
    decoder = Decoder.resume(TWIN["target"], state, TWIN["draft"])
    while decoder.step() is not None:
        pass
    return decoder.state()


def _draws(cycles) -> list:
    """Every random or greedy decision of a run: statuses, draws r and chosen tokens."""
    return [([(n.token, n.status, n.r) for n in c.nodes], c.committed, c.new_token.token if c.new_token else None)
            for c in cycles]


@pytest.mark.drafts
@pytest.mark.parametrize("temperature", [0.0, 1.0])
@each
def test_a_run_resumed_in_another_process_goes_on_draw_for_draw(method, on_twin, monkeypatch, temperature):
    """Three cycles here, then the run's state (pickled, no caches) resumed in a forked worker
    (tests/helpers/fork_gpu.py) and decoded to the end: tokens, origins and every draw equal an
    uninterrupted run's, with drafts sent."""
    from specviz.ui.runtime import zerogpu  # noqa: F401 -- its fork guard, as the app has it

    target, draft = on_twin
    kw = dict(method=method, k=4, temperature=temperature, top_p=0.9 if temperature else 1.0, seed=7,
              max_new_tokens=N, chat=False, **run_kwargs(method, draft))
    monkeypatch.setattr(fork_gpu, "FRESH", True)
    TWIN.update(target=target, draft=kw["draft"] if "draft" in kw else None)
    with unshared():
        straight = specviz.generate(target, PROMPT, **kw)
        state = Decoder(target, PROMPT, **kw).state()
        here = Decoder.resume(target, state.light(), TWIN["draft"])
        for _ in range(3):
            here.step()
        state = state.merge(here.state())
        later = fork_gpu.GPU(_finish, duration=60)(pickle.loads(pickle.dumps(state.light())))
    fork_gpu.reset()
    state = state.merge(later)
    assert state.done and state.ids[len(state.prompt_ids):] == straight.token_ids
    assert state.origins == straight.origins
    assert _draws(state.cycles) == _draws(straight.cycles)
    assert drafted(straight) > 0


# -- where it shows -------------------------------------------------------------------------------
@each
def test_the_method_is_in_every_picker_and_the_clis_choices(method):
    """Decode's and Side by side's Proposer pickers (or the draft picker, for a method offered as a
    draft) and Decode's option inputs, Compare's help and rows, Advise's candidates (or its typed
    draft candidates) and `specviz generate --method`'s choices have it."""
    import gradio as gr

    from specviz.advise.survey import Candidate
    from specviz.cli import build_parser
    from specviz.measure.comparison import parse_row
    from specviz.proposers import HEAD_DRAFT, resolve_draft
    from specviz.ui import advise, compare
    from specviz.ui.runtime.presets import BUNDLED, draft_choices
    from specviz.ui.runtime.settings import RunSettings
    from specviz.ui.shared.inputs import model_inputs

    s = spec(method)
    with gr.Blocks():
        decode, _ = model_inputs(RunSettings(), with_knobs=True)
        side, _ = model_inputs(RunSettings(), prefix="b_")
    for radio in (decode["method"], side["b_method"]):
        offered = [value for _, value in radio.choices]
        if s.offered_as_draft:  # "Draft model" with this draft
            assert resolve_draft("draft", HEAD_DRAFT)[0] == method
            assert HEAD_DRAFT in [value for _, value in draft_choices(BUNDLED)]
        else:
            assert method in offered
    assert all(f"{method}_{knob.name}" in decode for knob in s.knobs)
    assert method in re.search(r"method: ([^;]*);", compare.intro())[1].split(", ")
    assert parse_row(["bundled", method, "bundled" if s.needs_draft else "", 4, 0.0], 0).method == method
    if s.needs_draft:
        assert Candidate.parse(f"{method}:bundled").method == method
    else:
        assert method in [value for _, value in advise.method_choices()]
        assert Candidate.parse(method).method == method
    assert build_parser().parse_args(["generate", "--method", method, "--prompt", "x"]).method == method


@pytest.mark.parametrize("method", list(REGISTRY))  # the shipped methods: the toy ships no docs
def test_the_method_has_a_row_in_the_api_and_the_glossary(method):
    """docs/API.md's and docs/GLOSSARY.md's method tables each have one row for it, and API.md's
    default K is its spec's."""
    for doc in ("docs/API.md", "docs/GLOSSARY.md"):
        rows = [line for line in (ROOT / doc).read_text().splitlines() if line.startswith(f"| `{method}` |")]
        assert len(rows) == 1, f"{doc}: {len(rows)} rows for `{method}`"
        if doc == "docs/API.md":
            assert rows[0].split("|")[3].strip() == str(spec(method).default_k)


@each
def test_every_source_of_the_method_has_a_word_and_a_colour(method):
    """Each source kind the method drafts has a word on the page and the outline colour its spec names
    (a palette name; none only where the method drafts one word's nodes alone), and a kind two methods
    declare (the hybrid's) is declared alike."""
    s = spec(method)
    assert s.sources, "a method that drafts says what its nodes' source is"
    for source in s.sources:
        node = NodeTrace(0, 1, "x", -1, 1, source=source.kind)
        assert source.word.strip() and source_kind(node) == source.word
        assert source.colour is None or source.colour in PALETTE
        assert source_colour(node, "#000001") == (PALETTE[source.colour] if source.colour else "#000001")
        assert all(src == source for other in specs() for src in other.sources if src.kind == source.kind)
    if len({source.word for source in s.sources}) > 1:  # a mixed tree: each source outlined in its own colour
        assert all(source.colour for source in s.sources)
