"""Every family the picker offers decodes exactly: tiny random twins of Llama, Qwen2, Gemma 3 and GPT-2.

Twins come from each family's own config class (specviz/models/families.py). Gemma 3's twin has a
16-token sliding window beside a global layer, and every run here goes several windows past it,
because that is where a sliding layer's cache, its rollback and its tree mask can go wrong.
"""
from __future__ import annotations

import functools

import pytest
import torch
from scipy.stats import chisquare
from transformers import DynamicCache

import specviz
import specviz.decoding.verify as verify_mod
import specviz.passes.kvcache as kvcache_mod
from specviz.drafting.tree import DraftTree
from specviz.loading.loader import ModelLoadError, TokenizerMismatch, load
from specviz.measure.comparison import Comparison, Config, Shared
from specviz.models.families import FAMILIES, derive_draft, family_of, tiny_random
from specviz.passes.kvcache import cache_len, new_cache, rollback
from specviz.proposers.layer_skip import self_draft
from tests.helpers.drafts import drafted
from tests.helpers.tiny import hf_greedy, word_tokenizer

TESTED = ("llama", "qwen2", "gemma3", "gpt2")  # families with twin tests below; presets must stay inside
METHODS = ("ar", "draft", "pld", "logitspec", "layerskip")  # "head" fits the bundled model only
WINDOW = 16  # the Gemma 3 twin's sliding window (the real one is 512)
VOCAB, NEW = 64, 60
# LogitSpec at the paper's shape (lone candidates ride, 1-gram matches count): trees every cycle
TREE_KNOBS = dict(top_k=8, capacity=32, min_ngram=1, lone_cands=True)
ALPHA = 1e-3  # "follows p" is rejected below this p-value; seeds are fixed, so no flakiness


@functools.cache
def twin(family: str):
    """(target, its smaller same-vocabulary draft), both loaded from their spec strings."""
    spec = f"tiny-random:family={family},vocab={VOCAB},layers=3,seed=1"
    return load(spec), load(spec + ",draft=1")


@functools.cache
def prompt() -> list[int]:
    """36 ids with a repeated half, so prompt lookup and LogitSpec find n-grams to copy."""
    ids = torch.randint(0, VOCAB, (24,), generator=torch.Generator().manual_seed(5)).tolist()
    return ids + ids[:12]


@functools.cache
def reference(family: str) -> list[int]:
    return hf_greedy(twin(family)[0], prompt(), NEW)


def has_siblings(run) -> bool:
    return any(len({n.parent for n in c.nodes}) < len(c.nodes) for c in run.cycles)


CONFIGS = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "gemma3": "Gemma3TextConfig", "gpt2": "GPT2Config"}


@pytest.mark.parametrize("family", TESTED)
def test_twin_is_its_family_with_a_smaller_same_vocabulary_draft(family):
    """A twin is built from its family's own config class (Gemma 3's with sliding and global layers);
    its draft has fewer layers and the same vocabulary."""
    target, draft = twin(family)
    assert type(target.model.config).__name__ == CONFIGS[family]
    assert draft.vocab_size == target.vocab_size and draft.n_params < target.n_params
    if family == "gemma3":
        assert set(target.model.config.layer_types) == {"sliding_attention", "full_attention"}
        assert target.model.config.sliding_window == WINDOW


@pytest.mark.parametrize("spec", ["tiny-random:family=llama,window=8", "tiny-random:family=mamba",
                                  "tiny-random:family=gpt2,hidden=30,heads=4"])
def test_twin_specs_a_family_cannot_honour_are_refused_clearly(spec):
    """A twin spec its family cannot build raises ModelLoadError that quotes the spec, not a config trace."""
    with pytest.raises(ModelLoadError, match="tiny-random:family="):
        load(spec)


# -- greedy: every method on every family equals transformers' generate --------------------------
MODEL_DRAFTS = ("draft", "layerskip")  # a draft call costing about the target's (c ≈ 1, 2/3): the planner sends none


@pytest.mark.parametrize("method", [pytest.param(m, marks=pytest.mark.drafts) if m in MODEL_DRAFTS + ("logitspec",)
                                    else m for m in METHODS])
