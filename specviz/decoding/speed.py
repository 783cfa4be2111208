"""The vocabulary of speed: every quantity SpecViz reports about how fast a run went, defined once.

Every view, export, CLI line and recorded asset names these with `label(name)` and reads them from a
run's metrics (trace.summarize, which calls the counters here) or from `costs`; docs/GLOSSARY.md
repeats the definitions, and tests/decoding/test_speed.py holds the page's labels to them.

How a cycle is counted. The target judges a draft depth by depth along one path. The path is
*judged at depth d* when it reached depth d − 1 and its node there has at least one child that was
sent; it is *accepted at depth d* when one of those children is accepted (a tree's siblings are tried
in turn, so a rejection at depth d means all of them failed). A chain is a tree with one child a node.

- α_d, acceptance at depth d (conditional): accepted at d ÷ judged at d, i.e. P(the accepted path
  reaches depth d | it reached d − 1 with a child to judge).
- α, acceptance rate: Σ accepted ÷ Σ judged over all depths. For a chain this is Leviathan et al.'s
  accepted ÷ judged draft tokens; for a tree it counts depths on the path, never the siblings beside it.
- reach_d, acceptance at depth d (marginal): cycles whose accepted path reached depth d ÷ all cycles,
  so that τ = 1 + Σ_d reach_d exactly.
- τ, mean acceptance length: tokens committed ÷ cycles, the bonus or resampled token included, and
  cycles that sent nothing included (each commits one token). vLLM calls it the mean acceptance length.
- sent: draft tokens sent to the target per cycle; sent share: cycles that sent any ÷ cycles.
- the unit of cost, one-token pass: the AR baseline's verify seconds per token it committed.
- c, draft call cost: drafting seconds per draft call (a drafted depth level) in one-token passes,
  over the cycles that sent a draft.
- v(n): a target pass over n tokens in one-token passes; the run's own is its verify seconds per cycle.
- o, overhead per cycle: a cycle's seconds outside drafting and verifying (acceptance, sampling,
  rollback, bookkeeping) in one-token passes; o_AR is the same for the AR baseline's cycles.

With those, the measured speedup is exactly τ · (1 + o_AR) / (D + V + o), D and V being the run's
drafting and verify seconds per cycle in one-token passes (measure/waterfall.py).
Pure arithmetic on traces; nothing here times a model.
"""
from __future__ import annotations

from dataclasses import dataclass

# Cycles and runs are decoding/trace.py's CycleTrace and RunTrace; trace.summarize imports this module,
# so this one names them only in words (no import cycle, not even for type checking).


@dataclass(frozen=True)
class Term:
    """One quantity: its symbol, its name, the metrics key it is kept under (None: computed from two
    runs in `costs`), and its definition in one sentence."""
    symbol: str
    name: str
    key: str | None
    means: str

    @property
    def label(self) -> str:
        return f"{self.symbol} ({self.name})" if self.symbol else self.name


TERMS: dict[str, Term] = {t.key or t.symbol: t for t in (
    Term("α", "acceptance rate", "acceptance_rate",
         "accepted ÷ judged draft depths along the accepted path; for a chain, accepted ÷ judged tokens"),
    Term("α_d", "acceptance at depth d, conditional", "acceptance_by_position",
         "accepted ÷ judged at depth d: P(the path reaches depth d, given it reached d − 1 with a child to judge)"),
    Term("reach_d", "acceptance at depth d, marginal", "reach_by_position",
         "cycles whose accepted path reached depth d ÷ all cycles, so τ = 1 + Σ_d reach_d"),
    Term("τ", "mean acceptance length", "mean_accepted_tokens",
         "tokens committed per cycle, the bonus or resampled token and cycles that sent nothing included"),
    Term("", "drafted tokens sent per cycle", "sent_per_cycle",
         "draft tokens sent to the target's verify pass, per cycle, cycles that sent nothing included"),
    Term("", "cycles that sent a draft", "cycles_sent_share",
         "cycles whose verify pass held at least one draft token ÷ cycles"),
    Term("c", "draft call cost", None,
         "drafting seconds per draft call (a drafted depth level), in one-token target passes"),
    Term("v(n)", "verify cost", None, "a target pass over n tokens, in one-token target passes"),
    Term("o", "overhead per cycle", None,
         "a cycle's seconds outside drafting and verifying, in one-token target passes"),
)}


def label(key: str) -> str:
    """The one label every view gives the quantity kept under `key` (a metrics key or a symbol)."""
    return TERMS[key].label


# -- counting along the accepted path -------------------------------------------------------------------
def judged_depths(cycle) -> tuple[int, int]:
    """(accepted, judged) depths of one cycle's path: each accepted depth was judged, and a rejection
    ends the path at one more judged depth."""
    accepted = cycle.n_accepted
    return accepted, accepted + (cycle.rejected is not None)


