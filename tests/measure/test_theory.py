"""Theory against measurement: the S(K) formula, its best K, the measured costs, the cost profile
it reads v(n) from (the planner's) and its panel, the batch effect."""
from __future__ import annotations

import itertools
import json
import math

import pytest

import specviz
from specviz.decoding import planner
from specviz.decoding.trace import CycleTrace, NodeTrace, RunTrace
from specviz.measure import batch_effect, speed_model, theory, waterfall
from specviz.pricing import costs
from specviz.pricing.costs import CostProfile
from tests.helpers.tiny import FixedTreeProposer, pair

PROMPT = [4, 8, 15, 16, 23, 30, 2, 11, 6, 4, 8, 15]


def closed_form(alpha, k, c, v):
    """S(K) exactly as the issue writes it, independent of theory.py's code."""
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + v(k)))


@pytest.mark.parametrize("alpha,k,c,v,expected", [
    (0.5, 2, 0.1, 1.2, 1.25),  # (1 − 0.125) / (0.5 · (0.2 + 1.2))
    (0.8, 4, 0.05, 1.5, 3.3616 / 1.7),  # (1 − 0.32768) / 0.2 = 3.3616 tokens per cycle
    (0.0, 3, 0.1, 1.0, 1 / 1.3),  # nothing accepted: one token for a whole cycle's cost
    (1.0, 3, 0.0, 2.0, 2.0),  # a perfect free draft: K+1 tokens for a pass that costs 2 steps
])
def test_speedup_matches_hand_computed_values(alpha, k, c, v, expected):
    """S(K) equals values worked out by hand, including α = 0 and the α = 1 limit."""
    assert theory.speedup(alpha, k, c, v) == pytest.approx(expected, rel=1e-12)


def test_best_k_equals_brute_force_search():
    """best_k picks the K with the largest closed-form S(K) (the smallest K on a plateau), over a grid
    of α, c and v shapes."""
    shapes = [lambda k: 1.0, lambda k: 1 + 0.1 * k, lambda k: 1 + 0.4 * k, lambda k: 1 + 0.02 * k * k]
    for alpha, c, v in itertools.product([0.1, 0.4, 0.6, 0.8, 0.95], [0.0, 0.02, 0.1, 0.5], shapes):
        curve = [(k, theory.speedup(alpha, k, c, v)) for k in theory.K_RANGE]
        values = {k: closed_form(alpha, k, c, v) for k in theory.K_RANGE}
        top = max(values.values())
        brute = min(k for k, s in values.items() if s >= top * (1 - 1e-9))  # smallest K on a plateau
        assert theory.best_k(curve) == (brute, pytest.approx(values[brute]))


def test_tree_tokens_follow_per_depth_acceptance():
    """Tokens per cycle of a tree are 1 + Σ Π a_i; with a constant a they equal the chain formula."""
    assert theory.expected_tokens_by_depth([0.8, 0.5], 2) == pytest.approx(1 + 0.8 + 0.4)
    assert theory.expected_tokens_by_depth([0.8, 0.5], 5) == pytest.approx(2.2)  # unseen depths add nothing
    chain = (1 - 0.6 ** 8) / (1 - 0.6)  # the chain's (1 − α^(K+1)) / (1 − α) at α = 0.6, K = 7
    assert theory.expected_tokens_by_depth([0.6] * 7, 7) == pytest.approx(chain)
    assert theory.expected_tokens(0.6, 7) == pytest.approx(chain)


def _cycle(index: int, depths: list[int], draft_s: float = 0.0, verify_s: float = 0.0, committed: int = 1,
           other_s: float = 0.0) -> CycleTrace:
    nodes = [NodeTrace(index=i, token=0, text="", parent=-1, depth=d) for i, d in enumerate(depths)]
    return CycleTrace(index=index, k=max(depths, default=1), nodes=nodes, draft_s=draft_s, verify_s=verify_s,
                      other_s=other_s, committed=[0] * committed)


