"""A vLLM-served target without vLLM: the client's errors, the token cache, the logits rows and the
deployment's allowlist (served/remote.py, passes/kvcache.TokenCache, ui/limits.py).

A fake server in a thread answers with what a broken or wrong server would send; each failure
must reach the user as a message that says what to do, never a stack trace, and never hang.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from specviz.drafting.sampling import Sampling
from specviz.passes.kvcache import TokenCache, cache_len, copy_cache, keep_path, rollback, undo_pass
from specviz.served.remote import LOGIT_FLOOR, ServerError, VllmServer, parse_spec, rows_to_logits
from specviz.ui.runtime.limits import Limits, check_model_spec, served_targets
from specviz.ui.shared.guard import RUN_HINT, message


class _Fake(BaseHTTPRequestHandler):
    answers: dict = {}  # path → (status, content type, body, seconds to wait first)
    peers: list = []  # the client's (host, port) of each request: one port per connection

    def _answer(self):
        self.peers.append(self.client_address)
        if self.command == "POST":
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, kind, body, wait = self.answers.get(self.path.split("?")[0], (404, "text/plain", "no", 0))
        if wait:
            threading.Event().wait(wait)
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body.encode())))
        self.end_headers()
        self.wfile.write(body.encode())

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that gave up (the timeout test) breaks the write: expected, not worth a traceback


class _KeepAlive(_Fake):
    protocol_version = "HTTP/1.1"  # keeps a connection open between requests, as vLLM's server does


def _serving(handler):
    server = _Quiet(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Fake.peers = []
    _Fake.answers = {"/v1/models": (200, "application/json",
                                    json.dumps({"data": [{"id": "m", "max_model_len": 64}]}), 0)}
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(params=[_Fake, _KeepAlive], ids=["closing", "keep-alive"])
def fake(request):
    """A fake server that closes each connection after its answer, then one that keeps it open."""
    server, url = _serving(request.param)
    yield server, url
    server.shutdown()


@pytest.fixture
def keep_alive():
    """The fake server that keeps connections open, answering every verify request with one row."""
    server, url = _serving(_KeepAlive)
    choice = {"index": 0, "logprobs": {"top_logprobs": [{"token_id:3": -0.1}]}}
    _Fake.answers["/v1/completions"] = (200, "application/json", json.dumps({"choices": [choice]}), 0)
    yield url
    server.shutdown()


def test_a_dead_server_gives_a_message_to_act_on():
    """Nothing listening at the address: a ServerError that names the address and says to start
    the server, which the UI shows as it is (a user error), not as 'something went wrong'."""
    with socket_closed() as url:
        with pytest.raises(ServerError) as e:
            VllmServer(url, timeout_s=5).connect()
    text = message(e.value, RUN_HINT)
    assert text.startswith(f"Cannot reach the vLLM server at {url}") and "Start it" in text


class socket_closed:
    """A URL whose port was just free: nothing answers there."""

    def __enter__(self) -> str:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc):
        return False


def test_a_malformed_verify_answer_gives_a_message_not_a_stack_trace(fake):
    """A server whose completions lack the top log-probabilities (or are not JSON) gives a
    ServerError naming what was missing and asking whether it is a vLLM server."""
    _, url = fake
    server = VllmServer(url, timeout_s=5).connect()
    _Fake.answers["/v1/completions"] = (200, "application/json",
                                        json.dumps({"choices": [{"index": 0, "text": "x"}]}), 0)
    with pytest.raises(ServerError, match="without the top log-probabilities SpecViz reads"):
        server.next_logprobs([[1, 2]])
    _Fake.answers["/v1/completions"] = (200, "application/json", "{not json", 0)
    with pytest.raises(ServerError, match="not JSON"):
        server.next_logprobs([[1, 2]])
    _Fake.answers["/v1/completions"] = (400, "application/json", json.dumps({"message": "logprobs too big"}), 0)
    with pytest.raises(ServerError, match=r"refused /v1/completions \(HTTP 400\): logprobs too big"):
        server.next_logprobs([[1, 2]])


def test_a_slow_server_times_out_with_a_message(fake):
    """A server that does not answer within the timeout gives a ServerError after that time, not
    a wait for ever."""
    _, url = fake
    server = VllmServer(url, timeout_s=1).connect()
    _Fake.answers["/v1/completions"] = (200, "application/json", "{}", 3)
    with pytest.raises(ServerError, match="did not answer /v1/completions within 1 s"):
        server.next_logprobs([[1]])


def test_answers_for_fewer_prompts_than_asked_are_refused(fake):
    """One row missing from a verify answer is an error, never a shifted row."""
    _, url = fake
    server = VllmServer(url, timeout_s=5).connect()
    choice = {"index": 0, "logprobs": {"top_logprobs": [{"token_id:3": -0.1}]}}
    _Fake.answers["/v1/completions"] = (200, "application/json", json.dumps({"choices": [choice]}), 0)
    assert server.next_logprobs([[1]])[0] == [{3: -0.1}]
    with pytest.raises(ServerError, match="answered 1 of 2 prompts"):
        server.next_logprobs([[1], [1, 2]])


def test_rows_hold_the_top_k_and_nothing_else():
    """A row of logits is the top-k log-probabilities, and every other token has probability 0
    after any temperature and top-p: the distribution is top-k, then T, then top-p."""
    logits = rows_to_logits([{1: -0.5, 4: -1.5, 2: -2.0}], 6)
    assert logits[0, 3] == LOGIT_FLOOR
    p = Sampling(0.7, 1.0, 0).probs(logits[0])
    z = torch.tensor([-0.5, -1.5, -2.0]) / 0.7
    assert torch.allclose(p[[1, 4, 2]], torch.softmax(z, 0), atol=1e-6)
    assert float(p[[0, 3, 5]].sum()) == 0.0
    with pytest.raises(ServerError, match="outside this tokenizer"):
        rows_to_logits([{9: -0.1}], 6)


def test_a_token_cache_rolls_back_like_a_kv_cache():
    """The served target's cache (its context ids) cuts, keeps a tree's path, undoes and copies
    as the engine expects of any cache."""
    cache = TokenCache([1, 2, 3])
    cache.ids += [4, 5, 6, 7]  # a verify pass: newest (4) and three nodes
    keep_path(cache, 4, [5])  # position 5: the second node
    assert cache.ids == [1, 2, 3, 4, 6] and cache_len(cache) == 5
    rollback(cache, 3)
    assert cache.ids == [1, 2, 3]
    other = copy_cache(cache)
    other.ids.append(9)
    undo_pass(other, 2)
    assert cache.ids == [1, 2, 3] and other.ids == [1, 2]


def test_served_targets_come_only_from_the_deployments_list():
    """A vllm: spec typed by a visitor is refused even on a server with no allowlist; one the
    admin listed passes and appears in the target picker."""
    spec = "vllm:http://10.0.0.5:8000|bundled"
    with pytest.raises(ValueError, match="come from this server's configuration"):
        check_model_spec(spec, Limits())
    listed = Limits(allowed_models=frozenset({spec, "bundled"}))
    assert check_model_spec(spec, listed) == spec
    assert served_targets(listed) == [("served by vLLM at http://10.0.0.5:8000", spec)]


def test_a_bad_vllm_spec_says_how_to_write_one():
    """A spec without an http(s) URL is refused with its right form."""
    with pytest.raises(ServerError, match=r"write vllm:http://HOST:PORT"):
        parse_spec("vllm:localhost")
    assert parse_spec("vllm:http://127.0.0.1:8000/|bundled") == ("http://127.0.0.1:8000", "bundled")


def test_the_panels_say_what_the_server_reported():
    """A served cycle's KV panel gives the server's report (prompts, prompt tokens, cached tokens)
    and says rollback is the server's prefix cache; the timing panel names the AR baseline as the
    server's own decoding, the top-k it follows and the cached tokens of the run."""
    from specviz.decoding.trace import CycleTrace
    from specviz.viz import cache_html, metrics_html

    cycle = CycleTrace(index=3, k=4, cache_before={"target": 20}, cache_after={"target": 23},
                       served={"prompts": 5, "prompt_tokens": 110, "cached_tokens": 96, "seconds": 0.2})
    html = cache_html(cycle)
    assert "5 prompts" in html and "110 prompt tokens" in html and "found 96 in its cache" in html
    assert "Rollback is the server&#x27;s prefix cache" in html or "Rollback is the server's prefix cache" in html
    spec = {"tokens_per_s": 10.0, "cycles": 4, "served_requests": 4, "served_prompt_tokens": 400,
            "served_cached_tokens": 300, "served_top_k": 20}
    ar = {"tokens_per_s": 8.0, "cycles": 9, "served_by": "http://127.0.0.1:8000", "served_top_k": 20}
    text = metrics_html(spec, ar)
    assert "plain decoding by the vLLM server at http://127.0.0.1:8000 itself" in text
    assert "top-20, then temperature, then top-p" in text and "300 were found" in text
    assert "The target distribution it follows is the server&#x27;s top-20" in text


