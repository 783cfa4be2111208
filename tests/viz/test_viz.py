"""The viz layer on hand-built traces: every view runs on every kind of cycle, escapes model
text, and says what the trace says."""
from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import pytest

from specviz.decoding.trace import (
    ACCEPTED,
    BONUS,
    FROM_DRAFT,
    NOT_REACHED,
    REJECTED,
    RESAMPLED,
    TARGET,
    Alt,
    CycleTrace,
    NodeTrace,
    RunTrace,
)
from specviz.viz import (
    acceptance_figure,
    cache_html,
    instructive_cycle,
    legend_html,
    metrics_html,
    narrate,
    pq_figure,
    residual_figure,
    teaches_everything,
    text_html,
    timeline_figure,
    tree_figure,
)
from specviz.viz.style import MODEBAR_STRIP

NASTY = ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "$x$", "**b**", " a\nb"]


# -- a small factory of cycles ------------------------------------------------------------
def alts(words, probs=(0.4, 0.3, 0.2, 0.05, 0.05)):
    return [Alt(100 + i, w, p) for i, (w, p) in enumerate(zip(words, probs))]


def node(i, text, parent, depth, status, p=None, q=0.5, a=None, r=None, source="", tops=("x",)):
    return NodeTrace(i, 10 + i, text, parent, depth, q=q, p=p, accept_prob=a, r=r, status=status,
                     p_top=alts(tops), q_top=alts(tops), source=source)


def chain_reject(words=("the", " cat", " sat", " on", " mat"), new=" in") -> CycleTrace:
    """The narration example: 5 drafted, 3 accepted, the 4th rejected, resampled from the residual."""
    nodes = [node(i, w, i - 1, i + 1, ACCEPTED, p=0.9, q=0.8, a=1.0, r=0.3, tops=words)
             for i, w in enumerate(words[:3])]
    nodes.append(node(3, words[3], 2, 4, REJECTED, p=0.12, q=0.61, a=0.12 / 0.61, r=0.55, tops=words))
    nodes.append(node(4, words[4], 3, 5, NOT_REACHED, q=0.7, tops=words))
    return CycleTrace(index=7, k=5, nodes=nodes, accepted=[0, 1, 2], rejected=3,
                      residual_top=[Alt(50, new, 0.5)] + alts(words[:2], (0.3, 0.2)), new_token=Alt(50, new, 0.5),
                      new_kind=RESAMPLED, committed=[10, 11, 12, 50], committed_text=[*words[:3], new],
                      origins=[FROM_DRAFT] * 3 + [RESAMPLED], cache_before={"target": 212, "draft": 214},
                      cache_after={"target": 215, "draft": 215}, elapsed_s=1.5, total_tokens=20, greedy=False)


def full_accept(words=("a", " b", " c"), new=" x") -> CycleTrace:
    """Every draft accepted, then a bonus token from p."""
    nodes = [node(i, w, i - 1, i + 1, ACCEPTED, p=0.7, q=0.6, a=1.0, r=0.2, tops=words) for i, w in enumerate(words)]
    return CycleTrace(index=2, k=3, nodes=nodes, accepted=[0, 1, 2], new_token=Alt(60, new, 0.8), new_kind=BONUS,
                      committed=[10, 11, 12, 60], origins=[FROM_DRAFT] * 3 + [BONUS],
                      cache_before={"target": 20}, cache_after={"target": 24}, greedy=False)


def tree_cycle(words=("A", "B", "A2", "C", "D", "E"), new=" F") -> CycleTrace:
    """A branching deterministic draft: root branch rejected, branch 'cand 1' wins two levels,
    then both children of the last accepted node are rejected and the target resamples."""
    w = words
    nodes = [node(0, w[0], -1, 1, REJECTED, p=0.2, q=None, a=0.2, r=0.5, source="root", tops=w),
             node(1, w[1], -1, 1, ACCEPTED, p=0.6, q=None, a=0.6, r=0.1, source="cand 1", tops=w),
             node(2, w[2], 0, 2, NOT_REACHED, q=None, source="root", tops=w),
             node(3, w[3], 1, 2, ACCEPTED, p=0.9, q=None, a=0.9, r=0.4, source="cand 1", tops=w),
             node(4, w[4], 3, 3, REJECTED, p=0.1, q=None, a=0.1, r=0.7, source="cand 1", tops=w),
             node(5, w[5], 3, 3, REJECTED, p=0.3, q=None, a=0.3, r=0.9, source="cand 1", tops=w)]
    return CycleTrace(index=4, k=3, nodes=nodes, accepted=[1, 3], rejected=5, residual_top=alts([new, *w[:2]]),
                      new_token=Alt(100, new, 0.4), new_kind=RESAMPLED, committed=[11, 13, 100],
                      origins=[FROM_DRAFT, FROM_DRAFT, RESAMPLED], cache_before={"target": 30},
                      cache_after={"target": 33}, greedy=False, retrieval_hit=True)


