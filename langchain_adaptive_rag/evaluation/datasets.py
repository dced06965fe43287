"""Question-answering datasets in their native file formats, as :class:`Example` objects.

Supported files (the format is detected from the content; the name only labels and checks):

- HotpotQA ``hotpot_dev_distractor_v1.json`` / ``hotpot_dev_fullwiki_v1.json`` and
  2WikiMultihopQA ``dev.json``: a JSON list of ``{_id, question, answer, supporting_facts,
  context: [[title, [sentence, ...]]], type, level}``. 2WikiMultihopQA aliases come from
  ``id_aliases.json`` (lines ``{Q_id, aliases, demonyms}``), joined by the question's
  ``answer_id``: the gold set is the answer plus the aliases and demonyms of that id, as in
  the official ``2wikimultihop_evaluate_v1.1.py``.
- IIRC ``dev.json``: a JSON list of passages ``{title, text, links, questions: [...]}``; each
  question's answer is ``{type: span|value|binary|none, answer_spans | answer_value}``. Span
  answers become alternative golds (as DRAGIN scores IIRC); unanswerable questions are
  skipped unless asked for, then their gold is ``"noanswer"``.
- StrategyQA ``strategyqa_train.json`` (JSON list) or JSON lines with a boolean ``answer``.
- Open-domain QA JSON lines: NaturalQuestions-open ``{question, answer: [...]}``, DPR-style
  ``{question, answers: [...], ctxs?}``, and re-serialised rows ``{id, dataset, question,
  answers, paragraphs?: [{idx, title, text, is_supporting}], context?, type?, level?}``;
  DPR ``*.qa.csv`` (``question<TAB>['answer', ...]``); the official SQuAD json
  (``{"data": [...]}``); TriviaQA's own json (``{"Data": [...]}``).
- PopQA ``popQA.tsv`` (tab-separated with a header; ``possible_answers`` a JSON list).
- RetrievalQA ``retrievalqa.jsonl``: ``{data_source, question_id, question, ground_truth,
  context: [{title, text}], param_knowledge_answerable: 0|1}``.
- MuSiQue ``musique_ans_v1.0_dev.jsonl``: ``{id, question, answer, answer_aliases,
  paragraphs: [{idx, title, paragraph_text, is_supporting}], answerable}``.

A malformed file raises :class:`~langchain_adaptive_rag.errors.DatasetFormatError`, which
names the file, the line (JSON lines, TSV) or record (JSON), the field, what was received
and what was expected.
"""

from __future__ import annotations

import ast
import csv
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeAlias

from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError, DatasetFormatError

