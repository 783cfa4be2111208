"""Held-out greedy, K = 4: the chain (the card's measure) and the greedy tree the app drafts
(width 3, beam 3), for v1 and v2's second run, in one process."""
import json, sys
import torch
from specviz import generate
from specviz.head.model import DEFAULT_PATH, load_head
from specviz.loading.loader import load
from specviz.proposers.head import HeadProposer
from specviz.training.head_train import read_prompts, parser
torch.set_num_threads(2)
args = parser().parse_args([])
target = load("bundled")
heldout = read_prompts(args.heldout)
out = {}
for name, path in (("v1", str(DEFAULT_PATH)), ("v2c", "/work/headdata2/v2c/head2.safetensors")):
    head = load_head(path, dtype=target.dtype, device=target.device)
    for shape, (w, b) in (("chain", (1, 1)), ("tree", (3, 3))):
        prop = HeadProposer(head, target.model, width=w, beam=b)
        runs = [generate(target, p, proposer=prop, k=args.k, temperature=0.0, max_new_tokens=args.eval_tokens,
                         record=False) for p in heldout]
        toks = sum(len(r.token_ids) for r in runs); cyc = sum(len(r.cycles) for r in runs)
        depth = [len(c.accepted) for r in runs for c in r.cycles]
        out[f"{name} {shape}"] = {"tokens_per_cycle": round(toks / cyc, 3), "cycles": cyc, "tokens": toks,
                                  "mean_accepted": round(sum(depth) / len(depth), 3)}
        print(name, shape, out[f"{name} {shape}"], flush=True)
out.update(k=args.k, max_new_tokens=args.eval_tokens, heldout_prompts=len(heldout))
json.dump(out, open(sys.argv[1], "w"), indent=1)
