"""The pair advisor (specviz/advise/advisor.py, advice.py, survey_inputs.py): counts, the model's
predictions, break-even, the survey file, command line.

Every predicted number is the model of speed's (measure/speed_model.py): a test swaps the model's
predict_at for a sentinel and finds every number the advisor shows changed with it, and a small
survey is worked by hand. The measurement runs on tiny random models (their numbers mean nothing,
the plumbing is what is checked).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specviz.advise import advice, advice_report, advisor, deploy, survey_inputs, survey_schema
from specviz.decoding.trace import CycleTrace, NodeTrace, RunTrace
from specviz.loading.loader import load
from specviz.measure import speed_model
from specviz.measure.theory import speedup

ROOT = Path(__file__).resolve().parents[2]


def _cycle(depth: int, accepted: int, siblings: int = 0) -> CycleTrace:
    nodes = [NodeTrace(i, 5, "", i - 1, i + 1) for i in range(depth)]
    nodes += [NodeTrace(depth + j, 6, "", -1, 1) for j in range(siblings)]  # extra candidates at depth 1
    return CycleTrace(index=0, k=depth, nodes=nodes, accepted=list(range(accepted)),
                      rejected=accepted if accepted < depth else None)  # the path ends at its first rejection


def test_positions_are_counted_as_reached_and_accepted():
    """Four cycles: a 3-deep draft accepted in full, one accepted 1 of 3, one rejected at once, one
    with no draft. Position i is reached when drafted that deep and 1…i−1 were accepted; the
    conditional rate divides by reached, the marginal by all cycles; siblings count as nodes."""
    run = RunTrace(method="pld", cycles=[_cycle(3, 3), _cycle(3, 1, siblings=2), _cycle(2, 0),
                                         CycleTrace(index=3, k=3)])
    cycles, reached, accepted, nodes = advisor.count_positions([run], 3)
    assert cycles == 4 and reached == [3, 2, 1] and accepted == [2, 1, 1]
    assert nodes == pytest.approx([(1 + 3 + 1 + 0) / 4, (2 + 4 + 2) / 4, (3 + 5 + 2) / 4])
    m = advice.Measured(advice.Candidate("pld"), 3, cycles, reached, accepted, nodes, 0.0, False, 1.0)
    assert m.conditional == pytest.approx([2 / 3, 1 / 2, 1.0]) and m.marginal == pytest.approx([0.5, 0.25, 0.25])


def test_the_prediction_is_leviathans_for_a_constant_rate_chain():
    """With marginal_i = α^i, a full chain of K nodes every cycle and a per-call cost c, the model's
    S(K), from the inputs an older survey derives, equals Leviathan et al.'s
    (1 − α^(K+1)) / ((1 − α)(K·c + v(K+1))) for every K; the break-even α gives S = 1."""
    alpha, c, k_max = 0.7, 0.1, 8
    v = lambda n: 1.0 + 0.05 * (n - 1)  # noqa: E731 -- a pass over n tokens
    m = advice.Measured(advice.Candidate("draft", "d"), k_max, 1000, [1000.0] * k_max,
                         [1000 * alpha ** i for i in range(1, k_max + 1)], [float(d) for d in range(1, k_max + 1)],
                         c, True, 1.0)
    for k in range(1, k_max + 1):
        assert advice.speedup_at(m, k, v) == pytest.approx(speedup(alpha, k, c, lambda d: v(d + 1)))
    be = advice.break_even(m, 4, v)
    assert speedup(be, 4, c, lambda d: v(d + 1)) == pytest.approx(1.0, abs=1e-3)
    assert advice.break_even(advice.Measured(m.candidate, 2, 1, [1, 1], [1, 1], [1, 2], 5.0, True, 1.0), 2, v) is None


def test_candidates_parse_and_refuse_with_a_reason():
    """'draft:SPEC' names a draft model, 'draft:head' is the trained head, and an unknown name or a
    draft without a model is refused with what to write instead."""
    assert advice.Candidate.parse("draft:bundled") == advice.Candidate("draft", "bundled")
    assert advice.Candidate.parse("pld") == advice.Candidate("pld", None)
    with pytest.raises(ValueError, match="not a candidate"):
        advice.Candidate.parse("magic")
    with pytest.raises(ValueError, match="draft:SPEC"):
        advice.Candidate.parse("draft")


@pytest.fixture(scope="module")
def survey():
    target = load("tiny-random:vocab=48,layers=2,seed=3")
    draft = load("tiny-random:vocab=48,layers=2,seed=3,draft=1")
    prompts = [[1, 5, 9, 2, 7, 1, 5, 9], [3, 4, 3, 4, 3, 4]]
    cands = [advice.Candidate("pld"), advice.Candidate("draft", "d"), advice.Candidate("logitspec")]
    return advisor.measure(target, cands, prompts, lambda spec: draft, lambda n: 1.0 + 0.02 * n, k_max=4,
                           max_new_tokens=12, check=2, progress=lambda m: None)


def test_measure_ranks_every_candidate_and_checks_the_best(survey):
    """On a tiny target, every candidate is measured at k_max with rates in [0, 1], ranked by its
    predicted best speedup, and the two best were decoded again and compared with plain decoding."""
    rows = advice.ranked(survey)
    assert [r[0].candidate.method for r in rows] and len(rows) == 3
    assert [r[2] for r in rows] == sorted((r[2] for r in rows), reverse=True)
    for m in survey.measured:
        assert len(m.conditional) == 4 and all(0.0 <= x <= 1.0 for x in m.conditional + m.marginal)
    assert set(survey.checks) == {rows[0][0].candidate.label, rows[1][0].candidate.label}
    assert all(chk.measured > 0 for chk in survey.checks.values())


def test_the_survey_file_gives_back_the_same_advice(survey, tmp_path):
    """A saved profile reads back equal, and `advise --from` prints the same report, and where to
    deploy it, without a model; a file that is not a survey is refused on one line."""
    path = tmp_path / "survey.json"
    advice.save(survey, path)
    again = advice.read(path)
    assert again == survey
    out = subprocess.run([sys.executable, "-m", "specviz", "advise", "--from", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    whole = advice_report.report(survey) + "\n\n" + deploy.report(survey)
    assert out.returncode == 0 and out.stdout.strip() == whole.strip()
    assert ("α_d (acceptance at depth d, conditional)" in out.stdout
            and "reach_d (acceptance at depth d, marginal)" in out.stdout)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "other"}))
    out = subprocess.run([sys.executable, "-m", "specviz", "advise", "--from", str(bad)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and out.stderr.startswith("specviz: error: not a SpecViz advice survey")


def test_load_prediction_is_the_batch_one_formula_scaled_by_measured_passes():
    """S_B(K) at batch 1 equals S(K) when v(n) is the batch-1 passes over the plain step; at batch 16
    it is the model's cycle with its pass priced at r_16(n) against a plain token's r_16(1), worked by
    hand; and the first batch size with S_B < 1 is where it stops paying."""
    m = advice.Measured(advice.Candidate("pld"), 3, 10, [10.0, 6, 3], [6.0, 3, 1], [1.0, 2.0, 3.0], 0.05, False, 1.0)
    sizes = [1, 2, 3, 5]
    timed = advice.ConcurrencyCost([1, 4, 16], sizes, [[0.010, 0.011, 0.012, 0.014],  # batch 1: nearly free
                                               [0.012, 0.016, 0.020, 0.030],
                                               [0.020, 0.040, 0.060, 0.100]], 64)  # batch 16: n steps
    v1 = lambda n: timed.pass_at(0, n) / timed.one_token_s(0)  # noqa: E731
    for k in (1, 2, 3):
        assert advice.concurrent_speedup(m, k, timed, 0) == pytest.approx(advice.speedup_at(m, k, v1))
    tokens = 1 + 0.6 + 0.3 + 0.1
    assert advice.concurrent_speedup(m, 3, timed, 2) == pytest.approx(tokens * 0.020 / (0.05 * 0.010 + 0.080))
    survey = advice.Survey("t", 1, {}, "", 1.0, 0.01, {1: 1.0, 4: 1.2}, [m], concurrency=timed)
    (_, points, stops), = advice.under_concurrency(survey)
    assert [b for b, _, _ in points] == [1, 4, 16] and points[0][2] > 1.0
    assert stops == next(b for b, _, s in points if s < 1.0) == 16
    assert "stops paying at 16 runs at once" in advice_report.report(survey)


def test_layer_skip_candidates_name_their_layers_and_bad_lists_are_refused():
    """'layerskip:0-2+5' keeps layers 0, 1, 2 and 5, is labelled with the same ranges and hands them
    to the engine as its `layers` knob; a list that is not numbers gets a message that shows the form."""
    c = advice.Candidate.parse("layerskip:0-2+5")
    assert c.layers == [0, 1, 2, 5] and c.label == "layerskip[0-2+5]" and c.knobs == {"layers": [0, 1, 2, 5]}
    assert advice.Candidate.parse("layerskip").knobs == {} and advice.Candidate.parse("layerskip").label == "layerskip"
    with pytest.raises(ValueError, match="layerskip:0-9"):
        advice.Candidate.parse("layerskip:first-half")


def test_a_damaged_profile_is_refused_with_what_to_do():
    """A file in the right format but with a field missing is refused with one sentence, not a traceback."""
    with pytest.raises(ValueError, match="damaged.*measure it again"):
        advice.Survey.from_dict({"format": survey_schema.FORMAT, "target": "t"})


def test_a_draft_from_another_family_is_measured_through_text_with_the_findings():
    """The advisor compares a draft model with the target before measuring it: a draft whose
    tokenizer swaps two ids cannot pass ids, so it is measured as a draft from another family (through
    text), and the report carries the compatibility finding and says how it was measured."""
    from tests.advise.test_compatibility import model, tok

    target, other = model(tok(), name="t"), model(tok(swap=(5, 6)), name="swapped")
    survey = advisor.measure(target, [advice.Candidate("pld"), advice.Candidate("draft", "swapped")],
                              [[3, 4, 5, 3, 4, 5, 3, 4]], lambda spec: other, lambda n: 1.0, k_max=2,
                              max_new_tokens=6, check=0, concurrency=(), progress=lambda m: None)
    assert [m.candidate.label for m in survey.measured] == ["pld", "draft swapped"]
    assert "draft swapped" not in survey.refused
    text = advice_report.report(survey)
    assert "draft swapped: The tokenizers differ at 2 of the 40 ids" in text and "id 5 is" in text
    assert "Measured as a draft from another family" in text


def test_a_draft_without_a_tokenizer_is_left_out_with_the_reason():
    """A draft with no tokenizer can neither pass ids that can be checked nor be turned into text: it is not
    measured, and the survey says why; the other candidates are measured as usual."""
    from tests.advise.test_compatibility import model, tok

    target, bare = model(tok(), name="t"), model(None, name="bare")
    survey = advisor.measure(target, [advice.Candidate("pld"), advice.Candidate("draft", "bare")],
                              [[3, 4, 5, 3, 4, 5, 3, 4]], lambda spec: bare, lambda n: 1.0, k_max=2,
                              max_new_tokens=6, check=0, concurrency=(), progress=lambda m: None)
    assert [m.candidate.label for m in survey.measured] == ["pld"]
    assert "not compatible with the target" in survey.refused["draft bare"]


def test_a_planned_candidate_is_one_point_priced_by_what_its_planner_sent():
    """'auto:hybrid' is the hybrid as SpecViz runs it (planner on), labelled 'K auto'; its curve is one
    point at its K limit, every cycle priced as its planner sent it, worked by hand from an older
    survey's means (10 cycles, 8 sent; 10 nodes at depth 1 and 5 at depth 2 spread as 2 cycles of
    [2, 1] nodes, 3 of [1, 1], 3 of [1]; reach 6/8 and 3/5): τ = 1.9 (the measured 1 + Σ marginal) over
    a mean cost of 1.3 passes. No engine deploys it, so Deploy skips it even for a method an engine
    has ('auto:pld')."""
    cand = advice.Candidate.parse("auto:hybrid")
    assert cand == advice.Candidate("hybrid", None, None, True) and cand.label == "hybrid, K auto"
    v = lambda n: 1.0 + 0.1 * (n - 1)  # noqa: E731
    m = advice.Measured(cand, 16, 10, [8.0, 4.0], [6.0, 3.0], [1.0, 1.5], 0.05, False, 1.0, overhead=0.1,
                        sent_share=0.8, sent_nodes=15 / 8)
    tokens = (5 * (1 + 6 / 8 + 3 / 5) + 3 * (1 + 6 / 8) + 2 * 1) / 10
    cost = (2 * (0.05 + v(4) + 0.1) + 3 * (0.05 + v(3) + 0.1) + 3 * (0.05 + v(2) + 0.1) + 2 * (0.05 + 1 + 0.1)) / 10
    assert tokens == pytest.approx(1.9) and advice.curve(m, v) == [(16, pytest.approx(tokens / cost))]
    survey = advice.Survey("t", 1, {}, "cpu", 10.0, 0.01, {1: 1.0, 4: 1.3},
                           measured=[m, advice.Measured(advice.Candidate.parse("auto:pld"), 16, 10, [8.0], [6.0],
                                                        [1.0], 0.0, False, 1.0, sent_share=0.5, sent_nodes=2.0),
                                     advice.Measured(advice.Candidate("pld"), 2, 10, [8.0, 4.0], [6.0, 3.0],
                                                     [1.0, 2.0], 0.0, False, 1.0)])
    assert [d.candidate for d in deploy.deployments(survey)] == ["pld"] * len(deploy.ENGINES)
    assert "with K chosen by its planner (at most 16)" in advice_report.recommendation(survey)


def test_a_missed_check_names_the_waterfall_term_that_moved_most():
    """A check more than 15 % off its prediction says which term of the model of speed moved S the
    most, with the predicted and measured values; within 15 % it says nothing."""
    want = advice.Terms(tau=3.0, draft=0.1, verify=1.2, overhead=0.1, ar_tokens_per_s=30.0)
    slow_pass = advice.Terms(tau=3.0, draft=0.1, verify=1.8, overhead=0.1, ar_tokens_per_s=30.0)
    assert "the verify pass was 1.80 against the 1.20 predicted" in advice.explained_miss(2.14, 1.50, want, slow_pass)
    fewer = advice.Terms(tau=2.0, draft=0.1, verify=1.2, overhead=0.1, ar_tokens_per_s=30.0)
    assert "τ (mean acceptance length) was 2.00 against the 3.00" in advice.explained_miss(2.14, 1.43, want, fewer)
    plain = advice.Terms(tau=3.0, draft=0.1, verify=1.2, overhead=0.1, ar_tokens_per_s=40.0)
    assert "plain decoding ran at 40.0 tokens/s" in advice.explained_miss(2.14, 2.86, want, plain)
    assert advice.explained_miss(2.14, 2.0, want, slow_pass) == ""


def test_measure_runs_a_planned_candidate_with_its_planner_and_checks_it():
    """Measured on a tiny target, 'auto:pld' runs at pld's own K limit with the planner on: its
    survey entry keeps the share of cycles that sent a draft and their mean nodes, its curve is one
    point, and its check decodes it the same way."""
    target = load("tiny-random:vocab=48,layers=2,seed=3")
    prompts = [[1, 5, 9, 2, 7, 1, 5, 9, 2, 7, 1, 5], [3, 4, 3, 4, 3, 4, 3, 4]]
    got = advisor.measure(target, [advice.Candidate.parse("auto:pld")], prompts, lambda spec: None,
                          lambda n: 1.0 + 0.02 * n, k_max=4, max_new_tokens=12, check=1, progress=lambda m: None,
                          concurrency=())
    (m,) = got.measured
    assert m.candidate.planned and m.k_max == 16 and not m.per_call
    assert 0.0 <= m.sent_share <= 1.0 and (m.sent_nodes is None or m.sent_nodes >= 1)
    assert len(advice.curve(m, got.v_of)) == 1 and set(got.checks) == {"pld, K auto"}


# -- one model: every predicted number is speed_model.predict_at's ------------------------------------
V = {1: 1.0, 2: 1.1, 3: 1.2, 4: 1.3, 5: 1.4}  # v(n) = 1 + 0.1 (n − 1)
O_AR = 0.1


def _kept(cand: advice.Candidate, k_max: int = 2) -> advice.Measured:
    """A candidate as a format /5 survey keeps it: 3 cycles sent a chain of 2 (full), 1 sent nothing;
    α_d = 0.8, 0.5; reach by sent depth 2: 0.6, 0.3; costs in one-token passes."""
    inputs = advice.SpeedInputs(acceptance=[0.8, 0.5], reach_by_sent_depth={2: [0.6, 0.3]},
                                shapes=[advice.Shape([1, 1], True, 0, 3), advice.Shape([], False, 0, 1)],
                                nodes_by_source={"lookup": [0.75, 0.75]}, calls_by_level=[],
                                draft0=0.1, draft1=0.0, over0=0.05, over1=0.01, ar_overhead=O_AR, v_scale=1.0)
    return advice.Measured(cand, k_max, 4, [3.0, 3.0], [2.4, 1.2], [0.75, 1.5], 0.1, False, 30.0,
                           speed_inputs=inputs)


def _old(cand: advice.Candidate, k_max: int = 2) -> advice.Measured:
    """The same candidate as a format /4 survey kept it: means only (its model inputs are derived)."""
    return advice.Measured(cand, k_max, 4, [3.0, 3.0], [2.4, 1.2], [0.75, 1.5], 0.1, False, 30.0, overhead=0.05)


def _survey(make) -> advice.Survey:
    timed = advice.ConcurrencyCost([1, 4], [1, 2, 3], [[0.010, 0.011, 0.012], [0.015, 0.030, 0.045]], 64)
    return advice.Survey("t", 1, {"k_max": 2}, "cpu", 30.0, 0.011, dict(V),
                         measured=[make(advice.Candidate("pld")), make(advice.Candidate("hybrid", planned=True))],
                         concurrency=timed, pass_share=1 / (1 + O_AR))


def test_the_advisors_number_is_the_models_worked_by_hand():
    """On a small kept survey, S at K = 1 and 2 is the model's (speed_model.predict_at on the survey's
    inputs) and equals the hand-worked cycles: at K = 2 the 3 sending cycles make 1 + 0.6 + 0.3 tokens
    for 0.1 + v(3) + 0.05 + 0.01·2 passes, the one that sent nothing 1 token for 0.1 + 1 + 0.05, against
    a plain token's 1 + o_AR; at K = 1 the chain is cut to its first node."""
    m, v = _kept(advice.Candidate("pld")), lambda n: V[n]
    k2 = (3 * 1.9 + 1) / 4 * (1 + O_AR) / ((3 * (0.1 + 1.2 + 0.05 + 0.02) + 1.15) / 4)
    k1 = (3 * 1.6 + 1) / 4 * (1 + O_AR) / ((3 * (0.1 + 1.1 + 0.05 + 0.01) + 1.15) / 4)
    assert advice.curve(m, v) == [(1, pytest.approx(k1)), (2, pytest.approx(k2))]
    x = survey_inputs.inputs(m)
    assert [speed_model.predict_at(x, v, k) for k in (1, 2)] == [pytest.approx(k1), pytest.approx(k2)]
    planned = _kept(advice.Candidate("hybrid", planned=True))
    assert advice.curve(planned, v) == [(2, pytest.approx(speed_model.predict_at(x, v, None)))]


