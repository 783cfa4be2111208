"""What the seam between two tokenizers costs a cross-family draft per cycle, measured inside real runs.

    python scripts/bench/seam_cost.py [--target gemma3-270m] [--draft bundled] [--prompts FILE] [--limit N]

Runs the draft-model method with a draft from another family (greedy, K = 4, every cycle sent) on the
benchmark prompts, and times, per cycle, the text work the proposer does that a same-tokenizer draft
does not: decoding the committed ids and encoding them for the draft (`_context`), reading the draft's
text (`text_after`, `_texts`) and encoding it as the target's tokens (`retokenize`). Prints, per prompt
and overall, the seam's milliseconds per cycle against the cycle's drafting and whole time.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

import specviz
from specviz.proposers import cross_draft

ROOT = Path(__file__).resolve().parents[2]


def timed(spent: list, fn):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)
    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", default="gemma3-270m")
    ap.add_argument("--draft", default="bundled")
    ap.add_argument("--prompts", default=str(ROOT.parent / "shared" / "bench" / "prompts.json"))
    ap.add_argument("--limit", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    args = ap.parse_args()
    target, draft = specviz.load(args.target), specviz.load(args.draft)
    prompts = json.loads(Path(args.prompts).read_text(encoding="utf-8"))[: args.limit]
    spent: list[float] = []
    cls = cross_draft.CrossDraftProposer
    originals = {name: getattr(cls, name) for name in ("_context", "_texts")}
    module_fns = {name: getattr(cross_draft, name) for name in ("text_after", "retokenize")}
    for name, fn in originals.items():
        setattr(cls, name, timed(spent, fn))
    for name, fn in module_fns.items():
        setattr(cross_draft, name, timed(spent, fn))
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; {args.target} drafted for by {args.draft}")
    per_cycle, draft_ms, cycle_ms = [], [], []
    try:
        for item in prompts:
            spent.clear()
            run = specviz.generate(target, item["prompt"], method="draft", draft=draft, k=4, chat=False,
                                   max_new_tokens=args.max_new_tokens, plan=False, record=False)
            sent = [c for c in run.cycles if c.nodes]
            if not sent:
                continue
            seam = 1000 * sum(spent) / len(sent)
            drafting = 1000 * statistics.mean(c.draft_s for c in sent)
            whole = 1000 * statistics.mean(c.draft_s + c.verify_s + c.other_s for c in sent)
            per_cycle.append(seam), draft_ms.append(drafting), cycle_ms.append(whole)
            print(f"{item['id']}: {len(sent)} cycles, seam {seam:.2f} ms/cycle, drafting {drafting:.1f} ms, "
                  f"cycle {whole:.1f} ms, α {run.metrics['acceptance_rate']:.2f}")
    finally:
        for name, fn in originals.items():
            setattr(cls, name, fn)
        for name, fn in module_fns.items():
            setattr(cross_draft, name, fn)
    print(f"median over {len(per_cycle)} prompts: seam {statistics.median(per_cycle):.2f} ms/cycle "
          f"(range {min(per_cycle):.2f}–{max(per_cycle):.2f}), drafting {statistics.median(draft_ms):.1f} ms, "
          f"whole cycle {statistics.median(cycle_ms):.1f} ms")


if __name__ == "__main__":
    main()
