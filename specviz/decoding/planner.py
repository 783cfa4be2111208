"""Cost-aware drafting: send only the draft nodes that pay for the time they add to the verify pass.

A verify pass over n tokens costs v(n) plain steps (v(1) = 1), from the target's cost profile
(costs.py: measured once per model, device and dtype, then cached).
A node i is accepted, if its parent was, with a probability estimated from running counts per
source and depth (`est`; a depth with few counts leans on the depth above it, `chained`): its
path probability P(i) is the product along its path, and a cycle commits 1 + Σ P(i) tokens on
average. Nodes are ranked by P(i) (a node always after its parent), and the m most likely are
sent, m chosen to give the most expected tokens per unit of time, (1 + Σ P) / v(m + 1). The kept
tree may be empty: a plain step is then cheaper than any draft on offer.

Exactness: the rule never looks at the drafted tokens themselves. Under sampling a node's
estimate depends only on its source and depth, and counts from earlier cycles, so which
nodes are sent is independent of this cycle's draws and the verification stays exact.
Under greedy decoding any draft is exact, so the estimate may also use the draft's
confidence in its token, q(x), when the node has a q. Costs come from a fixed profile, never from this
run's timings, so a seed gives the same run every time.

Models that draft (draft model, head) pay c one-token target passes per draft call, so `depth` picks
their K before drafting, the same way, from the per-depth estimates and beside any nodes
offered already (the hybrid's retrieval).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import torch

from specviz.decoding.trace import ACCEPTED, REJECTED
from specviz.drafting.tree import DRAFT, DraftTree, Source
from specviz.pricing.cost_profile import PROFILE_MIN_PARAMS, CostProfile, as_planned, interpolate

PRIOR = (1.0, 1.0)  # Beta prior on a source's acceptance: an unseen source is tried at 0.5
DECAY = 0.85  # counts of a source left out of a cycle shrink, so a pruned source is retried later
MAX_DEPTH_KEY = 8  # deeper positions share one estimate: they are rare
# v(n) for models too small to be worth profiling (the tests' tiny ones): an AVX2 CPU's shape
# (DESIGN.md: bundled model, fp32, one thread, 200-token cache)
PRIOR_V = CostProfile(model="prior (DESIGN.md, AVX2 CPU)", device="cpu", dtype="float32", prefix_len=200,
                      pass_s=0.073, v={1: 1.0, 2: 1.41, 4: 1.48, 8: 1.53, 16: 2.22, 32: 3.0})


def verify_cost(target) -> Callable[[int], float]:
    """v(n) for `target`: its measured cost profile (costs.py: timed once, then cached). A served
    target has no local passes to time: the prior."""
    if target.n_params < PROFILE_MIN_PARAMS or getattr(target, "remote", None) is not None:
        return PRIOR_V
    from specviz.pricing import costs  # times passes: loaded only when a real model needs a profile

    return costs.profile(target)


def batch_cost(target):
    """v at each batch size for `target` (pricing/batch_costs.py), so a run sharing verify passes
    is priced at the batch they run in; None, priced as if alone, until they were timed (the app
    times them at start-up; a run never waits for that), and for a model too small to profile or a
    served target (its server batches)."""
    if target.n_params < PROFILE_MIN_PARAMS or getattr(target, "remote", None) is not None:
        return None
    from specviz.pricing import batch_costs  # loads transformers: only when a real model asks

    return batch_costs.cached(target)


@functools.lru_cache(maxsize=4096)  # a few dozen sources and depths per run; planning asks for them per node
def key(source: Source | None, depth: int) -> str:
    """The statistics key of a node from `source` at `depth`: who proposed it and how (a candidate's
    number, a match's length), never a display label and never a candidate's logit rank, which
    changes every cycle."""
    source = source or Source(DRAFT)
    return f"{source.kind}|{source.branch}|{source.ngram or 0}|{min(depth, MAX_DEPTH_KEY)}"


@functools.lru_cache(maxsize=1024)
def first_choice(source: Source | None) -> Source | None:
    """`source` as its first choice (branch 0): whose depth above a head's lower choice leans on."""
    return source if source is None else dataclasses.replace(source, branch=0)


class Planner:
    """Running acceptance counts per source and depth, and the choice of what to send."""

    def __init__(self, greedy: bool, v: Callable[[int], float] = PRIOR_V, c: float = 0.0, batched=None):
        """`batched`: the target's BatchCosts (pricing/batch_costs.py), which price_at reads; None
        prices every pass as if its run were alone."""
        self.greedy, self.c = greedy, c  # c: one draft call in one-token target passes
        self._v1, self._c1, self.batched = v, c, batched
        self._v, self._v_max = v, [1.0]
        self.batch = 1  # the number of runs the next verify pass is priced for
        self.counts: dict[str, list[float]] = {}  # key → [accepted, reached]
        self._confidence: list[tuple[DraftTree, list]] = []  # confidence(): the latest trees' reads

    def price_at(self, batch: int) -> None:
        """Price the next passes at `batch` runs sharing each: v_B(n) and the draft call's c in
        batched plain steps. Only what is sent changes, never how it is judged, so exactness holds."""
        batch = max(int(batch), 1) if self.batched is not None else 1
        if batch == self.batch:
            return
        self.batch, self._v_max = batch, [1.0]
        if batch == 1:
            self._v, self.c = self._v1, self._c1
        else:
            self._v, self.c = self.batched.v_at(batch), self._c1 * self.batched.unit_at(batch)

    def v(self, n: int) -> float:
        """v(n) as cost_profile.as_planned reads the profile: at least 1, at most v of any larger pass."""
        if len(self._v_max) < n:
            self._v_max = as_planned(self._v, max(n, 2 * len(self._v_max)))
        return self._v_max[n - 1]

    # -- estimates -------------------------------------------------------------------------------
    def keys(self, tree: DraftTree, i: int, depth: int) -> list[str]:
        """Node i's estimate keys, general first: source and depth; under greedy also q(x), the
        draft's confidence in the node's own token (its max q for a chain of argmax picks)."""
        base = key(tree.source_of(i), depth)
        conf = self.confidence(tree)[i]
        if conf is not None:  # confidence: only where it cannot bias a draw (greedy)
            return [base, f"{base}|{min(int(conf[0] * 5), 4)}"]
        return [base]

    def confidence(self, tree: DraftTree) -> list[tuple[float, float] | None]:
        """Per node, (q(x), max q) under greedy decoding where the node has a q, else None. Read
        from the device in one transfer per tree (kept for the few trees of the current cycle), not
        one per node: on a GPU each read is a sync."""
        for kept, conf in self._confidence:
            if kept is tree:
                return conf
        conf: list = [None] * len(tree)
        have = [i for i in range(len(tree)) if tree.q_of(i) is not None] if self.greedy else []
        if have:
            tops = {}  # siblings share one q: its max once
            for i in have:
                tops.setdefault(id(tree.q_of(i)), tree.q_of(i).max())
            rows = torch.stack([torch.stack([tree.q_of(i)[tree.tokens[i]], tops[id(tree.q_of(i))]]) for i in have])
            for i, (qx, top) in zip(have, rows.float().tolist()):
                conf[i] = (qx, top)
        self._confidence = [(tree, conf)] + self._confidence[:3]
        return conf

    def est(self, key: str, prior: float | None = None) -> float:
        """The key's acceptance rate: its counts under a Beta prior worth PRIOR's two observations,
        centred on `prior` (default PRIOR's 0.5)."""
        acc, reached = self.counts.get(key, (0.0, 0.0))
        weight = PRIOR[0] + PRIOR[1]
        mean = PRIOR[0] / weight if prior is None else prior
        return (acc + weight * mean) / (reached + weight)

    def shrunk(self, keys: list[str], prior: float | None = None) -> float:
        """The finest key's rate, its prior centred on the next coarser key's rate, and so on up to
        the coarsest key, centred on `prior`: a fine key with few counts (a confidence bucket)
        leans on what its source at that depth has shown."""
        est = self.est(keys[0], prior)
        for k in keys[1:]:
            est = self.est(k, est)
        return est

    def chained(self, source: Source | None, depth: int, memo: dict | None = None) -> float:
        """The rate of `source`'s nodes at `depth`, its prior centred on the rate at depth - 1 (at
        depth 1 on PRIOR's 0.5): a depth not yet sent starts where the one above it stands, not at
        a coin flip. A draft that has matched the target so far tends to go on matching (a copied
        span goes on; DESIGN.md's α by position rises with depth), so with a prior of 0.5 at every
        depth a long retrieval chain would be learnt one depth per few cycles, and a short run
        would end before the planner sent what pays. Depends only on counts, never on tokens.
        `memo` keeps each (source, depth) rate for the rest of one planning call."""
        memo = {} if memo is None else memo
        depth = min(depth, MAX_DEPTH_KEY)
        at = key(source, depth)
        rate = memo.get(at)
        if rate is None:
            above = self.chained(source, depth - 1, memo) if depth > 1 else None
            rate = memo[at] = self.est(at, above)
        return rate

    def prior(self, tree: DraftTree, i: int, depth: int, memo: dict | None = None) -> float | None:
        """Where node i's coarse key (source and depth) is centred: the rate one depth up (`chained`),
        and under greedy decoding, for a node with a q, the first choice's rate one depth up scaled
        by q(x) / max q, kept within [0.02, 0.98]: a draft's first choice starts where the depth
        above stands, and a head's third choice at a tenth of the first's q starts at a tenth of
        that, before its key has counts. (q(x) itself is no prior: a small model's flat q says
        little about how often its argmax agrees with the target's.) At depth 1 without a q: None,
        PRIOR's 0.5."""
        conf = self.confidence(tree)[i]
        source = tree.source_of(i)
        if conf is not None:  # q's share already says how far below the first choice
            source = first_choice(source)
        above = self.chained(source, depth - 1, memo) if depth > 1 else None
        if conf is None:
            return above
        qx, top = conf
        share = qx / top if top > 0 else 1.0
        start = PRIOR[0] / (PRIOR[0] + PRIOR[1]) if above is None else above
        return min(max(start * share, 0.02), 0.98)

    # -- choices -----------------------------------------------------------------------------------
    def path_values(self, tree: DraftTree) -> list[float]:
        """Each node's chance to be reached and accepted: the product of its path's estimates."""
        depths, path, memo = tree.depths, [], {}
        for i in range(len(tree)):
            par = tree.parents[i]
            est = self.shrunk(self.keys(tree, i, depths[i]), self.prior(tree, i, depths[i], memo))
            path.append(est * (path[par] if par >= 0 else 1.0))
        return path

    def best_send(self, values: list[float], draft_cost: float = 0.0) -> tuple[int, float]:
        """(m, rate): how many of `values` (sorted high to low) to verify for the most expected tokens
        per unit of time, (1 + the m largest) / (draft_cost + v(m + 1)); m = 0 sends nothing."""
        best_m, best, gain = 0, 1.0 / (draft_cost + 1.0), 1.0
        for m, value in enumerate(values, start=1):
            gain += value
            rate = gain / (draft_cost + self.v(m + 1))
            if rate > best:
                best_m, best = m, rate
        return best_m, best

    def prune(self, tree: DraftTree) -> DraftTree:
        """The nodes worth verifying: the m nodes most likely to be reached, m chosen to give the
        most expected tokens per unit of time (m = 0: send nothing).

        Every estimate is below 1, so a node always ranks after its parent and any best-m set is a
        tree. Ranking across branches lets a likely head chain go ahead of a long, unlikely
        retrieval branch that precedes it in tree order."""
        if not len(tree):
            return tree
        path = self.path_values(tree)
        order = sorted(range(len(tree)), key=lambda i: (-path[i], i))
        best_m, _ = self.best_send([path[i] for i in order])
        pruned = tree.subset(sorted(order[:best_m]))
        pruned.retrieval_hit = tree.retrieval_hit
        return pruned

    def depth(self, source: Source, k_max: int, offered: DraftTree | None = None) -> int:
        """K for a model that drafts `source`, before it drafts: the K with most tokens per unit of
        time, its chain verified with the best part of `offered` (nodes offered already, e.g. the
        hybrid's retrieval), each draft call costing c one-token target passes."""
        base = self.path_values(offered) if offered is not None else []
        best_k, best = 0, self.best_send(sorted(base, reverse=True))[1]
        chain, p, memo = [], 1.0, {}
        for k in range(1, k_max + 1):
            p *= self.chained(source, k, memo)
            chain.append(p)
            rate = self.best_send(sorted(base + chain, reverse=True), self.c * k)[1]
            if rate > best:
                best_k, best = k, rate
        return best_k

    # -- learning ----------------------------------------------------------------------------------
    def observe(self, offered: DraftTree, sent: DraftTree, statuses: list[str]) -> None:
        """Count accepts among the sent nodes that verification reached."""
        depths = sent.depths
        for i, status in enumerate(statuses):
            if status in (ACCEPTED, REJECTED):
                for k in self.keys(sent, i, depths[i]):
                    counts = self.counts.setdefault(k, [0.0, 0.0])
                    counts[0] += status == ACCEPTED
                    counts[1] += 1
        sent_keys = {k for i in range(len(sent)) for k in self.keys(sent, i, depths[i])}
        left_out = {k for i in range(len(offered)) for k in self.keys(offered, i, offered.depths[i])} - sent_keys
        for k in left_out & set(self.counts):  # pruned sources drift back towards the prior
            self.counts[k] = [x * DECAY for x in self.counts[k]]

    # -- as data (runstate.py) -----------------------------------------------------------------------
    def state(self) -> dict:
        """The counts, and the prices the run started with: a run resumed in another process, or after
        this process timed its passes again, prices its cycles as the uninterrupted run did."""
        return {"counts": {k: list(v) for k, v in self.counts.items()}, "prices": self._prices()}

    def set_state(self, state: dict) -> None:
        self.counts = {k: list(v) for k, v in state.get("counts", {}).items()}
        prices = state.get("prices")
        if prices:  # a state saved before prices travelled keeps this process's
            v = {int(n): float(x) for n, x in prices["v"].items()}
            self._v1 = _Interpolated(v)
            self._c1, self.batch = float(prices["c"]), 0  # batch 0: the next price_at sets _v and c anew
            self.price_at(1)

    def _prices(self) -> dict:
        """v at the alone profile's own measured points (a CostProfile), else at every size a tree may
        send; and c."""
        points = getattr(self._v1, "v", None)
        if isinstance(points, dict):
            return {"v": {int(n): float(x) for n, x in points.items()}, "c": self._c1}
        return {"v": {n: float(self._v1(n)) for n in range(1, MAX_PRICED + 1)}, "c": self._c1}


MAX_PRICED = 128  # sizes priced in a state without a profile's points: more than any tree sends (64 nodes + 1)


class _Interpolated:
    """v(n) from measured points, read as a cost profile reads them (linear between, along the last segment)."""

    def __init__(self, points: dict[int, float]):
        self.v = points

    def __call__(self, n: float) -> float:
        return interpolate(self.v, n)
