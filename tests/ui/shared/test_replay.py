"""Export and replay: a run written to a trace file and loaded back renders the same narration,
figures and numbers for every cycle, with no model; bad files get a message that says why."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import specviz
from specviz.decoding import tracefile
from specviz.decoding.trace import RESAMPLED, RunTrace
from specviz.viz import (
    acceptance_figure,
    cache_html,
    metrics_html,
    narrate,
    pq_figure,
    residual_figure,
    text_html,
    timeline_figure,
    tree_figure,
)
from tests.helpers.drafts import drafted, rejected
from tests.helpers.tiny import pair

gr = pytest.importorskip("gradio")


@pytest.fixture(scope="module")
def runs() -> list[RunTrace]:
    """The shipped example (a greedy LogitSpec tree) and a tiny-model run sampled with a stochastic
    draft, so p, q, r and residuals are all non-trivial."""
    from specviz.ui.shared import views

    target, draft = pair(noise=0.5)
    sampled = specviz.generate(target, [1, 5, 9, 2, 7], method="draft", draft=draft, k=3, temperature=1.0,
                               seed=4, max_new_tokens=24, plan=False)  # a same-size draft: the planner sends none
    return [tracefile.read(views.EXAMPLE_TRACE).run, sampled]


@pytest.mark.drafts
def test_the_sampled_run_has_drafts_rejections_and_residuals(runs):
    """The sampled run the replay tests draw really sent drafts, had some rejected and replaced a
    rejected one from the residual, so its p, q, r and residual views hold real values."""
    sampled = runs[1]
    assert drafted(sampled) > 0 and rejected(sampled) > 0
    assert any(c.new_kind == RESAMPLED and c.residual_top for c in sampled.cycles)


def rendered(run: RunTrace) -> list:
    """Everything the views draw from a run: per cycle narration, figures and cache panel, then
    the whole-run panels (figures as plotly JSON, so every number counts)."""
    out = []
    for c in run.cycles:
        out += [narrate(c), cache_html(c)] + [f(c).to_json() for f in (tree_figure, pq_figure, residual_figure)]
    return out + [text_html(run), metrics_html(run.metrics, None), timeline_figure(run, None).to_json(),
                  acceptance_figure(run).to_json()]


def request(name: str):
    return SimpleNamespace(session_hash=f"test-replay-{name}")


def test_round_trip_renders_the_same_for_every_cycle(runs, tmp_path):
    """dumps → file → read gives a run whose every view renders identically to the original."""
    for i, run in enumerate(runs):
        path = tmp_path / f"run{i}.json"
        path.write_text(tracefile.dumps(run, runs[0], {"note": "<b>x</b>"}), encoding="utf-8")
        back = tracefile.read(path)
        assert back.run == run and back.ar == runs[0] and back.meta == {"note": "<b>x</b>"}
        assert rendered(back.run) == rendered(run)


def test_a_bare_run_trace_replays_too(runs):
    """The CLI's `generate --json` output (a bare RunTrace) loads without the export wrapper."""
    back = tracefile.loads(runs[1].to_json())
    assert back.run == runs[1] and back.ar is None


def test_replay_callback_shows_every_cycle_as_recorded(runs, tmp_path):
    """Uploading an exported file puts it in every view; the slider then shows each cycle with the
    narration the original run had; Export writes the same run back out."""
    from specviz.ui.decode import export, handlers
    from specviz.ui.shared import views

    run = runs[1]
    path = tmp_path / "sampled.json"
    path.write_text(tracefile.dumps(run), encoding="utf-8")
    req = request("ok")
    out = dict(zip(views.OUTPUTS, export.replay_upload(str(path), req)))
    assert "sv-status-ok" in out["status"] and "Replaying sampled.json" in out["status"]
    assert out["narration"] == views.narration_html(narrate(run.cycles[-1]))
    for i, cycle in enumerate(run.cycles):
        shown = dict(zip(views.OUTPUTS, handlers.show_cycle(i, req)))
        assert shown["narration"] == views.narration_html(narrate(cycle))
        assert shown["cache"] == cache_html(cycle)
    file_update, status = export.export_run(req)
    assert "Exported" in status
    assert tracefile.read(file_update["value"]).run == run


