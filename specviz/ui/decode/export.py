"""Decode's Export and Replay: the run on screen as a JSON trace file, and a trace file replayed in
every view, no model needed (ui/shared/replay.py puts it on screen)."""
from __future__ import annotations

import os
import platform
import re
import time
from pathlib import Path

import gradio as gr

from specviz.decoding import tracefile
from specviz.decoding.tracefile import TraceFileError
from specviz.ui.runtime.state import MODELS, Session, session_of
from specviz.ui.shared import views
from specviz.ui.shared.replay import EXPORT_DIR, show_trace
from specviz.ui.shared.run import error, on_screen, render


def export_block() -> dict:
    """Export and replay controls, for the bottom of the timing column."""
    gr.HTML('<h3 class="sv-h">Export and replay</h3>')
    out = {"export_btn": gr.Button("Export this run as JSON", size="sm", elem_id="sv-export")}
    out["export_file"] = gr.File(label="Exported trace (settings, every cycle, timing)", visible=False,
                                 interactive=False, elem_id="sv-export-file")
    out["replay_file"] = gr.File(label="Replay a trace (.json): every view, no model needed",
                                 file_types=[".json"], type="filepath", elem_id="sv-replay-file")
    return out


def wire_export(comps: dict) -> None:
    outputs = [comps[name] for name in views.OUTPUTS]
    comps["export_btn"].click(export_run, outputs=[comps["export_file"], comps["status"]], api_name="export",
                              show_progress="hidden")
    comps["replay_file"].upload(replay_upload, inputs=comps["replay_file"], outputs=outputs, api_name="replay",
                                show_progress="hidden")


def _meta(session: Session) -> dict:
    """Where and how the run was recorded, so timings read elsewhere keep their context."""
    meta = dict(session.replay.meta) if session.replay is not None else {}
    meta.update(exported_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), specviz_version=tracefile.SPECVIZ_VERSION,
                python=platform.python_version(), machine=platform.machine(), cpu_count=os.cpu_count())
    if session.replay is None and session.settings is not None:
        meta["prompt"] = session.settings.prompt
    target = MODELS.peek(session.settings.target) if session.replay is None and session.settings else None
    if target is not None:
        meta["device"] = str(target.device)
        meta["dtype"] = str(target.dtype)
    return meta


def export_run(request: gr.Request):
    """Write the run on screen (and its AR baseline) to a JSON file offered for download."""
    session = session_of(request)
    run, ar = on_screen(session)
    if run is None or not run.cycles:
        return gr.update(visible=False), views.status_html(
            "Nothing to export yet: press Step or Run first, or load a lesson.", "warn")
    EXPORT_DIR.mkdir(parents=True, exist_ok=True)
    method = re.sub(r"[^A-Za-z0-9_-]", "", run.method or "run") or "run"
    path = EXPORT_DIR / f"specviz-{method}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{id(session):x}.json"
    path.write_text(tracefile.dumps(run, ar, _meta(session)), encoding="utf-8")
    baseline = " and its AR baseline" if ar is not None else ""
    return gr.update(value=str(path), visible=True), views.status_html(
        f"Exported {len(run.cycles)} cycles{baseline}: download the file below; "
        "Replay a trace loads it on any machine, without a model.", "ok")


def replay_upload(path: str | None, request: gr.Request) -> tuple:
    """Load a trace file chosen in the browser and show its last cycle in every view."""
    if not path:
        return views.as_tuple(views.only())
    name = Path(path).name
    session = session_of(request)
    try:
        trace = tracefile.read(path)
        views.full("", "info", trace.run, trace.ar, 0)  # a file that parses but cannot be drawn
    except TraceFileError as e:
        return views.as_tuple(error(f"Could not replay {name}: {e}"))
    except Exception as e:  # noqa: BLE001 -- a hostile file must not take the page down
        return views.as_tuple(error(f"Could not replay {name}: it is not a trace SpecViz can draw "
                                    f"({type(e).__name__}: {e})."))
    show_trace(session, trace)
    s = trace.run.settings
    what = f"{trace.run.method} on {s.get('target', 'an unknown model')}"
    return views.as_tuple(render(session, f"Replaying {name}: {what}, {len(trace.run.cycles)} cycles, recorded "
                                          f"{trace.meta.get('exported_at', 'elsewhere')}. Drag the cycle slider "
                                          "to explore it; Step or Run starts a live run instead.", "ok"))
