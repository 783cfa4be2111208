"""What a pass pays to append to the KV cache: transformers' DynamicCache, which concatenates the
whole layer with the new states on every pass, against new_cache's GrowingLayer, which writes them
into spare room in place (models/kvcache.py).

    python scripts/append_cost.py [--repeats 30] [--contexts 100,300,600,1000,2000]

The bundled model (with its speed-ups, as the engine runs it) takes one-token passes over a cache
of each context length, four in a row and then rolled back, for both caches in turn; the order
alternates each repeat, so the machine's drift falls on both alike. Prints the median milliseconds
per pass of each, and the median of the paired differences.
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import DynamicCache  # noqa: E402

from specviz.models.kvcache import new_cache, rollback  # noqa: E402
from specviz.models.loader import load  # noqa: E402

STEPS = 4  # passes timed together, then rolled back


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--contexts", default="100,300,600,1000,2000")
    args = ap.parse_args()
    model = load("bundled").model
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} · {platform.processor() or platform.machine()} · "
          f"torch {torch.__version__} · {torch.get_num_threads()} threads")
    print("context | DynamicCache ms/pass | new_cache ms/pass | median paired difference ms")
    ids = torch.randint(100, 40000, (max(int(c) for c in args.contexts.split(",")),),
                        generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        for n in (int(c) for c in args.contexts.split(",")):
            caches = {"dynamic": DynamicCache(), "growing": new_cache()}
            for cache in caches.values():
                model(input_ids=ids[None, :n], past_key_values=cache, use_cache=True, logits_to_keep=1)
            times: dict[str, list[float]] = {name: [] for name in caches}
            for r in range(args.repeats):
                for name in (("dynamic", "growing") if r % 2 else ("growing", "dynamic")):
                    t0 = time.perf_counter()
                    for j in range(STEPS):
                        model(input_ids=ids[None, j:j + 1], past_key_values=caches[name], use_cache=True)
                    times[name].append((time.perf_counter() - t0) / STEPS)
                    rollback(caches[name], n)
            diff = [a - b for a, b in zip(times["dynamic"], times["growing"])]
            print(f"{n} | {1e3 * statistics.median(times['dynamic']):.1f} | "
                  f"{1e3 * statistics.median(times['growing']):.1f} | {1e3 * statistics.median(diff):.2f}", flush=True)


if __name__ == "__main__":
    main()
