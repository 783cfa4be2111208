"""Running a target's passes: KV caches and their rollback (kvcache.py), passes over several runs
at once (ragged.py, rounds.py), the lossless CPU speed-ups `load` applies (speedups.py), and our
own forward pass over a model as those speed-ups leave it (fastpath.py).

Imports only specviz.models.
"""
