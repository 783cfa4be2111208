"""Files written before the words were unified (2026-12-05), traces and advice surveys, still read,
with their old names mapped to the new ones (docs/GLOSSARY.md, "Retired names")."""
import json
from pathlib import Path

from specviz.decoding import tracefile

ASSETS = Path(__file__).resolve().parents[2] / "assets"


def test_a_trace_with_the_old_names_reads_as_one_with_the_new():
    """A file whose cycles say `beside`/`verify_shared`, whose metrics say `cycles_beside_others`/
    `most_beside` and whose settings say `share_prefill`/`batch_verify` reads to the same run as the
    same file written with `concurrent`/`shared_by`, `cycles_concurrent`/`most_concurrent` and
    `share_prefill`/`share_passes`; the values land in the new fields."""
    doc = json.loads((ASSETS / "lessons" / "greedy.json").read_text(encoding="utf-8"))
    run = doc["run"]
    for i, c in enumerate(run["cycles"]):
        c.pop("concurrent", None), c.pop("shared_by", None)
        c.update(beside=i % 3, verify_shared=1 + i % 2)
    for new in ("cycles_concurrent", "most_concurrent"):
        run["metrics"].pop(new, None)
    run["metrics"].update(cycles_beside_others=4, most_beside=2)
    run.setdefault("settings", {}).update(share_prefill=True, batch_verify=True)
    old = tracefile.loads(json.dumps(doc)).run
    assert [c.concurrent for c in old.cycles] == [i % 3 for i in range(len(old.cycles))]
    assert [c.shared_by for c in old.cycles] == [1 + i % 2 for i in range(len(old.cycles))]
    assert old.metrics["cycles_concurrent"] == 4 and old.metrics["most_concurrent"] == 2
    assert "cycles_beside_others" not in old.metrics
    assert old.settings["share_prefill"] is True and old.settings["share_passes"] is True
    assert "batch_verify" not in old.settings
    new = tracefile.loads(tracefile.dumps(old)).run
    assert new == old


def test_a_survey_in_an_older_format_reads_as_todays():
    """An advice survey written as format /2 (the concurrency timing under "load" and "load_note",
    each candidate's "per_step") reads to the same Survey as today's /5 with "concurrency",
    "concurrency_note" and "per_call"."""
    from specviz.advise import advice

    today = advice.read(ASSETS / "recorded_advice.json")
    doc = today.to_dict()
    assert doc["format"] == "specviz-advice/5" and doc["concurrency"] is not None
    old = {{"concurrency": "load", "concurrency_note": "load_note"}.get(k, k): v for k, v in doc.items()}
    old["format"] = "specviz-advice/2"
    old["measured"] = [{("per_step" if k == "per_call" else k): v for k, v in m.items()} for m in old["measured"]]
    assert "load" in old and "per_step" in old["measured"][0]
    assert advice.loads(json.dumps(old)) == today
    assert advice.loads(json.dumps(doc)) == today
