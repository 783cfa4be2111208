"""Compatibility (specviz/advise/compatibility.py) on tiny word-level tokenizers and tiny random models."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from specviz.advise.compatibility import LEVELS, TOPICS, Finding, blocking, compatibility
from specviz.loading.loader import check_tokenizers, tiny_random
from specviz.models.common import TokenizerMismatch

TEMPLATE = "{% for m in messages %}<user> {{ m['content'] }} {% endfor %}"
SIZES = dict(hidden_size=16, heads=2, kv_heads=1, intermediate=32, layers=1)


def tok(n: int = 40, swap: tuple[int, int] | None = None, eos: str = "<eos>", added: tuple[str, ...] = (),
        template: str | None = TEMPLATE):
    """A word-level tokenizer of n tokens: <unk> 0, <eos> 1, <user> 2, then 'w3'..; `swap` exchanges two
    ids' words, `eos` names the end token, `added` are added after the n tokens."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<eos>": 1, "<user>": 2, **{f"w{i}": i for i in range(3, n)}}
    if swap:
        a, b = swap
        vocab[f"w{a}"], vocab[f"w{b}"] = b, a
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token=eos)
    out.add_tokens(list(added))
    out.chat_template = template
    return out


def model(tokenizer, rows: int = 40, eos_ids=(1,), name: str = "m"):
    return tiny_random(vocab_size=rows, tokenizer=tokenizer, eos_ids=list(eos_ids), name=name, **SIZES)


def by_topic(findings: list[Finding], topic: str) -> list[Finding]:
    return [f for f in findings if f.topic == topic]


def levels(findings: list[Finding], topic: str) -> set[str]:
    return {f.level for f in by_topic(findings, topic)}


def test_an_identical_pair_is_all_ok():
    """Two separately built but equal tokenizers on equal models give only "ok" findings, at least one
    per topic, in the order of TOPICS, and nothing blocking."""
    findings = compatibility(model(tok(), name="t"), model(tok(), name="d"))
    assert {f.level for f in findings} == {"ok"}
    assert [f.topic for f in findings] == list(TOPICS)
    assert not blocking(findings)
    assert "each of the 40 ids the two models share (ids 0 to 39)" in by_topic(findings, "tokens")[0].message


def test_the_same_tokenizer_object_is_ok_at_once():
    """A draft that shares the target's tokenizer object is ok on tokens without a comparison."""
    shared = tok()
    findings = compatibility(model(shared), model(shared))
    assert {f.level for f in findings} == {"ok"}
    assert "same tokenizer" in by_topic(findings, "tokens")[0].message


def test_swapped_ids_are_an_error_naming_them():
    """A draft whose tokenizer swaps ids 5 and 6 is one error on tokens that counts 2 differing ids and
    names both with each side's token; check_tokenizers refuses the same pair."""
    target, draft = model(tok()), model(tok(swap=(5, 6)))
    findings = compatibility(target, draft)
    errors = [f for f in findings if f.level == "error"]
    assert [f.topic for f in errors] == ["tokens"]
    msg = errors[0].message
    assert msg.startswith("The tokenizers differ at 2 of the 40 ids")
    assert "id 5 is 'w5' in the target but 'w6' in the draft" in msg
    assert "id 6 is 'w6' in the target but 'w5' in the draft" in msg
    assert blocking(findings)
    with pytest.raises(TokenizerMismatch):
        check_tokenizers(target, draft)


def test_many_differing_ids_name_only_the_first_few():
    """With 10 ids differing, the message names 3 and says how many more."""
    from specviz.advise import compatibility as pc

    findings = compatibility(model(tok(n=40)), model(tok(n=30), rows=40))
    msg = by_topic(findings, "tokens")[0].message
    assert msg.startswith("The tokenizers differ at 10 of the 40 ids")
    assert msg.count(" in the draft") == pc.SHOWN
    assert "id 30 is 'w30' in the target but no token in the draft" in msg
    assert "and 7 more" in msg


