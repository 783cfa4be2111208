"""`specviz bench` stopped and resumed, on a tiny word-level target (specviz.measure.bench_resume through
the command): Ctrl-C keeps what was measured, --resume measures only the rest and refuses other settings,
and a bad question file fails before any model loads."""
from __future__ import annotations

import json

import pytest

from specviz import cli
from specviz.measure import bench, bench_resume
from specviz.models.families import tiny_random
from tests.helpers.tiny import word_tokenizer

QUESTIONS = [(11, "writing", "w4 w5 w6 w4 w5 w6 w4"), (12, "translation", "w9 w8 w7 w9 w8 w7"),
             (13, "rag", "w10 w11 w12 w10 w11 w12 w10")]


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """A question file of three questions, a tiny target served to the bench instead of loading one,
    and the argv of a short run; returns (argv, out folder, the prompts each measure was called on)."""
    path = tmp_path / "question.jsonl"
    path.write_text("".join(json.dumps({"question_id": i, "category": c, "turns": [t]}) + "\n"
                            for i, c, t in QUESTIONS), encoding="utf-8")
    target = tiny_random(vocab_size=40, tokenizer=word_tokenizer())
    monkeypatch.setattr(bench, "load", lambda spec, **kw: target)
    measured = []
    real = bench._measure
    monkeypatch.setattr(bench, "_measure", lambda t, d, item, *a: measured.append(item["id"]) or real(t, d, item, *a))
    out = tmp_path / "out"
    argv = ["bench", "--questions", str(path), "--target", "tiny-random", "--methods", "ar,pld", "--anchors", "hf",
            "--repeats", "1", "--max-new-tokens", "6", "--raw", "--out", str(out)]
    return argv, out, measured


def _results(out) -> dict:
    return json.loads((out / "bench.json").read_text(encoding="utf-8"))["results"]


def test_resume_measures_only_the_questions_not_yet_measured(setup, capsys):
    """A run of the first 2 questions, then the same command with --limit 3 --resume: the second run
    measures only question 13, keeps the first two results as they were, prints the table with all three
    categories and progress lines counting [3/3]."""
    argv, out, measured = setup
    assert cli.main([*argv, "--limit", "2"]) == 0
    first = _results(out)
    assert list(first) == ["11", "12"] and measured == ["11", "12"]
    capsys.readouterr()
    assert cli.main([*argv, "--limit", "3", "--resume"]) == 0
    assert measured == ["11", "12", "13"]
    results = _results(out)
    assert list(results) == ["11", "12", "13"] and results["11"] == first["11"]
    err, printed = capsys.readouterr().err, (out / "summary.md").read_text(encoding="utf-8")
    assert "resuming: 2 of 3 prompts already measured, 1 to go" in err and "[3/3] 13 (rag)" in err
    assert "| Retrieval-aug. generation | 1 | pld |" in printed and "| Overall | 3 | pld |" in printed
    report = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert report["prompts"] == {"11": "writing", "12": "translation", "13": "rag"} and report["planned"] == 3


@pytest.mark.parametrize("change, word", [(["--max-new-tokens", "7"], "max_new_tokens=6"),
                                          (["--methods", "ar"], "methods='ar,pld'"),
                                          (["--temperature", "0.7"], "temperature=0.0")])
def test_resume_with_other_settings_is_one_line_naming_the_setting(setup, capsys, change, word):
    """--resume after a run with different max_new_tokens, methods or temperature exits 2 with one
    `specviz: error:` line naming the setting and its old value, and measures nothing."""
    argv, out, measured = setup
    assert cli.main([*argv, "--limit", "1"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, *change, "--resume"])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1 and err[0].startswith("specviz: error: --resume")
    assert word in err[0] and measured == ["11"]


def test_resume_on_another_machine_is_refused(setup, monkeypatch):
    """A previous run measured with another thread count cannot be resumed: its numbers are not this run's."""
    argv, out, _ = setup
    assert cli.main([*argv, "--limit", "1"]) == 0
    previous = bench_resume.read_previous(out)
    with pytest.raises(bench_resume.ResumeError, match="threads"):
        bench_resume.check_same(previous, previous["settings"], {**previous["machine"], "threads": 99})


