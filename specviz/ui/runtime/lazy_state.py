"""A visitor's session made cheap to open, for a lecture hall whose students all press Step at once.

On a session's first event Gradio 6 builds its `SessionState`, which renders every block of the
page to its config up front (`config_values`, kept for deep links). The page has some 270 blocks,
so that is about 16 ms of Python per new visitor on a 2-core machine, all of it holding the GIL
that the decoding threads need: a hundred students' first Steps pay 1.6 s of it together
(docs/bench/2026-12-05.md).

`lazy_sessions()` makes those configs lazy: a session renders a block's config when Gradio first
updates or reads it (as Gradio's own methods already do for a block they have not seen), and all
of them only when a deep link asks for the whole page. A block of the page is rendered once per
process and copied for each session that needs it. Nothing else about a session changes. It
is installed once, by `build_demo`; where Gradio's `SessionState` is not the shape this expects
(another version), it leaves Gradio as it is and logs why.

`skip_absent_imports()` (also from `build_demo`) spares every event Gradio's failed imports of
plotting libraries the page does not use.
"""
from __future__ import annotations

import importlib.util
import logging
import sys
from types import SimpleNamespace
from typing import Any, Callable

log = logging.getLogger(__name__)


def _lazy_class(base):
    class LazySessionState(base):
        """Gradio's SessionState with `config_values` filled on demand (this module's docstring)."""

        def __init__(self, blocks):
            # Gradio's own __init__ over a page with no blocks: the same fields, no configs rendered
            super().__init__(SimpleNamespace(default_config=blocks.default_config, blocks={}))
            self._page_ids = frozenset(blocks.blocks)
            # a page block's config is rendered once per process, then copied (_shared_configs)
            self.blocks_config.config_for_block = _shared_configs(blocks.blocks, self.blocks_config.config_for_block)

        def _fill(self) -> None:
            for key, block in self.blocks_config.blocks.items():
                if key in self._page_ids and key not in self.config_values:
                    self.config_values[key] = self.blocks_config.config_for_block(key, [], block)

        @property
        def components(self):
            self._fill()
            yield from base.components.fget(self)

    return LazySessionState


# block id -> (the page's block, its config as Gradio renders it): each rendered once per process
_PRISTINE: dict[int, tuple[Any, dict]] = {}


def _shared_configs(page: dict, render: Callable) -> Callable:
    """Gradio's `config_for_block` for one session, where a block of the page itself (not one an
    update replaced in the session) is rendered once per process and copied: each visitor's first
    event otherwise renders every input and output of its event again (some 35 for a Step, about
    2 ms of Python holding the GIL). The copy has its own `props`, the one part a session
    changes (`_update_value_in_config` sets its value)."""
    def config_for_block(_id, rendered_ids, block, renderable=None):
        if renderable is not None or rendered_ids or page.get(_id) is not block:
            return render(_id, rendered_ids, block, renderable)
        kept = _PRISTINE.get(_id)
        if kept is None or kept[0] is not block:
            kept = _PRISTINE[_id] = (block, render(_id, [], block))
        config = kept[1]
        return dict(config, props=dict(config["props"])) if "props" in config else dict(config)

    return config_for_block


def lazy_sessions() -> bool:
    """Install the lazy session state in Gradio (idempotent); False where this Gradio differs."""
    try:
        from gradio import state_holder
    except ImportError:  # pragma: no cover -- gradio is a dependency
        return False
    current = state_holder.SessionState
    if getattr(current, "__name__", "") == "LazySessionState":
        return True
    needed = ("components", "_update_value_in_config", "_update_config")
    if not all(hasattr(current, name) for name in needed) or not isinstance(current.components, property):
        log.warning("Gradio's SessionState has changed shape; sessions stay as Gradio builds them")
        return False
    state_holder.SessionState = _lazy_class(current)
    return True


# Plotting libraries Gradio tries to import on every event: `import matplotlib` around each call
# (utils.MatplotlibBackendMananger) and `import bokeh` in every Plot's config. The page uses
# neither; where they are not installed, each failed import searches sys.path again, file by file,
# and every stat gives up the GIL that a hall's decoding threads are waiting for.
ABSENT_OPTIONAL = ("bokeh", "matplotlib")


def skip_absent_imports(names=ABSENT_OPTIONAL) -> list[str]:
    """Mark each of `names` that is not installed as absent in `sys.modules` (None: Python's own way
    to say so), so importing it fails at once, as it did, without a search; an installed one is
    left alone. Returns the names marked."""
    marked = []
    for name in names:
        if name in sys.modules:
            continue
        try:
            missing = importlib.util.find_spec(name) is None
        except (ImportError, ValueError):
            missing = False
        if missing:
            sys.modules[name] = None
            marked.append(name)
    return marked
