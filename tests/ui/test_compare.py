"""The Compare and Theory & hardware tabs driven through gradio_client, on the bundled model.

The app runs in-process on a free port with its model pool primed with the session's bundled
model (conftest.py's `app_url`).
"""
from __future__ import annotations

import json
import re

import pytest

from specviz.measure.comparison import Comparison, Config, Shared, parse_rows
from specviz.viz.compare_figures import compare_table_html

gradio_client = pytest.importorskip("gradio_client")

PROMPT = "Write the days of the week, one per line: Monday, Tuesday, Wednesday."
ROWS = [["bundled", "pld", "", 4, 0], ["bundled", "logitspec", "", 3, 0], ["bundled", "layerskip", "", 2, 0]]
TIMEOUT_S = 900  # three configurations, a baseline and warm-ups on a busy 2-core machine


def frame(values) -> dict:
    return dict(zip(("status", "table", "chart", "source"), values))


def config_rows(table: str) -> list[str]:
    body = table.split('<tbody class="sv-cmp-configs">', 1)[1].split("</tbody>", 1)[0]
    return re.findall(r'<tr class="sv-cmp-row[^"]*">.*?</tr>', body)




@pytest.mark.bundled
@pytest.mark.slow
def test_three_configurations_give_three_rows_all_lossless(app_url):
    """Compare with three greedy configurations on the bundled model gives a table of three measured
    rows, each with a speedup and the lossless badge and a bar per row; the Theory tab then puts row 1 on
    the S(K) curve with its sentence, beside the target's cost profile (tests/ui/test_theory.py: the
    rows offered as its sources)."""
    client = gradio_client.Client(app_url, verbose=False)
    out = frame(client.predict({"headers": ["target", "method", "draft", "K", "temperature"], "data": ROWS},
                               PROMPT, 12, 1, 0, True, api_name="/compare"))
    assert "sv-status-ok" in out["status"], out["status"]
    rows = config_rows(out["table"])
    assert len(rows) == 3, out["table"]
    for row in rows:
        assert "lossless ✓" in row and "sv-cmp-error" not in row and "×" in row, row
    assert "sv-cmp-alarm-row" not in out["table"]
    bars = json.loads(out["chart"]["plot"])["data"][0]
    assert [x.split(" ")[0] for x in bars["x"]] == ["#1", "#2", "#3"] and all(y > 0 for y in bars["y"])
    status, _figure, html, cost, _waterfall, steps = client.predict("0", api_name="/theory")
    assert "sv-status-ok" in status, status
    assert "sv-waterfall" in steps and "paper S(K)" in steps  # the waterfall from the paper to the run
    assert "the model predicts" in html and "best fixed K" in html
    assert json.loads(cost["plot"])["data"][0]["name"] == "measured v(n)"  # the target's cost profile


@pytest.mark.bundled
@pytest.mark.slow
def test_bad_rows_get_messages_and_the_rest_run(app_url):
    """A bad method and a draft row without a draft each get a visible message; the good row is measured."""
    client = gradio_client.Client(app_url, verbose=False)
    rows = [["bundled", "nonsense", "", 4, 0], ["bundled", "draft", "", 4, 0], ["bundled", "pld", "", 2, 0]]
    out = frame(client.predict({"headers": ["target", "method", "draft", "K", "temperature"], "data": rows},
                               PROMPT, 6, 1, 0, True, api_name="/compare"))
    found = config_rows(out["table"])
    assert len(found) == 3
    assert "sv-cmp-error" in found[0] and "is not one of" in found[0]
    assert "sv-cmp-error" in found[1] and "needs a draft model" in found[1]
    assert "lossless ✓" in found[2]
    assert "could not run" in out["status"]


@pytest.mark.bundled
def test_batch_effect_panel_on_a_tiny_model(app_url, tmp_path, monkeypatch):
    """The batch-size panel measures a tiny model and then answers the same request from its cache."""
    from specviz.measure import batch_effect

    batch_effect.forget_cached()
    monkeypatch.setattr(batch_effect, "default_cache_file", lambda: tmp_path / "batch_effect.json")
    client = gradio_client.Client(app_url, verbose=False)
    status, figure, html = client.predict("tiny-random", 2, True, api_name="/batch_effect")
    assert "Measured now" in status and "batch 32" in html
    status, _, html = client.predict("tiny-random", 2, False, api_name="/batch_effect")
    assert "Read from the cache" in status and "cached result" in html


def test_a_differing_greedy_row_raises_a_visible_alarm():
    """The table shows an alarm row, not a badge, when a greedy row's tokens differ from the AR run's."""
    rows = [{"index": 1, "label": "pld, K=4, greedy", "method": "pld", "greedy": True, "error": None,
             "tokens_per_s": 10.0, "speedup": 1.2, "cycles": 5, "wall_s": 1.0, "lossless": False,
             "differs_at": 3, "run_token": "<b>", "ar_token": " the"}]
    html = compare_table_html(rows)
    assert "sv-cmp-alarm-row" in html and "differs at token 3" in html and "lossless ✓" not in html
    assert "<b>" not in html  # model text is escaped


