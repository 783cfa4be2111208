"""specviz.passes.fastpath on tiny random Llamas: our own forward gives the modules' logits bit for
bit, wherever the engine uses it, and the modules run wherever it does not apply."""
import copy

import pytest
import torch

from specviz.decoding.engine import generate
from specviz.decoding.targets import LocalTarget
from specviz.drafting.tree import DraftTree
from specviz.loading.loader import derive_draft, tiny_random
from specviz.passes import fastpath, speedups
from specviz.passes.kvcache import new_cache, rollback
from tests.tiny import PROMPTS

pytestmark = pytest.mark.skipif(not speedups._onednn_works(), reason="this torch build has no oneDNN linear")


def tuned(family="llama", **kw):
    """A tiny model of `family` with the CPU speed-ups applied, as `load` gives it."""
    loaded = tiny_random(family=family, **kw)
    speedups.apply(loaded.model)
    return loaded


def modules_pass(model, ids, cache, position_ids=None, mask=None, keep=0):
    """(logits, final-norm output) of transformers' own modules, the reference."""
    kept = []
    hook = model.model.norm.register_forward_hook(lambda m, a, out: kept.append(out))
    try:
        with torch.inference_mode():
            out = model(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=position_ids,
                        attention_mask=mask, **({"logits_to_keep": keep} if keep else {}))
    finally:
        hook.remove()
    return out.logits, kept[-1]


@pytest.mark.parametrize("kv_heads", [2, 4])
def test_every_kind_of_pass_has_the_modules_bits(kv_heads):
    """A prefill (last row only, as the engine asks), one-token steps, a chain and a draft tree with
    its mask and positions: our forward's logits and final hidden states equal the modules' bit for
    bit, and the two caches hold the same keys after every pass (grouped and plain attention)."""
    target = tuned(kv_heads=kv_heads, layers=3, seed=3)
    model = target.model
    assert fastpath.of(model) is not None
    ours, theirs = new_cache(), new_cache()

    def both(tokens, **kw):
        ids = torch.tensor([tokens])
        got = fastpath.forward(model, ids, ours, **kw)
        want = modules_pass(model, ids, theirs, **kw)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        for a, b in zip(ours.layers, theirs.layers):
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
        return got[0]

    both(PROMPTS[2], keep=1)
    both([5])
    both([6, 7])
    both([8, 9, 10, 11, 12])
    tree = DraftTree([3, 4, 5, 6, 7], [-1, -1, 0, 0, 2])
    past = ours.get_seq_length()
    mask = tree.model_mask(ours, model.config, torch.float32)
    logits = both([13] + tree.tokens, position_ids=tree.position_ids(past), mask=mask)
    assert logits.shape == (1, 6, target.vocab_size)
    rollback(ours, past)
    rollback(theirs, past)
    both([14, 15])


def test_decoding_is_the_same_with_and_without_it(monkeypatch):
    """Greedy runs of AR, prompt lookup and a draft tree, and sampled runs with a seed (AR, and a
    draft model whose own steps take our forward too), commit the same tokens and draw the same
    way with our forward as with the modules (the engine's passes go through LocalTarget, the
    draft model's through draft_model._plain)."""
    target = tuned(seed=5)
    draft = derive_draft(target, noise=0.05, seed=9)
    runs = [dict(method="ar"), dict(method="pld", k=4), dict(method="logitspec", k=4),
            dict(method="ar", temperature=0.8, seed=11),
            dict(method="draft", draft=draft, k=3, temperature=0.8, seed=12)]

    def tokens():
        return [generate(target, PROMPTS[0] * 3, max_new_tokens=16, **kw).token_ids for kw in runs]

    assert fastpath.of(target.model) is not None and fastpath.of(draft.model) is not None
    fast = tokens()
    monkeypatch.setattr(fastpath, "SUPPORTED", ())
    fastpath._BUILT.clear()
    assert fastpath.of(target.model) is None
    assert tokens() == fast


