"""`python -m specviz bench`: our methods against transformers' generate, in one run.

Every variant decodes every prompt on the same model objects, interleaved within each
repeat so that machine noise hits them alike; a prompt's number is the median of its
repeats. Anchors are HF `generate` plain (`hf`), with prompt lookup (`hf_pld`), and with
`assistant_model` when a draft is given (`hf_assist`). Each variant is timed from outside,
around the whole call, on pre-tokenised prompts.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import torch

from specviz.decoding import speed
from specviz.decoding.engine import generate
from specviz.decoding.planner import verify_cost
from specviz.decoding.served import served_plain
from specviz.loading.loader import load, same_tokenizer
from specviz.proposers import suffix

LOOKUP_METHODS = ("pld", "logitspec", "suffix")  # draft lengths come from the proposer's own knobs, K only caps them
HF_PLD_TOKENS = 10  # transformers' documented default for prompt_lookup_num_tokens


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m specviz bench", description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", required=True, help="JSON list of {id, cat, prompt}")
    ap.add_argument("--methods", default="ar,pld,logitspec",
                    help="ours, comma-separated: ar,pld,logitspec,draft,layerskip; add ':norecord' "
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
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--top-p", type=float, default=1.0, help="nucleus for sampled runs (T > 0), ours and HF's alike")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="only the first N prompts")
    ap.add_argument("--raw", action="store_true", help="no chat template")
    ap.add_argument("--out", required=True, help="folder for bench.json, report.html, summary.md")
    return ap.parse_args(argv)


def _hf_call(target, ids, anchor, draft, args):
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


def _ours_call(target, ids, variant, draft, args):
    method, record, knobs = parse_variant(variant)
    with suffix.unshared():  # a prompt's repeats must not draft from each other (a class does)
        run = generate(target, ids, method=method, draft=draft if method == "draft" else None,
                       k=args.lookup_k if method in LOOKUP_METHODS else args.k,
                       temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                       chat=False, record=record, **knobs)
    m = run.metrics
    return {"token_ids": run.token_ids, "mean_accepted_tokens": m["mean_accepted_tokens"],
            "acceptance_rate": m["acceptance_rate"], "retrieval_success": m["retrieval_success"],
            "cycles": m["cycles"], "draft_s": m["draft_s"], "verify_s": m["verify_s"], "other_s": m["other_s"],
            "acceptance_by_position": m["acceptance_by_position"]}


def time_variant(target, ids, variant, draft, args) -> dict:
    t0 = time.perf_counter()
    if variant == "vllm":  # a served target's anchor: the server's own plain decoding
        out = {"token_ids": served_plain(target, ids, temperature=args.temperature, top_p=args.top_p,
                                         max_new_tokens=args.max_new_tokens, chat=False).token_ids}
    elif variant.startswith("hf"):
        out = _hf_call(target, ids, variant, draft, args)
    else:
        out = _ours_call(target, ids, variant, draft, args)
    out["wall_s"] = time.perf_counter() - t0
    out["tokens_per_s"] = len(out["token_ids"]) / out["wall_s"]
    return out


def _median_row(runs: list[dict]) -> dict:
    row = {k: statistics.median(r[k] for r in runs) for k in runs[0]
           if isinstance(runs[0][k], (int, float)) and runs[0][k] is not None}
    row["new_tokens"] = len(runs[0]["token_ids"])
    # in repeat order, to pair with the anchor's; tokens/s, since a sampled repeat's length differs
    row["tokens_per_s_repeats"] = [r["tokens_per_s"] for r in runs]
    if "acceptance_by_position" in runs[0]:  # the same every repeat under greedy decoding
        row["acceptance_by_position"] = runs[0]["acceptance_by_position"]
    row["token_ids"] = runs[0]["token_ids"]
    return row


def geomean(xs) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def repeat_ratios(row: dict, anchor: dict) -> list[float]:
    """The variant's tokens/s over the anchor's, repeat by repeat (the two ran one after the other
    in each repeat, so they share its machine state; a sampled repeat's length differs, so speeds,
    not times); [] for rows without per-repeat speeds."""
    ours, theirs = row.get("tokens_per_s_repeats") or [], anchor.get("tokens_per_s_repeats") or []
    return [a / b for a, b in zip(ours, theirs) if a > 0 and b > 0]


def summarise(results: dict, variants: list[str]) -> dict:
    """Per variant: geometric-mean speedups over hf and hf_pld, worst prompt, lossless count, and
    against hf repeat by repeat: the prompts where the variant was slower in every repeat."""
    out = {}
    for v in variants:
        rows = [(pid, r[v], r.get("hf"), r.get("hf_pld")) for pid, r in results.items()]
        s = {"tokens_per_s_median": statistics.median(x["tokens_per_s"] for _, x, _, _ in rows)}
        if rows[0][2] is not None:
            ratios = [x["tokens_per_s"] / h["tokens_per_s"] for _, x, h, _ in rows]
            s.update(speedup_vs_hf=geomean(ratios), worst_vs_hf=min(ratios),
                     identical_to_hf=sum(x["token_ids"] == h["token_ids"] for _, x, h, _ in rows))
            paired = {pid: repeat_ratios(x, h) for pid, x, h, _ in rows}
            if v != "hf" and all(len(rs) > 1 for rs in paired.values()):
                s["repeat_ratios_vs_hf"] = paired
                s["slower_every_repeat"] = [pid for pid, rs in paired.items() if max(rs) < 1.0]
        served = [(x, r["vllm"]) for pid, r in results.items() for x in [r[v]] if "vllm" in r]
        if served:
            s.update(speedup_vs_vllm=geomean(x["tokens_per_s"] / b["tokens_per_s"] for x, b in served),
                     identical_to_vllm=sum(x["token_ids"] == b["token_ids"] for x, b in served))
        if rows[0][3] is not None:
            s["speedup_vs_hf_pld"] = geomean(x["tokens_per_s"] / p["tokens_per_s"] for _, x, _, p in rows)
        for key in ("mean_accepted_tokens", "acceptance_rate", "retrieval_success"):
            vals = [x[key] for _, x, _, _ in rows if x.get(key) is not None]
            if vals:
                s[key] = statistics.mean(vals)
        by_pos = [x["acceptance_by_position"] for _, x, _, _ in rows if x.get("acceptance_by_position")]
        if by_pos:  # α at draft position 1, 2, …, averaged over the prompts that reached it
            s["acceptance_by_position"] = [statistics.mean(a[d] for a in by_pos if len(a) > d)
                                           for d in range(max(map(len, by_pos)))]
        if rows[0][1].get("cycles") is not None:  # ours: where the wall-clock time went (the profile)
            xs = [x for _, x, _, _ in rows]
            s["profile"] = {
                "draft_share": statistics.mean(x["draft_s"] / x["wall_s"] for x in xs),
                "verify_share": statistics.mean(x["verify_s"] / x["wall_s"] for x in xs),
                "other_share": statistics.mean(x["other_s"] / x["wall_s"] for x in xs),
                # a run that ended at its prefill (the first token was an end token) has no cycle
                "ms_per_verify_pass": 1000 * statistics.median(x["verify_s"] / max(1, x["cycles"]) for x in xs),
                "tokens_per_verify_pass": statistics.mean(x["new_tokens"] / max(1, x["cycles"]) for x in xs)}
        out[v] = s
    return out


def machine() -> dict:
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "python": platform.python_version(),
            "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def run_bench(args, partial=None) -> dict:
    """Run every variant on every prompt; `partial(report)` is called after each prompt so that a
    long run interrupted half-way still leaves its numbers on disk."""
    say = lambda msg: print(msg, file=sys.stderr, flush=True)
    target = load(args.target, dtype=args.dtype, progress=say)
    draft = load(args.draft, dtype=args.dtype, progress=say) if args.draft else None
    prompts = json.loads(Path(args.prompts).read_text(encoding="utf-8"))[: args.limit]
    anchors = [] if args.anchors == "none" else args.anchors.split(",")
    if "hf_assist" in anchors and draft is None:
        anchors.remove("hf_assist")
    if target.remote is not None:  # HF generate needs the weights here; the server decodes plainly itself
        if any(a.startswith("hf") for a in anchors):
            say("a vLLM-served target: the anchor is vLLM's own plain decoding (the hf anchors need local weights)")
        anchors = ["vllm"]
    elif "vllm" in anchors:
        raise ValueError("the vllm anchor needs a vLLM-served target: --target vllm:http://HOST:PORT")
    variants = anchors + args.methods.split(",")
    profile = verify_cost(target)  # the v(n) the planner decides with, timed before any variant
    warm = target.encode("Hello", chat=not args.raw)
    for v in variants:  # the first passes pay for allocation and kernel choice; keep them out
        time_variant(target, warm, v, draft, argparse.Namespace(**{**vars(args), "max_new_tokens": 8}))
    results = {}
    for i, item in enumerate(prompts):
        ids = target.encode(item["prompt"], chat=not args.raw)
        runs = {v: [] for v in variants}
        for rep in range(args.repeats):
            order = variants[rep % len(variants):] + variants[: rep % len(variants)]  # rotate
            for v in order:
                runs[v].append(time_variant(target, ids, v, draft, args))
        results[item["id"]] = {v: _median_row(r) for v, r in runs.items()}
        say(f"[{i + 1}/{len(prompts)}] {item['id']}: " + ", ".join(
            f"{v} {results[item['id']][v]['tokens_per_s']:.1f}" for v in variants) + " tok/s")
        report = {"machine": machine(), "settings": {k: v for k, v in vars(args).items()},
                  "cost_profile": {"v": {n: profile(n) for n in (1, 2, 4, 8, 16, 32)},
                                   "pass_ms": 1000 * profile.pass_s},
                  "variants": variants, "prompts": {p["id"]: p.get("cat", "") for p in prompts[: i + 1]},
                  "results": results, "summary": summarise(results, variants)}
        if partial is not None:
            partial(report)
    return report


def summary_markdown(report: dict) -> str:
    lines = [f"Run {report['machine']['date']} · {report['machine']['cpu']} · torch {report['machine']['torch']}"
             f" · {report['machine']['threads']} threads · settings: "
             + ", ".join(f"{k}={report['settings'].get(k)}" for k in ("target", "max_new_tokens", "repeats",
                                                                     "temperature", "top_p", "k", "lookup_k")),
             "", "| variant | tok/s (median) | × HF plain (geomean) | worst prompt | × HF prompt lookup | "
             f"{speed.label('mean_accepted_tokens')} | {speed.label('acceptance_rate')} | retrieval success | "
             "identical to HF |",
             "|---|---|---|---|---|---|---|---|---|"]
    n = len(report["results"])
    fmt = lambda x, f="{:.2f}": "–" if x is None else f.format(x)
    for v, s in report["summary"].items():
        lines.append(f"| {v} | {fmt(s['tokens_per_s_median'], '{:.1f}')} | {fmt(s.get('speedup_vs_hf'))}× | "
                     f"{fmt(s.get('worst_vs_hf'))}× | {fmt(s.get('speedup_vs_hf_pld'), '{:.2f}×')} | "
                     f"{fmt(s.get('mean_accepted_tokens'))} | {fmt(s.get('acceptance_rate'))} | "
                     f"{fmt(s.get('retrieval_success'))} | {s.get('identical_to_hf', '–')}/{n} |")
    if any("speedup_vs_vllm" in s for s in report["summary"].values()):
        lines += ["", "Against vLLM's own plain decoding on the same server (the anchor of a served target):", "",
                  "| variant | × vLLM plain (geomean) | identical to vLLM |", "|---|---|---|"]
        lines += [f"| {v} | {fmt(s.get('speedup_vs_vllm'))}× | {s.get('identical_to_vllm', '–')}/{n} |"
                  for v, s in report["summary"].items()]
    slow = [(v, s) for v, s in report["summary"].items() if "slower_every_repeat" in s]
    if slow:
        reps = report["settings"].get("repeats") or 0
        lines += ["", f"Against HF plain repeat by repeat (each repeat runs every variant once): the prompts "
                  f"where a variant was slower in all {reps} repeats. If the two were equally fast, "
                  f"each prompt would be so by chance with probability 1/{2 ** reps}, about "
                  f"{n / 2 ** reps:.1f} of {n}.", ""]
        lines += [f"- {v}: {len(s['slower_every_repeat'])} of {n}"
                  + (f" ({', '.join(s['slower_every_repeat'])})" if s["slower_every_repeat"] else "") for v, s in slow]
    if report.get("cost_profile"):
        cp = report["cost_profile"]
        pass_ms = cp.get("pass_ms", cp.get("step_ms", 0.0))  # "step_ms" in reports before 2026-12-06
        lines += ["", f"Cost profile the planner used: one-token pass {pass_ms:.1f} ms; v(n) = "
                  + ", ".join(f"{n}: {v:.2f}" for n, v in cp["v"].items())]
    prof = [(v, s["profile"]) for v, s in report["summary"].items() if s.get("profile")]
    if prof:
        lines += ["", "Where our time goes (mean share of wall-clock time; median verify pass):", "",
                  "| variant | drafting | verifying | other | ms per verify pass | tokens per verify pass |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {v} | {p['draft_share']:.0%} | {p['verify_share']:.0%} | {p['other_share']:.0%} | "
                  f"{p['ms_per_verify_pass']:.1f} | {p['tokens_per_verify_pass']:.2f} |" for v, p in prof]
    pos = [(v, s["acceptance_by_position"]) for v, s in report["summary"].items() if s.get("acceptance_by_position")]
    if pos:
        lines += ["", f"{speed.label('acceptance_by_position')}, d = 1, 2, … (mean over prompts):", ""]
        lines += [f"- {v}: " + ", ".join(f"{a:.2f}" for a in xs[:8]) for v, xs in pos]
    return "\n".join(lines) + "\n"


def main(argv=None, report_html: Callable[[dict], str] | None = None) -> int:
    """Run the bench and write bench.json and summary.md into --out, plus report.html when given
    `report_html` (the drawing layer's, passed in by cli.py, since measurement sits below drawing)."""
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = run_bench(args,
                       partial=lambda r: (out / "bench.json").write_text(json.dumps(r, indent=1), encoding="utf-8"))
    (out / "bench.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(report), encoding="utf-8")
    if report_html is not None:
        (out / "report.html").write_text(report_html(report), encoding="utf-8")
    print(summary_markdown(report))
    return 0
