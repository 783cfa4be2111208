"""Sampled bench repeats are other answers: repeat r draws with seed r, ours and HF's alike (no model loaded)."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from specviz.measure import bench


def _args(temperature: float, repeats: int = 3):
    return bench.parse_args(["--prompts", "p.json", "--out", "o", "--temperature", str(temperature),
                             "--repeats", str(repeats)])


def test_sampled_repeats_draw_with_their_own_seed(monkeypatch):
    """_measure gives repeat r seed r for every variant, anchors and ours, so a sampled prompt's median
    is over 3 answers, not one answer timed 3 times; the report says so in its settings."""
    seen = []

    def fake(target, ids, variant, draft, args, seed=0):
        seen.append((variant, seed))
        return {"token_ids": [seed] * (seed + 1)}

    monkeypatch.setattr(bench, "_hf_call", fake)
    monkeypatch.setattr(bench, "_ours_call", fake)
    target = SimpleNamespace(encode=lambda text, chat: [1, 2])
    rows = bench._measure(target, None, {"prompt": "x"}, ["hf", "pld"], _args(0.7))
    assert sorted(seen) == [("hf", 0), ("hf", 1), ("hf", 2), ("pld", 0), ("pld", 1), ("pld", 2)]
    assert rows["pld"]["new_tokens_repeats"] == [1, 2, 3]  # three answers, not one
    assert bench.settings_of(_args(0.7))["seeds"] == "one a repeat"
    assert "seeds" not in bench.settings_of(_args(0.0))


def test_the_seed_reaches_hf_and_ours(monkeypatch):
    """HF's sampled generate draws from torch's global generator, seeded per call: the same seed gives
    the same draws and another seed others; ours gets the seed as generate's argument."""
    model = SimpleNamespace(generate=lambda x, **kw: torch.cat([x, torch.randint(0, 1000, (1, 4))], 1))
    target = SimpleNamespace(eos_ids={0}, device="cpu", model=model)
    args = _args(0.7)
    one = bench._hf_call(target, [1, 2], "hf", None, args, seed=1)["token_ids"]
    assert one == bench._hf_call(target, [1, 2], "hf", None, args, seed=1)["token_ids"]
    assert one != bench._hf_call(target, [1, 2], "hf", None, args, seed=2)["token_ids"]

    got = {}
    metrics = dict(mean_accepted_tokens=1.0, acceptance_rate=0.5, retrieval_success=None, cycles=1,
                   draft_s=0.0, verify_s=0.0, other_s=0.0, acceptance_by_position=[])
    monkeypatch.setattr(bench, "generate", lambda *a, **kw: got.update(kw) or SimpleNamespace(token_ids=[3],
                                                                                             metrics=metrics))
    bench._ours_call(target, [1, 2], "pld", None, args, seed=2)
    assert got["seed"] == 2
