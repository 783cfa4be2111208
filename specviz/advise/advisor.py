"""The pair advisor, measuring: which draft (or draft-free method) and which K, for this target,
on these prompts and this machine; measured once, predicted for every K, then checked.

1. **Compatibility.** A draft model is compared with the target first (advise/compatibility.py); a
   pair that cannot run is refused with the reason, and warnings go into the survey.
2. **Measure once.** Each candidate decodes the prompts once at a large K (`k_max`) with planning
   off, so every position is drafted and judged; per draft position it counts reached and accepted
   (conditional and marginal rates), and times its drafting; the survey keeps what the model of
   speed reads off the runs (advise/survey_inputs.py). An AR run of the same prompts gives the plain
   step; v(n) comes from the target's cost profile.
3. **Predict** every K, the break-even rate, and the speedup with several runs at once from target passes
   timed at batch sizes 1…N: every number is the model of speed's (measure/speed_model.py), asked by
   advise/advice.py.
4. **Where they disagree**: under greedy decoding every candidate's output is the same, so each
   position one candidate paid a target pass for can be looked up in the others' runs
   (advise/disagreement.py).
5. **Check.** The top candidates decode the same prompts for real at their best K, beside plain
   decoding in the same run; a prediction more than `MISS` off the measurement is flagged with the
   likely reason.

`measure_stages` yields a message before each piece of work, so the app can show progress and stop
between them; `measure` runs it to the end. No UI libraries here.
"""
from __future__ import annotations

import platform
import statistics
import time
from pathlib import Path
from typing import Callable, Iterator

from specviz.advise.advice import (  # noqa: F401
    CONCURRENCY,
    MISS,
    Candidate,
    Check,
    ConcurrencyCost,
    Measured,
    Survey,
    Terms,
    explained_miss,
    predicted_terms,
    ranked,
    read,
    save,
)
from specviz.advise.compatibility import Finding, blocking, compatibility
from specviz.advise.disagreement import disagreement, why_not
from specviz.advise.survey_inputs import record_of
from specviz.decoding import speed
from specviz.decoding.engine import generate
from specviz.decoding.trace import RunTrace
from specviz.pricing.timing import pass_times
from specviz.proposers import default_k, proposer_class, unshared


# -- measurement -------------------------------------------------------------------------------------
def count_positions(runs: list[RunTrace], k_max: int) -> tuple[int, list[float], list[float], list[float]]:
    """(cycles, reached_i, accepted_i, mean nodes at depth ≤ i) over every cycle of the runs; depth i is
    reached when the path was judged there (decoding/speed.py), so accepted_i ÷ reached_i is α_i."""
    cycles = [c for run in runs for c in run.cycles]
    reached, accepted = [0.0] * k_max, [0.0] * k_max
    for c in cycles:
        n_accepted, judged = speed.judged_depths(c) if c.nodes else (0, 0)
        for i in range(1, min(judged, k_max) + 1):
            reached[i - 1] += 1
            accepted[i - 1] += i <= n_accepted
    nodes = [statistics.fmean(sum(d <= i for d in (n.depth for n in c.nodes)) for c in cycles) if cycles else 0.0
             for i in range(1, k_max + 1)]
    return len(cycles), reached, accepted, nodes


def _decode_all(target, draft, prompts, **kw) -> tuple[list[RunTrace], float]:
    with unshared():  # a candidate must not draft from its own warm-ups and checks
        runs = [generate(target, p, draft=draft, **kw) for p in prompts]
    tokens = sum(len(r.token_ids) - 1 for r in runs)
    seconds = sum(r.metrics["decode_s"] for r in runs)
    return runs, tokens / seconds if seconds > 0 else 0.0


def measure_concurrency(target, batch_sizes, sizes, prefix_len: int, repeats: int = 3) -> ConcurrencyCost:
    """Target passes over each of `sizes` tokens per run (1, a plain step, included), at each batch size."""
    sizes = sorted({1, *(int(n) for n in sizes)})
    rows = []
    for b in batch_sizes:
        t = pass_times(target, sizes, prefix_len=prefix_len, batch=int(b), repeats=repeats)
        rows.append([t[n] for n in sizes])
    return ConcurrencyCost([int(b) for b in batch_sizes], sizes, rows, prefix_len)


def _concurrency_sizes(measured: list[Measured]) -> list[int]:
    """Pass sizes worth timing: around every candidate's n_K + 1, so interpolation stays short."""
    wanted = {1, 2}
    for m in measured:
        wanted.update(int(round(n)) + 1 for n in m.nodes_at_depth)
    top = max(wanted)
    grid = {n for n in (1, 2, 3, 5, 9, 17, 33, 65) if n <= top} | {top}
    return sorted(grid)


