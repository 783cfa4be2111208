"""SpecViz driving a target served by a real vLLM server (served/remote.py, decoding/targets.RemoteTarget).

Each module-scoped fixture starts `python -m vllm.entrypoints.openai.api_server` from .venv-vllm
(`bash scripts/install.sh vllm`), waits for /health within a bounded time and stops it by its own
process group. Off CI, without that venv, these tests skip with that message; in CI they fail.
The bundled model serves the greedy checks; a tiny twin saved as a folder (6 tokens) serves the
statistics, where hundreds of runs must take seconds.
"""
from __future__ import annotations

import functools
import socket
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

import specviz
from specviz.decoding.engine import Decoder
from specviz.decoding.served import served_plain
from specviz.decoding.trace import FROM_DRAFT, RESAMPLED
from specviz.loading.loader import derive_draft, local_source, tiny_random
from specviz.proposers.draft_model import DraftModelProposer
from specviz.served import vllm_serve
from specviz.served.remote import HIDDEN_REFUSED
from specviz.teach.toy import chi_square_p_value
from tests.conftest import IN_CI
from tests.helpers import twins
from tests.helpers.reference import exact_joint
from tests.helpers.tiny import FixedTreeProposer, word_tokenizer

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

PROMPTS = ["Explain in three sentences why the sky is blue.",
           "Write a Python function that returns the n-th Fibonacci number, with a docstring."]
VOCAB, PROMPT, N = 6, [1, 2, 3], 600  # as test_exactness: every broken rule fails at this N
TOP_K = 3  # of 6 tokens: the truncation shows in the counts
NUCLEUS = (0.7, 0.9)
ALPHA = 1e-4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(model: str, log):
    if not vllm_serve.available():
        message = f"no vLLM venv at {vllm_serve.python()}: bash scripts/install.sh vllm"
        if IN_CI:
            pytest.fail(f"{message} (CI=true: the vLLM tests must run in CI)", pytrace=False)
        pytest.skip(message)
    try:
        return vllm_serve.start(local_source(model), _free_port(), log, timeout_s=400)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="module")
def bundled_server(tmp_path_factory, bundled_target):
    served = _serve("bundled", tmp_path_factory.mktemp("vllm") / "bundled.log")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def remote_bundled(bundled_server):
    return specviz.load(f"vllm:{bundled_server.url}|bundled")


def tiny_twin():
    """The tiny target of the statistics (as test_exactness's: two layers, p peaked by ×10)."""
    target = tiny_random(vocab_size=VOCAB, hidden_size=64, layers=2, heads=2, kv_heads=1, intermediate=64, seed=1)
    with torch.no_grad():
        target.model.lm_head.weight.mul_(10)
    return target


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-twin")
    tiny_twin().model.save_pretrained(folder, safe_serialization=True)
    word_tokenizer(VOCAB).save_pretrained(folder)
    served = _serve(str(folder), tmp_path_factory.mktemp("vllm") / "tiny.log")
    yield served
    served.stop()


@pytest.fixture(scope="module")
def remote_tiny(tiny_server):
    target = specviz.load(f"vllm:{tiny_server.url}")
    target.eos_ids = set()  # as the reference: every run draws four tokens
    target.remote.top_k = TOP_K
    return target


@pytest.mark.bundled
@pytest.mark.parametrize("method", ["pld", "logitspec", "draft"])
def test_greedy_over_vllm_equals_vllms_own_and_the_in_process_output(remote_bundled, bundled_target, method):
    """Greedy decoding with SpecViz proposing and judging and vLLM verifying gives exactly vLLM's
    own greedy output and the in-process greedy output, for prompt lookup, LogitSpec and a local
    draft model (the bundled model in this process) on two prompts."""
    draft = bundled_target if method == "draft" else None
    for prompt in PROMPTS:
        # plan=False: the planner rightly sees no gain in a draft as big as its target, and drafts nothing
        kw = dict(max_new_tokens=40, k=4, plan=False) if method == "draft" else dict(max_new_tokens=40)
        ours = specviz.generate(remote_bundled, prompt, method=method, draft=draft, **kw)
        theirs = served_plain(remote_bundled, prompt, max_new_tokens=40)
        local = specviz.generate(bundled_target, prompt, method="ar", max_new_tokens=40)
        assert ours.token_ids == theirs.token_ids == local.token_ids, (ours.text, theirs.text, local.text)
        assert any(c.n_accepted for c in ours.cycles)  # drafts were judged and kept, not only plain steps


