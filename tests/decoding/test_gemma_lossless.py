"""On Gemma 3 270M, a second real family (its own tokenizer of 262,144 tokens, sliding-window layers of 512
tokens, no chat template), every method's greedy output equals transformers' generate, and one sampled
method follows the target's distribution."""
import pytest
import torch

import specviz

pytestmark = pytest.mark.gemma

N = 40  # new tokens a prompt: lookups start to hit, and CI stays short (a Gemma step is ~3× a SmolLM2 step)
METHODS = ["ar", "pld", "logitspec", "layerskip", "suffix", "hybrid"]
DRAFTING = ("pld", "logitspec", "layerskip", "hybrid")  # the methods whose check asserts drafts


def long_prompt(bench_prompts) -> str:
    """A prompt longer than Gemma's 512-token sliding window: the benchmark prompts, one after another."""
    return "\n\n".join(p["prompt"] for p in bench_prompts)


@pytest.fixture(scope="module")
def prompts(bench_prompts, gemma_target):
    """Two short benchmark prompts and one longer than the sliding window (checked here)."""
    long = long_prompt(bench_prompts)
    n_long = len(gemma_target.encode(long, chat=False))
    assert n_long > 600, f"the long prompt is only {n_long} tokens"
    return [bench_prompts[0]["prompt"], bench_prompts[5]["prompt"], long]


@pytest.fixture(scope="module")
def references(gemma_target):
    """transformers' greedy continuation of each raw prompt, computed once."""
    target, cache = gemma_target, {}
    eos = sorted(target.eos_ids)

    def reference(prompt: str) -> list[int]:
        if prompt not in cache:
            ids = target.encode(prompt, chat=False)
            with torch.inference_mode():
                gen = target.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=N,
                                            eos_token_id=eos, pad_token_id=eos[0])
            cache[prompt] = gen[0, len(ids):].tolist()
        return cache[prompt]
    return reference


def test_gemma_loads_as_a_second_family(gemma_target):
    """The second offline model is Gemma 3 270M: its own tokenizer, sliding windows, no chat template,
    so chat=True decodes the raw prompt."""
    cfg = gemma_target.model.config
    assert type(gemma_target.model).__name__ == "Gemma3ForCausalLM"
    assert gemma_target.vocab_size == 262144 and cfg.sliding_window == 512
    assert "sliding_attention" in cfg.layer_types and "full_attention" in cfg.layer_types
    assert round(gemma_target.n_params / 1e6) == 268
    assert not getattr(gemma_target.tokenizer, "chat_template", None)
    assert gemma_target.encode("Hello there", chat=True) == gemma_target.encode("Hello there", chat=False)


def test_llama_only_fast_paths_say_why_they_step_aside(gemma_target):
    """Our fast forward covers Llama only: on Gemma it is not used, and the reason it gives (logged once per
    model when a pass falls back to the modules) names both classes."""
    from specviz.passes import fastpath

    assert fastpath.of(gemma_target.model) is None
    why = fastpath.FastForward.unsupported(gemma_target.model)
    assert "LlamaForCausalLM" in why and "Gemma3ForCausalLM" in why


@pytest.mark.parametrize("method", [pytest.param(m, marks=pytest.mark.drafts) if m in DRAFTING else m
                                    for m in METHODS])
def test_every_method_is_exact_on_gemma(gemma_target, prompts, references, method):
    """Greedy output of each method on Gemma 3 270M equals HF generate's, on short prompts and on one
    longer than the 512-token sliding window (where a rollback must not crop a sliding layer).
    Retrieval has drafts accepted; layer skip sends its drafts (plan=False: each costs about two
    thirds of a target pass, so the planner would send none)."""
    accepted = drafted = 0
    for prompt in prompts:
        run = specviz.generate(gemma_target, prompt, method=method, k=6, max_new_tokens=N, chat=False,
                               record=False, **({"plan": False} if method == "layerskip" else {}))
        assert run.token_ids == references(prompt), f"{method} differs on a {len(prompt)}-character prompt"
        accepted += run.metrics.get("accepted_tokens", 0)
        drafted += run.metrics.get("drafted_tokens", 0)
    if method in ("pld", "logitspec", "hybrid"):
        assert accepted > 0, f"{method} never had a draft accepted on Gemma"
    if method == "layerskip":
        assert drafted > 0, "no layer-skip draft was sent: the check ran on plain decoding"


# -- sampling: the token the first cycle commits follows the target's distribution ------------------
CHI_PROMPT = "A B C D A B C D A B"  # peaked, and prompt lookup finds a draft after every likely first token
CHI_T, CHI_P, CHI_N = 0.7, 0.95, 300
ALPHA = 1e-3  # seeds are fixed, so a pass or a failure is the same every run


