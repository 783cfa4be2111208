"""Screenshot of the app for the README: its first paint, or a live run after a few Steps; saves a PNG.

    python scripts/screenshot.py [--out assets/screenshot.png]     # the first paint (no model runs)
    python scripts/screenshot.py --steps 4                          # measure the AR baseline, Step 4 times
    python scripts/screenshot.py --tab Advise --full-page --out assets/screenshot-advise.png
    python scripts/screenshot.py --tab Advise --at "#sv-adv-deploy" --out assets/screenshot-advise-deploy.png
    python scripts/screenshot.py --query pair=good-vs-bad --full-page --out assets/screenshot-pair.png
    python scripts/screenshot.py --specbench --out assets/screenshot-specbench.png   # Compare on Spec-Bench

Needs Debian's chromium at /usr/bin/chromium (or CHROMIUM=/path) and the playwright package;
the app runs in-process on a free local port with the bundled model.
"""
from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

VIEWPORT = {"width": 1600, "height": 1000}  # wide enough for the three columns side by side
STEP_TIMEOUT_MS = 300_000  # the first Step loads the model; a busy 2-core machine needs minutes


def press_step(page, times: int) -> None:
    """Press Step and wait until the narration names the new cycle, `times` times."""
    for i in range(times):
        page.click("#sv-step")
        page.wait_for_function(
            "n => (document.querySelector('#sv-narration')?.innerText || '').includes('Cycle ' + n + ':')"
            " && document.querySelector('#sv-status .sv-status-ok')", arg=i, timeout=STEP_TIMEOUT_MS)


def run_specbench(page, new_tokens: int) -> None:
    """On Compare: the default rows on the Spec-Bench public subset's first questions (the tab's default
    count) at `new_tokens` new tokens, then the category chart brought to the top of the screen."""
    page.locator("#sv-tabs button[role=tab]:has-text('Compare')").click()
    page.locator("#sv-cmp-source label:has-text('Spec-Bench')").click()
    tokens = page.locator("#sv-cmp-maxnew input[type=number]")
    tokens.fill(str(new_tokens))
    tokens.press("Enter")
    page.click("#sv-cmp-go")
    page.wait_for_function("() => (document.querySelector('#sv-cmp-status')?.innerText || '').includes('Done')",
                           timeout=STEP_TIMEOUT_MS * 4)
    page.locator("#sv-cmp-chart").evaluate("e => e.scrollIntoView({block: 'center'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=0, help="0: the first paint, as a newcomer sees it")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "screenshot.png")
    parser.add_argument("--full-page", action="store_true", help="the whole page, not only the first screen")
    parser.add_argument("--tab", help="open this tab first (e.g. Advise: its recorded profile, no model runs)")
    parser.add_argument("--at", help="scroll the element this CSS selector picks to the top of the screen first")
    parser.add_argument("--query", default="", help="query string for the page, e.g. pair=good-vs-bad")
    parser.add_argument("--specbench", action="store_true",
                        help="run Compare on Spec-Bench's public subset (16 new tokens) and show its category chart")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    from specviz.browser import launch_chromium, serve

    demo, url = serve()
    try:
        with sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(f"{url}?{args.query}" if args.query else url, wait_until="domcontentloaded")
            # the first paint is drawn; attached, not visible: a ?pair= link opens on another tab
            page.wait_for_selector("#sv-tree .js-plotly-plot", state="attached", timeout=60_000)
            if args.query:  # what the link opens is painted
                page.wait_for_function("() => !!document.querySelector('#sv-pair-status .sv-status')",
                                       timeout=60_000)
            if args.steps:
                page.click("#sv-measure")  # the timing panel then compares with a measured baseline
                page.wait_for_function("() => (document.querySelector('#sv-status')?.innerText || '')"
                                       ".includes('AR baseline measured')", timeout=STEP_TIMEOUT_MS)
                press_step(page, args.steps)
            if args.specbench:
                run_specbench(page, 16)
            if args.tab:
                page.locator(f"#sv-tabs button[role=tab]:has-text('{args.tab}')").click()
                page.wait_for_timeout(1500)
            if args.at:
                page.locator(args.at).first.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(1000)  # let plotly finish its transitions
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), full_page=args.full_page)
            browser.close()
        print(f"wrote {args.out}")
    finally:
        demo.close()


if __name__ == "__main__":
    main()
