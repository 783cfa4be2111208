"""The advisor's pick as SGLang's server takes it. `NGRAM` is its own method (a trie of n-grams shared
by all requests, drafted as a tree), so prompt lookup's line is the nearest form, as a chain, not the
method measured; `STANDALONE` is a draft model. Its draft-token count includes the last verified token
(K + 1 for a chain of K). Its `--speculative-adaptive` follows acceptance rather than concurrency, so
it gets no K by concurrency.
"""
from __future__ import annotations

import shlex

from specviz.advise.deploy.common import PORT, Written, cross_family, flags, model_name
from specviz.advise.survey import Measured
from specviz.proposers import deploys_as
from specviz.proposers.method_spec import NGRAM

ENGINE = "SGLang"
_SG = "python/sglang/srt/server_args.py, ServerArgs (sgl-project/sglang 001067fffe33427bee0ed2f007fb7551a1d76b44)"
_SG_HOOK = "python/sglang/srt/arg_groups/speculative_hook.py (sglang 004c82e07d876f6e4a0ad6e15325706b0f478f1a)"
OPTIONS: dict[str, str] = {  # every name emitted, and where it was checked
    "--speculative-algorithm": f"{_SG}: builtins include STANDALONE and NGRAM",
    "--speculative-draft-model-path": _SG,
    "--speculative-num-steps": _SG,
    "--speculative-eagle-topk": _SG,
    "--speculative-num-draft-tokens": (
        f"{_SG}; {_SG_HOOK}: num_steps + 1 at topk 1; for NGRAM the last token is the tree's root, "
        "python/sglang/srt/speculative/cpp_ngram/trie.cpp (sglang 0d1d60f59addaaf3f037b47417f82b961c5b2dad)"),
    "--speculative-ngram-max-bfs-breadth": f"{_SG}; {_SG_HOOK} sets topk to it for NGRAM",
}
SOURCE = f"{_SG}; {_SG_HOOK}"
CROSS_NOTE = "SGLang's STANDALONE draft shares the target's vocabulary; a draft from another family is not taken."


def write(m: Measured, k: int, target: str, sampled: bool) -> Written:
    if deploys_as(m.candidate.method) == NGRAM:  # prompt lookup; else a draft model
        options = {"--speculative-algorithm": "NGRAM", "--speculative-num-draft-tokens": k + 1,
                   "--speculative-ngram-max-bfs-breadth": 1}
        note = ("SGLang's NGRAM drafts from a trie of n-grams that all requests share, not from this request's "
                "own text alone; breadth 1 keeps its drafts chains of K as measured, and the speedup may differ.")
    else:
        options = {"--speculative-algorithm": "STANDALONE",
                   "--speculative-draft-model-path": model_name(m.candidate.draft, "DRAFT"),
                   "--speculative-num-steps": k, "--speculative-eagle-topk": 1, "--speculative-num-draft-tokens": k + 1}
        note = CROSS_NOTE if cross_family(target, m.candidate.draft) else ""
    config = flags(options)
    model = shlex.quote(model_name(target, "MODEL"))
    return options, config, f"python -m sglang.launch_server --model-path {model} --port {PORT} {config}", note
