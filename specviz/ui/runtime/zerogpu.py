"""ZeroGPU on Hugging Face Spaces: `@spaces.GPU` on ZeroGPU only, and calls that cannot hang.

ZeroGPU is what ZeroGPU sets, SPACES_ZERO_GPU (read as `spaces.config` reads it), not whether
`spaces` imports: the package installs anywhere, and off ZeroGPU its decorator returns the
function unchanged. Off ZeroGPU (a laptop, a CPU Space, a dedicated GPU) the functions of
ui/runtime/work.py run in-process, untouched; tests install a forked stand-in with `use_backend`.

On ZeroGPU each decorated call runs in a worker process forked from the app, from the handler's
thread; arguments and results cross pickled, and whatever else the call changes dies with the
worker. A call goes

    main process: `on_gpu`'s wrapper ─ spaces.GPU ─► worker: `_in_worker`'s wrapper → the function

and the two wrappers add what a forked worker needs:
- One intra-op thread in a forked process (at fork, `_after_fork`). GNU OpenMP is not fork-safe:
  a child forked from a thread that has run torch's OpenMP pool waits for ever at its first
  parallel op for pool threads that do not exist (docs/ZEROGPU.md). torch's DataLoader workers
  do the same. On ZeroGPU the models are on the GPU, so one CPU thread costs nothing.
- A deadline: a worker ends itself at its requested duration plus DEADLINE_MARGIN_S, through
  faulthandler's watchdog, a C thread that needs no GIL and so fires inside a hung native op too.
  The main process then reads an aborted worker, and says so in a sentence (`GpuCallFailed`).
- Errors as values: spaces passes only gr.Error through as itself and names any other exception
  by its class alone, which would turn "Model X is not loaded…" into "ModelLoadError". So the
  worker returns its exception, and the main process raises it again.
- A worker forked before the main process loaded a model lacks it (`ModelNotInWorker`): it
  raises for real, so spaces drops that worker, and the call is made once more in a fresh one.
"""
from __future__ import annotations

import faulthandler
import functools
import inspect
import logging
import os
import pickle
from dataclasses import dataclass
from typing import Callable

from specviz.loading.loader import ModelLoadError

log = logging.getLogger(__name__)

DEADLINE_MARGIN_S = 10  # past its requested seconds a worker may still be sending its answer
FORK_SAFE = True  # one thread in forked workers; tests turn it off to show the hang it prevents
_MAIN_PID = os.getpid()
_backend: Callable | None = None  # a stand-in for spaces.GPU (tests), used when not on ZeroGPU


class GpuCallFailed(RuntimeError):
    """A GPU call's worker ended without an answer (it ran past its deadline, or it crashed)."""


class ModelNotInWorker(ModelLoadError):
    """This worker was forked before the main process loaded a model the call needs."""


def on_zero_gpu() -> bool:
    """True on a ZeroGPU Space: SPACES_ZERO_GPU as spaces.config reads it ("1", "t" or "true")."""
    return os.environ.get("SPACES_ZERO_GPU", "").strip().lower() in ("1", "t", "true")


def _spaces():
    """The spaces package on ZeroGPU, else None (importing it elsewhere would be pointless)."""
    if not on_zero_gpu():
        return None
    try:
        import spaces
    except ImportError:  # pragma: no cover - a ZeroGPU Space always has it
        log.warning("SPACES_ZERO_GPU is set but the spaces package is missing: GPU calls run in-process")
        return None
    return spaces


spaces = _spaces()


def use_backend(gpu: Callable | None) -> None:
    """Run GPU calls through `gpu` (spaces.GPU's signature), or in-process with None."""
    global _backend
    _backend = gpu


def model_device() -> str | None:
    """Where models load: on ZeroGPU `cuda`, at start-up, as ZeroGPU documents (spaces makes CUDA
    look available in the main process); elsewhere None, so `load` picks cuda if torch has it."""
    import torch

    return "cuda" if on_zero_gpu() and torch.cuda.is_available() else None


def _after_fork() -> None:
    """In a forked worker: one intra-op thread, before anything can enter OpenMP's dead pool."""
    if FORK_SAFE:
        import torch

        torch.set_num_threads(1)


os.register_at_fork(after_in_child=_after_fork)


# -- the worker's side ----------------------------------------------------------------------------
@dataclass
class _Raised:
    """An exception raised in the worker, carried back as a value (see the module docstring)."""
    error: BaseException


def _portable(e: BaseException) -> BaseException:
    """`e` if it pickles, else a RuntimeError that still says what it was."""
    try:
        pickle.dumps(e)
        return e
    except Exception:  # noqa: BLE001 -- any exception that cannot cross is described instead
        return RuntimeError(f"{type(e).__name__}: {e}")


