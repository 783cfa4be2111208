"""Gate off against gate on (issue 64.2, proposers/gate.py), interleaved in one process.

Process CPU time per run (time.process_time, torch at one thread), so a shared machine inflates
it less than wall time; each repeat runs every question under every variant before the next
repeat. Prints one JSON line per run (cycles, CPU s, head calls skipped, same as AR).

    .venv/bin/python scripts/bench/gate_ab.py --part 0/2 > part0.jsonl
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import specviz
from specviz.measure import specbench
from specviz.proposers import unshared

# the brief's mix: categories where retrieval hits (rag, summarization), where it rarely does
# (writing, humanities, qa) and translation, whose answers are short
MIX = {"rag": 4, "translation": 4, "writing": 2, "humanities": 2, "qa": 2, "summarization": 1}
VARIANTS = {"off": {"gate": False}, "on": {"gate": True}}


def questions() -> list[dict]:
    rows = [json.loads(line) for line in open(specbench.PUBLIC_SUBSET)]
    out = []
    for category, n in MIX.items():
        out += [r for r in rows if r["category"] == category][:n]
    return out


def run_once(target, prompt: str, knobs: dict) -> dict:
    with unshared():  # repeats of one prompt must not draft from each other
        start = time.process_time()
        run = specviz.generate(target, prompt, method="hybrid", max_new_tokens=128, **knobs)
        cpu = time.process_time() - start
    head_off = sum(any(s.source == "head" for s in c.skipped) for c in run.cycles)
    return {"cpu_s": round(cpu, 3), "cycles": len(run.cycles), "head_skipped": head_off, "ids": run.token_ids}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="0/1", help="i/n: this process runs every n-th question from i")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    i, n = map(int, args.part.split("/"))
    target = specviz.load("bundled")
    qs = questions()[i::n]
    for rep in range(args.repeats):
        for q in qs:
            prompt = q["turns"][0]
            ar = specviz.generate(target, prompt, method="ar", max_new_tokens=128).token_ids if rep == 0 else None
            for name, knobs in (VARIANTS.items() if rep % 2 == 0 else reversed(VARIANTS.items())):
                row = run_once(target, prompt, knobs)
                same = None if ar is None else row["ids"] == ar
                print(json.dumps({"rep": rep, "qid": q["question_id"], "category": q["category"],
                                  "variant": name, "cpu_s": row["cpu_s"], "cycles": row["cycles"],
                                  "head_skipped": row["head_skipped"],
                                  "same_as_ar": same}), flush=True)


if __name__ == "__main__":
    main()
