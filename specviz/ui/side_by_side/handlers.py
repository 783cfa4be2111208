"""The Side by side tab's state and handlers: two configurations, A and B, on one prompt, cycle by cycle
(layout: side_by_side/layout.py; ready-made pairs, links, Compare rows and files: side_by_side/sources.py).

Each column has its own target, proposer, draft, K, adaptive K, temperature, top-p and seed; the
prompt, the maximum new tokens and the chat template are shared. Step advances both by one cycle,
Run streams both, Stop and Reset act on both, and one slider scrubs both. Each column is a
`Session` of its own (in PAIR_SESSIONS, apart from Decode's), advanced by the same
`shared/run.advance` as Decode's Step and drawn by the same `views.cycle_views`.

Fair timing: A's and B's cycles run one after the other in the same handler, never at once, so
neither is timed under the other's load (other visitors' runs may still run beside them: each
cycle records that, and the summary says how many did).
"""
from __future__ import annotations

import functools
import html
import time
from typing import Iterator

import gradio as gr

from specviz import viz
from specviz.decoding import tracefile
from specviz.decoding.trace import RunTrace
from specviz.ui.runtime.settings import RunSettings, from_inputs
from specviz.ui.runtime.state import BASELINES, SESSION_CAPACITY, Session, SessionStore, visitor_key
from specviz.ui.shared import guard, views
from specviz.ui.shared.replay import show_trace
from specviz.ui.shared.run import AR_HINT, advance, ensure_run, on_screen, stream_baseline
from specviz.ui.side_by_side.pairs import FIRST_PAIR, pair_traces
from specviz.viz import pair_views as pv

SIDE_INPUTS = ("target", "method", "draft", "k", "adaptive_k", "temperature", "top_p", "seed")
SHARED_INPUTS = ("prompt", "max_new_tokens", "chat")
SIDE_VIEWS = ("status", "narration", "tree", "pq", "residual", "cache", "text")
OUTPUTS = ("pair_status", "diff", "summary", "race", "cycle") + tuple(f"{s}_{v}" for s in "ab" for v in SIDE_VIEWS)
RACE_FRAMES, RACE_S = 16, 5.0  # the race replay: frames sent, and about how long it plays
INPUTS = tuple(f"{s}_{k}" for s in "ab" for k in SIDE_INPUTS) + SHARED_INPUTS
HINT = "This column's run is kept: press Reset, or change its settings, and try again."
PAIR_SESSIONS = SessionStore(capacity=2 * SESSION_CAPACITY)  # two columns a visitor, apart from Decode's
pair_handler = guard.guarded(OUTPUTS, HINT, status="pair_status")  # dicts in, this tab's output tuples out
frame = functools.partial(views.as_tuple, names=OUTPUTS)  # for handlers whose outputs add inputs to OUTPUTS


def columns(request) -> tuple[Session, Session]:
    """The visitor's two columns, each a Session. A column never used holds its side of the first
    ready-made pair, which the tab opens on (layout.build paints it), so the slider, Export and the
    summary act on what the page shows; after Reset a column is empty (Decode's example is not theirs)."""
    key = visitor_key(request)
    out = []
    for i, side in enumerate("ab"):
        session = PAIR_SESSIONS.get(f"{key}|{side}")
        if session.state is None and session.replay is None:
            session.example = False
            trace = pair_traces(FIRST_PAIR)[i] if session.generation == 0 else None  # 0: never replaced
            if trace is not None:
                show_trace(session, trace)
        out.append(session)
    return out[0], out[1]


def unload(request: gr.Request) -> None:
    """The tab closed: free both columns' runs."""
    key = visitor_key(request)
    for side in "ab":
        PAIR_SESSIONS.drop(f"{key}|{side}")


def side_settings(values: dict, side: str) -> RunSettings:
    """One column's RunSettings: its own inputs plus the shared prompt, length and template."""
    own = {k: values.get(f"{side}_{k}") for k in SIDE_INPUTS}
    return from_inputs({**own, **{k: values.get(k) for k in SHARED_INPUTS}})


# -- drawing ---------------------------------------------------------------------------------------
def _side(session: Session, name: str) -> pv.Side:
    run, ar = on_screen(session)
    if session.replay is not None:
        s = session.replay.run.settings
        label = f"{s.get('method', run.method)}, K={s.get('k')}, T={s.get('temperature')}"
        return pv.Side(run, ar, str(s.get("target")), s.get("temperature") == 0, label)
    settings = session.settings
    if settings is None:
        return pv.Side(run, ar, "", True, f"column {name}: no run yet")
    label = settings.describe().split(": ", 1)[-1]
    return pv.Side(run, ar, settings.target, settings.temperature == 0, label)


def _fairness(a: pv.Side, b: pv.Side) -> str:
    concurrent = [int((s.run.metrics or {}).get("cycles_concurrent") or 0) if s.run else 0 for s in (a, b)]
    text = ("A's and B's cycles run one after the other, never at the same time, so neither is timed under the "
            "other's load.")
    if any(concurrent):
        text += (f" Other visitors' runs ran beside {concurrent[0]} of A's and {concurrent[1]} of B's cycles: those "
                 "timings include their load.")
    return f'<div style="font-size:12px">{html.escape(text)}</div>'


