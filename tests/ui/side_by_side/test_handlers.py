"""Side by side: two configurations on one prompt, stepped together, drawn by Decode's own views;
ready-made pairs paint with no model; a shared link opens one; the comparison's sentences."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from specviz.decoding.trace import RunTrace
from specviz.ui.decode import handlers as decode
from specviz.ui.runtime.state import MODELS, session_of
from specviz.ui.shared.run import on_screen
from specviz.ui.side_by_side import handlers as columns
from specviz.ui.side_by_side import sources as pair_sources
from specviz.ui.side_by_side.pairs import BY_KEY, PAIRS, pair_traces
from specviz.viz import pair_views as pv

TIMING = {"draft_s", "verify_s", "other_s", "elapsed_s", "verify_pass_s", "concurrent", "shared_by"}


def request(name: str, **query):
    return SimpleNamespace(session_hash=f"test-pair-{name}", query_params=query)


def out(values: tuple) -> dict:
    return dict(zip(columns.OUTPUTS, values))


def side_values(a: dict, b: dict, **shared) -> dict:
    values = {"prompt": shared.get("prompt", "one two three one two three one two"),
              "max_new_tokens": shared.get("max_new_tokens", 12), "chat": True}
    for side, own in (("a", a), ("b", b)):
        values.update({f"{side}_{k}": v for k, v in own.items()})
    return values


def untimed(run: RunTrace) -> list[dict]:
    """A run's cycles without the fields that hold wall-clock time."""
    return [{k: v for k, v in dataclasses.asdict(c).items() if k not in TIMING} for c in run.cycles]


def test_every_ready_made_pair_paints_with_no_model_loaded():
    """Each ready-made pair's two recordings exist, and opening it fills both columns, the race
    chart, the summary and the first-difference line without loading a model."""
    loaded_before = len(MODELS._models)
    for pair in PAIRS:
        ta, tb = pair_traces(pair)
        assert ta is not None and tb is not None, pair.key
        assert ta.meta["prompt"] == tb.meta["prompt"], f"{pair.key}: the two sides must share a prompt"
        shown = out(pair_sources.open_pair(pair.key, request(pair.key)))
        assert "sv-status-ok" in shown["pair_status"] and pair.title in shown["pair_status"]
        assert shown["a_narration"] and shown["b_narration"] and shown["a_tree"] is not None
        assert "sv-pair-diff" in shown["diff"] and "conditional" in shown["summary"] and "marginal" in shown["summary"]
        assert len(shown["race"].data) >= 2
    assert len(MODELS._models) == loaded_before


def test_the_pairs_say_what_they_should_about_their_outputs():
    """Greedy pairs on one target (Gemma's cross-family draft against its prompt lookup too) show the
    lossless badge; greedy against T = 1 shows where and why the outputs part; two families part
    because their targets differ."""
    for pair in PAIRS:
        ta, tb = pair_traces(pair)
        a = pv.Side(ta.run, ta.ar, ta.run.settings.get("target", "bundled"), ta.run.settings["temperature"] == 0, "A")
        b = pv.Side(tb.run, tb.ar, tb.run.settings.get("target", "bundled"), tb.run.settings["temperature"] == 0, "B")
        d = pv.first_difference(a, b)
        if a.target != b.target:
            assert pair.key == "two-families" and d.position is not None and "targets differ" in d.sentence
        elif a.greedy and b.greedy:
            assert d.level == "ok" and d.position is None and "lossless" in pv.difference_html(d), pair.key
        else:
            assert d.position is not None and "sampling" in d.sentence


