"""Each measured number the docs quote is held to the file it was read from, so the two cannot drift: a
table row of docs/BENCHMARKS.md to the raw summary.md or bench.json of its run, the draft head's α and
coverage in docs/HEAD.md to its evaluation files, a screenshot's caption in README.md or docs/TABS.md to
the recorded asset the screenshot shows, and API.md's cache costs to the dated record they cite.

A quote names its page, a pattern whose groups are the quoted text, its source file and how to read the
same numbers there. The check compares the numbers (every run of digits, in order) of both sides; a page
whose quoted text is gone or changed, or a source that now says otherwise, fails with the quote's name."""
import json
import math
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUIET16 = "docs/bench/2026-12-06-quiet16/summary.md"
SAMPLED_1204 = "docs/bench/2026-12-04-amd-fastpath-sampled/summary.md"
GREEDY_1204 = "docs/bench/2026-12-04-amd-fastpath-2/summary.md"
SPECBENCH = "docs/bench/2026-12-07-specbench/summary.md"
SPECBENCH_T07 = "docs/bench/2026-12-07-specbench-t07-all/summary.md"
SPECBENCH_T07_SEEDS = "docs/bench/2026-12-07-specbench-t07-seeds/summary.md"  # three answers a question
SPEED_MODEL = "docs/bench/2026-12-06-speed-model/summary.md"
ADVISE = "docs/bench/2026-12-07-advise-fresh/summary.md"
GEMMA = "docs/bench/2026-12-06-gemma/summary.md"
HALL = "docs/bench/2026-12-06-hall/sitting.txt"
BENCH = "docs/BENCHMARKS.md"


@dataclass(frozen=True)
class Quote:
    """One quoted claim: under the heading `section` of `page` (the whole page if empty), `pattern` (its
    groups joined by spaces) must give the numbers that `read` gives from `source`. Patterns are matched
    with every run of whitespace read as one space, so rewrapping a paragraph changes nothing."""
    name: str
    page: str
    section: str
    pattern: str
    source: str
    read: Callable[[Path], str]


def numbers(text: str) -> list[str]:
    """The runs of digits in `text`, a decimal point kept: "1.36× (K = 4), ext-2" gives 1.36, 4, 2."""
    return re.findall(r"\d+(?:\.\d+)?", text)


def cells(line: str) -> list[str]:
    """A markdown table row's cells, stripped."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row(path: Path, *lead: str) -> list[str]:
    """The cells of the first markdown table row in `path` whose first cells are `lead`."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("|") and cells(line)[:len(lead)] == list(lead):
            return cells(line)
    raise LookupError(f"no row {lead} in {path.name}")


def columns(*lead: str, take: tuple[int, ...]) -> Callable[[Path], str]:
    """Reads the cells `take` of the row that starts with `lead`."""
    return lambda path: " ".join(row(path, *lead)[i] for i in take)


def over_our_ar(variant: str) -> Callable[[Path], str]:
    """A variant's speedup over our AR in a bench.json: the geometric mean over prompts of the ratio of
    tokens/s, to two places."""
    def read(path: Path) -> str:
        results = json.loads(path.read_text(encoding="utf-8"))["results"]
        logs = [math.log(r[variant]["tokens_per_s"] / r["ar:norecord"]["tokens_per_s"]) for r in results.values()]
        return f"{math.exp(sum(logs) / len(logs)):.2f}"
    return read


def advisor_row(candidate: str) -> Callable[[Path], str]:
    """A candidate's line of the advisor's table, as BENCHMARKS.md quotes it: the sweep's best speedup
    and its K, the advisor's K and prediction, and the sweep at the advisor's K where that differs."""
    def read(path: Path) -> str:
        c = row(path, candidate)
        sweep = {k: float(numbers(c[k])[0]) for k in range(1, 6) if numbers(c[k])}
        best = max(sweep, key=sweep.get)
        picked, predicted = numbers(c[6])
        out = [c[best], str(best), picked, predicted]
        return " ".join(out + ([c[int(picked)]] if int(picked) != best else []))
    return read


