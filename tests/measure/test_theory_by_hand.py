"""The model of speed against numbers worked out by hand (measure/waterfall.py, speed_model.py):
every bar of the waterfall on a four-cycle trace, what `analyse` reports for it, `machine_inputs`'
fits on runs whose true lines were chosen here, and `text_inputs`' groups by sent depth.

Every expected value below is literal arithmetic written in the test, never a call to the theory
modules' or speed.py's helpers: a wrong formula there cannot hide in its own expectation. The
identity that the last bar equals the measured speedup is checked elsewhere
(tests/decoding/test_speed.py); here the measured end is itself worked out from the trace's tokens
and seconds.
"""
from __future__ import annotations

import pytest

from specviz.decoding.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleTrace, NodeTrace, RunTrace
from specviz.measure import speed_model, waterfall

UNIT = 0.1  # seconds of a one-token target pass in every AR baseline here


def chain(index: int, depth: int, accepted: int, draft_s: float, verify_s: float, other_s: float,
          k: int = 3, source: str = "draft") -> CycleTrace:
    """A chain of `depth` drafts whose first `accepted` were accepted; the next, if any, was rejected
    and ends the path. Commits the accepted drafts plus one (the resampled or bonus token)."""
    status = [ACCEPTED] * accepted + [REJECTED] * (accepted < depth) + [NOT_REACHED] * (depth - accepted - 1)
    nodes = [NodeTrace(index=i, token=i, text="", parent=i - 1, depth=i + 1, status=status[i], source=source)
             for i in range(depth)]
    return CycleTrace(index=index, k=k, nodes=nodes, accepted=list(range(accepted)),
                      rejected=accepted if accepted < depth else None, committed=[0] * (accepted + 1),
                      draft_s=draft_s, verify_s=verify_s, other_s=other_s)


def plain(index: int, verify_s: float, other_s: float, k: int = 3) -> CycleTrace:
    """A cycle that sent nothing: one plain target step."""
    return CycleTrace(index=index, k=k, committed=[0], verify_s=verify_s, other_s=other_s)


def ar_baseline(cycles: int = 4) -> RunTrace:
    """An AR run of one-token steps at UNIT seconds each, plus 0.01 s outside the pass: o_AR = 0.01/0.1."""
    return RunTrace("ar", cycles=[plain(i, UNIT, 0.01, k=0) for i in range(cycles)])


def waterfall_run() -> RunTrace:
    """Four cycles of a draft-model chain at K = 3 (the numbers are worked in the test below):
    A sent 3, 2 accepted; B sent 2, the first rejected; C sent nothing; D sent 3, 1 accepted.
    The decode took 0.80 s, 0.04 s more than the cycles' own split (0.16 + 0.52 + 0.08)."""
    cycles = [chain(0, 3, 2, draft_s=0.06, verify_s=0.15, other_s=0.02),
              chain(1, 2, 0, draft_s=0.04, verify_s=0.13, other_s=0.02),
              plain(2, verify_s=0.10, other_s=0.02),
              chain(3, 3, 1, draft_s=0.06, verify_s=0.14, other_s=0.02)]
    return RunTrace("draft", settings={"k": 3}, cycles=cycles,
                    metrics={"decode_s": 0.80, "acceptance_rate": 0.5, "acceptance_by_position": [2 / 3, 1 / 2, 0.0]})


