"""The app driven through its public API with gradio_client, on the bundled model.

The app runs in-process on a free port (conftest.py's `app_url`); its model pool is primed with the session's bundled
model, so the app and `specviz.generate` use the very same weights.
"""
from __future__ import annotations

import re

import huggingface_hub.constants
import pytest

import specviz
from specviz.loading.loader import EMPTY_PROMPT
from tests.helpers.app_client import PROMPT, SHORT, STREAM_TIMEOUT_S, call, cycle_no, named, wait_for

pytestmark = [pytest.mark.bundled, pytest.mark.slow]

gradio_client = pytest.importorskip("gradio_client")


@pytest.fixture
def client(app_url):
    """A fresh client: its own Gradio session, so its own decoder."""
    return gradio_client.Client(app_url, verbose=False)


def test_step_runs_one_cycle_each(client):
    """Each Step runs exactly one cycle: narration and slider show cycles 0, 1, 2 in turn."""
    for i in range(3):
        out = call(client, "/step", **SHORT)
        assert "sv-status-ok" in out["status"], out["status"]
        assert cycle_no(out) == i
        assert out["cycle"]["value"] == i  # the slider follows the newest cycle
        assert out["tree"] is not None and out["pq"] is not None
    assert "New run" not in out["status"] and "Cycle 2 done" in out["status"]


@pytest.mark.parametrize("method,temperature", [("logitspec", 0.0), ("pld", 0.7)])
def test_run_streams_cycles_and_matches_generate(client, bundled_target, method, temperature):
    """Run streams frames with cycle data, ends with specviz.generate's exact text, and measures
    the AR baseline once (a second Run of the same settings reuses it)."""
    from specviz.ui.runtime.settings import from_inputs
    from specviz.ui.runtime.state import BASELINES

    kw = dict(SHORT, method=method, temperature=temperature, seed=3)
    job = client.submit(api_name="/run", **kw)
    job.result(timeout=STREAM_TIMEOUT_S)
    frames = [named(v) for v in job.outputs()]
    running = [f for f in frames if "Running" in f["status"] and "Cycle" in f["narration"]]
    assert running, [f["status"] for f in frames]
    final = frames[-1]
    assert "Run finished" in final["status"]
    expected = specviz.generate(bundled_target, PROMPT, method=method, k=4, temperature=temperature,
                                seed=3, max_new_tokens=24)
    assert final["plain_text"] == expected.text
    assert "not measured yet" not in final["metrics"]  # both columns hold measured numbers
    baseline = BASELINES.get(from_inputs(kw).ar_key())
    assert baseline is not None and baseline.method == "ar"
    call(client, "/reset")
    job = client.submit(api_name="/run", **kw)
    job.result(timeout=STREAM_TIMEOUT_S)
    assert BASELINES.get(from_inputs(kw).ar_key()) is baseline  # not measured again


def test_stop_interrupts_run_and_step_continues(client, held_run):
    """Stop ends a streaming Run after the cycle it is in, before the run is finished, and says so;
    the same run then continues with Step at the next cycle. `held_run` keeps the Run waiting after
    its first cycle until the Stop has arrived, so a fast machine cannot finish it first."""
    kw = dict(prompt="Tell me a long story about a dragon and a knight.", method="layerskip",
              max_new_tokens=250)  # within SPECVIZ_MAX_NEW_TOKENS (256 by default)
    job = client.submit(api_name="/run", **kw)
    first = wait_for(job, lambda o: "Running" in o["status"])
    assert cycle_no(first) == 0
    stopped = call(client, "/stop")
    assert "Stopped" in stopped["status"]
    held_run.release()
    job.result(timeout=STREAM_TIMEOUT_S)
    assert held_run.closed.wait(STREAM_TIMEOUT_S), "the Run's decoding did not end"
    frames = [named(v) for v in job.outputs()]
    assert "Stopped" in frames[-1]["status"], frames[-1]["status"]
    assert not any("Run finished" in f["status"] for f in frames)
    # the cycle under way when Stop came, and no more: the run is far from its 250 tokens
    assert len(held_run.states) == 2
    last = held_run.states[-1]
    assert not last.done and len(last.origins) < kw["max_new_tokens"]
    out = call(client, "/step", **kw)
    assert "sv-status-ok" in out["status"] and "New run" not in out["status"], out["status"]
    assert cycle_no(out) == last.n_cycles  # the stopped run's last cycle + 1


