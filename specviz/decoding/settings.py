"""How one run decodes, as one frozen value: `DecodeSettings`.

Every caller describes a run with it: `Decoder` and `generate` (their keyword arguments are its
fields), the Compare tab's rows (comparison.Shared holds what the rows share, each row changes
the method, K and temperature), and the app's configuration column (ui/settings.RunSettings adds
the target, the draft picker's value and the prompt to it). Defaults and checks live here only.

Decoding-layer code: no models, no UI libraries.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from specviz.drafting.sampling import check_settings, is_greedy
from specviz.proposers import resolve_k

MAX_K = 64  # deepest draft accepted: beyond this a verify pass costs more than it can win


@dataclass(frozen=True)
class DecodeSettings:
    """One run's decoding settings. Building one checks it, so a value that exists is usable.

    `k=None` takes the method's default (proposers.DEFAULT_K). Options that belong to one
    proposer (its knobs, e.g. LogitSpec's `top_m`) sit in `knobs` as sorted (name, value) pairs;
    `of(**kw)` sorts any keyword that is not a field into them.
    """
    # the public contract's default (specviz.generate, README "Public API"); the app starts on the
    # hybrid, its own choice, in ui/presets.DEFAULT_METHOD
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
    # (targets.BatchedTarget), and run model drafts' steps (the head, a draft model) with theirs
    # too (ProposeContext.together): the app's sessions do; timing runs pass alone
    batch_verify: bool = False
    knobs: tuple[tuple[str, Any], ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "k", resolve_k(self.method, self.k))
        knobs = self.knobs.items() if isinstance(self.knobs, dict) else self.knobs
        object.__setattr__(self, "knobs", tuple(sorted((str(n), v) for n, v in knobs)))
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
        """A copy with `changes`; a changed method without a K gets that method's default K."""
        if "method" in changes and "k" not in changes and changes["method"] != self.method:
            changes["k"] = None
        fields, knobs = self._split(changes, self.knobs)
        return dataclasses.replace(self, **fields, knobs=knobs)

    @property
    def greedy(self) -> bool:
        return is_greedy(self.temperature)

    def options(self) -> dict[str, Any]:
        """Every setting as one flat dict, knobs included: what `DecodeSettings.of` takes back."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "knobs"}
        return {**d, **dict(self.knobs)}


def check_k(k, max_new_tokens) -> None:
    """Raise ValueError with an actionable message for a draft length or run length no run can use."""
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise ValueError(f"K (draft length) must be a whole number from 1 to {MAX_K}, got {k!r}")
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a whole number ≥ 1, got {max_new_tokens!r}")