def hall_p95(label: str) -> Callable[[Path], str]:
    """The p95 of each run of `label` (e.g. "100x1") by the code under test ("main") in the sitting's log."""
    def read(path: Path) -> str:
        lines = path.read_text(encoding="utf-8").splitlines()
        found = []
        for i, line in enumerate(lines):
            if re.match(rf"== main-r\d .*{re.escape(label)}", line):
                found.append(next(re.search(r"p95 (\S+) s", nxt).group(1) for nxt in lines[i:] if "p95" in nxt))
        return " ".join(found)
    return read


def from_json(pick: Callable[[dict], list[float]], places: int = 2) -> Callable[[Path], str]:
    """Reads the numbers `pick` takes from a JSON file, each to `places` decimals as the docs round them."""
    return lambda path: " ".join(f"{x:.{places}f}" for x in pick(json.loads(path.read_text(encoding="utf-8"))))


def rejected_node(cycle: int) -> Callable[[Path], str]:
    """The cycle number, then p, q and r of the first rejected node of that cycle of a trace."""
    def read(path: Path) -> str:
        node = next(n for n in json.loads(path.read_text(encoding="utf-8"))["cycles"][cycle]["nodes"]
                    if n["status"] == "rejected")
        return f"{cycle} {node['p']:.2f} {node['q']:.2f} {node['r']:.2f}"
    return read


def advice_checks(path: Path) -> str:
    """The recorded advice's checks: the planned hybrid predicted and measured, LogitSpec's K, predicted
    and measured."""
    checks = json.loads(path.read_text(encoding="utf-8"))["checks"]
    hybrid, logitspec = checks["hybrid, K auto"], checks["logitspec"]
    return (f"{hybrid['predicted']:.2f} {hybrid['measured']:.2f} "
            f"{logitspec['k']} {logitspec['predicted']:.2f} {logitspec['measured']:.2f}")


def sampled_row(category: str, n: str) -> Callable[[Path], str]:
    """The hybrid's row of the sampled Spec-Bench table as BENCHMARKS.md quotes it, from the run's three
    tables: its speedups, τ and α; the best single method's × HF plain and the hybrid's ratio to it; its
    mean answer length and its speed in cycles alone."""
    def read(path: Path) -> str:
        rows = [cells(line) for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith(f"| {category} |")]
        hybrid = next(r for r in rows if r[1:3] == [n, "hybrid"])
        best = next(r for r in rows if len(r) == 6)
        lengths = next(r for r in rows if len(r) == 4 and r[1] == "hybrid")
        return " ".join([n, *hybrid[3:8], numbers(best[2])[0], best[4], *lengths[2:4]])
    return read


def cut_grow_cell(method: str, mode: str) -> Callable[[Path], str]:
    """A method's median miss over every K of a mode, and its worst prompt's miss, in a cut-and-grow summary."""
    def read(path: Path) -> str:
        cut = row(path, method, mode, "16 → all" if mode == "cut" else "4 → all")
        return f"{numbers(cut[3])[0]} {numbers(cut[4])[-1]}"
    return read


def cells_after(lead: str, n: int, skip: int = 0) -> str:
    """A pattern for a table row whose first cell is `lead`: `skip` cells passed over, then `n` as groups."""
    return rf"\| {re.escape(lead)} \|" + r"[^|]*\|" * skip + r"([^|]*)\|" * n


def compare_row(i: int) -> Callable[[Path], str]:
    """The speedup over our AR of the Compare tab's recorded row `i`."""
    return from_json(lambda d: [d["compare"]["rows"][i]["speedup"]])


EACH = "## Each method against HF"
ALONE = "## Speculation alone: each method against our own AR"
MEASURED = "### Measured here"
SEEDED = "### Sampled, T = 0.7: three answers a question"
MODEL = "## The model of speed against measurement"
ADVISOR = "## The advisor against a sweep"
HALL_SECTION = "### A lecture hall on the page's defaults (issue 55)"
CUT_GROW = "### Cut and grown (issue 65)"
REBUILT = "docs/bench/2026-12-07-speed-model-rebuilt/"
# the cut-and-grow table's rows: (its name on the page, in the summaries, the run it comes from)
CUT_GROW_ROWS = [("prompt lookup", "pld", ""), ("LogitSpec", "logitspec", ""), ("head", "head", "-run1"),
                 ("fixed tree", "fixed-tree", "-run1"), ("hybrid", "hybrid", "-run1")]
