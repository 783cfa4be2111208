"""What the configuration column offers: model presets, methods and each method's own knobs."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

from specviz.loading import gemma
from specviz.proposers import HEAD_DRAFT, REGISTRY, default_k, proposer_class, spec, specs
from specviz.ui.runtime.limits import Limits

BUNDLED = "bundled"

GEMMA = gemma.SPEC
GEMMA_LABEL = gemma.LABEL
# Offered where `bash scripts/install.sh models` installed it; typed where it is not, the loader's
# message names that command.
_OFFLINE_GEMMA = [(GEMMA_LABEL, GEMMA)] if gemma.installed() else []

# (label, load spec). The offline models come first: they are the ones that work without the hub.
TARGETS = [
    ("bundled SmolLM2-135M (offline)", BUNDLED),
    *_OFFLINE_GEMMA,
    ("SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct"),
    ("SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-1.7B-Instruct"),
    ("Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"),
    ("Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
    ("Gemma 3 1B (instruction-tuned)", "google/gemma-3-1b-it"),
    ("GPT-2 large", "openai-community/gpt2-large"),
    ("GPT-2 XL", "openai-community/gpt2-xl"),
]

# Drafts for a family of targets: (substrings of the target spec, drafts), those that share its
# tokenizer, and for Gemma 3 270M offline also SmolLM2, a draft from another family (drafted through
# text, proposers/cross_draft.py);
# the first matching family wins and its first draft is the default. For the bundled target the
# default is the project's trained draft head (docs/HEAD.md): a real, cheap draft with its own q,
# offline. The bundled model is also its own draft: a perfect draft, to see what α = 1 looks like.
_SMOLLM2_DRAFTS = [("bundled SmolLM2-135M (offline)", BUNDLED),
                   ("SmolLM2-135M-Instruct (hub)", "HuggingFaceTB/SmolLM2-135M-Instruct"),
                   ("SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct")]
BUNDLED_DRAFTS = [("SpecViz draft head (trained, offline)", HEAD_DRAFT), *_SMOLLM2_DRAFTS]  # exact spec only
DRAFT_FAMILIES = [
    (("bundled", "smollm2"), _SMOLLM2_DRAFTS),
    (("qwen2.5",), [("Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct")]),
    ((GEMMA,), [*_OFFLINE_GEMMA, ("Gemma 3 270M (hub, base)", gemma.HUB_ID),
                ("bundled SmolLM2-135M (offline; another family, drafted through text)", BUNDLED)]),
    (("gemma-3",), [*_OFFLINE_GEMMA, ("Gemma 3 270M (instruction-tuned)", "google/gemma-3-270m-it")]),
    (("gpt2",), [("DistilGPT-2", "distilbert/distilgpt2"), ("GPT-2", "openai-community/gpt2")]),
]

def methods() -> list[tuple[str, str]]:
    """The Proposer picker's choices, (label, engine method name), from the registry: every method but
    one reached through the draft picker (the head: "Draft model" with the draft "head"). "ar" is not
    offered: it is the baseline on the right."""
    return [(s.label, s.name) for s in specs() if not s.offered_as_draft]


def method_label(method: str) -> str:
    """A method's label in the pickers (its spec's), or its name where no method has it."""
    return spec(method).label if method in REGISTRY else method


# The hybrid: prompt lookup, LogitSpec's candidates and (on the bundled target) the trained head's
# chain in one tree, cut by the planner. Why it is the default, measured on the app's examples at
# the app's settings: docs/bench/2026-11-30.md, "becomes the app's default".
# Picking "Draft model" instead gives classic draft → verify, with the trained head first.
DEFAULT_METHOD = "hybrid"

# Ranges of the sliders follow the server's limits (SPECVIZ_MAX_K, SPECVIZ_MAX_NEW_TOKENS).
_LIMITS = Limits.from_env()
K_RANGE = (1, _LIMITS.max_k)


def k_default(method: str) -> int:
    """The method's own default K (its spec's), within the server's limit."""
    return min(default_k(method), _LIMITS.max_k)


TEMPERATURE_RANGE = (0.0, 2.0)
TOP_P_RANGE = (0.05, 1.0)  # top-p must stay above 0: an empty nucleus has nothing to sample
MAX_NEW_RANGE, MAX_NEW_DEFAULT = (1, _LIMITS.max_new_tokens), 64


@dataclass(frozen=True)
class Knob:
    """One option a method passes to its proposer; shown only while that method is chosen.

    A default of None is read from the proposer's own signature, so the page never disagrees
    with the engine about what a blank setting means.
    """
    method: str
    name: str  # keyword argument of the proposer's build()
    label: str
    kind: str  # "int" or "float" (sliders), "bool" (a checkbox), "layers" (index ranges as text)
    minimum: float = 0
    maximum: float = 0
    step: float = 1
    info: str = ""
    default: Any = None

    @property
    def key(self) -> str:
        """Unique name of the input, also its name in the API: method and knob."""
        return f"{self.method}_{self.name}"

    def initial(self) -> Any:
        if self.default is not None or self.kind == "layers":
            return self.default
        return proposer_default(self.method, self.name)


def knobs() -> list[Knob]:
    """Every method's page options, as its spec declares them (a method's, in the registry's order)."""
    return [Knob(s.name, k.name, k.label, k.widget, k.minimum, k.maximum, k.step, k.info, k.default)
            for s in specs() for k in s.knobs]


def proposer_default(method: str, name: str) -> Any:
    """The default of `name` in the proposer's constructor (None when it has none)."""
    param = inspect.signature(proposer_class(method).__init__).parameters.get(name)
    return None if param is None or param.default is inspect.Parameter.empty else param.default


def knobs_for(method: str) -> list[Knob]:
    return [k for k in knobs() if k.method == method]


def draft_choices(target: str | None) -> list[tuple[str, str]]:
    """Draft presets for the target (its family's; see DRAFT_FAMILIES); empty when the family is unknown."""
    if (target or "").strip() == BUNDLED:  # the head fits this one model, not every name containing it
        return list(BUNDLED_DRAFTS)
    spec = (target or "").lower()
    for needles, drafts in DRAFT_FAMILIES:
        if any(n in spec for n in needles):
            return list(drafts)
    return []
