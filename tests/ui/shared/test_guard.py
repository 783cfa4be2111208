"""The UI handlers' one copy of error plumbing (specviz/ui/errors.py) and of per-session storage:
the main view and the Compare and Theory & hardware tabs say the same thing about the same error,
escaped, and the tabs keep their results and Stop flag in the session store."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from specviz.loading.loader import ModelLoadError, tiny_random
from specviz.ui import compare, theory
from specviz.ui.runtime import work
from specviz.ui.runtime.state import MODELS, SESSIONS, session_of
from specviz.ui.shared import guard, views

HOSTILE = '<img src=x onerror="alert(1)"> $x$'


def main_view_status(exc: Exception) -> str:
    """The status box the main view shows when a handler raises `exc`."""
    @guard.guarded(views.OUTPUTS, guard.RUN_HINT)
    def handler():
        raise exc
        yield  # a generator, as every guarded handler is

    return dict(zip(views.OUTPUTS, next(handler())))["status"]


def tab_status(exc: Exception, monkeypatch) -> str:
    """The status box the batch-size panel shows when its measurement raises `exc`."""
    def fail(*args):
        raise exc

    MODELS.put("tiny-errors", tiny_random())
    monkeypatch.setattr(work, "batch", fail)
    status, *_ = theory.batch("tiny-errors", 2, False, SimpleNamespace(session_hash="errors"),
                               progress=lambda *a, **kw: None)
    return status


@pytest.mark.parametrize("exc", [ValueError(f"K is too large {HOSTILE}"), ModelLoadError(f"no model {HOSTILE}")])
def test_errors_a_person_can_act_on_are_shown_as_written_and_escaped(exc, monkeypatch):
    """A ValueError or ModelLoadError is shown as its own text, in both the main view and a tab, with
    its markup escaped (no live tag), and no 'Something went wrong' around it."""
    for status in (main_view_status(exc), tab_status(exc, monkeypatch)):
        assert "sv-status-error" in status
        assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in status and "<img" not in status
        assert "Something went wrong" not in status


def test_unexpected_errors_get_one_message_with_the_hint_of_where_they_happened(monkeypatch, caplog):
    """Any other error becomes 'Something went wrong (type: text).' plus what to do next: Reset in the
    main view, try again in a tab; its text is escaped and its traceback is logged."""
    exc = RuntimeError(HOSTILE)
    with caplog.at_level(logging.ERROR, logger=guard.__name__):
        main, tab = main_view_status(exc), tab_status(exc, monkeypatch)
    for status, hint in ((main, guard.RUN_HINT), (tab, guard.TAB_HINT)):
        assert "Something went wrong (RuntimeError: &lt;img src=x" in status and "<img" not in status
        assert hint in status
    assert "press Reset" in main and "press Reset" not in tab
    assert len([r for r in caplog.records if r.exc_info and r.exc_info[1] is exc]) == 2


def test_compare_results_and_stop_live_in_the_session():
    """The Compare tab keeps its last comparison in the session store, where the Theory tab finds it;
    dropping the session (tab closed) drops it too. The tabs' Stop flags only their own session and
    leaves the main view's run alone."""
    mine, other = SimpleNamespace(session_hash="cmp-a"), SimpleNamespace(session_hash="cmp-b")
    marker = object()
    session_of(mine).comparison = marker
    assert SESSIONS.get("cmp-a").comparison is marker and SESSIONS.get("cmp-b").comparison is None
    compare.stop(mine)
    assert SESSIONS.get("cmp-a").measure_stop.is_set() and not SESSIONS.get("cmp-a").stop.is_set()
    assert not SESSIONS.get("cmp-b").measure_stop.is_set()
    SESSIONS.drop("cmp-a")
    with pytest.raises(ValueError, match="no measured run"):
        theory._compare_run(mine, "0")
    assert session_of(other).comparison is None
