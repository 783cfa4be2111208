"""Helpers for driving the in-process app through gradio_client (the `app_url` fixture is in conftest.py).

Test modules import these from here, never from one another.
"""
from __future__ import annotations

import re
import threading
import time

PROMPT = "Write the days of the week, one per line: Monday, Tuesday, Wednesday."
# K and top-p explicit: the page's own defaults follow the example run it opens on (sampled)
SHORT = dict(prompt=PROMPT, max_new_tokens=24, method="pld", k=4, top_p=1.0)
STREAM_TIMEOUT_S = 600  # a cycle can take seconds on a busy 2-core machine


def named(values) -> dict:
    """One frame of the main view's outputs, by name."""
    from specviz.ui.shared.views import OUTPUTS

    return dict(zip(OUTPUTS, values))


def call(client, api_name: str, **kw) -> dict:
    return named(client.predict(api_name=api_name, **kw))


def cycle_no(out: dict) -> int:
    match = re.search(r"Cycle (\d+)", out["narration"])
    assert match, f"no cycle in the narration: {out['narration']!r}"
    return int(match.group(1))


def wait_for(job, predicate, timeout: float = STREAM_TIMEOUT_S):
    """Poll a submitted job's streamed outputs until one satisfies `predicate`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for values in job.outputs():
            if predicate(named(values)):
                return named(values)
        if job.done():
            break
        time.sleep(0.2)
    raise AssertionError("no streamed output matched")


class HeldRun:
    """Stands in for specviz.ui.runtime.work.run (see the `held_run` fixture): the app's Run then streams
    one cycle per frame and, after its first frame, waits for `release()` before decoding on.

    So a test can Stop a Run that is certainly still going, however fast the machine: nothing is
    left to timing. `states` holds every chunk the Run streamed; `closed` is set once the Run's
    decoding is over (finished, or closed by the app after a Stop), so the last chunk is adopted.
    """

    HOLD_S = 600  # longest wait for release(): a test that forgets to release fails, not hangs

    def __init__(self, real):
        self.real = real
        self.released = threading.Event()
        self.closed = threading.Event()
        self.states: list = []

    def release(self) -> None:
        self.released.set()

    def __call__(self, specs, state, frame_s=None):
        chunks = self.real(specs, state, 0.0)  # frame_s = 0: one state per cycle
        try:
            for chunk in chunks:
                self.states.append(chunk)
                yield chunk
                if len(self.states) == 1 and not self.released.wait(self.HOLD_S):
                    raise AssertionError("the held Run was never released")
        finally:
            chunks.close()
            self.closed.set()
