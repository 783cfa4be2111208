"""How one run decodes, as one frozen value: `DecodeSettings`.

Every caller describes a run with it: `Decoder` and `generate` (their keyword arguments are its
fields), the Compare tab's rows (comparison.Shared holds what the rows share, each row changes
the method, K and temperature), and the app's configuration column (ui/runtime/settings.RunSettings adds
the target, the draft picker's value and the prompt to it). Defaults and checks live here only.

Decoding-layer code: no models, no UI libraries.
"""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any

from specviz.drafting.sampling import check_settings, is_greedy
from specviz.proposers import REGISTRY, proposer_class, resolve_k
from specviz.proposers.base import Proposer

MAX_K = 64  # deepest draft accepted: beyond this a verify pass costs more than it can win


@dataclass(frozen=True)
class DecodeSettings:
    """One run's decoding settings. Building one checks it, so a value that exists is usable.

    `k=None` takes the method's default (proposers.default_k, from its spec). Options that belong to one
    proposer (its knobs, e.g. LogitSpec's `top_k`) sit in `knobs` as sorted (name, value) pairs;
    `of(**kw)` sorts any keyword that is not a field into them, and a name that is neither a field
    nor one of the method's knobs is an error that names the nearest valid one.
    """
    # the public contract's default (specviz.generate, docs/API.md); the app starts on the
    # hybrid, its own choice, in ui/runtime/presets.DEFAULT_METHOD
    method: str = "logitspec"
    k: int | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_new_tokens: int = 128
    chat: bool = True
    adaptive_k: bool = False
    record: bool = True  # keep per-cycle traces (False for timing runs)
    plan: bool = True  # cost-aware drafting (planner.py); False verifies every offered node
    # start from a copy of another run's prefill of the same prompt (prefills.py): the app's
    # sessions do; timing runs (bench, Compare) prefill for themselves, as HF generate does
    share_prefill: bool = False
    # verify with other runs on the same model waiting at the same moment, in one pass
    # (targets.BatchedTarget), and run model drafts' calls (the head, a draft model) with theirs
    # too (ProposeContext.share_passes): the app's sessions do; timing runs pass alone
    share_passes: bool = False
    knobs: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "k", resolve_k(self.method, self.k))
        knobs = self.knobs.items() if isinstance(self.knobs, dict) else self.knobs
        object.__setattr__(self, "knobs", tuple(sorted((str(n), v) for n, v in knobs)))
        check_knobs(self.method, dict(self.knobs))
        check_k(self.k, self.max_new_tokens)
        check_settings(self.temperature, self.top_p)

    @classmethod
    def _split(cls, kw: dict, knobs=()) -> tuple[dict, tuple]:
        """(fields, knobs): `kw`'s fields by name; its `knobs` and every other keyword over `knobs`."""
        names = {f.name for f in dataclasses.fields(cls)}
        merged = {**dict(knobs), **dict(kw.get("knobs", ())), **{n: v for n, v in kw.items() if n not in names}}
        return {n: v for n, v in kw.items() if n in names and n != "knobs"}, tuple(merged.items())

    @classmethod
    def of(cls, **kw) -> "DecodeSettings":
        """From keyword arguments: fields by name, anything else is a proposer knob."""
        fields, knobs = cls._split(kw)
        return cls(**fields, knobs=knobs)

    def replace(self, **changes) -> "DecodeSettings":
        """A copy with `changes`. A changed method gets that method's default K unless `k` is
        given, and keeps only the knobs it takes (an AR baseline drops LogitSpec's)."""
        kept = self.knobs
        if "method" in changes and changes["method"] != self.method:
            if "k" not in changes:
                changes["k"] = None
            takes = knobs_of(changes["method"])
            kept = tuple((n, v) for n, v in self.knobs if takes is None or n in takes)
        fields, knobs = self._split(changes, kept)
        return dataclasses.replace(self, **fields, knobs=knobs)

    @property
    def greedy(self) -> bool:
        return is_greedy(self.temperature)

    def options(self) -> dict[str, Any]:
        """Every setting as one flat dict, knobs included: what `DecodeSettings.of` takes back."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "knobs"}
        return {**d, **dict(self.knobs)}


def resolve(settings: DecodeSettings | None, proposer, kw: dict) -> DecodeSettings:
    """A Decoder's settings: `settings` changed by the keywords, or the keywords alone; a ready-made
    proposer's name is the method."""
    if isinstance(kw.get("method"), Proposer):
        raise TypeError("method= names a method; pass a ready-made Proposer as proposer=")
    if proposer is not None:
        kw["method"] = proposer.name
    if settings is None:
        return DecodeSettings.of(**kw)
    return settings.replace(**kw) if kw else settings


def knobs_of(method) -> tuple[str, ...] | None:
    """The knobs `method` takes: none for plain decoding, the proposer's KNOBS for a registered
    method, None for a name that is neither (resolve_k refuses it with the list of methods)."""
    if method == "ar":
        return ()
    if isinstance(method, str) and method in REGISTRY:
        return proposer_class(method).KNOBS
    return None


def check_knobs(method, knobs: dict) -> None:
    """Raise ValueError for a keyword that is neither a setting nor one of `method`'s knobs, with
    the nearest valid name: `generate(..., method="ar", max_new_token=5)` is a typo, not a knob."""
    takes = knobs_of(method)
    if takes is None or not (unknown := sorted(set(knobs) - set(takes))):
        return
    settings = [f.name for f in dataclasses.fields(DecodeSettings) if f.name != "knobs"]
    name = unknown[0]
    near = difflib.get_close_matches(name, [*settings, *takes], n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    options = f"method {method!r} takes {', '.join(takes)}" if takes else f"method {method!r} takes no options"
    raise ValueError(f"unknown setting {name!r}: {hint}The settings are {', '.join(settings)}; {options}.")


def check_k(k, max_new_tokens) -> None:
    """Raise ValueError with an actionable message for a draft length or run length no run can use."""
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValueError(f"K (draft length) must be a whole number from 1 to {MAX_K}, got {k!r}")
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a whole number ≥ 1, got {max_new_tokens!r}")