def paint(a: Session, b: Session, notes: dict[str, tuple[str, str]], index: int | None = None,
          message: str = "", level: str = "info") -> dict:
    """Every output of the tab for the two columns; notes[side] is that column's (message, level)."""
    sa, sb = _side(a, "A"), _side(b, "B")
    out = {"pair_status": views.status_html(message, level) if message else gr.skip()}
    diff = pv.first_difference(sa, sb)
    out["diff"] = pv.difference_html(diff)
    out["summary"] = pv.summary_html(sa, sb) + _fairness(sa, sb)
    out["race"] = pv.race_figure(sa, sb)
    longest = max((len(s.run.cycles) for s in (sa, sb) if s.run is not None), default=0)
    out["cycle"] = views.slider_update(longest, index)
    for name, side in (("a", sa), ("b", sb)):
        cyc = views.cycle_views(side.run, None if index is None or side.run is None
                                else min(index, len(side.run.cycles) - 1))
        cyc.pop("cycle")
        out.update({f"{name}_{k}": v for k, v in cyc.items()})
        out[f"{name}_text"] = viz.text_html(side.run or RunTrace(method=""))
        text, lvl = notes.get(name, ("", "info"))
        out[f"{name}_status"] = views.status_html(text, lvl) if text else gr.skip()
    return out


# -- handlers --------------------------------------------------------------------------------------
def _advance_both(a: Session, b: Session, values: dict, progress, only_unfinished: bool = False) -> dict:
    notes = {}
    for name, session in (("a", a), ("b", b)):
        try:
            settings = side_settings(values, name)
            if only_unfinished and session.settings == settings and session.state is not None and session.state.done:
                continue
            message, level = advance(session, settings, progress)
            notes[name] = (message.replace(AR_HINT, " Run both also decodes the prompt plainly, for the race."), level)
        except Exception as e:  # noqa: BLE001 -- one column's error never costs the other its run
            notes[name] = (guard.message(e, HINT), "error")
    return notes


@pair_handler
def step(request: gr.Request, progress=gr.Progress(), **values) -> dict:
    """One cycle in each column: A first, then B."""
    a, b = columns(request)
    notes = _advance_both(a, b, values, progress)
    cycles = [len(s.state.cycles) if s.state is not None else 0 for s in (a, b)]
    return paint(a, b, notes, message=f"Stepped both: A has {cycles[0]} cycles, B {cycles[1]}.", level="info")


def _done(session: Session) -> bool:
    return session.state is not None and session.state.done


@pair_handler
def run(request: gr.Request, progress=gr.Progress(), **values) -> Iterator[dict]:
    """Both columns to the end, a cycle of A then a cycle of B, then each target's plain baseline."""
    a, b = columns(request)
    for name, session in (("a", a), ("b", b)):  # start new runs first: starting one sets its Stop
        try:
            ensure_run(session, side_settings(values, name), progress)
        except Exception:  # noqa: BLE001 -- the first cycle's attempt below says it in the column
            pass
    a.stop.clear(), b.stop.clear()
    while True:
        notes = _advance_both(a, b, values, progress, only_unfinished=True)
        if any(level == "error" for _, level in notes.values()):
            yield paint(a, b, notes, message="Stopped: a column could not go on.", level="warn")
            return
        if a.stop.is_set() or b.stop.is_set():
            yield paint(a, b, notes, message="Stopped. Step or Run continues both runs.", level="warn")
            return
        finished = _done(a) and _done(b)
        yield paint(a, b, notes, message="" if finished else "Running both…")
        if finished:
            break
    for name, session in (("a", a), ("b", b)):
        settings = side_settings(values, name)
        if BASELINES.get(settings.ar_key()) is None:
            yield {"pair_status": views.status_html(f"Measuring {name.upper()}'s target decoding plainly "
                                                    "(the AR baseline)…", "info")}
            for _ in stream_baseline(session, settings, progress):
                pass
    yield paint(a, b, {}, message="Both runs finished; Race replays them on one clock.", level="ok")


def stop(request: gr.Request) -> tuple:
    a, b = columns(request)
    a.stop.set(), b.stop.set()
    return frame({"pair_status": views.status_html("Stopping after the current cycle…", "warn")})


def reset(request: gr.Request) -> tuple:
    a, b = columns(request)
    a.replace(None, None), b.replace(None, None)
    a.example = b.example = False
    return frame(paint(a, b, {"a": ("Reset.", "info"), "b": ("Reset.", "info")},
                          message="Reset: Step or Run starts both columns afresh.", level="info"))


def show_cycle(cycle, request: gr.Request) -> tuple:
    """Cycle `cycle` in both columns (a shorter run shows its last)."""
    a, b = columns(request)
    try:
        values = paint(a, b, {}, index=max(int(cycle or 0), 0))
    except Exception as e:  # noqa: BLE001 -- a replayed cycle that cannot be drawn says so
        return frame({"pair_status": views.status_html(f"Cycle {cycle} cannot be drawn: {type(e).__name__}.",
                                                          "error")})
    values.pop("cycle")  # the slider already shows it
    return frame(values)


def race(request: gr.Request) -> Iterator[tuple]:
    """Replay both runs on one clock: tokens appear at the seconds they were committed."""
    a, b = columns(request)
    sa, sb = _side(a, "A"), _side(b, "B")
    if sa.run is None or sb.run is None:
        yield frame({"pair_status": views.status_html("Race needs a run in both columns: Step, Run or open a "
                                                         "ready-made pair first.", "warn")})
        return
    end = pv.race_end(sa, sb)
    for j in range(1, RACE_FRAMES + 1):
        second = end * j / RACE_FRAMES
        out = {"race": pv.race_figure(sa, sb, clock=second),
               "pair_status": views.status_html(f"Race: {pv.leader(sa, sb, second)}", "info")}
        for name, side in (("a", sa), ("b", sb)):
            n = pv.cycles_by(side.run, second)
            out[f"{name}_text"] = viz.text_html(tracefile.prefix(side.run, n - 1) if n else RunTrace(method=""))
        yield frame(out)
        time.sleep(RACE_S / RACE_FRAMES)
    yield frame(paint(a, b, {}, message=f"Race over: {pv.leader(sa, sb, end)}", level="ok"))
