"""Would SuffixDecoding's trees raise tokens per pass here? An offline replay before building it (issue 25 §4).

SuffixDecoding (Oliaro et al., arXiv 2411.04975), as the paper describes it: keep suffix trees over
the current request (prompt and output so far) and over earlier requests' outputs; each cycle, find
where the newest tokens occur in them (the longest pattern that occurs, up to a limit), and grow a
speculation tree from there best-first, a child's score being its parent's score times how often
that child followed there (its count over the parent's count). The tree's size limit grows with the
pattern's length (α · p nodes), so a long match may draft far and a short one only a little.

This replays the greedy reference outputs of a bench run (HF plain's token ids) through that rule,
priced with the target's cost profile v(n) like scripts/recycling_sim.py, and against prompt lookup
in the same replay (longest 1–3-gram match, its latest continuation as one chain of up to 10), so
the two differ only in the rule. Continuation counts over all suffixes of up to MAX_PATTERN tokens
stand in for the suffix tree: a node's children and their counts are the same numbers.

    .venv/bin/python scripts/suffix_sim.py docs/bench/2026-12-01-final/bench.json
"""
from __future__ import annotations

import heapq
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recycling_sim import references, summary_line  # noqa: E402  (the same references and pricing)

MAX_PATTERN = 8  # longest context kept per continuation count


class SuffixCounts:
    """For every context of 1..MAX_PATTERN tokens seen, how often each token followed it."""

    def __init__(self):
        self.next: dict[tuple, Counter] = defaultdict(Counter)

    def add(self, seq: list[int], upto: int, start: int = 0) -> None:
        """Count the continuations seq[i] for i in [start, upto) of every context ending at i - 1."""
        for i in range(max(start, 1), upto):
            for p in range(1, min(MAX_PATTERN, i) + 1):
                self.next[tuple(seq[i - p:i])][seq[i]] += 1

    def children(self, ctx: tuple) -> Counter | None:
        return self.next.get(ctx)


def merged(indexes: list[SuffixCounts], ctx: tuple) -> Counter:
    out = Counter()
    for ix in indexes:
        c = ix.children(ctx)
        if c:
            out.update(c)
    return out


def suffix_tree(indexes: list[SuffixCounts], seq: list[int], t: int, alpha: float, cap: int):
    """Nodes (token, parent) grown best-first from the longest pattern ending at seq[t] that occurs."""
    for p in range(min(MAX_PATTERN, t + 1), 0, -1):
        ctx = tuple(seq[t + 1 - p:t + 1])
        if merged(indexes, ctx):
            break
    else:
        return []
    limit = min(cap, max(1, int(alpha * p)))
    nodes: list[tuple[int, int]] = []  # (token, parent index)
    heap, tie = [], 1  # (−score, tie, context, token, parent index)
    root_kids = merged(indexes, ctx)
    total = sum(root_kids.values())
    for tok, n in root_kids.items():
        heapq.heappush(heap, (-n / total, tie, ctx, tok, -1))
        tie += 1
    while heap and len(nodes) < limit:
        neg, _, c, tok, parent = heapq.heappop(heap)
        nodes.append((tok, parent))
        me = len(nodes) - 1
        c2 = (c + (tok,))[-MAX_PATTERN:]
        kids = merged(indexes, c2)
        total = sum(kids.values())
        for k, n in kids.items():
            heapq.heappush(heap, (neg * n / total, tie, c2, k, me))
            tie += 1
    return nodes


def lookup_chain(seq: list[int], t: int, max_len: int = 10):
    """Prompt lookup: the latest earlier occurrence of the longest 3..1-gram ending at seq[t]."""
    for n in (3, 2, 1):
        if t + 1 < n:
            continue
        pat = seq[t + 1 - n:t + 1]
        for s in range(t - n, -1, -1):
            if seq[s:s + n] == pat:
                cont = seq[s + n:min(s + n + max_len, t + 1)]
                if cont:
                    return [(tok, i - 1) for i, tok in enumerate(cont)]
    return []


def replay(prompt: list[int], out: list[int], draft, earlier: SuffixCounts | None):
    """(verify passes, nodes per pass) for greedy reference `out`; `draft(index list, seq, t)` drafts."""
    seq = prompt + out
    mine = SuffixCounts()
    mine.add(seq, len(prompt))
    indexes = [mine] + ([earlier] if earlier is not None else [])
    t = len(prompt) - 1 + 1  # the prefill chose out[0]; drafting starts after it
    mine.add(seq, t + 1, start=len(prompt))
    passes, sizes = 0, []
    while t < len(seq) - 1:
        nodes = draft(indexes, seq, t)
        parent, accepted = -1, 0
        while t + accepted + 1 < len(seq):
            want = seq[t + accepted + 1]
            hit = next((i for i, (tok, p) in enumerate(nodes) if p == parent and tok == want), None)
            if hit is None:
                break
            parent, accepted = hit, accepted + 1
        new_t = t + accepted + 1
        mine.add(seq, min(new_t + 1, len(seq)), start=t + 1)
        passes += 1
        sizes.append(len(nodes))
        t = new_t
    return passes, sizes


def main() -> None:
    _, v, data = references(sys.argv[1])
    print(f"{len(data)} prompts in the bench's order, reference = HF plain greedy outputs of {sys.argv[1]}; "
          f"v(n) from {v.model} ({v.hardware or v.device})")
    rules = {
        "prompt lookup, chain ≤ 10": (lambda ix, s, t: lookup_chain(s, t), False),
        "suffix tree, this request, α 1, ≤ 16": (lambda ix, s, t: suffix_tree(ix, s, t, 1.0, 16), False),
        "suffix tree, this request, α 2, ≤ 16": (lambda ix, s, t: suffix_tree(ix, s, t, 2.0, 16), False),
        "suffix tree, this request, α 4, ≤ 16": (lambda ix, s, t: suffix_tree(ix, s, t, 4.0, 16), False),
        "suffix tree, + earlier outputs, α 2, ≤ 16": (lambda ix, s, t: suffix_tree(ix, s, t, 2.0, 16), True),
        "suffix tree, + earlier outputs, α 4, ≤ 16": (lambda ix, s, t: suffix_tree(ix, s, t, 4.0, 16), True),
    }
    for name, (rule, cross) in rules.items():
        earlier = SuffixCounts() if cross else None
        tpp, speed = [], []
        for pid, prompt, out in data:
            passes, sizes = replay(prompt, out, rule, earlier)
            tokens = len(out) - 1
            tpp.append(tokens / passes)
            speed.append(tokens / sum(v(n + 1) for n in sizes))  # × plain, one plain step per token
            if earlier is not None:  # this request's output joins the earlier ones for the next
                earlier.add(out, len(out))
        print(summary_line(name, tpp, speed))


if __name__ == "__main__":
    main()
