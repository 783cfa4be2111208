"""The Advise tab's handlers (specviz/ui/advise.py) and drawing (specviz/viz/advice_figures.py),
without a browser: prompts and candidates parsed, bad input answered with a message, a survey
replayed without a model, and model-made or typed text escaped."""
from __future__ import annotations

import copy
import json

import pytest

from specviz.advise import advice, advice_report
from specviz.decoding import speed
from specviz.ui import advise
from specviz.viz import advice_figures as afig

NO_PROGRESS = lambda *a, **k: None  # noqa: E731 -- the handlers' gr.Progress outside an event


def _profile(label_draft: str = "d") -> advice.Survey:
    m1 = advice.Measured(advice.Candidate("pld"), 3, 10, [10.0, 7, 4], [7.0, 4, 2], [1.0, 2.0, 3.0], 0.05, False, 30.0)
    m2 = advice.Measured(advice.Candidate("draft", label_draft), 3, 10, [10.0, 5, 2], [5.0, 2, 1], [1.0, 2.0, 3.0],
                         0.2, True, 20.0)
    timed = advice.ConcurrencyCost([1, 8], [1, 4], [[0.01, 0.012], [0.015, 0.04]], 64)
    return advice.Survey("bundled", 2, dict(k_max=3, max_new_tokens=16, temperature=0.0, top_p=1.0), "a CPU",
                          20.0, 0.01, {1: 1.0, 2: 1.05, 4: 1.2, 8: 1.6}, [m1, m2],
                          {"pld": advice.Check(3, 1.8, 1.2, "predicted 1.80× but measured 1.20×: <b>why</b>")},
                          "2026-12-01 18:00 UTC", concurrency=timed)


def _html(frame: tuple) -> str:
    return frame[0] + frame[1]


def test_prompts_split_on_separator_lines_and_keep_their_own_lines():
    """A line holding only '---' separates prompts; lines inside a prompt stay, blank prompts go."""
    text = "first line\nsecond line\n---\n\n---\nanother\n --- \nlast"
    assert advise.parse_prompts(text) == ["first line\nsecond line", "another", "last"]
    assert advise.parse_prompts("   ") == []


def test_candidates_come_from_the_ticks_and_the_draft_box_and_none_is_refused():
    """Ticked methods and comma-separated draft specs become candidates; none at all is refused."""
    cands = advise.candidates_of(["pld", "head"], "bundled, other/model")
    assert [c.label for c in cands] == ["pld", "head", "draft bundled", "draft other/model"]
    with pytest.raises(ValueError, match="at least one"):
        advise.candidates_of([], " ")


@pytest.mark.parametrize("prompts, k_max, needle", [
    ("", 4, "prompt"),
    ("\n---\n".join(f"p{i}" for i in range(advise.MAX_PROMPTS + 1)), 4, "at most"),
    ("hello", 10_000, "limit"),
])
def test_bad_input_gets_a_message_and_no_model_runs(prompts, k_max, needle):
    """An empty prompt box, too many prompts or a K over the server's cap end the event with one
    error message naming the problem; no model is loaded for it."""
    frames = list(advise.run_advice("bundled", ["pld"], "", prompts, k_max, 8, 0.0, 1.0, 0, False, None,
                                        NO_PROGRESS))
    assert len(frames) == 1 and "sv-status-error" in frames[0][0] and needle in frames[0][0].lower()


def test_a_saved_profile_replays_and_a_bad_file_is_refused(tmp_path):
    """A profile.json paints the table, the three figures and says no model ran; a file that is not
    a profile gets its reason in the status line and clears nothing it cannot replace."""
    path = tmp_path / "survey.json"
    advice.save(_profile(), path)
    frame = advise.replay(str(path))
    assert "Replayed survey.json" in frame[0] and "no model ran" in frame[0]
    assert advice_report.recommendation(_profile()) in frame[1].replace("&#42;", "*")
    assert all(len(fig.data) >= 2 for fig in frame[2:5])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([1, 2]))
    frame = advise.replay(str(bad))
    assert "sv-status-error" in frame[0] and "not a SpecViz advice survey" in frame[0]


