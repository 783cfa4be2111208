"""What the model of speed needs from a survey: kept in it when it is measured, derived from the
means of an older one, and read back as the model's `Inputs` (measure/speed_model.py).

**Kept** (`record_of`, format /5 on). A candidate's runs are joined into one and read by the model's
own readers, theory.text_inputs and machine_inputs: α_d, reach_d by how deep a cycle's draft went,
each cycle's draft (its nodes per depth, whether it filled its K, the levels a model drafted), the
drafts' shape at the deepest depth sent (which a draft grown past it continues), each prompt's token
budget where its run stopped at its max new tokens, and the machine's costs in one-token passes.
Cycles that sent the same draft are kept once, with their count (a `Shape`); per depth, the nodes
each source sent and the draft calls, a cycle, are kept beside them.

**Derived** (`derived`, formats /1 to /4). An older survey kept means only: per depth the cycles
judged and accepted, and the mean nodes a cycle sent at depth ≤ d. From them: the T_d nodes sent at
depth d, spread over the cycles that sent a draft (reached at depth 1) as evenly as a tree allows
(a cycle with a node at depth d has one at d − 1, so the first cnt_d cycles go deepest, cnt_d =
min(cnt_{d−1}, T_d)), and reach_d = accepted_d ÷ cnt_d for every draft depth. Each cycle with a node
at depth d then adds accepted_d ÷ cnt_d, so τ at every K is the survey's measured 1 + Σ_{d≤K}
accepted_d ÷ cycles exactly; what is assumed is how the nodes were spread. Past DERIVED_CYCLES
cycles they are rebuilt on that many, each count scaled (shares then kept to 1/DERIVED_CYCLES). Costs in plain cycles
become one-token passes through the pass's share of a plain cycle: o_AR = 1 ÷ pass_share − 1, and
drafting c (per call or per cycle) and the overhead divided by pass_share; v_scale is 1. The shape
at the deepest depth is its nodes there over the cycles that reached it (sources not told apart),
and a call a level for a model draft.

**Read back** (`inputs`). Shapes become the model's per-cycle lists, each repeated by its count
(divided by their common factor; scaled down past MODEL_CYCLES cycles or MODEL_NODES nodes, which only
a survey of thousands of cycles reaches).
"""
from __future__ import annotations

import dataclasses
import math
from collections import Counter

from specviz.advise.survey import Measured, Shape, SpeedInputs
from specviz.advise.survey_schema import MAX_PASS
from specviz.decoding import speed
from specviz.decoding.trace import RunTrace
from specviz.measure import speed_model as model  # the model of speed: Inputs, text_inputs, machine_inputs

MODEL_CYCLES = 1000  # cycles handed to the model at most (a survey of 8 prompts has a few hundred)
MODEL_NODES = 20_000  # nodes over those cycles at most
DERIVED_CYCLES = 48  # an older survey's cycles are rebuilt on at most this many
ALL = "all sources"  # an older survey's nodes, its sources not told apart
SHAPE_FIELDS = sorted({f.name for f in dataclasses.fields(model.Inputs)}
                      & {"level_nodes", "level_keep", "level_calls", "budget"})


# -- kept: from the runs -------------------------------------------------------------------------
def joined(runs: list[RunTrace], method: str) -> RunTrace:
    """The runs as one: every cycle, and their seconds in cycles."""
    return RunTrace(method=method, cycles=[c for r in runs for c in r.cycles],
                    metrics={"decode_s": sum(speed.decode_s(r) for r in runs)})


def _source(node) -> str:
    return str(getattr(node.source, "value", node.source) or "unnamed")


def record_of(runs: list[RunTrace], ar_runs: list[RunTrace], method: str, v) -> SpeedInputs:
    """What the model needs from a candidate's runs, against the plain runs of the same prompts; `v`
    is the v(n) the survey predicts with (the machine's v_scale is taken against it)."""
    run, ar = joined(runs, method), joined(ar_runs, "ar")
    text = model.text_inputs(run)
    machine = model.machine_inputs(run, ar, v)
    n = max(len(run.cycles), 1)
    shapes: Counter = Counter()
    calls = [0.0] * max(text["levels"] + [0])
    for depths, full, levels in zip(text["sent"], text["full"], text["levels"]):
        shapes[(tuple(Counter(depths).get(d, 0) for d in range(1, max(depths, default=0) + 1)), full, levels)] += 1
        for d in range(levels):
            calls[d] += 1 / n
    budgets = [model.text_inputs(r).get("budget", 0) for r in runs]  # each prompt's run its own
    shape = {key: text[key] for key in ("level_nodes", "level_keep", "level_calls") if key in text}
    by_source: dict[str, list[float]] = {}
    for c in run.cycles:
        for node in c.nodes:
            if node is not None:
                row = by_source.setdefault(_source(node), [])
                row.extend([0.0] * (node.depth - len(row)))
                row[node.depth - 1] += 1 / n
    return SpeedInputs(acceptance=list(text["acceptance"]),
                       reach_by_sent_depth={int(d): list(r) for d, r in text["reach_by_sent_depth"].items()},
                       shapes=[Shape(list(nodes), full, levels, c) for (nodes, full, levels), c in shapes.items()],
                       nodes_by_source=by_source, calls_by_level=calls, **machine, **shape,
                       budget=round(sum(budgets) / len(budgets)) if budgets and all(budgets) else 0)


