"""The Theory & hardware tab's own handlers: which runs it offers to explain, and its Stop."""
from types import SimpleNamespace

from specviz.measure.comparison import Comparison, Config, Shared
from specviz.ui import theory
from specviz.ui.runtime.state import SESSIONS, session_of


def test_the_sources_are_the_measured_speculative_rows_then_the_decode_run():
    """After a Compare, the tab offers each measured speculative row (not the AR row, nor a row that
    did not run, nor an error) by its index, then the Decode tab's run; the first is selected."""
    rows = [Config("bundled", "pld", k=4), Config("bundled", "ar"), Config("bundled", "logitspec"),
            "row 4: not a method", Config("bundled", "layerskip")]
    comparison = Comparison(rows, Shared.of("Hello", max_new_tokens=4))
    measured = SimpleNamespace(run=None, wall_s=1.0, repeats=1)
    comparison.runs = {rows[0]: [measured], rows[1]: [measured], rows[2]: [measured]}  # layerskip never ran
    comparison.measured = lambda config: measured if config in comparison.runs else None
    request = SimpleNamespace(session_hash="theory-sources")
    session_of(request).comparison = comparison
    try:
        update = theory.sources(request)
    finally:
        SESSIONS.drop("theory-sources")
    values = [value for _, value in update["choices"]]
    assert values == ["0", "2", theory.MAIN_RUN] and update["value"] == "0"
    assert update["choices"][0][0].startswith("Compare row 1: ")


def test_without_a_comparison_only_the_decode_run_is_offered():
    """A visitor who has not compared anything is offered the Decode tab's run alone."""
    update = theory.sources(SimpleNamespace(session_hash="theory-no-compare"))
    SESSIONS.drop("theory-no-compare")
    assert update["choices"] == [("The main view's run", theory.MAIN_RUN)] and update["value"] == theory.MAIN_RUN


def test_stop_flags_only_this_visitors_measurements():
    """The tab's Stop sets the visitor's measure_stop flag, not their Decode run's Stop."""
    request = SimpleNamespace(session_hash="theory-stop")
    status = theory.stop(request)
    session = SESSIONS.get("theory-stop")
    assert session.measure_stop.is_set() and not session.stop.is_set() and "Stopping" in status
    SESSIONS.drop("theory-stop")
