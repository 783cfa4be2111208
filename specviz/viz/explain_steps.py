"""'Explain this cycle': one cycle told one rule at a time, each step pointing at its figure.

Steps: proposal → one verify pass → accept or reject each judged node → residual (after a
rejection) or bonus → commit and roll back. Read from the CycleTrace only.
"""
from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from specviz.decoding.trace import BONUS, RESAMPLED, CycleTrace, NodeTrace
from specviz.viz.dists import judged, pq_figure, residual_figure
from specviz.viz.panels import cache_html
from specviz.viz.style import BLACK, STATUS, esc, esc_plot, num, quote
from specviz.viz.tree_figure import ROOT, found_in, layout, new_token_pos, nodes_of, tree_figure

TREE, PQ, RESIDUAL, CACHE = "tree", "pq", "residual", "cache"
HIGHLIGHT = "rgba(240,228,66,0.45)"  # Okabe–Ito yellow, translucent: marks "this step" behind bars


@dataclass(frozen=True)
class Step:
    """One rule applied: what to say and which parts of which views it is about."""
    title: str
    text: str  # plain text; escaped where it becomes HTML
    charts: tuple[str, ...]  # views to highlight (TREE, PQ, RESIDUAL, CACHE)
    nodes: tuple[int, ...] = ()  # tree nodes to ring; ROOT for the root
    new_token: bool = False  # ring the resampled / bonus / plain token too


def _proposal(cycle: CycleTrace) -> Step:
    nodes = nodes_of(cycle)
    if not nodes:
        return Step("Proposal", "The proposer drafted nothing this cycle, so there is nothing to "
                    "verify: the target takes one plain step.", (TREE,), (ROOT,))
    shape = "a chain" if all(n.parent == n.index - 1 for n in nodes) else "a tree"
    qs = "each with its draft probability q" if any(n.q is not None for n in nodes) else \
        "a deterministic guess (q is a point mass: q = 1)"
    words = ", ".join(quote(n.text) for n in nodes[:8]) + (", …" if len(nodes) > 8 else "")
    match = getattr(cycle, "match", None)
    found = (f" Suffix decoding found the last {len(match.matched)} tokens of the context in "
             f"{found_in(match.found_in)} and drafted what followed them there, the most frequent "
             "continuation first." if match is not None and found_in(match.found_in) else "")
    return Step("Proposal", f"The proposer drafted {len(nodes)} token{'s' * (len(nodes) > 1)} as {shape} "
                f"(K = {cycle.k}): {words}; {qs}.{found}", (TREE,), tuple(n.index for n in nodes))


def _verify_pass(cycle: CycleTrace) -> Step:
    n = len(nodes_of(cycle))
    before = cycle.cache_before.get("target")
    cache = f" The target's KV cache grows from {before} to {before + 1 + n} entries." if before is not None else ""
    mask = " A tree attention mask lets each node see only its own ancestors." if n and any(
        x.parent != x.index - 1 for x in nodes_of(cycle)) else ""
    return Step("One verify pass", f"The target runs once over the newest committed token plus all {n} "
                f"drafts, which gives p at every drafted position in a single forward pass.{mask}{cache}",
                (TREE, CACHE), (ROOT, *(x.index for x in nodes_of(cycle))))


def _judge(cycle: CycleTrace, node: NodeTrace) -> Step:
    verdict = STATUS[node.status][0]
    title = f"Node {node.index} {quote(node.text)}: {verdict}"
    if cycle.greedy:
        best = quote(node.p_top[0].text) if node.p_top else "unknown"
        same = "equals" if node.status == "accepted" else "differs from"
        text = f"Greedy rule: accept the draft if it is argmax p. argmax p here is {best}; the draft {same} it."
    else:
        q = "1 (deterministic draft, so accept with probability p(x))" if node.q is None else num(node.q)
        cmp = "<" if node.status == "accepted" else "≥"
        text = (f"p(x) = {num(node.p)}, q(x) = {q}. Accept with min(1, p/q) = {num(node.accept_prob)}; "
                f"the draw r = {num(node.r)} {cmp} {num(node.accept_prob)}, so it is {verdict}.")
    return Step(title, text + _context(cycle, node), (TREE, PQ), (node.index,))


