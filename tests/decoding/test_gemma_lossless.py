"""On Gemma 3 270M, a second real family (its own tokenizer of 262,144 tokens, sliding-window layers of 512
tokens, no chat template), every method's greedy output equals transformers' generate, and one sampled
method follows the target's distribution."""
import pytest
import torch

import specviz

pytestmark = pytest.mark.gemma

N = 40  # new tokens a prompt: lookups start to hit, and CI stays short (a Gemma step is ~3× a SmolLM2 step)
METHODS = ["ar", "pld", "logitspec", "layerskip", "suffix", "hybrid"]


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


@pytest.mark.parametrize("method", METHODS)
def test_every_method_is_exact_on_gemma(gemma_target, prompts, references, method):
    """Greedy output of each method on Gemma 3 270M equals HF generate's, on short prompts and on one
    longer than the 512-token sliding window (where a rollback must not crop a sliding layer)."""
    accepted = 0
    for prompt in prompts:
        run = specviz.generate(gemma_target, prompt, method=method, k=6, max_new_tokens=N, chat=False,
                               record=False)
        assert run.token_ids == references(prompt), f"{method} differs on a {len(prompt)}-character prompt"
        accepted += run.metrics.get("accepted_tokens", 0)
    if method in ("pld", "logitspec", "hybrid"):
        assert accepted > 0, f"{method} never had a draft accepted on Gemma"
