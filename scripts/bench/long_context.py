"""Long contexts: what a pass costs at 100 to 2,000 tokens of context, our forward beside the modules'.

    .venv/bin/python scripts/bench/long_context.py [--contexts 100,500,1000,2000] [--sizes 1,2,4,8,16,32]
                                                  [--repeats 5] [--json out.json]

On the bundled model (loaded as the app loads it, with the CPU speed-ups) and for each context length L, on one
prefilled L-token KV cache, it times:
- the one-token pass (ms) and v(n), a chain pass over n tokens in one-token passes (pricing/costs.py's unit);
- a verify pass over a 33-row draft tree (passes/fastcheck.py's TREES: [root] + 32 nodes), its 4-D mask built
  as the engine builds it (DraftTree.model_mask) and the building counted, since a cycle pays for it; the
  mask's building alone is a column of its own;
- keeping a 5-node accepted path after that tree pass (kvcache.keep_path, as a tree cycle rolls back);
- the prefill of L tokens, logits for its last row only (as the engine and HF `generate` ask).
"ours" is passes/fastpath.py; "modules" is the transformers model's own forward, with the speed-ups' packed
linears and attention, which is what HF `generate`, the benchmarks' anchor, runs. Every kind of pass,
context and variant is timed once per repeat, interleaved, and the table gives medians over repeats with
their spread (min–max); v(n) is the median of each repeat's ratio of the n-token pass to its one-token pass
of the same repeat and context. The load average is printed before and after: on a machine shared with
other work, passes only ever get slower, and the spread says by how much.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from datetime import datetime, timezone

import torch

import specviz
from specviz.drafting.tree import DraftTree
from specviz.passes import fastcheck, fastpath
from specviz.passes.kvcache import cache_len, keep_path, new_cache, rollback
from specviz.pricing.timing import filler_ids

CONTEXTS = (100, 500, 1000, 2000)
SIZES = (1, 2, 4, 8, 16, 32)
TREE = DraftTree([0] * len(fastcheck.TREES[1]), list(fastcheck.TREES[1]))  # 32 nodes: ids are set per pass
PATH = 5  # accepted nodes kept after the tree pass: a summary's cycles accept 2 to 3 tokens a cycle and more
VARIANTS = ("ours", "modules")
CLOCK = time.perf_counter  # --clock cpu: this thread's CPU seconds (time.thread_time), with --threads 1


def machine() -> dict:
    """Date, CPU, its vector flags, torch and threads: what every timing here belongs to."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        lscpu = ""
    fields = dict(line.split(":", 1) for line in lscpu.splitlines() if ":" in line)
    flags = fields.get("Flags", "").split()
    wanted = [f for f in flags if f == "avx2" or f.startswith(("avx512", "amx"))]
    return {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": fields.get("Model name", platform.processor() or platform.machine()).strip(),
            "cores": os.cpu_count(), "flags": wanted, "torch": torch.__version__,
            "threads": torch.get_num_threads()}


def run_pass(model, variant: str, ids: torch.Tensor, cache, position_ids=None, mask=None, keep: int = 0) -> None:
    """One pass over `ids` appended to `cache`, by our forward or by the modules."""
    if variant == "ours":
        if fastpath.forward(model.model, ids, cache, position_ids, mask, keep) is None:
            raise SystemExit("our fast forward does not apply to this model here (see the WARNING above)")
        return
    extra = {"logits_to_keep": keep} if keep else {}
    model.model(input_ids=ids, past_key_values=cache, use_cache=True, position_ids=position_ids,
                attention_mask=mask, **extra)


@torch.inference_mode()
def time_chain(model, variant: str, cache, n: int) -> float:
    """Seconds of a chain pass over n tokens on `cache`, rolled back after."""
    past = cache_len(cache)
    ids = filler_ids(model, 1, n, offset=past)
    t0 = CLOCK()
    run_pass(model, variant, ids, cache)
    spent = CLOCK() - t0
    rollback(cache, past)
    return spent


@torch.inference_mode()
def time_tree(model, variant: str, cache) -> tuple[float, float, float]:
    """(mask, mask + pass, keep_path) seconds of a verify pass over TREE, as a tree cycle makes it."""
    past = cache_len(cache)
    ids = filler_ids(model, 1, len(TREE) + 1, offset=past)
    t0 = CLOCK()
    mask = TREE.model_mask(cache, model.model.config, model.dtype, model.device)
    position_ids = TREE.position_ids(past, model.device)
    t1 = CLOCK()
    run_pass(model, variant, ids, cache, position_ids, mask)
    t2 = CLOCK()
    keep_path(cache, past, [past + 1 + a for a in TREE.ancestors(PATH - 1)])
    t3 = CLOCK()
    rollback(cache, past)
    return t1 - t0, t2 - t0, t3 - t2


@torch.inference_mode()
def time_prefill(model, variant: str, length: int) -> float:
    """Seconds of an L-token prefill on an empty cache, logits for the last row only."""
    ids = filler_ids(model, 1, length)
    cache = new_cache()
    t0 = CLOCK()
    run_pass(model, variant, ids, cache, keep=1)
    return CLOCK() - t0