def _greedy_levels(cycle: CycleTrace) -> list[Step]:
    """Greedy looks at a whole level at once: the child equal to argmax p, if any, goes on."""
    steps = []
    for parent in [ROOT, *cycle.accepted]:
        kids = [n for n in judged(cycle) if n.parent == parent]
        if not kids:
            break
        hit = next((n for n in kids if n.status == "accepted"), None)
        best = quote(kids[0].p_top[0].text) if kids[0].p_top else "unknown"
        names = ", ".join(quote(n.text) for n in kids[:6]) + (", …" if len(kids) > 6 else "")
        depth = kids[0].depth
        if hit is not None:
            verdict = f"the draft {quote(hit.text)} equals it, so it is accepted"
            verdict += f" and the other {len(kids) - 1} are not" if len(kids) > 1 else ""
            title = f"Depth {depth}: {quote(hit.text)} accepted"
        else:
            verdict = "no draft equals it, so the path stops here"
            title = f"Depth {depth}: rejected"
        text = (f"Greedy rule: keep the draft only if it is argmax p. At depth {depth} argmax p is {best}; "
                f"drafted here: {names}. {verdict[0].upper()}{verdict[1:]}.")
        steps.append(Step(title, text, (TREE, PQ), tuple(n.index for n in kids)))
    return steps


def _context(cycle: CycleTrace, node: NodeTrace) -> str:
    """Why verification reached this node: an accepted parent, rejected elder siblings."""
    elders = [n for n in nodes_of(cycle) if n.parent == node.parent and n.index < node.index
              and n.status == "rejected"]
    words = " It was reached because its parent was accepted." if node.depth > 1 else ""
    if elders and not cycle.greedy:
        words += (f" It was tried after {len(elders)} rejected sibling{'s' * (len(elders) > 1)}, against p with "
                  "their share removed (recursive rejection).")
    elif elders:
        words += f" It was tried after {len(elders)} rejected sibling{'s' * (len(elders) > 1)}."
    return words


def _ending(cycle: CycleTrace) -> Step | None:
    tok = quote(cycle.new_token.text) if cycle.new_token else "nothing"
    rejected = next((n for n in nodes_of(cycle) if n.index == cycle.rejected), None)
    if cycle.new_kind == RESAMPLED:
        if cycle.greedy:
            text = f"After the mismatch the target's own choice, argmax p = {tok}, takes its place. No bonus."
        elif rejected is not None and rejected.q is None:
            text = (f"After the rejection the replacement is drawn from p with the rejected token removed "
                    f"and renormalised: {tok}. No bonus.")
        else:
            text = (f"After the rejection the replacement is drawn from the residual norm(max(0, p − q)): "
                    f"only where the target wants more than the draft gave. Drawn: {tok}. No bonus.")
        return Step("Residual", text, (RESIDUAL, TREE), (), True)
    if cycle.new_kind == BONUS:
        how = "argmax p" if cycle.greedy else "drawn from p"
        return Step("Bonus", f"Every draft on the path was accepted, and the verify pass already computed p "
                    f"one position further: a free extra token, {tok} ({how}).", (TREE, RESIDUAL), (), True)
    return Step("Plain step", f"The target's next token is {tok}, as in plain decoding.", (TREE,), (), True)


def _rollback(cycle: CycleTrace) -> Step:
    kept = ", ".join(quote(t) for t in cycle.committed_text) or "nothing"
    parts = [f"Committed {len(cycle.committed)} token{'s' * (len(cycle.committed) != 1)}: {kept}."]
    for name in ("target", "draft"):
        if name in cycle.cache_before and name in cycle.cache_after:
            parts.append(f"The {name} cache goes {cycle.cache_before[name]} → {cycle.cache_after[name]}.")
    wasted = [n.index for n in nodes_of(cycle) if n.index not in cycle.accepted]
    if wasted:
        parts.append(f"The {len(wasted)} rejected or unreached drafts are rolled back out of the cache.")
    return Step("Commit and roll back", " ".join(parts), (CACHE, TREE), tuple(wasted))


