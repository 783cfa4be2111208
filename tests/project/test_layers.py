"""The package's folders are its layers, and imports only go down a graph of them: each folder
may import its own modules and the folders it sits on (MAY_IMPORT, followed down). Siblings do not
import each other: the head and drafting, pricing and served, measure and teach, teach and advise. No two modules
import each other, however indirectly. docs/ARCHITECTURE.md draws the same graph."""
import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specviz"

# Each folder and the folders it sits on directly. `models` is what a model is (LoadedModel, the
# errors, the tiny twins); `passes` runs a target's passes; `pricing` times them; `served` talks to
# a vLLM server; `loading` turns a spec into a LoadedModel with all of those. The head is a network
# over a target; drafting is what a draft is (its tree, its sampling rules), which proposers return
# and sample with; the engine (decoding) builds proposers by name; measure and teach run the
# engine or its rules; advise, the pair advisor, measures a survey and predicts from it with
# measure's model of speed; viz draws their results; ui shows them; training evaluates the head it
# trains with the engine.
MAY_IMPORT = {
    "models": (),
    "passes": ("models",),
    "pricing": ("passes",),
    "served": ("models",),
    "loading": ("pricing", "served"),
    "head": ("loading",),
    "drafting": ("passes",),
    "proposers": ("head", "drafting"),
    "decoding": ("proposers",),
    "measure": ("decoding",),
    "teach": ("decoding",),
    "advise": ("measure",),
    "viz": ("advise", "teach"),
    "ui": ("viz",),
    "training": ("decoding",),
}
LAYERS = tuple(MAY_IMPORT)
TOOLS = "tools"  # top-level modules: cli, browser, __main__, and the package's own __init__


def below(layer: str) -> set[str]:
    """Every folder `layer` may import: those it sits on, followed down."""
    seen: set[str] = set()
    todo = list(MAY_IMPORT.get(layer, ()))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += MAY_IMPORT[name]
    return seen


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in MAY_IMPORT:
        return TOOLS
    return parts[1]


def may_import(importer: str, imported: str) -> bool:
    if importer == TOOLS or importer == imported:
        return True
    return imported in below(importer)


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _target_of(node: ast.ImportFrom, package: list[str]) -> str:
    """The module a `from … import` reads from, relative imports resolved against `package`."""
    if not node.level:
        return node.module or ""
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(path: Path, module: str, root: Path = ROOT) -> list[tuple[int, str]]:
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
            target = _target_of(node, package)
            if target.split(".")[0] != "specviz":
                continue
            # `from specviz.x import y` may name a module y: count the deeper one when it exists
            for a in node.names:
                sub = f"{target}.{a.name}"
                as_path = root / sub.replace(".", "/")
                found.append((node.lineno, sub if as_path.with_suffix(".py").exists() or as_path.is_dir()
                              else target))
    return found


def upward_imports(path: Path, module: str) -> list[str]:
    mine = layer_of(module)
    return [f"{module}:{line} imports {target}" for line, target in imported_modules(path, module)
            if not may_import(mine, layer_of(target))]


def import_graph(package: Path, root: Path = ROOT) -> dict[str, set[str]]:
    """Module → the other modules of the package it imports, deferred imports included."""
    graph = {}
    for path in sorted(package.rglob("*.py")):
        name = module_name(path, root)
        graph[name] = {t for _, t in imported_modules(path, name, root) if t != name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a path that ends where it starts) per group of modules that reach each other."""
    return [_cycle_through(sorted(group)[0], group, graph) for group in _strong_components(graph)
            if len(group) > 1]


def _strong_components(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm: modules grouped so that each group's members all reach one another."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:  # v is the first of its group reached: the group is on the stack above it
            group = set(stack[stack.index(v):])
            del stack[stack.index(v):]
            groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups, key=sorted)


def _cycle_through(start: str, group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """The shortest path from `start` back to itself inside `group` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        reached = []
        for v in frontier:
            if start in graph[v]:
                path = [v]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [*reversed(path), start]
            for w in sorted(graph[v] & group - came_from.keys() - {start}):
                came_from[w] = v
                reached.append(w)
        frontier = reached
    raise AssertionError(f"{start} is in a group of modules that reach each other but on no cycle")


def test_every_module_imports_only_its_own_layer_or_below():
    """No module imports from a layer above its own (the whole package is walked, lazy imports
    inside functions included)."""
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 40  # the walk found the package
    assert [u for path in modules for u in upward_imports(path, module_name(path))] == []


