"""What every UI handler says about an error: one copy for ui/callbacks.py (the main view) and
ui/compare.py (the Compare and Theory & hardware tabs).

Errors a person can act on (USER_ERRORS: a bad setting, a model that will not load, tokenizers
that differ) are shown as their own message. Anything else is logged with its traceback and shown
as one line naming the error, with what to do next. Either way the session stays usable. Messages
go into the status box through views.status_html, which escapes them, so text from a model, a
file or a typed spec never becomes markup.
"""
from __future__ import annotations

import logging

from specviz.loading.loader import ModelLoadError
from specviz.ui.zerogpu import GpuCallFailed

log = logging.getLogger(__name__)

# TokenizerMismatch is a ValueError; GpuCallFailed says what to do after a GPU worker ended unanswered
USER_ERRORS = (ValueError, ModelLoadError, GpuCallFailed)
# what to do after an unexpected error, by where it happened
RUN_HINT = "The session still works: press Reset, or change a setting and try again."  # the main view
TAB_HINT = "Try again, or change a setting."  # Compare and Theory & hardware: nothing there to reset


def message(exc: BaseException, hint: str) -> str:
    """The status line for `exc`: its own text when a person can act on it, else its type and text
    followed by `hint` (and the traceback goes to the log)."""
    if isinstance(exc, USER_ERRORS):
        return str(exc)
    log.error("Unexpected error in a SpecViz handler", exc_info=exc)
    return f"Something went wrong ({type(exc).__name__}: {exc}). {hint}"
