"""The sampled rule with one device transfer per cycle (verify.verify_sampling_prefetched).

It must judge exactly as verify_sampling does (same numbers, same draws, same generator state
after), read from the "device" once per cycle, and keep the engine's output on the target's
distribution (χ² in test_exactness, run here with the prefetched rule forced).
"""
from __future__ import annotations

import functools

import pytest
import torch

from specviz.decoding import engine
from specviz.decoding import verify as rules
from specviz.drafting.sampling import Sampling
from specviz.drafting.tree import DraftTree

VOCAB = 40


def _tree(seed: int) -> tuple[DraftTree, torch.Tensor]:
    """A random tree of up to 12 nodes, siblings up to 4, some nodes with a q and some point masses,
    and logits for it."""
    g = torch.Generator().manual_seed(seed)
    n = int(torch.randint(0, 12, (), generator=g))
    parents = [int(torch.randint(-1, i, (), generator=g)) if i else -1 for i in range(n)]
    tokens = torch.randint(0, VOCAB, (n,), generator=g).tolist()
    qs = [torch.softmax(torch.randn(VOCAB, generator=g) * 2, 0) if torch.rand((), generator=g) < 0.6 else None
          for _ in range(n)]
    logits = torch.randn(n + 1, VOCAB, generator=g) * 3
    # a q-node draws its token from q half the time, so acceptances happen
    for i, q in enumerate(qs):
        if q is not None and torch.rand((), generator=g) < 0.5:
            tokens[i] = int(torch.multinomial(q, 1, generator=g))
    return DraftTree(tokens, parents, qs if any(q is not None for q in qs) else None), logits


def _same(a: rules.Verdict, b: rules.Verdict) -> None:
    assert (a.accepted, a.rejected, a.new_token, a.new_kind, a.final_row) == \
        (b.accepted, b.rejected, b.new_token, b.new_kind, b.final_row)
    assert a.nodes == b.nodes
    assert sorted(a.p_rows) == sorted(b.p_rows) and all(torch.equal(a.p_rows[j], b.p_rows[j]) for j in a.p_rows)
    assert (a.residual is None) == (b.residual is None)
    if a.residual is not None:
        assert torch.equal(a.residual, b.residual)


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_the_prefetched_rule_judges_exactly_as_the_lazy_one(temperature, top_p):
    """On 300 random trees (chains, wide and deep ones, q-drafts and point masses), the prefetched
    rule gives the same verdict as verify_sampling, bit for bit: the same nodes accepted, the same
    p(x), q(x), acceptance probabilities and draws, the same new token from the same residual, and
    the random generator in the same state afterwards."""
    outcomes = set()
    for seed in range(300):
        tree, logits = _tree(seed)
        lazy, fetched = Sampling(temperature, top_p, seed), Sampling(temperature, top_p, seed)
        a = rules.verify_sampling(tree, logits, lazy)
        b = rules.verify_sampling_prefetched(tree, logits, fetched)
        _same(a, b)
        assert torch.equal(lazy.generator.get_state(), fetched.generator.get_state())
        outcomes.add(a.new_kind)
    assert {"resampled", "bonus"} <= outcomes


class Device(torch.Tensor):
    """A tensor that counts reads into host values (.cpu(), .item(), .tolist(), float(), int()), as a
    stand-in for a GPU tensor, where each is a device sync. What .cpu() returns is a plain tensor."""
    reads = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in ("cpu", "item", "tolist", "__float__", "__int__"):
            Device.reads += 1
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*args, **(kwargs or {}))
            return out.as_subclass(torch.Tensor) if isinstance(out, torch.Tensor) else out
        return super().__torch_function__(func, types, args, kwargs)


def test_one_read_from_the_device_per_cycle():
    """With the logits and q on a counting 'device', the prefetched rule reads from it once per
    verdict, whatever the tree; the lazy rule reads once per tried node or more."""
    counts = {"lazy": [], "prefetched": []}
    for seed in range(40):
        tree, logits = _tree(seed)
        if len(tree) < 3:
            continue
        device_tree = DraftTree(tree.tokens, tree.parents,
                                [q.as_subclass(Device) if q is not None else None for q in tree.q]
                                if tree.q is not None else None)
        for name, rule in (("lazy", rules.verify_sampling), ("prefetched", rules.verify_sampling_prefetched)):
            Device.reads = 0
            rule(device_tree, logits.as_subclass(Device), Sampling(1.0, 1.0, seed))
            counts[name].append(Device.reads)
    assert set(counts["prefetched"]) == {1}, counts["prefetched"]
    assert min(counts["lazy"]) >= 2 and max(counts["lazy"]) > 3, counts["lazy"]


@pytest.fixture
def prefetch_always(monkeypatch):
    """The engine's rule with prefetching forced, as on a GPU."""
    monkeypatch.setattr(engine, "verify", functools.partial(rules.verify, prefetch=True))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tree, draft model", "tree, deterministic drafts"])
def test_sampled_tokens_follow_the_target_with_the_prefetched_rule(prefetch_always, name):
    """test_exactness's χ² check, through the engine with the prefetched rule: (t2, t3, t4) of
    N seeded runs follow the target's exact joint at T 0.7 and top-p 0.9."""
    from tests.decoding import test_exactness as ex

    p, origins = ex.p_value(ex.build_models(), name, ex.NUCLEUS)
    assert p > ex.ALPHA, p
    assert min(origins[ex.FROM_DRAFT], origins[ex.RESAMPLED], origins[ex.BONUS]) >= ex.N / 20, origins


@pytest.mark.slow
def test_the_prefetched_check_fails_for_a_broken_rule(prefetch_always, monkeypatch):
    """With the acceptance ratio upside down, the same check with the prefetched rule rejects the
    output: the check above can fail."""
    from tests.decoding import test_exactness as ex
    from tests.helpers import twins

    twins.install(monkeypatch, "acceptance ratio q/p")
    p, _ = ex.p_value(ex.build_models(), "tree, draft model", ex.NUCLEUS)
    assert p < ex.ALPHA, p
