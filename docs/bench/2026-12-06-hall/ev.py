"""Summarise timed_app.py's events for the last 100 Steps: each part's count, summed wall time,
p50 and p95, when the first began and the last ended (seconds from the first Step's start), the
thread CPU it used, and the whole process's CPU over the Steps' span.

    python ev.py events.json
"""
import collections
import json
import sys

ev = json.load(open(sys.argv[1]))
steps = sorted((e for e in ev if e[0] == "advance"), key=lambda e: e[2])[-100:]
t0 = steps[0][2]
parts = collections.defaultdict(list)
for label, _thread, start, end, *rest in ev:
    if start >= t0 - 1:
        parts[label].append((start - t0, end - t0, end - start, rest[0] if rest else 0.0))


def q(xs: list, p: float) -> float:
    return xs[int(p * (len(xs) - 1))]


print(f"{'part':14s} {'n':>4s} {'sum s':>7s} {'p50 ms':>8s} {'p95 ms':>8s} {'first start':>11s} "
      f"{'last end':>9s} {'cpu s':>6s}")
for label, xs in sorted(parts.items(), key=lambda kv: -sum(x[2] for x in kv[1])):
    d = sorted(x[2] for x in xs)
    print(f"{label:14s} {len(xs):4d} {sum(d):7.2f} {1000 * q(d, .5):8.1f} {1000 * q(d, .95):8.1f} "
          f"{min(x[0] for x in xs):11.2f} {max(x[1] for x in xs):9.2f} {sum(x[3] for x in xs):6.2f}")
timed = [e for e in steps if len(e) > 6]
if timed:
    first, last = timed[0], max(timed, key=lambda e: e[3])
    print(f"process CPU from the first Step's start to the last one's end: {last[6] - first[5]:.2f} s "
          f"over {last[3] - first[2]:.2f} s")
starts = sorted(e[2] - t0 for e in steps)
print(f"handlers began: p50 {q(starts, .5):.2f} s, p95 {q(starts, .95):.2f} s after the first")
