"""Training draft head v2 (specviz/training/head2_train.py): its data are the target's features in a
plain pass, its rows line up, its unrolled loss is its drafting (head2_eval.chain), a few steps
lower it, the offline evaluation replays greedy cycles as the engine runs them, and the script
writes a v2 head and its card beside each other, never over v1's file."""
from __future__ import annotations

import json

import pytest
import torch

from specviz.head.model import DEFAULT_PATH, load_head
from specviz.head.v2 import DraftHead2
from specviz.loading.loader import tiny_random
from specviz.training import head2_eval, head2_train
from specviz.training.head2_eval import chain, replay
from specviz.training.head2_train import flatten2, new_head2, train2, unroll_loss
from specviz.training.head_data import collect, generate_batch, vocab_subset
from tests.helpers.tiny import training_inputs

SMALL = dict(aux_layers=[1, 2], intermediate=48, heads=2, head_dim=16)


@pytest.fixture(scope="module")
def data():
    """A 4-layer tiny target (16 tokens) and its sampled answers to 24 random prompts, with the
    outputs of its decoder layers 1 and 2 kept."""
    torch.set_num_threads(1)
    target = tiny_random(vocab_size=16, layers=4, seed=7)
    with torch.no_grad():
        target.model.lm_head.weight.mul_(8)  # a random model's p is nearly flat: a peaked p leaves something to learn
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(2, 7, (24,), generator=gen)
    prompts = [torch.randint(0, 16, (int(n),), generator=gen).tolist() for n in lengths]
    seqs = collect(target.model, prompts, max_new=14, temperature=1.0, batch=8, seed=0, eos=set(),
                   log=lambda m: None, aux=(1, 2))
    return target, seqs


def test_the_data_holds_the_targets_features(data):
    """For answers decoded in a left-padded batch, each position's kept [layer 1, layer 2] and final
    norm outputs (bf16) are what one plain unpadded pass over that answer's own tokens gives
    (transformers' hidden_states[i + 1] is layer i's output): the head trains and is evaluated on
    the features at each position, not on padding's."""
    target, _ = data
    model = target.model
    seqs = generate_batch(model, [[1, 2, 3], [4, 5, 6, 7, 8, 9]], 6, 0.0, torch.Generator(), set(), aux=(1, 2))
    for s in seqs:
        with torch.inference_mode():
            out = model.model(torch.tensor([s["tokens"][:-1].tolist()]), output_hidden_states=True)
        want = torch.cat([out.hidden_states[2][0], out.hidden_states[3][0], out.last_hidden_state[0]], dim=-1)
        kept = torch.cat([s["aux"].flatten(1), s["feats"]], dim=-1).float()
        torch.testing.assert_close(kept, want, atol=0.02, rtol=0.02)


def test_rows_tokens_and_starts_line_up():
    """flatten2 keeps the last prompt position and the answer of each sequence; from every start g
    (position t), step j reads the token x_{t+j} at X[g + j - 1] and learns the distribution of
    F[g + j], the final-norm output at position t + j; no start reaches past its own sequence."""
    seqs = []
    for n_tokens, prompt_len in ((9, 3), (7, 2), (4, 3)):
        pos = torch.arange(n_tokens - 1, dtype=torch.float32)
        seqs.append({"tokens": 100 * len(seqs) + torch.arange(n_tokens), "prompt_len": prompt_len,
                     "feats": pos[:, None].repeat(1, 4), "aux": pos[:, None, None].repeat(1, 2, 4) + 0.5})
    unroll = 2
    F, A, X, starts = flatten2(seqs, unroll)
    first_rows = [0, 6, 11]  # each sequence's rows begin at position prompt_len - 1
    assert len(F) == len(A) == len(X) == 6 + 5 + 1
    assert starts.tolist() == [0, 1, 2, 3, 6, 7, 8]  # t = 2..5 and 1..3; the last answer is too short
    for g in starts.tolist():
        seq = max(i for i, r in enumerate(first_rows) if r <= g)
        t = seqs[seq]["prompt_len"] - 1 + g - first_rows[seq]
        assert float(F[g, 0]) == t and float(A[g, 1, 0]) == t + 0.5
        for j in range(1, unroll + 1):
            assert int(X[g + j - 1]) == int(seqs[seq]["tokens"][t + j])
            assert float(F[g + j, 0]) == t + j