def test_parse_rows_names_the_bad_cell():
    """Row parsing keeps good rows as configs and turns each bad one into a message naming it."""
    items = parse_rows([["bundled", "PLD", "", 4, 0], ["bundled", "pld", "", 1.5, 0], ["", "", "", None, None],
                        ["bundled", "draft", "x", 2, -1]])
    assert items[0] == Config("bundled", "pld", None, 4, 0.0)
    assert "Row 2" in items[1] and "whole number" in items[1]
    assert len(items) == 3 and "Row 3" in items[2] and "temperature" in items[2]


def test_comparison_continues_after_a_failing_row():
    """A row whose model fails to load is marked with the error while the other row is measured."""
    from tests.helpers.tiny import pair

    target, _ = pair()
    models = {"tiny": target}

    def get(spec):
        if spec not in models:
            raise ValueError(f"no model '{spec}'")
        return models[spec]

    comparison = Comparison([Config("missing", "pld", None, 2), Config("tiny", "pld", None, 2)],
                            Shared.of([1, 5, 9, 2, 7, 1, 5, 9], max_new_tokens=8, chat=False))
    list(comparison.run(get))
    first, second = comparison.rows()
    assert "no model 'missing'" in first["error"]
    assert second["error"] is None and second["lossless"] is True and second["speedup"] > 0


def test_theory_sentence_explains_a_miss_from_the_waterfall_never_from_noise():
    """The sentence gives the prediction, the measurement and the miss, and the best fixed K; a miss
    over 20 % names the waterfall step that moved S the most (here the verify cost), a small miss names
    none, and no sentence blames noise."""
    from specviz.measure.waterfall import Analysis
    from specviz.viz.compare_figures import theory_sentence

    steps = [dict(name="paper S(K)", value=2.0, sentence="start."), dict(name="verify cost v(n)", value=1.3,
             sentence="A verify pass cost 1.80 one-token passes."), dict(name="overhead", value=1.2, sentence="end.")]
    base = dict(kind="chain", method="pld", k=4, alpha=0.75, acceptance=[0.75] * 4, expected_len=2.05, c=0.0,
                v_k=1.2, v_run=1.8, verify_tokens=4.0, predicted=2.0, measured=1.2,
                curve=[(4, 2.0), (6, 2.2)], best=(6, 2.2), waterfall=steps)
    text = theory_sentence(Analysis(**base))
    assert "predicts 2.00× at K = 4" in text and "measured 1.20× (-40%)" in text and "best fixed K is 6" in text
    assert "'verify cost v(n)': A verify pass cost 1.80" in text
    close = theory_sentence(Analysis(**{**base, "measured": 1.95}))
    assert "(-3%)" in close and "moved it most" not in close  # 1.95 / 2.00 − 1 = −2.5 %, rounded to even
    assert not any("noise" in theory_sentence(Analysis(**{**base, "measured": m})) for m in (0.5, 1.95, 3.0))


def test_a_row_that_sent_no_draft_says_why():
    """A speculative row with no drafted token gets a sentence under it naming the reason (a draft
    as costly as the target; a planner that judged every offer too dear; nothing offered); a row
    that drafted, and the AR row, get none."""
    from specviz.viz.compare_figures import compare_table_html, nothing_sent

    base = dict(index=1, label="x", target="bundled", greedy=True, lossless=True, tokens_per_s=10.0, speedup=1.0,
                mean_accepted_tokens=1.0, alpha=0.0, cycles=5, wall_s=1.0)
    same = dict(base, method="draft", draft="bundled", drafted_tokens=0, offered_tokens=40)
    assert "costs as much as the target" in nothing_sent(same)
    assert "offered 40 draft tokens" in nothing_sent(dict(base, method="pld", drafted_tokens=0, offered_tokens=40))
    assert "nothing to offer" in nothing_sent(dict(base, method="pld", drafted_tokens=0, offered_tokens=0))
    assert nothing_sent(dict(base, method="pld", drafted_tokens=12, offered_tokens=40)) is None
    assert nothing_sent(dict(base, method="ar", drafted_tokens=0)) is None
    assert "No draft sent" in compare_table_html([same])


def test_the_recorded_compare_rows_explain_a_row_that_sent_nothing():
    """The Compare tab's recorded rows carry what each drafted, and every speculative row that
    drafted nothing explains itself in the table it opens on."""
    import json

    from specviz.ui.shared.recordings import RECORDED
    from specviz.viz.compare_figures import compare_table_html, nothing_sent
    rows = json.loads(RECORDED.read_text(encoding="utf-8"))["compare"]["rows"]
    spec = [r for r in rows if r["method"] != "ar"]
    assert spec and all(isinstance(r.get("drafted_tokens"), int) for r in spec)
    table = compare_table_html(rows)
    for r in spec:
        if r["drafted_tokens"] == 0:
            assert nothing_sent(r) and "No draft sent" in table
