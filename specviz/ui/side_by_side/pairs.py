"""Ready-made pairs for the Side by side tab: two recorded runs of one prompt, each with a sentence
on what to look for. They paint at once, with no model loaded.

Most sides are the lessons' recordings (assets/lessons, made by scripts/assets/make_lesson_traces.py);
RECORDED_SIDES are the runs only a pair uses, recorded by the same script into the same folder.
"""
from __future__ import annotations

from dataclasses import dataclass

from specviz.decoding.tracefile import TraceFile
from specviz.proposers import HEAD_DRAFT
from specviz.ui.runtime.settings import RunSettings
from specviz.ui.shared.recordings import LESSON_TOKENS as TOKENS
from specviz.ui.shared.recordings import example_prompt, lesson_trace

CHAT, SUMMARY = example_prompt("Chat"), example_prompt("Summarise")  # two of the lessons' prompts
CODE = example_prompt("Code edit")  # the page's first example: the one a class would decode together
GEMMA = "gemma3-270m"  # the second offline model (loading/gemma.py): another family, no chat template
CLASS_BEFORE = 29  # students before the recorded one: the class of 30 that docs/BENCHMARKS.md measures


@dataclass(frozen=True)
class Pair:
    key: str  # the shared link's ?pair= value
    title: str
    look_for: str
    a: str  # recording files (assets/lessons/<file>.json)
    b: str


# Runs that no lesson records: the trained head as a draft model on two of the lessons' prompts, as
# Decode runs it (planner on); the lessons' runs they are set against keep a fixed K (decode/lessons._s).
# scripts/assets/make_lesson_traces.py records both sides of every pair in one sitting.
RECORDED_SIDES = {
    "pair-head-chat": RunSettings(prompt=CHAT, proposer="draft", draft=HEAD_DRAFT, k=4, max_new_tokens=TOKENS),
    "pair-head-summary": RunSettings(prompt=SUMMARY, proposer="draft", draft=HEAD_DRAFT, k=4, max_new_tokens=TOKENS),
    # the 30th student of a class on the first example prompt (CLASS_BEFORE runs recorded first), and
    # prompt lookup on the same prompt, which has no class to learn from
    "pair-class-suffix": RunSettings(prompt=CODE, proposer="suffix", k=16, max_new_tokens=TOKENS),
    "pair-class-pld": RunSettings(prompt=CODE, proposer="pld", k=16, max_new_tokens=TOKENS),
    # two families on one prompt, each with its best proposer (SmolLM2 with its chat template; Gemma 3
    # 270M has none, so it continues the raw text), and SmolLM2 drafting for Gemma across the two
    # tokenizers, every cycle sent (plan=False: the planner would judge this draft too dear to send on
    # this CPU, and the pair is there to show the seam)
    "pair-family-smollm2": RunSettings(prompt=SUMMARY, proposer="hybrid", k=16, max_new_tokens=TOKENS),
    # Gemma's best on the benchmark prompts is prompt lookup alone (docs/BENCHMARKS.md, "Gemma 3 270M")
    "pair-family-gemma": RunSettings(prompt=SUMMARY, target=GEMMA, proposer="pld", k=16, max_new_tokens=TOKENS,
                                     draft=None),
    "pair-cross-draft": RunSettings(prompt=SUMMARY, target=GEMMA, proposer="draft", draft="bundled", k=4,
                                    max_new_tokens=TOKENS, chat=False, plan=False),
    "pair-cross-lookup": RunSettings(prompt=SUMMARY, target=GEMMA, proposer="pld", k=16, max_new_tokens=TOKENS,
                                     chat=False, draft=None),
}

PAIRS = (
    Pair("good-vs-bad", "A good draft against a bad one",
         "The trained head (A) is right about half the time, so most cycles commit two or more tokens; the "
         "untrained layer skip (B) is rarely right, so it pays a draft and a verify pass for about one token. "
         "Watch the tokens per cycle and the race chart: B falls behind plain decoding. (A runs as Decode does, "
         "its planner on; B at a fixed K, as its lesson does, so that it shows what a bad draft costs.)",
         "pair-head-chat", "bad-draft"),
    Pair("greedy-vs-sampling", "Greedy against T = 1",
         "The same proposer and K: greedy (A) accepts a draft only when it equals the target's argmax; at T = 1 "
         "(B) it accepts with probability min(1, p/q) and draws replacements from the residual. The outputs part "
         "ways at the first sampled choice; both still follow the target's distribution.",
         "greedy", "sampling"),
    Pair("small-vs-large-k", "K = 2 against K = 12",
         "With a draft that is usually wrong after a few tokens, a long draft (B) mostly verifies tokens that are "
         "rejected: look at acceptance by position, and at the time each side spends drafting.",
         "k-small", "k-too-large"),
    Pair("draft-vs-lookup", "A draft model against prompt lookup on a summary",
         "Summarising copies from the prompt: prompt lookup (B) finds long runs to copy for free, while the draft "
         "head (A) guesses every token with a model step. Compare tokens per cycle with what each cycle costs.",
         "pair-head-summary", "retrieval-summary"),
    Pair("lookup-vs-logitspec", "Prompt lookup against LogitSpec",
         "On a maths question the text rarely repeats, so prompt lookup (A) often finds nothing; LogitSpec (B) "
         "also retrieves with the next-next token guessed from the last logits, and rescues some of those cycles.",
         "logitspec-rescue-pld", "logitspec-rescue"),
    Pair("class-vs-lookup", "The suffix tree of a class against prompt lookup",
         "Thirty students decode the same example prompt. Suffix decoding (A, the 30th student) drafts from "
         "the earlier students' outputs on exactly this prompt, so its drafts are long and right; prompt lookup "
         "(B) copies only from this run's own prompt and output. Hover a node of A's tree: its source says "
         "'an earlier run on this prompt', and the narration highlights the matched suffix.",
         "pair-class-suffix", "pair-class-pld"),
    Pair("two-families", "Two model families on one prompt",
         "SmolLM2-135M (A, Llama's shape, 49,152 tokens; the hybrid) and Gemma 3 270M (B, sliding-window layers, "
         "262,144 tokens; prompt lookup), each with its best proposer on the same summary prompt (SmolLM2 "
         "through its chat template; Gemma is a base model with none, so it continues the raw text). Their tokens "
         "differ from the first, "
         "as two models' must; compare tokens per cycle, and what a cycle costs each: Gemma's larger vocabulary "
         "makes every pass dearer.",
         "pair-family-smollm2", "pair-family-gemma"),
    Pair("cross-family-draft", "A draft from another family against prompt lookup on Gemma",
         "SmolLM2-135M drafts for Gemma 3 270M (A) although their tokenizers differ: its tokens are decoded to "
         "text and encoded again as Gemma's, and the narration shows the seam between the two tokenizers. "
         "Prompt lookup (B) needs no draft model. Both outputs are Gemma's greedy output, token for token. (A "
         "sends every draft, its planner off: on this CPU the planner finds this draft too dear to send.)",
         "pair-cross-draft", "pair-cross-lookup"),
)
BY_KEY = {p.key: p for p in PAIRS}
FIRST_PAIR = PAIRS[0]  # on screen when the tab opens, and in a new visitor's columns (handlers.columns)


def pair_traces(pair: Pair) -> tuple[TraceFile | None, TraceFile | None]:
    """The pair's two recordings (None where one is missing)."""
    return lesson_trace(pair.a), lesson_trace(pair.b)