def empty_draft(new=" x") -> CycleTrace:
    """No draft: one plain target step."""
    return CycleTrace(index=0, k=4, new_token=Alt(70, new, 0.41), new_kind=TARGET, committed=[70],
                      origins=[TARGET], cache_before={"target": 9}, cache_after={"target": 10})


def greedy_cycle(words=("one", " two", " three"), new=" 2") -> CycleTrace:
    """Greedy: the first draft equals argmax p, the second does not; the target takes argmax p."""
    nodes = [node(0, words[0], -1, 1, ACCEPTED, p=0.8, q=0.7, tops=words),
             node(1, words[1], 0, 2, REJECTED, p=0.2, q=0.6, tops=(new, *words)),
             node(2, words[2], 1, 3, NOT_REACHED, q=0.5, tops=words)]
    return CycleTrace(index=3, k=3, nodes=nodes, accepted=[0], rejected=1, new_token=Alt(100, new, 0.4),
                      new_kind=RESAMPLED, committed=[10, 100], origins=[FROM_DRAFT, RESAMPLED],
                      cache_before={"target": 40, "draft": 42}, cache_after={"target": 42, "draft": 42})


def nasty_cycles() -> list[CycleTrace]:
    return [chain_reject(NASTY, NASTY[1]), full_accept(NASTY[:3], NASTY[0]), tree_cycle(NASTY + ["e"], NASTY[2]),
            empty_draft(NASTY[1]), greedy_cycle(NASTY[:3], NASTY[3])]


def run_of(cycles: list[CycleTrace], method="draft", tps=30.0) -> RunTrace:
    texts, origins, cycle_of = ["Hi"], [TARGET], [-1]
    for c in cycles:
        texts += c.committed_text or [f"t{c.index}"] * len(c.committed)
        origins += c.origins
        cycle_of += [c.index] * len(c.committed)
    metrics = {"tokens_per_s": tps, "new_tokens": len(texts), "decode_s": 2.0, "cycles": len(cycles),
               "mean_accepted_tokens": 2.5, "acceptance_rate": 0.75, "acceptance_by_position": [0.9, 0.7, 0.4],
               "draft_s": 0.5, "verify_s": 1.0, "other_s": 0.2, "retrieval_success": None}
    return RunTrace(method=method, token_texts=texts, origins=origins, cycle_of=cycle_of, cycles=cycles,
                    metrics=metrics, prefill_s=0.3, token_ids=list(range(len(texts))))


ALL = [chain_reject, full_accept, tree_cycle, empty_draft, greedy_cycle]
FIGURES = [tree_figure, pq_figure, residual_figure]


