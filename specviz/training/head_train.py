"""`python -m specviz.training.head_train`: train the draft head (specviz/head/model.py) for the bundled target.

1. Data (head_data.py): the target's own answers to assets/head/prompts_train*.txt, one greedy and
   `--samples` sampled at temperature 0.7 (one seed each), decoded in batches with left padding;
   the final-norm hidden state of every position is kept on the way (and cached per pass, `--data`).
2. Vocabulary (head_data.py): the tokens most frequent in those answers (ties by id, which follows
   the tokenizer's merge order), so the head's LM head is a slice of the target's.
3. Training (head_fit.py): from a random answer position the head reads (f_t, x_{t+1}) and predicts
   f_{t+1}, then reads its own prediction to predict f_{t+2} (`--unroll`), as it does when drafting.
   Loss per step: smooth-L1 on the hidden state + cross-entropy against the target's own
   distribution on the subset. Fixed seeds throughout.
4. Evaluation (head_eval.py): the engine with method "head" on assets/head/prompts_heldout.txt,
   greedy and sampled, and the cost ratio c = head step / target step, measured in the same process.
Writes assets/head/head.safetensors and assets/head/card.json.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from specviz.head.model import DEFAULT_PATH, load_head, save_head
from specviz.loading.loader import load
from specviz.training.head_data import ASSETS, TRAIN_PROMPTS, answer_tokens, build_data, read_prompts, vocab_subset
from specviz.training.head_eval import evaluate
from specviz.training.head_fit import new_head, train


def parse_args(argv):
    return parser().parse_args(argv)


def parser(prog: str = "python -m specviz.training.head_train", description: str = __doc__.splitlines()[0]):
    """The script's options; head2_train.py starts from them and changes a few defaults."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--prompts", nargs="+", default=[str(f) for f in TRAIN_PROMPTS],
                    help="prompt files, one prompt a line (default: the shipped training batches)")
    ap.add_argument("--heldout", default=str(ASSETS / "prompts_heldout.txt"))
    ap.add_argument("--out", default=str(DEFAULT_PATH), help="where the weights go; card.json beside them")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--max-new-tokens", type=int, default=128, help="answer length in the training data")
    ap.add_argument("--gen-batch", type=int, default=96, help="prompts decoded together (a larger batch "
                    "gave more tokens/s on a CPU: docs/HEAD.md)")
    ap.add_argument("--sampled-share", type=int, default=1, help="every n-th prompt is also sampled at T=0.7")
    ap.add_argument("--samples", type=int, default=3,
                    help="sampled answers (T=0.7, one seed each) per sampled prompt, beside the greedy one")
    ap.add_argument("--vocab", type=int, default=12288,
                    help="size of the head's vocabulary subset (covered 95 %% of held-out answer tokens)")
    ap.add_argument("--blocks", type=int, default=1, help="MLP blocks in the head")
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=512, help="positions per training step")
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--unroll", type=int, default=2, help="draft calls trained from each position")
    ap.add_argument("--noise", type=float, default=0.1, help="std of the noise added to input hidden states")
    ap.add_argument("--k", type=int, default=4, help="draft length for the held-out evaluation")
    ap.add_argument("--eval-tokens", type=int, default=96)
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts (a quick trial)")
    ap.add_argument("--aux", type=int, nargs="*", default=[],
                    help="decoder layers whose outputs the data keeps beside the final norm's (head v2)")
    ap.add_argument("--data-only", action="store_true", help="generate (and cache) the data, then stop")
    ap.add_argument("--cached-only", action="store_true",
                    help="train on the passes already cached under --data, generating none (a time-boxed run)")
    ap.add_argument("--data", default=None, help="folder caching the generated data, one file per prompt file "
                    "and decoding pass: a pass already there is reused")
    return ap


def prepare(args, aux=None):
    """How both training scripts start: threads, a log, the clock, the bundled target and the data.
    `aux(target)` gives the decoder layers to keep when `--aux` was not given. Returns
    (log, t0, target, seqs, t_data); seqs is None after `--data-only`."""
    if args.threads:
        torch.set_num_threads(args.threads)
    log = lambda msg: print(msg, flush=True)
    t0 = time.perf_counter()
    target = load("bundled", progress=log)
    if args.aux is None and aux is not None:
        args.aux = aux(target)
    seqs = build_data(target, args, log)
    t_data = time.perf_counter() - t0
    if args.data_only:
        log(f"data ready in {t_data:.0f} s: {len(seqs)} answers")
        return log, t0, target, None, t_data
    return log, t0, target, seqs, t_data


def conclude(args, log, t0, t_data, target, head, seqs, stats: dict, card_name: str, assess=evaluate,
             **fields) -> int:
    """How both training scripts end: save the head, evaluate what ships (bf16) on the held-out
    prompts with `assess` (head_eval.evaluate, or v2's head2_eval.evaluate2), and write its card
    (`fields` are the script's own entries) beside the weights."""
    t_train = time.perf_counter() - t0 - t_data
    save_head(head, args.out)
    log(f"wrote {args.out}; evaluating on held-out prompts")
    shipped = load_head(args.out, dtype=target.dtype, device=target.device)
    heldout = read_prompts(args.heldout)
    evaluation = assess(target, shipped, heldout, args.k, args.eval_tokens, log)
    card = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "target": target.name, **fields,
            "machine": f"{platform.machine()} CPU, {torch.get_num_threads()} torch threads, torch {torch.__version__}",
            "params": sum(p.numel() for p in head.parameters()), "file_bytes": Path(args.out).stat().st_size,
            "vocab_subset": len(head.vocab_ids),
            "train_prompts": sum(len(read_prompts(f)[: args.limit]) for f in args.prompts),
            "samples_per_prompt": args.samples, "data_passes": getattr(args, "passes_used", []),
            "train_sequences": len(seqs), "train_answer_tokens": answer_tokens(seqs), "steps": args.steps,
            "batch": args.batch, "lr": args.lr, "unroll": args.unroll, "seed": args.seed, "final": stats,
            "heldout_prompts": len(heldout), "eval": {"k": args.k, "max_new_tokens": args.eval_tokens, **evaluation},
            "wall_s": {"data": round(t_data), "train": round(t_train), "total": round(time.perf_counter() - t0)}}
    Path(args.out).with_name(card_name).write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    log(json.dumps(card, indent=1))
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    log, t0, target, seqs, t_data = prepare(args)
    if seqs is None:
        return 0
    vocab_ids = vocab_subset(seqs, args.vocab, target.vocab_size)
    head = new_head(target.model, vocab_ids, args.seed, blocks=args.blocks,
                    target_name="SmolLM2-135M-Instruct (bundled)")
    log(f"training a {sum(p.numel() for p in head.parameters()) / 1e6:.2f} M-parameter head on "
        f"{answer_tokens(seqs)} answer tokens for {args.steps} steps")
    stats = train(head, seqs, target.model, args.steps, args.batch, args.lr, args.unroll, args.noise,
                  seed=args.seed, log=log)
    return conclude(args, log, t0, t_data, target, head, seqs, stats, "card.json", noise=args.noise)


if __name__ == "__main__":
    raise SystemExit(main())