CUT_GROW_CELLS = [("public", "cut"), ("public", "grow"), ("specbench", "cut"), ("specbench", "grow")]
GEMMA_SECTION = "## Gemma 3 270M: a second family, and a draft from another family"
QUIET16_JSON = "docs/bench/2026-12-06-quiet16/bench.json"
SPECBENCH_ROWS = [("Multi-turn conversation", "16"), ("Translation", "4"), ("Summarization", "4"),
                  ("Question answering", "4"), ("Mathematical reasoning", "4"),
                  ("Retrieval-aug. generation", "4"), ("Overall", "36")]
SPEED_MODEL_ROWS = [("prompt lookup", "pld"), ("LogitSpec", "logitspec"), ("head", "head"),
                    ("**hybrid, K auto**", "hybrid")]
ADVISOR_ROWS = [("hybrid", "hybrid"), ("prompt lookup", "pld"), ("LogitSpec", "logitspec"), ("head", "head")]
HALL_ROWS = [("100 × 1 (six runs)", "100x1"), ("30 × 2, first test after a start (warm-up running)", "30 x 2 at once"),
             ("30 × 2, warm", "30x2"), ("1 × 8, one student alone", "1x8")]
GEMMA_ROWS = [("HF prompt lookup", "hf_pld"), ("our AR", "ar:norecord"),
              ("prompt lookup (Gemma's best)", "pld:norecord"),
              ("hybrid (lookup, LogitSpec, suffix; no head)", "hybrid:norecord"),
              ("SmolLM2-135M drafting across tokenizers, K = 4, every cycle sent", "draft:norecord:plan=0"),
              ("the same, the planner on", "draft:norecord")]
MAIN_SCREENSHOT = (r"the example run \(hybrid on the bundled model, T = 0\.7\) on cycle (\d+), where '\.' is accepted, "
                   r"the head's '<\|im_end\|>' is rejected \(p = ([\d.]+), q = ([\d.]+), r = ([\d.]+)\)")
HYBRID = "**hybrid** (the app's default: head, lookup, LogitSpec, suffix)"

