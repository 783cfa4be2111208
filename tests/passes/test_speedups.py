"""specviz.passes.speedups on tiny random models: the same numbers as stock transformers, taken faster."""
import copy
import os
import pickle
import subprocess
import sys

import pytest
import torch

import specviz
from specviz.drafting.tree import DraftTree
from specviz.loading.loader import tiny_random
from specviz.passes import speedups
from specviz.passes.kvcache import new_cache, rollback
from tests.helpers.tiny import PROMPTS, hf_greedy

N = 12  # new tokens per greedy check
# Float results are compared with a tolerance, never bit for bit: oneDNN picks its kernels (and so
# the order it sums in) by CPU, so the last bits differ from one machine to another. A float32 dot
# product of 1536 terms summed in another order moves by a few ulps of the sum of |terms| (about
# 17 below): ~3e-6 measured against float64. ATOL is 30x that, yet 1000x below what a wrong row,
# a stale packed weight or padding leaking into a row would change (order 0.1-1).
ATOL = 1e-4


def tuned_pair(family="llama", **kw):
    """A tiny model and a tuned deep copy of it (the copy gets the speed-ups)."""
    stock = tiny_random(family=family, **kw)
    tuned = copy.deepcopy(stock)
    return stock, tuned, speedups.apply(tuned.model)


def test_apply_reports_both_on_a_grouped_query_model():
    """A CPU float32 Llama with fewer key/value heads than query heads gets both speed-ups, and
    `applied`/`remove` see and undo them."""
    _, tuned, done = tuned_pair()
    assert done == ["packed-linear", "gqa-sdpa"] == speedups.applied(tuned.model)
    speedups.remove(tuned.model)
    assert speedups.applied(tuned.model) == []
    assert tuned.model.config._attn_implementation == "sdpa"
    assert all(type(m) is torch.nn.Linear for m in tuned.model.modules() if isinstance(m, torch.nn.Linear))


def test_no_packing_when_memory_is_short(monkeypatch):
    """Packed copies double the linear weights, so they are skipped when memory is short; the
    copy-free attention still applies."""
    monkeypatch.setattr(speedups, "_available_bytes", lambda: 1000.0)
    assert speedups.apply(tiny_random().model) == ["gqa-sdpa"]


def test_bf16_only_where_the_cpu_has_it(monkeypatch):
    """A bfloat16 model is packed only on a CPU with native bfloat16; float16 never. The detection
    is faked both ways, so the packing is faked too: no bfloat16 kernel runs, and the decision is
    checked alike on CPUs with and without bfloat16 (the real kernel: the next test, where it exists)."""
    packed = []
    monkeypatch.setattr(speedups, "_onednn_works", lambda: True)
    monkeypatch.setattr(speedups.PackedLinear, "_pack", lambda self: packed.append(self.weight.dtype))
    monkeypatch.setattr(speedups, "_NATIVE_BF16", False)
    assert speedups.apply(tiny_random().model.to(torch.bfloat16)) == []
    assert speedups.apply(tiny_random().model.to(torch.float16)) == []
    assert packed == []
    monkeypatch.setattr(speedups, "_NATIVE_BF16", True)
    model = tiny_random().model.to(torch.bfloat16)
    assert "packed-linear" in speedups.apply(model)
    assert packed and set(packed) == {torch.bfloat16}
    assert all(type(m) is speedups.PackedLinear for m in model.modules() if isinstance(m, torch.nn.Linear))


@pytest.mark.parametrize("flags, onednn, native", [
    ("avx2 avx512f avx512_bf16", True, True),
    ("fp asimd bf16", True, True),          # Arm's Features line
    ("avx2 amx_bf16", False, False),        # oneDNN held below its bf16 kernels
    ("avx2 avx512f avx512bw", True, False),  # bf16 emulated: not where the speed-ups were measured
])
def test_native_bf16_needs_the_cpu_flag_and_onednn(monkeypatch, flags, onednn, native):
    """native_bf16 is true only where /proc/cpuinfo names a bfloat16 unit and oneDNN's bfloat16
    kernels may run (both faked here)."""
    monkeypatch.setattr(speedups, "_NATIVE_BF16", None)
    monkeypatch.setattr(speedups, "cpuinfo", lambda: f"model name : X\nflags : {flags}\n")
    monkeypatch.setattr(speedups, "_onednn_bf16", lambda: onednn)
    assert speedups.native_bf16() is native


@pytest.mark.slow
def test_onednn_held_to_avx2_leaves_a_bf16_model_stock():
    """With ONEDNN_MAX_CPU_ISA=AVX2 (oneDNN as on an AVX2-only CPU, really, in a fresh process)
    native_bf16 is false whatever /proc/cpuinfo says, so a bfloat16 model is left stock instead of
    failing in oneDNN's bfloat16 reorder."""
    code = ("import torch; from specviz.passes import speedups; "
            "m = torch.nn.Sequential(torch.nn.Linear(16, 8)).bfloat16(); "
            "print(speedups.native_bf16(), speedups.apply(m))")
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "[]"]


