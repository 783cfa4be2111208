"""A class at once: N gradio_client sessions press Step S times together against a running app.

    python app.py &                                    # or any SpecViz URL
    python scripts/load_test.py http://127.0.0.1:7860/ --sessions 30 --steps 2 [--pid PID]
    python scripts/load_test.py http://127.0.0.1:7860/ --view pair    # Side by side's Step both

Each session is its own Gradio session (its own run), and all of them start each round of Steps
at the same moment. Prints the errors, p50/p95/max seconds per Step, Steps per second over the
whole test, the tokens the Steps committed per second (read from each session's metrics panel: a
Step is one cycle, and how many tokens a cycle commits depends on what the planner sent, which
changes with the load, so Steps per second alone is not the hall's throughput), and, with --pid
(the app's process id; found by port when left out and psutil can), the app's resident memory
right afterwards and 10 s later (freed memory given back).

What a class presses: by default every session sends no input at all, so each Step runs on what the
page opens on, its first example prompt and its default settings (the API's defaults are the page's
components' values). --prompt and --max-new-tokens override those two; the report names the prompt.
"""
from __future__ import annotations

import argparse
import re
import ssl
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PAGE = "the page's own (its first example prompt, default settings)"


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile (0–100) by nearest rank; nan for no data."""
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q / 100 * len(xs) + 0.5) - 1))]


# the metrics panel's row (specviz/viz/metrics.py): "new tokens", then the speculative run's count
_NEW_TOKENS = re.compile(r">new tokens</td><td[^>]*>(\d+)<")


def new_tokens(outputs) -> int | None:
    """The new tokens of the run(s) a Step's outputs show: the speculative count of every metrics
    panel among them (Side by side has one per column), summed; None when no panel shows one."""
    counts = [int(m.group(1)) for x in outputs if isinstance(x, str) for m in _NEW_TOKENS.finditer(x)]
    return sum(counts) if counts else None


def committed(before: int, now: int) -> int:
    """Tokens a Step committed, from its session's new tokens before and after it: fewer after than
    before means the session's run started again (a new run's tokens are all new)."""
    return now - before if now >= before else now


def app_pid(url: str) -> int | None:
    """The process listening on the URL's port, if psutil can see it."""
    try:
        from urllib.parse import urlparse

        import psutil

        port = urlparse(url).port
        for conn in psutil.net_connections(kind="tcp"):
            if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
                return conn.pid
    except Exception:  # noqa: BLE001 -- memory is a nicety; the test goes on without it
        return None
    return None


def rss_gb(pid: int | None) -> float | None:
    if pid is None:
        return None
    try:
        import psutil

        proc = psutil.Process(pid)
        return (proc.memory_info().rss + sum(c.memory_info().rss for c in proc.children(recursive=True))) / 1e9
    except Exception:  # noqa: BLE001
        return None


VIEWS = {"decode": "/step", "pair": "/pair_step"}  # --view → the event a session presses


def run(url: str, sessions: int, steps: int, inputs: dict, api_name: str = "/step") -> dict:
    """Every session presses Step `steps` times, each round started together; returns the tallies."""
    from gradio_client import Client

    # gradio_client opens a new httpx client for every request, and each builds an SSL context
    # (CA certificates read and parsed: ~0.1 s of CPU) even for plain http. Handing every session
    # one ready context keeps this script from taking a core from the app on the same machine.
    context = ssl.create_default_context()
    clients = [Client(url, verbose=False, ssl_verify=context) for _ in range(sessions)]
    latencies: list[float] = []
    errors: list[str] = []
    shown = [0] * sessions  # each session's new tokens after its latest Step
    tokens = [0]  # committed by the test's Steps, all sessions together
    lock = threading.Lock()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        barrier = threading.Barrier(sessions)

        def press(i: int, client) -> None:
            barrier.wait()
            t0 = time.perf_counter()
            count = None
            try:
                out = client.predict(api_name=api_name, **inputs)
                count = new_tokens(out)
                # any status box in error (Side by side has one per column, and its lossless line)
                errs = [str(x) for x in out if isinstance(x, str) and "sv-status-error" in x]
                failed, status = bool(errs), (errs[0] if errs else str(out[0]))
            except Exception as e:  # noqa: BLE001 -- "Queue is full" and the like are what is counted
                failed, status = True, f"{type(e).__name__}: {e}"
            with lock:
                latencies.append(time.perf_counter() - t0)
                if count is not None:
                    tokens[0] += committed(shown[i], count)
                    shown[i] = count
                if failed:
                    errors.append(status[:200])
        threads = [threading.Thread(target=press, args=(i, c)) for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    wall = time.perf_counter() - start
    return {"steps": len(latencies), "errors": errors, "wall_s": wall, "latencies": latencies,
            # no count shown at all (a view without the metrics panel): None, not 0
            "tokens": tokens[0] if any(shown) else None, "client_cpu_s": time.process_time() - cpu}


SETTLE_S = 10  # the app gives freed memory back every few seconds (specviz/ui/runtime/memory.py)


def _tokens(result: dict) -> str:
    tokens = result.get("tokens")
    if tokens is None:  # Side by side's columns show no "new tokens" row
        return "tokens committed: not shown in this view's outputs"
    return f"{tokens} tokens committed, {tokens / result['wall_s']:.1f} tokens/s"


def report(result: dict, rss: float | None, settled: float | None = None) -> str:
    lat = result["latencies"]
    lines = [f"Steps: {result['steps']}, errors: {len(result['errors'])}",
             f"per Step: p50 {percentile(lat, 50):.2f} s, p95 {percentile(lat, 95):.2f} s, max {max(lat):.2f} s",
             f"wall {result['wall_s']:.1f} s, {result['steps'] / result['wall_s']:.2f} Steps/s, " + _tokens(result),
             # on the app's own machine the clients take CPU from it: say how much
             f"this script's own CPU meanwhile: {result.get('client_cpu_s', float('nan')):.1f} s"]
    if rss is not None:
        lines.append(f"app RSS afterwards: {rss:.2f} GB"
                     + ("" if settled is None else f", {SETTLE_S} s later: {settled:.2f} GB"))
    lines += [f"  error: {e}" for e in result["errors"][:5]]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--prompt", default=None, help="instead of the page's first example prompt")
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--pid", type=int, default=None, help="the app's process id, for its memory")
    ap.add_argument("--view", choices=list(VIEWS), default="decode",
                    help="decode: Decode's Step; pair: Side by side's Step both (its two columns' defaults)")
    args = ap.parse_args()
    inputs = {} if args.prompt is None else {"prompt": args.prompt}
    if args.max_new_tokens is not None:
        inputs["max_new_tokens"] = args.max_new_tokens
    result = run(args.url, args.sessions, args.steps, inputs, VIEWS[args.view])
    pid = args.pid or app_pid(args.url)
    rss = rss_gb(pid)
    if rss is not None:
        time.sleep(SETTLE_S)
    print(f"prompt: {PAGE if args.prompt is None else repr(args.prompt[:60])}")
    print(report(result, rss, rss_gb(pid) if rss is not None else None))
    sys.exit(1 if result["errors"] else 0)


if __name__ == "__main__":
    main()