def by_depth(cycles: list) -> tuple[list[float], list[float]]:
    """(α_d conditional, reach_d marginal) for d = 1, 2, … up to the deepest judged depth."""
    spec = [c for c in cycles if c.nodes]  # a cycle that sent nothing judged nothing
    accepted: dict[int, int] = {}
    judged: dict[int, int] = {}
    for c in spec:
        n_acc, n_judged = judged_depths(c)
        for d in range(1, n_judged + 1):
            judged[d] = judged.get(d, 0) + 1
            accepted[d] = accepted.get(d, 0) + (d <= n_acc)
    depths = sorted(judged)
    return ([accepted[d] / judged[d] for d in depths], [accepted[d] / len(cycles) for d in depths])


def counts(cycles: list) -> dict[str, float]:
    """α, τ, the by-depth curves, what was sent: the metrics the vocabulary keeps, from cycles alone."""
    spec = [c for c in cycles if c.nodes]
    accepted = sum(judged_depths(c)[0] for c in spec)
    judged = sum(judged_depths(c)[1] for c in spec)
    conditional, marginal = by_depth(cycles)
    n = len(cycles)
    return {
        "acceptance_rate": accepted / judged if judged else 0.0,
        "acceptance_by_position": conditional,
        "reach_by_position": marginal,
        "mean_accepted_tokens": sum(len(c.committed) for c in cycles) / n if n else 0.0,
        "sent_per_cycle": sum(c.drafted for c in cycles) / n if n else 0.0,
        "cycles_sent_share": len(spec) / n if n else 0.0,
    }


# -- costs, in one-token target passes --------------------------------------------------------------------
class SpeedInputError(ValueError):
    """A run or baseline that cannot be put on the model of speed; the message says what to do."""


def unit_s(ar) -> float:
    """Seconds of one one-token target pass: the AR baseline's verify seconds per token it committed."""
    tokens = sum(len(c.committed) for c in ar.cycles)
    seconds = sum(c.verify_s for c in ar.cycles)
    if tokens < 1 or seconds <= 0:
        raise SpeedInputError("The AR baseline has no timed decoding step (one new token is all prefill): "
                              "measure it with at least two new tokens.")
    return seconds / tokens


def draft_calls(cycle) -> int:
    """Draft calls that made a cycle's sent draft: its deepest node (K when depths were not kept)."""
    depths = [n.depth for n in cycle.nodes if n is not None]
    return max(depths) if depths else min(cycle.k, len(cycle.nodes))


def draft_call_cost(run, unit: float) -> float:
    """c: drafting seconds per draft call over the cycles that sent a draft, in units of `unit` seconds."""
    spec = [c for c in run.cycles if c.nodes]
    calls = sum(draft_calls(c) for c in spec)
    return sum(c.draft_s for c in spec) / calls / unit if calls else 0.0


@dataclass
class Costs:
    """A run's costs per cycle against its AR baseline, all in one-token passes (the unit, `unit_s`)."""
    unit_s: float  # seconds of a one-token pass
    cycles: int
    draft: float  # D: drafting per cycle, every cycle included
    verify: float  # V: verify per cycle (the run's own mean v over the sizes it sent)
    overhead: float  # o: the rest of a cycle
    ar_overhead: float  # o_AR: the rest of an AR cycle, per token
    c: float  # drafting per draft call, over the cycles that sent a draft
    tau: float
    speedup: float  # the run's tokens/s over the baseline's, as the timing panel shows it
    concurrent: int  # cycles of the run timed beside other runs' cycles (cycles_concurrent)


def decode_s(run) -> float:
    """Seconds in cycles: the metrics' decode_s when kept, else the cycles' own split."""
    kept = (run.metrics or {}).get("decode_s")
    if isinstance(kept, (int, float)) and kept > 0:
        return float(kept)
    return sum(c.draft_s + c.verify_s + c.other_s for c in run.cycles)


def costs(run, ar) -> Costs:
    """Read D, V, o, c, τ and the measured speedup off a run and its AR baseline."""
    if not run.cycles:
        raise SpeedInputError("This run has no cycles yet: press Step or Run, then explain it.")
    unit = unit_s(ar)
    seconds = decode_s(run)
    if seconds <= 0:
        raise SpeedInputError("This trace has no timings (an old export, or a run made with timing off): "
                              "decode it again here to measure it.")
    n = len(run.cycles)
    draft_s = sum(c.draft_s for c in run.cycles)
    verify_s = sum(c.verify_s for c in run.cycles)
    ar_tokens = sum(len(c.committed) for c in ar.cycles)
    ar_decode = decode_s(ar)
    tau = sum(len(c.committed) for c in run.cycles) / n
    ar_verify = sum(c.verify_s for c in ar.cycles)
    return Costs(unit_s=unit, cycles=n, draft=draft_s / n / unit, verify=verify_s / n / unit,
                 overhead=(seconds - draft_s - verify_s) / n / unit,  # not clamped: the identity stays exact
                 ar_overhead=(ar_decode - ar_verify) / ar_verify,
                 c=draft_call_cost(run, unit), tau=tau,
                 speedup=(tau * n / seconds) / (ar_tokens / ar_decode),
                 concurrent=sum(1 for c in run.cycles if c.concurrent > 0))
