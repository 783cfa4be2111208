"""`python -m specviz bench` on two public prompts and two methods, with HF's plain generate as anchor.

The command runs in-process through specviz.cli.main, with its loader handed the session's bundled
model so the test does not load the weights a second time.
"""
from __future__ import annotations

import json
import math

import pytest

from specviz import cli
from specviz.measure import bench, bench_summary

pytestmark = [pytest.mark.bundled, pytest.mark.slow]

MACHINE_FIELDS = {"date", "python", "cpu", "threads", "torch", "cuda"}
RUN_FIELDS = {"token_ids", "new_tokens", "new_tokens_repeats", "wall_s", "tokens_per_s"}  # every variant
OURS_FIELDS = RUN_FIELDS | {"mean_accepted_tokens", "acceptance_rate", "cycles", "draft_s", "verify_s", "other_s",
                            "cycle_tokens_per_s"}
SUMMARY_FIELDS = {"tokens_per_s_median", "speedup_vs_hf", "worst_vs_hf", "identical_to_hf"}


def test_bench_writes_json_with_every_field_and_the_report(tmp_path, bench_prompts, bundled_target, monkeypatch):
    """Two prompts × (hf, ar, pld) write bench.json with every field filled for every prompt and
    variant (ours with their tokens/s in cycles alone, above the whole run's), a summary table, and an
    HTML report with the plotly chart; greedy ar matches HF plain."""
    two = sorted(bench_prompts, key=lambda p: len(p["prompt"]))[:2]  # the shortest: CI time
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps(two), encoding="utf-8")
    loads = []
    monkeypatch.setattr(bench, "load", lambda spec, **kw: loads.append(spec) or bundled_target)
    out = tmp_path / "out"
    rc = cli.main(["bench", "--prompts", str(prompts), "--methods", "ar,pld", "--anchors", "hf",
                   "--repeats", "1", "--max-new-tokens", "12", "--out", str(out)])
    assert rc == 0 and loads == ["bundled"]
    report = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert MACHINE_FIELDS <= set(report["machine"])
    assert report["variants"] == ["hf", "ar", "pld"]
    assert report["settings"]["max_new_tokens"] == 12 and report["settings"]["repeats"] == 1
    assert set(report["prompts"]) == {p["id"] for p in two}
    for pid in report["prompts"]:
        for variant, row in report["results"][pid].items():
            need = RUN_FIELDS if variant == "hf" else OURS_FIELDS
            assert need <= set(row), (pid, variant, need - set(row))
            assert 0 < row["new_tokens"] <= 12 and row["tokens_per_s"] > 0 and math.isfinite(row["wall_s"])
            if variant != "hf":  # the cycles alone leave the prefill out: faster than the whole run
                assert row["cycle_tokens_per_s"] > row["tokens_per_s"]
        assert report["results"][pid]["ar"]["token_ids"] == report["results"][pid]["hf"]["token_ids"]
    for variant in ("hf", "ar", "pld"):
        assert SUMMARY_FIELDS <= set(report["summary"][variant]), variant
    assert report["summary"]["ar"]["identical_to_hf"] == 2
    prof = report["summary"]["pld"]["profile"]  # where the time went: shares of wall-clock time
    assert 0 < prof["verify_share"] <= 1 and prof["ms_per_verify_pass"] > 0 and prof["tokens_per_verify_pass"] >= 1
    assert "profile" not in report["summary"]["hf"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<table" in html and "plotly" in html.lower() and "Speedup over HF plain generate" in html
    assert "| pld |" in (out / "summary.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("variant,want", [
    ("hybrid", ("hybrid", True, {})),
    ("pld:norecord", ("pld", False, {})),
    ("hybrid:norecord:head_width=1:head_beam=2", ("hybrid", False, {"head_width": 1, "head_beam": 2})),
    ("logitspec:decay=0.5", ("logitspec", True, {"decay": 0.5})),
])
def test_a_variant_names_its_method_recording_and_knobs(variant, want):
    """A bench variant is a method, then ':norecord' and ':name=value' knobs in any order, values
    read as numbers where they are numbers."""
    assert bench.parse_variant(variant) == want


def test_a_variant_with_a_stray_part_is_refused():
    """A part that is neither 'norecord' nor name=value is a ValueError naming it."""
    with pytest.raises(ValueError, match="'nocord' is neither"):
        bench.parse_variant("pld:nocord")