def strings(obj):
    """Every string inside a figure's JSON-like dict."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from strings(v)


def test_the_theme_is_plotly_white_for_every_trace_type_the_app_draws():
    """The slim theme (style.TRACE_TYPES) keeps plotly_white's layout whole and its style for each
    trace type SpecViz's code constructs anywhere (a source scan of specviz/ for plotly trace
    classes), so dropping the other types' styles changes no figure's look."""
    from pathlib import Path

    import plotly.io as pio

    from specviz.viz import style

    theme, white = pio.templates["specviz"], pio.templates["plotly_white"]
    assert pio.templates.default == "specviz"
    assert theme.layout.to_plotly_json() == white.layout.to_plotly_json()
    source = "\n".join(p.read_text() for p in Path(style.__file__).parents[1].rglob("*.py"))
    drawn = {name.lower() for name in re.findall(r"\bgo\.([A-Z][A-Za-z]+)\(", source) if name != "Figure"}
    assert drawn and drawn <= set(style.TRACE_TYPES)
    for kind in style.TRACE_TYPES:
        assert [t.to_plotly_json() for t in getattr(theme.data, kind)] == \
            [t.to_plotly_json() for t in getattr(white.data, kind)]


# -- every view runs on every kind of cycle -----------------------------------------------
@pytest.mark.parametrize("make", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("draw", FIGURES, ids=lambda f: f.__name__)
def test_cycle_figures_have_title_axes_and_legend(make, draw):
    """Each cycle figure builds, has a title and named axes, and names every trace it draws."""
    fig = draw(make())
    assert fig.layout.title.text
    assert fig.layout.template.layout.paper_bgcolor is not None  # plotly_white applied
    if fig.data:
        assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
        assert all(t.name for t in fig.data)
    else:
        assert fig.layout.annotations, "an empty figure must say why it is empty"
    assert 280 <= fig.layout.height <= 400 + MODEBAR_STRIP  # the strip above the title is the mode bar's


@pytest.mark.parametrize("make", ALL, ids=lambda f: f.__name__)
def test_figures_built_unchecked_equal_plotlys_checked_build(make, monkeypatch):
    """A Step's figures are built without plotly's property checks (style.VALIDATE off): each one's
    JSON equals the checked build's, so a property plotly would expand or refuse shows here."""
    from specviz.viz import style

    cycle = make()
    run = RunTrace(method="x", cycles=[cycle], token_ids=cycle.committed, origins=cycle.origins,
                   metrics={"acceptance_by_position": [0.5, 0.25], "acceptance_rate": 0.4})
    built = {}
    for checked in (True, False):
        monkeypatch.setattr(style, "VALIDATE", checked)
        figures = [draw(cycle) for draw in FIGURES] + [acceptance_figure(run), timeline_figure(run, run)]
        built[checked] = [json.loads(f.to_json()) for f in figures]  # key order aside
    assert built[True] == built[False]


def test_mode_bar_strip_lies_above_every_title():
    """Every figure leaves MODEBAR_STRIP pixels above its title (plotly's mode bar shows there on
    hover) and its plot area starts below the title."""
    figs = [draw(make()) for make in ALL for draw in FIGURES]
    figs += [timeline_figure(run_of([chain_reject()]), None), acceptance_figure(run_of([chain_reject()]))]
    for fig in figs:
        assert fig.layout.title.yref == "container" and fig.layout.title.yanchor == "top"
        assert fig.layout.title.pad.t >= MODEBAR_STRIP, fig.layout.title.text
        assert fig.layout.margin.t >= fig.layout.title.pad.t + 20, fig.layout.title.text  # a 14 px title fits


@pytest.mark.parametrize("make", ALL, ids=lambda f: f.__name__)
def test_text_views_run_on_every_cycle(make):
    """narrate and cache_html give a non-empty result for every kind of cycle."""
    c = make()
    assert narrate(c).startswith(f"Cycle {c.index}")
    assert f"cycle {c.index}" in cache_html(c)


# -- escaping ---------------------------------------------------------------------------
def assert_html_safe(out: str):
    assert "<script" not in out.lower() and "<img" not in out.lower()
    assert "$x$" not in out and "**b**" not in out
    assert "&lt;script&gt;" in out or "&lt;img" in out


@pytest.mark.parametrize("i", range(5))
def test_figures_escape_model_text(i):
    """Token text with tags, TeX or Markdown reaches plotly labels and hover only escaped."""
    c = nasty_cycles()[i]
    for draw in FIGURES:
        texts = list(strings(draw(c).to_plotly_json()))
        joined = "\n".join(texts)
        assert "<script" not in joined and "<img" not in joined and "$x$" not in joined
    tree = "\n".join(strings(tree_figure(c).to_plotly_json()))
    assert "&lt;" in tree or "&#36;x&#36;" in tree


def test_html_outputs_escape_model_text():
    """text_html and legend_html never pass raw tags, TeX or Markdown through."""
    run = run_of(nasty_cycles()[:1])
    run.token_texts += NASTY
    run.origins += [TARGET] * len(NASTY)
    run.cycle_of += [9] * len(NASTY)
    assert_html_safe(text_html(run))
    assert "<script" not in legend_html()
    assert "<script" not in metrics_html({"tokens_per_s": 1.0}, None)


def test_cache_html_has_no_model_text():
    """cache_html shows only numbers and model roles, so nasty tokens never reach it."""
    for c in nasty_cycles():
        out = cache_html(c)
        assert "<script" not in out and "alert" not in out


