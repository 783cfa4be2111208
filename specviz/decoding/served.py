"""The AR baseline of a served target: plain decoding by the vLLM server itself, timed here.

The anchor for a remote run is the server's own decoding of the same prompt and settings, not a
loop of one-token requests from here (which would charge every token an HTTP round trip that
vLLM's users never pay). Two requests, timed apart as a local run is: the prompt with
`max_tokens=1` (the prefill, which chooses the first token), then the prompt and that token with
`max_tokens=N-1` (decoding; the server finds the prompt in its prefix cache). Sampling follows
the same target distribution as the speculative run: top-k, then temperature, then top-p.
"""
from __future__ import annotations

from specviz.decoding.settings import DecodeSettings
from specviz.decoding.trace import TARGET, RunTrace, summarize
from specviz.models.loaded import LoadedModel


def served_plain(target: LoadedModel, prompt, settings: DecodeSettings | None = None, **kw) -> RunTrace:
    """The RunTrace of the server's plain decoding of `prompt` (arguments as `generate`'s)."""
    server = target.remote
    if server is None:
        raise ValueError(f"'{target.name}' is not served by vLLM: its AR baseline runs in this process")
    settings = (settings or DecodeSettings.of(**{**kw, "method": "ar"})).replace(method="ar")
    prompt_ids = target.encode(prompt, settings.chat)
    n = int(settings.max_new_tokens)
    temperature = 0.0 if settings.temperature <= 0 else float(settings.temperature)
    stops = sorted(target.eos_ids)
    first, pre = server.complete(prompt_ids, 1, temperature, settings.top_p, settings.seed, stops)
    ids = list(first[:1])
    decode_s, rest = 0.0, None
    if n > 1 and ids and ids[-1] not in target.eos_ids:
        more, rest = server.complete(prompt_ids + ids, n - 1, temperature, settings.top_p,
                                     None if settings.seed is None else settings.seed + 1, stops)
        ids += more[: n - 1]
        decode_s = rest.seconds
    metrics = summarize([], len(ids), decode_s, pre.seconds)
    metrics.update(tokens_per_s=(len(ids) - 1) / decode_s if decode_s > 0 else 0.0, cycles=max(len(ids) - 1, 0),
                   mean_accepted_tokens=1.0 if len(ids) > 1 else 0.0,
                   served_by=server.url, served_top_k=server.top_k,
                   served_cached_tokens=(rest.cached_tokens if rest else 0),
                   served_prompt_tokens=pre.prompt_tokens + (rest.prompt_tokens if rest else 0))
    shown = dict(target=target.name, draft=None, **{k: v for k, v in settings.options().items() if k != "record"})
    return RunTrace(method="ar", settings=shown, prompt_ids=list(prompt_ids), token_ids=ids,
                    text=target.decode(ids), token_texts=[target.token_text(t) for t in ids],
                    origins=[TARGET] * len(ids), cycle_of=[-1] + list(range(len(ids) - 1)), cycles=[],
                    metrics=metrics, prefill_s=pre.seconds)
