"""The Advise tab's handlers (specviz/ui/advise_tab.py) and drawing (specviz/viz/advice_figures.py),
without a browser: prompts and candidates parsed, bad input answered with a message, a survey
replayed without a model, and model-made or typed text escaped."""
from __future__ import annotations

import json

import pytest

from specviz.measure import advice
from specviz.ui import advise_tab
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
    assert advise_tab.parse_prompts(text) == ["first line\nsecond line", "another", "last"]
    assert advise_tab.parse_prompts("   ") == []


def test_candidates_come_from_the_ticks_and_the_draft_box_and_none_is_refused():
    """Ticked methods and comma-separated draft specs become candidates; none at all is refused."""
    cands = advise_tab.candidates_of(["pld", "head"], "bundled, other/model")
    assert [c.label for c in cands] == ["pld", "head", "draft bundled", "draft other/model"]
    with pytest.raises(ValueError, match="at least one"):
        advise_tab.candidates_of([], " ")


@pytest.mark.parametrize("prompts, k_max, needle", [
    ("", 4, "prompt"),
    ("\n---\n".join(f"p{i}" for i in range(advise_tab.MAX_PROMPTS + 1)), 4, "at most"),
    ("hello", 10_000, "limit"),
])
def test_bad_input_gets_a_message_and_no_model_runs(prompts, k_max, needle):
    """An empty prompt box, too many prompts or a K over the server's cap end the event with one
    error message naming the problem; no model is loaded for it."""
    frames = list(advise_tab.run_advice("bundled", ["pld"], "", prompts, k_max, 8, 0.0, 1.0, 0, False, None,
                                        NO_PROGRESS))
    assert len(frames) == 1 and "sv-status-error" in frames[0][0] and needle in frames[0][0].lower()


def test_a_saved_profile_replays_and_a_bad_file_is_refused(tmp_path):
    """A profile.json paints the table, the three figures and says no model ran; a file that is not
    a profile gets its reason in the status line and clears nothing it cannot replace."""
    path = tmp_path / "survey.json"
    advice.save(_profile(), path)
    frame = advise_tab.replay(str(path))
    assert "Replayed survey.json" in frame[0] and "no model ran" in frame[0]
    assert advice.recommendation(_profile()) in frame[1].replace("&#42;", "*")
    assert all(len(fig.data) >= 2 for fig in frame[2:5])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([1, 2]))
    frame = advise_tab.replay(str(bad))
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
    assert names == ["pld, conditional", "pld, marginal", "draft d, conditional", "draft d, marginal"]
    assert [t.line.dash for t in acc.data] == ["solid", "dot", "solid", "dot"]
    curves = afig.curves_figure(p)
    stars = [t for t in curves.data if t.marker.symbol == "star"]
    assert len(curves.data) == 3 and len(stars) == 1 and stars[0].y == (1.2,)
    assert [list(t.x) for t in afig.concurrency_figure(p).data] == [[1, 8], [1, 8]]
