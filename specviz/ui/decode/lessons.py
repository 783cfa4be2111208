"""Lessons: one click loads a recorded run (assets/lessons/*.json), its settings and prompt, and
a paragraph on what to look for. The recordings replay before any model loads; Step or Run
then decodes the same settings live. `scripts/assets/make_lesson_traces.py` records them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import gradio as gr

from specviz.decoding.tracefile import TraceFile
from specviz.ui.runtime.presets import knobs
from specviz.ui.runtime.settings import BASE_INPUTS, RunSettings
from specviz.ui.runtime.state import session_of
from specviz.ui.shared import views
from specviz.ui.shared.recordings import LESSON_TOKENS as TOKENS
from specviz.ui.shared.recordings import example_prompt, lesson_trace
from specviz.ui.shared.replay import play_frames, show_trace
from specviz.viz.style import esc

SUMMARY, CHAT, MATHS = example_prompt("Summarise"), example_prompt("Chat"), example_prompt("Maths")
HINT = ('<div class="sv-lesson-hint">Each lesson plays a recorded run in every view below, sets the '
        'configuration to match, and says what to look for. No model is needed until you press Step or Run.</div>')


@dataclass(frozen=True)
class Variant:
    label: str
    file: str  # assets/lessons/<file>.json
    settings: RunSettings


@dataclass(frozen=True)
class Lesson:
    key: str
    title: str
    paragraph: str
    variants: tuple[Variant, ...]


def _s(prompt: str, method: str, **kw) -> RunSettings:
    """A lesson's settings; K = 4 unless given, as its recording was made (assets/lessons). Planning
    is off: a lesson teaches what a fixed K does (with it on, the planner would stop drafting with a
    draft as costly as the target, and the lesson on agreement would show plain steps)."""
    return RunSettings(prompt=prompt, proposer=method, max_new_tokens=kw.pop("max_new_tokens", TOKENS),
                       k=kw.pop("k", 4), plan=False, **kw)


LESSONS = (
    Lesson("agree", "A draft that agrees",
           "The draft here is the target itself, so p = q at every position: every drafted token is "
           "accepted (α = 1, all ●) and each cycle commits K + 1 = 5 tokens, the bonus included. Now read the "
           "timing panel: this draft costs as much per token as the target, so it cannot win. A real draft is "
           "10–100× cheaper; with α this high it would give up to (K + 1)/(K·c + 1) ≈ 4× at c = 0.05.",
           (Variant("draft = target", "agree", _s(MATHS, "draft", draft="bundled")),)),
    Lesson("bad-draft", "A bad draft slows things down",
           "The draft is the target with its middle third of layers skipped, a model never trained to run "
           "that way. It seldom agrees with the full model (✕ at depth 1), yet each cycle still pays K draft "
           "passes of about ⅔ of a target pass, plus the verify pass. The timing panel shows the bill: "
           "slower than plain decoding. A draft pays only if it is cheap and agrees often.",
           (Variant("layer skip, K = 4", "bad-draft", _s(CHAT, "layerskip")),)),
    Lesson("k-too-large", "K too large",
           "The same layer-skip draft on a summary, where it agrees more often, drafting K = 2 or K = 12 "
           "tokens a cycle. Acceptance falls with depth (roughly α^d), so most of the 12 are never reached "
           "(○), yet each cost a draft pass and widened the verify pass. Tokens per cycle level off near "
           "1/(1 − α) while the cost keeps growing with K. Switch between the two runs and compare the "
           "acceptance-by-position chart, the tree and the speed.",
           (Variant("K = 12", "k-too-large", _s(SUMMARY, "layerskip", k=12)),
            Variant("K = 2", "k-small", _s(SUMMARY, "layerskip", k=2)))),
    Lesson("greedy-sampling", "Greedy against sampling",
           "Greedy keeps a draft only if it is argmax p, so the output is exactly plain greedy decoding. "
           "Sampling keeps it with probability min(1, p/q), comparing a uniform draw r with that number "
           "(see p vs q), and resamples a rejection from the residual: the output is a sample from p, as "
           "plain sampling would be, though not the same text. Switch between the two recorded runs.",
           (Variant("greedy (T = 0)", "greedy", _s(SUMMARY, "layerskip", k=3)),
            Variant("sampling (T = 1)", "sampling", _s(SUMMARY, "layerskip", k=3, temperature=1.0)))),
    Lesson("retrieval", "Retrieval: summary vs chat",
           "Prompt lookup drafts by copying what followed the last few tokens earlier in the prompt. A "
           "summary reuses the prompt's phrases, so lookups hit and whole phrases are accepted at once. Open "
           "chat has little to copy: lookups fail, cycles become plain steps and the speedup disappears. "
           "Compare the number of cycles, the tokens per cycle and the retrieval success of the two runs.",
           (Variant("summarisation", "retrieval-summary", _s(SUMMARY, "pld", k=8)),
            Variant("open chat", "retrieval-chat", _s(CHAT, "pld", k=8)))),
    Lesson("logitspec-rescue", "LogitSpec rescues a failed lookup",
           "LogitSpec adds branches that start from next-next guesses: the top-k tokens of the last logits. "
           "When the plain lookup of the context guesses wrong, one of those branches can still be right, and "
           "its own lookup copies on from there. The recording ends on such a cycle: the lookup's guess is "
           "rejected (✕) and a 'cand …' branch accepted; hover the nodes to read their sources. Then switch "
           "to prompt lookup alone on the same prompt.",
           (Variant("LogitSpec", "logitspec-rescue", _s(MATHS, "logitspec")),
            Variant("prompt lookup alone", "logitspec-rescue-pld", _s(MATHS, "pld")))),
    Lesson("seam", "A draft from another family: the seam",
           "SmolLM2-135M drafts for Gemma 3 270M, though their tokenizers differ (49,152 byte-level pieces "
           "against 262,144 SentencePiece ones). Under the narration, the seam shows the draft's own tokens "
           "and the Gemma tokens their text became: a dashed edge marks where the two split the text "
           "differently. Greedy, the text is encoded again as Gemma's tokens and Gemma checks each against its "
           "argmax, so q plays no part. Sampled, each draft token is drawn from SmolLM2's q kept to the tokens "
           "both vocabularies share, and judged with that q: hover a node to read it. Either way the output is "
           "Gemma's own. (Needs Gemma 3 270M installed to step live: bash scripts/install.sh models.)",
           (Variant("greedy", "seam-greedy", _s(SUMMARY, "draft", target="gemma3-270m", draft="bundled",
                                                 chat=False)),
            Variant("sampled, T = 0.7", "seam-sampled", _s(SUMMARY, "draft", target="gemma3-270m",
                                                           draft="bundled", chat=False, temperature=0.7)))),
)
BY_KEY = {lesson.key: lesson for lesson in LESSONS}


def lesson_html(lesson: Lesson, variant: Variant, trace: TraceFile | None) -> str:
    """The lesson's paragraph, the cycle to look at, and where its timings were measured."""
    meta = trace.meta if trace is not None else {}
    focus, machine = meta.get("focus_cycle"), meta.get("machine")
    notes = [f"Cycle to look at: {focus} (the replay ends there)." if isinstance(focus, int) else "",
             f"Its timings were measured on {machine}." if isinstance(machine, str) else "",
             "Its recording is missing (scripts/assets/make_lesson_traces.py makes it)." if trace is None else "",
             "Step or Run decodes the same settings live, timed on this machine."]
    text = " ".join(n for n in [lesson.paragraph, *notes] if n)
    return f'<div class="sv-lesson"><b>{esc(lesson.title)}</b> · {esc(variant.label)}: {esc(text)}</div>'


