"""SpecViz over vLLM against vLLM itself: plain decoding, SpecViz's prompt lookup verified by the
server, and the server's own speculative decoding, on the same prompts in one run.

vLLM's own speculation (`--speculative-config`, e.g. ngram) runs on a second server of the same
model, since the setting is per server. Its per-position acceptance comes from the Prometheus
counters on /metrics (`vllm:spec_decode_num_drafts`, `..._num_accepted_tokens_per_pos`), read
before and after the prompts; SpecViz's from its own cycles, counted the same way:

- marginal rate at position i: drafts whose token i was accepted ÷ drafts made (vLLM's counters);
- conditional rate at position i: accepted at i ÷ accepted at i − 1 (position 1: the marginal).

Both are labelled as such wherever they appear. Times are wall-clock here, per prompt, medians of
`repeats`; the server's own plain decoding is the anchor (decoding/served.py).
"""
from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field

from specviz.decoding.engine import generate
from specviz.decoding.served import served_plain
from specviz.models.loaded import LoadedModel

_LINE = re.compile(r'^(vllm:spec_decode_num_[a-z_]+?)(?:_total)?\{([^}]*)\}\s+([0-9.eE+-]+)\s*$')


@dataclass
class SpecCounters:
    """vLLM's speculative-decoding counters (cumulative since the server started)."""
    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    per_pos: list[float] = field(default_factory=list)  # accepted tokens at draft position 0, 1, …

    def minus(self, before: "SpecCounters") -> "SpecCounters":
        n = max(len(self.per_pos), len(before.per_pos))
        pos = [(self.per_pos[i] if i < len(self.per_pos) else 0.0)
               - (before.per_pos[i] if i < len(before.per_pos) else 0.0)
               for i in range(n)]
        return SpecCounters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                            self.accepted - before.accepted, pos)


def read_counters(text: str) -> SpecCounters | None:
    """The speculative-decoding counters in a /metrics text, or None when the server speculates not."""
    out, seen = SpecCounters(), False
    by_pos: dict[int, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match or match.group(1).endswith("_created"):
            continue
        name, labels, value = match.group(1), match.group(2), float(match.group(3))
        seen = True
        if name == "vllm:spec_decode_num_drafts":
            out.drafts += value
        elif name == "vllm:spec_decode_num_draft_tokens":
            out.draft_tokens += value
        elif name == "vllm:spec_decode_num_accepted_tokens":
            out.accepted += value
        elif name == "vllm:spec_decode_num_accepted_tokens_per_pos":
            pos = re.search(r'position="(\d+)"', labels)
            if pos:
                by_pos[int(pos.group(1))] = by_pos.get(int(pos.group(1)), 0.0) + value
    if not seen:
        return None
    out.per_pos = [by_pos.get(i, 0.0) for i in range(max(by_pos) + 1)] if by_pos else []
    return out


def rates(accepted_at: list[float], drafts: float) -> tuple[list[float], list[float]]:
    """(marginal, conditional) acceptance by position from accepted counts per position and drafts made."""
    marginal = [a / drafts if drafts else 0.0 for a in accepted_at]
    conditional = [(a / accepted_at[i - 1] if accepted_at[i - 1] else 0.0) if i else m
                   for i, (a, m) in enumerate(zip(accepted_at, marginal))]
    return marginal, conditional


def specviz_counts(cycles, k: int) -> tuple[list[float], float]:
    """SpecViz's cycles counted as vLLM counts: accepted per position (up to k), and drafts made."""
    drafted = [c for c in cycles if c.nodes]
    return [float(sum(1 for c in drafted if c.n_accepted > i)) for i in range(k)], float(len(drafted))


@dataclass
class Row:
    name: str
    tokens_per_s: float
    tokens: int
    marginal: list[float] = field(default_factory=list)
    conditional: list[float] = field(default_factory=list)
    same_text: bool = True  # the same new tokens as the server's plain decoding (greedy)


def compare(plain: LoadedModel, prompts: list[str], k: int = 4, max_new_tokens: int = 64, repeats: int = 2,
            spec: LoadedModel | None = None, progress=print) -> list[Row]:
    """Rows for vLLM plain, SpecViz prompt lookup over vLLM (K = k, planner off so every draft is
    sent, as vLLM sends its own) and, with `spec` (a server running its own speculation), that
    server's decoding with its counters. Greedy; tokens/s = new tokens ÷ summed decode time."""
    times: dict[str, list[float]] = {"vLLM plain": [], f"SpecViz pld over vLLM, K={k}": []}
    if spec is not None:
        times["vLLM's own speculation"] = []
    tokens = dict.fromkeys(times, 0)
    same = dict.fromkeys(times, True)
    ours_pos, ours_drafts = [0.0] * k, 0.0
    before = read_counters(spec.remote.metrics()) if spec is not None else None
    for i, prompt in enumerate(prompts):
        progress(f"prompt {i + 1}/{len(prompts)}")
        per = dict.fromkeys(times)
        for _ in range(repeats):
            base = served_plain(plain, prompt, max_new_tokens=max_new_tokens)
            ours = generate(plain, prompt, method="pld", k=k, plan=False, max_new_tokens=max_new_tokens, record=False)
            runs = {"vLLM plain": (base.token_ids, base.metrics["decode_s"]),
                    f"SpecViz pld over vLLM, K={k}": (ours.token_ids, ours.metrics["decode_s"])}
            if spec is not None:
                theirs = served_plain(spec, prompt, max_new_tokens=max_new_tokens)
                runs["vLLM's own speculation"] = (theirs.token_ids, theirs.metrics["decode_s"])
            for name, (ids, seconds) in runs.items():
                per[name] = (per[name] or []) + [(seconds, len(ids))]
                same[name] = same[name] and ids == base.token_ids
        counts, drafts = specviz_counts(ours.cycles, k)
        ours_pos = [a + b for a, b in zip(ours_pos, counts)]
        ours_drafts += drafts
        for name, samples in per.items():
            times[name].append(statistics.median(s for s, _ in samples))
            tokens[name] += samples[0][1] - 1  # the prefill chose the first token
    rows = []
    for name, seconds in times.items():
        rows.append(Row(name, tokens[name] / sum(seconds) if sum(seconds) else 0.0, tokens[name], same_text=same[name]))
    rows[1].marginal, rows[1].conditional = rates(ours_pos, ours_drafts)
    if spec is not None:
        after = read_counters(spec.remote.metrics())
        if after is not None and before is not None:
            # each repeat decoded every prompt once: the counters cover `repeats` passes over the prompts
            delta = after.minus(before)
            rows[2].marginal, rows[2].conditional = rates(delta.per_pos, delta.drafts)
    return rows


def table(rows: list[Row]) -> str:
    """The rows as a markdown table, speedups against the first (vLLM plain)."""
    anchor = rows[0].tokens_per_s or 1.0
    head = ("| run | tokens/s | × vLLM plain | same tokens as vLLM plain | marginal acceptance by position "
            "(accepted ÷ drafts) | conditional (÷ accepted at the previous position) |")
    lines = [head, "|---|---|---|---|---|---|"]
    for r in rows:
        marg = ", ".join(f"{x:.2f}" for x in r.marginal) if r.marginal else "–"
        cond = ", ".join(f"{x:.2f}" for x in r.conditional) if r.conditional else "–"
        lines.append(f"| {r.name} | {r.tokens_per_s:.1f} | {r.tokens_per_s / anchor:.2f}× | "
                     f"{'yes' if r.same_text else 'no'} | {marg} | {cond} |")
    return "\n".join(lines)