def test_a_difference_under_greedy_on_one_target_is_an_error():
    """Two greedy runs of one target whose tokens differ are flagged as a bug, not explained away;
    different targets are explained as such."""
    ta, _ = pair_traces(BY_KEY["greedy-vs-sampling"])
    other = dataclasses.replace(ta.run, token_ids=[ta.run.token_ids[0]] + [7] * (len(ta.run.token_ids) - 1))
    d = pv.first_difference(pv.Side(ta.run, None, "t", True, "A"), pv.Side(other, None, "t", True, "B"))
    assert d.level == "error" and d.position == 1 and "bug" in d.sentence
    d = pv.first_difference(pv.Side(ta.run, None, "t1", True, "A"), pv.Side(other, None, "t2", True, "B"))
    assert d.level == "info" and "targets differ" in d.sentence


def test_a_shared_link_opens_the_pair_and_an_unknown_one_gets_a_message():
    """?pair=KEY selects the tab and opens that pair; an unknown key gets a message naming the
    valid ones; no parameter changes nothing."""
    values = pair_sources.from_link(request("link", pair="small-vs-large-k"))
    assert values[0].selected == "pair" and values[1]["value"] == "small-vs-large-k"
    assert "K = 2 against K = 12" in out(values[2:])["pair_status"]
    values = pair_sources.from_link(request("link-bad", pair="<b>nope</b>"))
    status = out(values[2:])["pair_status"]
    assert "sv-status-warn" in status and "good-vs-bad" in status and "<b>" not in status
    assert all(isinstance(v, type(columns.gr.skip())) for v in pair_sources.from_link(request("plain"))[:2])


def test_the_tab_opens_full_on_the_first_pair_and_a_new_visitor_holds_it():
    """Side by side opens on the first ready-made pair, as Decode opens on its example: the page's
    first paint has both columns' trees, the summary, the race chart, the slider over the pair's cycles,
    the chooser on the pair and A's and B's inputs set as the recordings were made. A new visitor's
    columns hold those recordings, so moving the slider shows cycle 3 of them with no model; after
    Reset the columns are empty and stay so."""
    import gradio as gr

    from specviz.ui.side_by_side import layout
    from specviz.ui.side_by_side.pairs import FIRST_PAIR
    from specviz.viz import instructive_cycle

    loaded_before = len(MODELS._models)
    with gr.Blocks():
        c = layout.build("an unrelated prompt")
    ta, tb = pair_traces(FIRST_PAIR)
    assert c["chooser"].value == FIRST_PAIR.key and c["inputs"]["prompt"].value == ta.meta["prompt"]
    assert c["a_tree"].value is not None and c["b_tree"].value is not None and c["race"].value is not None
    assert "conditional" in c["summary"].value and FIRST_PAIR.title in c["pair_status"].value
    assert c["cycle"].maximum == max(len(ta.run.cycles), len(tb.run.cycles)) - 1
    assert c["cycle"].value == instructive_cycle(ta.run) and "no draft" not in c["a_narration"].value  # it drafted
    assert c["inputs"]["a_method"].value == "draft" and c["inputs"]["b_method"].value == tb.run.settings["method"]
    assert c["inputs"]["b_k"].value == tb.run.settings["k"]
    a, b = columns.columns(request("first-visit"))
    assert a.replay is ta and b.replay is tb
    shown = out(columns.show_cycle(3, request("first-visit")))
    assert "Cycle 3" in shown["a_narration"] or "cycle 3" in shown["a_narration"].lower()
    columns.reset(request("first-visit"))
    a, b = columns.columns(request("first-visit"))
    assert a.replay is None and b.replay is None and on_screen(a)[0] is None
    assert len(MODELS._models) == loaded_before


@pytest.fixture
def bundled(bundled_target):
    """The bundled model in the app's model pool (what a visitor's Step loads)."""
    MODELS.put("bundled", bundled_target)
    return bundled_target


