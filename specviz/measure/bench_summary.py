"""A bench run's numbers per variant, from its per-prompt rows: the median of a prompt's repeats, the
geometric mean of ratios over prompts, ratios repeat by repeat, and the summary bench.json keeps.

Arithmetic on plain dicts, no timing and no model: measure/bench.py makes the rows, bench_table.py
and viz/ show them.
"""
from __future__ import annotations

import math
import statistics


def median_row(runs: list[dict]) -> dict:
    """A variant's repeats on one prompt as one row: the median of every number, the repeats' own
    tokens/s in repeat order, and the first repeat's tokens (the same every repeat under greedy)."""
    row = {k: statistics.median(r[k] for r in runs) for k in runs[0]
           if isinstance(runs[0][k], (int, float)) and runs[0][k] is not None}
    row["new_tokens"] = len(runs[0]["token_ids"])
    row["new_tokens_repeats"] = [len(r["token_ids"]) for r in runs]  # sampled answers differ in length
    # in repeat order, to pair with the anchor's; tokens/s, since a sampled repeat's length differs
    row["tokens_per_s_repeats"] = [r["tokens_per_s"] for r in runs]
    if "acceptance_by_position" in runs[0]:  # the same every repeat under greedy decoding
        row["acceptance_by_position"] = runs[0]["acceptance_by_position"]
    row["token_ids"] = runs[0]["token_ids"]
    return row


def cycled(row: dict) -> bool:
    """Whether a run had a cycle to count τ and α over: one whose first token, from the prefill, was an
    end token has none, and its τ of 0 is not a mean acceptance length (it would pull the mean under
    our AR's 1)."""
    return row.get("cycles", 1) > 0


def geomean(xs) -> float:
    """The geometric mean of the positive values of `xs` (nan when none is): every ratio of tokens/s
    over questions is averaged this way, in the tables, the summaries and the category chart."""
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def repeat_ratios(row: dict, anchor: dict) -> list[float]:
    """The variant's tokens/s over the anchor's, repeat by repeat (the two ran one after the other
    in each repeat, so they share its machine state; a sampled repeat's length differs, so speeds,
    not times); [] for rows without per-repeat speeds."""
    ours, theirs = row.get("tokens_per_s_repeats") or [], anchor.get("tokens_per_s_repeats") or []
    return [a / b for a, b in zip(ours, theirs) if a > 0 and b > 0]


def summarise(results: dict, variants: list[str]) -> dict:
    """Per variant: geometric-mean speedups over hf and hf_pld, worst prompt, lossless count, and
    against hf repeat by repeat: the prompts where the variant was slower in every repeat."""
    out = {}
    for v in variants:
        rows = [(pid, r[v], r.get("hf"), r.get("hf_pld")) for pid, r in results.items()]
        s = {"tokens_per_s_median": statistics.median(x["tokens_per_s"] for _, x, _, _ in rows)}
        if rows[0][2] is not None:
            ratios = [x["tokens_per_s"] / h["tokens_per_s"] for _, x, h, _ in rows]
            s.update(speedup_vs_hf=geomean(ratios), worst_vs_hf=min(ratios),
                     identical_to_hf=sum(x["token_ids"] == h["token_ids"] for _, x, h, _ in rows))
            paired = {pid: repeat_ratios(x, h) for pid, x, h, _ in rows}
            if v != "hf" and all(len(rs) > 1 for rs in paired.values()):
                s["repeat_ratios_vs_hf"] = paired
                s["slower_every_repeat"] = [pid for pid, rs in paired.items() if max(rs) < 1.0]
        served = [(x, r["vllm"]) for pid, r in results.items() for x in [r[v]] if "vllm" in r]
        if served:
            s.update(speedup_vs_vllm=geomean(x["tokens_per_s"] / b["tokens_per_s"] for x, b in served),
                     identical_to_vllm=sum(x["token_ids"] == b["token_ids"] for x, b in served))
        if rows[0][3] is not None:
            s["speedup_vs_hf_pld"] = geomean(x["tokens_per_s"] / p["tokens_per_s"] for _, x, _, p in rows)
        for key in ("mean_accepted_tokens", "acceptance_rate", "retrieval_success"):
            vals = [x[key] for _, x, _, _ in rows if x.get(key) is not None and cycled(x)]
            if vals:
                s[key] = statistics.mean(vals)
        by_pos = [x["acceptance_by_position"] for _, x, _, _ in rows if x.get("acceptance_by_position")]
        if by_pos:  # α at draft position 1, 2, …, averaged over the prompts that reached it
            s["acceptance_by_position"] = [statistics.mean(a[d] for a in by_pos if len(a) > d)
                                           for d in range(max(map(len, by_pos)))]
        if rows[0][1].get("cycles") is not None:  # ours: where the wall-clock time went (the profile)
            xs = [x for _, x, _, _ in rows]
            s["profile"] = {
                "draft_share": statistics.mean(x["draft_s"] / x["wall_s"] for x in xs),
                "verify_share": statistics.mean(x["verify_s"] / x["wall_s"] for x in xs),
                "other_share": statistics.mean(x["other_s"] / x["wall_s"] for x in xs),
                # a run that ended at its prefill (the first token was an end token) has no cycle
                "ms_per_verify_pass": 1000 * statistics.median(x["verify_s"] / max(1, x["cycles"]) for x in xs),
                "tokens_per_verify_pass": statistics.mean(x["new_tokens"] / max(1, x["cycles"]) for x in xs)}
        out[v] = s
    return out
