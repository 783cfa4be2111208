"""The draft tree of one cycle: root on the left, depth along x, siblings stacked along y."""
from __future__ import annotations

import plotly.graph_objects as go

from specviz.decoding.trace import BONUS, NOT_REACHED, RESAMPLED, TARGET, CycleTrace, NodeTrace
from specviz.proposers import source_specs
from specviz.viz.style import (
    BLUE,
    FIG_HEIGHT,
    GREY,
    PALETTE,
    ROOT_COLOUR,
    STATUS,
    FigureSpec,
    base_layout,
    esc_plot,
    label,
    num,
    scatter,
    top_list,
)

ROOT = -1  # the parent index of first-level nodes, as in NodeTrace.parent
BIG_TREE = 24  # beyond this many nodes markers shrink so labels stay legible
# more rows than this (~40 px each at the base height): labels move beside the nodes, figure grows
DENSE_ROWS = 4
LABEL_CHARS = 10  # on-node label length: neighbours one depth apart must not overlap; hover has it all


def nodes_of(cycle: CycleTrace) -> list[NodeTrace]:
    """The cycle's draft nodes (an unrecorded cycle has them too, without texts or q)."""
    return cycle.nodes


def is_tree(cycle: CycleTrace) -> bool:
    """A chain is node i hanging off node i − 1; anything else branches."""
    return any(n.parent != n.index - 1 for n in nodes_of(cycle))


def layout(nodes: list[NodeTrace]) -> dict[int, tuple[int, int]]:
    """(depth, row) per node and the root. A parent sits on its first child's row, so the
    first-tried branch runs straight and later siblings fall below it."""
    kids: dict[int, list[int]] = {}
    for n in nodes:
        kids.setdefault(n.parent, []).append(n.index)
    depth = {ROOT: 0, **{n.index: n.depth for n in nodes}}
    pos: dict[int, tuple[int, int]] = {}
    next_row = 0

    def place(i: int) -> int:
        nonlocal next_row
        if i not in kids:
            row, next_row = next_row, next_row + 1
        else:
            row = [place(k) for k in kids[i]][0]
        pos[i] = (depth[i], row)
        return row

    place(ROOT)
    return pos


