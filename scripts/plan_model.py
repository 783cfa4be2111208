"""Planner variants priced without a clock: greedy runs of the public prompts on the bundled model,
each cycle priced with the target's cost profile, v(sent + 1) plus the head's steps at its measured
step cost, so two planner rules can be told apart without the machine's noise (issue 25 §4).

    .venv/bin/python scripts/plan_model.py pld,hybrid "DECAY=0.85,DECAY=0.7"

A method may carry knobs as `:name=value` (integers), as in `bench`'s variants. A variant sets
planner module constants (`NAME=value`, floats, several joined by `;`). For each method it prints,
per variant, the cycles, tokens and tokens per priced cost of every prompt, then the geometric
mean over prompts of tokens per priced cost against the first variant's, and how many outputs
are identical to the first variant's.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.decoding import planner  # noqa: E402
from specviz.decoding.engine import generate  # noqa: E402
from specviz.models import costs  # noqa: E402
from specviz.models.loader import load  # noqa: E402
from specviz.proposers.head import HeadProposer  # noqa: E402

PROMPTS = ROOT.parent / "shared" / "bench" / "prompts.json"
REST = 0.03  # a cycle's own work outside pass and drafting, in steps (where_time_goes.py's "rest")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    target = load("bundled")
    prof = costs.profile(target)
    prompts = json.loads(PROMPTS.read_text(encoding="utf-8"))
    steps: list[int] = []
    real_propose = HeadProposer.propose

    def counted(self, ctx):
        steps.append(ctx.k)
        return real_propose(self, ctx)

    HeadProposer.propose = counted
    variants = [dict((k, float(v)) for k, v in (kv.split("=", 1) for kv in var.split(";") if kv))
                for var in argv[1].split(",")]
    unknown = sorted({k for var in variants for k in var if not hasattr(planner, k)})
    if unknown:
        print(f"planner.py has no constant {', '.join(unknown)}", file=sys.stderr)
        return 2
    defaults = {k: getattr(planner, k) for var in variants for k in var}
    c = HeadProposer.build(target).step_cost
    for method in argv[0].split(","):
        name, *pairs = method.split(":")
        knobs = {k: int(v) for k, v in (kv.split("=", 1) for kv in pairs)}
        rates: list[list[float]] = []
        outs: list[list] = []
        for var in variants:
            for k, v in {**defaults, **var}.items():
                setattr(planner, k, v)
            rate, out, rows = [], [], []
            for p in prompts:
                ids = target.encode(p["prompt"], chat=True)
                steps.clear()
                run = generate(target, ids, method=name, max_new_tokens=96, chat=False, record=False, **knobs)
                cost = sum(prof(c_.drafted + 1) + REST for c_ in run.cycles) + c * sum(steps)
                rate.append(len(run.token_ids) / cost)
                out.append(run.token_ids)
                rows.append(f"{p['id']} {len(run.cycles)}c/{len(run.token_ids)}t {rate[-1]:.2f}")
            rates.append(rate)
            outs.append(out)
            print(f"{method} {var}: " + " ".join(rows), flush=True)
        for var, rate, out in zip(variants, rates, outs):
            g = math.exp(sum(math.log(a / b) for a, b in zip(rate, rates[0])) / len(rate))
            same = sum(o == r for o, r in zip(out, outs[0]))
            print(f"{method} {var}: {g:.3f}x the first variant, {same}/{len(out)} outputs identical", flush=True)
    for k, v in defaults.items():
        setattr(planner, k, v)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