def test_a_padded_draft_is_reported_and_not_an_error():
    """A draft with more embedding rows (48) than the target (40), same tokenizer, is one ok finding on
    vocab_size that names both sizes and the 40 shared ids; nothing blocks."""
    findings = compatibility(model(tok(), rows=40), model(tok(), rows=48))
    sizes = by_topic(findings, "vocab_size")
    assert [f.level for f in sizes] == ["ok"]
    assert "40 embedding rows" in sizes[0].message and "the draft 48" in sizes[0].message
    assert "only the 40 ids both have are compared" in sizes[0].message
    assert not blocking(findings)


def test_qwen2_sized_padding_is_fine():
    """Qwen2 1.5B's 151936 rows against 72B's 152064, on a LoadedModel-like object that only has a
    tokenizer, rows and a config, are ok and named in the message."""
    def like(rows: int, name: str):
        return SimpleNamespace(tokenizer=tok(), vocab_size=rows, name=name, eos_ids={1},
                               model=SimpleNamespace(config=SimpleNamespace(vocab_size=rows)))

    findings = compatibility(like(152064, "72B"), like(151936, "1.5B"))
    assert {f.level for f in findings} == {"ok"}
    msg = by_topic(findings, "vocab_size")[0].message
    assert "152064" in msg and "151936" in msg


def test_a_draft_with_too_few_rows_is_an_error_and_the_engine_refuses_it_too():
    """A draft with 36 rows under a target whose tokenizer has 40 real tokens is an error on vocab_size
    naming ids 36 to 39, which the pair can never produce; check_tokenizers, which the engine calls
    before any run, refuses the pair as well (it used to let it through: the output was then cut to
    36 ids, not the target's)."""
    target, draft = model(tok(), rows=40), model(tok(), rows=36)
    findings = compatibility(target, draft)
    sizes = by_topic(findings, "vocab_size")
    assert "error" in {f.level for f in sizes}
    assert "36 to 39" in next(f.message for f in sizes if f.level == "error")
    assert levels(findings, "tokens") == {"ok"}
    assert blocking(findings)
    with pytest.raises(TokenizerMismatch, match="36 rows but the target has 40 real tokens"):
        check_tokenizers(target, draft)


def test_a_model_with_fewer_rows_than_its_tokenizer_is_warned():
    """A target with 40 rows under a 44-token tokenizer is warned about ids 40 to 43 it cannot read."""
    findings = compatibility(model(tok(n=44), rows=40), model(tok(n=44), rows=40))
    warns = [f.message for f in by_topic(findings, "vocab_size") if f.level == "warn"]
    assert len(warns) == 2 and "ids 40 to 43" in warns[0] and warns[0].startswith("The target's")


def test_a_differing_eos_is_a_warning_naming_the_ids():
    """A draft whose end token is '<user>' (id 2), not '<eos>' (id 1), and whose model stops at id 2, gets
    two warnings on special naming both tokens and ids, and nothing blocks."""
    findings = compatibility(model(tok(), eos_ids=(1,)), model(tok(eos="<user>"), eos_ids=(2,)))
    special = by_topic(findings, "special")
    assert {f.level for f in special} == {"warn"} and len(special) == 2
    assert "'<eos>' (id 1) in the target and '<user>' (id 2) in the draft" in special[0].message
    assert "the target at id 1 and the draft at id 2" in special[1].message
    assert not blocking(findings)


def test_a_differing_chat_template_is_a_warning():
    """A template set on one side only, or different text on both, is one warning on chat_template saying
    it matters only to the draft run alone; the different text is located."""
    for draft_template in (None, TEMPLATE.replace("<user>", "[user]")):
        findings = compatibility(model(tok()), model(tok(template=draft_template)))
        chat = by_topic(findings, "chat_template")
        assert [f.level for f in chat] == ["warn"]
        assert "only matters if you run the draft alone" in chat[0].message
        assert not blocking(findings)
    assert "from character 23 on (\"<user> {{ m['content\" in the target, \"[user] {{" in chat[0].message


def test_an_added_token_only_in_the_draft_above_the_shared_ids_is_a_warning():
    """'<tool>' added to the draft at id 40, above the 40 ids it shares with the target, is a warning on
    added (never proposed) and on vocab_size; nothing blocks, and check_tokenizers accepts the pair."""
    target, draft = model(tok(), rows=40), model(tok(added=("<tool>",)), rows=48)
    findings = compatibility(target, draft)
    added = by_topic(findings, "added")
    assert [f.level for f in added] == ["warn"]
    assert "id 40 is no token in the target but '<tool>' in the draft" in added[0].message
    assert levels(findings, "vocab_size") == {"warn"}
    assert not blocking(findings)
    assert check_tokenizers(target, draft) == 40


