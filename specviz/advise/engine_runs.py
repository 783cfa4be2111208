"""Running an engine check (advise/engine_check.py says what is predicted and measured): HF
`generate` in this process, and vLLM through two servers, one plain and one running the
configuration. Each returns an EngineCheck; a failure part-way is its `error`, with what was
measured before it kept.
"""
from __future__ import annotations

import statistics
import threading
import time
from contextlib import contextmanager
from typing import Callable

import torch

from specviz.advise.advice import Measured
from specviz.advise.engine_check import EngineCheck, finish, median_time, sizes_for
from specviz.decoding.served import served_plain
from specviz.measure.served_compare import rates, read_counters

Progress = Callable[[str], None]


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def per_drafting_cycle(m: Measured) -> list[float]:
    """The survey's acceptance by position over the cycles that drafted (as vLLM counts its own)."""
    drafted = m.reached[0] if m.reached else 0.0
    return [a / drafted if drafted else 0.0 for a in m.accepted]


# -- HF generate ------------------------------------------------------------------------------------
@contextmanager
def _watch_prompt_lookup(tally: dict):
    """Counts, while open, what transformers' prompt lookup drafted and had accepted per cycle."""
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator as Gen

    get, update = Gen.get_candidates, Gen.update_candidate_strategy

    def get_candidates(self, input_ids, *args, **kw):
        out = get(self, input_ids, *args, **kw)
        tally["drafted"].append(int(out[0].shape[-1] - input_ids.shape[-1]))
        return out

    def update_candidate_strategy(self, input_ids, scores, num_matches, *args, **kw):
        tally["accepted"].append(int(num_matches))
        return update(self, input_ids, scores, num_matches, *args, **kw)

    Gen.get_candidates, Gen.update_candidate_strategy = get_candidates, update_candidate_strategy
    try:
        yield tally
    finally:
        Gen.get_candidates, Gen.update_candidate_strategy = get, update


def hf_extra(model, context: list[int], sizes: list[int], repeats: int = 5) -> dict[int, float]:
    """Δ(n) for transformers' forward: n new tokens over a cached `context`, less one token's."""
    x = torch.tensor([context], device=model.device)
    times = {}
    with torch.inference_mode():
        cache = model(x, use_cache=True).past_key_values
        for n in sorted(set(sizes) | {1}):
            new = torch.tensor([context[-n:]], device=model.device)

            def once(n=n, new=new):
                model(new, past_key_values=cache, use_cache=True)
                cache.crop(-n)  # back to the context (transformers 5 crops by a negative count)
            once()  # the first call of a shape pays for its allocations
            times[n] = median_time(once, repeats)
    return {n: max(0.0, times[n] - times[1]) for n in times if n > 1}


