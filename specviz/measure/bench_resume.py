"""A long bench run that can stop and go on: its file on disk, resuming it, and its progress line.

bench.json is rewritten after every prompt, through a temporary file and a rename, so a run stopped at
any moment (Ctrl-C) leaves the last complete file. `--resume` reads it back, refuses it when it was
measured another way (a setting or the machine differs: the numbers would not be one run's), and
hands back the prompts already measured, which the run then skips.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

REPORT = "bench.json"
# Options that choose which prompts run or how the table is shown, not how a prompt is measured.
FREE = ("out", "resume", "limit", "split_mt")
DERIVED = ("seeds",)  # settings a run derives from its arguments: compared after them
# What of the machine changes the numbers; the date does not.
SAME_MACHINE = ("cpu", "threads", "torch", "cuda")


class ResumeError(ValueError):
    """A run that cannot be resumed, in one sentence that says why and what to do."""


def write_report(out: Path, report: dict) -> None:
    """bench.json in `out`, replaced whole: a run stopped while writing keeps the previous file."""
    tmp = out / (REPORT + ".tmp")
    tmp.write_text(json.dumps(report, indent=1), encoding="utf-8")
    os.replace(tmp, out / REPORT)


def read_previous(out: Path) -> dict:
    """The report a run left in `out`, for --resume."""
    path = out / REPORT
    if not path.is_file():
        raise ResumeError(f"--resume found no {REPORT} in {str(out)!r}: start the run without --resume, "
                          "or give the --out of the run to continue.")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ResumeError(f"--resume cannot read {str(path)!r} ({type(e).__name__}): "
                          "start again in a new --out.") from None
    if not isinstance(report, dict) or not isinstance(report.get("results"), dict) \
            or not isinstance(report.get("settings"), dict):
        raise ResumeError(f"{str(path)!r} is not a bench report SpecViz wrote: start again in a new --out.")
    return report


def check_same(previous: dict, settings: dict, machine: dict) -> None:
    """Raise ResumeError naming the first setting or machine detail that differs from the previous run's."""
    old = previous["settings"]
    # a setting that follows from others (sampled runs' seeds, bench.settings_of) is named only when those agree
    for key in sorted(set(old) | set(settings), key=lambda k: (k in DERIVED, k)):
        if key not in FREE and old.get(key) != settings.get(key):
            raise ResumeError(f"--resume: the run in {REPORT} was measured with {key}={old.get(key)!r}, this one "
                              f"asks for {settings.get(key)!r}; give the same settings, or a new --out.")
    for key in SAME_MACHINE:
        was, now = previous.get("machine", {}).get(key), machine.get(key)
        if was != now:
            raise ResumeError(f"--resume: the run in {REPORT} was measured with {key} {was!r} and this machine "
                              f"has {now!r}; resume where it started, or start again in a new --out.")


def measured(previous: dict, prompts: list[dict]) -> dict:
    """The previous run's results for this run's prompts; a measured prompt that is not among them, or
    whose category changed, means another prompt file."""
    ours = {p["id"]: p.get("cat", "") for p in prompts}
    cats = previous.get("prompts", {})
    for pid in previous["results"]:
        if pid not in ours or cats.get(pid, ours.get(pid)) != ours[pid]:
            raise ResumeError(f"--resume: prompt {pid!r} in {REPORT} is not among this run's prompts with the "
                              "same category; give the same prompt file and a --limit that includes it, "
                              "or a new --out.")
    return dict(previous["results"])


def duration(seconds: float) -> str:
    """'45 s', '12 min 5 s', '1 h 3 min': a person's reading of a time."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def progress_line(done: int, total: int, item: dict, speeds: dict, elapsed: float, this_session: int) -> str:
    """One prompt's line: which of how many, its tokens/s per variant, time spent and a rough time left
    (this session's mean time per prompt; prompt lengths differ, so it is an estimate)."""
    cat = f" ({item['cat']})" if item.get("cat") else ""
    left = (total - done) * elapsed / this_session if this_session else 0.0
    eta = f", about {duration(left)} left" if done < total else ", done"
    return (f"[{done}/{total}] {item['id']}{cat}: " + ", ".join(f"{v} {x:.1f}" for v, x in speeds.items())
            + f" tok/s · {duration(elapsed)} elapsed{eta}")


def merge(reports: list[dict], label: str | None = None) -> dict:
    """One report from the pieces of a run split across cores (each its own `--questions` file): the
    settings (but the questions file) and the machine must agree, and no prompt may be in two pieces.
    Each piece's cost profile is kept, since each timed its own; the summary is rebuilt by the caller."""
    if not reports:
        raise ResumeError("merge: give at least one bench.json.")
    first = reports[0]
    free = FREE + ("questions",)
    results, prompts, profiles = {}, {}, []
    for n, rep in enumerate(reports, 1):
        for key in sorted(set(first["settings"]) | set(rep["settings"])):
            if key not in free and first["settings"].get(key) != rep["settings"].get(key):
                raise ResumeError(f"merge: piece {n} was measured with {key}={rep['settings'].get(key)!r}, "
                                  f"piece 1 with {first['settings'].get(key)!r}: only one run's pieces merge.")
        for key in SAME_MACHINE:
            if rep.get("machine", {}).get(key) != first.get("machine", {}).get(key):
                raise ResumeError(f"merge: piece {n} ran with {key} {rep.get('machine', {}).get(key)!r}, "
                                  f"piece 1 with {first.get('machine', {}).get(key)!r}: pieces must share a machine.")
        if rep.get("variants") != first.get("variants"):
            raise ResumeError(f"merge: piece {n} measured {rep.get('variants')}, piece 1 {first.get('variants')}.")
        twice = sorted(set(results) & set(rep["results"]))
        if twice:
            raise ResumeError(f"merge: prompt {twice[0]!r} is in two pieces; each prompt must be measured once.")
        results.update(rep["results"])
        prompts.update(rep.get("prompts", {}))
        profiles.append(rep.get("cost_profile"))
    merged = {**first, "results": results, "prompts": prompts, "cost_profile": profiles,
              "planned": sum(r.get("planned", len(r["results"])) for r in reports),
              "pieces": [{"questions": r["settings"].get("questions"), "machine": r.get("machine"),
                          "prompts": len(r["results"])} for r in reports]}
    if label and "suite" in merged:
        merged["suite"] = {**merged["suite"], "label": label}
    return merged
