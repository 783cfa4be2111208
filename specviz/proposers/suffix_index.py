"""The suffix index behind suffix decoding (suffix.py): texts indexed by token, suffix matches, and
draft trees grown by frequency.

SuffixDecoding (Oliaro et al., NeurIPS 2025) keeps suffix trees, finds the node of the longest
suffix of the context, and reads continuations from the subtree below it, each counted by how
often it occurred. Here each text keeps, per token, the positions where the token occurs (`Text`).
A match walks backwards from every occurrence of the context's last token and counts how many
tokens agree (at most MAX_MATCH): the occurrences of the context's suffix of length m are those
that agree over m or more, and the continuations read after them, counted, are exactly what a
suffix tree holds below that suffix's node, with the same counts. The index costs one list entry
per token (a suffix tree truncated at depth D costs up to D nodes per token, and in Python a node
is a dict), and grows by appending as a run commits tokens.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from specviz.drafting.tree import DraftTree, Match, Source

MAX_MATCH = 16  # longest suffix compared: past 16 agreeing tokens a match is as specific as it gets
SCAN = 256  # latest occurrences of the last token read per text: bounds a cycle on long prompts
# its nodes' source kinds, by the text the continuation was found in: the run's own prompt, its own
# output so far, an earlier run on this target and exactly this prompt
SUFFIX_PROMPT, SUFFIX_OUTPUT, SUFFIX_EARLIER = "suffix-prompt", "suffix-output", "suffix-earlier"
CONTEXT_SHOWN = 8  # tokens shown before a match where the page highlights it


class Text:
    """A token sequence and, per token, where it occurs; positions below `start` are not listed."""

    def __init__(self, ids=(), start: int = 0, origin: str = SUFFIX_EARLIER):
        self.ids: list[int] = []
        self.where: dict[int, list[int]] = {}
        self.start, self.origin = start, origin
        self.extend(ids)

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, ids) -> None:
        for tok in ids:
            if len(self.ids) >= self.start:
                self.where.setdefault(tok, []).append(len(self.ids))
            self.ids.append(tok)

    def sync(self, ids: list[int]) -> None:
        """Follow a run's committed ids: append what is new, start over if they are not an extension."""
        if len(ids) < len(self.ids) or (self.ids and ids[len(self.ids) - 1] != self.ids[-1]):
            self.__init__((), self.start, self.origin)
        self.extend(ids[len(self.ids):])


@dataclass
class Occurrence:
    """One earlier place the context's last token occurred: its text, where its continuation
    starts, how many tokens before it agree with the context (m), and what it weighs."""
    text: Text
    after: int
    m: int
    weight: int
    origin: str


def agreement(ids: list[int], j: int, context: list[int]) -> int:
    """How many tokens ending at ids[j] equal the last tokens of `context` (at most MAX_MATCH)."""
    n, end = 0, len(context) - 1
    while n < MAX_MATCH and j - n >= 0 and n <= end and ids[j - n] == context[end - n]:
        n += 1
    return n


def occurrences(text: Text, context: list[int], weight: int, origin_of) -> list[Occurrence]:
    """Every listed occurrence of the context's last token in `text` that has a continuation (the
    latest SCAN of them), and how far back it agrees. `origin_of(after)` names where it was found."""
    found = []
    for j in reversed(text.where.get(context[-1], ())[-SCAN:]):
        if j < len(text) - 1:  # a continuation follows (and in the run's own text, not its own end)
            found.append(Occurrence(text, j + 1, agreement(text.ids, j, context), weight, origin_of(j + 1)))
    return found


@dataclass
class Grown:
    """A draft tree grown from one pattern length: the tree, Σ D (its expected accepted tokens), the
    occurrences it was grown from and each node's count C."""
    tree: DraftTree
    score: float
    members: list[Occurrence]
    counts: list[int]


