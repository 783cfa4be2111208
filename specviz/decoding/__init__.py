"""Decoding layer: run settings (settings.py), the cycle loop (engine.py), the acceptance rules
(verify.py), the planner, who answers a verify pass (targets.py, served.py), shared prefills,
run state, and the trace types with their file format and bounded schema.

May import the proposers and everything they sit on (docs/ARCHITECTURE.md). This file stays
empty so that the trace types load without models (the drawing layer reads traces only).
"""
