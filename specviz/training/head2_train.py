"""`python -m specviz.training.head2_train`: train draft head v2 (specviz/head/v2.py) for the bundled target.

1. Data: head_data.py's, with the outputs of decoder layers `--aux` (default 2 and num_layers // 2)
   kept beside the final norm's (`build_data`; its cached passes under `--data` are reused).
2. Vocabulary: head_data.py's `vocab_subset`.
3. Training, the EAGLE-3 way (training-time test): from a random answer position t, the head
   fuses the TRUE features at t (layer low's, layer mid's and the final norm's f_t) into h_0 and
   runs `--unroll` U draft steps exactly as it drafts: step j reads h_{j-1} and the TRUE token
   x_{t+j}, attends to steps 1..j of the same sample, and predicts x_{t+j+1}. Its loss is the
   cross-entropy against the target's own distribution there, softmax(W_sub · f_{t+j}) (the
   true final-norm output at position t+j, through the subset LM head), averaged over the U
   steps. No hidden-state regression: the head learns to read its own h. AdamW, warm-up then
   cosine decay, fixed seeds.
4. Evaluation: head2_eval.py's `evaluate2`, offline, since the engine does not draft with v2: greedy
   α, α by position and tokens per cycle at K = `--k` on the held-out prompts, the engine's greedy
   chain replayed over the target's own answers.
Writes assets/head/head2.safetensors and card2.json beside it (never v1's head.safetensors).
"""
from __future__ import annotations

import statistics
from dataclasses import asdict
from pathlib import Path

import torch

from specviz.head.model import DEFAULT_PATH, target_parts
from specviz.head.v2 import DraftHead2, config_for2
from specviz.training.head2_eval import evaluate2
from specviz.training.head_data import answer_tokens, vocab_subset
from specviz.training.head_fit import fit
from specviz.training.head_train import conclude, parser, prepare

DEFAULT_PATH2 = DEFAULT_PATH.with_name("head2.safetensors")


def new_head2(target_model, vocab_ids: torch.Tensor, seed: int, **sizes) -> DraftHead2:
    """A freshly initialised v2 head; its output norm starts as the target's final norm."""
    torch.manual_seed(seed)
    head = DraftHead2(config_for2(target_model, **sizes), vocab_ids)
    for p in head.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.02)  # the target family's initializer_range
    with torch.no_grad():
        head.out_norm.copy_(target_parts(target_model)[1].weight.float())
    return head


def flatten2(seqs: list[dict], unroll: int) -> tuple[torch.Tensor, ...]:
    """(F, A, X, starts) over the answers: final-norm outputs F [N, d], decoder-layer outputs
    A [N, 2, d], the token X[g] chosen from F[g], and the usable start rows.

    Row g of a sequence is its position t = prompt_len - 1 + (g - its first row): only the last
    prompt position and the answer are kept, as only they are read. A start g trains U steps;
    step j reads X[g + j - 1] = x_{t+j} and learns softmax(W_sub · F[g + j]), so F[g + U] must lie
    in the same sequence (the starts `flatten` in head_data.py picks)."""
    feats, aux, nxt, starts, off = [], [], [], [], 0
    for s in seqs:
        first, n = s["prompt_len"] - 1, len(s["feats"])
        feats.append(s["feats"][first:])
        aux.append(s["aux"][first:])
        nxt.append(s["tokens"][first + 1: n + 1])
        starts += range(off, off + max(0, n - unroll - first))
        off += n - first
    return torch.cat(feats), torch.cat(aux), torch.cat(nxt), torch.tensor(starts, dtype=torch.long)


