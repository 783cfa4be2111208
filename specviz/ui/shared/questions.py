"""Where Compare's and Advise's prompts come from: the typed box, Spec-Bench's public subset, or an
uploaded question file (Spec-Bench's `question.jsonl` format, read by measure/specbench.py).

One builder of the three inputs (`build`) and one reader (`questions_of`) for both tabs, so the choices,
the count's range and the messages for a bad file are the same on each. A bad file raises
`QuestionFileError`, a ValueError whose one sentence the tab's guard shows in its status line; the
tab's other inputs are never among the outputs, so nothing the visitor typed is lost.
"""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from specviz.measure.question_runs import spread
from specviz.measure.specbench import PUBLIC_LABEL, Question, QuestionFileError, read_questions

TYPED = "Typed prompt"
UPLOADED = "Uploaded question file"
SOURCES = (TYPED, PUBLIC_LABEL, UPLOADED)
SOURCE_INFO = ("Spec-Bench: the field's benchmark, by category (assets/specbench/README.md). A question file is "
               "one JSON object a line with question_id, category and turns, as Spec-Bench's question.jsonl.")


def build(prefix: str, count: int, most: int, typed: str = TYPED) -> dict:
    """The source picker, the file box (shown for an uploaded file) and the number of questions;
    element ids are `sv-{prefix}-source`, `-questions` and `-count`."""
    with gr.Row():
        source = gr.Radio([typed, PUBLIC_LABEL, UPLOADED], value=typed, label="Prompts from", info=SOURCE_INFO,
                          elem_id=f"sv-{prefix}-source")
        count = gr.Slider(1, most, value=count, step=1, precision=0, elem_id=f"sv-{prefix}-count",
                          label="Questions (one leaderboard category at a time)", min_width=200)
        file = gr.File(label="Question file (.jsonl)", file_types=[".jsonl"], type="filepath", height=90,
                       visible=False, elem_id=f"sv-{prefix}-questions")
    source.change(lambda s: gr.update(visible=s == UPLOADED), inputs=source, outputs=file, show_progress="hidden",
                  api_visibility="private")
    return {"source": source, "questions_file": file, "count": count}


def questions_of(source: str | None, file, count) -> list[Question] | None:
    """The questions the visitor picked, `count` of them spread over the categories; None for typed prompts.
    A missing or bad file raises QuestionFileError with the sentence to show."""
    if source not in (PUBLIC_LABEL, UPLOADED):
        return None
    if source == UPLOADED:
        path = getattr(file, "name", file)
        if not path:
            raise QuestionFileError("No question file yet: upload a .jsonl file (one Spec-Bench question a line), "
                                    f"or pick '{PUBLIC_LABEL}'.")
        try:
            questions = read_questions(Path(path))
        except QuestionFileError as e:
            raise QuestionFileError(f"{Path(path).name}: {e}") from None
    else:
        questions = read_questions()
    return spread(questions, int(count or 1))


def described(questions: list[Question], source: str) -> str:
    """'Spec-Bench (public subset): 84 (writing), 122 (translation), …' for the status line and a survey."""
    return f"{source}: " + ", ".join(f"{q.id} ({q.category})" for q in questions)
