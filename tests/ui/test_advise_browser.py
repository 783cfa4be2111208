"""The Advise tab in headless Chromium: it opens on the recorded profile before any model loads,
replays a saved profile, refuses a bad one, and runs a small advice on the bundled model."""
from __future__ import annotations

import importlib
import json

import pytest

from tests.conftest import IN_CI

pytestmark = [pytest.mark.browser, pytest.mark.slow]
sync_api = importlib.import_module("playwright.sync_api") if IN_CI else pytest.importorskip("playwright.sync_api")

WAIT_MS = 60_000
RUN_MS = 300_000  # a small advice on a busy 2-core machine


@pytest.fixture(scope="module")
def url():
    from specviz.browser import serve

    demo, address = serve()
    yield address
    demo.close()


@pytest.fixture
def page(chromium, url):
    context = chromium.new_context(viewport={"width": 1600, "height": 1000})
    tab = context.new_page()
    tab.goto(url, wait_until="domcontentloaded")
    tab.wait_for_selector("#sv-tree .js-plotly-plot", timeout=WAIT_MS)
    tab.locator("#sv-tabs button[role=tab]:has-text('Advise')").click()
    tab.wait_for_selector("#sv-adv-curves .js-plotly-plot", timeout=WAIT_MS)
    yield tab
    context.close()


def wait_text(page, selector: str, needle: str, timeout: int = WAIT_MS) -> None:
    page.wait_for_function("([s, n]) => (document.querySelector(s)?.innerText || '').includes(n)",
                           arg=[selector, needle], timeout=timeout)


@pytest.fixture
def asked(monkeypatch):
    """Every model the app asks its pool for from now on (models other tests of this process loaded
    stay loaded: what matters is that opening the tab asks for none)."""
    from specviz.ui.runtime.state import MODELS

    specs: list[str] = []
    get = MODELS.get
    monkeypatch.setattr(MODELS, "get", lambda spec, *a, **k: specs.append(spec) or get(spec, *a, **k))
    return specs


def test_the_tab_opens_on_the_recorded_profile_before_any_model_loads(asked, page):
    """Without a click beyond the tab: the recorded recommendation, a row per recorded candidate, the
    S(K), acceptance and load figures with a trace per candidate, and no model asked for."""
    from specviz.advise import advice, advice_report
    from specviz.ui import advise

    recorded = advice.read(advise.RECORDED)
    assert "Recorded on" in page.locator("#sv-adv-status").inner_text()
    table = page.locator("#sv-adv-table").inner_text()
    assert advice_report.recommendation(recorded) in table
    assert page.locator("#sv-adv-table tbody tr").count() == len(recorded.measured)
    for plot in ("#sv-adv-curves", "#sv-adv-concurrency"):
        assert page.locator(f"{plot} .scatterlayer .trace").count() >= len(recorded.measured)
    assert page.locator("#sv-adv-accept .scatterlayer .trace").count() == 2 * len(recorded.measured)
    assert asked == []


def test_a_saved_profile_replays_and_a_bad_file_is_refused(page, tmp_path):
    """Uploading a survey.json repaints the tab from it; a JSON file that is not a survey leaves a
    message naming the problem in the status line."""
    from specviz.advise import advice
    from specviz.ui import advise

    survey = advice.read(advise.RECORDED)
    survey.measured = survey.measured[:2]
    survey.checks = {}
    good = tmp_path / "two.json"
    advice.save(survey, good)
    page.locator("#sv-adv-upload input[type=file]").set_input_files(str(good))
    wait_text(page, "#sv-adv-status", "Replayed two.json")
    assert page.locator("#sv-adv-table tbody tr").count() == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": "something else"}))
    page.locator("#sv-adv-upload button[aria-label='Clear']").first.click()
    page.locator("#sv-adv-upload input[type=file]").set_input_files(str(bad))
    wait_text(page, "#sv-adv-status", "not a SpecViz advice survey")


