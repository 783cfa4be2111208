"""Tests for specviz.viz.category_figures: the adapters from Compare's rows and from a bench report,
the leaderboard's rows and their geometric means, and the heatmap drawn from synthetic rows."""
from __future__ import annotations

import math

import pytest

from specviz.viz import category_figures as cf


def _row(qid, category, method, speedup):
    return {"question_id": qid, "category": category, "method": method, "speedup": speedup}


def test_cells_are_geometric_means_in_leaderboard_order_with_overall_last():
    """MT-bench categories share the "Multi-turn conversation" row; a cell is the geometric mean of its
    questions (×2 and ×0.5 give ×1, not the arithmetic 1.25); rows follow Spec-Bench's order whatever the
    input order, and "Overall" holds every question."""
    rows = [_row("9", "rag", "pld", 3.0), _row("1", "writing", "pld", 2.0), _row("2", "coding", "pld", 0.5),
            _row("5", "translation", "pld", 1.5), _row("1", "writing", "hybrid", 4.0)]
    names, methods, cells = cf.category_table(rows)
    assert names == ["Multi-turn conversation", "Translation", "Retrieval-aug. generation", "Overall"]
    assert methods == ["pld", "hybrid"]
    assert cells["Multi-turn conversation", "pld"] == (pytest.approx(1.0), 2)
    assert cells["Overall", "pld"] == (pytest.approx((2.0 * 0.5 * 1.5 * 3.0) ** 0.25), 4)
    assert cells["Multi-turn conversation", "hybrid"] == (4.0, 1) and ("Translation", "hybrid") not in cells
    names, _, _ = cf.category_table(rows, split_mt=True)
    assert names[:2] == ["writing", "coding"]  # each MT-bench category its own row when asked


def test_the_figure_writes_each_cell_and_names_the_rows_with_no_question():
    """The heatmap has one row per leaderboard row and one column per method, the speedup written in
    each cell ("–" where a method did not run), colour on a log scale centred on ×1, and a note naming
    the leaderboard rows that had no question."""
    rows = [_row("1", "writing", "pld", 2.0), _row("5", "translation", "pld", 0.5), _row("1", "writing", "hybrid", 1.0)]
    fig = cf.category_figure(rows)
    heat = fig.data[0]
    assert list(heat.y) == ["Multi-turn conversation", "Translation", "<b>Overall</b>"]
    assert list(heat.x) == ["pld", "hybrid"]
    assert [list(r) for r in heat.text] == [["2.00×", "1.00×"], ["0.50×", "–"], ["1.00×", "1.00×"]]
    assert heat.z[0][0] == pytest.approx(1.0) and heat.z[1][0] == pytest.approx(-1.0) and heat.z[1][1] is None
    note = fig.layout.title.text.split("No question here from:")[1]
    assert "Summarization" in note and "Question answering" in note and "Translation" not in note
    assert "No measured question" in cf.category_figure([]).layout.annotations[0].text


def test_method_and_category_text_is_escaped_in_the_figure():
    """A configuration label or category typed by a person cannot put markup into the figure."""
    fig = cf.category_figure([_row("1", "<img src=x>", "<b>m</b>", 2.0)])
    shown = " ".join(map(str, [*fig.data[0].x, *fig.data[0].y, *sum(map(list, fig.data[0].customdata), [])]))
    assert "<img" not in shown and "<b>m" not in shown and "&lt;img" in shown


def test_compare_rows_become_figure_rows_without_ar_errors_or_pending_rows():
    """From Compare's rows, only measured speculative rows with a question count; two rows with the same
    configuration keep apart by their row number."""
    base = dict(question_id="1", category="writing", error=None, method="pld", label="pld, K=4, greedy")
    rows = [dict(base, index=1, speedup=2.0), dict(base, index=2, speedup=3.0),
            dict(base, index=3, method="ar", label="AR (plain), greedy", speedup=1.0),
            dict(base, index=4, label="x", error="no model", speedup=None),
            dict(base, index=5, label="y", pending=True),
            dict(index=6, label="z", method="pld", speedup=2.0, error=None)]  # a typed-prompt row: no question
    out = cf.rows_from_compare(rows)
    assert [(r["method"], r["speedup"]) for r in out] == [("#1 pld, K=4, greedy", 2.0), ("#2 pld, K=4, greedy", 3.0)]
    assert all(r["category"] == "writing" and r["question_id"] == "1" for r in out)


def test_bench_report_rows_divide_by_the_anchor_on_the_same_question():
    """A bench report's rows are each variant's tokens/s over the anchor's on that question, with the
    report's categories; the anchor is no method, and a report without it is refused in a sentence."""
    report = {"variants": ["hf", "hf_pld", "ar", "hybrid"], "prompts": {"84": "writing", "169": "translation"},
              "results": {"84": {"hf": {"tokens_per_s": 10.0}, "hf_pld": {"tokens_per_s": 15.0},
                                 "ar": {"tokens_per_s": 12.0}, "hybrid": {"tokens_per_s": 25.0}},
                          "169": {"hf": {"tokens_per_s": 20.0}, "hf_pld": {"tokens_per_s": 20.0},
                                  "ar": {"tokens_per_s": 22.0}, "hybrid": {"tokens_per_s": 30.0}}}}
    rows = cf.rows_from_bench(report)
    got = {(r["question_id"], r["method"]): r["speedup"] for r in rows}
    assert got == {("84", "hf_pld"): 1.5, ("84", "ar"): 1.2, ("84", "hybrid"): 2.5,
                   ("169", "hf_pld"): 1.0, ("169", "ar"): 1.1, ("169", "hybrid"): 1.5}
    assert {r["category"] for r in rows} == {"writing", "translation"}
    by_pld = {(r["question_id"], r["method"]): r["speedup"] for r in cf.rows_from_bench(report, anchor="hf_pld")}
    assert by_pld["84", "hybrid"] == pytest.approx(25 / 15) and ("84", "hf") in by_pld
    _, _, cells = cf.category_table(rows)
    assert cells["Overall", "hybrid"][0] == pytest.approx(math.sqrt(2.5 * 1.5))
    with pytest.raises(ValueError, match="no 'vllm' anchor"):
        cf.rows_from_bench(report, anchor="vllm")


def test_the_bench_reports_html_carries_the_category_chart_when_its_prompts_have_categories():
    """`specviz bench`'s HTML report adds the category heatmap over HF plain when its prompts carry
    categories, and leaves it out when none does."""
    from specviz.viz.bench_report import report_html

    results = {"84": {"hf": {"tokens_per_s": 10.0}, "pld": {"tokens_per_s": 20.0}}}
    report = {"variants": ["hf", "pld"], "prompts": {"84": "writing"}, "results": results, "summary": {},
              "machine": {"cpu": "test"}}
    assert "Speedup by Spec-Bench category over HF plain generate" in report_html(report)
    assert "Spec-Bench category" not in report_html(dict(report, prompts={"84": ""}))
