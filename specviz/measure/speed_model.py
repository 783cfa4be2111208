"""The model of speed: a prediction made before the run. The cycles' expected tokens over their costs,
from per-depth acceptance, the drafts the planner sent and the machine's costs measured before the
run (a calibration run); S for every fixed K and for "K auto". The Theory tab's curve, and
scripts/bench/speed_model.py's check of it.

Pure arithmetic on traces and a cost profile; nothing here times a model. No UI libraries here.
"""
from __future__ import annotations

from dataclasses import dataclass

from specviz.decoding import speed
from specviz.decoding.trace import RunTrace
from specviz.measure.theory import K_RANGE, PassCost, expected_tokens_by_depth

MODEL_DRAFTS = ("draft", "head", "layerskip")  # drafting costs a call per depth: K·c; others cost D whatever K


@dataclass
class Inputs:
    """What the model of speed needs.

    About the text and the draft: per-depth acceptance α_d; the planner's policy as the drafts it sent
    (each cycle's node depths, [] for a cycle that sent nothing, and whether its draft filled its K);
    and reach_d among the cycles whose draft went D deep, per D (a long copied span is accepted
    whole more often than a short one, and a tree's path can stop at a leaf, so the product of one
    α_d curve mis-counts both; an empty map falls back to that product).

    About the machine, in one-token passes, measured before the run (a calibration run): a cycle's
    drafting, draft0 + draft1 · the levels a model drafted (a draft model or the head: draft0 = 0 and
    draft1 = c; retrieval alone: draft0, its lookup), its overhead, over0 + over1 · its nodes, a plain
    token's overhead o_AR, and how decoding's verify passes compare with the cost profile's (v_scale)."""
    acceptance: list[float]
    sent: list[list[int]]
    full: list[bool]
    levels: list[int]  # per cycle: levels a model drafted (draft calls), 0 for retrieval alone
    reach_by_sent_depth: dict[int, list[float]]
    draft0: float
    draft1: float
    over0: float
    over1: float
    ar_overhead: float
    v_scale: float = 1.0


def _tokens(x: Inputs, drafted: int, depth: int) -> float:
    """Expected tokens of a cycle whose draft went `drafted` deep, cut or grown to `depth`: 1 + Σ reach_d
    of its group (a depth past the group's takes the last reach times the deepest α_d per level)."""
    reach = x.reach_by_sent_depth.get(drafted)
    if not reach:
        acceptance = x.acceptance + x.acceptance[-1:] * max(depth - len(x.acceptance), 0)
        return expected_tokens_by_depth(acceptance, depth)
    rate = x.acceptance[-1] if x.acceptance else 0.0
    grown = [reach[-1] * rate ** j for j in range(1, depth - len(reach) + 1)]
    return 1.0 + sum((reach + grown)[:depth])


def _cycle_at(x: Inputs, depths: list[int], full: bool, levels: int, k: int, v: PassCost) -> tuple[float, float]:
    """(expected tokens, cost) of one cycle whose draft is cut at depth k, or, when it filled its K and
    k is deeper, grown one node a level to k: its drafting, a pass over its nodes and the newest token
    (v(1) = 1 when it sent nothing) and its overhead."""
    kept = [d for d in depths if d <= k]
    depth = max(kept, default=0)
    if full and depths and k > depth:
        kept, depth = kept + list(range(depth + 1, k + 1)), k
        levels = k if levels else 0  # a model's chain grows a call a level
    cost = (x.draft0 + x.draft1 * min(levels, depth) + x.v_scale * (v(len(kept) + 1) if kept else 1.0)
            + x.over0 + x.over1 * len(kept))
    return _tokens(x, max(depths, default=0), depth), cost


def predict_at(x: Inputs, v: PassCost, k: int | None) -> float:
    """S with every cycle's draft cut at depth k (None: as the planner sent it): the cycles' expected
    tokens over their costs, against a plain token's 1 + o_AR."""
    sent = x.sent or [[]]
    full = x.full or [False] * len(sent)
    levels = x.levels or [0] * len(sent)
    cycles = [_cycle_at(x, depths, f, lv, max(depths, default=0) if k is None else k, v)
              for depths, f, lv in zip(sent, full, levels)]
    tokens = sum(t for t, _ in cycles) / len(cycles)
    cost = sum(c for _, c in cycles) / len(cycles)
    return tokens * (1 + x.ar_overhead) / cost


