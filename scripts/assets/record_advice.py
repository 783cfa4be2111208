"""Record the advisor's survey the Advise tab opens on, so it shows advice before anyone measures.

    python scripts/assets/record_advice.py            # writes assets/recorded_advice.json

Runs `specviz advise` on the bundled model (offline) with the candidates and the six public
prompts that scripts/bench/advise_bench.py sweeps (one per kind), measured once at K max,
checked on the two best, with the batched passes timed for the prediction with several runs at once. The survey says
when and on what machine it was measured, and the tab says so. Record it on a quiet machine: the
advice rests on timings. scripts/bench/advise_bench.py checks such advice against a sweep.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from specviz import cli
from specviz.advise_cli import default_candidates

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "assets" / "recorded_advice.json"
PROMPTS = ROOT.parent / "shared" / "bench" / "prompts.json"
# the advisor's default candidates (the registry's), and layer skip as the page offers it and with the
# bundled model's first and last six layers kept
CANDIDATES = default_candidates() + ",layerskip,layerskip:0-5+24-29"
IDS = ("sum-1", "code-1", "rag-1", "ext-1", "math-1", "chat-1")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--k-max", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--out", type=Path, default=RECORDED)
    args = parser.parse_args()
    items = {x["id"]: x["prompt"] for x in json.loads(PROMPTS.read_text(encoding="utf-8"))}
    with tempfile.TemporaryDirectory(prefix="specviz-advice-") as tmp:
        prompts = Path(tmp) / "prompts.json"
        prompts.write_text(json.dumps([items[i] for i in IDS]), encoding="utf-8")
        code = cli.main(["advise", "--target", "bundled", "--candidates", CANDIDATES, "--prompts", str(prompts),
                         "--k-max", str(args.k_max), "--max-new-tokens", str(args.max_new_tokens),
                         "--out", tmp])
        if code:
            return code
        shutil.copy(Path(tmp) / "survey.json", args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
