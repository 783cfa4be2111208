"""One definition of a run's settings: specviz.decoding.settings.DecodeSettings, shared by Decoder, generate,
the Compare rows and the app's RunSettings."""
import pytest

from specviz.decoding.engine import Decoder
from specviz.decoding.settings import DecodeSettings
from specviz.measure.comparison import Config, Shared
from specviz.proposers import default_k, specs
from specviz.ui.runtime.settings import RunSettings, from_inputs
from tests.helpers.tiny import pair


def test_k_none_takes_the_methods_own_default():
    """With no K, each method gets its spec's default K (plain decoding 1), and a changed method gets its own."""
    assert DecodeSettings(method="ar").k == 1
    for spec in specs():
        assert DecodeSettings(method=spec.name).k == spec.default_k
    assert DecodeSettings(method="pld").replace(method="head").k == default_k("head") == 8
    assert DecodeSettings(method="pld", k=3).replace(temperature=0.5).k == 3


@pytest.mark.parametrize("kw, words", [
    (dict(k=0), r"K \(draft length\)"), (dict(k=65), "from 1 to 64"), (dict(k=2.5), "whole number"),
    (dict(max_new_tokens=0), "max_new_tokens"), (dict(temperature=-1.0), "temperature"),
    (dict(top_p=0.0), "top_p"), (dict(temperature=float("nan")), "temperature"),
])
def test_a_setting_no_run_can_use_is_refused_with_its_name(kw, words):
    """Building settings no run can use raises ValueError whose message names the setting."""
    with pytest.raises(ValueError, match=words):
        DecodeSettings(**kw)


def test_knobs_sort_and_round_trip():
    """Keywords that are the method's knobs become sorted knobs, and of(**options()) gives back
    the same settings."""
    s = DecodeSettings.of(method="logitspec", top_k=5, min_ngram=2, seed=3)
    assert s.knobs == (("min_ngram", 2), ("top_k", 5)) and s.seed == 3
    assert DecodeSettings.of(**s.options()) == s
    assert s.replace(top_k=7).knobs == (("min_ngram", 2), ("top_k", 7))


def test_decoder_from_settings_equals_decoder_from_keywords():
    """A Decoder given DecodeSettings and one given the same values as keywords record the same
    options and produce the same tokens."""
    target, _ = pair()
    kw = dict(method="pld", k=3, temperature=0.0, max_new_tokens=10, chat=False)
    a = Decoder(target, [1, 5, 9, 2, 7, 1, 5, 9], DecodeSettings(**kw))
    b = Decoder(target, [1, 5, 9, 2, 7, 1, 5, 9], **kw)
    assert a.options == b.options and a.shown == b.shown
    assert a.run().token_ids == b.run().token_ids


def test_the_old_spellings_are_gone():
    """The spellings once kept "for one release" are gone before any release: `method=<a
    Proposer>` is a TypeError that names `proposer=`, and Decoder and RunState have no
    `settings` (their shown options are `shown`)."""
    from specviz.proposers.prompt_lookup import PromptLookupProposer
    target, _ = pair()
    prompt, kw = [1, 5, 9, 2, 7, 1, 5, 9], dict(k=3, max_new_tokens=8, chat=False)
    with pytest.raises(TypeError, match="proposer="):
        Decoder(target, prompt, method=PromptLookupProposer(), **kw)
    new = Decoder(target, prompt, proposer=PromptLookupProposer(), **kw)
    assert not hasattr(new, "settings") and not hasattr(new.state(), "settings")
    assert new.shown["method"] == "pld" and new.state().shown == new.shown


def test_an_unknown_keyword_is_an_error_naming_the_nearest_setting():
    """A keyword that is neither a setting nor one of the method's knobs is refused, for plain
    decoding too (where no proposer would check it), with the nearest valid name: a typo is not
    silently ignored. Real knobs are kept, and an AR baseline made from a LogitSpec run drops
    LogitSpec's knobs rather than refusing them."""
    import specviz
    target, _ = pair()
    with pytest.raises(ValueError, match="did you mean 'max_new_tokens'"):
        specviz.generate(target, [1, 2, 3], method="ar", max_new_token=5)
    with pytest.raises(ValueError, match="did you mean 'top_k'"):
        DecodeSettings.of(method="logitspec", top_kk=3)
    with pytest.raises(ValueError, match="'pld' takes num_tokens"):
        DecodeSettings.of(method="pld", layers="0-3")
    with pytest.raises(ValueError, match="did you mean 'temperature'"):
        DecodeSettings.of(method="logitspec").replace(temprature=0.5)
    s = DecodeSettings.of(method="logitspec", top_k=3, max_ngram=2)
    assert s.knobs == (("max_ngram", 2), ("top_k", 3))
    assert s.replace(method="ar").knobs == () and s.replace(method="pld").knobs == (("max_ngram", 2),)
    assert len(specviz.generate(target, [1, 2, 3], method="ar", max_new_tokens=5, chat=False).token_ids) == 5


def test_compare_rows_change_only_their_own_columns():
    """A Compare row decodes with the shared settings, its own method, K and temperature, and no traces."""
    shared = Shared.of("hello", seed=7, top_p=0.8, max_new_tokens=20)
    s = shared.for_row(Config("bundled", "logitspec", None, 5, 0.7))
    assert (s.method, s.k, s.temperature, s.seed, s.top_p, s.max_new_tokens, s.record) == (
        "logitspec", 5, 0.7, 7, 0.8, 20, False)
    assert Config("bundled", "pld").k == default_k("pld")


def test_the_apps_settings_are_decode_settings_with_the_engine_method():
    """RunSettings is a DecodeSettings whose `method` is the engine's, as DecodeSettings' is: the
    Proposer picker's 'draft' + trained head (kept in `proposer`) is method 'head', and so is the
    Decoder's; decode() keeps every other value, and a blank K takes the chosen method's default."""
    s = from_inputs(dict(method="draft", draft="head", k=5, temperature=0.7, top_p=0.9, seed=2, prompt="x"))
    assert isinstance(s, DecodeSettings) and (s.proposer, s.method) == ("draft", "head")
    assert RunSettings(proposer="draft", draft="bundled").method == "draft"
    d = s.decode()
    assert type(d) is DecodeSettings and d.method == "head"
    assert (d.k, d.temperature, d.top_p, d.seed) == (5, 0.7, 0.9, 2)
    assert from_inputs(dict(method="pld", prompt="x")).k == default_k("pld")
    with pytest.raises(ValueError, match="top_p"):
        RunSettings(top_p=1.5)
