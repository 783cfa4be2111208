"""Which source drafted the tokens the hybrid commits, per benchmark prompt (greedy, 128 tokens)."""
import json, sys, collections
import torch
torch.set_num_threads(2)
from specviz import load, generate
t = load("bundled")
prompts = json.load(open("/work/shared/bench/prompts.json"))
prompts = prompts["prompts"] if isinstance(prompts, dict) else prompts
out = {}
for p in prompts:
    tr = generate(t, p["prompt"], method="hybrid", max_new_tokens=128)
    acc = collections.Counter(); cyc = 0
    for c in tr.cycles:
        cyc += 1
        for n in c.nodes:
            if n.status == "accepted":
                acc[n.source] += 1
    out[p["id"]] = {"cycles": cyc, "accepted_by_source": dict(acc)}
    print(p["id"], cyc, dict(acc), flush=True)
json.dump(out, open("/work/pilot/sources.json", "w"), indent=1)
