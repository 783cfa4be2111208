"""What a newcomer sees before pressing anything: the Decode tab on the example's most instructive
cycle, and the Compare and Theory & hardware tabs on recorded results. No model is loaded."""
from __future__ import annotations

import json

import pytest

from specviz.decoding.trace import ACCEPTED, REJECTED, RESAMPLED

pytestmark = pytest.mark.slow  # building the whole page takes seconds on 2 shared cores


@pytest.fixture(scope="module")
def page():
    """The built page's components by elem_id, and the example run it opens on."""
    from specviz.ui import build_demo
    from specviz.ui.shared.views import example

    demo = build_demo()
    comps = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    return comps, example()[0]


def plot_data(comp) -> list[dict]:
    """The traces of a gr.Plot's initial value (empty when it has none)."""
    return json.loads(comp.value["plot"])["data"] if comp.value else []


def test_slider_starts_on_a_cycle_with_accept_reject_and_residual(page):
    """The cycle slider's initial value is a cycle of the example with an accepted node, a rejected
    node, a sampled residual and a resampled new token, and every cycle view shows that cycle."""
    comps, run = page
    shown = comps["sv-cycle"].value
    cycle = run.cycles[shown]
    statuses = {n.status for n in cycle.nodes}
    assert {ACCEPTED, REJECTED} <= statuses
    assert not cycle.greedy and len(cycle.residual_top) >= 2
    assert cycle.new_kind == RESAMPLED and cycle.new_token is not None
    assert comps["sv-narration"].value.startswith(f'<p class="sv-narration">Cycle {shown}:')
    assert f"opened on cycle {shown}" in comps["sv-status"].value
    drawn = [t for t in plot_data(comps["sv-residual"]) if t["name"] == "drawn (resampled)"]
    assert drawn and drawn[0]["y"], "the residual panel must show the drawn token's bar"
    assert len(plot_data(comps["sv-pq"])) >= 2  # p and q bars


def test_compare_tab_opens_on_a_recorded_comparison(page):
    """The Compare tab's table, chart and status are the recorded comparison: rows with a speedup,
    bars in the chart, and a status that says when, where and how to measure again."""
    comps, _ = page
    assert "<table" in comps["sv-cmp-table"].value and "×" in comps["sv-cmp-table"].value
    bars = plot_data(comps["sv-cmp-chart"])
    assert bars and len(bars[0]["y"]) >= 2
    status = comps["sv-cmp-status"].value
    assert "Recorded on 20" in status and "thread" in status and "Press Compare" in status


def test_theory_tab_opens_on_a_recorded_curve_and_batch_effect(page):
    """The Theory & hardware tab opens on the recorded S(K) curve with its measured point and on the
    recorded batch-size curve, each with a status naming when it was recorded and how to re-measure."""
    comps, _ = page
    theory = {t["name"]: t for t in plot_data(comps["sv-theory-plot"])}
    assert len(theory["predicted S(K)"]["x"]) >= 8 and theory["measured"]["y"]
    assert "best fixed K" in comps["sv-theory-html"].value
    steps = plot_data(comps["sv-waterfall-plot"])[0]
    assert steps["x"][0] == "paper S(K)" and steps["x"][-1] == "overhead"
    assert "paper S(K)" in comps["sv-waterfall-html"].value
    batch = plot_data(comps["sv-batch-plot"])
    assert batch and len(batch[0]["x"]) >= 4
    for name, button in (("sv-theory-status", "Put it on the theory curve"), ("sv-batch-status", "Measure batch")):
        assert "Recorded on 20" in comps[name].value and button in comps[name].value, name


def test_first_paints_show_no_prediction_their_measurement_contradicts():
    """Issue 51: the Theory tab's recorded prediction is within 20 % of its own measurement, its
    waterfall ends on that measurement, and the Advise tab's recorded checks are within 20 % of what
    they predicted."""
    from specviz.advise import advice
    from specviz.ui.advise import RECORDED
    from specviz.ui.shared import recordings

    recordings.recorded.cache_clear()
    a = recordings.recorded()["theory"]["analysis"]
    assert abs(a["predicted"] / a["measured"] - 1) <= 0.20, (a["predicted"], a["measured"])
    assert a["waterfall"][-1]["value"] == pytest.approx(a["measured"], rel=1e-3)
    survey = advice.read(RECORDED)
    assert survey.checks and all(abs(c.predicted / c.measured - 1) <= 0.20 for c in survey.checks.values())
    top = advice.ranked(survey)[0][0]
    assert top.candidate.planned or any(m.candidate.planned for m in survey.measured)  # the planned hybrid is ranked
