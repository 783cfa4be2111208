"""What one GPU call of the app costs, the measurement ZeroGPU's requested durations are sized from.

    python scripts/gpu_call_costs.py [--steps 6] [--run-tokens 128] [--max-prompt-tokens 2048]

On the bundled model, with the page's default settings, for each example prompt: the wall time
of `work.step` in a worker that has the run's KV cache (ZeroGPU reusing an idle worker) and in one
that has none (a fresh worker: one prefill of the run so far, then the cycle), the time of a Run of
--run-tokens tokens, and a Step that must rebuild a --max-prompt-tokens prompt (the longest the
app takes). Every call goes through tests/helpers/fork_gpu.py, the forked stand-in for spaces.GPU, so the
fork, the pickling and the worker's one CPU thread are in the numbers. Prints Markdown.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from specviz.decoding.engine import Decoder
from specviz.pricing.timing import cpu_name
from specviz.ui.runtime import work, zerogpu
from specviz.ui.runtime.settings import RunSettings
from specviz.ui.runtime.state import MODELS
from tests.helpers import fork_gpu

ROOT = Path(__file__).resolve().parents[1]


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def prompt_costs(target, prompt: str, steps: int, run_tokens: int) -> dict:
    """Seconds per Step with and without the worker's cache, and of one Run."""
    settings = RunSettings(prompt=prompt, max_new_tokens=run_tokens)
    specs = (settings.target, settings.draft_spec)
    state = Decoder(target, prompt, settings.decode(), MODELS.peek(specs[1]) if specs[1] else None).state()
    kept, fresh = [], []
    for i in range(steps):
        fork_gpu.FRESH = i % 2 == 1  # alternate: a reused worker keeps the cache, a fresh one has none
        seconds, later = timed(lambda: work.step(specs, state.light()))
        (fresh if fork_gpu.FRESH else kept).append(seconds)
        state = state.merge(later)
    fork_gpu.FRESH = False
    start = Decoder(target, prompt, settings.decode()).state()
    run_s, _ = timed(lambda: list(work.run(specs, start.light())))
    return {"kept": kept[1:] or kept, "fresh": fresh, "run": run_s}  # the first Step also prefills


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--run-tokens", type=int, default=128)
    ap.add_argument("--max-prompt-tokens", type=int, default=2048)
    args = ap.parse_args()
    target = MODELS.get("bundled")
    if RunSettings().draft_spec:
        MODELS.get(RunSettings().draft_spec)
    zerogpu.use_backend(fork_gpu.GPU)
    examples = json.loads((ROOT / "assets" / "examples.json").read_text(encoding="utf-8"))
    print(f"CPU: {cpu_name()}; method {RunSettings().method}, bundled model, every call in a forked worker\n")
    print("| prompt | Step, worker has the cache (median s) | Step, fresh worker (median s) | "
          f"Run of {args.run_tokens} tokens (s) |")
    print("|---|---|---|---|")
    for ex in examples:
        c = prompt_costs(target, ex["prompt"], args.steps, args.run_tokens)
        print(f"| {ex['label']} | {statistics.median(c['kept']):.2f} | {statistics.median(c['fresh']):.2f} | "
              f"{c['run']:.1f} |")
    text = " ".join(ex["prompt"] for ex in examples)
    ids = target.encode(text, chat=False)
    long_ids = (ids * (args.max_prompt_tokens // len(ids) + 1))[:args.max_prompt_tokens]
    c = prompt_costs(target, target.decode(long_ids), 4, 64)
    print(f"\nA fresh worker's Step on a {args.max_prompt_tokens}-token prompt (rebuild included): "
          f"{max(c['fresh']):.2f} s")
    fork_gpu.reset()


if __name__ == "__main__":
    main()
