"""The project's own draft head (specviz/head/model.py): under sampling a chain, each token drawn
from its own q; under greedy decoding a small tree of its top choices (`_tree`), which greedy
verification keeps exact whatever it holds.

The head reads the target's final hidden state at the position ctx.last_logits came from. It asks
for it with `needs_hidden`, and the engine, which ran that pass and knows which row it committed
from, hands it over as ctx.last_hidden (and keeps it in the run's state). The head keeps nothing
between cycles.

Head v2 (specviz/head/v2.py) is not shipped and does not draft here: its features (two decoder
layers' outputs beside the final norm's) are not among what the engine's passes return. Its
training evaluates it offline (specviz/training/head2_eval.py).
"""
from __future__ import annotations

import hashlib
import weakref
from pathlib import Path

import torch

from specviz.drafting.sampling import Sampling
from specviz.drafting.tree import DraftTree, Source
from specviz.head.model import DEFAULT_PATH, DraftHead, check_target, load_head, target_parts
from specviz.passes import speedups
from specviz.passes.rounds import Rounds, Slot
from specviz.pricing.cost_profile import PROFILE_MIN_PARAMS
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.method_spec import PER_CALL, MethodSpec, SourceSpec
from specviz.served.remote import HIDDEN_REFUSED

_HEADS: dict[tuple, torch.nn.Module] = {}  # loaded heads by (file, dtype, device); frozen, so shared
_DIGESTS: dict[tuple, str] = {}  # their files' content digests, which name a head's timed calls (_priced)