def test_every_waterfall_bar_worked_by_hand():
    """Each bar of the waterfall equals its value worked by hand from the trace.

    α = accepted ÷ judged depths = (2 + 0 + 1) / (3 + 1 + 2) = 1/2; K = 3; one-token pass 0.1 s;
    c = 0.16 s / 8 draft calls / 0.1 = 0.2; τ = (3 + 1 + 1 + 2) / 4 = 7/4; D = 0.16 / 4 / 0.1 = 0.4;
    V = 0.52 / 4 / 0.1 = 1.3; o = (0.80 − 0.16 − 0.52) / 4 / 0.1 = 0.3; o_AR = 0.04 / 0.40 = 0.1.
    Each bar changes one term, so a wrong formula in any one of them moves that bar off its value."""
    alpha, k, c, tau, d, v, o, o_ar = 0.5, 3, 0.2, 7 / 4, 0.4, 1.3, 0.3, 0.1
    e_k = 1 + alpha + alpha ** 2 + alpha ** 3  # (1 − α^(K+1)) / (1 − α) = 15/8
    e_sent = (e_k + (1 + alpha + alpha ** 2) + 1 + e_k) / 4  # depths 3, 2, 0 (one token), 3: 13/8
    by_hand = {
        "paper S(K)": e_k / (k * c + 1),  # 1.875 / 1.6 = 1.171875
        "sizes sent": e_sent / (k * c + 1),  # 1.625 / 1.6 = 1.015625
        "acceptance as measured": tau / (k * c + 1),  # 1.75 / 1.6 = 1.09375
        "verify cost v(n)": tau / (k * c + v),  # 1.75 / 1.9
        "draft cost c": tau / (d + v),  # 1.75 / 1.7
        "overhead": tau * (1 + o_ar) / (d + v + o),  # 1.925 / 2.0 = 0.9625
    }
    assert by_hand["paper S(K)"] == pytest.approx(1.171875) and by_hand["sizes sent"] == pytest.approx(1.015625)
    measured = (7 / 0.80) / (4 / 0.44)  # tokens per decode second, the run's over the AR run's
    assert by_hand["overhead"] == pytest.approx(measured)
    bars = waterfall.waterfall(waterfall_run(), ar_baseline())
    assert {b.name: b.value for b in bars} == {name: pytest.approx(value, rel=1e-12) for name, value in by_hand.items()}
    assert [b.name for b in bars] == list(by_hand)
    sentences = [b.sentence for b in bars]
    assert "α = 0.50, K = 3 and c = 0.200" in sentences[0] and "25% sent nothing" in sentences[1]
    assert "τ = 1.75" in sentences[2] and "cost 1.30" in sentences[3] and "0.30 passes" in sentences[5]


def test_analysis_of_the_hand_trace_worked_by_hand():
    """analyse reports the hand-worked values for the same trace, with v(n) = 1 + 0.1 (n − 1):
    a chain at K = 3, α = 1/2, E[accepted] = 1/2 + 1/4 + 1/8, v_k = v(4) = 1.3, the run's own v over
    the cycles that sent a draft (0.15 + 0.13 + 0.14) / 3 / 0.1 = 1.4, and the model's S at K = 3:
    tokens 1 + reach of the cycle's group (3 deep: 1, 1/2, 0; 2 deep: 0) = 2.5, 1, 1, 2.5; costs
    0.2 a level + v(sent + 1) + the overhead 0.3 = 2.2, 1.9, 1.3, 2.2; S = 1.75 · 1.1 / 1.9."""
    a = waterfall.analyse(waterfall_run(), ar_baseline(), lambda n: 1 + 0.1 * (n - 1))
    assert (a.kind, a.k, a.planned) == ("chain", 3, False)
    assert a.alpha == 0.5 and a.expected_len == pytest.approx(0.875) and a.c == pytest.approx(0.2)
    assert a.v_k == pytest.approx(1.3) and a.v_run == pytest.approx(1.4) and a.verify_tokens == 3
    assert a.tau == pytest.approx(1.75) and a.measured == pytest.approx(0.9625)
    assert a.predicted == pytest.approx(1.75 * 1.1 / ((2.2 + 1.9 + 1.3 + 2.2) / 4))


# -- machine_inputs: fits on runs whose true lines are chosen here ----------------------------------------
TILT = [1, -2, 0, 2, -1]  # sums to 0 and is orthogonal to 0…4: least squares through it finds the line it tilts