def check_hf(m: Measured, k: int, target, prompts: list[str], config: dict, config_text: str, machine: str,
             max_new_tokens: int = 64, repeats: int = 3, temperature: float = 0.0, top_p: float = 1.0,
             progress: Progress = print) -> EngineCheck:
    """HF `generate` plain and with `config` (deploy/hf.py's keyword arguments) on `target.model`."""
    chk = EngineCheck("HF generate", m.candidate.label, k, config_text, machine, _now(), max_new_tokens=max_new_tokens)
    model = target.model
    common = dict(pad_token_id=next(iter(target.eos_ids), 0), eos_token_id=sorted(target.eos_ids) or None)
    if temperature > 0:
        common.update(do_sample=True, temperature=temperature, top_p=top_p, top_k=0)
    else:
        common.update(do_sample=False)

    def run(ids, n, **kw):
        x = torch.tensor([ids], device=model.device)
        with torch.inference_mode():
            return model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, **common, **kw)[0, len(ids):]

    plain_s = spec_s = 0.0
    tokens = spec_tokens = 0
    contexts: list[int] = []
    tally = {"drafted": [], "accepted": []}
    try:
        for i, prompt in enumerate(prompts):
            progress(f"HF generate: prompt {i + 1}/{len(prompts)}")
            ids = target.encode(prompt, True)
            torch.manual_seed(0)
            out = run(ids, max_new_tokens).tolist()
            contexts.append(len(ids) + len(out) // 2)
            prefill = median_time(lambda: run(ids, 1), repeats)
            plain = median_time(lambda: run(ids, max_new_tokens), repeats) - prefill
            with _watch_prompt_lookup(tally):
                torch.manual_seed(0)
                theirs = run(ids, max_new_tokens, **config).tolist()
            chk.same_text = chk.same_text and (temperature > 0 or theirs == out)
            spec = median_time(lambda: run(ids, max_new_tokens, **config), repeats) - prefill
            plain_s, spec_s = plain_s + plain, spec_s + spec
            tokens, spec_tokens = tokens + len(out) - 1, spec_tokens + len(theirs) - 1
            chk.prompts = i + 1
        progress("HF generate: timing its forward over 1…K+1 tokens")
        context = (target.encode(prompts[0], True) * 8)[:int(statistics.fmean(contexts))]
        chk.extra_s = hf_extra(model, context, sizes_for(k))
        chk.step_s = plain_s / tokens if tokens else 0.0
    except Exception as e:  # noqa: BLE001 -- a failed engine run is reported with what was measured
        chk.error = f"HF generate stopped at prompt {chk.prompts + 1}: {type(e).__name__}: {e}"
    drafted = [d for d in tally["drafted"] if d > 0]
    accepted = [a for d, a in zip(tally["drafted"], tally["accepted"]) if d > 0]
    chk.measured_marginal = [sum(a >= i for a in accepted) / len(drafted) if drafted else 0.0 for i in range(1, k + 1)]
    out = finish(chk, (tokens, plain_s), (spec_tokens, spec_s), m)
    out.predicted_marginal = per_drafting_cycle(m)[:k]
    return out


# -- vLLM ---------------------------------------------------------------------------------------------
def _at_once(fns: list[Callable[[], object]]) -> tuple[float, list]:
    """Run the calls together (one thread each, started at one moment): wall seconds and results."""
    results: list = [None] * len(fns)
    errors: list = []
    barrier = threading.Barrier(len(fns))

    def go(i, fn):
        barrier.wait()
        try:
            results[i] = fn()
        except Exception as e:  # noqa: BLE001 -- reported by the caller
            errors.append(e)
    threads = [threading.Thread(target=go, args=(i, fn)) for i, fn in enumerate(fns)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0, results


CALIBRATION = ("Count from one to sixty in words, separated by commas, and then count back down to one in "
               "the same way.")  # a prompt whose text repeats, so nearly every step drafts


def vllm_draft_step(spec, t1: float, concurrency: int = 1, max_tokens: int = 96, repeats: int = 3) -> float:
    """Δ_K: what a vLLM step that drafted costs beyond a plain step, from the configuration's own
    server on CALIBRATION (not a checked prompt): its counters give the steps that drafted (D) and
    the tokens they accepted (A), so a run of T new tokens took T − A steps, D of them drafting;
    the decode time less the plain steps' (t₁ each) over D is a drafting step's."""
    server = spec.remote
    ids = spec.encode(CALIBRATION, True)
    ask = lambda n: server.complete(ids, n, 0.0, 1.0, None, ignore_eos=True)  # noqa: E731
    ask(max_tokens)  # warm, and caches the prompt
    prefill = statistics.median(_at_once([lambda: ask(1)] * concurrency)[0] for _ in range(3))
    before = read_counters(server.metrics())
    walls, tokens = [], 0
    for _ in range(repeats):
        wall, outs = _at_once([lambda: ask(max_tokens)] * concurrency)
        walls.append(wall - prefill)
        tokens += sum(len(o[0]) - 1 for o in outs)  # each request's first token came from its prefill
    after = read_counters(server.metrics())
    if before is None or after is None:
        raise RuntimeError("the configuration's server reports no speculative-decoding counters")
    delta = after.minus(before)
    steps = (tokens - delta.accepted) / concurrency  # engine steps, each serving every request once
    drafting = delta.drafts / concurrency
    if drafting < 1:
        raise RuntimeError("vLLM drafted nothing on the calibration prompt, so its drafting step cannot be timed")
    return max(0.0, (sum(walls) - (steps - drafting) * t1) / drafting - t1)


def _groups(prompts: list[str], b: int) -> list[list[str]]:
    return [[prompts[(i + j) % len(prompts)] for j in range(b)] for i in range(0, len(prompts), b)]


def _timed_groups(server, prompts: list[str], b: int, repeats: int, kw: dict, progress: Progress, tally: list):
    """Each group of b prompts decoded b at once, `repeats` times: appends (median decode seconds,
    the runs) per group to `tally` as it goes (so a failure keeps what was measured). What the
    server spends once per request (HTTP, scheduling, the prefill of the cached prompt: the same
    request asking for one token) is taken out, as HF's prefill is, so both count decode steps."""
    def once(n: int) -> tuple[float, list]:
        wall, runs = _at_once([lambda p=p: served_plain(server, p, **{**kw, "max_new_tokens": n}) for p in group])
        return (runs[0].metrics["decode_s"] if b == 1 else wall), runs

    for i, group in enumerate(_groups(prompts, b)):
        progress(f"vLLM: prompt group {i + 1}/{-(-len(prompts) // b)}, {b} at once")
        timed = [once(kw["max_new_tokens"]) for _ in range(repeats)]
        per_request = statistics.median(once(2)[0] for _ in range(max(3, repeats)))
        tally.append((max(0.0, statistics.median(t for t, _ in timed) - per_request), timed[-1][1]))


def check_vllm(m: Measured, ks: dict[int, int], plain_server, spec_server, prompts: list[str], config_text: str,
               machine: str, max_new_tokens: int = 64, repeats: int = 2, temperature: float = 0.0,
               top_p: float = 1.0, progress: Progress = print) -> list[EngineCheck]:
    """A check per entry of `ks` (requests at once → the K the configuration drafts there).
    `plain_server()` and `spec_server()` are context managers giving the LoadedModel of a plain
    server and of one running the configuration; they run one after the other, never together
    (on a small machine an idle vLLM server's engine loop takes CPU from the other)."""
    checks = {b: EngineCheck("vLLM", m.candidate.label, k, config_text, machine, _now(), concurrency=b,
                             max_new_tokens=max_new_tokens) for b, k in ks.items()}
    kw = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=0)
    plain: dict[int, list] = {b: [] for b in ks}
    spec: dict[int, list] = {b: [] for b in ks}
    stage = "the plain server"
    try:
        with plain_server() as server:
            _at_once([lambda: served_plain(server, prompts[0], **kw)] * max(ks))  # its first requests warm it
            for b in ks:
                _timed_groups(server, prompts, b, repeats, kw, progress, plain[b])
                tokens = sum(len(r.token_ids) - 1 for _, runs in plain[b] for r in runs)
                checks[b].step_s = sum(t for t, _ in plain[b]) / (tokens / b) if tokens else 0.0
        stage = "the configuration's server"
        with spec_server() as server:
            _at_once([lambda: served_plain(server, prompts[0], **kw)] * max(ks))
            for b, chk in checks.items():
                before = read_counters(server.remote.metrics())
                _timed_groups(server, prompts, b, repeats, kw, progress, spec[b])
                after = read_counters(server.remote.metrics())
                if before is not None and after is not None:
                    delta = after.minus(before)
                    chk.measured_marginal = rates(delta.per_pos, delta.drafts)[0][:chk.k]
                chk.same_text = temperature > 0 or all(
                    a.token_ids == b_.token_ids for (_, xs), (_, ys) in zip(plain[b], spec[b]) for a, b_ in zip(xs, ys))
                progress(f"vLLM: timing its drafting step at K = {chk.k}, {b} request(s) at once, on its own prompt")
                chk.extra_s = {chk.k + 1: vllm_draft_step(server, chk.step_s, b)}
    except Exception as e:  # noqa: BLE001 -- a dead or stalled server: say so, keep what was measured
        why = f"{type(e).__name__}: {str(e)[:800]}"
        for b, chk in checks.items():
            if not chk.extra_s:
                done = len(plain[b] if stage == "the plain server" else spec[b])
                chk.error = (f"vLLM ({stage}) failed after {done} of {len(_groups(prompts, b))} prompt groups "
                             f"({why}); what was measured before is kept")
    out = []
    for b, chk in checks.items():
        done = min(len(plain[b]), len(spec[b]))
        chk.prompts = min(len(prompts), done * b)
        count = lambda xs: sum(len(r.token_ids) - 1 for _, runs in xs[:done] for r in runs)  # noqa: E731
        seconds = lambda xs: sum(t for t, _ in xs[:done])  # noqa: E731
        finish(chk, (count(plain[b]), seconds(plain[b])), (count(spec[b]), seconds(spec[b])), m)
        chk.predicted_marginal = per_drafting_cycle(m)[:chk.k]
        out.append(chk)
    return out
