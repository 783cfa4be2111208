"""Tree rollback cost against context length: kvcache.rollback with the kept positions listed (a
gather of every position) and kvcache.keep_path (moves only the accepted path).

    python scripts/rollback_bench.py [--repeats 50]

Caches of the bundled model's shape (30 layers, 3 key/value heads of 64, float32), each holding the
context plus a 16-node verify pass; 3 nodes accepted. Prints the median microseconds per rollback.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specviz.models.kvcache import keep_path, new_cache, rollback  # noqa: E402

LAYERS, HEADS, DIM, NODES, PATH = 30, 3, 64, 16, [2, 7, 11]


def filled(n: int):
    cache = new_cache()
    for i in range(LAYERS):
        k = torch.randn(1, HEADS, n + NODES, DIM)
        cache.update(k, k.clone(), i)
    return cache


def median_us(cut, n: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        cache = filled(n)
        t0 = time.perf_counter()
        cut(cache, n)
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print("context | rollback(list) µs | keep_path µs")
    for n in (100, 250, 500, 1000, 2000):
        gather = median_us(lambda c, n: rollback(c, list(range(n)) + [n + p for p in PATH]), n, args.repeats)
        moved = median_us(lambda c, n: keep_path(c, n, [n + p for p in PATH]), n, args.repeats)
        print(f"{n} | {gather:.0f} | {moved:.0f}")


if __name__ == "__main__":
    main()