@pytest.mark.bundled
@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
def test_each_column_is_the_run_decode_makes(temperature, bundled):
    """Stepping both columns gives, in each, token for token and cycle for cycle (timings aside)
    the run Decode's Step makes for that column's configuration alone."""
    a = dict(target="bundled", method="pld", k=3, temperature=temperature, top_p=1.0, seed=5, adaptive_k=False)
    b = dict(target="bundled", method="logitspec", k=4, temperature=temperature, top_p=0.9, seed=6,
             adaptive_k=False)
    values = side_values(a, b)
    req = request(f"columns-{temperature}")
    for _ in range(4):
        shown = out(columns.step(req, None, **values))
    assert "sv-status-ok" in shown["a_status"] and "sv-status-ok" in shown["b_status"], shown
    col_a, col_b = columns.columns(req)
    for name, own, column in (("a", a, col_a), ("b", b, col_b)):
        alone = SimpleNamespace(session_hash=f"test-pair-decode-{name}-{temperature}")
        decode_values = {**own, "prompt": values["prompt"], "max_new_tokens": 12, "chat": True}
        for _ in range(4):
            decode.step(alone, None, **decode_values)
        decode_run = session_of(alone).run()
        pair_run = column.run()
        assert pair_run.token_ids == decode_run.token_ids and len(pair_run.cycles) == 4
        assert untimed(pair_run) == untimed(decode_run)


@pytest.mark.bundled
def test_one_column_error_keeps_the_other_columns_run(bundled):
    """A bad setting in B (K out of range) gets a message in B's status while A steps on and keeps
    its cycles."""
    a = dict(target="bundled", method="pld", k=3, temperature=0.0, top_p=1.0, seed=0, adaptive_k=False)
    b = dict(a, k=10_000)
    req = request("one-bad")
    for _ in range(2):
        shown = out(columns.step(req, None, **side_values(a, b)))
    assert "sv-status-error" in shown["b_status"] and "K" in shown["b_status"]
    assert "sv-status-ok" in shown["a_status"]
    assert len(columns.columns(req)[0].run().cycles) == 2


def test_race_replays_both_runs_on_one_clock():
    """Race sends frames whose texts grow with the clock and ends on both whole runs, saying who led."""
    req = request("race")
    pair_sources.open_pair("good-vs-bad", req)
    columns.RACE_S = 0.0
    frames = [out(f) for f in columns.race(req)]
    assert len(frames) == columns.RACE_FRAMES + 1
    assert "Race over" in frames[-1]["pair_status"] and ("leads" in frames[-1]["pair_status"]
                                                          or "both have" in frames[-1]["pair_status"])
    lengths = [f["a_text"].count("<span") for f in frames[:-1]]
    assert lengths == sorted(lengths) and lengths[0] < lengths[-1]


@pytest.mark.bundled
@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "sampled"])
def test_step_and_run_under_forked_workers_match_one_process(bundled, forked, temperature, monkeypatch):
    """Under the ZeroGPU stand-in (each model call in a forked worker), Step both then Run both give
    each column the same tokens, committed cycle by cycle with the same origins, as in one process,
    and the calls went to workers. (A forked worker runs torch on one thread, so probabilities may
    differ in their last bits, and with them the order of near-tied alternatives in a head's tree.)

    The planner's v(n) is fixed for both, as in tests/ui/runtime/test_zerogpu.py: measured, it depends on the
    thread count, and a forked worker runs torch on one thread."""
    from specviz.decoding import engine, planner

    monkeypatch.setattr(engine, "verify_cost", lambda target: planner.PRIOR_V)
    b = dict(target="bundled", method="pld", k=4, temperature=temperature, top_p=1.0, seed=3, adaptive_k=False)
    # sampled, the head's near-tied alternatives (see above) would meet other draws: both sides retrieve
    a = dict(b, method="draft", draft="head", k=3) if temperature == 0 else dict(b, k=2, seed=2)
    values = side_values(a, b, max_new_tokens=10)
    req = request(f"forked-{temperature}")
    columns.step(req, None, **values)
    frames = [out(f) for f in columns.run(req, None, **values)]
    assert "sv-status-ok" in frames[-1]["pair_status"], frames[-1]["pair_status"]
    forked_runs = [s.run() for s in columns.columns(req)]
    assert {name for name, _ in forked} >= {"step"}

    from specviz.ui.runtime import zerogpu
    zerogpu.use_backend(None)  # the same, in this process
    req = request(f"in-process-{temperature}")
    columns.step(req, None, **values)
    list(columns.run(req, None, **values))
    for mine, theirs in zip(forked_runs, (s.run() for s in columns.columns(req))):
        assert mine.token_ids == theirs.token_ids and len(mine.token_ids) >= 10
        assert mine.origins == theirs.origins
        assert [(c.committed, c.origins) for c in mine.cycles] == [(c.committed, c.origins) for c in theirs.cycles]


