"""A served target's verify request, timed with this checkout's client and with an earlier one's.

Starts one vLLM server from .venv-vllm, loads `specviz/served/remote.py` twice (this checkout's,
and the version at --before, by default the urllib client that opened a connection per request)
and times `VllmServer.next_logprobs` for one verify request of a chain of K drafts (K + 1
prompts sharing a context, as the engine sends them), the two clients interleaved within each
repeat so that both see the same machine. Prints the date, the CPU and, per client, the median
with the 10th–90th percentiles, in milliseconds.

    PYTHONPATH=. python scripts/bench/verify_request.py [--before a3b9396] [--url URL] [--k 4] [--repeats 300]
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specviz.advise.advisor import machine
from specviz.loading.loader import local_source
from specviz.served import remote, vllm_serve

ROOT = Path(__file__).resolve().parents[2]


def earlier_client(ref: str):
    """specviz/served/remote.py as it was at `ref`, imported under a name of its own."""
    text = subprocess.run(["git", "show", f"{ref}:specviz/served/remote.py"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="specviz-before-")) / "remote_before.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("remote_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def verify_prompts(server, k: int, context: int) -> list[list[int]]:
    """K + 1 prompts: a context of about `context` tokens, then it followed by 1..K draft tokens."""
    text = " ".join(["The quick brown fox jumps over the lazy dog, and the dog sleeps on."] * (context // 12 + 1))
    ids = server.tokenize(text)[:context]
    draft = server.tokenize(" the fox runs far away")[:k]
    return [ids + draft[:i] for i in range(k + 1)]


def summary(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=10)
    return f"median {statistics.median(ms):.2f} ms (p10 {q[0]:.2f}, p90 {q[-1]:.2f}, n {len(ms)})"


def measure(servers: dict, shapes: dict, repeats: int, warmup: int) -> dict:
    """Milliseconds per (shape, client), each repeat sending every shape through every client in a
    shuffled order, so that neither client always goes first."""
    times = {(shape, name): [] for shape in shapes for name in servers}
    order = list(times)
    for r in range(warmup + repeats):
        random.Random(r).shuffle(order)
        for shape, name in order:
            rows, usage = servers[name].next_logprobs(shapes[shape])
            assert len(rows) == len(shapes[shape])
            if r >= warmup:
                times[shape, name].append(usage.seconds * 1000)
    return times


def health_ms(servers: dict, repeats: int) -> dict:
    """Milliseconds of GET /health per client, interleaved: no model work, so the connection's own
    cost (a new TCP connection per request, or a kept one) is most of what is timed."""
    times = {name: [] for name in servers}
    order = list(servers)
    for r in range(repeats):
        random.Random(r).shuffle(order)
        for name in order:
            t0 = time.perf_counter()
            servers[name]._call("/health")
            times[name].append((time.perf_counter() - t0) * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="a3b9396", help="the commit whose client is the baseline")
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--url", help="a vLLM server already running (else one is started and stopped)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--context", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    if Path(remote.__file__).resolve().parents[2] != ROOT:  # an editable install of another checkout
        sys.exit(f"specviz imports from {remote.__file__}, not this checkout: run with PYTHONPATH={ROOT}")
    clients = {f"urllib ({args.before})": earlier_client(args.before).VllmServer, "httpx (this checkout)":
               remote.VllmServer}
    log = Path(tempfile.mkdtemp(prefix="specviz-verify-bench-")) / "vllm.log"
    served = None if args.url else vllm_serve.start(local_source(args.model), _free_port(), log)
    try:
        servers = {name: cls(args.url or served.url).connect() for name, cls in clients.items()}
        prompts = verify_prompts(next(iter(servers.values())), args.k, args.context)
        shapes = {f"verify, K={args.k}: {len(prompts)} prompts of a {len(prompts[0])}-token context": prompts,
                  "one 8-token prompt (the connection's share shows)": [prompts[0][:8]]}
        times = measure(servers, shapes, args.repeats, args.warmup)
        health = health_ms(servers, 10 * args.repeats)
    finally:
        if served is not None:
            served.stop()
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {machine()}, vLLM CPU build "
          f"serving {args.model}, {args.repeats} repeats after {args.warmup} warm-up, clients and shapes interleaved")
    for shape in shapes:
        print(f"{shape}:")
        for name in servers:
            print(f"- {name}: {summary(times[shape, name])}")
        base, new = (statistics.median(times[shape, name]) for name in servers)
        print(f"- difference of medians: {base - new:+.2f} ms ({(base - new) / base:+.1%} of the baseline)")
    print("GET /health (no model work):")
    for name in servers:
        print(f"- {name}: {summary(health[name])}")


if __name__ == "__main__":
    main()