QUOTES = [
    # docs/BENCHMARKS.md, against the raw files of each run
    Quote("our AR against HF, greedy", BENCH, "## Our AR against HF `generate`",
          r"\| greedy, 128 new tokens, 3 repeats \| [^|]*\|" + r"([^|]*)\|" * 5,
          QUIET16, lambda p: " ".join([row(p, "hf")[1]] + [row(p, "ar:norecord")[i] for i in (1, 2, 3, 8)])),
    Quote("our AR against HF, sampled", BENCH, "## Our AR against HF `generate`",
          r"\| sampled, T 0\.7 / top-p 0\.9, 96 new tokens, 2 repeats \| [^|]*\|" + r"([^|]*)\|" * 4,
          SAMPLED_1204, lambda p: " ".join([row(p, "hf")[1]] + [row(p, "ar:norecord")[i] for i in (1, 2, 3)])),
    Quote("the hybrid against HF, greedy", BENCH, EACH, cells_after(HYBRID, 3),
          QUIET16, columns("hybrid:norecord", take=(2, 3, 4))),
    Quote("the hybrid against HF, sampled", BENCH, EACH, cells_after(HYBRID, 2, skip=3),
          SAMPLED_1204, columns("hybrid:norecord", take=(2, 3))),
    Quote("suffix against HF", BENCH, EACH, cells_after("suffix decoding (unshared: prompts it has not seen)", 3),
          QUIET16, columns("suffix:norecord", take=(2, 3, 4))),
    Quote("HF prompt lookup against HF plain, greedy", BENCH, EACH, cells_after("*HF prompt lookup itself*", 3),
          QUIET16, columns("hf_pld", take=(2, 3, 4))),
    Quote("prompt lookup against HF, greedy", BENCH, EACH, cells_after("prompt lookup", 3),
          GREEDY_1204, columns("pld:norecord", take=(2, 3, 4))),
    Quote("the hybrid against our AR", BENCH, ALONE,
          r"\| \*\*hybrid\*\* \(K auto, the planner on\) \| \*\*([\d.]+)×\*\* ¹",
          QUIET16_JSON, over_our_ar("hybrid:norecord")),
    Quote("suffix against our AR", BENCH, ALONE, r"\| suffix decoding \| ([\d.]+)× ¹",
          QUIET16_JSON, over_our_ar("suffix:norecord")),
    *[Quote(f"the app's Compare row: {name}", BENCH, ALONE, cells_after(lead, 1, skip=1),
            "assets/recorded_results.json", compare_row(i))
      for i, (name, lead) in enumerate([("hybrid", "**hybrid** (K auto, the planner on)"), ("pld", "prompt lookup"),
                                        ("logitspec", "LogitSpec"),
                                        ("draft", "draft model: the bundled model as its own draft, K = 8")])],
    *[Quote(f"Spec-Bench, the hybrid: {name}", BENCH, MEASURED, cells_after(name, 6), SPECBENCH,
            columns(name, n, "hybrid", take=(1, 3, 4, 5, 6, 7)))
      for name, n in SPECBENCH_ROWS],
    *[Quote(f"Spec-Bench at T = 0.7, the hybrid: {name}", BENCH, "### Sampled, T = 0.7", cells_after(name, 10),
            SPECBENCH_T07, sampled_row(name, n))
      for name, n in SPECBENCH_ROWS],
    *[Quote(f"Spec-Bench at T = 0.7, three answers a question, the hybrid: {name}", BENCH, SEEDED,
            cells_after(name, 10), SPECBENCH_T07_SEEDS, sampled_row(name, n))
      for name, n in SPECBENCH_ROWS[1:-1] + [("Overall", "20")]],
    Quote("Spec-Bench, the other methods overall", BENCH, MEASURED,
          r"Overall, our AR ran at ([\d.]+)× HF plain, HF prompt lookup at ([\d.]+)×, and of the single methods "
          r"prompt lookup ([\d.]+)×, LogitSpec ([\d.]+)×, suffix ([\d.]+)× and the head ([\d.]+)×", SPECBENCH,
          lambda p: " ".join(numbers(row(p, "Overall", "36", m)[3])[0] for m in
                             ("ar", "hf_pld", "pld", "logitspec", "suffix", "head"))),
    *[Quote(f"the model of speed: {ours}, T = {t}", BENCH, MODEL,
            rf"\| {re.escape(page)} \| {re.escape(t)} \|" + r"([^|]*)\|" * 5,
            SPEED_MODEL, columns(ours, t, take=(2, 3, 4, 5, 6)))
      for page, ours in SPEED_MODEL_ROWS for t in ("0", "0.7")],
    Quote("the advisor: hybrid, K auto", BENCH, ADVISOR, cells_after("**hybrid, K auto**", 2), ADVISE,
          lambda p: numbers(row(p, "hybrid, K auto")[1])[0] + " " + numbers(row(p, "hybrid, K auto")[6])[0]),
    *[Quote(f"the advisor: {page}", BENCH, ADVISOR, cells_after(page, 2), ADVISE, advisor_row(ours))
      for page, ours in ADVISOR_ROWS],
    Quote("the advisor: the planned hybrid checked", BENCH, ADVISOR,
          r"checked beside plain decoding in the same run: \*\*([\d.]+)×\*\* against ([\d.]+)× predicted, "
          r"\*\*([\d.]+) %\*\* off",
          ADVISE, lambda p: " ".join(re.search(r"Predicted ([\d.]+)×; checked ([\d.]+)× \(([\d.]+)% off\)",
                                               p.read_text(encoding="utf-8")).group(2, 1, 3))),
    *[Quote(f"cut and grown: {ours}, {where} {mode}", BENCH, CUT_GROW, cells_after(page, 1, skip=j),
            f"{REBUILT}{where}{run}-summary.md", cut_grow_cell(ours, mode))
      for page, ours, run in CUT_GROW_ROWS for j, (where, mode) in enumerate(CUT_GROW_CELLS)],
    *[Quote(f"cut and grown on other prompts, 128 tokens: {where}", BENCH, CUT_GROW, pattern,
            f"{REBUILT}unseen-{where}-summary.md",
            lambda p: " ".join(numbers(row(p, m, mode, "16 → all" if mode == "cut" else "4 → all")[3])[0]
                               for m in ("pld", "logitspec") for mode in ("cut", "grow")))
      for where, pattern in (
          ("public", r"tokens \(20:56\), cut and grown: prompt lookup ([\d.]+) % and ([\d.]+) % \(public\), "
                     r"[\d.]+ % and [\d.]+ % \(Spec-Bench\); LogitSpec ([\d.]+) % and ([\d.]+) %,"),
          ("specbench", r"\(public\), ([\d.]+) % and ([\d.]+) % \(Spec-Bench\); LogitSpec [\d.]+ % and [\d.]+ %, "
                        r"([\d.]+) % and ([\d.]+) %\."))],
    *[Quote(f"the lecture hall: {label}", BENCH, HALL_SECTION, cells_after(page, 1), HALL, hall_p95(label))
      for page, label in HALL_ROWS],
    *[Quote(f"Gemma 3 270M: {ours}", BENCH, GEMMA_SECTION, cells_after(page, 3), GEMMA, columns(ours, take=(2, 3, 4)))
      for page, ours in GEMMA_ROWS],
    # docs/HEAD.md, against the head's card and its latest evaluation
    Quote("the shipped head's α now", "docs/HEAD.md", "### Held-out prompts (`card.json`)",
          r"\*\*α ([\d.]+) greedy\*\*, ([\d.]+) tokens per cycle as a chain .*?"
          r"\*\*α ([\d.]+) at T = 0\.7\*\*, ([\d.]+) tokens",
          "docs/bench/2026-12-06-head2c/eval.json",
          from_json(lambda d: [d["v1"]["greedy"]["alpha"], d["v1"]["greedy"]["mean_accepted_tokens"],
                               d["v1"]["t0.7"]["alpha"], d["v1"]["t0.7"]["mean_accepted_tokens"]], 3)),
    Quote("the shipped head's card", "docs/HEAD.md", "### Held-out prompts (`card.json`)",
          r"the shipped head's \(2026-12-04, the engine of that day\) said ([\d.]+) and ([\d.]+)\.",
          "assets/head/card.json", from_json(lambda d: [d["eval"]["greedy"]["alpha"], d["eval"]["t0.7"]["alpha"]], 3)),
    Quote("the shipped head's coverage", "docs/HEAD.md", "### Held-out prompts (`card.json`)",
          r"covers (\d+) % of the held-out greedy answer tokens \((\d+) % sampled", "assets/head/card.json",
          from_json(lambda d: [100 * d["eval"][run]["answer_tokens_in_subset"] for run in ("greedy", "t0.7")], 0)),
    # the screenshots' captions, against the recorded assets they show
    Quote("TABS: the Theory screenshot", "docs/TABS.md", "",
          r"the model predicts ([\d.]+)x for the recorded hybrid run, which measured ([\d.]+)x; "
          r"the waterfall goes from the paper's ([\d.]+)x",
          "assets/recorded_results.json",
          from_json(lambda d: [d["theory"]["analysis"]["predicted"], d["theory"]["analysis"]["measured"],
                               d["theory"]["analysis"]["waterfall"][0]["value"]])),
    Quote("TABS: the Advise screenshot", "docs/TABS.md", "",
          r"hybrid, K auto predicted ([\d.]+)x and measured ([\d.]+)x; "
          r"LogitSpec at K = (\d+) predicted ([\d.]+)x and measured ([\d.]+)x",
          "assets/recorded_advice.json", advice_checks),
    Quote("TABS: the Compare screenshot", "docs/TABS.md", "",
          r"the hybrid at ([\d.]+)x plain decoding, prompt lookup at ([\d.]+)x, LogitSpec at ([\d.]+)x "
          r"and the draft model at ([\d.]+)x",
          "assets/recorded_results.json", from_json(lambda d: [r["speedup"] for r in d["compare"]["rows"]])),
    *[Quote(f"{page}: the main screenshot", page, "", MAIN_SCREENSHOT, "assets/example_trace.json", rejected_node(15))
      for page in ("README.md", "docs/TABS.md")],
    # docs/API.md, against the dated record it cites
    Quote("API: the cost of DynamicCache's copies", "docs/API.md", "",
          r"which here cost ([\d.]+) and ([\d.]+) ms a pass at 100 and 300 positions and ([\d.]+) ms at 2,000",
          "docs/bench/2026-12-02.md", lambda p: " ".join(row(p, ctx)[3] for ctx in ("100", "300", "2000"))),
]


