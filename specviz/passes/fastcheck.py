"""The check that our fast forward (fastpath.py) gives a model's own logits bit for bit, made on the
model itself before the fast forward is used (FastForward.check): the kinds of pass a run makes,
both ways, on two fresh caches."""
from __future__ import annotations

import torch

# Draft trees for the check's verify passes, by parent (-1: the root): a chain of 8 (the greedy
# path) with branches off it and off the root; the first 16 nodes are a tree too. 17 and 33 rows
# are the ends of the verify passes runs make on the bundled model.
_PARENTS = [i - 1 if i < 8 else (i // 2 - 1 if i % 3 else -1) for i in range(32)]
TREES = (_PARENTS[:16], _PARENTS)


def _ancestors(parents: list[int], i: int) -> list[int]:
    """Node i and its ancestors, root-most first (the root excluded): DraftTree.ancestors."""
    path = []
    while i >= 0:
        path.append(i)
        i = parents[i]
    return path[::-1]


def _tree_layout(parents: list[int], past: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(position_ids, mask) of a verify pass over [root] + a tree with these parents on `past` cached
    positions, as drafting/tree.py's DraftTree.position_ids and model_mask make them for a model of
    full-attention layers (passes cannot import drafting; tests/passes/test_fastpath.py holds them equal):
    the root at position `past`, a node at `past` + its depth; every row sees the cache and the
    root, a node also itself and its ancestors; allowed entries 0, the rest the dtype's minimum."""
    n = len(parents) + 1
    depths: list[int] = []
    allowed = torch.zeros(n, past + n, dtype=torch.bool)
    allowed[:, : past + 1] = True
    for i, parent in enumerate(parents):
        depths.append(1 if parent < 0 else depths[parent] + 1)
        for a in _ancestors(parents, i):
            allowed[i + 1, past + 1 + a] = True
    mask = torch.zeros(n, past + n, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    return torch.tensor([[past] + [past + d for d in depths]]), mask[None, None]


@torch.inference_mode()
def check(fast) -> str | None:
    """On `fast`, a FastForward: make the kinds of pass a run makes both ways, on two fresh caches,
    and compare every logit bit for bit: a prefill (its last row, as the engine asks), a one-token
    step, two short chains, a verify pass over each of TREES (17 and 33 rows: [root] + nodes, with
    the 4-D float mask and the positions the engine gives it, decoding/targets.py), the cache rolled
    back after the first and cut to one accepted path after the second, as a tree cycle does, and a
    step after that. None when every pass has the same bits, else which pass differed and by how much."""
    from specviz.passes.kvcache import keep_path, new_cache, rollback  # transformers' cache classes

    vocab = fast.config.vocab_size
    ours, theirs = new_cache(), new_cache()
    fed = 0

    def compare(what: str, n: int, position_ids=None, mask=None, keep: int = 0) -> str | None:
        nonlocal fed
        ids = torch.tensor([[(11 + 7 * t) % vocab for t in range(fed, fed + n)]])
        fed += n
        a = fast.model(input_ids=ids, past_key_values=theirs, use_cache=True, position_ids=position_ids,
                       attention_mask=mask, **({"logits_to_keep": keep} if keep else {})).logits
        b, _ = fast(ids, ours, position_ids, mask, keep)
        if a.shape != b.shape:
            return f"its logits on {what} have the shape {tuple(b.shape)}, the modules' {tuple(a.shape)}"
        if not torch.equal(a, b):
            return (f"its logits on {what} differ from the modules' (max abs difference "
                    f"{float((a - b).abs().max()):.3g}) on this CPU")
        return None

    for what, n, keep in (("a 7-token prefill", 7, 1), ("a one-token step", 1, 0), ("a 2-token chain", 2, 0),
                          ("a 4-token chain", 4, 0)):
        if why := compare(what, n, keep=keep):
            return why
    for i, parents in enumerate(TREES):
        past = ours.get_seq_length()
        position_ids, mask = _tree_layout(parents, past, fast.model.dtype)
        if why := compare(f"a {len(parents) + 1}-row tree pass with its 4-D mask", len(parents) + 1,
                          position_ids, mask):
            return why
        if i < len(TREES) - 1:  # nothing accepted
            rollback(ours, past)
            rollback(theirs, past)
        else:  # the root and the path to the last node accepted
            path = [past] + [past + 1 + a for a in _ancestors(parents, len(parents) - 1)]
            keep_path(ours, past, path)
            keep_path(theirs, past, path)
    return compare("a step after a tree's path was kept", 1)
