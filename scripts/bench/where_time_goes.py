"""Where a bench run's time goes, per variant, in units of one plain decoding step (issue 25's "why").

Reads a `python -m specviz bench` bench.json that has our AR among its variants (`ar` or
`ar:norecord`) and, for each of our variants, sums over the prompts:
- tokens per cycle (T): new tokens over verify cycles;
- what a cycle costs, split into the verify pass, drafting and the rest of the cycle (planning,
  acceptance, rollback, recording), each over one AR step (our AR's verify time per token on the
  same prompts, in the same run);
- the time outside cycles (the prefill and setting the run up) as a share of the wall clock.

From these: the cycle-level speedup T / (pass + draft + rest), which is what speculative decoding
can give over our AR before the prefill is counted, next to the measured speedup over HF plain;
and the tokens per cycle the run would have needed for a given speedup over HF plain at the same
per-cycle costs (the measured speedup scaled up in proportion to T: a lower bound, since longer
accepted runs need deeper trees, which cost more).

    .venv/bin/python scripts/bench/where_time_goes.py docs/bench/2026-12-01-final/bench.json [--goal 2.4]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def totals(results: dict, variant: str) -> dict:
    keys = ("wall_s", "draft_s", "verify_s", "other_s", "cycles", "new_tokens")
    return {k: sum(r[variant][k] for r in results.values()) for k in keys}


def breakdown(bench: dict, goal: float) -> list[dict]:
    results, summary = bench["results"], bench["summary"]
    ar = next(v for v in ("ar:norecord", "ar") if v in bench["variants"])
    base = totals(results, ar)
    step = base["verify_s"] / base["cycles"]  # one plain step: our AR's pass per token
    rows = []
    for v in bench["variants"]:
        if v.startswith("hf") or v == "vllm":
            continue
        t = totals(results, v)
        tpc = t["new_tokens"] / t["cycles"]
        per = {k: t[f"{k}_s"] / t["cycles"] / step for k in ("verify", "draft", "other")}
        cycle_speedup = tpc / sum(per.values())
        measured = summary[v].get("speedup_vs_hf")
        rows.append(dict(variant=v, tokens_per_cycle=tpc, pass_cost=per["verify"], draft_cost=per["draft"],
                         other_cost=per["other"],
                         outside_share=1 - (t["draft_s"] + t["verify_s"] + t["other_s"]) / t["wall_s"],
                         cycle_speedup=cycle_speedup, vs_hf=measured, vs_hf_pld=summary[v].get("speedup_vs_hf_pld"),
                         needed_tokens_per_cycle=None if not measured else tpc * goal / measured))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench")
    ap.add_argument("--goal", type=float, default=2.4, help="a speedup over HF plain to price in tokens per cycle")
    args = ap.parse_args()
    bench = json.loads(Path(args.bench).read_text())
    print(f"{args.bench}: {bench['machine']['date']}, {bench['machine']['cpu']}, "
          f"{bench['machine']['threads']} threads, {len(bench['results'])} prompts; "
          "costs in units of one step of our AR in this run")
    print("| variant | tokens per cycle | verify pass | drafting | rest of the cycle | outside cycles (share of wall) "
          "| cycle speedup over our AR | measured × HF plain | × HF lookup "
          f"| tokens per cycle for {args.goal}× HF plain |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    f = lambda x, s="{:.2f}": "–" if x is None else s.format(x)  # noqa: E731
    for r in breakdown(bench, args.goal):
        print(f"| {r['variant']} | {r['tokens_per_cycle']:.2f} | {r['pass_cost']:.2f} | {r['draft_cost']:.2f} | "
              f"{r['other_cost']:.2f} | {r['outside_share']:.0%} | {r['cycle_speedup']:.2f}× | {f(r['vs_hf'])}× | "
              f"{f(r['vs_hf_pld'])}× | {f(r['needed_tokens_per_cycle'])} |")


if __name__ == "__main__":
    main()
