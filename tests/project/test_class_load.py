"""A class at once, through the real HTTP API: scripts/load_test.py against the in-process app.

Six gradio_client sessions press Step twice together on the page's defaults (the bundled model,
the hybrid). No wall-clock assertion: the claims are that no Step fails and that the sessions'
verify passes were answered together, which is what lets a class share the machine.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from specviz.decoding.activity import Activity
from specviz.viz.metrics import metrics_html

ROOT = Path(__file__).resolve().parents[2]


PROMPT = "Explain in three sentences why the sky is blue."  # this test's own; the script alone sends the page's


def _load_test():
    spec = importlib.util.spec_from_file_location("load_test", ROOT / "scripts" / "load_test.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.bundled
@pytest.mark.slow
def test_six_sessions_step_together_without_errors_and_share_passes(app_url, bundled_target, monkeypatch):
    """6 sessions × 2 Steps at once: 12 Steps, none failed, and at least one verify pass answered
    more than one session. The model's shared target is told to gather up to 6 requests (2 s at
    most) so that "together" does not hang on how the threads happen to be scheduled."""
    from specviz.decoding.targets import batched

    shared = batched(bundled_target)
    monkeypatch.setattr(shared, "gather", 6)
    monkeypatch.setattr(shared, "gather_s", 2.0)
    before = shared.shared_passes
    load_test = _load_test()
    result = load_test.run(app_url, sessions=6, steps=2, inputs={"prompt": PROMPT})
    assert result["steps"] == 12 and result["errors"] == []
    assert shared.shared_passes > before and shared.most_shared > 1
    # every Step commits at least one token (a cycle's bonus or replacement), and the first also the prefill's
    assert result["tokens"] >= 12 + 6


def test_the_load_test_reads_a_steps_tokens_from_the_metrics_panel():
    """load_test.new_tokens reads the speculative run's new-token count from the page's metrics
    panel (not the AR baseline's beside it), sums the panels of a Side by side press, and says None
    when the outputs show no panel."""
    load_test = _load_test()
    spec, ar = dict(new_tokens=7, tokens_per_s=3.0), dict(new_tokens=19, tokens_per_s=2.0)
    assert load_test.new_tokens(["<p>status</p>", metrics_html(spec, ar), None]) == 7
    assert load_test.new_tokens([metrics_html(spec, None), metrics_html(dict(spec, new_tokens=12), ar)]) == 19
    assert load_test.new_tokens(["<p>status</p>", 3]) is None


def test_a_run_that_started_again_counts_all_its_tokens():
    """load_test.committed: a Step adds the growth of its session's new tokens; when the count fell,
    the session's run started again, and every token of the new run was committed by this Step.
    The report gives tokens/s, and says so when the view's outputs showed no count, never "0"."""
    load_test = _load_test()
    assert load_test.committed(0, 2) == 2 and load_test.committed(5, 7) == 2
    assert load_test.committed(5, 2) == 2 and load_test.committed(4, 4) == 0
    steps = dict(steps=4, errors=[], wall_s=2.0, latencies=[1.0] * 4)
    assert "8 tokens committed, 4.0 tokens/s" in load_test.report(dict(steps, tokens=8), None)
    assert "not shown" in load_test.report(dict(steps, tokens=None), None)  # a view without the panel


def test_a_span_knows_the_most_others_that_ran_beside_it():
    """Activity: a span opened alone and closed alone saw 0 others; spans that overlap each count
    the most others open at any moment of their own life, including ones opened after them."""
    activity = Activity()
    alone = activity.begin()
    assert activity.end(alone) == 0
    a = activity.begin()
    b = activity.begin()
    c = activity.begin()
    assert activity.end(b) == 2
    d = activity.begin()  # opened after b ended: a, c, d are open
    assert activity.end(a) == 2 and activity.end(c) == 2
    assert activity.end(d) == 2  # a and c were open beside it


def test_the_timing_panel_says_when_a_run_was_measured_under_load():
    """A run measured with no other run beside it says so; one whose cycles ran beside others says how many
    and how many passes were shared, and the speedup is flagged as taken under different loads."""
    base = dict(tokens_per_s=10.0, cycles=8, new_tokens=20, decode_s=2.0)
    alone = dict(base, cycles_concurrent=0, most_concurrent=0, shared_passes=0, most_shared=1)
    loaded = dict(base, cycles_concurrent=5, most_concurrent=12, shared_passes=4, most_shared=9)
    html = metrics_html(alone, alone)
    assert "Speculative run: no other run in this app ran beside it." in html
    assert "AR baseline: no other run in this app ran beside it." in html
    assert "different loads" not in html
    html = metrics_html(loaded, alone)
    assert "5 of 8 cycles ran while other runs used this machine (up to 12 at once)" in html
    assert "4 verify passes were shared" in html and "up to 9 runs in one pass" in html
    assert "different loads" in html
