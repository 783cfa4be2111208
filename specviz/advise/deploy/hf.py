"""The advisor's pick as HF generate (transformers 5.23) takes it. Prompt lookup's
`prompt_lookup_num_tokens` and `max_matching_ngram_size` go to `generate`; a draft's K does not:
`AssistedCandidateGenerator` reads `num_assistant_tokens`, its schedule and
`assistant_confidence_threshold` from the *draft's* generation_config, so they are set there (the
threshold at 0, or drafts stop early, at 0.4 by default, and K is not K). A draft from another family
is HF's universal assisted decoding, with both tokenizers given. HF runs assisted decoding at batch
size 1 only.
"""
from __future__ import annotations

from specviz.advise.deploy.common import Written, cross_family, kwargs, model_name
from specviz.advise.survey import Measured
from specviz.proposers import deploys_as
from specviz.proposers.method_spec import NGRAM
from specviz.proposers.prompt_lookup import MAX_NGRAM

ENGINE = "HF generate"
_HF = "transformers/generation/configuration_utils.py, GenerationConfig.__init__ (transformers 5.23.0 in .venv)"
_HF_DRAFT = (f"{_HF}; read from the draft's generation_config by AssistedCandidateGenerator.__init__, "
             "transformers/generation/candidate_generator.py")
_HF_UNIVERSAL = ("transformers/generation/utils.py, GenerationMixin._get_candidate_generator (5.23.0): with "
                 "`tokenizer` and `assistant_tokenizer` given, a draft with another tokenizer is universal assisted "
                 "decoding (AssistedCandidateGeneratorDifferentTokenizers greedy, "
                 "UniversalSpeculativeDecodingGenerator sampled, generation/candidate_generator.py)")
OPTIONS: dict[str, str] = {  # every name emitted, and where it was checked
    "prompt_lookup_num_tokens": f"{_HF}; generation/utils.py _get_candidate_generator",
    "max_matching_ngram_size": f"{_HF}; generation/utils.py _get_candidate_generator",
    "assistant_model": "transformers/generation/utils.py, GenerationMixin.generate's parameter (5.23.0)",
    "num_assistant_tokens": _HF_DRAFT,
    "num_assistant_tokens_schedule": f"{_HF_DRAFT}; 'constant' keeps K",
    "assistant_confidence_threshold": f"{_HF_DRAFT}; 0 adds no ConfidenceCriteria (generation/utils.py)",
    "tokenizer": _HF_UNIVERSAL,
    "assistant_tokenizer": _HF_UNIVERSAL,
}
SOURCE = f"{_HF}; transformers/generation/candidate_generator.py and utils.py (5.23.0)"


def write(m: Measured, k: int, target: str, sampled: bool) -> Written:
    model = model_name(target, "MODEL")
    lines = ["from transformers import AutoModelForCausalLM, AutoTokenizer",
             f"tok = AutoTokenizer.from_pretrained({model!r})",
             f"model = AutoModelForCausalLM.from_pretrained({model!r})"]
    ask = "inputs = tok(PROMPT, return_tensors='pt')  # one prompt: assisted decoding runs at batch size 1"
    if deploys_as(m.candidate.method) == NGRAM:  # prompt lookup; else a draft model
        options = {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": MAX_NGRAM}
        config = kwargs(options)
        lines += [ask, f"out = model.generate(**inputs, max_new_tokens=256, {config})"]
        return options, config, "\n".join(lines), ""
    draft_options = {"num_assistant_tokens": k, "num_assistant_tokens_schedule": "constant",
                     "assistant_confidence_threshold": 0.0}
    config = kwargs(draft_options)
    draft_name = model_name(m.candidate.draft, "DRAFT")
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
