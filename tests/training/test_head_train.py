"""The draft head's training script (specviz/training/head_train.py) runs end to end on a tiny
target, and its evaluation (head_eval.py) counts α the way docs/HEAD.md defines it."""
from __future__ import annotations

import json
from types import SimpleNamespace

from specviz.head.model import DraftHead, load_head
from specviz.training import head_train
from specviz.training.head_eval import _tally
from tests.helpers.tiny import training_inputs


def test_the_script_writes_a_v1_head_and_its_card(tmp_path, monkeypatch):
    """`head_train.main` on a tiny target with a word tokenizer: it generates the data, trains, writes
    a v1 head with the vocabulary subset asked for, and card.json beside it with the held-out α,
    greedy and sampled, and the cost ratio c."""
    target, prompts, heldout = training_inputs(tmp_path, monkeypatch, layers=2, lines=8)
    out = tmp_path / "head.safetensors"
    args = ["--prompts", str(prompts), "--heldout", str(heldout), "--out", str(out), "--samples", "1",
            "--max-new-tokens", "8", "--steps", "3", "--batch", "16", "--vocab", "20", "--k", "3",
            "--eval-tokens", "6"]
    assert head_train.main(args) == 0
    head = load_head(out)
    assert type(head) is DraftHead and len(head.vocab_ids) == 20
    card = json.loads((tmp_path / "card.json").read_text())
    assert card["steps"] == 3 and card["vocab_subset"] == 20 and card["train_sequences"] == 16
    for name in ("greedy", "t0.7"):
        assert 0.0 <= card["eval"][name]["alpha"] <= 1.0
        assert 1 <= len(card["eval"][name]["alpha_by_position"]) <= 3
    assert card["eval"]["c"] > 0


def test_alpha_is_accepted_over_tried_by_draft_position():
    """Two cycles, one accepting 2 drafts then rejecting the third and one accepting 3 of 3: every
    position was tried twice, positions 1 and 2 accepted twice and position 3 once, so α is 5/6
    and α by position (1, 1, 0.5); the tokens per cycle count every committed token."""
    cycles = [SimpleNamespace(accepted=[0, 1], rejected=2), SimpleNamespace(accepted=[0, 1, 2], rejected=None)]
    run = SimpleNamespace(cycles=cycles, token_ids=[5] * 7, metrics={"drafted_tokens": 6, "draft_s": 0.006})
    got = _tally([run], subset={5})
    assert got["alpha"] == round(5 / 6, 3) and got["alpha_by_position"] == [1.0, 1.0, 0.5]
    assert got["mean_accepted_tokens"] == 3.5 and got["draft_ms_per_token"] == 1.0
    assert got["answer_tokens_in_subset"] == 1.0
