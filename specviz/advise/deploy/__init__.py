"""Deployable output: the advisor's pick written as a serving engine's own configuration (issue 43),
and which picks deploy, at which K for each number of requests at once.

Plain data and arithmetic over a `Survey` (advice.py): no model, no torch of its own, no network.
Only two kinds of the advisor's methods exist outside SpecViz: prompt lookup by n-gram and a draft
model (a method's spec says which it deploys as, `deploys_as`). Each is written for every engine that
has it, by that engine's writer (vllm.py, hf.py,
sglang.py, llama_cpp.py: each one's docstring says how it maps SpecViz's method, and what it
leaves out), with the K and the predicted speedup the survey ranked it at (`ranked`); every option
name emitted is in its writer's OPTIONS with where it was checked.

K by concurrency: vLLM 0.32's V1 scheduler honours `num_speculative_tokens_per_batch_size`, which
`concurrency_schedule` writes. HF runs assisted decoding at batch size 1 only, SGLang's
`--speculative-adaptive` follows acceptance rather than concurrency, and llama.cpp has no
per-concurrency option, so only vLLM gets one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from specviz.advise.advice import Measured, Survey, ranked, under_concurrency
from specviz.advise.deploy import hf, llama_cpp, sglang, vllm
from specviz.proposers import REGISTRY, deploys_as, spec

WRITERS = (vllm, hf, sglang, llama_cpp)  # one module per engine, in the order the page shows them
VLLM, HF, SGLANG, LLAMA = (w.ENGINE for w in WRITERS)
ENGINES = tuple(w.ENGINE for w in WRITERS)
OPTIONS: dict[str, dict[str, str]] = {w.ENGINE: w.OPTIONS for w in WRITERS}  # engine → option → where checked


@dataclass
class Deployment:
    """One candidate written for one engine."""
    engine: str  # one of ENGINES
    candidate: str  # the survey candidate's label it deploys
    k: int
    predicted: float  # the survey's predicted speedup for the candidate at k (ranked)
    config: str  # as the engine takes it: JSON (vLLM), keyword arguments (HF), flags (SGLang, llama.cpp)
    command: str  # what starts or uses the engine with it; MODEL / DRAFT where the path is the user's
    options: dict  # option name → value as emitted (every name is in OPTIONS[engine])
    source: str  # where the option names were checked
    note: str = ""  # where the engine's method differs from what SpecViz measured


def _sampled(survey: Survey) -> bool:
    return float(survey.settings.get("temperature") or 0.0) > 0.0


def deployments(survey: Survey, target: str | None = None) -> list[Deployment]:
    """One per (deployable candidate, engine), best candidate first; `target` names the target in
    the commands (default: the survey's own target)."""
    spec = target or survey.target
    out = []
    for m, k, s in ranked(survey):
        if not deploys(m):
            continue
        for writer in WRITERS:
            options, config, command, note = writer.write(m, k, spec, _sampled(survey))
            out.append(Deployment(writer.ENGINE, m.candidate.label, k, s, config, command, options, writer.SOURCE,
                                  note))
    return out


def deploys(m: Measured) -> bool:
    """An engine has the method, at a fixed K: SpecViz's planner ("K auto") is in no engine."""
    return deploys_as(m.candidate.method) is not None and not m.candidate.planned


def best_deployable(survey: Survey) -> tuple[Measured, int, float] | None:
    """The best-ranked candidate an engine has (pld or a draft): (Measured, best K, predicted S), or None."""
    return next((row for row in ranked(survey) if deploys(row[0])), None)


def not_deployable(survey: Survey) -> list[str]:
    """A sentence per measured candidate that no engine has, naming the nearest one that deploys."""
    best = best_deployable(survey)
    out = []
    for m, k, s in ranked(survey):
        if deploys(m):
            continue
        why = ("chooses K every cycle with SpecViz's planner" if m.candidate.planned
               else spec(m.candidate.method).help if m.candidate.method in REGISTRY  # what no engine does
               else "is SpecViz's own method")
        text = (f"{m.candidate.label} (predicted {s:.2f}×) {why}, so no engine here "
                f"({', '.join(ENGINES)}) runs it; ")
        if best is None:
            text += "no measured candidate deploys: add `pld` (or a draft model, `draft:SPEC`) to the candidates."
        else:
            text += (f"the nearest that deploys is {best[0].candidate.label}, predicted {best[2]:.2f}× "
                     f"at K = {best[1]}.")
        out.append(text)
    return out


def by_concurrency(survey: Survey) -> list[tuple[int, int, int | None]]:
    """(lo, hi, K) over runs at once, for the best deployable candidate: each range takes the best K
    at its lowest measured batch size, None where S_B < 1 (speculation off); adjacent ranges with
    the same K are merged. Empty without concurrency timings or a deployable candidate."""
    best = best_deployable(survey)
    if best is None:
        return []
    points = next((p for m, p, _ in under_concurrency(survey) if m is best[0]), None)
    if not points:
        return []
    rows: list[tuple[int, int, int | None]] = []
    for i, (b, k, s) in enumerate(points):
        lo = 1 if i == 0 else b
        hi = points[i + 1][0] - 1 if i + 1 < len(points) else b
        k_here = k if s >= 1.0 else None
        if rows and rows[-1][2] == k_here:
            rows[-1] = (rows[-1][0], hi, k_here)
        else:
            rows.append((lo, hi, k_here))
    return rows


def concurrency_schedule(survey: Survey) -> dict | None:
    """vLLM's speculative config for the best deployable candidate with its K by concurrent
    requests (`num_speculative_tokens_per_batch_size`, K = 0 where speculation is off); None when
    there is no schedule or speculation pays at no concurrency measured."""
    rows, best = by_concurrency(survey), best_deployable(survey)
    ks = [k for _, _, k in rows if k is not None]
    if not rows or not ks or best is None:
        return None
    options = vllm.options(best[0], max(ks), _sampled(survey))
    options["num_speculative_tokens_per_batch_size"] = [[lo, hi, k or 0] for lo, hi, k in rows]
    return options


def by_concurrency_text(survey: Survey) -> str:
    """by_concurrency as a markdown table with a sentence, and vLLM's own form of it."""
    rows, best = by_concurrency(survey), best_deployable(survey)
    if best is None:
        return "No measured candidate deploys, so there is no K by concurrency to give."
    if not rows:
        why = survey.concurrency_note or "the survey has no concurrency timings (the advisor's --concurrency)"
        return f"No K by concurrency for {best[0].candidate.label}: {why}"
    top = rows[-1][1]
    lines = [f"Best K for {best[0].candidate.label} by the number of requests decoding at once, predicted from the "
             f"survey's timings (each range takes the K at its lowest measured count; past {top} was not timed):",
             "", "| requests at once | K |", "|---|---|"]
    for lo, hi, k in rows:
        span = f"{lo}" if lo == hi else f"{lo}–{hi}"
        lines.append(f"| {span} | {'off: plain decoding is predicted faster' if k is None else k} |")
    schedule = concurrency_schedule(survey)
    if schedule is None:
        lines += ["", "Speculation is predicted to lose at every count measured: serve without it."]
        return "\n".join(lines)
    config = json.dumps(schedule)
    lines += ["", "vLLM 0.32 takes this in its speculative config (`num_speculative_tokens_per_batch_size`: "
              "first count, last count, K; K 0 drafts nothing; counts past the last range keep its K; not with "
              "data parallelism):", "", "```", vllm.command(config, survey.target), "```"]
    return "\n".join(lines)


def report(survey: Survey) -> str:
    """Where the advice goes: each deployable pick in each engine's own configuration, what does not
    deploy, K by concurrency, and the checks on the engines, in markdown."""
    from specviz.advise.engine_check import EngineCheck, table

    lines = ["## Deploying it", "",
             f"Predictions here are SpecViz's, from this survey's costs ({survey.machine}); a check on an engine "
             "predicts again from that engine's own step costs, on the machine it ran on.", ""]
    for d in deployments(survey):
        lines += [f"**{d.candidate} at K = {d.k} on {d.engine}** (predicted {d.predicted:.2f}×)"
                  + (f": {d.note}" if d.note else ""), "", "```", d.command, "```", ""]
    if not deployments(survey):
        lines += ["No measured candidate deploys to an engine.", ""]
    lines += [f"- {x}" for x in not_deployable(survey)]
    lines += ["", by_concurrency_text(survey)]
    checks = [EngineCheck.from_dict(c) for c in survey.engine_checks]
    if checks:
        machines = sorted({c.machine for c in checks})
        lines += ["", f"### Checked on the engines ({'; '.join(machines)})", "",
                  "Each engine's step costs are the machine's it ran on: a check on a few CPU cores says little "
                  "of a GPU's, so check where you deploy.", "", table(checks)]
    return "\n".join(lines)
