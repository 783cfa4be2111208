"""The target answers verify requests: the one seam between a run's cycle and the model that checks it.

A cycle hands its draft over as a `VerifyRequest` (the tokens to feed, the tree that says who sees
whom, the run's KV cache) and gets back a `VerifyAnswer` (a row of logits per token, the hidden
states when the proposer needs them, and how the pass was shared). Two targets answer here:

- `LocalTarget`: one forward pass per request, exactly as a run alone does it. Timing runs
  (bench, Compare, the AR baseline) always use it.
- `BatchedTarget`: requests that wait at the same moment, from any number of runs on one model,
  are answered by one ragged pass (`passes/ragged.py`): every linear layer runs once over all
  their tokens, attention stays per run. A request that finds no pass running and nobody waiting
  runs at once, alone, as LocalTarget would, so one session pays nothing extra. While a pass
  runs, newcomers queue; when it ends, all of them go in the next one.

A target served elsewhere (vLLM, `RemoteTarget`) answers the same request from the same data: the
tokens, the tree's parents and the run's context ids (its TokenCache); the server's prefix cache
stands in for the local KV cache.
"""
from __future__ import annotations

import os
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import torch

from specviz.drafting.tree import DraftTree
from specviz.models.families import final_norm
from specviz.models.loaded import LoadedModel
from specviz.passes import fastpath, ragged
from specviz.passes.kvcache import TokenCache, cache_len, new_cache, undo_pass
from specviz.passes.rounds import Rounds, Slot
from specviz.served.remote import HIDDEN_REFUSED, rows_to_logits

MAX_PASS_TOKENS = 512  # rows in one batched pass: its logits alone are rows × vocabulary floats


@dataclass
class VerifyRequest:
    """One run's verify pass: [newest committed token] + the draft's nodes, over the run's cache."""
    tokens: list[int]
    tree: DraftTree  # parents say who attends to whom; a chain is plain causal attention
    cache: Any  # the run's KV cache: a local pass appends these tokens to it
    vocab: int  # logits columns the run reads (a draft's tokenizer may cover fewer)
    hidden: bool = False  # also return the final hidden states (the draft head reads them)


@dataclass
class VerifyAnswer:
    logits: torch.Tensor  # (len(tokens), vocab)
    hidden: torch.Tensor | None  # (len(tokens), hidden size): after the final norm, when asked for
    shared: int = 1  # requests this pass answered, this one included (1: it ran alone)
    pass_s: float = 0.0  # the pass's own wall time; the caller's wait for it may be longer
    served: dict | None = None  # a served target's report: prompts, prompt tokens, cached tokens


