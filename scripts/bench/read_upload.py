"""How long reading an upload takes: the largest trace the caps allow, read as the Decode tab's
"Replay a trace" reads it (tracefile.loads on the file's bytes), median of --repeats.

The trace is built to the caps: MAX_RUN_NODES draft nodes (512 cycles of a 64-deep chain), every
node with p and q top lists, as many entries as keep the file under MAX_BYTES (16 MB), a 512-token
run; it passes every tree rule. It times the specviz it imports: to time another checkout's reader,
put that checkout first on PYTHONPATH.

    .venv/bin/python scripts/bench/read_upload.py --write /tmp/largest_trace.json
    PYTHONPATH=. .venv/bin/python scripts/bench/read_upload.py --file /tmp/largest_trace.json
    cd /tmp/before && PYTHONPATH=. /work/main/.venv/bin/python /path/to/read_upload.py --file /tmp/largest_trace.json

It prints the reader it timed, the file's size and the median, min and max seconds.
"""
from __future__ import annotations

import argparse
import statistics
import time

from specviz.decoding import tracefile
from specviz.decoding.trace import Alt, CycleTrace, NodeTrace, RunTrace

CYCLES, DEPTH = 512, 64  # 32 768 nodes: MAX_RUN_NODES


def build(top: int, pad: int = 0) -> bytes:
    """The trace with `top` entries in every node's p and q top lists and a prompt of `pad`
    characters in its meta, as Export writes it."""
    alts = [Alt(1000 + j, f"tok{j}", 0.5 / (j + 1)) for j in range(top)]
    cycles, total = [], 0
    for i in range(CYCLES):
        nodes = [NodeTrace(d, 2000 + d, f"w{d}", d - 1, d + 1, q=0.5, p=0.6, accept_prob=1.0, r=0.3,
                           status="accepted" if d == 0 else "not_reached", p_top=list(alts), q_top=list(alts),
                           source="lookup", branch=0, rank=None, ngram=3) for d in range(DEPTH)]
        total += 1
        cycles.append(CycleTrace(i, DEPTH, nodes, accepted=[0], rejected=1, residual_top=list(alts),
                                 new_token=Alt(7, "x", 0.9), new_kind="resampled", committed=[2000, 7],
                                 committed_text=["w0", "x"], origins=["draft", "resampled"],
                                 cache_before={"target": 100}, cache_after={"target": 102}, draft_s=0.001,
                                 verify_s=0.01, other_s=0.0005, elapsed_s=0.02 * (i + 1), total_tokens=total))
    run = RunTrace("pld", {"target": "bundled", "method": "pld", "k": DEPTH, "temperature": 1.0, "top_p": 1.0,
                           "seed": 0, "max_new_tokens": CYCLES},
                   prompt_ids=list(range(1, 200)), token_ids=[7] * CYCLES, text="x" * CYCLES,
                   token_texts=["x"] * CYCLES, origins=["resampled"] * CYCLES, cycle_of=list(range(CYCLES)),
                   cycles=cycles, metrics={"new_tokens": CYCLES, "tokens_per_s": 50.0}, prefill_s=0.1)
    return tracefile.dumps(run, None, {"prompt": "p" * pad}).encode()


def largest() -> bytes:
    """The largest trace of this shape under the byte cap: the most top-list entries that fit, then
    a meta prompt (at most MAX_TEXT characters) to fill what is left."""
    top = 1
    while len(build(top + 1)) <= tracefile.MAX_BYTES:
        top += 1
    room = tracefile.MAX_BYTES - len(build(top, 1)) + 1
    return build(top, min(room, tracefile.MAX_TEXT))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--file", help="read this trace instead of building one (see --write)")
    ap.add_argument("--write", help="build the trace, write it here, and stop")
    args = ap.parse_args()
    if args.write:
        with open(args.write, "wb") as f:
            f.write(largest())
        return
    text = open(args.file, "rb").read() if args.file else largest()
    loaded = tracefile.loads(text)  # once untimed: imports, caches; and it must be accepted
    assert sum(len(c.nodes) for c in loaded.run.cycles) == CYCLES * DEPTH
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        tracefile.loads(text)
        times.append(time.perf_counter() - start)
    print(f"{tracefile.__file__}: file {len(text) / 1e6:.2f} MB ({len(text)} bytes), {args.repeats} reads: median "
          f"{statistics.median(times):.3f} s, min {min(times):.3f} s, max {max(times):.3f} s")


if __name__ == "__main__":
    main()
