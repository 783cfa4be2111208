"""Tests for specviz.measure.question_runs: which questions a short run takes, and Compare's
configurations timed on each question of a tiny word-level target, each row keeping its question."""
from __future__ import annotations

from specviz.measure.comparison import Config, Shared
from specviz.measure.question_runs import QuestionComparison, spread
from specviz.measure.specbench import Question, read_questions
from specviz.models.families import tiny_random
from tests.helpers.tiny import word_tokenizer


def test_spread_takes_a_leaderboard_row_at_a_time_then_a_category_at_a_time():
    """The first picks cover distinct leaderboard rows in file order (not the file's first eight MT-bench
    questions); a second round takes the next MT-bench category, not the same one again."""
    qs = [Question(str(i), c, f"p{i}") for i, c in enumerate(
        ["writing", "writing", "roleplay", "translation", "translation", "qa"])]
    assert [q.id for q in spread(qs, 3)] == ["0", "3", "5"]
    assert [q.id for q in spread(qs, 6)] == ["0", "3", "5", "2", "4", "1"]
    assert spread(qs, 0) == [] and len(spread(qs, 99)) == 6


def test_the_public_subsets_first_six_questions_cover_all_six_leaderboard_rows():
    """On the shipped subset, six questions are one from each leaderboard row."""
    assert len({q.group for q in spread(read_questions(), 6)}) == 6


def test_every_configuration_runs_on_every_question_and_keeps_its_category():
    """Two configurations on two questions give four rows in question order, each with its question's
    id, category and text, each greedy row lossless against its question's own AR run; only the first
    question warms up, and the count of decodes matches `total`."""
    target = tiny_random(vocab_size=40, tokenizer=word_tokenizer())
    qs = [Question("7", "writing", "w4 w5 w6 w4 w5 w6 w4 w5"), Question("9", "translation", "w9 w8 w7 w9 w8")]
    comparison = QuestionComparison([Config("t", "pld", None, 2), Config("t", "logitspec", None, 2)], qs,
                                    Shared.of("unused", max_new_tokens=6, chat=False))
    messages = list(comparison.run(lambda spec: target))
    assert comparison.done == comparison.total == len(messages) == 3 * 2 + 3 * 1  # 3 units: AR + two rows
    assert sum("Warming up" in m for m in messages) == 3 and all(m.startswith("Question ") for m in messages)
    rows = comparison.rows()
    assert [(r["question_id"], r["category"], r["method"]) for r in rows] == [
        ("7", "writing", "pld"), ("7", "writing", "logitspec"), ("9", "translation", "pld"),
        ("9", "translation", "logitspec")]
    assert all(r["lossless"] is True and r["speedup"] > 0 for r in rows)
    assert rows[2]["question"] == qs[1].prompt and rows[0]["group"] == "Multi-turn conversation"
    assert [b["question_id"] for b in comparison.baseline_rows()] == ["7", "9"]


def test_a_model_that_fails_to_load_fails_its_row_on_every_question():
    """A row whose model does not load is an error on each question, and the other row still runs."""
    target = tiny_random(vocab_size=40, tokenizer=word_tokenizer())

    def get(spec):
        if spec != "t":
            raise ValueError(f"no model '{spec}'")
        return target

    qs = [Question("1", "qa", "w4 w5 w4 w5"), Question("2", "rag", "w6 w7 w6 w7")]
    comparison = QuestionComparison([Config("missing", "pld", None, 2), Config("t", "pld", None, 2)], qs,
                                    Shared.of("unused", max_new_tokens=4, chat=False))
    comparison.preload(get)
    list(comparison.run(get))
    rows = comparison.rows()
    assert ["no model 'missing'" in (r["error"] or "") for r in rows] == [True, False, True, False]
    assert rows[1]["speedup"] > 0 and rows[3]["speedup"] > 0
