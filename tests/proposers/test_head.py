"""The project's draft head: exact under greedy, fed the right hidden states, loaded safely.

Its exactness under sampling, chain and tree, is checked with the other proposers in test_exactness.py.
"""
import hashlib

import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.head.model import DEFAULT_PATH, load_head, save_head
from specviz.loading.loader import ModelLoadError, tiny_random
from specviz.proposers.base import ProposeContext
from specviz.proposers.head import HeadProposer
from specviz.training.head_data import collect, vocab_subset
from specviz.training.head_fit import new_head, train

PROMPT = [1, 2, 3]
SUBSET = 4  # of the tiny vocabulary's 6 tokens: q is 0 on the other two


class CheckedHeadProposer(HeadProposer):
    """Checks, at every proposal, that the hidden state the engine hands over (ctx.last_hidden) is
    the one its state implies.

    1. Through the target's LM head it gives ctx.last_logits (the row the newest token came from).
    2. It equals the target's final-norm output at that position computed from scratch, in one
       plain pass over the committed tokens (so no stale or rejected row was kept).
    """
    checks = 0

    def propose(self, ctx):
        model = self.target_model
        with torch.inference_mode():
            logits = model.get_output_embeddings()(ctx.last_hidden)[: ctx.last_logits.shape[-1]]
            scratch = model.base_model(torch.tensor([ctx.ids[:-1]])).last_hidden_state[0, -1]
        torch.testing.assert_close(logits, ctx.last_logits, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(ctx.last_hidden, scratch, atol=1e-4, rtol=1e-4)
        type(self).checks += 1
        return super().propose(ctx)


def _checked(target, head):
    proposer = CheckedHeadProposer(head, target.model)
    proposer.target_model = target.model
    return proposer


@pytest.fixture(scope="module")
def tiny_head():
    """A tiny target (6 tokens) and a head trained on its samples for a few seconds."""
    torch.set_num_threads(1)
    target = tiny_random(vocab_size=6, seed=3)
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(0, 6, (int(n),), generator=gen).tolist()
               for n in torch.randint(2, 8, (32,), generator=gen)]
    seqs = collect(target.model, prompts, max_new=16, temperature=1.0, batch=16, seed=0, eos=set(), log=lambda m: None)
    head = new_head(target.model, vocab_subset(seqs, SUBSET, 6), seed=0, intermediate=64)
    train(head, seqs, target.model, steps=20, batch=64, lr=3e-3, log=lambda m: None)
    return target, head


def test_tiny_head_is_fed_the_committed_hidden_states(tiny_head):
    """Greedy and sampled runs: every proposal passes CheckedHeadProposer's two checks."""
    target, head = tiny_head
    CheckedHeadProposer.checks = 0
    for temperature, k in ((0.0, 3), (1.0, 2), (1.0, 5)):
        run = specviz.generate(target, [1, 2, 3, 4], proposer=_checked(target, head), k=k,
                               temperature=temperature, max_new_tokens=30, chat=False)
        assert len(run.token_ids) == 30
    assert CheckedHeadProposer.checks > 20


def test_tiny_head_q_is_zero_off_its_subset(tiny_head):
    """The trace's q comes from the head: it sums to 1 over the subset and is 0 elsewhere."""
    target, head = tiny_head
    proposer = HeadProposer(head, target.model)
    dec = Decoder(target, PROMPT, proposer=proposer, k=3, temperature=1.0, chat=False)
    dec.prefill()
    tree = proposer.propose(ProposeContext(dec.ids, dec.last_logits, 3, dec.sampling, len(PROMPT),
                                           last_hidden=dec.last_hidden))
    off = [t for t in range(6) if t not in head.vocab_ids.tolist()]
    for q, x in zip(tree.q, tree.tokens):
        assert abs(float(q.sum()) - 1) < 1e-5 and float(q[off].sum()) == 0 and q[x] > 0


def _ctx(target, head, temperature, k):
    """A proposer on the tiny head and the context of its first proposal after PROMPT's prefill."""
    dec = Decoder(target, PROMPT, proposer=HeadProposer(head, target.model), k=k, temperature=temperature, chat=False)
    dec.prefill()
    return ProposeContext(dec.ids, dec.last_logits, k, dec.sampling, len(PROMPT), last_hidden=dec.last_hidden)


def _path_score(tree, i):
    score = 1.0
    for a in tree.ancestors(i):
        score *= float(tree.q_of(a)[tree.tokens[a]])
    return score