class _deadline:
    """In a forked worker: end the process at `seconds` unless the call is over by then."""

    def __init__(self, seconds: float):
        self.armed = os.getpid() != _MAIN_PID
        self.seconds = seconds

    def __enter__(self):
        if self.armed:
            faulthandler.dump_traceback_later(self.seconds, exit=True)  # the stacks go to the log

    def __exit__(self, *exc):
        if self.armed:
            faulthandler.cancel_dump_traceback_later()


def _in_worker(fn: Callable, seconds: Callable[..., float]) -> Callable:
    """`fn` as the worker runs it: under a deadline, its errors returned (or yielded) as values."""
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def stream(*args, **kwargs):
            with _deadline(seconds(*args, **kwargs) + DEADLINE_MARGIN_S):
                try:
                    yield from fn(*args, **kwargs)
                except ModelNotInWorker:
                    raise  # for real: spaces then drops this worker, and the next one has the model
                except Exception as e:  # noqa: BLE001 -- carried to the main process, raised there
                    yield _Raised(_portable(e))
        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        with _deadline(seconds(*args, **kwargs) + DEADLINE_MARGIN_S):
            try:
                return fn(*args, **kwargs)
            except ModelNotInWorker:
                raise
            except Exception as e:  # noqa: BLE001
                return _Raised(_portable(e))
    return call


# -- the main process's side ----------------------------------------------------------------------
def _named(e: BaseException, cls: type) -> bool:
    """Whether `e` is `cls`, or spaces' report of one (a gr.Error whose message is the class name)."""
    return isinstance(e, cls) or str(getattr(e, "message", e)).strip() == cls.__name__


def _aborted(e: BaseException) -> bool:
    """spaces' (and the stand-in's) report of a worker that ended without an answer."""
    return "GPU task aborted" in str(e)


def _failed(fn: Callable, seconds: float) -> GpuCallFailed:
    log.error("GPU call %s: its worker ended without an answer (asked for %.0f s)", fn.__name__, seconds)
    return GpuCallFailed(
        f"The GPU worker stopped before it answered: it ran past the {seconds:.0f} s it asked for, or it "
        "crashed. Nothing was lost: what you had is as it was before. Press the button again; if it happens "
        "again, shorten the prompt or lower 'Max new tokens'.")


def _reraise(fn: Callable, e: Exception, seconds: float):
    """Raise, in the main process, what a GPU call that ended with `e` means (called in `except`)."""
    if _aborted(e):
        raise _failed(fn, seconds) from e
    if _named(e, ModelNotInWorker) and not isinstance(e, ModelNotInWorker):
        raise ModelNotInWorker("A model this call needs is not loaded any more (the model pool made room for "
                               "another): press the button again to reload it.") from e
    raise e


def on_gpu(duration: Callable[..., float] | float):
    """Borrow a GPU for each call of the decorated function, asking for `duration(*args)` seconds.

    ZeroGPU serves short requests first and checks the request against the visitor's quota, so
    the duration is computed from the call's arguments. With the real `spaces` the decoration
    happens at import, as ZeroGPU requires. Off ZeroGPU without a stand-in, `fn` runs as it is.
    """
    seconds = duration if callable(duration) else (lambda *a, **kw: duration)

    def decorate(fn):
        worker_fn = _in_worker(fn, seconds)
        remote = spaces.GPU(duration=duration)(worker_fn) if spaces is not None else None

        def gpu():
            """The decorated call, or None to run `fn` in-process."""
            if remote is not None:  # pragma: no cover - depends on the host
                return remote
            return None if _backend is None else _backend(duration=duration)(worker_fn)

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def stream(*args, **kwargs):
                remote_call = gpu()
                if remote_call is None:
                    yield from fn(*args, **kwargs)
                    return
                for attempt in (1, 2):  # a second time only after a stale worker, before any item
                    sent = False
                    try:
                        for item in remote_call(*args, **kwargs):
                            if isinstance(item, _Raised):
                                raise item.error
                            sent = True
                            yield item
                        return
                    except Exception as e:  # noqa: BLE001 -- a stale worker is retried; _reraise raises the rest
                        if attempt == 1 and not sent and _named(e, ModelNotInWorker):
                            continue
                        _reraise(fn, e, seconds(*args, **kwargs))
            return stream

        @functools.wraps(fn)
        def call(*args, **kwargs):
            remote_call = gpu()
            if remote_call is None:
                return fn(*args, **kwargs)
            for attempt in (1, 2):
                try:
                    result = remote_call(*args, **kwargs)
                except Exception as e:  # noqa: BLE001 -- a stale worker is retried; _reraise raises the rest
                    if attempt == 1 and _named(e, ModelNotInWorker):
                        continue
                    _reraise(fn, e, seconds(*args, **kwargs))
                if isinstance(result, _Raised):
                    raise result.error
                return result
        return call
    return decorate
