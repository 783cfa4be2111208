"""What every engine's writer shares: a model named as the engine takes it, options as flags or keyword
arguments, whether a draft is from another family than the target, and the port its commands use."""
from __future__ import annotations

import shlex

from specviz.loading import gemma
from specviz.loading.bundled import BUNDLED_GGUF, BUNDLED_HUB_ID
from specviz.models.families import family_of

PORT = 8000

# An engine's writer: (Measured, K, the target's spec, sampled?) -> (options, config, command, note): the
# options as emitted (every name in its OPTIONS), as the engine takes them (JSON, keyword arguments or flags),
# what starts or uses the engine with them, and where its method differs from what SpecViz measured.
Written = tuple[dict, str, str, str]


def model_name(spec: str | None, placeholder: str, gguf: bool = False) -> str:
    """A model spec as an engine names it: an offline model's hub id (its GGUF file where the engine
    reads GGUF, `gguf`), a hub id or folder as given, a placeholder where the spec means nothing
    outside SpecViz."""
    spec = (spec or "").strip()
    if spec.startswith("vllm:"):  # a served target: the name after '|' is the model
        spec = spec.partition("|")[2]
    if spec == "bundled":
        return BUNDLED_GGUF if gguf else BUNDLED_HUB_ID
    if spec == gemma.SPEC:  # the GGUF it was joined from; on the hub, the model that GGUF was converted from
        return gemma.GGUF if gguf else gemma.HUB_ID
    if gguf and not spec.endswith(".gguf"):
        return f"{placeholder}.gguf"
    return placeholder if not spec or spec.startswith("tiny:") else spec


def flags(options: dict) -> str:
    return " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in options.items())


def kwargs(options: dict) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in options.items())


def cross_family(target: str | None, draft: str | None) -> bool:
    """Whether a draft is from another model family than the target, read off their names (as the
    pickers do, models/families.py): its tokenizer is then another, and an engine must draft across
    vocabularies. Unknown names count as the same family."""
    a, b = family_of(target or ""), family_of(draft or "")
    return a is not None and b is not None and a != b