# -- narration ----------------------------------------------------------------------------
def test_narration_of_known_chain_cycle():
    """The chain example reads exactly as the design's sentence."""
    assert narrate(chain_reject()) == (
        "Cycle 7: 5 drafted; accepted 'the', ' cat', ' sat'; rejected ' on' (p = 0.12, q = 0.61, "
        "accept with 0.20, r = 0.55); resampled ' in' from the residual; no bonus. "
        "Target cache 212 → 215, draft cache 214 → 215.")


def test_narration_of_bonus_empty_greedy_and_tree():
    """Bonus, empty drafts, greedy and trees are each told in their own words."""
    assert narrate(full_accept()) == ("Cycle 2: 3 drafted; accepted 'a', ' b', ' c'; no rejection; "
                                      "bonus ' x' drawn from p. Target cache 20 → 24.")
    assert narrate(empty_draft()) == ("Cycle 0 (greedy): no draft; plain target step ' x' (p = 0.41). "
                                      "Target cache 9 → 10.")
    assert narrate(greedy_cycle()) == (
        "Cycle 3 (greedy): 3 drafted; accepted 'one'; rejected ' two' (p = 0.20, not argmax p); "
        "took argmax p ' 2' instead; no bonus. Target cache 40 → 42, draft cache 42 → 42.")
    told = narrate(tree_cycle())
    assert "a tree of 6 nodes drafted (3 branches, depth 3)" in told
    assert "accepted 'B', 'C' along branch 'cand 1'" in told
    assert "q = 1 (deterministic)" in told and "from p without the rejected token" in told
    assert "after 2 other rejected nodes" in told


# -- what the figures show ----------------------------------------------------------------
def test_tree_node_colours_match_statuses():
    """Each node sits in the trace of its status, drawn in that status's colour and symbol."""
    expected = {"accepted": ("#0072B2", "circle"), "rejected": ("#D55E00", "x"),
                "not reached": ("#999999", "circle-open")}
    c = tree_cycle()
    fig = tree_figure(c)
    by_name = {t.name: t for t in fig.data}
    for n in c.nodes:
        name = n.status.replace("_", " ")
        trace = by_name[name]
        assert (trace.marker.color, trace.marker.symbol) == expected[name]
        assert any(h.startswith(f"node {n.index} ") for h in trace.hovertext)
        assert any(f"status: <b>{name}</b>" in h for h in trace.hovertext)
    assert by_name["resampled (new token)"].marker.color == "#E69F00"


def test_tree_places_new_token_after_last_accepted():
    """The bonus token continues the path straight on; a plain step hangs off the root."""
    fig = tree_figure(full_accept())
    bonus = next(t for t in fig.data if t.name == "bonus (new token)")
    assert (bonus.x[0], bonus.y[0]) == (4, 0)
    step = next(t for t in tree_figure(empty_draft()).data if t.name == "plain target (new token)")
    assert (step.x[0], step.y[0]) == (1, 0)


def test_tree_hover_under_greedy_and_sampling():
    """Greedy hover states the argmax rule and no r; sampling hover shows min(1, p/q) and r."""
    greedy = "\n".join(strings(tree_figure(greedy_cycle()).to_plotly_json()))
    assert "greedy: accept if token = argmax p" in greedy and "r = " not in greedy
    sampled = "\n".join(strings(tree_figure(chain_reject()).to_plotly_json()))
    assert "accept with min(1, p/q) = 0.20" in sampled and "r = 0.55" in sampled
    assert "top-5 p:" in sampled and "top-5 q:" in sampled


def test_pq_figure_deterministic_draft_draws_q_as_one():
    """A deterministic draft's q bars are 1, hatched, and the note says so."""
    fig = pq_figure(tree_cycle())
    q = next(t for t in fig.data if t.name == "q(x) draft")
    assert list(q.y) == [1.0] * 5
    assert any("deterministic draft: q = 1" in a.text for a in fig.layout.annotations)


def test_pq_figure_marks_accept_prob_and_r():
    """The sampled chain shows min(1, p/q) and r for each of its four judged tokens."""
    fig = pq_figure(chain_reject())
    names = {t.name: t for t in fig.data}
    assert len(names["r (uniform draw)"].y) == 4
    assert names["min(1, p/q)"].y[3] == pytest.approx(0.12 / 0.61)


