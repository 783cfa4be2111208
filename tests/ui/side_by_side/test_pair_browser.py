"""Side by side in headless Chromium: a shared link opens a ready-made pair with no model loaded,
and three Steps give three live cycles in each column, with the race chart and the first-difference
line."""
from __future__ import annotations

import importlib
import re

import pytest

from tests.conftest import IN_CI

pytestmark = [pytest.mark.browser, pytest.mark.slow]
sync_api = importlib.import_module("playwright.sync_api") if IN_CI else pytest.importorskip("playwright.sync_api")

WAIT_MS = 90_000


@pytest.fixture
def page(chromium, app_url):
    context = chromium.new_context(viewport={"width": 1600, "height": 1100})
    tab = context.new_page()
    yield tab
    context.close()


def test_a_shared_link_opens_a_ready_made_pair_without_a_model(chromium):
    """?pair=greedy-vs-sampling selects the tab and paints both recordings, the race chart and the
    first difference (sampling), in an app that has loaded no model."""
    from specviz.browser import serve
    from specviz.ui.runtime.state import MODELS

    demo, url = serve()
    try:
        assert not MODELS._models or "bundled" in MODELS._models  # the shared test app may hold one
        loaded = dict(MODELS._models)
        context = chromium.new_context(viewport={"width": 1600, "height": 1100})
        page = context.new_page()
        page.goto(url + "?pair=greedy-vs-sampling", wait_until="domcontentloaded")
        page.wait_for_selector("#sv-b-tree .js-plotly-plot", timeout=WAIT_MS)
        assert "Greedy against T = 1" in page.locator("#sv-pair-status").inner_text()
        assert "differ at token" in page.locator("#sv-pair-diff").inner_text()
        assert page.locator("#sv-pair-race-chart .js-plotly-plot").count() == 1
        assert page.locator("#sv-a-narration").inner_text().startswith("Cycle")
        assert dict(MODELS._models) == loaded  # painting the pair loaded nothing
        context.close()
    finally:
        demo.close()


def test_three_steps_give_three_cycles_in_each_column(page, app_url):
    """From a shared link, three presses of Step both start live runs of the pair's configurations
    and leave each column on its cycle 2, with the race chart and the lossless line."""
    page.goto(app_url + "?pair=good-vs-bad", wait_until="domcontentloaded")
    page.wait_for_selector("#sv-a-tree .js-plotly-plot", timeout=WAIT_MS)
    for i in range(3):
        page.locator("#sv-pair-step").click()
        page.wait_for_function(
            f"() => ['#sv-a-narration', '#sv-b-narration'].every(s => "
            f"/^Cycle {i}\\b/.test(document.querySelector(s)?.innerText || ''))", timeout=WAIT_MS)
    for side in "ab":
        assert re.match(r"Cycle 2\b", page.locator(f"#sv-{side}-narration").inner_text())
    diff = page.locator("#sv-pair-diff").inner_text()
    assert "lossless" in diff and "identical" in diff
    assert page.locator("#sv-pair-race-chart .scatterlayer .trace").count() >= 2


@pytest.mark.parametrize("key,title,look", [
    ("two-families", "Two model families on one prompt", "targets differ"),
    ("cross-family-draft", "A draft from another family", "identical"),
])
def test_shared_links_open_the_pairs_of_two_families(chromium, key, title, look):
    """?pair= links to the two pairs of real model families (SmolLM2 against Gemma 3 270M; SmolLM2 drafting
    for Gemma against Gemma's own prompt lookup) paint both recordings with no model loaded; the
    cross-family one shows the seam between the two tokenizers in A's narration."""
    from specviz.browser import serve
    from specviz.ui.runtime.state import MODELS

    demo, url = serve()
    try:
        loaded = dict(MODELS._models)
        context = chromium.new_context(viewport={"width": 1600, "height": 1100})
        page = context.new_page()
        page.goto(url + f"?pair={key}", wait_until="domcontentloaded")
        page.wait_for_selector("#sv-b-tree .js-plotly-plot", timeout=WAIT_MS)
        assert title in page.locator("#sv-pair-status").inner_text()
        assert look in page.locator("#sv-pair-diff").inner_text()
        if key == "cross-family-draft":
            assert "seam between two tokenizers" in page.locator("#sv-a-narration").inner_text()
        assert dict(MODELS._models) == loaded  # painting the pair loaded nothing
        context.close()
    finally:
        demo.close()
