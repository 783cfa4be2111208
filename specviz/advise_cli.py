"""`python -m specviz advise`: the pair advisor on the command line (advise/advisor.py), where
to deploy its pick (advise/deploy/), and its check on the engines (advise/check_on.py).
specviz/cli.py dispatches here; the shared argument types and `fail` are in cli_args.py."""
from __future__ import annotations

import argparse
import os
import sys

from specviz.cli_args import _Parser, _positive_int, _temperature, _top_p, fail


def _batch_sizes(text: str) -> tuple[int, ...]:
    if text.strip().lower() == "none":
        return ()
    try:
        sizes = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        sizes = ()
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of batch sizes: write e.g. 1,2,4,8 or none")
    return sizes


def default_candidates() -> str:
    """Each method that joins others' drafts (the hybrid) as SpecViz runs it, its planner choosing K,
    then each method it joins that learns nothing across runs (a survey's repeated prompts would teach
    one), then itself at a fixed K: auto:hybrid,pld,logitspec,head,hybrid."""
    from specviz.advise.survey import AUTO
    from specviz.proposers import joiners, parts

    return ",".join([*(AUTO + m for m in joiners()), *parts(), *joiners()])


def _advise_parser() -> argparse.ArgumentParser:
    from specviz.advise.advice import CONCURRENCY  # data only
    from specviz.proposers import REGISTRY, spec

    ap = _Parser(prog="specviz advise", description="Which draft, method and K for this target, on these "
                 "prompts and this machine: measured once, predicted for every K, then checked "
                 "(specviz/advise/advisor.py).")
    ap.add_argument("--target", default="bundled")
    own = ", ".join(m for m in REGISTRY if not spec(m).needs_draft)
    ap.add_argument("--candidates", default=default_candidates(),
                    help=f"comma-separated: {own}, layerskip:0-9+20-29 (kept layers), draft:SPEC; auto: before "
                         "one runs it as SpecViz does by default, its planner choosing K (default %(default)s)")
    ap.add_argument("--prompts", help="JSON list of {prompt} (or of strings); default: the page's example prompts")
    ap.add_argument("--limit", type=_positive_int, help="only the first N prompts")
    ap.add_argument("--k-max", type=_positive_int, default=8, help="the K every candidate is measured at (default 8)")
    ap.add_argument("--max-new-tokens", type=_positive_int, default=64)
    ap.add_argument("--temperature", type=_temperature, default=0.0)
    ap.add_argument("--top-p", type=_top_p, default=1.0)
    ap.add_argument("--check-best", type=int, default=2, help="how many of the best picks to measure for real "
                    "against their prediction, here in SpecViz (default 2)")
    # its name until 2026-12-06 (beside --check-on it read as another thing): still accepted, not shown
    ap.add_argument("--check", dest="check_best", type=int, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    ap.add_argument("--concurrency", type=_batch_sizes, default=",".join(map(str, CONCURRENCY)),
                    help="runs at once to predict the speedup under, e.g. 1,2,4,8,16 (default %(default)s); "
                         "'none' skips timing batched passes")
    ap.add_argument("--out", help="folder for survey.json and advice.md")
    ap.add_argument("--from", dest="source", help="print the advice of a saved survey.json; no model runs "
                                                  "(with --check-on: check that survey's picks)")
    ap.add_argument("--check-on", help="vllm, hf or vllm,hf: run each deployable pick on that engine with the "
                                       "configuration the advice wrote, and compare with its prediction from the "
                                       "engine's own step costs (specviz/advise/engine_check.py)")
    ap.add_argument("--vllm-url", help="with --check-on vllm: a running plain vLLM server of the target (else "
                                       "one is started); the configuration's server is always started")
    ap.add_argument("--check-concurrency", type=_positive_int, default=1,
                    help="with --check-on vllm: also check at this many requests at once, on the survey's K by "
                         "concurrency (default 1: one request)")
    ap.add_argument("--check-repeats", type=_positive_int, default=2, help="repeats per prompt in a check")
    return ap


def _advise_prompts(path: str | None) -> list[str]:
    import json

    if path is None:  # the page's example prompts (assets/examples.json)
        path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "examples.json")
    try:
        items = json.loads(open(path, encoding="utf-8").read())
    except (OSError, ValueError) as e:
        fail(f"cannot read the prompts file {path}: {e}")
    prompts = [i["prompt"] if isinstance(i, dict) else i for i in items] if isinstance(items, list) else []
    if not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        fail(f"{path} holds no prompts: write a JSON list of strings or of objects with a 'prompt'")
    return prompts


def cmd_advise(argv: list[str]) -> int:
    """`python -m specviz advise …` (docs/API.md, \"Command line\")."""
    args = _advise_parser().parse_args(argv)
    if args.source and not args.check_on:
        from specviz.advise import advice, advice_report, deploy  # data only: no model, no torch model code

        try:
            survey = advice.read(args.source)
        except ValueError as e:
            fail(e)
        print(advice_report.report(survey) + "\n\n" + deploy.report(survey))
        return 0
    from specviz.advise import advice_report, advisor, check_on, deploy

    try:
        candidates = [advisor.Candidate.parse(c) for c in args.candidates.split(",") if c.strip()]
    except ValueError as e:
        fail(e)
    prompts = _advise_prompts(args.prompts)[: args.limit]
    from specviz.decoding import planner
    from specviz.loading.loader import ModelLoadError, load

    say = lambda m: print(m, file=sys.stderr)  # noqa: E731 -- progress on stderr, the advice on stdout
    try:
        engines = check_on.parse_engines(args.check_on) if args.check_on else []
        survey = advisor.read(args.source) if args.source else None
        target = load(survey.target if survey else args.target, progress=say)
        models = {}
        if survey is None:
            survey = advisor.measure(target, candidates, prompts, lambda spec: models.setdefault(spec, load(spec)),
                                     planner.verify_cost(target), say, k_max=args.k_max,
                                     max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                     top_p=args.top_p, check=args.check_best, concurrency=args.concurrency)
        if engines:
            check_on.run_checks(survey, engines, target, prompts, load, vllm_url=args.vllm_url,
                                concurrency=args.check_concurrency, max_new_tokens=args.max_new_tokens,
                                repeats=args.check_repeats, progress=say)
    except (ValueError, ModelLoadError) as e:
        fail(e)
    text = advice_report.report(survey) + "\n\n" + deploy.report(survey)
    if args.out:
        out = __import__("pathlib").Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        advisor.save(survey, out / "survey.json")
        (out / "advice.md").write_text(text + "\n", encoding="utf-8")
        say(f"wrote {out / 'survey.json'} and {out / 'advice.md'}")
    print(text)
    return 0
