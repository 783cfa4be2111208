"""DraftTree: the proposal of one cycle, and the attention mask that verifies it in one pass.

Node i has token `tokens[i]` and parent `parents[i]` (-1 means the last committed token,
the root). Nodes are in topological order: a parent always comes before its children.
A chain is the tree whose parents are -1, 0, 1, ...
`q[i]` is the draft distribution node i was sampled from (a 1-D probability tensor over
the vocabulary), or None when the draft is deterministic (a point mass on the token).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

# A node's source kind is a plain string that its proposer declares, with its word and colour, in its
# MethodSpec (proposers/method_spec.py): "lookup", "candidate", "suffix-prompt", …. A node whose proposer
# names none is a draft model's.
DRAFT = "draft"


@dataclass(frozen=True)
class Source:
    """Who proposed a node, as data: the planner keys its statistics by it, and viz/ words it."""
    kind: str  # its proposer's source kind (a SourceSpec's), e.g. "lookup"
    # LogitSpec's candidate number (1: the best-ranked candidate); a greedy head tree's node: its
    # rank among its siblings (0: the head's first choice); 0 elsewhere
    branch: int = 0
    rank: int | None = None  # a candidate's own node: its rank in the last logits
    ngram: int | None = None  # retrieved nodes: the length of the n-gram match that found them


@dataclass(frozen=True)
class Match:
    """Where a suffix proposer found the context's suffix (proposers/suffix.py), as ids: a few
    tokens `before` it in that text, the `matched` suffix itself, what came `after` it there, and
    how many (weighted) occurrences agreed over that length. The page highlights it; it names the
    kind of text (a source kind of the proposer's), never whose run it was."""
    found_in: str
    before: tuple[int, ...]
    matched: tuple[int, ...]
    after: tuple[int, ...]
    count: int


@dataclass(frozen=True)
class Seam:
    """Where a draft from another family met the target's tokenizer (proposers/cross_draft.py): the
    draft's own tokens as texts, the target ids they became, and how those were judged: greedy (by
    the target's argmax alone) or with the draft's q kept to the `shared` tokens both vocabularies
    have; `cut` says why the proposal ends before the draft's text does, if it does."""
    draft_texts: tuple[str, ...]
    target_ids: tuple[int, ...]
    greedy: bool
    shared: int
    cut: str = ""


@dataclass
class DraftTree:
    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    q: list[torch.Tensor | None] | None = None
    sources: list[Source] | None = None  # per node: which proposer branch made it
    retrieval_hit: bool | None = None  # for retrieval proposers: did any lookup succeed
    match: Match | None = None  # a suffix proposer's match, for the page
    seam: Seam | None = None  # a draft from another family: its tokens and the target's, for the page
    # a retrieval draft sent whole: its branches before K cut them (prompt lookup's one copy,
    # LogitSpec's branches, each to its own length), merged at any K into at most `uncut_cap` nodes
    # as its proposer merges them (None: no cap). Never verified; the model of speed rebuilds the
    # draft at another K from them (measure/rebuilt.py). None where not kept.
    uncut: list[list[int]] | None = None
    uncut_cap: int | None = None

    def __post_init__(self):
        if len(self.tokens) != len(self.parents):
            raise ValueError("a DraftTree needs one parent per token")
        for i, par in enumerate(self.parents):
            if not -1 <= par < i:
                raise ValueError(f"node {i} has parent {par}: parents must come first")

    @classmethod
    def chain(cls, tokens, q=None, **kw) -> "DraftTree":
        return cls(list(tokens), list(range(-1, len(tokens) - 1)), q, **kw)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def depths(self) -> list[int]:
        out: list[int] = []
        for par in self.parents:
            out.append(1 if par < 0 else out[par] + 1)
        return out

    @property
    def is_chain(self) -> bool:
        return self.parents == list(range(-1, len(self.tokens) - 1))

    def children(self, node: int) -> list[int]:
        return [i for i, par in enumerate(self.parents) if par == node]

    def q_of(self, i: int) -> torch.Tensor | None:
        return None if self.q is None else self.q[i]

    def source_of(self, i: int) -> Source | None:
        return None if self.sources is None else self.sources[i]

    def limit_depth(self, max_depth: int) -> "DraftTree":
        """The same tree without nodes deeper than max_depth (order is kept)."""
        return self.subset([i for i, d in enumerate(self.depths) if d <= max_depth])

    def subset(self, keep: list[int]) -> "DraftTree":
        """The nodes listed in `keep` (ascending, every kept node's parent kept too), order kept."""
        if len(keep) == len(self):
            return self
        new_index = {old: new for new, old in enumerate(keep)}
        pick = lambda xs: None if xs is None else [xs[i] for i in keep]
        return DraftTree([self.tokens[i] for i in keep],
                         [new_index.get(self.parents[i], -1) for i in keep],
                         pick(self.q), pick(self.sources), self.retrieval_hit, self.match, self.seam)

    def ancestors(self, i: int) -> list[int]:
        """Node i and its ancestors, root-most first (the root itself excluded)."""
        path = []
        while i >= 0:
            path.append(i)
            i = self.parents[i]
        return path[::-1]

    def attention_mask(self, past_len: int, dtype: torch.dtype, device=None, window: int | None = None,
                       first: int = 0) -> torch.Tensor:
        """4-D additive mask (1, 1, rows, keys) for the verify pass over [root] + nodes.

        Row 0 is the root (the last committed token, not yet in the cache); row i+1 is node i.
        Every row sees the `past_len` cached positions and the root; a node also sees itself
        and its ancestors. Allowed entries are 0, the rest the dtype's minimum.
        With a sliding `window`, a row sees only keys fewer than `window` positions behind its
        own (a node's position is root + depth). Columns start at cached position `first`:
        a layer that has dropped older positions gets a mask sized to what it holds.
        """
        n = len(self) + 1
        low = torch.finfo(dtype).min
        # (rows, keys): the cached columns are all zeros (seen by every row), so only the last n columns,
        # the draft block, are written; at a long context these are a sliver of the mask
        mask = torch.zeros(n, past_len + n - first, dtype=dtype)
        mask[:, -n:].masked_fill_(~self.block(), low)
        if window is not None:
            rows = self.position_ids(past_len)[0]
            keys = torch.cat([torch.arange(first, past_len), rows])
            mask.masked_fill_(keys[None, :] <= rows[:, None] - window, low)
        return mask[None, None].to(device)

    def block(self) -> torch.Tensor:
        """(rows, rows) bool over [root] + nodes: row r sees column c. A node's row is its parent's
        row plus itself, so the rows are built in one pass over the parents, with no per-ancestor
        tensor writes (at a long context they cost more than the rest of the mask)."""
        rows = [[True] + [False] * len(self)]  # the root sees itself
        for i, parent in enumerate(self.parents):
            row = rows[parent + 1].copy()
            row[i + 1] = True
            rows.append(row)
        return torch.tensor(rows)

    def model_mask(self, cache, config, dtype: torch.dtype, device=None):
        """The verify pass's `attention_mask` for a model over `cache`: one 4-D mask, or a dict.

        Models whose layers are of two kinds (Gemma 3: sliding and global) take a dict with one
        mask per kind, the window applied in the sliding one. A model of one kind takes a tensor.
        """
        from specviz.passes.kvcache import FULL, SLIDING, cache_len, layer_kinds  # transformers, only when verifying

        past = cache_len(cache)
        masks = {}
        for i, (kind, window) in enumerate(layer_kinds(config)):
            if kind not in (FULL, SLIDING):
                raise ValueError(f"a draft tree cannot be verified on '{kind}' layers; choose a chain "
                                 "method (draft model, prompt lookup or layer skip)")
            if kind not in masks:
                masks[kind] = self.attention_mask(past, dtype, device, window, _first_held(cache, i, past))
        return next(iter(masks.values())) if len(masks) == 1 else masks

    def position_ids(self, root_pos: int, device=None) -> torch.Tensor:
        """Positions of [root] + nodes: the root at root_pos, a node at root_pos + depth."""
        return torch.tensor([[root_pos] + [root_pos + d for d in self.depths]], device=device)


def merge(first: DraftTree, second: DraftTree, greedy: bool) -> DraftTree:
    """`first` with `second`'s nodes added after its own, each with its q and source, where they are new
    (the hybrid joins its sources with it, suffix decoding its own texts' tree with its corpus's).

    A node of `second` whose token a sibling in the merged tree already holds is that sibling, and
    its children hang from it, when the two are interchangeable:
    - under greedy decoding always: only one child can match the target's argmax
      (verify_greedy follows the first match), so a repeat takes a place in the pass and can never
      be followed. The head's continuation after a token retrieval also drafted becomes a second
      branch under retrieval's node.
    - under sampling only when both are point masses (q None: retrieval and suffix). Their tokens
      follow from the committed text alone, and once the first is rejected the residual holds no
      mass on its token, so the repeat was always rejected and its children never reached; merged,
      they are tried after the first is accepted. A head node is a draw from its q: it keeps its own
      place even where its token repeats a sibling's, so the recursive rule subtracts its q as drawn
      (verify.py).
    """
    tokens, parents = list(first.tokens), list(first.parents)
    qs = [first.q_of(i) for i in range(len(first))]
    sources = [first.source_of(i) for i in range(len(first))]
    mergeable = (lambda q: True) if greedy else (lambda q: q is None)
    at: dict[tuple[int, int], int] = {(par, tok): i for i, (par, tok) in enumerate(zip(parents, tokens))
                                      if mergeable(qs[i])}
    where: list[int] = []  # second's node → its node in the merged tree
    for i, tok in enumerate(second.tokens):
        par = second.parents[i]
        par = where[par] if par >= 0 else -1
        q = second.q_of(i)
        same = at.get((par, tok)) if mergeable(q) else None
        if same is None:
            same = len(tokens)
            tokens.append(tok)
            parents.append(par)
            qs.append(q)
            sources.append(second.source_of(i))
            if mergeable(q):
                at.setdefault((par, tok), same)
        where.append(same)
    return DraftTree(tokens, parents, qs if any(q is not None for q in qs) else None, sources,
                     first.retrieval_hit, first.match or second.match)


def _first_held(cache, layer: int, past: int) -> int:
    """First cached position layer `layer` shows the model: 0, or later for a sliding layer that
    keeps only its window. The layer's own answer, so the mask matches the keys it returns."""
    layers = getattr(cache, "layers", [])
    if layer >= len(layers) or not hasattr(layers[layer], "get_mask_sizes"):
        return 0
    return min(int(layers[layer].get_mask_sizes(1)[1]), past)
