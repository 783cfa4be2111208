"""Draft head v2 (specviz/head/v2.py) and its proposer: fed the target's features at the committed
row, exact under greedy and under sampling, each node drafted from its own path, saved and loaded
beside v1, and priced as a head of its own. Its training is in tests/training/test_head2_train.py.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.prefills import PREFILLS
from specviz.decoding.targets import BatchedTarget
from specviz.decoding.trace import BONUS, FROM_DRAFT, RESAMPLED
from specviz.head.model import DEFAULT_PATH, DraftHead, check_target, load_head, save_head
from specviz.head.v2 import FORMAT2, DraftHead2
from specviz.loading.loader import ModelLoadError, tiny_random
from specviz.passes import fastpath, speedups
from specviz.proposers.base import ProposeContext
from specviz.proposers.head import HeadProposer
from specviz.teach.toy import chi_square_p_value
from specviz.training.head2_train import new_head2
from specviz.training.head_fit import new_head
from tests.conftest import skip_or_fail
from tests.helpers import twins
from tests.helpers.reference import exact_joint
from tests.helpers.tiny import PROMPTS, Gathered, TwoChains, hf_greedy, run_together

SMALL = dict(intermediate=48, heads=2, head_dim=16)  # a v2 head sized for the tiny targets


@pytest.fixture(scope="module")
def tiny():
    """A 4-layer tiny target, a random v2 head reading its layers 1 and 2, and a random v1 head."""
    torch.set_num_threads(1)
    target = tiny_random(vocab_size=32, layers=4, seed=5)
    head2 = new_head2(target.model, torch.arange(24), seed=0, aux_layers=[1, 2], **SMALL)
    head1 = new_head(target.model, torch.arange(24), seed=0, intermediate=48)
    return target, head2, head1


class CheckedHead(HeadProposer):
    """At every proposal, checks that ctx.last_hidden is the target's features at the row the newest
    token came from, recomputed from scratch in one plain pass over the committed tokens: the
    outputs of the decoder layers it reads (transformers' hidden_states[i + 1] is layer i's output),
    then the final norm's (so no stale, rejected or other run's row was kept)."""
    checks = 0

    def propose(self, ctx):
        model = self.target_model
        with torch.inference_mode():
            out = model.model(torch.tensor([ctx.ids[:-1]]), output_hidden_states=True)
        want = torch.cat([out.hidden_states[i + 1][0, -1] for i in self.hidden_layers] + [out.last_hidden_state[0, -1]])
        torch.testing.assert_close(ctx.last_hidden, want, atol=1e-4, rtol=1e-4)
        type(self).checks += 1
        return super().propose(ctx)


def checked(target, head, **kw):
    proposer = CheckedHead(head, target.model, **kw)
    proposer.target_model = target.model
    return proposer


# -- the features the engine hands over -------------------------------------------------------------
@pytest.mark.parametrize("fast", [False, True], ids=["modules", "fast forward"])
def test_the_rows_read_are_the_targets_hidden_states(tiny, fast):
    """Greedy trees and sampled chains, through the model's modules (hooks on the decoder layers
    and the final norm) and through our fast forward (passes/fastpath.py, which runs no hooks):
    every proposal gets [layer 1 ; layer 2 ; final norm] at the committed row (CheckedHead)."""
    target, head2, _ = tiny
    if fast:
        if not speedups._onednn_works():
            skip_or_fail("this torch build has no oneDNN linear")
        target = tiny_random(vocab_size=32, layers=4, seed=5)
        speedups.apply(target.model)
        assert fastpath.of(target.model) is not None  # the passes run no module hooks
    CheckedHead.checks = 0
    for temperature, k, width in ((0.0, 3, 3), (1.0, 2, 1), (1.0, 4, 1), (0.0, 4, 1)):
        run = specviz.generate(target, [1, 2, 3, 4], proposer=checked(target, head2, width=width), k=k,
                               temperature=temperature, max_new_tokens=24, chat=False, plan=False)
        assert len(run.token_ids) == 24
    assert CheckedHead.checks > 20


def test_the_rows_read_in_shared_passes_and_prefills(tiny):
    """A v2 run and a v1 run whose verify passes one BatchedTarget answers together (one ragged
    pass reads the layers either asks for) each get their own features; and a shared prefill kept
    for a v1 run is not taken by a v2 run, which needs the decoder layers too, while a second v2
    run on that prompt takes the first's."""
    target, head2, head1 = tiny
    CheckedHead.checks = 0
    shared = BatchedTarget(target)
    gathered = Gathered([shared.rounds], 2, 5.0)

    def make(i):
        return Decoder(target, PROMPTS[i], proposer=checked(target, head2 if i == 0 else head1), k=3,
                       temperature=1.0, seed=i, max_new_tokens=16, chat=False, plan=False, verifier=shared,
                       share_passes=True)
    try:
        run_together(make, 2, gathered)
    finally:
        gathered.close()
    assert shared.shared_passes > 0 and CheckedHead.checks > 6
    PREFILLS.clear()
    try:
        kw = dict(k=3, max_new_tokens=8, chat=False, share_prefill=True)
        for head in (head1, head2, head2):
            specviz.generate(target, PROMPTS[1], proposer=checked(target, head), **kw)
        assert PREFILLS.hits == 1
    finally:
        PREFILLS.clear()


