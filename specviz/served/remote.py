"""A target served by vLLM: the HTTP client, and the `LoadedModel` that stands for the served model.

SpecViz drives the cycle; the server only answers "what comes next after each of these prefixes?"
through its OpenAI-compatible `/v1/completions`: one request per verify pass, one prompt per tree
node's prefix (token ids), `max_tokens=1`, and the top log-probabilities keyed by token id
(`return_tokens_as_token_ids`). The server's prefix cache keeps the keys and values, so each
prompt costs the server only its new tokens; the local side keeps a `kvcache.TokenCache`.

A spec is ``vllm:URL`` or ``vllm:URL|TOKENIZER``: the server's base URL (``http://host:port``)
and where the tokenizer comes from (``bundled``, a hub id or a folder; by default the model the
server reports in ``/v1/models``). The tokenizer is checked against the server's own `/tokenize`.

The target distribution that a remote run follows is "top-k (the server's log-probabilities, at
most its `--max-logprobs`), then temperature, then top-p": each row of logits is the top-k raw
log-probabilities, every other token at LOGIT_FLOOR (probability exactly 0 after any temperature).

No UI libraries here. One `httpx.Client` per server and process keeps the connection alive
between verify requests (urllib opened a new one for each); a timeout on every call, and every
failure a `ServerError` whose message says what to do.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field

import httpx
import torch

from specviz.models.common import ModelLoadError, say
from specviz.models.loaded import LoadedModel

PREFIX = "vllm:"
TOP_K = 20  # log-probabilities per row: vLLM's default --max-logprobs
TIMEOUT_S = 60.0  # one request; SPECVIZ_VLLM_TIMEOUT_S changes it
LOGIT_FLOOR = -1.0e9  # tokens outside the top-k: exp of it, after any temperature, is exactly 0
HIDDEN_REFUSED = ("The trained draft head reads the target's hidden states, which a vLLM-served "
                  "target does not return: pick prompt lookup, LogitSpec or a draft model.")
ANSWER_HINT = "Is it a vLLM OpenAI-compatible server (vllm serve / vllm.entrypoints.openai.api_server)?"


class ServerError(ModelLoadError):
    """The vLLM server could not be reached, or answered something unexpected; the message says what to do."""


def is_remote(spec: str) -> bool:
    return isinstance(spec, str) and spec.strip().startswith(PREFIX)


def parse_spec(spec: str) -> tuple[str, str | None]:
    """(base URL, tokenizer spec or None) of ``vllm:URL[|TOKENIZER]``."""
    body = spec.strip()[len(PREFIX):]
    url, _, tokenizer = body.partition("|")
    url = url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")) or len(url) < 10:
        raise ServerError(f"'{spec}' is not a vLLM target: write vllm:http://HOST:PORT, optionally followed "
                          "by |TOKENIZER (bundled, a hub id or a folder).")
    return url, tokenizer.strip() or None


@dataclass
class Usage:
    """What the server reported about one request: prompts sent, their tokens, and how many of
    those it found in its prefix cache (0 when the server does not report it)."""
    prompts: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return dict(prompts=self.prompts, prompt_tokens=self.prompt_tokens, cached_tokens=self.cached_tokens,
                    seconds=round(self.seconds, 4))


@dataclass
class VllmServer:
    """An OpenAI-compatible vLLM endpoint (see the module docstring)."""
    url: str
    model: str = ""  # the served model's name, from /v1/models
    top_k: int = TOP_K
    timeout_s: float = field(default_factory=lambda: float(os.environ.get("SPECVIZ_VLLM_TIMEOUT_S", TIMEOUT_S)))
    max_model_len: int | None = None
    # httpx clients by process id: ZeroGPU forks the app, and a forked worker must not write on the
    # parent's sockets, so a worker finds no client under its own id and opens its own. Threads
    # share their process's client (httpx.Client is thread-safe for requests).
    _clients: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    # -- HTTP -----------------------------------------------------------------------------
    def _client(self) -> httpx.Client:
        pid = os.getpid()
        client = self._clients.get(pid)
        if client is None:
            fresh = httpx.Client(headers={"Content-Type": "application/json"}, follow_redirects=True)
            client = self._clients.setdefault(pid, fresh)  # atomic: two threads keep one client
            if client is not fresh:
                fresh.close()
        return client

    def close(self) -> None:
        """Close this process's connection to the server (a later call opens a new one)."""
        client = self._clients.pop(os.getpid(), None)
        if client is not None:
            client.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()  # a copy or pickle opens its own connection when first used
        state["_clients"] = {}
        return state

    def _call(self, path: str, body: dict | None = None) -> dict | str:
        try:
            if body is None:
                response = self._client().get(self.url + path, timeout=self.timeout_s)
            else:
                response = self._client().post(self.url + path, content=json.dumps(body).encode(),
                                               timeout=self.timeout_s)
        except httpx.TimeoutException:
            raise ServerError(f"The vLLM server at {self.url} did not answer {path} within "
                              f"{self.timeout_s:.0f} s: it may be overloaded or stuck. Try again, or "
                              "raise SPECVIZ_VLLM_TIMEOUT_S.") from None
        except (httpx.TransportError, httpx.InvalidURL, OSError) as e:
            raise ServerError(f"Cannot reach the vLLM server at {self.url} ({e}). Start it (README, "
                              "'Beyond one machine'), or check the address with the person who runs it.") from None
        if response.status_code >= 400:
            raise ServerError(f"The vLLM server at {self.url} refused {path} (HTTP {response.status_code}): "
                              f"{_error_text(response)}")
        raw = response.content.decode("utf-8", "replace")
        if "json" not in response.headers.get("Content-Type", ""):
            return raw
        try:
            return json.loads(raw)
        except ValueError:
            raise ServerError(f"The vLLM server at {self.url} answered {path} with text that is not JSON. "
                              + ANSWER_HINT) from None

    def health(self) -> bool:
        """True when /health answers."""
        try:
            self._call("/health")
        except ServerError:
            return False
        return True

    def connect(self) -> "VllmServer":
        """Ask the server which model it serves (and its context length)."""
        answer = self._call("/v1/models")
        try:
            first = answer["data"][0]
            self.model = str(first["id"])
            self.max_model_len = first.get("max_model_len")
            self.root = first.get("root") or self.model
        except (KeyError, IndexError, TypeError):
            raise ServerError(f"The server at {self.url} lists no model in /v1/models. " + ANSWER_HINT) from None
        return self

    def tokenize(self, text: str) -> list[int]:
        answer = self._call("/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False})
        try:
            return [int(t) for t in answer["tokens"]]
        except (KeyError, TypeError, ValueError):
            raise ServerError(f"The server at {self.url} answered /tokenize without token ids. "
                              + ANSWER_HINT) from None

    def metrics(self) -> str:
        """The Prometheus text of /metrics."""
        answer = self._call("/metrics")
        return answer if isinstance(answer, str) else json.dumps(answer)

    # -- what SpecViz asks ------------------------------------------------------------------
    def next_logprobs(self, prompts: list[list[int]]) -> tuple[list[dict[int, float]], Usage]:
        """For each prompt (token ids), the top-k raw log-probabilities of the next token, by id."""
        t0 = time.perf_counter()
        answer = self._call("/v1/completions", {
            "model": self.model, "prompt": prompts, "max_tokens": 1, "temperature": 0.0,
            "logprobs": self.top_k, "return_tokens_as_token_ids": True, "skip_special_tokens": False,
        })
        seconds = time.perf_counter() - t0
        try:
            choices = sorted(answer["choices"], key=lambda c: c["index"])
            rows = [_top(c["logprobs"]["top_logprobs"][0]) for c in choices]
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            raise ServerError(f"The vLLM server at {self.url} answered a verify request without the top "
                              "log-probabilities SpecViz reads. " + ANSWER_HINT) from None
        if len(rows) != len(prompts) or any(not r for r in rows):
            raise ServerError(f"The vLLM server at {self.url} answered {len(rows)} of {len(prompts)} prompts "
                              "of a verify request. " + ANSWER_HINT)
        return rows, _usage(answer, len(prompts), seconds)

    def complete(self, prompt: list[int], max_tokens: int, temperature: float, top_p: float, seed: int | None,
                 stop_ids: list[int] | None = None, ignore_eos: bool = False) -> tuple[list[int], Usage]:
        """Plain decoding by the server itself of the same target distribution (top-k, then
        temperature, then top-p; greedy at temperature 0): the new token ids and the usage."""
        body = {"model": self.model, "prompt": [prompt], "max_tokens": int(max_tokens),
                "temperature": float(temperature), "top_p": float(top_p), "logprobs": 0,
                "return_tokens_as_token_ids": True, "skip_special_tokens": False,
                "stop_token_ids": list(stop_ids or []), "ignore_eos": bool(ignore_eos)}
        if temperature > 0:
            body["top_k"] = self.top_k
            if seed is not None:
                body["seed"] = int(seed)
        t0 = time.perf_counter()
        answer = self._call("/v1/completions", body)
        seconds = time.perf_counter() - t0
        try:
            tokens = answer["choices"][0]["logprobs"]["tokens"]
            ids = [_token_id(t) for t in tokens]
        except (KeyError, IndexError, TypeError, ValueError):
            raise ServerError(f"The vLLM server at {self.url} answered plain decoding without token ids. "
                              + ANSWER_HINT) from None
        return ids, _usage(answer, 1, seconds)


def _error_text(response: httpx.Response) -> str:
    """One line of what a refusing server said: its JSON message, else the HTTP reason."""
    try:
        body = json.loads(response.text)
        msg = body.get("message") or body.get("error", {}).get("message") or body
    except Exception:  # noqa: BLE001 -- whatever it sent, a line of it is the detail
        msg = response.reason_phrase
    return str(msg).strip().splitlines()[0][:300] if str(msg).strip() else response.reason_phrase


def _token_id(key: str) -> int:
    """'token_id:123' (return_tokens_as_token_ids) → 123."""
    if not isinstance(key, str) or not key.startswith("token_id:"):
        raise ValueError(key)
    return int(key[len("token_id:"):])


def _top(entry: dict) -> dict[int, float]:
    out = {}
    for key, logprob in entry.items():
        value = float(logprob)
        if not math.isfinite(value) and value != -math.inf:
            raise ValueError(logprob)
        out[_token_id(key)] = value
    return out


def _usage(answer: dict, prompts: int, seconds: float) -> Usage:
    usage = answer.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return Usage(prompts, int(usage.get("prompt_tokens") or 0), int(details.get("cached_tokens") or 0), seconds)


def rows_to_logits(rows: list[dict[int, float]], vocab: int, device=None) -> torch.Tensor:
    """(len(rows), vocab) logits: each row's top-k log-probabilities, LOGIT_FLOOR elsewhere."""
    out = torch.full((len(rows), vocab), LOGIT_FLOOR, dtype=torch.float32)
    for i, row in enumerate(rows):
        ids = [t for t in row if 0 <= t < vocab]
        if len(ids) != len(row):
            raise ServerError(f"The vLLM server returned token ids outside this tokenizer's {vocab} ids: "
                              "the server and SpecViz are not using the same model's tokenizer.")
        out[i, ids] = torch.tensor([max(row[t], LOGIT_FLOOR) for t in ids])
    return out if device is None else out.to(device)


# -- the LoadedModel of a served target -----------------------------------------------------
class RemoteModel:
    """What `LoadedModel.model` holds for a served target: the server and the model's config (no
    weights here). Code that needs real layers (the head, layer skip) checks `LoadedModel.remote`."""

    def __init__(self, server: VllmServer, config):
        self.server, self.config = server, config


PROBE = "SpecViz checks that this tokenizer matches the server's: café, 1234, naïve — ok?"


def load_remote(spec: str, progress=None, resolve_tokenizer=None) -> LoadedModel:
    """The LoadedModel of a `vllm:` spec: connects, loads the tokenizer, checks it against the server.
    `resolve_tokenizer(name)` turns 'bundled' into a folder (the loader passes its own)."""
    from transformers import AutoConfig, AutoTokenizer

    url, tok_spec = parse_spec(spec)
    server = VllmServer(url)
    say(progress, f"Connecting to the vLLM server at {url}…")
    server.connect()
    source = tok_spec or server.root
    if resolve_tokenizer is not None:
        source = resolve_tokenizer(source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 -- any failure here must reach the user as advice
        raise ServerError(f"Could not load the tokenizer '{source}' for the vLLM target at {url} "
                          f"({type(e).__name__}). Name it after a '|': vllm:{url}|TOKENIZER, where TOKENIZER is "
                          "'bundled', a hub id or a folder holding the served model's tokenizer.") from None
    mine = tokenizer(PROBE, add_special_tokens=False)["input_ids"]
    theirs = server.tokenize(PROBE)
    if mine != theirs:
        raise ServerError(f"The tokenizer '{source}' does not match the one the server at {url} uses for "
                          f"'{server.model}' (they split a test sentence differently): name the served model's "
                          "own tokenizer after a '|'.")
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=False)
    except Exception:  # noqa: BLE001 -- a tokenizer-only folder: sizes come from the tokenizer
        config = None
    vocab = int(getattr(config, "vocab_size", 0) or len(tokenizer))
    vocab = max(vocab, len(tokenizer))
    eos = set()
    for value in (getattr(config, "eos_token_id", None), tokenizer.eos_token_id):
        eos.update(value if isinstance(value, (list, tuple)) else [value] if value is not None else [])
    loaded = LoadedModel(model=RemoteModel(server, config), tokenizer=tokenizer, name=spec.strip(),
                         device=torch.device("cpu"), dtype=torch.float32, vocab_size=vocab, eos_ids=eos,
                         max_positions=server.max_model_len, n_params=_params(config))
    server.top_k = min(server.top_k, vocab)  # asking for more than the vocabulary fails the server's engine
    loaded.remote = server
    say(progress, f"Connected to {server.model} at {url} (top-{server.top_k} log-probabilities per row)")
    return loaded


def _params(config) -> int:
    """About how many weights the served model has, from its config (for the draft's cost ratio)."""
    if config is None:
        return 0
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    d = getattr(text, "hidden_size", 0) or 0
    layers = getattr(text, "num_hidden_layers", 0) or 0
    inner = getattr(text, "intermediate_size", 4 * d) or 4 * d
    vocab = getattr(text, "vocab_size", 0) or 0
    return int(layers * (4 * d * d + 3 * d * inner) + vocab * d)
