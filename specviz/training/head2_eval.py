"""Evaluating draft head v2 (specviz/head/v2.py) offline: its greedy α on held-out prompts.

Head v2 is not shipped, and the engine does not hand it its features (the outputs of two decoder
layers beside the final norm's), so it is measured here without the engine. The target answers
each held-out prompt greedily (head_data.collect, with those layers kept: the very data the head
trains on), and the run the engine would make over that answer is replayed: from each cycle's
newest committed token x_{t+1}, the head drafts a greedy chain of up to K tokens from the features
at t; the cycle accepts the longest prefix equal to the target's own next tokens and commits it
plus one token from the target, as greedy verification does. A cycle drafts no deeper than the
answer's tokens left minus one, as the engine's token budget allows.

So α, α by position and tokens per cycle are those of greedy chain drafting (width 1) at K. Under
sampling there is nothing to replay: a sampled run's tokens depend on the draft, so the card has
greedy numbers only.
"""
from __future__ import annotations

import torch

from specviz.head.model import target_parts
from specviz.head.v2 import DraftHead2
from specviz.training.head_data import collect

EVAL_BATCH = 16  # held-out prompts the target answers together


@torch.inference_mode()
def chain(head: DraftHead2, embed: torch.nn.Module, w_sub: torch.Tensor, feats: torch.Tensor, first: int,
          k: int) -> tuple[list[int], list[torch.Tensor]]:
    """(k tokens, the subset logits each was the argmax of): the head's greedy chain from the root
    features `feats` = [layer low's output ; layer mid's ; f_t] at t, and x_{t+1} = `first`. Step j
    reads the h and K/V step j-1 left and the token before it, as in training (head2_train.unroll_loss)."""
    h = head.root(feats[None].to(w_sub.dtype))
    keys = values = head.empty_cache(1, h)
    x, tokens, logits = first, [], []
    for _ in range(k):
        e = embed(torch.tensor([x], device=h.device)).to(h.dtype)
        h, out, keys, values = head.step(h, e, keys, values)
        row = (out @ w_sub.T)[0]
        x = int(head.vocab_ids[int(row.argmax())])
        tokens.append(x)
        logits.append(row)
    return tokens, logits


def replay(head: DraftHead2, embed: torch.nn.Module, w_sub: torch.Tensor, seq: dict, k: int) -> list[tuple[int, int]]:
    """(accepted, drafted) per cycle of the greedy run over one answer (see the module docstring)."""
    feats = torch.cat([seq["aux"].flatten(1), seq["feats"]], dim=-1)
    tokens = seq["tokens"].tolist()
    t, cycles = seq["prompt_len"] - 1, []  # the prefill committed x_{t+1}, the answer's first token
    while (left := len(tokens) - 2 - t) >= 1:  # the answer's tokens after the newest committed one
        drafted = chain(head, embed, w_sub, feats[t], tokens[t + 1], min(k, left - 1))[0]
        truth = tokens[t + 2: t + 2 + len(drafted)]
        accepted = next((j for j, (d, y) in enumerate(zip(drafted, truth)) if d != y), len(drafted))
        cycles.append((accepted, len(drafted)))
        t += accepted + 1
    return cycles


def evaluate2(target, head: DraftHead2, prompts: list[str], k: int, max_new: int, log=print) -> dict:
    """Greedy α, α by draft position and tokens per cycle of `head` at K = `k` on `prompts`, replayed
    over the target's own greedy answers of up to `max_new` tokens."""
    embed, _, lm_head = target_parts(target.model)
    w_sub = lm_head.weight.detach()[head.vocab_ids].to(next(head.parameters()).dtype)
    seqs = collect(target.model, [target.encode(p) for p in prompts], max_new, 0.0, EVAL_BATCH, 0,
                   target.eos_ids, log, tuple(head.hidden_layers))
    by_pos: dict[int, list[int]] = {}
    n_cycles = n_tokens = in_subset = 0
    subset = set(head.vocab_ids.tolist())
    for seq in seqs:
        answer = seq["tokens"][seq["prompt_len"]:].tolist()
        n_tokens, in_subset = n_tokens + len(answer), in_subset + sum(t in subset for t in answer)
        for accepted, drafted in replay(head, embed, w_sub, seq, k):
            n_cycles += 1
            for d in range(1, min(drafted, accepted + 1) + 1):  # the accepted positions and the first miss
                by_pos.setdefault(d, [0, 0])[1] += 1
                by_pos[d][0] += d <= accepted
    acc, tried = sum(a for a, _ in by_pos.values()), sum(n for _, n in by_pos.values())
    greedy = {"alpha": round(acc / max(tried, 1), 3), "mean_accepted_tokens": round(n_tokens / max(n_cycles, 1), 2),
              "alpha_by_position": [round(a / n, 3) for _, (a, n) in sorted(by_pos.items())],
              "answer_tokens_in_subset": round(in_subset / max(n_tokens, 1), 3)}
    log(f"  greedy (replayed offline): α {greedy['alpha']}, {greedy['mean_accepted_tokens']} tokens per cycle, "
        f"by position {greedy['alpha_by_position']}")
    return {"how": "greedy chain replayed offline over the target's greedy answers (head2_eval.py)", "greedy": greedy}