def one_repeat(model, caches: dict[int, object], sizes, times: dict, prefill: bool) -> None:
    """Every kind of pass at every context, the variants alternating pass by pass (their order flips
    each repeat, so neither always runs right after the other's warm cache lines)."""
    flip = len(next(iter(times.values()), [])) % 2 == 1
    order = VARIANTS[::-1] if flip else VARIANTS
    for length, cache in caches.items():
        for n in sizes:
            for variant in order:
                times.setdefault((variant, length, f"chain {n}"), []).append(time_chain(model, variant, cache, n))
        for variant in order:
            mask_s, tree_s, keep_s = time_tree(model, variant, cache)
            times.setdefault((variant, length, "mask"), []).append(mask_s)
            times.setdefault((variant, length, "tree"), []).append(tree_s)
            times.setdefault((variant, length, "keep"), []).append(keep_s)
        if prefill:
            for variant in order:
                times.setdefault((variant, length, "prefill"), []).append(time_prefill(model, variant, length))


def measure(model, contexts, sizes, repeats: int, prefill: bool = True) -> dict:
    """{(variant, context, kind): [seconds per repeat]} after one warm-up repeat that is not kept."""
    caches = {}
    with torch.inference_mode():
        for length in contexts:
            caches[length] = new_cache()
            run_pass(model, "ours", filler_ids(model, 1, length), caches[length], keep=1)
    one_repeat(model, caches, sizes, {}, prefill=False)  # the first pass of each shape allocates
    times: dict = {}
    for _ in range(repeats):
        one_repeat(model, caches, sizes, times, prefill)
    return times


def _ms(xs: list[float]) -> str:
    """Median [min–max] in milliseconds."""
    return f"{statistics.median(xs) * 1e3:.1f} [{min(xs) * 1e3:.1f}–{max(xs) * 1e3:.1f}]"


def _ratio(num: list[float], den: list[float]) -> str:
    """Median [min–max] of the per-repeat ratios num/den (both timed in the same repeat)."""
    ratios = [a / b for a, b in zip(num, den)]
    return f"{statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}]"


def table(times: dict, contexts, sizes) -> list[str]:
    """Markdown: one row per variant and context."""
    chains = [n for n in sizes if n > 1]
    head = (["variant", "context", "one-token pass, ms"] + [f"v({n})" for n in chains]
            + [f"tree pass ({len(TREE) + 1} rows, mask included), ms", "v(tree)", "its mask, ms",
               f"keep a {PATH}-node path, ms"])
    if any(kind == "prefill" for _, _, kind in times):
        head.append("prefill, ms")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for variant in VARIANTS:
        for length in contexts:
            t = {kind: xs for (v, n, kind), xs in times.items() if v == variant and n == length}
            one = t["chain 1"]
            row = [variant, str(length), _ms(one)] + [_ratio(t[f"chain {n}"], one) for n in chains]
            row += [_ms(t["tree"]), _ratio(t["tree"], one), _ms(t["mask"]), _ms(t["keep"])]
            if "prefill" in t:
                row.append(_ms(t["prefill"]))
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--contexts", default=",".join(map(str, CONTEXTS)), help="context lengths, comma-separated")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="chain pass sizes n, comma-separated")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats after one warm-up (medians over them)")
    ap.add_argument("--no-prefill", action="store_true", help="leave the prefill column out (the slowest part)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's own); on a crowded machine 1 "
                    "keeps a pass from waiting at every op for its second thread to be scheduled")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall: elapsed time; cpu: the CPU time the pass's one thread got, which other work on "
                         "a shared machine delays but does not add to (needs --threads 1)")
    ap.add_argument("--json", help="also write the raw seconds here")
    return ap.parse_args()


def main() -> None:
    global CLOCK
    args = _args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "cpu":
        if torch.get_num_threads() != 1:
            raise SystemExit("--clock cpu counts this thread's CPU time only: give --threads 1 with it")
        CLOCK = time.thread_time
    contexts = [int(x) for x in args.contexts.split(",")]
    sizes = sorted({1} | {int(x) for x in args.sizes.split(",")})
    info = machine()
    model = specviz.load("bundled")
    info["load_before"] = os.getloadavg()
    t0 = time.perf_counter()
    times = measure(model, contexts, sizes, args.repeats, prefill=not args.no_prefill)
    info["load_after"], info["seconds"] = os.getloadavg(), round(time.perf_counter() - t0, 1)
    info["threads"], info["clock"] = torch.get_num_threads(), args.clock
    print(f"{info['date']}; {info['cpu']}, {info['cores']} cores ({' '.join(info['flags']) or 'no avx2'}); "
          f"torch {info['torch']}, {info['threads']} threads, {args.clock} clock; bundled model; "
          f"{args.repeats} repeats, medians [min–max]; load average (1, 5, 15 min) {_load(info['load_before'])} "
          f"before, {_load(info['load_after'])} after ({info['seconds']} s)")
    print("\n".join(table(times, contexts, sizes)))
    if args.json:
        raw = [{"variant": v, "context": n, "kind": k, "seconds": xs} for (v, n, k), xs in times.items()]
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": info, "times": raw}, f, indent=1)


def _load(avg) -> str:
    return "/".join(f"{x:.1f}" for x in avg)


if __name__ == "__main__":
    main()
