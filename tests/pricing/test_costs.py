"""specviz.pricing.costs: the cost profile v(n) and the dtype choice, with injected timings (no wall-clock asserts)."""
import json

import pytest
import torch

import specviz
from specviz.loading.loader import tiny_random
from specviz.pricing import costs


def linear_time(n: int) -> float:
    """A made-up pass time: 50 ms plus 2 % per token."""
    return 0.05 * (1 + 0.02 * n)


class Counting:
    """A timer that counts its calls and can return an inflated time for chosen first calls."""

    def __init__(self, base=linear_time, spikes=None):
        self.base, self.spikes, self.calls = base, dict(spikes or {}), []

    def __call__(self, n: int) -> float:
        self.calls.append(n)
        return self.base(n) * self.spikes.pop(n, 1.0)


@pytest.fixture(autouse=True)
def empty_memory():
    costs.forget_cached()
    yield
    costs.forget_cached()


@pytest.fixture
def tiny():
    return tiny_random()


def test_profile_structure(tiny):
    """A profile names its model, device and dtype, has v(1) = 1 and a ratio at every size, and
    pass_s is the one-token pass."""
    prof = costs.profile(tiny, cache_file=None, timer=Counting())
    assert (prof.model, prof.device, prof.dtype) == (tiny.name, "cpu", "float32")
    assert prof.prefix_len == costs.PREFIX_LEN
    assert sorted(prof.v) == list(costs.SIZES)
    assert prof.v[1] == 1.0 and prof.pass_s == pytest.approx(linear_time(1))
    assert prof.v[64] == pytest.approx(linear_time(64) / linear_time(1))
    assert not prof.cached


def test_interpolation_between_and_past_the_measured_sizes(tiny):
    """prof(n) is linear between measured sizes, extends along the last segment past 64, never
    drops below v(1) under 1, and cost_s is pass_s times v."""
    prof = costs.profile(tiny, sizes=(1, 4, 8), cache_file=None, timer=lambda n: {1: 1.0, 4: 2.0, 8: 3.0}[n])
    assert prof(1) == 1.0 and prof(0.5) == 1.0
    assert prof(2) == pytest.approx(1 + 1 / 3)
    assert prof(6) == pytest.approx(2.5)
    assert prof(12) == pytest.approx(4.0)
    assert prof.cost_s(6) == pytest.approx(2.5)


def test_as_planned_reads_a_slow_timing_as_no_dearer_than_a_larger_pass():
    """as_planned: v(1) = 1, no pass below 1, and each pass at most the least v of any larger one up
    to the largest measured size, so one slow timing (v(6) = 1.3 here, between 1.0 at 4 and 1.13
    at 8) lowers to what the larger pass showed instead of raising every larger pass to itself;
    past the largest size the profile's own extrapolation, which never falls, is kept."""
    from specviz.pricing.cost_profile import CostProfile, as_planned

    prof = CostProfile(model="m", device="cpu", dtype="float32", prefix_len=200, pass_s=0.07,
                       v={1: 1.0, 2: 0.9, 4: 1.0, 6: 1.3, 8: 1.13, 16: 1.29})
    planned = as_planned(prof, 20)
    assert planned[0] == 1.0 and planned[1] == 1.0 and planned[3] == pytest.approx(1.0)
    assert planned[5] == pytest.approx(1.13) and planned[4] == pytest.approx(1.13)  # v(5), v(6)
    assert planned[7] == pytest.approx(1.13) and planned[15] == pytest.approx(1.29)
    assert planned[19] == pytest.approx(prof(20)) and prof(20) > 1.29
    assert all(a <= b for a, b in zip(planned, planned[1:]))
    assert as_planned(prof, 8) == planned[:8]  # the horizon is the profile's, not n_max


def test_second_call_reads_the_cache_and_a_new_process_reads_the_file(tiny, tmp_path):
    """The second call does not time anything; after the memory is emptied, the file answers;
    refresh=True times again."""
    path, timer = tmp_path / "costs.json", Counting()
    first = costs.profile(tiny, cache_file=path, timer=timer)
    calls = len(timer.calls)
    again = costs.profile(tiny, cache_file=path, timer=timer)
    assert len(timer.calls) == calls and again.cached and again.v == first.v
    costs.forget_cached()
    from_disk = costs.profile(tiny, cache_file=path, timer=timer)
    assert len(timer.calls) == calls and from_disk.v == first.v and from_disk.pass_s == first.pass_s
    assert tiny.name in next(iter(json.loads(path.read_text())))
    costs.profile(tiny, cache_file=path, timer=timer, refresh=True)
    assert len(timer.calls) > calls


