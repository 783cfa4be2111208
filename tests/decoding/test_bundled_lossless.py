"""On the bundled SmolLM2-135M, greedy decoding with every draft-free proposer equals transformers' generate."""
import pytest
import torch

import specviz

N = 48  # new tokens per prompt: enough for lookups to start hitting, short enough for CI
TREE_KNOBS = dict(top_k=8, capacity=24, min_ngram=1, lone_cands=True)  # LogitSpec as wide trees
FEW = 3  # prompts for the slower or extra variants

pytestmark = pytest.mark.bundled


@pytest.fixture(scope="module")
def references(bundled_target):
    """transformers' greedy continuation of a prompt (chat template applied), computed once per prompt."""
    target, cache = bundled_target, {}
    eos = sorted(target.eos_ids)

    def reference(item) -> list[int]:
        if item["id"] not in cache:
            ids = target.encode(item["prompt"], chat=True)
            with torch.inference_mode():
                gen = target.model.generate(torch.tensor([ids], device=target.device), do_sample=False,
                                            max_new_tokens=N, eos_token_id=eos, pad_token_id=eos[0])
            cache[item["id"]] = gen[0, len(ids):].tolist()
        return cache[item["id"]]
    return reference


def check(target, prompts, references, method, k=8, **kw) -> tuple[int, int]:
    """Decode each prompt greedily and compare with the reference; return (drafts sent, drafts accepted)."""
    drafted = accepted = 0
    for item in prompts:
        run = specviz.generate(target, item["prompt"], method=method, k=k, max_new_tokens=N, chat=True,
                               record=False, **kw)
        assert run.token_ids == references(item), f"{method} differs on prompt {item['id']}"
        drafted += run.metrics["drafted_tokens"]
        accepted += run.metrics["accepted_tokens"]
    return drafted, accepted


@pytest.mark.drafts
@pytest.mark.parametrize("method", ["pld", "logitspec"])
def test_retrieval_proposers_are_lossless(bundled_target, bench_prompts, references, method):
    """Prompt lookup and LogitSpec (CPU defaults) give HF's greedy tokens on all 16 public prompts,
    and some drafts are accepted."""
    assert check(bundled_target, bench_prompts, references, method)[1] > 0


@pytest.mark.drafts
def test_logitspec_wide_trees_are_lossless(bundled_target, bench_prompts, references):
    """LogitSpec with wide multi-branch trees (tree mask, cache gather) gives HF's greedy tokens."""
    assert check(bundled_target, bench_prompts[:FEW], references, "logitspec", **TREE_KNOBS)[1] > 0


@pytest.mark.drafts
def test_layerskip_is_lossless(bundled_target, bench_prompts, references):
    """Layer-skip self-drafting gives HF's greedy tokens on a few public prompts, with its drafts
    sent: each costs two thirds of a target pass, so the planner would send none (plan=False)."""
    # K = 2: its drafts rarely survive
    drafted, _ = check(bundled_target, bench_prompts[:FEW], references, "layerskip", k=2, plan=False)
    assert drafted > 0, "no layer-skip draft was sent: the check ran on plain decoding"