def model_form(acceptance, k, c, v, o, o_ar):
    """The model of speed at a fixed K, written out by hand: (1 + Σ_{d≤K} Π α_i)(1 + o_AR) / (K·c + v + o)."""
    tokens = 1 + sum(math.prod(acceptance[:d]) for d in range(1, min(k, len(acceptance)) + 1))
    return tokens * (1 + o_ar) / (k * c + v + o)


def test_draft_cost_is_seconds_per_draft_call_over_a_target_pass():
    """c = drafting seconds / draft calls / the AR run's seconds per one-token pass, on traces with
    times set by hand: chains of 3 (0.6 s over 6 calls) against 0.05 s per target pass give c = 2; a
    tree counts its depth as its calls, not its nodes; cycles that drafted nothing are left out."""
    ar = RunTrace("ar", cycles=[_cycle(i, [], verify_s=0.05) for i in range(4)])
    chain = RunTrace("draft", cycles=[_cycle(0, [1, 2, 3], 0.3), _cycle(1, [1, 2, 3], 0.3), _cycle(2, [], 0.2)])
    assert theory.draft_cost(chain, ar) == pytest.approx(2.0)
    tree = RunTrace("draft", cycles=[_cycle(0, [1, 1, 2, 2], 0.2)])  # two draft calls, four nodes
    assert theory.draft_cost(tree, ar) == pytest.approx(2.0)


def profile(v: dict, **kw) -> CostProfile:
    """A cost profile with v set by hand (nothing timed)."""
    return CostProfile(**{"model": "m", "device": "cpu", "dtype": "float32", "prefix_len": 200, "pass_s": 0.01,
                          "v": v, **kw})


