"""HTML panels built from traces: the coloured text, the legend, and the KV caches.

Fragments are self-contained (inline styles), so they look the same whether or not the page
loads a stylesheet; the `sv-…` classes are hooks for one. Text colour is inherited, and the
tints are translucent, so both light and dark themes stay readable.
"""
from __future__ import annotations

from specviz.decoding.trace import TARGET, CycleTrace, RunTrace
from specviz.viz.style import BLUE, GREY, ORIGIN, STATUS, VERMILLION, esc
from specviz.viz.tree_figure import found_in, nodes_of

MAX_SLOTS = 80  # cache cells drawn per row: a 64-node tree plus the newest token and context


def tint(colour: str, alpha: float = 0.22) -> str:
    """`#RRGGBB` → a translucent rgba, for backgrounds that work on light and dark pages."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _token_style(origin: str) -> str:
    _, colour, underline = ORIGIN.get(origin, ORIGIN[TARGET])
    return f"background:{tint(colour)};border-bottom:{underline} {colour};"


def _swatch(name: str, origin: str) -> str:
    return (f'<span class="sv-tok sv-{esc(origin)}" style="{_token_style(origin)}padding:0 4px;'
            f'margin-right:8px;white-space:nowrap">{esc(name)}</span>')


def origin_legend() -> str:
    items = "".join(_swatch(name, origin) for origin, (name, _, _) in ORIGIN.items())
    return (f'<div class="sv-legend" style="font-size:12px;margin:2px 0 6px;user-select:none">'
            f'<b>Text:</b> {items}<span style="white-space:nowrap">│ = cycle boundary</span></div>')


def status_legend() -> str:
    items = "".join(f'<span style="margin-right:10px;white-space:nowrap"><span style="color:{colour}">'
                    f'{glyph}</span> {esc(name)}</span>' for name, colour, _, glyph in STATUS.values())
    return (f'<div class="sv-legend" style="font-size:12px;margin:2px 0;user-select:none">'
            f'<b>Tree:</b> {items}</div>')


def legend_html() -> str:
    """Key to the text colours (token origin) and to the tree's node marks (status)."""
    return f'<div class="sv-legends">{origin_legend()}{status_legend()}</div>'


def text_html(run: RunTrace) -> str:
    """The generated text, one span per token tinted and underlined by origin, a thin rule at
    the first token of each cycle, hover title "cycle N · origin". Copies as plain text."""
    spans, last = [], None
    for i, text in enumerate(run.token_texts):
        origin = run.origins[i] if i < len(run.origins) else TARGET
        cycle = run.cycle_of[i] if i < len(run.cycle_of) else -1
        where = "prefill" if cycle < 0 else f"cycle {cycle}"
        edge = "border-left:1px solid rgba(128,128,128,0.8);" if cycle != last and i > 0 else ""
        last = cycle
        name = ORIGIN.get(origin, ORIGIN[TARGET])[0]
        spans.append(f'<span class="sv-tok sv-{esc(origin)}" title="{where} · {esc(name)}" '
                     f'style="{_token_style(origin)}{edge}">{esc(text)}</span>')
    body = "".join(spans) or '<span style="opacity:0.6">(no tokens yet)</span>'
    # pre-wrap keeps the model's newlines and spaces; no whitespace between spans on purpose
    return (f'<div class="sv-text">{origin_legend()}<div class="sv-text-body" style="white-space:pre-wrap;'
            f'line-height:1.8;font-size:15px;overflow-wrap:anywhere">{body}</div></div>')


def match_html(cycle: CycleTrace) -> str:
    """Suffix decoding's match, highlighted in the text it was found in: a few tokens before it,
    the matched suffix marked, and what followed it there (what the draft copied). Empty when the
    cycle drafted nothing from a suffix match. An earlier run is named only as "an earlier run on
    this prompt"."""
    match = getattr(cycle, "match", None)
    if match is None or not found_in(match.found_in):
        return ""
    span = lambda texts, cls: f'<span class="{cls}">{esc("".join(texts))}</span>'  # noqa: E731
    return (f'<div class="sv-match"><span class="sv-match-where">Matched in {esc(found_in(match.found_in))}'
            f'{f" ({match.count} times)" if match.count > 1 else ""}:</span> '
            f'<span style="white-space:pre-wrap">…{span(match.before, "sv-match-before")}'
            f'<mark class="sv-match-suffix" title="the matched suffix">{esc("".join(match.matched))}</mark>'
            f'<span class="sv-match-after" style="text-decoration:underline dotted" title="what followed it there">'
            f'{esc("".join(match.after))}</span>…</span></div>')


def _ends(texts: list[str]) -> list[int]:
    """Where each token ends, as a character offset into their joined text."""
    out, at = [], 0
    for t in texts:
        at += len(t)
        out.append(at)
    return out


def _tokens_row(label: str, texts: list[str], other_ends: set[int], title: str) -> str:
    """One tokenizer's tokens, each boxed; a token whose end is not also an end in the other row has
    a dashed vermillion right edge: the two tokenizers split the text differently there."""
    cells, at = [], 0
    for t in texts:
        at += len(t)
        edge = f"2px solid {GREY}" if at in other_ends else f"2px dashed {VERMILLION}"
        shown = t.replace("\n", "↵")  # a newline token would show as an empty box
        cells.append(f'<span class="sv-seam-tok" title="{esc(title)}" style="display:inline-block;white-space:pre;'
                     f'padding:1px 3px;margin:1px 0;border-right:{edge};background:rgba(0,0,0,0.04)">'
                     f'{esc(shown)}</span>')
    return (f'<div class="sv-seam-row"><span class="sv-seam-label" style="display:inline-block;min-width:9em">'
            f'{esc(label)}</span>{"".join(cells) or "(none)"}</div>')


