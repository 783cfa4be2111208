"""Evaluating a trained draft head (`python -m specviz.training.head_train`, step 4): the engine
with method "head" on held-out prompts, greedy and sampled, and the cost ratio c = head step /
target step, measured in the same process.
"""
from __future__ import annotations

from specviz.decoding.engine import generate
from specviz.head.model import DraftHead
from specviz.proposers.head import HeadProposer
from specviz.training.head_data import SAMPLED_T


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
