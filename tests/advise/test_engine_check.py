"""The advice checked on an engine (specviz/advise/engine_check.py, engine_runs.py): the
prediction, the model of speed's on the engine's step costs, the miss flag, the survey keeping the
checks, HF generate checked for real on a tiny model, and a vLLM server that dies part-way leaving a
message and what was measured."""
import json
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from specviz.advise import advice, deploy
from specviz.advise.advice import Candidate, Measured, Survey
from specviz.advise.engine_check import EngineCheck, extra_at, finish, miss_reason, predict
from specviz.advise.engine_runs import check_hf, check_vllm
from specviz.measure import speed_model
from specviz.models.families import tiny_random
from specviz.served.remote import ServerError, Usage
from tests.helpers.tiny import word_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def _pld(marginal=(0.8, 0.6, 0.4, 0.2), drafted: float = 1.0, cycles: int = 100) -> Measured:
    """pld measured at K = len(marginal): `drafted` of the cycles sent a chain of K tokens."""
    k = len(marginal)
    accepted = [cycles * r for r in marginal]
    reached = [cycles * drafted] + accepted[:-1]
    return Measured(Candidate("pld"), k, cycles, reached, accepted,
                    [drafted * d for d in range(1, k + 1)], 0.01, False, 50.0)


def test_the_prediction_is_tokens_per_cycle_over_a_plain_step_and_the_drafting_share_of_the_extra():
    """Worked by hand on the survey's counts: with no extra cost the prediction is τ(K) = 1 + Σ_{i≤K}
    marginal_i itself; with Δ, a cycle that sent a chain of K pays t₁ + Δ(K + 1), so S = τ(K)·t₁/(t₁ +
    Δ(K + 1)); and where half the cycles drafted, only those pay the extra: S = τ(K)·t₁/(t₁ + Δ/2).
    A survey's kept cycles give the same by hand, its own costs (drafting, overhead) left out."""
    m = _pld()
    assert predict(m, 4, 0.05, {}) == pytest.approx(1 + 0.8 + 0.6 + 0.4 + 0.2)
    assert predict(m, 2, 0.05, {3: 0.025}) == pytest.approx((1 + 0.8 + 0.6) * 0.05 / (0.05 + 0.025))
    half = _pld(marginal=(0.4, 0.3, 0.2, 0.1), drafted=0.5)  # half the cycles sent a chain of K; τ(4) = 2
    assert predict(half, 4, 0.05, {5: 0.02}) == pytest.approx(2.0 * 0.05 / (0.05 + 0.5 * 0.02))
    assert predict(m, 4, 0.0, {}) == 0.0
    kept = (3 * (1 + 0.6 + 0.3) + 1) / (3 * (1 + 0.025 / 0.05) + 1)  # 3 chains of 2 at t₁ + Δ(3), 1 plain step
    assert predict(_kept(), 2, 0.05, {3: 0.025}) == pytest.approx(kept)


def _kept() -> Measured:
    """pld as a format /5 survey keeps it: 3 cycles sent a chain of 2 (full), 1 sent nothing; reach by
    sent depth 2: 0.6, 0.3; SpecViz's own costs (drafting, overhead, o_AR) that an engine's check
    leaves out."""
    inputs = advice.SpeedInputs(acceptance=[0.8, 0.5], reach_by_sent_depth={2: [0.6, 0.3]},
                                shapes=[advice.Shape([1, 1], True, 0, 3), advice.Shape([], False, 0, 1)],
                                nodes_by_source={"lookup": [0.75, 0.75]}, calls_by_level=[],
                                draft0=0.1, draft1=0.0, over0=0.05, over1=0.01, ar_overhead=0.1, v_scale=1.0)
    return Measured(Candidate("pld"), 2, 4, [3.0, 3.0], [2.4, 1.2], [0.75, 1.5], 0.1, False, 30.0,
                    speed_inputs=inputs)


