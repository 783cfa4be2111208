"""Shared helpers for tests on tiny random models (no network, milliseconds per forward)."""
from __future__ import annotations

import threading

import torch

from specviz.drafting.tree import DraftTree
from specviz.loading.loader import derive_draft, tiny_random
from specviz.passes.rounds import Rounds
from specviz.proposers.base import Proposer

PROMPTS = [[1, 5, 9, 2, 7], [3, 3, 3], [4, 8, 15, 16, 23, 30, 2, 11, 6]]
# a chat template for word_tokenizer's specials
CHAT = ("{% for m in messages %}<user> {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")


def pair(noise: float = 0.05, vocab: int = 32, seed: int = 0, layers: int = 2):
    """A tiny target and a draft derived from it; `noise` controls how often they agree."""
    target = tiny_random(vocab_size=vocab, layers=layers, seed=seed)
    return target, derive_draft(target, noise=noise, seed=seed + 1)


def word_tokenizer(n=40, swap=None):
    """A word-level tokenizer: specials at 0-3, then 'w4'..'w{n-1}'; `swap` exchanges two ids."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tmodels
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<eos>": 1, "<user>": 2, "<assistant>": 3, **{f"w{i}": i for i in range(4, n)}}
    if swap:
        a, b = swap
        vocab[f"w{a}"], vocab[f"w{b}"] = b, a
    backend = Tokenizer(tmodels.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>")
    tok.chat_template = CHAT
    return tok


def training_inputs(tmp_path, monkeypatch, layers: int, lines: int):
    """A tiny word-tokenizer target that `head_train.load` returns, a prompt file of `lines` lines and a
    held-out file: what the head training scripts read. Returns (target, prompts path, held-out path)."""
    from specviz.training import head_train

    target = tiny_random(vocab_size=40, layers=layers, seed=2, tokenizer=word_tokenizer(40))
    monkeypatch.setattr(head_train, "load", lambda spec, progress=None: target)  # prepare() loads it
    prompts, heldout = tmp_path / "prompts_train_x.txt", tmp_path / "heldout.txt"
    prompts.write_text("\n".join(" ".join(f"w{4 + (i * j) % 30}" for j in range(5)) for i in range(lines)) + "\n")
    heldout.write_text("w5 w6 w7\nw9 w8\n")
    return target, prompts, heldout


def hf_greedy(target, prompt_ids, n):
    """Plain greedy decoding by transformers' own generate, as the reference."""
    out = target.model.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=n,
                                min_new_tokens=n, pad_token_id=0, eos_token_id=None)
    return out[0, len(prompt_ids):].tolist()


class FixedTreeProposer(Proposer):
    """Proposes a random tree of given depth and branching each cycle (deterministic drafts)."""
    name = "fixed-tree"

    def __init__(self, depth=3, branching=2, vocab=32, seed=0):
        self.depth, self.branching, self.vocab = depth, branching, vocab
        self.gen = torch.Generator().manual_seed(seed)

    def propose(self, ctx):
        tokens, parents = [], []
        frontier = [-1]
        for _ in range(min(self.depth, ctx.k)):
            nxt = []
            for par in frontier:
                picks = torch.randperm(self.vocab, generator=self.gen)[: self.branching].tolist()
                if par == -1:  # make the first level sometimes right, so paths get accepted
                    picks[0] = int(ctx.last_logits.argmax())
                for tok in picks:
                    tokens.append(tok)
                    parents.append(par)
                    nxt.append(len(tokens) - 1)
            frontier = nxt[:1] + nxt[1:2]
        return DraftTree(tokens, parents)


class TwoChains(Proposer):
    """A tree of two chains from one chain proposer, drawn independently from the same q.

    Siblings drawn i.i.d. from q are what recursive rejection is exact for (SpecInfer). The
    inner proposer is rolled back to the committed tokens after each chain, so its cache never
    holds the other chain's drafts.
    """
    name = "two-chains"

    def __init__(self, inner: Proposer):
        self.inner = inner
        self.needs_hidden = inner.needs_hidden  # the engine hands the hidden state to the wrapper

    def start(self, ids):
        self.inner.start(ids)

    def propose(self, ctx):
        chains = []
        for _ in range(2):
            chains.append(self.inner.propose(ctx))
            self.inner.rollback(len(ctx.ids))
        a, b = chains
        parents = a.parents + [par + len(a) if par >= 0 else -1 for par in b.parents]
        return DraftTree(a.tokens + b.tokens, parents, a.q + b.q)

    def rollback(self, committed_len):
        self.inner.rollback(committed_len)

    def cache_len(self):
        return self.inner.cache_len()

    def observe(self, cycle):
        self.inner.observe(cycle)


def run_together(make, n: int, shared=None) -> list:
    """Run the n decoders make(i) builds, each in its own thread, at once; their RunTraces in order.
    A BatchedTarget `shared` that gathers their passes is told when each run ends."""
    out, errors = [None] * n, []

    def go(i):
        try:
            out[i] = make(i).run()
        except Exception as e:  # noqa: BLE001 -- reported below, with the thread's own error
            errors.append(e)
        finally:
            if shared is not None:
                shared.leave()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return out


class Gathered:
    """Several Rounds told to wait for `n` requests each, at most `seconds` (one for all, or one
    per Rounds); `leave()` (a run ended) tells all of them."""

    def __init__(self, rounds: list[Rounds], n: int, seconds: float | list[float] = 5.0):
        self.rounds = rounds
        waits = seconds if isinstance(seconds, list) else [seconds] * len(rounds)
        for r, s in zip(rounds, waits):
            r.gather, r.gather_s = n, s

    def leave(self) -> None:
        for r in self.rounds:
            r.leave()

    def close(self) -> None:
        for r in self.rounds:
            r.gather, r.gather_s = 1, 0.0
