"""Record what the Compare and Theory & hardware tabs open on, so they show results before anyone measures.

    python scripts/assets/record_results.py            # writes assets/recorded_results.json

Times the bundled model's cost profile v(n) afresh (the curve its planner then decides with), runs
the Compare tab's default rows on its default prompt against their AR baselines, puts the first
measured speculative row on the S(K) curve with that profile (as the Theory tab's first source
does), and times the batch-size curve at the tab's default K, all on the bundled model (offline).
The file says when and on what machine it was recorded; the tabs say so too. Record it on a quiet
machine: every number in it is a timing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import torch

from specviz import load
from specviz.measure import batch_effect, waterfall
from specviz.measure.comparison import Comparison, Config, Shared, parse_rows
from specviz.pricing import costs
from specviz.pricing.timing import cpu_name
from specviz.ui.compare import DEFAULT_PROMPT, DEFAULT_ROWS, MAX_NEW_DEFAULT
from specviz.ui.shared.recordings import RECORDED
from specviz.ui.theory import BATCH_K

ROOT = Path(__file__).resolve().parents[2]

DIGITS = 4  # timings and ratios keep 4 significant digits: more would only record noise
# None: torch's own thread count, which is what the app decodes with, so the recording measures the
# app's own runs (issue 51: it said "1 thread" while the app ran on 2); the page says how many.
THREADS = None


def rounded(x):
    """Round floats throughout a JSON-like value (tuples become lists)."""
    if isinstance(x, float):
        return float(f"{x:.{DIGITS}g}")
    if isinstance(x, (list, tuple)):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def machine(target) -> str:
    """CPU, threads, device and dtype; and the load, when other work shared the cores."""
    threads = torch.get_num_threads()
    text = f"{cpu_name()}, {threads} thread{'s' * (threads != 1)}, {target.device} {target.dtype}".replace("torch.", "")
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    return text + (f", shared: load {load:.1f} on {cores} cores" if load > cores else "")


def compare(target, repeats: int) -> Comparison:
    """The Compare tab's default rows, timed as its Compare button times them."""
    shared = Shared.of(DEFAULT_PROMPT, max_new_tokens=MAX_NEW_DEFAULT, seed=0, chat=True, repeats=repeats)
    comparison = Comparison(parse_rows(DEFAULT_ROWS), shared)
    for message in comparison.run(lambda spec: target):  # every default row runs on the bundled model
        print(message, file=sys.stderr)
    return comparison


def analyse(comparison: Comparison, prof: costs.CostProfile) -> tuple[str, waterfall.Analysis]:
    """The first measured speculative row on the S(K) curve, with v(n) from the target's cost profile."""
    for i, config in enumerate(comparison.items):
        if isinstance(config, Config) and config.method != "ar":
            mine, ar = comparison.measured(config), comparison.measured(config.baseline())
            if mine is not None and ar is not None:
                return f"Compare row {i + 1}: {config.label()}", waterfall.analyse(mine.run, ar.run, prof)
    sys.exit("no Compare row was measured: nothing to put on the theory curve")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per Compare row (the median is kept)")
    parser.add_argument("--out", type=Path, default=RECORDED)
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads while timing (default: "
                        "torch's own, as the app runs)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load("bundled", progress=lambda msg: print(msg, file=sys.stderr))
    prof = costs.profile(target, refresh=True)  # timed now, on this quiet machine; the planner reads it back
    comparison = compare(target, args.repeats)
    source, analysis = analyse(comparison, prof)
    effect = batch_effect.measure_batch_effect(target, k=BATCH_K, refresh=True)
    record = {
        "recorded_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": machine(target),
        "command": "python scripts/assets/record_results.py",
        "compare": {"rows": comparison.rows(), "baselines": comparison.baseline_rows(),
                    "repeats": args.repeats},
        "theory": {"source": source, "analysis": asdict(analysis)},
        "cost_profile": prof.to_dict(),
        "batch": effect.to_dict(),
    }
    args.out.write_text(json.dumps(rounded(record), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out.relative_to(ROOT)} ({args.out.stat().st_size / 1024:.0f} kB)")


if __name__ == "__main__":
    main()