@pytest.mark.parametrize("family", TESTED)
def test_greedy_equals_hf_generate_past_the_window(family, method):
    """Greedy output of `method` on the family's twin equals HF generate, token for token, over a
    prompt plus output six sliding windows long; LogitSpec's cycles include real trees (siblings);
    the draft model and layer skip send their drafts (plan=False) and some are verified."""
    target, draft = twin(family)
    assert len(prompt()) + NEW >= 6 * WINDOW
    knobs = TREE_KNOBS if method == "logitspec" else dict(plan=False) if method in MODEL_DRAFTS else {}
    run = specviz.generate(target, prompt(), method=method, draft=draft if method == "draft" else None,
                           k=6, max_new_tokens=NEW, chat=False, **knobs)
    assert run.token_ids == reference(family)
    if method == "logitspec":
        assert has_siblings(run), "no cycle verified a tree with siblings"
    if method in MODEL_DRAFTS:
        assert drafted(run) > 0, "no draft node was sent: the check ran on plain decoding"


# -- sampling: one seeded check per family, and the broken rule it must catch -------------------
SAMPLE_V, SAMPLE_T, SAMPLE_N = 6, 0.35, 800  # a peaked p and a noisy q make rejections frequent


@functools.cache
def sampling_pair(family: str):
    target = tiny_random(family=family, vocab_size=SAMPLE_V, layers=2, seed=3)
    ids = torch.randint(0, SAMPLE_V, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    return target, derive_draft(target, noise=4.0, layers=1, seed=4), ids


@torch.inference_mode()
def exact_second_token(target, ids):
    """p(t2) = Σ p(t1) p(t2 | t1), by full forwards with no cache (the model's own masks), in numpy
    float64 from tests/helpers/reference.py: the engine's own softmax is not its expectation."""
    import numpy as np

    from tests.helpers.reference import nucleus

    p1 = nucleus(target.model(torch.tensor([ids])).logits[0, -1].double().numpy(), SAMPLE_T, 1.0)
    rows = target.model(torch.tensor([ids + [t] for t in range(SAMPLE_V)])).logits[:, -1].double().numpy()
    return p1 @ np.stack([nucleus(row, SAMPLE_T, 1.0) for row in rows])


def second_token_pvalue(family: str) -> float:
    """Chi-square p-value of the engine's second new token (the first a draft-verify cycle makes)."""
    target, draft, ids = sampling_pair(family)
    counts = torch.zeros(SAMPLE_V, dtype=torch.float64)
    for seed in range(SAMPLE_N):
        run = specviz.generate(target, ids, method="draft", draft=draft, k=2, temperature=SAMPLE_T,
                               seed=seed, max_new_tokens=3, chat=False, plan=False)
        counts[run.token_ids[1]] += 1
    exact = exact_second_token(target, ids)
    return float(chisquare(counts.numpy(), exact / exact.sum() * SAMPLE_N).pvalue)


@pytest.mark.parametrize("family", TESTED)
def test_sampling_follows_target(family):
    """With a poor draft, the engine's sampled token follows the target's distribution (χ², N = 800),
    on a 40-token context: past Gemma 3's window."""
    assert second_token_pvalue(family) > ALPHA


@pytest.mark.parametrize("family", TESTED)
def test_sampling_check_catches_broken_residual(family, monkeypatch):
    """The same check fails when, after a rejection, the token is drawn from p instead of
    norm(max(0, p − q)): the check above is strong enough to see a wrong rule on this family."""
    monkeypatch.setattr(verify_mod, "residual", lambda p, q, x: p)
    assert second_token_pvalue(family) < ALPHA


# -- rollback: after accept and reject cycles the cache equals a fresh prefill --------------------
def random_tree(gen: torch.Generator, chain: bool) -> DraftTree:
    """Up to 4 levels; each node of the first two levels may get a second child."""
    if chain:
        return DraftTree.chain(torch.randint(0, VOCAB, (int(torch.randint(1, 5, (1,), generator=gen)),),
                                             generator=gen).tolist())
    tokens, parents, frontier = [], [], [-1]
    for depth in range(4):
        grown = []
        for par in frontier:
            for _ in range(2 if depth < 2 else 1):
                tokens.append(int(torch.randint(0, VOCAB, (1,), generator=gen)))
                parents.append(par)
                grown.append(len(tokens) - 1)
        frontier = grown[:2]
    return DraftTree(tokens, parents)


@torch.inference_mode()
def cycles(model, cache, cycles_n: int = 14, trees: bool = True, seed: int = 0, tree_cut=None) -> list[int]:
    """Verify passes as the engine runs them (trees every other cycle), each followed by the
    rollback to a random accepted path, possibly empty; returns the committed ids. A tree cycle is
    cut by `tree_cut(cache, n, path)`, by default rollback with the list of positions kept."""
    gen = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, VOCAB, (20,), generator=gen).tolist()
    model(input_ids=torch.tensor([seq[:-1]]), past_key_values=cache, use_cache=True)
    for c in range(cycles_n):
        past = cache_len(cache)
        tree = random_tree(gen, chain=not trees or c % 2 == 1)
        mask = None if tree.is_chain else tree.model_mask(cache, model.config, torch.float32)
        model(input_ids=torch.tensor([[seq[-1]] + tree.tokens]), past_key_values=cache, use_cache=True,
              attention_mask=mask, position_ids=None if tree.is_chain else tree.position_ids(past))
        end = int(torch.randint(-1, len(tree), (1,), generator=gen))  # -1: the first draft is rejected
        path = tree.ancestors(end) if end >= 0 else []
        if tree.is_chain:
            rollback(cache, past + 1 + len(path))
        elif tree_cut is not None:
            tree_cut(cache, past + 1, [past + 1 + i for i in path])
        else:
            rollback(cache, list(range(past + 1)) + [past + 1 + i for i in path])
        seq += [tree.tokens[i] for i in path] + [int(torch.randint(0, VOCAB, (1,), generator=gen))]
    return seq


