"""'Explain this cycle': the steps follow the engine's order, quote the trace's own numbers, and
highlight what they talk about."""
from __future__ import annotations

import copy

import pytest

import specviz
from specviz.decoding import tracefile
from specviz.decoding.trace import ACCEPTED, BONUS, REJECTED, RESAMPLED
from specviz.viz.explain_steps import explain_html, explain_steps, explained_views
from specviz.viz.style import num, quote
from tests.helpers.tiny import pair

LOGITSPEC_GREEDY = "assets/lessons/logitspec-rescue.json"  # a recorded greedy LogitSpec run (trees)


@pytest.fixture(scope="module")
def sampled():
    """A sampled chain run on tiny models, with rejections, residuals and bonuses in every cycle."""
    target, draft = pair(noise=0.8)
    return specviz.generate(target, [1, 5, 9, 2, 7], method="draft", draft=draft, k=3, temperature=1.0,
                            seed=1, max_new_tokens=40, plan=False)  # every cycle drafts


def test_steps_come_in_the_engine_order(sampled):
    """Proposal, verify pass, one step per judged node in the order tried, then residual (after
    a rejection) or bonus, then commit and roll back."""
    kinds = set()
    for cycle in sampled.cycles:
        titles = [s.title for s in explain_steps(cycle)]
        judged = [n for n in cycle.nodes if n.status in (ACCEPTED, REJECTED)]
        assert titles[:2] == ["Proposal", "One verify pass"]
        assert len(titles) == 2 + len(judged) + 2
        assert titles[-2] == {RESAMPLED: "Residual", BONUS: "Bonus"}[cycle.new_kind]
        assert titles[-1] == "Commit and roll back"
        kinds.add(cycle.new_kind)
    assert kinds == {RESAMPLED, BONUS}  # both endings were exercised


def test_judge_steps_quote_r_against_min_1_p_over_q(sampled):
    """Each accept/reject step states the node's p, q, min(1, p/q) and r from the trace, and the
    comparison that decided it."""
    for cycle in sampled.cycles:
        steps = explain_steps(cycle)
        judged = sorted((n for n in cycle.nodes if n.status in (ACCEPTED, REJECTED)), key=lambda n: (n.depth, n.index))
        for step, node in zip(steps[2:], judged):
            assert step.nodes == (node.index,)
            for value in (node.p, node.q, node.accept_prob, node.r):
                assert num(value) in step.text
            sign = "<" if node.status == ACCEPTED else "≥"
            assert f"r = {num(node.r)} {sign} {num(node.accept_prob)}" in step.text


def test_greedy_tree_steps_go_level_by_level():
    """On a recorded greedy LogitSpec run, one step per depth names argmax p and the accepted child."""
    run = tracefile.read(LOGITSPEC_GREEDY).run
    assert run.method == "logitspec" and run.settings["temperature"] == 0
    cycle = next(c for c in run.cycles if len(c.accepted) >= 2)
    steps = explain_steps(cycle)
    levels = [s for s in steps if s.title.startswith("Depth")]
    assert len(levels) == len(cycle.accepted) + (cycle.rejected is not None)
    first = cycle.nodes[cycle.accepted[0]]
    assert quote(first.text) in levels[0].title and "argmax p" in levels[0].text


def test_each_step_highlights_its_views(sampled):
    """The figure a step talks about is framed and its nodes ringed; the panel names the step."""
    cycle = next(c for c in sampled.cycles if c.rejected is not None and c.accepted)
    steps = explain_steps(cycle)
    for i, step in enumerate(steps):
        shown = explained_views(cycle, steps, i)
        framed = {name for name in ("tree", "pq", "residual") if shown[name].layout.title.text.startswith("▶")}
        assert framed == {c for c in step.charts if c != "cache"}
        assert ("sv-focus" in shown["cache"]) == ("cache" in step.charts)
        ringed = [t for t in shown["tree"].data if t.name == "this step"]
        assert bool(ringed) == bool(step.nodes or step.new_token)
        assert f"step {i + 1} of {len(steps)}" in explain_html(cycle, steps, i)


def test_model_text_is_escaped_in_the_step_panel(sampled):
    """A token holding markup appears escaped in the step panel."""
    cycle = copy.deepcopy(sampled.cycles[0])  # the fixture is shared by the module
    cycle.nodes[0].text = "<img src=x onerror=alert(1)>"
    steps = explain_steps(cycle)
    panel = "".join(explain_html(cycle, steps, i) for i in range(len(steps)))
    assert "<img" not in panel and "&lt;img" in panel