@pytest.mark.parametrize("make", [_kept, _old], ids=["kept", "derived"])
def test_every_predicted_number_goes_through_the_model(make, monkeypatch):
    """advice.py has no speed formula of its own: with the model's predict_at (in speed_model) swapped
    for a sentinel, every number the advisor shows follows it: the curve and K auto, the ranking and
    the recommendation, runs at once (the sentinel against a plain token's r_B(1) + o_AR), a check's
    terms (τ the sentinel, nothing left for drafting or the rest), and the break-even α (a model whose S
    is 2·α breaks even at α = 0.5; one at 0.5× loses at every α). Kept and derived inputs alike."""
    survey, sentinel = _survey(make), 7.25
    monkeypatch.setattr(speed_model, "predict_at", lambda x, v, k: sentinel)
    fixed, planned = survey.measured
    assert advice.curve(fixed, survey.v_of, survey.pass_share) == [(1, sentinel), (2, sentinel)]
    assert advice.curve(planned, survey.v_of, survey.pass_share) == [(2, sentinel)]
    assert [s for _, _, s in advice.ranked(survey)] == [sentinel, sentinel]
    assert f"predicted {sentinel:.2f}×" in advice_report.recommendation(survey)
    o_ar = advice.inputs(fixed, survey.pass_share).ar_overhead
    batched = sentinel * (1.5 + o_ar) / (1 + o_ar)  # r_4(1) = 0.015 / 0.010
    for _, points, _ in advice.under_concurrency(survey):
        assert [s for _, _, s in points] == [pytest.approx(sentinel), pytest.approx(batched)]
    terms = advice.predicted_terms(fixed, 2, survey.v_of, survey.pass_share, 30.0)
    assert (terms.tau, terms.draft, terms.overhead) == (sentinel, 0.0, 0.0)
    assert terms.verify == pytest.approx(1 + o_ar)
    monkeypatch.setattr(speed_model, "predict_at", lambda x, v, k: 2 * x.acceptance[0])
    assert advice.break_even(fixed, 2, survey.v_of, survey.pass_share) == pytest.approx(0.5, abs=1e-4)
    monkeypatch.setattr(speed_model, "predict_at", lambda x, v, k: 0.5)
    assert advice.break_even(fixed, 2, survey.v_of, survey.pass_share) is None