def test_chain_run_is_analysed_at_its_own_alpha_and_costs():
    """A live draft-model run goes through analyse as a chain at its own K, with its run's α and c
    and the model's S at that K. A wiring check: c and the prediction are compared with the same
    helpers analyse calls, so it cannot see a wrong formula; test_theory_by_hand.py checks the
    values against hand-worked numbers."""
    target, draft = pair(noise=0.05)
    # plan=False: the planner would rightly not draft with a draft as costly as the target
    run = specviz.generate(target, PROMPT, method="draft", draft=draft, k=3, max_new_tokens=16, chat=False,
                           plan=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    prof = profile({1: 1.0, 2: 1.1, 5: 1.4, 17: 3.0})
    a = waterfall.analyse(run, ar, prof)
    assert a.kind == "chain" and a.k == 3 and a.c == theory.draft_cost(run, ar)
    assert a.alpha == run.metrics["acceptance_rate"] and a.measured > 0
    assert [k for k, _ in a.curve] == list(theory.K_RANGE) and a.best in a.curve
    x = speed_model.inputs_of(run, ar)
    assert not a.planned and a.predicted == pytest.approx(speed_model.predict_at(x, prof, 3))


def test_analysis_reads_v_of_k_plus_one_from_the_cost_profile():
    """The model takes a verify pass of K drafts at n = K + 1 tokens of the cost profile: with v set by
    hand (1 at n = 1, 2 at n = 5, 5 at n = 17), v_k at K = 4 is v(5) = 2 and every point of the curve
    is the model written out by hand with v(K + 1) and the overheads set by hand (o = 0.2 per cycle,
    o_AR = 0.1 per token); a profile shifted by one token would give other values."""
    ar = RunTrace("ar", cycles=[_cycle(i, [], verify_s=0.05, other_s=0.005) for i in range(4)])
    run = RunTrace("draft", cycles=[_cycle(0, [1, 2, 3, 4], 0.02, 0.1, 3, 0.01),
                                    _cycle(1, [1, 2, 3, 4], 0.02, 0.1, 2, 0.01)],
                   settings={"k": 4}, metrics={"acceptance_rate": 0.5, "acceptance_by_position": [0.5] * 4})
    prof = profile({1: 1.0, 5: 2.0, 17: 5.0})
    a = waterfall.analyse(run, ar, prof)
    assert a.kind == "chain" and a.v_k == pytest.approx(2.0) and a.c == pytest.approx(0.1)
    assert a.predicted == pytest.approx(model_form([0.5] * 4, 4, 0.1, 2.0, 0.2, 0.1))
    def by_hand(k):  # v(K + 1) on the two straight segments of that profile
        return 1 + k / 4 if k + 1 <= 5 else 2 + 3 * (k + 1 - 5) / 12

    assert a.curve == [(k, pytest.approx(model_form([0.5] * 16, k, 0.1, by_hand(k), 0.2, 0.1)))
                       for k in theory.K_RANGE]  # full drafts of K = 4 grow a node a level, at the last α_d


def test_tree_analysis_uses_per_depth_acceptance():
    """A tree run is analysed as a tree: E[accepted] from per-depth acceptance, verify size above K."""
    target, _ = pair()
    proposer = FixedTreeProposer(depth=3, branching=2, vocab=32, seed=1)
    run = specviz.generate(target, PROMPT, proposer=proposer, k=3, max_new_tokens=16, chat=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    prof = profile({1: 1.0, 2: 1.1, 9: 1.5, 64: 4.0})
    a = waterfall.analyse(run, ar, prof)
    assert a.kind == "tree" and a.verify_tokens > 3
    assert a.v_k == pytest.approx(prof(a.verify_tokens + 1))  # the tree's nodes plus the newest token
    depth_acc = run.metrics["acceptance_by_position"]
    reached = [math.prod(depth_acc[:d]) for d in range(1, min(3, len(depth_acc)) + 1)]  # P(depth d accepted)
    assert a.expected_len == pytest.approx(sum(reached))


def test_batch_effect_gives_a_ratio_per_batch_size_and_is_cached(tmp_path, monkeypatch):
    """One ratio per batch size; a second call reads the cache (memory, then the JSON file) without timing."""
    batch_effect.forget_cached()
    target, _ = pair()
    path = tmp_path / "batch_effect.json"
    effect = batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, repeats=1,
                                               cache_file=path)
    assert effect.batch_sizes == [1, 2, 4] and len(effect.ratio) == 3 and not effect.cached
    assert all(r > 0 and math.isfinite(r) for r in effect.ratio)
    assert batch_effect.cache_key(target, 3) in json.loads(path.read_text())

    def no_timing(*a, **kw):
        raise AssertionError("timed again instead of using the cache")

    monkeypatch.setattr(batch_effect, "pass_times", no_timing)
    again = batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, cache_file=path)
    assert again.cached and again.ratio == effect.ratio
    batch_effect.forget_cached()
    from_file = batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, cache_file=path)
    assert from_file.cached and from_file.ratio == pytest.approx(effect.ratio)
    with pytest.raises(AssertionError, match="timed again"):
        batch_effect.measure_batch_effect(target, k=3, batch_sizes=(1, 2, 4), prefix_len=8, cache_file=path,
                                          refresh=True)
    batch_effect.forget_cached()


# -- the cost profile on the Theory & hardware tab ------------------------------------------------------
def plot_traces(fig) -> dict:
    return {t.name: t for t in fig.data}


def test_cost_figure_draws_every_measured_point_and_says_where_it_came_from():
    """The cost figure has one point per measured n with y = v(n) and the pass's milliseconds in its
    hover data; its title names the model (escaped), device, dtype and hardware, and says whether the
    profile was read from a cache or measured now."""
    from specviz.viz.compare_figures import cost_figure

    prof = profile({1: 1.0, 2: 1.2, 8: 1.5, 64: 4.0}, model="<b>evil</b> $x$", hardware="Some CPU, 1 threads",
                   pass_s=0.02, measured_at="2026-11-30 13:10 UTC")
    fig = cost_figure(prof)
    measured = plot_traces(fig)["measured v(n)"]
    assert list(measured.x) == [1, 2, 8, 64] and list(measured.y) == [1.0, 1.2, 1.5, 4.0]
    assert [row[0] for row in measured.customdata] == pytest.approx([20.0, 24.0, 30.0, 80.0])
    title = fig.layout.title.text
    assert "&lt;b&gt;evil&lt;/b&gt; &#36;x&#36;" in title and "<b>evil" not in title
    assert all(part in title for part in ("cpu", "float32", "Some CPU, 1 threads", "measured now"))
    prof.cached = True
    assert "read from the cache" in cost_figure(prof).layout.title.text
    assert "as the planner reads it" not in plot_traces(fig)  # v never falls: nothing to correct