def test_greedy_head_tree_grows_the_likeliest_nodes(tiny_head):
    """Greedy, width 3, beam 2, K 3: depth 1 holds the head's top 3 tokens in order of q; at each
    deeper level exactly the 2 likeliest nodes of the level above (product of q along the path)
    have children, 3 each, ranked by q (Source branch 0, 1, 2); siblings share their parent's q."""
    target, head = tiny_head
    ctx = _ctx(target, head, 0.0, 3)
    tree = HeadProposer(head, target.model, width=3, beam=2).propose(ctx)
    depths = tree.depths
    assert [depths.count(d) for d in (1, 2, 3)] == [3, 6, 6]
    with torch.inference_mode():
        _, logits = HeadProposer(head, target.model).calls.one(ctx.last_hidden, ctx.ids[-1])
    first = head.vocab_ids[torch.softmax(logits, -1).topk(3).indices].tolist()
    assert [tree.tokens[i] for i in range(len(tree)) if depths[i] == 1] == first
    for d in (1, 2):
        level = [i for i in range(len(tree)) if depths[i] == d]
        expanded = sorted({tree.parents[i] for i in range(len(tree)) if depths[i] == d + 1})
        likeliest = sorted(sorted(level, key=lambda i: -_path_score(tree, i))[:2])
        assert expanded == likeliest
    for par in {-1, *tree.parents}:
        kids = tree.children(par)
        qs = [float(tree.q_of(c)[tree.tokens[c]]) for c in kids]
        assert [tree.source_of(c).branch for c in kids] == [0, 1, 2]
        assert qs == sorted(qs, reverse=True) and all(tree.q_of(c) is tree.q_of(kids[0]) for c in kids)


def test_a_tree_one_wide_is_the_chain(tiny_head):
    """Width 1 and beam 1 drafts the chain the head drafts token by token, from the same step."""
    target, head = tiny_head
    ctx = _ctx(target, head, 0.0, 4)
    chain = HeadProposer(head, target.model, width=1, beam=1).propose(ctx)
    tree = HeadProposer(head, target.model, width=1, beam=1)._tree(ctx, ctx.last_hidden, ctx.ids[-1])
    assert tree.is_chain and tree.tokens == chain.tokens


def test_sampling_keeps_the_heads_chain(tiny_head):
    """Under sampling the head drafts a chain of K draws, whatever its width: a top-b pick is not a
    draw from q, so no tree."""
    target, head = tiny_head
    tree = HeadProposer(head, target.model, width=3, beam=3).propose(_ctx(target, head, 1.0, 4))
    assert tree.is_chain and len(tree) == 4


def test_greedy_head_tree_is_lossless(tiny_head):
    """Greedy runs with the head's tree (width 3, beam 2) give plain greedy's tokens on the tiny
    target, and its choices beyond the first were accepted somewhere (the tree was used)."""
    target, head = tiny_head
    used = 0
    for prompt in ([1, 2, 3], [4, 0, 5, 1], [2, 2]):
        plain = specviz.generate(target, prompt, method="ar", max_new_tokens=30, chat=False, record=False)
        run = specviz.generate(target, prompt, proposer=HeadProposer(head, target.model, width=3, beam=2),
                               k=3, max_new_tokens=30, chat=False, plan=False)
        assert run.token_ids == plain.token_ids
        used += sum(1 for c in run.cycles for i in c.accepted if c.nodes[i].branch > 0)
    assert used > 0


def test_bad_tree_sizes_are_refused(tiny_head):
    """Width or beam below 1 is a ValueError that names both."""
    target, head = tiny_head
    with pytest.raises(ValueError, match="width and beam of at least 1"):
        HeadProposer(head, target.model, width=0)


# -- files and targets ---------------------------------------------------------------------------
def test_shipped_head_loads_offline():
    """assets/head/head.safetensors loads without network and is sized for the bundled target."""
    head = load_head()
    assert (head.cfg.hidden, head.cfg.target_vocab) == (576, 49152)
    assert DEFAULT_PATH.stat().st_size < 12e6 and DEFAULT_PATH.with_name("card.json").is_file()


def test_missing_or_corrupt_file_says_what_to_do(tmp_path):
    """A missing file and a file of garbage both raise ModelLoadError naming the file and the fix."""
    with pytest.raises(ModelLoadError, match=r"no draft head at .*nothing\.safetensors.*training\.head_train"):
        load_head(tmp_path / "nothing.safetensors")
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x00not a safetensors file" * 10)
    with pytest.raises(ModelLoadError, match=r"bad\.safetensors.*training\.head_train"):
        load_head(bad)


