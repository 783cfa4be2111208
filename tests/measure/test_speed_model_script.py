"""scripts/bench/speed_model.py's cut-and-grow check keeps what it measured: its traces and profile give
the same predictions again offline (`--from-traces`), so a change to the model is checked on the same runs."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from specviz.loading.loader import tiny_random
from tests.helpers.tiny import word_tokenizer

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench" / "speed_model.py"


def _script():
    spec = importlib.util.spec_from_file_location("speed_model_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_kept_traces_give_the_same_predictions_again(tmp_path, monkeypatch):
    """On a tiny word-tokenizer target, one prompt, prompt lookup cut and grown: the check writes a trace
    for our AR and each K (2, 4, 8, 16) and the profile, and `from_traces` on that folder gives back every
    row's prediction, measurement and by-size prediction exactly."""
    script = _script()
    target = tiny_random(vocab_size=40, layers=2, seed=3, tokenizer=word_tokenizer(40))
    monkeypatch.setattr(script, "load", lambda spec, progress=None: target)
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps([{"id": "p1", "prompt": "w5 w6 w7 w8 w5 w6 w7 w8 w5 w6"}]), encoding="utf-8")
    out = tmp_path / "out"
    assert script.main(["--prompts", str(prompts), "--modes", "cut,grow", "--methods", "pld", "--repeats", "1",
                        "--max-new-tokens", "10", "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "traces").iterdir()) == [
        "p1-ar-0.json", "p1-pld-16.json", "p1-pld-2.json", "p1-pld-4.json", "p1-pld-8.json"]
    kept = json.loads((out / "results.json").read_text(encoding="utf-8"))
    again = script.from_traces(out, None, ["cut", "grow"])
    assert len(again) == len(kept) == 5  # cut: 16 → 2, 4, 8; grow: 4 → 8, 16
    for a, b in zip(kept, again):
        assert {k: a[k] for k in ("prompt", "method", "mode", "fit_k", "k")} == \
            {k: b[k] for k in ("prompt", "method", "mode", "fit_k", "k")}
        for key in ("predicted", "measured", "predicted_by_size"):
            assert b[key] == pytest.approx(a[key], rel=1e-9), key