# -- drafting ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("width, beam", [(1, 1), (3, 3)], ids=["chain", "tree"])
def test_greedy_equals_plain_greedy(tiny, width, beam):
    """Greedy runs with a randomly initialised v2 head, as a chain and as a tree (width 3, beam 3),
    give exactly the tokens of transformers' own greedy generate."""
    target, head2, _ = tiny
    for prompt in PROMPTS:
        for k in (2, 4):
            run = specviz.generate(target, prompt, proposer=HeadProposer(head2, target.model, width=width, beam=beam),
                                   k=k, max_new_tokens=24, chat=False, plan=False)
            assert run.token_ids == hf_greedy(target, prompt, 24)


def _context(target, head, temperature, k):
    dec = Decoder(target, PROMPTS[0], proposer=HeadProposer(head, target.model), k=k, temperature=temperature,
                  chat=False)
    dec.prefill()
    return ProposeContext(dec.ids, dec.last_logits, k, dec.sampling, len(PROMPTS[0]), last_hidden=dec.last_hidden)


def _q_along(proposer, ctx, path: list[int]) -> torch.Tensor:
    """The head's q after reading the root token and `path`, one step at a time on one row."""
    calls = proposer.calls
    with torch.inference_mode():
        states = tuple(s[None] for s in calls.root(ctx.last_hidden))
        for x in [ctx.ids[-1]] + path:
            states, logits = calls.many(states, [x])
    return ctx.sampling.display_probs(logits[0])


def test_every_tree_node_is_drafted_from_its_own_path(tiny):
    """Greedy tree, width 3, beam 2, K 4: each node's q, 0 off the subset, is the head's q after
    reading exactly that node's ancestors one by one (its own h and K/V, not a sibling's or a
    cousin's, though each depth ran as one batch); and the tree one wide is the chain."""
    target, head2, _ = tiny
    ctx = _context(target, head2, 0.0, 4)
    proposer = HeadProposer(head2, target.model, width=3, beam=2)
    tree = proposer.propose(ctx)
    assert [tree.depths.count(d) for d in (1, 2, 3, 4)] == [3, 6, 6, 6]
    off = [t for t in range(32) if t not in head2.vocab_ids.tolist()]
    for i in range(len(tree)):
        path = [tree.tokens[a] for a in tree.ancestors(i)[:-1]]
        q = tree.q_of(i)
        assert float(q[off].sum()) == 0 and abs(float(q.sum()) - 1) < 1e-5
        torch.testing.assert_close(q[head2.vocab_ids], _q_along(proposer, ctx, path), atol=1e-5, rtol=1e-5)
    chain = HeadProposer(head2, target.model, width=1, beam=1)
    assert chain.propose(ctx).tokens == chain._tree(ctx, ctx.last_hidden, ctx.ids[-1]).tokens


def test_sampled_chain_reports_the_q_each_token_was_drawn_from(tiny):
    """Under sampling the v2 head drafts a chain of K draws whatever its width; the q of token j is
    the head's q after reading tokens 1..j-1, the very ones drafted before it."""
    target, head2, _ = tiny
    ctx = _context(target, head2, 1.0, 4)
    proposer = HeadProposer(head2, target.model, width=3, beam=3)
    tree = proposer.propose(ctx)
    assert tree.is_chain and len(tree) == 4
    for j in range(4):
        want = torch.zeros(32)
        want[head2.vocab_ids] = _q_along(proposer, ctx, tree.tokens[:j]).float()
        torch.testing.assert_close(tree.q_of(j).float(), want, atol=1e-5, rtol=1e-5)


