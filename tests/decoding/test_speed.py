"""One model of speed (decoding/speed.py, measure/waterfall.py): α and τ counted by hand equal the
code's, the waterfall from the paper's S(K) ends exactly on the measured speedup for recorded and
live runs of every method, and the inputs it cannot use get a sentence, not a traceback."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import specviz
from specviz.decoding import speed
from specviz.decoding.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleTrace, NodeTrace, RunTrace, summarize
from specviz.measure import waterfall
from specviz.proposers.head import HeadProposer
from specviz.proposers.hybrid import HybridProposer
from specviz.proposers.logitspec import LogitSpecProposer
from specviz.training.head_fit import new_head
from tests.helpers.tiny import FixedTreeProposer, pair

ROOT = Path(__file__).resolve().parents[2]
PROMPT = [4, 8, 15, 16, 23, 30, 2, 11, 6, 4, 8, 15, 16, 23]


def node(i, depth, status, parent=-1) -> NodeTrace:
    return NodeTrace(index=i, token=i, text=str(i), parent=parent, depth=depth, status=status)


def hand_trace() -> list[CycleTrace]:
    """Four cycles whose counts are worked out by hand in the tests below."""
    tree = CycleTrace(index=0, k=2, nodes=[node(0, 1, ACCEPTED), node(1, 1, NOT_REACHED), node(2, 2, REJECTED, 0)],
                      accepted=[0], rejected=2, committed=[0, 9])  # depth 1 accepted, depth 2 rejected
    chain = CycleTrace(index=1, k=3, nodes=[node(0, 1, ACCEPTED), node(1, 2, ACCEPTED, 0), node(2, 3, ACCEPTED, 1)],
                       accepted=[0, 1, 2], committed=[0, 1, 2, 9])  # all accepted, then the bonus
    siblings = CycleTrace(index=2, k=2, nodes=[node(0, 1, REJECTED), node(1, 1, REJECTED)], rejected=1,
                          committed=[9])  # both children of the root fail: one judged depth, none accepted
    plain = CycleTrace(index=3, k=2, committed=[9])  # the planner sent nothing
    return [tree, chain, siblings, plain]


def test_alpha_tau_and_depth_curves_by_hand_on_a_tree_trace():
    """On the hand-made trace: judged depths 2 + 3 + 1 = 6 of which 1 + 3 + 0 = 4 accepted, so α = 4/6
    (not accepted ÷ nodes sent, 4/8); α_d = 2/3, 1/2, 1 (judged 3, 2, 1 times); reach_d over all 4
    cycles = 2/4, 1/4, 1/4; τ = (2 + 4 + 1 + 1) / 4 = 2 = 1 + Σ reach_d; 8 nodes sent over 4 cycles,
    3 of 4 cycles sent any."""
    got = speed.counts(hand_trace())
    assert got["acceptance_rate"] == pytest.approx(4 / 6)
    assert got["acceptance_by_position"] == pytest.approx([2 / 3, 1 / 2, 1.0])
    assert got["reach_by_position"] == pytest.approx([2 / 4, 1 / 4, 1 / 4])
    assert got["mean_accepted_tokens"] == pytest.approx(1 + sum(got["reach_by_position"]))
    assert got["mean_accepted_tokens"] == pytest.approx(2.0)
    assert got["sent_per_cycle"] == pytest.approx(2.0) and got["cycles_sent_share"] == pytest.approx(0.75)
    assert summarize(hand_trace(), 8, 1.0)["acceptance_rate"] == got["acceptance_rate"]  # what a run's metrics keep


def test_alpha_of_a_chain_is_accepted_over_judged_tokens():
    """A chain of 4 with the third rejected: 2 accepted of 3 judged tokens (the fourth was never
    reached), so α = 2/3, Leviathan et al.'s per-position rate."""
    chain = CycleTrace(index=0, k=4, nodes=[node(0, 1, ACCEPTED), node(1, 2, ACCEPTED, 0), node(2, 3, REJECTED, 1),
                                           node(3, 4, NOT_REACHED, 2)], accepted=[0, 1], rejected=2,
                       committed=[0, 1, 9])
    assert speed.counts([chain])["acceptance_rate"] == pytest.approx(2 / 3)


def _by_status(cycles) -> float:
    """α counted another way, from node statuses alone: distinct depths with an accepted node over
    distinct depths with an accepted or rejected node."""
    acc = sum(len({n.depth for n in c.nodes if n.status == ACCEPTED}) for c in cycles)
    judged = sum(len({n.depth for n in c.nodes if n.status in (ACCEPTED, REJECTED)}) for c in cycles)
    return acc / judged


