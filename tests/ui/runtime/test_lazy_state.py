"""A visitor's session opens without rendering the whole page's config (specviz/ui/sessions.py),
and what Gradio reads from it is what its own session state would give."""
import sys
from types import SimpleNamespace

import pytest
from gradio import state_holder

from specviz.ui import build_demo
from specviz.ui.runtime import lazy_state


@pytest.fixture(scope="module")
def demo():
    return build_demo()


@pytest.fixture
def counted(monkeypatch, demo):
    """Counts the block configs rendered through the demo's config."""
    calls = []
    config = demo.default_config
    real = type(config).config_for_block

    def counting(*args, **kw):
        calls.append(args[0])
        return real(*args, **kw)

    monkeypatch.setattr(type(config), "config_for_block", staticmethod(counting))
    return calls


def _eager_class():
    lazy = state_holder.SessionState
    return lazy.__mro__[1] if lazy.__name__ == "LazySessionState" else lazy


def test_the_app_installs_lazy_sessions_and_a_new_one_renders_no_block(demo, counted):
    """After build_demo, a new visitor's session renders no block config when it opens, where
    Gradio's own renders one per block of the page (about 270)."""
    assert state_holder.SessionState.__name__ == "LazySessionState"
    state_holder.StateHolder.__getitem__(SimpleNamespace(
        session_data={}, blocks=demo, update=lambda _: None, time_last_used={}), "visitor")
    assert counted == []
    _eager_class()(demo)
    assert len(counted) == len(demo.blocks) > 200


def test_a_lazy_session_gives_gradio_the_same_config_as_its_own(demo):
    """The whole page's config (what a deep link reads) is Gradio's own, block for block and in
    order, also after an output's value was set and a block replaced in the session."""
    lazy, eager = state_holder.SessionState(demo), _eager_class()(demo)
    assert list(lazy.components) == list(eager.components)
    textbox = next(k for k, b in demo.blocks.items() if type(b).__name__ == "Textbox")
    for session in (lazy, eager):
        session._update_value_in_config(textbox, "a visitor's prompt")
    got = list(lazy.components)
    assert got == list(eager.components)
    assert any(c.get("props", {}).get("value") == "a visitor's prompt" for c in got)
    for session in (lazy, eager):
        session[textbox] = type(demo.blocks[textbox])(value="replaced", label="other")
    assert list(lazy.components) == list(eager.components)


def test_a_page_blocks_config_is_rendered_once_and_each_visitor_gets_a_copy(demo, counted, monkeypatch):
    """A page block's config is rendered for the first visitor that needs it and copied for the next
    (none rendered again); a value one visitor's session sets reaches neither the next visitor nor
    the page; a block that is not the page's own (an update's replacement) is rendered as itself."""
    monkeypatch.setattr(lazy_state, "_PRISTINE", {})
    textbox = next(k for k, b in demo.blocks.items() if type(b).__name__ == "Textbox")
    page_value = demo.default_config.config_for_block(textbox, [], demo.blocks[textbox])["props"].get("value")
    counted.clear()
    first = state_holder.SessionState(demo)
    first[textbox] = demo.blocks[textbox]
    first._update_value_in_config(textbox, "the first visitor's prompt")
    assert counted == [textbox]
    second = state_holder.SessionState(demo)
    second[textbox] = demo.blocks[textbox]
    assert counted == [textbox]  # copied, not rendered again
    assert second.config_values[textbox]["props"].get("value") == page_value != "the first visitor's prompt"
    assert lazy_state._PRISTINE[textbox][1]["props"].get("value") == page_value
    replaced = type(demo.blocks[textbox])(value="replaced", label="other")
    assert second.blocks_config.config_for_block(textbox, [], replaced)["props"]["value"] == "replaced"
    assert counted == [textbox, textbox]


def test_another_gradio_shape_is_left_alone(monkeypatch, caplog):
    """Where Gradio's SessionState lacks what the lazy one relies on, nothing is patched and the
    log says why."""
    class Other:
        def __init__(self, blocks):
            self.blocks = blocks

    monkeypatch.setattr(state_holder, "SessionState", Other)
    assert lazy_state.lazy_sessions() is False
    assert state_holder.SessionState is Other
    assert "changed shape" in caplog.text


@pytest.fixture
def searches(monkeypatch):
    """Counts the names Python's path finder searches sys.path for."""
    import importlib.machinery

    names = []
    real = importlib.machinery.PathFinder.find_spec

    def counting(name, *args, **kw):
        names.append(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(importlib.machinery.PathFinder, "find_spec", counting)
    return names


def test_an_absent_library_marked_absent_fails_to_import_without_a_search(monkeypatch, searches):
    """A library that is not installed fails to import as before (ModuleNotFoundError), but once
    marked it does so without searching sys.path; an installed library is not marked."""
    import importlib

    absent, installed = "specviz_no_such_library", "colorsys"
    monkeypatch.delitem(sys.modules, absent, raising=False)
    monkeypatch.delitem(sys.modules, installed, raising=False)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(absent)
    assert absent in searches  # unmarked, a failed import searches
    assert lazy_state.skip_absent_imports((absent, installed)) == [absent]
    searches.clear()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(absent)
    assert searches == []
    assert installed not in sys.modules  # not marked absent (and not imported either)


def test_a_plots_config_no_longer_searches_for_bokeh(monkeypatch, searches):
    """Where bokeh is not installed, Gradio's Plot looks for it each time it renders its config
    (once per plot per visitor); after build_demo's marking that costs no search of sys.path."""
    import importlib.util

    import gradio as gr

    monkeypatch.delitem(sys.modules, "bokeh", raising=False)
    if importlib.util.find_spec("bokeh") is not None:
        pytest.skip("bokeh is installed here")
    searches.clear()
    gr.Plot().get_config()
    assert "bokeh" in searches
    lazy_state.skip_absent_imports()
    searches.clear()
    gr.Plot().get_config()
    assert "bokeh" not in searches


def test_a_lecture_hall_keeps_every_students_run(monkeypatch):
    """The page's session stores hold a hall of 100 visitors (Decode, and Side by side's two
    columns each): a hundred sessions pressing in turn, round after round, each find the run they
    left, not a new one (a pushed-out session starts its run again at its next Step). SPECVIZ_SESSIONS
    sets the number."""
    from specviz.ui.runtime.limits import Limits
    from specviz.ui.runtime.state import SESSIONS, SessionStore
    from specviz.ui.side_by_side.handlers import PAIR_SESSIONS

    for store, per_visitor in ((SessionStore(capacity=SESSIONS.capacity), 1),
                               (SessionStore(capacity=PAIR_SESSIONS.capacity), 2)):
        keys = [f"student-{i}-{c}" for i in range(100) for c in range(per_visitor)]
        first = [store.get(k) for k in keys]
        again = [store.get(k) for k in keys]  # the next round, in the same order
        assert all(a is b for a, b in zip(first, again))
    monkeypatch.setenv("SPECVIZ_SESSIONS", "300")
    assert Limits.from_env().sessions == 300
