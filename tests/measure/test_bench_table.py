"""Tests for specviz.measure.bench_table: the leaderboard's table from a synthetic bench report (no model)."""
from __future__ import annotations

import math

import pytest

from specviz.decoding import speed
from specviz.measure import bench_table

CATS = {"1": "writing", "2": "coding", "3": "translation", "4": "translation"}
# tokens/s of each variant on each question, one list per repeat; token ids equal to hf's unless noted
SPEEDS = {"hf": [10, 10], "hf_pld": [20, 20], "ar": [12, 14], "hybrid": [30, 34], "pld": [28, 32], "suffix": [15, 15]}


def _run(tps: list[float], tokens=(1, 2, 3), tau=None, alpha=None) -> dict:
    return {"tokens_per_s": sorted(tps)[len(tps) // 2] if len(tps) % 2 else sum(tps) / len(tps),
            "tokens_per_s_repeats": list(tps), "token_ids": list(tokens),
            "mean_accepted_tokens": tau, "acceptance_rate": alpha}


def _report(temperature=0.0, cats=CATS, repeats=2) -> dict:
    results = {}
    for pid, cat in cats.items():
        scale = 2.0 if cat == "translation" else 1.0  # translation: the hybrid twice as fast again
        row = {}
        for v, tps in SPEEDS.items():
            tps = tps[:repeats]
            drafts = v not in ("hf", "hf_pld", "ar")
            row[v] = _run([x * (scale if v == "hybrid" else 1.0) for x in tps], tau=3.0 if drafts else 1.0,
                          alpha=0.5 if drafts else 0.0)
        if pid == "2":
            row["pld"]["token_ids"] = [9]  # one output that differs from HF's
        results[pid] = row
    return {"settings": {"temperature": temperature, "top_p": 1.0, "max_new_tokens": 16, "repeats": repeats,
                         "target": "t"}, "variants": list(SPEEDS), "prompts": dict(cats), "results": results,
            "planned": len(cats), "suite": {"label": "Spec-Bench (public subset)"}}


def test_rows_are_the_leaderboards_with_overall_last_and_every_number_where_it_belongs():
    """MT-bench questions share one row; each row holds every variant but hf; the speedups are geometric
    means of the question medians' ratios, the spread the range of the per-repeat geomeans; τ and α are
    means (our AR: no α); identical counts per row; the best single method and the hybrid's ratio to it."""
    table = bench_table.leaderboard(_report())
    assert list(table["rows"]) == ["Multi-turn conversation", "Translation", "Overall"]
    mt, tr, overall = table["rows"].values()
    assert mt["n"] == 2 and tr["n"] == 2 and overall["n"] == 4
    assert list(mt["methods"]) == ["hf_pld", "ar", "hybrid", "pld", "suffix"]
    hyb = mt["methods"]["hybrid"]
    assert hyb["hf"]["x"] == pytest.approx(32 / 10)
    assert (hyb["hf"]["lo"], hyb["hf"]["hi"]) == (pytest.approx(3.0), pytest.approx(3.4))
    assert hyb["ar"]["x"] == pytest.approx(32 / 13) and "ar" not in mt["methods"]["ar"]
    assert overall["methods"]["hybrid"]["hf"]["x"] == pytest.approx(math.sqrt(3.2 * 6.4))
    assert hyb["mean_accepted_tokens"] == 3.0 and hyb["acceptance_rate"] == 0.5
    assert mt["methods"]["ar"]["acceptance_rate"] is None and mt["methods"]["ar"]["mean_accepted_tokens"] == 1.0
    assert mt["methods"]["pld"]["identical"] == 1 and tr["methods"]["pld"]["identical"] == 2
    assert mt["best"]["method"] == "pld" and mt["best"]["hybrids"]["hybrid"] == pytest.approx(32 / 30)
    assert table["missing"] == ["Summarization", "Question answering", "Mathematical reasoning",
                                "Retrieval-aug. generation"]


def _table_lines(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("|")]


def test_the_markdown_table_has_one_line_per_row_and_method_and_notes_the_missing_categories():
    """Greedy: the header names the three speedups, τ and α by speed.label and the identity column; every
    line has the header's width; 3 rows × 5 variants lines; the best-single table says yes/no against
    0.97; the categories with no question are named in a note under the table."""
    text = bench_table.leaderboard_markdown(_report())
    lines = _table_lines(text)
    head = lines[0]
    assert head == ["category", "questions", "method", "× HF plain", "× HF prompt lookup", "× our AR",
                    speed.label("mean_accepted_tokens"), speed.label("acceptance_rate"), "identical to HF plain"]
    body = [row for row in lines[2:] if len(row) == len(head)]
    assert len(body) == 3 * 5 and [r[0] for r in body[::5]] == ["Multi-turn conversation", "Translation", "Overall"]
    assert body[2][:4] == ["Multi-turn conversation", "2", "hybrid", "3.20× (3.00–3.40)"]
    assert body[3][-1] == "1/2" and body[1][-2] == "–"  # pld's one differing output; our AR's α
    bar = [row for row in lines if row and row[0] in ("Multi-turn conversation", "Translation", "Overall")
           and len(row) == 6]
    assert [(r[1], r[-1]) for r in bar] == [("pld", "yes"), ("pld", "yes"), ("pld", "yes")]
    assert ("No questions measured for Summarization, Question answering, Mathematical reasoning, "
            "Retrieval-aug. generation: left out of the table.") in text
    assert "measures the rest" not in text  # the run is complete


def test_sampled_runs_have_no_identity_column_and_one_repeat_has_no_spread():
    """At T > 0 the identity column is left out (outputs are draws); with one repeat no spread is shown."""
    text = bench_table.leaderboard_markdown(_report(temperature=0.7, repeats=1))
    lines = _table_lines(text)
    assert "identical to HF plain" not in lines[0] and len(lines[0]) == 8
    assert all("(" not in cell for row in lines[2:] for cell in row[3:6])
    assert "sampled at T = 0.7" in text


def test_a_hybrid_below_097_of_the_best_single_method_is_marked_no_and_a_stopped_run_says_so():
    """Where pld beats the hybrid by more than 3 % the bar column says "no"; a report with fewer results
    than planned says how to go on."""
    report = _report(cats={"1": "rag"})
    report["results"]["1"]["pld"] = _run([40, 40])
    report["planned"] = 5
    text = bench_table.leaderboard_markdown(report)
    bar = [row for row in _table_lines(text) if row[0] == "Retrieval-aug. generation" and len(row) == 6]
    assert bar[0][1] == "pld" and bar[0][-2] == "0.80" and bar[0][-1] == "no"
    assert "stopped after 1 of 5 questions" in text and "--resume" in text


def test_split_mt_rows_each_mt_bench_category():
    """With split_mt the writing and coding questions are rows of their own."""
    table = bench_table.leaderboard(_report(), split_mt=True)
    assert list(table["rows"]) == ["writing", "coding", "Translation", "Overall"]


def test_alpha_is_left_out_for_questions_whose_run_sent_no_draft():
    """A question where a method sent no draft (drafted_tokens 0, acceptance_rate 0.0 by convention) does not
    pull the row's α down: α is the mean over the questions that sent one, and "–" when none did; τ keeps
    every question."""
    report = _report()
    for pid, alpha in (("1", 0.0), ("2", 0.8)):
        report["results"][pid]["suffix"].update(acceptance_rate=alpha, drafted_tokens=0 if pid == "1" else 5)
    for pid in ("3", "4"):
        report["results"][pid]["suffix"].update(acceptance_rate=0.0, drafted_tokens=0, mean_accepted_tokens=1.0)
    rows = bench_table.leaderboard(report)["rows"]
    assert rows["Multi-turn conversation"]["methods"]["suffix"]["acceptance_rate"] == pytest.approx(0.8)
    assert rows["Translation"]["methods"]["suffix"]["acceptance_rate"] is None
    assert rows["Translation"]["methods"]["suffix"]["mean_accepted_tokens"] == 1.0
    assert rows["Overall"]["methods"]["suffix"]["acceptance_rate"] == pytest.approx(0.8)


def test_sampled_rows_give_answer_lengths_and_speed_in_cycles_alone_over_our_ar():
    """Under sampling the table adds, per row and method, the mean answer length over every repeat and
    the geometric mean of tokens/s in cycles alone over our AR's; a method without cycle timings (the
    anchors, an older file) shows a dash there; greedy runs have no such table."""
    report = _report(temperature=0.7)
    results = report["results"]
    for pid, row in results.items():
        row["ar"].update(new_tokens_repeats=[100, 120], cycle_tokens_per_s=10.0)
        row["hybrid"].update(new_tokens_repeats=[20, 40], cycle_tokens_per_s=15.0 if pid == "1" else 30.0)
    table = bench_table.leaderboard(report)
    overall = table["rows"]["Overall"]["methods"]
    assert overall["ar"]["new_tokens_mean"] == pytest.approx(110)
    assert overall["hybrid"]["new_tokens_mean"] == pytest.approx(30)
    assert overall["hybrid"]["cycles_vs_ar"] == pytest.approx((1.5 * 3.0 * 3.0 * 3.0) ** 0.25)
    assert overall["ar"]["cycles_vs_ar"] == pytest.approx(1.0)
    assert overall["pld"]["cycles_vs_ar"] is None  # no cycle timings: a dash
    assert overall["pld"]["new_tokens_mean"] == pytest.approx(2.5)  # three answers of 3 tokens, one of 1
    text = bench_table.leaderboard_markdown(report)
    assert "| Overall | hybrid | 30 | 2.52× |" in text and "| Overall | pld | 2 | – |" in text
    assert "cycles alone" not in bench_table.leaderboard_markdown(_report(temperature=0.0))


def test_the_all_prompts_table_counts_identical_outputs_only_under_greedy():
    """summary.md's table of every variant gives "identical to HF" as n of N under greedy decoding and a
    dash under sampling, where equal draws would be chance (HF plain counted itself 18/18 there)."""
    def summary_table(temperature):
        report = _report(temperature=temperature)
        report["machine"] = {"date": "d", "cpu": "c", "torch": "t", "threads": 1}
        report["summary"] = {"hf": {"tokens_per_s_median": 10.0, "identical_to_hf": 4},
                             "pld": {"tokens_per_s_median": 30.0, "identical_to_hf": 3}}
        text = bench_table.summary_markdown(report)
        return [line for line in text.splitlines() if line.startswith(("| hf |", "| pld |"))]

    assert [line.rsplit("|", 2)[1].strip() for line in summary_table(0.0)] == ["4/4", "3/4"]
    assert [line.rsplit("|", 2)[1].strip() for line in summary_table(0.7)] == ["–", "–"]