def test_the_kept_inputs_give_back_the_measured_tau(survey):
    """On the tiny target's survey, each candidate's kept inputs hold every cycle once (its shapes'
    counts sum to its cycles) and the model's τ with every draft as it was sent is the measured
    1 + Σ marginal."""
    for m in survey.measured:
        assert m.speed_inputs is not None and sum(s.cycles for s in m.speed_inputs.shapes) == m.cycles
        tau = advice.predicted_terms(m, None, survey.v_of, survey.pass_share, 1.0).tau
        assert tau == pytest.approx(1 + sum(m.marginal)), m.candidate.label


def test_a_fixed_k_retrieval_method_faster_than_the_planner_is_the_advice():
    """Where prompt lookup at a fixed K is predicted faster than the planned hybrid, the pick is prompt
    lookup, and the advice says plainly that it beats the planner, with both speedups."""
    copy = advice.Measured(advice.Candidate("pld"), 4, 10, [10.0] * 4, [9.0, 8.0, 7.0, 6.0], [1.0, 2.0, 3.0, 4.0],
                           0.01, False, 30.0)
    planned = advice.Measured(advice.Candidate("hybrid", planned=True), 16, 10, [10.0, 5.0], [5.0, 2.0], [1.0, 2.0],
                              0.1, False, 20.0)
    survey = advice.Survey("t", 1, {}, "cpu", 10.0, 0.01, dict(V), measured=[planned, copy])
    (top, k, s), (_, _, s_planned) = advice.ranked(survey)
    assert top is copy and s > s_planned
    text = advice_report.recommendation(survey)
    assert text.startswith(f"Use pld at K = {k}: predicted {s:.2f}×")
    assert (f"It is predicted faster than hybrid, K auto ({s:.2f}× against {s_planned:.2f}×): here a retrieval "
            f"method at a fixed K beats SpecViz's planner, so the advice is pld at K = {k}.") in text


