"""Pure acceptance rules. Names follow the papers: p is the target distribution, q the draft's,
x a drafted token, r ~ U(0, 1) the draw, and a chain of K drafts is the tree with one child each.

Every rule walks the tree from the root (the last committed token) and returns a Verdict:
which nodes were accepted, where the path ended, and the one new token the target adds.
`logits` has one row per verify position: row 0 judges the root's children, row i+1 the
children of node i.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specviz.decoding.trace import ACCEPTED, BONUS, REJECTED, RESAMPLED, TARGET
from specviz.drafting.sampling import Sampling
from specviz.drafting.tree import DraftTree


@dataclass
class NodeVerdict:
    p: float | None = None  # p(x) at the moment x was tried
    q: float | None = None  # q(x); None for a deterministic draft
    accept_prob: float | None = None
    r: float | None = None
    status: str = REJECTED


@dataclass
class Verdict:
    accepted: list[int] = field(default_factory=list)
    rejected: int | None = None
    new_token: int = -1
    new_kind: str = TARGET
    final_row: int = 0  # the logits row the new token came from
    residual: torch.Tensor | None = None  # what the new token was drawn from, after a rejection
    nodes: dict[int, NodeVerdict] = field(default_factory=dict)
    p_rows: dict[int, torch.Tensor] = field(default_factory=dict)  # processed p per visited row


def residual(p: torch.Tensor, q: torch.Tensor | None, x: int) -> torch.Tensor:
    """norm(max(0, p − q)); for a deterministic draft q is the point mass on x, so x is removed."""
    if q is None:
        out = p.clone()
        out[x] = 0.0
    else:
        out = (p - q).clamp_min(0.0)
    total = out.sum()
    # total is 0 only when p ≤ q everywhere, i.e. p = q: then rejection had probability 0.
    return out / total if total > 0 else p


def accept_prob(px: float, qx: float) -> float:
    """min(1, p(x)/q(x)); a point-mass draft passes q(x) = 1, and q(x) = 0 (never drafted) gives 1."""
    return min(1.0, px / qx) if qx > 0 else 1.0


def _end_kind(had_children: bool, node: int) -> str:
    if had_children:
        return RESAMPLED
    return BONUS if node >= 0 else TARGET


def verify_greedy(tree: DraftTree, logits: torch.Tensor) -> Verdict:
    """Follow the child equal to argmax p; at the first level with no match, take argmax p."""
    best = logits.argmax(-1).tolist()  # one host sync for the whole tree
    v, node = Verdict(), -1
    while True:
        kids = tree.children(node)
        target = best[node + 1]
        hit = next((c for c in kids if tree.tokens[c] == target), None)
        for c in kids:
            v.nodes[c] = NodeVerdict(status=ACCEPTED if c == hit else REJECTED)
        if hit is None:
            v.rejected = kids[-1] if kids else None
            v.new_token, v.new_kind, v.final_row = target, _end_kind(bool(kids), node), node + 1
            return v
        v.accepted.append(hit)
        node = hit


def verify_sampling(tree: DraftTree, logits: torch.Tensor, sampling: Sampling) -> Verdict:
    """Speculative sampling (Leviathan/Chen) with recursive rejection over siblings (SpecInfer).

    The output follows p exactly, whatever the draft. Children are tried in order; a
    rejected child's q is subtracted from p before the next sibling is tried.
    """
    v, node = Verdict(), -1
    while True:
        p = sampling.probs(logits[node + 1])
        v.p_rows[node + 1] = p
        kids, hit = tree.children(node), None
        for c in kids:
            x, q = tree.tokens[c], tree.q_of(c)
            px = float(p[x])
            qx = 1.0 if q is None else float(q[x])
            # accept x with probability min(1, p(x)/q(x)); a point-mass draft has q(x) = 1
            a = accept_prob(px, qx)
            r = sampling.uniform()
            v.nodes[c] = NodeVerdict(px, None if q is None else qx, a, r, REJECTED)
            if r < a:
                v.nodes[c].status, hit = ACCEPTED, c
                break
            # rejected: the next try, or the replacement, comes from norm(max(0, p − q))
            p = residual(p, q, x)
        if hit is None:
            v.rejected = kids[-1] if kids else None
            v.residual = p if kids else None
            v.new_token, v.new_kind, v.final_row = sampling.draw(p), _end_kind(bool(kids), node), node + 1
            return v
        v.accepted.append(hit)
        node = hit


def verify_sampling_prefetched(tree: DraftTree, logits: torch.Tensor, sampling: Sampling) -> Verdict:
    """`verify_sampling`, with one transfer from the device per cycle instead of one per tried node.

    Whether sibling j is tried at all depends on the draws, but what it is judged by does not: it
    is tried only after siblings 0…j−1 were rejected, so its p is the row's residual after those
    rejections. So every row's values (p(x), q(x) of each child, in order) and its end distribution
    (the residual after all its children, what a replacement or bonus is drawn from) are computed
    on the device first, with the same operations in the same order as `verify_sampling`, and moved
    in one transfer; the walk then only reads them. The same numbers and the same draws, on any
    device; on a CPU, where reading a value costs no sync, `verify_sampling` computes less.
    """
    rows, values, ends = {}, [], {}  # by row: p, and the end distribution on the device
    at = {}  # where each child's (p(x), q(x)) pair starts in `values`
    for node in [-1] + list(range(len(tree))):
        kids = tree.children(node)
        p = rows[node + 1] = sampling.probs(logits[node + 1])
        for c in kids:
            x, q = tree.tokens[c], tree.q_of(c)
            at[c] = len(values)
            values.append(p[x])
            values.append(p.new_ones(()) if q is None else q[x].to(p.dtype))
            p = residual(p, q, x)
        ends[node + 1] = p
    host = torch.cat([torch.stack(values) if values else logits.new_zeros(0).float(),
                      torch.stack(list(ends.values())).flatten()]).cpu()
    scalars = host[: len(values)].tolist()
    on_host = dict(zip(ends, host[len(values):].view(len(ends), -1)))  # the end distributions, here
    v, node = Verdict(), -1
    while True:
        v.p_rows[node + 1] = rows[node + 1]
        kids, hit = tree.children(node), None
        for c in kids:
            px, qx = scalars[at[c]], scalars[at[c] + 1]
            a = accept_prob(px, qx)
            r = sampling.uniform()
            v.nodes[c] = NodeVerdict(px, None if tree.q_of(c) is None else qx, a, r, REJECTED)
            if r < a:
                v.nodes[c].status, hit = ACCEPTED, c
                break
        if hit is None:
            v.rejected = kids[-1] if kids else None
            v.residual = ends[node + 1] if kids else None  # on the device, as verify_sampling leaves it
            v.new_token, v.new_kind, v.final_row = (sampling.draw(on_host[node + 1]), _end_kind(bool(kids), node),
                                                    node + 1)
            return v
        v.accepted.append(hit)
        node = hit


def verify(tree: DraftTree, logits: torch.Tensor, sampling: Sampling, prefetch: bool | None = None) -> Verdict:
    """The rule for `sampling`. `prefetch` (default: when the logits are not on the CPU) reads what
    the sampled rule needs from the device in one transfer (`verify_sampling_prefetched`)."""
    if sampling.greedy:
        return verify_greedy(tree, logits)
    if prefetch is None:
        prefetch = logits.device.type != "cpu"
    return (verify_sampling_prefetched if prefetch else verify_sampling)(tree, logits, sampling)
