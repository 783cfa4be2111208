"""Turns one cycle's tree and verdict into a CycleTrace (texts, top lists, statuses).

Recorded or not, a cycle has the same shape: one NodeTrace per node sent, with its status and
draw. Unrecorded (record=False, for timing) it leaves out only what costs time to read: texts,
q, top lists and the replacement's probability."""
from __future__ import annotations

import torch

from specviz.decoding.trace import MATCH_TOKENS, NOT_REACHED, Alt, CycleTrace, MatchTrace, NodeTrace, SeamTrace, Skip
from specviz.decoding.verify import Verdict
from specviz.drafting.sampling import Sampling
from specviz.drafting.tree import DraftTree, Match, Source
from specviz.proposers import owner

TOP_N = 5  # alternatives shown per node: enough to see what the model hesitated between


def top_alts(probs: torch.Tensor | None, text, n: int = TOP_N) -> list[Alt]:
    if probs is None:
        return []
    values, ids = torch.topk(probs.float(), min(n, probs.shape[-1]))
    return [Alt(int(i), text(int(i)), float(v)) for v, i in zip(values.tolist(), ids.tolist())]


def source_fields(source: Source | None) -> dict:
    """A tree node's Source as NodeTrace's plain fields."""
    if source is None:
        return {}
    return dict(source=str(source.kind), branch=source.branch, rank=source.rank, ngram=source.ngram)


def match_trace(match: Match | None, text) -> MatchTrace | None:
    """A suffix match as texts, each part cut to what a trace keeps."""
    if match is None:
        return None
    words = lambda ids: [text(t) for t in ids[-MATCH_TOKENS:]]  # noqa: E731
    return MatchTrace(str(match.found_in), words(match.before), words(match.matched),
                      [text(t) for t in match.after[:MATCH_TOKENS]], int(match.count))


def seam_trace(seam, text) -> SeamTrace | None:
    """A cross-family draft's seam as texts (drafting/tree.Seam)."""
    if seam is None:
        return None
    return SeamTrace(list(seam.draft_texts), [text(t) for t in seam.target_ids],
                     "greedy" if seam.greedy else "intersection", int(seam.shared), seam.cut)


def skipped_of(proposer) -> list[Skip]:
    """The sources `proposer` left uncomputed in the cycle it just drafted (the hybrid's gate), as data."""
    return [Skip(source, reason) for source, reason in proposer.skipped] if proposer is not None else []


def record_nodes(tree: DraftTree, verdict: Verdict, logits: torch.Tensor,
                 sampling: Sampling, text) -> list[NodeTrace]:
    """One NodeTrace per draft node; p and the top lists only where verification looked."""
    rows: dict[int, torch.Tensor] = {}

    def p_row(row: int) -> torch.Tensor:
        if row not in rows:
            rows[row] = verdict.p_rows.get(row)
            if rows[row] is None:
                rows[row] = sampling.display_probs(logits[row])
        return rows[row]

    depths, out = tree.depths, []
    for i, tok in enumerate(tree.tokens):
        q = tree.q_of(i)
        node = NodeTrace(i, tok, text(tok), tree.parents[i], depths[i],
                         q=None if q is None else float(q[tok]), **source_fields(tree.source_of(i)))
        node.q_top = top_alts(q, text)
        judged = verdict.nodes.get(i)
        if judged is not None:
            p = p_row(tree.parents[i] + 1)
            node.status, node.r = judged.status, judged.r
            node.p = judged.p if judged.p is not None else float(p[tok])
            node.accept_prob = judged.accept_prob
            node.p_top = top_alts(p, text)
        else:
            node.status = NOT_REACHED
        out.append(node)
    return out


def record_cycle(cycle: CycleTrace, tree: DraftTree, verdict: Verdict, logits: torch.Tensor,
                 sampling: Sampling, text) -> None:
    """Fill the draft-dependent fields of `cycle` in place."""
    cycle.nodes = record_nodes(tree, verdict, logits, sampling, text)
    cycle.accepted, cycle.rejected = list(verdict.accepted), verdict.rejected
    cycle.residual_top = top_alts(verdict.residual, text)
    drawn_from = verdict.residual if verdict.residual is not None else verdict.p_rows.get(verdict.final_row)
    if drawn_from is None:
        drawn_from = sampling.display_probs(logits[verdict.final_row])
    cycle.new_token = Alt(verdict.new_token, text(verdict.new_token), float(drawn_from[verdict.new_token]))
    cycle.new_kind = verdict.new_kind
    cycle.retrieval_hit = tree.retrieval_hit
    cycle.uncut = None if tree.uncut is None else [list(b) for b in tree.uncut]
    cycle.uncut_cap = tree.uncut_cap
    # a match only beside what its method drafted: the method of the text it was found in sent nodes
    found_by = owner(tree.match.found_in) if tree.match is not None else None
    sent = found_by is not None and any(owner(s.kind) == found_by for s in tree.sources or [])
    cycle.match = match_trace(tree.match, text) if sent else None
    cycle.seam = seam_trace(tree.seam, text)


def record_counts(cycle: CycleTrace, tree: DraftTree, verdict: Verdict) -> None:
    """The cheap part of record_cycle: statuses, draws and what verification already read."""
    depths, nodes = tree.depths, []
    for i, tok in enumerate(tree.tokens):
        judged = verdict.nodes.get(i)
        node = NodeTrace(i, tok, "", tree.parents[i], depths[i], **source_fields(tree.source_of(i)))
        if judged is not None:
            node.status, node.r, node.p, node.q = judged.status, judged.r, judged.p, judged.q
            node.accept_prob = judged.accept_prob
        nodes.append(node)
    cycle.nodes = nodes
    cycle.accepted, cycle.rejected = list(verdict.accepted), verdict.rejected
    cycle.new_kind = verdict.new_kind
    cycle.retrieval_hit = tree.retrieval_hit
    cycle.uncut = None if tree.uncut is None else [list(b) for b in tree.uncut]
    cycle.uncut_cap = tree.uncut_cap
