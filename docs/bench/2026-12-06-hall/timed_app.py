"""app.py with timing wrappers around a Step's parts; events dumped to $EVENTS every second."""
import json
import logging
import os
import sys
import threading
import time

logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s: %(message)s")
logging.getLogger("specviz").setLevel(logging.INFO)
from specviz.ui import build_demo, launch_kwargs  # noqa: E402
from specviz.ui.runtime.state import LIMITS  # noqa: E402

if os.environ.get("SWITCH"):
    sys.setswitchinterval(float(os.environ["SWITCH"]))
demo = build_demo(warm_up=LIMITS.warm_up, settle_gc=True)
from specviz.decoding import engine, prefills  # noqa: E402
from specviz.ui.decode import handlers  # noqa: E402

EV = []


def wrap(obj, name, label):
    f = getattr(obj, name)

    def w(*a, **k):
        t, c = time.perf_counter(), time.thread_time()
        PT0 = time.process_time()
        try:
            return f(*a, **k)
        finally:
            EV.append((label, threading.get_ident(), t, time.perf_counter(), time.thread_time() - c,
                       PT0, time.process_time()))
    setattr(obj, name, w)


wrap(handlers, "advance", "advance")
wrap(handlers, "render", "render")
wrap(handlers, "session_of", "session_of")
wrap(engine.Decoder, "prefill", "prefill")
wrap(engine.Decoder, "_propose", "propose")
wrap(engine.Decoder, "_verify_pass", "verify_pass")
wrap(engine.Decoder, "_rollback", "rollback")
wrap(engine, "verify", "accept")
wrap(engine, "record_cycle", "record")
wrap(prefills.PREFILLS, "take", "prefill_take")
wrap(prefills.Prefill, "first_token", "first_token")
from specviz.ui.shared import run as shared_run  # noqa: E402

wrap(shared_run, "ensure_run", "ensure_run")
from specviz.ui.runtime import work  # noqa: E402

wrap(work, "step", "work_step")


import gc  # noqa: E402

GCT = {}
_gc_start = {}


def _gc_cb(phase, info):
    if phase == "start":
        _gc_start["t"] = time.perf_counter()
    else:
        g = info["generation"]
        n, t = GCT.get(g, (0, 0.0))
        GCT[g] = (n + 1, t + time.perf_counter() - _gc_start.get("t", time.perf_counter()))
        EV.append(("gc%d" % g, 0, _gc_start["t"], time.perf_counter(), 0, 0, 0))


gc.callbacks.append(_gc_cb)


def dump():
    n = 0
    while True:
        time.sleep(1)
        if len(EV) != n:
            n = len(EV)
            with open(os.environ["EVENTS"], "w") as f:
                json.dump(EV, f)


threading.Thread(target=dump, daemon=True).start()
demo.launch(**launch_kwargs())
