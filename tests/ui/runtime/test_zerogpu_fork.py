"""ZeroGPU for real: GPU calls forked from a thread that already ran torch's OpenMP pool never hang,
the queue takes a class, and ZeroGPU is what SPACES_ZERO_GPU says.

Everything runs under tests/helpers/fork_gpu.py, a stand-in as faithful to `spaces` 0.51.3 as the CPU
allows: the worker is forked from the calling thread after that thread entered OpenMP, stays
alive between calls, and reports errors and deaths as spaces does.
"""
from __future__ import annotations

import importlib.util
import re
import threading
import time

import pytest
import torch

from specviz.ui.runtime import zerogpu
from tests.helpers import fork_gpu

HANG_DEADLINE_S = 3  # requested seconds + margin in the hang tests: long enough for a healthy call


@pytest.fixture
def two_threads():
    """torch's OpenMP pool in use, as in the app (the suite runs tiny models on one thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@zerogpu.on_gpu(duration=1)
def lm_head_rows() -> float:
    """The op that hung the head's worker: rows of a 49152 × 576 LM head, indexed then summed."""
    weight = torch.ones(49152, 576)
    return float(weight[torch.arange(0, 49152, 3)].sum())


def in_a_thread(fn):
    """fn() called from a new thread, as a Gradio handler calls; its result or its exception."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except Exception as e:  # noqa: BLE001 -- handed to the test
            out["error"] = e
    thread = threading.Thread(target=run)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the GPU call never came back"
    return out


def test_a_worker_forked_after_openmp_answers(forked, two_threads):
    """A call forked from a thread that ran torch's OpenMP pool runs a parallel op and answers."""
    expected = float(torch.ones(49152, 576)[torch.arange(0, 49152, 3)].sum())
    out = in_a_thread(lm_head_rows)
    assert out == {"value": expected}
    assert forked == [("lm_head_rows", 1.0)]


def test_without_the_fix_the_worker_hangs_and_the_deadline_ends_it(forked, two_threads, monkeypatch):
    """With one-thread-at-fork off, the same call hangs in its worker (libgomp's pool is gone), and
    the deadline ends that worker: the caller gets a sentence, not a wait, and the next call, fixed,
    answers."""
    monkeypatch.setattr(zerogpu, "FORK_SAFE", False)
    monkeypatch.setattr(zerogpu, "DEADLINE_MARGIN_S", HANG_DEADLINE_S - 1)
    start = time.monotonic()
    out = in_a_thread(lm_head_rows)
    waited = time.monotonic() - start
    assert isinstance(out.get("error"), zerogpu.GpuCallFailed), out
    assert "stopped before it answered" in str(out["error"]) and "Press the button again" in str(out["error"])
    assert HANG_DEADLINE_S - 0.5 <= waited < HANG_DEADLINE_S + 20  # it did wait: a hang, ended by the deadline
    monkeypatch.setattr(zerogpu, "FORK_SAFE", True)
    assert "value" in in_a_thread(lm_head_rows)


@zerogpu.on_gpu(duration=1)
def refuses(text: str) -> None:
    raise ValueError(f"Nothing to do with {text!r}: type a prompt.")


def test_errors_cross_with_their_type_and_message(forked):
    """spaces names a worker's exception by its class alone; the app's messages still arrive whole."""
    out = in_a_thread(lambda: refuses("x"))
    assert type(out["error"]) is ValueError and str(out["error"]) == "Nothing to do with 'x': type a prompt."


@zerogpu.on_gpu(duration=1)
def vocab_of(spec: str) -> int:
    """A GPU call that needs a model the main process loaded (work.model finds it)."""
    from specviz.ui.runtime import work

    return work.model(spec).vocab_size