@pytest.mark.bundled
def test_the_second_verify_of_a_run_reuses_the_servers_cache(remote_bundled):
    """After the prefill, a verify request finds the run's context in the server's prefix cache:
    cached tokens > 0 from the second verify on, and the panel's metrics add them up."""
    run = specviz.generate(remote_bundled, PROMPTS[0], method="pld", max_new_tokens=12)
    assert len(run.cycles) >= 2
    assert all(c.served is not None for c in run.cycles)
    assert run.cycles[1].served["cached_tokens"] > 0
    assert run.metrics["served_cached_tokens"] >= run.cycles[1].served["cached_tokens"]


def test_the_head_is_refused_for_a_served_target(remote_tiny):
    """The trained head needs the target's hidden states: a served target refuses it with the
    message that says what to pick instead; the hybrid drafts with retrieval alone."""
    with pytest.raises(ValueError) as e:
        Decoder(remote_tiny, PROMPT, method="head", chat=False)
    assert str(e.value) == HIDDEN_REFUSED
    assert Decoder(remote_tiny, PROMPT, method="hybrid", chat=False).proposer.head is None


@functools.lru_cache(maxsize=1)
def tiny_draft():
    """A noisy draft of the tiny twin, in this process (as test_exactness's)."""
    return derive_draft(tiny_twin(), noise=1.0, seed=2)


def _proposer(name: str, remote, seed: int):
    if name == "chain, draft model":
        return DraftModelProposer.build(remote, tiny_draft())
    return FixedTreeProposer(depth=2, branching=3, vocab=VOCAB, seed=seed)


def _counts(remote, name: str) -> tuple[np.ndarray, Counter]:
    counts, origins = np.zeros((VOCAB,) * 3), Counter()
    for seed in range(N):
        run = Decoder(remote, PROMPT, proposer=_proposer(name, remote, seed), k=2, temperature=NUCLEUS[0],
                      top_p=NUCLEUS[1], seed=seed, max_new_tokens=4, chat=False, record=False, plan=False).run()
        counts[tuple(run.token_ids[1:])] += 1
        origins.update(run.origins)
    return counts, origins


@pytest.mark.parametrize("name", ["chain, draft model", "tree, deterministic drafts"])
def test_sampled_output_over_vllm_follows_the_top_k_target_exactly(remote_tiny, name):
    """(t2, t3, t4) of N seeded runs over vLLM follow the exact joint of "top-3, then T 0.7, then
    top-p 0.9" (χ² p > ALPHA), and the same counts reject the joint without the top-k (so the
    check sees the truncation the page claims); drafts were accepted and resampled."""
    counts, origins = _counts(remote_tiny, name)
    model = tiny_twin().model
    assert chi_square_p_value(counts, exact_joint(model, PROMPT, 4, *NUCLEUS, top_k=TOP_K).sum(0)) > ALPHA
    assert chi_square_p_value(counts, exact_joint(model, PROMPT, 4, *NUCLEUS).sum(0)) < ALPHA
    assert min(origins[FROM_DRAFT], origins[RESAMPLED]) >= N / 20, origins


def test_the_check_over_vllm_fails_for_a_broken_rule(remote_tiny, monkeypatch):
    """With the acceptance ratio turned upside down (tests/helpers/twins.py), the same check rejects the
    output: the statistics above can fail."""
    twins.install(monkeypatch, "acceptance ratio q/p")
    counts, _ = _counts(remote_tiny, "chain, draft model")
    assert chi_square_p_value(counts, exact_joint(tiny_twin().model, PROMPT, 4, *NUCLEUS, top_k=TOP_K).sum(0)) < ALPHA


def test_vllms_own_sampling_follows_the_same_target(remote_tiny):
    """The AR baseline's distribution: vLLM's own sampling with top_k = 3, T 0.7 and top-p 0.9 (the
    request the baseline sends, seeded per run) follows the same exact joint as the speculative
    runs, so the timing panel compares two samplers of one distribution."""
    counts = np.zeros((VOCAB,) * 3)
    for seed in range(N):
        ids, _ = remote_tiny.remote.complete(PROMPT, 4, NUCLEUS[0], NUCLEUS[1], seed, ignore_eos=True)
        counts[tuple(ids[1:4])] += 1
    model = tiny_twin().model
    assert chi_square_p_value(counts, exact_joint(model, PROMPT, 4, *NUCLEUS, top_k=TOP_K).sum(0)) > ALPHA


