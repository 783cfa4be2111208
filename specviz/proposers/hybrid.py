"""Hybrid: prompt lookup, LogitSpec's next-next candidates and the draft head's drafts in one tree
(the head's chain under sampling, its small tree of top choices under greedy decoding: head.py).

Retrieval branches (logitspec.py: the root's own continuation, which is prompt lookup, then one
branch per candidate from the last logits) are point masses, q = None. The head's chain carries
the head's own q for each token. Every node keeps its true q, so verify.py's recursive rule over
siblings stays exact: a head node is a draw from its q, independent of its retrieval siblings,
and under sampling is never merged into one of them even when the tokens agree. The planner (planner.py) then
sends the nodes that pay; it chooses the head's depth before the head drafts, from its record.

Suffix decoding (suffix.py) adds its tree too: matches over the run's own text and over earlier
runs on the same target and prompt (a class), each node keeping its SUFFIX_* source. Only what
retrieval did not already offer is added (`merge`: a suffix node that repeats a retrieval node is that
node, under sampling too, as both are point masses), so a long suffix match continues under
retrieval's shorter one; the planner sends it when its record says it pays. `suffix=False` leaves it out.

With `gate=True` each source is also *computed* only while it pays (gate.py): with a planner, prompt lookup (branch
0) is drafted first, and where it already offers a long match, or a source's recent drafts bought
no accepted token, the candidates, suffix decoding and the head's calls are skipped; `skipped`
says which and why, for the trace. By default (gate off: it still cost accepted tokens on some
Spec-Bench categories, docs/BENCHMARKS.md), and without a planner, every source is computed.

Without the trained head (any target but the bundled one) the tree is LogitSpec's (and suffix's).
"""
from __future__ import annotations

import dataclasses

from specviz.drafting.tree import DraftTree, merge
from specviz.loading.loader import ModelLoadError
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.gate import CANDIDATE, HEAD, SUFFIX, Gate, long_match
from specviz.proposers.head import HeadProposer
from specviz.proposers.logitspec import LogitSpecProposer
from specviz.proposers.method_spec import MethodSpec
from specviz.proposers.prompt_lookup import PromptLookupProposer
from specviz.proposers.suffix import SuffixProposer

HEAD_K = 3  # the head's depth when no planner chooses it: its acceptance falls fast with depth


