"""Theory against measurement, in three parts, all in the words of decoding/speed.py.

1. Leviathan et al.'s predicted speedup, as the paper writes it (`speedup`, `best_k`):

       S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + v(K+1)))

   with α the acceptance rate, c a draft call in one-token target passes and v(n) a pass over n
   tokens (1 in the paper; here the target's cost profile, costs.profile, the planner's curve).
2. The waterfall (`waterfall`): from that S(K) at the run's α, K and c to the measured speedup,
   replacing one assumption a bar (the sizes sent, acceptance as measured, the run's verify cost,
   its drafting, its overhead). The last bar is τ · (1 + o_AR) / (D + V + o), which is the measured
   tokens/s ratio by construction, so a gap is always a named term.
3. The model of speed (`Inputs`, `predict_at`, `predict`): the cycles' expected tokens over their
   costs, from per-depth acceptance, the drafts the planner sent, and the machine's costs measured
   before the run; S for every fixed K and for "K auto". The Theory tab's curve, and
   scripts/bench/speed_model.py's check of it.

Pure arithmetic on traces and a cost profile; nothing here times a model. No UI libraries here.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable

from specviz.decoding import speed
from specviz.decoding.trace import RunTrace

K_RANGE = range(1, 17)  # the K axis of the curve: past 16 a small model's verify pass only grows
PassCost = Callable[[float], float]  # v(n), n = tokens in the pass, v(1) = 1: a costs.CostProfile


# -- the formula ---------------------------------------------------------------------------------
def expected_tokens(alpha: float, k: int) -> float:
    """(1 − α^(K+1)) / (1 − α), written as Σ_{i=0..K} α^i so that α = 1 needs no special case."""
    return sum(alpha ** i for i in range(k + 1))


def expected_tokens_by_depth(acceptance: list[float], k: int) -> float:
    """1 + Σ_{d=1..K} Π_{i≤d} a_i: tokens per cycle from per-depth acceptance (unseen depths add 0)."""
    total, path = 1.0, 1.0
    for a in acceptance[:k]:
        path *= a
        total += path
    return total


def speedup(alpha: float, k: int, c: float, v: float | Callable[[int], float]) -> float:
    """S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + v_K)), with v_K the cost of a verify pass of K drafts in
    plain steps: a number, or a function of K (`analyse` passes K ↦ v(K+1) of a cost profile)."""
    cost = k * c + (v(k) if callable(v) else v)
    return expected_tokens(alpha, k) / cost


TIE = 1e-9  # relative: S values this close are a plateau, not a preference


def best_k(curve: list[tuple[int, float]]) -> tuple[int, float]:
    """The (K, S) with the largest S; on a tie (a plateau) the smallest K, which risks less when α drops."""
    top = max(s for _, s in curve)
    return min((point for point in curve if point[1] >= top * (1 - TIE)), key=lambda point: point[0])


# -- costs read off the traces --------------------------------------------------------------------
def _spec_cycles(run: RunTrace):
    return [c for c in run.cycles if c.nodes]


def is_tree(run: RunTrace) -> bool:
    """True when some cycle drafted more tokens than its depth: siblings were verified together."""
    return any(len(c.nodes) > speed.draft_calls(c) for c in _spec_cycles(run))


def target_pass_s(ar: RunTrace) -> float:
    """Seconds of one plain target step in the AR run: its verify passes are one token each."""
    cycles = [c for c in ar.cycles if c.verify_s > 0]
    if not cycles:
        raise ValueError("The AR baseline has no decoding step to time: give it more than one new token.")
    return sum(c.verify_s for c in cycles) / len(cycles)


def draft_cost(run: RunTrace, ar: RunTrace) -> float:
    """c: the run's drafting seconds per draft call, over the AR run's seconds per target step."""
    return speed.draft_call_cost(run, target_pass_s(ar)) if _spec_cycles(run) else 0.0


def run_verify_factor(run: RunTrace, ar: RunTrace) -> float | None:
    """The run's own v: mean seconds of its verify passes over the AR run's seconds per step."""
    spec = _spec_cycles(run)
    if not spec:
        return None
    return sum(c.verify_s for c in spec) / len(spec) / target_pass_s(ar)


def nodes_up_to(run: RunTrace, depth: int) -> float:
    """Mean draft tokens per cycle at depth ≤ `depth` (the verify size if the tree stopped there)."""
    spec = _spec_cycles(run)
    if not spec:
        return 0.0
    counts = []
    for c in spec:
        recorded = [n.depth for n in c.nodes if n is not None]
        if recorded:
            counts.append(sum(d <= depth for d in recorded))
        else:  # no node depths kept: assume the tree's width is spread evenly over its depth
            calls = speed.draft_calls(c)
            counts.append(len(c.nodes) * min(depth, calls) / max(calls, 1))
    return sum(counts) / len(counts)


# -- from the paper to the measurement ----------------------------------------------------------------
MODEL_DRAFTS = ("draft", "head", "layerskip")  # drafting costs a call per depth: K·c; others cost D whatever K


@dataclass
class Bar:
    """One step of the waterfall: what it replaced, S after it, and one sentence saying by how much."""
    name: str
    value: float
    sentence: str


def _mean_depth(run: RunTrace) -> float:
    return sum(speed.draft_calls(c) if c.nodes else 0 for c in run.cycles) / max(len(run.cycles), 1)


def waterfall(run: RunTrace, ar: RunTrace) -> list[Bar]:
    """From Leviathan et al.'s S(K) at the run's α, K and c to the measured speedup, one replacement
    a bar. The last bar is τ · (1 + o_AR) / (D + V + o), which is the measured tokens/s ratio by
    construction (decoding/speed.py), so no gap is left to call noise."""
    m, cost = run.metrics or {}, speed.costs(run, ar)
    alpha = float(m.get("acceptance_rate") or speed.counts(run.cycles)["acceptance_rate"])
    k = int(run.settings.get("k") or max(c.k for c in run.cycles))
    e_k = expected_tokens(alpha, k)
    paper = e_k / (k * cost.c + 1)
    e_sent = sum(expected_tokens(alpha, speed.draft_calls(c) if c.nodes else 0) for c in run.cycles) / cost.cycles
    sent_share = sum(1 for c in run.cycles if c.nodes) / cost.cycles
    sized = e_sent / (k * cost.c + 1)
    accepted = cost.tau / (k * cost.c + 1)
    verified = cost.tau / (k * cost.c + cost.verify)
    drafted = cost.tau / (cost.draft + cost.verify)
    final = cost.tau * (1 + cost.ar_overhead) / (cost.draft + cost.verify + cost.overhead)
    depth = _mean_depth(run)
    bars = [
        Bar("paper S(K)", paper, f"Leviathan et al.'s S(K) = (1 − α^(K+1)) / ((1 − α)(K·c + 1)) at this run's "
            f"α = {alpha:.2f}, K = {k} and c = {cost.c:.3f}: every cycle drafts K tokens, a verify pass costs one "
            f"plain pass and nothing else takes time, so {e_k:.2f} tokens a cycle for {k * cost.c + 1:.2f} passes."),
        Bar("sizes sent", sized, f"The run's cycles went {depth:.1f} deep on average, not {k}, and "
            f"{1 - sent_share:.0%} sent nothing: at the same α a cycle commits {e_sent:.2f} tokens instead of "
            f"{e_k:.2f} ({_pct(sized, paper)})."),
        Bar("acceptance as measured", accepted, f"Acceptance was not one constant α at every depth: the cycles "
            f"committed τ = {cost.tau:.2f} tokens each, not {e_sent:.2f} ({_pct(accepted, sized)})."),
        Bar("verify cost v(n)", verified, f"A verify pass cost {cost.verify:.2f} one-token passes on average over "
            f"the sizes sent (the run's own v(n)), not 1 ({_pct(verified, accepted)})."),
        Bar("draft cost c", drafted, f"Drafting took {cost.draft:.2f} one-token passes a cycle, not "
            f"K·c = {k * cost.c:.2f} ({_pct(drafted, verified)})."),
        Bar("overhead", final, f"Each cycle also spent {cost.overhead:.2f} passes outside the model passes "
            f"(acceptance, sampling, rollback, bookkeeping), against {cost.ar_overhead:.2f} per plain token: "
            f"{final:.2f}×, the measured speedup ({_pct(final, drafted)}).{_concurrent(cost)}"),
    ]
    return bars


def _pct(after: float, before: float) -> str:
    if before <= 0:
        return "from nothing"
    change = after / before - 1
    return "no change" if abs(change) < 0.005 else f"{change:+.0%}"


def _concurrent(cost: speed.Costs) -> str:
    """Timings taken beside other runs: said only when the run's own counter shows them."""
    if not cost.concurrent:
        return ""
    return (f" {cost.concurrent} of its {cost.cycles} cycles ran beside other runs' cycles, so their times "
            "include waiting for the CPU: measure again alone to remove that.")