@pytest.mark.bundled
def test_the_app_steps_and_runs_a_served_target(app_url, bundled_server, monkeypatch):
    """Through the page's API, with the served target on the deployment's list: Run decodes with
    prompt lookup over vLLM to the server's own greedy text, the timing panel names the server's
    own decoding as the AR baseline, and picking the trained head gives the refusal message, after
    which the session still steps."""
    gradio_client = pytest.importorskip("gradio_client")
    from specviz.ui.runtime import state
    from specviz.ui.runtime.limits import Limits
    from specviz.ui.shared import run as shared_run
    from tests.helpers.app_client import PROMPT, STREAM_TIMEOUT_S, call, named

    spec = f"vllm:{bundled_server.url}|bundled"
    limits = Limits(allowed_models=frozenset({spec}))
    monkeypatch.setattr(state, "LIMITS", limits)
    monkeypatch.setattr(shared_run, "LIMITS", limits)
    client = gradio_client.Client(app_url, verbose=False)
    kw = dict(prompt=PROMPT, target=spec, method="pld", k=4, max_new_tokens=16, temperature=0.0, top_p=1.0)
    job = client.submit(api_name="/run", **kw)
    job.result(timeout=STREAM_TIMEOUT_S)
    final = named(job.outputs()[-1])
    assert "Run finished" in final["status"], final["status"]
    assert final["plain_text"] == served_plain(state.MODELS.get(spec), PROMPT, max_new_tokens=16).text
    assert "plain decoding by the vLLM server" in final["metrics"]
    from specviz.proposers import HEAD_DRAFT

    refused = call(client, "/step", **dict(kw, method="draft", draft=HEAD_DRAFT))
    assert "hidden states" in refused["status"], refused["status"]
    again = call(client, "/step", **kw)
    assert "sv-status-ok" in again["status"], again["status"]


@pytest.mark.bundled
def test_vllm_runs_the_configuration_the_advice_wrote_and_the_check_measures_it(bundled_server, tmp_path):
    """vLLM started with the exact speculative configuration deploy/vllm.py wrote for the recorded
    survey's prompt lookup speculates (its counters count drafts), decodes the same greedy tokens
    as vLLM plain and as SpecViz's prompt lookup over vLLM, and the engine check measures it
    against a prediction from vLLM's own step costs."""
    from contextlib import nullcontext

    from specviz.advise import advice, deploy
    from specviz.advise.engine_runs import check_vllm
    from specviz.measure.served_compare import compare, table

    survey = advice.read(Path(__file__).resolve().parents[2] / "assets" / "recorded_advice.json")
    written = next(d for d in deploy.deployments(survey) if d.engine == deploy.VLLM and d.candidate == "pld")
    spec_server = _serve_extra("bundled", tmp_path / "ngram.log", ["--speculative-config", written.config])
    try:
        plain = specviz.load(f"vllm:{bundled_server.url}|bundled")
        spec = specviz.load(f"vllm:{spec_server.url}|bundled")
        rows = compare(plain, [PROMPTS[1]], k=written.k, max_new_tokens=32, repeats=1, spec=spec,
                       progress=lambda m: None)
        m = next(x for x in survey.measured if x.candidate.label == "pld")
        (chk,) = check_vllm(m, {1: written.k}, lambda: nullcontext(plain), lambda: nullcontext(spec), [PROMPTS[1]],
                            written.config, "CI", max_new_tokens=24, repeats=1, progress=lambda _: None)
    finally:
        spec_server.stop()
    assert [r.same_text for r in rows] == [True, True, True]
    assert len(rows[1].marginal) == written.k and len(rows[2].marginal) == written.k
    assert rows[2].marginal[0] > 0  # the server's own drafts were counted
    assert "vLLM's own speculation" in table(rows)
    assert chk.error == "" and chk.same_text and chk.config == written.config
    assert chk.step_s > 0 and chk.measured > 0 and chk.predicted > 0 and chk.measured_marginal[0] > 0


def _serve_extra(model, log, extra):
    try:
        return vllm_serve.start(local_source(model), _free_port(), log, extra=extra, timeout_s=400)
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)


