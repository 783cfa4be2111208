"""The cycle loop: propose → verify in one target pass → commit → roll back caches.

Invariant between cycles: the target cache holds every committed token but the newest,
and `last_logits` are the target logits the newest token was chosen from. Each verify pass
feeds [newest] + draft, so the pass that checks the draft also yields the bonus token.
With no proposer (method "ar") every cycle is one plain decoding step.

A run's state is plain data (runstate.RunState): `state()` takes it out, `resume()` goes on
from it in any process (both in runstate.py). The KV caches are only an optimisation: `park()`
keeps them in this process, and a resumed run that finds none rebuilds them with one prefill,
timed apart (`rebuild`).
"""
from __future__ import annotations

import time
from typing import Iterator

import torch

from specviz.decoding import runstate
from specviz.decoding.activity import ACTIVITY
from specviz.decoding.planner import Planner, batch_cost, verify_cost
from specviz.decoding.prefills import PREFILLS, Prefill
from specviz.decoding.recorder import record_counts, record_cycle, skipped_of
from specviz.decoding.runstate import LIVE, LiveCaches, RunState
from specviz.decoding.settings import DecodeSettings, resolve
from specviz.decoding.targets import LocalTarget, VerifyAnswer, VerifyRequest, batched, target_for
from specviz.decoding.trace import FROM_DRAFT, NOT_REACHED, TARGET, CycleTrace, RunTrace
from specviz.decoding.verify import verify
from specviz.drafting.sampling import Sampling
from specviz.drafting.tree import DraftTree
from specviz.loading.loader import LoadedModel, check_tokenizers, same_tokenizer
from specviz.passes.kvcache import cache_len, keep_path, rollback
from specviz.pricing.timing import sync
from specviz.proposers import make_proposer
from specviz.proposers.base import ProposeContext, Proposer
from specviz.served.remote import HIDDEN_REFUSED