__all__ = [
    "DATASET_NAMES",
    "Example",
    "JSONValue",
    "canonical_dataset_name",
    "load_2wikimultihopqa",
    "load_dataset",
    "load_hotpotqa",
    "load_iirc",
    "load_musique",
    "load_open_qa",
    "load_popqa",
    "load_retrievalqa",
    "load_strategyqa",
    "read_id_aliases",
]

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
"""The dataset names :func:`load_dataset` accepts (see :func:`canonical_dataset_name`)."""

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
    """Map a dataset name to its canonical spelling in :data:`DATASET_NAMES`.

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
        """The main gold answer (the first of :attr:`answers`)."""
        return self.answers[0]

    @property
    def needs_retrieval(self) -> bool | None:
        """Whether the question needs retrieval (RetrievalQA's label), or ``None``."""
        if self.param_knowledge_answerable is None:
            return None
        return self.param_knowledge_answerable == 0


# --------------------------------------------------------------------------------------
# Reading files

_MISSING = object()


def _describe(value: object) -> str:
    """Describe a received value for an error message: its JSON type and a short preview.

    Args:
        value: The value found in the file.

    Returns:
        Words such as ``a number (5)`` or ``a list (['a', 'b'])``.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        kind = "a boolean"
    elif isinstance(value, (int, float)):
        kind = "a number"
    elif isinstance(value, str):
        kind = "a string"
    elif isinstance(value, list):
        kind = "a list"
    elif isinstance(value, dict):
        kind = "an object"
    else:
        kind = f"a {type(value).__name__}"
    preview = repr(value)
    if len(preview) > 60:
        preview = preview[:57] + "..."
    return f"{kind} ({preview})"


def _sniff(path: Path) -> _FileKind:
    """Tell a JSON document from JSON lines from delimited text by the file's first line.

    A file whose first non-blank line is a complete JSON object is JSON lines; one that
    starts with ``[`` or with a ``{`` that does not close on its line is one JSON document;
    anything else is delimited text (TSV/CSV).

    Args:
        path: The file.

    Returns:
        The file kind.

    Raises:
        DatasetFormatError: The file is empty.
    """
    with path.open(encoding="utf-8-sig") as handle:
        for line in handle:
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("["):
                return "json"
            if stripped.startswith("{"):
                try:
                    first = json.loads(stripped)
                except json.JSONDecodeError:
                    return "json"
                return "jsonl" if isinstance(first, dict) else "json"
            return "text"
    raise DatasetFormatError(
        str(path),
        location=None,
        field=None,
        received="an empty file",
        expected="JSON, JSON lines or TSV with at least one record",
    )


def _load_json(path: Path) -> object:
    """Parse a whole JSON document.

    Args:
        path: The file.

    Returns:
        The parsed document.

    Raises:
        DatasetFormatError: The file is not valid JSON (the error names the line).
    """
    with path.open(encoding="utf-8-sig") as handle:
        try:
            return json.load(handle)
        except json.JSONDecodeError as exc:
            raise DatasetFormatError(
                str(path),
                location=f"line {exc.lineno}",
                field=None,
                received=f"text that is not valid JSON ({exc.msg} at column {exc.colno})",
                expected="a JSON document",
            ) from None


def _iter_json_lines(path: Path) -> Iterator[tuple[str, object]]:
    """Stream the objects of a JSON-lines file, one line at a time; blank lines are skipped.

    Args:
        path: The file.

    Yields:
        ``("line N", parsed value)`` for each non-blank line, N counting from 1.

    Raises:
        DatasetFormatError: A line is not valid JSON.
    """
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetFormatError(
                    str(path),
                    location=f"line {number}",
                    field=None,
                    received=f"text that is not valid JSON ({exc.msg} at column {exc.colno})",
                    expected="one JSON object per line",
                ) from None
            yield f"line {number}", value


class _Record:
    """A JSON object read from a file, with typed accessors whose errors name the field.

    Args:
        data: The parsed value; it must be a JSON object.
        path: The file it came from.
        location: ``"line N"`` or ``"record N"``.
        prefix: Field-name prefix for nested objects (``"context[2]"``).
        expected: Words describing the whole record, used when ``data`` is not an object.
    """

    def __init__(
        self,
        data: object,
        path: str,
        location: str,
        *,
        prefix: str = "",
        expected: str = "a JSON object",
    ) -> None:
        self.path = path
        self.location = location
        self.prefix = prefix
        if not isinstance(data, dict):
            raise DatasetFormatError(
                path,
                location=location,
                field=prefix or None,
                received=_describe(data),
                expected=expected,
            )
        self.data: dict[str, JSONValue] = data

    def name(self, key: str) -> str:
        """The full field name of ``key`` (with this record's prefix)."""
        return f"{self.prefix}.{key}" if self.prefix else key

    def error(self, key: str, received: str, expected: str) -> DatasetFormatError:
        """Build the error for a bad ``key``.

        Args:
            key: The field.
            received: What was found, in words.
            expected: What was expected, in words.

        Returns:
            The error, ready to raise.
        """
        return DatasetFormatError(
            self.path,
            location=self.location,
            field=self.name(key),
            received=received,
            expected=expected,
        )

    def has(self, key: str) -> bool:
        """Whether ``key`` is present (even when null)."""
        return key in self.data

    def get(self, key: str) -> JSONValue:
        """The raw value of ``key``, or ``None`` when absent."""
        return self.data.get(key)

    def _missing(self, key: str, expected: str) -> DatasetFormatError:
        present = ", ".join(sorted(self.data)) or "none"
        return self.error(key, f"no such field (fields present: {present})", expected)

    def require(self, key: str, expected: str) -> object:
        """The raw value of a required field.

        Args:
            key: The field.
            expected: Words describing the expected value, for the error.

        Returns:
            The value.

        Raises:
            DatasetFormatError: The field is absent.
        """
        value = self.data.get(key, _MISSING)
        if value is _MISSING:
            raise self._missing(key, expected)
        return value

    def string(self, key: str, *, allow_empty: bool = False) -> str:
        """A required string field.

        Raises:
            DatasetFormatError: The field is absent, not a string, or empty.
        """
        expected = "a string" if allow_empty else "a non-empty string"
        value = self.require(key, expected)
        if not isinstance(value, str) or (not allow_empty and not value.strip()):
            raise self.error(key, _describe(value), expected)
        return value

    def optional_string(self, key: str) -> str | None:
        """A string field that may be absent or null.

        Raises:
            DatasetFormatError: The field is present but not a string.
        """
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(key, _describe(value), "a string or null")
        return value

    def identifier(self, key: str) -> str:
        """A required id: a non-empty string or an integer, returned as a string.

        Raises:
            DatasetFormatError: The field is absent or of another type.
        """
        expected = "a non-empty string or an integer id"
        value = self.require(key, expected)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise self.error(key, _describe(value), expected)
        return str(value)

    def boolean(self, key: str) -> bool:
        """A required JSON boolean.

        Raises:
            DatasetFormatError: The field is absent or not ``true``/``false``.
        """
        value = self.require(key, "true or false")
        if not isinstance(value, bool):
            raise self.error(key, _describe(value), "true or false")
        return value

    def strings(
        self, key: str, *, allow_single: bool = True, allow_empty: bool = False
    ) -> tuple[str, ...]:
        """A required list of strings (or, if allowed, a single non-empty string).

        Args:
            key: The field.
            allow_single: Accept a bare string as a one-item list.
            allow_empty: Accept an empty list.

        Raises:
            DatasetFormatError: The field is absent, empty, or holds something else.
        """
        expected = ("a list of strings" if allow_empty else "a non-empty list of strings") + (
            " or a string" if allow_single else ""
        )
        value = self.require(key, expected)
        if isinstance(value, str) and allow_single and value.strip():
            return (value,)
        if not isinstance(value, list) or (not value and not allow_empty):
            raise self.error(key, _describe(value), expected)
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise self.error(f"{key}[{index}]", _describe(item), "a string")
        return tuple(value)

    def objects(self, key: str, *, required: bool = True) -> list[_Record]:
        """A list of JSON objects, each wrapped as a nested :class:`_Record`.

        Args:
            key: The field.
            required: Whether an absent field is an error (otherwise an empty list).

        Raises:
            DatasetFormatError: The field is absent (when required), not a list, or holds a
                non-object.
        """
        if not required and self.data.get(key) is None:
            return []
        value = self.require(key, "a list of objects")
        if not isinstance(value, list):
            raise self.error(key, _describe(value), "a list of objects")
        return [
            _Record(item, self.path, self.location, prefix=self.name(f"{key}[{index}]"))
            for index, item in enumerate(value)
        ]

    def items(self, key: str, expected: str) -> list[object]:
        """A required JSON list, items unchecked.

        Raises:
            DatasetFormatError: The field is absent or not a list.
        """
        value = self.require(key, expected)
        if not isinstance(value, list):
            raise self.error(key, _describe(value), expected)
        return value

    def extras(self, known: set[str] | frozenset[str]) -> dict[str, JSONValue]:
        """The fields not in ``known``, kept as they are."""
        return {key: value for key, value in self.data.items() if key not in known}


# --------------------------------------------------------------------------------------
# Helpers shared by the parsers


def _dedupe(values: Iterable[str]) -> tuple[str, ...]:
    """Drop repeated strings, keep the first occurrence's order."""
    seen: dict[str, None] = {}
    for value in values:
        seen.setdefault(value, None)
    return tuple(seen)


def _join_sentences(sentences: Sequence[str]) -> str:
    """Join sentences into a paragraph, adding a space only where neither side has one.

    HotpotQA's sentences carry their own leading spaces; 2WikiMultihopQA's do not.
    """
    text = ""
    for sentence in sentences:
        if text and not text[-1].isspace() and sentence and not sentence[0].isspace():
            text += " "
        text += sentence
    return text.strip()


def _passage(
    text: str, *, passage_id: str, title: str, metadata: Mapping[str, JSONValue] | None = None
) -> Document:
    """A passage as a Document whose ``metadata`` holds ``id`` and ``title`` first."""
    meta: dict[str, JSONValue] = {"id": passage_id, "title": title}
    if metadata:
        meta.update(metadata)
    return Document(id=passage_id, page_content=text, metadata=meta)


def _optional_int(rec: _Record, key: str) -> int | None:
    value = rec.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if not isinstance(value, int):
        raise rec.error(key, _describe(value), "an integer or null")
    return value


def _optional_bool(rec: _Record, key: str, default: bool) -> bool:
    value = rec.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise rec.error(key, _describe(value), "true or false")
    return value


# --------------------------------------------------------------------------------------
# Record parsers, one per schema

_HOTPOT_KEYS = frozenset(
    {"_id", "question", "answer", "type", "level", "supporting_facts", "context"}
)


def _parse_hotpot_style(
    rec: _Record, dataset: str, aliases: Mapping[str, Sequence[str]] | None
) -> Example:
    """HotpotQA / 2WikiMultihopQA: ``context`` as ``[[title, [sentences]]]``."""
    qid = rec.identifier("_id")
    question = rec.string("question")
    answer = rec.string("answer")
    pair = "a list of [title, sentence index] pairs"
    supporting_sentences: dict[str, list[int]] = {}
    for index, item in enumerate(rec.items("supporting_facts", pair)):
        if not (
            isinstance(item, list)
            and len(item) == 2
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and not isinstance(item[1], bool)
        ):
            raise rec.error(f"supporting_facts[{index}]", _describe(item), "[title, index]")
        supporting_sentences.setdefault(item[0], []).append(item[1])
    context: list[Document] = []
    expected = "[title, [sentence, ...]]"
    for idx, item in enumerate(rec.items("context", f"a list of {expected} pairs")):
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
            raise rec.error(f"context[{idx}]", _describe(item), expected)
        title, sentences = item
        if not isinstance(sentences, list) or not all(isinstance(s, str) for s in sentences):
            raise rec.error(f"context[{idx}][1]", _describe(sentences), "a list of sentences")
        context.append(
            _passage(
                _join_sentences(sentences),
                passage_id=f"{qid}-{idx}",
                title=title,
                metadata={
                    "idx": idx,
                    "is_supporting": title in supporting_sentences,
                    "supporting_sentences": [*sorted(supporting_sentences.get(title, []))],
                },
            )
        )
    golds = [answer]
    answer_id = rec.optional_string("answer_id")
    if aliases is not None and answer_id is not None:
        golds.extend(aliases.get(answer_id, ()))
    return Example(
        id=qid,
        question=question,
        answers=_dedupe(golds),
        dataset=dataset,
        supporting=tuple(d for d in context if d.metadata["is_supporting"]),
        context=tuple(context),
        type=rec.optional_string("type"),
        level=rec.optional_string("level"),
        extra=rec.extras(_HOTPOT_KEYS),
    )


_ID_KEYS = ("id", "_id", "qid", "question_id", "test_id")
_ANSWER_KEYS = ("answers", "answer", "ground_truth", "possible_answers")
_GENERIC_KEYS = frozenset(
    {
        *_ID_KEYS,
        *_ANSWER_KEYS,
        "answer_aliases",
        "dataset",
        "question",
        "type",
        "level",
        "paragraphs",
        "ctxs",
        "context",
        "param_knowledge_answerable",
    }
)


def _generic_answers(rec: _Record) -> tuple[str, ...]:
    for key in _ANSWER_KEYS:
        if not rec.has(key):
            continue
        value = rec.get(key)
        if key == "possible_answers" and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise rec.error(key, _describe(value), "a JSON list of strings (PopQA)") from None
            rec = _Record({key: value}, rec.path, rec.location, prefix=rec.prefix)
        golds = list(rec.strings(key))
        if rec.has("answer_aliases"):
            golds.extend(rec.strings("answer_aliases", allow_empty=True))
        return _dedupe(golds)
    present = ", ".join(sorted(rec.data)) or "none"
    raise rec.error(
        "answers",
        f"no answer field (fields present: {present})",
        "one of the fields " + ", ".join(_ANSWER_KEYS) + " holding the gold answers",
    )


def _generic_passages(rec: _Record, qid: str) -> tuple[list[Document], list[Document]]:
    """Passages of a JSON-lines row: ``paragraphs``, DPR ``ctxs`` or a ``context``."""
    context: list[Document] = []
    supporting: list[Document] = []
    for position, par in enumerate(rec.objects("paragraphs", required=False)):
        idx = _optional_int(par, "idx")
        idx = position if idx is None else idx
        text_key = "paragraph_text" if par.has("paragraph_text") else "text"
        meta: dict[str, JSONValue] = {
            "idx": idx,
            "is_supporting": _optional_bool(par, "is_supporting", False),
        }
        doc = _passage(
            par.string(text_key, allow_empty=True),
            passage_id=par.identifier("id") if par.has("id") else f"{qid}-{idx}",
            title=par.string("title", allow_empty=True),
            metadata=meta,
        )
        context.append(doc)
        if meta["is_supporting"]:
            supporting.append(doc)
    for position, ctx in enumerate(rec.objects("ctxs", required=False)):
        context.append(
            _passage(
                ctx.string("text", allow_empty=True),
                passage_id=ctx.identifier("id") if ctx.has("id") else f"{qid}-{position}",
                title=ctx.optional_string("title") or "",
                metadata=ctx.extras({"id", "title", "text"}),
            )
        )
    raw = rec.get("context")
    if isinstance(raw, str):
        paragraph_id = rec.get("paragraph_id")
        supporting.append(
            _passage(
                raw,
                passage_id=paragraph_id if isinstance(paragraph_id, str) else f"{qid}-context",
                title=rec.optional_string("title") or "",
            )
        )
    elif isinstance(raw, list):
        for position, item in enumerate(raw):
            passage_id = f"{qid}-{position}"
            if isinstance(item, str):
                context.append(_passage(item, passage_id=passage_id, title=""))
                continue
            ctx = _Record(
                item,
                rec.path,
                rec.location,
                prefix=rec.name(f"context[{position}]"),
                expected="a passage {title, text} or a string",
            )
            context.append(
                _passage(
                    ctx.optional_string("text") or "",
                    passage_id=ctx.identifier("id") if ctx.has("id") else passage_id,
                    title=ctx.optional_string("title") or "",
                    metadata=ctx.extras({"id", "title", "text"}),
                )
            )
    elif raw is not None:
        raise rec.error("context", _describe(raw), "a passage string or a list of passages")
    return context, supporting


def _parse_generic(rec: _Record, dataset: str, number: int) -> Example:
    """Open-domain and re-serialised rows: ``question`` plus ``answers``/``answer``/..."""
    id_key = next((key for key in _ID_KEYS if rec.get(key) is not None), None)
    qid = rec.identifier(id_key) if id_key is not None else f"{dataset}-{number}"
    question = rec.string("question")
    answers = _generic_answers(rec)
    context, supporting = _generic_passages(rec, qid)
    answerable = _optional_int(rec, "param_knowledge_answerable")
    if answerable not in (None, 0, 1):
        raise rec.error("param_knowledge_answerable", _describe(answerable), "0 or 1")
    return Example(
        id=qid,
        question=question,
        answers=answers,
        dataset=dataset,
        supporting=tuple(supporting),
        context=tuple(context),
        type=rec.optional_string("type"),
        level=rec.optional_string("level"),
        param_knowledge_answerable=answerable,
        extra=rec.extras(_GENERIC_KEYS),
    )


_STRATEGYQA_KEYS = frozenset({"qid", "question", "answer"})


def _parse_strategyqa(rec: _Record, dataset: str) -> Example:
    """StrategyQA: ``{qid, question, answer: bool, facts, decomposition, evidence, ...}``."""
    answer = rec.boolean("answer")
    return Example(
        id=rec.identifier("qid"),
        question=rec.string("question"),
        answers=("yes",) if answer else ("no",),
        dataset=dataset,
        answer_bool=answer,
        extra=rec.extras(_STRATEGYQA_KEYS),
    )


_IIRC_QUESTION_KEYS = frozenset({"qid", "question", "answer", "context"})


def _parse_iirc_passage(
    rec: _Record, dataset: str, include_unanswerable: bool
) -> Iterator[Example]:
    """IIRC: one passage ``{title, text, links, questions}`` gives several examples."""
    title = rec.string("title")
    main_text = rec.string("text", allow_empty=True)
    for position, q in enumerate(rec.objects("questions")):
        qid = q.identifier("qid") if q.has("qid") else f"{dataset}-{rec.location}-{position}"
        question = q.string("question")
        ans = _Record(
            q.require("answer", "an answer object {type, ...}"),
            q.path,
            q.location,
            prefix=q.name("answer"),
        )
        kind = ans.string("type")
        if kind == "span":
            spans = ans.objects("answer_spans")
            if not spans:
                raise ans.error("answer_spans", "an empty list", "at least one answer span")
            golds = _dedupe(span.string("text").strip() for span in spans)
        elif kind in ("value", "binary"):
            golds = (ans.string("answer_value").strip(),)
        elif kind == "none":
            if not include_unanswerable:
                continue
            golds = (_NO_ANSWER,)
        else:
            raise ans.error("type", _describe(kind), "one of span, value, binary, none")
        supporting = [
            _passage(main_text, passage_id=f"{qid}-main", title=title, metadata={"main": True})
        ]
        for index, snippet in enumerate(q.objects("context", required=False)):
            passage = snippet.string("passage")
            supporting.append(
                _passage(
                    snippet.string("text", allow_empty=True),
                    passage_id=f"{qid}-context-{index}",
                    title=title if passage == "main" else passage,
                    metadata={"main": passage == "main", "indices": snippet.get("indices")},
                )
            )
        extra = q.extras(_IIRC_QUESTION_KEYS)
        unit = ans.get("answer_unit")
        if isinstance(unit, str) and unit:
            extra["answer_unit"] = unit
        extra["passage_title"] = title
        yield Example(
            id=qid,
            question=question,
            answers=golds,
            dataset=dataset,
            supporting=tuple(supporting),
            type=kind,
            extra=extra,
        )


def _parse_squad_json(data: dict[str, object], path: str, dataset: str) -> Iterator[Example]:
    """The official SQuAD json: ``{"data": [{title, paragraphs: [{context, qas}]}]}``."""
    top = _Record(data, path, "the top-level object")
    for a_index, article_raw in enumerate(top.items("data", "a list of articles")):
        article = _Record(article_raw, path, f"record {a_index}", prefix=f"data[{a_index}]")
        title = article.string("title", allow_empty=True)
        for p_index, par in enumerate(article.objects("paragraphs")):
            text = par.string("context")
            paragraph = _passage(
                text, passage_id=f"{title.replace(' ', '_')}_{p_index}", title=title
            )
            for qa in par.objects("qas"):
                if _optional_bool(qa, "is_impossible", False):
                    continue
                spans = qa.objects("answers")
                if not spans:
                    raise qa.error("answers", "an empty list", "at least one answer")
                yield Example(
                    id=qa.identifier("id"),
                    question=qa.string("question"),
                    answers=_dedupe(span.string("text") for span in spans),
                    dataset=dataset,
                    supporting=(paragraph,),
                )


def _parse_triviaqa_json(data: dict[str, object], path: str, dataset: str) -> Iterator[Example]:
    """TriviaQA's own json: ``{"Data": [{Question, QuestionId, Answer: {Value, Aliases}}]}``."""
    top = _Record(data, path, "the top-level object")
    for index, raw in enumerate(top.items("Data", "a list of questions")):
        rec = _Record(raw, path, f"record {index}", prefix=f"Data[{index}]")
        answer = _Record(
            rec.require("Answer", "an object {Value, Aliases}"),
            path,
            rec.location,
            prefix=rec.name("Answer"),
        )
        golds = [answer.string("Value")]
        if answer.has("Aliases"):
            golds.extend(answer.strings("Aliases", allow_single=False, allow_empty=True))
        yield Example(
            id=rec.identifier("QuestionId"),
            question=rec.string("Question"),
            answers=_dedupe(golds),
            dataset=dataset,
        )


# --------------------------------------------------------------------------------------
# Text files: PopQA TSV and DPR qa.csv


def _iter_popqa_tsv(path: Path, dataset: str) -> Iterator[Example]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        columns = reader.fieldnames or []
        for required in ("question", "possible_answers"):
            if required not in columns:
                raise DatasetFormatError(
                    str(path),
                    location="line 1",
                    field=required,
                    received=f"a header with columns {columns}",
                    expected=(
                        "the popQA.tsv header (id, subj, prop, obj, ..., question, "
                        "possible_answers), tab-separated"
                    ),
                )
        for number, row in enumerate(reader):
            location = f"line {reader.line_num}"
            if None in row or any(value is None for value in row.values()):
                raise DatasetFormatError(
                    str(path),
                    location=location,
                    field=None,
                    received="a row whose column count differs from the header's",
                    expected=f"{len(columns)} tab-separated columns",
                )
            raw_answers = row["possible_answers"]
            try:
                parsed: object = json.loads(raw_answers)
            except json.JSONDecodeError:
                parsed = raw_answers
            rec = _Record({"possible_answers": parsed}, str(path), location)
            answers = rec.strings("possible_answers", allow_single=False)
            question = row["question"]
            if not question.strip():
                raise DatasetFormatError(
                    str(path),
                    location=location,
                    field="question",
                    received="an empty string",
                    expected="a non-empty question",
                )
            extra: dict[str, JSONValue] = {}
            for key, value in row.items():
                if key in ("id", "question", "possible_answers"):
                    continue
                extra[key] = int(value) if key in ("s_pop", "o_pop") and value.isdigit() else value
            yield Example(
                id=row.get("id") or f"{dataset}-{number}",
                question=question,
                answers=answers,
                dataset=dataset,
                extra=extra,
            )


def _iter_dpr_qa_csv(path: Path, dataset: str) -> Iterator[Example]:
    """DPR ``*.qa.csv``: ``question<TAB>['answer', ...]`` without a header."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        number = 0
        for row in reader:
            location = f"line {reader.line_num}"
            if not row:
                continue
            if len(row) != 2:
                raise DatasetFormatError(
                    str(path),
                    location=location,
                    field=None,
                    received=f"{len(row)} tab-separated columns",
                    expected=(
                        "2 columns, question<TAB>['answer', ...] (DPR qa.csv), or a "
                        "popQA.tsv header"
                    ),
                )
            question, raw_answers = row
            try:
                parsed = ast.literal_eval(raw_answers.strip())
            except (ValueError, SyntaxError):
                parsed = raw_answers
            rec = _Record({"answers": parsed}, str(path), location)
            answers = rec.strings("answers", allow_single=False)
            if not question.strip():
                raise rec.error("question", "an empty string", "a non-empty question")
            yield Example(
                id=f"{dataset}-{number}", question=question, answers=answers, dataset=dataset
            )
            number += 1


def _iter_text(path: Path, dataset: str) -> Iterator[Example]:
    with path.open(encoding="utf-8-sig") as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
    if "possible_answers" in header and "question" in header:
        return _iter_popqa_tsv(path, dataset)
    if dataset == "popqa":
        return _iter_popqa_tsv(path, dataset)  # raises, naming the missing column
    return _iter_dpr_qa_csv(path, dataset)


# --------------------------------------------------------------------------------------
# Dispatch


def _parse_record(
    rec: _Record,
    dataset: str,
    number: int,
    aliases: Mapping[str, Sequence[str]] | None,
    include_unanswerable: bool,
) -> Iterator[Example]:
    if dataset == "strategyqa":
        yield _parse_strategyqa(rec, dataset)
    elif rec.has("questions") and dataset == "iirc":
        yield from _parse_iirc_passage(rec, dataset, include_unanswerable)
    elif rec.has("_id") and isinstance(rec.get("context"), list) and rec.has("supporting_facts"):
        yield _parse_hotpot_style(rec, dataset, aliases)
    elif dataset == "musique" and rec.get("answerable") is False:
        return
    else:
        yield _parse_generic(rec, dataset, number)


def _iter_examples(
    path: Path,
    dataset: str,
    aliases: Mapping[str, Sequence[str]] | None,
    include_unanswerable: bool,
) -> Iterator[Example]:
    kind = _sniff(path)
    if kind == "text":
        yield from _iter_text(path, dataset)
        return
    located: Iterable[tuple[str, object]]
    if kind == "jsonl":
        located = _iter_json_lines(path)
    else:
        data = _load_json(path)
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            yield from _parse_squad_json(data, str(path), dataset)
            return
        if isinstance(data, dict) and isinstance(data.get("Data"), list):
            yield from _parse_triviaqa_json(data, str(path), dataset)
            return
        if not isinstance(data, list):
            raise DatasetFormatError(
                str(path),
                location=None,
                field=None,
                received=_describe(data),
                expected=(
                    'a JSON list of records, the SQuAD {"data": [...]} or the TriviaQA '
                    '{"Data": [...]} layout'
                ),
            )
        located = ((f"record {index}", item) for index, item in enumerate(data))
    number = 0
    for location, value in located:
        rec = _Record(value, str(path), location)
        for example in _parse_record(rec, dataset, number, aliases, include_unanswerable):
            yield example
            number += 1


def _resolve_aliases(
    aliases: PathLike | Mapping[str, Sequence[str]] | None,
) -> Mapping[str, Sequence[str]] | None:
    if aliases is None or isinstance(aliases, Mapping):
        return aliases
    return read_id_aliases(aliases)


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or limit < 0):
        msg = f"limit={limit!r}; expected None (all examples) or an integer >= 0."
        raise AdaptiveRAGError(msg)


def _load(
    path: PathLike,
    dataset: str,
    *,
    limit: int | None,
    aliases: Mapping[str, Sequence[str]] | None = None,
    include_unanswerable: bool = False,
) -> list[Example]:
    _check_limit(limit)
    file = Path(path)
    if not file.is_file():
        msg = f"Dataset file {str(file)!r} does not exist or is not a file."
        raise AdaptiveRAGError(msg)
    examples: list[Example] = []
    if limit == 0:
        return examples
    for example in _iter_examples(file, dataset, aliases, include_unanswerable):
        examples.append(example)
        if limit is not None and len(examples) >= limit:
            break
    return examples


# --------------------------------------------------------------------------------------
# Public loaders


def read_id_aliases(path: PathLike) -> dict[str, tuple[str, ...]]:
    """Read 2WikiMultihopQA's ``id_aliases.json``: one ``{Q_id, aliases, demonyms}`` per line.

    Args:
        path: The file.

    Returns:
        Each Wikidata id mapped to its aliases followed by its demonyms (duplicates dropped).

    Raises:
        DatasetFormatError: A line is not such an object.
    """
    table: dict[str, tuple[str, ...]] = {}
    for location, value in _iter_json_lines(Path(path)):
        rec = _Record(value, str(path), location, expected="an object {Q_id, aliases, demonyms}")
        names = list(rec.strings("aliases", allow_single=False, allow_empty=True))
        if rec.get("demonyms") is not None:
            names.extend(rec.strings("demonyms", allow_single=False, allow_empty=True))
        table[rec.identifier("Q_id")] = _dedupe(names)
    return table


def load_hotpotqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load HotpotQA: the official distractor/fullwiki json or JSON lines with ``paragraphs``.

    Args:
        path: ``hotpot_dev_distractor_v1.json`` or a JSON-lines file.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``context`` holds the paragraphs, ``supporting`` the gold ones.
    """
    return _load(path, "hotpotqa", limit=limit)


def load_2wikimultihopqa(
    path: PathLike,
    *,
    limit: int | None = None,
    aliases: PathLike | Mapping[str, Sequence[str]] | None = None,
) -> list[Example]:
    """Load 2WikiMultihopQA: the official ``dev.json``, a question list, or JSON lines.

    Args:
        path: ``dev.json`` (records with ``_id``, ``answer``, ``answer_id``, ``context``...),
            a JSON list of ``{question, answer}`` records, or a JSON-lines file.
        limit: Keep only the first ``limit`` examples.
        aliases: ``id_aliases.json`` (or its contents as from :func:`read_id_aliases`):
            each question's golds gain the aliases and demonyms of its ``answer_id``.

    Returns:
        The examples.
    """
    return _load(path, "2wikimultihopqa", limit=limit, aliases=_resolve_aliases(aliases))


def load_iirc(
    path: PathLike, *, limit: int | None = None, include_unanswerable: bool = False
) -> list[Example]:
    """Load IIRC's ``dev.json`` (a list of passages, each with its questions).

    Args:
        path: The file (or JSON lines of ``{id, question, answers}`` rows).
        limit: Keep only the first ``limit`` examples.
        include_unanswerable: Keep questions whose answer type is ``none``, with the gold
            ``"noanswer"``; by default they are skipped.

    Returns:
        The examples; ``type`` is the answer type; ``supporting`` holds the main passage
        and the context snippets the annotator selected.
    """
    return _load(path, "iirc", limit=limit, include_unanswerable=include_unanswerable)


def load_strategyqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load StrategyQA: the official json list or JSON lines with a boolean ``answer``.

    Args:
        path: ``strategyqa_train.json`` or a JSON-lines file.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``answers`` is ``("yes",)`` or ``("no",)`` and ``answer_bool`` the
        boolean.
    """
    return _load(path, "strategyqa", limit=limit)


def load_open_qa(
    path: PathLike,
    dataset: Literal["nq", "triviaqa", "squad", "popqa", "musique"],
    *,
    limit: int | None = None,
) -> list[Example]:
    """Load an open-domain QA file.

    Args:
        path: NQ-open / DPR-style JSON lines, DPR ``*.qa.csv``, the SQuAD or TriviaQA json,
            a PopQA TSV, or re-serialised ``{id, question, answers}`` JSON lines.
        dataset: The dataset label for the examples.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples.
    """
    return _load(path, canonical_dataset_name(dataset), limit=limit)


def load_popqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load PopQA's ``popQA.tsv`` (or JSON lines with ``possible_answers``).

    Args:
        path: The file.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``extra`` holds the other columns (``prop``, ``s_pop`` as int, ...).
    """
    return _load(path, "popqa", limit=limit)


def load_retrievalqa(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load RetrievalQA JSON lines.

    Args:
        path: ``retrievalqa.jsonl`` (or the 250-question ``retrievalqa_gpt4.jsonl``).
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples; ``context`` holds the pre-retrieved passages,
        ``param_knowledge_answerable`` the label when the file has it, ``extra`` the
        ``data_source``.
    """
    return _load(path, "retrievalqa", limit=limit)


def load_musique(path: PathLike, *, limit: int | None = None) -> list[Example]:
    """Load MuSiQue JSON lines (answerable questions; aliases join the gold answers).

    Args:
        path: ``musique_ans_v1.0_dev.jsonl`` or ``{id, question, answers}`` JSON lines.
        limit: Keep only the first ``limit`` examples.

    Returns:
        The examples.
    """
    return _load(path, "musique", limit=limit)


def load_dataset(
    name: str,
    path: PathLike,
    *,
    limit: int | None = None,
    aliases: PathLike | Mapping[str, Sequence[str]] | None = None,
) -> list[Example]:
    """Load a QA dataset file, detecting its layout from the content.

    Args:
        name: One of :data:`DATASET_NAMES` (or a synonym, see
            :func:`canonical_dataset_name`).
        path: The file in its native format (see the module docstring).
        limit: Keep only the first ``limit`` examples (JSON-lines files stop reading there).
        aliases: 2WikiMultihopQA only: ``id_aliases.json`` or a mapping from answer id to
            aliases.

    Returns:
        The examples, in file order.

    Raises:
        AdaptiveRAGError: Unknown name, missing file, bad ``limit``, or ``aliases`` given
            for another dataset.
        DatasetFormatError: The file is malformed (the error names the line or record,
            the field, what was received and what was expected).
    """
    dataset = canonical_dataset_name(name)
    if aliases is not None and dataset != "2wikimultihopqa":
        msg = (
            f"aliases were given for dataset {dataset!r}; answer-id aliases exist only for "
            "2wikimultihopqa. Fix: drop the aliases argument."
        )
        raise AdaptiveRAGError(msg)
    return _load(path, dataset, limit=limit, aliases=_resolve_aliases(aliases))
