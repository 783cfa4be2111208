"""tests/README.md's map is right: every module of specviz/ has a row naming its test files, every
row is a module that exists, and every file a row names exists; the `perf` marker splits the suite
in two without losing a test; scripts/test.sh runs both halves and fails when either fails."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAP = ROOT / "tests" / "README.md"
ROW = re.compile(r"^\| `(specviz/[\w/]+\.py)` \| (.*) \|$")
NONE_YET = "none of its own yet"


def rows() -> dict[str, str]:
    """module path → its tests cell, from the README's table."""
    found = [ROW.match(line) for line in MAP.read_text(encoding="utf-8").splitlines()]
    return {m.group(1): m.group(2) for m in found if m}


def has_code(path: Path) -> bool:
    """False for an __init__.py that holds only a docstring (nothing there to test)."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return bool(body)


def modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "specviz").rglob("*.py")
                  if p.name != "__init__.py" or has_code(p))


def test_every_module_has_a_row_and_every_row_a_module():
    """Each module under specviz/ (an __init__.py only when it holds code) is in the map, and the
    map has no row for a module that is gone."""
    table = rows()
    assert len(table) >= 100
    assert [m for m in modules() if m not in table] == []
    assert [m for m in table if not (ROOT / m).is_file()] == []


def test_every_named_test_file_exists_and_every_row_names_one():
    """Every `tests/...py` the map names exists, and every row names at least one test file, or
    says that the module has none of its own yet."""
    text = MAP.read_text(encoding="utf-8")
    named = set(re.findall(r"`(tests/[\w/]+\.py)`", text))
    assert len(named) >= 60
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []
    bare = [m for m, cell in rows().items() if not re.search(r"`tests/[\w/]+\.py`", cell) and NONE_YET not in cell]
    assert bare == []


def collected(*args: str) -> int:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return int(re.search(r"(\d+)(?:/\d+)? tests? collected", out.stdout).group(1))


@pytest.mark.slow
def test_not_perf_and_perf_together_are_the_whole_suite():
    """`-m "not perf"` and `-m perf` collect disjoint halves that add up to every test, and there
    are perf tests to run."""
    total, rest, perf = collected(), collected("-m", "not perf"), collected("-m", "perf")
    assert perf > 0 and rest + perf == total, (total, rest, perf)


@pytest.mark.parametrize("first, second, code", [(0, 0, 0), (1, 0, 1), (0, 1, 1), (1, 1, 1)])
def test_the_test_script_runs_both_halves_and_fails_when_either_fails(tmp_path, first, second, code):
    """scripts/test.sh, run from another folder with a stand-in for .venv/bin/python, calls pytest
    twice from the repo root (all but perf with the extra arguments, then perf alone), runs the
    second call even when the first fails, and exits non-zero when either fails."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "test.sh").write_text((ROOT / "scripts" / "test.sh").read_text(encoding="utf-8"))
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    log = tmp_path / "calls"
    python.write_text(f'#!/usr/bin/env bash\necho "$PWD|$*" >> {log}\n'
                      f'case "$*" in *"-m perf"*) exit {second} ;; *) exit {first} ;; esac\n')
    python.chmod(0o755)
    out = subprocess.run(["bash", str(repo / "scripts" / "test.sh"), "tests/decoding", "-x"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": os.environ["PATH"]})
    assert (out.returncode != 0) == bool(code), out.stderr
    assert log.read_text().splitlines() == [f"{repo}|-m pytest -q -m not perf tests/decoding -x",
                                            f"{repo}|-m pytest -q -m perf"]


def test_the_test_script_keeps_perf_out_of_a_marker_expression_it_is_given(tmp_path):
    """An extra `-m EXPR` goes to the first call as `(EXPR) and not perf`, so it cannot bring the
    perf tests into it."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "test.sh").write_text((ROOT / "scripts" / "test.sh").read_text(encoding="utf-8"))
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    log = tmp_path / "calls"
    python.write_text(f'#!/usr/bin/env bash\nfor a in "$@"; do echo "$a"; done >> {log}\necho --- >> {log}\n')
    python.chmod(0o755)
    out = subprocess.run(["bash", str(repo / "scripts" / "test.sh"), "-m", "not slow"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first = log.read_text().split("---\n")[0].splitlines()
    assert first == ["-m", "pytest", "-q", "-m", "(not slow) and not perf"]
