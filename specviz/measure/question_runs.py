"""Compare's configurations on each of several Spec-Bench questions, and the questions a short run takes.

`spread(questions, n)` picks n questions a category row at a time (one from each leaderboard row in
Spec-Bench's order, then a second from each, …), so a short run on a slow machine still covers the
categories instead of the first file's eight MT-bench questions. `QuestionComparison` runs one
`Comparison` per question, in turn: the rows warm up on the first question only, and every result row
keeps its question's id and category. No UI libraries here; ui/compare.py drives it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterator

from specviz.loading.loader import LoadedModel
from specviz.measure.comparison import Comparison, Config, Measured, Shared
from specviz.measure.specbench import Question


def spread(questions: list[Question], n: int) -> list[Question]:
    """n questions taken a leaderboard row at a time; inside a row, one of its categories at a time
    (MT-bench's writing, roleplay, …), each in file order."""
    rows: dict[str, dict[str, list[Question]]] = {}
    for q in questions:
        rows.setdefault(q.group, {}).setdefault(q.category, []).append(q)
    queues = [_interleave(list(by_category.values())) for by_category in rows.values()]
    return _interleave(queues)[: max(n, 0)]


def _interleave(lists: list[list]) -> list:
    """The first of each list, then the second of each, …"""
    out = []
    for i in range(max((len(x) for x in lists), default=0)):
        out += [x[i] for x in lists if i < len(x)]
    return out


@dataclass
class QuestionComparison:
    """Every configuration timed on each question against its AR baseline, one question after another.

    It answers what ui/compare.py and runtime/work.py ask of a `Comparison` (items, configs, total,
    done, preload, run, rows, baseline_rows); `measured` is the first question's, the run the Theory
    tab explains."""
    items: list[Config | str]
    questions: list[Question]
    shared: Shared  # the settings and repeats; each question's own text replaces its prompt
    parts: list[Comparison] = field(init=False)

    def __post_init__(self):
        self.parts = [Comparison(self.items, replace(self.shared, prompt=q.prompt), warm_up=i == 0)
                      for i, q in enumerate(self.questions)]

    @property
    def configs(self) -> list[Config]:
        return [c for c in self.items if isinstance(c, Config)]

    @property
    def total(self) -> int:
        return sum(p.total for p in self.parts)

    @property
    def done(self) -> int:
        return sum(p.done for p in self.parts)

    def preload(self, get_model: Callable[[str], LoadedModel]) -> None:
        """Load every row's models once; a model that failed fails that row on every question."""
        self.parts[0].preload(get_model)
        for part in self.parts[1:]:
            part.errors.update(self.parts[0].errors)

    def run(self, get_model: Callable[[str], LoadedModel],
            should_stop: Callable[[], bool] = lambda: False) -> Iterator[str]:
        """Each question in turn; yields a progress message, naming the question, after every decode."""
        for i, (q, part) in enumerate(zip(self.questions, self.parts)):
            for message in part.run(get_model, should_stop):
                yield f"Question {i + 1}/{len(self.parts)} ({q.category}, id {q.id}): {message}"

    def measured(self, config: Config) -> Measured | None:
        return self.parts[0].measured(config) if self.parts else None

    def rows(self) -> list[dict]:
        """Compare's rows for every question, question by question, each with its question's id,
        category, leaderboard row and text."""
        return [dict(row, **_about(q)) for q, part in zip(self.questions, self.parts) for row in part.rows()]

    def baseline_rows(self) -> list[dict]:
        return [dict(row, **_about(q)) for q, part in zip(self.questions, self.parts) for row in part.baseline_rows()]


def _about(q: Question) -> dict:
    return {"question_id": q.id, "category": q.category, "group": q.group, "question": q.prompt}
