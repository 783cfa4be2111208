"""What a pass costs on this hardware: the cost profile v(n) and its cache (cost_profile.py,
costs.py), and timing a pass or a draft's work (timing.py). The planner and the advisor read these.

Imports specviz.models and specviz.passes. This file stays empty so that importing
cost_profile does not load transformers.
"""
