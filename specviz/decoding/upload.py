"""Reading a file a visitor uploads (a trace, a Side by side file, an advice survey) through pydantic.

The dataclasses are the schema: each field's annotation carries its type and its bounds
(`Annotated[int, Field(ge=…, le=…)]`, built by the helpers below), and a `TypeAdapter` over the
dataclass validates the JSON text in compiled code, in strict mode (a whole number is not `true`
nor `1.0`, text is not a number), with no NaN or infinity. What a reader accepts is thus bounded
before any view draws it: drawing work follows the caps, never a number written inside the file.

pydantic's errors are turned into one sentence that says where and what, as the hand-written
schema this replaces did, e.g. "The run, cycle 3, node 2: 'depth' must be a whole number from 1
to 64, got 20000000.": `message()` walks the error's location down the annotated types and
describes the field it ends on. `bounds_off()` keeps the types and drops the bounds, for the test
that shows the bounds are what refuse a size bomb.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import re
import types
import typing
from typing import Annotated, Any, Iterator, Literal, Union

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import SchemaValidator
from typing_extensions import is_typeddict

_ENFORCE = [True]  # False inside bounds_off()

# Every dataclass and TypedDict of a file: strict types, finite numbers, unknown fields refused
# (UPLOAD) or ignored (UPLOAD_OPEN, where a reader keeps only what it knows).
UPLOAD = ConfigDict(strict=True, allow_inf_nan=False, extra="forbid")
UPLOAD_OPEN = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")


# -- bounded types, for the dataclasses' annotations ----------------------------------------------
def whole(lo: int, hi: int) -> Any:
    """A whole number from lo to hi."""
    return Annotated[int, Field(ge=lo, le=hi)]


def number(lo: float, hi: float) -> Any:
    """A finite number (a whole number counts) from lo to hi."""
    return Annotated[float, Field(ge=lo, le=hi)]


def text(max_len: int) -> Any:
    """Text of at most max_len characters."""
    return Annotated[str, Field(max_length=max_len)]


def items(item: Any, max_len: int) -> Any:
    """A list of at most max_len items."""
    return Annotated[list[item], Field(max_length=max_len)]


def entries(value: Any, max_len: int, key: Any = None) -> Any:
    """An object of at most max_len entries; keys are text of at most 200 characters unless given."""
    return Annotated[dict[key if key is not None else text(200), value], Field(max_length=max_len)]


# Any small JSON value, for fields a reader keeps but no view relies on: null, true/false, a finite
# number, text of at most 4096 characters, or a list of at most 64 of those.
_SCALAR = Union[None, bool, whole(-10 ** 18, 10 ** 18), number(-1e308, 1e308), text(4096)]
PLAIN = Union[_SCALAR, items(_SCALAR, 64)]
_PLAIN_WORDS = "null, true/false, a number, text of at most 4 096 characters or a short list of those"


# -- bounds on and off ----------------------------------------------------------------------------
@contextlib.contextmanager
def bounds_off() -> Iterator[None]:
    """Types only: ranges, lengths and caps are not enforced (tests only)."""
    _ENFORCE[0] = False
    try:
        yield
    finally:
        _ENFORCE[0] = True


def enforced() -> bool:
    """Whether ranges and caps are checked (always, outside the tests' bounds_off())."""
    return _ENFORCE[0]


_BOUNDS = {"ge", "le", "gt", "lt", "max_length", "min_length"}


def _unbounded(schema: Any) -> Any:
    """A copy of a pydantic core schema without its bounds (a length check on a TypedDict is a
    function wrapped around it: the wrapper goes)."""
    if isinstance(schema, list):
        return [_unbounded(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    fn = schema.get("function", {}).get("function") if schema.get("type") == "function-after" else None
    if isinstance(fn, functools.partial) and "max_length" in fn.keywords:
        return _unbounded(schema["schema"])
    return {k: _unbounded(v) for k, v in schema.items() if k not in _BOUNDS or schema.get("type") == "literal"}


@functools.cache
def _validator(adapter: TypeAdapter, bounded: bool) -> Any:
    return adapter.validator if bounded else SchemaValidator(_unbounded(adapter.core_schema))


# -- reading --------------------------------------------------------------------------------------
class Reader:
    """Reads JSON text as one type, through a TypeAdapter over it. `where` names the places of the
    document that a message starts from: () the document itself, ("run",) its field run, and so on;
    `what` is the kind of file, for a message about text that is not one."""

    def __init__(self, t: Any, where: dict[tuple, str], what: str, error: type[ValueError] = ValueError):
        self.type, self.where, self.what, self.error = t, where, what, error
        self.adapter = TypeAdapter(t)

    def __call__(self, text: str | bytes) -> Any:
        """The JSON text as the reader's type, or its error saying where and what."""
        try:
            return _validator(self.adapter, enforced()).validate_json(text, strict=True)
        except ValidationError as e:
            raise self.error(self.message(e)) from None

    def message(self, e: ValidationError) -> str:
        """One sentence for the first of e's errors: where in the document, and what was wrong."""
        err = e.errors(include_url=False)[0]
        if err["type"] == "json_invalid":
            return _json_message(err["ctx"]["error"], self.what)
        return _sentence(err, self.type, self.where)


def _json_message(error: str, what: str) -> str:
    if "recursion limit" in error:
        return f"The file nests lists or objects too deeply to be {what}."
    m = re.search(r"(.*) at line (\d+) column (\d+)", error)
    if m:
        return f"The file is not valid JSON (line {m[2]}, column {m[3]}: {m[1]})."
    return f"The file is not {what}: {error[:120]}."


# -- pydantic's error, in words ------------------------------------------------------------------
# Items of these lists are named by a word: "cycle 3", "node 2", "candidate 0"; others "'name' entry 1".
LABELS = {"cycles": "cycle", "nodes": "node", "measured": "candidate"}


def _unwrap(t: Any) -> tuple[Any, dict, bool]:
    """(the bare type, its bounds, whether null is allowed) of an annotation."""
    bounds: dict = {}
    null = False
    while True:
        if typing.get_origin(t) is Annotated:
            for m in t.__metadata__:
                for c in getattr(m, "metadata", [m]):
                    for name in ("ge", "le", "max_length"):
                        if hasattr(c, name):
                            bounds[name] = getattr(c, name)
            t = t.__origin__
        elif typing.get_origin(t) in (Union, types.UnionType) and type(None) in typing.get_args(t):
            rest = [a for a in typing.get_args(t) if a is not type(None)]
            null = True
            if len(rest) != 1:
                return Union[tuple(rest)], bounds, null
            t = rest[0]
        else:
            return t, bounds, null


def _fields(t: Any) -> dict[str, Any]:
    """A dataclass's or a TypedDict's fields and their annotations (with their bounds)."""
    return typing.get_type_hints(t, include_extras=True)


def _is_object(t: Any) -> bool:
    return dataclasses.is_dataclass(t) or is_typeddict(t)


def _aliases(t: Any) -> dict[str, str]:
    """Old names a field is still read under → the field's name."""
    out = {}
    for name, hint in _fields(t).items():
        for m in getattr(hint, "__metadata__", ()):
            for choice in getattr(getattr(m, "validation_alias", None), "choices", ()):
                out[choice] = name
    return out


def _num(x: float) -> str:
    return f"{x:,}".replace(",", " ") if isinstance(x, int) else f"{x:g}"


def describe(t: Any) -> str:
    """What a value of annotation t must be, in words."""
    t, b, null = _unwrap(t)
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin in (Union, types.UnionType) and set(args) == {int, float}:  # a count: an int stays an int
        t = float
    elif origin in (Union, types.UnionType):  # PLAIN is the other union of several types
        return _PLAIN_WORDS
    if origin is Literal:
        out = "one of " + ", ".join(map(str, args))
    elif t is bool:
        out = "true or false"
    elif t in (int, float):
        out = f"{'a whole number' if t is int else 'a number'} from {_num(b['ge'])} to {_num(b['le'])}"
    elif t is str:
        out = f"text of at most {_num(b['max_length'])} characters"
    elif origin is list:
        out = f"a list of at most {_num(b['max_length'])} items"
    elif origin is dict:
        key, kb, _ = _unwrap(args[0])
        keys = f"keys {kb['ge']} to {kb['le']}" if key is int else "text keys"
        out = f"an object of at most {_num(b['max_length'])} entries with {keys}"
    elif _is_object(t) and "max_length" in b:
        out = f"an object of at most {_num(b['max_length'])} fields"
    else:
        out = "an object"
    return f"{out} or null" if null else out


def shown(value: Any) -> str:
    """A short, safe rendering of a value for a message (never the whole of a large one)."""
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return f"an object with {len(value)} keys"
    if isinstance(value, str):
        return json.dumps(value[:40] + ("…" if len(value) > 40 else ""), ensure_ascii=False)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** 30:
        return "a number with more than 30 digits"
    return json.dumps(value, allow_nan=True)[:40]


def _sentence(err: dict, root: Any, where: dict[tuple, str]) -> str:
    """Walk err's location down the annotated types from root: the place (here), the field's name
    there (name) and its annotation (t); then say what the value there must be."""
    loc = list(err["loc"])
    start = max((p for p in where if tuple(loc[:len(p)]) == p), key=len)  # the named part it is in
    here, name, t = where[start], None, root
    for part in loc[:len(start)]:
        t = _fields(_unwrap(t)[0])[part]
    del loc[:len(start)]
    while loc:
        bare, _, _ = _unwrap(t)
        part = loc[0]
        if _is_object(bare) and isinstance(part, str):
            if name is not None:
                here = f"{here}, '{name}'"
            hints = _fields(bare)
            key = _aliases(bare).get(part, part)
            if key not in hints:  # an unknown field (refused) or a TypedDict's other entries
                extra = getattr(bare, "__extra_items__", None)
                name, t = part[:40], extra
                loc.pop(0)
                if extra is None or err["type"] in ("unexpected_keyword_argument", "extra_forbidden"):
                    return (f"{here}: '{name}' is not one of its fields "
                            f"({', '.join(hints) or 'it has none'}).")
                continue
            name, t = key, hints[key]
        elif typing.get_origin(bare) is list and isinstance(part, int):
            item = typing.get_args(bare)[0]
            if _is_object(_unwrap(item)[0]):
                label = LABELS.get(name, f"'{name}' entry" if name else "entry")
                here, name = f"{here}, {label} {part}", None
            else:
                name = f"{name}[{part}]" if name else f"[{part}]"
            t = item
        elif typing.get_origin(bare) is dict and part != "[key]":
            name = f"{name}[{shown(part)}]" if name else f"[{shown(part)}]"
            t = typing.get_args(bare)[1]
        else:  # a dict's key, a union's member: the value as a whole is what is wrong
            break
        loc.pop(0)
    if err["type"] == "missing":
        return f"{here}: the field '{name}' is missing."
    value = err.get("input")
    if _is_object(_unwrap(t)[0]) and err["type"] in ("dataclass_type", "dict_type", "dataclass_exact_type",
                                                      "model_type", "typed_dict_type"):
        what = f"'{name}' must be an object" if name else "expected an object"
        return f"{here}: {what}, got {shown(value)}."
    field_ = f"'{name}' " if name is not None else ""
    return f"{here}: {field_}must be {describe(t)}, got {shown(value)}."