def test_a_worker_forked_before_a_model_loaded_is_replaced(forked):
    """A long-lived worker lacks a model loaded after it forked; the call is made again in a fresh
    worker, which has it, and the user sees only the answer."""
    from specviz.ui.runtime.state import MODELS
    from tests.helpers.tiny import pair

    first, _ = pair(vocab=32, seed=1)
    MODELS.put("tiny-random:vocab=32,seed=101", first)
    assert vocab_of("tiny-random:vocab=32,seed=101") == 32  # forks the worker
    later, _ = pair(vocab=40, seed=2)
    MODELS.put("tiny-random:vocab=40,seed=102", later)  # loaded after that worker forked
    assert vocab_of("tiny-random:vocab=40,seed=102") == 40
    assert [name for name, _ in forked] == ["vocab_of"] * 3  # the second call was made twice


# -- ZeroGPU is what SPACES_ZERO_GPU says --------------------------------------------------------
@pytest.mark.parametrize("value, zero", [("true", True), ("1", True), ("T", True), ("", False), ("false", False),
                                         ("0", False)])
def test_zero_gpu_is_what_spaces_zero_gpu_says(monkeypatch, value, zero):
    """ZeroGPU is decided as spaces.config decides it, from SPACES_ZERO_GPU."""
    monkeypatch.setenv("SPACES_ZERO_GPU", value)
    assert zerogpu.on_zero_gpu() is zero


def test_spaces_installed_off_zero_gpu_changes_nothing(monkeypatch):
    """With `spaces` importable and SPACES_ZERO_GPU unset, models go where torch says (here the CPU)
    and GPU calls run in-process: the caches of a Step stay in this process."""
    from specviz.decoding.engine import Decoder
    from specviz.decoding.runstate import LIVE
    from specviz.ui.runtime import work
    from specviz.ui.runtime.state import MODELS
    from tests.helpers.tiny import PROMPTS, pair

    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    # the tests' forked stand-in is not the app's: zero_app below installs it for its module, and in
    # reversed order (SPECVIZ_TEST_ORDER=reverse) its tests run before this one, with it still in place
    monkeypatch.setattr(zerogpu, "_backend", None)
    assert importlib.util.find_spec("spaces") is not None
    assert zerogpu.spaces is None and zerogpu.model_device() is None
    target, _ = pair(vocab=32, seed=4)
    MODELS.put("tiny-random:vocab=32,seed=104", target)
    state = Decoder(target, PROMPTS[0], method="pld", chat=False).state()
    after = work.step(("tiny-random:vocab=32,seed=104", None), state.light())
    assert after.n_cycles == 1 and after.run_id in LIVE  # ran here, not in a worker
    LIVE.drop(after.run_id)


# -- the app as a ZeroGPU Space launches it: SPACES_ZERO_GPU=true, bundled model, the stand-in ----
gradio_client = pytest.importorskip("gradio_client")
SHORT = dict(prompt="Write the days of the week, one per line: Monday, Tuesday, Wednesday.",
             max_new_tokens=24, method="pld", k=4, top_p=1.0)


@pytest.fixture(scope="module")
def zero_app(bundled_target):
    """The app built and served with SPACES_ZERO_GPU=true and its limits read under it, every GPU
    call in a stand-in worker; (demo, url)."""
    from specviz.browser import serve
    from specviz.ui.runtime import state
    from specviz.ui.runtime.limits import Limits

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPACES_ZERO_GPU", "true")
        mp.setattr(state, "LIMITS", Limits.from_env())
        state.MODELS.put("bundled", bundled_target)
        zerogpu.use_backend(fork_gpu.GPU)
        demo, url = serve()
        try:
            yield demo, url
        finally:
            demo.close()
            zerogpu.use_backend(None)
            fork_gpu.reset()


def named(values) -> dict:
    from specviz.ui.shared.views import OUTPUTS

    return dict(zip(OUTPUTS, values))


def cycle_shown(out: dict) -> int | None:
    match = re.search(r"Cycle (\d+)", out["narration"])
    return int(match.group(1)) if match else None