def test_vllms_speculation_counters_are_read_from_recorded_metrics():
    """The /metrics text of vLLM 0.32's CPU build after an ngram run (tests/served/data, recorded on this
    kind of machine) gives its drafts, draft tokens and accepted tokens per position; the rates are
    the marginal (÷ drafts) and conditional (÷ accepted at the previous position) ones; a server
    that does not speculate has no counters."""
    from pathlib import Path

    from specviz.measure.served_compare import rates, read_counters

    text = (Path(__file__).parent / "data" / "vllm-0.32-ngram-metrics.txt").read_text()
    counters = read_counters(text)
    assert (counters.drafts, counters.draft_tokens, counters.accepted) == (15.0, 60.0, 29.0)
    assert counters.per_pos == [8.0, 7.0, 7.0, 7.0]
    marginal, conditional = rates(counters.per_pos, counters.drafts)
    assert marginal == pytest.approx([8 / 15, 7 / 15, 7 / 15, 7 / 15])
    assert conditional == pytest.approx([8 / 15, 7 / 8, 1.0, 1.0])
    assert read_counters('vllm:num_requests_running{engine="0"} 0.0\n') is None


def test_the_status_says_the_hybrid_runs_without_the_head_on_a_served_target():
    """The status line of a hybrid run on a vLLM target says the head is left out, not '+ head'."""
    from specviz.ui.runtime.settings import RunSettings

    text = RunSettings(target="vllm:http://127.0.0.1:8000|bundled", proposer="hybrid").describe()
    assert "without the head" in text
    assert "without the head" not in RunSettings(target="bundled", proposer="hybrid").describe()


