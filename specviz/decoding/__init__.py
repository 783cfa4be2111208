"""Decoding layer: run settings, the cycle loop (engine.py), verification and sampling, the draft
tree, the planner, run state, and the trace types with their file format.

May import specviz.models, specviz.proposers and specviz.head. This file stays empty so that the
trace types load without models (the drawing layer reads traces only).
"""
