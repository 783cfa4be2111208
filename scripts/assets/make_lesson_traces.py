"""Record the lessons' runs, so a lesson replays at once, before any model loads.

    python scripts/assets/make_lesson_traces.py              # every lesson → assets/lessons/<file>.json
    python scripts/assets/make_lesson_traces.py retrieval    # only the lessons named
    python scripts/assets/make_lesson_traces.py pairs        # only the runs the Side by side pairs add
    python scripts/assets/make_lesson_traces.py pair-class-suffix pair-class-pld   # only the sides named
    python scripts/assets/make_lesson_traces.py --repeats 3  # keep the fastest of 3 runs: steadier timings

Each file is an exported trace (specviz/decoding/tracefile.py): the run, its measured AR baseline and
meta (the prompt, the lesson, the cycle to look at). Uses the bundled model, offline, and Gemma 3 270M for
the pairs of two families (bash scripts/install.sh models). Run it
again after a change to the trace format, to a proposer or to a lesson's settings.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

from specviz import Decoder, load
from specviz.decoding import tracefile
from specviz.proposers import suffix
from specviz.ui.decode.lessons import LESSONS
from specviz.ui.shared.recordings import LESSON_DIR
from specviz.ui.side_by_side.pairs import CLASS_BEFORE, PAIRS, RECORDED_SIDES

ROOT = Path(__file__).resolve().parents[2]

DIGITS = 5  # significant digits kept in probabilities and seconds: readable, and a third of the size


def rounded(x):
    """The same JSON value with every float cut to DIGITS significant digits."""
    if isinstance(x, float):
        return float(f"{x:.{DIGITS}g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def machine(target) -> str:
    """Where the timings come from, in words: 'x86_64, 2 CPU cores (1 torch thread), cpu, torch.float32'."""
    return (f"{platform.machine()}, {os.cpu_count()} CPU cores ({torch.get_num_threads()} torch threads), "
            f"{target.device}, {target.dtype}")


def rescue_cycle(run) -> int | None:
    """The first cycle whose accepted path starts on a next-next candidate branch of LogitSpec."""
    for cycle in run.cycles:
        if cycle.accepted and cycle.nodes[cycle.accepted[0]].source.startswith("cand"):
            return cycle.index
    return None


def seam_cycle(run) -> int | None:
    """A cross-family draft's first cycle where the two tokenizers split its draft differently (else its
    first cycle with a seam): where the seam view has something to show."""
    seams = [c for c in run.cycles if c.seam is not None and c.nodes]
    split = next((c for c in seams if c.seam.draft != c.seam.target), None)
    return (split or seams[0]).index if seams else None


def fastest(runs: list):
    """The quickest of identical runs (seeded, so the same tokens): a busy machine slows some
    runs down, never speeds one up."""
    return min(runs, key=lambda run: run.metrics["decode_s"])


_MODELS: dict = {}


def model(spec: str):
    """A model by its spec, loaded once for the whole sitting."""
    if spec not in _MODELS:
        _MODELS[spec] = load(spec, progress=lambda msg: print(msg, file=sys.stderr))
    return _MODELS[spec]


def record(settings, repeats: int = 1):
    """The speculative run and the plain run of the same settings (each side's own target, and its
    draft, of another family or not), measured in turns so that both see the same spells of
    background load; the fastest of each is kept."""
    target = model(settings.target)
    draft = model(settings.draft_spec) if settings.draft_spec else None
    specs, ars = [], []
    for _ in range(max(1, repeats)):
        specs.append(Decoder(target, settings.prompt, settings.decode(), draft).run())
        ars.append(Decoder(target, settings.prompt, settings.decode(), method="ar").run())
    spec, ar = fastest(specs), fastest(ars)
    if settings.temperature == 0 and spec.token_ids != ar.token_ids:
        sys.exit(f"greedy {settings.method} and plain runs differ: the engine is broken, not writing lessons")
    return spec, ar


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", help="lesson keys (default: all)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="keep the fastest of this many runs of each (timings on a shared machine)")
    parser.add_argument("--threads", type=int, default=0,
                        help="torch threads (0: torch's default); 1 steadies timings on a busy machine")
    args = parser.parse_args()
    jobs = []  # (file, settings, meta)
    for lesson in LESSONS:
        if not args.lessons or lesson.key in args.lessons:
            jobs += [(v.file, v.settings, dict(lesson=lesson.key, variant=v.label)) for v in lesson.variants]
    for file, settings in RECORDED_SIDES.items():
        if not args.lessons or "pairs" in args.lessons or file in args.lessons:
            used = [p.key for p in PAIRS if file in (p.a, p.b)]
            jobs.append((file, settings, dict(pairs=used, variant=settings.describe())))
    if args.threads:
        torch.set_num_threads(args.threads)
    LESSON_DIR.mkdir(parents=True, exist_ok=True)
    for file, settings, about in jobs:
        target = model(settings.target)
        if settings.proposer == "suffix":  # the class before this student: their outputs feed its drafts
            suffix.EARLIER.clear()
            for _ in range(CLASS_BEFORE):
                Decoder(target, settings.prompt, settings.decode()).run()
        spec, ar = record(settings, args.repeats)
        focus = rescue_cycle(spec) if about.get("lesson") == "logitspec-rescue" and spec.method == "logitspec" else None
        if focus is None and any(c.seam is not None for c in spec.cycles):
            focus = seam_cycle(spec)
        meta = dict(about, prompt=settings.prompt, focus_cycle=focus, recorded_at=time.strftime("%Y-%m-%d"),
                    machine=machine(target), device=str(target.device), dtype=str(target.dtype),
                    repeats=args.repeats)
        doc = rounded(json.loads(tracefile.dumps(spec, ar, meta)))
        path = LESSON_DIR / f"{file}.json"
        path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        m = spec.metrics
        print(f"{path.relative_to(ROOT)}: {len(spec.cycles)} cycles, α = {m['acceptance_rate']:.2f}, "
              f"{m['tokens_per_s']:.1f} vs {ar.metrics['tokens_per_s']:.1f} tokens/s (AR), "
              f"focus {focus}, {path.stat().st_size / 1024:.0f} kB")

if __name__ == "__main__":
    main()
