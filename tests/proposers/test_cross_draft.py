"""A draft from another family (its own tokenizer, its own ids): greedy output is the target's, sampled
output follows the target's distribution, and the seam between the two tokenizers is handled."""
import copy
import functools

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import specviz
import specviz.drafting.vocab_map as vocab_mod
from specviz.drafting.vocab_map import VocabMap, retokenize, token_texts
from specviz.loading.loader import TokenizerMismatch, same_tokenizer, tiny_random
from specviz.proposers.cross_draft import CrossDraftProposer
from tests.helpers.reference import nucleus
from tests.helpers.tiny import hf_greedy

V = 40
SPECIALS = ["<unk>", "<eos>", "<user>", "<assistant>"]
DRAFT_ONLY = [f"z{i}" for i in range(8)]  # words the target's tokenizer does not have
ALPHA = 1e-3  # seeds are fixed: a pass or a failure is the same every run
CHI_T, CHI_N = 0.8, 800


def tokenizer_of(words: list[str]):
    """A whitespace word-level tokenizer over `words` in this order (ids are positions)."""
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tmodels
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(tmodels.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="<eos>")


@functools.cache
def cross_pair(noise: float = 0.3):
    """A tiny target over words w4…w39, and a draft whose tokenizer numbers 28 of those words in another
    order and adds 8 words of its own: its rows for shared words are the target's (plus noise), so
    it agrees with the target often but not always."""
    t_words = SPECIALS + [f"w{i}" for i in range(4, V)]
    target = tiny_random(vocab_size=V, tokenizer=tokenizer_of(t_words), seed=11, eos_ids=set())
    shared = [f"w{i}" for i in range(4, V)][::-1][:28]
    d_words = SPECIALS + DRAFT_ONLY[:4] + shared + DRAFT_ONLY[4:]
    draft = tiny_random(vocab_size=len(d_words), tokenizer=tokenizer_of(d_words), seed=12, eos_ids=set())
    draft.model = copy.deepcopy(target.model)
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        emb, head = target.model.get_input_embeddings().weight, target.model.get_output_embeddings().weight
        rows = emb.std() * torch.randn(len(d_words), emb.shape[1], generator=gen)
        for d, word in enumerate(d_words):
            if word in t_words:
                rows[d] = emb[t_words.index(word)] + noise * emb.std() * torch.randn(emb.shape[1], generator=gen)
        draft.model.resize_token_embeddings(len(d_words))
        draft.model.get_input_embeddings().weight.copy_(rows)
        out_rows = head.std() * torch.randn(len(d_words), head.shape[1], generator=gen)
        for d, word in enumerate(d_words):
            if word in t_words:
                out_rows[d] = head[t_words.index(word)]
        draft.model.get_output_embeddings().weight.copy_(out_rows)
    draft.vocab_size = len(d_words)
    return target, draft, t_words, d_words


def test_pair_is_cross_family_and_the_map_joins_words_by_text():
    """The two tokenizers number tokens differently, so the pair is a cross-family one; each shared word's
    draft id maps to the target id of the same word (the chat markers too: plain words to these tokenizers),
    draft-only words and the special tokens (<unk>, <eos>) to nothing."""
    target, draft, t_words, d_words = cross_pair()
    assert not same_tokenizer(target, draft)
    vmap = VocabMap.build(target.tokenizer, draft.tokenizer, V, len(d_words), set(), set())
    assert vmap.shared == 28 + 2
    for d, word in enumerate(d_words):
        want = t_words.index(word) if word in t_words and word not in ("<unk>", "<eos>") else -1
        assert int(vmap.to_target[d]) == want, word


