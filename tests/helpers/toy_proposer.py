"""A tests-only method, written as a new method would be: this file and one registry entry (`ENTRY`,
which the `toy` fixture of tests/proposers/test_contract.py adds to proposers.REGISTRY) and nothing
else. The contract test holds it to what it holds every shipped method to, and finds it in the
pickers and the CLI's choices.

It drafts the last committed token repeated (a point mass per node, q = None): cheap, often wrong,
sometimes right, so a run's cycles meet accepted, rejected and bonus tokens.
"""
from __future__ import annotations

from specviz.drafting.tree import DraftTree, Source
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.method_spec import Knob, MethodSpec, SourceSpec

NAME = "toy"
ENTRY = "tests.helpers.toy_proposer:ToyProposer"  # its line in proposers.REGISTRY
REPEAT = "toy-repeat"  # its nodes' source kind


class ToyProposer(Proposer):
    spec = MethodSpec(
        NAME, "Toy (the last token again)", "drafts the last token repeated", default_k=4,
        sources=(SourceSpec(REPEAT, "repeat", "orange"),),
        knobs=(Knob("length", "Tokens repeated", "int", 1, 8, info="K caps it too."),))
    KNOBS = ("length",)

    def __init__(self, length: int = 8):
        if int(length) < 1:
            raise ValueError(f"the toy repeats at least one token, not {length}")
        self.length = int(length)

    @classmethod
    def build(cls, target=None, draft=None, **knobs):
        if draft is not None:
            raise ValueError("method 'toy' drafts from the text alone; do not pass a draft model")
        cls.check_knobs(knobs)
        return cls(**knobs)

    def propose(self, ctx: ProposeContext) -> DraftTree:
        n = min(self.length, ctx.k)
        return DraftTree.chain([ctx.ids[-1]] * n, sources=[Source(REPEAT)] * n)
