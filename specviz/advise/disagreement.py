"""Where the candidates disagree: the positions one proposer lost that another would have won, and
the oracle gap, what combining proposers could gain (issue 24 §6).

Every method is lossless, so under greedy decoding each candidate's run of a prompt commits the
same tokens, and position t of one run is position t of the others. For a candidate A, position t
is *covered* when A's run committed its token as an accepted draft token (origin "draft"); every
other position, a rejection's replacement, a bonus or a plain step (origin resampled, bonus or
target), is one A *paid a target pass for*. The prefill's token (cycle_of −1) is no one's and is
left out. Where A paid and another candidate B covered, B would have proposed the token the
target kept: B *rescues* that position for A. So

    gain(A, B) = (|cov_A ∪ cov_B| − |cov_A|) / |cov_A|

is the share more drafted tokens a hybrid of A and B would have accepted than A alone, and the
oracle gain of A takes the union over every candidate.

This is a proxy, not a measurement of a built hybrid: it reads each run where that run's own
cycles happened to break. A real hybrid's cycles would start and end elsewhere (an accepted draft
moves the next cycle's start, and a proposer drafts from where its cycle starts), so its gain can
be smaller or larger. Sampled runs commit different tokens, and then positions cannot be matched:
the analysis is refused with the reason (`why_not`). No UI libraries here; messages are plain text.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations

from specviz.decoding.trace import FROM_DRAFT, RunTrace
from specviz.drafting.sampling import is_greedy

FORMAT = "specviz-disagreement/1"
CAVEAT = ("These are estimates from where each run's cycles happened to break; a built hybrid's cycles "
          "would break elsewhere, so its gain can be smaller or larger.")


@dataclass
class Disagreement:
    """Coverage counts of several candidates over the same positions (see the module docstring)."""
    candidates: list[str]  # labels, in the order given
    tokens: int  # positions considered: new tokens less the prefill's, summed over prompts
    covered: dict[str, int]  # label → positions its run committed as accepted draft tokens
    rescued: dict[str, dict[str, int]]  # rescued[a][b]: positions a paid a target pass for that b covered
    union: int  # positions covered by at least one candidate

    def paid(self, a: str) -> int:
        """Positions a's run paid a target pass for."""
        return self.tokens - self.covered[a]

    def gain(self, a: str, b: str) -> float:
        """(|cov_a ∪ cov_b| − |cov_a|) / |cov_a|: 0 when b rescues nothing, inf when a covered
        nothing and b covered something (no finite ratio; `sentences` never prints it)."""
        return _ratio(self.rescued[a][b], self.covered[a])

    def oracle_gain(self, a: str) -> float:
        """The same ratio for the union over every candidate against a alone."""
        return _ratio(self.union - self.covered[a], self.covered[a])

    def sentences(self, top: int = 3) -> list[str]:
        """The `top` best pairs that disagree anywhere, each against the better of its two alone;
        then, for three or more candidates, all of them against the best single one; then CAVEAT."""
        pairs = []
        for a, b in combinations(self.candidates, 2):
            base, other = (a, b) if self.covered[a] >= self.covered[b] else (b, a)
            if self.rescued[base][other] or self.rescued[other][base]:
                pairs.append((self.gain(base, other), self.rescued[base][other], base, other))
        if not pairs:
            return [f"The candidates never disagree on these prompts: at each of the {self.tokens} positions "
                    "either all of them drafted the token the target kept or none did, so combining them "
                    "gains nothing."]
        pairs.sort(key=lambda p: (-p[0], -p[1]))
        out = [f"A hybrid of {base} and {other} would have accepted {_pct(g)} more drafted tokens than {base} "
               f"alone ({n} of the {self.paid(base)} positions {base} paid a target pass for were proposed "
               f"by {other})." if n else
               f"{base} drafted every token the target kept that {other} did: a hybrid of the two would gain "
               f"nothing over {base} alone." for g, n, base, other in pairs[:top]]
        if len(self.candidates) > 2:
            best = max(self.candidates, key=lambda c: self.covered[c])
            extra, n = self.union - self.covered[best], len(self.candidates)
            out.append(f"All {n} candidates together would have accepted {_pct(self.oracle_gain(best))} more "
                       f"drafted tokens than {best}, the best alone ({extra} of the {self.paid(best)} positions "
                       f"{best} paid a target pass for were proposed by at least one of the others)." if extra else
                       f"{best} alone drafted every token the target kept that the others did: all {n} together gain "
                       f"nothing over it.")
        return out + [CAVEAT]

    def to_dict(self) -> dict:
        return {"format": FORMAT, "candidates": list(self.candidates), "tokens": self.tokens,
                "covered": dict(self.covered), "rescued": {a: dict(r) for a, r in self.rescued.items()},
                "union": self.union}

    @classmethod
    def from_dict(cls, d: dict) -> "Disagreement":
        if d.get("format") != FORMAT:
            raise ValueError(f"not a SpecViz disagreement (format {d.get('format')!r}, expected {FORMAT!r})")
        return cls(candidates=[str(c) for c in d["candidates"]], tokens=int(d["tokens"]),
                   covered={a: int(n) for a, n in d["covered"].items()},
                   rescued={a: {b: int(n) for b, n in r.items()} for a, r in d["rescued"].items()},
                   union=int(d["union"]))


