"""Temperature and top-p, applied identically to the target (p) and the draft (q).

One `torch.Generator` is seeded once per run and passed everywhere a random number is drawn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch


def is_greedy(temperature: float) -> bool:
    """Temperature 0 means greedy decoding (argmax), the one definition every layer uses."""
    return temperature == 0


def check_settings(temperature: float, top_p: float) -> None:
    """Raise ValueError with an actionable message for settings no sampler can use."""
    if not isinstance(temperature, (int, float)) or math.isnan(temperature) or temperature < 0:
        raise ValueError(f"temperature must be a number ≥ 0 (0 means greedy), got {temperature!r}")
    if math.isinf(temperature):
        raise ValueError("temperature must be finite")
    if not isinstance(top_p, (int, float)) or math.isnan(top_p) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")


def probs_from_logits(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Softmax of logits / temperature, restricted to the smallest top-p nucleus, in float32."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, order = torch.sort(probs, dim=-1, descending=True)
        # keep a token if the mass before it is below top_p (so the top token always stays)
        drop = (sorted_p.cumsum(-1) - sorted_p) >= top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


@dataclass
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    generator: torch.Generator = field(init=False, repr=False)

    def __post_init__(self):
        check_settings(self.temperature, self.top_p)
        self.generator = torch.Generator().manual_seed(int(self.seed))

    @property
    def greedy(self) -> bool:
        return is_greedy(self.temperature)

    def probs(self, logits: torch.Tensor) -> torch.Tensor:
        """The distribution a token is drawn from (one-hot on the argmax under greedy)."""
        if self.greedy:
            return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
        return probs_from_logits(logits, self.temperature, self.top_p)

    def display_probs(self, logits: torch.Tensor) -> torch.Tensor:
        """Probabilities to show: softmax at temperature 1 under greedy, else `probs`."""
        if self.greedy:
            return torch.softmax(logits.float(), dim=-1)
        return self.probs(logits)

    def uniform(self) -> float:
        return float(torch.rand((), generator=self.generator))

    def draw(self, probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs.cpu(), 1, generator=self.generator))

    def pick(self, logits: torch.Tensor) -> int:
        """One token from logits: argmax under greedy, else a draw from the processed p."""
        if self.greedy:
            return int(logits.argmax(-1))
        return self.draw(self.probs(logits))
