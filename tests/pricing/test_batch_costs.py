"""Load-aware drafting: a verify pass is priced at the batch it will run in (pricing/batch_costs.py),
so a crowded pass gets smaller drafts; the cycle records the batch it was priced at and the
narration says what load changed; greedy output stays plain greedy."""
import pytest

import specviz
from specviz.decoding import engine
from specviz.decoding.planner import Planner, key
from specviz.decoding.targets import BatchedTarget
from specviz.drafting.tree import DraftTree, Source
from specviz.pricing import batch_costs
from specviz.pricing.batch_costs import BatchCosts
from specviz.viz.narrate import narrate
from tests.helpers.tiny import PROMPTS, pair

LOOKUP = Source("lookup", ngram=3)
CHAIN = DraftTree.chain([5, 6, 7, 8, 9, 10, 11, 12], sources=[LOOKUP] * 8)
SIZES = [1, 2, 3, 5, 9, 17]


def crowd_costs() -> BatchCosts:
    """A CPU's shape: alone a pass is weight-bound (nearly flat in n); at 32 runs it is
    compute-bound (each token per run costs about a step more)."""
    alone = [0.040, 0.042, 0.043, 0.045, 0.048, 0.060]
    crowd = [0.200 * n for n in SIZES]
    middle = [(a + c) / 2 for a, c in zip(alone, crowd)]
    return BatchCosts("test", [1, 8, 32], SIZES, [alone, middle, crowd], 200)


def _planner(rate: float = 0.7, reached: int = 60) -> Planner:
    planner = Planner(greedy=True, v=crowd_costs().v_at(1), batched=crowd_costs())
    for depth in range(1, 9):
        planner.counts[key(LOOKUP, depth)] = [rate * reached, float(reached)]
    return planner


def test_the_planner_sends_fewer_nodes_when_it_prices_a_crowded_pass():
    """The same chain and the same acceptance counts: priced alone the planner sends the whole
    8-token chain (tokens are nearly free), priced for a pass shared by 32 runs it sends at most 2
    (each token now costs about a plain step); priced alone again, it sends all 8 again."""
    planner = _planner()
    alone = len(planner.prune(CHAIN))
    planner.price_at(32)
    crowded = len(planner.prune(CHAIN))
    planner.price_at(1)
    assert alone == 8 and crowded <= 2 and crowded < alone
    assert len(planner.prune(CHAIN)) == 8


def test_without_batch_costs_every_pass_is_priced_alone():
    """A planner with no BatchCosts (a tiny or served model) ignores the batch: same tree sent."""
    planner = Planner(greedy=True, v=crowd_costs().v_at(1))
    for depth in range(1, 9):
        planner.counts[key(LOOKUP, depth)] = [42.0, 60.0]
    sent = len(planner.prune(CHAIN))
    planner.price_at(32)
    assert planner.batch == 1 and len(planner.prune(CHAIN)) == sent


def test_batch_costs_interpolate_in_log_batch_and_rescale_a_draft_call():
    """v_B at a timed batch is r_B(n) / r_B(1); between timed batches it lies between theirs
    (log-B interpolation), past the largest it is the largest's; unit_at is r_1(1) / r_B(1)."""
    c = crowd_costs()
    assert c.v_at(32)(9) == pytest.approx(9.0) and c.v_at(1)(9) == pytest.approx(0.048 / 0.040)
    assert c.v_at(8)(9) < c.v_at(16)(9) < c.v_at(32)(9)
    assert c.v_at(100)(9) == pytest.approx(c.v_at(32)(9))
    assert c.unit_at(32) == pytest.approx(0.040 / 0.200)
    assert BatchCosts.from_dict(c.to_dict()) == c
    assert BatchCosts.from_dict({**c.to_dict(), "pass_s": [[1.0]]}) is None


def test_batch_costs_are_timed_once_and_read_back_from_the_cache_file(tmp_path):
    """batch_costs times each batch size once through the timer, stores the result in the cost
    cache file, and a second call (memory emptied) reads it back without timing."""
    from specviz.pricing import costs

    target, _ = pair()
    calls = []

    def timer(batch, sizes):
        calls.append(batch)
        return {n: 0.01 * batch * n for n in sizes}

    path = tmp_path / "costs.json"
    made = batch_costs.batch_costs(target, batches=(1, 4), sizes=(1, 3), cache_file=path, timer=timer)
    assert calls == [1, 4] and made.pass_s == [[0.01, 0.03], [0.04, 0.12]]
    costs.forget_cached()
    again = batch_costs.batch_costs(target, batches=(1, 4), sizes=(1, 3), cache_file=path,
                                    timer=lambda *a: pytest.fail("timed again"))
    assert again.pass_s == made.pass_s


class Crowded(BatchedTarget):
    """A shared target that always expects a crowd."""

    def __init__(self, loaded, batch: int):
        super().__init__(loaded)
        self.batch = batch

    def expected_batch(self) -> int:
        return self.batch


@pytest.mark.parametrize("method", ["pld", "logitspec"])
def test_a_crowded_run_records_its_priced_batch_and_stays_greedy(monkeypatch, method):
    """A run sharing passes on a target that expects 32 runs is priced at 32: each cycle records
    priced_batch 32 and what it would have sent alone, some cycle sent less than alone and the
    narration says so, and the tokens are plain greedy decoding's all the same."""
    target, _ = pair()
    monkeypatch.setattr(engine, "batch_cost", lambda t: crowd_costs())
    prompt = PROMPTS[0]
    plain = specviz.generate(target, prompt, method="ar", max_new_tokens=24, chat=False)
    decoder = engine.Decoder(target, prompt, method=method, k=8, max_new_tokens=24, chat=False,
                             share_passes=True, verifier=Crowded(target, 32))
    run = decoder.run()
    assert run.token_ids == plain.token_ids
    drafted = [c for c in run.cycles if c.offered]
    assert drafted and all(c.priced_batch == 32 and c.sent_alone is not None for c in drafted)
    cut = [c for c in drafted if c.sent_alone > len(c.nodes)]
    assert cut, [(c.offered, c.sent_alone, len(c.nodes)) for c in drafted]
    assert "32 runs were expected to share this pass" in narrate(cut[0])
    alone = engine.Decoder(target, prompt, method=method, k=8, max_new_tokens=24, chat=False).run()
    assert all(c.priced_batch == 1 and c.sent_alone is None for c in alone.cycles)