def test_a_round_of_several_runs_answers_each_as_alone(tiny):
    """The head's shared round (passes/rounds.py) given requests of several runs, with paths of
    different lengths (a chain's first step, a tree's second depth, another chain's second step),
    answers each with the states and logits its own call would give."""
    from specviz.passes.rounds import Slot

    target, head2, _ = tiny
    ctx = _context(target, head2, 0.0, 4)
    calls = HeadProposer(head2, target.model).calls
    with torch.inference_mode():
        root = tuple(s[None] for s in calls.root(ctx.last_hidden))
        one, _ = calls.many(root, [5])
        two = tuple(torch.cat([s, s]) for s in one)
        requests = [(root, [3]), (two, [7, 9]), (one, [11])]
        alone = [calls.many(*r) for r in requests]
    slots = [Slot(r) for r in requests]
    assert calls._batch(slots) == 3
    for slot, (states, logits) in zip(slots, alone):
        got_states, got_logits = slot.answer
        torch.testing.assert_close(got_logits, logits, atol=1e-5, rtol=1e-5)
        for a, b in zip(got_states, states):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# -- sampling follows the target -------------------------------------------------------------------
VOCAB, PROMPT, N, ALPHA = 6, [1, 2, 3], 600, 1e-4  # as tests/decoding/test_exactness.py checks v1
NUCLEUS = (0.7, 0.9)


@pytest.fixture(scope="module")
def peaked():
    """A 2-layer target whose p is peaked enough for top-p 0.9 to cut tokens, and an untrained v2
    head reading its layers 0 and 1 whose q covers tokens 0–3 only."""
    target = tiny_random(vocab_size=VOCAB, hidden_size=32, layers=2, heads=2, kv_heads=1, intermediate=64, seed=1)
    with torch.no_grad():
        target.model.lm_head.weight.mul_(10)
    return target, new_head2(target.model, torch.arange(4), seed=0, aux_layers=[0, 1], **SMALL)


def _sampled(peaked, tree: bool) -> tuple[float, Counter]:
    """χ² p-value of (t2, t3, t4) over N seeded runs (K = 2) against the target's exact joint, and
    every token's origin. A tree is two chains drawn independently from the head (TwoChains)."""
    target, head = peaked
    counts, origins = np.zeros((VOCAB,) * 3), Counter()
    for seed in range(N):
        proposer = HeadProposer(head, target.model)
        run = Decoder(target, PROMPT, proposer=TwoChains(proposer) if tree else proposer, k=2,
                      temperature=NUCLEUS[0], top_p=NUCLEUS[1], seed=seed, max_new_tokens=4, chat=False,
                      record=False, plan=False).run()
        counts[tuple(run.token_ids[1:])] += 1
        origins.update(run.origins)
    return chi_square_p_value(counts, exact_joint(target.model, PROMPT, 4, *NUCLEUS).sum(0)), origins


@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_sampled_tokens_follow_the_target(peaked, tree):
    """(t2, t3, t4) over N seeded runs at T = 0.7, top-p 0.9, drafted by the v2 head, follow the
    target's exact joint (χ² p > ALPHA), and the runs met accepted, resampled and bonus tokens,
    each at least once in 20 runs."""
    p, origins = _sampled(peaked, tree)
    assert p > ALPHA, p
    assert min(origins[FROM_DRAFT], origins[RESAMPLED], origins[BONUS]) >= N / 20, origins


@pytest.mark.parametrize("twin", list(twins.TWINS))
def test_the_check_fails_for_every_broken_rule(peaked, monkeypatch, twin):
    """With one of verify.py's rules swapped for a broken twin, the same check on the v2 head's
    tree rejects the output (χ² p < ALPHA): the check above can fail."""
    twins.install(monkeypatch, twin)
    p, _ = _sampled(peaked, True)
    assert p < ALPHA, p