def test_key_separates_dtypes_and_speedups(tiny):
    """A bfloat16 copy or a tuned model does not reuse a float32 stock model's profile."""
    key = costs.cache_key(tiny, 200)
    tiny.dtype = torch.bfloat16
    assert costs.cache_key(tiny, 200) != key
    tiny.dtype = torch.float32
    specviz.passes.speedups.apply(tiny.model)
    assert costs.cache_key(tiny, 200) != key


def test_key_separates_kernel_settings(tiny, monkeypatch):
    """A profile timed with oneDNN held to AVX2 (ONEDNN_MAX_CPU_ISA, as a stand-in for an AVX2 CPU) or
    under another OpenMP setting is not reused without it, nor the other way; with none set the key
    is what it was before such settings were read, so profiles already on disk stay valid."""
    for name in [k for k, _ in specviz.passes.speedups.kernel_env()]:
        monkeypatch.delenv(name)
    plain = costs.cache_key(tiny, 200)
    assert "ONEDNN" not in plain and plain.endswith(f"{costs.hardware(tiny.device)}|prefix 200")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    held = costs.cache_key(tiny, 200)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    assert len({plain, held, costs.cache_key(tiny, 200)}) == 3 and "ONEDNN_MAX_CPU_ISA=AVX2" in held


def test_the_key_reads_the_fast_forward_in_force_without_walking_the_weights(tiny, monkeypatch):
    """Every Step prices its run, so the cost key is read every Step. Once the fast forward was
    decided, the key says so without re-checking each weight's identity (FastForward.current, a walk
    of every parameter that costs milliseconds a Step under a class); a model without it says so too."""
    from specviz.passes import fastpath

    specviz.passes.speedups.apply(tiny.model)
    fastpath._BUILT.pop(tiny.model, None)
    assert fastpath.of(tiny.model) is not None  # decided: built and checked
    walks = []
    real = fastpath.FastForward.current
    monkeypatch.setattr(fastpath.FastForward, "current", lambda self: walks.append(1) or real(self))
    keys = {costs.cache_key(tiny, 200) for _ in range(3)}
    assert walks == [] and len(keys) == 1 and "fast-forward" in keys.pop()
    specviz.passes.speedups.remove(tiny.model)  # a changed stamp: decided again, and said
    assert "fast-forward" not in costs.cache_key(tiny, 200)


def test_a_noisy_pass_is_timed_again(tiny):
    """A pass inflated by other work (slower than a larger pass) is timed again and its fastest time
    kept; so is the one-token pass, which every ratio divides by."""
    timer = Counting(spikes={6: 3.0, 1: 2.0})
    prof = costs.profile(tiny, cache_file=None, timer=timer)
    assert prof.v[6] == pytest.approx(linear_time(6) / linear_time(1))
    assert prof.pass_s == pytest.approx(linear_time(1))
    assert timer.calls.count(6) >= 2


def test_clean_timings_stop_after_one_extra_round():
    """With no size out of order, measuring takes a warm-up, FULL_ROUNDS passes per size and one
    re-timed one-token pass; a spent budget stops after the first full round."""
    timer = Counting()
    times, _ = costs.measure(timer, [1, 2, 4], budget_s=10.0)
    assert timer.calls == [4] + [1, 2, 4] * costs.FULL_ROUNDS + [1]
    timer = Counting(spikes={2: 5.0})
    costs.measure(timer, [1, 2, 4], budget_s=0.0)
    assert timer.calls == [4, 1, 2, 4]


def test_a_burst_that_keeps_sizes_in_order_is_timed_again():
    """Other work that inflates neighbouring sizes in one round, leaving them in order (so none is
    a suspect), does not stay in the profile: every size is timed in several rounds."""
    timer = Counting(spikes={12: 1.1, 16: 1.1})
    times, _ = costs.measure(timer, [1, 8, 12, 16, 24, 32], budget_s=10.0)
    assert times[12] == pytest.approx(linear_time(12)) and times[16] == pytest.approx(linear_time(16))