def test_the_unrolled_loss_is_the_drafting(data):
    """The logits training scores at step j are those the head drafts with (head2_eval.chain) after
    reading the same tokens x_{t+1}..x_{t+j} from the same features at t: the head is trained in
    the regime it drafts in (its own h and attention over its own earlier steps)."""
    target, seqs = data
    head = new_head2(target.model, torch.arange(12), seed=1, **SMALL)
    F, A, X, starts = flatten2(seqs, 3)
    g = int(starts[5])
    embed, _, lm = target.model.get_input_embeddings(), None, target.model.get_output_embeddings()
    w_sub = lm.weight.detach()[head.vocab_ids].float()
    seen = []
    real_step = head.step

    def spy(*args):
        out = real_step(*args)
        seen.append(out[1] @ w_sub.T)
        return out

    feats = torch.cat([A[g].flatten(), F[g]]).float()
    drafted, logits = chain(head, embed, w_sub, feats, int(X[g]), 3)
    X = X.clone()
    X[g + 1: g + 3] = torch.tensor(drafted[:2])  # training reads the tokens the chain drafted
    head.step = spy
    unroll_loss(head, w_sub, embed, F, A, X, torch.tensor([g]), 3)
    del head.step
    for j in range(3):
        torch.testing.assert_close(logits[j], seen[j][0].detach(), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("drafter, want", [
    ("right", [(3, 3), (2, 2)]),
    ("first only", [(1, 3), (1, 3), (1, 2), (0, 0)]),
    ("wrong", [(0, 3)] * 4 + [(0, 2), (0, 1), (0, 0)]),
])
def test_the_replay_counts_cycles_as_greedy_verification_does(monkeypatch, drafter, want):
    """Over an 8-token answer at K = 3, each cycle accepts the drafts up to the first that differs
    from the answer and commits one more token, and drafts no deeper than the tokens left minus
    one: a drafter always right takes 2 cycles, one right at its first token only 4, one never
    right 7 (the last with nothing left to draft); every cycle commits what it accepted plus one."""
    tokens = [9, 9] + list(range(20, 28))
    seq = {"tokens": torch.tensor(tokens), "prompt_len": 2,
           "feats": torch.arange(9.0)[:, None], "aux": torch.zeros(9, 2, 0)}  # a row's feature is its position

    def fake_chain(head, embed, w_sub, feats, first, k):
        t = int(feats[-1])
        assert first == tokens[t + 1]  # the cycle starts from the newest committed token
        right = tokens[t + 2: t + 2 + k]
        return {"right": right, "first only": right[:1] + [-1] * (k - 1), "wrong": [-1] * k}[drafter], []

    monkeypatch.setattr(head2_eval, "chain", fake_chain)
    cycles = replay(None, None, None, seq, 3)
    assert cycles == want
    assert 1 + sum(a + 1 for a, _ in cycles) == 8  # the prefill's token, then each cycle's


def test_a_few_steps_reduce_the_loss(data):
    """Forty steps of training-time test lower the unrolled cross-entropy on a fixed batch of the
    tiny target's answers (U = 3) by over a third of what lies above its floor, the target's own
    entropy there (the KL from the target's distribution to the head's)."""
    target, seqs = data
    head = new_head2(target.model, vocab_subset(seqs, 12, 16), seed=0, **SMALL)
    embed, lm = target.model.get_input_embeddings(), target.model.get_output_embeddings()
    w_sub = lm.weight.detach()[head.vocab_ids].float()
    F, A, X, starts = flatten2(seqs, 3)
    fixed = starts[torch.randperm(len(starts), generator=torch.Generator().manual_seed(1))[:64]]

    def loss():
        with torch.no_grad():
            return float(unroll_loss(head, w_sub, embed, F, A, X, fixed, 3)[0])

    p = torch.softmax(torch.stack([F[fixed + j].float() for j in (1, 2, 3)]) @ w_sub.T, dim=-1)
    floor = float(-(p * p.log()).sum(-1).mean())
    before = loss()
    stats = train2(head, seqs, target.model, steps=40, batch=32, lr=3e-3, unroll=3, log=lambda m: None)
    assert loss() - floor < (before - floor) * 2 / 3, (floor, before, loss())
    assert len(stats["top1_agreement_by_step"]) == 3


def test_the_script_writes_a_v2_head_and_card2(tmp_path, monkeypatch):
    """The whole script on a tiny target with a word tokenizer: it trains, writes a v2 head that
    loads and reads layers (2, num_layers // 2), and card2.json beside it with the held-out α;
    writing over v1's head.safetensors is refused."""
    target, prompts, heldout = training_inputs(tmp_path, monkeypatch, layers=4, lines=12)
    out = tmp_path / "head2.safetensors"
    args = ["--prompts", str(prompts), "--heldout", str(heldout), "--out", str(out), "--samples", "1",
            "--max-new-tokens", "10", "--steps", "4", "--batch", "16", "--vocab", "20", "--intermediate", "32",
            "--heads", "2", "--head-dim", "8", "--eval-tokens", "6"]
    assert head2_train.main(args) == 0
    head = load_head(out)
    assert isinstance(head, DraftHead2) and head.hidden_layers == (2, 2)
    card = json.loads((tmp_path / "card2.json").read_text())
    assert card["format"] == "specviz-draft-head/2" and card["unroll"] == 4 and "alpha" in card["eval"]["greedy"]
    with pytest.raises(SystemExit):
        head2_train.parse_args2(["--out", str(DEFAULT_PATH)])
