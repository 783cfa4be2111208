"""What a method is, as data: each proposer class declares one `MethodSpec`, and every list of methods
(the pickers, the CLI's choices, the tree's words and colours, the model of speed's grouping, the
deploy writers, the measurements' unshared runs) reads it through the registry (`proposers/__init__.py`).

Plain dataclasses and strings: no torch, no model, so reading a spec costs its module's import only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PER_CALL = "call"  # each draft call runs a model, a call a level: K is chosen before drafting, and costs K·c
PER_CYCLE = "cycle"  # one lookup a cycle, whatever K (retrieval, and a tree whose model part is priced apart)
NGRAM, DRAFT_MODEL = "ngram", "draft model"  # what an engine has: prompt lookup by n-gram, or a draft model


@dataclass(frozen=True)
class Knob:
    """One option of a method the page shows while that method is chosen (a keyword of its `build`).

    A default of None is read from the proposer's own signature, so the page never disagrees with the
    engine about what a blank setting means."""
    name: str
    label: str
    widget: str  # "int" or "float" (a slider over minimum…maximum by step), "bool" (a checkbox),
    #              "layers" (index ranges as text)
    minimum: float = 0
    maximum: float = 0
    step: float = 1
    info: str = ""
    default: Any = None


@dataclass(frozen=True)
class SourceSpec:
    """One kind of node a method drafts: the `kind` its nodes carry (tree.Source.kind, a trace's
    NodeTrace.source), the `word` the page names it by, the `colour` of its outline in a tree that mixes
    sources (None: the node's status colour, for a source that drafts alone), whether a model drafted
    it (`by_model`: a draft call a level, as the model of speed counts them), and for a retrieved node
    the text it was `found_in`, in words ("" when it is not said)."""
    kind: str
    word: str
    colour: str | None = None
    by_model: bool = False
    found_in: str = ""


@dataclass(frozen=True)
class MethodSpec:
    """A method's identity in one place.

    name: what `generate(method=…)`, the CLI and a trace take; label and help: the pickers' label and
    what it does, in a few words after its label ("drafts …"); default_k: the most a cycle drafts
    when no K is given; knobs: the page's options; sources: the kinds of node it drafts, each with
    its word and colour; paid: PER_CALL or PER_CYCLE; learns: the proposers' module whose
    `unshared()` and `remember(model, state)` hold what it learns across runs (measurements run it
    unshared, and the app feeds that store), or None; deploys_as: what an engine runs it as (NGRAM or
    DRAFT_MODEL: the writers in advise/deploy/ write each engine's configuration for it), or None;
    needs_draft: a draft model is picked for it; joins: the methods whose drafts its tree joins;
    offered_as_draft: reached through the draft picker ("draft: head") rather than as a method."""
    name: str
    label: str
    help: str
    default_k: int
    knobs: tuple[Knob, ...] = ()
    sources: tuple[SourceSpec, ...] = ()
    paid: str = PER_CYCLE
    learns: str | None = None
    deploys_as: str | None = None
    needs_draft: bool = False
    joins: tuple[str, ...] = ()
    offered_as_draft: bool = False

    def __post_init__(self):
        if self.paid not in (PER_CALL, PER_CYCLE):
            raise ValueError(f"method {self.name!r}: paid is {PER_CALL!r} or {PER_CYCLE!r}, not {self.paid!r}")
        if self.deploys_as not in (None, NGRAM, DRAFT_MODEL):
            raise ValueError(f"method {self.name!r}: deploys_as is {NGRAM!r}, {DRAFT_MODEL!r} or None")
        for knob in self.knobs:
            if knob.widget not in ("int", "float", "bool", "layers"):
                raise ValueError(f"method {self.name!r}: knob {knob.name!r} has no widget {knob.widget!r}")