@pytest.mark.parametrize("target_added", [(), ("<call>",)])
def test_an_added_token_that_clashes_below_the_shared_ids_is_an_error(target_added):
    """'<tool>' added to the draft at id 40 while both models have 48 rows is an error on added, whether
    the target has no token there or '<call>'; check_tokenizers refuses the same pair."""
    target, draft = model(tok(added=target_added), rows=48), model(tok(added=("<tool>",)), rows=48)
    findings = compatibility(target, draft)
    assert "error" in levels(findings, "added") and levels(findings, "tokens") == {"error"}
    there = repr(target_added[0]) if target_added else "no token"
    assert f"id 40 is {there} in the target but '<tool>' in the draft" in by_topic(findings, "added")[0].message
    assert by_topic(findings, "added")[0].message.count("id 40 ") == 1  # named once, not once per side
    with pytest.raises(TokenizerMismatch):
        check_tokenizers(target, draft)


def test_padding_rows_on_both_sides_are_ok():
    """Both models padded to 48 rows over a 40-token tokenizer: the tokens check says ids 40 and up are
    padding in both, and nothing is above ok."""
    findings = compatibility(model(tok(), rows=48), model(tok(), rows=48))
    assert {f.level for f in findings} == {"ok"}
    assert "neither tokenizer has a token from 40 up (padding)" in by_topic(findings, "tokens")[0].message


def test_a_target_token_above_the_drafts_rows_is_an_error():
    """The target's added '<tool>' at id 40, which the target's 48 rows can produce but the draft's 40 rows
    cut off, is an error on added and on vocab_size."""
    findings = compatibility(model(tok(added=("<tool>",)), rows=48), model(tok(), rows=40))
    assert levels(findings, "added") == {"error"} and "error" in levels(findings, "vocab_size")
    assert "above the 40 ids" in by_topic(findings, "added")[0].message


@pytest.mark.parametrize("missing", ["target", "draft"])
def test_a_missing_tokenizer_is_an_error(missing):
    """A model without a tokenizer is an error on tokens naming it; the checks that need tokenizers say
    they were not run, and the sizes are still compared."""
    target = model(None if missing == "target" else tok(), name="t")
    draft = model(None if missing == "draft" else tok(), name="d")
    findings = compatibility(target, draft)
    assert by_topic(findings, "tokens")[0].level == "error"
    assert f"The {missing} '{missing[0]}' has no tokenizer" in by_topic(findings, "tokens")[0].message
    assert any(f.message == f"Not checked: the {missing} has no tokenizer." for f in by_topic(findings, "added"))
    assert by_topic(findings, "vocab_size")
    assert blocking(findings)


def test_every_message_is_one_plain_sentence():
    """Across all the pairs above, every finding has a known level and topic, and its message is one line
    that starts with a capital and ends with a full stop."""
    pairs = [(model(tok()), model(tok(swap=(5, 6)))), (model(tok(), rows=40), model(tok(), rows=36)),
             (model(tok()), model(tok(eos="<user>", template=None), eos_ids=(2,))),
             (model(tok(added=("<call>",)), rows=48), model(tok(added=("<tool>",)), rows=48)),
             (model(None), model(tok()))]
    for target, draft in pairs:
        for f in compatibility(target, draft):
            assert f.level in LEVELS and f.topic in TOPICS
            assert "\n" not in f.message and f.message[0].isupper() and f.message.endswith("."), f.message


def test_two_models_without_tokenizers_warn_but_do_not_block():
    """Random twins built without a tokenizer (as the engine allows: the same None on both sides)
    get a warning that nothing but ids could be compared, and the pair is not blocked."""
    target = tiny_random(vocab_size=32, hidden_size=16, layers=1, seed=1)
    draft = tiny_random(vocab_size=32, hidden_size=16, layers=1, seed=2)
    found = compatibility(target, draft)
    assert not blocking(found) and any(f.level == "warn" and "Neither model has a tokenizer" in f.message
                                       for f in found)