class _Calls:
    """One head call for many runs: the rows that wait at the same moment go through the head and
    the subset LM head as one batch (passes/rounds.py). A row alone runs exactly as before.

    Shared per (head, target LM head), so it also holds the frozen LM head restricted to the head's
    vocabulary subset, gathered once, not once per run (a Step that starts a run would copy megabytes)."""

    def __init__(self, head, embed: torch.nn.Module, lm_head: torch.nn.Module):
        self.head, self.embed = head, embed
        self.lm = self.w = None
        _subset_lm(self, lm_head)
        self.rounds = Rounds(self._batch, size=lambda r: 1 if r[0].dim() == 1 else r[0].shape[0],
                             max_size=MAX_ROWS)

    def one(self, f: torch.Tensor, x: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(the predicted hidden state, its subset logits) for hidden state `f` and next token `x`."""
        pred = self.head(f, self.embed(torch.tensor(x, device=f.device)).to(f.dtype))
        return pred, self.lm(pred)

    def many(self, f: torch.Tensor, xs: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(predicted hidden states, subset logits) for the rows of `f` (rows × hidden) and their
        next tokens `xs`, in one batch: a greedy tree's frontier (HeadProposer._tree)."""
        pred = self.head(f, self.embed(torch.tensor(xs, device=f.device)).to(f.dtype))
        return pred, self.lm(pred)

    @staticmethod
    def root(f: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """A path's state before its first step: the target's hidden state alone."""
        return (f,)

    def frontier(self, states: tuple[torch.Tensor, ...], xs: list[int], share: bool):
        """(the paths' next states, their subset logits) for a stacked frontier (HeadProposer._tree)."""
        pred, logits = self.rounds.submit((states[0], xs)) if share else self.many(states[0], xs)
        return (pred,), logits

    @torch.inference_mode()
    def _batch(self, slots: list[Slot]) -> int:
        """Each request is (f, x), one row, or (F, xs), a tree's frontier: all rows in one batch."""
        if len(slots) == 1:
            f, x = slots[0].request
            slots[0].settle(self.one(f, x) if f.dim() == 1 else self.many(f, x))
            return 1
        f = torch.cat([s.request[0].reshape(-1, s.request[0].shape[-1]) for s in slots])
        xs = [x for s in slots for x in (s.request[1] if s.request[0].dim() == 2 else [s.request[1]])]
        pred, logits = self.many(f, xs)
        row = 0
        for slot in slots:
            n = 1 if slot.request[0].dim() == 1 else slot.request[0].shape[0]
            part = slice(row, row + n)
            slot.settle((pred[row], logits[row]) if slot.request[0].dim() == 1 else (pred[part], logits[part]))
            row += n
        return len(slots)


def _subset_lm(calls, lm_head: torch.nn.Module) -> None:
    """Give `calls` (a _Calls) the target's frozen LM head restricted to its head's
    vocabulary subset (`lm`, its weight `w`), in the head's dtype, and the target's CPU speed-ups
    where it runs with them: the head's products are as small-M."""
    head = calls.head
    w = lm_head.weight.detach()[head.vocab_ids].to(next(head.parameters()).dtype)
    calls.lm = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
    calls.lm.weight = torch.nn.Parameter(w, requires_grad=False)
    calls.w = calls.lm.weight
    speedups.follow(torch.nn.ModuleList([head, calls.lm]), lm_head)


MAX_ROWS = 64  # runs in one head round: many rows cost little more than one (docs/bench/2026-12-01.md)
# greedy drafting builds a tree (HeadProposer._tree): children per node, and nodes grown per depth
WIDTH, BEAM = 3, 3
HEAD = "head"  # its nodes' source kind
PRICED_DEPTH = 3  # the tree depth timed to price one call (HeadProposer._priced)
# per LM head: (a weak reference to its head, their _Calls)
_CALLS: "weakref.WeakKeyDictionary[torch.nn.Module, tuple]" = weakref.WeakKeyDictionary()


def _calls_for(head, embed: torch.nn.Module, lm_head: torch.nn.Module) -> _Calls:
    """The one _Calls of this process for (head, LM head)."""
    kept = _CALLS.get(lm_head)
    if kept is None or kept[0]() is not head:
        kept = _CALLS[lm_head] = (weakref.ref(head), _Calls(head, embed, lm_head))
    return kept[1]


class HeadProposer(Proposer):
    """Autoregressive drafting: each draft call feeds the head its own predicted hidden state."""
    spec = MethodSpec(
        "head", "Draft head (bundled target)", "drafts with the draft head trained for SpecViz's bundled model",
        default_k=8, paid=PER_CALL, offered_as_draft=True, sources=(SourceSpec(HEAD, "head", "purple", by_model=True),))
    source = Source(HEAD)
    needs_hidden = True
    # one head call in one-token target passes: timed per machine at build (`_priced`); this where nothing is
    # timed (a target too small to profile). Measured on an AVX2 CPU first (docs/HEAD.md)
    call_cost = 0.07
    KNOBS = ("path", "width", "beam")

    def __init__(self, head, target_model: torch.nn.Module, width: int = WIDTH, beam: int = BEAM):
        embed, _norm, lm_head = target_parts(target_model)
        if not isinstance(head, DraftHead):
            raise ValueError(f"method 'head' drafts with a {DraftHead.FORMAT} head, not "
                             f"{getattr(head, 'FORMAT', type(head).__name__)}: head v2 is not shipped, and the "
                             "engine does not hand it its features (docs/HEAD.md)")
        if width < 1 or beam < 1:
            raise ValueError(f"the head's tree needs width and beam of at least 1 (got {width} and {beam})")
        self.head, self.width, self.beam = head, width, beam
        self.dtype = next(head.parameters()).dtype
        self.vocab = lm_head.weight.shape[0]
        self.calls = _calls_for(head, embed, lm_head)

    @classmethod
    def build(cls, target, draft=None, path=None, width: int | None = None, beam: int | None = None, **knobs):
        if draft is not None:
            raise ValueError("method 'head' drafts with the project's trained head; do not pass a draft model")
        cls.check_knobs(knobs)
        if getattr(target, "remote", None) is not None:
            raise ValueError(HIDDEN_REFUSED)
        dtype = speedups.draft_dtype(target.model, target.dtype)
        key = (str(path or DEFAULT_PATH), str(dtype), str(target.device))
        head = _HEADS.get(key)
        if head is None:  # read once per process; a forked GPU worker inherits it with the target
            head = _HEADS[key] = load_head(path, dtype=dtype, device=target.device)
            _DIGESTS[key] = hashlib.sha256(Path(key[0]).read_bytes()).hexdigest()[:16]
        check_target(head, target.model, path or DEFAULT_PATH)
        proposer = cls(head, target.model, int(WIDTH if width is None else width), int(BEAM if beam is None else beam))
        proposer.call_cost = proposer._priced(target, _DIGESTS[key])
        return proposer

    def _priced(self, target, digest: str) -> float:
        """One draft call in one-token target passes on this machine: a greedy tree PRICED_DEPTH deep
        (the drafting the benchmark and the app's default do; a sampled chain's one-row calls cost
        no more), timed once and cached beside the target's cost profile (costs.work_cost), so the
        planner prices K with one fixed number per machine. The class's value for a target too
        small to profile. `digest` names the head file by its content, wherever it lies."""
        if target.n_params < PROFILE_MIN_PARAMS:
            return type(self).call_cost
        from specviz.pricing import costs  # times work: loaded only for a real target

        hidden = torch.randn(self.head.cfg.hidden, generator=torch.Generator().manual_seed(0))
        ctx = ProposeContext(ids=[0], last_logits=torch.zeros(self.vocab), k=PRICED_DEPTH, sampling=Sampling(),
                             prompt_len=1, last_hidden=hidden.to(device=target.device, dtype=self.dtype))
        work = (f"head {digest} {str(self.dtype).removeprefix('torch.')} width {self.width} beam {self.beam} "
                f"depth {PRICED_DEPTH}")
        return costs.work_cost(target, work, lambda: self.propose(ctx)).cost / PRICED_DEPTH

    # -- drafting ------------------------------------------------------------------------------
    def _q(self, logits: torch.Tensor, sampling) -> tuple[int, torch.Tensor]:
        """(x, q) from subset logits: q is the processed head distribution over the whole
        vocabulary, 0 off the subset."""
        q_sub = sampling.display_probs(logits) if sampling.greedy else sampling.probs(logits)
        j = int(q_sub.argmax()) if sampling.greedy else sampling.draw(q_sub)
        q = torch.zeros(self.vocab, dtype=q_sub.dtype, device=q_sub.device)
        q[self.head.vocab_ids] = q_sub
        return int(self.head.vocab_ids[j]), q

    @torch.inference_mode()
    def propose(self, ctx: ProposeContext) -> DraftTree:
        f, x = ctx.last_hidden, ctx.ids[-1]
        if f is None:
            raise RuntimeError("the draft head needs ctx.last_hidden: the engine hands it over to "
                               "proposers whose needs_hidden is True")
        f = f.to(self.dtype)  # a float32 target's hidden state, for a bfloat16 head (speedups.draft_dtype)
        if ctx.sampling.greedy and self.width > 1:
            return self._tree(ctx, f, x)
        tokens, qs = [], []
        for _ in range(ctx.k):
            # with other runs drafting beside this one, their calls go through the head together
            pred, logits = self.calls.rounds.submit((f, x)) if ctx.share_passes else self.calls.one(f, x)
            x, q = self._q(logits, ctx.sampling)
            tokens.append(x)
            qs.append(q)
            f = pred  # the next call reads the head's own guess of the hidden state
        return DraftTree.chain(tokens, qs, sources=[self.source] * len(tokens))

    def _tree(self, ctx: ProposeContext, f: torch.Tensor, x: int) -> DraftTree:
        """Greedy only: a tree from the head's top choices, ctx.k deep. Each depth is one batched
        head call over the `beam` likeliest nodes so far (by the product of q along their path);
        each of them gets its `width` likeliest tokens as children, child b with Source branch b,
        so the planner keeps one estimate per choice and depth. Siblings share their parent's q.

        Greedy verification follows the target's argmax wherever it is among the children, so the
        tree is exact whatever it holds; under sampling a top-b pick is not a draw from q, so
        sampling keeps the chain.

        A node's state is what the head reads next from its path, its predicted hidden state;
        siblings share their parent's. The states at one depth stack into one batch."""
        tokens, parents, qs, sources = [], [], [], []
        frontier = [(-1, self.calls.root(f), x, 1.0)]  # (node, state, token, path score)
        for _ in range(ctx.k):
            states = tuple(torch.stack(parts) for parts in zip(*(s for _, s, _, _ in frontier)))
            xs = [t for _, _, t, _ in frontier]
            pred, logits = self.calls.frontier(states, xs, ctx.share_passes)
            probs = ctx.sampling.display_probs(logits)
            top_p, top_j = probs.topk(self.width, dim=-1)
            top_ids = self.head.vocab_ids[top_j].tolist()
            children = []
            for r, ((node, _, _, score), ps) in enumerate(zip(frontier, top_p.tolist())):
                q = torch.zeros(self.vocab, dtype=probs.dtype, device=probs.device)
                q[self.head.vocab_ids] = probs[r]
                for b, (tok, pb) in enumerate(zip(top_ids[r], ps)):
                    children.append((len(tokens), tuple(s[r] for s in pred), tok, score * pb))
                    tokens.append(tok)
                    parents.append(node)
                    qs.append(q)
                    sources.append(self.source if b == 0 else Source(HEAD, branch=b))
            frontier = sorted(children, key=lambda c: -c[3])[: self.beam]
        return DraftTree(tokens, parents, qs, sources)
