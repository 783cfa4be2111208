"""Proposers: one file each, behind `Proposer` (base.py), each declaring its `MethodSpec` (method_spec.py).
Register a new one with one line in REGISTRY; everything that lists methods reads them from here."""
from __future__ import annotations

import contextlib
import importlib

# method name → "module:Class" (a module of this package, or a dotted path for one elsewhere). The
# order is the pickers'. Modules load lazily so a proposer's imports cost nothing until its spec is read.
REGISTRY = {
    "draft": "draft_model:DraftModelProposer",
    "pld": "prompt_lookup:PromptLookupProposer",
    "logitspec": "logitspec:LogitSpecProposer",
    "layerskip": "layer_skip:LayerSkipProposer",
    "suffix": "suffix:SuffixProposer",
    "hybrid": "hybrid:HybridProposer",
    "head": "head:HeadProposer",
}

AR = "ar"  # plain decoding: the baseline, drafting nothing; not a proposer
# method "draft" with a draft from another family (a tokenizer of its own): not a method of its own
CROSS_DRAFT = "cross_draft:CrossDraftProposer"


def methods() -> tuple[str, ...]:
    """Every method `generate` takes, plain decoding first (read when asked, so a method registered
    later is among them)."""
    return (AR, *REGISTRY)


def _module(name: str):
    return importlib.import_module(name if "." in name else f"{__name__}.{name}")


def _load(entry: str):
    module, cls = entry.split(":")
    return getattr(_module(module), cls)


def proposer_class(method: str):
    """The Proposer class registered under `method`; unknown names get a list of valid ones."""
    if method not in REGISTRY:
        raise ValueError(f"unknown method {method!r}: choose one of {', '.join(methods())}")
    return _load(REGISTRY[method])


def spec(method: str):
    """The MethodSpec the proposer registered under `method` declares."""
    return proposer_class(method).spec


def specs() -> list:
    """Every registered method's MethodSpec, in the registry's order."""
    return [spec(name) for name in REGISTRY]


_SOURCES: dict = {}  # the registry's entries when last read → {kind: (SourceSpec, owning method)}


def _sources() -> dict:
    key = tuple(REGISTRY.items())
    if key not in _SOURCES:
        out: dict = {}
        # a method that joins others' drafts declares their kinds again: the kind's owner is the other
        for s in sorted(specs(), key=lambda s: bool(s.joins)):
            for source in s.sources:
                out.setdefault(source.kind, (source, s.name))
        _SOURCES.clear()
        _SOURCES[key] = out
    return _SOURCES[key]


def source_specs() -> dict:
    """Every kind of node a registered method drafts → its SourceSpec (word, colour, …)."""
    return {kind: source for kind, (source, _) in _sources().items()}


def owner(kind: str) -> str | None:
    """The method that drafts nodes of the source `kind` (None for a kind no method declares)."""
    found = _sources().get(kind)
    return None if found is None else found[1]


def retrieval(method: str) -> bool:
    """Whether the method drafts by retrieval alone (no source of its is a model's): its draft lengths
    come from its own knobs, K only caps them, and an engine takes its K as it is."""
    return method in REGISTRY and not any(source.by_model for source in spec(method).sources)


def joins(method: str) -> tuple[str, ...]:
    """The methods whose drafts the method's tree joins (the hybrid's parts); () for a single method."""
    return spec(method).joins if method in REGISTRY else ()


def joiners() -> tuple[str, ...]:
    """The methods that join others' drafts (the hybrid), in the registry's order."""
    return tuple(m for m in REGISTRY if joins(m))


def parts(learning: bool = False) -> tuple[str, ...]:
    """The methods the joiners are built from, in their order, once each; those that learn across runs
    (suffix) only when `learning`, since a measurement's repeats would teach them: pld, logitspec, head."""
    found = dict.fromkeys(p for m in joiners() for p in joins(m))
    return tuple(p for p in found if learning or not spec(p).learns)


def deploys_as(method: str) -> str | None:
    """What an engine runs the method as (spec.NGRAM or spec.DRAFT_MODEL), or None: SpecViz's own."""
    return spec(method).deploys_as if method in REGISTRY else None


def default_k(method) -> int:
    """The K a method gets when none is given (plain decoding 1; an unknown or ready-made proposer 8)."""
    name = method if isinstance(method, str) else getattr(method, "name", "")
    if name == AR:
        return 1
    return spec(name).default_k if name in REGISTRY else 8


def resolve_k(method, k: int | None) -> int:
    """`k`, or the method's default when it is None: the one place "no K given" is decided."""
    return default_k(method) if k is None else k


@contextlib.contextmanager
def unshared():
    """Within it, no method learns across runs: each run drafts from nothing an earlier one left
    (every store a spec names in `learns`), as a measurement's repeats and warm-ups must."""
    with contextlib.ExitStack() as stack:
        for module in dict.fromkeys(s.learns for s in specs() if s.learns):
            stack.enter_context(_module(module).unshared())
        yield


def remember(model, state) -> None:
    """Feed a finished run (a RunState) to the store its method learns in, if it learns across runs:
    the main process calls it where a worker's state comes back (on ZeroGPU the worker's store is lost)."""
    method = state.options.get("method")
    learns = spec(method).learns if method in REGISTRY else None
    if learns:
        _module(learns).remember(model, state)


# In a draft-model picker, this name stands for the project's trained draft head (method "head"):
# it drafts with its own q like any draft model, but it is not a model to load from a spec.
HEAD_DRAFT = "head"


def resolve_draft(method: str, draft: str | None) -> tuple[str, str | None]:
    """(engine method, draft spec to load) for a method and a draft picker's value."""
    if method == "draft" and draft is not None and draft.strip() == HEAD_DRAFT:
        return "head", None
    return method, draft if method == "draft" else None


def make_proposer(method: str, target, draft=None, **knobs):
    """Build the proposer registered under `method`; unknown names get a list of valid ones. A draft
    model whose tokenizer is not the target's (another family) gets the cross-family proposer."""
    if method == "draft" and draft is not None:
        from specviz.loading.loader import same_tokenizer

        if not same_tokenizer(target, draft):  # drafted through text
            return _load(CROSS_DRAFT).build(target, draft, **knobs)
    return proposer_class(method).build(target, draft, **knobs)
