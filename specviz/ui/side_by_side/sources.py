"""Where Side by side's two runs come from, besides Step and Run: a ready-made pair (also through a
shared ?pair= link), two of Compare's rows, or a file written by Export both."""
from __future__ import annotations

import time
from pathlib import Path

import gradio as gr

from specviz.decoding import tracefile
from specviz.measure.comparison import parse_row
from specviz.proposers import HEAD_DRAFT
from specviz.ui.runtime.state import Session
from specviz.ui.shared import views
from specviz.ui.shared.replay import EXPORT_DIR, show_trace
from specviz.ui.shared.run import on_screen
from specviz.ui.side_by_side.handlers import INPUTS, columns, frame, paint
from specviz.ui.side_by_side.pairs import BY_KEY, FIRST_PAIR, PAIRS, Pair, pair_traces
from specviz.viz import instructive_cycle


def _picked(method: str | None, draft: str | None) -> tuple[str | None, str | None]:
    """An engine method and draft as the proposer and draft pickers show them: the engine's "head"
    is the picker's draft model HEAD_DRAFT."""
    return ("draft", HEAD_DRAFT) if method == "head" else (method, draft)


def _inputs_of(trace) -> dict:
    """The configuration a recording was made with, as the column's input values."""
    s = trace.run.settings
    method, draft = _picked(s.get("method"), s.get("draft"))
    return {"target": s.get("target"), "method": method, "draft": draft, "k": s.get("k"),
            "adaptive_k": bool(s.get("adaptive_k")), "temperature": s.get("temperature"), "top_p": s.get("top_p"),
            "seed": s.get("seed")}


def _show_pair(pair: Pair, a: Session, b: Session) -> tuple[dict, dict]:
    """Put a ready-made pair's two recordings in the columns `a` and `b`: (the tab's outputs, the
    values of A's, B's and the shared inputs that the recordings were made with)."""
    ta, tb = pair_traces(pair)
    if ta is None or tb is None:
        return {"pair_status": views.status_html(f"The recordings of '{pair.title}' are missing "
                                                  "(scripts/assets/make_lesson_traces.py makes them).", "error")}, {}
    show_trace(a, ta), show_trace(b, tb)
    when = {(t.meta.get("recorded_at"), t.meta.get("machine")) for t in (ta, tb)}
    sitting = ("Both were recorded in one sitting" if len(when) == 1 else
               "They were recorded in different sittings, so compare their wall-clock times with care")
    inputs = {f"a_{k}": v for k, v in _inputs_of(ta).items()} | {f"b_{k}": v for k, v in _inputs_of(tb).items()}
    inputs.update(prompt=ta.meta.get("prompt"), max_new_tokens=ta.run.settings.get("max_new_tokens"),
                  chat=ta.run.settings.get("chat", True) is not False)
    # a recording that names a cycle to look at (a seam, a rescue) opens there, else on A's most
    # instructive one (a draft accepted, one rejected and its residual), as Decode's example does
    focus = next((t.meta.get("focus_cycle") for t in (ta, tb) if isinstance(t.meta.get("focus_cycle"), int)),
                 instructive_cycle(ta.run))
    shown = paint(a, b, {"a": (f"Recorded: {ta.run.settings.get('method')}", "info"),
                         "b": (f"Recorded: {tb.run.settings.get('method')}", "info")}, index=focus,
                  message=f"{pair.title}. {pair.look_for} {sitting}; no model was loaded. Step or Run "
                          "decodes the same configurations live.", level="ok")
    return shown, {k: v for k, v in inputs.items() if v is not None}


def open_pair(key: str | None, request: gr.Request) -> tuple:
    """Put a ready-made pair's two recordings in the columns, and their configurations in A's and
    B's inputs (so Step decodes them live)."""
    pair = BY_KEY.get(key or "")
    a, b = columns(request)
    if pair is None:
        names = ", ".join(p.key for p in PAIRS)
        return frame({"pair_status": views.status_html(f"There is no ready-made pair {str(key)[:60]!r}: "
                                                          f"choose one of {names}.", "warn")}) \
            + tuple(gr.skip() for _ in INPUTS)
    shown, inputs = _show_pair(pair, a, b)
    return frame(shown) + tuple(inputs.get(k, gr.skip()) for k in INPUTS)


def first_paint() -> tuple[dict, dict]:
    """What the tab shows before any event, painted once when the page is built: the first
    ready-made pair (FIRST_PAIR), whose recordings a new visitor's columns hold (handlers.columns)."""
    return _show_pair(FIRST_PAIR, Session(), Session())


