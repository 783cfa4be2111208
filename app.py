"""SpecViz web app: `python app.py`, then open the printed address.

Honours GRADIO_SERVER_NAME and GRADIO_SERVER_PORT (HF Spaces sets them).
"""
import logging

from specviz.passes import verdicts
from specviz.ui import build_demo, launch_kwargs
from specviz.ui.runtime.state import LIMITS

# SpecViz's own progress (the warm-up's stages, model loads) in the log, others' at warnings only
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
logging.getLogger("specviz").setLevel(logging.INFO)

# warm_up: the model, its costs and the example prefills are made as the app starts, with their
# progress on the page and in the log, so the first Step does not pay for them (SPECVIZ_WARM_UP=0: not);
# settle_gc: then what start-up made is frozen out of the garbage collector's full passes, which
# otherwise stop a class's Steps for 0.3 s at a time
# remember_checks: our fast forward's bit-for-bit check, once passed on this machine, software and
# model, is trusted at the next start (about a second of a warm start; passes/verdicts.py)
verdicts.remember_checks()
demo = build_demo(warm_up=LIMITS.warm_up, settle_gc=True)

if __name__ == "__main__":
    demo.launch(**launch_kwargs())
