"""ZeroGPU on Hugging Face Spaces: `@spaces.GPU` only when the `spaces` package is installed.

Without it (a laptop, a CPU Space, a dedicated GPU) handlers run unchanged. ZeroGPU lists
torch 2.8–2.11, so a ZeroGPU Space must pin torch accordingly; CPU Spaces need nothing.
"""
from __future__ import annotations

try:  # the package exists only on Spaces hardware that offers ZeroGPU
    import spaces
except ImportError:  # pragma: no cover - depends on the host
    spaces = None


def on_gpu(handler):
    """Borrow a GPU for the duration of `handler` on ZeroGPU; otherwise return it as is."""
    return handler if spaces is None else spaces.GPU(handler)
