"""Spec-Bench's questions: the shipped public subset or a user's `question.jsonl`, read and grouped.

Spec-Bench (Xia et al., Findings of ACL 2024) is the field's benchmark for speculative decoding: 13
categories, and a leaderboard that reports one speedup per task. Its file has one JSON object a line,
`{"question_id", "category", "turns"}` (and `reference` for some MT-bench questions); SpecViz decodes
the first turn. Source, licence and the datasets behind the questions: assets/specbench/README.md.

A file that is not such a list is refused with one sentence that names the line and what to do
(`QuestionFileError`); reading never raises anything else for bad text.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import Field

from specviz.decoding.upload import UPLOAD, Reader, shown, text

PUBLIC_SUBSET = Path(__file__).resolve().parents[2] / "assets" / "specbench" / "question_public.jsonl"
PUBLIC_LABEL = "Spec-Bench (public subset)"

# Spec-Bench's full file is about 1.6 MB (80 summarisation articles are most of it); a cap far above
# it, so a wrong file is refused before it is read into memory.
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_QUESTIONS = 2000  # Spec-Bench has 480; a run over more is not what this reader is for
MAX_PROMPT_CHARS = 60_000  # the longest Spec-Bench article is about 12 000 characters

# The leaderboard's rows: the eight MT-bench categories are one row, "Multi-turn conversation".
MT_BENCH = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
GROUPS = {**{c: "Multi-turn conversation" for c in MT_BENCH},
          "translation": "Translation", "summarization": "Summarization", "qa": "Question answering",
          "math_reasoning": "Mathematical reasoning", "rag": "Retrieval-aug. generation"}
CATEGORIES = tuple(GROUPS)  # Spec-Bench's order
ALL = "Overall"


class QuestionFileError(ValueError):
    """A question file that cannot be read, in one sentence that says where and what to do."""


@dataclasses.dataclass(frozen=True)
class _Line:
    """One line of a question file, as Spec-Bench writes it; the schema a line is read against."""
    __pydantic_config__ = UPLOAD

    question_id: Union[Annotated[int, Field(ge=0, le=10**9)], text(64)]
    category: Annotated[str, Field(min_length=1, max_length=64)]
    turns: Annotated[list[Annotated[str, Field(max_length=MAX_PROMPT_CHARS)]], Field(min_length=1, max_length=8)]
    reference: Any = None  # answers some MT-bench and RAG questions carry; not read, bounded by the file's size


@dataclasses.dataclass(frozen=True)
class Question:
    """A question as the bench takes it: its id, its category and the first turn as the prompt."""
    id: str
    category: str
    prompt: str

    @property
    def group(self) -> str:
        """The leaderboard's row for this question (an unknown category is a row of its own)."""
        return GROUPS.get(self.category, self.category)


_READER = Reader(_Line, {(): "the question"}, "a Spec-Bench question", error=QuestionFileError)
_HOW = ("each line must be one JSON object with question_id, category and turns (a list of text), "
        "as in Spec-Bench's question.jsonl")


def read_questions(path: str | Path | None = None) -> list[Question]:
    """The questions of a Spec-Bench question file (the public subset when path is None)."""
    path = Path(path) if path is not None else PUBLIC_SUBSET
    try:
        size = path.stat().st_size
    except OSError as e:
        raise QuestionFileError(f"Cannot read the question file {str(path)!r}: {e.strerror or e}.") from None
    if size > MAX_FILE_BYTES:
        raise QuestionFileError(f"The question file is {size / 2**20:.0f} MB, more than the "
                                f"{MAX_FILE_BYTES // 2**20} MB a question file may have (Spec-Bench's is under 2 MB): "
                                "pick the question.jsonl itself.")
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise QuestionFileError(f"Cannot read the question file {str(path)!r}: {e.strerror or e}.") from None
    return parse_questions(raw)


def parse_questions(raw: str | bytes) -> list[Question]:
    """The questions in a question file's text; `QuestionFileError` names the first bad line."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise QuestionFileError(f"The question file is not UTF-8 text (byte {e.start}): "
                                    "save it as UTF-8.") from None
    out: list[Question] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        q = _question(line, n)
        if q.id in seen:
            raise QuestionFileError(f"Line {n}: question_id {q.id} is also on line {seen[q.id]}; ids must be unique.")
        seen[q.id] = n
        out.append(q)
        if len(out) > MAX_QUESTIONS:
            raise QuestionFileError(f"Line {n}: more than {MAX_QUESTIONS} questions; split the file.")
    if not out:
        raise QuestionFileError(f"The question file has no questions: {_HOW}.")
    return out


def _question(line: str, n: int) -> Question:
    try:
        obj = json.loads(line)
    except ValueError:
        raise QuestionFileError(f"Line {n} is not JSON: {_HOW}.") from None
    if isinstance(obj, dict):  # what pydantic's words for a union or a lower bound would not say plainly
        qid = obj.get("question_id")
        if "question_id" in obj and (isinstance(qid, bool) or not isinstance(qid, (int, str))):
            raise QuestionFileError(f"Line {n}: 'question_id' must be a whole number or text, got {shown(qid)}.")
        if obj.get("category") == "" or obj.get("turns") == []:
            empty = "category" if obj.get("category") == "" else "turns"
            raise QuestionFileError(f"Line {n}: '{empty}' is empty; {_HOW}.")
    try:
        row = _READER(line)
    except QuestionFileError as e:
        detail = str(e).removeprefix("the question: ").rstrip(".")
        raise QuestionFileError(f"Line {n}: {detail}; {_HOW}.") from None
    if not row.turns[0].strip():
        raise QuestionFileError(f"Line {n}: the first turn is empty; it is the prompt that is decoded.")
    return Question(id=str(row.question_id), category=row.category, prompt=row.turns[0])


def as_prompts(questions: list[Question]) -> list[dict]:
    """The bench's prompt list ({id, cat, prompt}) for these questions, in their order."""
    return [{"id": q.id, "cat": q.category, "prompt": q.prompt} for q in questions]


def row_of(category: str, split_mt: bool = False) -> str:
    """The leaderboard row a category's questions go to: its group ("Multi-turn conversation" for the
    MT-bench categories, unless split_mt keeps each its own row), or itself when Spec-Bench has no such
    category."""
    if category not in GROUPS or (split_mt and category in MT_BENCH):
        return category
    return GROUPS[category]


def group_rows(categories: dict[str, str], split_mt: bool = False) -> dict[str, list[str]]:
    """The leaderboard's rows for prompts given as {id: category}: row name → prompt ids, in Spec-Bench's
    order, then unknown categories, then `ALL`. With split_mt each MT-bench category is a row of its own
    (placed where "Multi-turn conversation" would be). A row with no prompt is left out."""
    rows: dict[str, list[str]] = {}
    order = [row_of(c, split_mt) for c in CATEGORIES]
    order += sorted({c for c in categories.values() if c not in GROUPS})
    for name in dict.fromkeys(order):
        ids = [pid for pid, c in categories.items() if row_of(c, split_mt) == name]
        if ids:
            rows[name] = ids
    rows[ALL] = list(categories)
    return rows


def missing_rows(categories: dict[str, str], split_mt: bool = False) -> list[str]:
    """The leaderboard's rows that have no prompt here (left out of the table, with a note)."""
    present = group_rows(categories, split_mt)
    names = dict.fromkeys(row_of(c, split_mt) for c in CATEGORIES)
    return [name for name in names if name not in present]
