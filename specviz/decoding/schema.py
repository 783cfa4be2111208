"""Bounded schemas for the JSON files a visitor can upload: traces, side-by-side exports, advice surveys.

Every field has a type, a range and a cap, so what a reader accepts is bounded before any view draws
it: drawing work then follows the caps, never a number written inside the file. A value outside its
schema is refused with a `SchemaError` that says where and what, e.g.
"The run, cycle 3, node 2: 'depth' must be a whole number from 1 to 64, got 20000000."

The specs are plain values (`Num`, `Int`, `Text`, `Bool`, `ListOf`, `MapOf`, `Obj`, `Plain`);
`check(value, spec, where, name)` walks a document against one. `bounds_off()` keeps the types and
drops the ranges and caps, for the test that shows the caps are what refuse a size bomb.
"""
from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterator

_ENFORCE = [True]  # False inside bounds_off()


class SchemaError(ValueError):
    """A document outside its schema; the message says where and what."""


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


def _fail(where: str, name: str | None, spec: "Spec", value: Any) -> None:
    field_ = f"'{name}' " if name is not None else ""
    raise SchemaError(f"{where}: {field_}must be {spec.describe()}, got {shown(value)}.")


def _num_text(x: float) -> str:
    return f"{x:,}".replace(",", " ") if isinstance(x, int) else f"{x:g}"


class Spec:
    null: bool = False

    def describe(self) -> str:
        raise NotImplementedError

    def check(self, value: Any, where: str, name: str | None) -> None:
        raise NotImplementedError

    def _or_null(self, text: str) -> str:
        return f"{text} or null" if self.null else text


class _Range(Spec):
    """A number from lo to hi; `whole` says whether it must be a whole number."""
    whole = False
    lo: float
    hi: float

    def describe(self) -> str:
        kind = "a whole number" if self.whole else "a number"
        return self._or_null(f"{kind} from {_num_text(self.lo)} to {_num_text(self.hi)}")

    def check(self, value, where, name):
        if value is None and self.null:
            return
        typed = isinstance(value, int) or (not self.whole and isinstance(value, float) and math.isfinite(value))
        if not typed or isinstance(value, bool) or (_ENFORCE[0] and not self.lo <= value <= self.hi):
            _fail(where, name, self, value)


@dataclass(frozen=True)
class Num(_Range):
    """A finite number (a whole number counts) from lo to hi."""
    lo: float
    hi: float
    null: bool = False


@dataclass(frozen=True)
class Int(_Range):
    """A whole number from lo to hi."""
    whole = True
    lo: int
    hi: int
    null: bool = False


@dataclass(frozen=True)
class Text(Spec):
    """Text of at most max_len characters; with choices, one of them."""
    max_len: int
    null: bool = False
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.choices:
            return self._or_null("one of " + ", ".join(self.choices))
        return self._or_null(f"text of at most {_num_text(self.max_len)} characters")

    def check(self, value, where, name):
        if value is None and self.null:
            return
        if not isinstance(value, str) or (self.choices and value not in self.choices) \
                or (_ENFORCE[0] and len(value) > self.max_len):
            _fail(where, name, self, value)


@dataclass(frozen=True)
class Bool(Spec):
    null: bool = False

    def describe(self) -> str:
        return self._or_null("true or false")

    def check(self, value, where, name):
        if not (isinstance(value, bool) or (value is None and self.null)):
            _fail(where, name, self, value)


@dataclass(frozen=True)
class ListOf(Spec):
    """A list of at most max_len items, each checked by `item`; an item's place reads
    '<where>, <label> <i>' (label: the field name followed by 'entry' unless given)."""
    item: Spec
    max_len: int
    null: bool = False
    label: str = ""

    def describe(self) -> str:
        return self._or_null(f"a list of at most {_num_text(self.max_len)} items")

    def check(self, value, where, name):
        if value is None and self.null:
            return
        if not isinstance(value, list) or (_ENFORCE[0] and len(value) > self.max_len):
            _fail(where, name, self, value)
        label = self.label or (f"'{name}' entry" if name else "entry")
        if isinstance(self.item, Obj):
            for i, v in enumerate(value):
                self.item.check(v, f"{where}, {label} {i}", None)
        else:
            for i, v in enumerate(value):
                self.item.check(v, where, f"{name}[{i}]" if name else f"[{i}]")


