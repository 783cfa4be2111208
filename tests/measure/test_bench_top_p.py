"""`python -m specviz bench --top-p`: the nucleus reaches both HF's generate and ours (no model loaded)."""
from __future__ import annotations

from types import SimpleNamespace

from specviz.measure import bench


def test_top_p_defaults_to_1_and_reaches_hf_and_ours(monkeypatch):
    assert bench.parse_args(["--prompts", "p.json", "--out", "o"]).top_p == 1.0
    args = bench.parse_args(["--prompts", "p.json", "--out", "o", "--temperature", "0.7", "--top-p", "0.9"])
    assert args.top_p == 0.9

    seen = {}
    model = SimpleNamespace(generate=lambda x, **kw: seen.setdefault("hf", kw) and x)
    target = SimpleNamespace(eos_ids={0}, device="cpu", model=model)
    bench._hf_call(target, [1, 2], "hf", None, args)
    assert seen["hf"]["do_sample"] and seen["hf"]["top_p"] == 0.9 and seen["hf"]["temperature"] == 0.7

    metrics = dict(mean_accepted_tokens=1.0, acceptance_rate=0.5, retrieval_success=None, cycles=1,
                   draft_s=0.0, verify_s=0.0, other_s=0.0, acceptance_by_position=[])
    monkeypatch.setattr(bench, "generate", lambda *a, **kw: seen.setdefault("ours", kw)
                        and SimpleNamespace(token_ids=[3], metrics=metrics))
    bench._ours_call(target, [1, 2], "head", None, args)
    assert seen["ours"]["top_p"] == 0.9 and seen["ours"]["temperature"] == 0.7