@torch.inference_mode()
def cached_vs_fresh(model, cache, seq) -> float:
    """Largest logit difference between the rolled-back cache and a prefill of `seq` from nothing."""
    got = model(input_ids=torch.tensor([seq[-1:]]), past_key_values=cache, use_cache=True).logits[0, -1]
    fresh = model(input_ids=torch.tensor([seq]), use_cache=False).logits[0, -1]
    return float((got - fresh).abs().max())


@pytest.mark.parametrize("family", TESTED)
def test_rolled_back_cache_equals_fresh_prefill(family):
    """After 14 tree and chain cycles of accepts and rejects, the target's cache gives the logits
    of a fresh prefill (max diff ≤ 1e-4), the context having grown past several windows."""
    model = twin(family)[0].model
    cache = new_cache()
    seq = cycles(model, cache)
    assert len(seq) >= 3 * WINDOW
    assert cached_vs_fresh(model, cache, seq) <= 1e-4


def recording_sliding_cache(model) -> DynamicCache:
    """transformers' own hybrid cache: sliding layers keep only their window (plus the last pass)."""
    cache = DynamicCache(config=model.config)
    cache.activate_past_recording()
    return cache


@pytest.mark.parametrize("family, recording", [*((f, False) for f in TESTED), ("gemma3", True)],
                         ids=[*(f"ours-{f}" for f in TESTED), "transformers-sliding-gemma3"])  # only Gemma 3 slides
def test_moving_only_the_accepted_path_equals_fresh_prefill(family, recording):
    """kvcache.keep_path, which moves a tree cycle's accepted path next to the prefix in place
    instead of gathering every position, gives after 14 cycles the logits of a fresh prefill and the
    same cache as the general rollback; transformers' own sliding cache takes the general way."""
    model = twin(family)[0].model
    make = (lambda: recording_sliding_cache(model)) if recording else new_cache
    fast, slow = make(), make()
    seq = cycles(model, fast, seed=3, tree_cut=kvcache_mod.keep_path)
    assert cycles(model, slow, seed=3) == seq
    for a, b in zip(fast.layers, slow.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert cached_vs_fresh(model, fast, seq) <= 1e-4  # (this appends a position to `fast`)


def test_rollback_of_layers_with_different_lengths():
    """transformers' Gemma 3 cache, whose sliding layers hold only their window while global layers
    hold everything, rolls back through tree and chain cycles to the logits of a fresh prefill."""
    model = twin("gemma3")[0].model
    cache = recording_sliding_cache(model)
    seq = cycles(model, cache, seed=1)
    held = {layer.keys.shape[-2] for layer in cache.layers}
    assert held == {WINDOW - 1, len(seq) - 1}, held
    assert cached_vs_fresh(model, cache, seq) <= 1e-4


@pytest.mark.parametrize("family", ["gemma3", "gpt2"])
def test_layer_skip_cache_with_empty_layers_rolls_back(family):
    """A layer-skip draft's cache, where skipped layers stay empty, rolls back through chain cycles
    to the logits of a fresh prefill of the same skipping model."""
    shell = self_draft(twin(family)[0].model, [0, 2])
    cache = new_cache()
    seq = cycles(shell, cache, trees=False, seed=2)
    assert sorted(layer.get_seq_length() for layer in cache.layers) == [0, len(seq) - 1, len(seq) - 1]
    assert cached_vs_fresh(shell, cache, seq) <= 1e-4


def test_rollback_check_catches_a_tree_mask_without_the_window(monkeypatch):
    """The rollback check fails on Gemma 3 when tree masks leave the sliding window out: a tree
    verified that way attends to keys its sliding layers must not see."""
    real = kvcache_mod.layer_kinds  # only tree masks read it: DraftTree.model_mask
    monkeypatch.setattr(kvcache_mod, "layer_kinds", lambda config: [(kind, None) for kind, _ in real(config)])
    model = twin("gemma3")[0].model
    cache = new_cache()
    seq = cycles(model, cache)
    assert cached_vs_fresh(model, cache, seq) > 1e-3


def test_sliding_cache_that_dropped_positions_is_refused_clearly():
    """A transformers sliding cache that does not record its past cannot go back once full: rollback
    says so and what to do, instead of transformers' RuntimeError from crop."""
    model = twin("gemma3")[0].model
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([prompt()]), past_key_values=cache, use_cache=True)
    with pytest.raises(ValueError, match="new_cache"):
        rollback(cache, len(prompt()) - 3)