def test_local_target_returns_the_hidden_rows_the_head_reads():
    """LocalTarget.forward's hidden states (what the draft head reads) are the final norm's output
    rows, the same as the hook on the modules gives, for a full pass and a last-row prefill."""
    target = tuned(seed=2)
    local = LocalTarget(target)
    cache, theirs = new_cache(), new_cache()
    logits, hidden = local.forward(PROMPTS[2], cache, last_only=True, hidden=True)
    want_logits, want_hidden = modules_pass(target.model, torch.tensor([PROMPTS[2]]), theirs, keep=1)
    assert torch.equal(logits, want_logits[0]) and torch.equal(hidden, want_hidden[0])
    assert hidden.shape == (len(PROMPTS[2]), target.model.config.hidden_size)


@pytest.mark.parametrize("family", ["qwen2", "gemma3", "gpt2"])
def test_other_families_run_their_modules(family):
    """Only Llama has our forward; other families (biases, sliding layers, another layout) run
    transformers' modules, and forward() says so with None."""
    target = tuned(family=family)
    assert fastpath.of(target.model) is None
    assert fastpath.forward(target.model, torch.tensor([[1, 2]]), new_cache()) is None


def test_no_fast_forward_without_the_packed_linears():
    """A model loaded without the CPU speed-ups (SPECVIZ_NO_SPEEDUPS=1), after `speedups.remove`, or
    in training mode runs its modules: the fast forward reads the speed-ups' packed weights. The
    answer follows the model: the speed-ups applied later turn it on."""
    plain = tiny_random(seed=1)
    assert fastpath.of(plain.model) is None
    speedups.apply(plain.model)  # decided again once the speed-ups are on
    assert fastpath.of(plain.model) is not None
    plain.model.train()
    assert fastpath.of(plain.model) is None
    target = tuned(seed=1)
    assert fastpath.of(target.model) is not None
    speedups.remove(target.model)
    assert fastpath.of(target.model) is None


@pytest.mark.parametrize("how", ["in place", "replaced"])
def test_an_edited_weight_is_used_at_once(how):
    """A weight edited in place after the fast forward was built (a test's noise, a fine-tune), or
    replaced by another tensor, is packed again before the next pass, so its logits are still the
    modules' (and differ from before the edit)."""
    target = tuned(seed=4)
    model = target.model
    ids = torch.tensor([PROMPTS[0]])
    before = fastpath.forward(model, ids, new_cache())[0]
    with torch.no_grad():
        if how == "in place":
            model.model.layers[1].mlp.up_proj.weight.mul_(1.5)
            model.model.layers[0].self_attn.k_proj.weight.add_(0.01)
        else:
            down = model.model.layers[1].mlp.down_proj
            down.weight = torch.nn.Parameter(down.weight * 1.5)
    got = fastpath.forward(model, ids, new_cache())
    want = modules_pass(model, ids, new_cache())
    assert torch.equal(got[0], want[0]) and not torch.equal(got[0], before)


def test_a_forward_that_differs_is_never_used(monkeypatch):
    """The check at first use compares logits bit for bit: a forward whose rotary embedding is off
    by one part in a million is refused, and the engine's passes run the modules."""
    target = tuned(seed=6)
    right = fastpath._rotate
    monkeypatch.setattr(fastpath, "_rotate", lambda x, cos, sin: right(x, cos, sin) * (1 + 1e-6))
    assert fastpath.FastForward(target.model).check() is not None
    assert fastpath.of(target.model) is None
    local = LocalTarget(target)
    logits, _ = local.forward(PROMPTS[0], new_cache())
    assert torch.equal(logits, modules_pass(target.model, torch.tensor([PROMPTS[0]]), new_cache())[0][0])


def test_copies_of_a_model_get_their_own():
    """Each model object has its own fast forward (built from its own weights): a deep copy with
    other weights does not reuse the original's."""
    target = tuned(seed=7)
    other = copy.deepcopy(target)
    with torch.no_grad():
        for p in other.model.parameters():
            p.mul_(0.9)
    ids = torch.tensor([PROMPTS[1]])
    assert fastpath.of(target.model) is not fastpath.of(other.model)
    assert torch.equal(fastpath.forward(other.model, ids, new_cache())[0],
                       modules_pass(other.model, ids, new_cache())[0])
