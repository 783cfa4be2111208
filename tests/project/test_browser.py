"""The app in headless Chromium (Debian's /usr/bin/chromium): what a person sees and can do.

The app runs in-process on a free port with the session's bundled model.
"""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.bundled, pytest.mark.slow]

from tests.conftest import IN_CI  # noqa: E402

# skipped without playwright on a developer's machine; in CI its absence is an error
sync_api = importlib.import_module("playwright.sync_api") if IN_CI else pytest.importorskip("playwright.sync_api")

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

STEP_TIMEOUT_MS = 300_000  # a cycle can take seconds on a busy 2-core machine
PAYLOAD = "<img src=x onerror=alert(1)> <script>alert(1)</script> **bold** $x^2$ ${7*7}"


@pytest.fixture
def app_page(chromium, app_url):
    """A fresh tab on the app (its own Gradio session), recording any dialog that opens."""
    context = chromium.new_context(viewport={"width": 1600, "height": 1000})
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.goto(app_url, wait_until="domcontentloaded")
    page.wait_for_selector("#sv-tree .js-plotly-plot", timeout=60_000)
    yield page
    context.close()


def text_of(page, selector: str) -> str:
    return page.locator(selector).first.inner_text()


def set_prompt(page, prompt: str) -> None:
    box = page.locator("#sv-prompt textarea")
    box.fill(prompt)
    box.blur()


def set_max_tokens(page, n: int) -> None:
    field = page.locator("#sv-max-new input[type=number]")
    field.fill(str(n))
    field.press("Enter")


def step(page, cycle: int) -> None:
    """Press Step and wait until the narration shows `cycle` and the status says it is done."""
    page.click("#sv-step")
    page.wait_for_function(
        "n => (document.querySelector('#sv-narration')?.innerText || '').startsWith('Cycle ' + n)"
        " && document.querySelector('#sv-status .sv-status-ok')", arg=cycle, timeout=STEP_TIMEOUT_MS)


def test_first_paint_shows_the_example(app_page):
    """Before any model loads, the page shows the precomputed example's tree, narration and timing."""
    page = app_page
    assert "Cycle" in text_of(page, "#sv-narration")
    assert "tokens/s" in text_of(page, "#sv-metrics")
    assert "example" in text_of(page, "#sv-status")


def test_each_method_shows_only_its_own_options(app_page):
    """The draft picker shows only for the draft-model method, and each method's options only
    while it is chosen."""
    page = app_page
    options = {"Prompt lookup (n-gram)": "Prompt lookup (n-gram) options", "LogitSpec": "LogitSpec options",
               "Layer skip (self-draft)": "Layer skip (self-draft) options"}
    from playwright.sync_api import expect

    def shown(locator, visible: bool) -> None:  # polls: the change goes through the server, slow when busy
        (expect(locator).to_be_visible if visible else expect(locator).to_be_hidden)(timeout=30_000)

    for choice in ("Draft model", *options):
        page.get_by_role("radio", name=choice, exact=True).check()  # the draft picker is also "Draft model"
        shown(page.locator("#sv-draft"), choice == "Draft model")
        for method, title in options.items():
            shown(page.get_by_text(title, exact=True), method == choice)


def test_three_steps_then_back_to_cycle_1(app_page):
    """Three Steps show the tree, the narration and timing numbers; the slider returns to cycle 1
    and every cycle view follows."""
    page = app_page
    set_prompt(page, "Name three colours of the rainbow.")
    for i in range(3):
        step(page, i)
    assert page.locator("#sv-tree .js-plotly-plot .scatterlayer .trace").count() > 0
    assert "Cycle 2" in page.locator("#sv-tree .gtitle").first.text_content()
    assert text_of(page, "#sv-narration").startswith("Cycle 2")
    metrics = text_of(page, "#sv-metrics")
    assert re.search(r"tokens/s\s+\d+\.\d", metrics), metrics
    slider = page.locator("#sv-cycle input[type=range]")
    slider.fill("1")
    page.wait_for_function("() => (document.querySelector('#sv-narration')?.innerText || '')"
                           ".startsWith('Cycle 1')", timeout=60_000)
    page.wait_for_function("() => (document.querySelector('#sv-tree .gtitle')?.textContent || '')"
                           ".includes('Cycle 1')", timeout=60_000)
    assert "cycle 1" in text_of(page, "#sv-cache")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser_three_steps.png"), full_page=True)


def test_markup_in_prompt_and_model_text_stays_literal(app_page):
    """A prompt full of HTML, script, Markdown and LaTeX runs without executing or injecting
    anything; echoed text and error messages show it literally."""
    page = app_page
    set_prompt(page, f"Repeat exactly, character for character: {PAYLOAD}")
    set_max_tokens(page, 32)
    page.click("#sv-run")
    page.wait_for_function("() => (document.querySelector('#sv-status')?.innerText || '').includes('Run finished')",
                           timeout=STEP_TIMEOUT_MS)
    page.get_by_text("Output as plain text").click()  # open the accordion that holds it
    out = page.locator("#sv-plain textarea").input_value()
    shown = text_of(page, "#sv-text")
    for piece in ("<img", "<script>", "**bold**", "$x^2$"):
        if piece in out:
            assert piece in shown, (piece, shown)
    # An error message quoting the input must quote it literally too.
    target = page.locator("#sv-target input")
    target.fill(PAYLOAD)
    target.press("Enter")
    # the changed target resets the finished run first; on a loaded machine that message could
    # otherwise arrive after the Step's error and replace it
    page.wait_for_function("() => (document.querySelector('#sv-status')?.innerText || '').includes('Settings changed')",
                           timeout=60_000)
    page.click("#sv-step")
    page.wait_for_selector("#sv-status .sv-status-error", timeout=60_000)
    assert PAYLOAD.strip() in text_of(page, "#sv-status")
    assert page.dialogs == []
    assert page.locator("img[src='x']").count() == 0
    assert page.locator("script", has_text="alert(1)").count() == 0
    assert page.locator(".katex, mjx-container, strong:text('bold')").count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "browser_escaping.png"), full_page=True)
