"""Training the draft head (`python -m specviz.training.head_train`, step 3).

From a random answer position the head reads (f_t, x_{t+1}) and predicts f_{t+1}, then reads its
own prediction to predict f_{t+2} (`--unroll`), as it does when drafting. Loss per step: smooth-L1
on the hidden state + cross-entropy against the target's own distribution on the subset. Fixed
seeds throughout.
"""
from __future__ import annotations

import math
import statistics
import time

import torch
import torch.nn.functional as F

from specviz.head.model import DraftHead, config_for, target_parts
from specviz.training.head_data import flatten


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


def optimiser(head, steps: int, lr: float):
    """(AdamW with weight decay 0.01, its schedule): a linear warm-up over the first 5 % of the steps,
    then cosine decay to 0; both heads' training uses it."""
    opt = torch.optim.AdamW(head.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    return opt, sched


def fit(head, starts: torch.Tensor, steps: int, batch: int, lr: float, seed: int, loss_at, describe,
        log=print, every: int = 50) -> tuple[list[tuple], float]:
    """The loop both heads train with: AdamW with warm-up and cosine decay (`optimiser`), on `batch`
    random starting positions a step, gradients clipped at norm 1.

    loss_at(idx, gen) gives (the loss to step on, a tuple of what else to keep); describe(loss, *kept)
    words a progress line every `every` steps. Returns ((loss, *kept) of each of the last tenth of the
    steps, seconds taken), with the head back in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    opt, sched = optimiser(head, steps, lr)
    head.train()
    tail, t0 = [], time.perf_counter()
    for step in range(steps):
        idx = starts[torch.randint(len(starts), (batch,), generator=gen)]
        loss, kept = loss_at(idx, gen)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        sched.step()
        if step >= steps - max(1, steps // 10):
            tail.append((loss.item(), *kept))
        if (step + 1) % every == 0 or step + 1 == steps:
            log(f"  step {step + 1}/{steps}: {describe(loss.item(), *kept)}, {time.perf_counter() - t0:.0f} s")
    head.eval()
    return tail, time.perf_counter() - t0


def train(head: DraftHead, seqs: list[dict], target_model, steps: int, batch: int = 512, lr: float = 2e-3,
          unroll: int = 2, noise: float = 0.1, ce_weight: float = 1.0, seed: int = 0,
          log=print, every: int = 50) -> dict:
    """Fits the head on random positions of `seqs` (`fit`); returns means over the last tenth."""
    embed, _, lm_head = target_parts(target_model)
    w_sub = lm_head.weight.detach()[head.vocab_ids].float()
    F_all, X_all, starts = flatten(seqs, unroll)

    def loss_at(idx, gen):
        loss, reg, ce, agree = _loss(head, w_sub, embed, F_all, X_all, idx, unroll, noise, ce_weight, gen)
        return loss, (reg, ce, agree)

    def describe(loss, reg, ce, agree):
        return f"loss {loss:.3f} (hidden {reg:.3f}, ce {ce:.3f}), top-1 agreement {agree:.2f}"

    tail, _ = fit(head, starts, steps, batch, lr, seed, loss_at, describe, log, every)
    keys = ("loss", "hidden_loss", "ce_loss", "top1_agreement")
    return {k: round(statistics.mean(t[i] for t in tail), 4) for i, k in enumerate(keys)}