# -- derived: from an older survey's means ---------------------------------------------------------
def derived(m: Measured, pass_share: float) -> SpeedInputs:
    """The model's inputs from a survey of format /1 to /4 (the module docstring), its cycles rebuilt
    on at most DERIVED_CYCLES (each share then kept to 1/DERIVED_CYCLES; τ stays exact)."""
    k, cycles = m.k_max, min(max(int(m.cycles), 0), DERIVED_CYCLES)
    scale = cycles / m.cycles if m.cycles else 0.0
    sending = min(max(int(round(m.reached[0] * scale)), int(m.reached[0] > 0)), cycles) if m.reached else 0
    if m.nodes_at_depth:
        steps = zip(m.nodes_at_depth, [0.0] + list(m.nodes_at_depth[:-1]))
        totals = [max(int(round((a - b) * cycles)), 0) for a, b in steps]
    else:  # no nodes kept: every cycle that sent drafted a chain of K
        totals = [sending] * k
    counts, width = [], sending  # cycles with a node at depth d, and how many nodes each
    for t in totals:
        width = min(width, t)
        counts.append(width)
    cap = max(MAX_PASS // max(k, 1), 1)  # a hostile file's nodes: a pass holds at most MAX_PASS

    def nodes_of(i: int) -> list[int]:  # cycle i's nodes per depth: T_d over the cnt_d deepest, evenly
        return [min(t // c + (i < t % c), cap) for t, c in zip(totals, counts) if i < c]

    cuts = sorted({0, sending, *counts, *(t % c for t, c in zip(totals, counts) if c)})  # where a row changes
    shapes = []
    for a, b in zip(cuts, cuts[1:]):
        row = nodes_of(a)
        depth = len(row)
        shapes.append(Shape(row, depth >= k, depth if m.per_call else 0, b - a))
    if cycles > sending:
        shapes.append(Shape([], False, 0, cycles - sending))
    shapes = [s for s in shapes if s.cycles > 0]
    rates = [min(a * scale / c, 1.0) if c else 0.0 for a, c in zip(m.accepted, counts)]
    depths = {len(s.nodes) for s in shapes if s.nodes}
    acceptance = [min(a / r, 1.0) if r else 0.0 for a, r in zip(m.accepted, m.reached)][:measured_depth(m)]
    per = 1.0 / pass_share
    draft = m.c * per
    share = 1.0 / cycles if cycles else 0.0
    deepest = max(depths, default=0)  # the shape there: its nodes over the cycles that reached it
    at = {ALL: totals[deepest - 1] / counts[deepest - 1]} if deepest else {}
    return SpeedInputs(acceptance=acceptance, reach_by_sent_depth={d: rates[:d] for d in depths}, shapes=shapes,
                       nodes_by_source={ALL: [t * share for t in totals]},
                       calls_by_level=[c * share for c in counts] if m.per_call else [],
                       draft0=0.0 if m.per_call else draft, draft1=draft if m.per_call else 0.0,
                       over0=m.overhead * per, over1=0.0, ar_overhead=per - 1.0, v_scale=1.0,
                       level_nodes=at, level_calls=(1.0 if m.per_call else None) if deepest else None)


# -- read back: the model's Inputs ------------------------------------------------------------------
def _counts(shapes: list[Shape]) -> list[int]:
    """Each shape's repeats: its cycles over their common factor, scaled down to the model's budget."""
    counts = [max(int(s.cycles), 1) for s in shapes]
    common = math.gcd(*counts) if counts else 1
    counts = [c // common for c in counts]
    nodes = sum(c * sum(s.nodes) for c, s in zip(counts, shapes))
    scale = min(1.0, MODEL_CYCLES / max(sum(counts), 1), MODEL_NODES / max(nodes, 1))
    return counts if scale >= 1.0 else [max(int(round(c * scale)), 1) for c in counts]


def inputs(m: Measured, pass_share: float = 1.0) -> model.Inputs:
    """The model's Inputs for candidate `m`: what its survey kept, or derived from an older one's means."""
    rec = m.speed_inputs or derived(m, pass_share)
    sent, full, levels = [], [], []
    for shape, count in zip(rec.shapes, _counts(rec.shapes)):
        depths = [d for d, n in enumerate(shape.nodes, 1) for _ in range(n)]
        sent += [depths] * count
        full += [shape.full] * count
        levels += [shape.levels] * count
    return model.Inputs(acceptance=list(rec.acceptance), sent=sent, full=full, levels=levels,
                        reach_by_sent_depth={int(d): list(r) for d, r in rec.reach_by_sent_depth.items()},
                        draft0=rec.draft0, draft1=rec.draft1, over0=rec.over0, over1=rec.over1,
                        ar_overhead=rec.ar_overhead, v_scale=rec.v_scale, **shape_of(rec))


def shape_of(rec: SpeedInputs) -> dict:
    """The drafts' shape at the deepest depth and the run's budget, as the model's Inputs name them
    (those it has: SHAPE_FIELDS)."""
    return {name: getattr(rec, name) for name in SHAPE_FIELDS}


def measured_depth(m: Measured) -> int:
    """D: the deepest draft depth the survey judged for `m` (0: none); the model assumes past it."""
    return max((d for d, r in enumerate(m.reached, 1) if r > 0), default=0)