def test_typed_and_model_text_is_escaped_in_the_table():
    """A draft spec and a check's reason with HTML in them appear as text, never as markup."""
    html = afig.advice_html(_profile("<img src=x onerror=alert(1)>"))
    assert "<img" not in html and "&lt;img" in html and "<b>why</b>" not in html and "&lt;b&gt;why" in html


def test_the_figures_label_conditional_and_marginal_apart_and_mark_checked_points():
    """The acceptance chart has a solid conditional and a dotted marginal line per candidate; the S(K)
    chart one curve per candidate plus a star where a check measured it; the load chart one line per
    candidate over the measured batch sizes."""
    p = _profile()
    acc = afig.acceptance_figure(p)
    names = [t.name for t in acc.data]
    conditional, marginal = speed.label("acceptance_by_position"), speed.label("reach_by_position")
    assert names == [f"pld, {conditional}", f"pld, {marginal}", f"draft d, {conditional}", f"draft d, {marginal}"]
    assert [t.line.dash for t in acc.data] == ["solid", "dot", "solid", "dot"]
    curves = afig.curves_figure(p)
    stars = [t for t in curves.data if t.marker.symbol == "star"]
    assert len(curves.data) == 3 and len(stars) == 1 and stars[0].y == (1.2,)
    assert [list(t.x) for t in afig.concurrency_figure(p).data] == [[1, 8], [1, 8]]


# The deploy section (issue 43): each deployable pick as an engine's configuration and command, what
# does not deploy, K by requests at once, and the checks on the engines.

HOSTILE = "<img src=x onerror=alert(1)>"


def _painted(survey: advice.Survey, tmp_path, name: str = "survey.json") -> dict:
    """The tab's outputs, by name, after replaying `survey` from a file as a visitor would."""
    path = tmp_path / name
    advice.save(survey, path)
    frame = advise.replay(str(path))
    assert len(frame) == advise.N_OUTPUTS and "sv-status-ok" in frame[0], frame[0]
    return dict(zip(advise.OUTPUT_NAMES, frame))


def _html_of(out: dict) -> str:
    """Every HTML output of the deploy section, joined."""
    return "".join(v for k, v in out.items() if k in ("deploy", "by_batch", "checks") or k.startswith("info:"))


def _with_check(survey: advice.Survey, **fields) -> advice.Survey:
    from specviz.advise.engine_check import EngineCheck

    chk = EngineCheck(**{**dict(engine="vLLM", candidate="pld", k=5, config='{"method": "ngram"}',
                                machine="test box (4 cores)", measured_at="2026-12-05 03:00 UTC", concurrency=2,
                                prompts=6, predicted=1.43, measured=1.21, predicted_marginal=[0.6, 0.4],
                                measured_marginal=[0.5, 0.3], flag="vLLM accepted less"), **fields})
    survey = copy.deepcopy(survey)
    survey.engine_checks.append(chk.to_dict())
    return survey


def test_each_deployable_pick_shows_its_configuration_and_command_for_every_engine(tmp_path):
    """Replaying a survey with two deployable candidates (pld and a draft model): the tab opens on the
    best one's configuration and command for each engine, and picking the other shows its own; each
    engine's note and where its option names were checked are said, and so is the machine the
    predictions came from."""
    from specviz.advise import deploy

    survey = _profile()
    out = _painted(survey, tmp_path)
    rows = deploy.deployments(survey)
    assert out["pick"]["choices"] == ["pld", "draft d"] and out["pick"]["visible"]
    for label in ("pld", "draft d"):
        views = dict(zip(advise.OUTPUT_NAMES[8:20], advise.show_pick(out["survey"], label)))
        if label == "pld":
            assert views == {k: out[k] for k in views}  # the painted tab shows the best one
        for d in (d for d in rows if d.candidate == label):
            assert views[f"config:{d.engine}"] == d.config and views[f"command:{d.engine}"] == d.command
            info = views[f"info:{d.engine}"]
            assert f"{d.k}" in info and f"{d.predicted:.2f}×" in info and afig.esc(d.source) in info
            assert afig.esc(d.note) in info and afig.esc(survey.machine) in info
    assert "SpecViz" in out["deploy"] and afig.esc(survey.machine) in out["deploy"]


