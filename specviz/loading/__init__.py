"""Loading a model spec: the bundled offline model (bundled.py) and `load` for bundled, hub ids,
local folders, `tiny:` twins and served targets (loader.py), with its speed-ups and dtype choice.

Imports specviz.models, passes, pricing and served.
"""
