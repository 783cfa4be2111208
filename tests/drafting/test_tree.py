"""One tree pass (4-D mask + explicit positions over a cached prefix) equals decoding each branch alone."""
import pytest
import torch

from specviz.drafting.tree import DraftTree
from specviz.passes.kvcache import cache_len, new_cache
from tests.helpers.tiny import pair

PREFIX = [3, 17, 9, 25, 4, 11, 30, 2]
MAX_GROWING = 3  # nodes that get children per level: keeps deep, wide trees small


@pytest.fixture(scope="module")
def model():
    return pair(vocab=32, layers=2)[0].model


def random_tree(depth: int, branching: int, vocab: int, seed: int) -> DraftTree:
    """A tree exactly `depth` deep whose first growing node per level has `branching` children."""
    gen = torch.Generator().manual_seed(seed)
    tokens, parents, frontier = [], [], [-1]
    for _ in range(depth):
        grown = []
        for j, par in enumerate(frontier):
            n = branching if j == 0 else int(torch.randint(1, branching + 1, (1,), generator=gen))
            for tok in torch.randperm(vocab, generator=gen)[:n].tolist():
                tokens.append(tok)
                parents.append(par)
                grown.append(len(tokens) - 1)
        order = torch.randperm(len(grown), generator=gen).tolist()
        frontier = sorted(grown[i] for i in order[:MAX_GROWING])
    return DraftTree(tokens, parents)


@torch.inference_mode()
def tree_pass(model, tree: DraftTree, masked: bool = True) -> torch.Tensor:
    """Logits for [root] + nodes from one pass over a cached prefix, as the engine's verify pass runs it."""
    cache = new_cache()
    model(input_ids=torch.tensor([PREFIX[:-1]]), past_key_values=cache, use_cache=True)
    past = cache_len(cache)
    mask = tree.attention_mask(past, torch.float32) if masked else None
    out = model(input_ids=torch.tensor([[PREFIX[-1]] + tree.tokens]), past_key_values=cache, use_cache=True,
                attention_mask=mask, position_ids=tree.position_ids(past) if masked else None)
    return out.logits[0]


@torch.inference_mode()
def branch_in_sequence(model, path: list[int]) -> torch.Tensor:
    """Logits of decoding the root and then `path` one token at a time with a KV cache."""
    cache = new_cache()
    model(input_ids=torch.tensor([PREFIX[:-1]]), past_key_values=cache, use_cache=True)
    rows = [model(input_ids=torch.tensor([[tok]]), past_key_values=cache, use_cache=True).logits[0, -1]
            for tok in [PREFIX[-1]] + path]
    return torch.stack(rows)


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 5, 6])
def test_tree_pass_equals_branches_in_sequence(model, depth):
    """Every node's logits from one tree pass match sequential decoding of its branch (max diff ≤ 1e-4, fp32).

    For trees with siblings, the same pass without the tree mask (plain causal over the flat
    node list) must differ, so the comparison is sensitive to a wrong mask.
    """
    for branching in (1, 2, 3, 4):
        tree = random_tree(depth, branching, vocab=32, seed=10 * depth + branching)
        assert max(tree.depths) == depth
        logits = tree_pass(model, tree)
        worst = 0.0
        for leaf in (i for i in range(len(tree)) if not tree.children(i)):
            path = tree.ancestors(leaf)
            seq = branch_in_sequence(model, [tree.tokens[i] for i in path])
            rows = [0] + [i + 1 for i in path]  # row 0 is the root, row i+1 is node i
            worst = max(worst, float((logits[rows] - seq).abs().max()))
        assert worst <= 1e-4, f"depth {depth}, branching {branching}: max diff {worst:.2e}"
        if not tree.is_chain:
            unmasked = tree_pass(model, tree, masked=False)
            assert float((unmasked - logits).abs().max()) > 1e-3


def mask_by_rule(tree: DraftTree, past: int, window: int | None, first: int) -> torch.Tensor:
    """The mask's rule entry by entry: a row sees a key if the key is cached or the root, or the key is
    the row's own node or one of its ancestors; with a window, only keys fewer than `window` positions
    behind the row's own position. Columns from cached position `first` on. True: seen."""
    positions = tree.position_ids(past)[0].tolist()
    seen = []
    for r in range(len(tree) + 1):
        own = set() if r == 0 else {past + 1 + a for a in tree.ancestors(r - 1)}
        row = []
        for key in range(first, past + len(tree) + 1):
            visible = key <= past or key in own
            key_position = key if key <= past else positions[key - past]
            row.append(visible and (window is None or key_position > positions[r] - window))
        seen.append(row)
    return torch.tensor(seen)


@pytest.mark.parametrize("seed", range(8))
def test_attention_mask_follows_the_rule_at_any_context(seed):
    """attention_mask (built over the draft block only) is 0 exactly where the rule lets a row see a key
    and the dtype's minimum elsewhere, for random trees, cached lengths, windows and first held positions."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(12):
        tree = random_tree(int(torch.randint(1, 5, (1,), generator=gen)), int(torch.randint(1, 4, (1,), generator=gen)),
                           vocab=32, seed=int(torch.randint(0, 10_000, (1,), generator=gen)))
        past = int(torch.randint(0, 40, (1,), generator=gen))
        window = [None, 2, 5, 16][int(torch.randint(0, 4, (1,), generator=gen))]
        first = int(torch.randint(0, past + 1, (1,), generator=gen))
        for dtype in (torch.float32, torch.bfloat16):
            mask = tree.attention_mask(past, dtype, window=window, first=first)
            want = mask_by_rule(tree, past, window, first)
            assert mask.shape == (1, 1, *want.shape)
            assert torch.equal(mask[0, 0] == 0, want)
            assert bool((mask[0, 0][~want] == torch.finfo(dtype).min).all())