@dataclass(frozen=True)
class MapOf(Spec):
    """An object of at most max_len entries, keys of at most key_len characters (with int_keys, whole
    numbers from 1 to max_key written as text), each value checked by `value`."""
    value: Spec
    max_len: int
    key_len: int = 200
    int_keys: bool = False
    max_key: int = 0
    null: bool = False

    def describe(self) -> str:
        keys = f"keys 1 to {self.max_key}" if self.int_keys else "text keys"
        return self._or_null(f"an object of at most {_num_text(self.max_len)} entries with {keys}")

    def check(self, value, where, name):
        if value is None and self.null:
            return
        if not isinstance(value, dict) or (_ENFORCE[0] and len(value) > self.max_len):
            _fail(where, name, self, value)
        for k, v in value.items():
            if self.int_keys:
                ok = k.isdigit() and len(k) <= 9 and (not _ENFORCE[0] or 1 <= int(k) <= self.max_key)
            else:
                ok = not _ENFORCE[0] or len(k) <= self.key_len
            if not ok:
                _fail(where, name, self, value)
            self.value.check(v, where, f"{name}[{shown(k)}]" if name else f"[{shown(k)}]")


@dataclass(frozen=True)
class Plain(Spec):
    """Any small JSON value: null, true/false, a finite number, text of at most max_len characters,
    or a list of at most 64 of those; what a reader keeps but no view relies on."""
    max_len: int = 4096
    null: bool = True

    def describe(self) -> str:
        return (f"null, true/false, a number, text of at most {_num_text(self.max_len)} characters "
                "or a short list of those")

    def _scalar(self, v) -> bool:
        if v is None or isinstance(v, bool):
            return True
        if isinstance(v, (int, float)):  # an int may be too large for a float: no isfinite on it
            return (isinstance(v, int) or math.isfinite(v)) and (not _ENFORCE[0] or abs(v) <= 10 ** 18)
        return isinstance(v, str) and (not _ENFORCE[0] or len(v) <= self.max_len)

    def check(self, value, where, name):
        ok = self._scalar(value) or (isinstance(value, list) and (not _ENFORCE[0] or len(value) <= 64)
                                     and all(self._scalar(v) for v in value))
        if not ok:
            _fail(where, name, self, value)


@dataclass(frozen=True)
class Obj(Spec):
    """An object with known fields (name → (spec, required)) and at most `extra` other keys,
    each at most 200 characters with a value checked by `other` (a reader ignores them)."""
    fields: dict[str, tuple[Spec, bool]]
    extra: int = 0
    other: Spec = field(default_factory=Plain)
    null: bool = False

    def describe(self) -> str:
        return self._or_null("an object")

    def check(self, value, where, name):
        if value is None and self.null:
            return
        if not isinstance(value, dict):
            raise SchemaError(f"{where}: " + (f"'{name}' must be an object" if name else "expected an object")
                              + f", got {shown(value)}.")
        here = f"{where}, '{name}'" if name else where
        for key, (spec, required) in self.fields.items():
            if key not in value:
                if required:
                    raise SchemaError(f"{here}: the field '{key}' is missing.")
                continue
            spec.check(value[key], here, key)
        others = [k for k in value if k not in self.fields]
        if _ENFORCE[0] and (len(others) > self.extra or any(len(k) > 200 for k in others)):
            raise SchemaError(f"{here}: at most {self.extra} fields besides "
                              f"{', '.join(self.fields) or 'none'}, with short names; got {len(others)}.")
        for k in others:
            self.other.check(value[k], here, k[:40])


def check(value: Any, spec: Spec, where: str, name: str | None = None) -> None:
    """Raise SchemaError, saying where and what, unless value fits spec."""
    spec.check(value, where, name)


def parse_json(text: str, what: str, error: type[ValueError] = SchemaError) -> Any:
    """json.loads with every failure (bad syntax, nesting too deep, a number too long) as `error`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"The file is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}).") from None
    except RecursionError:
        raise error(f"The file nests lists or objects too deeply to be {what}.") from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise error(f"The file is not {what}: {str(e)[:120]}.") from None
