"""The nucleus cut (sampling._nucleus) takes the top few hundred tokens before it sorts the whole
vocabulary; these tests hold it to the full sort's result, bit for bit."""
import pytest
import torch

from specviz.drafting import sampling


def full_sort(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """The cut as it was written before the top-k shortcut: one full sort."""
    sorted_p, order = torch.sort(probs, dim=-1, descending=True)
    drop = (sorted_p.cumsum(-1) - sorted_p) >= top_p
    out = torch.zeros_like(probs).scatter(-1, order, sorted_p.masked_fill(drop, 0.0))
    return out / out.sum(-1, keepdim=True)


@pytest.mark.parametrize("scale", [0.5, 2.0, 8.0])
@pytest.mark.parametrize("top_p", [0.5, 0.9, 0.99])
def test_the_cut_equals_the_full_sort_bit_for_bit(scale, top_p):
    """On 200 rows of random logits over a 49,152-token vocabulary, flat (scale 0.5, where the
    nucleus is thousands of tokens and the full sort is used) to peaked (scale 8, where it is a
    handful), at T = 0.7 and three top-p values, the shortcut returns exactly the full sort's
    tensor, one row at a time and all rows at once."""
    g = torch.Generator().manual_seed(int(scale * 100 + top_p * 10))
    logits = torch.randn(200, 49152, generator=g) * scale
    want = torch.stack([full_sort(torch.softmax(row / 0.7, -1), top_p) for row in logits])
    rows = torch.stack([sampling.probs_from_logits(row, 0.7, top_p) for row in logits])
    assert torch.equal(rows, want)
    assert torch.equal(sampling.probs_from_logits(logits, 0.7, top_p), want)


def test_a_tie_across_the_cut_is_left_to_the_full_sort(monkeypatch):
    """Where tokens of equal probability straddle the cut, the full sort's order decides which
    stay: the result is still the full sort's, and the shortcut was tried and refused (counted)."""
    logits = torch.full((1000,), -20.0)
    logits[:10] = 5.0  # ten equal tokens hold nearly all the mass: top-p 0.55 cuts among them
    calls = []
    real = torch.sort
    monkeypatch.setattr(sampling.torch, "sort", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = sampling.probs_from_logits(logits, 1.0, 0.55)
    assert calls, "the tie should have sent the cut to the full sort"
    assert torch.equal(got, full_sort(torch.softmax(logits, -1), 0.55))
    assert int((got > 0).sum()) == 6


def test_a_peaked_row_never_sorts_the_vocabulary(monkeypatch):
    """A row whose nucleus lies in its top 256 is cut without torch.sort, which costs about 6 ms
    a row over this vocabulary (BENCHMARKS), and the result is the full sort's."""
    logits = torch.randn(49152, generator=torch.Generator().manual_seed(3)) * 6
    monkeypatch.setattr(sampling.torch, "sort", lambda *a, **k: pytest.fail("sorted the vocabulary"))
    got = sampling.probs_from_logits(logits, 0.7, 0.9)
    monkeypatch.undo()
    assert torch.equal(got, full_sort(torch.softmax(logits / 0.7, -1), 0.9))


def test_rows_take_their_own_way_in_one_call(monkeypatch):
    """A peaked row and a flat row cut in one call (as a verify pass's rows are): only the flat
    row is sorted, and both rows equal the full sort's."""
    g = torch.Generator().manual_seed(5)
    logits = torch.stack([torch.randn(49152, generator=g) * 6, torch.randn(49152, generator=g) * 0.5])
    sorted_rows = []
    real = torch.sort
    monkeypatch.setattr(sampling.torch, "sort", lambda x, *a, **k: sorted_rows.append(x.shape[0]) or real(x, *a, **k))
    got = sampling.probs_from_logits(logits, 0.7, 0.9)
    monkeypatch.undo()
    assert sorted_rows == [1]
    assert torch.equal(got, torch.stack([full_sort(torch.softmax(r / 0.7, -1), 0.9) for r in logits]))
