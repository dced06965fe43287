"""The [`Example`][] record and dataset names."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError

JSONValue: TypeAlias = str | int | float | bool | list["JSONValue"] | dict[str, "JSONValue"] | None
"""Any value a JSON document can hold."""

PathLike: TypeAlias = str | os.PathLike[str]
"""A file path."""

_FileKind: TypeAlias = Literal["json", "jsonl", "text"]

DATASET_NAMES: tuple[str, ...] = (
    "2wikimultihopqa",
    "hotpotqa",
    "iirc",
    "strategyqa",
    "nq",
    "triviaqa",
    "squad",
    "popqa",
    "retrievalqa",
    "musique",
)
"""The dataset names [`load_dataset`][] accepts (see [`canonical_dataset_name`][])."""

_SYNONYMS: dict[str, str] = {
    "2wiki": "2wikimultihopqa",
    "2wikimqa": "2wikimultihopqa",
    "wikimultihopqa": "2wikimultihopqa",
    "hotpot": "hotpotqa",
    "naturalquestions": "nq",
    "nqopen": "nq",
    "trivia": "triviaqa",
    "tqa": "triviaqa",
    "squadv11": "squad",
    "squad11": "squad",
}

_NO_ANSWER = "noanswer"


def canonical_dataset_name(name: str) -> str:
    """Map a dataset name to its canonical spelling in [`DATASET_NAMES`][].

    Case, ``-``, ``_``, ``.`` and spaces are ignored, and a few common synonyms are accepted
    (``"2wiki"``, ``"NQ-open"``, ``"natural_questions"``, ``"HotpotQA"``).

    Args:
        name: The name as the user wrote it.

    Returns:
        The canonical name.

    Raises:
        AdaptiveRAGError: The name is not one of the supported datasets.
    """
    key = "".join(ch for ch in name.lower() if ch not in "-_. ")
    key = _SYNONYMS.get(key, key)
    if key not in DATASET_NAMES:
        msg = f"Unknown dataset name {name!r}. Expected one of: {', '.join(DATASET_NAMES)}."
        raise AdaptiveRAGError(msg)
    return key


@dataclass(frozen=True)
class Example:
    """One evaluation question with its gold answers.

    Attributes:
        id: The question id from the file (or ``"<dataset>-<n>"`` when the file has none,
            n counting examples from 0).
        question: The question text.
        answers: Every acceptable gold answer, aliases included, first the main one; never
            empty. StrategyQA's is ``("yes",)`` or ``("no",)``.
        dataset: The canonical dataset name.
        supporting: Gold passages (``metadata``: ``id``, ``title`` and, where known,
            ``idx``, ``is_supporting``, ``supporting_sentences``).
        context: All passages the file gives with the question (distractor paragraphs,
            pre-retrieved snippets), gold ones included; empty for open-domain files.
        type: Question type (HotpotQA ``bridge``/``comparison``, 2WikiMultihopQA
            ``compositional``/``inference``/...), IIRC answer type, or ``None``.
        level: HotpotQA difficulty (``easy``/``medium``/``hard``) or ``None``.
        answer_bool: StrategyQA's boolean answer; ``None`` elsewhere.
        param_knowledge_answerable: RetrievalQA's label: 1 when the model's own knowledge
            suffices, 0 when retrieval is needed; ``None`` when the file has no label.
        extra: Every other field of the record, as read (``facts``, ``decomposition``,
            ``evidences``, ``answer_id``, ``data_source``, ``s_pop``, ...).
    """

    id: str
    question: str
    answers: tuple[str, ...]
    dataset: str
    supporting: tuple[Document, ...] = ()
    context: tuple[Document, ...] = ()
    type: str | None = None
    level: str | None = None
    answer_bool: bool | None = None
    param_knowledge_answerable: int | None = None
    extra: Mapping[str, JSONValue] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.answers or not all(isinstance(a, str) for a in self.answers):
            msg = (
                f"Example {self.id!r} received answers={self.answers!r}; expected a "
                "non-empty tuple of strings."
            )
            raise AdaptiveRAGError(msg)

    @property
    def answer(self) -> str:
        """The main gold answer (the first of ``answers``)."""
        return self.answers[0]

    @property
    def needs_retrieval(self) -> bool | None:
        """Whether the question needs retrieval (RetrievalQA's label), or ``None``."""
        if self.param_knowledge_answerable is None:
            return None
        return self.param_knowledge_answerable == 0
