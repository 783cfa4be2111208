"""SpecViz: see and measure speculative decoding, one cycle at a time.

Public API: `load`, `generate`, `iter_cycles`, `Decoder`, `DecodeSettings`, and the trace types.
They load on first use, so that `import specviz.viz` or `import specviz.teach` does not pull in
the models layer (transformers) through this file.
"""
from __future__ import annotations

import importlib

from specviz.decoding.tracefile import SPECVIZ_VERSION as __version__  # noqa: F401

_API = {
    "load": "specviz.loading.loader", "LoadedModel": "specviz.loading.loader",
    "Decoder": "specviz.decoding.engine", "generate": "specviz.decoding.engine",
    "iter_cycles": "specviz.decoding.engine", "DecodeSettings": "specviz.decoding.settings",
    "RunTrace": "specviz.decoding.trace", "CycleTrace": "specviz.decoding.trace",
    "NodeTrace": "specviz.decoding.trace",
}
__all__ = list(_API)


def __getattr__(name: str):
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'specviz' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_API])