def fake_dtype_timer(fp32: float, bf16: float):
    def timer(dtype, n):
        return (bf16 if dtype == torch.bfloat16 else fp32) * (1 + 0.01 * n)
    return timer


@pytest.mark.parametrize("fp32, bf16, expected", [
    (0.060, 0.040, torch.bfloat16),   # clearly faster: take it
    (0.060, 0.057, torch.float32),    # inside the margin: not worth rounding the weights
    (0.060, 0.150, torch.float32),    # emulated-looking bf16: slower
])
def test_pick_dtype_takes_bf16_only_when_clearly_faster(tiny, fp32, bf16, expected):
    """With native bf16, pick_dtype returns bfloat16 only when its passes take under BF16_MARGIN of
    float32's."""
    assert costs.pick_dtype(tiny, timer=fake_dtype_timer(fp32, bf16), native=True, cache_file=None) == expected


def test_pick_dtype_never_bf16_without_native_support(tiny):
    """Without native bf16 the answer is float32 and nothing is timed."""
    def timer(dtype, n):
        raise AssertionError("timed a pass on a CPU without bf16")
    assert costs.pick_dtype(tiny, timer=timer, native=False, cache_file=None) == torch.float32


def test_pick_dtype_is_cached(tiny, tmp_path):
    """The second choice for the same model and machine comes from the cache, without timing."""
    calls = []

    def timer(dtype, n):
        calls.append(n)
        return 0.04 if dtype == torch.bfloat16 else 0.06
    path = tmp_path / "costs.json"
    assert costs.pick_dtype(tiny, timer=timer, native=True, cache_file=path) == torch.bfloat16
    n_calls = len(calls)
    costs.forget_cached()
    assert costs.pick_dtype(tiny, timer=timer, native=True, cache_file=path) == torch.bfloat16
    assert len(calls) == n_calls


def test_load_auto_switches_to_the_picked_dtype(monkeypatch):
    """load(dtype="auto") on a CPU loads float32, then casts to what pick_dtype chose, with the
    speed-ups a model of that dtype gets; "auto" on a CPU always loads float32 first."""
    def fake_load(source, name, dev, dt, progress):
        assert dt == torch.float32
        return tiny_random()
    monkeypatch.setattr(specviz.loading.loader, "_load_pretrained", fake_load)
    monkeypatch.setattr(costs, "pick_dtype", lambda model: torch.bfloat16)
    got = specviz.load("owner/model", device="cpu", dtype="auto")
    assert got.dtype == torch.bfloat16 and next(got.model.parameters()).dtype == torch.bfloat16
    assert specviz.passes.speedups.applied(got.model) == specviz.passes.speedups.apply(tiny_random().model.bfloat16())
    monkeypatch.setattr(costs, "pick_dtype", lambda model: torch.float32)
    got = specviz.load("owner/model", device="cpu", dtype="auto")
    assert got.dtype == torch.float32 and specviz.passes.speedups.applied(got.model) == ["packed-linear", "gqa-sdpa"]


class Work:
    """Work whose runs take the programmed seconds on a fake clock: the first run is the warm-up."""

    def __init__(self, seconds):
        self.seconds, self.runs, self.now = list(seconds), 0, 0.0

    def clock(self) -> float:
        return self.now

    def __call__(self) -> None:
        self.now += self.seconds[min(self.runs, len(self.seconds) - 1)]
        self.runs += 1


def test_work_cost_is_the_fastest_run_over_the_one_token_pass(tiny):
    """work_cost times the work after one warm-up run that it ignores, keeps the fastest of the
    repeats (noise only adds time) and divides by the profile's one-token pass."""
    work = Work([9.0, 0.004, 0.002, 0.003])  # a slow warm-up, then 2 ms at best
    got = costs.work_cost(tiny, "w", work, repeats=3, cache_file=None, timer=linear_time, clock=work.clock)
    assert work.runs == 4
    assert got.work_s == pytest.approx(0.002) and got.pass_s == pytest.approx(linear_time(1))
    assert got.cost == pytest.approx(0.002 / linear_time(1))


