"""Build suffix decoding's answer corpus (proposers/corpus.py): the target's own greedy answers to prompts.

    python -m specviz.training.corpus_build [--target bundled] [--prompts FILE,FILE] [--limit N]
                                            [--max-new-tokens 192] [--batch 32] [--out PATH]

The default prompts are those written for the draft head's training (assets/head/prompts_train.txt and
prompts_train_3.txt), never a benchmark's. Answers are decoded greedily by transformers' `generate`, a batch
of prompts at a time (left-padded, each with the chat template), and written with the digest of the
tokenizer's vocabulary, which `corpus.for_target` checks before a target drafts from them. Any text would do
for drafting (verification decides what is kept), so batching's last bits do not matter here.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from specviz.loading.loader import ModelLoadError, load
from specviz.proposers.corpus import DEFAULT_PATH, FORMAT, tokenizer_digest
from specviz.training.head_data import read_prompts

HEAD_PROMPTS = Path(__file__).resolve().parents[2] / "assets" / "head"
DEFAULT_PROMPTS = (HEAD_PROMPTS / "prompts_train.txt", HEAD_PROMPTS / "prompts_train_3.txt")


@torch.inference_mode()
def answers(target, prompts: list[str], max_new: int, batch: int, log=None) -> list[list[int]]:
    """Greedy answers (token ids, padding and end of text left out), `batch` prompts a call."""
    log = log or (lambda line: print(line, flush=True))
    tok = target.tokenizer
    if tok.pad_token is None and tok.eos_token is None:
        raise ValueError("the tokenizer has neither a padding nor an end-of-text token to pad a batch of "
                         "prompts with, so no corpus can be built for this target")
    side, tok.padding_side = tok.padding_side, "left"
    had_pad = tok.pad_token is not None
    if not had_pad:  # batches pad with the end-of-text token, as generate's own default does
        tok.pad_token = tok.eos_token
    pad = tok.pad_token_id
    out, started = [], time.monotonic()
    try:
        for i in range(0, len(prompts), batch):
            texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                             add_generation_prompt=True) for p in prompts[i:i + batch]]
            enc = tok(texts, return_tensors="pt", padding=True)
            made = target.model.generate(**enc, max_new_tokens=max_new, do_sample=False, pad_token_id=pad)
            ends = set(target.eos_ids) | {pad}
            out += [[t for t in row if t not in ends] for row in made[:, enc.input_ids.shape[1]:].tolist()]
            log(f"{len(out)}/{len(prompts)} prompts, {sum(map(len, out))} tokens, "
                f"{time.monotonic() - started:.0f} s")
    finally:
        tok.padding_side = side
        if not had_pad:
            tok.pad_token = None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="bundled")
    ap.add_argument("--prompts", default=",".join(str(p) for p in DEFAULT_PROMPTS),
                    help="prompt files, comma-separated (one prompt a line, as the head's training reads them)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", default=str(DEFAULT_PATH))
    args = ap.parse_args(argv)
    files = [Path(p) for p in args.prompts.split(",") if p]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        print(f"no such prompt file: {', '.join(missing)}", file=sys.stderr)
        return 2
    prompts = [p for f in files for p in read_prompts(f)][: args.limit]
    if not prompts:
        print("the prompt files hold no prompts", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        target = load(args.target)
        ids = answers(target, prompts, args.max_new_tokens, args.batch)
    except (ModelLoadError, ValueError) as e:
        print(f"no corpus built: {e}", file=sys.stderr)
        return 2
    data = {"format": FORMAT, "target": args.target, "tokenizer": tokenizer_digest(target.tokenizer),
            "made": {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                     "machine": f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads",
                     "prompts": [f.name for f in files], "prompt_count": len(prompts),
                     "max_new_tokens": args.max_new_tokens, "batch": args.batch, "greedy": True,
                     "tokens": sum(map(len, ids)), "seconds": round(time.monotonic() - started)},
            "answers": ids}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, separators=(",", ":")), encoding="utf-8")
    print(f"wrote {out}: {len(ids)} answers, {data['made']['tokens']} tokens")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