def test_the_recorded_survey_says_what_does_not_deploy_and_k_by_requests_at_once():
    """The recorded survey, as the tab first paints it: a sentence per candidate no engine has, the K
    by requests-at-once table, and vLLM's command with that schedule in a copyable box."""
    from specviz.advise import deploy

    survey = advise._recorded()
    out = dict(zip(advise.OUTPUT_NAMES, advise.first_values()))
    sentences = deploy.not_deployable(survey)
    assert sentences and all(afig.esc(s) in out["deploy"] for s in sentences)
    assert "<table" in out["by_batch"] and "requests at once" in out["by_batch"]
    assert out["schedule"]["visible"] and "num_speculative_tokens_per_batch_size" in out["schedule"]["value"]
    assert out["config:vLLM"] == deploy.deployments(survey)[0].config
    assert "no check on an engine" in out["checks"] and "--check-on vllm,hf" in out["checks"]


def test_a_survey_with_an_engine_check_shows_predicted_against_measured(tmp_path):
    """A survey that holds a check on vLLM replays with a table row for it: engine, configuration,
    requests at once, prompts, predicted and measured, acceptance by position on both sides, the
    machine it ran on and its flag; the line saying how to run a check is gone."""
    out = _painted(_with_check(advise._recorded()), tmp_path)
    checks = out["checks"]
    assert checks.count("<tr>") == 2 and "no check on an engine" not in checks
    row = checks.split("<tbody>")[1]
    for needle in ("vLLM", "pld, K = 5", afig.esc('{"method": "ngram"}'), "<td>2</td>", "<td>6</td>", "1.43×",
                   "1.21×", "0.60, 0.40 / 0.50, 0.30", "test box (4 cores)", "2026-12-05 03:00 UTC",
                   "vLLM accepted less"):
        assert needle in row, needle
    assert afig.esc(advise._recorded().machine) in checks  # where the survey's acceptance came from


def test_hostile_text_in_a_survey_is_escaped_in_the_deploy_section(tmp_path):
    """A draft spec, a machine name and an engine check's configuration and error holding HTML appear
    as text in every HTML output of the deploy section, never as markup; in the commands the draft
    spec is quoted for the shell."""
    survey = _with_check(_profile(HOSTILE), config=f"<b>{HOSTILE}</b>", error=f"<script>{HOSTILE}</script>",
                         machine=HOSTILE, candidate=f"draft {HOSTILE}")
    survey.machine = f"<i>{HOSTILE}</i>"
    out = _painted(survey, tmp_path)
    views = dict(zip(advise.OUTPUT_NAMES[8:20], advise.show_pick(out["survey"], f"draft {HOSTILE}")))
    html = _html_of(out) + "".join(v for k, v in views.items() if k.startswith("info:"))
    assert "<img" not in html and "<script" not in html and "<b>" not in html and "<i>" not in html
    assert "&lt;img" in html and "&lt;script&gt;" in out["checks"] and "&lt;i&gt;" in out["deploy"]
    assert f"--speculative-draft-model-path '{HOSTILE}'" in views["command:SGLang"]


def test_the_tab_wires_every_painted_value_to_a_component():
    """Built inside a page, the Advise tab's Advise and replay events have one output per value the
    handlers paint, and the pick event one per engine box."""
    import gradio as gr

    with gr.Blocks() as demo:
        advise.wire(advise.build(["a", "b", "c"]), {})
    fns = {fn.api_name: fn for fn in demo.fns.values()}
    assert len(fns["advise"].outputs) == len(fns["advise_replay"].outputs) == advise.N_OUTPUTS
    pick = next(fn for fn in demo.fns.values() if fn.fn is advise.show_pick)
    assert len(pick.outputs) == 3 * len(advise.ENGINES)