@pytest.mark.parametrize("make", [_pld, _kept], ids=["derived", "kept"])
def test_the_engine_prediction_is_the_model_of_speeds(make, monkeypatch):
    """engine_check has no speed formula of its own: with the model's predict_at (in speed_model)
    swapped for a sentinel, the prediction and a finished check's `predicted` are the sentinel. The
    model is asked at the check's K (held to the survey's K), on the survey's inputs for the candidate
    (what was drafted and accepted, untouched), priced in the engine's plain steps: v(n) = 1 + Δ(n)/t₁,
    and nothing for drafting or overhead. Inputs derived from an older survey's counts and inputs a
    survey kept alike."""
    m, sentinel, asked = make(), 7.25, []

    def stand_in(x, v, k):
        asked.append((x, v, k))
        return sentinel

    monkeypatch.setattr(speed_model, "predict_at", stand_in)
    assert predict(m, 2, 0.05, {3: 0.025}) == sentinel
    x, v, k = asked[-1]
    assert k == 2 and v(1) == 1.0 and v(3) == pytest.approx(1.5) and v(2) == pytest.approx(1.25)
    assert (x.draft0, x.draft1, x.over0, x.over1, x.ar_overhead, x.v_scale) == (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    survey_x = advice.inputs(m)
    assert (x.acceptance, x.sent, x.full, x.reach_by_sent_depth, x.budget) == (
        survey_x.acceptance, survey_x.sent, survey_x.full, survey_x.reach_by_sent_depth, survey_x.budget)
    predict(m, m.k_max + 5, 0.05, {})
    assert asked[-1][2] == m.k_max
    chk = finish(EngineCheck("HF generate", "pld", 2, "{}", "test", "now", step_s=0.05, extra_s={3: 0.025}),
                 (100, 2.0), (150, 2.0), m)
    assert chk.predicted == sentinel and chk.measured == pytest.approx(1.5)


def test_extra_cost_is_interpolated_between_the_timed_sizes():
    """Δ(1) is 0; between timed sizes it is linear; past the largest it follows the last slope."""
    timed = {3: 0.02, 5: 0.06}
    assert extra_at(timed, 1) == 0.0
    assert extra_at(timed, 2) == pytest.approx(0.01)
    assert extra_at(timed, 4) == pytest.approx(0.04)
    assert extra_at(timed, 7) == pytest.approx(0.10)


def test_a_miss_over_twenty_percent_is_flagged_with_its_likely_reason():
    """Within 20 % of the measurement there is no flag; beyond, a sentence that names the numbers,
    and names acceptance when the engine accepted clearly less than the survey."""
    chk = EngineCheck("vLLM", "pld", 4, "{}", "test", "now", predicted=2.3, measured=2.0,
                      predicted_marginal=[0.8, 0.6], measured_marginal=[0.8, 0.6])
    assert miss_reason(chk) == ""
    chk.predicted = 2.5
    assert "predicted 2.50× but measured 2.00×" in miss_reason(chk)
    chk.measured_marginal = [0.4, 0.2]
    assert "accepted less than the survey measured" in miss_reason(chk)


def test_a_survey_keeps_its_engine_checks_and_refuses_a_damaged_one(tmp_path):
    """A check saved in a survey reads back equal (format /4), and a check whose fields are of the
    wrong kind is refused with a message instead of loaded."""
    survey = advice.read(ROOT / "assets" / "recorded_advice.json")
    chk = EngineCheck("vLLM", "pld", 5, '{"method": "ngram"}', "AMD EPYC", "2026-12-05 04:00 UTC",
                      concurrency=4, prompts=16, step_s=0.06, extra_s={6: 0.01}, predicted=1.5, measured=1.4,
                      predicted_marginal=[0.5], measured_marginal=[0.45])
    survey.engine_checks.append(chk.to_dict())
    advice.save(survey, tmp_path / "s.json")
    again = advice.read(tmp_path / "s.json")
    assert EngineCheck.from_dict(again.engine_checks[0]) == chk
    bad = json.loads(json.dumps(survey.to_dict()))
    bad["engine_checks"] = [{**chk.to_dict(), "predicted": "a lot"}]
    with pytest.raises(ValueError, match="damaged"):
        Survey.from_dict(bad)


@pytest.fixture(scope="module")
def tiny_target():
    """A tiny random model with a word tokenizer and its chat template, as a LoadedModel."""
    return tiny_random(vocab_size=40, tokenizer=word_tokenizer(40), eos_ids={1})


def test_hf_generate_is_checked_for_real_with_the_configuration_the_advice_wrote(tiny_target):
    """On a tiny model, HF generate plain and with prompt lookup (deploy/hf.py's own keyword
    arguments) give the same greedy tokens; the check counts HF's drafts per position and
    predicts from HF's own timings."""
    m = _pld()
    survey = Survey("tiny", 2, {"temperature": 0.0}, "test", 1.0, 0.01, {n: 1.0 + 0.01 * n for n in range(1, 9)},
                    measured=[m])
    d = next(x for x in deploy.deployments(survey) if x.engine == deploy.HF)
    prompts = ["w5 w6 w7 w8 w5 w6 w7 w8 w5 w6", "w9 w10 w9 w10 w9 w10 w11"]
    torch.manual_seed(0)
    chk = check_hf(m, d.k, tiny_target, prompts, dict(d.options), d.config, "test", max_new_tokens=24, repeats=1,
                   progress=lambda _: None)
    assert chk.error == "" and chk.prompts == 2
    assert chk.same_text and chk.step_s > 0 and chk.measured > 0 and chk.predicted > 0
    assert len(chk.measured_marginal) == d.k and 0 < chk.measured_marginal[0] <= 1
    assert chk.config == d.config and "prompt_lookup_num_tokens=4" in chk.config


class _FakeServer:
    """Enough of a vLLM server for served_plain: each call decodes `n` tokens of w5 after a pause;
    it raises once `fail_after` calls have been answered."""
    def __init__(self, fail_after: int | None = None):
        self.calls, self.fail_after, self.url, self.top_k = 0, fail_after, "http://fake", 20

    def complete(self, prompt, n, *args, **kw):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ServerError("The vLLM server at http://fake did not answer (connection refused).")
        return [5] * n, Usage(1, len(prompt), 0, 0.001 * n)

    def metrics(self):
        return ""


@contextmanager
def _served(target, fake):
    target.remote = fake
    try:
        yield target
    finally:
        target.remote = None


def test_a_server_that_dies_part_way_is_a_message_and_what_was_measured_stays(tiny_target):
    """When the configuration's server stops answering, the check ends with a message naming that
    server and the prompt groups done, and keeps the plain server's timing and the groups measured."""
    prompts = ["w5 w6", "w7 w8", "w9 w10"]
    plain, spec = _FakeServer(), _FakeServer(fail_after=12)
    checks = check_vllm(_pld(), {1: 4}, lambda: _served(tiny_target, plain), lambda: _served(tiny_target, spec),
                        prompts, "{}", "test", max_new_tokens=8, repeats=1, progress=lambda _: None)
    chk = checks[0]
    assert "the configuration's server" in chk.error and "what was measured before is kept" in chk.error
    assert "connection refused" in chk.error
    assert chk.step_s > 0 and 0 < chk.prompts < len(prompts)
