"""One word per idea: the README's glossary lists the retired names, and each is gone from the
code it is searched in except inside the old-name map the glossary says keeps it (so that files
written before the rename still read)."""
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def retired_rows() -> list[tuple[str, bool, str, str]]:
    """(name, quoted key?, folder searched, the OLD_ map that keeps it or '') per table row."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    table = section[section.index("| retired |"):].split("\n\n", 1)[0].splitlines()[2:]
    rows = []
    for line in table:
        old, _now, scope, kept = (c.strip() for c in line.strip().strip("|").split("|"))
        name = old.strip("`")
        quoted = name.startswith('"')
        rows.append((name.strip('"'), quoted, scope.strip("`"), kept))
    return rows


def occurrences(path: Path, name: str, quoted: bool) -> list[tuple[int, str]]:
    """(line, text) where `name` is a name token (or, quoted, a string literal of exactly it)."""
    src = path.read_text(encoding="utf-8")
    lines = src.splitlines()
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        literal = tok.type == tokenize.STRING and re.fullmatch(r"(['\"])(\w+)\1", tok.string)
        if (not quoted and tok.type == tokenize.NAME and tok.string == name) or \
                (literal and literal.group(2) == name):
            found.append((tok.start[0], lines[tok.start[0] - 1]))
    return found


def stray(name: str, quoted: bool, scope: str, kept: str, root: Path = ROOT) -> list[str]:
    """Where `name` still is under root/scope, outside the one map that may keep it."""
    keeper = re.match(r"`([\w/.]+)` (OLD_\w+)", kept)
    out = []
    for path in sorted((root / scope).rglob("*.py")):
        for line, text in occurrences(path, name, quoted):
            rel = path.relative_to(root / "specviz").as_posix()
            if keeper and rel == keeper.group(1) and text.startswith(f"{keeper.group(2)} = "):
                continue
            out.append(f"{path.relative_to(root)}:{line}: {text.strip()}")
    return out


def test_every_retired_name_is_gone_but_where_the_glossary_keeps_it():
    """Each retired name of the README's glossary is absent from the code it is searched in, as a
    name (or as a quoted key), except on the line of the OLD_ map the table names; a name said to
    be kept is really there, so that old files keep reading."""
    rows = retired_rows()
    assert len(rows) >= 20
    found = {name: stray(name, quoted, scope, kept) for name, quoted, scope, kept in rows}
    assert {name: where for name, where in found.items() if where} == {}
    for name, quoted, _scope, kept in rows:
        if kept:
            file, table = re.match(r"`([\w/.]+)` (OLD_\w+)", kept).groups()
            text = (ROOT / "specviz" / file).read_text(encoding="utf-8")
            assert re.search(rf'^{table} = .*"{name}"', text, flags=re.M), (name, kept)


def test_the_check_finds_a_planted_retired_name(tmp_path):
    """The search finds a retired name used as a name and as a quoted key, and not inside prose or
    in the old-name map that keeps it."""
    plant = tmp_path / "specviz" / "decoding" / "trace.py"
    plant.parent.mkdir(parents=True)
    plant.write_text('"""The runs ran beside each other."""\nOLD_CYCLE_NAMES = {"beside": "concurrent"}\n'
                     'beside = 1\nx = {"beside": 2}\n', encoding="utf-8")
    assert [line for line, _ in occurrences(plant, "beside", False)] == [2, 3, 4]
    where = stray("beside", False, "specviz/", "`decoding/trace.py` OLD_CYCLE_NAMES", root=tmp_path)
    assert [w.split(":")[1] for w in where] == ["3", "4"]