class HybridProposer(Proposer):
    spec = MethodSpec(
        "hybrid", "Hybrid (lookup + LogitSpec + suffix + head)",
        "joins prompt lookup, LogitSpec, suffix decoding and the draft head in one tree", default_k=16,
        sources=LogitSpecProposer.spec.sources + SuffixProposer.spec.sources + HeadProposer.spec.sources,
        learns=SuffixProposer.spec.learns,  # suffix decoding's store of earlier runs
        joins=tuple(p.spec.name for p in (PromptLookupProposer, LogitSpecProposer, SuffixProposer, HeadProposer)))
    # the retrieval part's, and the head's greedy tree (head.py: children per node, nodes grown per depth)
    # head_path: another trained head file (e.g. two heads side by side in one benchmark run)
    # suffix: add suffix decoding's tree (suffix.py)
    # gate: skip sources that do not pay (gate.py). Off by default: measured on Spec-Bench questions it
    # still cost accepted tokens on a category (docs/BENCHMARKS.md, drafting priced by what it buys)
    # corpus: suffix decoding also drafts from the shipped answers of the bundled model (corpus.py). Off by
    # default here: the head learnt from answers to the same prompts, and beside it the corpus did not raise
    # τ on Spec-Bench (suffix alone gains: docs/BENCHMARKS.md, "The answer corpus")
    # with_head: draft with the trained head (with_head=0: retrieval and suffix decoding alone, to see what it adds)
    KNOBS = LogitSpecProposer.KNOBS + ("head_width", "head_beam", "head_path", "suffix", "gate", "corpus", "with_head")

    def __init__(self, retrieval: LogitSpecProposer, head: HeadProposer | None,
                 suffix: SuffixProposer | None = None, gate: bool = False):
        self.retrieval, self.head, self.suffix = retrieval, head, suffix
        self.gated = bool(gate)
        self.call_cost = head.call_cost if head is not None else 0.0  # what the planner's K costs
        sources = (CANDIDATE,) + ((SUFFIX,) if suffix is not None else ()) + ((HEAD,) if head is not None else ())
        self.gate = Gate(sources, self.call_cost * HEAD_K)  # the head priced at its default depth
        self.skipped: tuple[tuple[str, str], ...] = ()
        self.needs_hidden = head is not None

    @classmethod
    def build(cls, target, draft=None, head_width: int | None = None, head_beam: int | None = None,
              head_path: str | None = None, suffix: bool = True, gate: bool = False, corpus: bool = False,
              with_head: bool = True, **knobs):
        if draft is not None:
            raise ValueError("method 'hybrid' drafts with retrieval and the trained head; do not pass a draft model")
        cls.check_knobs(knobs)
        # the planner, not LogitSpec's own back-off, decides when drafting stops paying
        retrieval = LogitSpecProposer.build(target, None, **{"adaptive": False, **knobs})
        if head_path is not None and not with_head:
            raise ValueError("method 'hybrid': with_head=0 drafts without a head, so head_path has nothing to name")
        drafter = None
        if with_head:
            try:
                drafter = HeadProposer.build(target, path=head_path, width=head_width, beam=head_beam)
            except (ModelLoadError, ValueError):
                if head_path is not None:  # a head asked for by name: say why it cannot be used
                    raise
                drafter = None  # no trained head for this target: retrieval alone
        found = SuffixProposer.build(target, corpus=bool(corpus)) if suffix else None
        return cls(retrieval, drafter, found, gate=bool(gate))

    def start(self, ids: list[int]) -> None:
        self.retrieval.start(ids)
        self.gate.reset()
        if self.suffix is not None:
            self.suffix.start(ids)

    def propose(self, ctx: ProposeContext) -> DraftTree:
        if self.suffix is not None:  # at the first cycle, drafted or skipped: what a resume drafts from
            self.suffix.pin(ctx)
        skipped = self._skips(ctx)
        tree = self.retrieval.propose(ctx, candidates=CANDIDATE not in skipped)
        tree.uncut = None  # its draft at another K is not its retrieval's alone (the head, suffix, skips)
        greedy = ctx.sampling.greedy
        if self.suffix is not None and SUFFIX not in skipped:  # before the head, whose depth is priced beside it
            tree = merge(tree, self.suffix.propose(ctx), greedy)
        if self.head is None or HEAD in skipped:
            return tree
        # the head drafts only as deep as pays beside what retrieval already offers
        k = ctx.planner.depth(self.head.source, ctx.k, tree) if ctx.planner is not None else min(HEAD_K, ctx.k)
        if k < 1:
            return tree
        return merge(tree, self.head.propose(dataclasses.replace(ctx, k=k)), greedy)

    def _skips(self, ctx: ProposeContext) -> dict[str, str]:
        """{source: reason} this cycle (gate.py), from prompt lookup's chain (committed text), the
        planner's counts and the gate's record; nothing is skipped without a planner or gate."""
        if ctx.planner is None or not self.gated:
            self.skipped = ()
            return {}
        lookup = self.retrieval.propose(ctx, candidates=False)
        head_k = ctx.planner.depth(self.head.source, ctx.k) if self.head is not None else 0
        skipped = self.gate.skips(lookup, long_match(lookup, ctx.planner, head_k))
        self.skipped = tuple(skipped.items())
        return skipped

    def observe(self, cycle) -> None:
        self.retrieval.observe(cycle)
        self.gate.observe(cycle)
        self.skipped = ()  # a cycle that drafts nothing (k < 1) skips nothing

    def finish(self, run_id: str, ids: list[int], prompt_len: int) -> None:
        if self.suffix is not None:
            self.suffix.finish(run_id, ids, prompt_len)

    def state(self) -> dict:  # the head keeps nothing: its hidden state is the run's
        state = {**self.retrieval.state(), "gate": self.gate.state()}
        if self.suffix is not None:  # the earlier runs it drafts from, pinned (suffix.py)
            state["suffix"] = self.suffix.state()
        return state

    def set_state(self, state: dict) -> None:
        self.retrieval.set_state(state)
        self.gate.set_state(state.get("gate", {}))
        if self.suffix is not None:
            self.suffix.set_state(state.get("suffix", {}))

    def rebuild(self, ids: list[int]) -> None:
        self.retrieval.rebuild(ids)
        if self.suffix is not None:
            self.suffix.rebuild(ids)
