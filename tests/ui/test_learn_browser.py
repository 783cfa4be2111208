"""Classroom mode in headless Chromium: the Learn tab, lessons, Explain this cycle, replay, and
the page at projector (1280×720) and phone (390 px) widths. No model is loaded: everything
here runs from the toy sampler and the recorded traces in assets/.
"""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from specviz.browser import serve  # noqa: E402
from tests.conftest import IN_CI  # noqa: E402

# skipped without playwright on a developer's machine; in CI its absence is an error
sync_api = importlib.import_module("playwright.sync_api") if IN_CI else pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
WAIT_MS = 60_000  # a busy 2-core machine can take seconds to answer an event
DECODE_PANELS = ["#sv-config", "#sv-centre", "#sv-timing", "#sv-lessons", "#sv-narration", "#sv-explain",
                 "#sv-tree", "#sv-pq", "#sv-residual", "#sv-cache", "#sv-text", "#sv-metrics", "#sv-timeline",
                 "#sv-acceptance"]
LEARN_PANELS = ["#sv-toy-controls", "#sv-toy-numbers", "#sv-toy-pq", "#sv-mc-controls", "#sv-mc-summary", "#sv-mc"]


@pytest.fixture(scope="module")
def app_url():
    demo, url = serve()
    yield url
    demo.close()


def open_page(chromium, url: str, width: int = 1280, height: int = 720):
    context = chromium.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=WAIT_MS)
    return page


@pytest.fixture
def app_tab(chromium, app_url):
    """A fresh tab (its own Gradio session) at projector size."""
    page = open_page(chromium, app_url)
    yield page
    page.context.close()


def learn_tab(page) -> None:
    page.get_by_role("tab", name="Learn").click()
    page.wait_for_selector("#sv-toy-pq .js-plotly-plot", timeout=WAIT_MS)


def text(page, selector: str) -> str:
    return page.locator(selector).first.inner_text()


def wait_text(page, selector: str, needle: str, present: bool = True) -> None:
    page.wait_for_function("([s, n, present]) => (document.querySelector(s)?.innerText || '').includes(n) === present",
                           arg=[selector, needle, present], timeout=WAIT_MS)


def test_learn_sliders_change_the_numbers(app_tab):
    """Moving p's first slider changes β and TV on screen; choosing a preset sets them again."""
    page = app_tab
    learn_tab(page)
    before = text(page, "[data-key=beta]")
    page.locator("#sv-toy-p-0 input[type=range]").fill("95")
    page.wait_for_function("b => document.querySelector('[data-key=beta]')?.innerText !== b", arg=before,
                           timeout=WAIT_MS)
    assert text(page, "[data-key=beta]") != before
    page.get_by_label("identical", exact=True).check()
    wait_text(page, "[data-key=beta]", "1.000")
    assert text(page, "[data-key=tv]") == "0.000"


def test_monte_carlo_plot_appears_and_the_broken_rule_drifts(app_tab):
    """Draw samples plots the output against p and q and says it follows p; the broken rule then
    says it does not."""
    page = app_tab
    learn_tab(page)
    page.click("#sv-mc-run")
    page.wait_for_selector("#sv-mc .js-plotly-plot", timeout=WAIT_MS)
    wait_text(page, "#sv-mc-summary", "the output follows p")
    assert "Monte-Carlo" in page.locator("#sv-mc .gtitle").first.text_content()
    page.get_by_label(page_rule("resample from p"), exact=True).check()
    wait_text(page, "#sv-mc-summary", "does not follow p")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "learn_monte_carlo.png"), full_page=True)


def page_rule(fragment: str) -> str:
    from specviz.teach import toy

    return next(r for r in toy.RULES if fragment in r)


def test_a_lesson_loads_and_plays(app_tab):
    """One click on a lesson fills the settings and prompt, shows its paragraph, and plays its
    recorded cycles to the end, with no model loaded."""
    page = app_tab
    from specviz.ui.shared.recordings import example_prompt

    CHAT = example_prompt("Chat")

    page.click("#sv-lesson-bad-draft")
    wait_text(page, "#sv-status", "Played all")
    assert "A bad draft slows things down" in text(page, "#sv-lesson-text")
    assert page.locator("#sv-prompt textarea").input_value() == CHAT
    assert page.get_by_label("Layer skip (self-draft)", exact=True).is_checked()
    # the narration's own progress timer ("2.3s") can outlive the status line by a frame: wait it out
    page.wait_for_function("s => (document.querySelector(s)?.innerText || '').trim().startsWith('Cycle')",
                           arg="#sv-narration", timeout=WAIT_MS)
    assert "Speedup" in text(page, "#sv-metrics")
    page.click("#sv-lesson-retrieval")  # a lesson with two recorded runs offers a switch
    wait_text(page, "#sv-lesson-text", "summary vs chat")
    wait_text(page, "#sv-status", "Played all")
    page.get_by_label("open chat", exact=True).check()
    wait_text(page, "#sv-lesson-text", "open chat")
    wait_text(page, "#sv-status", "Played all")