def measure_stages(target, candidates: list[Candidate], prompts: list, get_model: Callable[[str], object],
                   v, k_max: int = 8, max_new_tokens: int = 64, temperature: float = 0.0, top_p: float = 1.0,
                   check: int = 2, concurrency=CONCURRENCY, prompts_from: str = "") -> Iterator[tuple[str, Survey]]:
    """Measure every candidate once at k_max, predict, then check the `check` best at their best K.
    `prompts_from` says where the prompts came from (Spec-Bench questions: their ids and categories);
    the survey keeps it in its settings, and its report prints it.

    Yields (what it does next, the survey so far) before each piece of work and ('done', survey)
    at the end; the survey is the same object throughout, filled in as the work goes.
    """
    settings = dict(k_max=k_max, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=0,
                    **({"prompts_from": prompts_from} if prompts_from else {}))
    common = dict(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=0, plan=False,
                  record=False)
    ns = range(1, 4 * k_max + 2)
    survey = Survey(target=target.name, prompts=len(prompts), settings=settings, machine=machine(),
                    ar_tokens_per_s=0.0, step_s=0.0, v={n: float(v(n)) for n in ns},
                    measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    v_source="the target's cost profile (planner.verify_cost)")
    yield "plain decoding (the anchor)", survey
    ar_runs = _measure_plain(survey, target, prompts, common)
    runs: dict[str, list[RunTrace]] = {}
    for cand in candidates:
        draft = yield from _draft_for(survey, target, cand, get_model)
        if cand.draft and draft is None:
            continue
        at = f"with its planner, K up to {default_k(cand.method)}" if cand.planned else f"at K = {k_max}"
        yield f"measuring {cand.label} {at}", survey
        try:
            runs[cand.label] = _measure_candidate(survey, target, draft, cand, prompts, k_max, common, ar_runs)
        except ValueError as e:  # a method this target refuses (e.g. the head on another model)
            survey.refused[cand.label] = str(e)
    found = disagreement(runs)
    survey.disagreement = found.to_dict() if found else None
    survey.disagreement_note = "" if found else (why_not(runs) or "")
    yield from _time_concurrency(survey, target, ar_runs, concurrency, ns)
    for m in survey.measured:  # the model's v_scale against the v(n) the survey now predicts with
        if m.candidate.label in runs:
            m.speed_inputs = _model_of(runs[m.candidate.label], ar_runs, m.candidate.method, survey.v_of)
    yield from _check_best(survey, target, prompts, get_model, check, common)
    yield "done", survey


def _measure_plain(survey: Survey, target, prompts: list, common: dict) -> list[RunTrace]:
    """Plain decoding, the anchor: its speed, its cycle (the unit of every cost) and the share of
    that cycle the target's pass takes."""
    ar_runs, survey.ar_tokens_per_s = _decode_all(target, None, prompts, method="ar", **common)
    ar_cycles = [c for r in ar_runs for c in r.cycles]
    if ar_cycles:
        survey.step_s = statistics.fmean(c.draft_s + c.verify_s + c.other_s for c in ar_cycles)
        survey.pass_share = statistics.fmean(c.verify_s for c in ar_cycles) / survey.step_s
    return ar_runs


def _draft_for(survey: Survey, target, cand: Candidate, get_model) -> Iterator[tuple[str, Survey]]:
    """The candidate's draft model, loaded and pair-checked (a generator: it says what it does and
    returns the model); None, with the reason in the survey, when it cannot run, or needs none."""
    if not cand.draft:
        return None
    yield f"loading and checking the draft {cand.draft}", survey
    try:
        draft = get_model(cand.draft)
    except Exception as e:  # noqa: BLE001 -- one bad draft must not lose the others' measurements
        survey.refused[cand.label] = f"it did not load ({type(e).__name__}: {e})"
        return None
    found = compatibility(target, draft)
    cross = blocking(found) and target.tokenizer is not None and draft.tokenizer is not None
    if cross:  # ids cannot pass between them: measured as a draft from another family, through text
        found.insert(0, Finding("warn", "tokens", "Measured as a draft from another family: its tokens reach the "
                                "target through text (greedy) or the tokens both vocabularies share (sampled)."))
    survey.pairs[cand.label] = [{"level": f.level, "topic": f.topic, "message": f.message} for f in found]
    if blocking(found) and not cross:
        survey.refused[cand.label] = "the draft is not compatible with the target (above)"
        return None
    return draft


def planned(cand: Candidate, k: int, common: dict) -> tuple[int, dict]:
    """(K, decode options) for a candidate: a planned one ("K auto") runs as the API's defaults do, its
    method's own K limit with the planner on; the others at `k` with planning off."""
    if cand.planned:
        return default_k(cand.method), {**common, "plan": True}
    return k, common