def explain_steps(cycle: CycleTrace) -> list[Step]:
    """The cycle's steps in the order the engine applied them."""
    steps = [_proposal(cycle)]
    if nodes_of(cycle):
        steps.append(_verify_pass(cycle))
        if cycle.greedy:
            steps += _greedy_levels(cycle)
        else:
            steps += [_judge(cycle, n) for n in judged(cycle)]
    ending = _ending(cycle)
    if ending is not None:
        steps.append(ending)
    steps.append(_rollback(cycle))
    return steps


def explain_html(cycle: CycleTrace, steps: list[Step], i: int) -> str:
    """The step panel: 'Step i of n', the title, the text and a row of all step names."""
    step = steps[i]
    trail = " › ".join(f"<b>{esc(s.title)}</b>" if j == i else esc(s.title) for j, s in enumerate(steps))
    return (f'<div class="sv-explain" data-step="{i}" data-steps="{len(steps)}">'
            f'<div class="sv-explain-count">Cycle {cycle.index} · step {i + 1} of {len(steps)}</div>'
            f'<div class="sv-explain-title">{esc(step.title)}</div>'
            f'<p class="sv-explain-text">{esc(step.text)}</p>'
            f'<div class="sv-explain-trail">{trail}</div>'
            f'<div class="sv-explain-key">▶ and a black frame: the figure this step is about · '
            f'<span style="background:{HIGHLIGHT};border:1px solid {BLACK};padding:0 4px">yellow</span> '
            f'rings and bands: its nodes and tokens</div></div>')


def _frame(fig: go.Figure, label: str) -> go.Figure:
    """A thick frame round the plot area and the step in the title: this is the figure to read."""
    fig.add_shape(type="rect", xref="paper", yref="paper", x0=0, y0=0, x1=1, y1=1,
                  line=dict(color=BLACK, width=4), fillcolor="rgba(0,0,0,0)", layer="above")
    fig.update_layout(title_text=f"▶ {esc_plot(label)} · {fig.layout.title.text}")
    return fig


def explained_tree(cycle: CycleTrace, step: Step, label: str) -> go.Figure:
    fig = tree_figure(cycle)
    pos = layout(nodes_of(cycle))
    points = [pos[i] for i in step.nodes if i in pos]
    if step.new_token and cycle.new_token is not None:
        points.append(new_token_pos(cycle, pos))
    if points:
        fig.add_trace(go.Scatter(x=[x for x, _ in points], y=[-y for _, y in points], mode="markers",
                                 name="this step", hoverinfo="skip",
                                 marker=dict(symbol="circle", size=34, color=HIGHLIGHT,
                                             line=dict(width=3, color=BLACK))))
        fig.data = (fig.data[-1],) + fig.data[:-1]  # drawn first: behind the node markers
    return _frame(fig, label) if TREE in step.charts else fig


def explained_pq(cycle: CycleTrace, step: Step, label: str) -> go.Figure:
    fig = pq_figure(cycle)
    order = [n.index for n in judged(cycle)]
    if PQ not in step.charts:
        return fig
    for i in step.nodes:
        if i in order:
            at = order.index(i)
            fig.add_shape(type="rect", xref="x", yref="paper", x0=at - 0.5, x1=at + 0.5, y0=0, y1=1,
                          fillcolor=HIGHLIGHT, line=dict(width=0), layer="below")
    return _frame(fig, label)


def explained_views(cycle: CycleTrace, steps: list[Step], i: int) -> dict:
    """tree, pq, residual and cache for step i, the parts it talks about highlighted."""
    step = steps[i]
    label = f"{i + 1}/{len(steps)}"
    residual = residual_figure(cycle)
    cache = cache_html(cycle)
    if RESIDUAL in step.charts:
        residual = _frame(residual, label)
    if CACHE in step.charts:
        cache = (f'<div class="sv-focus" style="outline:3px solid {BLACK};outline-offset:2px;'
                 f'background:{HIGHLIGHT}">{cache}</div>')
    return {"tree": explained_tree(cycle, step, label), "pq": explained_pq(cycle, step, label),
            "residual": residual, "cache": cache}