def predict(x: Inputs, v: PassCost, ks=K_RANGE) -> tuple[list[tuple[int, float]], tuple[int, float]]:
    """(S for every fixed K, S as the planner sent: "K auto", with its deepest draft)."""
    deepest = max((max(d, default=0) for d in x.sent), default=0)
    return [(k, predict_at(x, v, k)) for k in ks], (deepest, predict_at(x, v, None))


def text_inputs(run: RunTrace) -> dict:
    """What a run says about its text and draft: α_d, each cycle's sent node depths, and reach_d by how
    deep a cycle's draft went."""
    groups: dict[int, list] = {}
    for c in run.cycles:
        if c.nodes:
            groups.setdefault(speed.draft_calls(c), []).append(c)
    return dict(acceptance=list((run.metrics or {}).get("acceptance_by_position")
                                or speed.by_depth(run.cycles)[0]),
                sent=[[n.depth for n in c.nodes if n is not None] or [1] * len(c.nodes) for c in run.cycles],
                full=[bool(c.nodes) and speed.draft_calls(c) >= c.k for c in run.cycles],
                levels=[(speed.draft_calls(c) if c.nodes else 0) if run.method in MODEL_DRAFTS else model_levels(c)
                        for c in run.cycles],
                reach_by_sent_depth={d: speed.by_depth(cs)[1] for d, cs in groups.items()})


MODEL_SOURCES = ("head", "draft", "layerskip")  # nodes a model drafted, a call a level (drafting/tree.SourceKind)


def model_levels(cycle) -> int:
    """Levels of the cycle's sent draft that a model drafted (the hybrid's head), each a draft call."""
    return max((n.depth for n in cycle.nodes if n is not None and str(n.source).startswith(MODEL_SOURCES)),
               default=0)


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(a, b) of the least-squares line y = a + b·x (b = 0 when every x is the same)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


def machine_inputs(run: RunTrace, ar: RunTrace, v: PassCost | None = None) -> dict:
    """What a run and its baseline say about the machine, in one-token passes, fitted over its cycles:
    drafting against depth (through 0 for a model draft: c a call), overhead against nodes sent, the
    AR baseline's overhead, and with `v` (the cost profile) how the run's verify passes compare with
    the profile's (timed at one context length; decoding runs at others). Measured once, on a
    calibration run, they predict other runs of the same method."""
    cost = speed.costs(run, ar)
    unit = cost.unit_s
    drafts = [c.draft_s / unit for c in run.cycles]
    if run.method in MODEL_DRAFTS:  # a call a level: c, through the origin
        draft0, draft1 = 0.0, cost.c
    else:  # a lookup every cycle, plus a call a level of any model-drafted nodes (the hybrid's head)
        draft0, draft1 = _line([float(model_levels(c)) for c in run.cycles], drafts)
    decode_s = speed.decode_s(run)
    rest = decode_s - sum(c.draft_s + c.verify_s for c in run.cycles)  # the overhead, as costs() counts it
    others = [c.other_s for c in run.cycles]
    total = sum(others)
    overheads = [o / unit * (rest / total if total > 0 else 1.0) for o in others]
    over0, over1 = _line([float(len(c.nodes)) for c in run.cycles], overheads)
    scale = 1.0
    if v is not None:
        priced = sum(v(len(c.nodes) + 1) if c.nodes else 1.0 for c in run.cycles) / len(run.cycles)
        scale = cost.verify / priced if priced > 0 else 1.0
    return dict(draft0=draft0, draft1=draft1, over0=over0, over1=over1, ar_overhead=cost.ar_overhead, v_scale=scale)


def inputs_of(run: RunTrace, ar: RunTrace, machine: dict | None = None) -> Inputs:
    """The model's inputs: the text's from `run`, the machine's from `machine` (a calibration's
    machine_inputs) or, without one, from the run itself."""
    return Inputs(**text_inputs(run), **(machine or machine_inputs(run, ar)))

