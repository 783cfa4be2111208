"""What an explicit tree mask adds to a verify pass: a one-token pass, a 9-token chain with the model's
own causal mask, the same chain with our 4-D mask, a 9-token tree (three branches) and the tree with
the hidden rows kept, over a 300-token cache of the bundled model (a public prompt, repeated to that
length), rolled back after every pass; 40 interleaved repeats, medians.

    .venv/bin/python scripts/mask_cost.py
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.decoding.targets import LocalTarget  # noqa: E402
from specviz.drafting.tree import DraftTree  # noqa: E402
from specviz.models.kvcache import cache_len, rollback  # noqa: E402
from specviz.models.loader import load  # noqa: E402

CONTEXT, REPEATS = 300, 40
CHAIN = DraftTree([5, 6, 7, 8, 9, 10, 11, 12], [-1, 0, 1, 2, 3, 4, 5, 6])
TREE = DraftTree([5, 6, 7, 8, 9, 10, 11, 12], [-1, 0, 1, -1, 3, 4, -1, 6])


def main() -> None:
    target = load("bundled")
    local = LocalTarget(target)
    prompt = json.loads((ROOT.parent / "shared/bench/prompts.json").read_text())[2]["prompt"]
    ids = (target.encode(prompt, True) * 3)[:CONTEXT]
    cache = local.new_cache()
    local.forward(ids, cache, last_only=True)
    n = cache_len(cache)

    def masked(tree: DraftTree, hidden: bool = False):
        mask = tree.model_mask(cache, target.model.config, target.dtype, target.device)
        return lambda: local.forward([1] + tree.tokens, cache, tree.position_ids(n), mask, hidden=hidden)

    passes = {"one": lambda: local.forward([1], cache),
              "chain9": lambda: local.forward([1] + CHAIN.tokens, cache),
              "chain9-mask": masked(CHAIN), "tree9": masked(TREE), "tree9-hidden": masked(TREE, hidden=True)}
    times = {name: [] for name in passes}
    with torch.inference_mode():
        for rep in range(REPEATS + 1):  # the first round warms up and is not kept
            for name, run in passes.items():
                t0 = time.perf_counter()
                run()
                rollback(cache, n)
                if rep:
                    times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["one"])
    for name, ts in times.items():
        print(f"{name:14s} {1000 * statistics.median(ts):6.1f} ms  x{statistics.median(ts) / base:.2f}")


if __name__ == "__main__":
    main()
