"""What an explicit tree mask adds to a verify pass: a one-token pass, a 9-token chain with the model's
own causal mask, the same chain with our 4-D mask, a 9-token tree (three branches) and the tree with
the hidden rows kept, over a 300-token cache of the bundled model, rolled back after every pass;
40 interleaved repeats, medians.

    .venv/bin/python scripts/mask_cost.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import time, statistics, torch, json
from specviz.models.loader import load
from specviz.decoding.targets import LocalTarget
from specviz.drafting.tree import DraftTree
from specviz.models.kvcache import rollback, cache_len
t = load("bundled")
lt = LocalTarget(t)
prompts = json.load(open(Path(__file__).resolve().parents[2] / "shared/bench/prompts.json"))
ids = t.encode(prompts[2]["prompt"], True)[:300]
ids = (ids * 3)[:300]
cache = lt.new_cache()
lt.forward(ids, cache, last_only=True)
n = cache_len(cache)
chain = DraftTree([5, 6, 7, 8, 9, 10, 11, 12], [-1, 0, 1, 2, 3, 4, 5, 6])
tree = DraftTree([5, 6, 7, 8, 9, 10, 11, 12], [-1, 0, 1, -1, 3, 4, -1, 6])
assert chain.is_chain and not tree.is_chain
def run(kind):
    if kind == "one":
        lt.forward([1], cache)
    elif kind == "chain9":
        lt.forward([1] + chain.tokens, cache)
    elif kind == "chain9-mask":
        m = chain.model_mask(cache, t.model.config, t.dtype, t.device)
        lt.forward([1] + chain.tokens, cache, chain.position_ids(n), m)
    elif kind == "tree9":
        m = tree.model_mask(cache, t.model.config, t.dtype, t.device)
        lt.forward([1] + tree.tokens, cache, tree.position_ids(n), m)
    elif kind == "tree9-hidden":
        m = tree.model_mask(cache, t.model.config, t.dtype, t.device)
        lt.forward([1] + tree.tokens, cache, tree.position_ids(n), m, hidden=True)
    rollback(cache, n)
kinds = ["one", "chain9", "chain9-mask", "tree9", "tree9-hidden"]
res = {k: [] for k in kinds}
with torch.inference_mode():
    for k in kinds: run(k)
    for rep in range(40):
        for k in kinds:
            t0 = time.perf_counter(); run(k); res[k].append(time.perf_counter() - t0)
base = statistics.median(res["one"])
for k in kinds:
    print(f"{k:14s} {1000*statistics.median(res[k]):6.1f} ms  x{statistics.median(res[k])/base:.2f}")
