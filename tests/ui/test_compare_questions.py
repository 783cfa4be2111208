"""Compare and Advise with Spec-Bench questions as their prompts (ui/shared/questions.py), driven through
their handlers in-process on a tiny word-level target: categories kept on every row, the category chart,
bad question files as one sentence in the status line, and question text escaped."""
from __future__ import annotations

import json

import pytest

from specviz.measure.specbench import PUBLIC_LABEL
from specviz.models.families import tiny_random
from specviz.ui import advise, compare
from specviz.ui.runtime.state import MODELS
from specviz.ui.shared import questions
from specviz.viz.compare_figures import question_table_html
from tests.helpers.tiny import word_tokenizer

NO_PROGRESS = lambda *a, **k: None  # noqa: E731 -- the handlers' gr.Progress outside an event
TINY = "tiny-random:vocab=40,seed=164"  # a spec of its own, so no other test's pool entry is reused


@pytest.fixture(scope="module")
def tiny_words():
    """A tiny target with a word tokenizer in the page's model pool (Spec-Bench's text becomes <unk>s)."""
    MODELS.put(TINY, tiny_random(vocab_size=40, tokenizer=word_tokenizer(), name=TINY))
    return TINY


def _frames(rows, source, file=None, count=2, prompt="w4 w5 w6"):
    return [dict(zip(compare.OUTPUTS, f)) for f in compare.compare(
        rows, prompt, 4, 1, 0, False, source, file, count, None, NO_PROGRESS)]


def test_compare_on_the_public_subset_keeps_each_questions_category(tiny_words):
    """With "Spec-Bench (public subset)" and two questions, every row runs on each question: the table
    has a heading per question (id and category) above its rows, the status says so, and the chart is
    the category heatmap with the two questions' leaderboard rows and Overall; the Theory tab then
    offers both rows (their run on the first question) to explain."""
    from specviz.ui import theory
    from specviz.ui.runtime.state import session_of

    rows = [[TINY, "pld", "", 2, 0], [TINY, "logitspec", "", 2, 0]]
    last = _frames(rows, PUBLIC_LABEL)[-1]
    assert "sv-status-ok" in last["status"] and "2 question(s) × 2 configuration(s)" in last["status"]
    assert "Question 84 · writing" in last["table"] and "Question 169 · translation" in last["table"]
    assert last["table"].count('class="sv-cmp-row"') == 4 and last["table"].count("lossless ✓") == 4
    heat = last["chart"].data[0]
    assert heat.type == "heatmap" and list(heat.y) == ["Multi-turn conversation", "Translation", "<b>Overall</b>"]
    assert len(heat.x) == 2 and all(t.endswith("×") for row in heat.text for t in row)
    measured = session_of(None).comparison.rows()
    assert [(r["question_id"], r["category"]) for r in measured] == [("84", "writing")] * 2 + [
        ("169", "translation")] * 2
    offered = theory.sources(None)["choices"]
    assert [label.split(":")[0] for label, _ in offered[:2]] == ["Compare row 1", "Compare row 2"]


@pytest.mark.parametrize("content, needle", [
    ('{"question_id": 1, "category": "qa"}\n', "Line 1"),
    ('{"question_id": 1, "category": "qa", "turns": ["hi"], "colour": "red"}\n', "Line 1"),
    ("", "no questions"),
    ('{"question_id": 1, "category": "qa", "turns": ["hi"]}\nnot json\n', "Line 2 is not JSON"),
    (None, "No question file yet"),
])
def test_a_bad_question_file_is_one_sentence_in_the_status_and_no_model_runs(tmp_path, content, needle):
    """A missing or unknown field, an empty file, a non-JSON line or no file at all ends Compare with
    one error sentence naming the file's problem (and the file), before any model is asked for; the
    outputs are only the status, table and chart, so the typed inputs stay as they were."""
    path = None
    if content is not None:
        path = tmp_path / "mine.jsonl"
        path.write_text(content, encoding="utf-8")
    frames = _frames([["no-such-model", "pld", "", 2, 0]], questions.UPLOADED, str(path) if path else None)
    assert len(frames) == 1 and "sv-status-error" in frames[0]["status"], frames
    assert needle in frames[0]["status"] and "Traceback" not in frames[0]["status"]
    assert content is None or "mine.jsonl" in frames[0]["status"]
    assert set(frames[0]) == {"status", "table", "chart"}


def test_a_file_over_the_size_cap_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A question file over the reader's cap gets the sentence that names its size (the cap made small
    here, so the test writes kilobytes, not megabytes)."""
    from specviz.measure import specbench

    monkeypatch.setattr(specbench, "MAX_FILE_BYTES", 1024)
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps({"question_id": 1, "category": "qa", "turns": ["x" * 2000]}) + "\n", encoding="utf-8")
    frames = _frames([[TINY, "pld", "", 2, 0]], questions.UPLOADED, str(path))
    assert len(frames) == 1 and "more than the" in frames[0]["status"] and "big.jsonl" in frames[0]["status"]


def test_an_uploaded_files_question_text_is_escaped_in_the_table(tiny_words, tmp_path):
    """A question whose text and category carry HTML runs, and the table shows them as text."""
    path = tmp_path / "evil.jsonl"
    path.write_text(json.dumps({"question_id": "x1", "category": "<b>cat</b>",
                                "turns": ["w4 <img src=x onerror=alert(1)> w5"]}) + "\n", encoding="utf-8")
    last = _frames([[TINY, "pld", "", 2, 0]], questions.UPLOADED, str(path), count=1)[-1]
    assert "sv-status-ok" in last["status"], last["status"]
    assert "<img" not in last["table"] and "&lt;img src=x" in last["table"] and "&lt;b&gt;cat" in last["table"]
    table = question_table_html([dict(index=1, label="<script>", question_id="<q>", category="c", question="<i>",
                                      error=None, pending=True)])
    assert "<script>" not in table and "<q>" not in table and "<i>" not in table


def test_advise_takes_the_questions_and_its_survey_names_their_categories(tiny_words, monkeypatch):
    """Advise with the public subset measures its picked questions as the prompts, and the survey's
    summary line names each question's id and category; a bad file is one error sentence."""
    from specviz.advise import advice_report

    seen = {}

    def fake_advise(target, cands, prompts, options):
        seen.update(prompts=prompts, options=options)
        raise ValueError("measured elsewhere")  # the measurement itself is test_advisor.py's
        yield  # a generator, as work.advise is

    monkeypatch.setattr(advise.work, "advise", fake_advise)
    frames = list(advise.run_advice(TINY, ["pld"], "", "", 4, 4, 0.0, 1.0, 0, False, PUBLIC_LABEL, None, 3,
                                    None, NO_PROGRESS))
    assert "measured elsewhere" in frames[-1][0] and len(seen["prompts"]) == 3
    assert seen["options"]["prompts_from"] == f"{PUBLIC_LABEL}: 84 (writing), 169 (translation), 256 (summarization)"
    survey = advice_report.Survey(TINY, 3, {"prompts_from": seen["options"]["prompts_from"], "temperature": 0.0},
                                  "m", 1.0, 0.01, {1: 1.0})
    assert "3 prompts (Spec-Bench (public subset): 84 (writing)" in advice_report.summary(survey)
    bad = list(advise.run_advice(TINY, ["pld"], "", "typed", 4, 4, 0.0, 1.0, 0, False, questions.UPLOADED, None, 3,
                                 None, NO_PROGRESS))
    assert len(bad) == 1 and "sv-status-error" in bad[0][0] and "No question file yet" in bad[0][0]