# -- files, targets and price ------------------------------------------------------------------------
def test_save_and_load_round_trip(tiny, tmp_path):
    """A v2 head saved and loaded is a v2 head with the same config, weights and vocabulary, and
    drafts the same tokens; saved in bf16 (the default) it loads within bf16's rounding."""
    target, head2, _ = tiny
    exact, small = tmp_path / "exact.safetensors", tmp_path / "head2.safetensors"
    save_head(head2, exact, dtype=torch.float32)
    save_head(head2, small)
    back = load_head(exact)
    assert isinstance(back, DraftHead2) and back.cfg == head2.cfg and back.hidden_layers == (1, 2)
    for (name, a), (_, b) in zip(head2.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name
    for name, w in load_head(small).state_dict().items():
        torch.testing.assert_close(w, head2.state_dict()[name], atol=0.01, rtol=0.01)
    ctx = _context(target, head2, 0.0, 4)
    assert HeadProposer(back, target.model).propose(ctx).tokens == HeadProposer(head2, target.model).propose(ctx).tokens


def test_v1_still_loads_as_v1(tiny, tmp_path):
    """The shipped head and a v1 head saved now load as v1 (format 1), reading the final norm alone."""
    shipped = load_head()
    assert type(shipped) is DraftHead and shipped.hidden_layers == () and DEFAULT_PATH.is_file()
    path = tmp_path / "v1.safetensors"
    save_head(tiny[2], path)
    assert type(load_head(path)) is DraftHead
    from safetensors import safe_open

    with safe_open(str(tmp_path / "v1.safetensors"), framework="pt") as f:
        assert f.metadata()["format"] == "specviz-draft-head/1"
    save_head(tiny[1], tmp_path / "v2.safetensors")
    with safe_open(str(tmp_path / "v2.safetensors"), framework="pt") as f:
        assert f.metadata()["format"] == FORMAT2


def test_wrong_shape_says_what_to_do(tiny, tmp_path):
    """A v2 file whose tensors do not match its config raises ModelLoadError naming the file and
    the script that writes v2 heads."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    path = tmp_path / "head2.safetensors"
    save_head(tiny[1], path)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    tensors = load_file(str(path))
    tensors["fuse.weight"] = tensors["fuse.weight"][:, :-1].contiguous()
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(ModelLoadError, match=r"head2\.safetensors.*shape.*training\.head2_train"):
        load_head(path)


def test_head_refuses_another_target(tiny):
    """A v2 head beside a target of another size, or one without the decoder layers it reads: a
    ValueError that names both."""
    _, head2, _ = tiny
    other = tiny_random(vocab_size=48, layers=4)
    with pytest.raises(ValueError, match=r"hidden size 64 and vocabulary 32.*this target has 64 and 48"):
        check_target(head2, other.model, "head2.safetensors")
    shallow = tiny_random(vocab_size=32, layers=2)
    with pytest.raises(ValueError, match=r"reads decoder layers \[1, 2\].*this target has 2 layers.*head2_train"):
        check_target(head2, shallow.model, "head2.safetensors")


def test_v2_is_priced_as_its_own_head(tiny, tmp_path, monkeypatch):
    """Beside a target big enough to profile, building a v2 head times its greedy tree (a real
    draft from root features [low ; mid ; f]) under a work name keyed by its file's content, so
    v1 and v2 files get a price each."""
    from specviz.pricing import costs
    from specviz.proposers import head as head_mod

    target, head2, head1 = tiny
    works = []

    def timed(model, work, run):
        run()  # the draft the price is for must run
        works.append(work)
        return SimpleNamespace(cost=0.3)

    monkeypatch.setattr(head_mod, "PROFILE_MIN_PARAMS", 0)
    monkeypatch.setattr(costs, "work_cost", timed)
    paths = {}
    for name, head in (("v1", head1), ("v2", head2)):
        paths[name] = tmp_path / f"{name}.safetensors"
        save_head(head, paths[name])
        built = HeadProposer.build(target, path=paths[name])
        assert built.call_cost == pytest.approx(0.3 / head_mod.PRICED_DEPTH)
        assert built.v2 == (name == "v2")
    digests = [hashlib.sha256(paths[n].read_bytes()).hexdigest()[:16] for n in ("v1", "v2")]
    assert [w.split()[1] for w in works] == digests and digests[0] != digests[1]


def test_real_size_has_five_million_parameters():
    """At the bundled target's sizes (d = 576, layers 2 and 15, 4 heads × 64, MLP 1536) the v2 head
    has about 4.9 M trained parameters, the LM head and embedding not among them."""
    from specviz.head.v2 import HeadConfig2

    head = DraftHead2(HeadConfig2(hidden=576, target_vocab=49152, aux_layers=[2, 15]), torch.arange(12288))
    n = sum(p.numel() for p in head.parameters())
    assert 4.5e6 < n < 8e6 and head.feature_width == 3 * 576


@pytest.mark.bundled
def test_a_v2_head_on_the_bundled_target(bundled_target):
    """A random v2 head sized for the bundled target (layers 2 and 15, read through its fast
    forward where it runs one): fed the rows hidden_states gives from scratch at every proposal, and
    its greedy tree gives exactly plain greedy's tokens."""
    head = new_head2(bundled_target.model, torch.arange(12288), seed=0)
    assert head.hidden_layers == (2, 15)
    check_target(head, bundled_target.model, "head2.safetensors")
    CheckedHead.checks = 0
    prompt = "Write a Python function that adds two numbers."
    plain = specviz.generate(bundled_target, prompt, method="ar", max_new_tokens=16, record=False)
    run = specviz.generate(bundled_target, prompt, proposer=checked(bundled_target, head.eval()), k=4,
                           max_new_tokens=16, record=False, plan=False)
    assert run.token_ids == plain.token_ids and CheckedHead.checks > 2