@pytest.mark.bundled
@pytest.mark.slow
def test_the_zero_gpu_queue_takes_a_class(zero_app):
    """Under SPACES_ZERO_GPU=true the queue holds SPECVIZ_QUEUE_SIZE events (Gradio alone would hold
    one) and several GPU events run at once."""
    from specviz.ui.runtime.limits import ZERO_GPU_CONCURRENCY, Limits

    demo, _ = zero_app
    assert demo._queue.max_size == Limits.queue_size >= 60
    step = next(fn for fn in demo.fns.values() if fn.api_name == "step")
    assert step.concurrency_limit == ZERO_GPU_CONCURRENCY > 1


@pytest.mark.bundled
@pytest.mark.slow
def test_one_session_steps_slides_runs_and_measures(zero_app):
    """One session on the bundled model: Steps show cycles 0, 1, 2, the slider goes back to cycle 1,
    Run finishes the run and Measure AR measures the baseline, every call in a forked worker."""
    from specviz.ui.runtime.state import BASELINES

    BASELINES._runs.clear()
    client = gradio_client.Client(zero_app[1], verbose=False)
    steps = [named(client.predict(api_name="/step", **SHORT)) for _ in range(3)]
    assert [cycle_shown(s) for s in steps] == [0, 1, 2], [s["status"] for s in steps]
    assert all("sv-status-ok" in s["status"] for s in steps)
    assert cycle_shown(named(client.predict(1, api_name="/show_cycle"))) == 1
    run = named(client.predict(api_name="/run", **SHORT))
    assert "Run finished" in run["status"], run["status"]
    ar = named(client.predict(api_name="/measure_ar", **SHORT))
    assert "AR baseline" in ar["status"] and "sv-status-ok" in ar["status"], ar["status"]
    assert {"step", "run", "baseline"} <= {name for name, _ in fork_gpu.CALLS}


@pytest.mark.bundled
@pytest.mark.slow
def test_eight_sessions_pressing_step_at_once_all_get_a_cycle(zero_app):
    """Eight sessions press Step at the same moment: every one gets cycle 0, none an error."""
    url = zero_app[1]
    clients = [gradio_client.Client(url, verbose=False) for _ in range(8)]
    start = threading.Barrier(len(clients))
    results: list = [None] * len(clients)

    def press(i: int) -> None:
        start.wait()
        try:
            results[i] = named(clients[i].predict(api_name="/step", **SHORT))
        except Exception as e:  # noqa: BLE001 -- "Queue is full" and the like are what this test counts
            results[i] = e
    threads = [threading.Thread(target=press, args=(i,)) for i in range(len(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    errors = [r for r in results if not isinstance(r, dict)]
    assert not errors, errors
    assert [cycle_shown(r) for r in results] == [0] * 8, [r["status"] for r in results]


@pytest.mark.bundled
@pytest.mark.slow
def test_a_hung_step_ends_with_a_message_and_the_session_goes_on(zero_app, monkeypatch):
    """With the fork fix off, a Step's fresh worker hangs on the bundled model: the Step ends at its
    deadline with a sentence in the status box, and with the fix back the same session's Step works."""
    from specviz.ui.runtime import work

    fork_gpu.reset()  # the next Step forks a new worker
    monkeypatch.setattr(zerogpu, "FORK_SAFE", False)
    monkeypatch.setattr(work, "STEP_S", 2)
    monkeypatch.setattr(zerogpu, "DEADLINE_MARGIN_S", HANG_DEADLINE_S)
    client = gradio_client.Client(zero_app[1], verbose=False)
    start = time.monotonic()
    out = named(client.predict(api_name="/step", **SHORT))
    assert time.monotonic() - start < 120
    assert "sv-status-error" in out["status"] and "stopped before it answered" in out["status"], out["status"]
    monkeypatch.setattr(zerogpu, "FORK_SAFE", True)
    out = named(client.predict(api_name="/step", **SHORT))
    assert cycle_shown(out) == 0 and "sv-status-ok" in out["status"], out["status"]