class Decoder:
    """Speculative (or plain) decoding of one prompt, one cycle per `step()`."""

    def __init__(self, target: LoadedModel, prompt, settings: DecodeSettings | None = None,
                 draft: LoadedModel | None = None, *, proposer: Proposer | None = None,
                 verifier: LocalTarget | None = None, **kw):
        """`settings`, or keyword arguments naming DecodeSettings' fields and proposer knobs (with
        `settings` too, they change it). `proposer` is a ready-made Proposer (one under test, or a
        parked one); its name is the run's method.
        `verifier` answers the verify passes (decoding/targets.py); by default the run's own
        passes, or the model's shared BatchedTarget when `share_passes` is set."""
        settings = resolve(settings, proposer, kw)
        start = runstate.new_state(target, prompt, settings, draft)  # checks and encodes; runs no model
        self.sampling = Sampling(settings.temperature, settings.top_p, settings.seed)
        self.vocab = target.vocab_size
        if draft is not None and settings.method == "draft" and same_tokenizer(target, draft):
            self.vocab = check_tokenizers(target, draft)  # already checked: read from its cache
        self.prompt_ids = start.prompt_ids
        if proposer is None and settings.method != "ar":
            proposer = make_proposer(settings.method, target, draft, **dict(settings.knobs))
        self.proposer = proposer
        self.target, self.record = target, settings.record
        # cost-aware drafting (planner.py): on by default; plan=False verifies every offered node
        self.planner = None
        if settings.plan and self.proposer is not None:
            batched = batch_cost(target) if settings.share_passes else None
            self.planner = Planner(self.sampling.greedy, verify_cost(target), self.proposer.call_cost, batched)
        self.k = self.k_max = int(settings.k)
        self.adaptive_k, self.max_new_tokens = settings.adaptive_k, int(settings.max_new_tokens)
        self.options, self.shown, self.run_id = start.options, start.shown, start.run_id
        # a proposer that reads the target's hidden state gets it from the engine's own passes
        self.wants_hidden = self.proposer is not None and self.proposer.needs_hidden
        self._answered_by(target, settings, verifier)
        self._start_empty()

    def _answered_by(self, target: LoadedModel, settings: DecodeSettings, verifier) -> None:
        """Who answers the verify passes (targets.py): this run alone, or one pass with other runs;
        and whether the prefill and the draft calls are shared with them. A served target
        (RemoteTarget) is asked over HTTP: its server batches, and its prefix cache shares
        prefills, so neither is done here."""
        self.local = target_for(target)
        remote = target.remote is not None
        if remote and self.wants_hidden:
            raise ValueError(HIDDEN_REFUSED)
        self.verifier = verifier or (batched(target) if settings.share_passes and not remote else self.local)
        self.share_passes = settings.share_passes  # model drafts, too, may run in one batch with other runs'
        self.share = settings.share_prefill and not remote

    def _start_empty(self) -> None:
        """The run before its prefill: no tokens, no cycles, no caches, no time spent."""
        self.ids = list(self.prompt_ids)
        self.origins: list[str] = []
        self.cycle_of: list[int] = []
        self.token_texts: list[str] = []
        self.cycles: list[CycleTrace] = []
        self.n_cycles = 0
        self.cache = None
        self.last_logits: torch.Tensor | None = None
        self._hidden: torch.Tensor | None = None  # rows of the latest pass, after the final norm
        self.last_hidden: torch.Tensor | None = None  # the row last_logits came from
        self.prefill_shared = False  # the prompt's prefill was another run's, copied (prefills.py)
        self.elapsed = self.prefill_s = self.rebuild_s = 0.0
        self.rebuilds = 0
        self.done = False
        self.proposer_state: dict | None = None  # set by resume; applied after a rebuild

    # -- the run's state as data (runstate.py) -------------------------------------------------
    def state(self, since: int = 0) -> RunState:
        """This run as plain data; its trace holds the cycles from `since` on (0: all)."""
        return runstate.state_of(self, since)

    @classmethod
    def resume(cls, target: LoadedModel, state: RunState, draft: LoadedModel | None = None,
               live: LiveCaches = LIVE, verifier: LocalTarget | None = None) -> "Decoder":
        """Go on from `state`, with this process's parked caches if they match, else rebuilt lazily."""
        return runstate.resume(cls, target, state, draft, live, verifier)

    def park(self, live: LiveCaches = LIVE) -> None:
        """Keep this run's caches in this process for a later `resume` at the same length."""
        if self.cache is not None:
            live.put(self.run_id, len(self.ids), self.cache, self.proposer)

    # -- model calls -------------------------------------------------------------------
    def _forward(self, tokens: list[int], last_only: bool = False) -> torch.Tensor:
        """A pass of this run's own (prefill, rebuild): logits, and the hidden rows if needed."""
        logits, self._hidden = self.local.forward(tokens, self.cache, last_only=last_only, hidden=self.wants_hidden)
        return logits[:, : self.vocab]

    def _verify_pass(self, tree: DraftTree) -> VerifyAnswer:
        request = VerifyRequest([self.ids[-1]] + tree.tokens, tree, self.cache, self.vocab, self.wants_hidden)
        answer = self.verifier.verify(request)
        self._hidden = answer.hidden
        return answer

    # -- the loop ----------------------------------------------------------------------
    def prefill(self) -> None:
        """Run the prompt through the target and commit the first new token."""
        t0 = time.perf_counter()
        shared = PREFILLS.take(self.target.model, self.prompt_ids, self.wants_hidden) if self.share else None
        if shared is None:
            self.cache = self.local.new_cache()
            try:
                logits = self._forward(self.prompt_ids, last_only=True)
            except BaseException:
                if self.share:  # others may be waiting for this prefill: let them compute their own
                    PREFILLS.release(self.target.model, self.prompt_ids)
                raise
            hidden = self._hidden[-1] if self.wants_hidden else None
            shared = Prefill(self.cache, logits[-1], hidden)
            if self.share:
                PREFILLS.put(self.target.model, self.prompt_ids, shared)
        else:
            self.cache, self.prefill_shared = shared.cache, True
        self.last_logits = shared.logits
        if self.wants_hidden:
            self.last_hidden = shared.hidden
        first = shared.first_token(self.sampling)  # = sampling.pick(last_logits), its p shared
        self._commit([first], [TARGET], -1)
        if self.proposer is not None and not self.done:
            self.proposer.start(list(self.ids))
        self._sync()
        self.prefill_s = time.perf_counter() - t0
        self.elapsed += self.prefill_s

    def rebuild(self) -> None:
        """Refill empty caches with one prefill of the committed tokens (all but the newest).

        `last_logits`, the random generator and the proposer's own state came with the run's
        state, so what follows is what would have followed with the old caches.
        """
        t0 = time.perf_counter()
        self.cache = self.local.new_cache()
        if len(self.ids) > 1:
            self._forward(self.ids[:-1], last_only=True)
        if self.proposer is not None:
            self.proposer.rebuild(list(self.ids))
            self.proposer.set_state(self.proposer_state or {})
        self._sync()
        self.rebuild_s += time.perf_counter() - t0
        self.rebuilds += 1

    def step(self) -> CycleTrace | None:
        """One cycle; None when the run has already finished."""
        span = ACTIVITY.begin()
        try:
            cycle = self._step()
        finally:
            concurrent = ACTIVITY.end(span)
        if cycle is not None:
            cycle.concurrent = concurrent
        return cycle

    def _step(self) -> CycleTrace | None:
        if self.cache is None and not self.done:
            self.rebuild() if self.origins else self.prefill()
        if self.done:
            return None
        t0 = time.perf_counter()
        n = len(self.ids)
        budget = self.max_new_tokens - len(self.origins)
        offered, tree = self._propose(min(self.k, budget - 1))
        self._sync()
        t1 = time.perf_counter()
        cycle = CycleTrace(index=self.n_cycles, k=min(self.k, budget - 1), greedy=self.sampling.greedy,
                           offered=len(offered), skipped=skipped_of(self.proposer))
        if self.planner is not None and self.planner.batch > 1:
            cycle.priced_batch, cycle.sent_alone = self.planner.batch, self._sent_alone(offered)
        cycle.cache_before = self._cache_lengths()
        answer = self._verify_pass(tree)
        logits = answer.logits
        self._sync()
        t2 = time.perf_counter()
        cycle.shared_by, cycle.verify_pass_s, cycle.served = answer.shared, answer.pass_s, answer.served
        verdict = verify(tree, logits, self.sampling)
        self._learn(offered, tree, verdict)
        new = [tree.tokens[i] for i in verdict.accepted] + [verdict.new_token]
        kinds = [FROM_DRAFT] * len(verdict.accepted) + [verdict.new_kind]
        self._rollback(n, tree, verdict.accepted)
        self.last_logits = logits[verdict.final_row]
        if self.wants_hidden:
            self.last_hidden = self._hidden[verdict.final_row]
        kept = self._commit(new, kinds, cycle.index)
        if self.record:
            record_cycle(cycle, tree, verdict, logits, self.sampling, self.target.token_text)
        else:  # the same shape, without what costs time to read
            record_counts(cycle, tree, verdict)
        cycle.committed = new[:kept]
        cycle.committed_text = self.token_texts[len(self.token_texts) - kept:] if self.record and kept else []
        cycle.origins = kinds[:kept]
        cycle.cache_after = self._cache_lengths()
        self._adapt(cycle)
        if self.done and self.proposer is not None:  # e.g. suffix decoding learns from finished runs
            self.proposer.finish(self.run_id, list(self.ids), len(self.prompt_ids))
        t3 = time.perf_counter()
        cycle.draft_s, cycle.verify_s, cycle.other_s = t1 - t0, t2 - t1, t3 - t2
        self.elapsed += t3 - t0
        cycle.elapsed_s, cycle.total_tokens = self.elapsed, len(self.origins)
        self.cycles.append(cycle)
        self.n_cycles += 1
        return cycle

    def __iter__(self) -> Iterator[CycleTrace]:
        while (cycle := self.step()) is not None:
            yield cycle

    def run(self) -> RunTrace:
        for _ in self:
            pass
        return self.trace()

    # -- helpers -----------------------------------------------------------------------
    def _propose(self, k: int) -> tuple[DraftTree, DraftTree]:
        """(what the proposer offered, what is worth verifying): the planner may send less, or nothing."""
        if self.proposer is None or k < 1:
            return DraftTree(), DraftTree()
        if self.planner is not None:  # priced at the batch its verify pass is expected to run in
            self.planner.price_at(self.verifier.expected_batch() if self.share_passes else 1)
        if self.planner is not None and self.proposer.paid_per_call:  # choose K before paying for it
            k = self.planner.depth(self.proposer.source, k)
            if k < 1:
                return DraftTree(), DraftTree()
        ctx = ProposeContext(self.ids, self.last_logits, k, self.sampling, len(self.prompt_ids), self.planner,
                             self.last_hidden, self.share_passes)
        offered = self.proposer.propose(ctx).limit_depth(k)
        return offered, offered if self.planner is None else self.planner.prune(offered)

    def _sent_alone(self, offered: DraftTree) -> int:
        """How many of `offered` the planner would send to a pass of this run alone (the narration
        says what load changed); the planner is left priced as it was."""
        batch = self.planner.batch
        self.planner.price_at(1)
        try:
            return len(self.planner.prune(offered))
        finally:
            self.planner.price_at(batch)

    def _learn(self, offered: DraftTree, sent: DraftTree, verdict) -> None:
        """The planner's running acceptance counts, from the nodes verification reached."""
        if self.planner is not None:
            statuses = [verdict.nodes[i].status if i in verdict.nodes else NOT_REACHED for i in range(len(sent))]
            self.planner.observe(offered, sent, statuses)

    def _rollback(self, n: int, tree: DraftTree, accepted: list[int]) -> None:
        """Target keeps the n committed positions (newest included) plus the accepted path."""
        if tree.is_chain:
            rollback(self.cache, n + len(accepted))
        else:
            keep_path(self.cache, n, [n + i for i in accepted])  # moves only the accepted path
        if self.proposer is not None:
            self.proposer.rollback(n + len(accepted) + 1)

    def _commit(self, tokens: list[int], kinds: list[str], cycle: int) -> int:
        """Append tokens up to the budget and the first end-of-sequence; return how many."""
        kept = 0
        for tok, kind in zip(tokens, kinds):
            if len(self.origins) >= self.max_new_tokens:
                break
            self.ids.append(tok)
            self.origins.append(kind)
            self.cycle_of.append(cycle)
            self.token_texts.append(self.target.token_text(tok))
            kept += 1
            if tok in self.target.eos_ids:
                self.done = True
                break
        if len(self.origins) >= self.max_new_tokens:
            self.done = True
        return kept

    def _cache_lengths(self) -> dict[str, int]:
        out = {"target": cache_len(self.cache)}
        if self.proposer is not None and self.proposer.cache_len() is not None:
            out["draft"] = self.proposer.cache_len()
        return out

    def _adapt(self, cycle: CycleTrace) -> None:
        """Adaptive K (the transformers heuristic): +2 after a full accept, −1 after a miss."""
        if self.proposer is not None:
            self.proposer.observe(cycle)
        if self.adaptive_k and cycle.nodes:
            full = cycle.rejected is None
            self.k = min(self.k_max, self.k + 2) if full else max(1, self.k - 1)

    def _sync(self) -> None:
        """Wait for the device, so that a timer read after this covers the work queued before it."""
        sync(self.target.device)

    def trace(self) -> RunTrace:
        return self.state().trace()


def iter_cycles(target: LoadedModel, prompt, **kw) -> Iterator[CycleTrace]:
    """The step-wise form: yields one CycleTrace per cycle."""
    yield from Decoder(target, prompt, **kw)


def generate(target: LoadedModel, prompt, settings: DecodeSettings | None = None,
             draft: LoadedModel | None = None, **kw) -> RunTrace:
    """Decode `prompt` and return the RunTrace; the arguments are Decoder's (e.g. method="ar" for
    plain decoding; k=None takes the method's default, proposers.default_k)."""
    return Decoder(target, prompt, settings, draft, **kw).run()
