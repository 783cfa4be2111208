"""A stand-in for `spaces.GPU` (the `spaces` package, 0.51.3, `spaces/zero/wrappers.py`) that
behaves as ZeroGPU does where it matters to the app:

- the worker is forked from the calling thread, as spaces forks it from the handler's thread,
  and that thread has first run a torch parallel op (`_enter_openmp`), as a Gradio worker thread
  that loaded a model has. A child forked so hangs at its first parallel op unless the app
  guards against it (specviz/ui/zerogpu.py). spaces runs the task itself on a fresh thread in the
  worker but its own start-up on the forked one; here all of it runs on the forked thread, so
  any op the worker does there is exposed;
- it sets no thread count in the worker (spaces sets none);
- the worker is long-lived: after a call that answered it waits for the next (ZeroGPU reuses an
  idle worker), so its KV caches may still be there; a call that raised, or whose caller
  stopped listening, ends it, and the next call forks a fresh one. `FRESH = True` forks a new
  worker for every call, as ZeroGPU does when the worker was not idle;
- arguments and results cross through a multiprocessing pipe with multiprocessing's pickler, so
  tensors travel as torch's shared memory, which the receiver fetches from the living sender;
- as spaces does, a gr.Error comes back as itself, any other exception as a gr.Error naming only
  its class, and a worker that dies as gr.Error("GPU task aborted").

    from specviz.ui.runtime import zerogpu
    zerogpu.use_backend(fork_gpu.GPU)

`CALLS` records (function name, requested seconds) for every call; `reset()` ends idle workers.
"""
from __future__ import annotations

import functools
import inspect
import multiprocessing
import os
import threading
import time

CALLS: list[tuple[str, float]] = []
FRESH = False  # True: a new worker for every call, as after a non-idle GPU
REPLY_TIMEOUT_S = 600  # the stand-in's own last resort, so that no test can hang the suite
_FORK = multiprocessing.get_context("fork")
_idle: dict[object, list["_Worker"]] = {}  # idle workers by the function they serve
_lock = threading.Lock()


def GPU(fn=None, duration=60):
    """Decorator with spaces.GPU's signature: `duration` is seconds or a function of the call's arguments."""
    def decorate(fn):
        @functools.wraps(fn)
        def stream(*args, **kwargs):
            _record(fn, duration, args, kwargs)
            yield from _call(fn, args, kwargs)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            _record(fn, duration, args, kwargs)
            (result,) = _call(fn, args, kwargs)  # to the end: an answered worker is kept
            return result

        return stream if inspect.isgeneratorfunction(fn) else call
    return decorate if fn is None else decorate(fn)


def reset() -> None:
    """End every idle worker, so the next call forks a fresh one from the memory as it is now."""
    with _lock:
        workers = [w for pool in _idle.values() for w in pool]
        _idle.clear()
    for worker in workers:
        worker.end()


def _record(fn, duration, args, kwargs) -> None:
    seconds = duration(*args, **kwargs) if callable(duration) else duration
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"{fn.__name__}: duration must be a positive number of seconds, got {seconds!r}")
    CALLS.append((fn.__name__, float(seconds)))


def _enter_openmp() -> int:
    """One op big enough for torch's OpenMP pool (TensorIterator's grain is 32768 elements), in this
    thread, on at least two threads, as the app's threads run (an earlier test may have set one);
    returns the thread count to restore once the worker has forked."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(max(2, before))
    torch.ones(1 << 20).exp_()
    return before


def _spaces_error(e: BaseException):
    """What spaces sends back for `e`: a gr.Error as itself, anything else as its class name."""
    import gradio as gr

    return e if isinstance(e, gr.Error) else gr.Error(type(e).__name__)


def _serve(fn, conn) -> None:
    """The worker's loop: one call at a time, until the pipe closes."""
    while True:
        try:
            args, kwargs = conn.recv()
        except (EOFError, OSError):
            break
        try:
            result = fn(*args, **kwargs)
            for item in (result if inspect.isgenerator(result) else [result]):
                conn.send(("item", item))
            conn.send(("end", None))
        except BaseException as e:  # noqa: BLE001 -- every failure goes back, as spaces sends it
            conn.send(("error", _spaces_error(e)))
    os._exit(0)  # never run the parent's exit handlers (pytest's, gradio's) in the worker


class _Worker:
    def __init__(self, fn):
        import torch

        threads = _enter_openmp()
        self.conn, theirs = _FORK.Pipe()
        self.process = _FORK.Process(target=_serve, args=(fn, theirs), daemon=True)
        self.process.start()
        torch.set_num_threads(threads)
        theirs.close()

    def receive(self):
        """The worker's next message; a dead worker is spaces' "GPU task aborted"."""
        import gradio as gr

        end = time.monotonic() + REPLY_TIMEOUT_S
        while not self.conn.poll(0.2):
            if not self.process.is_alive() and not self.conn.poll(0):
                raise gr.Error("GPU task aborted", title="ZeroGPU worker error")
            if time.monotonic() > end:
                raise TimeoutError(f"GPU worker sent nothing for {REPLY_TIMEOUT_S} s")
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            raise gr.Error("GPU task aborted", title="ZeroGPU worker error") from None

    def end(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.conn.close()


def _take(fn) -> _Worker:
    with _lock:
        pool = _idle.setdefault(fn, [])
        while pool and not FRESH:
            worker = pool.pop()
            if worker.process.is_alive():
                return worker
    return _Worker(fn)  # forked from this, the caller's, thread


def _call(fn, args, kwargs):
    worker = _take(fn)
    answered = False
    try:
        worker.conn.send((args, kwargs))
        while True:
            kind, value = worker.receive()
            if kind == "error":
                raise value
            if kind == "end":
                answered = True
                return
            yield value
    finally:  # an answered worker waits for the next call; any other one goes
        if answered and not FRESH:
            with _lock:
                _idle.setdefault(fn, []).append(worker)
        else:
            worker.end()
