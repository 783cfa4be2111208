"""The draft head's training data (`python -m specviz.training.head_train`, steps 1 and 2).

1. Data: the target's own answers to assets/head/prompts_train*.txt, one greedy and `--samples`
   sampled at temperature 0.7 (one seed each), decoded in batches with left padding; the
   final-norm hidden state of every position is kept on the way (and cached per pass, `--data`).
2. Vocabulary: the tokens most frequent in those answers (ties by id, which follows the
   tokenizer's merge order), so the head's LM head is a slice of the target's.

A sequence is a dict: "tokens" (prompt then answer), "prompt_len", "feats" (the final norm's
output at every position but the last, bf16) and, with `aux`, "aux" (those decoder layers' outputs).
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

import torch

from specviz.head.model import DEFAULT_PATH
from specviz.passes.kvcache import new_cache

ASSETS = DEFAULT_PATH.parent
SAMPLED_T = 0.7  # the temperature the sampling benchmark uses
TRAIN_PROMPTS = sorted(ASSETS.glob("prompts_train*.txt"))  # the batches, oldest first


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


def answer_tokens(seqs: list[dict]) -> int:
    return sum(len(s["tokens"]) - s["prompt_len"] for s in seqs)
