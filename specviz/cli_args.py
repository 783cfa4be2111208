"""The command line's shared pieces: `fail` (one line, exit code 2), a parser that reports an
error on one line, and the argument types (each raises ArgumentTypeError, which argparse prefixes
with the option's name). specviz/cli.py and specviz/advise_cli.py both use them."""
from __future__ import annotations

import argparse
import math
import sys
from typing import NoReturn


def fail(message) -> NoReturn:
    """Print one line `specviz: error: …` to stderr and exit with code 2."""
    text = " ".join(line.strip() for line in str(message).splitlines() if line.strip())
    print(f"specviz: error: {text}", file=sys.stderr)
    raise SystemExit(2)


class _Parser(argparse.ArgumentParser):
    """argparse prints usage plus the error; one line is easier to read and to test."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see --help)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _temperature(text: str) -> float:
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (greedy) or more, got {value}")
    return value


def _top_p(text: str) -> float:
    value = _finite_float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value