def test_cost_figure_shows_what_the_planner_counts_where_a_timing_fell():
    """Where noise timed a pass cheaper than a smaller one, the figure adds the planner's reading of
    the curve (cost_profile.as_planned: never below a one-token pass, never above a larger pass),
    which differs from the measured points there."""
    from specviz.viz.compare_figures import cost_figure

    prof = profile({1: 1.0, 2: 0.9, 4: 1.3, 8: 1.2, 16: 2.0})
    read = plot_traces(cost_figure(prof, run_tokens=5))
    planned = dict(zip(read["as the planner reads it"].x, read["as the planner reads it"].y))
    assert planned[2] == pytest.approx(1.0) and planned[4] == pytest.approx(1.2)
    assert planned[8] == pytest.approx(1.2) and planned[16] == 2.0
    star = read["this run's verify pass"]
    assert list(star.x) == [5] and list(star.y) == pytest.approx([prof(5)])


@pytest.fixture
def fake_passes(tmp_path, monkeypatch):
    """Profile even the tiny model, with pass times set by hand, cached in a temporary file."""
    costs.forget_cached()
    monkeypatch.setattr(planner, "PROFILE_MIN_PARAMS", 0)
    monkeypatch.setattr(costs, "pass_timer", lambda model, prefix_len: lambda n: 0.01 * (1 + 0.05 * (n - 1)))
    monkeypatch.setattr(costs, "default_cache_file", lambda: tmp_path / "cost_profiles.json")
    yield
    costs.forget_cached()


@pytest.mark.parametrize("forked", [False, True], ids=["in-process", "forked like ZeroGPU"])
def test_theory_handler_returns_the_targets_cost_profile_figure(fake_passes, monkeypatch, forked):
    """The Theory tab's handler reads v(n) from the target's cost profile, the one the planner uses
    (planner.verify_cost), through work.verify_cost, also when that runs in a forked worker and its
    result comes back pickled: its fourth output is that profile's figure, with the run's verify pass
    on it, the analysis's v_k is the profile's v(K+1), and the status says where the profile came from."""
    from specviz.ui import theory as theory_tab
    from specviz.ui.runtime import zerogpu
    from specviz.ui.runtime.state import MODELS
    from tests.helpers import fork_gpu

    target, _ = pair()
    prof = planner.verify_cost(target)  # what the planner decides with, measured (by hand) and cached
    assert prof.v[2] == pytest.approx(1.05) and prof.v[64] == pytest.approx(1 + 0.05 * 63)
    spec = "tiny-theory-handler"
    MODELS.put(spec, target)
    run = specviz.generate(target, PROMPT, method="pld", k=3, max_new_tokens=16, chat=False, plan=False)
    ar = specviz.generate(target, PROMPT, method="ar", max_new_tokens=16, chat=False)
    monkeypatch.setattr(theory_tab, "_main_run", lambda request: (spec, run, ar))
    if forked:
        zerogpu.use_backend(fork_gpu.GPU)
    try:
        status, _figure, html, cost, _waterfall, _steps = theory_tab.explain(theory_tab.MAIN_RUN, None,
                                                                              progress=lambda *a, **kw: None)
    finally:
        zerogpu.use_backend(None)
    assert "sv-status-ok" in status and "read from the cache" in status, status
    measured = plot_traces(cost)["measured v(n)"]
    assert list(measured.x) == sorted(prof.v) and list(measured.y) == pytest.approx([prof.v[n] for n in sorted(prof.v)])
    assert "read from the cache" in cost.layout.title.text
    analysis = waterfall.analyse(run, ar, prof)
    assert list(plot_traces(cost)["this run's verify pass"].x) == [analysis.verify_tokens + 1]
    assert f"{analysis.v_k:.2f}" in html and analysis.v_k == pytest.approx(prof(analysis.verify_tokens + 1))


