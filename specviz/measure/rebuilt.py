"""Retrieval drafts rebuilt at another K, and held against the text their run made.

A retrieval proposer copies what followed a match; K only cuts the copy. Prompt lookup and LogitSpec
hand the trace their branches before K cut them (CycleTrace.uncut, each to its own length) and the
most nodes they merge them into (uncut_cap), so the draft a cycle would have sent at any K is rebuilt
exactly as the proposer builds it (`tree_at`). Under greedy decoding a draft is accepted exactly as
far as one of its paths agrees with the target's text, which is the text the run committed: so
what that draft would have had accepted there is measured (`agreement`), not assumed. The model of
speed (speed_model.py, its `Inputs` as `x` here) prices those drafts, and replays a run of copies
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


def copies(run: RunTrace) -> tuple[list[int | None], list[int | None]]:
    """Per cycle that kept one uncut copy (prompt lookup) in a greedy run: how many of the copy's tokens
    the text went on with, and how many the copy had past what was sent; (None, None) for every other."""
    matched, room = [], []
    for c, (text, at) in zip(run.cycles, placed(run)):
        copy = list(c.uncut[0]) if kept(c) and len(c.uncut) == 1 and c.uncut_cap is None else None
        matched.append(None if copy is None else agreement(DraftTree.chain(copy), text, at))
        room.append(None if copy is None else len(copy) - len(c.nodes))
    return matched, room


def reach(cycles: list, tables: dict[int, Rebuilt | None]) -> list[float]:
    """reach_d of a group of cycles (one sent depth), d = 1 … the deepest K rebuilt: the share whose draft
    rebuilt at K = d agreed with the text all d deep; [] unless every cycle of the group was rebuilt."""
    rows = [tables.get(id(c)) for c in cycles]
    if not cycles or any(r is None for r in rows):
        return []
    return [sum(r[d][1] >= d for r in rows) / len(rows) for d in sorted(rows[0])]


# -- a copying run replayed along its text at another K ------------------------------------------
def walkable(x) -> bool:
    """Whether every cycle that sent a draft sent a greedy chain whose agreement with the text is known
    and whose source kept its copy uncut (prompt lookup: `copies`)."""
    room, matched = x.room or [None] * len(x.sent), x.matched or [None] * len(x.sent)
    return bool(x.made) and any(x.sent) and all(
        not d or (m is not None and r is not None) for d, m, r in zip(x.sent, matched, room))


def walk(x, v, k: int, rate: float | None) -> tuple[float, float]:
    """(tokens, cost) a cycle of a greedy copying run (`walkable`) at depth k, replayed along the text the
    fitted run made. Each cycle starts where the last ended; one that starts s tokens into a fitted
    cycle copies from the same place s tokens on (the latest match, moved on by what it copied), so its
    chain is the fitted one's past its first s tokens and it agrees with the text s tokens fewer. It
    sends as many tokens as its source copies, up to k and, where the run stopped at its max new tokens,
    the tokens left less one (decoding/engine.py), and makes 1 + those that agree. Only where every
    token the fitted chain had agreed is the rest assumed, each level at the run's α_d for its depth
    (past the deepest, `rate`)."""
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
        copy = len(x.sent[i]) + (x.room[i] or 0)
        left = int(end - pos + 1e-9) - 1 if x.budget else k  # a run that ended on its own was not cut
        depth = min(k, left, copy) if x.sent[i] else 0
        t = 1.0
        if depth > 0:
            agreed, known = x.matched[i] - shift, copy - shift
            t += min(agreed, depth)
            path = 1.0
            for d in range(known + 1, depth + 1) if agreed >= known else ():
                path *= x.acceptance[d - 1] if d <= len(x.acceptance) else rate
                t += path
        spent += x.draft0 + x.v0 + x.v_scale * (v(depth + 1) if depth else 1.0) + x.over0 + x.over1 * depth
        pos, n = pos + t, n + 1
    return end / n, spent / n