def test_the_walker_catches_upward_imports_in_any_form(tmp_path):
    """A decoding module that imports viz relatively, ui absolutely, or cli inside a function is
    reported three times; its imports of models, proposers and of its own layer are not."""
    fake = tmp_path / "fake.py"
    fake.write_text("from ..viz import tree_figure\nimport specviz.ui.runtime.state\nfrom ..models import kvcache\n"
                    "from . import trace\nfrom specviz.proposers import base\ndef f():\n    from specviz import cli\n")
    found = upward_imports(fake, "specviz.decoding.fake")
    assert [f.split(" imports ")[1] for f in found] == [
        "specviz.viz.tree_figure", "specviz.ui.runtime.state", "specviz.cli"]


def test_each_folder_imports_only_what_it_sits_on(tmp_path):
    """The head may not import proposers, proposers may not import the engine, measure may not
    import teach or the advisor (advise), the advisor may import measure but not teach, viz may
    import the advisor, drafting may not import proposers, and the siblings head and drafting, pricing
    and served, passes and loading, do not import each other; a proposer may import the draft tree
    and sampling rules, the loader may import pricing and served, and the training code may import
    the engine. The graph has no cycle of folders."""
    fake = tmp_path / "fake.py"
    fake.write_text("from specviz.proposers import base\n")
    assert upward_imports(fake, "specviz.head.fake") != []
    fake.write_text("from specviz.decoding import engine\nimport specviz.decoding.settings\n")
    assert len(upward_imports(fake, "specviz.proposers.fake")) == 2
    fake.write_text("from specviz.teach import toy\n")
    assert upward_imports(fake, "specviz.measure.fake") != []
    assert upward_imports(fake, "specviz.advise.fake") != []
    fake.write_text("from specviz.advise import advice\n")
    assert upward_imports(fake, "specviz.measure.fake") != []
    assert upward_imports(fake, "specviz.teach.fake") != []
    assert upward_imports(fake, "specviz.viz.fake") == []
    fake.write_text("from specviz.measure import speed_model\n")
    assert upward_imports(fake, "specviz.advise.fake") == []
    fake.write_text("from specviz.drafting.tree import DraftTree\nfrom ..drafting import sampling\n")
    assert upward_imports(fake, "specviz.proposers.fake") == []
    fake.write_text("from specviz.proposers import base\n")
    assert upward_imports(fake, "specviz.drafting.fake") != []
    fake.write_text("from specviz.decoding.engine import generate\nfrom specviz.proposers.head import HeadProposer\n")
    assert upward_imports(fake, "specviz.training.fake") == []
    fake.write_text("from specviz.drafting import tree\n")
    assert upward_imports(fake, "specviz.head.fake") != []
    fake.write_text("from specviz.served import remote\n")
    assert upward_imports(fake, "specviz.pricing.fake") != []
    fake.write_text("from specviz.loading import loader\n")
    assert upward_imports(fake, "specviz.passes.fake") != []
    assert upward_imports(fake, "specviz.served.fake") != []
    fake.write_text("from specviz.pricing import costs\nfrom specviz.served import remote\n"
                    "from specviz.passes import kvcache\n")
    assert upward_imports(fake, "specviz.loading.fake") == []
    assert all(name not in below(name) for name in LAYERS)


def test_no_two_modules_import_each_other():
    """The package's import graph, deferred imports included, has no cycle: no module reaches
    itself through the modules it imports."""
    graph = import_graph(PACKAGE)
    assert len(graph) > 40
    assert import_cycles(graph) == []


# Inside ui, one module or folder per tab. Tabs share only `shared` (the run logic, the inputs, the
# views) and `runtime` (the server side, which imports nothing else of ui); only the page puts the
# tabs together, so what crosses tabs is wired there.
UI_TABS = ("decode", "learn", "side_by_side", "compare", "theory", "advise")
UI_MAY_IMPORT = {"runtime": ("runtime",), "shared": ("shared", "runtime"),
                 **{tab: (tab, "shared", "runtime") for tab in UI_TABS},
                 "page": (*UI_TABS, "shared", "runtime"), "__init__": ("page",)}


def ui_part(module: str) -> str | None:
    """The tab, `shared`, `runtime`, `page` or `__init__` a module of specviz.ui belongs to (None outside ui)."""
    parts = module.split(".")
    if parts[:2] != ["specviz", "ui"]:
        return None
    return parts[2] if len(parts) > 2 else "__init__"


