"""One plain-text sentence per cycle, read from the trace only.

Plain text, not HTML: show it in a Textbox, or escape it before putting it in markup.
"""
from __future__ import annotations

from specviz.decoding.trace import BONUS, REJECTED, RESAMPLED, CycleTrace, NodeTrace
from specviz.viz.style import num, quote
from specviz.viz.tree_figure import found_in, is_tree, nodes_of, source_kind, source_label


def _drafted(cycle: CycleTrace) -> str:
    nodes = nodes_of(cycle)
    if not is_tree(cycle):
        text = f"{len(nodes)} drafted"
    else:
        leaves = len(nodes) - len({n.parent for n in nodes} - {-1})
        text = f"a tree of {len(nodes)} nodes drafted ({leaves} branches, depth {max(n.depth for n in nodes)})"
    kinds: dict[str, int] = {}
    for n in nodes:
        kinds[source_kind(n)] = kinds.get(source_kind(n), 0) + 1
    if len(kinds) > 1:  # a hybrid tree: say who proposed what
        text += " (" + ", ".join(f"{count} by {kind}" for kind, count in kinds.items()) + ")"
    return text


def _planned(cycle: CycleTrace) -> str:
    """What cost-aware drafting left out, when it left anything out, and what load changed."""
    offered, sent = cycle.offered, len(nodes_of(cycle))
    if offered is None or offered <= sent:
        return _crowded(cycle, sent)
    if not sent:
        return (f" The proposer offered {offered} nodes; none was worth a verify pass, so this was a plain step."
                + _crowded(cycle, sent))
    return (f" The proposer offered {offered} nodes; the {sent} expected to pay for their verify cost were sent."
            + _crowded(cycle, sent))


def _crowded(cycle: CycleTrace, sent: int) -> str:
    """Where the planner priced the pass for other runs sharing it and that changed what was sent."""
    alone = getattr(cycle, "sent_alone", None)
    batch = getattr(cycle, "priced_batch", 1) or 1
    if batch <= 1 or alone is None or alone == sent:
        return ""
    tokens = lambda n: f"{n} draft token" + ("" if n == 1 else "s")  # noqa: E731
    return (f" {batch} runs were expected to share this pass, so the planner sent {tokens(sent)} instead of "
            f"the {alone} it sends alone.")


def _accepted(cycle: CycleTrace) -> str:
    by_index = {n.index: n for n in nodes_of(cycle)}
    if not cycle.accepted:
        return "accepted none"
    words = "accepted " + ", ".join(quote(by_index[i].text) for i in cycle.accepted)
    if is_tree(cycle):
        last = by_index[cycle.accepted[-1]]
        words += f" along branch {quote(source_label(last))}" if last.source else ""
    return words


def _rejection(cycle: CycleTrace, node: NodeTrace) -> str:
    if cycle.greedy:
        why = f"p = {num(node.p)}, not argmax p"
    else:
        q = "1 (deterministic)" if node.q is None else num(node.q)
        why = f"p = {num(node.p)}, q = {q}, accept with {num(node.accept_prob)}, r = {num(node.r)}"
    text = f"rejected {quote(node.text)} ({why})"
    others = sum(1 for n in nodes_of(cycle) if n.status == REJECTED) - 1
    if others > 0:
        text += f" after {others} other rejected node{'s' if others > 1 else ''}"
    return text


def _new(cycle: CycleTrace, rejected: NodeTrace | None) -> str:
    tok = quote(cycle.new_token.text) if cycle.new_token else "nothing"
    if cycle.new_kind == RESAMPLED:
        if cycle.greedy:
            return f"took argmax p {tok} instead; no bonus"
        source = "p without the rejected token" if rejected is not None and rejected.q is None else "the residual"
        return f"resampled {tok} from {source}; no bonus"
    if cycle.new_kind == BONUS:
        return f"bonus {tok} " + ("= argmax p" if cycle.greedy else "drawn from p")
    p = f" (p = {num(cycle.new_token.prob)})" if cycle.new_token else ""
    return f"plain target step {tok}{p}"


def _matched(cycle: CycleTrace) -> str:
    """Suffix decoding: which suffix of the context matched, and in which text (never whose run)."""
    match = getattr(cycle, "match", None)
    if match is None or not found_in(match.found_in):
        return ""
    times = f", {match.count} times" if match.count > 1 else ""
    return (f" Suffix decoding matched the last {len(match.matched)} tokens, "
            f"{quote(''.join(match.matched))}, in {found_in(match.found_in)}{times}.")


SKIPPED_WHY = {"long-match": "prompt lookup already offered a match as deep as would be sent",
               "unpaid": "recent drafts from there bought no accepted token (tried again every few cycles "
                         "and at a new retrieval hit)"}


def _skipped(cycle: CycleTrace) -> str:
    """Which of the hybrid's sources were not computed this cycle, and why (proposers/gate.py)."""
    from specviz.proposers import gate  # the hybrid's words for what it skips

    by_why: dict[str, list[str]] = {}
    for skip in getattr(cycle, "skipped", None) or []:
        by_why.setdefault(skip.reason, []).append(gate.WHO.get(skip.source, skip.source))
    parts = [f"{_listed(who)}, since {SKIPPED_WHY.get(why, why)}" for why, who in by_why.items()]
    return f" Not computed: {'; '.join(parts)}." if parts else ""


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _caches(cycle: CycleTrace) -> str:
    parts = []
    for name in ("target", "draft"):
        if name in cycle.cache_before and name in cycle.cache_after:
            parts.append(f"{name} cache {cycle.cache_before[name]} → {cycle.cache_after[name]}")
    text = ", ".join(parts)
    return text[:1].upper() + text[1:] + "." if parts else ""


def narrate(cycle: CycleTrace) -> str:
    """E.g. "Cycle 7: 5 drafted; accepted 'the', ' cat'; rejected ' on' (p = 0.12, q = 0.61,
    accept with 0.20, r = 0.55); resampled ' in' from the residual; no bonus. Target cache …"."""
    head = f"Cycle {cycle.index}" + (" (greedy)" if cycle.greedy else "")
    nodes = nodes_of(cycle)
    rejected = next((n for n in nodes if n.index == cycle.rejected), None)
    if not nodes:
        parts = ["no draft", _new(cycle, None)]
    else:
        parts = [_drafted(cycle), _accepted(cycle),
                 _rejection(cycle, rejected) if rejected else "no rejection", _new(cycle, rejected)]
    sentence = f"{head}: " + "; ".join(parts) + "."
    kept = len(cycle.committed)
    if cycle.committed and kept < len(cycle.accepted) + 1:
        sentence += f" Only {kept} committed (end of sequence or token budget)."
    sentence += _planned(cycle) + _skipped(cycle) + _matched(cycle)
    caches = _caches(cycle)
    return f"{sentence} {caches}" if caches else sentence
