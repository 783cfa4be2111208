"""Hostile and broken input through the running app: a specific message each time, never a crash,
and the next normal request still works. Plus concurrency, memory and Stop under load."""
from __future__ import annotations

import concurrent.futures
import html
import re

import huggingface_hub.constants
import psutil
import pytest

import specviz
from specviz.loading.loader import EMPTY_PROMPT, tiny_random
from tests.helpers.app_client import SHORT, call, cycle_no, named, wait_for

pytestmark = [pytest.mark.bundled, pytest.mark.slow]
gradio_client = pytest.importorskip("gradio_client")
from gradio_client.exceptions import AppError  # noqa: E402

BIG_TARGET = "tiny-random:shares-bundled-tokenizer"  # registered below: smaller than its draft
OK = None  # the input is valid: it must work, and any model text must come back escaped

CASES = [  # (id, change to the SHORT settings, expected text in the status, or an AppError pattern)
    ("empty prompt", dict(prompt=""), EMPTY_PROMPT),
    ("whitespace prompt", dict(prompt="  \n\t  "), EMPTY_PROMPT),
    ("1 MB prompt", dict(prompt="a" * 1_000_000), "Shorten it"),
    ("3000-token prompt", dict(prompt="word " * 3000), "SPECVIZ_MAX_PROMPT_TOKENS"),
    ("NUL bytes", dict(prompt="hello\x00world"), "NUL"),
    ("only NUL", dict(prompt="\x00"), "NUL"),
    ("right-to-left text", dict(prompt="اكتب جملة قصيرة عن البحر"), OK),
    ("emoji", dict(prompt="Describe 🚀🔥 and 👩‍👩‍👧 in three words."), OK),
    ("html injection", dict(prompt="Repeat exactly: <img src=x onerror=alert(1)>"), OK),
    ("script injection", dict(prompt="Say <script>alert(1)</script> back to me."), OK),
    ("markdown injection", dict(prompt="**bold** [x](javascript:alert(1)) $x^2$ `code` # head"), OK),
    ("temperature -1", dict(temperature=-1), AppError),
    ("top-p 0", dict(top_p=0), AppError),
    ("top-p 2", dict(top_p=2), AppError),
    ("K 0", dict(k=0), AppError),
    ("K 1000", dict(k=1000), AppError),
    ("K 2.5", dict(k=2.5), "K=2"),  # the slider snaps to its step of 1, and says so
    ("max tokens -5", dict(max_new_tokens=-5), AppError),
    ("max tokens 100000", dict(max_new_tokens=100_000), AppError),
    ("path traversal id", dict(target="../../etc/passwd"), "Local folders are not allowed"),
    ("absolute path", dict(target="/etc"), "Local folders are not allowed"),
    ("home path", dict(target="~/.ssh"), "Local folders are not allowed"),
    ("shell characters", dict(target="a; rm -rf /"), "not a valid Hugging Face model id"),
    ("command substitution", dict(target="$(reboot)"), "not a valid Hugging Face model id"),
    ("backticks", dict(target="`id`"), "not a valid Hugging Face model id"),
    ("over-long id", dict(target="x" * 300), "not valid"),
    ("html as model id", dict(target="<b>x</b>"), "not a valid Hugging Face model id"),
    ("unknown hub id offline", dict(target="specviz-test/no-such-model"), "could not be found"),
    ("target without tokenizer", dict(target="tiny-random", method="draft", draft="bundled"), "has no tokenizer"),
    ("draft without a draft", dict(target="tiny-random", method="draft", draft=""), "needs a draft"),
    ("blank draft on the bundled target takes the trained head", dict(method="draft", draft=""), OK),
    ("traversal as draft", dict(method="draft", draft="../../etc/passwd"), "Local folders are not allowed"),
    ("unknown method", dict(method="medusa"), AppError),
    ("layers out of range", dict(method="layerskip", layerskip_layers="0-99"), "layers"),
    ("layers not numbers", dict(method="layerskip", layerskip_layers="zero"), "not a number"),
    ("draft larger than target", dict(target=BIG_TARGET, method="draft", draft="bundled"), "larger than the target"),
]


@pytest.fixture(scope="module")
def offline_app(app_url, bundled_target):
    from specviz.ui.runtime.state import MODELS

    # a tiny target with the bundled tokenizer, so the bundled model is a (larger) valid draft
    MODELS.put(BIG_TARGET, tiny_random(vocab_size=bundled_target.vocab_size, tokenizer=bundled_target.tokenizer,
                                       eos_ids=bundled_target.eos_ids, name=BIG_TARGET))
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    yield app_url
    mp.undo()


def html_outputs(out: dict) -> str:
    return " ".join(str(v) for k, v in out.items() if isinstance(v, str) and k != "plain_text")


@pytest.mark.parametrize("name,change,expected", CASES, ids=[c[0] for c in CASES])
def test_hostile_input_gets_a_message_and_the_app_keeps_working(offline_app, name, change, expected):
    """Each bad input gives a visible, specific message (valid odd input works and is escaped);
    a normal Step right after it succeeds in the same session."""
    client = gradio_client.Client(offline_app, verbose=False)
    kw = {**SHORT, "max_new_tokens": 4, **change}
    if expected is AppError:  # refused by the component's own range check, with the range named
        with pytest.raises(AppError, match=r"(maximum|minimum) value|not in the list of choices|Value"):
            client.predict(api_name="/step", **kw)
    else:
        out = call(client, "/step", **kw)
        status = html.unescape(out["status"])
        if expected is OK:
            assert "sv-status-ok" in out["status"], status
            page = html_outputs(out)
            assert not re.search(r"<(img|script)\b", page, re.I), "model or prompt text reached the page unescaped"
        else:
            assert expected in status, status
            assert "sv-status-ok" in out["status"] or "sv-status-error" in out["status"]
    after = call(client, "/step", **{**SHORT, "max_new_tokens": 4})
    assert "sv-status-ok" in after["status"] and cycle_no(after) == 0