def test_a_small_advice_runs_and_offers_its_profile(page):
    """On the bundled model, two draft-free candidates on one short prompt: the status streams what
    it does, ends 'Done', the table ranks exactly those two, and the survey is offered for download."""
    from specviz.ui.advise import method_choices

    methods = page.locator("#sv-adv-methods")
    for name, value in method_choices():  # every candidate the picker offers but the two
        if value not in ("pld", "logitspec"):
            methods.get_by_label(name, exact=True).uncheck()
    page.locator("#sv-adv-prompts textarea").fill("Count from one to twenty: one, two, three,")
    for slider, value in (("#sv-adv-kmax", "2"), ("#sv-adv-maxnew", "8"), ("#sv-adv-check", "1")):
        box = page.locator(f"{slider} input[type=number]")
        box.fill(value)
        box.press("Enter")
    page.locator("#sv-adv-concurrency-on input").uncheck()
    page.locator("#sv-adv-go").click()
    wait_text(page, "#sv-adv-status", "Done", timeout=RUN_MS)
    rows = page.locator("#sv-adv-table tbody tr")
    assert rows.count() == 2
    assert {rows.nth(i).locator("td").nth(1).inner_text() for i in range(2)} == {"pld", "logitspec"}
    assert "measured" in page.locator("#sv-adv-table").inner_text()
    assert page.locator("#sv-adv-download a").count() >= 1


def test_the_deploy_section_shows_the_recorded_vllm_configuration_with_a_copy_button(page):
    """Below the figures, the recorded survey's best deployable pick on vLLM: its configuration text in
    a code box with a copy button that copies exactly that configuration, and the command that starts
    vLLM with it in the box below."""
    from specviz.advise import advice, deploy
    from specviz.ui import advise

    pick = next(d for d in deploy.deployments(advice.read(advise.RECORDED)) if d.engine == "vLLM")
    box = page.locator("#sv-adv-config-vllm")
    box.scroll_into_view_if_needed()
    wait_text(page, "#sv-adv-config-vllm", pick.config)
    assert "--speculative-config" in page.locator("#sv-adv-command-vllm").inner_text()
    copy = box.locator("button[aria-label='Copy']")
    assert copy.count() == 1 and copy.is_visible()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    copy.click()
    assert page.evaluate("navigator.clipboard.readText()") == pick.config


def test_an_uploaded_survey_with_an_engine_check_shows_predicted_against_measured(page, tmp_path):
    """Before any upload the recorded survey has no check on an engine and the tab says how to run
    one; uploading a survey that holds a check on vLLM shows it as a row of the predicted-against-
    measured table, with its predicted and measured speedups and the machine it ran on."""
    from specviz.advise import advice
    from specviz.advise.engine_check import EngineCheck
    from specviz.ui import advise

    wait_text(page, "#sv-adv-checks", "--check-on vllm,hf")
    survey = advice.read(advise.RECORDED)
    survey.engine_checks.append(EngineCheck("vLLM", "pld", 5, '{"method": "ngram"}', "test box (4 cores)",
                                            "2026-12-05 03:00 UTC", concurrency=1, prompts=6, predicted=1.43,
                                            measured=1.21, predicted_marginal=[0.6, 0.4],
                                            measured_marginal=[0.5, 0.3]).to_dict())
    path = tmp_path / "checked.json"
    advice.save(survey, path)
    page.locator("#sv-adv-upload input[type=file]").set_input_files(str(path))
    wait_text(page, "#sv-adv-status", "Replayed checked.json")
    wait_text(page, "#sv-adv-checks", "test box (4 cores)")
    rows = page.locator("#sv-adv-checks tbody tr")
    assert rows.count() == 1
    row = rows.first.inner_text()
    assert "vLLM" in row and "1.43×" in row and "1.21×" in row and "0.60, 0.40 / 0.50, 0.30" in row
