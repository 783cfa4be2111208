"""SpecViz web app: `python app.py`, then open the printed address.

Honours GRADIO_SERVER_NAME and GRADIO_SERVER_PORT (HF Spaces sets them).
"""
from specviz.ui import build_demo, launch_kwargs

demo = build_demo()

if __name__ == "__main__":
    demo.launch(**launch_kwargs())