def section(text: str, heading: str) -> str:
    """The part of `text` under the line `heading`, up to the next heading of its level or above."""
    if not heading:
        return text
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = lines.index(heading) + 1  # a missing heading fails as a ValueError, naming nothing else
    end = next((i for i in range(start, len(lines))
                if re.match(r"#+ ", lines[i]) and len(lines[i]) - len(lines[i].lstrip("#")) <= level), len(lines))
    return "\n".join(lines[start:end])


def problem(quote: Quote, root: Path = ROOT) -> str | None:
    """None when `quote`'s page quotes what its source says; otherwise what is wrong."""
    try:
        text = section((root / quote.page).read_text(encoding="utf-8"), quote.section)
    except ValueError:
        return f"{quote.name}: {quote.page} has no heading {quote.section!r}"
    found = list(re.finditer(quote.pattern, re.sub(r"\s+", " ", text)))
    if len(found) != 1:
        return f"{quote.name}: the quoted text is found {len(found)} times in {quote.page}"
    quoted = numbers(" ".join(found[0].groups()))
    if not quoted:
        return f"{quote.name}: the quoted text holds no number"
    try:
        source = numbers(quote.read(root / quote.source))
    except (LookupError, KeyError, StopIteration, AttributeError) as err:
        return f"{quote.name}: {quote.source} does not give it ({err!r})"
    if [float(x) for x in quoted] != [float(x) for x in source]:
        return f"{quote.name}: {quote.page} says {quoted}, {quote.source} says {source}"
    return None