@pytest.fixture(scope="module")
def exact_second(gemma_target):
    """p(t2) = Σ p(t1) p(t2 | t1) under T and top-p, by full forwards over the prompt and each possible t1;
    the nucleus from tests/helpers/reference.py (numpy, float64), not the engine's own code."""
    import numpy as np

    from tests.helpers.reference import nucleus

    model, ids = gemma_target.model, gemma_target.encode(CHI_PROMPT, chat=False)
    with torch.inference_mode():
        p1 = nucleus(model(torch.tensor([ids])).logits[0, -1].double().numpy(), CHI_T, CHI_P)
        firsts = p1.nonzero()[0].tolist()
        rows = model(torch.tensor([ids + [t] for t in firsts])).logits[:, -1].double().numpy()
    p2 = np.stack([nucleus(row, CHI_T, CHI_P) for row in rows])
    return ids, p1[firsts] @ p2


def second_token_pvalue(gemma_target, ids, exact) -> float:
    """χ² p-value of the second new token over CHI_N seeds of prompt lookup (the first token a
    draft-and-verify cycle commits); tokens of the nucleus expected fewer than 5 times are pooled. A
    token drawn outside the nucleus (p = 0 there) fails at once: no cell can hide it."""
    from scipy.stats import chisquare

    counts: dict[int, int] = {}
    for seed in range(CHI_N):
        run = specviz.generate(gemma_target, ids, method="pld", k=2, temperature=CHI_T, top_p=CHI_P, seed=seed,
                               max_new_tokens=3, chat=False, plan=False, record=False)
        assert run.cycles[0].nodes  # the second token came out of a verify pass over a draft
        counts[run.token_ids[1]] = counts.get(run.token_ids[1], 0) + 1
    expected = exact / exact.sum() * CHI_N
    outside = {t: n for t, n in counts.items() if expected[t] == 0}
    assert not outside, f"tokens drawn outside the top-p {CHI_P} nucleus (token: times): {outside}"
    big = [t for t in expected.nonzero()[0].tolist() if expected[t] >= 5]
    rare = [t for t in expected.nonzero()[0].tolist() if expected[t] < 5]  # inside the nucleus, pooled
    observed = [counts.get(t, 0) for t in big] + ([sum(counts.get(t, 0) for t in rare)] if rare else [])
    wanted = [float(expected[t]) for t in big] + ([float(sum(expected[t] for t in rare))] if rare else [])
    return float(chisquare(observed, wanted).pvalue)


def test_sampled_prompt_lookup_follows_gemma(gemma_target, exact_second):
    """Under sampling (T 0.7, top-p 0.95) the token prompt lookup's first cycle commits follows Gemma's own
    distribution (χ², 300 seeds, every cycle sending a draft)."""
    assert second_token_pvalue(gemma_target, *exact_second) > ALPHA


def test_the_gemma_sampling_check_catches_a_wrong_residual(gemma_target, exact_second, monkeypatch):
    """The same check fails when a rejected token is redrawn from p itself instead of p without it: the
    check has the power to see a wrong rule on this model."""
    import specviz.decoding.verify as verify_mod

    monkeypatch.setattr(verify_mod, "residual", lambda p, q, x: p)
    assert second_token_pvalue(gemma_target, *exact_second) < ALPHA


# -- a draft from another family, on two real models ----------------------------------------------
@pytest.mark.bundled
@pytest.mark.parametrize("direction", ["smollm2-drafts-for-gemma", "gemma-drafts-for-smollm2"])
def test_a_draft_from_another_family_is_exact_both_ways(gemma_target, bundled_target, bench_prompts, direction):
    """SmolLM2-135M drafting for Gemma 3 270M, and Gemma for SmolLM2 (its chat template on): greedy output
    equals the target's own HF greedy, and drafts made of the other tokenizer's text are accepted."""
    if direction.startswith("smollm2"):
        target, draft, chat = gemma_target, bundled_target, False
    else:
        target, draft, chat = bundled_target, gemma_target, True
    ids = target.encode(bench_prompts[0]["prompt"], chat=chat)
    eos = sorted(target.eos_ids)
    with torch.inference_mode():
        ref = target.model.generate(torch.tensor([ids]), do_sample=False, max_new_tokens=24, eos_token_id=eos,
                                    pad_token_id=eos[0])[0, len(ids):].tolist()
    run = specviz.generate(target, ids, method="draft", draft=draft, k=4, max_new_tokens=24, chat=chat,
                           record=False, plan=False)
    assert run.token_ids == ref
    assert run.metrics["accepted_tokens"] > 0