def test_unknown_layer_kind_gets_a_clear_error():
    """A tree over layers of a kind the mask does not know is refused with advice, not a wrong mask."""
    config = type("Config", (), {"layer_types": ["chunked_attention"], "sliding_window": None,
                                 "num_hidden_layers": 1})()
    with pytest.raises(ValueError, match="chain method"):
        DraftTree([1, 2], [-1, -1]).model_mask(None, config, torch.float32)


# -- pairs --------------------------------------------------------------------------------------
def padded(model, extra: int):
    """A copy of `model` with `extra` padding rows in its embeddings and head (as Qwen2.5 7B's 152064
    against 0.5B's 151936 over the same tokenizer)."""
    copy = derive_draft(model)
    copy.model.resize_token_embeddings(model.vocab_size + extra, mean_resizing=False)
    copy.vocab_size += extra
    copy.name = f"{model.name}+pad{extra}"
    return copy


def test_target_and_draft_with_different_embedding_sizes():
    """A padded Qwen2 target with an unpadded draft, and the other way round, decode exactly what
    greedy decoding of the unpadded target gives: logits are cut to the shared ids."""
    target, draft = twin("qwen2")
    kw = dict(method="draft", k=4, max_new_tokens=NEW, chat=False)
    assert specviz.generate(padded(target, 64), prompt(), draft=draft, **kw).token_ids == reference("qwen2")
    assert specviz.generate(target, prompt(), draft=padded(draft, 64), **kw).token_ids == reference("qwen2")


def gpt2_pair(swap=None):
    """A GPT-2 twin and its draft over a word-level tokenizer (the draft's may swap two ids)."""
    target = tiny_random(family="gpt2", vocab_size=40, layers=3, seed=1, tokenizer=word_tokenizer(),
                         name="gpt2-twin")
    draft = derive_draft(target, layers=1)
    draft.tokenizer, draft.name = word_tokenizer(swap=swap), "gpt2-twin-draft"
    return target, draft


def test_different_tokenizers_are_named_and_drafted_through_text():
    """A draft whose tokenizer maps one id to another token fails the shared-tokenizer check, which names
    both models and the id; method 'draft' then drafts through text and stays exact (greedy = HF)."""
    from specviz.loading.loader import check_tokenizers
    from tests.helpers.tiny import hf_greedy

    target, draft = gpt2_pair(swap=(9, 12))
    with pytest.raises(TokenizerMismatch, match="'gpt2-twin-draft' and target 'gpt2-twin'.*id 9"):
        check_tokenizers(target, draft)
    ids = target.encode("w4 w5 w6", chat=False)
    run = specviz.generate(target, ids, method="draft", draft=draft, k=3, max_new_tokens=12, chat=False, plan=False)
    assert run.token_ids == hf_greedy(target, ids, 12)


