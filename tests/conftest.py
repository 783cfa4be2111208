"""Shared pytest configuration.

Markers (also listed in pytest.ini): `bundled` loads the bundled SmolLM2-135M model, `gemma`
the second offline model, Gemma 3 270M (skipped where it is not installed, except in CI), `browser`
drives the app in headless Chromium, `slow` takes more than a few seconds, `perf`
asserts a wall-clock or memory threshold (run apart by scripts/test.sh), `vllm` starts a real vLLM server.
"""
import functools
import json
import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from specviz.browser import CHROMIUM, launch_chromium, serve
from tests.helpers.app_client import HeldRun

# ../shared/bench/prompts.json beside the repository, where CI and developers find it.
BENCH_PROMPTS = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "prompts.json"
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")  # CI services set CI=true
README = Path(__file__).with_name("README.md")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip with `reason` on a developer's machine; fail in CI, whose install has everything the
    tests need, so that a skip there would only hide a failure."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: CI installs it, so this test must run there)", pytrace=False)
    pytest.skip(reason)


@functools.lru_cache(maxsize=None)
def expected_skips(readme: Path = README) -> list[tuple[str, str]]:
    """(test, part of its skip reason) per row of tests/README.md's "Expected skips" table."""
    section = readme.read_text(encoding="utf-8").split("## Expected skips", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("| `")]
    return [(test.strip().strip("`"), reason.strip().strip("`")) for test, reason, *_ in rows]


def guard_ci_skip(report, in_ci: bool, expected: list[tuple[str, str]]):
    """In CI, turn a skip that no expected row names (its test, or the file holding it, and a part
    of its reason) into a failure that says so; xfails, and everything off CI, are left alone."""
    if not in_ci or not report.skipped or hasattr(report, "wasxfail"):
        return report
    reason = str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
    test = report.nodeid.split("[", 1)[0]
    if any((test == named or test.startswith(f"{named}::")) and part in reason for named, part in expected):
        return report
    report.outcome = "failed"
    report.longrepr = (f"{reason} -- CI=true runs every test but the expected skips tests/README.md "
                       "names: install what is missing, or name this skip there with why it hides no failure")
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A test skipped in CI fails unless tests/README.md names it as an expected skip."""
    report = yield
    return guard_ci_skip(report, IN_CI, expected_skips() if IN_CI else [])


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """A whole file skipped in CI (an import it skips without) fails the same way."""
    report = yield
    return guard_ci_skip(report, IN_CI, expected_skips() if IN_CI else [])


def pytest_collection_modifyitems(config, items):
    """Without Chromium, browser tests skip with a reason on a developer's machine; in CI they
    stay in and fail (see `chromium_path`), since a skipped browser test there checks nothing.

    SPECVIZ_TEST_ORDER=reverse runs the tests last to first: a test that passes only after (or
    only before) another one leaves or finds state in the process shows up as a failure."""
    if os.environ.get("SPECVIZ_TEST_ORDER", "") == "reverse":
        items.reverse()
    if IN_CI or shutil.which(CHROMIUM):
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is missing: apt-get install chromium")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config):
    """SPECVIZ_TEST_NO_DRAFT=1: every drafter proposes nothing (tests/helpers/drafts.py), so each
    test that claims drafts (marker `drafts`) must fail."""
    from tests.helpers import drafts

    if drafts.NO_DRAFT:
        drafts.never_propose()


@pytest.fixture(autouse=True)
def torch_threads(request):
    """Tiny models run on one thread: on 2 shared cores, thread hand-offs cost 20× their compute."""
    import torch

    before = torch.get_num_threads()
    if not {"bundled", "gemma", "browser"} & set(request.keywords):
        torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """Path of the Chromium binary for playwright's executable_path; missing in CI is an error."""
    if not shutil.which(CHROMIUM):
        missing = f"{CHROMIUM} is missing: apt-get install chromium"
        if IN_CI:
            pytest.fail(f"{missing} (CI=true: the browser tests must run in CI)", pytrace=False)
        pytest.skip(missing)
    return CHROMIUM


@pytest.fixture(scope="module")
def chromium(chromium_path):
    """A headless Chromium driven by playwright, one per browser-test module."""
    if IN_CI:
        from playwright import sync_api  # in CI a missing playwright is an error, not a skip
    else:
        sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = launch_chromium(p, chromium_path)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def bundled_target():
    """The bundled model, loaded once per test session."""
    import specviz

    return specviz.load("bundled")


@pytest.fixture(scope="session")
def gemma_target():
    """Gemma 3 270M, the second offline model, loaded once per test session; where it is not
    installed the test skips on a developer's machine and fails in CI (the dev install has it)."""
    import specviz
    from specviz.loading import gemma

    if not gemma.installed():
        if IN_CI:
            pytest.fail(f"{gemma.missing_message()} (CI=true: the Gemma tests must run in CI)", pytrace=False)
        pytest.skip(gemma.missing_message())
    return specviz.load(gemma.SPEC)


@pytest.fixture(scope="module")
def app_url(bundled_target):
    """The app served in-process on a free port, its model pool primed with the session's bundled
    model (so the app and `specviz.generate` use the very same weights); one per test module."""
    from specviz.ui.runtime.state import MODELS

    MODELS.put("bundled", bundled_target)
    demo, url = serve()
    yield url
    demo.close()


@pytest.fixture
def held_run(monkeypatch):
    """The in-process app's Run streams a cycle per frame and holds after its first frame until the
    test calls `held_run.release()` (tests/helpers/app_client.py: HeldRun). The app runs in this process,
    so patching specviz.ui.runtime.work.run reaches the thread that serves the Run."""
    from specviz.ui.runtime import work

    held = HeldRun(work.run)
    monkeypatch.setattr(work, "run", held)
    yield held
    held.release()  # never leave the app's thread waiting on a failed test


@pytest.fixture(scope="session")
def bench_prompts() -> list:
    """The shared benchmark prompts (../shared/bench/prompts.json); skips when absent, except in CI."""
    if not BENCH_PROMPTS.is_file():
        skip_or_fail(f"{BENCH_PROMPTS} is missing")
    return json.loads(BENCH_PROMPTS.read_text(encoding="utf-8"))


@pytest.fixture
def forked():
    """Every GPU call of specviz.ui.runtime.work runs in a forked worker (tests/helpers/fork_gpu.py, the stand-in for
    spaces.GPU) while the test runs; workers start fresh with the test and end with it. Yields the
    stand-in's record of (function name, requested seconds) per call."""
    from specviz.ui.runtime import zerogpu
    from tests.helpers import fork_gpu

    zerogpu.use_backend(fork_gpu.GPU)
    fork_gpu.reset()
    fork_gpu.CALLS.clear()
    yield fork_gpu.CALLS
    zerogpu.use_backend(None)
    fork_gpu.reset()