def test_reset_clears_the_run(client):
    """Reset empties the views; the next Step starts again at cycle 0."""
    call(client, "/step", **SHORT)
    call(client, "/step", **SHORT)
    out = call(client, "/reset")
    assert "Reset" in out["status"] and out["plain_text"] == "" and "No cycle yet" in out["narration"]
    assert cycle_no(call(client, "/step", **SHORT)) == 0


def test_changed_setting_restarts_with_a_message(client):
    """A Step with a different K restarts the run and says so."""
    call(client, "/step", **SHORT)
    call(client, "/step", **SHORT)
    out = call(client, "/step", **{**SHORT, "k": 2})
    assert "Settings changed" in out["status"] and cycle_no(out) == 0


def test_slider_shows_an_earlier_cycle(client):
    """show_cycle(1) puts cycle 1 in every cycle view after three Steps."""
    for _ in range(3):
        call(client, "/step", **SHORT)
    out = call(client, "/show_cycle", cycle=1)
    assert cycle_no(out) == 1 and "cycle 1" in out["cache"]


def test_sessions_are_isolated(app_url):
    """Two clients have two decoders: one's Steps do not advance the other's run."""
    a = gradio_client.Client(app_url, verbose=False)
    b = gradio_client.Client(app_url, verbose=False)
    call(a, "/step", **SHORT)
    call(a, "/step", **SHORT)
    assert cycle_no(call(b, "/step", **SHORT)) == 0


def test_errors_leave_a_message_and_the_next_run_works(client, monkeypatch):
    """Bad model ids, a mismatched pair, an empty prompt and bad settings each give a visible,
    actionable message; a valid Step afterwards works."""
    from gradio_client.exceptions import AppError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    cases = [
        (dict(target="not a model id!"), "not a valid Hugging Face model id"),
        (dict(target="specviz-test/no-such-model"), "could not be found"),
        (dict(target="tiny-random", method="draft", draft="bundled"), "has no tokenizer"),
        (dict(prompt="   "), EMPTY_PROMPT),
        (dict(method="layerskip", layerskip_layers="0-99"), "layers"),
        (dict(method="layerskip", layerskip_layers="zero"), "not a number"),
    ]
    for change, message in cases:
        out = call(client, "/step", **{**SHORT, **change})
        assert "sv-status-error" in out["status"], (change, out["status"])
        assert message in out["status"].replace("&#x27;", "'"), (change, out["status"])
    for change in (dict(k=99), dict(temperature=-1)):
        with pytest.raises(AppError, match="(maximum|minimum) value"):
            client.predict(api_name="/step", **{**SHORT, **change})
    out = call(client, "/step", **SHORT)
    assert "sv-status-ok" in out["status"] and cycle_no(out) == 0


def test_measure_baseline_alone(client):
    """Measure AR baseline fills the AR column with measured numbers before any speculative run."""
    out = call(client, "/measure_ar", **dict(SHORT, prompt="Count from one to ten in words."))
    assert "AR baseline measured" in out["status"]
    ar_column = out["metrics"].split("autoregressive", 1)[1]
    assert re.search(r"<td[^>]*>\d+\.\d</td>", ar_column), out["metrics"]


def test_load_models_reports_the_pair(client):
    """Load models loads the target now and checks a draft's tokenizer, saying so."""
    out = call(client, "/load_models", target="bundled", method="draft", draft="bundled")
    assert "sv-status-ok" in out["status"] and "shares its tokenizer" in out["status"]


def test_default_run_is_the_hybrid(client, bundled_target):
    """With only a prompt, Step starts the hybrid (retrieval, suffix and the trained head in one
    tree), and a Run gives exactly specviz.generate(method='hybrid')'s text at the page's starting
    settings when neither has earlier runs on the prompt to draft from (docs/API.md: under sampling
    a grown suffix store may draft differently, so one seed may give another sample)."""
    from specviz.proposers.suffix import EARLIER, unshared

    EARLIER.clear()  # earlier tests ran this prompt in this process
    first = call(client, "/step", prompt=PROMPT, max_new_tokens=24)
    assert "Hybrid" in first["status"], first["status"]
    job = client.submit(api_name="/run", prompt=PROMPT, max_new_tokens=24)
    job.result(timeout=STREAM_TIMEOUT_S)
    final = named(job.outputs()[-1])
    from specviz.ui.shared.recordings import example_settings

    s = example_settings()  # what the page's controls start on: the example run's settings
    assert s.method == "hybrid"
    with unshared():  # the page's run has fed the store since
        expected = specviz.generate(bundled_target, PROMPT, method="hybrid", k=s.k, temperature=s.temperature,
                                    top_p=s.top_p, seed=s.seed, max_new_tokens=24)
    assert final["plain_text"] == expected.text
