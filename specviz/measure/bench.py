"""`python -m specviz bench`: our methods against transformers' generate, in one run.

Every variant decodes every prompt on the same model objects, interleaved within each
repeat so that machine noise hits them alike; a prompt's number is the median of its
repeats. Anchors are HF `generate` plain (`hf`), with prompt lookup (`hf_pld`), and with
`assistant_model` when a draft is given (`hf_assist`). Each variant is timed from outside,
around the whole call, on pre-tokenised prompts.

`--suite spec-bench` (the shipped public subset) or `--questions PATH` (Spec-Bench's question.jsonl)
takes Spec-Bench's questions instead of a prompt file and adds the leaderboard's table by category
(bench_table.py). A run stopped with Ctrl-C keeps what it measured, and `--resume` goes on from it
(bench_resume.py).
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from specviz.decoding.engine import generate
from specviz.decoding.planner import verify_cost
from specviz.decoding.served import served_plain
from specviz.loading.loader import load, same_tokenizer
from specviz.measure import bench_resume, specbench
from specviz.measure.bench_summary import median_row, summarise
from specviz.measure.bench_table import default_methods, suite_methods, summary_markdown  # noqa: F401
from specviz.passes import speedups
from specviz.pricing.timing import cpu_name
from specviz.proposers import methods, retrieval, unshared

HF_PLD_TOKENS = 10  # transformers' documented default for prompt_lookup_num_tokens


def parse_args(argv, parser_class=argparse.ArgumentParser):
    ap = parser_class(prog="python -m specviz bench", description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", help="JSON list of {id, cat, prompt} (or --suite / --questions)")
    ap.add_argument("--suite", choices=("spec-bench",), help="Spec-Bench's questions (the shipped public subset "
                    "unless --questions) and the leaderboard's table by category")
    ap.add_argument("--questions", help="a Spec-Bench question.jsonl (implies --suite spec-bench)")
    ap.add_argument("--split-mt", action="store_true", help="with a suite: each MT-bench category as its own row")
    ap.add_argument("--methods", default=None,
                    help=f"ours, comma-separated (default {default_methods()}; with a suite {suite_methods()}): "
                         f"{','.join(methods())}; add ':norecord' "
                         "to a method for a run with trace recording off, and ':name=value' for a knob "
                         "(e.g. hybrid:norecord:head_width=1)")
    ap.add_argument("--anchors", default="hf,hf_pld", help="hf,hf_pld,hf_assist (or 'none'); a vLLM-served "
                    "target (--target vllm:…) always takes vllm, the server's own plain decoding")
    ap.add_argument("--target", default="bundled")
    ap.add_argument("--draft", default=None)
    ap.add_argument("--dtype", default=None, help="fp32, bf16, fp16 or auto (default: fp32 on CPU)")
    ap.add_argument("--k", type=int, default=None, help="K for draft, head and layerskip (default: the method's own)")
    ap.add_argument("--lookup-k", type=int, default=16,
                    help="K for pld and logitspec: it caps their drafts (the lookup defaults are tuned for 16)")
    ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default); e.g. 0.7 to sample")
    ap.add_argument("--top-p", type=float, default=1.0, help="nucleus for sampled runs (T > 0), ours and HF's alike")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts or questions, in file "
                    "order (with a suite: the first N of the file, whatever their categories)")
    ap.add_argument("--raw", action="store_true", help="no chat template")
    ap.add_argument("--out", required=True, help="folder for bench.json, report.html, summary.md")
    ap.add_argument("--resume", action="store_true", help="go on with the run in --out's bench.json (stopped "
                    "with Ctrl-C): same settings required, the prompts it measured are skipped")
    args = ap.parse_args(argv)
    _settle(ap, args)
    return args


def _settle(ap, args) -> None:
    """The defaults that depend on other options, and the combinations argparse cannot check."""
    if args.questions is not None:
        args.suite = "spec-bench"
    if args.prompts is not None and args.suite:
        ap.error("--prompts is an alternative to --suite / --questions: give one of them")
    if args.prompts is None and not args.suite:
        ap.error("say what to run: --prompts FILE, --suite spec-bench or --questions PATH")
    for name in ("prompts", "questions"):  # absolute, so that --resume from another folder compares equal
        if getattr(args, name) is not None:
            setattr(args, name, str(Path(getattr(args, name)).resolve()))
    if args.methods is None:
        args.methods = suite_methods() if args.suite else default_methods()
    for name in ("limit", "repeats", "max_new_tokens"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.temperature < 0 or not math.isfinite(args.temperature):
        ap.error(f"--temperature must be 0 (greedy) or more, got {args.temperature}")


def _hf_call(target, ids, anchor, draft, args, seed: int = 0):
    kw = dict(max_new_tokens=args.max_new_tokens, pad_token_id=next(iter(target.eos_ids), 0),
              eos_token_id=sorted(target.eos_ids) or None)
    if args.temperature > 0:
        kw.update(do_sample=True, temperature=args.temperature, top_p=args.top_p, top_k=0)
    else:
        kw.update(do_sample=False)
    if anchor == "hf_pld":
        kw["prompt_lookup_num_tokens"] = HF_PLD_TOKENS
    if anchor == "hf_assist":
        kw["assistant_model"] = draft.model
        if not same_tokenizer(target, draft):  # another family: HF's universal assisted decoding
            kw.update(tokenizer=target.tokenizer, assistant_tokenizer=draft.tokenizer)
    x = torch.tensor([ids], device=target.device)
    if args.temperature > 0:
        torch.manual_seed(seed)  # HF samples from torch's global generator
    with torch.inference_mode():
        out = target.model.generate(x, attention_mask=torch.ones_like(x), **kw)
    return {"token_ids": out[0, len(ids):].tolist()}


def parse_variant(variant: str) -> tuple[str, bool, dict]:
    """(method, record, knobs) of a variant such as 'hybrid', 'pld:norecord' or
    'hybrid:norecord:head_width=1': after the method, ':norecord' and ':name=value' in any order."""
    method, *parts = variant.split(":")
    knobs = {}
    for part in parts:
        name, eq, value = part.partition("=")
        if eq:
            knobs[name] = int(value) if value.lstrip("-").isdigit() else float(value) if _is_float(value) else value
        elif part != "norecord":
            raise ValueError(f"variant '{variant}': '{part}' is neither 'norecord' nor name=value")
    return method, "norecord" not in parts, knobs


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _ours_call(target, ids, variant, draft, args, seed: int = 0):
    method, record, knobs = parse_variant(variant)
    with unshared():  # a prompt's repeats must not draft from each other (a class does)
        run = generate(target, ids, method=method, draft=draft if method == "draft" else None,
                       k=args.lookup_k if retrieval(method) else args.k,  # a retrieval draft's length is its knobs'
                       temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                       chat=False, record=record, seed=seed, **knobs)
    m = run.metrics
    return {"token_ids": run.token_ids, "mean_accepted_tokens": m["mean_accepted_tokens"],
            "acceptance_rate": m["acceptance_rate"], "drafted_tokens": m.get("drafted_tokens"),
            "retrieval_success": m["retrieval_success"],
            "cycles": m["cycles"], "draft_s": m["draft_s"], "verify_s": m["verify_s"], "other_s": m["other_s"],
            "acceptance_by_position": m["acceptance_by_position"],
            # tokens per second of the cycles alone, the prefill and set-up left out (a sampled answer's
            # length decides how much the prefill weighs in tokens/s)
            "cycle_tokens_per_s": len(run.token_ids) / max(m["draft_s"] + m["verify_s"] + m["other_s"], 1e-9)}


def time_variant(target, ids, variant, draft, args, seed: int = 0) -> dict:
    """One timed call of `variant` on `ids`; sampled, `seed` picks the draws (each repeat its own)."""
    t0 = time.perf_counter()
    if variant == "vllm":  # a served target's anchor: the server's own plain decoding
        out = {"token_ids": served_plain(target, ids, temperature=args.temperature, top_p=args.top_p,
                                         max_new_tokens=args.max_new_tokens, chat=False).token_ids}
    elif variant.startswith("hf"):
        out = _hf_call(target, ids, variant, draft, args, seed)
    else:
        out = _ours_call(target, ids, variant, draft, args, seed)
    out["wall_s"] = time.perf_counter() - t0
    out["tokens_per_s"] = len(out["token_ids"]) / out["wall_s"]
    return out


CPU_FEATURES = ("avx2", "avx512f", "avx512_bf16", "amx_tile")  # what decides a CPU's speed here (DESIGN.md)


def cpu() -> str:
    """The processor's name and which of CPU_FEATURES it has, e.g. 'AMD EPYC (avx2, avx512f, avx512_bf16)'."""
    have = [f for f in CPU_FEATURES if f in speedups.cpu_flags()]
    return f"{cpu_name()} ({', '.join(have) or 'none of ' + '/'.join(CPU_FEATURES)})"


