"""`advise --check-on vllm,hf`: every deployable pick of a survey, written by deploy/, run on
the engines and compared with its prediction from the engine's own step costs (engine_check.py).

vLLM: a plain server (started here, or the one at `vllm_url`) and a second server started with
the pick's configuration, exactly as deploy/ wrote it (a draft model's name replaced by the
folder this machine holds it in, which the report shows). With `concurrency` B > 1, the second
server runs the survey's K-by-concurrency schedule instead (vLLM's own form of it), and the pick is
checked at one request and at B at once on it, so both the schedule and one point of it are
tried. A configuration the server refuses (vLLM's CPU build cannot run every method) is a check
with an error that quotes the server's log, not a crash. HF generate runs in this process on the
target's own model.

The checks go into the survey (`engine_checks`), so its file keeps them and the app replays them
without a model or a server.
"""
from __future__ import annotations

import json
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from specviz.advise import deploy
from specviz.advise.advice import Survey, ranked
from specviz.advise.engine_check import EngineCheck
from specviz.advise.engine_runs import check_hf, check_vllm
from specviz.proposers import deploys_as
from specviz.proposers.method_spec import NGRAM

ENGINES = ("vllm", "hf")


def parse_engines(text: str) -> list[str]:
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in ENGINES]
    if bad or not names:
        raise ValueError(f"--check-on takes {', '.join(ENGINES)} (comma-separated), not {text!r}")
    return names


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _picks(survey: Survey) -> list[tuple]:
    """(Measured, K, Deployment by engine) for each deployable candidate, best first."""
    by_label: dict[str, dict[str, deploy.Deployment]] = {}
    for d in deploy.deployments(survey):
        by_label.setdefault(d.candidate, {})[d.engine] = d
    return [(m, k, by_label[m.candidate.label]) for m, k, _ in ranked(survey) if m.candidate.label in by_label]


def run_checks(survey: Survey, engines: list[str], target, prompts: list[str], load: Callable[[str], object],
               vllm_url: str | None = None, concurrency: int = 1, max_new_tokens: int = 64, repeats: int = 2,
               progress: Callable[[str], None] = print) -> list[EngineCheck]:
    """Run the checks; `target` is the in-process LoadedModel (for HF), `load(spec)` loads a spec
    (for the vLLM servers' LoadedModels). Each check is added to survey.engine_checks as it ends."""
    from specviz.advise.advisor import machine

    where = machine()
    s = survey.settings
    common = dict(max_new_tokens=max_new_tokens, temperature=float(s.get("temperature") or 0.0),
                  top_p=float(s.get("top_p") or 1.0), progress=progress)
    out: list[EngineCheck] = []
    picks = _picks(survey)
    if not picks:
        progress("No deployable candidate in the survey (add pld or a draft to --candidates): nothing to check.")
    for m, k, written in picks:
        # HF's assisted decoding wants its own draft model: a prompt lookup pick is checked there
        if "hf" in engines and deploys_as(m.candidate.method) == NGRAM:
            d = written[deploy.HF]
            progress(f"checking {d.candidate} at K = {k} on HF generate")
            out.append(check_hf(m, k, target, prompts, dict(d.options), d.config, where, repeats=max(repeats, 3),
                                **common))
            survey.engine_checks.append(out[-1].to_dict())
        if "vllm" in engines:
            out += _on_vllm(survey, m, k, written[deploy.VLLM], target, prompts, load, vllm_url, concurrency,
                            repeats, where, common)
    return out


def _on_vllm(survey, m, k, d, target, prompts, load, vllm_url, concurrency, repeats, where, common) -> list:
    from specviz.loading.loader import local_source
    from specviz.served import vllm_serve

    progress = common["progress"]
    config = d.config
    if m.candidate.method == "draft" and m.candidate.draft:  # the draft as this machine has it (a folder)
        config = json.dumps({**json.loads(config), "model": local_source(m.candidate.draft)})
    schedule = deploy.concurrency_schedule(survey) if concurrency > 1 else None
    if schedule is not None and d.candidate == deploy.best_deployable(survey)[0].candidate.label:
        config = json.dumps(schedule)
    ks = {b: (k if b == 1 or schedule is None else _k_at(schedule, b, k)) for b in sorted({1, concurrency})}
    for b in [b for b, kb in ks.items() if kb == 0]:
        progress(f"the schedule turns speculation off at {b} requests at once: that point is not checked")
        del ks[b]
    name = target.name if not target.name.startswith("vllm:") else target.name.partition("|")[2] or "bundled"
    logs = Path(tempfile.mkdtemp(prefix="specviz-check-"))

    @contextmanager
    def server(extra: list[str] | None, log: str):
        if extra is None and vllm_url:
            yield load(f"vllm:{vllm_url}|{name}")
            return
        progress(f"starting vLLM on {name}{' with ' + config if extra else ''} (log: {logs / log})")
        served = vllm_serve.start(local_source(name), _free_port(), logs / log, extra=extra, timeout_s=600)
        try:
            yield load(f"vllm:{served.url}|{name}")
        finally:
            served.stop()

    checks = check_vllm(m, ks, lambda: server(None, "plain.log"),
                        lambda: server(["--speculative-config", config], "spec.log"), prompts, config, where,
                        repeats=repeats, **common)
    survey.engine_checks += [c.to_dict() for c in checks]
    return checks


def _k_at(schedule: dict, b: int, default: int) -> int:
    for lo, hi, k in schedule.get("num_speculative_tokens_per_batch_size", []):
        if lo <= b <= hi:
            return int(k)
    ranges = schedule.get("num_speculative_tokens_per_batch_size") or [[0, 0, default]]
    return int(ranges[-1][2])
