"""How much time the app adds to a Step on top of the cycle's own compute (budget: 50 ms).

    python scripts/bench/step_overhead.py [--steps 24] [--methods head,pld,logitspec] [--http] [--rebuild]

For each method it opens a fresh app session on the bundled model and presses Step repeatedly.
A Step's overhead is the handler's wall-clock time minus the time the decoder itself recorded
for that cycle (drafting, verifying and bookkeeping), so it covers the settings check, the
session lock, handing the run's state to the model call and back, and building every view and
figure of the page. With --rebuild the KV caches are dropped before every Step, as on ZeroGPU
where each call is a new process: the rebuild's prefill is then reported in its own column.
With --http the same is measured end to end through a running app and gradio_client: the queue,
serialising the outputs as JSON and sending them over a local socket are then included too.
Prints Markdown tables.
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]

PROMPT_INDEX = 1  # assets/examples.json: the summary prompt (the second example)


def prompt() -> str:
    return json.loads((ROOT / "assets" / "examples.json").read_text(encoding="utf-8"))[PROMPT_INDEX]["prompt"]


def inputs(method: str) -> dict:
    values = {"prompt": prompt(), "max_new_tokens": 256}
    values.update({"method": "draft", "draft": "head"} if method == "head" else {"method": method})
    return values


def cycle_compute_s(cycle) -> float:
    return cycle.draft_s + cycle.verify_s + cycle.other_s


def in_process(method: str, steps: int, rebuild: bool = False) -> tuple[list[float], list[float]]:
    """Overheads and rebuild times in ms of `steps` Steps (the first, which prefills, is left out)."""
    from specviz.decoding.runstate import LIVE
    from specviz.ui.decode import handlers
    from specviz.ui.runtime.state import SESSIONS

    request = SimpleNamespace(session_hash=f"overhead-{method}")
    values = inputs(method)
    out, rebuilds = [], []
    for i in range(steps + 1):
        if rebuild:
            LIVE.clear()
        before = SESSIONS.get(request.session_hash).state
        rebuild_before = before.rebuild_s if before is not None else 0.0
        t0 = time.perf_counter()
        handlers.step(request, progress=None, **values)
        wall = time.perf_counter() - t0
        state = SESSIONS.get(request.session_hash).state
        if state is None or not state.cycles:
            raise SystemExit(f"{method}: Step did not run a cycle; is the bundled model installed?")
        rebuild_s = state.rebuild_s - rebuild_before
        if i > 0:  # the first Step also loads the model and prefills the prompt
            out.append(1000 * (wall - cycle_compute_s(state.cycles[-1]) - rebuild_s))
            rebuilds.append(1000 * rebuild_s)
        if state.done:
            break
    SESSIONS.drop(request.session_hash)
    return out, rebuilds


def over_http(method: str, steps: int, url: str) -> list[float]:
    """The same through HTTP: the round trip of /step minus the cycle's compute, in ms."""
    import gradio_client

    from specviz.ui.runtime.state import SESSIONS

    client = gradio_client.Client(url, verbose=False)
    values = inputs(method)
    before = set(SESSIONS._sessions)
    out = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        client.predict(api_name="/step", **values)
        wall = time.perf_counter() - t0
        mine = [s for h, s in SESSIONS._sessions.items() if h not in before]
        state = mine[0].state
        if i > 0:
            out.append(1000 * (wall - cycle_compute_s(state.cycles[-1])))
        if state.done:
            break
    return out


def event_floor(url: str, n: int) -> list[float]:
    """Round trips of /stop, which only sets a flag and returns a status line: what any event
    costs in Gradio's queue and in gradio_client, whatever the handler does."""
    import gradio_client

    client = gradio_client.Client(url, verbose=False)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.predict(api_name="/stop")
        out.append(1000 * (time.perf_counter() - t0))
    return out


def start_app() -> tuple[object, str]:
    from specviz.ui import build_demo, launch_kwargs

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = build_demo()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True, **launch_kwargs())
    return demo, f"http://127.0.0.1:{port}/"


def row(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    return f"| {name} | {len(xs)} | {statistics.median(xs):.1f} | {p90:.1f} | {xs[-1]:.1f} |"


def main() -> None:
    from specviz.proposers import joiners, parts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=24, help="Steps timed per method")
    ap.add_argument("--methods", default=",".join([*parts(), *joiners()]),
                    help="comma-separated methods (default %(default)s); head is the default draft")
    ap.add_argument("--http", action="store_true", help="also time /step through a running app")
    ap.add_argument("--rebuild", action="store_true", help="drop the KV caches before every Step (as on ZeroGPU)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    args = ap.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from specviz.ui.runtime.state import MODELS

    MODELS.get("bundled", lambda msg: print(msg, file=sys.stderr))
    print(f"Step overhead: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.get_num_threads()} torch "
          f"threads, bundled model, prompt {PROMPT_INDEX} of assets/examples.json, greedy, K = 4\n")
    print("| where | Steps | median ms | p90 ms | max ms |\n|---|---|---|---|---|")
    for m in args.methods.split(","):
        overheads, rebuilds = in_process(m, args.steps, args.rebuild)
        print(row(f"{m}, in process", overheads), flush=True)
        if args.rebuild:
            print(row(f"{m}, the rebuild's prefill (apart)", rebuilds), flush=True)
    if args.http:
        demo, url = start_app()
        try:
            for m in args.methods.split(","):
                print(row(f"{m}, over HTTP", over_http(m, args.steps, url)), flush=True)
            print(row("any event over HTTP (/stop, a no-op)", event_floor(url, args.steps)), flush=True)
        finally:
            demo.close()


if __name__ == "__main__":
    main()