@pytest.mark.skipif(not speedups.native_bf16(), reason="the CPU has no native bfloat16")
def test_bf16_packed_linear_matches_stock_within_one_step():
    """In bfloat16 a packed linear gives F.linear's result to within one bfloat16 step (oneDNN
    in both; only the weight layout differs), for one to eight rows."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(1536, 576, bias=False).to(torch.bfloat16)
    weight = layer.weight.detach().clone()
    speedups._pack_linears(torch.nn.Sequential(layer))
    x = 3 * torch.randn(40, 8, 1536, dtype=torch.bfloat16)
    with torch.inference_mode():
        for n in range(1, 9):
            got, want = layer(x[:, :n]).float(), torch.nn.functional.linear(x[:, :n], weight).float()
            assert ((got - want).abs() <= want.abs() * 2 ** -7 + 1e-6).all()


@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma3"])
def test_greedy_tokens_equal_stock_generate(family):
    """HF generate on the tuned model and our tree-verifying decoder on it both give the stock
    model's greedy tokens, on every tiny prompt."""
    stock, tuned, _ = tuned_pair(family)
    for prompt in PROMPTS:
        ref = hf_greedy(stock, prompt, N)
        assert hf_greedy(tuned, prompt, N) == ref
        run = specviz.generate(tuned, prompt, method="logitspec", k=6, max_new_tokens=N, chat=False)
        assert run.token_ids[:N] == ref


def test_tree_pass_logits_match_stock():
    """A verify pass with a 4-D tree mask and explicit positions gives the stock model's logits."""
    stock, tuned, _ = tuned_pair(vocab_size=64)
    tree = DraftTree([5, 9, 7, 3, 11], [-1, 0, 0, 1, -1])
    out = []
    for m in (stock, tuned):
        cache = new_cache()
        with torch.inference_mode():
            m.model(input_ids=torch.tensor([PROMPTS[2]]), past_key_values=cache, use_cache=True)
            past = len(PROMPTS[2])
            mask = tree.model_mask(cache, m.model.config, m.dtype)
            ids = torch.tensor([[2] + tree.tokens])
            out.append(m.model(input_ids=ids, past_key_values=cache, use_cache=True, attention_mask=mask,
                               position_ids=tree.position_ids(past)).logits)
            rollback(cache, past)
    # logits of size ~0.6: 0 to 1e-7 apart measured; 1e-5 leaves room for another CPU's kernels
    assert torch.allclose(out[0], out[1], atol=1e-5)


