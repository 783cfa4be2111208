"""What a run drafted, and a switch that makes every drafter propose nothing.

A test whose claim involves drafts (lossless with drafts, rejections, residuals, a draft cache)
asserts that its run really sent some: with the planner on (the default), a drafter that costs
about as much as the target (a same-size twin, c ≈ 1; layer skip, c ≈ 2/3) sends none, and the
run is plain decoding. `SPECVIZ_TEST_NO_DRAFT=1` (read by tests/conftest.py) replaces what every
engine run drafts with an empty draft for the whole session: every test marked `drafts` must then
fail (tests/README.md, "Tests that claim drafts").
"""
from __future__ import annotations

import os

from specviz.decoding.trace import REJECTED

NO_DRAFT = os.environ.get("SPECVIZ_TEST_NO_DRAFT", "").strip() not in ("", "0")


def drafted(run) -> int:
    """Draft nodes the run's verify passes judged (a RunTrace or a list of cycles)."""
    return sum(c.drafted for c in getattr(run, "cycles", run))


def rejected(run) -> int:
    """Draft nodes that verification rejected."""
    return sum(n.status == REJECTED for c in getattr(run, "cycles", run) for n in c.nodes)


def never_propose() -> None:
    """From now on, in this process, every engine run offers and sends empty drafts (a drafter that
    never proposes): what a test that claims drafts must notice."""
    from specviz.decoding.engine import Decoder
    from specviz.drafting.tree import DraftTree

    Decoder._propose = lambda self, k: (DraftTree(), DraftTree())