def machine() -> dict:
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "python": platform.python_version(),
            "cpu": cpu(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def select_prompts(args) -> list[dict]:
    """The prompts this run decodes ({id, cat, prompt}, ids as text), in file order, the first --limit."""
    if args.suite:
        return specbench.as_prompts(specbench.read_questions(args.questions))[: args.limit]
    how = "give a JSON list of {id, cat, prompt} objects"
    try:
        prompts = json.loads(Path(args.prompts).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"Cannot read --prompts {args.prompts!r}: {e.strerror or e}.") from None
    except ValueError:
        raise ValueError(f"--prompts {args.prompts!r} is not JSON text: {how}.") from None
    if not isinstance(prompts, list) or not prompts \
            or not all(isinstance(p, dict) and "id" in p and isinstance(p.get("prompt"), str) for p in prompts):
        raise ValueError(f"--prompts {args.prompts!r} is not a list of prompts: {how}.")
    return [{**p, "id": str(p["id"])} for p in prompts[: args.limit]]


def _variants(args, target, draft, say) -> list[str]:
    anchors = [] if args.anchors == "none" else args.anchors.split(",")
    if "hf_assist" in anchors and draft is None:
        anchors.remove("hf_assist")
    if target.remote is not None:  # HF generate needs the weights here; the server decodes plainly itself
        if any(a.startswith("hf") for a in anchors):
            say("a vLLM-served target: the anchor is vLLM's own plain decoding (the hf anchors need local weights)")
        anchors = ["vllm"]
    elif "vllm" in anchors:
        raise ValueError("the vllm anchor needs a vLLM-served target: --target vllm:http://HOST:PORT")
    return anchors + args.methods.split(",")


def _measure(target, draft, item, variants, args) -> dict:
    """Every variant on one prompt, `args.repeats` times, the order rotated each repeat. Sampled, repeat r
    draws with seed r, every variant alike: each repeat is another answer, so a prompt's median and
    spread cover what the sampled text does to speed, not one answer timed again (greedy: seeds do
    nothing)."""
    ids = target.encode(item["prompt"], chat=not args.raw)
    runs = {v: [] for v in variants}
    for rep in range(args.repeats):
        order = variants[rep % len(variants):] + variants[: rep % len(variants)]  # rotate
        for v in order:
            runs[v].append(time_variant(target, ids, v, draft, args, seed=rep))
    return {v: median_row(r) for v, r in runs.items()}


def settings_of(args) -> dict:
    """The run's settings as its report keeps them: the arguments, and, sampled, that repeat r drew with
    seed r (_measure). A sampled run from before that drew one answer a prompt, so a resume or a merge
    refuses to mix the two."""
    return {**vars(args), **({"seeds": "one a repeat"} if args.temperature > 0 else {})}


def _report(args, variants, cost, prompts, results, previous) -> dict:
    now = machine()
    started = (previous or {}).get("machine", {})
    report = {"machine": {**now, "started": started.get("started", started.get("date", now["date"]))},
              "settings": settings_of(args),
              "cost_profile": cost, "variants": variants,
              "prompts": {p["id"]: p.get("cat", "") for p in prompts if p["id"] in results},
              "planned": len(prompts), "results": results, "summary": summarise(results, variants)}
    if args.suite:
        report["suite"] = {"name": args.suite, "label": specbench.PUBLIC_LABEL if args.questions is None
                           else f"Spec-Bench ({Path(args.questions).name})"}
    return report


def run_bench(args, partial=None, previous: dict | None = None) -> dict:
    """Run every variant on every prompt (those `previous`, a resumed run's report, has not measured);
    `partial(report)` is called after each prompt so that a run stopped half-way keeps its numbers."""
    say = lambda msg: print(msg, file=sys.stderr, flush=True)
    prompts = select_prompts(args)  # before any model loads: a bad file fails at once
    results = bench_resume.measured(previous, prompts) if previous else {}
    todo = [p for p in prompts if p["id"] not in results]
    if previous:
        say(f"resuming: {len(results)} of {len(prompts)} prompts already measured, {len(todo)} to go")
        if not todo:
            return _report(args, previous["variants"], previous.get("cost_profile"), prompts, results, previous)
    target = load(args.target, dtype=args.dtype, progress=say)
    draft = load(args.draft, dtype=args.dtype, progress=say) if args.draft else None
    variants = _variants(args, target, draft, say)
    profile = verify_cost(target)  # the v(n) the planner decides with, timed before any variant
    cost = {"v": {n: profile(n) for n in (1, 2, 4, 8, 16, 32)}, "pass_ms": 1000 * profile.pass_s}
    warm = target.encode("Hello", chat=not args.raw)
    for v in variants:  # the first passes pay for allocation and kernel choice; keep them out
        time_variant(target, warm, v, draft, argparse.Namespace(**{**vars(args), "max_new_tokens": 8}))
    start, saved = time.perf_counter(), len(results)
    try:
        for n, item in enumerate(todo, start=1):
            results[item["id"]] = _measure(target, draft, item, variants, args)
            report = _report(args, variants, cost, prompts, results, previous)
            if partial is not None:
                partial(report)
            saved = len(results)
            speeds = {v: results[item["id"]][v]["tokens_per_s"] for v in variants}
            say(bench_resume.progress_line(len(results), len(prompts), item, speeds, time.perf_counter() - start, n))
    except KeyboardInterrupt:  # a prompt measured but not yet saved when Ctrl-C came is saved now
        if partial is not None and len(results) > saved:
            partial(_report(args, variants, cost, prompts, results, previous))
        raise
    return report


def main(argv=None, report_html: Callable[[dict], str] | None = None,
         parser_class=argparse.ArgumentParser) -> int:
    """Run the bench and write bench.json and summary.md into --out, plus report.html when given
    `report_html` (the drawing layer's, passed in by cli.py, since measurement sits below drawing).
    Ctrl-C stops it with exit code 130, bench.json keeping every prompt measured."""
    args = parse_args(argv, parser_class)
    out = Path(args.out)
    previous = bench_resume.read_previous(out) if args.resume else None
    if previous is not None:
        bench_resume.check_same(previous, settings_of(args), machine())
    out.mkdir(parents=True, exist_ok=True)
    kept = [previous]

    def partial(report: dict) -> None:
        bench_resume.write_report(out, report)
        kept[0] = report

    try:
        report = run_bench(args, partial=partial, previous=previous)
    except KeyboardInterrupt:
        return _stopped(out, kept[0])
    bench_resume.write_report(out, report)
    (out / "summary.md").write_text(summary_markdown(report), encoding="utf-8")
    if report_html is not None:
        (out / "report.html").write_text(report_html(report), encoding="utf-8")
    print(summary_markdown(report))
    return 0


def _stopped(out: Path, report: dict | None) -> int:
    """Ctrl-C: one line on stderr, the table so far in summary.md, exit code 130 (128 + SIGINT)."""
    if not report or not report["results"]:
        print("specviz: stopped before any prompt was measured.", file=sys.stderr, flush=True)
        return 130
    (out / "summary.md").write_text(summary_markdown(report), encoding="utf-8")
    done, planned = len(report["results"]), report.get("planned", len(report["results"]))
    print(f"specviz: stopped with {done} of {planned} prompts measured: {out / bench_resume.REPORT} keeps them, "
          "and the same command with --resume measures the rest.", file=sys.stderr, flush=True)
    return 130
