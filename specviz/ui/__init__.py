"""The Gradio app: layout, handlers and server-side session state. The only package that imports gradio."""
from specviz.ui.layout import build_demo, launch_kwargs

__all__ = ["build_demo", "launch_kwargs"]