def _ratio(extra: int, base: int) -> float:
    if base:
        return extra / base
    return math.inf if extra else 0.0


def _pct(x: float) -> str:
    return f"{round(100 * x)} %"


def why_not(runs: dict[str, list[RunTrace]]) -> str | None:
    """Why the analysis cannot be made on these runs, as a plain sentence; None when it can."""
    if len(runs) < 2:
        return f"Where the candidates disagree needs at least two candidates; got {len(runs)}."
    labels = list(runs)
    first = labels[0]
    for label in labels[1:]:
        if len(runs[label]) != len(runs[first]):
            return (f"{first} decoded {len(runs[first])} prompts and {label} {len(runs[label])}: "
                    "the candidates must decode the same prompts, in the same order.")
    if not runs[first]:
        return "No prompts were decoded, so there is nothing to compare."
    for j, group in enumerate(zip(*runs.values())):
        for label, run in zip(labels, group):
            if not len(run.token_ids) == len(run.origins) == len(run.cycle_of):
                return (f"Prompt {j + 1}: {label}'s run does not say where each token came from "
                        "(its origins or cycle_of do not match its tokens).")
        ref = group[0]
        for label, run in zip(labels[1:], group[1:]):
            if ref.prompt_ids and run.prompt_ids and ref.prompt_ids != run.prompt_ids:
                return f"Prompt {j + 1}: {first} and {label} decoded different prompts."
            if ref.token_ids != run.token_ids:
                return f"Prompt {j + 1}: " + _differ(first, ref, label, run)
    if not any(c != -1 for group in zip(*runs.values()) for c in group[0].cycle_of):
        return "The runs committed no tokens after the prefill's, so there is nothing to compare."
    return None


def _differ(a: str, ra: RunTrace, b: str, rb: RunTrace) -> str:
    """Why two runs of one prompt committed different tokens, as far as their settings tell."""
    short, long_ = sorted((ra.token_ids, rb.token_ids), key=len)
    if long_[:len(short)] == short:
        return (f"{a} committed {len(ra.token_ids)} new tokens and {b} {len(rb.token_ids)}; the runs must "
                "use the same token budget.")
    at = next(i for i, (x, y) in enumerate(zip(ra.token_ids, rb.token_ids)) if x != y)
    said = f"{a} and {b} committed different tokens from new token {at + 1} on, so their positions cannot be matched. "
    temps = [float(t) for t in (ra.settings.get("temperature"), rb.settings.get("temperature")) if t is not None]
    if any(not is_greedy(t) for t in temps):
        return said + (f"They were sampled (temperature {max(temps):g}); the analysis needs greedy decoding "
                       "(temperature 0).")
    return said + ("Lossless methods commit the same tokens under greedy decoding, so one of them was not "
                   "lossless here, or the runs used different settings.")


def disagreement(runs: dict[str, list[RunTrace]]) -> Disagreement | None:
    """Coverage of each candidate's runs (label → runs of the same prompts in the same order), or
    None when `why_not` gives a reason it cannot be made."""
    if why_not(runs) is not None:
        return None
    labels = list(runs)
    tokens, union = 0, 0
    covered = {a: 0 for a in labels}
    rescued = {a: {b: 0 for b in labels if b != a} for a in labels}
    for group in zip(*runs.values()):
        prefill = {i for run in group for i, c in enumerate(run.cycle_of) if c == -1}
        positions = [i for i in range(len(group[0].token_ids)) if i not in prefill]
        cov = {a: {i for i in positions if run.origins[i] == FROM_DRAFT} for a, run in zip(labels, group)}
        tokens += len(positions)
        union += len(set().union(*cov.values()))
        for a in labels:
            covered[a] += len(cov[a])
            for b in rescued[a]:
                rescued[a][b] += len(cov[b] - cov[a])
    return Disagreement(labels, tokens, covered, rescued, union)
