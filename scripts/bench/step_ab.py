"""One student alone, old code against new in one sitting: a Step's seconds on two running apps.

    (cd old-checkout && GRADIO_SERVER_PORT=7861 python app.py) & GRADIO_SERVER_PORT=7862 python app.py &
    python scripts/bench/step_ab.py http://127.0.0.1:7861/ http://127.0.0.1:7862/ --rounds 6 --steps 6

Each round opens one new session on each app in turn (the order alternates from round to round)
and presses Step `--steps` times with no inputs, so each Step runs the page's first example prompt
at its default settings, as a student does. With the defaults a run needs more Steps than that to
finish, so no run of the test ends and feeds the new app's suffix store: every Step is a first
student's. Prints the median, the spread and the p95 of each app's Step seconds, per round and in
all, and the machine's 1-minute load average before each round (so a gap can be told from load).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
from pathlib import Path

LOAD_TEST = Path(__file__).resolve().parents[1] / "load_test.py"


def _load_test():
    spec = importlib.util.spec_from_file_location("load_test", LOAD_TEST)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", default=None, help="write every Step's seconds here (JSON)")
    args = ap.parse_args()
    lt = _load_test()
    seconds: dict[str, list[float]] = {"old": [], "new": []}
    rounds = []
    for r in range(args.rounds):
        order = ("old", "new") if r % 2 == 0 else ("new", "old")
        row = {"load": round(os.getloadavg()[0], 2)}
        for name in order:
            result = lt.run(getattr(args, name), 1, args.steps, {})
            if result["errors"]:
                raise SystemExit(f"{name}: {result['errors'][:3]}")
            row[name] = result["latencies"]
            seconds[name] += result["latencies"]
        rounds.append(row)
        print(f"round {r + 1} (load {row['load']}): old median {statistics.median(row['old']):.3f} s, "
              f"new median {statistics.median(row['new']):.3f} s", flush=True)
    for name, xs in seconds.items():
        print(f"{name}: {len(xs)} Steps, median {statistics.median(xs):.3f} s, "
              f"min {min(xs):.3f}, max {max(xs):.3f}, p95 {lt.percentile(xs, 95):.3f}")
    if args.out:
        Path(args.out).write_text(json.dumps({"rounds": rounds}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
