"""The configuration column's values as one frozen object: compared to tell when a run must restart.

RunSettings is the decoding layer's DecodeSettings (specviz/decoding/settings.py, where the defaults and
checks live) plus what only the page has: the target, the Proposer picker's value (`proposer`), the
draft picker's value and the prompt. Its `method` is the engine's, as everywhere: the picker's
"draft" with the trained head is method "head". The page's input and API keyword for the Proposer
picker stay `method` (docs/GLOSSARY.md).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Any

from specviz.decoding.settings import DecodeSettings
from specviz.proposers import HEAD_DRAFT, layer_skip, resolve_draft
from specviz.served.remote import PREFIX as REMOTE_PREFIX
from specviz.ui.runtime.presets import (
    BUNDLED,
    DEFAULT_METHOD,
    MAX_NEW_DEFAULT,
    draft_choices,
    knobs_for,
    method_label,
    methods,
)

# Input names, in the order the layout wires them; the API takes them as keyword arguments.
BASE_INPUTS = ("target", "method", "draft", "k", "adaptive_k", "temperature", "top_p", "seed",
               "max_new_tokens", "chat", "prompt")


@dataclass(frozen=True)
class RunSettings(DecodeSettings):
    method: str = DEFAULT_METHOD  # the engine's: set from `proposer` and `draft`, never given
    max_new_tokens: int = MAX_NEW_DEFAULT
    target: str = BUNDLED
    draft: str | None = HEAD_DRAFT  # read only when method is "draft"; the bundled target's default
    prompt: str = ""
    share_prefill: bool = True  # a class on one example prompt prefills it once (decoding/prefills.py)
    share_passes: bool = True  # a class pressing Step together shares verify passes (decoding/targets.py)
    proposer: str = DEFAULT_METHOD  # the Proposer picker's value: "draft" covers a draft model and the head

    def __post_init__(self):
        object.__setattr__(self, "method", resolve_draft(self.proposer, self.draft)[0])
        super().__post_init__()

    @property
    def draft_spec(self) -> str | None:
        """The draft model to load, if any (the trained head is not loaded as a model)."""
        return resolve_draft(self.proposer, self.draft)[1]

    def decode(self) -> DecodeSettings:
        """What the Decoder takes: the DecodeSettings part of these settings (models excluded)."""
        return DecodeSettings(**{f.name: getattr(self, f.name) for f in dataclasses.fields(DecodeSettings)})

    def ar_key(self) -> tuple:
        """What the plain baseline depends on: the method, K and the knobs do not change it."""
        return (self.target, self.prompt, self.temperature, self.top_p, self.seed,
                self.max_new_tokens, self.chat)

    def describe(self) -> str:
        """A short, plain-text summary for status messages."""
        parts = [method_label(self.proposer)]
        if self.method == "hybrid" and self.target.startswith(REMOTE_PREFIX):
            parts.append("without the head, which a vLLM-served target cannot feed: lookup + LogitSpec")
        if self.method == "head":
            parts.append("draft: the trained draft head")
        elif self.proposer == "draft":
            parts.append(f"draft {self.draft}")
        parts += [f"K={self.k}" + (" (adaptive)" if self.adaptive_k else ""),
                  "greedy" if self.temperature == 0 else f"T={self.temperature:g}, top-p={self.top_p:g}"]
        return f"{self.target}: " + ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_layers(text: str | None) -> tuple[int, ...] | None:
    """The Layers knob: '0-9+20-29' (layer_skip.parse_layers' syntax) → its indices; blank → None (the
    proposer's default)."""
    if text is None or not str(text).strip():
        return None
    try:
        return tuple(layer_skip.parse_layers(text))
    except ValueError as e:
        raise ValueError(f"Layers: {e}.") from None


def _knob_value(knob, value):
    """The knob's value as the proposer takes it; None leaves the proposer's default."""
    if knob.kind == "layers":
        return parse_layers(value)
    if value is None:
        return None
    return {"int": lambda v: _whole(knob.label, v, 0), "float": float, "bool": bool}[knob.kind](value)


def _whole(name: str, value, default: int | None) -> int | None:
    """An int from a slider or number box; fractional or missing values get a clear message."""
    if value is None:
        return default
    if isinstance(value, float) and (math.isnan(value) or value != int(value)):
        raise ValueError(f"{name} must be a whole number, got {value!r}.")
    return int(value)


def from_inputs(values: dict[str, Any]) -> RunSettings:
    """Build RunSettings from the layout's input values (missing ones take their defaults)."""
    d = RunSettings()
    proposer = values.get("method") or d.proposer  # the page's input keeps the API's name
    offered = [name for _, name in methods()]
    if proposer not in offered:
        raise ValueError(f"Unknown method '{proposer}': choose one of {', '.join(offered)}.")
    knobs = tuple((k.name, v) for k in knobs_for(proposer)
                  if (v := _knob_value(k, values.get(k.key))) is not None)
    target = (values.get("target") or BUNDLED).strip() or BUNDLED
    draft = (values.get("draft") or "").strip() or None
    if proposer == "draft" and draft is None and (choices := draft_choices(target)):
        draft = choices[0][1]  # the family's default draft (the trained head for the bundled target)
    return RunSettings(
        target=target,
        proposer=proposer,
        draft=draft if proposer == "draft" else None,
        k=_whole("K", values.get("k"), None),  # None: the method's own default K
        adaptive_k=bool(values.get("adaptive_k")),
        temperature=float(values.get("temperature") if values.get("temperature") is not None else d.temperature),
        top_p=float(values.get("top_p") if values.get("top_p") is not None else d.top_p),
        seed=_whole("Seed", values.get("seed"), d.seed),
        max_new_tokens=_whole("Max new tokens", values.get("max_new_tokens"), d.max_new_tokens),
        chat=values.get("chat", True) is not False,
        prompt=values.get("prompt") or "",
        knobs=knobs,
    )