def test_restricted_q_is_renormalised_over_shared_tokens_and_written_on_target_ids():
    """restrict() removes the mass of tokens the target lacks and renormalises; on_target() puts each
    shared token's share on its target twin, summing to one."""
    target, draft, t_words, d_words = cross_pair()
    vmap = VocabMap.build(target.tokenizer, draft.tokenizer, V, len(d_words), set(), set())
    q = torch.softmax(torch.randn(len(d_words), generator=torch.Generator().manual_seed(2)), -1)
    r = vmap.restrict(q)
    assert abs(float(r.sum()) - 1) < 1e-6 and all(float(r[d]) == 0 for d in range(len(d_words))
                                                   if int(vmap.to_target[d]) < 0)
    on = vmap.on_target(r)
    d = d_words.index("w20")
    assert on.shape == (V,) and abs(float(on.sum()) - 1) < 1e-6
    assert torch.isclose(on[t_words.index("w20")], r[d])
    assert vmap.restrict(torch.where(vmap.to_target < 0, q, torch.zeros_like(q))) is None


@pytest.mark.parametrize("k", [1, 3, 6])
def test_cross_family_greedy_equals_hf(k):
    """Greedy with a draft from another tokenizer gives the target's own greedy tokens (HF generate), on
    prompts containing words the draft does not know, for chains of 1, 3 and 6."""
    target, draft, _, _ = cross_pair()
    for prompt in ["w5 w9 w12 w7", "w33 w33 w4 w38 w20 w21", "w6"]:
        ids = target.encode(prompt, chat=False)
        run = specviz.generate(target, ids, method="draft", draft=draft, k=k, max_new_tokens=24, chat=False,
                               plan=False)
        assert run.token_ids == hf_greedy(target, ids, 24), prompt
    assert isinstance(specviz.Decoder(target, ids, method="draft", draft=draft, k=k).proposer, CrossDraftProposer)


def test_cross_family_greedy_drafts_are_accepted():
    """The seam is right: a draft that agrees with the target on shared words gets drafts accepted."""
    target, draft, _, _ = cross_pair(noise=0.0)
    run = specviz.generate(target, target.encode("w5 w9 w12 w7", chat=False), method="draft", draft=draft, k=4,
                           max_new_tokens=32, chat=False, plan=False)
    assert run.metrics["accepted_tokens"] > 0


@torch.inference_mode()
def exact_second_token(target, ids) -> torch.Tensor:
    """p(t2) = Σ p(t1) p(t2 | t1) by full forwards, in float64 from tests/helpers/reference.py (numpy),
    not the package's own softmax."""
    p1 = nucleus(target.model(torch.tensor([ids])).logits[0, -1].double().numpy(), CHI_T, 1.0)
    rows = target.model(torch.tensor([ids + [t] for t in range(V)])).logits[:, -1].double().numpy()
    return torch.from_numpy(p1 @ np.stack([nucleus(row, CHI_T, 1.0) for row in rows]))


def second_token_pvalue() -> float:
    """χ² p-value of the second new token (the first a cycle commits) under a cross-family draft."""
    target, draft, _, _ = cross_pair()
    ids = target.encode("w5 w9 w12 w7 w30 w31", chat=False)
    counts = torch.zeros(V, dtype=torch.float64)
    drafted = 0
    for seed in range(CHI_N):
        run = specviz.generate(target, ids, method="draft", draft=draft, k=2, temperature=CHI_T, seed=seed,
                               max_new_tokens=3, chat=False, plan=False)
        counts[run.token_ids[1]] += 1
        drafted += bool(run.cycles[0].nodes)
    assert drafted > CHI_N * 0.9  # the draft proposed in (nearly) every first cycle
    exact = exact_second_token(target, ids).double()
    expected = exact / exact.sum() * CHI_N
    big = expected >= 5
    observed, wanted = counts[big], expected[big]
    if (~big).any():  # the rare tokens, pooled into one category
        observed = torch.cat([observed, counts[~big].sum().reshape(1)])
        wanted = torch.cat([wanted, expected[~big].sum().reshape(1)])
    return float(chisquare(observed.numpy(), wanted.numpy()).pvalue)


def test_cross_family_sampling_follows_target():
    """Under sampling (T = 0.8) the token a cross-family draft's cycle commits follows the target's
    distribution (χ², N = 800): drawing from the restricted q and judging with it is exact."""
    assert second_token_pvalue() > ALPHA