def new_token_pos(cycle: CycleTrace, pos: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """After the last accepted node: straight on when nothing was drafted there, else a new row."""
    anchor = cycle.accepted[-1] if cycle.accepted else ROOT
    x, row = pos[anchor]
    has_kids = any(n.parent == anchor for n in nodes_of(cycle))
    return x + 1, (max(r for _, r in pos.values()) + 1 if has_kids else row)


def node_hover(node: NodeTrace, greedy: bool) -> str:
    name = STATUS[node.status][0]
    head = f"node {node.index} · depth {node.depth}"
    if node.source:
        head += f" · source: {esc_plot(source_label(node))}"
    lines = [head, f"token {label(node.text)} (id {node.token})", f"status: <b>{name}</b>",
             "q = 1 (deterministic draft)" if node.q is None else f"q = {num(node.q)}",
             "p = – (not verified)" if node.p is None else f"p = {num(node.p)}"]
    if greedy:
        lines.append("greedy: accept if token = argmax p")
        if node.p_top:
            lines.append(f"argmax p = {label(node.p_top[0].text)}")
    elif node.status != NOT_REACHED:
        lines.append(f"accept with min(1, p/q) = {num(node.accept_prob)}")
        lines.append(f"r = {num(node.r)}")
    if node.p_top:
        lines.append(f"top-5 p: {top_list(node.p_top)}")
    if node.q_top:
        lines.append(f"top-5 q: {top_list(node.q_top)}")
    return "<br>".join(lines)


def new_hover(cycle: CycleTrace) -> str:
    tok = cycle.new_token
    judged = [n for n in nodes_of(cycle) if n.index == cycle.rejected]
    point_mass = bool(judged) and judged[0].q is None
    why = {
        RESAMPLED: ("greedy: the replacement is argmax p" if cycle.greedy else
                    "drawn from p with the rejected token(s) removed" if point_mass else
                    "drawn from the residual norm(max(0, p − q))"),
        BONUS: "every draft on the path accepted: " + ("argmax p" if cycle.greedy else "drawn from p")
               + " at the next position",
        TARGET: "no draft: one plain target step",
    }[cycle.new_kind]
    return "<br>".join([f"new token {label(tok.text)} (id {tok.token})",
                        f"kind: <b>{STATUS[cycle.new_kind][0]}</b>",
                        f"probability where drawn = {num(tok.prob)}", why])


def edges(cycle: CycleTrace, pos) -> tuple[list, list, list, list]:
    """Line coordinates (x, y with None breaks) of the accepted path and of the other edges."""
    on_path = {ROOT, *cycle.accepted}
    px, py, ox, oy = [], [], [], []
    for n in nodes_of(cycle):
        (x0, y0), (x1, y1) = pos[n.parent], pos[n.index]
        xs, ys = (px, py) if n.parent in on_path and n.index in on_path else (ox, oy)
        xs += [x0, x1, None]
        ys += [-y0, -y1, None]
    return px, py, ox, oy


# Who proposed a node, its word and its outline's colour when a tree mixes proposers (the fill says
# its status), are its proposer's: each method's spec declares its sources (proposers/method_spec.SourceSpec).


def source_kind(node: NodeTrace) -> str:
    """The proposer behind a node, in a word, for colours and counts: 'head', 'candidate', 'lookup', …;
    a file from before the source fields shows its own label."""
    known = source_specs().get(node.source)
    return known.word if known is not None else (node.source or "draft")


def found_in(kind: str) -> str:
    """The text a retrieved node's match was found in, in words ('the prompt', …; an earlier run is
    never named, only its prompt), or "" where its source says none."""
    known = source_specs().get(kind)
    return known.found_in if known is not None else ""


def source_label(node: NodeTrace) -> str:
    """The node's source as a reader sees it, e.g. 'cand 2 (logit rank 3)', 'lookup 3-gram' or
    'head choice 2'."""
    gram = f"lookup {node.ngram}-gram" if node.ngram is not None else "lookup"
    if node.source == "candidate":
        return f"cand {node.branch} (logit rank {node.rank})" if node.rank is not None else f"cand {node.branch} {gram}"
    if node.source == "root":
        return f"root {gram}"
    if node.source == "lookup":
        return gram
    if found_in(node.source):  # e.g. 'suffix, 5-token match in the prompt, choice 2 by frequency'
        choice = f", choice {node.branch + 1} by frequency" if node.branch else ""
        return f"{source_kind(node)}, {node.ngram}-token match in {found_in(node.source)}{choice}"
    if node.source == "head" and node.branch:  # greedy head trees: the head's 2nd, 3rd, … choice
        return f"head choice {node.branch + 1}"
    known = source_specs().get(node.source)
    return known.word if known is not None else node.source


def source_colour(node: NodeTrace, default: str) -> str:
    """The outline of a node: its source's colour, or `default` (its status's) where it names none."""
    known = source_specs().get(node.source)
    return PALETTE[known.colour] if known is not None and known.colour else default


def tree_figure(cycle: CycleTrace) -> go.Figure:
    """The draft tree, each node labelled with its token and marked by status; the new token
    (resampled, bonus or plain target step) hangs off the last accepted node."""
    nodes = nodes_of(cycle)
    pos = layout(nodes)
    if cycle.new_token is not None:
        pos["new"] = new_token_pos(cycle, pos)  # before the row count, which includes it
    # many sibling rows: labels go to the right of the markers, in a smaller font
    dense = max((y for _, y in pos.values()), default=0) > DENSE_ROWS
    text_style = dict(textposition="middle right", textfont=dict(size=9)) if dense else {}
    fig = FigureSpec()
    px, py, ox, oy = edges(cycle, pos)
    if ox:
        fig.add_trace(scatter(x=ox, y=oy, mode="lines", name="draft edge", hoverinfo="skip",
                                 legendrank=1100, line=dict(color=GREY, width=1.5)))
    if px:
        fig.add_trace(scatter(x=px, y=py, mode="lines", name="accepted path", hoverinfo="skip",
                                 legendrank=1100, line=dict(color=BLUE, width=3)))
    _add_new_token(fig, cycle, pos, text_style)
    fig.add_trace(scatter(x=[0], y=[0], mode="markers+text", name="root (last committed)",
                             text=["root"], textposition="middle left", hoverinfo="text",
                             hovertext=["root: the last committed token"],
                             marker=dict(symbol="square-open", size=16, color=ROOT_COLOUR, line=dict(width=2))))
    size = 10 if len(nodes) > BIG_TREE else 16
    for status, (name, colour, symbol, _) in STATUS.items():
        group = [n for n in nodes if n.status == status]
        if group:
            fig.add_trace(scatter(
                x=[pos[n.index][0] for n in group], y=[-pos[n.index][1] for n in group],
                mode="markers+text", name=name, text=[label(n.text, LABEL_CHARS) for n in group],
                hoverinfo="text", hovertext=[node_hover(n, cycle.greedy) for n in group],
                marker=dict(symbol=symbol, size=size, color=colour,
                            line=dict(width=3, color=[source_colour(n, colour) for n in group])),
                **{"textposition": "top center", **text_style}))
    return _tree_layout(fig, cycle, pos)


def _add_new_token(fig: FigureSpec, cycle: CycleTrace, pos, text_style: dict) -> None:
    if cycle.new_token is None:
        return
    name, colour, symbol, _ = STATUS[cycle.new_kind]
    anchor = cycle.accepted[-1] if cycle.accepted else ROOT
    (ax, ay), (x, y) = pos[anchor], pos["new"]
    fig.add_trace(scatter(x=[ax, x], y=[-ay, -y], mode="lines", name="edge to new token",
                             hoverinfo="skip", legendrank=1100, line=dict(color=colour, width=2, dash="dash")))
    fig.add_trace(scatter(x=[x], y=[-y], mode="markers+text", name=f"{name} (new token)",
                             text=[label(cycle.new_token.text, LABEL_CHARS)],
                             hoverinfo="text", hovertext=[new_hover(cycle)],
                             marker=dict(symbol=symbol, size=18, color=colour, line=dict(width=1, color=colour)),
                             **{"textposition": "bottom center", **text_style}))


def _tree_layout(fig: FigureSpec, cycle: CycleTrace, pos) -> go.Figure:
    nodes = nodes_of(cycle)
    if nodes:
        shape = "tree" if is_tree(cycle) else "chain"
        title = (f"Cycle {cycle.index}: draft {shape} — {len(cycle.accepted)} of {len(nodes)} accepted"
                 f", then {STATUS[cycle.new_kind][0]}")
    else:
        title = f"Cycle {cycle.index}: no draft — one plain target step"
    base_layout(fig, title, "draft position (depth)", "sibling order", legend_above=False)
    max_x = max(x for x, _ in pos.values())
    rows = max(y for _, y in pos.values())
    # many legend entries: a column on the right keeps them clear of the title
    fig.update_layout(legend=dict(orientation="v", x=1.01, xanchor="left", y=1.0, yanchor="top"),
                      margin=dict(r=150),
                      xaxis=dict(tickmode="array", tickvals=list(range(max_x + 1)),
                                 ticktext=["root"] + [str(d) for d in range(1, max_x + 1)],
                                 range=[-0.6, max_x + 0.6], showgrid=False, zeroline=False),
                      yaxis=dict(showticklabels=False, showgrid=False, zeroline=False, range=[-rows - 0.7, 0.7]))
    if rows > DENSE_ROWS:
        fig.update_layout(height=min(520, FIG_HEIGHT + 18 * (rows - DENSE_ROWS)))
    return fig.build()
