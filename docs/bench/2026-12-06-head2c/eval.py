"""Held-out evaluation of head v2 run 5 (its training's own evaluation failed on an import: the
code was edited while it ran), and of v1 in the same process, as head2_train's conclude does."""
import json
import sys

import torch

from specviz.head.model import DEFAULT_PATH, load_head
from specviz.loading.loader import load
from specviz.training.head_train import evaluate, read_prompts, parser

torch.set_num_threads(2)
args = parser().parse_args([])
target = load("bundled", progress=print)
heldout = read_prompts(args.heldout)
out = {}
for name, path in (("v2c", sys.argv[1]), ("v1", str(DEFAULT_PATH))):
    print(name, path, flush=True)
    head = load_head(path, dtype=target.dtype, device=target.device)
    out[name] = evaluate(target, head, heldout, args.k, args.eval_tokens, print)
out["k"], out["max_new_tokens"], out["heldout_prompts"] = args.k, args.eval_tokens, len(heldout)
print(json.dumps(out, indent=1))
json.dump(out, open(sys.argv[2], "w"), indent=1)
