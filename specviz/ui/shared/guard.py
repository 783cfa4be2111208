"""What every handler of every tab says about an error, and the one wrapper that says it.

Errors a person can act on (USER_ERRORS: a bad setting, a model that will not load, tokenizers
that differ) are shown as their own message. Anything else is logged with its traceback and shown
as one line naming the error, with what to do next. Either way the session stays usable. Messages
go into the status box through views.status_html, which escapes them, so text from a model, a
file or a typed spec never becomes markup.
"""
from __future__ import annotations

import functools
import inspect
import logging
from typing import Callable

from specviz.loading.loader import ModelLoadError
from specviz.ui.runtime.zerogpu import GpuCallFailed
from specviz.ui.shared import views

log = logging.getLogger(__name__)

# TokenizerMismatch is a ValueError; GpuCallFailed says what to do after a GPU worker ended unanswered
USER_ERRORS = (ValueError, ModelLoadError, GpuCallFailed)
# what to do after an unexpected error, by where it happened
RUN_HINT = "The session still works: press Reset, or change a setting and try again."  # Decode
TAB_HINT = "Try again, or change a setting."  # Compare, Theory & hardware, Advise: nothing there to reset


def message(exc: BaseException, hint: str) -> str:
    """The status line for `exc`: its own text when a person can act on it, else its type and text
    followed by `hint` (and the traceback goes to the log)."""
    if isinstance(exc, USER_ERRORS):
        return str(exc)
    log.error("Unexpected error in a SpecViz handler", exc_info=exc)
    return f"Something went wrong ({type(exc).__name__}: {exc}). {hint}"


def guarded(outputs: tuple[str, ...], hint: str, status: str = "status") -> Callable[[Callable], Callable]:
    """Wrap a handler that returns, or yields, dicts of output name → value: each becomes the tuple of
    `outputs` (views.as_tuple; a name left out stays as it is on the page), and an exception ends the
    event as a message in the `status` output (`message(e, hint)`), never as a broken page.

    One wrapper for plain handlers and generators, so no handler writes its own catch-all."""
    def wrap(handler: Callable) -> Callable:
        def failed(e: Exception) -> tuple:
            return views.as_tuple({status: views.status_html(message(e, hint), "error")}, outputs)

        if inspect.isgeneratorfunction(handler):
            @functools.wraps(handler)
            def streamed(*args, **kwargs):
                try:
                    for values in handler(*args, **kwargs):
                        yield views.as_tuple(values, outputs)
                except Exception as e:  # noqa: BLE001 -- the one place a handler's error becomes a message
                    yield failed(e)
            return streamed

        @functools.wraps(handler)
        def plain(*args, **kwargs):
            try:
                return views.as_tuple(handler(*args, **kwargs), outputs)
            except Exception as e:  # noqa: BLE001 -- likewise
                return failed(e)
        return plain
    return wrap