def lookup_then_head(index: int, levels: int, lookups: int, seconds: tuple[float, float, float]) -> CycleTrace:
    """A hybrid cycle: `levels` nodes the head drafted (a call a level), then `lookups` copied nodes."""
    c = chain(index, levels + lookups, 0, *seconds, k=8, source="head")
    for n in c.nodes[levels:]:
        n.source = "lookup"
    return c


def test_machine_fits_recover_the_lines_they_were_made_from():
    """On a hybrid run made from chosen lines, in one-token passes of 0.1 s: drafting 0.05 + 0.3 a
    head level, overhead 0.1 + 0.02 a node sent, verify 1.5 × v(nodes + 1), all tilted by TILT so no
    point lies on its line; the decode's overhead is twice the cycles' own other_s (the rest of the
    decode is counted there too). machine_inputs recovers 0.05 and 0.3, 0.1 and 0.02 (after scaling
    other_s by that 2), v_scale 1.5, and o_AR = 0.01 / 0.1."""
    v = lambda n: 1 + 0.1 * (n - 1)  # noqa: E731
    cycles = []
    for i in range(5):  # i head levels and 2 lookups: 2 + i nodes sent
        draft = UNIT * (0.05 + 0.3 * i + 0.01 * TILT[i])
        verify = UNIT * 1.5 * v(2 + i + 1)
        other = UNIT * (0.1 + 0.02 * (2 + i) + 0.005 * TILT[i]) / 2  # half of what the fit should see
        cycles.append(lookup_then_head(i, i, 2, (draft, verify, other)))
    split = sum(c.draft_s + c.verify_s for c in cycles) + 2 * sum(c.other_s for c in cycles)
    run = RunTrace("hybrid", settings={"k": 8}, cycles=cycles, metrics={"decode_s": split})
    got = speed_model.machine_inputs(run, ar_baseline(5), v)
    assert got == {"draft0": pytest.approx(0.05), "draft1": pytest.approx(0.3), "over0": pytest.approx(0.1),
                   "over1": pytest.approx(0.02), "ar_overhead": pytest.approx(0.1), "v_scale": pytest.approx(1.5)}


def _sized_run(sizes: list[int], v) -> RunTrace:
    """Lookup chains of the given node counts whose verify pass costs 0.4 + 1.2 · v(nodes + 1) passes."""
    cycles = [chain(i, n, 0, 0.0, UNIT * (0.4 + 1.2 * v(n + 1)), 0.0, source="lookup") for i, n in enumerate(sizes)]
    return RunTrace("pld", settings={"k": 8}, cycles=cycles)


def test_passes_fitted_by_size_recover_their_line_and_need_three_sizes():
    """Verify passes costing 0.4 + 1.2 · v(n + 1) one-token passes: by size, over 4 sizes, machine_inputs
    finds v0 = 0.4 and v_scale = 1.2; without by_size it keeps one ratio, the mean pass over the mean
    priced one (and gives no v0: 0); with two sizes only, by_size keeps that ratio too. predict_at then prices
    a cycle's pass at v0 + v_scale · v(n + 1): one 2-node cycle, all rejected, with no other cost, is
    1 token over 0.4 + 1.2 · v(3) passes."""
    v = lambda n: 1 + 0.1 * (n - 1)  # noqa: E731
    sizes = [1, 2, 4, 8, 2, 4]
    got = speed_model.machine_inputs(_sized_run(sizes, v), ar_baseline(), v, by_size=True)
    assert (got["v0"], got["v_scale"]) == (pytest.approx(0.4), pytest.approx(1.2))
    ratio = sum(0.4 + 1.2 * v(n + 1) for n in sizes) / sum(v(n + 1) for n in sizes)
    plain_fit = speed_model.machine_inputs(_sized_run(sizes, v), ar_baseline(), v)
    assert "v0" not in plain_fit and plain_fit["v_scale"] == pytest.approx(ratio)
    two = speed_model.machine_inputs(_sized_run([2, 4, 2], v), ar_baseline(), v, by_size=True)
    two_ratio = sum(0.4 + 1.2 * v(n + 1) for n in (2, 4, 2)) / sum(v(n + 1) for n in (2, 4, 2))
    assert (two["v0"], two["v_scale"]) == (0.0, pytest.approx(two_ratio))
    x = speed_model.Inputs(acceptance=[0.0, 0.0], sent=[[1, 2]], full=[False], levels=[0], reach_by_sent_depth={},
                           draft0=0.0, draft1=0.0, over0=0.0, over1=0.0, ar_overhead=0.0, v_scale=1.2, v0=0.4)
    assert speed_model.predict_at(x, v, None) == pytest.approx(1 / (0.4 + 1.2 * v(3)))


