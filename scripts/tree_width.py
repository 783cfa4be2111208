"""Do wider or deeper LogitSpec trees pay on this CPU? (issue 25 §4: "deeper LogitSpec trees where v(n) is flat").

Times LogitSpec and the hybrid with their CPU defaults (K = 16: top_k 4, capacity 16) against wider
trees (top_k 8, capacity 32, K = 32) and against lone next-next candidates (lone_cands: a candidate
drafted even where retrieval does not back it), with our AR loop as the unit, on the first N public
prompts with the chat template; recording off, 64 new tokens, 2 rotated repeats, medians per prompt.
The planner still decides what of each tree is sent.

    .venv/bin/python scripts/tree_width.py 8
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz.decoding.engine import generate  # noqa: E402
from specviz.models.loader import load  # noqa: E402

VARIANTS = {  # name: (method, K, knobs)
    "ls": ("logitspec", 16, {}),
    "ls-wide": ("logitspec", 32, dict(top_k=8, capacity=32)),
    "ls-lone": ("logitspec", 16, dict(lone_cands=True)),
    "ls-wide-lone": ("logitspec", 32, dict(top_k=8, capacity=32, lone_cands=True)),
    "hy": ("hybrid", 16, {}),
    "hy-wide": ("hybrid", 32, dict(top_k=8, capacity=32)),
    "hy-lone": ("hybrid", 16, dict(lone_cands=True)),
    "ar": ("ar", 1, {}),
}


def main() -> None:
    target = load("bundled")
    prompts = json.loads((ROOT.parent / "shared/bench/prompts.json").read_text())[: int(sys.argv[1])]
    res: dict[str, dict[str, list]] = {}
    names = list(VARIANTS)
    for rep in range(2):
        for p in prompts:
            ids = target.encode(p["prompt"], True)
            for name in names[rep % len(names):] + names[: rep % len(names)]:
                method, k, knobs = VARIANTS[name]
                t0 = time.perf_counter()
                run = generate(target, list(ids), method=method, k=k, max_new_tokens=64, chat=False,
                               record=False, **knobs)
                dt = time.perf_counter() - t0
                res.setdefault(name, {}).setdefault(p["id"], []).append(
                    (dt / len(run.token_ids), run.metrics["mean_accepted_tokens"], tuple(run.token_ids)))
    ar = {pid: statistics.median(x[0] for x in v) for pid, v in res["ar"].items()}
    for name in names:
        d = res[name]
        sp = [ar[pid] / statistics.median(x[0] for x in v) for pid, v in d.items()]
        same = sum(v[0][2] == res["ar"][pid][0][2] for pid, v in d.items())
        print(f"{name:14s} × our AR geomean {math.exp(statistics.fmean(map(math.log, sp))):.2f} "
              f"[worst {min(sp):.2f}]; mean accepted tokens {statistics.fmean(v[0][1] for v in d.values()):.2f}; "
              f"identical to AR {same}/{len(d)}")


if __name__ == "__main__":
    main()
