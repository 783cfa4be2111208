"""Precompute the example run the app opens on, so its first paint needs no model.

    python scripts/make_example_trace.py            # writes assets/example_trace.json and example_ar_trace.json

Uses the bundled model (offline) and the app's default settings with the first example prompt
(assets/examples.json), so the controls on the page describe the run it shows. Run it again
after a change to the trace format or to a proposer.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specviz import Decoder, load  # noqa: E402
from specviz.ui.settings import RunSettings  # noqa: E402

ASSETS = ROOT / "assets"
DIGITS = 5  # probabilities and seconds keep 5 significant digits: plenty to read, a smaller file


def rounded(x):
    """Round floats throughout a JSON-like value."""
    if isinstance(x, float):
        return float(f"{x:.{DIGITS}g}")
    if isinstance(x, list):
        return [rounded(v) for v in x]
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return x


def write(run, path: Path) -> None:
    path.write_text(json.dumps(rounded(run.to_dict()), ensure_ascii=False), encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}: {len(run.cycles)} cycles, {len(run.token_ids)} tokens, "
          f"{run.metrics['tokens_per_s']:.1f} tokens/s, {path.stat().st_size / 1024:.0f} kB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--example", type=int, default=0, help="index into assets/examples.json")
    parser.add_argument("--max-new-tokens", type=int, default=40)
    args = parser.parse_args()
    prompt = json.loads((ASSETS / "examples.json").read_text(encoding="utf-8"))[args.example]["prompt"]
    settings = RunSettings(prompt=prompt, max_new_tokens=args.max_new_tokens)
    target = load("bundled", progress=lambda msg: print(msg, file=sys.stderr))
    spec = Decoder(target, prompt, **settings.decoder_kwargs()).run()
    ar = Decoder(target, prompt, method="ar", temperature=settings.temperature, top_p=settings.top_p,
                 seed=settings.seed, max_new_tokens=settings.max_new_tokens, chat=settings.chat).run()
    if spec.token_ids != ar.token_ids and settings.temperature == 0:
        sys.exit("greedy speculative and plain runs differ: the engine is broken, not writing the example")
    write(spec, ASSETS / "example_trace.json")
    write(ar, ASSETS / "example_ar_trace.json")


if __name__ == "__main__":
    main()
