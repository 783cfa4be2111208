"""The app served on this machine and Debian's Chromium to look at it: one definition for the
browser tests (tests/conftest.py, tests/test_*browser.py, tests/project/test_app_api.py) and
scripts/screenshot.py.

    demo, url = serve()                                  # the app on a free local port
    browser = launch_chromium(playwright)                # headless, with CHROMIUM_ARGS

Tooling, like cli.py: gradio is imported only when `serve` builds the app.
"""
from __future__ import annotations

import os
import socket

# Debian's package (playwright cannot download its own browser here); CHROMIUM=/path overrides.
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
# No sandbox (root in a container), no GPU, and nothing that phones home during a test.
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(demo=None):
    """Launch `demo` (default: the app) on a free local port without blocking; (demo, url)."""
    from specviz.ui import build_demo, launch_kwargs

    demo = demo if demo is not None else build_demo()
    port = free_port()
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True,
                **launch_kwargs())
    return demo, f"http://127.0.0.1:{port}/"


def launch_chromium(playwright, executable: str = CHROMIUM):
    """Headless Chromium from a playwright context (`sync_playwright()` entered)."""
    return playwright.chromium.launch(executable_path=executable, args=list(CHROMIUM_ARGS))
