"""The Side by side tab: two configurations, A and B, on one prompt, cycle by cycle.

Each column has its own target, proposer, draft, K, adaptive K, temperature, top-p and seed; the
prompt, the maximum new tokens and the chat template are shared. Step advances both by one cycle,
Run streams both, Stop and Reset act on both, and one slider scrubs both. Each column is a
`Session` of its own (in PAIR_SESSIONS, apart from Decode's), advanced by the same
`callbacks.advance` as Decode's Step and drawn by the same `views.cycle_views`.

Fair timing: A's and B's cycles run one after the other in the same handler, never at once, so
neither is timed under the other's load (other visitors' runs may still run beside them: each
cycle records that, and the summary says how many did).
"""
from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Iterator

import gradio as gr

from specviz import viz
from specviz.decoding.trace import RunTrace
from specviz.decoding import tracefile
from specviz.measure.comparison import parse_row
from specviz.viz import pair_views as pv
from specviz.ui import errors, views
from specviz.ui.callbacks import AR_HINT, BASELINES, advance, ensure_run, on_screen, stream_baseline
from specviz.ui.pairs import BY_KEY, PAIRS, pair_traces
from specviz.ui.presets import K_RANGE, MAX_NEW_RANGE, METHODS, TARGETS, draft_choices, k_default
from specviz.ui.replay import EXPORT_DIR, show_trace
from specviz.ui.settings import RunSettings, from_inputs
from specviz.ui.limits import served_targets
from specviz.ui.state import LIMITS, SESSION_CAPACITY, Session, SessionStore

SIDE_INPUTS = ("target", "method", "draft", "k", "adaptive_k", "temperature", "top_p", "seed")
SHARED_INPUTS = ("prompt", "max_new_tokens", "chat")
SIDE_VIEWS = ("status", "narration", "tree", "pq", "residual", "cache", "text")
OUTPUTS = ("pair_status", "diff", "summary", "race", "cycle") + tuple(f"{s}_{v}" for s in "ab" for v in SIDE_VIEWS)
RACE_FRAMES, RACE_S = 16, 5.0  # the race replay: frames sent, and about how long it plays
INPUTS = tuple(f"{s}_{k}" for s in "ab" for k in SIDE_INPUTS) + SHARED_INPUTS
HINT = "This column's run is kept: press Reset, or change its settings, and try again."
PAIR_SESSIONS = SessionStore(capacity=2 * SESSION_CAPACITY)  # two columns a visitor, apart from Decode's


def sessions(request) -> tuple[Session, Session]:
    """The visitor's two columns; a new column shows nothing (Decode's example is not theirs)."""
    key = getattr(request, "session_hash", None) or "anonymous"
    out = []
    for side in "ab":
        session = PAIR_SESSIONS.get(f"{key}|{side}")
        if session.state is None and session.replay is None:
            session.example = False
        out.append(session)
    return out[0], out[1]


