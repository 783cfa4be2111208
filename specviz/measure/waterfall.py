"""From the paper to the measurement: the waterfall from Leviathan et al.'s S(K) (measure/theory.py) to
a run's measured speedup, replacing one assumption a bar (the sizes sent, acceptance as measured,
the run's verify cost, its drafting, its overhead). The last bar is τ · (1 + o_AR) / (D + V + o),
which is the measured tokens/s ratio by construction (decoding/speed.py), so a gap is always a
named term. `analyse` puts a run against the theory: its measured point, the model of speed's
curve (measure/speed_model.py) and the waterfall, as the Theory tab draws them.

Pure arithmetic on traces and a cost profile; nothing here times a model. No UI libraries here.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from specviz.decoding import speed
from specviz.decoding.trace import RunTrace
from specviz.measure import theory
from specviz.measure.speed_model import band, inputs_of, measured_depth, predict, predict_at


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
    e_k = theory.expected_tokens(alpha, k)
    paper = e_k / (k * cost.c + 1)
    sent_depths = [speed.draft_calls(c) if c.nodes else 0 for c in run.cycles]
    e_sent = sum(theory.expected_tokens(alpha, d) for d in sent_depths) / cost.cycles
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
    measured_depth: int = 0  # D, the deepest depth the run drafted to: the curve past it is assumed (0: unknown)
    band: list[tuple[int, float, float]] = field(default_factory=list)  # (K, low, high) past D (speed_model.band)


def analyse(run: RunTrace, ar: RunTrace, v: theory.PassCost, ks=theory.K_RANGE) -> Analysis:
    """Measure α (or per-depth acceptance) and the costs from the traces, put the run on the model's
    curve, and walk the waterfall from the paper's S(K) to the measured speedup.

    `v` is the target's cost profile, v(n) for a pass over n tokens (costs.profile, or what
    planner.verify_cost gives): a verify pass of K drafts costs v(K+1), a tree's v(its nodes + 1).
    """
    if not theory.spec_cycles(run):
        raise ValueError("This run drafted nothing, so there is no α to measure: pick a run with a proposer, "
                         "or give it more new tokens so that the planner sends a draft.")
    m = run.metrics
    cost = speed.costs(run, ar)
    k = int(run.settings.get("k") or max(c.k for c in run.cycles))
    acceptance = list(m.get("acceptance_by_position") or [])
    alpha = float(m.get("acceptance_rate") or 0.0)
    x = inputs_of(run, ar)
    curve, auto = predict(x, v, ks)
    tree = theory.is_tree(run)
    verify_tokens = theory.nodes_up_to(run, k) if tree else float(k)
    expected = (theory.expected_tokens_by_depth(acceptance, k) if tree else theory.expected_tokens(alpha, k)) - 1
    planned = bool(run.settings.get("plan", False))
    predicted = auto[1] if planned else predict_at(x, v, k)  # without planning every offer was sent, cut at K
    return Analysis(kind="tree" if tree else "chain", method=run.method, k=k, alpha=alpha, acceptance=acceptance,
                    expected_len=expected, c=cost.c, v_k=v(verify_tokens + 1), v_run=theory.run_verify_factor(run, ar),
                    verify_tokens=verify_tokens, predicted=predicted, measured=cost.speedup,
                    curve=curve, best=theory.best_k(curve), tau=cost.tau, planned=planned, auto=auto,
                    waterfall=[dataclasses.asdict(b) for b in waterfall(run, ar)], concurrent=cost.concurrent,
                    measured_depth=measured_depth(x), band=band(x, v, ks))