def test_wrong_shape_says_what_to_do(tiny_head, tmp_path):
    """A file whose tensors do not match its config raises ModelLoadError naming the file."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    target, head = tiny_head
    path = tmp_path / "head.safetensors"
    save_head(head, path)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    tensors = load_file(str(path))
    tensors["fc.weight"] = tensors["fc.weight"][:, :-1].contiguous()
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(ModelLoadError, match=r"head\.safetensors.*shape.*training\.head_train"):
        load_head(path)


def test_head_refuses_another_target():
    """The shipped head on a target it was not trained for: a ValueError naming both sizes."""
    with pytest.raises(ValueError, match=r"hidden size 576 and vocabulary 49152.*this target has 64 and 32"):
        specviz.generate(tiny_random(), [1, 2, 3], method="head", chat=False, max_new_tokens=4)
    with pytest.raises(ValueError, match="do not pass a draft model"):
        HeadProposer.build(tiny_random(), draft=tiny_random())


# -- the bundled target ----------------------------------------------------------------------------
@pytest.mark.bundled
@pytest.mark.parametrize("k", [2, 4])
def test_head_greedy_equals_plain_greedy(bundled_target, k):
    """Greedy speculative decoding with the shipped head gives exactly plain greedy's tokens."""
    prompts = ["What is the capital of France?", "Write a Python function that adds two numbers.",
               "Give me three tips for a good night's sleep."]
    for i, prompt in enumerate(prompts):
        plain = specviz.generate(bundled_target, prompt, method="ar", max_new_tokens=24, record=False)
        given = dict(method="head") if i != 1 else dict(
            proposer=_checked(bundled_target, HeadProposer.build(bundled_target).head))
        run = specviz.generate(bundled_target, prompt, **given, k=k, max_new_tokens=24, record=False)
        assert run.token_ids == plain.token_ids
        assert run.metrics["accepted_tokens"] > 0  # the head did draft something the target kept


# -- wiring: the head is the bundled target's default draft ---------------------------------------
def test_head_is_the_bundled_targets_default_draft():
    """The draft picker offers the head first for the bundled target only, and the app's default
    settings for the draft-model method run method 'head' without loading a draft model."""
    from specviz.ui.runtime.presets import draft_choices
    from specviz.ui.runtime.settings import from_inputs

    assert draft_choices("bundled")[0][1] == "head"
    assert "head" not in [v for _, v in draft_choices("HuggingFaceTB/SmolLM2-360M-Instruct")]
    assert "head" not in [v for _, v in draft_choices("tiny-random:shares-bundled-tokenizer")]
    s = from_inputs({"prompt": "Hello", "method": "draft"})
    assert (s.proposer, s.draft, s.method, s.draft_spec) == ("draft", "head", "head", None)
    assert s.decode().method == "head" and "trained draft head" in s.describe()
    other = from_inputs({"prompt": "Hello", "method": "draft", "draft": "bundled"})
    assert (other.method, other.draft_spec) == ("draft", "bundled")
    assert from_inputs({"prompt": "Hello", "method": "pld"}).draft_spec is None


def test_cli_draft_head_means_the_head():
    """`--method draft --draft head` decodes with method 'head' and loads no draft model."""
    from specviz import cli

    args = cli.build_parser().parse_args(["generate", "--method", "draft", "--draft", "head", "--prompt", "hi"])
    assert cli._decode_options(args)["method"] == "head" and cli._draft_spec(args) is None
    args = cli.build_parser().parse_args(["generate", "--method", "draft", "--draft", "bundled", "--prompt", "hi"])
    assert cli._decode_options(args)["method"] == "draft" and cli._draft_spec(args) == "bundled"


def test_compare_row_with_draft_head_uses_the_head():
    """A Compare row (bundled, draft, head) becomes a method-'head' configuration."""
    from specviz.measure.comparison import parse_rows

    (config,) = parse_rows([["bundled", "draft", "head", 4, 0.0]])
    assert (config.method, config.draft) == ("head", None)


