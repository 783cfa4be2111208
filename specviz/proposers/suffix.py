"""Suffix decoding (SuffixDecoding, Oliaro et al., NeurIPS 2025), written from the paper's
description: match the longest suffix of the context in texts seen before, and draft a tree of
what followed it there, ranked by how often it followed (suffix_index.py).

Texts searched:
- the run's own prompt and its output so far (the paper's per-request tree);
- the outputs of earlier runs on the same target and exactly the same prompt ids, in this process
  (the paper's global tree, narrowed for privacy): `EarlierRuns` keys them by the target model
  object and the prompt's ids, so a run never reads the text of another prompt, whoever sent it.
  A class on one example prompt is the case it serves: the first students' outputs draft the
  later students' runs;
- for the bundled model, a corpus of its own answers to other prompts shipped with the project
  (corpus.py): its tree is grown apart from the one above and joined to it (drafting/tree.py `merge`),
  so a set phrase found there adds a branch and never outweighs what this run's own text offers.

Drafts are point masses (q = None) and depend only on committed ids and on runs that finished
before this run's first draft, never on this cycle's draws, so verification stays exact under
sampling (verify.py's recursive rule over siblings). A run's tree may differ with what ran before
it, so under sampling one seed can give a different sample (from the same distribution) once the
store has grown; `share=False` reads and feeds no store.

A run pins the earlier outputs it drafts from at its first draft, and carries them in its state
(`state()`): a run resumed in another process (a ZeroGPU worker forked before or after other runs
ended) or after more runs ended drafts from exactly what it drafted from before, so it goes on
draw for draw as if never interrupted.

What lives where (docs/ZEROGPU.md): the store is per process. A run feeds it when it ends
(`finish`), in the process that decoded it; on ZeroGPU that is a forked worker, so the app's main
process feeds its own store too (`remember`, called where a call's state comes back), and a worker
forked later reads what the main process held at the fork.
"""
from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections import OrderedDict

from specviz.drafting.tree import DraftTree, merge
from specviz.proposers.base import ProposeContext, Proposer
from specviz.proposers.corpus import SUFFIX_CORPUS, Corpus, for_target
from specviz.proposers.method_spec import Knob, MethodSpec, SourceSpec
from specviz.proposers.suffix_index import (
    SUFFIX_EARLIER,
    SUFFIX_OUTPUT,
    SUFFIX_PROMPT,
    Text,
    best_tree,
    match_of,
    occurrences,
)

CAPACITY = 24  # nodes offered: the planner (planner.py) sends what pays, on a CPU a dozen at most
SPEC_FACTOR = 4.0  # at most 4 nodes per matched token (the paper's MAX_SPEC = α·p): a 1-token match is weak
MIN_PROB = 0.1  # a node whose share of the occurrences falls below this is rarely worth its place
PATTERNS = 3  # pattern lengths tried per cycle (the longest first), the best Σ D kept
MAX_PROMPTS = 64  # prompts kept per target: a class's examples and a few visitors' own
MAX_OUTPUTS = 32  # distinct outputs kept per prompt; a repeated output only adds to its count
MAX_RUNS = 4096  # run ids remembered per prompt, so a run recorded twice counts once
# its nodes' source kinds (suffix_index.py), each with the text the page says it was found in
SOURCES = (SourceSpec(SUFFIX_PROMPT, "suffix", "green", found_in="the prompt"),
           SourceSpec(SUFFIX_OUTPUT, "suffix", "green", found_in="this run's output"),
           SourceSpec(SUFFIX_EARLIER, "suffix", "green", found_in="an earlier run on this prompt"),
           SourceSpec(SUFFIX_CORPUS, "suffix", "green", found_in="the model's own answers to other prompts (shipped)"))


class Entry:
    """The finished outputs of one (target, prompt): append-only, so readers need no lock."""

    def __init__(self, prompt: tuple[int, ...]):
        self.prompt = prompt
        self.texts: list[Text] = []  # prompt + output, only the output's positions listed
        self.weights: list[int] = []  # runs that produced each text
        self.index: dict[tuple[int, ...], int] = {}
        self.runs: OrderedDict[str, None] = OrderedDict()

    def add(self, run_id: str, output: tuple[int, ...]) -> None:
        if run_id in self.runs or not output:
            return
        self.runs[run_id] = None
        if len(self.runs) > MAX_RUNS:
            self.runs.popitem(last=False)
        at = self.index.get(output)
        if at is not None:
            self.weights[at] += 1
        elif len(self.texts) < MAX_OUTPUTS:
            self.index[output] = len(self.texts)
            self.weights.append(1)  # before the text: a reader iterates over texts
            self.texts.append(Text(self.prompt + output, start=len(self.prompt) - 1))