def problems(quotes: list[Quote], root: Path = ROOT) -> list[str]:
    return [p for p in (problem(q, root) for q in quotes) if p]


def test_every_quoted_number_is_its_sources():
    """Every quote in QUOTES (BENCHMARKS.md's current tables, HEAD.md's α and coverage, the screenshots'
    captions in README.md and TABS.md, API.md's cache costs) gives the numbers its source file gives."""
    assert len(QUOTES) >= 50
    assert problems(QUOTES) == []


def copy_of(root: Path, tmp: Path) -> Path:
    """A copy under `tmp` of every page and source file the quotes read."""
    for rel in {q.page for q in QUOTES} | {q.source for q in QUOTES}:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / rel, tmp / rel)
    return tmp


def changed(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new), encoding="utf-8")


def names(found: list[str]) -> list[str]:
    return [p.split(": ")[0] for p in found]


def test_a_quoted_number_changed_on_its_page_fails(tmp_path):
    """A copy of the files passes; the same copy with one quoted number changed on its page (the hybrid's
    3.02× in BENCHMARKS.md, the head's α in HEAD.md) fails, naming only the quotes that changed."""
    root = copy_of(ROOT, tmp_path)
    assert problems(QUOTES, root) == []
    changed(root / BENCH, "| **3.02×** |", "| **3.12×** |")
    changed(root / "docs/HEAD.md", "**α 0.555 greedy**", "**α 0.565 greedy**")
    assert names(problems(QUOTES, root)) == ["the hybrid against HF, greedy", "the shipped head's α now"]


def test_a_source_that_changes_or_a_quote_that_goes_fails(tmp_path):
    """The quote fails when its source says something else (suffix's row in the run's summary.md), and
    when the quoted text is gone from its page (TABS' Advise caption) or its heading is renamed."""
    root = copy_of(ROOT, tmp_path)
    changed(root / QUIET16, "| 2.51× | 1.34× |", "| 2.61× | 1.34× |")
    changed(root / "docs/TABS.md", "predicted 2.24x and measured 2.21x", "predicted well")
    changed(root / BENCH, "## The advisor against a sweep", "## The advisor, swept")
    found = problems(QUOTES, root)
    assert names(found) == ["suffix against HF"] + ["the advisor"] * 6 + ["TABS"]
    assert "found 0 times" in found[-1] and "has no heading" in found[1]


def test_numbers_reads_decimals_in_order():
    """The comparison reads every run of digits with its decimals, in order, and nothing else."""
    assert numbers("1.36× (K = 4), ext-2 (20 %), 16/16") == ["1.36", "4", "2", "20", "16", "16"]