def test_the_table_says_what_is_measured_and_what_is_assumed():
    """Each row says how deep the survey measured: D, the deepest depth judged; past it (K up to k_max)
    the model assumes, and the table says "measured up to depth D; beyond it, assumed", a best K past
    D is marked assumed, and a candidate whose drafts were never judged says no depth was measured."""
    deep = advice.Measured(advice.Candidate("pld"), 2, 10, [10.0, 8.0], [8.0, 6.0], [1.0, 2.0], 0.0, False, 1.0)
    short = advice.Measured(advice.Candidate("logitspec"), 4, 10, [10.0, 9.0, 0.0, 0.0], [9.0, 0.0, 0.0, 0.0],
                            [1.0, 2.0, 3.0, 4.0], 0.0, False, 1.0)
    never = advice.Measured(advice.Candidate("suffix"), 3, 10, [0.0] * 3, [0.0] * 3, [0.0] * 3, 0.0, False, 1.0)
    survey = advice.Survey("t", 1, {}, "cpu", 10.0, 0.01, dict(V), measured=[deep, short, never])
    text = advice_report.report(survey)
    assert "| pld | 2 | " in text and "| measured up to depth 2 |" in text
    assert "| logitspec |" in text and "measured up to depth 2; beyond it, assumed" in text
    assert "no depth measured (nothing it drafted was judged): every K assumed" in text
    assert advice_report.predicted_cell(short, 3, 1.5) == "1.50× (assumed)"
    assert advice_report.predicted_cell(short, 2, 1.5) == "1.50×"