BAD = [
    ("empty.json", b"", "empty"),
    ("text.json", b"hello", "not valid JSON (line 1, column 1"),
    ("binary.json", b"\xff\xfe\x00", "not text"),
    ("list.json", b"[1, 2]", "not a SpecViz trace"),
    ("future.json", json.dumps({"format": "specviz-trace", "version": 99}).encode(), "format version 99"),
    ("nocycles.json", json.dumps({"method": "pld", "cycles": []}).encode(), "no cycles"),
    ("badnode.json", json.dumps({"method": "pld", "cycles": [{"index": 0, "k": 1, "nodes": [
        {"index": 0, "token": 1, "text": "a", "parent": -1, "depth": 1, "p": "high"}]}]}).encode(),
     "cycle 0, node 0: 'p' must be a number from 0"),
    ("badref.json", json.dumps({"method": "pld", "cycles": [{"index": 0, "k": 1, "nodes": [],
                                                             "accepted": [3]}]}).encode(), "must name nodes"),
]


@pytest.mark.parametrize("name,content,message", BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_gives_a_clear_message_and_keeps_the_screen(name, content, message, tmp_path):
    """Each kind of bad file is refused with a status message naming the file and the problem,
    and no view is replaced."""
    from specviz.ui.decode import export
    from specviz.ui.shared import views

    path = tmp_path / name
    path.write_bytes(content)
    out = dict(zip(views.OUTPUTS, export.replay_upload(str(path), request("bad"))))
    assert "sv-status-error" in out["status"], out["status"]
    assert f"Could not replay {name}" in out["status"]
    assert message in out["status"].replace("&#x27;", "'").replace("&quot;", '"'), out["status"]
    assert all(isinstance(out[k], type(gr.skip())) for k in ("narration", "tree", "text"))


def test_prefix_is_the_run_as_it_stood(runs):
    """prefix(run, i) holds cycles 0..i and exactly the tokens committed by then; at the last
    cycle it is the whole run."""
    run = runs[1]
    for i in range(len(run.cycles)):
        part = tracefile.prefix(run, i)
        assert len(part.cycles) == i + 1
        assert part.metrics["new_tokens"] == run.cycles[i].total_tokens == len(part.token_ids)
    whole = tracefile.prefix(run, len(run.cycles) - 1)
    assert whole.token_ids == run.token_ids
    assert whole.metrics["acceptance_rate"] == run.metrics["acceptance_rate"]


def test_every_lesson_recording_replays_with_its_settings():
    """Each lesson variant ships a recording made with its own settings and prompt; greedy ones
    match their AR baseline token for token; the LogitSpec rescue ends on a cycle whose accepted
    path starts on a next-next candidate branch."""
    from specviz.ui.decode.lessons import LESSONS
    from specviz.ui.shared.recordings import lesson_trace

    for lesson in LESSONS:
        for v in lesson.variants:
            trace = lesson_trace(v.file)
            assert trace is not None, f"assets/lessons/{v.file}.json is missing"
            s, run = v.settings, trace.run
            assert trace.meta["prompt"] == s.prompt and trace.meta["lesson"] == lesson.key
            assert (run.method, run.settings["k"], run.settings["temperature"]) == (s.method, s.k, s.temperature)
            assert trace.ar is not None and trace.ar.method == "ar"
            if s.temperature == 0:
                assert run.token_ids == trace.ar.token_ids
            narrate(run.cycles[0]), tree_figure(run.cycles[-1])
    rescue = lesson_trace("logitspec-rescue")
    focus = rescue.run.cycles[rescue.meta["focus_cycle"]]
    assert focus.nodes[focus.accepted[0]].source == "candidate"


def test_a_lesson_loads_its_settings_and_plays_every_cycle(monkeypatch):
    """Clicking a lesson sets the configuration inputs and the paragraph in its first frame, then
    plays the recorded cycles in order (at most PLAY_FRAMES frames), ending on the last cycle."""
    from specviz.ui.decode import lessons
    from specviz.ui.shared import recordings, replay, views

    monkeypatch.setattr(replay, "FRAME_S", 0.0)
    keys = ["method", "k", "prompt", "layerskip_layers"]
    frames = list(lessons.play("k-too-large", None, keys, request("lesson")))
    trace = recordings.lesson_trace("k-too-large")
    assert len(frames) == min(len(trace.run.cycles), replay.PLAY_FRAMES)
    n = len(views.OUTPUTS)
    first = frames[0]
    assert first[n:n + 3] == ("layerskip", 12, recordings.example_prompt("Summarise"))
    assert "K too large" in first[n + 5]
    last = dict(zip(views.OUTPUTS, frames[-1]))
    assert last["narration"] == views.narration_html(narrate(trace.run.cycles[-1]))
    assert "Played all" in last["status"]