class EarlierRuns:
    """Finished runs' outputs by target model and exact prompt ids, bounded and thread-safe.
    A model that is freed takes its entries with it (weak keys)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._models: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def entry(self, model, prompt) -> Entry:
        """The entry of (model, prompt), made if new; the least recently used prompt goes past MAX_PROMPTS."""
        prompt = tuple(prompt)
        with self._lock:
            prompts = self._models.setdefault(model, OrderedDict())
            entry = prompts.get(prompt)
            if entry is None:
                entry = prompts[prompt] = Entry(prompt)
                while len(prompts) > MAX_PROMPTS:
                    prompts.popitem(last=False)
            prompts.move_to_end(prompt)
            return entry

    def record(self, model, prompt, output, run_id: str) -> None:
        """A finished run's output; the same run id twice counts once."""
        entry = self.entry(model, prompt)
        with self._lock:
            entry.add(run_id, tuple(output))

    def clear(self) -> None:
        with self._lock:
            self._models = weakref.WeakKeyDictionary()

    def _fresh_lock(self) -> None:
        self._lock = threading.Lock()


EARLIER = EarlierRuns()
_LOCAL = threading.local()  # measurements: see unshared()


@contextlib.contextmanager
def unshared():
    """Proposers built in this thread meanwhile neither read nor feed the store: a measurement
    (bench, Compare, Advise) must not draft from its own warm-ups and repeats, nor from a class,
    and must not feed a class with its prompts."""
    before = getattr(_LOCAL, "off", False)
    _LOCAL.off = True
    try:
        yield
    finally:
        _LOCAL.off = before
os.register_at_fork(after_in_child=EARLIER._fresh_lock)  # a lock held at fork would stay held in the child


def weakly_held(model) -> bool:
    """Whether `model` can key the store (a weak reference to it can be made)."""
    try:
        weakref.ref(model)
    except TypeError:
        return False
    return True


def remember(model, state) -> None:
    """Feed a finished run (a RunState) of a method that learns here (its spec's `learns`) into this
    process's store: the main process calls it through proposers.remember where a worker's state comes
    back (on ZeroGPU the worker's store is lost)."""
    if state.done and state.options.get("share", True) is not False \
            and state.options.get("suffix", True) is not False and weakly_held(model):
        EARLIER.record(model, state.prompt_ids, state.ids[len(state.prompt_ids):], state.run_id)


