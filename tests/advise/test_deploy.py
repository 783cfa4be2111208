"""Deployable output (specviz/advise/deploy/: what deploys, and one writer per engine): the advisor's
pick as each engine's configuration.

Surveys are built by hand from advice.py's dataclasses (and the recorded one in assets/); the
option names are checked against the engines' own code where it is installed: vLLM's
SpeculativeConfig in .venv-vllm (read with `ast`, not imported) and transformers' GenerationConfig.
"""
from __future__ import annotations

import ast
import inspect
import json
import os
import shlex
from pathlib import Path

import pytest

from specviz.advise import advice, deploy
from specviz.advise.advice import Candidate, ConcurrencyCost, Measured, Survey
from specviz.advise.deploy.common import cross_family

ROOT = Path(__file__).resolve().parents[2]
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def _measured(method: str, draft: str | None = None, marginal=(0.8, 0.6, 0.45, 0.3), c: float = 0.02,
              per_call: bool = False) -> Measured:
    """A candidate measured at K = len(marginal) over 100 cycles, chains only."""
    cycles = 100
    accepted = [cycles * r for r in marginal]
    reached = [float(cycles)] + accepted[:-1]
    return Measured(Candidate(method, draft), len(marginal), cycles, reached, accepted,
                    [float(d) for d in range(1, len(marginal) + 1)], c, per_call, 50.0)


def _concurrency() -> ConcurrencyCost:
    """Batches whose pass cost grows with its tokens the more runs share it: at 1 run a pass over
    n tokens costs about one token's, at 8 runs about n tokens'."""
    sizes = [1, 2, 3, 5, 9]
    growth = {1: 0.01, 2: 0.15, 4: 0.5, 8: 1.0}
    return ConcurrencyCost(list(growth), sizes, [[0.01 * b * (1 + g * (n - 1)) for n in sizes]
                                                 for b, g in growth.items()], 64)


def _survey(*measured: Measured, temperature: float = 0.0, target: str = "HuggingFaceTB/SmolLM2-135M-Instruct",
            concurrency: ConcurrencyCost | None = None) -> Survey:
    return Survey(target=target, prompts=4, machine="test", ar_tokens_per_s=50.0, step_s=0.02,
                  settings={"k_max": 4, "temperature": temperature, "top_p": 1.0, "max_new_tokens": 64, "seed": 0},
                  v={n: 1.0 + 0.01 * (n - 1) for n in range(1, 18)}, measured=list(measured),
                  concurrency=concurrency)


def _surveys() -> list[Survey]:
    """Surveys holding pld and draft candidates: a hub target, the bundled one sampled, a served one, and
    Gemma 3 270M with SmolLM2 as a draft from another family."""
    pld, draft = _measured("pld"), _measured("draft", "HuggingFaceTB/SmolLM2-135M", c=0.1, per_call=True)
    bundled = _measured("draft", "bundled", marginal=(0.9, 0.8, 0.7, 0.6), c=0.05, per_call=True)
    return [_survey(pld, draft, _measured("logitspec")),
            _survey(bundled, pld, temperature=0.7, target="bundled"),
            _survey(draft, target="vllm:http://127.0.0.1:8000|bundled"),
            _survey(_measured("draft", "bundled", c=0.5, per_call=True), pld, target="gemma3-270m"),
            advice.read(ROOT / "assets" / "recorded_advice.json")]


def _all() -> list[deploy.Deployment]:
    return [d for s in _surveys() for d in deploy.deployments(s)]


