"""What a model is here: `LoadedModel` (loaded.py), the errors and cache folder every layer above
shares (common.py), and the families' tiny random twins that tests and `tiny:` specs build from
configs (families.py). Loading a spec is specviz.loading; passes, pricing and served targets are
their own folders.

Imports nothing above itself, and this file stays empty so that importing a light module here
does not load transformers.
"""