def test_gpt2_pair_runs_through_compare():
    """Compare runs a GPT-2 twin with its draft, prompt lookup and LogitSpec: every row is measured,
    error-free and lossless against the plain run."""
    target, draft = gpt2_pair()
    models = {"gpt2-twin": target, "gpt2-twin-draft": draft}
    configs = [Config("gpt2-twin", "draft", "gpt2-twin-draft", 3), Config("gpt2-twin", "pld", None, 4),
               Config("gpt2-twin", "logitspec", None, 4)]
    text = " ".join(f"w{i}" for i in [4, 9, 17, 23, 5, 9, 17, 23, 31, 8, 9, 17])
    comparison = Comparison(configs, Shared.of(text, max_new_tokens=24, chat=False))
    for _ in comparison.run(models.__getitem__):
        pass
    rows = comparison.rows()
    assert [(r["error"], r["lossless"]) for r in rows] == [(None, True)] * 3, rows
    assert all(r["new_tokens"] == 24 for r in rows)


# -- the presets stay covered -------------------------------------------------------------------
def test_every_preset_family_has_twin_tests():
    """Every target and draft the picker offers belongs to a family tested here; a preset added
    from a new family fails this test until that family gets a twin."""
    from specviz.proposers import HEAD_DRAFT
    from specviz.ui.runtime.presets import BUNDLED_DRAFTS, DRAFT_FAMILIES, TARGETS

    specs = [spec for _, spec in TARGETS + BUNDLED_DRAFTS if spec != HEAD_DRAFT]
    specs += [spec for _, drafts in DRAFT_FAMILIES for _, spec in drafts]
    untested = {spec: family_of(spec) for spec in specs if family_of(spec) not in TESTED}
    assert not untested, f"presets without a twin family tested in {__name__}: {untested}"
    assert set(TESTED) == set(FAMILIES)


@pytest.mark.parametrize("family", TESTED)
def test_growing_cache_appends_in_place_with_transformers_numbers(family):
    """new_cache's layers append each pass in place: through 14 tree and chain cycles cut the
    engine's way (keep_path, rollback), each layer keeps one buffer for the whole run, and its keys
    and values equal those of transformers' own concatenating DynamicCache given the same passes."""
    model = twin(family)[0].model
    ours, theirs = new_cache(), DynamicCache()
    buffers: list[set[int]] = []

    def cut(cache, n, path):
        kvcache_mod.keep_path(cache, n, path)
        if cache is ours:
            if not buffers:
                buffers.extend(set() for _ in cache.layers)
            for seen, layer in zip(buffers, cache.layers):
                seen.add(layer._room[0].data_ptr())

    seq = cycles(model, ours, seed=4, tree_cut=cut)
    assert cycles(model, theirs, seed=4, tree_cut=kvcache_mod.keep_path) == seq
    assert type(theirs.layers[0]) is not type(ours.layers[0])  # the comparison is not with itself
    assert buffers and all(len(seen) == 1 for seen in buffers), [len(s) for s in buffers]
    for a, b in zip(ours.layers, theirs.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_growing_cache_takes_a_pass_outside_inference_mode_and_a_replaced_layer():
    """A growing layer filled in inference mode still takes a pass under plain no_grad (its buffer
    then cannot be written in place, so it moves), and a layer whose keys a caller replaced appends
    after those keys: both return exactly the old states followed by the new ones."""
    cache = new_cache()
    gen = torch.Generator().manual_seed(0)
    k0, v0 = torch.randn(1, 2, 5, 4, generator=gen), torch.randn(1, 2, 5, 4, generator=gen)
    with torch.inference_mode():
        cache.update(k0, v0, 0)
    k1, v1 = torch.randn(1, 2, 3, 4, generator=gen), torch.randn(1, 2, 3, 4, generator=gen)
    with torch.no_grad():
        keys, values = cache.update(k1, v1, 0)
    assert torch.equal(keys, torch.cat([k0, k1], -2)) and torch.equal(values, torch.cat([v0, v1], -2))
    layer = cache.layers[0]
    layer.keys, layer.values = keys[..., 2:, :].clone(), values[..., 2:, :].clone()  # a caller's own tensors
    k2, v2 = torch.randn(1, 2, 1, 4, generator=gen), torch.randn(1, 2, 1, 4, generator=gen)
    keys, values = cache.update(k2, v2, 0)
    assert torch.equal(keys, torch.cat([k0, k1, k2], -2)[..., 2:, :])
    assert torch.equal(values, torch.cat([v0, v1, v2], -2)[..., 2:, :])
