"""Where the candidates disagree (specviz/advise/disagreement.py): coverage counts, the gain formula,
the sentences, the file form, the refusals, and the plumbing on a tiny random model.

The counts are checked on hand-made runs whose origins are written out letter by letter; the tiny
model's numbers mean nothing, only that real runs line up and are counted as their origins say.
"""
from __future__ import annotations

import json
import math

import pytest

from specviz.advise.disagreement import CAVEAT, Disagreement, disagreement, why_not
from specviz.decoding.engine import generate
from specviz.decoding.trace import BONUS, FROM_DRAFT, RESAMPLED, TARGET, RunTrace
from specviz.loading.loader import load

KINDS = {"d": FROM_DRAFT, "r": RESAMPLED, "b": BONUS, "t": TARGET, "p": TARGET}


def _run(letters: str, tokens: list[int] | None = None, temperature: float = 0.0) -> RunTrace:
    """A run whose new tokens came from `letters`: p the prefill's, d draft, r resampled, b bonus, t target."""
    return RunTrace(method="x", settings={"temperature": temperature}, prompt_ids=[1, 2],
                    token_ids=tokens if tokens is not None else list(range(len(letters))),
                    origins=[KINDS[c] for c in letters], cycle_of=[-1 if c == "p" else 0 for c in letters])


# two prompts, three candidates; positions 1…6 and 1…3 count (0 is the prefill's)
HAND = {"pld": [_run("pddrddb"), _run("pttt")],
        "logitspec": [_run("prdddrt"), _run("pddb")],
        "head": [_run("pdrtttt"), _run("ptdb")]}


def test_counts_on_hand_made_runs():
    """Covered positions are the "draft" origins past the prefill; rescued[a][b] counts the positions
    a paid a target pass for that b covered; the union counts positions anyone covered."""
    d = disagreement(HAND)
    assert d is not None and d.candidates == ["pld", "logitspec", "head"]
    assert d.tokens == 9 and d.union == 7
    assert d.covered == {"pld": 4, "logitspec": 5, "head": 2}
    assert d.rescued == {"pld": {"logitspec": 3, "head": 1}, "logitspec": {"pld": 2, "head": 1},
                         "head": {"pld": 3, "logitspec": 4}}
    assert d.paid("logitspec") == 4


def test_the_gain_is_the_union_over_a_alone():
    """gain(a, b) = (|cov_a ∪ cov_b| − |cov_a|) / |cov_a| with the sets written out, and the oracle
    gain uses the union of all; a candidate that covered nothing gains inf from one that covered
    something and 0 from one that covered nothing."""
    d = disagreement(HAND)
    pld = {(0, 1), (0, 2), (0, 4), (0, 5)}
    logitspec = {(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)}
    assert d.gain("pld", "logitspec") == pytest.approx((len(pld | logitspec) - len(pld)) / len(pld)) == 0.75
    assert d.gain("logitspec", "pld") == pytest.approx(0.4)
    assert d.oracle_gain("logitspec") == pytest.approx((7 - 5) / 5)
    empty = Disagreement(["a", "b", "c"], 5, {"a": 0, "b": 2, "c": 0},
                         {"a": {"b": 2, "c": 0}, "b": {"a": 0, "c": 0}, "c": {"a": 0, "b": 2}}, 2)
    assert math.isinf(empty.gain("a", "b")) and empty.gain("a", "c") == 0.0
    assert math.isinf(empty.oracle_gain("a")) and empty.oracle_gain("b") == 0.0


def test_sentences_put_the_best_pair_first_then_the_oracle_then_the_caveat():
    """Each pair is measured against the better of its two alone, best gain first; three candidates
    add a sentence for all of them against the best single one, and the caveat ends the list."""
    s = disagreement(HAND).sentences()
    assert s[0] == ("A hybrid of logitspec and pld would have accepted 40 % more drafted tokens than logitspec "
                    "alone (2 of the 4 positions logitspec paid a target pass for were proposed by pld).")
    assert s[1].startswith("A hybrid of pld and head would have accepted 25 %")
    assert s[2].startswith("A hybrid of logitspec and head would have accepted 20 %")
    assert s[3].startswith("All 3 candidates together would have accepted 40 % more drafted tokens than "
                           "logitspec, the best alone (2 of the 4 positions")
    assert s[4] == CAVEAT and len(s) == 5
    assert len(disagreement(HAND).sentences(top=1)) == 3