def test_explain_this_cycle_steps_with_the_arrow_keys(app_tab):
    """Explain this cycle opens step 1 and frames the tree; → and ← move one step either way."""
    page = app_tab
    page.click("#sv-explain-start")
    wait_text(page, "#sv-explain", "step 1 of")
    assert "▶ 1/" in page.locator("#sv-tree .gtitle").first.text_content()
    page.locator("body").click(position={"x": 5, "y": 5})  # focus off the buttons and fields
    page.keyboard.press("ArrowRight")
    wait_text(page, "#sv-explain", "step 2 of")
    page.keyboard.press("ArrowRight")
    wait_text(page, "#sv-explain", "step 3 of")
    page.keyboard.press("ArrowLeft")
    wait_text(page, "#sv-explain", "step 2 of")
    page.click("#sv-explain-done")
    wait_text(page, "#sv-explain", "step", present=False)


def test_replay_an_uploaded_trace_and_refuse_a_bad_one(app_tab, tmp_path):
    """A broken file is refused with a message; a trace file chosen in the browser replays in
    every view, and Export then offers it as a download."""
    page = app_tab
    bad = tmp_path / "broken.json"
    bad.write_text('{"method": "pld", "cycles": [', encoding="utf-8")
    upload = page.locator("#sv-replay-file input[type=file]")
    upload.set_input_files(str(bad))
    wait_text(page, "#sv-status", "Could not replay broken.json")
    assert "not valid JSON" in text(page, "#sv-status")
    page.reload(wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=WAIT_MS)
    page.locator("#sv-replay-file input[type=file]").set_input_files(str(ROOT / "assets/lessons/retrieval-chat.json"))
    wait_text(page, "#sv-status", "Replaying retrieval-chat.json")
    assert "pld" in text(page, "#sv-status")
    page.click("#sv-export")  # the replayed run exports again, as a download link
    wait_text(page, "#sv-status", "Exported")
    page.wait_for_selector("#sv-export-file a[href*='.json']", timeout=WAIT_MS)


def boxes(page, selectors: list[str]) -> list[dict]:
    """Bounding boxes of the visible panels, with which ones contain which."""
    return page.evaluate("""sels => {
        const els = sels.map(s => [s, document.querySelector(s)])
                        .filter(([s, e]) => e && e.getClientRects().length && e.offsetWidth > 0);
        return els.map(([s, e]) => { const r = e.getBoundingClientRect();
            return {s, x: r.left, y: r.top + scrollY, w: r.width, h: r.height,
                    inside: els.filter(([t, f]) => f !== e && f.contains(e)).map(([t]) => t)}; });
    }""", selectors)


def check_layout(page, selectors: list[str], name: str) -> None:
    """No panel sticks out of the viewport's width, no two panels overlap; keep a screenshot."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    width = page.viewport_size["width"]
    found = boxes(page, selectors)
    assert len(found) >= len(selectors) - 1, [b["s"] for b in found]
    for b in found:
        assert b["x"] >= -1 and b["x"] + b["w"] <= width + 1, f"{name}: {b['s']} is cut off: {b}"
    for i, a in enumerate(found):
        for b in found[i + 1:]:
            if a["s"] in b["inside"] or b["s"] in a["inside"]:
                continue
            dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
            assert dx <= 1 or dy <= 1, f"{name}: {a['s']} overlaps {b['s']}"
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, f"{name}: page scrolls sideways"


@pytest.mark.parametrize("width,height", [(1280, 720), (390, 844)], ids=["projector", "phone"])
def test_no_panel_is_cut_off_or_overlapping(chromium, app_url, width, height):
    """At 1280×720 and 390 px wide, the Decode and Learn tabs keep every panel inside the width
    and apart from the others (screenshots in test-artifacts/)."""
    page = open_page(chromium, app_url, width, height)
    try:
        page.click("#sv-explain-start")
        wait_text(page, "#sv-explain", "step 1 of")
        check_layout(page, DECODE_PANELS, f"classroom_decode_{width}")
        learn_tab(page)
        page.click("#sv-mc-run")
        page.wait_for_selector("#sv-mc .js-plotly-plot", timeout=WAIT_MS)
        check_layout(page, LEARN_PANELS, f"classroom_learn_{width}")
    finally:
        page.context.close()
