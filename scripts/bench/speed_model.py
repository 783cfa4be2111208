"""The model of speed against measurement on the project's benchmark prompts, as Markdown for docs/BENCHMARKS.md.

    python scripts/bench/speed_model.py                                  # bundled model, CPU, greedy and T = 0.7
    python scripts/bench/speed_model.py --methods pld,hybrid --temperatures 0 --out docs/bench/DIR

What is predicted, and from what (measure/speed_model.py):
- the machine's inputs (drafting per cycle against the levels a model drafted, overhead per cycle
  against nodes sent, a plain token's overhead, and the calibration's verify passes over the cost
  profile's, all in one-token passes) are the medians of three calibration runs per method and
  temperature on a prompt that is not in the benchmark set, made before any benchmark prompt runs;
  v(n) is the target's cost profile (the planner's, timed once and cached);
- the text's inputs come from each run: per-depth acceptance α_d among the cycles whose draft went as
  deep, and the drafts the planner sent (its policy's outcome). So this checks the cost side of the
  model (v(n) from the profile, scaled by the calibration's passes, c and the overheads measured
  before), not a forecast of acceptance: the advisor forecasts acceptance, from other runs;
- the last column puts one α_d on every cycle whatever depth its draft went (depths independent, as
  the per-position formula assumes), to show what that assumption costs.
The measured speedup is the run's tokens/s over its AR baseline's (same prompt, temperature and seed),
as the timing panel shows it. Miss = |predicted − measured| ÷ measured. Each prompt's AR baseline and
runs are made in one pass, back to back, so a slow spell hits both.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from specviz import generate, load
from specviz.decoding import planner, speed
from specviz.measure import speed_model
from specviz.pricing.timing import cpu_name

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT.parent / "shared" / "bench" / "prompts.json"
# Not one of the benchmark prompts: the calibration sees the machine, never the text it is checked on.
CALIBRATION = ("Write the days of the week, one per line, then the months of the year, one per line, "
               "then the days of the week again.")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="bundled")
    ap.add_argument("--prompts", type=Path, default=PROMPTS)
    ap.add_argument("--methods", default="pld,logitspec,head,hybrid")
    ap.add_argument("--temperatures", default="0,0.7")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="the API's default")
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts (a smoke test)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads; default: torch's, as the app runs")
    ap.add_argument("--out", type=Path, default=None, help="folder for results.json and summary.md")
    return ap.parse_args(argv)


def predicted(run, ar, machine: dict, prof, one_rate: bool = False) -> float:
    """The model's S for this run: as its planner sent when it planned, else at its K. `one_rate`: one
    α_d for every cycle, whatever depth its draft went (depths independent), for comparison."""
    x = speed_model.inputs_of(run, ar, machine)
    if one_rate:
        x.reach_by_sent_depth = {}
    return speed_model.predict_at(x, prof, None if run.settings.get("plan") else int(run.settings["k"]))


CALIBRATIONS = 3  # calibration runs per method; each input is their median (one run's timings wander ±5–10 % here)


def calibrate(target, methods, temperature, common, prof) -> dict:
    """Each method's machine inputs: the median of each over CALIBRATIONS runs on the calibration
    prompt, each against an AR run made just before it."""
    out = {}
    for m in methods:
        runs = []
        for _ in range(CALIBRATIONS):
            ar = generate(target, CALIBRATION, method="ar", temperature=temperature, **common)
            runs.append(speed_model.machine_inputs(generate(target, CALIBRATION, method=m, temperature=temperature,
                                                       **common), ar, prof))
        out[m] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    return out


def measure(args, target, prompts) -> list[dict]:
    prof = planner.verify_cost(target)
    common = dict(max_new_tokens=args.max_new_tokens, seed=0)
    methods = args.methods.split(",")
    rows = []
    for temperature in (float(t) for t in args.temperatures.split(",")):
        machine = calibrate(target, methods, temperature, common, prof)
        for p in prompts:
            ar = generate(target, p["prompt"], method="ar", temperature=temperature, **common)
            for m in methods:
                run = generate(target, p["prompt"], method=m, temperature=temperature, **common)
                measured = speed.costs(run, ar).speedup
                pred = predicted(run, ar, machine[m], prof)
                flat = predicted(run, ar, machine[m], prof, one_rate=True)
                rows.append(dict(prompt=p["id"], method=m, temperature=temperature, predicted=pred,
                                 measured=measured, miss=abs(pred - measured) / measured,
                                 predicted_one_rate=flat, miss_one_rate=abs(flat - measured) / measured,
                                 tau=run.metrics["mean_accepted_tokens"], alpha=run.metrics["acceptance_rate"],
                                 concurrent=run.metrics.get("cycles_concurrent", 0)))
                print(f"T={temperature} {p['id']:>10} {m:>9}: predicted {pred:.2f}×, measured {measured:.2f}×",
                      file=sys.stderr)
    return rows


def summary(rows: list[dict], header: str) -> str:
    lines = [header, "", "| method | T | median miss | worst prompt (miss) | median predicted | median measured | "
             "median miss, one α_d for every draft depth |", "|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["method"], r["temperature"]), []).append(r)
    for (m, t), rs in groups.items():
        worst = max(rs, key=lambda r: r["miss"])
        lines.append(f"| {m} | {t:g} | {statistics.median(r['miss'] for r in rs):.1%} | {worst['prompt']} "
                     f"({worst['miss']:.0%}) | {statistics.median(r['predicted'] for r in rs):.2f}× | "
                     f"{statistics.median(r['measured'] for r in rs):.2f}× | "
                     f"{statistics.median(r['miss_one_rate'] for r in rs):.1%} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = json.loads(args.prompts.read_text(encoding="utf-8"))[: args.limit]
    target = load(args.target, progress=lambda m: print(m, file=sys.stderr))
    rows = measure(args, target, prompts)
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"Model of speed against measurement, {when}: {cpu_name()}, {torch.get_num_threads()} threads, "
              f"{target.name} ({target.dtype}), {len(prompts)} benchmark prompts, API defaults (planner on), "
              f"{args.max_new_tokens} new tokens, seed 0.")
    text = summary(rows, header)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        (args.out / "summary.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
