"""ZeroGPU on Hugging Face Spaces: `@spaces.GPU` only when the `spaces` package is installed.

On ZeroGPU each decorated call runs in a worker process forked from the app; its arguments
and its result (or each item it yields) cross over pickled, and whatever else it changes in
memory is lost. So only the functions in ui/work.py, pure functions of a run's state, are
decorated, never a Gradio handler. Without `spaces` (a laptop, a CPU Space, a dedicated GPU)
they run in-process unchanged; tests install a forked stand-in with `use_backend`.
"""
from __future__ import annotations

import functools
from typing import Callable

try:  # the package exists only on Spaces hardware that offers ZeroGPU
    import spaces
except ImportError:  # pragma: no cover - depends on the host
    spaces = None

_backend: Callable | None = None  # a stand-in for spaces.GPU (tests), used when spaces is absent


def use_backend(gpu: Callable | None) -> None:
    """Run GPU calls through `gpu` (spaces.GPU's signature), or in-process with None."""
    global _backend
    _backend = gpu


def model_device() -> str | None:
    """Where models load: ZeroGPU's documented pattern is `.to("cuda")` at start-up, outside any call."""
    return "cuda" if spaces is not None else None


def on_gpu(duration: Callable[..., float]):
    """Borrow a GPU for each call of the decorated function, for `duration(*args)` seconds at most.

    ZeroGPU serves short requests first, so the duration is computed from the call's arguments.
    With the real `spaces` the decoration happens at import, as ZeroGPU requires.
    """
    def decorate(fn):
        if spaces is not None:  # pragma: no cover - depends on the host
            return spaces.GPU(duration=duration)(fn)

        @functools.wraps(fn)
        def call(*args, **kwargs):
            if _backend is None:
                return fn(*args, **kwargs)
            return _backend(duration=duration)(fn)(*args, **kwargs)
        return call
    return decorate
