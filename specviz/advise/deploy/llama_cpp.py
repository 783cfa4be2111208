"""The advisor's pick as llama.cpp's llama-server takes it. `--spec-type ngram-simple` copies the tokens
after the latest match of one n-gram size (SpecViz's pld backs off from MAX_NGRAM to MIN_NGRAM); `-md`
is a draft model. Newer llama.cpp also spells the draft options `--spec-draft-*` (not checked in its
code here). It reads GGUF files, so models are named by theirs, and it has no per-concurrency option.
"""
from __future__ import annotations

import shlex

from specviz.advise.deploy.common import PORT, Written, cross_family, flags, model_name
from specviz.advise.survey import Measured
from specviz.proposers import deploys_as
from specviz.proposers.method_spec import NGRAM
from specviz.proposers.prompt_lookup import MAX_NGRAM, MIN_NGRAM

ENGINE = "llama.cpp"
_LC = "common/arg.cpp, llama-server options (ggml-org/llama.cpp 145b6280d6aa1890e22457143dad0badb3fd6820)"
_LC_DOC = "docs/speculative.md (ggml-org/llama.cpp 067318e633f77bbddc60f9eedc2a20142509f81d)"
OPTIONS: dict[str, str] = {  # every name emitted, and where it was checked
    "-md": f"{_LC}: --model-draft",
    "--draft-max": f"{_LC}: also --draft, --draft-n",
    "--draft-p-min": f"{_LC}: drafting stops below this probability",
    "--spec-type": f"{_LC_DOC}: ngram-simple",
    "--spec-ngram-size-n": _LC_DOC,
    "--spec-ngram-size-m": _LC_DOC,
}
SOURCE = f"{_LC}; {_LC_DOC}"
CROSS_NOTE = "llama.cpp's -md expects a draft whose vocabulary matches the target's; another family's is refused."


def write(m: Measured, k: int, target: str, sampled: bool) -> Written:
    if deploys_as(m.candidate.method) == NGRAM:  # prompt lookup; else a draft model
        options = {"--spec-type": "ngram-simple", "--spec-ngram-size-n": MAX_NGRAM, "--spec-ngram-size-m": k,
                   "--draft-max": k}
        note = (f"llama.cpp's ngram-simple matches one n-gram size ({MAX_NGRAM}); SpecViz's pld falls back to "
                f"shorter ones down to {MIN_NGRAM}, so it drafts more often than this will.")
    else:
        options = {"-md": model_name(m.candidate.draft, "DRAFT", gguf=True), "--draft-max": k, "--draft-p-min": 0.0}
        note = CROSS_NOTE if cross_family(target, m.candidate.draft) else (
            "p-min 0 drafts all K tokens as measured; llama.cpp drafts greedily"
            + (", while the survey sampled its drafts (T > 0), so acceptance may differ." if sampled else "."))
    config = flags(options)
    model = shlex.quote(model_name(target, "MODEL", gguf=True))
    return options, config, f"llama-server -m {model} --port {PORT} {config}", note
