"""Deliberately broken twins of verify.py's rules, one definition each.

A statistical test that passes with the real rule must fail with every twin here: that is how
we know it can fail. Each twin replaces one attribute of specviz.decoding.verify and is built from the
real rules, so everything else (engine, proposers, caches) runs unchanged.
"""
from __future__ import annotations

import torch

import specviz.decoding.verify as verify

_accept_prob, _residual, _verify_sampling = verify.accept_prob, verify.residual, verify.verify_sampling


def resample_from_p(p, q, x):
    """After a rejection, draw from p itself: tokens q already over-supplies come out too often."""
    return p


def ratio_q_over_p(px, qx):
    """Accept x with min(1, q(x)/p(x)): the ratio upside down."""
    return _accept_prob(qx, px)


def accept_every_draft(px, qx):
    """Keep every draft unchecked: the output follows q, not p."""
    return 1.0


def residual_q_minus_p(p, q, x):
    """norm(max(0, q − p)): the residual with its operands swapped (a point-mass q is one-hot on x)."""
    if q is None:
        q = torch.nn.functional.one_hot(torch.tensor(x), p.shape[-1]).to(p.dtype)
    return _residual(q, p, x)


def bonus_from_previous_row(tree, logits, sampling):
    """The bonus token drawn from p one position early: every leaf's row (read only for the bonus)
    is replaced by its parent's row."""
    shifted = logits.clone()
    for i, parent in enumerate(tree.parents):
        if not tree.children(i):
            shifted[i + 1] = logits[parent + 1]
    return _verify_sampling(tree, shifted, sampling)


# name → (the specviz.decoding.verify attribute it replaces, the twin)
TWINS = {
    "resample from p": ("residual", resample_from_p),
    "acceptance ratio q/p": ("accept_prob", ratio_q_over_p),
    "accept every draft": ("accept_prob", accept_every_draft),
    "bonus from the wrong row": ("verify_sampling", bonus_from_previous_row),
    "residual max(0, q − p)": ("residual", residual_q_minus_p),
}


def install(monkeypatch, name: str) -> None:
    """Swap one of verify.py's rules for its broken twin until the test ends."""
    attr, twin = TWINS[name]
    monkeypatch.setattr(verify, attr, twin)
