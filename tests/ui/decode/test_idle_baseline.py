"""The AR side of Decode's timing panel without a click: after a Step, the plain baseline is
measured when nobody else decodes, given up when someone starts, and otherwise the panel says
what to press."""
from types import SimpleNamespace

import pytest

from specviz.decoding.activity import ACTIVITY
from specviz.ui.decode import handlers
from specviz.ui.runtime.settings import from_inputs
from specviz.ui.runtime.state import BASELINES, MODELS
from specviz.ui.shared import views
from specviz.viz.metrics import metrics_html

NOTHING = views.as_tuple(views.only())  # a frame that leaves every output as it is
VALUES = dict(target="bundled", method="pld", k=3, temperature=0.0, top_p=1.0, seed=0, adaptive_k=False,
              max_new_tokens=8, chat=True)


@pytest.fixture
def bundled(bundled_target):
    MODELS.put("bundled", bundled_target)
    return bundled_target


def _stepped(name: str, prompt: str):
    request = SimpleNamespace(session_hash=name)
    values = dict(VALUES, prompt=prompt)
    handlers.step(request, None, **values)
    return request, values, from_inputs(values).ar_key()


@pytest.mark.bundled
def test_a_step_alone_gets_its_baseline_measured_without_a_click(bundled):
    """With no other run decoding, the handler that follows a Step measures the AR baseline for
    the run's settings, caches it, and repaints the timing panel with the speedup; a second call
    measures nothing again (one frame that leaves every output as it is)."""
    request, values, key = _stepped("idle-alone", "Name three rivers of Europe, one per line.")
    assert BASELINES.get(key) is None
    frames = [dict(zip(views.OUTPUTS, f)) for f in handlers.baseline_if_idle(request, None, **values)]
    assert BASELINES.get(key) is not None and len(BASELINES.get(key).token_ids) == 8
    assert "measured while the app was idle" in frames[-1]["status"]
    assert "Speedup:" in frames[-1]["metrics"] and "not measured yet" not in frames[-1]["metrics"]
    assert list(handlers.baseline_if_idle(request, None, **values)) == [NOTHING]


@pytest.mark.bundled
def test_no_baseline_is_measured_while_another_run_decodes(bundled, monkeypatch):
    """While another run's cycle is open the handler leaves every output as it is; and a
    measurement that another run interrupts is given up, leaving nothing in the cache (no time
    taken from them, and no timing slowed by them), and the status says so and what to press."""
    request, values, key = _stepped("idle-busy", "Write two short lines about the sea.")
    span = ACTIVITY.begin()
    try:
        assert list(handlers.baseline_if_idle(request, None, **values)) == [NOTHING]
    finally:
        ACTIVITY.end(span)
    assert BASELINES.get(key) is None
    answers = iter([False])  # idle when asked first, then someone starts decoding
    monkeypatch.setattr(ACTIVITY, "busy", lambda: next(answers, True))
    frames = [dict(zip(views.OUTPUTS, f)) for f in handlers.baseline_if_idle(request, None, **values)]
    assert BASELINES.get(key) is None
    assert "left for later" in frames[-1]["status"] and "Measure AR baseline" in frames[-1]["status"]


def test_the_panel_says_what_to_press_while_the_baseline_is_missing():
    """A run without its AR baseline reads, in the timing panel, which button measures it."""
    html = metrics_html({"tokens_per_s": 20.0, "new_tokens": 8, "cycles": 4}, None)
    assert "Measure AR baseline" in html and "not measured yet" in html
    assert "Measure AR baseline" not in metrics_html({"tokens_per_s": 20.0}, {"tokens_per_s": 10.0})
