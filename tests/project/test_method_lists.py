"""A method is one entry (issue 66): outside the registry (specviz/proposers/__init__.py), no code under
specviz/ or scripts/ writes a list of method names. Every picker, table and default reads them from the registry
and each method's spec, so adding a method never means finding the lists that should name it.

The scan reads every module's syntax tree for a tuple, list or set, a dict's keys, or a comma-separated
string ("ar,pld,logitspec") holding two or more registered method names. A `Literal[...]` is a file
format's fixed values, not a list to extend, and is not counted. Tests and docs may list methods.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from specviz.proposers import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
REGISTRY_FILE = ROOT / "specviz" / "proposers" / "__init__.py"


def _literal_slices(tree: ast.AST) -> set[int]:
    """ids of the nodes that are a `Literal[...]`'s values."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and getattr(node.value, "id", getattr(node.value, "attr", "")) == "Literal":
            out.update(id(n) for n in ast.walk(node.slice))
    return out


def _names(node: ast.AST, names: set[str]) -> set[str]:
    """The registered method names a collection node or a comma-separated string holds."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = node.elts
    elif isinstance(node, ast.Dict):
        items = [key for key in node.keys if key is not None]
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "," in node.value \
            and " " not in node.value.strip():
        return {part for part in node.value.split(",") if part in names}
    else:
        return set()
    return {item.value for item in items if isinstance(item, ast.Constant) and item.value in names}


def method_lists(source: str, names: set[str]) -> list[tuple[int, list[str]]]:
    """(line, names) of every list of two or more method names in `source`."""
    tree = ast.parse(source)
    skip = _literal_slices(tree)
    found = [(node.lineno, sorted(_names(node, names))) for node in ast.walk(tree)
             if isinstance(node, ast.expr) and id(node) not in skip]
    return sorted((line, held) for line, held in found if len(held) >= 2)


def test_no_list_of_method_names_outside_the_registry():
    """No module under specviz/ but the registry, and no script under scripts/ (a benchmark's defaults, a
    recorded asset's candidates), holds a list of two or more registered method names."""
    names = set(REGISTRY)
    files = [*(ROOT / "specviz").rglob("*.py"), *(ROOT / "scripts").rglob("*.py"), ROOT / "app.py"]
    found = [f"{path.relative_to(ROOT)}:{line}: {', '.join(held)}"
             for path in sorted(files) if path != REGISTRY_FILE
             for line, held in method_lists(path.read_text(), names)]
    assert not found, "method names listed outside the registry (read proposers.specs() instead):\n" + \
        "\n".join(found)


@pytest.mark.parametrize("planted", [
    'METHODS = ("ar", "pld", "logitspec")',
    'CHOICES = [("Prompt lookup", "pld"), "hybrid", "suffix"]',
    'DEFAULT_ROWS = {"pld", "logitspec"}',
    'WHY = {"hybrid": "joins", "head": "is trained"}',
    'SUITE = "ar,hybrid,pld"',
    'def f(method):\n    return method in ("suffix", "hybrid")',
])
def test_a_planted_list_is_found(planted):
    """The scan finds each planted form of a method list (a tuple, a list, a set, a dict's keys, a
    comma-separated string, a membership test)."""
    assert method_lists(planted, set(REGISTRY))


@pytest.mark.parametrize("clean", [
    'method = "pld"',
    'if method == "hybrid":\n    pass',
    'source: Literal["candidate", "suffix", "head"]',
    'HELP = "pld and logitspec, or hybrid"',
    'PAIR = ("pld", 16)',
])
def test_one_name_a_literal_or_prose_is_not_a_list(clean):
    """A single name, a file format's Literal, prose that names methods and a pair with one name are not
    lists of methods."""
    assert not method_lists(clean, set(REGISTRY))


def test_joiners_and_parts_come_from_the_specs():
    """`joiners()` is every method whose spec joins others' drafts, and `parts()` the methods they join,
    once each in their order, without those that learn across runs unless asked: the defaults the
    benchmarks and the advisor read."""
    from specviz.proposers import joiners, joins, parts, spec

    assert joiners() == tuple(m for m in REGISTRY if spec(m).joins)
    everything = list(dict.fromkeys(p for m in joiners() for p in joins(m)))
    assert list(parts(learning=True)) == everything
    assert list(parts()) == [p for p in everything if not spec(p).learns]
    assert any(spec(p).learns for p in everything), "the hybrid joins a method that learns (suffix)"