def input_values(s: RunSettings, keys: list[str]) -> list:
    """Values for the configuration inputs, in `keys` order; knobs the lesson leaves alone are blank."""
    base = dict(s.as_dict(), draft=s.draft or gr.skip())
    knobs = {f"{s.proposer}_{name}": value for name, value in s.knobs}
    return [base[k] if k in BASE_INPUTS else knobs.get(k, gr.skip()) for k in keys]


def lesson_block() -> dict:
    """One button per lesson, the variant switch and the paragraph; above the three columns."""
    out = {}
    with gr.Accordion("Lessons: one click loads a recorded run, its settings and what to look for",
                      open=True, elem_id="sv-lessons"):
        with gr.Row(elem_id="sv-lesson-buttons"):
            for lesson in LESSONS:
                out[f"lesson_{lesson.key}"] = gr.Button(lesson.title, size="sm", min_width=120,
                                                        elem_id=f"sv-lesson-{lesson.key}")
        out["lesson_variant"] = gr.Radio([], label="Recorded run", visible=False, elem_id="sv-lesson-variant")
        out["lesson_text"] = gr.HTML(HINT, elem_id="sv-lesson-text")
        out["lesson_key"] = gr.State(None)
    return out


def wire_lessons(comps: dict, inputs: dict) -> None:
    """Each button plays its lesson's first run; the variant switch plays another."""
    knob_keys = {k.key for k in knobs()}
    keys = [k for k in inputs if k in BASE_INPUTS or k in knob_keys]
    outputs = [comps[n] for n in views.OUTPUTS] + [inputs[k] for k in keys] + [
        comps["lesson_variant"], comps["lesson_text"], comps["lesson_key"]]
    common = dict(outputs=outputs, show_progress="hidden", concurrency_limit=8)
    for lesson in LESSONS:
        api = "lesson_" + lesson.key.replace("-", "_")
        comps[f"lesson_{lesson.key}"].click(_player(lesson.key, keys), api_name=api, **common)
    comps["lesson_variant"].input(_variant_player(keys), inputs=[comps["lesson_key"], comps["lesson_variant"]],
                                  api_visibility="private", **common)


def play(key: str, label: str | None, keys: list[str], request) -> Iterator[tuple]:
    """Load the lesson's settings and paragraph, then play its recording cycle by cycle."""
    lesson = BY_KEY[key]
    variant = next((v for v in lesson.variants if v.label == label), lesson.variants[0])
    trace = lesson_trace(variant.file)
    session = session_of(request)
    labels = [v.label for v in lesson.variants]
    extra = [gr.update(choices=labels, value=variant.label, visible=len(labels) > 1),
             lesson_html(lesson, variant, trace), key]
    settings = input_values(variant.settings, keys)
    if trace is None:
        session.replace(None, None)
        yield views.as_tuple(views.only(status=views.status_html(
            f"Lesson '{lesson.title}' loaded its settings; press Step or Run to decode it.", "warn"))) + (
            *settings, *extra)
        return
    show_trace(session, trace)
    skip = tuple(gr.skip() for _ in (*settings, *extra))
    for i, frame in enumerate(play_frames(session, trace, trace.meta.get("focus_cycle"))):
        yield views.as_tuple(frame) + ((*settings, *extra) if i == 0 else skip)


def _player(key: str, keys: list[str]):
    def play_lesson(request: gr.Request) -> Iterator[tuple]:
        yield from play(key, None, keys, request)
    play_lesson.__doc__ = f"Play the lesson '{BY_KEY[key].title}' from its recording."
    return play_lesson


def _variant_player(keys: list[str]):
    def play_variant(key: str | None, label: str | None, request: gr.Request) -> Iterator[tuple]:
        """Play another recorded run of the lesson on screen."""
        if key not in BY_KEY:
            return
        yield from play(key, label, keys, request)
    return play_variant