def test_verify_requests_share_one_kept_alive_connection(keep_alive):
    """Against a server that keeps connections open, connecting and three verify requests arrive
    over one connection (one client port), not one connection per request."""
    server = VllmServer(keep_alive, timeout_s=5).connect()
    for _ in range(3):
        assert server.next_logprobs([[1]])[0] == [{3: -0.1}]
    assert len(_Fake.peers) == 4 and len(set(_Fake.peers)) == 1, _Fake.peers


def test_threads_share_one_client_and_each_gets_its_own_answer(keep_alive):
    """Eight threads sending verify requests at once through one server object all get their row,
    through one client for the process."""
    from concurrent.futures import ThreadPoolExecutor

    server = VllmServer(keep_alive, timeout_s=5)
    with ThreadPoolExecutor(8) as pool:
        rows = list(pool.map(lambda _: server.next_logprobs([[1]])[0], range(32)))
    assert rows == [[{3: -0.1}]] * 32
    assert len(server._clients) == 1


def test_a_forked_process_opens_its_own_connection(keep_alive):
    """As on ZeroGPU, where a GPU call runs in a process forked from the app: the child finds no
    client of its own, opens a new connection (a new client port) and gets its answer; the parent's
    connection is still the one it uses afterwards."""
    import os

    server = VllmServer(keep_alive, timeout_s=5).connect()
    parent_client = server._client()
    pid = os.fork()
    if pid == 0:  # the child: report by exit status only, never return into pytest
        ok = server._client() is not parent_client and server.next_logprobs([[1]])[0] == [{3: -0.1}]
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    server.next_logprobs([[1]])
    first, child, after = _Fake.peers[0], _Fake.peers[1], _Fake.peers[2]
    assert child != first and after == first and server._client() is parent_client


def test_a_copied_server_opens_its_own_client(keep_alive):
    """A pickled or copied server carries no client (sockets cannot travel) and opens its own when
    first used."""
    import copy
    import pickle

    server = VllmServer(keep_alive, timeout_s=5).connect()
    for twin in (pickle.loads(pickle.dumps(server)), copy.deepcopy(server)):
        assert twin._clients == {} and twin == server
        assert twin.next_logprobs([[1]])[0] == [{3: -0.1}]
        assert twin._client() is not server._client()
