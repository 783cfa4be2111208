"""`python -m specviz.training.head_train`: train the draft head (specviz/head/model.py) for the bundled target.

1. Data: the target's own answers to assets/head/prompts_train*.txt, one greedy and `--samples`
   sampled at temperature 0.7 (one seed each), decoded in batches with left padding; the
   final-norm hidden state of every position is kept on the way (and cached per pass, `--data`).
2. Vocabulary: the tokens most frequent in those answers (ties by id, which follows the
   tokenizer's merge order), so the head's LM head is a slice of the target's.
3. Training: from a random answer position the head reads (f_t, x_{t+1}) and predicts f_{t+1},
   then reads its own prediction to predict f_{t+2} (`--unroll`), as it does when drafting.
   Loss per step: smooth-L1 on the hidden state + cross-entropy against the target's own
   distribution on the subset. Fixed seeds throughout.
4. Evaluation: the engine with method "head" on assets/head/prompts_heldout.txt, greedy and
   sampled, and the cost ratio c = head step / target step, measured in the same process.
Writes assets/head/head.safetensors and assets/head/card.json.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import statistics
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

from specviz.decoding.engine import generate
from specviz.head.model import DEFAULT_PATH, DraftHead, config_for, load_head, save_head, target_parts
from specviz.loading.loader import load
from specviz.passes.kvcache import new_cache
from specviz.proposers.head import HeadProposer

ASSETS = DEFAULT_PATH.parent
SAMPLED_T = 0.7  # the temperature the sampling benchmark uses
TRAIN_PROMPTS = sorted(ASSETS.glob("prompts_train*.txt"))  # the batches, oldest first


# -- data ------------------------------------------------------------------------------------------
def read_prompts(path) -> list[str]:
    """One prompt a line; '#' lines are comments; the two characters \\n stand for a line break."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [s.replace("\\n", "\n") for s in (line.strip() for line in lines) if s and not s.startswith("#")]


@torch.inference_mode()
def generate_batch(model, prompts: list[list[int]], max_new: int, temperature: float,
                   gen: torch.Generator, eos: set[int], aux: tuple[int, ...] = ()) -> list[dict]:
    """Decode a batch (left padded); per sequence: its tokens and the hidden state of each but the last.

    `aux` names more layers whose outputs are kept as well (index i: the output of decoder layer
    i), for a head that fuses low, middle and high features (head v2).
    """
    B, P = len(prompts), max(map(len, prompts))
    ids = torch.zeros(B, P, dtype=torch.long)
    mask = torch.zeros(B, P, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, P - len(p):], mask[i, P - len(p):] = torch.tensor(p), 1
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    cache, feats, extra, new = new_cache(), [], [], []
    done = torch.zeros(B, dtype=torch.bool)
    eos_t = torch.tensor(sorted(eos) or [-1])

    def forward(**kw):
        out = model.base_model(**kw, past_key_values=cache, use_cache=True, output_hidden_states=bool(aux))
        if aux:  # hidden_states[0] is the embedding output, [i + 1] decoder layer i's
            extra.append(torch.stack([out.hidden_states[i + 1] for i in aux], dim=2).to(torch.bfloat16))
        return out.last_hidden_state

    h = forward(input_ids=ids, attention_mask=mask, position_ids=pos)
    for step in range(max_new):
        feats.append(h)
        logits = model.lm_head(h[:, -1]).float()
        if temperature == 0:
            nxt = logits.argmax(-1)
        else:
            nxt = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen)[:, 0]
        new.append(nxt)
        done |= torch.isin(nxt, eos_t)
        if done.all() or step + 1 == max_new:
            break
        mask = torch.cat([mask, torch.ones(B, 1, dtype=torch.long)], dim=1)
        pos = pos[:, -1:] + 1
        h = forward(input_ids=nxt[:, None], attention_mask=mask, position_ids=pos)
    aux_all = torch.cat(extra[:len(feats)], dim=1) if aux else None
    return _unpad(prompts, torch.cat(feats, dim=1), torch.stack(new, dim=1), eos, aux_all)


