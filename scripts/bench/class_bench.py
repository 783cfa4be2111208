"""A class on one example prompt: each student's tokens per cycle against arrival order.

    python scripts/bench/class_bench.py [--students 30] [--methods suffix,hybrid] [--out docs/bench/DATE-class]

Thirty students decode the page's first example prompt (assets/examples.json), greedy, on the
bundled model, one after another in one process, as a class on one Space would: each run feeds
suffix decoding's store when it ends (proposers/suffix.py), so later students draft from earlier
students' outputs. Each method gets its own fresh store. Writes class.json and class.png (tokens per
cycle by arrival, one line per method, drawn with Pillow) and prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import specviz
from specviz.proposers import REGISTRY, joiners, spec, suffix

ROOT = Path(__file__).resolve().parents[2]
COLOURS = [(0, 114, 178), (213, 94, 0), (0, 158, 115)]  # Okabe–Ito, as the page's figures


def per_cycle(run) -> float:
    """Tokens committed per cycle (the prefill's token left out): the issue's measure."""
    return sum(len(c.committed) for c in run.cycles) / max(len(run.cycles), 1)


def students(target, prompt: str, method: str, n: int, max_new: int) -> list[dict]:
    suffix.EARLIER.clear()  # a fresh class
    rows, first = [], None
    for i in range(n):
        run = specviz.generate(target, prompt, method=method, max_new_tokens=max_new, record=False)
        first = first or run.token_ids
        rows.append({"student": i + 1, "tokens_per_cycle": per_cycle(run), "cycles": len(run.cycles),
                     "tokens_per_s": run.metrics["tokens_per_s"], "identical": run.token_ids == first,
                     "load": os.getloadavg()[0]})
    return rows


def draw(results: dict, path: Path, bar: float = 4.0) -> None:
    """A line per method: tokens per cycle by arrival order, with the issue's bar of 4 dashed."""
    from PIL import Image, ImageDraw

    w, h, left, bottom, top, right = 720, 420, 60, 50, 30, 150
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    n = max(len(rows) for rows in results.values())
    y_max = max(max(r["tokens_per_cycle"] for r in rows) for rows in results.values()) * 1.1
    x = lambda i: left + (w - left - right) * (i - 1) / max(n - 1, 1)  # noqa: E731
    y = lambda v: h - bottom - (h - top - bottom) * v / y_max  # noqa: E731
    d.line([(left, top), (left, h - bottom), (w - right, h - bottom)], fill="black")
    for v in range(0, int(y_max) + 1, 2):
        d.text((left - 25, y(v) - 6), str(v), fill="black")
        d.line([(left - 4, y(v)), (left, y(v))], fill="black")
    for i in (1, 10, 20, 30):
        if i <= n:
            d.text((x(i) - 6, h - bottom + 6), str(i), fill="black")
    for px in range(left, w - right, 8):
        d.line([(px, y(bar)), (px + 4, y(bar))], fill=(150, 150, 150))
    d.text((w - right + 8, y(bar) - 6), f"bar: {bar:g}", fill=(100, 100, 100))
    for k, (method, rows) in enumerate(results.items()):
        pts = [(x(r["student"]), y(r["tokens_per_cycle"])) for r in rows]
        d.line(pts, fill=COLOURS[k % 3], width=2)
        for px, py in pts:
            d.ellipse([px - 3, py - 3, px + 3, py + 3], fill=COLOURS[k % 3])
        d.text((w - right + 8, top + 16 * k), method, fill=COLOURS[k % 3])
    d.text((left, 8), "Tokens per cycle by student (arrival order), one example prompt, greedy", fill="black")
    d.text(((w - right) // 2 - 40, h - 22), "student (arrival order)", fill="black")
    img.save(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=30)
    # the methods that learn across runs (suffix: a class teaches it), then the hybrid that joins them
    learners = [m for m in REGISTRY if spec(m).learns]
    ap.add_argument("--methods", default=",".join(dict.fromkeys([*learners, *joiners()])))
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prompt = json.loads((ROOT / "assets" / "examples.json").read_text())[0]["prompt"]
    target = specviz.load("bundled")
    specviz.generate(target, "Warm up.", method="ar", max_new_tokens=8)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results = {m: students(target, prompt, m, args.students, args.max_new_tokens) for m in args.methods.split(",")}
    (out / "class.json").write_text(json.dumps({"started": started, "results": results}, indent=1))
    draw(results, out / "class.png")
    print(f"started {started}\n\n| method | student 1 | 2 | 10 | 30 | min from 10th on | median from 10th on "
          "| identical | load (1 min) |\n|---|---|---|---|---|---|---|---|---|")
    for method, rows in results.items():
        tpc = [r["tokens_per_cycle"] for r in rows]
        later = tpc[9:]
        loads = [r["load"] for r in rows]
        print(f"| {method} | {tpc[0]:.2f} | {tpc[1]:.2f} | {tpc[min(9, len(tpc) - 1)]:.2f} | {tpc[-1]:.2f} | "
              f"{min(later, default=0):.2f} | {statistics.median(later) if later else 0:.2f} | "
              f"{sum(r['identical'] for r in rows)}/{len(rows)} | {min(loads):.2f}–{max(loads):.2f} |")


if __name__ == "__main__":
    main()
