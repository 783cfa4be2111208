"""A class's Steps in one process, with the draft head's steps shared across runs or not.

N runs of the app's default method (hybrid: retrieval + the trained head) on the bundled model,
verify passes shared as in the app (batch_verify). Each round, every run takes one cycle at once,
each in its own thread; the round's wall time is what a student waits for the model work of a
Step under load. The two modes alternate round by round in one process, so the host's drift hits
both alike: "shared" lets the head's steps of runs drafting at the same moment go through the head
as one batch (ProposeContext.together), "apart" runs each run's head steps alone.

    python scripts/shared_drafts_bench.py [--runs 30] [--rounds 6] [--tokens 96]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import specviz  # noqa: E402
from specviz.decoding.engine import Decoder  # noqa: E402
from specviz.proposers.head import HeadProposer  # noqa: E402

PROMPTS = ["Explain in three sentences why the sky is blue.", "Write a haiku about autumn leaves.",
           "List three uses of a paper clip.", "What is the capital of France? Answer briefly.",
           "Describe a cat to someone who has never seen one."]


def round_s(decoders: list[Decoder]) -> float:
    threads = [threading.Thread(target=d.step) for d in decoders]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=6, help="rounds per mode, alternated")
    ap.add_argument("--tokens", type=int, default=96)
    args = ap.parse_args()
    target = specviz.load("bundled")
    print(f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    times = {"shared": [], "apart": []}
    for r in range(args.rounds):
        for mode in ("shared", "apart") if r % 2 == 0 else ("apart", "shared"):
            decoders = [Decoder(target, PROMPTS[i % len(PROMPTS)], method="hybrid", k=16, batch_verify=True,
                                share_prefill=True, max_new_tokens=args.tokens, record=True) for i in range(args.runs)]
            for d in decoders:
                d.together = mode == "shared"
            round_s(decoders)  # the prefills, shared per prompt, and the first cycle
            times[mode].append(statistics.median(round_s(decoders) for _ in range(3)))
    rounds = HeadProposer.build(target).steps.rounds
    for mode, ts in times.items():
        print(f"{mode}: median round {statistics.median(ts):.3f} s  (rounds: {', '.join(f'{t:.2f}' for t in ts)})")
    print(f"head rounds: {rounds.passes}, shared {rounds.shared_passes}, most rows in one {rounds.most_shared}")


if __name__ == "__main__":
    main()
