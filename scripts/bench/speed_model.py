"""The model of speed against measurement on the project's benchmark prompts, as Markdown for docs/BENCHMARKS.md.

    python scripts/bench/speed_model.py                                  # as sent: bundled model, greedy and T = 0.7
    python scripts/bench/speed_model.py --methods pld,hybrid --temperatures 0 --out docs/bench/DIR

The full cut and grow check (issue 65), one pinned thread on a quiet core, hours; then again with
`--questions ../shared/bench/specbench_public.jsonl` for the public Spec-Bench questions:

    taskset -c 1 .venv/bin/python scripts/bench/speed_model.py --modes cut,grow --threads 1 \
        --max-new-tokens 96 --repeats 3 --out docs/bench/DATE-speed-model-cut-grow

Two modes predict runs the fit never saw, greedy, every method with a fixed K (`--modes cut,grow`):
- cut: fitted on a run at K = 16, predicting the runs at K = 2, 4 and 8;
- grow: fitted on a run at K = 4, predicting the runs at K = 8 and 16: past the fitted run's deepest
  depth the model grows each draft by the shape it had there (measure/speed_model.py, `grown`), but
  prompt lookup's and LogitSpec's drafts, which their proposers kept uncut, are rebuilt at each K
  and held against the run's text (measure/rebuilt.py), and a run of copies is replayed along it.
"Fitted on a run": the text's and the machine's inputs both from that run and its AR baseline, as
the Theory tab reads them (speed_model.inputs_of), with the run's verify passes over the cost
profile's (v_scale) as the calibration below reads them. Each (prompt, method, K) runs `--repeats`
times, the order rotated each repeat, and the fastest run is kept, the AR baseline's likewise.
The methods: prompt lookup, LogitSpec and the head with their planner off (every offer sent, cut
at K); the fixed tree is the hybrid with its planner off (retrieval branches, suffix decoding and
the head's tree three deep, all sent, cut at K); the hybrid runs as the app runs it, planner on,
so its cut and grown predictions cut or grow what its planner sent at the fitted K. Suffix
decoding never drafts from another run of the measurement (proposers.unshared: no method learns across runs).

The default mode, as sent, checks the runs the planner made (API defaults), from what follows.
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
from specviz.decoding import planner, speed, tracefile
from specviz.measure import speed_model
from specviz.measure.specbench import as_prompts, read_questions
from specviz.pricing.cost_profile import interpolate
from specviz.pricing.timing import cpu_name
from specviz.proposers import joiners, parts, unshared

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = ROOT.parent / "shared" / "bench" / "prompts.json"
# Not one of the benchmark prompts: the calibration sees the machine, never the text it is checked on.
FIXED_TREE = "fixed-tree"  # the hybrid's tree with its planner off: a tree of fixed shape
# name: (method, planner on); any other name is its method, planner off
VARIANTS = {FIXED_TREE: (joiners()[0], False), **{m: (m, True) for m in joiners()}}
CALIBRATION = ("Write the days of the week, one per line, then the months of the year, one per line, "
               "then the days of the week again.")


def sent_methods() -> list[str]:
    """The registry's joiners (the hybrid) after their parts that learn nothing across runs."""
    return [*parts(), *joiners()]


def cut_grow_methods() -> list[str]:
    """As sent, with the hybrid's tree at a fixed shape (planner off) beside the planned one."""
    return [*parts(), FIXED_TREE, *joiners()]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="bundled")
    ap.add_argument("--prompts", type=Path, default=PROMPTS)
    ap.add_argument("--questions", type=Path, default=None,
                    help="a Spec-Bench question.jsonl: its questions' first turns instead of --prompts")
    ap.add_argument("--modes", default="sent", help="sent (as the planner sent), or cut and/or grow: e.g. cut,grow")
    ap.add_argument("--methods", default=None, help=f"default: {','.join(sent_methods())} as sent; "
                    f"{','.join(cut_grow_methods())} to cut and grow")
    ap.add_argument("--temperatures", default="0,0.7", help="as sent only: cut and grow are greedy")
    ap.add_argument("--repeats", type=int, default=3, help="cut and grow: runs of each, the fastest kept")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="the API's default")
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts (a smoke test)")
    ap.add_argument("--from-traces", type=Path, default=None,
                    help="cut and grow again from an earlier check's --out (its traces), decoding nothing")
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
    methods = args.methods.split(",") if args.methods else sent_methods()
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


