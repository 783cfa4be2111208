"""Tests for specviz.measure.specbench: the shipped subset, a bad question file refused in one sentence
naming its line, and the leaderboard's rows."""
from __future__ import annotations

import json

import pytest

from specviz.measure import specbench
from specviz.measure.specbench import QuestionFileError, parse_questions, read_questions

GOOD = {"question_id": 1, "category": "qa", "turns": ["Who wrote Middlemarch?"]}


def _file(*rows) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n"


def test_the_public_subset_reads_36_questions_in_13_categories():
    """The shipped subset reads without error: 36 questions, ids unique, every one of Spec-Bench's 13
    categories present (2 of each MT-bench category, 4 of each other), prompts the first turn."""
    qs = read_questions()
    assert len(qs) == 36 and len({q.id for q in qs}) == 36
    counts = {c: sum(q.category == c for q in qs) for c in specbench.CATEGORIES}
    assert counts == {**{c: 2 for c in specbench.MT_BENCH}, **{c: 4 for c in specbench.CATEGORIES[8:]}}
    line = json.loads(specbench.PUBLIC_SUBSET.read_text(encoding="utf-8").splitlines()[0])
    assert qs[0].prompt == line["turns"][0] and qs[0].id == str(line["question_id"])


@pytest.mark.parametrize("text, words", [
    (_file(GOOD, "{not json"), ["Line 2", "not JSON"]),
    (_file(GOOD, {"question_id": 2, "turns": ["x"]}), ["Line 2", "'category' is missing"]),
    (_file({**GOOD, "colour": "red"}), ["Line 1", "'colour'"]),
    (_file(GOOD, {**GOOD, "question_id": 3, "turns": []}), ["Line 2", "'turns' is empty"]),
    (_file(GOOD, GOOD), ["Line 2", "also on line 1"]),
    (_file(GOOD, {**GOOD, "question_id": True}), ["Line 2", "whole number or text"]),
    (_file({**GOOD, "turns": ["   "]}), ["Line 1", "first turn is empty"]),
    ("", ["no questions"]),
    ("\n\n  \n", ["no questions"]),
    ("[1, 2]\n", ["Line 1"]),
])
def test_a_bad_question_file_is_one_sentence_naming_the_line(text, words):
    """Each bad file (a non-JSON line, a missing, unknown or empty field, a duplicate id, a bool id, a
    blank prompt, an empty file, a line that is not an object) raises QuestionFileError: one line of text
    that names the line where there is one, and says what a line must hold."""
    with pytest.raises(QuestionFileError) as info:
        parse_questions(text)
    message = str(info.value)
    assert "\n" not in message and message.endswith(".")
    for word in words:
        assert word in message, message


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A 50 MB (sparse) file is refused by its size, naming the limit, without its bytes being read."""
    big = tmp_path / "question.jsonl"
    with open(big, "wb") as f:
        f.truncate(50 * 2**20)
    monkeypatch.setattr(type(big), "read_bytes", lambda self: pytest.fail("the file was read"))
    with pytest.raises(QuestionFileError, match="50 MB, more than the 8 MB"):
        read_questions(big)


def test_a_missing_file_and_text_that_is_not_utf8_are_one_sentence(tmp_path):
    """A path that does not exist and bytes that are not UTF-8 each give a QuestionFileError that says so."""
    with pytest.raises(QuestionFileError, match="Cannot read the question file"):
        read_questions(tmp_path / "nope.jsonl")
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(_file(GOOD).encode().replace(b"Who", b"W\xe9o"))
    with pytest.raises(QuestionFileError, match="not UTF-8"):
        read_questions(bad)


CATS = {"1": "writing", "2": "coding", "3": "translation", "4": "rag", "5": "mystery", "6": "writing"}


def test_the_mt_bench_categories_share_one_row_in_spec_benchs_order_and_overall_is_last():
    """Writing and coding questions go to "Multi-turn conversation"; rows follow Spec-Bench's order, an
    unknown category is a row of its own after them, "Overall" holds every question, and the rows with
    no question are the ones missing_rows names."""
    rows = specbench.group_rows(CATS)
    assert list(rows) == ["Multi-turn conversation", "Translation", "Retrieval-aug. generation", "mystery", "Overall"]
    assert rows["Multi-turn conversation"] == ["1", "2", "6"] and rows["Overall"] == list(CATS)
    assert specbench.missing_rows(CATS) == ["Summarization", "Question answering", "Mathematical reasoning"]


def test_split_mt_gives_each_mt_bench_category_its_own_row_and_keeps_the_other_names():
    """With split_mt, writing and coding are rows of their own where the MT row was, in Spec-Bench's
    category order; translation and RAG keep the leaderboard's names; the missing MT categories are named."""
    rows = specbench.group_rows(CATS, split_mt=True)
    assert list(rows) == ["writing", "coding", "Translation", "Retrieval-aug. generation", "mystery", "Overall"]
    missing = specbench.missing_rows(CATS, split_mt=True)
    assert missing[:6] == ["roleplay", "reasoning", "math", "extraction", "stem", "humanities"]
    assert "Translation" not in missing and "Summarization" in missing