@pytest.mark.bundled
def test_the_heads_call_is_priced_on_this_machine(bundled_target, tiny_head):
    """Beside a real target the head's call cost is its greedy tree's calls timed here, in one-token
    passes (costs.work_cost, cached: building it again gives the same number, so a seed gives the
    same run), and the planner of a hybrid run prices K with it; beside a target too small to
    profile it keeps the class's prior."""
    from specviz.passes import speedups
    from specviz.pricing import costs
    from specviz.proposers import head as head_mod
    from specviz.proposers.hybrid import HybridProposer

    built = HeadProposer.build(bundled_target)
    dtype = speedups.draft_dtype(bundled_target.model, bundled_target.dtype)
    assert built.dtype == dtype and next(built.head.parameters()).dtype == dtype
    digest = head_mod._DIGESTS[(str(DEFAULT_PATH), str(dtype), str(bundled_target.device))]
    assert digest == hashlib.sha256(DEFAULT_PATH.read_bytes()).hexdigest()[:16]  # its content, not where it lies
    work = (f"head {digest} {str(dtype).removeprefix('torch.')} width {built.width} beam {built.beam} "
            f"depth {head_mod.PRICED_DEPTH}")
    timed = costs.work_cost(bundled_target, work, lambda: pytest.fail("the first build timed it already"))
    assert built.call_cost == pytest.approx(timed.cost / head_mod.PRICED_DEPTH)
    assert 0 < built.call_cost < 1 and timed.pass_s == costs.profile(bundled_target).pass_s
    assert HeadProposer.build(bundled_target).call_cost == built.call_cost
    assert HybridProposer.build(bundled_target).call_cost == built.call_cost
    decoder = Decoder(bundled_target, "Hello", method="hybrid", max_new_tokens=2)
    assert decoder.planner.c == built.call_cost
    target, head = tiny_head
    assert HeadProposer(head, target.model)._priced(target, "tiny") == HeadProposer.call_cost


@pytest.mark.bundled
def test_the_app_prices_the_head_when_it_loads_the_bundled_model(bundled_target, monkeypatch):
    """The app's model pool builds the trained head when it loads the bundled model (which times
    the head's step once, so the first hybrid Step need not), not when it loads another model; and
    a head that cannot be built does not fail the load (the Step that asks for it says why)."""
    from specviz.ui.runtime import state

    built, real = [], HeadProposer.build.__func__

    def recording(cls, target, *a, **kw):
        built.append(target)
        return real(cls, target, *a, **kw)

    monkeypatch.setattr(HeadProposer, "build", classmethod(recording))
    tiny = tiny_random()
    cache = state.ModelPool(loader=lambda spec, **kw: bundled_target if spec == "bundled" else tiny)
    assert cache.get("bundled") is bundled_target and built == [bundled_target]
    assert cache.get("tiny-random") is tiny and built == [bundled_target]

    def broken(cls, target, *a, **kw):
        raise ModelLoadError("no draft head at assets/head/head.safetensors")

    monkeypatch.setattr(HeadProposer, "build", classmethod(broken))
    assert state.ModelPool(loader=lambda spec, **kw: bundled_target).get("bundled") is bundled_target


def test_training_data_is_cached_per_prompt_file_and_pass(tmp_path, monkeypatch):
    """build_data answers each prompt file greedily plus `samples` sampled passes, caches each
    (file, pass) on its own, and on a second call with one more file generates only that file's."""
    from types import SimpleNamespace

    from specviz.training import head_data, head_train

    tiny = tiny_random(vocab_size=6, seed=3)
    target = SimpleNamespace(model=tiny.model, eos_ids=set(),
                             encode=lambda text: [ord(c) % 6 for c in text[:6]])
    first, second = tmp_path / "prompts_a.txt", tmp_path / "prompts_b.txt"
    first.write_text("# a comment\nabc\ndefg\n", encoding="utf-8")
    second.write_text("hij\n", encoding="utf-8")
    calls = []
    real_collect = head_data.collect
    monkeypatch.setattr(head_data, "collect", lambda model, prompts, *a, **kw: calls.append(len(prompts))
                        or real_collect(model, prompts, *a, **kw))
    args = head_train.parse_args(["--prompts", str(first), "--samples", "2", "--max-new-tokens", "4",
                                  "--data", str(tmp_path / "cache")])
    seqs = head_data.build_data(target, args, log=lambda m: None)
    assert calls == [2, 2, 2] and len(seqs) == 6  # greedy, then two sampled passes with their own seeds
    assert len(list((tmp_path / "cache").glob("prompts_a-*.pt"))) == 3
    assert (seqs[2]["tokens"].tolist() != seqs[4]["tokens"].tolist()
            or seqs[3]["tokens"].tolist() != seqs[5]["tokens"].tolist())

    calls.clear()
    args.prompts = [str(first), str(second)]
    again = head_data.build_data(target, args, log=lambda m: None)
    assert calls == [1, 1, 1]  # only the new file was decoded
    assert [s["tokens"].tolist() for s in again[:6]] == [s["tokens"].tolist() for s in seqs]
    assert len(again) == 9
