"""The answer corpus's builder (specviz/training/corpus_build.py): it writes a tiny target's greedy answers with
its tokenizer's digest, so that target (and no other tokenizer) drafts from the file; bad prompt files get a
sentence and exit status 2, not a traceback."""
from __future__ import annotations

import json

from specviz.loading.loader import tiny_random
from specviz.proposers.corpus import FORMAT, for_target, tokenizer_digest
from specviz.training import corpus_build
from tests.helpers.tiny import word_tokenizer


def test_it_writes_answers_that_its_target_drafts_from(tmp_path, monkeypatch, capsys):
    """Three prompts give three answers of at most --max-new-tokens ids, each the target's own greedy
    continuation, written with the tokenizer's digest; for_target then hands the file to that target."""
    target = tiny_random(vocab_size=40, layers=2, seed=2, tokenizer=word_tokenizer(40))
    monkeypatch.setattr(corpus_build, "load", lambda spec: target)
    prompts = tmp_path / "p.txt"
    prompts.write_text("# a comment\nw5 w6 w7\nw9 w8\nw10 w11 w12 w13\n")
    out = tmp_path / "answers.json"
    assert corpus_build.main(["--prompts", str(prompts), "--max-new-tokens", "6", "--batch", "2",
                              "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["format"] == FORMAT and data["tokenizer"] == tokenizer_digest(target.tokenizer)
    assert len(data["answers"]) == 3 and all(0 < len(a) <= 6 for a in data["answers"])
    assert data["made"]["prompt_count"] == 3 and data["made"]["tokens"] == sum(map(len, data["answers"]))
    assert "3/3 prompts" in capsys.readouterr().out
    assert for_target(target, out) is not None


def test_bad_prompt_files_get_a_sentence(tmp_path, capsys):
    """A missing prompt file and one with no prompts each end with status 2 and a sentence naming the problem."""
    assert corpus_build.main(["--prompts", str(tmp_path / "none.txt"), "--out", str(tmp_path / "a.json")]) == 2
    assert "no such prompt file" in capsys.readouterr().err
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n")
    assert corpus_build.main(["--prompts", str(empty), "--out", str(tmp_path / "a.json")]) == 2
    assert "no prompts" in capsys.readouterr().err
