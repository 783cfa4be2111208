"""Models layer: loading a model spec (loader.py: bundled, hub, local folder, tiny twins), the
bundled offline model, the families' tiny twins, KV caches and their rollback, lossless CPU
speed-ups, and what a target pass costs on this hardware (cost_profile.py, costs.py, timing.py).
`LoadedModel` itself lives in loaded.py, which the others import, so that none imports loader.py.

Imports nothing above itself. This file stays empty so that importing one light module here
(cost_profile) does not load transformers.
"""
