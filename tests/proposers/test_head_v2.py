"""Draft head v2 (specviz/head/v2.py), which is not shipped: its network at the real sizes, its files
beside v1's, and its check of a target; and the decoding path's refusal of it (method "head" drafts
with v1 only, since the engine hands a head the final norm's output alone). Its training and its
offline evaluation are in tests/training/test_head2_train.py.
"""
from __future__ import annotations

import pytest
import torch

import specviz
from specviz.head.model import DEFAULT_PATH, DraftHead, check_target, load_head, save_head
from specviz.head.v2 import FORMAT2, DraftHead2
from specviz.loading.loader import ModelLoadError, tiny_random
from specviz.proposers.head import HeadProposer
from specviz.training.head2_eval import chain
from specviz.training.head2_train import new_head2
from specviz.training.head_fit import new_head

SMALL = dict(intermediate=48, heads=2, head_dim=16)  # a v2 head sized for the tiny targets


@pytest.fixture(scope="module")
def tiny():
    """A 4-layer tiny target, a random v2 head reading its layers 1 and 2, and a random v1 head."""
    torch.set_num_threads(1)
    target = tiny_random(vocab_size=32, layers=4, seed=5)
    head2 = new_head2(target.model, torch.arange(24), seed=0, aux_layers=[1, 2], **SMALL)
    head1 = new_head(target.model, torch.arange(24), seed=0, intermediate=48)
    return target, head2, head1


def _drafts(target, head) -> list[int]:
    """The head's greedy chain of 4 from fixed root features and token 3 (head2_eval.chain)."""
    embed, lm = target.model.get_input_embeddings(), target.model.get_output_embeddings()
    feats = torch.randn(3 * head.cfg.hidden, generator=torch.Generator().manual_seed(2))
    return chain(head, embed, lm.weight.detach()[head.vocab_ids].float(), feats, 3, 4)[0]


# -- the decoding path drafts with v1 only ------------------------------------------------------------
def test_method_head_refuses_a_v2_head(tiny, tmp_path):
    """A v2 head given to the head proposer, a v2 file named as the head's or the hybrid's head path,
    each raise a ValueError that says v2 is not shipped; the same target drafts with a v1 file."""
    target, head2, head1 = tiny
    with pytest.raises(ValueError, match=r"specviz-draft-head/1 head, not specviz-draft-head/2.*not shipped"):
        HeadProposer(head2, target.model)
    v1, v2 = tmp_path / "v1.safetensors", tmp_path / "v2.safetensors"
    save_head(head1, v1)
    save_head(head2, v2)
    with pytest.raises(ValueError, match=r"not shipped"):
        specviz.generate(target, [1, 2, 3], method="head", path=str(v2), k=2, max_new_tokens=4)
    with pytest.raises(ValueError, match=r"not shipped"):
        specviz.generate(target, [1, 2, 3], method="hybrid", head_path=str(v2), k=2, max_new_tokens=4)
    run = specviz.generate(target, [1, 2, 3], method="head", path=str(v1), k=2, max_new_tokens=4, plan=False)
    assert len(run.token_ids) == 4


# -- files, targets and sizes ------------------------------------------------------------------------
def test_save_and_load_round_trip(tiny, tmp_path):
    """A v2 head saved and loaded is a v2 head with the same config, weights and vocabulary, and
    drafts the same tokens (offline, head2_eval.chain); saved in bf16 (the default) it loads within
    bf16's rounding."""
    target, head2, _ = tiny
    exact, small = tmp_path / "exact.safetensors", tmp_path / "head2.safetensors"
    save_head(head2, exact, dtype=torch.float32)
    save_head(head2, small)
    back = load_head(exact)
    assert isinstance(back, DraftHead2) and back.cfg == head2.cfg and back.hidden_layers == (1, 2)
    for (name, a), (_, b) in zip(head2.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a, b), name
    for name, w in load_head(small).state_dict().items():
        torch.testing.assert_close(w, head2.state_dict()[name], atol=0.01, rtol=0.01)
    assert _drafts(target, back) == _drafts(target, head2)


def test_v1_still_loads_as_v1(tiny, tmp_path):
    """The shipped head and a v1 head saved now load as v1 (format 1); a v2 head saves as format 2."""
    shipped = load_head()
    assert type(shipped) is DraftHead and DEFAULT_PATH.is_file()
    path = tmp_path / "v1.safetensors"
    save_head(tiny[2], path)
    assert type(load_head(path)) is DraftHead
    from safetensors import safe_open

    with safe_open(str(tmp_path / "v1.safetensors"), framework="pt") as f:
        assert f.metadata()["format"] == "specviz-draft-head/1"
    save_head(tiny[1], tmp_path / "v2.safetensors")
    with safe_open(str(tmp_path / "v2.safetensors"), framework="pt") as f:
        assert f.metadata()["format"] == FORMAT2


def test_wrong_shape_says_what_to_do(tiny, tmp_path):
    """A v2 file whose tensors do not match its config raises ModelLoadError naming the file and
    the script that writes v2 heads."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    path = tmp_path / "head2.safetensors"
    save_head(tiny[1], path)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    tensors = load_file(str(path))
    tensors["fuse.weight"] = tensors["fuse.weight"][:, :-1].contiguous()
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(ModelLoadError, match=r"head2\.safetensors.*shape.*training\.head2_train"):
        load_head(path)


def test_head_refuses_another_target(tiny):
    """A v2 head beside a target of another size, or one without the decoder layers it reads: a
    ValueError that names both."""
    _, head2, _ = tiny
    other = tiny_random(vocab_size=48, layers=4)
    with pytest.raises(ValueError, match=r"hidden size 64 and vocabulary 32.*this target has 64 and 48"):
        check_target(head2, other.model, "head2.safetensors")
    shallow = tiny_random(vocab_size=32, layers=2)
    with pytest.raises(ValueError, match=r"reads decoder layers \[1, 2\].*this target has 2 layers.*head2_train"):
        check_target(head2, shallow.model, "head2.safetensors")


def test_real_size_has_five_million_parameters():
    """At the bundled target's sizes (d = 576, layers 2 and 15, 4 heads × 64, MLP 1536) the v2 head
    has about 4.9 M trained parameters, the LM head and embedding not among them."""
    from specviz.head.v2 import HeadConfig2

    head = DraftHead2(HeadConfig2(hidden=576, target_vocab=49152, aux_layers=[2, 15]), torch.arange(12288))
    n = sum(p.numel() for p in head.parameters())
    assert 4.5e6 < n < 8e6 and head.feature_width == 3 * 576