def test_export_both_replays_both_and_each_side_is_a_decode_trace(tmp_path):
    """Export both writes one file that Replay both loads into the two columns unchanged; each side
    inside it reads as a Decode trace; Decode's reader refuses the whole file with a message
    pointing to this tab, and a damaged pair file is refused naming its side."""
    import json

    from specviz.decoding import tracefile

    req = request("export")
    pair_sources.open_pair("greedy-vs-sampling", req)
    update, status = pair_sources.export_pair(req)
    assert "Exported both" in status
    path = update["value"]
    again = request("export-again")
    shown = out(pair_sources.replay_pair(path, again))
    assert "sv-status-ok" in shown["pair_status"]
    before, after = columns.columns(req), columns.columns(again)
    for x, y in zip(before, after):
        assert on_screen(x)[0] == on_screen(y)[0]
    doc = json.loads(open(path, encoding="utf-8").read())
    assert tracefile.loads(json.dumps(doc["a"])).run == on_screen(before[0])[0]
    with pytest.raises(tracefile.TraceFileError, match="Side by side tab"):
        tracefile.loads(json.dumps(doc))
    doc["b"]["run"]["cycles"][0]["nodes"] = [{"index": 0, "token": 1, "text": "a", "parent": -1, "depth": 9}] \
        if doc["b"]["run"]["cycles"][0]["nodes"] else "x"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    shown = out(pair_sources.replay_pair(str(bad), request("export-bad")))
    assert "sv-status-error" in shown["pair_status"] and "Side B" in shown["pair_status"]


def test_two_compare_rows_open_as_a_and_b():
    """Compare's rows 1 and 4 become A's and B's configurations (the trained head as the picker's
    draft model), with Compare's prompt and this tab selected; a missing row gets a message."""
    from specviz.ui.compare import DEFAULT_ROWS

    rows = DEFAULT_ROWS + [["bundled", "draft", "head", 3, 0.7]]
    got = pair_sources.from_compare(rows, 2, 5, "Why is the sky blue?", 20, True)
    assert got[0].selected == "pair" and "sv-status-ok" in got[-1]
    values = dict(zip(columns.INPUTS, got[1:-1]))
    assert (values["a_method"], values["a_k"], values["a_temperature"]) == ("pld", 16, 0.0)
    assert (values["b_method"], values["b_draft"], values["b_k"], values["b_temperature"]) == ("draft", "head", 3, 0.7)
    assert values["prompt"] == "Why is the sky blue?" and values["max_new_tokens"] == 20
    got = pair_sources.from_compare(rows, 1, 9, "x", 20, True)
    assert "sv-status-error" in got[-1] and "no row 9" in got[-1]
    assert all(isinstance(v, type(columns.gr.skip())) for v in got[:-1])