def unroll_loss(head: DraftHead2, w_sub, embed, F_all, A_all, X_all, idx, unroll: int):
    """(mean cross-entropy over the U steps, top-1 agreement with the target at each step)."""
    feats = torch.cat([A_all[idx].float().flatten(1), F_all[idx].float()], dim=-1)  # [low ; mid ; f_t]
    h = head.root(feats)
    keys = values = head.empty_cache(len(idx), h)
    total, agree = 0.0, []
    for j in range(1, unroll + 1):
        with torch.no_grad():
            e = embed(X_all[idx + j - 1]).float()  # x_{t+j}, the true token
            p = torch.softmax(F_all[idx + j].float() @ w_sub.T, dim=-1)  # the target's distribution of x_{t+j+1}
        h, out, keys, values = head.step(h, e, keys, values)
        logits = out @ w_sub.T
        total = total - (p * torch.log_softmax(logits, dim=-1)).sum(-1).mean()
        agree.append(logits.argmax(-1).eq(p.argmax(-1)).float().mean().item())
    return total / unroll, agree


def train2(head: DraftHead2, seqs: list[dict], target_model, steps: int, batch: int = 512, lr: float = 1e-3,
           unroll: int = 4, seed: int = 0, log=print, every: int = 50) -> dict:
    """AdamW with warm-up and cosine decay on random answer positions; means over the last tenth."""
    embed, _, lm_head = target_parts(target_model)
    w_sub = lm_head.weight.detach()[head.vocab_ids].float()
    F_all, A_all, X_all, starts = flatten2(seqs, unroll)
    if len(starts) == 0:
        raise ValueError(f"no answer is long enough to train {unroll} steps from")

    def loss_at(idx, gen):
        loss, agree = unroll_loss(head, w_sub, embed, F_all, A_all, X_all, idx, unroll)
        return loss, (agree,)

    def describe(loss, agree):
        return f"ce {loss:.3f}, top-1 agreement by step {', '.join(f'{a:.2f}' for a in agree)}"

    tail, took = fit(head, starts, steps, batch, lr, seed, loss_at, describe, log, every)
    return {"ce_loss": round(statistics.mean(t[0] for t in tail), 4),
            "top1_agreement_by_step": [round(statistics.mean(t[1][j] for t in tail), 4) for j in range(unroll)],
            "s_per_step": round(took / max(steps, 1), 3)}


def parse_args2(argv):
    ap = parser("python -m specviz.training.head2_train", __doc__.splitlines()[0])
    ap.set_defaults(out=str(DEFAULT_PATH2), unroll=4, lr=1e-3, aux=None)
    ap.add_argument("--heads", type=int, default=4, help="attention heads of the head's one layer")
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--intermediate", type=int, default=1536, help="width of its MLP")
    args = ap.parse_args(argv)
    if Path(args.out).resolve() == DEFAULT_PATH.resolve():
        ap.error(f"--out {args.out} is head v1's file: write v2 elsewhere")
    return args


def main(argv=None) -> int:
    args = parse_args2(argv)
    # (low, mid) by default: the layers head_train's --aux 2 15 keeps for the bundled target
    log, t0, target, seqs, t_data = prepare(args, aux=lambda t: [min(2, t.model.config.num_hidden_layers - 1),
                                                                 t.model.config.num_hidden_layers // 2])
    if seqs is None:
        return 0
    vocab_ids = vocab_subset(seqs, args.vocab, target.vocab_size)
    head = new_head2(target.model, vocab_ids, args.seed, aux_layers=list(args.aux), heads=args.heads,
                     head_dim=args.head_dim, intermediate=args.intermediate,
                     target_name="SmolLM2-135M-Instruct (bundled)")
    log(f"training a {sum(p.numel() for p in head.parameters()) / 1e6:.2f} M-parameter v2 head on "
        f"{answer_tokens(seqs)} answer tokens for {args.steps} steps, unroll {args.unroll}")
    stats = train2(head, seqs, target.model, args.steps, args.batch, args.lr, args.unroll, args.seed, log)
    return conclude(args, log, t0, t_data, target, head, seqs, stats, "card2.json", assess=evaluate2,
                    format=head.FORMAT, config=asdict(head.cfg))


if __name__ == "__main__":
    raise SystemExit(main())