def seam_html(cycle: CycleTrace) -> str:
    """A draft from another family at the seam: its own tokens, the target tokens their text became
    (the tree's nodes), boundaries where the two tokenizers split differently (dashed), and which q
    the nodes were judged with. Empty for a draft that shares the target's tokenizer."""
    seam = getattr(cycle, "seam", None)
    if seam is None:
        return ""
    d_ends, t_ends = _ends(seam.draft), _ends(seam.target)
    if seam.judged == "greedy":
        judged = ("Greedy: each target token is checked against the target's own argmax, so q plays no part; "
                  "the draft's text was encoded again with the target's tokenizer.")
    else:
        judged = (f"Sampled: each draft token was drawn from the draft's q kept to the {seam.shared:,} tokens "
                  "both vocabularies share and renormalised; the node is the target token with the same text, "
                  "judged with that q (token-level intersection).")
    cut = f'<div class="sv-seam-cut">{esc(seam.cut[:1].upper() + seam.cut[1:])}.</div>' if seam.cut else ""
    return ('<div class="sv-seam"><div class="sv-seam-head">A draft from another family: the seam between '
            'two tokenizers</div>'
            + _tokens_row("draft's tokens", seam.draft, set(t_ends), "a token of the draft's own tokenizer")
            + _tokens_row("target tokens", seam.target, set(d_ends), "a target token: a node of the tree")
            + f'<div class="sv-seam-judged">{esc(judged)}</div>{cut}</div>')


def _slots(before: int, after: int, peak: int) -> str:
    """The tail of a cache, one cell per entry: kept (grey), added and kept (blue), written
    then rolled back (dashed vermillion outline, empty)."""
    keep = min(before, after)
    end = max(before, after, peak)
    lo = max(0, keep - 3, end - MAX_SLOTS)
    cells = ['<span style="opacity:0.6">…</span>'] if lo > 0 else []
    for i in range(lo, end):
        if i < keep:
            style = f"background:{GREY}"
        elif i < after:
            style = f"background:{BLUE}"
        else:
            style = f"border:1px dashed {VERMILLION};box-sizing:border-box"
        cells.append(f'<span style="display:inline-block;width:7px;height:12px;margin-right:1px;{style}"></span>')
    return "".join(cells)


def row(cells: list[str], tag: str = "td", wrap: bool = False) -> str:
    """A table row of already-escaped cells, padded so numbers do not run together; `wrap` lets
    long cells break over lines."""
    space = "normal" if wrap else "nowrap"
    return "<tr>" + "".join(f'<{tag} style="padding:1px 8px;text-align:left;white-space:{space}">{c}</{tag}>'
                            for c in cells) + "</tr>"


def _cache_row(name: str, before: int, after: int, peak: int) -> str:
    return row([esc(name), str(before), str(after), f"{after - before:+d}", _slots(before, after, peak)])


def _served_cache_note(served: dict) -> str:
    """What a vLLM server reported for a cycle's verify request, in place of local cache lengths."""
    prompts, tokens, cached = (int(served.get(k) or 0) for k in ("prompts", "prompt_tokens", "cached_tokens"))
    return (f"Target (served by vLLM): its keys and values live in the server's prefix cache, and the lengths "
            f"above are the run's context as sent. This verify request sent {prompts} prompt"
            f"{'s' if prompts != 1 else ''} (the context, then the path to each draft node) with {tokens} prompt "
            f"tokens, of which the server found {cached} in its cache. Rollback is the server's prefix cache: "
            "the rejected drafts are simply not sent again.")


def cache_html(cycle: CycleTrace) -> str:
    """Each model's KV cache length before the cycle and after rollback, with the tail drawn
    as cells; for the target also what the verify pass wrote and rollback dropped."""
    rows, notes = [], []
    for name in ("target", "draft"):
        if name not in cycle.cache_before or name not in cycle.cache_after:
            continue
        before, after = cycle.cache_before[name], cycle.cache_after[name]
        peak = after
        if name == "target" and cycle.served:
            notes.append(_served_cache_note(cycle.served))
        elif name == "target":
            # the verify pass feeds [newest committed] + every draft node
            written = before + 1 + len(nodes_of(cycle))
            if not nodes_of(cycle):
                notes.append("Target: the plain step wrote 1 entry; nothing to roll back.")
            elif written >= after:
                peak = written
                notes.append(f"Target: the verify pass wrote {written - before} entries "
                             f"(newest token + {written - before - 1} drafts); rollback dropped {written - after}.")
        rows.append(_cache_row(name, before, after, peak))
    if not rows:
        return '<div class="sv-cache">KV caches: not recorded for this cycle.</div>'
    key = (f'<span style="color:{GREY}">■</span> kept · <span style="color:{BLUE}">■</span> added · '
           f'<span style="color:{VERMILLION}">⬚</span> written, then rolled back')
    head = row(["cache", "before", "after rollback", "change", "tail"], "th")
    return (f'<div class="sv-cache" style="font-size:13px"><table style="border-collapse:collapse">'
            f'<caption style="text-align:left;font-weight:600">KV cache lengths, cycle {cycle.index}</caption>'
            f'{head}{"".join(rows)}</table><div style="font-size:12px">{key}</div>'
            f'<div style="font-size:12px">{" ".join(notes)}</div></div>')
