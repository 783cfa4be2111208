"""A cycle's trace has one shape whether it was recorded or not (record=False only leaves out what
costs time to read: texts, top lists, the replacement's probability)."""
import pytest

import specviz
from specviz.decoding.trace import TARGET, NodeTrace
from tests.helpers.tiny import PROMPTS, pair


def _shape(run) -> list:
    return [(len(c.nodes), [(n.index, n.token, n.parent, n.depth, n.status, n.r, n.source) for n in c.nodes],
             c.accepted, c.rejected, c.new_kind, c.committed, c.origins) for c in run.cycles]


@pytest.mark.parametrize("method", ["draft", "logitspec"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_unrecorded_cycles_have_the_recorded_shape(method, temperature):
    """With record=False every cycle still has one NodeTrace per node sent, with the same statuses,
    draws and sources, and the kind of its new token (a bonus or a resample, not a plain step)."""
    target, draft = pair(noise=0.3, vocab=48, layers=3)
    kw = dict(method=method, draft=draft if method == "draft" else None, k=4, temperature=temperature,
              seed=5, max_new_tokens=40, chat=False, plan=False)  # every offered node is sent
    recorded = specviz.generate(target, PROMPTS[2] * 3, **kw)
    counted = specviz.generate(target, PROMPTS[2] * 3, record=False, **kw)
    assert _shape(counted) == _shape(recorded)
    assert all(isinstance(n, NodeTrace) for c in counted.cycles for n in c.nodes)
    assert any(c.new_kind != TARGET for c in counted.cycles)  # some bonus or resample was reported
    assert counted.metrics["acceptance_rate"] == recorded.metrics["acceptance_rate"]
