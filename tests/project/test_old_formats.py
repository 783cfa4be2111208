"""Files written by earlier SpecViz versions still read and replay: traces (bare runs from
`generate --json` before nodes said who proposed them, and before the verify-pass fields; trace
documents before and after the 2026-12-05 names), a Side by side file of that time, and advice
surveys of every format (/1 to /5; before /5 the model of speed's inputs are derived from the
means). The files are in tests/project/data/formats/, taken from git history where the repository
shipped one (assets/example_trace.json, assets/lessons/, assets/recorded_advice.json; survey-5.json
was measured on a tiny random model).
"""
import dataclasses
import json
from pathlib import Path

import pytest

from specviz.advise import advice
from specviz.decoding import tracefile
from specviz.decoding.trace import CycleTrace, NodeTrace, RunTrace, renamed

DATA = Path(__file__).resolve().parent / "data" / "formats"
TRACES = ["trace-bare-2026-11-29.json", "trace-bare-2026-12-01.json", "trace-2026-12-04.json",
          "trace-old-names-2026-12-04.json"]
SURVEYS = ["survey-1.json", "survey-2.json", "survey-3.json", "survey-4.json", "survey-5.json"]


def _runs(doc: dict) -> list[dict]:
    return [doc] if "cycles" in doc else [r for r in (doc["run"], doc.get("ar")) if r]


@pytest.mark.parametrize("name", TRACES)
def test_an_old_trace_reads_to_the_run_its_fields_say(name):
    """An old trace passes the pydantic reader and gives the same runs as building the dataclasses
    directly from its JSON (old names mapped), every field it lacks at its default; it then draws
    in every Decode view."""
    from tests.project.test_upload_fuzz import draw_trace

    text = (DATA / name).read_text(encoding="utf-8")
    loaded = tracefile.loads(text)
    doc = json.loads(text)
    expected = [RunTrace.from_dict(renamed(r)) for r in _runs(doc)]
    assert [r for r in (loaded.run, loaded.ar) if r] == expected
    written = {k for r in _runs(doc) for c in r["cycles"] for n in c["nodes"] for k in n}
    for field in dataclasses.fields(NodeTrace):
        if field.name not in written and field.default is not dataclasses.MISSING:
            assert all(getattr(n, field.name) == field.default for c in loaded.run.cycles for n in c.nodes)
    draw_trace(loaded, [0, -1])


def test_files_of_each_trace_format_differ_in_what_they_carry():
    """The fixtures are of different formats: the first carries no `branch` (who proposed a node
    was a label) and no `offered`, the second no verify-pass fields, the last the old names."""
    first, second, _, named = (json.loads((DATA / n).read_text(encoding="utf-8")) for n in TRACES)
    assert "branch" not in first["cycles"][1]["nodes"][0] and "offered" not in first["cycles"][1]
    assert "branch" in second["cycles"][1]["nodes"][0] and "shared_by" not in second["cycles"][1]
    assert "beside" in named["run"]["cycles"][0] and "batch_verify" in named["run"]["settings"]
    assert {f.name for f in dataclasses.fields(CycleTrace)} - set(second["cycles"][1]) >= {"shared_by", "concurrent"}


def test_an_old_trace_with_the_old_names_lands_them_in_the_new_fields():
    """The 2026-12-04 trace written with `beside`, `verify_shared`, `most_beside` and `batch_verify`
    reads them into `concurrent`, `shared_by`, `most_concurrent` and `share_passes`."""
    run = tracefile.read(DATA / "trace-old-names-2026-12-04.json").run
    assert [c.concurrent for c in run.cycles] == [i % 2 for i in range(len(run.cycles))]
    assert run.metrics["most_concurrent"] == 1 and "most_beside" not in run.metrics
    assert run.settings["share_passes"] is True and "batch_verify" not in run.settings


def test_an_old_side_by_side_file_replays_both_sides():
    """A Side by side file whose sides are 2026-12-04 trace documents reads to those two traces,
    each as Decode reads it alone, and draws in both columns."""
    from tests.project.test_upload_fuzz import draw_pair

    text = (DATA / "pair-2026-12-04.json").read_text(encoding="utf-8")
    a, b, meta = tracefile.loads_pair(text)
    doc = json.loads(text)
    assert a.run == tracefile.loads(json.dumps(doc["a"])).run and b.run == tracefile.loads(json.dumps(doc["b"])).run
    assert meta == doc["meta"]
    draw_pair((a, b, meta), [0, -1])


@pytest.mark.parametrize("name", SURVEYS)
def test_a_survey_of_every_format_reads_and_ranks(name):
    """A survey of each format reads; its candidates keep their measurements (an old `per_step` is
    today's `per_call`; from /5, what the model of speed reads), and the Advise tab's views and the
    report draw from it."""
    from tests.project.test_upload_fuzz import draw_profile

    doc = json.loads((DATA / name).read_text(encoding="utf-8"))
    survey = advice.read(DATA / name)
    assert doc["format"] == f"specviz-advice/{name[7]}"
    assert [m.k_max for m in survey.measured] == [m["k_max"] for m in doc["measured"]]
    assert [m.per_call for m in survey.measured] == [m.get("per_call", m.get("per_step")) for m in doc["measured"]]
    assert survey.v == {int(n): x for n, x in doc["v"].items()}
    assert [m.speed_inputs is not None for m in survey.measured] == ["speed_inputs" in m for m in doc["measured"]]
    assert all("speed_inputs" in m for m in doc["measured"]) == (name == "survey-5.json")
    assert (survey.concurrency is not None) == ("concurrency" in doc or "load" in doc)
    assert advice.ranked(survey)
    draw_profile(survey)


@pytest.mark.parametrize("name", SURVEYS[:4])
def test_a_survey_before_format_5_predicts_from_inputs_derived_from_its_means(name):
    """A survey before /5 kept means, not the drafts the model of speed reads: they are derived
    (advise/survey_inputs.py), and the model's τ with each draft cut at K (as sent, for a planned
    candidate) is the survey's measured 1 + Σ_{d≤K} marginal_d at every K."""
    survey = advice.read(DATA / name)
    for m in survey.measured:
        assert m.speed_inputs is None
        for k in [None] if m.candidate.planned else range(1, m.k_max + 1):
            tau = advice.predicted_terms(m, k, survey.v_of, survey.pass_share, 1.0).tau
            assert tau == pytest.approx(1 + sum(m.marginal[:k or m.k_max]), rel=1e-9), (m.candidate.label, k)