# -- a prediction made before the run -------------------------------------------------------------------
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


# -- the whole comparison ---------------------------------------------------------------------------
@dataclass
class Analysis:
    """One run set against the theory: its measured point, the predicted curve, the best K and the
    waterfall from the paper's S(K) to the measurement."""
    kind: str  # "chain" (S(K) as written) or "tree" (tokens per cycle from per-depth acceptance)
    method: str
    k: int  # the run's K (a tree's depth limit)
    alpha: float  # α, decoding/speed.py
    acceptance: list[float]  # α_d per depth, conditional
    expected_len: float  # expected accepted draft tokens per cycle at the run's K
    c: float
    v_k: float  # v(n) of the run's verify pass, n = its draft tokens + 1, from the cost profile
    v_run: float | None  # the same factor read off the run's own verify passes
    verify_tokens: float  # draft tokens per verify pass in the run (K for a chain)
    predicted: float  # the model's S for this run: at its K, or the planner's pick when it planned
    measured: float | None  # the run's tokens/s over the AR run's
    curve: list[tuple[int, float]] = field(default_factory=list)
    best: tuple[int, float] = (1, 0.0)
    tau: float | None = None  # τ, tokens committed per cycle
    planned: bool = False  # the run's planner chose what to send ("K auto")
    auto: tuple[int, float] | None = None  # the model's pick for K auto (0: plain steps)
    waterfall: list[dict] = field(default_factory=list)  # Bar as dicts: name, value, sentence
    concurrent: int = 0  # cycles timed beside other runs' cycles