def _row(walls, tokens=(1, 2)):
    speeds = [len(tokens) / w for w in walls]
    return {"tokens_per_s_repeats": speeds, "tokens_per_s": sorted(speeds)[len(speeds) // 2],
            "token_ids": list(tokens)}


def test_repeat_by_repeat_the_prompts_slower_every_time_are_named():
    """Against hf, each repeat's ratio pairs the two runs' tokens/s in that repeat (not their times:
    a sampled run's length differs, and 4 tokens in 1.5 s beat 2 in 1 s); a prompt is listed as
    slower in every repeat only when all its paired ratios are below 1 (here b, 3 of 3), not when one
    repeat was faster (a), and the summary text names it with the chance level, 1/2^repeats."""
    results = {"a": {"hf": _row([1.0, 1.0, 1.0]), "ar": _row([1.1, 0.9, 1.05])},
               "b": {"hf": _row([1.0, 2.0, 1.0]), "ar": _row([1.2, 2.1, 1.01])}}
    s = bench_summary.summarise(results, ["hf", "ar"])
    assert s["ar"]["repeat_ratios_vs_hf"]["a"] == pytest.approx([1 / 1.1, 1 / 0.9, 1 / 1.05])
    assert s["ar"]["slower_every_repeat"] == ["b"]
    assert "slower_every_repeat" not in s["hf"]
    report = {"machine": {"date": "d", "cpu": "c", "torch": "t", "threads": 2}, "settings": {"repeats": 3},
              "results": results, "summary": s}
    text = bench.summary_markdown(report)
    assert "- ar: 1 of 2 (b)" in text and "probability 1/8" in text
    one = {"a": {"hf": _row([1.0]), "ar": _row([1.1])}}
    assert "slower_every_repeat" not in bench_summary.summarise(one, ["hf", "ar"])["ar"]  # one repeat: no pairs to read
    sampled = {"a": {"hf": _row([1.0, 1.0], tokens=(1, 2)), "ar": _row([1.5, 1.5], tokens=(1, 2, 3, 4))}}
    ratios = bench_summary.summarise(sampled, ["hf", "ar"])["ar"]["repeat_ratios_vs_hf"]["a"]
    assert ratios == pytest.approx([4 / 3, 4 / 3])


def test_a_run_that_ended_at_its_prefill_does_not_break_the_profile():
    """A prompt whose first new token is an end token gives a run of no cycle (Gemma 3 270M did, on a
    benchmark prompt): the profile's per-pass numbers count it as one pass instead of dividing by zero."""
    ours = lambda cycles, tokens: {**_row([1.0], tokens=tuple(range(tokens))), "cycles": cycles,  # noqa: E731
                                   "verify_s": 0.1 * cycles, "draft_s": 0.0, "other_s": 0.01, "wall_s": 1.0,
                                   "new_tokens": tokens}
    results = {"a": {"hf": _row([1.0]), "ar": ours(0, 1)}, "b": {"hf": _row([1.0]), "ar": ours(4, 4)}}
    profile = bench_summary.summarise(results, ["hf", "ar"])["ar"]["profile"]
    assert profile["ms_per_verify_pass"] == pytest.approx(50.0) and profile["tokens_per_verify_pass"] == 1.0


def test_a_run_of_no_cycle_is_left_out_of_tau_and_alpha():
    """A run that ended at its prefill has no cycle, and the τ of 0 its trace gives is not an acceptance
    length: the summary's and the leaderboard's mean τ and α leave it out, so our AR's τ stays 1 (a
    Gemma bench read 0.94 for plain decoding when one of 16 prompts ended at its prefill)."""
    from specviz.measure import bench_table

    ours = lambda cycles, tau: {**_row([1.0]), "cycles": cycles, "verify_s": 0.1, "draft_s": 0.0,  # noqa: E731
                                "other_s": 0.01, "wall_s": 1.0, "new_tokens": 3,
                                "mean_accepted_tokens": tau, "acceptance_rate": tau / 2}
    results = {"a": {"hf": _row([1.0]), "ar": ours(0, 0.0)}, "b": {"hf": _row([1.0]), "ar": ours(4, 1.0)}}
    summary = bench_summary.summarise(results, ["hf", "ar"])["ar"]
    assert summary["mean_accepted_tokens"] == 1.0 and summary["acceptance_rate"] == 0.5
    report = {"settings": {"temperature": 0.0}, "variants": ["hf", "ar"], "prompts": {"a": "coding", "b": "coding"},
              "results": results}
    cells = bench_table.leaderboard(report)["rows"]["Overall"]["methods"]["ar"]
    assert cells["mean_accepted_tokens"] == 1.0


def test_the_spec_bench_suite_prints_the_leaderboards_table(tmp_path, bundled_target, monkeypatch, capsys):
    """`specviz bench --suite spec-bench --limit 2` (issue 64's CI command; one repeat, 16 tokens) on the
    bundled model: the default methods and anchors, the public subset's first two questions (both writing)
    with their categories in bench.json, and a table of the shape the leaderboard has: a "Multi-turn
    conversation" and an "Overall" row for each of hf_pld and the six methods, the identity column
    (greedy), the best-single-method table, and a note naming the five rows with no question. Its shape,
    not its speed."""
    monkeypatch.setattr(bench, "load", lambda spec, **kw: bundled_target)
    out = tmp_path / "out"
    rc = cli.main(["bench", "--suite", "spec-bench", "--limit", "2", "--repeats", "1", "--max-new-tokens", "16",
                   "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr()
    report = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert report["variants"] == ["hf", "hf_pld", "ar", "hybrid", "pld", "logitspec", "suffix", "head"]
    assert list(report["prompts"].values()) == ["writing", "writing"] and report["suite"]["name"] == "spec-bench"
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in printed.out.splitlines()
             if line.startswith("| Multi-turn") or line.startswith("| Overall") or line.startswith("| category")]
    head = lines[0]
    assert head[:6] == ["category", "questions", "method", "× HF plain", "× HF prompt lookup", "× our AR"]
    assert head[-1] == "identical to HF plain"
    table = [row for row in lines[1:] if len(row) == len(head)]
    assert [(r[0], r[2]) for r in table] == [(row, v) for row in ("Multi-turn conversation", "Overall")
                                             for v in report["variants"][1:]]
    assert all(r[1] == "2" and r[3].endswith("×") for r in table)
    assert [r[-1] for r in table if r[2] == "ar"] == ["2/2", "2/2"]  # our AR is HF greedy, token for token
    bar = [row for row in lines[1:] if len(row) == 6 and row[0] != "category"]
    assert [r[0] for r in bar] == ["Multi-turn conversation", "Overall"] and all(r[-1] in ("yes", "no") for r in bar)
    assert ("No questions measured for Translation, Summarization, Question answering, Mathematical reasoning, "
            "Retrieval-aug. generation") in printed.out
    assert "[2/2] 87 (writing)" in printed.err and "elapsed" in printed.err
    assert "| Overall | 2 | hybrid |" in (out / "summary.md").read_text(encoding="utf-8")


def test_a_report_without_hf_plain_says_it_has_no_chart():
    """A run with --anchors none (or a served target, whose anchor is vllm) has no HF plain to divide by: the
    HTML report keeps its table and says there is no chart, instead of failing with a KeyError."""
    from specviz.viz.bench_report import report_html

    row = {"tokens_per_s": 5.0, "token_ids": [1]}
    report = {"machine": {"date": "d"}, "variants": ["ar"], "prompts": {"a": "writing"}, "results": {"a": {"ar": row}},
              "summary": {"ar": {"tokens_per_s_median": 5.0}}}
    page = report_html(report)
    assert "<table" in page and "HF plain generate did not run" in page


def test_the_report_names_the_cpu_and_the_features_that_decide_its_speed(monkeypatch):
    """A bench report's machine names the processor and which of AVX2, AVX-512, AVX-512 BF16 and AMX it
    has (read from /proc/cpuinfo), since one CPU name covers machines of very different speed here."""
    from specviz.measure import bench as bench_module
    from specviz.passes import speedups

    info = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma avx512f avx512bw\n"
    monkeypatch.setattr(speedups, "cpuinfo", lambda: info)
    assert bench_module.machine()["cpu"] == "AMD EPYC (avx2, avx512f)"
    monkeypatch.setattr(speedups, "cpuinfo", lambda: "model name\t: Old CPU\nflags\t\t: fpu sse2\n")
    assert bench_module.cpu() == "Old CPU (none of avx2/avx512f/avx512_bf16/amx_tile)"
