"""Merge the pieces of one bench run split across cores into one bench.json, summary.md and report.html.

A Spec-Bench run on 2 cores is fastest as two pieces, each pinned to one core with its own
`--questions` file (docs/BENCHMARKS.md "Spec-Bench / Measured here"). Every ratio is still taken
inside one piece; the merge only puts the questions into one table. Pieces measured with other
settings, on another machine, or with a question in two pieces are refused with one sentence.

    .venv/bin/python scripts/bench/merge_pieces.py out/a out/b --out out/all --label "Spec-Bench (public subset)"
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specviz.measure import bench_resume
from specviz.measure.bench_summary import summarise
from specviz.measure.bench_table import summary_markdown
from specviz.viz.bench_report import report_html


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pieces", nargs="+", help="the --out folders of the pieces")
    ap.add_argument("--out", required=True, help="folder for the merged bench.json, summary.md, report.html")
    ap.add_argument("--label", help="the suite's name in the table's first line")
    args = ap.parse_args(argv)
    try:
        reports = [bench_resume.read_previous(Path(p)) for p in args.pieces]
        merged = bench_resume.merge(reports, args.label)
    except bench_resume.ResumeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    merged["summary"] = summarise(merged["results"], merged["variants"])
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / bench_resume.REPORT).write_text(json.dumps(merged, indent=1), encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(merged), encoding="utf-8")
    (out / "report.html").write_text(report_html(merged), encoding="utf-8")
    print(summary_markdown(merged))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
