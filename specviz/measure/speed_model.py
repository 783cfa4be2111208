"""The model of speed: a prediction made before the run. The cycles' expected tokens over their costs,
from per-depth acceptance, the drafts the planner sent and the machine's costs measured before the
run (a calibration run); S for every fixed K and for "K auto". The Theory tab's curve, and
scripts/bench/speed_model.py's check of it.

Past the deepest depth D the run drafted to, nothing was measured: a draft grown there keeps the
shape its sources had at D (nodes and model calls a level), and `band` bounds the acceptance
assumed there, from none of the grown levels accepted to all of them.

Pure arithmetic on traces and a cost profile; nothing here times a model. No UI libraries here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from specviz.decoding import speed
from specviz.decoding.trace import RunTrace
from specviz.measure import rebuilt
from specviz.measure.theory import K_RANGE, PassCost, expected_tokens_by_depth
from specviz.proposers import REGISTRY, source_specs, spec
from specviz.proposers.method_spec import PER_CALL


def model_drafts(method: str) -> bool:
    """Whether the method's drafting costs a model call per depth (K·c, its spec's PER_CALL); the
    others cost a lookup a cycle whatever K, plus a call a level of any nodes a model drafted."""
    return method in REGISTRY and spec(method).paid == PER_CALL


def model_sources() -> tuple[str, ...]:
    """The source kinds a model drafts, a call a level (each spec's SourceSpec.by_model)."""
    return tuple(kind for kind, source in source_specs().items() if source.by_model)


@dataclass
class Inputs:
    """What the model of speed needs.

    About the text and the draft: per-depth acceptance α_d; the planner's policy as the drafts it sent
    (each cycle's node depths, [] for a cycle that sent nothing, and whether its draft filled its K);
    and reach_d among the cycles whose draft went D deep, per D (a long copied span is accepted
    whole more often than a short one, and a tree's path can stop at a leaf, so the product of one
    α_d curve mis-counts both; an empty map falls back to that product).

    About the draft's shape past the run's deepest depth D, where nothing was measured: a draft that
    filled its K and is grown deeper adds, a level, the nodes its sources sent at depth D (the head's
    beam, LogitSpec's branches that were still going, a chain's one; `level_nodes`, by source), each
    source's thinned level by level as it thinned over the depths measured (`level_keep`: branches
    that end, such as LogitSpec's shorter candidates), and the model calls that drafting them costs
    (`level_calls`). All empty: one node a level, and a call a level where a model drafted the draft
    to its end (a chain). And `budget`, the tokens the cycles made where the run stopped at its max
    new tokens: its last cycles draft only what is left.

    About a greedy retrieval draft kept uncut (measure/rebuilt.py), per cycle: the draft rebuilt at
    every K, its nodes there and its tokens the text agreed with (`rebuilt`, None where not kept);
    and the tokens each cycle made (`made`).

    About the machine, in one-token passes, measured before the run (a calibration run): a cycle's
    drafting, draft0 + draft1 · the levels a model drafted (a draft model or the head: draft0 = 0 and
    draft1 = c; retrieval alone: draft0, its lookup), its overhead, over0 + over1 · its nodes, a plain
    token's overhead o_AR, and how decoding's verify passes compare with the cost profile's: a pass priced
    at v(n) by the profile costs v0 + v_scale · v(n) (v0 = 0 unless fitted by size, `machine_inputs`)."""
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
    v0: float = 0.0
    level_nodes: dict[str, float] = field(default_factory=dict)  # source -> mean nodes at depth D
    level_keep: dict[str, float] = field(default_factory=dict)  # source -> its nodes a level over the last's (≤ 1)
    level_calls: float | None = None  # mean model calls at depth D (one per model source there)
    budget: int = 0  # the tokens the cycles made, where the run stopped at its max new tokens (0: on its own)
    rebuilt: list[dict[int, tuple[int, int]] | None] = field(default_factory=list)  # per cycle: K -> (nodes, agreed)
    made: list[int] = field(default_factory=list)  # per cycle: the tokens it committed


def measured_depth(x: Inputs) -> int:
    """D: the deepest depth a sent draft reached, or that reach_d was read to past it (drafts rebuilt at
    deeper Ks and held against the text, measure/rebuilt.py). Past it the curve is assumed, not measured."""
    sent = max((max(d, default=0) for d in x.sent), default=0)
    return max([sent, *(len(r) for r in x.reach_by_sent_depth.values())])


def grown(x: Inputs, levels: int, depth: int, k: int) -> tuple[float, float]:
    """(nodes, model calls) that a draft `depth` deep, `levels` of them model-drafted, adds when grown
    to depth k: its j-th level past its depth adds each source's nodes at D times its keep rate to
    the j, and the model calls at D; with no shape recorded, a chain's node and, where a model
    drafted it to its end, a call."""
    more = k - depth
    calls = x.level_calls if x.level_calls is not None else float(bool(levels) and levels >= depth)
    if not x.level_nodes:
        return float(more), calls * more
    nodes = sum(n * sum(x.level_keep.get(s, 1.0) ** j for j in range(1, more + 1)) for s, n in x.level_nodes.items())
    return nodes, calls * more


def _tokens(x: Inputs, drafted: int, depth: int, rate: float | None = None) -> float:
    """Expected tokens of a cycle whose draft went `drafted` deep, cut or grown to `depth`: 1 + Σ reach_d
    of its group (a depth past the group's takes the last reach times `rate` per level: the deepest
    α_d unless given; 0 and 1 bound every assumption)."""
    if rate is None:
        rate = x.acceptance[-1] if x.acceptance else 0.0
    reach = x.reach_by_sent_depth.get(drafted)
    if not reach:
        return expected_tokens_by_depth(x.acceptance + [rate] * max(depth - len(x.acceptance), 0), depth)
    past = [reach[-1] * rate ** j for j in range(1, depth - len(reach) + 1)]
    return 1.0 + sum((reach + past)[:depth])


def sent_at(depths: list[int], full: bool, levels: int, k: int, x: Inputs) -> tuple[int, float, float]:
    """(depth, nodes, model calls) of one cycle's draft cut at depth k, or, when it filled its K and k is
    deeper, grown to k (`grown`)."""
    kept = [d for d in depths if d <= k]
    depth = max(kept, default=0)
    nodes, calls = float(len(kept)), float(min(levels, depth))
    if full and depths and k > depth:
        more_nodes, more_calls = grown(x, levels, depth, k)
        nodes, calls, depth = nodes + more_nodes, calls + more_calls, k
    return depth, nodes, calls


def cycle_cost(x: Inputs, v: PassCost, nodes: float, calls: float = 0.0) -> float:
    """One cycle's cost in one-token passes: its drafting, a pass over its nodes and the newest token
    (v(1) = 1 when it sent nothing) and its overhead."""
    priced = v(nodes + 1) if nodes else 1.0
    return x.draft0 + x.draft1 * calls + x.v0 + x.v_scale * priced + x.over0 + x.over1 * nodes


def _cycle_at(x: Inputs, depths: list[int], full: bool, levels: int, k: int, v: PassCost,
              rate: float | None = None, table: dict[int, tuple[int, int]] | None = None) -> tuple[float, float]:
    """(expected tokens, cost) of one cycle whose draft is cut or grown to depth k (sent_at), priced by
    cycle_cost. A draft rebuilt at k (its `table`, measure/rebuilt.py) sends its rebuilt nodes and makes 1 + the
    tokens the text agreed with: measured, for a greedy retrieval draft."""
    if table is not None and (k in table or k == 0):
        nodes, agreed = table.get(k, (0, 0))
        return 1.0 + agreed, cycle_cost(x, v, nodes)
    depth, nodes, calls = sent_at(depths, full, levels, k, x)
    return _tokens(x, max(depths, default=0), depth, rate), cycle_cost(x, v, nodes, calls)


def predict_at(x: Inputs, v: PassCost, k: int | None, rate: float | None = None) -> float:
    """S with every cycle's draft cut or grown to depth k (None: as the planner sent it): the cycles'
    expected tokens over their costs, against a plain token's 1 + o_AR. `rate`: the acceptance a
    level assumed past what each group measured (default: the deepest α_d). A greedy retrieval run
    whose drafts were rebuilt at every K (rebuilt.walkable) is replayed along its text at k instead
    (rebuilt.walk): cycles of another K start at other places, and a long copy spans what took
    several shorter cycles."""
    sent = x.sent or [[]]
    full = x.full or [False] * len(sent)
    levels = x.levels or [0] * len(sent)
    tables = x.rebuilt or [None] * len(sent)

    def mean_at(depth: int | None) -> tuple[float, float]:
        cycles = [_cycle_at(x, depths, f, lv, max(depths, default=0) if depth is None else depth, v, rate,
                            None if depth is None else r)
                  for depths, f, lv, r in zip(sent, full, levels, tables)]
        return sum(t for t, _ in cycles) / len(cycles), sum(c for _, c in cycles) / len(cycles)

    if k is not None and rebuilt.walkable(x):
        tokens, cost = rebuilt.walk(x, lambda nodes: cycle_cost(x, v, nodes), k, rate)
    else:
        tokens, cost = mean_at(k) if k is None or not x.budget else _to_the_end(mean_at, k, x.budget)
    return tokens * (1 + x.ar_overhead) / cost


def _to_the_end(mean_at: Callable[[int], tuple[float, float]], k: int, budget: int) -> tuple[float, float]:
    """(tokens, cost) a cycle over a run whose cycles make `budget` tokens: the engine drafts at most
    the tokens left less one (decoding/engine.py), so the last cycles are cut short; followed in
    expectation, one mean cycle at a time."""
    at: dict[int, tuple[float, float]] = {}
    left, made, spent, n = float(budget), 0.0, 0.0, 0
    while left >= 1:
        depth = min(k, int(left) - 1)
        t, c = at[depth] if depth in at else at.setdefault(depth, mean_at(depth))
        made, spent, left, n = made + min(t, left), spent + c, left - t, n + 1
    return made / n, spent / n


def predict(x: Inputs, v: PassCost, ks=K_RANGE) -> tuple[list[tuple[int, float]], tuple[int, float]]:
    """(S for every fixed K, S as the planner sent: "K auto", with its deepest draft)."""
    return [(k, predict_at(x, v, k)) for k in ks], (measured_depth(x), predict_at(x, v, None))


def band(x: Inputs, v: PassCost, ks=K_RANGE) -> list[tuple[int, float, float]]:
    """(K, low, high) for every K past the measured depth D: S if no grown level is ever accepted, and
    if every one is where its path reached D (acceptance 0 and 1 past what was measured: any
    acceptance there gives an S between them, at the grown draft's cost)."""
    deepest = measured_depth(x)
    return [(k, predict_at(x, v, k, 0.0), predict_at(x, v, k, 1.0)) for k in ks if k > deepest]


def level_shape(run: RunTrace) -> dict:
    """The drafts' shape at the run's deepest depth D, over the cycles whose draft reached it: the mean
    nodes each source sent there; how each source's nodes thinned a level, the geometric mean from
    the first depth it sent at to D (1 where they did not thin: a beam, a chain); and the mean model
    calls that drafting them took (one a level for a model draft's run; else one per model source there)."""
    nodes = [[n for n in c.nodes if n is not None] for c in run.cycles]
    deepest = max((n.depth for ns in nodes for n in ns), default=0)
    reached = [ns for ns in nodes if any(n.depth == deepest for n in ns)]
    if not reached:
        return {}
    counts: dict[str, dict[int, int]] = {}  # source -> depth -> nodes, over the drafts that reached D
    for n in (n for ns in reached for n in ns):
        by_depth = counts.setdefault(str(n.source), {})
        by_depth[n.depth] = by_depth.get(n.depth, 0) + 1
    at_d = {s: c[deepest] for s, c in counts.items() if deepest in c}
    keep = {s: min(1.0, (at_d[s] / counts[s][min(counts[s])]) ** (1 / (deepest - min(counts[s]))))
            for s in at_d if min(counts[s]) < deepest}
    kinds = [{str(n.source) for n in ns if n.depth == deepest} for ns in reached]
    calls = [1 if model_drafts(run.method) else sum(any(s.startswith(m) for s in ks) for m in model_sources())
             for ks in kinds]
    return dict(level_nodes={s: c / len(reached) for s, c in at_d.items()}, level_keep=keep,
                level_calls=sum(calls) / len(reached))


def text_inputs(run: RunTrace) -> dict:
    """What a run says about its text and draft: α_d, each cycle's sent node depths, reach_d by how
    deep a cycle's draft went, and the drafts' shape at the deepest depth (level_shape)."""
    made = sum(len(c.committed) for c in run.cycles)  # the prefill made one more
    at_max = made + 1 >= int((run.settings or {}).get("max_new_tokens") or made + 2)
    groups: dict[int, list] = {}
    for c in run.cycles:
        if c.nodes:
            groups.setdefault(speed.draft_calls(c), []).append(c)
    tables = rebuilt.rebuilt(run)
    by_cycle = {id(c): t for c, t in zip(run.cycles, tables)}
    return dict(acceptance=list((run.metrics or {}).get("acceptance_by_position")
                                or speed.by_depth(run.cycles)[0]),
                sent=[[n.depth for n in c.nodes if n is not None] or [1] * len(c.nodes) for c in run.cycles],
                full=[bool(c.nodes) and speed.draft_calls(c) >= c.k for c in run.cycles],
                levels=[(speed.draft_calls(c) if c.nodes else 0) if model_drafts(run.method) else model_levels(c)
                        for c in run.cycles],
                reach_by_sent_depth={d: rebuilt.reach(cs, by_cycle) or speed.by_depth(cs)[1]
                                     for d, cs in groups.items()},
                budget=made if at_max else 0,
                rebuilt=tables, made=[len(c.committed) for c in run.cycles],
                **level_shape(run))


def model_levels(cycle) -> int:
    """Levels of the cycle's sent draft that a model drafted (the hybrid's head), each a draft call."""
    return max((n.depth for n in cycle.nodes if n is not None and str(n.source).startswith(model_sources())),
               default=0)


def _line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(a, b) of the least-squares line y = a + b·x (b = 0 when every x is the same)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - b * mx, b


BY_SIZE_MIN = 3  # distinct pass sizes a run needs before its passes are fitted by size (by_size)


def machine_inputs(run: RunTrace, ar: RunTrace, v: PassCost | None = None, by_size: bool = False) -> dict:
    """What a run and its baseline say about the machine, in one-token passes, fitted over its cycles:
    drafting against depth (through 0 for a model draft: c a call), overhead against nodes sent, the
    AR baseline's overhead, and with `v` (the cost profile) how the run's verify passes compare with
    the profile's (timed at one context length; decoding runs at others). Measured once, on a
    calibration run, they predict other runs of the same method.

    The passes compare as one ratio, v_scale (v0 = 0); with `by_size`, where the run's passes had at
    least BY_SIZE_MIN sizes, as a line over its cycles, measured = v0 + v_scale · v(n), so passes of
    other sizes than the run's are priced by how the run's own grew with size. (Under test: the
    checks compare both, scripts/bench/speed_model.py.)"""
    cost = speed.costs(run, ar)
    unit = cost.unit_s
    drafts = [c.draft_s / unit for c in run.cycles]
    if model_drafts(run.method):  # a call a level: c, through the origin
        draft0, draft1 = 0.0, cost.c
    else:  # a lookup every cycle, plus a call a level of any model-drafted nodes (the hybrid's head)
        draft0, draft1 = _line([float(model_levels(c)) for c in run.cycles], drafts)
    decode_s = speed.decode_s(run)
    rest = decode_s - sum(c.draft_s + c.verify_s for c in run.cycles)  # the overhead, as costs() counts it
    others = [c.other_s for c in run.cycles]
    total = sum(others)
    overheads = [o / unit * (rest / total if total > 0 else 1.0) for o in others]
    over0, over1 = _line([float(len(c.nodes)) for c in run.cycles], overheads)
    scale, v0 = 1.0, 0.0
    if v is not None:
        sizes = [v(len(c.nodes) + 1) if c.nodes else 1.0 for c in run.cycles]
        priced = sum(sizes) / len(sizes)
        scale = cost.verify / priced if priced > 0 else 1.0
        if by_size and len({len(c.nodes) for c in run.cycles}) >= BY_SIZE_MIN:
            passes = [c.verify_s / unit for c in run.cycles]
            v0, slope = _line(sizes, passes)
            if slope > 0:
                scale = slope
            else:  # a flat or falling line says nothing of size: keep the ratio
                v0 = 0.0
    fitted = dict(draft0=draft0, draft1=draft1, over0=over0, over1=over1, ar_overhead=cost.ar_overhead, v_scale=scale)
    return {**fitted, "v0": v0} if by_size else fitted  # v0 only where asked: a survey keeps no v0


def inputs_of(run: RunTrace, ar: RunTrace, machine: dict | None = None) -> Inputs:
    """The model's inputs: the text's from `run`, the machine's from `machine` (a calibration's
    machine_inputs) or, without one, from the run itself."""
    return Inputs(**text_inputs(run), **(machine or machine_inputs(run, ar)))