def test_residual_figure_highlights_drawn_token():
    """The drawn token is its own highlighted bar; without a rejection the figure says bonus."""
    fig = residual_figure(chain_reject())
    drawn = next(t for t in fig.data if t.name == "drawn (resampled)")
    assert list(drawn.x) == ["␣in"] and list(drawn.y) == [0.5]
    note = residual_figure(full_accept()).layout.annotations[0].text.replace("<br>", " ")  # wrapped for phones
    assert note == "No rejection this cycle: bonus token ␣x drawn from p"
    greedy = residual_figure(greedy_cycle())
    assert "greedy: the replacement is argmax p" in greedy.layout.annotations[0].text


def test_instructive_cycle_has_accept_reject_and_residual():
    """The cycle a page opens on has an accepted draft, a rejection and a sampled residual, even
    when a later cycle accepts more; greedy, full-accept and plain cycles never qualify."""
    run = run_of([empty_draft(), full_accept(), greedy_cycle(), chain_reject(), full_accept()])
    assert instructive_cycle(run) == 3
    assert teaches_everything(chain_reject())
    assert not any(teaches_everything(make()) for make in (empty_draft, full_accept, greedy_cycle))


def test_instructive_cycle_prefers_a_residual_that_q_reshaped():
    """Among qualifying cycles, one whose residual's top token differs from p's top token comes
    first (there the residual visibly differs from p); otherwise the earliest."""
    plain = chain_reject()
    plain.residual_top = [Alt(100, "the", 0.5), Alt(50, " in", 0.3)]  # p's top token stays on top
    assert instructive_cycle(run_of([plain, chain_reject()])) == 1
    assert instructive_cycle(run_of([chain_reject(), chain_reject()])) == 0


def test_instructive_cycle_without_a_residual_takes_the_most_accepted():
    """A greedy run has no residual: it opens on the cycle that accepted the most; no cycles, None."""
    assert instructive_cycle(run_of([greedy_cycle(), full_accept(), empty_draft()])) == 1
    assert instructive_cycle(run_of([])) is None


# -- run views ----------------------------------------------------------------------------
def test_metrics_html_shows_speedup():
    """The speedup is spec tokens/s ÷ AR tokens/s, and a missing baseline is said plainly."""
    spec, ar = run_of([chain_reject()]).metrics, run_of([], "ar", tps=12.0).metrics
    out = metrics_html(spec, ar)
    assert "Speedup: 2.50×" in out and "30.0 ÷ 12.0" in out
    assert "α" in out and "90%" in out and "verify" in out
    assert "needs the AR baseline: press <b>Run</b>" in metrics_html(spec, None)


def test_timeline_starts_at_prefill():
    """Both lines start at (prefill seconds, 1 token) and end at the last cycle's totals."""
    spec = run_of([chain_reject(), full_accept()])
    fig = timeline_figure(spec, run_of([empty_draft()], "ar"))
    assert len(fig.data) == 2
    assert (fig.data[0].x[0], fig.data[0].y[0]) == (0.3, 1)
    assert (fig.data[0].x[-1], fig.data[0].y[-1]) == (spec.cycles[-1].elapsed_s, spec.cycles[-1].total_tokens)
    assert timeline_figure(None, None).layout.annotations


def test_acceptance_figure_bars_and_alpha():
    """One bar per draft position and a line at the overall α."""
    fig = acceptance_figure(run_of([chain_reject()]))
    assert list(fig.data[0].y) == [0.9, 0.7, 0.4]
    assert fig.data[1].name == "α (acceptance rate) = 0.75"  # the glossary's label (decoding/speed.py)
    assert acceptance_figure(RunTrace(method="ar")).layout.annotations


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.depth, self.out = 0, []

    def handle_starttag(self, tag, attrs):
        if self.depth or ("class", "sv-text-body") in attrs:
            self.depth += 1

    def handle_endtag(self, tag):
        self.depth = max(0, self.depth - 1)

    def handle_data(self, data):
        if self.depth:
            self.out.append(data)


def test_text_html_spans_titles_and_plain_copy():
    """One span per token titled "cycle N · origin", a rule at each cycle's first token,
    newlines kept, and the body reads back as exactly the generated text."""
    run = run_of([chain_reject(), greedy_cycle()])
    run.token_texts[-1] = "\n<b>"
    out = text_html(run)
    assert 'title="cycle 7 · accepted draft"' in out and 'title="prefill · plain target"' in out
    assert len(re.findall(r"border-left:1px solid", out)) == 2
    assert "white-space:pre-wrap" in out and "\n&lt;b&gt;" in out
    parser = _Text()
    parser.feed(out)
    assert html.unescape("".join(parser.out)) == "".join(run.token_texts)