def analyse(run: RunTrace, ar: RunTrace, v: PassCost, ks=K_RANGE) -> Analysis:
    """Measure α (or per-depth acceptance) and the costs from the traces, put the run on the model's
    curve, and walk the waterfall from the paper's S(K) to the measured speedup.

    `v` is the target's cost profile, v(n) for a pass over n tokens (costs.profile, or what
    planner.verify_cost gives): a verify pass of K drafts costs v(K+1), a tree's v(its nodes + 1).
    """
    if not _spec_cycles(run):
        raise ValueError("This run drafted nothing, so there is no α to measure: pick a run with a proposer, "
                         "or give it more new tokens so that the planner sends a draft.")
    m = run.metrics
    cost = speed.costs(run, ar)
    k = int(run.settings.get("k") or max(c.k for c in run.cycles))
    acceptance = list(m.get("acceptance_by_position") or [])
    alpha = float(m.get("acceptance_rate") or 0.0)
    x = inputs_of(run, ar)
    curve, auto = predict(x, v, ks)
    tree = is_tree(run)
    verify_tokens = nodes_up_to(run, k) if tree else float(k)
    expected = (expected_tokens_by_depth(acceptance, k) if tree else expected_tokens(alpha, k)) - 1
    planned = bool(run.settings.get("plan", False))
    predicted = auto[1] if planned else predict_at(x, v, k)  # without planning every offer was sent, cut at K
    return Analysis(kind="tree" if tree else "chain", method=run.method, k=k, alpha=alpha, acceptance=acceptance,
                    expected_len=expected, c=cost.c, v_k=v(verify_tokens + 1), v_run=run_verify_factor(run, ar),
                    verify_tokens=verify_tokens, predicted=predicted, measured=cost.speedup,
                    curve=curve, best=best_k(curve), tau=cost.tau, planned=planned, auto=auto,
                    waterfall=[dataclasses.asdict(b) for b in waterfall(run, ar)], concurrent=cost.concurrent)