@pytest.mark.bundled
@pytest.mark.parametrize("bad,expected", [
    (dict(target="nobody/no-such-model"), "nobody/no-such-model"),
    (dict(method="draft", draft="tiny-random"), "has no tokenizer"),
    (dict(target="HuggingFaceTB/SmolLM2-360M-Instruct"), "SmolLM2-360M"),
    (dict(target="gemma3-270m", method="draft", draft="bundled"), "Not enough memory"),
], ids=["unknown model", "tokenizers differ", "hub preset offline", "pair too large"])
def test_bad_input_in_b_gets_a_message_and_a_keeps_its_run(bundled, bad, expected, monkeypatch):
    """An unknown model, a draft without a tokenizer, a hub pair the hub cannot serve here, or a pair
    too large for the memory available (1 GB, for Gemma 3 270M not loaded yet) in B: B's status names
    the problem, and A steps on with its cycles kept. (Offline mode, as in tests/project/test_hostile.py:
    an unreachable hub not declared offline retries for about a minute.)"""
    import huggingface_hub

    from specviz.ui.runtime import limits

    monkeypatch.setattr(limits, "available_bytes", lambda: 2 ** 30)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    a = dict(target="bundled", method="pld", k=3, temperature=0.0, top_p=1.0, seed=0, adaptive_k=False)
    req = request(f"bad-{expected[:10]}")
    for _ in range(2):
        shown = out(columns.step(req, None, **side_values(a, dict(a, **bad))))
    assert "sv-status-error" in shown["b_status"] and expected in shown["b_status"], shown["b_status"]
    assert "sv-status-ok" in shown["a_status"] and len(columns.columns(req)[0].run().cycles) == 2


@pytest.mark.bundled
def test_a_too_long_prompt_gets_a_message_in_both_columns_and_keeps_their_runs(bundled):
    """A prompt over the deployment's limit is refused in each column with a message, and the runs
    already there stay."""
    a = dict(target="bundled", method="pld", k=3, temperature=0.0, top_p=1.0, seed=0, adaptive_k=False)
    req = request("too-long")
    columns.step(req, None, **side_values(a, a))
    shown = out(columns.step(req, None, **side_values(a, a, prompt="word " * 40_000)))
    assert "sv-status-error" in shown["a_status"] and "sv-status-error" in shown["b_status"]
    assert all(len(s.run().cycles) == 1 for s in columns.columns(req))


@pytest.mark.bundled
def test_run_both_from_nothing_decodes_both_to_the_end(bundled):
    """Run both on fresh columns (no Step first, a ready-made pair on screen) decodes both runs to
    their last token, then says both finished."""
    a = dict(target="bundled", method="pld", k=3, temperature=0.0, top_p=1.0, seed=0, adaptive_k=False)
    req = request("run-fresh")
    pair_sources.open_pair("good-vs-bad", req)
    frames = [out(f) for f in columns.run(req, None, **side_values(a, dict(a, k=5), max_new_tokens=8))]
    assert "Both runs finished" in frames[-1]["pair_status"], frames[-1]["pair_status"]
    assert all(s.state.done and len(s.state.origins) == 8 for s in columns.columns(req))


def test_race_leaves_prefill_out_of_both_sides():
    """The race chart starts both runs' lines at 0 s after their own prefill, so a side whose prefill
    was copied from the other (prefill_s near 0) gains no head start, and the axis says so; the race
    clock, the leader and the end are read on that same decode clock."""
    from specviz.decoding.trace import CycleTrace

    def run(prefill_s: float, ends: list[float]) -> RunTrace:
        cycles = [CycleTrace(index=i, k=2, elapsed_s=prefill_s + t, total_tokens=2 + 2 * i) for i, t in enumerate(ends)]
        return RunTrace("pld", token_ids=[1] * (2 * len(ends) + 1), cycles=cycles, prefill_s=prefill_s)

    made, copied = run(0.22, [0.1, 0.2]), run(0.0, [0.1, 0.3])  # B copied A's prefill
    a, b = pv.Side(made, None, "t", True, "A"), pv.Side(copied, None, "t", True, "B")
    fig = pv.race_figure(a, b)
    assert [list(t.x)[0] for t in fig.data[:2]] == [0.0, 0.0]
    assert list(fig.data[0].x) == pytest.approx([0.0, 0.1, 0.2])
    assert "prefill left out of both sides" in fig.layout.xaxis.title.text
    assert pv.race_end(a, b) == pytest.approx(0.3) and pv.cycles_by(made, 0.15) == 1
    assert "A leads, 4 tokens to 2" in pv.leader(a, b, 0.25)
