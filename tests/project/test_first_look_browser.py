"""The first paint in headless Chromium, as a newcomer sees it before pressing anything (no model loads)."""
from __future__ import annotations

import importlib

import pytest

from tests.conftest import IN_CI

pytestmark = [pytest.mark.browser, pytest.mark.slow]
sync_api = importlib.import_module("playwright.sync_api") if IN_CI else pytest.importorskip("playwright.sync_api")

WAIT_MS = 60_000
PLOTS = {"decode": ["#sv-tree", "#sv-pq", "#sv-residual", "#sv-timeline", "#sv-acceptance"],
         "compare": ["#sv-cmp-chart"], "theory": ["#sv-theory-plot", "#sv-batch-plot"]}


@pytest.fixture(scope="module")
def first_paint_url():
    """The app on a free port; nothing here loads a model, so nothing should need one."""
    from specviz.browser import serve

    demo, url = serve()
    yield url
    demo.close()


@pytest.fixture
def page(chromium, first_paint_url):
    context = chromium.new_context(viewport={"width": 1600, "height": 1000})
    tab = context.new_page()
    tab.goto(first_paint_url, wait_until="domcontentloaded")
    tab.wait_for_selector("#sv-residual .js-plotly-plot", timeout=WAIT_MS)
    yield tab
    context.close()


def open_tab(page, name: str) -> None:
    if name != "decode":
        page.locator(f"#sv-tabs button[role=tab]:has-text('{'Compare' if name == 'compare' else 'Theory'}')").click()


def test_first_paint_shows_a_rejection_with_its_residual(page):
    """Without any click the page shows the example's chosen cycle: the slider on it, the narration
    naming an acceptance, a rejection and a resample, and the residual's bars with the drawn one."""
    from specviz.ui.shared.views import example, index_on_screen

    shown = index_on_screen(example()[0], None)
    assert page.locator("#sv-cycle input[type=range]").input_value() == str(shown)
    narration = page.locator("#sv-narration").inner_text()
    assert narration.startswith(f"Cycle {shown}:")
    assert "accepted" in narration and "rejected" in narration and "from the residual" in narration
    assert "where the replacement came from" in page.locator("#sv-residual .gtitle").text_content()
    assert page.locator("#sv-residual .barlayer .point").count() >= 2
    assert "drawn" in page.locator("#sv-residual .barlayer").text_content()


@pytest.mark.parametrize("tab", PLOTS)
def test_mode_bar_never_covers_a_title(page, tab):
    """With the pointer on a figure its mode bar shows, and on every figure of the Decode, Compare
    and Theory & hardware tabs it lies apart from the figure's title."""
    open_tab(page, tab)
    for plot in PLOTS[tab]:
        page.wait_for_selector(f"{plot} .js-plotly-plot .gtitle", timeout=WAIT_MS)
        page.hover(f"{plot} .js-plotly-plot .main-svg")
        bar = page.locator(f"{plot} .modebar").first.bounding_box()
        title = page.locator(f"{plot} .gtitle").first.bounding_box()
        assert bar and title and bar["width"] > 0, plot
        apart = (bar["y"] >= title["y"] + title["height"] or title["y"] >= bar["y"] + bar["height"]
                 or bar["x"] >= title["x"] + title["width"] or title["x"] >= bar["x"] + bar["width"])
        assert apart, f"{plot}: mode bar {bar} covers title {title}"


def test_compare_and_theory_tabs_show_recorded_figures(page):
    """The Compare tab shows recorded speedup bars, and the Theory & hardware tab the recorded S(K)
    curve and batch-size curve, each under a status that says they were recorded."""
    open_tab(page, "compare")
    page.wait_for_selector("#sv-cmp-chart .barlayer .point", timeout=WAIT_MS)
    assert "Recorded on" in page.locator("#sv-cmp-status").inner_text()
    assert page.locator("#sv-cmp-table table tbody tr").count() >= 2
    open_tab(page, "theory")
    for plot in ("#sv-theory-plot", "#sv-batch-plot"):
        page.wait_for_selector(f"{plot} .scatterlayer .trace", timeout=WAIT_MS)
    for status in ("#sv-theory-status", "#sv-batch-status"):
        assert "Recorded on" in page.locator(status).inner_text()