def test_cross_family_sampling_check_catches_a_wrong_q(monkeypatch):
    """The same check fails when tokens are judged with the draft's q before restriction (the shared tokens'
    share, not renormalised): the check can see a wrong q."""
    real = VocabMap.on_target

    def unrenormalised(self, q_restricted):
        return real(self, q_restricted) * 0.6
    monkeypatch.setattr(VocabMap, "on_target", unrenormalised)
    assert second_token_pvalue() < ALPHA


def test_a_draft_without_tokenizer_is_refused_with_a_reason():
    """A draft with no tokenizer cannot be matched or turned into text: the error says so."""
    target, draft, _, _ = cross_pair()
    bare = copy.copy(draft)
    bare.tokenizer = None
    with pytest.raises(TokenizerMismatch, match="has no tokenizer"):
        specviz.generate(target, [5, 6], method="draft", draft=bare, k=2, max_new_tokens=2, chat=False)


def test_a_draft_sharing_no_text_is_refused():
    """A draft none of whose tokens stand for a target token's text gets a message naming both models."""
    target, _, _, _ = cross_pair()
    other = tiny_random(vocab_size=10, tokenizer=tokenizer_of(["<unk>", "<eos>"] + DRAFT_ONLY), seed=3, eos_ids=set())
    with pytest.raises(ValueError, match="no token text in common"):
        specviz.generate(target, [5, 6], method="draft", draft=other, k=2, max_new_tokens=2, chat=False)


def test_retokenize_reads_the_boundary_with_the_committed_tokens():
    """Text after committed ids becomes target ids, the seam re-read with the last committed tokens;
    where no committed tail re-encodes to itself, the text is tokenized on its own."""
    target, _, t_words, _ = cross_pair()
    ids = target.encode("w5 w6 w7", chat=False)
    got, seam = retokenize(target.tokenizer, ids, " w8 w9")
    assert got == [t_words.index("w8"), t_words.index("w9")] and seam == 3
    texts = token_texts(target.tokenizer, V)
    assert texts[t_words.index("w8")] == " w8" and texts[0] is None
    assert vocab_mod.BROKEN not in "".join(t for t in texts if t)


def test_the_seam_is_recorded_and_drawn():
    """A cross-family cycle's trace holds the draft's own tokens and the target tokens they became, and
    says how they were judged; the page's seam view shows both rows with the text escaped, greedy and
    sampled, and says nothing for a same-tokenizer draft."""
    from specviz.decoding.trace import RunTrace
    from specviz.viz import seam_html
    from specviz.viz.style import esc

    target, draft, _, _ = cross_pair(noise=0.0)
    ids = target.encode("w5 w9 w12 w7", chat=False)
    for temperature, judged in ((0.0, "greedy"), (0.9, "intersection")):
        run = specviz.generate(target, ids, method="draft", draft=draft, k=3, max_new_tokens=8, chat=False,
                               plan=False, temperature=temperature)
        seams = [c.seam for c in run.cycles if c.seam is not None]
        assert seams and all(s.judged == judged and s.shared == 30 for s in seams)
        first = next(c for c in run.cycles if c.seam is not None and c.nodes)
        assert [n.text for n in first.nodes] == first.seam.target[: len(first.nodes)]
        again = RunTrace.from_json(run.to_json()).cycles[run.cycles.index(first)].seam
        assert again == first.seam
        html = seam_html(first)
        assert all(esc(t.replace("\n", "↵")) in html for t in first.seam.draft + first.seam.target)
        assert ("Greedy:" if judged == "greedy" else "token-level intersection") in html
    first.seam.draft = ["<b>x</b>", "\n"]
    assert "<b>x</b>" not in seam_html(first) and "&lt;b&gt;" in seam_html(first) and "↵" in seam_html(first)
    first.seam = None
    assert seam_html(first) == ""
