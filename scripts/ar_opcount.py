"""Plain decoding's work per token, counted rather than timed: our AR loop against HF `generate`.

Timing cannot separate our AR loop from HF's on a host whose repeats spread ±20 % (BENCHMARKS,
"Our AR loop against HF generate, profiled"). Counts do not spread: this runs each variant of
scripts/ar_profile.py once under torch.profiler and reports, per new token, how many operator
calls each made and their summed self CPU time, then the operators whose counts differ most. The
time column is still timed (read it as a guide); the counts are exact.

    .venv/bin/python scripts/ar_opcount.py --max-new-tokens 32
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from ar_profile import VARIANTS  # noqa: E402
from specviz.models.loader import load  # noqa: E402


def counted(fn, target, ids, n) -> tuple[list[int], Counter, Counter]:
    """(tokens, calls per operator, self CPU µs per operator) of one run of `fn`."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tokens = fn(target, ids, n)
    calls, self_us = Counter(), Counter()
    for e in prof.key_averages():
        calls[e.key] += e.count
        self_us[e.key] += e.self_cpu_time_total
    return tokens, calls, self_us


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--prompt", type=int, default=0, help="index into the public prompts")
    args = ap.parse_args()
    target = load("bundled")
    prompt = json.loads((ROOT.parent / "shared/bench/prompts.json").read_text())[args.prompt]
    ids = target.encode(prompt["prompt"], chat=True)
    for fn in VARIANTS.values():  # warm up: allocation and kernel choice stay out of the counts
        fn(target, ids, 4)
    runs = {name: counted(fn, target, ids, args.max_new_tokens) for name, fn in VARIANTS.items()}
    n = {name: len(r[0]) for name, r in runs.items()}
    same = len({tuple(r[0]) for r in runs.values()}) == 1
    print(f"prompt {prompt['id']} ({len(ids)} tokens), {args.max_new_tokens} new tokens, same tokens: {same}")
    print("| variant | operator calls per token | self CPU ms per token (timed) |\n|---|---|---|")
    for name, (_, calls, us) in runs.items():
        print(f"| {name} | {sum(calls.values()) / n[name]:.0f} | {sum(us.values()) / 1000 / n[name]:.1f} |")
    hf_calls = runs["hf"][1]
    for name in ("ours", "bare"):
        calls = runs[name][1]
        diff = {k: calls[k] / n[name] - hf_calls[k] / n["hf"] for k in set(calls) | set(hf_calls)}
        top = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:12]
        print(f"\n{name} − hf, calls per token (operators that differ most):")
        for k, d in top:
            if abs(d) >= 0.5:
                print(f"  {d:+7.1f}  {k}")


if __name__ == "__main__":
    main()