def _trace_on_screen(session: Session) -> tracefile.TraceFile | None:
    run, ar = on_screen(session)
    if run is None or not run.cycles:
        return None
    meta = dict(session.replay.meta) if session.replay is not None else {}
    if session.replay is None and session.settings is not None:
        meta["prompt"] = session.settings.prompt
    return tracefile.TraceFile(run, ar, meta)


def export_pair(request: gr.Request):
    """Both columns as one JSON file (each side exactly Decode's export document)."""
    a, b = columns(request)
    ta, tb = _trace_on_screen(a), _trace_on_screen(b)
    if ta is None or tb is None:
        return gr.update(visible=False), views.status_html("Nothing to export yet: both columns need a cycle.", "warn")
    EXPORT_DIR.mkdir(parents=True, exist_ok=True)
    path = EXPORT_DIR / f"specviz-pair-{time.strftime('%Y%m%d-%H%M%S')}-{id(a):x}.json"
    path.write_text(tracefile.dumps_pair(ta, tb, {"exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}),
                    encoding="utf-8")
    return gr.update(value=str(path), visible=True), views.status_html(
        f"Exported both columns ({len(ta.run.cycles)} and {len(tb.run.cycles)} cycles): Replay both loads the file "
        "here; each side inside it is a Decode trace.", "ok")


def replay_pair(path: str | None, request: gr.Request) -> tuple:
    """Load a Side by side file into both columns; a bad file gets a message and changes nothing."""
    if not path:
        return frame({})
    name = Path(path).name
    try:
        ta, tb, meta = tracefile.read_pair(path)
    except tracefile.TraceFileError as e:
        return frame({"pair_status": views.status_html(f"Could not replay {name}: {e}", "error")})
    a, b = columns(request)
    show_trace(a, ta), show_trace(b, tb)
    try:
        return frame(paint(a, b, {}, message=f"Replaying {name}, exported {meta.get('exported_at', 'elsewhere')}: "
                                                 "drag the slider, or press Race.", level="ok"))
    except Exception as e:  # noqa: BLE001 -- a file that reads but cannot be drawn must not take the page down
        a.replace(None, None), b.replace(None, None)
        return frame({"pair_status": views.status_html(f"Could not replay {name}: {type(e).__name__}: "
                                                          f"{str(e)[:200]}.", "error")})


def from_compare(rows, row_a, row_b, prompt, max_new_tokens, chat) -> tuple:
    """Two of Compare's rows as A's and B's configurations, with Compare's prompt, and this tab
    selected; a row that is missing or wrong gets a message and changes nothing."""
    skip = (gr.skip(),) * (len(INPUTS) + 1)
    try:
        picked = []
        for which, number in (("A", row_a), ("B", row_b)):
            filled = [r for r in (rows or []) if any(str(x).strip() for x in r if x is not None)]
            i = int(number or 0)
            if not 1 <= i <= len(filled):
                raise ValueError(f"{which}: there is no row {number} (the table has {len(filled)}).")
            picked.append(parse_row(filled[i - 1], i - 1))
    except (TypeError, ValueError) as e:
        return skip + (views.status_html(f"Could not open them in Side by side: {e}", "error"),)
    values = {}
    for side, config in zip("ab", picked):
        method, draft = _picked(config.method, config.draft)
        values.update({f"{side}_target": config.target, f"{side}_method": method, f"{side}_draft": draft,
                       f"{side}_k": config.k, f"{side}_temperature": config.temperature})
    values.update(prompt=prompt, max_new_tokens=max_new_tokens, chat=chat)
    note = (f"Compare's rows {int(row_a)} and {int(row_b)} are set as A and B, with Compare's prompt: "
            "press Step both or Run both.")
    return ((gr.Tabs(selected="pair"),) + tuple(gr.skip() if values.get(k) is None else values[k] for k in INPUTS)
            + (views.status_html(note, "ok"),))


def from_link(request: gr.Request) -> tuple:
    """?pair=KEY opens the tab on that ready-made pair; an unknown key gets a message."""
    params = getattr(request, "query_params", None) or {}
    key = params.get("pair") if hasattr(params, "get") else None
    if not key:
        return (gr.skip(), gr.skip()) + frame({}) + tuple(gr.skip() for _ in INPUTS)
    return (gr.Tabs(selected="pair"), gr.update(value=key) if key in BY_KEY else gr.skip()) + open_pair(key, request)
