"""What decoding must produce, worked out independently of specviz.drafting.sampling.

numpy in float64 and the nucleus by its textbook definition (the smallest set of most likely
tokens whose mass reaches top-p), so an error in `probs_from_logits` cannot hide in the
expectation it is tested against.
"""
from __future__ import annotations

import itertools

import numpy as np
import torch

# The engine decides the nucleus in float32: a cumulative mass this close to top-p could fall
# either way there, so the reference refuses it rather than guess.
BOUNDARY_MARGIN = 1e-5


def nucleus(logits, temperature: float, top_p: float, top_k: int | None = None) -> np.ndarray:
    """softmax(logits / T) restricted to the top-p nucleus and renormalised, in float64; with
    `top_k`, only the k largest logits take part at all (top-k, then temperature, then top-p)."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    if top_k is not None and top_k < len(z):
        order = np.argsort(-z)
        z = z.copy()
        z[order[top_k:]] = -np.inf
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p >= 1.0:
        return p
    kept, mass = [], 0.0
    for token in sorted(range(len(p)), key=lambda t: -p[t]):
        kept.append(token)
        mass += p[token]
        if mass >= top_p:
            break
    before = mass - p[kept[-1]]
    if mass - top_p < BOUNDARY_MARGIN or top_p - before < BOUNDARY_MARGIN:
        raise ValueError(f"the top-p edge is within {BOUNDARY_MARGIN} of {top_p}: pick another model or prompt")
    out = np.zeros_like(p)
    out[kept] = p[kept]
    return out / out.sum()


@torch.inference_mode()
def exact_joint(model, prompt: list[int], n: int, temperature: float, top_p: float,
                top_k: int | None = None) -> np.ndarray:
    """P(t1, …, tn) of the first n new tokens under the target alone: an array of shape [V] * n.

    One plain forward pass over every prompt + (t1, …, t(n−1)) gives each step's logits.
    """
    vocab = model.config.vocab_size
    prefixes = list(itertools.product(range(vocab), repeat=n - 1))
    logits = model(torch.tensor([prompt + list(s) for s in prefixes])).logits.double().numpy()
    first = len(prompt) - 1  # the row that chooses t1
    joint = np.zeros([vocab] * n)
    for row, prefix in enumerate(prefixes):
        chance = 1.0
        for j, token in enumerate(prefix):  # rows after an impossible token are never judged
            chance *= nucleus(logits[row, first + j], temperature, top_p, top_k)[token] if chance else 0.0
        if chance:
            joint[prefix] = chance * nucleus(logits[row, first + n - 1], temperature, top_p, top_k)
    return joint
