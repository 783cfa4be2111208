"""A stand-in for `spaces.GPU` that behaves as ZeroGPU does: every call runs in a freshly forked
process, its arguments and its result (or each item it yields) cross over pickled, and whatever
else the call changes in memory dies with the process.

    from specviz.ui import zerogpu
    zerogpu.use_backend(fork_gpu.GPU)

`CALLS` records (function name, requested seconds) for every call.
"""
from __future__ import annotations

import functools
import inspect
import multiprocessing
import os
import pickle

CALLS: list[tuple[str, float]] = []
REPLY_TIMEOUT_S = 600  # a worker silent this long is taken for dead (cycles can be slow on 2 busy cores)
_FORK = multiprocessing.get_context("fork")


def GPU(fn=None, duration=60):
    """Decorator with spaces.GPU's signature: `duration` is seconds or a function of the call's arguments."""
    def decorate(fn):
        @functools.wraps(fn)
        def stream(*args, **kwargs):
            _record(fn, duration, args, kwargs)
            yield from _in_fork(fn, args, kwargs)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            _record(fn, duration, args, kwargs)
            return next(_in_fork(fn, args, kwargs))

        return stream if inspect.isgeneratorfunction(fn) else call
    return decorate if fn is None else decorate(fn)


def _record(fn, duration, args, kwargs) -> None:
    seconds = duration(*args, **kwargs) if callable(duration) else duration
    if not isinstance(seconds, (int, float)) or seconds <= 0:
        raise ValueError(f"{fn.__name__}: duration must be a positive number of seconds, got {seconds!r}")
    CALLS.append((fn.__name__, float(seconds)))


def _worker(conn, fn, payload: bytes) -> None:
    import torch

    torch.set_num_threads(1)  # the parent's OpenMP thread pool does not survive a fork
    try:
        args, kwargs = pickle.loads(payload)
        result = fn(*args, **kwargs)
        items = result if inspect.isgenerator(result) else [result]
        for item in items:
            conn.send_bytes(pickle.dumps(("item", item)))
        conn.send_bytes(pickle.dumps(("end", None)))
    except BaseException as e:  # noqa: BLE001 -- every failure goes back to the caller, as spaces does
        try:
            message = pickle.dumps(("error", e))
        except Exception:  # noqa: BLE001 -- an exception that cannot pickle still says what it was
            message = pickle.dumps(("error", RuntimeError(f"{type(e).__name__}: {e}")))
        conn.send_bytes(message)
    finally:
        conn.close()
        os._exit(0)  # never run the parent's exit handlers (pytest's, gradio's) in the worker


def _in_fork(fn, args, kwargs):
    payload = pickle.dumps((args, kwargs))  # what spaces sends through its queue
    mine, theirs = _FORK.Pipe()
    worker = _FORK.Process(target=_worker, args=(theirs, fn, payload), daemon=True)
    worker.start()
    theirs.close()
    try:
        while True:
            if not mine.poll(REPLY_TIMEOUT_S):
                raise TimeoutError(f"GPU worker for {fn.__name__} sent nothing for {REPLY_TIMEOUT_S} s")
            try:
                kind, value = pickle.loads(mine.recv_bytes())
            except EOFError:
                raise RuntimeError(f"GPU worker for {fn.__name__} died") from None
            if kind == "error":
                raise value
            if kind == "end":
                return
            yield value
    finally:  # the caller stopped listening (Stop) or all came back: the worker goes
        if worker.is_alive():
            worker.kill()
        worker.join()
        mine.close()