FITS = {"cut": (16, (2, 4, 8)), "grow": (4, (8, 16))}  # mode: (the K fitted on, the Ks predicted)


def best_runs(target, prompt: str, keys: list[tuple[str, int]], repeats: int, new_tokens: int) -> dict:
    """{(name, K): the fastest of `repeats` greedy runs}, ("ar", 0) the AR baseline's; every repeat
    runs each once, its order rotated, so a slow spell hits all of them."""
    best: dict[tuple[str, int], object] = {}
    for rep in range(repeats):
        order = keys[rep % len(keys):] + keys[: rep % len(keys)]
        for name, k in order:
            method, plan = VARIANTS.get(name, (name, False))
            run = generate(target, prompt, method=method, k=k or None, plan=plan, temperature=0.0,
                           max_new_tokens=new_tokens, seed=0)
            kept = best.get((name, k))
            if kept is None or run.metrics["tokens_per_s"] > kept.metrics["tokens_per_s"]:
                best[(name, k)] = run
    return best


def measure_ks(args, target, prompts) -> list[dict]:
    """Cut and grow: each method fitted on its run at one K, predicting its runs at the others; with
    --out, every kept run's trace (beside its AR baseline) goes to OUT/traces."""
    prof = planner.verify_cost(target)
    traces = args.out / "traces" if args.out else None
    if traces is not None:
        traces.mkdir(parents=True, exist_ok=True)
        points = {n: prof(n) for n in sorted(getattr(prof, "v", None) or range(1, 65))}
        (args.out / "profile.json").write_text(json.dumps({"v": points}) + "\n", encoding="utf-8")
    modes = [m for m in args.modes.split(",") if m in FITS]
    methods = args.methods.split(",") if args.methods else cut_grow_methods()
    ks = sorted({FITS[m][0] for m in modes} | {k for m in modes for k in FITS[m][1]})
    rows = []
    with unshared():  # no run drafts from another's output (suffix decoding's earlier runs)
        for p in prompts:
            best = best_runs(target, p["prompt"], [("ar", 0)] + [(m, k) for m in methods for k in ks],
                             args.repeats, args.max_new_tokens)
            ar = best[("ar", 0)]
            if traces is not None:  # every kept run, so a change to the model can be checked again offline
                for (name, k), run in best.items():
                    meta = {"prompt": p["id"], "name": name, "k": k}
                    text = tracefile.dumps(run, ar, meta)
                    (traces / f"{p['id']}-{name}-{k}.json").write_text(text, encoding="utf-8")
            rows += predict_rows(best, p["id"], methods, modes, prof)
    return rows


def predict_rows(best: dict, prompt: str, methods: list[str], modes: list[str], prof) -> list[dict]:
    """Each method fitted on its run at a mode's K, predicting its runs at that mode's other Ks, with the
    passes priced by one ratio and, beside it, fitted by size; `best` holds the runs by (name, K) and
    the AR baseline at ("ar", 0)."""
    ar, rows = best[("ar", 0)], []
    for m in methods:
        for mode in modes:
            fit, targets = FITS[mode]
            run = best[(m, fit)]
            x = speed_model.inputs_of(run, ar, speed_model.machine_inputs(run, ar, prof))
            x2 = speed_model.inputs_of(run, ar, speed_model.machine_inputs(run, ar, prof, by_size=True))
            for k in targets:
                measured = speed.costs(best[(m, k)], ar).speedup
                pred, pred2 = speed_model.predict_at(x, prof, k), speed_model.predict_at(x2, prof, k)
                rows.append(dict(prompt=prompt, method=m, mode=mode, fit_k=fit, k=k, predicted=pred,
                                 measured=measured, miss=abs(pred - measured) / measured,
                                 predicted_by_size=pred2, miss_by_size=abs(pred2 - measured) / measured))
                print(f"{prompt:>10} {m:>10} {mode} {fit}→{k}: predicted {pred:.2f}×, measured "
                      f"{measured:.2f}×", file=sys.stderr)
    return rows