def test_recorded_cost_profile_loads_and_is_the_one_the_recorded_theory_used():
    """The Theory tab opens on the recorded cost profile: the figure has the recorded points, and the
    recorded S(K) analysis took its v from that same profile (v_k = v(verify tokens + 1))."""
    from specviz.ui.shared import recordings

    recordings.recorded.cache_clear()
    data = recordings.recorded()
    prof = CostProfile.from_dict(data["cost_profile"])
    assert prof is not None and prof.v[1] == 1.0 and max(prof.v) == 64
    fig = recordings.cost_values()["cost_plot"]
    measured = plot_traces(fig)["measured v(n)"]
    assert list(measured.x) == sorted(prof.v) and list(measured.y) == [prof.v[n] for n in sorted(prof.v)]
    assert prof.model in fig.layout.title.text and prof.hardware in fig.layout.title.text
    a = data["theory"]["analysis"]
    assert a["v_k"] == pytest.approx(prof(a["verify_tokens"] + 1), rel=1e-3)
    assert dict(a["curve"])[a["k"]] == pytest.approx(a["predicted"], rel=1e-3)


def test_recorded_cost_panel_is_empty_without_a_recorded_profile(monkeypatch):
    """A recorded file without a usable cost profile opens the panel empty instead of failing."""
    from specviz.ui.shared import recordings

    monkeypatch.setattr(recordings, "recorded", lambda: {"cost_profile": {"v": "not a dict"}})
    assert recordings.cost_values() == {"cost_plot": None}
    monkeypatch.setattr(recordings, "recorded", lambda: None)
    assert recordings.cost_values() == {"cost_plot": None}


def test_the_model_of_speed_worked_by_hand():
    """predict_at on inputs set by hand, v(n) = 1 + 0.1 (n − 1): two cycles sent a 2-deep chain drafted
    by a model (reach 0.5, 0.25), one sent nothing. As sent: tokens (1.75 + 1.75 + 1) / 3, costs
    (1.60 + 1.60 + 1.16) / 3 (drafting 0.01 + 0.1 a level, passes × 1.1, overhead 0.05 + 0.01 a node),
    times 1.02 for o_AR; cut at K = 1 and grown to K = 3 (the deepest α_d, 0.5, a level), likewise."""
    x = speed_model.Inputs(acceptance=[0.5, 0.5], sent=[[1, 2], [1, 2], []], full=[True, True, False], levels=[2, 2, 0],
                      reach_by_sent_depth={2: [0.5, 0.25]}, draft0=0.01, draft1=0.1, over0=0.05, over1=0.01,
                      ar_overhead=0.02, v_scale=1.1)
    v = lambda n: 1 + 0.1 * (n - 1)  # noqa: E731
    assert speed_model.predict_at(x, v, None) == pytest.approx(1.5 * 1.02 / (4.36 / 3))
    assert speed_model.predict_at(x, v, 2) == pytest.approx(1.5 * 1.02 / (4.36 / 3))
    assert speed_model.predict_at(x, v, 1) == pytest.approx(4 * 1.02 / 3.92)
    assert speed_model.predict_at(x, v, 3) == pytest.approx(4.75 * 1.02 / 4.8)
    curve, auto = speed_model.predict(x, v, ks=range(1, 4))
    assert [k for k, _ in curve] == [1, 2, 3] and auto == (2, pytest.approx(1.5 * 1.02 / (4.36 / 3)))
