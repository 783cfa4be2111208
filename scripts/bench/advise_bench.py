"""Does the advice pick what a brute-force sweep would? One run, on the bundled model (issue 24).

1. `advise` measures every candidate once at K max, predicts, ranks and checks its top picks.
2. The same candidates are then decoded at every K from 1 to K max (planning off, as the advisor
   predicts; a planned candidate, "K auto", at its own K limit with its planner on), repeats in
   rotated order, with plain decoding between the candidates' sweeps; each configuration's speed is
   the median over repeats of its tokens ÷ decode seconds over the prompts.
3. A noisy sweep's best is flattered by its luckiest repeat, so the `--refine` best configurations
   of the sweep and the advisor's pick are measured `--refine-repeats` more times, rotated, and
   every configuration's speed is then the median over all its repeats.
4. It reports the recommended configuration's measured speed against the sweep's best, and the top
   pick's predicted speedup against its checked measurement.

    .venv/bin/python scripts/bench/advise_bench.py --max-new-tokens 40 --k-max 5 --repeats 2 \\
        --out docs/bench/2026-12-01-advise

The default prompts are six of the public set, one per kind (IDS): on a 2-core CPU the sweep of six
candidates × K 1…5 × 2 repeats then takes about half an hour.

Writes survey.json (the advisor's), sweep.json and summary.md to --out. The survey the app's
Advise tab opens on is recorded by scripts/assets/record_advice.py, with the same candidates and prompts.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from specviz.advise import advice, advice_report, advisor
from specviz.advise_cli import default_candidates
from specviz.decoding import planner
from specviz.loading.loader import load
from specviz.proposers import default_k

ROOT = Path(__file__).resolve().parents[2]

# the advisor's default candidates (the registry's), and layer skip as the page offers it and with the
# bundled model's first and last six layers kept
CANDIDATES = default_candidates() + ",layerskip,layerskip:0-5+24-29"
PROMPTS = ROOT.parent / "shared" / "bench" / "prompts.json"
IDS = "sum-1,code-1,rag-1,ext-1,math-1,chat-1"


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--candidates", default=CANDIDATES)
    ap.add_argument("--prompts", default=str(PROMPTS))
    ap.add_argument("--ids", default=IDS, help="comma-separated prompt ids of the prompt file (default %(default)s)")
    ap.add_argument("--k-max", type=int, default=5)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", required=True)
    ap.add_argument("--refine", type=int, default=4, help="the sweep's N best to measure again (default 4)")
    ap.add_argument("--refine-repeats", type=int, default=4, help="(default 4)")
    return ap.parse_args()


def configs(cand, k_max: int) -> list[tuple[str, int, dict]]:
    """(key, K, extra options) to sweep for a candidate: K 1…k_max with planning off, or for a planned
    one ("K auto") its own configuration only, its K limit with the planner on."""
    if cand.planned:
        return [(f"{cand.label}|auto", default_k(cand.method), {"plan": True})]
    return [(f"{cand.label}|{k}", k, {}) for k in range(1, k_max + 1)]


def sweep_all(target, cands, prompts, args, common, say) -> tuple[dict[str, list[float]], list[float]]:
    """Every candidate at every K, `args.repeats` times in rotated order, with plain decoding
    before each candidate: (tokens/s per 'label|K', plain tokens/s runs)."""
    rates: dict[str, list[float]] = {}
    ar: list[float] = []
    for rep in range(args.repeats):
        order = cands[rep % len(cands):] + cands[:rep % len(cands)]  # rotate which candidate goes first
        for cand in order:
            _, r = advisor._decode_all(target, None, prompts, method="ar", **common)
            ar.append(r)
            for key, k, extra in configs(cand, args.k_max):
                say(f"sweep {rep + 1}/{args.repeats}: {key.replace('|', ' at K = ')}")
                _, r = advisor._decode_all(target, None, prompts, method=cand.method, k=k, knobs=cand.knobs,
                                           **{**common, **extra})
                rates.setdefault(key, []).append(r)
    return rates, ar


def refine(target, by_key, again, prompts, args, common, rates, ar, say) -> None:
    """The configurations in `again` measured `args.refine_repeats` more times, rotated, each
    round after plain decoding; appends to `rates` and `ar`."""
    for rep in range(args.refine_repeats):
        _, r = advisor._decode_all(target, None, prompts, method="ar", **common)
        ar.append(r)
        for key in again[rep % len(again):] + again[: rep % len(again)]:
            cand, k, extra = by_key[key]
            say(f"refine {rep + 1}/{args.refine_repeats}: {key.replace('|', ' at K = ')}")
            _, r = advisor._decode_all(target, None, prompts, method=cand.method, k=k, knobs=cand.knobs,
                                       **{**common, **extra})
            rates[key].append(r)


def summary(survey, cands, args, started, sweep, ar_rate, ar, again, data, chk) -> list[str]:
    """The Markdown summary: the sweep's table, its best, and the advisor's pick against it."""
    best_key, pick_key, top_pred = data["best"], data["pick"], data["pick_predicted"]
    lines = [f"Run started {started} on {survey.machine}; prompts {args.ids} of {Path(args.prompts).name}, greedy, "
             f"{args.max_new_tokens} new tokens, K 1…{args.k_max}, planning off, {args.repeats} repeats "
             f"(median), then {args.refine_repeats} more of {', '.join(k.replace('|', ' K=') for k in again)}; "
             f"plain decoding {ar_rate:.1f} tokens/s (median of {len(ar)}).", "",
             "| candidate | " + " | ".join(f"K={k}" for k in range(1, args.k_max + 1)) + " | advisor's K, predicted |",
             "|---" * (args.k_max + 2) + "|"]
    predicted = {m.candidate.label: (k, s) for m, k, s in advice.ranked(survey)}
    for cand in cands:
        cells = []
        for key, _, _ in configs(cand, args.k_max):
            cell = f"{sweep[key] / ar_rate:.2f}×" + (" (K auto)" if cand.planned else "")
            cells.append(f"**{cell}**" if key == best_key else cell)
        cells += ["–"] * (args.k_max - len(cells))
        k, s = predicted.get(cand.label, (None, None))
        k_text = "auto" if cand.planned else k
        lines.append(f"| {cand.label} | " + " | ".join(cells) + (f" | K={k_text}, {s:.2f}× |" if k else " | – |"))
    lines += ["", f"Sweep's best: {best_key.replace('|', ' at K = ')}, {sweep[best_key] / ar_rate:.2f}×. "
              f"Advisor's pick: {pick_key.replace('|', ' at K = ')}, {sweep[pick_key] / ar_rate:.2f}× in the sweep "
              f"= {data['pick_vs_best']:.3f} of the best. Predicted {top_pred:.2f}×; checked "
              + (f"{chk.measured:.2f}× ({abs(top_pred - chk.measured) / chk.measured:.1%} off)." if chk
                 else "not checked.")]
    return lines


def main() -> None:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    items = {x["id"]: x["prompt"] for x in json.loads(Path(args.prompts).read_text(encoding="utf-8"))}
    prompts = [items[i.strip()] for i in args.ids.split(",")]
    target = load("bundled")
    cands = [advice.Candidate.parse(c) for c in args.candidates.split(",")]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731

    survey = advisor.measure(target, cands, prompts, load, planner.verify_cost(target), say, k_max=args.k_max,
                             max_new_tokens=args.max_new_tokens, check=2)
    advice.save(survey, out / "survey.json")

    common = dict(max_new_tokens=args.max_new_tokens, temperature=0.0, top_p=1.0, seed=0, plan=False, record=False)
    rates, ar = sweep_all(target, cands, prompts, args, common, say)
    top, top_k, top_pred = advice.ranked(survey)[0]
    pick_key = f"{top.candidate.label}|{'auto' if top.candidate.planned else top_k}"
    first = {key: statistics.median(v) for key, v in rates.items()}
    again = sorted(first, key=first.get, reverse=True)[: args.refine]
    again += [pick_key] if pick_key not in again else []
    by_key = {key: (c, k, extra) for c in cands for key, k, extra in configs(c, args.k_max)}
    refine(target, by_key, again, prompts, args, common, rates, ar, say)
    ar_rate = statistics.median(ar)
    sweep = {key: statistics.median(v) for key, v in rates.items()}
    best_key = max(sweep, key=sweep.get)
    chk = survey.checks.get(top.candidate.label)
    data = dict(started=started, machine=survey.machine, prompts=args.ids.split(","), k_max=args.k_max,
                max_new_tokens=args.max_new_tokens, repeats=args.repeats, ar_tokens_per_s=ar_rate, ar_runs=ar,
                sweep={k: dict(tokens_per_s=v, speedup=v / ar_rate, runs=rates[k]) for k, v in sweep.items()},
                best=best_key, pick=pick_key, pick_vs_best=sweep[pick_key] / sweep[best_key],
                pick_predicted=top_pred, pick_checked=chk.measured if chk else None,
                pick_sweep_speedup=sweep[pick_key] / ar_rate, refined=again, refine_repeats=args.refine_repeats)
    (out / "sweep.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    lines = summary(survey, cands, args, started, sweep, ar_rate, ar, again, data, chk)
    (out / "summary.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / "advice.md").write_text(advice_report.report(survey) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
