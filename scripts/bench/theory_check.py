"""Theory against measurement, and the batch-size curve, as Markdown for docs/BENCHMARKS.md.

    python scripts/bench/theory_check.py --method pld --ks 2,4                   # bundled model, CPU
    python scripts/bench/theory_check.py --target DIR --draft DIR --method draft --ks 2,4,6,8 --dtype bf16 --batch

For each K it decodes the prompt speculatively and plainly (trace recording off), reads α and c
off the traces, takes v(K+1) from the target's cost profile (the curve the planner decides with:
costs.profile, cached), and prints predicted against measured speedup. With --batch it adds
verify(K+1 tokens) / step per batch size. The same code paths as the app's Theory & hardware tab
(specviz.measure.theory and waterfall, specviz.decoding.planner.verify_cost, specviz.measure.batch_effect).
"""
from __future__ import annotations

import argparse
import sys

import torch

from specviz import generate, load
from specviz.decoding import planner
from specviz.measure import batch_effect, waterfall
from specviz.viz.compare_figures import theory_sentence

PROMPT = ("Write the days of the week, one per line, then the months of the year, one per line, "
          "then the days of the week again.")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="bundled")
    ap.add_argument("--draft", default=None, help="draft spec, for --method draft")
    ap.add_argument("--method", default="pld")
    ap.add_argument("--ks", default="2,4", help="comma-separated K values")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--batch", action="store_true", help="also time the batch-size curve at the largest K")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads; 1 is steadier on a shared machine")
    return ap.parse_args(argv)


def theory_rows(args, target, draft) -> list[str]:
    common = dict(max_new_tokens=args.max_new_tokens, record=False)
    prof = planner.verify_cost(target)
    ar = generate(target, args.prompt, method="ar", **common)
    sentences = []
    where = "read from the cache" if prof.cached else f"measured {prof.measured_at}" if prof.measured_at else "a prior"
    lines = [f"v(n): {prof.model}'s cost profile ({prof.dtype}, {prof.hardware or prof.device}, cache of "
             f"{prof.prefix_len} tokens, one-token pass {prof.pass_s * 1e3:.1f} ms; {where}).", "",
             "| K | α | c | v(K+1) profile | v in the run | predicted S(K) | measured | best K (predicted S) |",
             "|---|---|---|---|---|---|---|---|"]
    for k in (int(x) for x in args.ks.split(",")):
        run = generate(target, args.prompt, method=args.method, draft=draft, k=k, **common)
        a = waterfall.analyse(run, ar, prof)
        lines.append(f"| {k} | {a.alpha:.2f} | {a.c:.3f} | {a.v_k:.2f} | {a.v_run or 0:.2f} | {a.predicted:.2f}× | "
                     f"{a.measured or 0:.2f}× | {a.best[0]} ({a.best[1]:.2f}×) |")
        sentences.append(f"- K = {k}: {theory_sentence(a)}")
    return lines + [""] + sentences


def batch_rows(target, k: int) -> list[str]:
    e = batch_effect.measure_batch_effect(target, k=k, refresh=True)
    lines = [f"Batch-size effect, K = {k} ({e.hardware}, {e.dtype}, cache of {e.prefix_len} tokens, {e.measured_at}):",
             "", "| batch | step ms | verify ms | verify / step |", "|---|---|---|---|"]
    lines += [f"| {b} | {s * 1e3:.1f} | {v * 1e3:.1f} | {r:.2f} |"
              for b, s, v, r in zip(e.batch_sizes, e.pass_s, e.verify_s, e.ratio)]
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load(args.target, dtype=args.dtype, progress=lambda m: print(m, file=sys.stderr))
    draft = load(args.draft, dtype=args.dtype) if args.draft else None
    print(f"Target {target.name} ({target.dtype}, {target.device}), method {args.method}, "
          f"{args.max_new_tokens} new tokens, greedy.\n")
    print("\n".join(theory_rows(args, target, draft)))
    if args.batch:
        print()
        print("\n".join(batch_rows(target, max(int(x) for x in args.ks.split(",")))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