def test_ctrl_c_keeps_what_was_measured_exits_130_and_resume_finishes(setup, capsys, monkeypatch):
    """Ctrl-C while the second question runs: exit code 130, one stderr line saying how to go on, bench.json
    with the first question only, the partial table in summary.md; --resume then measures questions 12
    and 13 and nothing else."""
    argv, out, measured = setup
    real = bench._measure  # the fixture's

    def interrupted(t, d, item, *a):
        if item["id"] == "12":
            raise KeyboardInterrupt
        return real(t, d, item, *a)

    monkeypatch.setattr(bench, "_measure", interrupted)
    assert cli.main(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("specviz: stopped with 1 of 3 prompts measured") and "--resume" in err[-1]
    assert "Traceback" not in "\n".join(err) and list(_results(out)) == ["11"]
    assert "stopped after 1 of 3 questions" in (out / "summary.md").read_text(encoding="utf-8")
    monkeypatch.setattr(bench, "_measure", real)  # the fixture's, which records every prompt measured
    measured.clear()
    assert cli.main([*argv, "--resume"]) == 0
    assert measured == ["12", "13"] and list(_results(out)) == ["11", "12", "13"]


def test_ctrl_c_before_any_question_says_nothing_was_kept(setup, capsys, monkeypatch):
    """Ctrl-C while the model loads: exit 130 and one line saying nothing was measured; no bench.json."""
    argv, out, _ = setup
    monkeypatch.setattr(bench, "load", lambda spec, **kw: (_ for _ in ()).throw(KeyboardInterrupt))
    assert cli.main(argv) == 130
    assert capsys.readouterr().err.strip() == "specviz: stopped before any prompt was measured."
    assert not (out / "bench.json").exists()


@pytest.mark.parametrize("line, word", [("not json", "Line 2"), ('{"question_id": 5, "turns": ["w4"]}', "Line 2"),
                                        ('{"question_id": 5, "category": "qa", "turns": ["w4"], "x": 1}', "'x'")])
def test_a_bad_question_file_fails_before_any_model_loads(tmp_path, capsys, monkeypatch, line, word):
    """A question file with a bad second line exits 2 with one `specviz: error:` line naming the line,
    no traceback, and no model loaded."""
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"question_id": 1, "category": "qa", "turns": ["w4"]}) + "\n" + line + "\n",
                    encoding="utf-8")
    monkeypatch.setattr(bench, "load", lambda spec, **kw: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "--questions", str(path), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1 and err[0].startswith("specviz: error: ") and word in err[0]


def test_duration_reads_as_a_person_would():
    """Seconds under a minute, minutes and seconds under an hour, then hours and minutes."""
    assert [bench_resume.duration(s) for s in (4.6, 75, 3725)] == ["5 s", "1 min 15 s", "1 h 2 min"]


def test_resume_with_a_limit_below_what_was_measured_says_so(setup, capsys):
    """Two questions measured, then --resume --limit 1: question 12 is not among this run's prompts, so the
    run is refused in one line that names it and the --limit, not silently dropped."""
    argv, out, measured = setup
    assert cli.main([*argv, "--limit", "2"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--limit", "1", "--resume"])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1 and "prompt '12'" in err[0] and "--limit" in err[0]
    assert list(_results(out)) == ["11", "12"]


def test_ctrl_c_between_measuring_a_prompt_and_saving_it_still_saves_it(setup, capsys, monkeypatch):
    """Ctrl-C that lands after question 11 was measured but while its report was being built (a real
    SIGINT did, right after the progress line) still leaves question 11 in bench.json, and the stop line
    counts it."""
    argv, out, _ = setup
    real, calls = bench._report, []

    def interrupted_once(*a):
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(bench, "_report", interrupted_once)
    assert cli.main(argv) == 130
    assert list(_results(out)) == ["11"]
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("specviz: stopped with 1 of 3 prompts")


def test_merge_puts_two_pieces_in_one_table_and_refuses_pieces_of_other_runs(tmp_path, monkeypatch, capsys):
    """Two pieces of one run (questions 11–12 and 13, each its own question file and --out) merge through
    scripts/bench/merge_pieces.py into one bench.json with all three results, planned 3 (not the first
    piece's 2) and both pieces' cost profiles; a piece measured with another --max-new-tokens, or the
    same piece twice, is refused with a sentence naming why."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "merge_pieces", Path(__file__).parents[2] / "scripts" / "bench" / "merge_pieces.py")
    merge_pieces = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(merge_pieces)
    target = tiny_random(vocab_size=40, tokenizer=word_tokenizer())
    monkeypatch.setattr(bench, "load", lambda spec, **kw: target)
    outs = {}
    for name, rows, tokens in (("a", QUESTIONS[:2], 6), ("b", QUESTIONS[2:], 6), ("c", QUESTIONS[2:], 5)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"question_id": i, "category": c, "turns": [t]}) + "\n"
                                for i, c, t in rows), encoding="utf-8")
        outs[name] = tmp_path / name
        assert cli.main(["bench", "--questions", str(path), "--target", "tiny-random", "--methods", "ar,pld",
                         "--anchors", "hf", "--repeats", "1", "--max-new-tokens", str(tokens), "--raw",
                         "--out", str(outs[name])]) == 0
    capsys.readouterr()
    merged = tmp_path / "all"
    assert merge_pieces.main([str(outs["a"]), str(outs["b"]), "--out", str(merged), "--label", "both"]) == 0
    report = json.loads((merged / "bench.json").read_text(encoding="utf-8"))
    assert list(report["results"]) == ["11", "12", "13"] and report["planned"] == 3
    assert len(report["cost_profile"]) == 2 and [p["prompts"] for p in report["pieces"]] == [2, 1]
    assert (merged / "summary.md").read_text(encoding="utf-8").startswith("both: 3 of 3 questions measured")
    assert "| Overall | 3 | pld |" in capsys.readouterr().out
    assert merge_pieces.main([str(outs["a"]), str(outs["c"]), "--out", str(tmp_path / "x")]) == 2
    assert "max_new_tokens=5" in capsys.readouterr().err
    assert merge_pieces.main([str(outs["b"]), str(outs["b"]), "--out", str(tmp_path / "y")]) == 2
    assert "'13' is in two pieces" in capsys.readouterr().err
