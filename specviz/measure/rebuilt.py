"""Retrieval drafts rebuilt at another K, and held against the text their run made.

A retrieval proposer copies what followed a match; K only cuts the copy. Prompt lookup and LogitSpec
hand the trace their branches before K cut them (CycleTrace.uncut, each to its own length) and the
most nodes they merge them into (uncut_cap), so the draft a cycle would have sent at any K is rebuilt
exactly as the proposer builds it (`tree_at`). Under greedy decoding a draft is accepted exactly as
far as one of its paths agrees with the target's text, which is the text the run committed: so
what that draft would have had accepted there is measured (`agreement`), not assumed. The model of
speed (speed_model.py, its `Inputs` as `x` here) prices those drafts, and replays a run of them
along its text at another K (`walk`); sampled runs keep nothing here (a sampled token's
acceptance is a draw, not a match).

Pure arithmetic on traces. No UI libraries here.
"""
from __future__ import annotations

from specviz.decoding.trace import RunTrace
from specviz.drafting.tree import DraftTree
from specviz.measure.theory import K_RANGE
from specviz.proposers.logitspec import merge_branches

Rebuilt = dict[int, tuple[int, int]]  # K -> (nodes the draft sends at K, of its tokens the text agreed with)


def tree_at(cycle, k: int) -> DraftTree:
    """The draft a cycle kept uncut (`cycle.uncut`), cut at depth k and merged as its proposer merges it."""
    branches = [list(b[:k]) for b in cycle.uncut or []]
    cap = cycle.uncut_cap or sum(len(b) for b in branches) or 1
    return merge_branches([(b, [None] * len(b)) for b in branches], cap)


def agreement(tree: DraftTree, text: list[int], at: int) -> int:
    """How deep a path of `tree` agrees with text[at:], token by token (siblings never repeat a token)."""
    node_of = {(parent, token): i for i, (parent, token) in enumerate(zip(tree.parents, tree.tokens))}
    parent, depth = -1, 0
    while at + depth < len(text) and (parent, text[at + depth]) in node_of:
        parent, depth = node_of[(parent, text[at + depth])], depth + 1
    return depth


def kept(cycle) -> bool:
    return bool(cycle.nodes) and cycle.greedy and cycle.uncut is not None


def placed(run: RunTrace) -> list[tuple[list[int], int]]:
    """Per cycle, the text its run made and where in it the cycle's tokens start. A run joined from
    several (the advisor's survey: one per prompt) starts a text at each cycle 0, so a draft is never
    held against the next prompt's answer."""
    texts: list[list[int]] = []
    for c in run.cycles:
        if c.index == 0 or not texts:
            texts.append([])
        texts[-1].extend(c.committed)
    out, at, n = [], 0, -1
    for c in run.cycles:
        if c.index == 0 or n < 0:
            n, at = n + 1, 0
        out.append((texts[n], at))
        at += len(c.committed)
    return out


def rebuilt(run: RunTrace, ks=K_RANGE) -> list[Rebuilt | None]:
    """Per cycle that kept its draft uncut in a greedy run: for every K, the nodes its draft sends there
    and how many of its tokens the text went on with; None for every other cycle."""
    out = []
    for c, (text, at) in zip(run.cycles, placed(run)):
        trees = {k: tree_at(c, k) for k in ks} if kept(c) else None
        out.append(None if trees is None else {k: (len(t), agreement(t, text, at)) for k, t in trees.items()})
    return out


def reach(cycles: list, tables: dict[int, Rebuilt | None]) -> list[float]:
    """reach_d of a group of cycles (one sent depth), d = 1 … the deepest K rebuilt: the share whose draft
    rebuilt at K = d agreed with the text all d deep; [] unless every cycle of the group was rebuilt."""
    rows = [tables.get(id(c)) for c in cycles]
    if not cycles or any(r is None for r in rows):
        return []
    return [sum(r[d][1] >= d for r in rows) / len(rows) for d in sorted(rows[0])]


# -- a run of retrieval drafts replayed along its text at another K ---------------------------------
def walkable(x) -> bool:
    """Whether every cycle that sent a draft was rebuilt (`rebuilt`: a greedy retrieval draft kept uncut)."""
    tables = x.rebuilt or [None] * len(x.sent)
    return bool(x.made) and any(x.sent) and all(not d or t is not None for d, t in zip(x.sent, tables))


def walk(x, cost, k: int, rate: float | None) -> tuple[float, float]:
    """(tokens, cost) a cycle of a greedy retrieval run (`walkable`) at depth k, replayed along the text
    the fitted run made: cycles of another K start at other places, and a long copy spans what took
    several shorter cycles. Each cycle starts where the last ended. One that starts where a fitted
    cycle started sends that cycle's draft rebuilt at k and makes 1 + its tokens the text agreed with.
    One that starts s tokens into a fitted cycle copies on from the same place along the path that
    agreed (the latest match, moved on by what it copied), so it agrees s tokens fewer, and is taken
    to send a draft as large as that cycle's at k. It drafts at most k deep and, where the run stopped
    at its max new tokens, the tokens left less one (decoding/engine.py). Only where every token the
    rebuilt draft had agreed is the rest assumed, each level at the run's α_d for its depth (past the
    deepest, `rate`). `cost(nodes)` prices a cycle (speed_model.cycle_cost)."""
    if rate is None:
        rate = x.acceptance[-1] if x.acceptance else 0.0
    starts = [0]
    for m in x.made:
        starts.append(starts[-1] + m)
    end = x.budget or starts[-1]
    pos, i, n, spent = 0.0, 0, 0, 0.0
    while pos < end - 1e-9:
        while i + 1 < len(x.made) and starts[i + 1] <= pos + 1e-9:
            i += 1
        shift = int(pos - starts[i] + 1e-9)
        left = int(end - pos + 1e-9) - 1 if x.budget else k  # a run that ended on its own was not cut
        table = x.rebuilt[i]
        depth = min(k, left, max(table)) if x.sent[i] else 0
        nodes, t = 0, 1.0
        if depth > 0:
            nodes = table[depth][0]
            if shift == 0:
                agreed, known = table[depth][1], depth
            else:  # along the path that agreed deepest, moved on by `shift`
                agreed, known = max(a for _, a in table.values()) - shift, max(table) - shift
            t += max(min(agreed, depth), 0)
            path = 1.0
            for d in range(known + 1, depth + 1) if agreed >= known else ():
                path *= x.acceptance[d - 1] if d <= len(x.acceptance) else rate
                t += path
        spent += cost(nodes)
        pos, n = pos + t, n + 1
    return end / n, spent / n