def test_costs_that_sum_to_nothing_predict_zero_not_a_traceback():
    """A survey whose kept costs make a cycle free (drafting and overhead that cancel the pass) would
    divide by zero in the model: the advisor shows 0.00× and the report draws."""
    m = _kept(advice.Candidate("pld"))
    m.speed_inputs.draft0, m.speed_inputs.over0, m.speed_inputs.over1 = -1.0, 0.0, 0.0
    m.speed_inputs.shapes = [advice.Shape([], False, 0, 4)]
    survey = advice.Survey("t", 1, {}, "cpu", 10.0, 0.01, dict(V), measured=[m])
    assert advice.curve(m, survey.v_of) == [(1, 0.0), (2, 0.0)]
    assert "0.00×" in advice_report.report(survey)


def test_the_shape_at_the_deepest_depth_reaches_the_model(survey):
    """The model grows a draft past D, the deepest depth sent, by the shape the drafts had at D (its
    level_nodes, level_keep, level_calls) and cuts a run's last cycles at its budget: a kept survey
    hands the model what its reader read off the runs (each prompt's run stopped at its max new
    tokens, so the budget is set); an older survey derives the nodes at D over the cycles that reached
    it (4 cycles, 2 of them reached depth 2 with 2 nodes: 1 each) and a model draft's call a level."""
    for m in survey.measured:
        rec, x = m.speed_inputs, advice.inputs(m, survey.pass_share)
        assert rec.budget > 0 and rec.level_nodes and rec.level_calls is not None
        assert (x.level_nodes, x.level_keep, x.level_calls, x.budget) == (rec.level_nodes, rec.level_keep,
                                                                          rec.level_calls, rec.budget)
    old = advice.Measured(advice.Candidate("head"), 2, 4, [4.0, 2.0], [2.0, 1.0], [1.5, 2.0], 0.1, True, 1.0)
    x = advice.inputs(old)
    assert (x.level_nodes, x.level_calls) == ({survey_inputs.ALL: pytest.approx(1.0)}, 1.0)
