"""The advisor's report in words: the summary line, the recommendation, the ranked table, the
rates by depth, runs at once, the pair checks and the disagreement, as Markdown (the app draws the
same from viz/advice_figures.py). Plain text from a Survey: no model, no UI.
"""
from __future__ import annotations

from specviz.advise.advice import Measured, Survey, break_even, measured_depth, ranked, under_concurrency
from specviz.decoding import speed
from specviz.proposers import retrieval


def summary(survey: Survey) -> str:
    """One line: what was measured, how, where and when."""
    s = survey.settings
    v = f" v(n): {survey.v_source}." if survey.v_source else ""
    source = f" ({s['prompts_from']})" if s.get("prompts_from") else ""
    return (f"Target {survey.target}, {survey.prompts} prompts{source}, T = {s.get('temperature')}, top-p = "
            f"{s.get('top_p')}, {s.get('max_new_tokens')} new tokens, measured once at K = {s.get('k_max')} "
            f"with planning off{_planned_note(survey)}; {survey.machine}; {survey.measured_at}. Plain decoding: "
            f"{survey.ar_tokens_per_s:.1f} tokens/s, {survey.step_s * 1e3:.0f} ms a cycle, "
            f"{survey.pass_share:.0%} of it the target pass.{v}")


def _planned_note(survey: Survey) -> str:
    auto = [m for m in survey.measured if m.candidate.planned]
    return "" if not auto else (" (" + ", ".join(f"{m.candidate.label} at its K limit {m.k_max}" for m in auto)
                                + ", planner on)")


def recommendation(survey: Survey) -> str:
    """The advice in a sentence or two: the pick (whatever the model predicts fastest, fixed K or
    planned), its K, its predicted (and checked) speedup; where a fixed K beats the planner, it says so."""
    rows = ranked(survey)
    if not rows:
        return "No candidate was measured, so there is nothing to recommend."
    m, k, s = rows[0]
    chk = survey.checks.get(m.candidate.label)
    checked = "" if chk is None else f", measured {chk.measured:.2f}×"
    text = f"Use {m.candidate.label} {at_k(m, k)}: predicted {s:.2f}× plain decoding{checked}."
    beaten = next((row for row in rows if row[0].candidate.planned), None)
    if s < 1.0:
        text = (f"Keep plain decoding: the best candidate, {m.candidate.label} {at_k(m, k)}, is predicted at "
                f"{s:.2f}×.")
    elif not m.candidate.planned and beaten is not None:
        kind = "a retrieval method at a fixed K" if retrieval(m.candidate.method) else "a fixed K"
        text += (f" It is predicted faster than {beaten[0].candidate.label} ({s:.2f}× against {beaten[2]:.2f}×): "
                 f"here {kind} beats SpecViz's planner, so the advice is {m.candidate.label} {at_k(m, k)}.")
    if len(rows) > 1:
        m2, k2, s2 = rows[1]
        text += f" Next: {m2.candidate.label} {at_k(m2, k2)}, {s2:.2f}×."
    deploy = next(((m3, k3) for m3, k3, _ in rows if not m3.candidate.planned), None)
    if m.candidate.planned and deploy is not None:
        text += (f" An engine takes a fixed K: the best fixed-K pick is {deploy[0].candidate.label} at K = "
                 f"{deploy[1]}, and Deploy writes the best one an engine has.")
    return text


def at_k(m: Measured, k: int) -> str:
    """'at K = 4', or for a planned candidate 'with K chosen by its planner (at most 16)'."""
    return f"with K chosen by its planner (at most {m.k_max})" if m.candidate.planned else f"at K = {k}"


def break_even_cell(m: Measured, be: float | None) -> str:
    """The break-even α as a cell: '–' for a planned candidate, whose planner sends less as α falls."""
    if m.candidate.planned:
        return "–"
    return "none" if be is None else f"{be:.2f}"


def k_cell(m: Measured, k: int) -> str:
    return f"auto (≤ {m.k_max})" if m.candidate.planned else str(k)