def from_traces(folder: Path, methods: list[str] | None, modes: list[str]) -> list[dict]:
    """The predictions again from a check's kept traces (OUT/traces, OUT/profile.json), decoding nothing:
    a change to the model is checked on the runs it was first checked on."""
    points = {int(n): float(x) for n, x in json.loads((folder / "profile.json").read_text())["v"].items()}
    prof = lambda n: interpolate(points, n)  # noqa: E731
    runs: dict[str, dict] = {}
    for path in sorted((folder / "traces").glob("*.json")):
        doc = tracefile.read(path)
        meta = doc.meta
        runs.setdefault(meta["prompt"], {})[(meta["name"], int(meta["k"]))] = doc.run
    rows = []
    for prompt, best in runs.items():
        kept = list(dict.fromkeys(name for name, _ in best if name != "ar"))
        names = methods or sorted(kept, key=lambda n: (cut_grow_methods() + kept).index(n))  # the live order
        rows += predict_rows(best, prompt, names, modes, prof)
    return rows


def summary_ks(rows: list[dict], header: str) -> str:
    """One line per method, mode and K predicted, then one per method and mode over its Ks: the median
    miss and the worst prompt beside it."""
    lines = [header, "", "| method | mode | K | median miss | worst prompt (miss) | median predicted | "
             "median measured | median miss, passes fitted by size |", "|---|---|---|---|---|---|---|---|"]

    def line(method: str, mode: str, ks: str, rs: list[dict]) -> None:
        worst = max(rs, key=lambda r: r["miss"])
        name = f"{worst['prompt']} at K = {worst['k']}" if ks.endswith("all") else worst["prompt"]
        lines.append(f"| {method} | {mode} | {ks} | {statistics.median(r['miss'] for r in rs):.1%} | {name} "
                     f"({worst['miss']:.0%}) | {statistics.median(r['predicted'] for r in rs):.2f}× | "
                     f"{statistics.median(r['measured'] for r in rs):.2f}× | "
                     f"{statistics.median(r['miss_by_size'] for r in rs):.1%} |")

    for method, mode in dict.fromkeys((r["method"], r["mode"]) for r in rows):
        mine = [r for r in rows if (r["method"], r["mode"]) == (method, mode)]
        for k in sorted({r["k"] for r in mine}):
            line(method, mode, f"{mine[0]['fit_k']} → {k}", [r for r in mine if r["k"] == k])
        line(method, mode, f"{mine[0]['fit_k']} → all", mine)
    return "\n".join(lines) + "\n"


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
    modes = set(args.modes.split(","))
    if modes != {"sent"} and not modes <= set(FITS):
        sys.exit(f"--modes is 'sent' or any of {', '.join(FITS)}, not {args.modes!r}")
    if args.from_traces is not None:
        rows = from_traces(args.from_traces, args.methods.split(",") if args.methods else None,
                           [m for m in args.modes.split(",") if m in FITS] or list(FITS))
        print(summary_ks(rows, f"Model of speed, cut and grown, again from the traces in {args.from_traces}."))
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.questions is not None:
        prompts = as_prompts(read_questions(args.questions))[: args.limit]
        source = f"Spec-Bench questions ({args.questions.name})"
    else:
        prompts, source = json.loads(args.prompts.read_text(encoding="utf-8"))[: args.limit], "benchmark prompts"
    target = load(args.target, progress=lambda m: print(m, file=sys.stderr))
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = (f"{when}: {cpu_name()}, {torch.get_num_threads()} threads, {target.name} ({target.dtype}), "
               f"{len(prompts)} {source}")
    if modes == {"sent"}:
        with unshared():  # no run drafts from another's output (suffix decoding's earlier runs)
            rows = measure(args, target, prompts)
        text = summary(rows, f"Model of speed against measurement, {machine}, API defaults (planner on), "
                             f"{args.max_new_tokens} new tokens, seed 0.")
    else:
        rows = measure_ks(args, target, prompts)
        text = summary_ks(rows, f"Model of speed, cut and grown, against measurement, {machine}, greedy, "
                                f"{args.max_new_tokens} new tokens, best of {args.repeats}.")
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        (args.out / "summary.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
