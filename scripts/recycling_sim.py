"""Would Token Recycling raise tokens per pass here? An offline replay before building it (issue 25 §4).

Token Recycling (Luo et al., arXiv 2408.08696), as the paper describes it: keep, for every token,
the target's top-k next tokens from the last time that token was an input (an adjacency matrix);
each cycle, read a draft tree out of it breadth-first from the newest token along a fixed
template, verify the tree, and overwrite the rows of every token the pass saw.

This replays greedy reference outputs (recorded by a bench run: the HF plain anchor's token ids)
through that rule without a draft model: one teacher-forced target pass per prompt gives the row
after every position, the tree is built from the matrix as it stands, the cycle accepts the
longest path that matches the reference, and the rows of the path's tokens update the matrix.
Rows of off-path nodes are not known here, so the matrix is updated less often than in the paper
(the replay is pessimistic on that count). Cost is priced with the target's cost profile v(n).

    .venv/bin/python scripts/recycling_sim.py docs/bench/2026-12-01-seams/bench.json
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from specviz.decoding.planner import verify_cost  # noqa: E402
from specviz.models.loader import load  # noqa: E402

TEMPLATES = {  # children per node at each depth; the tree is cut at `cap` nodes, breadth first
    "4-2-1-1-1-1 ≤16": ((4, 2, 1, 1, 1, 1), 16),
    "3-1-1-1-1-1 ≤12": ((3, 1, 1, 1, 1, 1), 12),
    "2-2-1-1-1-1-1 ≤16": ((2, 2, 1, 1, 1, 1, 1), 16),
    "8-2-1-1-1 ≤24": ((8, 2, 1, 1, 1), 24),
    "1-1-1-1-1-1-1-1 chain": ((1,) * 8, 8),
}
TOP = 8  # columns kept per matrix row


def rows_of(target, ids: list[int]) -> torch.Tensor:
    """Top-TOP next tokens after every position of `ids`, from one teacher-forced pass."""
    with torch.inference_mode():
        logits = target.model(input_ids=torch.tensor([ids])).logits[0]
    return logits.topk(TOP, dim=-1).indices


def replay(prompt: list[int], out: list[int], top: torch.Tensor, template, cap: int) -> tuple[int, list[int]]:
    """(verify passes, nodes sent per pass) for the greedy reference `out` after `prompt`."""
    seq = prompt + out
    adj: dict[int, list[int]] = {}
    for i in range(len(prompt) - 1):  # the prefill's rows
        adj[seq[i]] = top[i].tolist()
    t = len(prompt) - 1  # seq[t + 1] is out[0], which the prefill already chose
    adj[seq[t]] = top[t].tolist()
    t += 1
    passes, sizes = 0, []
    while t < len(seq) - 1:
        # breadth-first tree from seq[t] (the newest committed token)
        nodes: list[tuple[int, int, int]] = []  # (token, parent index, depth)
        frontier = [(seq[t], -1)]
        for depth, width in enumerate(template, 1):
            nxt = []
            for tok, idx in frontier:
                for child in adj.get(tok, [])[:width]:
                    if len(nodes) >= cap:
                        break
                    nodes.append((child, idx, depth))
                    nxt.append((child, len(nodes) - 1))
            frontier = nxt
            if len(nodes) >= cap:
                break
        # longest matching path
        parent, accepted = -1, 0
        while t + accepted + 1 < len(seq):
            want = seq[t + accepted + 1]
            hit = next((i for i, (tok, p, _) in enumerate(nodes) if p == parent and tok == want), None)
            if hit is None:
                break
            parent, accepted = hit, accepted + 1
        for j in range(t, min(t + accepted + 1, len(seq) - 1)):  # rows the pass saw on the path
            adj[seq[j]] = top[j].tolist()
        passes += 1
        sizes.append(len(nodes))
        t += accepted + 1
    return passes, sizes


def references(path: str):
    """(target, v(n), [(prompt id, prompt ids, HF plain's greedy output)]) of a bench run, in its order."""
    bench = json.loads(Path(path).read_text())
    target = load("bundled")
    prompts = {p["id"]: p["prompt"] for p in json.loads((ROOT.parent / "shared/bench/prompts.json").read_text())}
    refs = [(pid, target.encode(prompts[pid], chat=not bench["settings"].get("raw")), res["hf"]["token_ids"])
            for pid, res in bench["results"].items()]
    return target, verify_cost(target), refs


def summary_line(name: str, tokens_per_pass: list[float], speed: list[float]) -> str:
    gm = math.exp(statistics.fmean(math.log(s) for s in speed))
    return (f"{name:44s} tokens/pass mean {statistics.fmean(tokens_per_pass):.2f} [min {min(tokens_per_pass):.2f}, "
            f"max {max(tokens_per_pass):.2f}]; modelled × plain: geomean {gm:.2f} [worst {min(speed):.2f}]")


def main() -> None:
    target, v, refs = references(sys.argv[1])
    data = [(pid, prompt, out, rows_of(target, prompt + out)) for pid, prompt, out in refs]
    print(f"{len(data)} prompts, reference = HF plain greedy outputs of {sys.argv[1]}; v(n) from "
          f"{v.model} ({v.hardware or v.device})")
    for name, (template, cap) in TEMPLATES.items():
        tpp, speed = [], []
        for pid, prompt, out, top in data:
            passes, sizes = replay(prompt, out, top, template, cap)
            tokens = len(out) - 1
            tpp.append(tokens / passes)
            speed.append(tokens / sum(v(n + 1) for n in sizes))  # × plain, one plain step per token
        print(summary_line(name, tpp, speed))


if __name__ == "__main__":
    main()
