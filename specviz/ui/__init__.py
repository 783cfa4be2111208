"""The Gradio app, the only package that imports gradio: one module or folder per tab (decode/,
learn.py, side_by_side/, compare.py, theory.py, advise.py), what tabs share (shared/: the run logic,
the settings inputs, the views), the server side (runtime/: models, sessions, limits, model calls,
ZeroGPU, the warm-up) and the page that puts the tabs together (page.py)."""
from specviz.ui.page import build_demo, launch_kwargs

__all__ = ["build_demo", "launch_kwargs"]