def test_a_row_does_not_depend_on_the_pass_size():
    """A packed linear gives a token's row the same result (to float rounding, ATOL) alone as among
    2 to 7 others, padded to MIN_ROWS or not, and that result is F.linear's: the padding never
    leaks into a row and rows never mix."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(1536, 576, bias=False)
    weight = layer.weight.detach().clone()
    speedups._pack_linears(torch.nn.Sequential(layer))
    x = torch.randn(1, 8, 1536)
    with torch.inference_mode():
        full = layer(x)
        assert torch.allclose(full, torch.nn.functional.linear(x, weight), atol=ATOL)
        for n in range(1, 8):
            assert torch.allclose(layer(x[:, :n]), full[:, :n], atol=ATOL)


def test_a_changed_weight_is_packed_again():
    """Editing the weight in place after packing changes the output, as it would in nn.Linear."""
    layer = torch.nn.Linear(16, 8)
    speedups._pack_linears(torch.nn.Sequential(layer))
    x = torch.randn(4, 16)
    with torch.no_grad():
        layer.weight.mul_(2)
        assert torch.allclose(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias), atol=1e-6)


def test_gradients_still_flow():
    """With gradients on, a packed linear falls back to F.linear, so training code still works."""
    layer = torch.nn.Linear(16, 8)
    speedups._pack_linears(torch.nn.Sequential(layer))
    layer(torch.randn(3, 16)).sum().backward()
    assert layer.weight.grad is not None


def test_copies_and_pickles_work():
    """A tuned model deep-copies and pickles (the packed copy stays behind) and the copy computes
    the same logits (to float rounding, ATOL: it packs its weights again)."""
    _, tuned, _ = tuned_pair()
    twin = copy.deepcopy(tuned.model)
    again = pickle.loads(pickle.dumps(tuned.model))
    ids = torch.tensor([PROMPTS[0]])
    with torch.inference_mode():
        ref = tuned.model(input_ids=ids).logits
        assert torch.allclose(twin(input_ids=ids).logits, ref, atol=ATOL)
        assert torch.allclose(again(input_ids=ids).logits, ref, atol=ATOL)


def test_load_applies_them_unless_turned_off(monkeypatch):
    """`load` tunes a hub or folder model by default; speedups=False or SPECVIZ_NO_SPEEDUPS=1 keeps
    it stock, and an explicit speedups=True beats the variable."""
    monkeypatch.setattr(specviz.loading.loader, "_load_pretrained", lambda *a: tiny_random())
    assert speedups.applied(specviz.load("owner/model").model) == ["packed-linear", "gqa-sdpa"]
    assert speedups.applied(specviz.load("owner/model", speedups=False).model) == []
    monkeypatch.setenv(speedups.ENV_OFF, "1")
    assert speedups.applied(specviz.load("owner/model").model) == []
    assert speedups.applied(specviz.load("owner/model", speedups=True).model) != []


def test_a_draft_head_beside_a_tuned_target_packs_its_own_products():
    """The draft head runs beside its target with the target's speed-ups: beside a tuned target
    its network and its subset LM head are packed linears and give the plain products' numbers
    (predicted hidden states and subset logits within ATOL); beside a stock target they stay plain."""
    from specviz.proposers.head import HeadProposer
    from specviz.training.head_fit import new_head

    stock, tuned, _ = tuned_pair(seed=3)
    plain = HeadProposer(new_head(stock.model, torch.arange(20), seed=0, intermediate=32), stock.model)
    packed = HeadProposer(new_head(tuned.model, torch.arange(20), seed=0, intermediate=32), tuned.model)
    assert not any(isinstance(m, speedups.PackedLinear) for m in [*plain.head.modules(), plain.calls.lm])
    assert isinstance(packed.calls.lm, speedups.PackedLinear)
    assert all(isinstance(m, speedups.PackedLinear) for m in packed.head.modules() if isinstance(m, torch.nn.Linear))
    d = plain.head.cfg.hidden
    f = torch.randn(4, d, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        for want, got in [(plain.calls.one(f[0], 5), packed.calls.one(f[0], 5)),
                          (plain.calls.many(f, [1, 2, 3, 4]), packed.calls.many(f, [1, 2, 3, 4]))]:
            assert got[0].shape == want[0].shape and got[1].shape == want[1].shape
            assert torch.allclose(got[0], want[0], atol=ATOL) and torch.allclose(got[1], want[1], atol=ATOL)


@pytest.mark.parametrize("native", [True, False])
def test_a_draft_beside_a_tuned_float32_target_runs_bfloat16_only_where_the_cpu_computes_it(monkeypatch, native):
    """draft_dtype: bfloat16 for a draft network beside a float32 target with the packed linears,
    on a CPU with bfloat16 arithmetic; the target's own dtype beside a stock target, beside a
    bfloat16 target, or where bfloat16 would be emulated."""
    monkeypatch.setattr(speedups, "_NATIVE_BF16", native)
    stock, tuned, _ = tuned_pair(seed=3)
    assert speedups.draft_dtype(stock.model, torch.float32) == torch.float32
    assert speedups.draft_dtype(tuned.model, torch.float32) == (torch.bfloat16 if native else torch.float32)
    assert speedups.draft_dtype(tuned.model, torch.float16) == torch.float16


@pytest.mark.skipif(not speedups.native_bf16(), reason="this CPU has no bfloat16 arithmetic")
def test_a_bfloat16_head_beside_a_float32_target_drafts_from_its_hidden_state():
    """Where the CPU has bfloat16 arithmetic, a head built in bfloat16 beside a tuned float32
    target takes the target's float32 hidden state and drafts what the float32 head drafts, up to
    bfloat16's rounding (its subset logits within 0.1 of the float32 head's, top token the same)."""
    from specviz.drafting.sampling import Sampling
    from specviz.proposers.base import ProposeContext
    from specviz.proposers.head import HeadProposer
    from specviz.training.head_fit import new_head

    _, tuned, _ = tuned_pair(seed=3)
    net = new_head(tuned.model, torch.arange(20), seed=0, intermediate=32)
    wide = HeadProposer(net, tuned.model)
    narrow = HeadProposer(copy.deepcopy(net).to(torch.bfloat16), tuned.model)
    assert narrow.dtype == torch.bfloat16 and isinstance(narrow.calls.lm, speedups.PackedLinear)
    f = torch.randn(net.cfg.hidden, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        want, got = wide.calls.one(f, 5)[1], narrow.calls.one(f.to(torch.bfloat16), 5)[1]
    assert got.dtype == torch.bfloat16 and torch.allclose(got.float(), want, atol=0.1)
    ctx = ProposeContext(ids=[1, 5], last_logits=torch.zeros(tuned.vocab_size), k=3, sampling=Sampling(),
                         prompt_len=1, last_hidden=f)
    assert narrow.propose(ctx).tokens[0] == wide.propose(ctx).tokens[0]


def test_the_processor_description_is_read_once_a_process(monkeypatch):
    """cpuinfo() reads /proc/cpuinfo the first time only (every Step's cost key names the
    processor), and later calls give the same text."""
    import builtins

    speedups.cpuinfo.cache_clear()
    opened = []
    real = builtins.open
    monkeypatch.setattr(builtins, "open", lambda f, *a, **k: opened.append(f) or real(f, *a, **k))
    first = speedups.cpuinfo()
    assert speedups.cpuinfo() == first and speedups.cpuinfo() == first
    assert opened.count("/proc/cpuinfo") <= 1
    speedups.cpuinfo.cache_clear()