def grow(members: list[Occurrence], m: int, depth: int, budget: int, min_prob: float) -> Grown:
    """The paper's best-first expansion: D(root) = 1, D(child) = D(node)·C(child)/C(node), where C
    counts the (weighted) occurrences that continue that way; the `budget` nodes of highest D that
    reach at least `min_prob`, at most `depth` deep. A node's source is where most of its count
    came from; its branch is its rank among its siblings by count (0: the most frequent)."""
    tokens, parents, sources, counts, score = [], [], [], [], 0.0
    heap: list = []
    tie = 0

    def offer(parent: int, d_parent: float, level: int, held: list[Occurrence]) -> None:
        nonlocal tie
        total = sum(o.weight for o in held)
        for rank, (tok, below, origin) in enumerate(_children(held, level)):
            d = d_parent * sum(o.weight for o in below) / total
            if d < min_prob:
                break  # children come most frequent first
            heapq.heappush(heap, (-d, tie, parent, tok, Source(origin, branch=rank, ngram=m), level + 1, below))
            tie += 1

    offer(-1, 1.0, 0, members)  # the root is the context itself, not a draft node
    while heap and len(tokens) < budget:
        neg_d, _, parent, tok, source, level, below = heapq.heappop(heap)
        tokens.append(tok)
        parents.append(parent)
        sources.append(source)
        counts.append(sum(o.weight for o in below))
        score -= neg_d
        if level < depth:
            offer(len(tokens) - 1, -neg_d, level, below)
    return Grown(DraftTree(tokens, parents, None, sources), score, members, counts)


def _children(held: list[Occurrence], level: int) -> list[tuple[int, list[Occurrence], str]]:
    """Group `held` by the token `level` places into its continuation: (token, members, the origin
    with most weight), most frequent first (ties: the token met first)."""
    groups: dict[int, list[Occurrence]] = {}
    for occ in held:
        at = occ.after + level
        if at < len(occ.text) and occ.text.ids[at] >= 0:  # a corpus's separator (corpus.py) ends a continuation
            groups.setdefault(occ.text.ids[at], []).append(occ)
    out = []
    for tok, below in groups.items():
        weight: dict[str, int] = {}
        for occ in below:
            weight[occ.origin] = weight.get(occ.origin, 0) + occ.weight
        out.append((tok, below, max(weight, key=weight.get)))
    out.sort(key=lambda c: -sum(o.weight for o in c[1]))
    return out


def best_tree(found: list[Occurrence], depth: int, capacity: int, spec_factor: float, min_prob: float,
              patterns: int) -> Grown | None:
    """Grow one tree per pattern length m (the `patterns` longest lengths met, each tree from the
    occurrences that agree over m or more, at most spec_factor·m nodes, the paper's MAX_SPEC = α·p)
    and keep the one with the largest Σ D."""
    best = None
    for m in sorted({o.m for o in found}, reverse=True)[:patterns]:
        budget = min(capacity, max(1, round(spec_factor * m)))
        grown = grow([o for o in found if o.m >= m], m, depth, budget, min_prob)
        if len(grown.tree) and (best is None or grown.score > best.score):
            best = grown
    return best


def match_of(grown: Grown, depth: int) -> Match:
    """Where the matched suffix was found, for the page: the occurrence the first node follows (the
    latest of them), with a few tokens before it and what followed it there."""
    first = grown.tree.tokens[0]
    occ = next(o for o in grown.members if o.m >= grown.tree.sources[0].ngram and o.after < len(o.text)
               and o.text.ids[o.after] == first)
    m = grown.tree.sources[0].ngram
    start = occ.after - m
    before, after = occ.text.ids[max(start - CONTEXT_SHOWN, 0): start], occ.text.ids[occ.after: occ.after + depth]
    # a corpus (corpus.py) holds many answers, a negative id between two: show this answer's tokens alone
    before = before[max((i + 1 for i, t in enumerate(before) if t < 0), default=0):]
    after = after[: next((i for i, t in enumerate(after) if t < 0), len(after))]
    return Match(found_in=occ.origin, before=tuple(before), matched=tuple(occ.text.ids[start: occ.after]),
                 after=tuple(after),
                 count=sum(o.weight for o in grown.members if o.m >= m))
