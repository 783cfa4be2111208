"""Which of the hybrid's sources are worth computing this cycle (hybrid.py): drafting priced by what it buys.

The planner (decoding/planner.py) decides what of a draft to *send*; this decides what to *compute*.
Prompt lookup (LogitSpec's branch 0) is always computed: it costs a dictionary lookup and is what
the first rule reads. The other sources are skipped, with a reason code, when

- LONG_MATCH: retrieval already offers a full-length match (the longest n-gram, LONG_NGRAM) that
  the planner would send at least as deep as the head would draft, and whose chain the planner's
  counts say is accepted that deep almost always (LONG_SURE); then the head's calls (its costliest
  part: one network call per level) are skipped. A shorter or less sure match keeps the head: where
  retrieval's chain breaks early, the head's tokens are the ones accepted (issue 64.2: skipping on
  any 3-deep match cost open writing 4 cycles in 64);
- UNPAID: the source's recent drafts bought (almost) no accepted token: its record, decayed per
  cycle it was computed, credits it fewer tokens per cycle than its price (the head: its calls
  in plain target steps; the retrieval sources: MIN_GAIN). A skipped source is computed again
  every PROBE_EVERY cycles, and at once when the text changes (a new retrieval hit after a miss).

Exactness: every rule reads the committed ids (retrieval's chain is a function of them), the
planner's counts and this record, all from earlier cycles; never this cycle's target distribution
or draws. So which sources are computed is fixed before the cycle's draws, greedy output stays
the target's argmax path and sampled output stays distributed as p (verify.py's rule holds for
any tree chosen that way). The record is plain data (`state`), so a resumed run decides alike.
"""
from __future__ import annotations

from specviz.drafting.tree import DraftTree
from specviz.proposers.corpus import SUFFIX_CORPUS
from specviz.proposers.head import HEAD
from specviz.proposers.logitspec import CANDIDATE
from specviz.proposers.suffix_index import SUFFIX_EARLIER, SUFFIX_OUTPUT, SUFFIX_PROMPT

LONG_MATCH, UNPAID = "long-match", "unpaid"  # reason codes, worded by viz/narrate.py
# the sources the gate may skip: LogitSpec's candidates, suffix decoding (its kinds as one), the head
SUFFIX = "suffix"
GATED = (CANDIDATE, SUFFIX, HEAD)
WHO = {CANDIDATE: "LogitSpec's candidates", SUFFIX: "suffix decoding", HEAD: "the head's calls"}  # in words
RECENT = 0.8  # a source's record decays by this per cycle it is computed: about the last five cycles
MIN_TRIED = 2.5  # decayed cycles computed (four in a row) before a source can be judged unpaid
MIN_GAIN = 0.01  # accepted tokens per cycle below which a cheap source buys nothing: none in about 13 cycles
PROBE_EVERY = 8  # a skipped source is computed again after this many cycles, to see if it pays again
LONG_MIN = 3  # the shortest retrieval match that counts as long: the head's own default depth
LONG_NGRAM = 3  # a match found by ngram_index's longest n-gram: shorter ones break early more often
LONG_SURE = 0.8  # the planner's chance that the chain is accepted to the head's depth, above which
# the head's tokens would rarely be reached (a head token counts only where retrieval's breaks)


def group_of(source: str) -> str | None:
    """The gated source a trace node's `source` value belongs to (None: prompt lookup, never gated)."""
    if source in (CANDIDATE, HEAD):  # a group named by its one kind
        return source
    return SUFFIX if source in (SUFFIX_PROMPT, SUFFIX_OUTPUT, SUFFIX_EARLIER, SUFFIX_CORPUS) else None


class Gate:
    """A decayed record per gated source (cycles computed, accepted tokens bought) and the skip rules."""

    def __init__(self, sources: tuple[str, ...] = GATED, head_price: float = 0.0):
        self.sources = tuple(g for g in GATED if g in sources)  # the ones this hybrid has
        self.head_price = head_price  # the head's calls per cycle, in plain target steps
        self.reset()

    def reset(self) -> None:
        self.tried = {g: 0.0 for g in self.sources}  # decayed cycles in which the source was computed
        self.gain = {g: 0.0 for g in self.sources}  # decayed accepted tokens it drafted
        self.idle = {g: 0 for g in self.sources}  # cycles since it was last computed
        self.hit = False  # did retrieval hit on the previous cycle
        self.computed: tuple[str, ...] = ()  # this cycle's computed sources, credited by `observe`

    def price(self, group: str) -> float:
        return max(MIN_GAIN, self.head_price) if group == HEAD else MIN_GAIN

    def unpaid(self, group: str, fresh_hit: bool) -> bool:
        """Whether `group`'s record says it buys less than it costs, and no probe is due."""
        if self.tried[group] < MIN_TRIED or self.gain[group] >= self.price(group) * self.tried[group]:
            return False
        return not (fresh_hit or self.idle[group] + 1 >= PROBE_EVERY)

    def skips(self, retrieval: DraftTree, long_match: bool) -> dict[str, str]:
        """{source: reason} for this cycle, from retrieval's tree (committed text) and the record."""
        fresh_hit = bool(retrieval.retrieval_hit) and not self.hit
        self.hit = bool(retrieval.retrieval_hit)
        out = {g: UNPAID for g in self.sources if self.unpaid(g, fresh_hit)}
        if long_match and HEAD in self.sources:  # the cheap sources stay: they cost a lookup
            out[HEAD] = LONG_MATCH
        self.computed = tuple(g for g in self.sources if g not in out)
        return out

    def observe(self, cycle) -> None:
        """Credit each computed source with the accepted tokens its nodes drafted (a CycleTrace)."""
        bought = dict.fromkeys(self.sources, 0)
        for i in cycle.accepted:
            group = group_of(cycle.nodes[i].source) if i < len(cycle.nodes) else None
            if group in bought:
                bought[group] += 1
        for g in self.sources:
            if g in self.computed:
                self.tried[g] = self.tried[g] * RECENT + 1.0
                self.gain[g] = self.gain[g] * RECENT + bought[g]
                self.idle[g] = 0
            else:
                self.idle[g] += 1
        self.computed = ()

    # -- as data (runstate.py) ---------------------------------------------------------------------
    def state(self) -> dict:
        return {"tried": dict(self.tried), "gain": dict(self.gain), "idle": dict(self.idle), "hit": self.hit}

    def set_state(self, state: dict) -> None:
        if not state:
            return
        self.tried, self.gain = dict(state["tried"]), dict(state["gain"])
        self.idle, self.hit = dict(state["idle"]), bool(state["hit"])


def long_match(retrieval: DraftTree, planner, head_depth: int) -> bool:
    """Whether retrieval's chain is a full-length match (LONG_NGRAM) that the planner would send at
    least as deep as the head would draft (`head_depth`) and LONG_MIN, and that its counts say is
    accepted that deep with a chance of LONG_SURE or more. The chance reads counts only (never the
    tokens), so sampled runs stay exact."""
    if not len(retrieval) or planner is None:
        return False
    source = retrieval.source_of(0)
    if source is None or (source.ngram or 0) < LONG_NGRAM:
        return False
    depth = max(head_depth, LONG_MIN)
    if max(planner.prune(retrieval).depths, default=0) < depth:
        return False
    reach, memo = 1.0, {}
    for d in range(1, depth + 1):  # the chance the chain is accepted down to `depth`
        reach *= planner.chained(source, d, memo)
    return reach >= LONG_SURE