def recorded_runs():
    """(name, run, AR baseline) of every recorded lesson and pair that carries both."""
    out = []
    for path in sorted((ROOT / "assets" / "lessons").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("run") and data.get("ar"):
            out.append((path.stem, RunTrace.from_dict(data["run"]), RunTrace.from_dict(data["ar"])))
    return out


@pytest.mark.parametrize("name,run,ar", recorded_runs(), ids=[r[0] for r in recorded_runs()])
def test_recorded_traces_alpha_and_waterfall(name, run, ar):
    """On every recorded lesson trace: α from the code equals α counted from node statuses, and the
    waterfall's last bar equals the speedup the trace records: committed tokens per decode second over
    the AR run's to 1e-9, and the files' tokens/s (rounded to 4 digits when recorded) to 1e-3. The
    last-bar check is an identity (the overhead is the leftover seconds, see the live-run test below):
    it holds the recorded files to the same accounting, not the bars' formulas."""
    if any(c.nodes for c in run.cycles):
        assert speed.counts(run.cycles)["acceptance_rate"] == pytest.approx(_by_status(run.cycles))
    bars = waterfall.waterfall(run, ar)
    def rate(r):
        return sum(len(c.committed) for c in r.cycles) / r.metrics["decode_s"]

    assert bars[-1].value == pytest.approx(rate(run) / rate(ar), rel=1e-9)
    assert bars[-1].value == pytest.approx(run.metrics["tokens_per_s"] / ar.metrics["tokens_per_s"], rel=1e-3)
    assert [b.name for b in bars] == ["paper S(K)", "sizes sent", "acceptance as measured", "verify cost v(n)",
                                      "draft cost c", "overhead"]


def _head(target) -> HeadProposer:
    """A draft head, untrained, on the tiny target (the trained one fits only the bundled model)."""
    return HeadProposer(new_head(target.model, torch.arange(32), seed=1, intermediate=32), target.model)


def _hybrid(target):
    retrieval = LogitSpecProposer(top_k=2, min_ngram=1, lone_cands=True, adaptive=False)
    return HybridProposer(retrieval, _head(target))


LIVE = ["pld", "logitspec", "draft", "layerskip", "head", "tree", "hybrid"]


@pytest.mark.parametrize("method", LIVE)
@pytest.mark.parametrize("temperature,plan", [(0.0, True), (0.0, False), (0.8, True)])
def test_identity_waterfall_ends_on_the_measured_speedup_for_live_runs(method, temperature, plan):
    """An identity, not a claim about speed: for live runs of every method on tiny models (greedy and
    sampled, planner on and off; with it off every method sends drafts, which is asserted), the
    waterfall's last bar is the run's tokens/s over its AR
    baseline's, exactly. It holds by construction (the overhead o is defined as the decode seconds
    left over after drafting and verifying), so it checks no bar's formula: a wrong middle bar
    passes here (tests/measure/test_theory_by_hand.py checks every bar against hand-worked values).
    Kept because it is what makes "no gap is left to call noise" true on every method's real
    traces: it fails if costs() and the measured tokens/s ever count seconds or tokens differently
    (a cycle's time left out, prefill counted on one side only), and each bar must have a sentence
    that does not say noise."""
    target, draft = pair(noise=0.05, layers=3)
    kw = dict(k=4, max_new_tokens=24, chat=False, temperature=temperature, seed=3, plan=plan)
    if method == "tree":
        kw["proposer"] = FixedTreeProposer(depth=3, branching=2, vocab=32, seed=1)
    elif method == "hybrid":
        kw["proposer"] = _hybrid(target)
    elif method == "head":
        kw["proposer"] = _head(target)
    else:
        kw["method"] = method
        if method == "draft":
            kw["draft"] = draft
        if method == "layerskip":
            kw["layers"] = [0, 2]
    run = specviz.generate(target, PROMPT, **kw)
    if not plan:  # every offer is sent: the identity is checked on cycles that really drafted
        assert any(c.nodes for c in run.cycles), f"{method} sent no draft with the planner off"
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=24, chat=False)
    bars = waterfall.waterfall(run, ar)
    assert bars[-1].value == pytest.approx(run.metrics["tokens_per_s"] / ar.metrics["tokens_per_s"], rel=1e-9)
    assert all(b.sentence and "noise" not in b.sentence for b in bars)