def test_tree_layout_depth_by_sibling_order():
    """x is the depth; a parent shares its first child's row and later siblings go below,
    and a resampled token whose parent had drafts gets a row of its own under them."""
    c = tree_cycle()
    where = {}
    for t in tree_figure(c).data:
        if t.mode == "markers+text":
            for x, y, h in zip(t.x, t.y, t.hovertext):
                where[h.split(" ·")[0].split("<br>")[0]] = (x, y)
    assert where["root: the last committed token"] == (0, 0)
    assert [where[f"node {i}"] for i in range(6)] == [(1, 0), (1, -1), (2, 0), (2, -1), (3, -1), (3, -2)]
    assert where["new token ␣F (id 100)"] == (3, -3)


@pytest.mark.drafts
def test_every_view_accepts_real_engine_traces():
    """Traces from the real engine (draft chain greedy and sampled, a deterministic tree, AR),
    after a JSON round trip, go through every view: the viz reads the fields the engine writes.
    The drafting runs send their drafts (plan=False: a same-size draft would send none)."""
    from specviz.decoding.engine import generate
    from tests.helpers.drafts import drafted
    from tests.helpers.tiny import PROMPTS, FixedTreeProposer, pair
    target, draft = pair(noise=0.3)
    kw = dict(max_new_tokens=10, chat=False, plan=False)
    runs = [generate(target, PROMPTS[0], method="draft", draft=draft, k=4, temperature=t, **kw) for t in (0.0, 1.0)]
    runs.append(generate(target, PROMPTS[0], proposer=FixedTreeProposer(), k=3, temperature=1.0, **kw))
    assert all(drafted(run) > 0 for run in runs)
    ar = RunTrace.from_json(generate(target, PROMPTS[0], method="ar", **kw).to_json())
    for run in (RunTrace.from_json(r.to_json()) for r in runs):
        for c in run.cycles:
            for draw in FIGURES:
                assert draw(c).layout.title.text
            assert narrate(c).startswith(f"Cycle {c.index}") and "cache" in cache_html(c)
        assert text_html(run).count('class="sv-tok') >= len(run.token_texts)
        assert "Speedup:" in metrics_html(run.metrics, ar.metrics)
        assert len(timeline_figure(run, ar).data) == 2 and acceptance_figure(run).layout.title.text


def test_prefill_and_rebuilds_are_shown_apart_from_decoding():
    """The timing panel names the prefill and cache rebuilds outside the decode-time split."""
    spec = dict(run_of([chain_reject()]).metrics, decode_s=1.7, prefill_s=0.25, rebuild_s=0.5, rebuilds=2)
    out = metrics_html(spec, None)
    assert "Not counted as decoding: prefill 0.25 s" in out
    assert "KV cache rebuilt 2× in 0.50 s" in out
    assert "prefill &amp; rest" not in out  # decode_s is draft + verify + overhead exactly


def test_narration_says_who_proposed_and_what_the_planner_left_out():
    """A mixed tree's sentence counts nodes per proposer; a cycle the planner cut says how many it sent."""
    from specviz.decoding.trace import NodeTrace
    cycle = chain_reject()
    cycle.nodes = [NodeTrace(0, 5, "a", -1, 1, source="root", ngram=3, status="accepted"),
                   NodeTrace(1, 6, "b", -1, 1, q=0.4, source="head", status="rejected")]
    cycle.accepted, cycle.rejected, cycle.offered = [0], None, 9
    text = narrate(cycle)
    assert "(1 by lookup, 1 by head)" in text
    assert "offered 9 nodes; the 2 expected to pay" in text


def test_a_heads_later_choices_are_named_by_their_rank():
    """A head node with Source branch b > 0 (a greedy head tree's sibling) reads 'head choice b+1';
    the head's first choice, branch 0, reads plain 'head'."""
    from specviz.viz.tree_figure import source_label

    first = NodeTrace(index=0, token=5, text="a", parent=-1, depth=1, source="head")
    second = NodeTrace(index=1, token=6, text="b", parent=-1, depth=1, source="head", branch=1)
    assert source_label(first) == "head" and source_label(second) == "head choice 2"
