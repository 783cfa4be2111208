"""One word per idea: docs/GLOSSARY.md lists the retired names, and each is gone from the code it is
searched in, its comments and docstrings included, except inside the old-name map the glossary says
keeps it (so that files written before the rename still read)."""
import ast
import functools
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "GLOSSARY.md"


def retired_rows() -> list[tuple[str, bool, str, str]]:
    """(name, quoted key?, folder searched, the OLD_ map that keeps it or '') per table row."""
    text = GLOSSARY.read_text(encoding="utf-8")
    section = text.split("## Retired names", 1)[1].split("\n## ", 1)[0]
    table = section[section.index("| retired |"):].split("\n\n", 1)[0].splitlines()[2:]
    rows = []
    for line in table:
        old, _now, scope, kept = (c.strip() for c in line.strip().strip("|").split("|"))
        name = old.strip("`")
        quoted = name.startswith('"')
        rows.append((name.strip('"'), quoted, scope.strip("`"), kept))
    return rows


@functools.lru_cache(maxsize=None)
def parsed(path: Path) -> tuple[list[str], list[tokenize.TokenInfo], list[tuple[int, str]]]:
    """A file's lines, its tokens, and (line, text) of every comment and of every line of a docstring
    (or other bare string statement); read once, since every retired name searches every file."""
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    prose = [(tok.start[0], tok.string) for tok in tokens if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            prose += [(n, lines[n - 1]) for n in range(node.lineno, node.end_lineno + 1)]
    return lines, tokens, sorted(prose)


def occurrences(path: Path, name: str, quoted: bool) -> list[tuple[int, str]]:
    """(line, text) where `name` is a name token (or, quoted, a string literal of exactly it)."""
    lines, tokens, _prose = parsed(path)
    found = []
    for tok in tokens:
        literal = tok.type == tokenize.STRING and re.fullmatch(r"(['\"])(\w+)\1", tok.string)
        if (not quoted and tok.type == tokenize.NAME and tok.string == name) or \
                (literal and literal.group(2) == name):
            found.append((tok.start[0], lines[tok.start[0] - 1]))
    return found


def prose_pattern(name: str, quoted: bool) -> re.Pattern:
    """How a retired name shows in prose. A quoted key as a quoted string; a name no sentence uses as
    a word (one with `_` or a capital inside, like `per_step` or `StepCost`) anywhere as a whole word;
    an English word (`beside`, `together`, `Profile`) only where it is code: in backticks, joined by a
    dot to a name (`ProposeContext.together`), or followed by `=` or `(`."""
    word = re.escape(name)
    if quoted:
        return re.compile(rf"(['\"]){word}\1")
    if "_" in name or re.search(r"[A-Z]", name[1:]):
        return re.compile(rf"(?<![\w.]){word}\b|(?<=\.){word}\b")
    return re.compile(rf"`{word}`|(?<=\w\.){word}\b|\b{word}\.\w|\b{word}(?=[=(])")


def prose_occurrences(path: Path, name: str, quoted: bool) -> list[tuple[int, str]]:
    """(line, text) where a comment or docstring names `name` (see prose_pattern)."""
    lines, _tokens, prose = parsed(path)
    pattern = prose_pattern(name, quoted)
    return [(n, lines[n - 1]) for n, text in prose if pattern.search(text)]


def stray(name: str, quoted: bool, scope: str, kept: str, root: Path = ROOT) -> list[str]:
    """Where `name` still is under root/scope, in code, comments or docstrings, outside the one map that
    may keep it: in the file that keeps it, the map's own line and a comment or docstring line that
    names the map (its explanation) are allowed."""
    keeper = re.match(r"`([\w/.]+)` (OLD_\w+)", kept)
    out = []
    for path in sorted((root / scope).rglob("*.py")):
        for line, text in sorted(set(occurrences(path, name, quoted) + prose_occurrences(path, name, quoted))):
            rel = path.relative_to(root / "specviz").as_posix()
            if keeper and rel == keeper.group(1) and re.search(rf"\b{keeper.group(2)}\b", text):
                continue
            out.append(f"{path.relative_to(root)}:{line}: {text.strip()}")
    return out


def test_every_retired_name_is_gone_but_where_the_glossary_keeps_it():
    """Each retired name of docs/GLOSSARY.md is absent from the code it is searched in (a folder that
    exists, since a moved one would search nothing), as a name (or as a quoted key) and in comments
    and docstrings, except where the OLD_ map the table names keeps it; a name said to be kept is
    really there, so that old files keep reading."""
    rows = retired_rows()
    assert len(rows) >= 20
    assert [scope for _name, _quoted, scope, _kept in rows if not (ROOT / scope).is_dir()] == []
    found = {name: stray(name, quoted, scope, kept) for name, quoted, scope, kept in rows}
    assert {name: where for name, where in found.items() if where} == {}
    for name, quoted, _scope, kept in rows:
        if kept:
            file, table = re.match(r"`([\w/.]+)` (OLD_\w+)", kept).groups()
            text = (ROOT / "specviz" / file).read_text(encoding="utf-8")
            assert re.search(rf'^{table} = .*"{name}"', text, flags=re.M), (name, kept)


def test_the_check_finds_a_planted_retired_name(tmp_path):
    """The search finds a retired name used as a name, as a quoted key, and as code in a comment or a
    docstring; not as an English word in prose, not in the old-name map that keeps it, and not in a
    comment that explains that map."""
    plant = tmp_path / "specviz" / "decoding" / "trace.py"
    plant.parent.mkdir(parents=True)
    plant.write_text('"""The runs ran beside each other."""\nOLD_CYCLE_NAMES = {"beside": "concurrent"}\n'
                     'beside = 1\nx = {"beside": 2}\n'
                     '# runs that ran beside others used to be `beside` (OLD_CYCLE_NAMES)\n'
                     '# a cycle\'s `beside` count\n\n\ndef f():\n    """Reads c.beside, as cycles ran beside"""\n',
                     encoding="utf-8")
    assert [line for line, _ in occurrences(plant, "beside", False)] == [2, 3, 4]
    assert [line for line, _ in prose_occurrences(plant, "beside", False)] == [5, 6, 10]
    where = stray("beside", False, "specviz/", "`decoding/trace.py` OLD_CYCLE_NAMES", root=tmp_path)
    assert [w.split(":")[1] for w in where] == ["3", "4", "6", "10"]


def test_prose_finds_a_retired_name_only_where_it_is_code():
    """In a comment or docstring, a name no sentence uses (`per_step`, `StepCost`) is found as a whole
    word, an English word (`together`) only in backticks, after a dot or before `=` or `(`, and a
    quoted key only in quotes."""
    def hits(name, text, quoted=False):
        return bool(prose_pattern(name, quoted).search(text))

    assert hits("per_step", "each entry's per_step timing") and hits("StepCost", "a StepCost, timed")
    assert not hits("per_step", "per_steps") and not hits("StepCost", "StepCosts")
    assert hits("together", "(ProposeContext.together)") and hits("together", "the `together` flag")
    assert hits("together", "pass together=True") and hits("together", "together.run()")
    assert not hits("together", "runs decoded together, in one pass.")
    assert hits("load", 'timing "load" and', quoted=True) and not hits("load", "a load of work", quoted=True)