def test_work_cost_is_cached_per_work_and_read_back_from_the_file(tiny, tmp_path):
    """A second call runs nothing; another process (memory emptied) reads the file; other work
    under another name is timed for itself; refresh=True times again."""
    path, work = tmp_path / "costs.json", Work([0.001, 0.002])
    first = costs.work_cost(tiny, "a", work, repeats=2, cache_file=path, timer=linear_time, clock=work.clock)
    runs = work.runs
    assert costs.work_cost(tiny, "a", work, cache_file=path, timer=linear_time, clock=work.clock).cost == first.cost
    costs.forget_cached()
    assert costs.work_cost(tiny, "a", work, cache_file=path, timer=linear_time, clock=work.clock).cost == first.cost
    assert work.runs == runs
    other = Work([0.005])
    assert costs.work_cost(tiny, "b", other, repeats=2, cache_file=path, timer=linear_time,
                           clock=other.clock).work_s == pytest.approx(0.005)
    costs.work_cost(tiny, "a", work, repeats=2, cache_file=path, timer=linear_time, clock=work.clock, refresh=True)
    assert work.runs == runs + 3


def test_a_work_cost_priced_against_an_older_profile_is_given_in_the_current_one(tiny, tmp_path):
    """When the model's cost profile is timed again (a new pass_s), the cached work cost, whose
    ratio was divided by the old pass_s, is given in the new unit: its measured seconds over the
    current one-token pass, without running the work again (a run's price never depends on when it
    was asked for), so the planner never mixes two measurements."""
    path, work = tmp_path / "costs.json", Work([0.001, 0.002])
    first = costs.work_cost(tiny, "a", work, repeats=2, cache_file=path, timer=linear_time, clock=work.clock)
    runs = work.runs

    def slower(n: int) -> float:
        return 2 * linear_time(n)

    costs.profile(tiny, cache_file=path, timer=slower, refresh=True)
    again = costs.work_cost(tiny, "a", work, repeats=2, cache_file=path, timer=slower, clock=work.clock)
    assert work.runs == runs
    assert again.pass_s == pytest.approx(slower(1)) == costs.profile(tiny, cache_file=path).pass_s
    assert again.work_s == first.work_s and again.cost == pytest.approx(first.work_s / slower(1))
    assert again.cost == pytest.approx(first.cost / 2)


def test_files_that_name_the_one_token_pass_step_s_still_load():
    """Cost profiles, work costs and batch effects written before the one-token pass was named
    `pass_s` hold it as `step_s`: each reads back with that value as `pass_s`, and a file that
    holds both keeps the new one."""
    from specviz.measure.batch_effect import _from_dict
    from specviz.pricing.cost_profile import CostProfile

    old = {"model": "m", "device": "cpu", "dtype": "float32", "prefix_len": 200, "step_s": 0.07, "v": {"1": 1.0}}
    assert CostProfile.from_dict(old).pass_s == 0.07
    assert CostProfile.from_dict({**old, "pass_s": 0.05}).pass_s == 0.05
    work = costs.WorkCost.from_dict({"work": "w", "cost": 0.5, "work_s": 0.035, "step_s": 0.07})
    assert work is not None and work.pass_s == 0.07
    effect = _from_dict({"model": "m", "device": "cpu", "dtype": "float32", "k": 4, "prefix_len": 200,
                         "batch_sizes": [1, 2], "step_s": [0.07, 0.08], "verify_s": [0.1, 0.12],
                         "measured_at": "", "hardware": ""})
    assert effect is not None and effect.pass_s == [0.07, 0.08] and effect.ratio[0] == pytest.approx(0.1 / 0.07)


def test_a_bench_report_written_with_step_ms_still_summarises():
    """bench.json files from before the rename give the cost profile's one-token pass as
    `step_ms`: the summary still prints it."""
    from specviz.measure.bench import summary_markdown

    machine = {"date": "2026-12-01", "cpu": "CPU", "torch": "2.13.0", "threads": 2}
    report = {"machine": machine, "settings": {}, "variants": [], "prompts": {}, "results": {}, "summary": {},
              "cost_profile": {"v": {"1": 1.0}, "step_ms": 73.0}}
    assert "one-token pass 73.0 ms" in summary_markdown(report)