def ui_crossings(path: Path, module: str) -> list[str]:
    mine = ui_part(module)
    allowed = UI_MAY_IMPORT.get(mine, ())
    return [f"{module}:{line} imports {target}" for line, target in imported_modules(path, module)
            if ui_part(target) is not None and ui_part(target) not in allowed]


def test_ui_is_one_module_or_folder_per_tab_and_a_runtime():
    """Listing specviz/ui shows the six tabs, the shared run logic, the runtime and the page, and
    nothing else; no tab imports another tab, the runtime imports nothing above it, and `shared`
    imports no tab."""
    ui = PACKAGE / "ui"
    entries = {p.stem for p in ui.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert entries == set(UI_MAY_IMPORT)
    modules = sorted(ui.rglob("*.py"))
    assert len(modules) > 20
    assert [c for path in modules for c in ui_crossings(path, module_name(path))] == []


def test_the_ui_check_catches_a_tab_importing_another(tmp_path):
    """A Side by side module importing Decode's handlers, a runtime module importing the shared views
    and a shared module importing a tab are each reported; a tab importing shared and runtime is not."""
    fake = tmp_path / "fake.py"
    fake.write_text("from specviz.ui.decode import handlers\nfrom specviz.ui.shared import run\n")
    assert [c.split(" imports ")[1] for c in ui_crossings(fake, "specviz.ui.side_by_side.fake")] == [
        "specviz.ui.decode.handlers"]
    fake.write_text("from specviz.ui.shared import views\n")
    assert ui_crossings(fake, "specviz.ui.runtime.fake") != []
    fake.write_text("from specviz.ui import compare\n")
    assert ui_crossings(fake, "specviz.ui.shared.fake") != []
    fake.write_text("from specviz.ui.runtime.state import session_of\nfrom specviz.ui.shared import views\n")
    assert ui_crossings(fake, "specviz.ui.theory") == []


def _plant(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "specviz"


def test_the_cycle_check_finds_planted_cycles(tmp_path):
    """A temporary package with a two-module cycle closed by a deferred relative import, and a
    three-module cycle through an attribute import, is reported with both cycles and nothing
    else: a module that only imports into a cycle is not part of one."""
    package = _plant(tmp_path, {
        "specviz/__init__.py": "",
        "specviz/alpha/__init__.py": "",
        "specviz/alpha/a.py": "from specviz.alpha import b\n",
        "specviz/alpha/b.py": "def later():\n    from . import a\n",
        "specviz/alpha/outside.py": "import specviz.alpha.a\n",
        "specviz/beta/__init__.py": "",
        "specviz/beta/c.py": "import specviz.beta.d\n",
        "specviz/beta/d.py": "from specviz.beta.e import THING\n",
        "specviz/beta/e.py": "THING = 1\nfrom .c import *\n",
    })
    cycles = import_cycles(import_graph(package, tmp_path))
    assert cycles == [["specviz.alpha.a", "specviz.alpha.b", "specviz.alpha.a"],
                      ["specviz.beta.c", "specviz.beta.d", "specviz.beta.e", "specviz.beta.c"]]


def test_the_cycle_check_passes_an_acyclic_graph():
    """A graph where imports fan out and meet again, without returning, has no cycle."""
    graph = {"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}
    assert import_cycles(graph) == []


@pytest.mark.parametrize("package", ["specviz.viz", "specviz.teach", "specviz.teach.toy", "specviz.decoding.trace"])
def test_drawing_and_teaching_do_not_import_transformers(package):
    """Importing the drawing layer or the toy sampler loads neither transformers nor gradio."""
    code = (f"import sys, importlib; importlib.import_module({package!r}); "
            "print(sorted(m for m in ('transformers', 'gradio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_readme_names_every_folder_of_the_package():
    """docs/ARCHITECTURE.md lists each layer folder once, in an order where every
    folder comes after those it sits on, draws exactly MAY_IMPORT's edges in its graph, and names
    each top-level module."""
    section = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    folders = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert folders == sorted(LAYERS)
    listed = re.findall(r"^\d+\. `specviz/(\w+)/`", section, flags=re.M)
    assert sorted(listed) == folders
    assert all(set(MAY_IMPORT[name]) <= set(listed[:i]) for i, name in enumerate(listed))
    graph = section.split("```mermaid", 1)[1].split("```", 1)[0]
    drawn = set(re.findall(r"^\s*(\w+) --> (\w+)\s*$", graph, flags=re.M))
    assert drawn == {(name, low) for name, lows in MAY_IMPORT.items() for low in lows}
    for path in PACKAGE.glob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            assert f"`{path.name}`" in section or f"`specviz/{path.name}`" in section, path.name