class SuffixProposer(Proposer):
    """Knobs: `capacity` nodes offered, `spec_factor` nodes per matched token, `min_prob` the least
    share of occurrences a node keeps, `patterns` pattern lengths tried, `share` whether to draft
    from and feed earlier runs on the same target and prompt, `corpus` whether to draft from the
    shipped answer corpus where the target has one (corpus.py; each tree at most `capacity` nodes)."""
    spec = MethodSpec(
        "suffix", "Suffix decoding (prompt, output, earlier runs)",
        "drafts a tree of what followed the context's suffix in the prompt, the output, earlier runs on this prompt "
        "and, for the bundled model, its own answers to other prompts",
        default_k=16, learns="suffix", sources=SOURCES,
        knobs=(Knob("capacity", "Tree size cap (nodes)", "int", 1, 128),
               Knob("min_prob", "Least share of occurrences a node keeps", "float", 0.0, 1.0, 0.05,
                    info="A continuation that followed the matched suffix less often than this share is left out."),
               Knob("share", "Draft from earlier runs on this prompt (a class)", "bool",
                    info="Runs on exactly this target and prompt, in this server; never another prompt's text."),
               Knob("corpus", "Draft from the model's own answers to other prompts", "bool",
                    info="A fixed corpus shipped for the bundled model (assets/corpus); other models have none.")))
    KNOBS = ("capacity", "spec_factor", "min_prob", "patterns", "share", "corpus")

    def __init__(self, model=None, capacity: int = CAPACITY, spec_factor: float = SPEC_FACTOR,
                 min_prob: float = MIN_PROB, patterns: int = PATTERNS, share: bool = True,
                 store: EarlierRuns = EARLIER, corpus: Corpus | None = None):
        if capacity < 1 or spec_factor <= 0 or not 0 <= min_prob <= 1 or patterns < 1:
            raise ValueError("suffix needs capacity ≥ 1, spec_factor > 0, 0 ≤ min_prob ≤ 1 and patterns ≥ 1; "
                             f"got {capacity}, {spec_factor}, {min_prob}, {patterns}")
        self.model, self.store, self.corpus = model, store, corpus
        self.capacity, self.spec_factor, self.min_prob = int(capacity), float(spec_factor), float(min_prob)
        self.patterns = int(patterns)
        self.share = bool(share) and weakly_held(model) and not getattr(_LOCAL, "off", False)
        self.own = Text(origin=SUFFIX_OUTPUT)
        self.pinned: list[tuple[tuple[int, ...], int]] | None = None  # (output, weight) drafted from; None: unread
        self._texts: list[tuple[Text, int]] | None = None  # the pinned outputs as searchable texts, in this process

    @classmethod
    def build(cls, target=None, draft=None, corpus: bool = True, **knobs):
        if draft is not None:
            raise ValueError("method 'suffix' drafts from text seen before; do not pass a draft model")
        cls.check_knobs(knobs)
        found = for_target(target) if corpus and target is not None else None
        return cls(None if target is None else target.model, corpus=found, **knobs)

    def start(self, ids: list[int]) -> None:
        self.own = Text(origin=SUFFIX_OUTPUT)
        self.pinned = None
        self._texts = None

    def pin(self, ctx: ProposeContext) -> list[tuple[Text, int]]:
        """The earlier runs' texts and weights this run drafts from: read from the store at its first
        draft (or a hybrid's first cycle, drafted or not), then pinned for the whole run (the store
        grows as other runs end, and differs between processes); rebuilt from the pinned outputs in
        a process that resumed the run."""
        if self.pinned is None:
            entry = self.store.entry(self.model, ctx.ids[: ctx.prompt_len]) if self.share else None
            # weights first: Entry.add appends a weight before its text, so every text read has one
            weights = [] if entry is None else list(entry.weights)
            self._texts = [] if entry is None else list(zip(list(entry.texts), weights))
            self.pinned = [(tuple(text.ids[text.start + 1:]), w) for text, w in self._texts]
        if self._texts is None:
            prompt = list(ctx.ids[: ctx.prompt_len])
            self._texts = [(Text(prompt + list(out), start=len(prompt) - 1), w) for out, w in self.pinned]
        return self._texts

    def state(self) -> dict:
        """The earlier outputs (prompt left out) and weights the run pinned, once it has drafted."""
        return {} if self.pinned is None else {"earlier": [(list(out), w) for out, w in self.pinned]}

    def set_state(self, state: dict) -> None:
        """Draft from what the run pinned, whatever this process's store holds."""
        if "earlier" in state:
            self.pinned = [(tuple(out), int(w)) for out, w in state["earlier"]]
            self._texts = None

    def propose(self, ctx: ProposeContext) -> DraftTree:
        self.own.sync(ctx.ids)
        own = lambda after: SUFFIX_PROMPT if after < ctx.prompt_len else SUFFIX_OUTPUT
        found = occurrences(self.own, ctx.ids, 1, own)
        for text, weight in self.pin(ctx):
            found += occurrences(text, ctx.ids, weight, lambda after: SUFFIX_EARLIER)
        if ctx.k < 1:
            return DraftTree(retrieval_hit=False)
        grown = [self._grown(found, ctx.k)]
        if self.corpus is not None:
            grown.append(self._grown(self.corpus.occurrences(ctx.ids), ctx.k))
        grown = [g for g in grown if g is not None]
        if not grown:
            return DraftTree(retrieval_hit=False)
        tree = grown[0].tree
        for other in grown[1:]:
            tree = merge(tree, other.tree, greedy=False)  # point masses both: a repeat merges under either rule
        tree.retrieval_hit, tree.match = True, match_of(grown[0], ctx.k)
        return tree

    def _grown(self, found, k: int):
        return best_tree(found, k, self.capacity, self.spec_factor, self.min_prob, self.patterns) if found else None

    def finish(self, run_id: str, ids: list[int], prompt_len: int) -> None:
        if self.share:
            self.store.record(self.model, ids[:prompt_len], ids[prompt_len:], run_id)