@pytest.mark.bundled
def test_compares_ar_row_for_a_served_target_is_the_servers_own_decoding(remote_bundled):
    """Compare's AR baseline row for a served target is vLLM's own plain decoding (not one request
    per token from here), with the same greedy tokens as a SpecViz row over the same server."""
    from specviz.measure.comparison import Config, Shared, decode

    spec = remote_bundled.name
    shared = Shared.of(PROMPTS[0], max_new_tokens=16)
    ar, _ = decode(remote_bundled, None, Config(spec, "ar"), shared)
    ours, _ = decode(remote_bundled, None, Config(spec, "pld", k=4), shared)
    assert ar.metrics["served_by"] == remote_bundled.remote.url and ar.cycles == []
    assert ours.token_ids == ar.token_ids


def test_a_served_run_resumed_without_its_caches_goes_on_exactly(remote_tiny):
    """As on ZeroGPU, where a call may find no parked cache: a greedy run over vLLM taken out as
    data and resumed in an empty process state after every cycle (its token cache rebuilt by one
    request) gives the tokens of the run decoded in one go."""
    from specviz.decoding.runstate import LiveCaches

    kw = dict(method="logitspec", k=3, max_new_tokens=12, chat=False)
    straight = specviz.generate(remote_tiny, PROMPT, **kw).token_ids
    dec = Decoder(remote_tiny, PROMPT, **kw)
    dec.step()
    while not dec.done:
        dec = Decoder.resume(remote_tiny, dec.state(), live=LiveCaches())
        dec.step()
    assert dec.state().trace().token_ids == straight
    assert dec.rebuilds >= 1


def test_bench_on_a_served_target_is_anchored_on_vllms_own_decoding(tiny_server, tmp_path):
    """`python -m specviz bench --target vllm:…` times our methods against the server's own plain
    decoding (the hf anchors need local weights and are left out), and greedy outputs equal it."""
    import json as _json

    from specviz.measure import bench

    prompts = tmp_path / "p.json"
    prompts.write_text(_json.dumps([{"id": "a", "prompt": "w4 w5 w4 w5 w4"}, {"id": "b", "prompt": "w5 w5 w4"}]))
    args = ["--prompts", str(prompts), "--target", f"vllm:{tiny_server.url}", "--methods", "pld,logitspec",
            "--max-new-tokens", "8", "--repeats", "1", "--raw", "--out", str(tmp_path / "out")]
    assert bench.main(args) == 0
    report = _json.loads((tmp_path / "out" / "bench.json").read_text())
    assert report["variants"] == ["vllm", "pld", "logitspec"]
    for v in ("pld", "logitspec"):
        assert report["summary"][v]["identical_to_vllm"] == 2 and report["summary"][v]["speedup_vs_vllm"] > 0
    assert "Against vLLM's own plain decoding" in (tmp_path / "out" / "summary.md").read_text()


@pytest.mark.bundled
def test_side_by_side_steps_a_served_target_beside_an_in_process_one(bundled_server, bundled_target, monkeypatch):
    """Side by side with A's target served by vLLM and B's the same model in this process: three
    Steps give both columns three cycles and the same greedy tokens, and the comparison line says
    they agree."""
    from types import SimpleNamespace

    from specviz.ui.runtime import state
    from specviz.ui.runtime.limits import Limits
    from specviz.ui.shared import run as shared_run
    from specviz.ui.side_by_side import handlers as columns

    spec = f"vllm:{bundled_server.url}|bundled"
    limits = Limits(allowed_models=frozenset({spec}))
    monkeypatch.setattr(state, "LIMITS", limits)
    monkeypatch.setattr(shared_run, "LIMITS", limits)
    state.MODELS.put("bundled", bundled_target)
    own = dict(method="pld", k=4, temperature=0.0, top_p=1.0, seed=0, adaptive_k=False)
    values = {"prompt": "Repeat after me: one two three, one two three.", "max_new_tokens": 16, "chat": True,
              **{f"a_{k}": v for k, v in dict(own, target=spec).items()},
              **{f"b_{k}": v for k, v in dict(own, target="bundled").items()}}
    req = SimpleNamespace(session_hash="test-vllm-pair")
    for _ in range(3):
        shown = dict(zip(columns.OUTPUTS, columns.step(req, None, **values)))
        assert "sv-status-ok" in shown["a_status"] and "sv-status-ok" in shown["b_status"], shown["a_status"]
    a, b = (s.run() for s in columns.columns(req))
    assert len(a.cycles) == len(b.cycles) == 3
    n = min(len(a.token_ids), len(b.token_ids))
    assert n >= 3 and a.token_ids[:n] == b.token_ids[:n]
    assert "agree so far" in shown["diff"]  # two targets by name, so no lossless badge, and no difference
