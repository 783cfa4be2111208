"""Precompute the example run the app opens on, so its first paint needs no model.

    python scripts/assets/make_example_trace.py            # writes assets/example_trace.json and example_ar_trace.json

Uses the bundled model (offline) and the app's default method with the first example prompt
(assets/examples.json), sampled (T > 0), so that its cycles show the residual a rejection is
resampled from; the page opens on the cycle viz.instructive_cycle picks and its controls take
the run's settings. Run it again after a change to the trace format or to a proposer; it refuses
to write a run with no cycle that shows an acceptance, a rejection and the residual.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from specviz import Decoder, load
from specviz.ui.runtime.settings import RunSettings
from specviz.viz.runs import instructive_cycle, teaches_everything

ROOT = Path(__file__).resolve().parents[2]

ASSETS = ROOT / "assets"
DIGITS = 5  # probabilities and seconds keep 5 significant digits: plenty to read, a smaller file
# Sampled, so rejections draw from the residual norm(max(0, p − q)); 0.7 and 0.9 are common chat
# settings that keep the text sensible while the draft head still misses now and then.
TEMPERATURE, TOP_P = 0.7, 0.9
# torch's own thread count, as the app runs: cost-aware drafting (planner.py) reads the target's
# cost per pass size at that count, and with 1 thread on a 2-core CPU it sends one node per cycle,
# so no cycle would show an acceptance and a rejection together.
THREADS = None


def rounded(x):
    """Round floats throughout a JSON-like value."""
    if isinstance(x, float):
        return float(f"{x:.{DIGITS}g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def write(run, path: Path) -> None:
    path.write_text(json.dumps(rounded(run.to_dict()), ensure_ascii=False), encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}: {len(run.cycles)} cycles, {len(run.token_ids)} tokens, "
          f"{run.metrics['tokens_per_s']:.1f} tokens/s, {path.stat().st_size / 1024:.0f} kB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", type=int, default=0, help="index into assets/examples.json")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--temperature", type=float, default=TEMPERATURE)
    parser.add_argument("--top-p", type=float, default=TOP_P)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=THREADS, help="torch threads (default: torch's own)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    prompt = json.loads((ASSETS / "examples.json").read_text(encoding="utf-8"))[args.example]["prompt"]
    settings = RunSettings(prompt=prompt, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                           top_p=args.top_p, seed=args.seed)
    target = load("bundled", progress=lambda msg: print(msg, file=sys.stderr))
    spec = Decoder(target, prompt, settings.decode()).run()
    ar = Decoder(target, prompt, settings.decode(), method="ar").run()
    if spec.token_ids != ar.token_ids and settings.temperature == 0:
        sys.exit("greedy speculative and plain runs differ: the engine is broken, not writing the example")
    shown = instructive_cycle(spec)
    if shown is None or not teaches_everything(spec.cycles[shown]):
        sys.exit("no cycle has an acceptance, a rejection and a residual: try another --seed or a T > 0")
    print(f"the page opens on cycle {shown}")
    write(spec, ASSETS / "example_trace.json")
    write(ar, ASSETS / "example_ar_trace.json")


if __name__ == "__main__":
    main()
