"""Comments and docstrings in specviz/ name only code that exists: a file path (`ui/work.py`,
`tests/test_speed_model.py`, or `runtime/limits.py` written from a sub-package), a module's name
(`ui/work.ACTIVITY`, `layout.OUTPUTS`), a class's attribute (`ProposeContext.share_passes`) or a
private class (`_SharedCalls`). A rename or a move that leaves such a reference behind fails here,
listing each stale one with its file and line."""
import ast
import functools
import importlib.util
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = ("tests", "scripts", "docs", "assets")  # folders beside the package that a path may name

PATH = re.compile(r"(?<![\w/.-])((?:\w+/)*\w+\.py)\b")
DOTTED = re.compile(r"(?<![\w/.])((?:\w+/)*\w+)\.([A-Za-z_]\w*)")
PRIVATE_CLASS = re.compile(r"(?<![\w.])(_[A-Z]\w*)")


@dataclass
class Package:
    """What a package defines: each module's top-level names, each class's attributes (with its bases),
    and every name defined anywhere."""
    root: Path
    modules: dict[str, set[str]] = field(default_factory=dict)  # "ui/work.py" -> its top-level names
    classes: dict[str, list[tuple[set[str], list[str]]]] = field(default_factory=dict)  # name -> (attrs, bases)
    defined: set[str] = field(default_factory=set)


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines or imports at its top level, as `module.NAME` would reach them."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def class_attributes(node: ast.ClassDef) -> set[str]:
    """A class's methods, class-level names and dataclass fields, and what its methods set on self."""
    attrs = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            attrs.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            attrs.add(n.id)
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store) and \
                isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"):
            attrs.add(n.attr)
    return attrs


def index(package: Path) -> Package:
    """Reads every module of `package` (its folder) once."""
    found = Package(package)
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found.modules[path.relative_to(package).as_posix()] = top_level_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.defined.add(node.name)
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                found.classes.setdefault(node.name, []).append((class_attributes(node), bases))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.defined.add(node.id)
    return found


def prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and of every line of a docstring (or other bare string statement)."""
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(src).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found += [(n, lines[n - 1]) for n in range(node.lineno, node.end_lineno + 1)]
    return sorted(found)


def modules_at(pkg: Package, path: str) -> list[str]:
    """The modules a path names: `ui/work.py`, `work.py` or `specviz/ui/work.py` by its last parts, a
    package by its folder (`proposers` is proposers/__init__.py)."""
    path = path.removeprefix("specviz/")
    wanted = [f"/{path}.py", f"/{path}/__init__.py"] if not path.endswith(".py") else [f"/{path}"]
    return [m for m in pkg.modules if any(f"/{m}".endswith(w) for w in wanted)]


def has_attribute(pkg: Package, cls: str, attr: str, seen: frozenset = frozenset()) -> bool:
    """True when some class named `cls` has `attr`, itself or through a base class of the package; also
    true when a base lies outside the package (the attribute may come from there)."""
    for attrs, bases in pkg.classes.get(cls, []):
        if attr in attrs:
            return True
        for base in bases:
            name = base.split("[")[0].split(".")[-1]
            if name in ("object", "Generic") or name in seen:
                continue
            if name not in pkg.classes or has_attribute(pkg, name, attr, seen | {cls}):
                return True
    return False


def stale_in(text: str, pkg: Package) -> list[str]:
    """The references in one line of prose that name nothing in the package (or, for tests/, scripts/,
    docs/ and assets/, nothing beside it). A bare `name.attr` is checked only when `name` is a module of
    the package and `attr` starts with a capital (a constant or class: `layout.OUTPUTS`), since
    `model.config` is more often a variable than a module; with a folder (`ui/pair_tab.wire`) any attr.
    A path may start at any folder of the package (`runtime/limits.py` is ui/runtime/limits.py, from
    the referring file's folder or any other); one under a folder the package lacks is another
    project's only where that folder is an installed package (`spaces/zero/wrappers.py`), else stale."""
    stale = []
    folders = {part for m in pkg.modules for part in m.split("/")[:-1]}
    for path in PATH.findall(text):
        first = path.removeprefix("specviz/").split("/")[0]
        if "/" in path and first not in OUTSIDE and first not in folders and not path.startswith("specviz/") \
                and installed(first):
            continue  # another project's file (spaces/zero/wrappers.py)
        if first in OUTSIDE or "/" not in path:
            ok = (pkg.root.parent / path).exists() or bool(modules_at(pkg, path))
        else:
            ok = bool(modules_at(pkg, path))
        if not ok:
            stale.append(path)
    for head, attr in DOTTED.findall(text):
        if attr == "py":
            continue
        where = modules_at(pkg, head)
        if where and ("/" in head or attr[0].isupper()):
            if not any(attr in pkg.modules[m] for m in where):
                stale.append(f"{head}.{attr}")
        elif not where and head in pkg.classes and not has_attribute(pkg, head, attr):
            stale.append(f"{head}.{attr}")
    stale += [name for name in PRIVATE_CLASS.findall(text) if name not in pkg.defined]
    return stale


@functools.lru_cache(maxsize=None)
def installed(name: str) -> bool:
    """Whether `name` is an importable top-level package here (spaces, transformers): another project."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@functools.lru_cache(maxsize=None)
def package() -> Package:
    return index(ROOT / "specviz")


def stale_references(pkg: Package) -> list[str]:
    """`file:line: reference` for every stale reference in the comments and docstrings of the package."""
    out = []
    for rel in sorted(pkg.modules):
        for line, text in prose(pkg.root / rel):
            out += [f"{rel}:{line}: {ref}" for ref in stale_in(text, pkg)]
    return out


def test_comments_and_docstrings_name_only_what_exists():
    """No comment or docstring in specviz/ names a file, a module's name, a class's attribute or a
    private class that does not exist."""
    assert stale_references(package()) == []


def test_the_check_finds_each_kind_of_stale_reference(tmp_path):
    """Planted in a small package: a missing file (named from the package, from a sub-package, or under
    a folder that is nowhere), a missing name of a module (with a folder and
    without), a missing attribute of a class and a missing private class are found; the same forms
    naming what exists, a variable that shares a module's name, a class with a base outside the package,
    and paths outside the package are not."""
    pkg = tmp_path / "specviz"
    (pkg / "ui" / "runtime").mkdir(parents=True)
    (pkg / "ui" / "runtime" / "limits.py").write_text("", encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_work.py").write_text("", encoding="utf-8")
    (pkg / "ui" / "work.py").write_text("import gradio\nACTIVITY = 1\n\n\ndef run(): pass\n", encoding="utf-8")
    (pkg / "ui" / "layout.py").write_text(
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Context:\n    share: bool = False\n\n"
        "    def go(self):\n        self.done = True\n\n\nclass _Calls:\n    pass\n\n\nclass Head(Module):\n    pass\n",
        encoding="utf-8")
    (pkg / "ui" / "views.py").write_text(
        '"""Drawn as ui/compare.py drew them; see ui/work.ACTIVITY and ui/work.MISSING, ui/work.gone."""\n'
        "# layout.OUTPUTS and work.ACTIVITY; Context.together and Context.share, Context.done, Head.training\n"
        "# the one _SharedSteps, the one _Calls; tests/test_work.py, tests/test_gone.py, work.py, gone.py\n"
        "# model.config, spaces/zero/wrappers.py, specviz/ui/work.py\n"
        "# runtime/limits.py and ui/runtime/limits.py; runtime/gone.py, nowhere/limits.py\n", encoding="utf-8")
    found = stale_references(index(pkg))
    assert found == ["ui/views.py:1: ui/compare.py", "ui/views.py:1: ui/work.MISSING", "ui/views.py:1: ui/work.gone",
                     "ui/views.py:2: layout.OUTPUTS", "ui/views.py:2: Context.together",
                     "ui/views.py:3: tests/test_gone.py", "ui/views.py:3: gone.py", "ui/views.py:3: _SharedSteps",
                     "ui/views.py:5: runtime/gone.py", "ui/views.py:5: nowhere/limits.py"]
