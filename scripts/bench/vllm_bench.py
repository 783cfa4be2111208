"""SpecViz over vLLM against vLLM plain and vLLM's own ngram speculation, in one run.

Starts two vLLM servers of the bundled model from .venv-vllm (one plain, one with
`--speculative-config` ngram at the same K), decodes the public prompts greedily with each
(specviz/measure/served_compare.py), prints a markdown table with the date and CPU, and stops both.

    python scripts/bench/vllm_bench.py [--prompts ../shared/bench/prompts.json] [--n 6] [--k 4] [--tokens 64]
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
from pathlib import Path

import specviz
from specviz.advise.advisor import machine
from specviz.loading.loader import local_source
from specviz.measure.served_compare import compare, table
from specviz.served import vllm_serve

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", default=str(ROOT.parent / "shared" / "bench" / "prompts.json"))
    ap.add_argument("--n", type=int, default=6, help="first N prompts of the file")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    prompts = [p["prompt"] for p in json.loads(Path(args.prompts).read_text())][: args.n]
    logs = Path(tempfile.mkdtemp(prefix="specviz-vllm-bench-"))
    ngram = json.dumps({"method": "ngram", "num_speculative_tokens": args.k, "prompt_lookup_max": 3,
                        "prompt_lookup_min": 1})
    plain = vllm_serve.start(local_source("bundled"), 8021, logs / "plain.log")
    try:
        spec = vllm_serve.start(local_source("bundled"), 8022, logs / "ngram.log",
                                extra=["--speculative-config", ngram])
        try:
            rows = compare(specviz.load(f"vllm:{plain.url}|bundled"), prompts, args.k, args.tokens, args.repeats,
                           spec=specviz.load(f"vllm:{spec.url}|bundled"), progress=lambda m: print(m, file=sys.stderr))
        finally:
            spec.stop()
    finally:
        plain.stop()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {machine()}, {len(prompts)} prompts, "
          f"greedy, {args.tokens} new tokens, K={args.k}, medians of {args.repeats}")
    print(table(rows))


if __name__ == "__main__":
    main()