def measured_cell(m: Measured) -> str:
    """What the prediction over the candidate's K range (1 to k_max) rests on: D, the deepest draft
    depth the survey judged; past it acceptance is the model's assumption."""
    depth = measured_depth(m)
    if depth == 0:
        return "no depth measured (nothing it drafted was judged): every K assumed"
    if depth < m.k_max:
        return f"measured up to depth {depth}; beyond it, assumed"
    return f"measured up to depth {depth}"


def predicted_cell(m: Measured, k: int, s: float) -> str:
    """The predicted speedup, said to be assumed where its K is past the deepest depth measured."""
    assumed = not m.candidate.planned and k > measured_depth(m)
    return f"{s:.2f}×" + (" (assumed)" if assumed else "")


def findings(survey: Survey) -> list[str]:
    """The pair checks and refusals, one sentence each (plain text: the page escapes it)."""
    out = [f"{label}: {f['message']}" for label, fs in survey.pairs.items() for f in fs if f.get("level") != "ok"]
    out += [f"{label} was not measured: {why}" for label, why in survey.refused.items()]
    return out


def concurrency_sentences(survey: Survey) -> list[str]:
    if survey.concurrency is None:
        return [survey.concurrency_note] if survey.concurrency_note else []
    top = survey.concurrency.batch_sizes[-1]
    first = survey.concurrency.batch_sizes[0]
    return [f"{m.candidate.label} loses to plain decoding at every batch size measured." if b == first else
            f"{m.candidate.label} stops paying at {b} runs at once." if b is not None else
            f"{m.candidate.label} still pays at {top} runs at once ({points[-1][2]:.2f}× at K = {points[-1][1]})."
            for m, points, b in under_concurrency(survey)]


def disagreement_sentences(survey: Survey) -> list[str]:
    if not survey.disagreement:
        return [survey.disagreement_note] if survey.disagreement_note else []
    from specviz.advise.disagreement import Disagreement

    return Disagreement.from_dict(survey.disagreement).sentences()


def report(survey: Survey) -> str:
    """The ranked table, per-position rates (conditional and marginal, labelled), load, pair checks,
    disagreement and the checks, in markdown."""
    lines = [summary(survey), "", recommendation(survey), "",
             "| rank | candidate | best K | predicted speedup | what is measured | break-even α | c | "
             "checked: measured speedup |",
             "|---|---|---|---|---|---|---|---|"]
    for i, (m, k, s_k) in enumerate(ranked(survey), 1):
        be = break_even(m, k, survey.v_of, survey.pass_share)
        chk = survey.checks.get(m.candidate.label)
        checked = "–" if chk is None else f"{chk.measured:.2f}× {at_k(m, chk.k)}" + (
            f" ⚠ {chk.flag}" if chk.flag else "")
        unit = "per draft call" if m.per_call else "per cycle"
        lines.append(f"| {i} | {m.candidate.label} | {k_cell(m, k)} | {predicted_cell(m, k, s_k)} | "
                     f"{measured_cell(m)} | {break_even_cell(m, be)} | "
                     f"{m.c:.3f} {unit} | {checked} |")
    lines += ["", "Acceptance by draft depth, measured at K = k_max:", "",
              f"| candidate | {speed.label('acceptance_by_position')} | {speed.label('reach_by_position')} |",
              "|---|---|---|"]
    for m in survey.measured:
        lines.append(f"| {m.candidate.label} | {', '.join(f'{x:.2f}' for x in m.conditional)} | "
                     f"{', '.join(f'{x:.2f}' for x in m.marginal)} |")
    if survey.concurrency is not None:
        sizes = survey.concurrency.batch_sizes
        lines += ["", "Predicted speedup with several runs at once (runs decoding at once; best K at each):", "",
                  "| candidate | " + " | ".join(f"B = {b}" for b in sizes) + " |", "|---" * (len(sizes) + 1) + "|"]
        for m, points, _ in under_concurrency(survey):
            lines.append(f"| {m.candidate.label} | " + " | ".join(f"{s:.2f}× (K {k})" for _, k, s in points) + " |")
    for title, items in (("Runs at once", concurrency_sentences(survey)), ("Pair check", findings(survey)),
                         ("Where the candidates disagree", disagreement_sentences(survey))):
        if items:
            lines += ["", f"{title}:", ""] + [f"- {x}" for x in items]
    return "\n".join(lines)