def test_machine_fits_of_a_model_draft_and_of_lookups_alone():
    """A draft model's drafting goes through 0 at c a call (0.06 s over 3 + 2 calls is 0.12 passes a
    call; a cycle that sent nothing is left out); lookups alone have no model level, so their line is
    flat at the mean drafting, (0.01 + 0.03) / 2 / 0.1 = 0.2 passes, with no slope."""
    model = RunTrace("draft", cycles=[chain(0, 3, 1, 0.036, 0.1, 0.0), chain(1, 2, 0, 0.024, 0.1, 0.0),
                                      plain(2, 0.1, 0.0)])
    got = speed_model.machine_inputs(model, ar_baseline())
    assert (got["draft0"], got["draft1"]) == (0.0, pytest.approx(0.12))
    lookups = RunTrace("pld", cycles=[chain(0, 3, 1, 0.01, 0.1, 0.0, source="lookup"),
                                      chain(1, 1, 0, 0.03, 0.1, 0.0, source="lookup")])
    got = speed_model.machine_inputs(lookups, ar_baseline())
    assert (got["draft0"], got["draft1"]) == (pytest.approx(0.2), 0.0)


# -- text_inputs: what a run says about its text, grouped by how deep each cycle's draft went ------------
def test_text_inputs_group_cycles_by_the_depth_they_sent():
    """On five hand-made cycles at K = 3: a 3-chain all accepted; a tree of 3 nodes 2 deep (two
    siblings, one child), one accepted then rejected; nothing sent; a 2-chain rejected at once; a
    3-chain whose head drafted 2 levels, one accepted. Groups by deepest node, not node count:
    3 deep = {A, E}, reach 2/2, 1/2, 1/2; 2 deep = {B, D}, reach 1/2, 0/2. α_d over all cycles:
    3/4, 1/3, 1/1. Full only where the depth reached K; levels are the head's, 0 for lookups."""
    tree = CycleTrace(index=1, k=3, accepted=[0], rejected=2, committed=[0, 0], nodes=[
        NodeTrace(index=0, token=1, text="", parent=-1, depth=1, status=ACCEPTED, source="lookup"),
        NodeTrace(index=1, token=2, text="", parent=-1, depth=1, status=NOT_REACHED, source="lookup"),
        NodeTrace(index=2, token=3, text="", parent=0, depth=2, status=REJECTED, source="lookup")])
    head = chain(4, 3, 1, 0.0, 0.0, 0.0, source="head")
    head.nodes[2].source = "lookup"
    run = RunTrace("hybrid", settings={"k": 3}, cycles=[chain(0, 3, 3, 0.0, 0.0, 0.0, source="lookup"), tree,
                                                        plain(2, 0.0, 0.0), chain(3, 2, 0, 0.0, 0.0, 0.0,
                                                                                  source="lookup"), head])
    got = speed_model.text_inputs(run)
    assert got["acceptance"] == pytest.approx([3 / 4, 1 / 3, 1.0])
    assert got["sent"] == [[1, 2, 3], [1, 1, 2], [], [1, 2], [1, 2, 3]]
    assert got["full"] == [True, False, False, False, True]
    assert got["levels"] == [0, 0, 0, 0, 2]
    assert got["reach_by_sent_depth"] == {3: pytest.approx([1.0, 0.5, 0.5]), 2: pytest.approx([0.5, 0.0])}