def unload(request: gr.Request) -> None:
    key = getattr(request, "session_hash", None) or "anonymous"
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
    beside = [int((s.run.metrics or {}).get("cycles_beside_others") or 0) if s.run else 0 for s in (a, b)]
    text = ("A's and B's cycles run one after the other, never at the same time, so neither is timed under the "
            "other's load.")
    if any(beside):
        text += (f" Other visitors' runs ran beside {beside[0]} of A's and {beside[1]} of B's cycles: those "
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


def as_tuple(values: dict) -> tuple:
    return tuple(values.get(name, gr.skip()) for name in OUTPUTS)


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
            notes[name] = (errors.message(e, HINT), "error")
    return notes


def step(request: gr.Request, progress=gr.Progress(), **values) -> tuple:
    """One cycle in each column: A first, then B."""
    try:
        a, b = sessions(request)
        notes = _advance_both(a, b, values, progress)
        cycles = [len(s.state.cycles) if s.state is not None else 0 for s in (a, b)]
        return as_tuple(paint(a, b, notes, message=f"Stepped both: A has {cycles[0]} cycles, B {cycles[1]}.",
                              level="info"))
    except Exception as e:  # noqa: BLE001 -- never let a handler take the page down
        return as_tuple({"pair_status": views.status_html(errors.message(e, HINT), "error")})


def _done(session: Session) -> bool:
    return session.state is not None and session.state.done


def run(request: gr.Request, progress=gr.Progress(), **values) -> Iterator[tuple]:
    """Both columns to the end, a cycle of A then a cycle of B, then each target's plain baseline."""
    try:
        a, b = sessions(request)
        for name, session in (("a", a), ("b", b)):  # start new runs first: starting one sets its Stop
            try:
                ensure_run(session, side_settings(values, name), progress)
            except Exception:  # noqa: BLE001 -- the first cycle's attempt below says it in the column
                pass
        a.stop.clear(), b.stop.clear()
        while True:
            notes = _advance_both(a, b, values, progress, only_unfinished=True)
            if any(level == "error" for _, level in notes.values()):
                yield as_tuple(paint(a, b, notes, message="Stopped: a column could not go on.", level="warn"))
                return
            if a.stop.is_set() or b.stop.is_set():
                yield as_tuple(paint(a, b, notes, message="Stopped. Step or Run continues both runs.", level="warn"))
                return
            finished = _done(a) and _done(b)
            yield as_tuple(paint(a, b, notes, message="" if finished else "Running both…"))
            if finished:
                break
        for name, session in (("a", a), ("b", b)):
            settings = side_settings(values, name)
            if BASELINES.get(settings.ar_key()) is None:
                yield as_tuple({"pair_status": views.status_html(f"Measuring {name.upper()}'s target decoding plainly "
                                                                 "(the AR baseline)…", "info")})
                for _ in stream_baseline(session, settings, progress):
                    pass
        yield as_tuple(paint(a, b, {}, message="Both runs finished; Race replays them on one clock.", level="ok"))
    except Exception as e:  # noqa: BLE001 -- never let a handler take the page down
        yield as_tuple({"pair_status": views.status_html(errors.message(e, HINT), "error")})


def stop(request: gr.Request) -> tuple:
    a, b = sessions(request)
    a.stop.set(), b.stop.set()
    return as_tuple({"pair_status": views.status_html("Stopping after the current cycle…", "warn")})


def reset(request: gr.Request) -> tuple:
    a, b = sessions(request)
    a.replace(None, None), b.replace(None, None)
    a.example = b.example = False
    return as_tuple(paint(a, b, {"a": ("Reset.", "info"), "b": ("Reset.", "info")},
                          message="Reset: Step or Run starts both columns afresh.", level="info"))


def show_cycle(cycle, request: gr.Request) -> tuple:
    """Cycle `cycle` in both columns (a shorter run shows its last)."""
    a, b = sessions(request)
    try:
        values = paint(a, b, {}, index=max(int(cycle or 0), 0))
    except Exception as e:  # noqa: BLE001 -- a replayed cycle that cannot be drawn says so
        return as_tuple({"pair_status": views.status_html(f"Cycle {cycle} cannot be drawn: {type(e).__name__}.", "error")})
    values.pop("cycle")  # the slider already shows it
    return as_tuple(values)


def _inputs_of(trace) -> dict:
    """The configuration a recording was made with, as the column's input values."""
    s = trace.run.settings
    method, draft = s.get("method"), s.get("draft")
    if method == "head":  # the engine's "head" is the picker's draft model "head"
        method, draft = "draft", "head"
    return {"target": s.get("target"), "method": method, "draft": draft, "k": s.get("k"),
            "adaptive_k": bool(s.get("adaptive_k")), "temperature": s.get("temperature"), "top_p": s.get("top_p"),
            "seed": s.get("seed")}


def open_pair(key: str | None, request: gr.Request) -> tuple:
    """Put a ready-made pair's two recordings in the columns, and their configurations in A's and
    B's inputs (so Step decodes them live)."""
    pair = BY_KEY.get(key or "")
    a, b = sessions(request)
    keep = tuple(gr.skip() for _ in INPUTS)
    if pair is None:
        names = ", ".join(p.key for p in PAIRS)
        return as_tuple({"pair_status": views.status_html(f"There is no ready-made pair {str(key)[:60]!r}: "
                                                          f"choose one of {names}.", "warn")}) + keep
    ta, tb = pair_traces(pair)
    if ta is None or tb is None:
        return as_tuple({"pair_status": views.status_html(f"The recordings of '{pair.title}' are missing "
                                                          "(scripts/make_lesson_traces.py makes them).", "error")}) + keep
    show_trace(a, ta), show_trace(b, tb)
    when = {(t.meta.get("recorded_at"), t.meta.get("machine")) for t in (ta, tb)}
    sitting = ("Both were recorded in one sitting" if len(when) == 1 else
               "They were recorded in different sittings, so compare their wall-clock times with care")
    inputs = {f"a_{k}": v for k, v in _inputs_of(ta).items()} | {f"b_{k}": v for k, v in _inputs_of(tb).items()}
    inputs.update(prompt=ta.meta.get("prompt"), max_new_tokens=ta.run.settings.get("max_new_tokens"), chat=True)
    shown = as_tuple(paint(a, b, {"a": (f"Recorded: {ta.run.settings.get('method')}", "info"),
                                  "b": (f"Recorded: {tb.run.settings.get('method')}", "info")},
                           message=f"{pair.title}. {pair.look_for} {sitting}; no model was loaded. Step or Run "
                                   "decodes the same configurations live.", level="ok"))
    return shown + tuple(gr.skip() if inputs.get(k) is None else inputs[k] for k in INPUTS)


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
    a, b = sessions(request)
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
        return as_tuple({})
    name = Path(path).name
    try:
        ta, tb, meta = tracefile.read_pair(path)
    except tracefile.TraceFileError as e:
        return as_tuple({"pair_status": views.status_html(f"Could not replay {name}: {e}", "error")})
    a, b = sessions(request)
    show_trace(a, ta), show_trace(b, tb)
    try:
        return as_tuple(paint(a, b, {}, message=f"Replaying {name}, exported {meta.get('exported_at', 'elsewhere')}: "
                                                 "drag the slider, or press Race.", level="ok"))
    except Exception as e:  # noqa: BLE001 -- a file that reads but cannot be drawn must not take the page down
        a.replace(None, None), b.replace(None, None)
        return as_tuple({"pair_status": views.status_html(f"Could not replay {name}: {type(e).__name__}: "
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
        method, draft = config.method, config.draft
        if method == "head":  # the engine's "head" is the picker's draft model "head"
            method, draft = "draft", "head"
        values.update({f"{side}_target": config.target, f"{side}_method": method, f"{side}_draft": draft,
                       f"{side}_k": config.k, f"{side}_temperature": config.temperature})
    values.update(prompt=prompt, max_new_tokens=max_new_tokens, chat=chat)
    note = (f"Compare's rows {int(row_a)} and {int(row_b)} are set as A and B, with Compare's prompt: "
            "press Step both or Run both.")
    return ((gr.Tabs(selected="pair"),) + tuple(gr.skip() if values.get(k) is None else values[k] for k in INPUTS)
            + (views.status_html(note, "ok"),))


def wire_from_compare(compare: dict, tabs: gr.Tabs, inputs: dict, status) -> None:
    """Compare's 'Open these two rows in Side by side' button."""
    compare["to_pair"].click(from_compare, inputs=[compare[k] for k in ("rows", "pair_a", "pair_b", "prompt",
                                                                        "max_new_tokens", "chat")],
                             outputs=[tabs, *(inputs[k] for k in INPUTS), status], api_name="compare_to_pair",
                             show_progress="hidden")


def from_link(request: gr.Request) -> tuple:
    """?pair=KEY opens the tab on that ready-made pair; an unknown key gets a message."""
    params = getattr(request, "query_params", None) or {}
    key = params.get("pair") if hasattr(params, "get") else None
    if not key:
        return (gr.skip(), gr.skip()) + as_tuple({}) + tuple(gr.skip() for _ in INPUTS)
    return (gr.Tabs(selected="pair"), gr.update(value=key) if key in BY_KEY else gr.skip()) + open_pair(key, request)


def race(request: gr.Request) -> Iterator[tuple]:
    """Replay both runs on one clock: tokens appear at the seconds they were committed."""
    a, b = sessions(request)
    sa, sb = _side(a, "A"), _side(b, "B")
    if sa.run is None or sb.run is None:
        yield as_tuple({"pair_status": views.status_html("Race needs a run in both columns: Step, Run or open a "
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
        yield as_tuple(out)
        time.sleep(RACE_S / RACE_FRAMES)
    yield as_tuple(paint(a, b, {}, message=f"Race over: {pv.leader(sa, sb, end)}", level="ok"))


# -- layout ----------------------------------------------------------------------------------------
def side_column(name: str, s: RunSettings, first: dict) -> dict:
    """One column: its configuration (collapsible) and the same views as Decode's centre."""
    comps: dict = {}
    with gr.Accordion(f"{name}: configuration", open=True):
        # the deployment's vLLM-served targets too, on either side (README, "Beyond one machine")
        comps["target"] = gr.Dropdown(TARGETS + served_targets(LIMITS), value=s.target, allow_custom_value=True,
                                      label="Target model",
                                      elem_id=f"sv-{name.lower()}-target")
        comps["method"] = gr.Radio(METHODS, value=s.method, label="Proposer", elem_id=f"sv-{name.lower()}-method")
        choices = draft_choices(s.target)
        comps["draft"] = gr.Dropdown(choices, value=s.draft or (choices[0][1] if choices else None),
                                     allow_custom_value=True, label="Draft model (for the draft-model proposer)")
        comps["k"] = gr.Slider(*K_RANGE, value=s.k, step=1, precision=0, label="K")
        comps["adaptive_k"] = gr.Checkbox(value=s.adaptive_k, label="Adaptive K")
        with gr.Row():
            comps["temperature"] = gr.Slider(0.0, 2.0, value=s.temperature, step=0.05, label="Temperature",
                                             min_width=120)
            comps["top_p"] = gr.Slider(0.05, 1.0, value=s.top_p, step=0.01, label="Top-p", min_width=120)
            comps["seed"] = gr.Number(value=s.seed, precision=0, label="Seed", min_width=80)
    out = {f"{name.lower()}_{k}": v for k, v in comps.items()}
    prefix = f"sv-{name.lower()}"
    views_ = {"status": gr.HTML(elem_id=f"{prefix}-status"),
              "narration": gr.HTML(first["narration"], elem_id=f"{prefix}-narration"),
              "tree": gr.Plot(first["tree"], show_label=False, elem_id=f"{prefix}-tree"),
              "pq": gr.Plot(first["pq"], show_label=False, elem_id=f"{prefix}-pq"),
              "residual": gr.Plot(first["residual"], show_label=False, elem_id=f"{prefix}-residual"),
              "cache": gr.HTML(first["cache"], elem_id=f"{prefix}-cache"),
              "text": gr.HTML(first["text"], elem_id=f"{prefix}-text")}
    out.update({f"{name.lower()}_{k}": v for k, v in views_.items()})
    return out


DEFAULTS = (RunSettings(method="draft"), RunSettings(method="layerskip", k=k_default("layerskip")))


def build_pair_tab(demo: gr.Blocks, tabs: gr.Tabs, decode: dict, prompt: str) -> dict:
    """The tab, wired; `decode` is the model events' shared concurrency group, `tabs` the page's tabs
    (a shared link selects this one). Returns the inputs and the status box (wire_from_compare)."""
    empty = {**views.cycle_views(None, None), "text": viz.text_html(RunTrace(method=""))}
    with gr.Tab("Side by side", id="pair", elem_id="sv-tab-pair"):
        gr.HTML('<div class="sv-lesson-hint">Two configurations on one prompt, cycle by cycle. Open a '
                'ready-made pair (no model needed), or set A and B and press Step. A link with '
                '<code>?pair=KEY</code> opens a pair directly.</div>')
        with gr.Row():
            chooser = gr.Dropdown([(p.title, p.key) for p in PAIRS], value=None, label="Ready-made pair",
                                  elem_id="sv-pair-choose", scale=3)
            open_btn = gr.Button("Open pair", size="sm", elem_id="sv-pair-open", scale=1)
        shared = {"prompt": gr.Textbox(value=prompt, lines=3, max_lines=10, label="Prompt (both columns)",
                                       elem_id="sv-pair-prompt")}
        with gr.Row():
            shared["max_new_tokens"] = gr.Slider(*MAX_NEW_RANGE, value=32, step=1, precision=0,
                                                 label="Max new tokens (both)")
            shared["chat"] = gr.Checkbox(value=True, label="Apply the chat template (both)")
        comps = {"pair_status": gr.HTML(elem_id="sv-pair-status")}
        with gr.Row():
            step_btn = gr.Button("Step both", variant="primary", elem_id="sv-pair-step")
            run_btn = gr.Button("Run both", variant="primary", elem_id="sv-pair-run")
            stop_btn = gr.Button("Stop", variant="stop", elem_id="sv-pair-stop")
            reset_btn = gr.Button("Reset", elem_id="sv-pair-reset")
            race_btn = gr.Button("Race", elem_id="sv-pair-race")
        comps["diff"] = gr.HTML(elem_id="sv-pair-diff")
        comps["cycle"] = gr.Slider(0, 1, value=0, step=1, precision=0, label="Cycle on screen (both)",
                                   elem_id="sv-pair-cycle")
        with gr.Row(equal_height=False):
            for name, s in zip("AB", DEFAULTS):
                with gr.Column(min_width=420, elem_id=f"sv-pair-{name.lower()}"):
                    comps.update(side_column(name, s, empty))
        with gr.Row(equal_height=False):
            comps["summary"] = gr.HTML(elem_id="sv-pair-summary")
            comps["race"] = gr.Plot(show_label=False, elem_id="sv-pair-race-chart")
        with gr.Row():
            export_btn = gr.Button("Export both as JSON", size="sm", elem_id="sv-pair-export")
            export_file = gr.File(label="Exported pair", visible=False, interactive=False)
            replay_file = gr.File(label="Replay both (.json from Export both)", file_types=[".json"],
                                  type="filepath", elem_id="sv-pair-replay")
    inputs = {**{k: comps.pop(k) for k in [f"{s}_{i}" for s in "ab" for i in SIDE_INPUTS]}, **shared}
    outputs = [comps[name] for name in OUTPUTS]
    common = dict(inputs_kwargs=inputs, outputs=outputs, show_progress_on=[comps["pair_status"]])
    step_btn.click(step, api_name="pair_step", trigger_mode="once", **common, **decode)
    run_event = run_btn.click(run, api_name="pair_run", **common, **decode)
    stop_btn.click(stop, outputs=outputs, cancels=[run_event], api_name="pair_stop", show_progress="hidden")
    reset_btn.click(reset, outputs=outputs, cancels=[run_event], api_name="pair_reset", show_progress="hidden")
    race_btn.click(race, outputs=outputs, api_name="pair_race", show_progress="hidden")
    comps["cycle"].input(show_cycle, inputs=[comps["cycle"]], outputs=outputs, api_name="pair_show_cycle",
                         trigger_mode="always_last", show_progress="hidden")
    export_btn.click(export_pair, outputs=[export_file, comps["pair_status"]], api_name="pair_export",
                     show_progress="hidden")
    replay_file.upload(replay_pair, inputs=replay_file, outputs=outputs, api_name="pair_replay", show_progress="hidden")
    with_inputs = outputs + [inputs[k] for k in INPUTS]
    open_btn.click(open_pair, inputs=[chooser], outputs=with_inputs, api_name="pair_open", show_progress="hidden")
    chooser.input(open_pair, inputs=[chooser], outputs=with_inputs, show_progress="hidden", api_visibility="private")
    for side in "ab":
        inputs[f"{side}_target"].change(
            lambda t, d: gr.update(choices=draft_choices(t), value=d if d in [v for _, v in draft_choices(t)]
                                   else (draft_choices(t)[0][1] if draft_choices(t) else None)),
            inputs=[inputs[f"{side}_target"], inputs[f"{side}_draft"]], outputs=inputs[f"{side}_draft"],
            queue=False, show_progress="hidden", api_visibility="private")
    demo.load(from_link, outputs=[tabs, chooser, *with_inputs], queue=False, show_progress="hidden",
              api_visibility="private")
    demo.unload(unload)
    return {"inputs": inputs, "status": comps["pair_status"]}
