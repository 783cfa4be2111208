"""Rebuild every shipped asset that is recorded from a run, in one command, on the bundled model.

    python scripts/rebuild_assets.py                 # all of them, in the order below
    python scripts/rebuild_assets.py lessons advice  # only those named

- example: the run the Decode tab opens on (assets/example_trace.json, example_ar_trace.json);
- lessons: the Learn tab's recorded runs and the Side by side pairs' (assets/lessons/);
- results: what the Compare and Theory & hardware tabs open on (assets/recorded_results.json);
- advice: the profile the Advise tab opens on (assets/recorded_advice.json).

Each is a script under scripts/assets/ that can also run alone with its own options. The results
and the advice are timings: rebuild on a quiet machine. Run the tests afterwards (the recorded
files are checked by tests/test_replay.py, test_compare.py, test_advise_tab.py and others). The trained draft head
(assets/head/) is not rebuilt here: training it takes hours (docs/HEAD.md).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent / "assets"
STEPS = {
    "example": "make_example_trace.py",
    "lessons": "make_lesson_traces.py",
    "results": "record_results.py",
    "advice": "record_advice.py",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("only", nargs="*", help=f"assets to rebuild, of {', '.join(STEPS)} (default: all)")
    args = parser.parse_args()
    if unknown := [name for name in args.only if name not in STEPS]:
        parser.error(f"no asset named {', '.join(unknown)}: pick from {', '.join(STEPS)}")
    for name in args.only or list(STEPS):
        started = time.perf_counter()
        print(f"==> {name}: scripts/assets/{STEPS[name]}", flush=True)
        code = subprocess.call([sys.executable, str(HERE / STEPS[name])])
        if code:
            print(f"rebuild_assets: {name} failed (exit {code}); the assets before it were rebuilt", file=sys.stderr)
            return code
        print(f"==> {name}: done in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
