"""Where plain decoding's time goes: our AR loop against HF `generate` and a bare loop of model calls.

Three variants decode the same pre-tokenised prompts greedily on the same model object, interleaved
within each repeat (issue 25 §1):
- `hf`: transformers' `generate(do_sample=False)`, the anchor;
- `ours`: `generate(method="ar")` with trace recording off (bench's `ar:norecord`);
- `ours_rec`: the same with recording on (bench's `ar`, and the app's baseline, whose trace it shows);
- `bare`: the least a loop can do: model call, argmax, append, on a DynamicCache, nothing else.
Each prints tokens/s as the median over repeats per prompt and the geometric mean of the ratios;
then cProfile of `ours` on one prompt lists the functions with the most time of their own, so the
per-token work outside the model shows by name.

    .venv/bin/python scripts/ar_profile.py --limit 8 --max-new-tokens 64 --repeats 3
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from specviz.decoding.engine import generate  # noqa: E402
from specviz.measure.advisor import machine  # noqa: E402
from specviz.models.loader import load  # noqa: E402


def hf(target, ids, n):
    x = torch.tensor([ids])
    with torch.inference_mode():
        out = target.model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                                    pad_token_id=next(iter(target.eos_ids), 0),
                                    eos_token_id=sorted(target.eos_ids) or None)
    return out[0, len(ids):].tolist()


def ours(target, ids, n):
    return generate(target, ids, method="ar", max_new_tokens=n, chat=False, record=False).token_ids


def ours_rec(target, ids, n):
    return generate(target, ids, method="ar", max_new_tokens=n, chat=False, record=True).token_ids


@torch.inference_mode()
def bare(target, ids, n):
    cache, model = DynamicCache(config=target.model.config), target.model
    logits = model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True, logits_to_keep=1).logits
    out = [int(logits[0, -1].argmax())]
    while len(out) < n and out[-1] not in target.eos_ids:
        logits = model(input_ids=torch.tensor([[out[-1]]]), past_key_values=cache, use_cache=True).logits
        out.append(int(logits[0, -1].argmax()))
    return out


VARIANTS = {"hf": hf, "ours": ours, "ours_rec": ours_rec, "bare": bare}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", help="write the numbers as JSON here")
    args = ap.parse_args()
    target = load("bundled")
    items = json.loads((ROOT.parent / "shared" / "bench" / "prompts.json").read_text())[: args.limit]
    prompts = [target.encode(x["prompt"], chat=True) for x in items]
    n = args.max_new_tokens
    for fn in VARIANTS.values():  # warm-up: allocation and kernel choice
        fn(target, prompts[0], 4)
    times = {v: [[] for _ in prompts] for v in VARIANTS}  # seconds per token
    outputs = {}
    for rep in range(args.repeats):
        for j, ids in enumerate(prompts):
            order = list(VARIANTS)[rep % len(VARIANTS):] + list(VARIANTS)[:rep % len(VARIANTS)]
            for v in order:
                t0 = time.perf_counter()
                outputs[v, j] = VARIANTS[v](target, ids, n)
                times[v][j].append((time.perf_counter() - t0) / len(outputs[v, j]))
    rate = {v: [1 / statistics.median(ts) for ts in times[v]] for v in VARIANTS}
    same = all(len({tuple(outputs[v, j]) for v in VARIANTS}) == 1 for j in range(len(prompts)))
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine()}; torch threads "
          f"{torch.get_num_threads()}; {len(prompts)} prompts × {n} tokens, {args.repeats} repeats; "
          f"outputs identical: {same}")
    for v in VARIANTS:
        ratio = math.exp(statistics.fmean(math.log(a / b) for a, b in zip(rate[v], rate["hf"])))
        print(f"{v:8s} median {statistics.median(rate[v]):6.1f} tok/s   × hf {ratio:.3f}   per prompt "
              + " ".join(f"{a / b:.2f}" for a, b in zip(rate[v], rate["hf"])))
    prof = cProfile.Profile()
    prof.enable()
    ours(target, prompts[0], n)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
    print(text.getvalue())
    if args.out:
        Path(args.out).write_text(json.dumps(dict(rate=rate, times=times, same=same), indent=1))


if __name__ == "__main__":
    main()
