"""A recorded run on screen in place of a session's run, no model needed: put there (`show_trace`)
and played cycle by cycle (`play_frames`). Decode's lessons and replayed files and Side by side's
pairs use it. A trace on screen stays until the next Step, Run or Reset.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Iterator

from specviz.decoding import tracefile
from specviz.decoding.tracefile import TraceFile
from specviz.ui.runtime.state import Session
from specviz.ui.shared import views

EXPORT_DIR = Path(tempfile.gettempdir()) / "specviz-exports"  # Decode's and Side by side's exported files
PLAY_S = 6.0  # a played trace takes about this long, whatever its length: a class keeps watching
FRAME_S = 0.35  # slowest pace of a played trace: one cycle at a time stays readable
PLAY_FRAMES = 16  # most frames a played trace sends: each redraws every view, which costs the server


def show_trace(session: Session, trace: TraceFile) -> None:
    """Put a loaded trace on screen in place of the session's run."""
    session.replace(None, None)
    with session.lock:
        session.replay = trace


def play_frames(session: Session, trace: TraceFile, end: int | None = None) -> Iterator[dict]:
    """The trace cycle by cycle, as it was recorded, ending on cycle `end` (default: the last).
    A long run skips evenly between cycles, so it plays in about PLAY_S seconds."""
    n = len(trace.run.cycles)
    shown = sorted({round(j * (n - 1) / (PLAY_FRAMES - 1)) for j in range(PLAY_FRAMES)}) if n > PLAY_FRAMES \
        else list(range(n))
    frame_s = min(FRAME_S, PLAY_S / len(shown))
    try:
        for i in shown[:-1]:
            if session.replay is not trace:
                return  # a Step, Run, Reset or another lesson took over
            partial = tracefile.prefix(trace.run, i)
            yield views.full(f"Playing the recorded run: cycle {i} of {n - 1}…", "info", partial, trace.ar)
            time.sleep(frame_s)
        if session.replay is trace:
            last = n - 1 if end is None else min(max(end, 0), n - 1)
            session.view = last
            yield views.full(f"Played all {n} recorded cycles; showing cycle {last}. Drag the slider, or press "
                             "Explain this cycle to walk through it.", "ok", trace.run, trace.ar, last)
    except Exception as e:  # noqa: BLE001 -- a damaged recording stops playing with a message
        yield views.only(status=views.status_html(f"The recording stopped playing: {type(e).__name__}: "
                                                  f"{str(e)[:200]}.", "error"))