def _unpad(prompts, feats, new, eos, aux_all=None) -> list[dict]:
    out, P = [], max(map(len, prompts))
    for i, p in enumerate(prompts):
        gen = new[i].tolist()
        cut = next((j + 1 for j, t in enumerate(gen) if t in eos), len(gen))
        tokens = list(p) + gen[:cut]
        rows = slice(P - len(p), P - len(p) + len(tokens) - 1)  # f_k for k = 0 … L-2
        seq = {"tokens": torch.tensor(tokens), "feats": feats[i, rows].to(torch.bfloat16).clone(), "prompt_len": len(p)}
        if aux_all is not None:
            seq["aux"] = aux_all[i, rows].clone()  # [L-1, len(aux), d]
        out.append(seq)
    return out


def collect(model, prompts: list[list[int]], max_new: int, temperature: float, batch: int,
            seed: int, eos: set[int], log=print, aux: tuple[int, ...] = ()) -> list[dict]:
    """generate_batch over all prompts, shortest first so that a batch pads little."""
    gen = torch.Generator().manual_seed(seed)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    seqs: list[dict] = []
    t0 = time.perf_counter()
    for b in range(0, len(order), batch):
        chunk = [prompts[i] for i in order[b: b + batch]]
        seqs += generate_batch(model, chunk, max_new, temperature, gen, eos, aux)
        n = sum(len(s["tokens"]) - s["prompt_len"] for s in seqs)
        log(f"  T={temperature}: {len(seqs)}/{len(prompts)} answers, {n} tokens, {time.perf_counter() - t0:.0f} s")
    return seqs


def vocab_subset(seqs: list[dict], n: int, vocab: int) -> torch.Tensor:
    """The n token ids most frequent in the answers; ties (unseen tokens too) go to the lower id."""
    counts = torch.zeros(vocab, dtype=torch.long)
    for s in seqs:
        counts += torch.bincount(s["tokens"][s["prompt_len"]:], minlength=vocab)
    order = sorted(range(vocab), key=lambda t: (-int(counts[t]), t))
    return torch.tensor(order[:n])


# -- training --------------------------------------------------------------------------------------
def new_head(target_model, vocab_ids: torch.Tensor, seed: int, **sizes) -> DraftHead:
    """A freshly initialised head; its output norm starts as the target's final norm."""
    torch.manual_seed(seed)
    head = DraftHead(config_for(target_model, **sizes), vocab_ids)
    for name, p in head.named_parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.02)  # the target family's initializer_range
    with torch.no_grad():
        head.out_norm.copy_(target_parts(target_model)[1].weight.float())
    return head


def flatten(seqs: list[dict], unroll: int) -> tuple[torch.Tensor, ...]:
    """All hidden states F, the token X[g] chosen from each F[g], and the usable start indices.

    A start g trains the pairs (F[g+j], X[g+j]) → F[g+j+1] for j < unroll, so F[g+unroll] must lie
    in the same sequence. Starts begin at the last prompt position: training on the prompt's own
    positions as well measured no better (docs/HEAD.md).
    """
    feats, nxt, starts, off = [], [], [], 0
    for s in seqs:
        n = len(s["feats"])
        feats.append(s["feats"])
        nxt.append(s["tokens"][1: n + 1])
        starts += range(off + s["prompt_len"] - 1, off + n - unroll)
        off += n
    return torch.cat(feats), torch.cat(nxt), torch.tensor(starts, dtype=torch.long)


