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


NUCLEUS_TRIES = (256, 4096)  # top-k sizes tried before a full sort: a nucleus is usually far smaller


def probs_from_logits(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """Softmax of logits / temperature, restricted to the smallest top-p nucleus, in float32."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        probs = _nucleus(probs, top_p)
    return probs


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """`probs` cut to the nucleus and renormalised: a token stays if the mass before it, in
    descending order, is below top_p (so the top token always stays).

    Sorting the whole vocabulary is costly on a CPU (docs/bench/2026-12-01.md), and the nucleus is usually a few
    hundred tokens at most, so the largest NUCLEUS_TRIES[i] are taken first (torch.topk, sorted).
    Their running sum is the full sort's, element for element, so where the cut falls inside them
    the kept entries are the same; the result is the full sort's exactly, bit for bit, unless the
    cut splits tokens of equal probability (the sort's order among them would decide). A row whose
    cut lies deeper, or splits a tie, is cut by the full sort, as every row was before; each row
    goes its own way, so one flat row among a verify pass's rows does not sort the others."""
    shape, n = probs.shape, probs.shape[-1]
    rows = probs.reshape(-1, n)
    out = torch.zeros_like(rows)
    # The kept values are written straight into `out` (an index_put of k values a row), and the
    # first try reads `rows` as they are: a verify pass's rows are cut without copying whole rows
    # of the vocabulary to and fro, which is most of this function's time on a CPU.
    todo = None  # the rows not cut yet; None: all of them
    for k in NUCLEUS_TRIES:
        if k >= n or (todo is not None and len(todo) == 0):
            break
        top, idx = torch.topk(rows if todo is None else rows[todo], k, dim=-1)
        keep = (top.cumsum(-1) - top) < top_p
        kept = keep.sum(-1, keepdim=True)  # the cut: positions before it stay
        inside = kept < k
        edge, after = top.gather(-1, kept - 1), top.gather(-1, kept.clamp(max=k - 1))
        done = (inside & (edge > after)).squeeze(-1)  # the cut lies in the top k, between unequal values
        where = torch.arange(rows.shape[0], device=rows.device) if todo is None else todo
        if bool(done.any()):  # out's rows are still zeros: the kept values go in, the rest stays 0
            out[where[done].unsqueeze(-1), idx[done]] = top[done].masked_fill(~keep[done], 0.0)
        todo = where[~done]
    if todo is None:  # a vocabulary no larger than the first try: every row takes the full sort
        todo = torch.arange(rows.shape[0], device=rows.device)
    if len(todo):  # the full sort, as before the shortcut
        sorted_p, order = torch.sort(rows[todo], dim=-1, descending=True)
        drop = (sorted_p.cumsum(-1) - sorted_p) >= top_p
        out[todo] = out[todo].scatter(-1, order, sorted_p.masked_fill(drop, 0.0))
    return out.div_(out.sum(-1, keepdim=True)).reshape(shape)


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
