"""Passes over n new tokens on a 200-token cache of the bundled model: our forward
(specviz/models/fastpath.py) against transformers' modules on the same packed model, interleaved,
the median of repeats of 15 passes each; and the bytes of linear weights a pass reads, against
what this machine streams, to show what per-op overhead leaves on the table.

    .venv/bin/python scripts/fastpath_bench.py [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.models import fastpath  # noqa: E402
from specviz.models.kvcache import new_cache, rollback  # noqa: E402
from specviz.models.loader import load  # noqa: E402
from specviz.models.timing import cpu_name  # noqa: E402

SIZES = (1, 2, 4, 8, 16, 32)
PREFIX = 200
PASSES = 15


def stream_gbs() -> float:
    """GB/s of summing a 1 GiB float32 tensor, the fastest of 5: what the cores can stream."""
    x = torch.ones(256 * 1024 * 1024)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    target = load("bundled")
    model = target.model
    fast = fastpath.of(model)
    if fast is None:
        print("this model has no fast forward here (see the log): nothing to compare", file=sys.stderr)
        return 1

    def modules(ids, cache):
        model(input_ids=ids, past_key_values=cache, use_cache=True)

    def ours(ids, cache):
        fast(ids, cache)

    ways = {"modules": modules, "ours": ours}
    times = {(w, n): [] for w in ways for n in SIZES}
    with torch.inference_mode():
        cache = new_cache()
        fast(torch.arange(PREFIX).unsqueeze(0) % target.vocab_size, cache)
        for _ in range(args.repeats):
            for n in SIZES:
                ids = (torch.arange(n) * 7 + 11).unsqueeze(0) % target.vocab_size
                for way, run in ways.items():
                    run(ids, cache)  # warm this shape
                    rollback(cache, PREFIX)
                    t0 = time.perf_counter()
                    for _ in range(PASSES):
                        run(ids, cache)
                        rollback(cache, PREFIX)
                    times[(way, n)].append((time.perf_counter() - t0) / PASSES * 1000)
    weights = sum(m.weight.numel() * m.weight.element_size() for m in model.modules()
                  if isinstance(m, torch.nn.Linear))
    gbs = stream_gbs()
    print(f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}; bundled model, "
          f"{PREFIX}-token cache; median of {args.repeats} repeats of {PASSES} passes")
    print(f"linear weights read per pass: {weights / 1e9:.2f} GB; this machine streams {gbs:.1f} GB/s, "
          f"so reading them takes {weights / gbs / 1e6:.1f} ms at least")
    print("| n | modules (ms) | ours (ms) | ours / modules | v(n) modules | v(n) ours |")
    print("|---|---|---|---|---|---|")
    med = {k: statistics.median(v) for k, v in times.items()}
    for n in SIZES:
        m, o = med[("modules", n)], med[("ours", n)]
        print(f"| {n} | {m:.1f} | {o:.1f} | {o / m:.2f} | {m / med[('modules', 1)]:.2f} | {o / med[('ours', 1)]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
