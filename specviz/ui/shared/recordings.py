"""What the page shows before anyone decodes, read from assets/: the example prompts, the example
run's settings, the lessons' recorded runs (Decode's lessons and Side by side's ready-made pairs play
them), and the results the Compare and Theory & hardware tabs open on.

The recorded results come from scripts/assets/record_results.py. Like the Decode tab's example trace,
they let the first look show a comparison, the S(K) curve with its measured point, the cost profile
v(n) behind it and a batch-size curve before anyone measures; each status line says they were
recorded, when and on what machine, and how to measure again here. The lessons' runs come from
scripts/assets/make_lesson_traces.py.
"""
from __future__ import annotations

import json
from dataclasses import fields
from functools import lru_cache

from specviz.decoding import tracefile
from specviz.decoding.tracefile import TraceFile
from specviz.measure.batch_effect import BatchEffect
from specviz.measure.waterfall import Analysis
from specviz.pricing.cost_profile import renamed
from specviz.pricing.costs import CostProfile
from specviz.proposers import HEAD_DRAFT
from specviz.ui.runtime.presets import DEFAULT_METHOD, methods
from specviz.ui.runtime.settings import RunSettings
from specviz.ui.shared import views
from specviz.ui.shared.views import ASSETS, status_html
from specviz.viz import compare_figures as cviz

RECORDED = ASSETS / "recorded_results.json"
EXAMPLES = ASSETS / "examples.json"
LESSON_DIR = ASSETS / "lessons"
LESSON_TOKENS = 40  # the lessons' runs: long enough for a dozen cycles, short enough to record and to play in seconds


# -- the example prompts and the example run ----------------------------------------------------------
@lru_cache(maxsize=1)
def _examples() -> tuple[dict, ...]:
    try:
        data = json.loads(EXAMPLES.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple(e for e in data if isinstance(e, dict) and isinstance(e.get("prompt"), str)) \
        if isinstance(data, list) else ()


def examples() -> list[dict]:
    """The example prompts the page offers, in its order ({"label", "prompt"}); none when the file is missing."""
    return [dict(e) for e in _examples()]


def example_prompt(label: str) -> str:
    """The example prompt called `label` (the lessons and the ready-made pairs decode these)."""
    return next((e["prompt"] for e in _examples() if e.get("label") == label), "")


def example_settings() -> RunSettings:
    """The example run's settings, so the page's controls describe what it shows."""
    run = views.example()[0]
    s = dict(run.settings) if run is not None else {}
    fields_ = RunSettings.__dataclass_fields__
    known = {k: v for k, v in s.items() if k in fields_ and k not in ("knobs", "draft", "method", "proposer")}
    proposer = s.get("proposer") or s.get("method")  # a run recorded before RunSettings had `proposer`
    if proposer == "head":  # the trained head is offered as a draft in the picker
        proposer, known["draft"] = "draft", HEAD_DRAFT
    elif proposer == "draft" and s.get("draft"):
        known["draft"] = s["draft"]
    known["proposer"] = proposer if proposer in {m for _, m in methods()} else DEFAULT_METHOD
    known.setdefault("prompt", examples()[0]["prompt"] if examples() else "")
    return RunSettings(**known)


@lru_cache(maxsize=None)
def lesson_trace(file: str) -> TraceFile | None:
    """A lesson's recording (assets/lessons/<file>.json), or None if it is missing."""
    try:
        return tracefile.read(LESSON_DIR / f"{file}.json")
    except (OSError, tracefile.TraceFileError):
        return None


# -- the Compare and Theory & hardware tabs' recorded results ----------------------------------------


@lru_cache(maxsize=1)
def recorded() -> dict | None:
    """The recorded file, or None when it is missing or unreadable (the tabs then open empty)."""
    try:
        data = json.loads(RECORDED.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _when(data: dict) -> str:
    return f"Recorded on {data.get('recorded_at', '?')} ({data.get('machine', 'unknown machine')})"


def compare_values() -> dict:
    """Status, table and chart of the Compare tab: the recorded comparison of the default rows."""
    data = recorded()
    if not data or "compare" not in data:
        return {"status": status_html("Edit the rows, then press Compare.", "info"),
                "table": cviz.compare_table_html([]), "chart": None}
    rows, baselines = data["compare"]["rows"], data["compare"].get("baselines", [])
    note = (f"{_when(data)}: the default rows below on the default prompt. Press Compare to measure them "
            f"on this server; '{data.get('command', 'python scripts/assets/record_results.py')}' records them anew.")
    return {"status": status_html(note, "info"), "table": cviz.compare_table_html(rows, baselines),
            "chart": cviz.speedup_figure(rows)}


def _analysis(d: dict) -> Analysis:
    d = {k: v for k, v in d.items() if k in {f.name for f in fields(Analysis)}}
    return Analysis(**{**d, "curve": [tuple(p) for p in d.get("curve", [])], "best": tuple(d["best"])})


def theory_values() -> dict:
    """Status, figure and table of the theory panel: the recorded run on its S(K) curve."""
    data = recorded()
    try:
        source, analysis = data["theory"]["source"], _analysis(data["theory"]["analysis"])
    except (KeyError, TypeError, ValueError):
        return {"theory_status": "", "theory_plot": None, "theory_html": "", "waterfall_plot": None,
                "waterfall_html": ""}
    note = (f"{_when(data)}: {source}, with that machine's cost profile v(n) (below). Press 'Put it on the "
            "theory curve' to do it for a run measured here.")
    return {"theory_status": status_html(note, "info"), "theory_plot": cviz.theory_figure(analysis),
            "theory_html": cviz.theory_html(analysis), "waterfall_plot": cviz.waterfall_figure(analysis),
            "waterfall_html": cviz.waterfall_html(analysis)}


def cost_values() -> dict:
    """The cost panel's figure: the recorded target's cost profile, the recorded run's verify pass on it."""
    data = recorded()
    try:
        prof = CostProfile.from_dict(data["cost_profile"])
    except (KeyError, TypeError):
        prof = None
    if prof is None or not prof.v:
        return {"cost_plot": None}
    try:
        run_tokens = float(data["theory"]["analysis"]["verify_tokens"]) + 1
    except (KeyError, TypeError, ValueError):
        run_tokens = None
    return {"cost_plot": cviz.cost_figure(prof, run_tokens)}


def batch_values() -> dict:
    """Status, figure and text of the batch-size panel: the recorded curve."""
    data = recorded()
    try:
        d = renamed(data["batch"])  # recorded before 2026-12-06: the one-token pass was "step_s"
        effect = BatchEffect(**{f.name: d[f.name] for f in fields(BatchEffect) if f.name != "cached"})
    except (KeyError, TypeError, ValueError, AttributeError):
        return {"batch_status": "", "batch_plot": None, "batch_html": ""}
    note = f"{_when(data)}. Press 'Measure batch sizes 1 to 32' to time it on this server."
    return {"batch_status": status_html(note, "info"), "batch_plot": cviz.batch_figure(effect),
            "batch_html": cviz.batch_html(effect)}