def test_waterfall_names_concurrent_cycles_only_when_the_counter_shows_them():
    """The last bar's sentence speaks of other runs only when the run's own cycles say they ran beside
    others, and then gives how many."""
    target, _ = pair()
    run = specviz.generate(target, PROMPT, method="pld", k=4, max_new_tokens=16, chat=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    assert "beside other runs" not in waterfall.waterfall(run, ar)[-1].sentence
    for c in run.cycles[:3]:
        c.concurrent = 2
    assert f"3 of its {len(run.cycles)} cycles ran beside other runs" in waterfall.waterfall(run, ar)[-1].sentence


def test_model_inputs_that_cannot_be_used_get_a_sentence():
    """A run that drafted nothing, a trace without timings and an AR baseline of one token each raise a
    ValueError whose message says what to do."""
    target, _ = pair()
    run = specviz.generate(target, PROMPT, method="pld", k=4, max_new_tokens=16, chat=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    prof = lambda n: 1.0  # noqa: E731
    plain = specviz.generate(target, PROMPT, method="ar", max_new_tokens=8, chat=False)
    with pytest.raises(ValueError, match="drafted nothing.*pick a run with a proposer"):
        waterfall.analyse(plain, ar, prof)
    one = specviz.generate(target, PROMPT, method="ar", max_new_tokens=1, chat=False)
    with pytest.raises(ValueError, match="at least two new tokens"):
        waterfall.analyse(run, one, prof)
    untimed = RunTrace.from_dict(run.to_dict())
    untimed.metrics = {}
    for c in untimed.cycles:
        c.draft_s = c.verify_s = c.other_s = 0.0
    with pytest.raises(ValueError, match="no timings.*decode it again"):
        waterfall.analyse(untimed, ar, prof)


# -- one set of words -------------------------------------------------------------------------------------
OLD_LABELS = ["mean accepted tokens", "accepted ÷ reached", "accepted ÷ judged)", "acceptance rate α",
              "overall α", "tokens / cycle", "expected accepted length", "α (acceptance per position)"]


def test_the_glossary_defines_every_word_of_speed_as_the_code_does():
    """Each term of decoding/speed.py has a row in docs/GLOSSARY.md's "Words of speed" that reads exactly
    `| label | definition |`, so the page's labels and the glossary's definitions cannot drift."""
    text = (ROOT / "docs" / "GLOSSARY.md").read_text(encoding="utf-8")
    glossary = text.split("## Words of speed", 1)[1].split("\n## ", 1)[0]
    missing = [t.label for t in speed.TERMS.values() if f"| {t.label} | {t.means} |" not in glossary]
    assert missing == []


def test_no_view_uses_an_old_label_for_a_word_of_speed():
    """No module of the package writes α, τ or the by-depth curves under a label the glossary
    retired (the old ones are listed here); a planted old label is found."""
    def found(text: str) -> list[str]:
        return [old for old in OLD_LABELS if old in text]

    hits = {p.relative_to(ROOT).as_posix(): found(p.read_text(encoding="utf-8"))
            for p in (ROOT / "specviz").rglob("*.py")}
    assert {p: h for p, h in hits.items() if h} == {}
    assert found('parts = [f"mean accepted tokens per cycle"]') == ["mean accepted tokens"]


def test_every_view_labels_alpha_and_tau_with_the_glossarys_words():
    """The timing panel, Side by side's summary, Compare's table, the Theory table, the CLI line and
    the bench report each show α and τ under speed.label's words, and the by-depth curves, where a
    view shows them, under theirs."""
    from specviz import cli
    from specviz.measure.bench import summary_markdown
    from specviz.viz import compare_figures, metrics, pair_views

    target, _ = pair()
    run = specviz.generate(target, PROMPT, method="pld", k=4, max_new_tokens=16, chat=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    alpha, tau = speed.label("acceptance_rate"), speed.label("mean_accepted_tokens")
    conditional, marginal = speed.label("acceptance_by_position"), speed.label("reach_by_position")
    side = pair_views.Side(run, ar, "t", True, "A")
    analysis = waterfall.analyse(run, ar, lambda n: 1.0)
    report = {"machine": {"date": "d", "cpu": "c", "torch": "t", "threads": 1}, "settings": {}, "results": [],
              "summary": {"pld": {"tokens_per_s_median": 1.0, "acceptance_by_position": [0.5]}}}
    views = {
        "timing panel": metrics.metrics_html(run.metrics, ar.metrics),
        "side by side": pair_views.summary_html(side, side),
        "compare": compare_figures.compare_table_html([dict(index=1, label="pld", method="pld", speedup=1.2)]),
        "theory": compare_figures.theory_html(analysis),
        "cli": cli.metrics_line(run.metrics, "pld"),
        "bench": summary_markdown(report),
    }
    assert [name for name, html in views.items() if alpha not in html or tau not in html] == []
    assert conditional in views["timing panel"] and conditional in views["bench"]
    assert speed.label("sent_per_cycle") in views["timing panel"] and speed.label("cycles_sent_share") in views[
        "timing panel"]
    assert conditional in views["side by side"] and marginal in views["side by side"]