def _measure_candidate(survey: Survey, target, draft, cand: Candidate, prompts: list, k_max: int,
                       common: dict, ar_runs: list[RunTrace]) -> list[RunTrace]:
    """Decode the prompts with `cand` at k_max and add what it measured to the survey: the rates
    by position, and its drafting cost c, per draft call for a model that drafts (else per cycle).
    A planned candidate is measured as it runs (its K limit, planner on); its c is per cycle, and the
    survey keeps the share of cycles that sent a draft and how many nodes they sent. What the model
    of speed reads off the runs, against the plain runs `ar_runs`, is kept beside (survey_inputs.py)."""
    k_max, common = planned(cand, k_max, common)
    cand_runs, rate = _decode_all(target, draft, prompts, method=cand.method, k=k_max, knobs=cand.knobs, **common)
    n, reached, accepted, nodes = count_positions(cand_runs, k_max)
    per_call = bool(proposer_class(cand.method).paid_per_call) and not cand.planned
    cycles = [c for r in cand_runs for c in r.cycles]
    draft_s = sum(c.draft_s for c in cycles)
    depth = sum(max(nd.depth for nd in c.nodes) for c in cycles if c.nodes)
    unit = depth if per_call else len(cycles)  # per draft call, or per cycle of any kind
    c = draft_s / unit / survey.step_s if unit and survey.step_s else 0.0
    other = statistics.fmean(c.other_s for c in cycles) / survey.step_s if cycles and survey.step_s else 0.0
    sending = [len(c.nodes) for c in cycles if c.nodes]
    share = len(sending) / len(cycles) if cycles and cand.planned else None
    sent = statistics.fmean(sending) if sending and cand.planned else None
    model = _model_of(cand_runs, ar_runs, cand.method, survey.v_of)
    survey.measured.append(Measured(cand, k_max, n, reached, accepted, nodes, c, per_call, rate, other, share, sent,
                                    model))
    return cand_runs


def _model_of(runs: list[RunTrace], ar_runs: list[RunTrace], method: str, v):
    """What the model of speed reads off the runs; None (derived from the means, as for an older
    survey) where the runs have no timed cycle to read it from (one new token each)."""
    try:
        return record_of(runs, ar_runs, method, v)
    except speed.SpeedInputError:
        return None


def _time_concurrency(survey: Survey, target, ar_runs: list[RunTrace], concurrency,
                      ns: range) -> Iterator[tuple[str, Survey]]:
    """v(n) timed in this run at batch 1, and at the other batch sizes when a prediction with
    several runs at once is asked for (never for a served target, whose server batches)."""
    if getattr(target, "remote", None) is not None:
        survey.concurrency_note = ("No concurrency prediction: a target served by vLLM batches on its server, "
                                   "so its batched passes cannot be timed here.")
        return
    if not survey.measured:
        return
    batches = sorted({1, *concurrency})
    context = statistics.fmean(len(r.prompt_ids) + len(r.token_ids) / 2 for r in ar_runs)
    yield f"timing target passes at {', '.join(map(str, batches))} run(s) at once", survey
    timed = measure_concurrency(target, batches, _concurrency_sizes(survey.measured), prefix_len=int(context))
    survey.v = {n: timed.pass_at(0, n) / timed.one_token_s(0) for n in ns}
    survey.v_source = (f"timed in this run at batch 1, {timed.prefix_len} tokens of context, "
                       f"{timed.one_token_s(0) * 1e3:.0f} ms a one-token pass")
    survey.concurrency = timed if concurrency else None


def _check_best(survey: Survey, target, prompts: list, get_model, check: int,
                common: dict) -> Iterator[tuple[str, Survey]]:
    """Decode the `check` best predictions for real at their best K, beside plain decoding again."""
    for m, k, predicted in ranked(survey)[:check]:
        yield f"checking {m.candidate.label} at K = {k} against plain decoding", survey
        draft = get_model(m.candidate.draft) if m.candidate.draft else None
        k_run, options = planned(m.candidate, k, common)
        runs, rate = _decode_all(target, draft, prompts, method=m.candidate.method, k=k_run, knobs=m.candidate.knobs,
                                 **options)
        _, ar_again = _decode_all(target, None, prompts, method="ar", **common)
        measured = rate / ar_again if ar_again else 0.0
        want = predicted_terms(m, k, survey.v_of, survey.pass_share, survey.ar_tokens_per_s)
        survey.checks[m.candidate.label] = Check(k, predicted, measured,
                                                 explained_miss(predicted, measured, want, terms_of(runs, survey,
                                                                                                     ar_again)))


def terms_of(runs: list[RunTrace], survey: Survey, ar_tokens_per_s: float) -> Terms:
    """A check's measured terms per cycle, in the survey's one-token passes (its plain cycle's pass)."""
    cycles = [c for r in runs for c in r.cycles]
    unit = survey.step_s * survey.pass_share * max(len(cycles), 1)
    if not cycles or not unit:
        return Terms(0.0, 0.0, 0.0, 0.0, ar_tokens_per_s)
    return Terms(sum(len(c.committed) for c in cycles) / len(cycles), sum(c.draft_s for c in cycles) / unit,
                 sum(c.verify_s for c in cycles) / unit, sum(c.other_s for c in cycles) / unit, ar_tokens_per_s)


def measure(target, candidates: list[Candidate], prompts: list, get_model: Callable[[str], object], v,
            progress: Callable[[str], None] = print, **kw) -> Survey:
    """measure_stages to the end, printing what it does."""
    survey = None
    for message, survey in measure_stages(target, candidates, prompts, get_model, v, **kw):
        if message != "done":
            progress(f"{message}…")
    return survey


def machine() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
        name = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name"))
        flags = next(line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags"))
        return f"{name} ({', '.join(f for f in ('avx2', 'avx512f', 'amx_tile') if f in flags)})"
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()
