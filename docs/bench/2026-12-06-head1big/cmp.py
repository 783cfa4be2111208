"""Held-out, K = 4, both heads in one process: head_train's evaluate (the chain, greedy and T = 0.7,
as the cards) and the greedy tree the app drafts (width 3, beam 3), tokens per cycle."""
import json
import sys

import torch

from specviz import generate
from specviz.head.model import DEFAULT_PATH, load_head
from specviz.loading.loader import load
from specviz.proposers.head import HeadProposer
from specviz.training.head_train import evaluate, parser, read_prompts

torch.set_num_threads(2)
args = parser().parse_args([])
target = load("bundled")
heldout = read_prompts(args.heldout)
out = {}
for name, path in (("new", sys.argv[1]), ("v1", str(DEFAULT_PATH))):
    head = load_head(path, dtype=target.dtype, device=target.device)
    out[name] = evaluate(target, head, heldout, args.k, args.eval_tokens, print)
    tree = HeadProposer(head, target.model, width=3, beam=3)
    runs = [generate(target, p, proposer=tree, k=args.k, temperature=0.0, max_new_tokens=args.eval_tokens,
                     record=False) for p in heldout]
    out[name]["greedy_tree_tokens_per_cycle"] = round(sum(len(r.token_ids) for r in runs)
                                                      / sum(len(r.cycles) for r in runs), 3)
    print(name, "tree", out[name]["greedy_tree_tokens_per_cycle"], flush=True)
out.update(k=args.k, max_new_tokens=args.eval_tokens, heldout_prompts=len(heldout))
json.dump(out, open(sys.argv[2], "w"), indent=1)