def _speculative_config_fields() -> tuple[set[str], str]:
    """The field names of vLLM's SpeculativeConfig and the source of its SpeculativeMethod, read
    from .venv-vllm's file (skipped without that venv, except in CI, which has it)."""
    found = sorted((ROOT / ".venv-vllm").glob("lib/python*/site-packages/vllm/config/speculative.py"))
    if not found:
        if IN_CI:
            pytest.fail("CI has .venv-vllm (bash scripts/install.sh vllm), and this test needs it")
        pytest.skip(".venv-vllm is absent here: bash scripts/install.sh vllm builds it")
    tree = ast.parse(found[0].read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SpeculativeConfig")
    fields = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    method = next(n for n in tree.body if isinstance(n, ast.Assign)
                  and any(isinstance(t, ast.Name) and t.id == "SpeculativeMethod" for t in n.targets))
    return fields, ast.unparse(method.value)


def test_every_emitted_option_is_a_cited_name():
    """Over surveys with pld and draft candidates (hub, bundled, served targets), every deployment's
    option names are among OPTIONS[its engine], each with a citation, and every engine writes both
    pld and a draft model; the per-concurrency form's names are cited too."""
    seen = set()
    for d in _all():
        assert d.engine in deploy.ENGINES and d.source
        assert set(d.options) - set(deploy.OPTIONS[d.engine]) == set(), d.engine
        seen.add((d.engine, d.candidate.split()[0]))
    assert seen == {(e, m) for e in deploy.ENGINES for m in ("pld", "draft")}  # the two an engine has
    assert all(cite.strip() for names in deploy.OPTIONS.values() for cite in names.values())
    schedule = deploy.concurrency_schedule(_survey(_measured("pld"), concurrency=_concurrency()))
    assert schedule is not None and set(schedule) <= set(deploy.OPTIONS[deploy.VLLM])


def test_vllm_keys_are_fields_of_its_speculative_config():
    """Each key the vLLM form can carry (OPTIONS, the deployments' options, the per-concurrency schedule)
    is a field of SpeculativeConfig in the installed vLLM, and each method value emitted is one of
    its SpeculativeMethod names."""
    fields, methods = _speculative_config_fields()
    cited = {name for name in deploy.OPTIONS[deploy.VLLM] if not name.startswith("-")}
    emitted = {key for d in _all() if d.engine == deploy.VLLM for key in json.loads(d.config)}
    schedule = deploy.concurrency_schedule(_survey(_measured("pld"), concurrency=_concurrency()))
    assert (cited | emitted | set(schedule)) - fields == set()
    for d in _all():
        if d.engine == deploy.VLLM:
            assert repr(d.options["method"]) in methods


def test_hf_keys_are_generation_config_attributes():
    """Each HF option is an attribute of transformers.GenerationConfig() in .venv, except the draft
    model itself, a parameter of GenerationMixin.generate, and the two tokenizers of universal assisted
    decoding, which generate hands to _get_candidate_generator's parameters of those names."""
    from transformers import GenerationConfig
    from transformers.generation.utils import GenerationMixin

    config = GenerationConfig()
    names = set(deploy.OPTIONS[deploy.HF]) | {key for d in _all() if d.engine == deploy.HF for key in d.options}
    assert {n for n in names if not hasattr(config, n)} == {"assistant_model", "tokenizer", "assistant_tokenizer"}
    assert "assistant_model" in inspect.signature(GenerationMixin.generate).parameters
    chooser = inspect.signature(GenerationMixin._get_candidate_generator).parameters
    assert "assistant_tokenizer" in chooser and "target_tokenizer" in chooser


def _k_in(d: deploy.Deployment) -> int:
    """The K a deployment's config carries, read back as its engine would."""
    if d.engine == deploy.VLLM:
        return json.loads(d.config)["num_speculative_tokens"]
    if d.engine == deploy.HF:
        call = ast.parse(f"f({d.config})", mode="eval").body
        kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        objects = ("assistant_model", "tokenizer", "assistant_tokenizer")  # Python objects, not config values
        assert kw == {k: v for k, v in d.options.items() if k not in objects}
        return kw.get("prompt_lookup_num_tokens", kw.get("num_assistant_tokens"))
    words = shlex.split(d.config)
    flags = dict(zip(words[::2], words[1::2]))
    assert set(flags) == set(d.options)
    if d.engine == deploy.SGLANG:  # a chain of K is K + 1 tokens with the last verified one
        return int(flags["--speculative-num-draft-tokens"]) - 1
    return int(flags["--draft-max"])


def test_config_parses_and_carries_the_advised_k():
    """Each config parses as its engine takes it (JSON, keyword arguments, flags) and carries the
    K that ranked() advised for the candidate, with ranked()'s prediction beside it; the command
    holds the config, and a bundled target's vLLM command starts vLLM through specviz vllm-serve."""
    for survey in _surveys():
        advised = {m.candidate.label: (k, s) for m, k, s in advice.ranked(survey)}
        for d in deploy.deployments(survey):
            assert (d.k, d.predicted) == advised[d.candidate]
            assert _k_in(d) == d.k
            if d.engine != deploy.HF:
                assert d.config in d.command or shlex.quote(d.config) in d.command
            if d.engine == deploy.VLLM and survey.target == "bundled":
                assert d.command.startswith("python -m specviz vllm-serve bundled --port 8000 -- --speculative-config")


def test_non_deployable_candidates_name_the_nearest_deployable_one():
    """Every measured candidate no engine has gets one sentence naming the best-ranked pld or draft
    candidate with that candidate's own prediction and K; without one, the sentence says to add pld."""
    survey = advice.read(ROOT / "assets" / "recorded_advice.json")
    rows = advice.ranked(survey)
    pld = next((m, k, s) for m, k, s in rows if m.candidate.method == "pld")
    others = [m.candidate.label for m, _, _ in rows if m.candidate.method not in ("pld", "draft")]
    sentences = deploy.not_deployable(survey)
    assert len(sentences) == len(others) >= 4
    for label, sentence in zip(others, sentences):
        assert sentence.startswith(label) and sentence.count(".") >= 1
        assert f"nearest that deploys is pld, predicted {pld[2]:.2f}× at K = {pld[1]}" in sentence
    alone = deploy.not_deployable(_survey(_measured("logitspec"), _measured("hybrid")))
    assert len(alone) == 2 and all("add `pld`" in s for s in alone)
    assert deploy.not_deployable(_survey(_measured("pld"))) == []


def test_by_concurrency_lowers_k_as_requests_grow_and_turns_speculation_off():
    """With pass costs that grow with their tokens as more runs share them, the best deployable
    candidate's K by concurrency never rises, reaches None (S_B < 1) at the largest batch, and the
    ranges cover 1 upwards without gaps; the text and vLLM's schedule say the same (0 = off)."""
    head = _measured("head", marginal=(0.95, 0.9, 0.85, 0.8), c=0.05, per_call=True)  # ranked first, not deployable
    survey = _survey(head, _measured("pld"), concurrency=_concurrency())
    rows = deploy.by_concurrency(survey)
    points = next(p for m, p, _ in advice.under_concurrency(survey) if m.candidate.method == "pld")
    assert [s >= 1 for _, _, s in points] == [True, True, True, False]
    assert rows[0][0] == 1 and all(a[1] + 1 == b[0] for a, b in zip(rows, rows[1:]))
    ks = [k if k is not None else 0 for _, _, k in rows]
    assert ks == sorted(ks, reverse=True) and ks[0] > 1 and rows[-1][2] is None and len(rows) >= 3
    schedule = deploy.concurrency_schedule(survey)
    assert schedule["num_speculative_tokens_per_batch_size"] == [[lo, hi, k or 0] for lo, hi, k in rows]
    assert schedule["num_speculative_tokens"] == ks[0]
    text = deploy.by_concurrency_text(survey)
    assert "| requests at once | K |" in text and "off" in text and json.dumps(schedule) in text
    assert deploy.by_concurrency(_survey(_measured("pld"))) == [] and "no concurrency" in deploy.by_concurrency_text(
        _survey(_measured("pld")))


def test_a_draft_from_another_family_is_written_as_universal_assisted_decoding():
    """For Gemma 3 270M with SmolLM2 as its draft, HF's form passes both tokenizers to generate (universal
    assisted decoding) and its code parses; the engines that cannot take another family's draft say so;
    a draft of the target's own family gets neither."""
    cross = _survey(_measured("draft", "bundled", c=0.5, per_call=True), target="gemma3-270m")
    got = {d.engine: d for d in deploy.deployments(cross)}
    hf = got[deploy.HF]
    assert "assistant_tokenizer=draft_tok" in hf.command and "tokenizer=tok" in hf.command
    ast.parse(hf.command.replace("PROMPT", "'x'"))
    assert "another family" in hf.note
    for engine in (deploy.VLLM, deploy.SGLANG, deploy.LLAMA):
        assert "family" in got[engine].note, engine
    same = {d.engine: d for d in deploy.deployments(_survey(_measured("draft", "bundled"), target="bundled"))}
    assert "assistant_tokenizer" not in same[deploy.HF].command and "family" not in same[deploy.VLLM].note
    assert cross_family("gemma3-270m", "bundled") and not cross_family("bundled", "unknown/model")
