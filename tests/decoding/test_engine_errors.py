"""Bad settings fail fast with a message a person can act on, before any decoding starts."""
import math

import pytest

import specviz
from specviz.loading.loader import ModelLoadError, TokenizerMismatch, tiny_random
from tests.helpers.tiny import pair


@pytest.fixture(scope="module")
def tiny():
    return pair()


@pytest.mark.parametrize("kw,words", [
    (dict(k=0), r"K \(draft length\)"),
    (dict(k=1000), "from 1 to 64"),
    (dict(temperature=-1.0), "temperature"),
    (dict(temperature=math.nan), "temperature"),
    (dict(temperature=math.inf), "finite"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=2.0), "top_p"),
    (dict(max_new_tokens=-5), "max_new_tokens"),
])
def test_bad_settings_raise_value_error(tiny, kw, words):
    """Each out-of-range setting raises ValueError whose message names the setting."""
    target, draft = tiny
    with pytest.raises(ValueError, match=words):
        specviz.generate(target, [1, 2, 3], method="draft", draft=draft, chat=False, **kw)


def test_empty_and_too_long_prompts(tiny):
    """An empty prompt and a prompt longer than the model's context are refused with the lengths."""
    target, _ = tiny
    with pytest.raises(ValueError, match="empty"):
        specviz.generate(target, [], method="ar", chat=False)
    with pytest.raises(ValueError, match="600 tokens"):
        specviz.generate(target, [1] * 600, method="ar", chat=False)


def test_unknown_method_lists_the_valid_ones(tiny):
    """An unknown method names the methods that exist."""
    with pytest.raises(ValueError, match="logitspec"):
        specviz.generate(tiny[0], [1, 2], method="medusa", chat=False)


def test_draft_method_needs_a_draft(tiny):
    """The draft method without a draft model says what is missing."""
    with pytest.raises(ValueError, match="needs a draft model"):
        specviz.generate(tiny[0], [1, 2], method="draft", chat=False)


def test_mismatched_tokenizers_name_both_models(tiny, word_level_model):
    """A draft-model run where the target has no tokenizer (so its ids can be neither matched with the
    draft's nor turned into text) is refused, naming the model."""
    target, _ = tiny
    with pytest.raises(TokenizerMismatch, match="tiny-random"):
        specviz.generate(target, [1, 2], method="draft", draft=word_level_model, chat=False)


@pytest.fixture(scope="module")
def word_level_model():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(32)}
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="t0")))
    return tiny_random(vocab_size=32, tokenizer=tok, name="word-level")


def test_unknown_model_offline_is_a_clear_error(monkeypatch):
    """Loading a well-formed hub id that cannot be reached raises ModelLoadError, not a traceback."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match="could not be found or downloaded"):
        specviz.load("nobody-here/no-such-model-xyz")