def test_two_candidates_get_no_oracle_sentence_and_agreeing_ones_say_so():
    """With two candidates the oracle is the pair itself, so it is not said twice; candidates that
    cover the same positions get one sentence that combining them gains nothing, and a pair where
    one covers all the other does says the hybrid gains nothing over the better one."""
    two = disagreement({"pld": HAND["pld"], "head": HAND["head"]}).sentences()
    assert len(two) == 2 and two[0].startswith("A hybrid of pld and head") and two[1] == CAVEAT
    same = disagreement({"pld": HAND["pld"], "copy": [_run("pddrddb"), _run("pttt")]})
    assert same.union == same.covered["pld"] == 4
    assert same.sentences() == ["The candidates never disagree on these prompts: at each of the 9 positions "
                                "either all of them drafted the token the target kept or none did, so combining "
                                "them gains nothing."]
    more = disagreement({"pld": HAND["pld"], "less": [_run("pddrdtb"), _run("pttt")]}).sentences()
    assert more == ["pld drafted every token the target kept that less did: a hybrid of the two would gain "
                    "nothing over pld alone.", CAVEAT]


def test_the_result_is_plain_json_and_reads_back_equal():
    """to_dict survives a JSON round trip and from_dict gives back an equal Disagreement; data of
    another format is refused."""
    d = disagreement(HAND)
    assert Disagreement.from_dict(json.loads(json.dumps(d.to_dict()))) == d
    with pytest.raises(ValueError, match="not a SpecViz disagreement"):
        Disagreement.from_dict({"format": "specviz-advice/1"})


def test_sampled_runs_are_refused_with_the_reason():
    """Runs of one prompt whose tokens differ cannot be matched position by position: disagreement()
    returns None and why_not says where they split and that they were sampled (or, greedy, that one
    was not lossless)."""
    sampled = {"pld": [_run("pdd", [4, 5, 6], 0.8)], "head": [_run("pdd", [4, 7, 6], 0.8)]}
    assert disagreement(sampled) is None
    reason = why_not(sampled)
    assert reason.startswith("Prompt 1: pld and head committed different tokens from new token 2 on")
    assert "sampled (temperature 0.8)" in reason and "greedy decoding (temperature 0)" in reason
    greedy = {"pld": [_run("pdd", [4, 5, 6])], "head": [_run("pdd", [4, 7, 6])]}
    assert "was not lossless" in why_not(greedy) and disagreement(greedy) is None


@pytest.mark.parametrize("runs, words", [
    ({"pld": HAND["pld"]}, "at least two candidates; got 1"),
    ({"pld": HAND["pld"], "head": HAND["head"][:1]}, "pld decoded 2 prompts and head 1"),
    ({"pld": [], "head": []}, "No prompts were decoded"),
    ({"pld": [_run("pdd")], "head": [_run("pddd")]}, "pld committed 3 new tokens and head 4"),
    ({"pld": [_run("p")], "head": [_run("p")]}, "no tokens after the prefill's"),
    ({"pld": [_run("pdd")], "head": [RunTrace(method="x", token_ids=[0, 1, 2])]}, "head's run does not say"),
])
def test_other_runs_that_cannot_be_compared_are_refused(runs, words):
    """Fewer than two candidates, different numbers of prompts, none, different token budgets, no
    tokens past the prefill, or runs without per-token origins: each gets its reason, and no result."""
    assert words in why_not(runs) and disagreement(runs) is None
    assert why_not(HAND) is None


def test_real_greedy_runs_line_up_and_are_counted_by_their_origins():
    """On a tiny random target, greedy pld and logitspec runs of the same prompts commit the same
    tokens; each candidate's covered count is its runs' "draft" origins, and the union is at least
    the larger of the two."""
    target = load("tiny-random:vocab=48,layers=2,seed=3")
    prompts = [[1, 5, 9, 2, 7, 1, 5, 9], [3, 4, 3, 4, 3, 4]]
    runs = {m: [generate(target, p, method=m, k=4, max_new_tokens=16, temperature=0.0, seed=0, plan=False,
                         record=False) for p in prompts] for m in ("pld", "logitspec")}
    for a, b in zip(runs["pld"], runs["logitspec"]):
        assert a.token_ids == b.token_ids
    assert why_not(runs) is None
    d = disagreement(runs)
    assert d.tokens == sum(sum(c != -1 for c in r.cycle_of) for r in runs["pld"])
    for m, rs in runs.items():
        assert d.covered[m] == sum(o == FROM_DRAFT for r in rs for o in r.origins)
    assert max(d.covered.values()) <= d.union <= d.tokens
    assert d.union == d.covered["pld"] + d.rescued["pld"]["logitspec"]
    assert len(d.sentences()) == 2 and d.sentences()[-1] == CAVEAT