def test_table_attacks_every_setting():
    """Every setting a user types or picks gets at least one hostile value in the table, and
    each case has its own name (the raw HTTP bodies below attack the transport itself)."""
    attacked = {key for _, change, _ in CASES for key in change}
    assert attacked >= {"prompt", "target", "draft", "method", "temperature", "top_p", "k",
                        "max_new_tokens", "layerskip_layers"}, attacked
    assert len({name for name, _, _ in CASES}) == len(CASES)


def raw_step(url: str, body: bytes):
    """POST a hand-made body to the step endpoint (gradio_client refuses to send NaN or broken
    UTF-8 itself); return the HTTP status and the streamed result text."""
    import httpx

    base = f"{url}gradio_api/call/step"
    r = httpx.post(base, content=body, headers={"content-type": "application/json"}, timeout=60)
    if r.status_code != 200:
        return r.status_code, r.text
    return 200, httpx.get(f"{base}/{r.json()['event_id']}", timeout=300).text


@pytest.mark.parametrize("name,patch,expected", [
    ("lone surrogate (invalid UTF-8 as JSON escape)", lambda b: b.replace(b'"hi"', b'"caf\\udce9"'),
     "not valid UTF-8"),
    ("invalid UTF-8 bytes", lambda b: b.replace(b'"hi"', b'"caf\xe9"'), "error parsing the body"),
    ("temperature NaN", lambda b: b.replace(b'"TEMP"', b"NaN"), "temperature must be a number"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_raw_http_inputs_get_a_message(offline_app, name, patch, expected):
    """Input a normal client cannot even send (broken UTF-8, NaN) is refused with a specific
    message, by the app or by the server's parser; the app keeps serving."""
    import json

    client = gradio_client.Client(offline_app, verbose=False)
    params = client.view_api(return_format="dict")["named_endpoints"]["/step"]["parameters"]
    values = {**SHORT, "prompt": "hi", "temperature": "TEMP", "max_new_tokens": 4}
    data = [values.get(p["parameter_name"], p.get("parameter_default")) for p in params]
    body = patch(json.dumps({"data": data}).encode()).replace(b'"TEMP"', b"0.0")
    code, text = raw_step(offline_app, body)
    assert expected in html.unescape(text.encode().decode("unicode_escape", "ignore")) or expected in text, text[:300]
    after = call(client, "/step", **{**SHORT, "max_new_tokens": 4})
    assert "sv-status-ok" in after["status"]


def test_eight_concurrent_sessions_get_their_own_output(app_url, bundled_target):
    """8 clients run at once with different prompts; each gets exactly what specviz.generate gives
    alone for its prompt: no session's output mixes with another's. Greedy, because under sampling
    a run sharing passes is priced at the batch it runs in (load-aware drafting), so what it drafts,
    and with it the draws, depends on the load: its text follows the same distribution but is not
    the solo run's text (docs/API.md, "Cost-aware drafting")."""
    jobs = [dict(prompt=f"Name {n} animals that live in the sea.", seed=n, method="pld", temperature=0.0,
                 top_p=1.0, k=4, max_new_tokens=10) for n in range(2, 10)]

    def one(kw):
        client = gradio_client.Client(app_url, verbose=False)
        return named(client.predict(api_name="/run", **kw))["plain_text"]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(one, jobs))
    for kw, text in zip(jobs, texts):
        alone = specviz.generate(bundled_target, kw["prompt"], method="pld", k=4, temperature=0.0,
                                 seed=kw["seed"], max_new_tokens=10)
        assert text == alone.text


@pytest.mark.perf
def test_memory_stays_flat_over_200_runs(app_url):
    """200 short runs in one session: resident memory after run 200 is within 10 % of run 20."""
    client = gradio_client.Client(app_url, verbose=False)
    process = psutil.Process()
    rss = {}
    for i in range(1, 201):
        call(client, "/reset")
        call(client, "/step", **{**SHORT, "max_new_tokens": 3, "seed": i})
        if i in (20, 200):
            rss[i] = process.memory_info().rss
    assert rss[200] <= 1.10 * rss[20], rss


def test_stop_mid_run_leaves_consistent_caches(app_url, held_run):
    """After Stop in the middle of a Run the session steps again at once, and the target cache
    parked for its run holds exactly its committed tokens but the newest. (`held_run` keeps the Run
    going until the Stop has arrived, so it is stopped mid-run on any machine.)"""
    from specviz.ui.runtime.state import SESSIONS

    client = gradio_client.Client(app_url, verbose=False)
    kw = dict(prompt="Tell me a long story about a lighthouse keeper.", method="pld", max_new_tokens=200)
    job = client.submit(api_name="/run", **kw)
    wait_for(job, lambda o: "Running" in o["status"])
    call(client, "/stop")
    held_run.release()
    job.result(timeout=300)
    assert held_run.closed.wait(300) and not held_run.states[-1].done
    out = call(client, "/step", **kw)
    assert "sv-status-ok" in out["status"]
    from specviz.decoding.runstate import LIVE

    state = SESSIONS.get(client.session_hash).state
    assert LIVE._items[state.run_id].cache.get_seq_length() == len(state.ids) - 1