def _loss(head, w_sub, embed, F_all, X_all, idx, unroll: int, noise: float, ce_weight: float, gen):
    """Mean over `unroll` draft calls of smooth-L1(f̂, f) + ce_weight · CE(p_target, q_head)."""
    f = F_all[idx].float()
    if noise:  # the head drafts from its own imperfect guesses: train it on perturbed inputs (EAGLE)
        f = f + noise * torch.randn(f.shape, generator=gen)
    total = reg_sum = ce_sum = 0.0
    for j in range(unroll):
        with torch.no_grad():
            e = embed(X_all[idx + j]).float()
            target = F_all[idx + j + 1].float()
            p = torch.softmax(target @ w_sub.T, dim=-1)
        pred = head(f, e)
        logits = pred @ w_sub.T
        reg = F.smooth_l1_loss(pred, target)
        ce = -(p * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
        total = total + reg + ce_weight * ce
        reg_sum, ce_sum = reg_sum + reg.item(), ce_sum + ce.item()
        if j == 0:
            agree = logits.argmax(-1).eq(p.argmax(-1)).float().mean().item()
        f = pred  # the next draft call reads the head's own prediction, as at decoding time
    return total / unroll, reg_sum / unroll, ce_sum / unroll, agree


def train(head: DraftHead, seqs: list[dict], target_model, steps: int, batch: int = 512, lr: float = 2e-3,
          unroll: int = 2, noise: float = 0.1, ce_weight: float = 1.0, seed: int = 0,
          log=print, every: int = 50) -> dict:
    """AdamW with warm-up and cosine decay on random positions; returns means over the last tenth."""
    embed, _, lm_head = target_parts(target_model)
    w_sub = lm_head.weight.detach()[head.vocab_ids].float()
    F_all, X_all, starts = flatten(seqs, unroll)
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    head.train()
    tail, t0 = [], time.perf_counter()
    for step in range(steps):
        idx = starts[torch.randint(len(starts), (batch,), generator=gen)]
        loss, reg, ce, agree = _loss(head, w_sub, embed, F_all, X_all, idx, unroll, noise, ce_weight, gen)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        sched.step()
        if step >= steps - max(1, steps // 10):
            tail.append((loss.item(), reg, ce, agree))
        if (step + 1) % every == 0 or step + 1 == steps:
            log(f"  step {step + 1}/{steps}: loss {loss.item():.3f} (hidden {reg:.3f}, ce {ce:.3f}), "
                f"top-1 agreement {agree:.2f}, {time.perf_counter() - t0:.0f} s")
    head.eval()
    keys = ("loss", "hidden_loss", "ce_loss", "top1_agreement")
    return {k: round(statistics.mean(t[i] for t in tail), 4) for i, k in enumerate(keys)}


# -- evaluation ------------------------------------------------------------------------------------
def evaluate(target, head: DraftHead, prompts: list[str], k: int, max_new: int, log=print) -> dict:
    """α and tokens per cycle on held-out prompts, greedy and sampled, and the draft cost ratio c.

    c = (head time per drafted token) / (target time per plain decoding step),
    both measured here, in the same process, on the same prompts.
    """
    proposer = HeadProposer(head, target.model, width=1, beam=1)  # the chain: α per position as in HEAD.md
    out, plain_s, plain_n = {}, 0.0, 0
    for p in prompts:  # plain decoding: the target's cost of one step
        run = generate(target, p, method="ar", max_new_tokens=max_new, record=False)
        plain_s, plain_n = plain_s + run.metrics["decode_s"], plain_n + len(run.token_ids)
    subset = set(head.vocab_ids.tolist())
    for name, temperature in (("greedy", 0.0), (f"t{SAMPLED_T}", SAMPLED_T)):
        runs = [generate(target, p, proposer=proposer, k=k, temperature=temperature, seed=i,
                         max_new_tokens=max_new, record=False) for i, p in enumerate(prompts)]
        out[name] = _tally(runs, subset)
        log(f"  {name}: α {out[name]['alpha']}, {out[name]['mean_accepted_tokens']} tokens per cycle, "
            f"by position {out[name]['alpha_by_position']}")
    out["target_ms_per_step"] = round(1000 * plain_s / max(plain_n, 1), 2)
    out["c"] = round(out["greedy"]["draft_ms_per_token"] / out["target_ms_per_step"], 3)
    log(f"  c = {out['greedy']['draft_ms_per_token']} ms / {out['target_ms_per_step']} ms = {out['c']}")
    return out


def _tally(runs, subset: set[int]) -> dict:
    """α over all cycles of all runs (accepted / tried), by draft position, and draft cost per token."""
    by_pos: dict[int, list[int]] = {}
    for c in (c for r in runs for c in r.cycles):
        n_acc = len(c.accepted)
        for d in range(1, n_acc + (c.rejected is not None) + 1):
            by_pos.setdefault(d, [0, 0])[1] += 1
            by_pos[d][0] += d <= n_acc
    acc, tried = sum(a for a, _ in by_pos.values()), sum(n for _, n in by_pos.values())
    tokens = [t for r in runs for t in r.token_ids]
    cycles = sum(len(r.cycles) for r in runs)
    drafted = sum(r.metrics["drafted_tokens"] for r in runs)
    return {"alpha": round(acc / max(tried, 1), 3), "mean_accepted_tokens": round(len(tokens) / max(cycles, 1), 2),
            "alpha_by_position": [round(a / n, 3) for _, (a, n) in sorted(by_pos.items())],
            "draft_ms_per_token": round(1000 * sum(r.metrics["draft_s"] for r in runs) / max(drafted, 1), 2),
            "answer_tokens_in_subset": round(sum(t in subset for t in tokens) / max(len(tokens), 1), 3)}


# -- the script ------------------------------------------------------------------------------------
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


def build_data(target, args, log) -> list[dict]:
    """Greedy answers to every prompt, then `samples` sampled passes over every `sampled_share`-th one.

    Each (prompt file, pass) is cached on its own under `--data`, keyed by the file's content and the
    pass's settings, so adding a prompt file or a sampled pass generates only what is new.
    """
    seqs: list[dict] = []
    for path in args.prompts:
        texts = read_prompts(path)[: args.limit]
        ids = [target.encode(t) for t in texts]
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]
        passes = [(0.0, args.seed, 1)] + [(SAMPLED_T, args.seed + 1 + i, args.sampled_share)
                                          for i in range(args.samples)]
        for temperature, seed, every in passes:
            chosen = ids[::every]
            key = f"{Path(path).stem}-{digest}-t{temperature}-s{seed}-e{every}-n{args.max_new_tokens}"
            key += "".join(f"-a{i}" for i in args.aux) + ".pt"
            cached = Path(args.data) / key if args.data else None
            if cached is not None and cached.is_file():
                log(f"reusing {cached}")
                seqs += torch.load(cached)
                args.passes_used = [*getattr(args, "passes_used", []), key]
                continue
            if args.cached_only:
                log(f"skipping {key}: not cached, and --cached-only")
                continue
            log(f"generating answers to {len(chosen)} prompts of {path} (T={temperature}, seed {seed})")
            part = collect(target.model, chosen, args.max_new_tokens, temperature, args.gen_batch, seed,
                           target.eos_ids, log, tuple(args.aux))
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                torch.save(part, cached)
            seqs += part
            args.passes_used = [*getattr(args, "passes_used", []), key]
    return seqs


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


def conclude(args, log, t0, t_data, target, head, seqs, stats: dict, card_name: str, **fields) -> int:
    """How both training scripts end: save the head, evaluate what ships (bf16) on the held-out
    prompts, and write its card (`fields` are the script's own entries) beside the weights."""
    t_train = time.perf_counter() - t0 - t_data
    save_head(head, args.out)
    log(f"wrote {args.out}; evaluating on held-out prompts")
    shipped = load_head(args.out, dtype=target.dtype, device=target.device)
    heldout = read_prompts(args.heldout)
    evaluation = evaluate(target, shipped, heldout, args.k, args.eval_tokens, log)
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


def answer_tokens(seqs: list[dict]) -> int:
    return sum(len(s["tokens"]) - s["prompt_len"] for s in seqs)


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