class LocalTarget:
    """Answers each request with its own forward pass."""

    new_cache = staticmethod(new_cache)  # the kind of cache this target's passes append to

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self._norm: torch.nn.Module | None = None

    def expected_batch(self) -> int:
        """How many runs the next verify pass is expected to answer: alone, one."""
        return 1

    @property
    def norm(self) -> torch.nn.Module:
        """Where hidden states are read (the final norm), found the first time they are asked for."""
        if self._norm is None:
            self._norm = final_norm(self.loaded.model)
        return self._norm

    @torch.inference_mode()
    def forward(self, tokens: list[int], cache, position_ids=None, mask=None, last_only: bool = False,
                hidden: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(logits, hidden or None) of one pass over `tokens`, appended to `cache`; the hidden rows
        are the final norm's outputs (ragged.Features)."""
        # The prefill needs only the last row: skipping the LM head on the prompt saves a
        # (prompt × vocabulary) matmul, as transformers' generate does.
        ids = torch.tensor([tokens], device=self.loaded.device)
        fast = fastpath.forward(self.loaded.model, ids, cache, position_ids, mask, keep=1 if last_only else 0)
        if fast is not None:  # our own pass: the modules' numbers with far fewer ops (fastpath.py)
            return fast[0][0], (fast[1][0] if hidden else None)
        extra = {"logits_to_keep": 1} if last_only else {}
        features = ragged.Features(self.norm) if hidden else None
        try:
            out = self.loaded.model(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=position_ids,
                                    attention_mask=mask, **extra)
        finally:
            if features is not None:
                features.remove()
        return out.logits[0], (features.rows() if hidden else None)

    def verify(self, request: VerifyRequest) -> VerifyAnswer:
        t0 = time.perf_counter()
        logits, hidden = self.forward(request.tokens, request.cache, *self._layout(request), hidden=request.hidden)
        return VerifyAnswer(logits[:, : request.vocab], hidden, 1, time.perf_counter() - t0)

    def _layout(self, request: VerifyRequest) -> tuple:
        """(position_ids, mask) of a solo pass: none for a chain, the tree's own otherwise."""
        if request.tree.is_chain:
            return None, None
        model = self.loaded
        mask = request.tree.model_mask(request.cache, model.model.config, model.dtype, model.device)
        return request.tree.position_ids(cache_len(request.cache), model.device), mask


class BatchedTarget(LocalTarget):
    """Answers the requests waiting at the same moment with one ragged pass (see the module docstring)."""

    def __init__(self, loaded: LoadedModel, max_tokens: int = MAX_PASS_TOKENS, gather: int = 1,
                 gather_s: float = 0.0):
        """`gather` > 1 makes a pass wait up to `gather_s` for that many requests (for tests and
        studies that need passes shared for certain; the app waits for nobody)."""
        super().__init__(loaded)
        self.ragged = ragged.supports(loaded.model)
        # without ragged passes a round holds one request: the others wait for the next round
        self.rounds = Rounds(self._answer, size=lambda r: len(r.tokens),
                             max_size=max_tokens if self.ragged else 1, gather=gather, gather_s=gather_s)

    def verify(self, request: VerifyRequest) -> VerifyAnswer:
        return self.rounds.submit(request)

    def expected_batch(self) -> int:
        """How many runs the next pass will likely answer: those waiting now plus this one, or as
        many as the latest round answered when it was recent (a class pressing Step together)."""
        return self.rounds.expected()

    def leave(self) -> None:
        """One of the runs a gather waits for has finished: from now on, wait for one fewer."""
        self.rounds.leave()

    # the rounds' knobs and counters, under the names tests and the load study use
    gather = property(lambda self: self.rounds.gather, lambda self, v: setattr(self.rounds, "gather", v))
    gather_s = property(lambda self: self.rounds.gather_s, lambda self, v: setattr(self.rounds, "gather_s", v))
    passes = property(lambda self: self.rounds.passes)
    shared_passes = property(lambda self: self.rounds.shared_passes)
    most_shared = property(lambda self: self.rounds.most_shared)

    def _answer(self, batch: list[Slot]) -> int:
        if len(batch) == 1:  # alone: exactly a LocalTarget's pass
            self._solo(batch[0])
            return 1
        before = [cache_len(s.request.cache) for s in batch]
        t0 = time.perf_counter()
        try:
            rows = [self._row(s.request) for s in batch]
            norm = self.norm if any(s.request.hidden for s in batch) else None
            logits, hidden = ragged.forward(self.loaded.model, rows, norm)
        except Exception:  # noqa: BLE001 -- put every cache back and answer each request alone
            for slot, n in zip(batch, before):
                undo_pass(slot.request.cache, n)
                self._solo(slot)
            return 1
        pass_s = time.perf_counter() - t0
        for i, slot in enumerate(batch):
            keep = hidden[i] if slot.request.hidden else None
            slot.settle(VerifyAnswer(logits[i][:, : slot.request.vocab], keep, len(batch), pass_s))
        return len(batch)

    def _solo(self, slot: Slot) -> None:
        try:
            slot.settle(LocalTarget.verify(self, slot.request))
        except Exception as e:  # noqa: BLE001 -- it belongs to the request's own thread
            slot.settle(error=e)

    def _row(self, request: VerifyRequest) -> ragged.Row:
        model, past = self.loaded, cache_len(request.cache)
        mask = request.tree.model_mask(request.cache, model.model.config, model.dtype, model.device)
        return ragged.Row(request.cache, request.tokens, request.tree.position_ids(past, model.device), mask)


class RemoteTarget:
    """A target served by vLLM (served/remote.py) answers the same requests: one HTTP request per
    pass, one prompt per row (the context, then the path to each node), `max_tokens=1`. Its cache
    is a TokenCache: the run's context ids; the server's prefix cache holds the keys and values,
    so a rolled-back draft costs nothing to forget. It never batches here: the server batches
    concurrent requests itself."""

    def __init__(self, loaded: LoadedModel):
        self.loaded, self.server = loaded, loaded.remote

    @staticmethod
    def new_cache() -> TokenCache:
        return TokenCache()

    def forward(self, tokens: list[int], cache: TokenCache, position_ids=None, mask=None, last_only: bool = False,
                hidden: bool = False) -> tuple[torch.Tensor, None]:
        """(logits, None) after each of `tokens` (the last only with `last_only`), appended to `cache`."""
        if hidden:
            raise ValueError(HIDDEN_REFUSED)
        starts = [len(tokens)] if last_only else range(1, len(tokens) + 1)
        logits, usage = self._rows([cache.ids + tokens[:i] for i in starts])
        cache.ids += tokens
        cache.served = usage
        return logits, None

    def expected_batch(self) -> int:
        """Its server batches on its own side: priced as alone here."""
        return 1

    def verify(self, request: VerifyRequest) -> VerifyAnswer:
        if request.hidden:
            raise ValueError(HIDDEN_REFUSED)
        t0 = time.perf_counter()
        context = request.cache.ids + request.tokens[:1]
        tree, paths = request.tree, [[]]
        for i, parent in enumerate(tree.parents):  # a node's prefix: its parent's, then its own token
            paths.append((paths[parent + 1] if parent >= 0 else []) + [tree.tokens[i]])
        logits, usage = self._rows([context + path for path in paths])
        request.cache.ids += request.tokens
        request.cache.served = usage
        return VerifyAnswer(logits[:, : request.vocab], None, 1, time.perf_counter() - t0, usage)

    def _rows(self, prompts: list[list[int]]) -> tuple[torch.Tensor, dict]:
        rows, usage = self.server.next_logprobs(prompts)
        # top_k: the target distribution these rows define is top-k, then temperature, then top-p
        return rows_to_logits(rows, self.loaded.vocab_size, self.loaded.device), dict(usage.as_dict(),
                                                                                      top_k=self.server.top_k)


def target_for(loaded: LoadedModel) -> LocalTarget | RemoteTarget:
    """Who runs a model's own passes: this process, or the server that serves it."""
    return RemoteTarget(loaded) if loaded.remote is not None else LocalTarget(loaded)


_BATCHED: "weakref.WeakKeyDictionary[torch.nn.Module, BatchedTarget]" = weakref.WeakKeyDictionary()
_BATCHED_LOCK = threading.Lock()


def batched(loaded: LoadedModel) -> BatchedTarget:
    """The one BatchedTarget of this process for `loaded`'s model: every run on it meets there."""
    with _BATCHED_LOCK:
        target = _BATCHED.get(loaded.model)
        if target is None:
            target = _BATCHED[loaded.model] = BatchedTarget(loaded)
        return target


def _fresh_in_child() -> None:
    """A forked GPU worker starts with only the calling thread: no pass is running there, so it
    gets new targets and a lock nobody holds."""
    global _BATCHED_LOCK
    _BATCHED_LOCK = threading.Lock()
    _BATCHED.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_in_child)
