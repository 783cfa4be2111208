"""The package's folders are its layers, and imports only go down: models → decoding → measure
and teach → viz → ui → tools. The README's architecture section names the same folders."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "specviz"

# Rank of each layer; a module may import its own rank or lower. Proposers and the draft head
# are decoding: the engine makes proposers, proposers draft with the head.
LAYERS = {
    "models": 0,
    "decoding": 1, "proposers": 1, "head": 1,
    "measure": 2, "teach": 2,
    "viz": 3,
    "ui": 4,
}
TOOLS = 5  # top-level modules: cli, browser, __main__, and the package's own __init__


def layer_of(module: str) -> int:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in LAYERS:
        return TOOLS
    return LAYERS[parts[1]]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module) for every specviz module the file imports, at any depth of its code;
    `module` is the file's dotted name, which relative imports start from."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module.split(".")
    package = me if path.name == "__init__.py" else me[:-1]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "specviz"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "specviz":
                continue
            # `from specviz.x import y` may name a module y: count the deeper one when it exists
            for a in node.names:
                sub = f"{target}.{a.name}"
                as_path = ROOT / sub.replace(".", "/")
                found.append((node.lineno, sub if as_path.with_suffix(".py").exists() or as_path.is_dir()
                              else target))
    return found


def upward_imports(path: Path, module: str) -> list[str]:
    mine = layer_of(module)
    return [f"{module}:{line} imports {target}" for line, target in imported_modules(path, module)
            if layer_of(target) > mine]


def test_every_module_imports_only_its_own_layer_or_below():
    """No module imports from a layer above its own (the whole package is walked, lazy imports
    inside functions included)."""
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 40  # the walk found the package
    assert [u for path in modules for u in upward_imports(path, module_name(path))] == []


def test_the_walker_catches_upward_imports_in_any_form(tmp_path):
    """A decoding module that imports viz relatively, ui absolutely, or cli inside a function is
    reported three times; its imports of models and of its own layer are not."""
    fake = tmp_path / "fake.py"
    fake.write_text("from ..viz import tree_figure\nimport specviz.ui.state\nfrom ..models import kvcache\n"
                    "from . import trace\ndef f():\n    from specviz import cli\n")
    found = upward_imports(fake, "specviz.decoding.fake")
    assert [f.split(" imports ")[1] for f in found] == ["specviz.viz.tree_figure", "specviz.ui.state", "specviz.cli"]


@pytest.mark.parametrize("package", ["specviz.viz", "specviz.teach", "specviz.teach.toy", "specviz.decoding.trace"])
def test_drawing_and_teaching_do_not_import_transformers(package):
    """Importing the drawing layer or the toy sampler loads neither transformers nor gradio."""
    code = (f"import sys, importlib; importlib.import_module({package!r}); "
            "print(sorted(m for m in ('transformers', 'gradio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_readme_names_every_folder_of_the_package():
    """The README's architecture section lists each layer folder and each top-level module."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Architecture", 1)[1].split("\n## ", 1)[0]
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(LAYERS)
    for name in folders:
        assert re.search(rf"`specviz/{name}/`", section), name
    for path in PACKAGE.glob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            assert f"`{path.name}`" in section or f"`specviz/{path.name}`" in section, path.name
