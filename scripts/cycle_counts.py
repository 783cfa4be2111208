"""Cycles, and per cycle the nodes offered / sent / accepted, for public prompts and methods, greedy,
on the bundled model: what the planner sent, without timing anything.

    .venv/bin/python scripts/cycle_counts.py rag-2,ext-1,sum-1 pld,hybrid
    .venv/bin/python scripts/cycle_counts.py chat-1 hybrid:head_width=1:head_beam=1

A method may carry knobs as `:name=value` (integers), as in `bench`'s variants.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.decoding.engine import generate  # noqa: E402
from specviz.models.loader import load  # noqa: E402

PROMPTS = ROOT.parent / "shared" / "bench" / "prompts.json"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    target = load("bundled")
    by_id = {p["id"]: p for p in json.loads(PROMPTS.read_text(encoding="utf-8"))}
    for name in argv[0].split(","):
        if name not in by_id:
            print(f"no public prompt {name!r}; there are {', '.join(by_id)}", file=sys.stderr)
            return 2
        ids = target.encode(by_id[name]["prompt"], chat=True)
        for variant in argv[1].split(","):
            method, *knobs = variant.split(":")
            kw = {k: int(v) for k, v in (kn.split("=", 1) for kn in knobs)}
            run = generate(target, ids, method=method, k=16, max_new_tokens=96, chat=False, record=False, **kw)
            print(f"{name} {variant}: {len(run.cycles)} cycles, {len(run.token_ids)} tokens")
            print("   offered/sent/accepted: " + " ".join(f"{c.offered}/{c.drafted}/{c.n_accepted}" for c in run.cycles))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
