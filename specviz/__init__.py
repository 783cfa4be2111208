"""SpecViz: see and measure speculative decoding, one cycle at a time.

Public API: `load`, `generate`, `iter_cycles`, `Decoder`, `DecodeSettings`, and the trace types.
"""
from .engine import Decoder, generate, iter_cycles
from .models import LoadedModel, load
from .settings import DecodeSettings
from .trace import CycleTrace, NodeTrace, RunTrace

__all__ = ["load", "generate", "iter_cycles", "Decoder", "DecodeSettings", "LoadedModel", "RunTrace", "CycleTrace", "NodeTrace"]
__version__ = "0.1.0"
