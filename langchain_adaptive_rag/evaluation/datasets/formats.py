"""One parser per file schema.

HotpotQA-style, generic open-domain QA, StrategyQA, IIRC, SQuAD, TriviaQA, PopQA TSV and
DPR ``qa.csv``.
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.documents import Document

from langchain_adaptive_rag.errors import DatasetFormatError
from langchain_adaptive_rag.evaluation.datasets.example import (
    _NO_ANSWER,
    Example,
    JSONValue,
)
from langchain_adaptive_rag.evaluation.datasets.reading import (
    _checked_lines,
    _decode_embedded,
    _open_text,
)
from langchain_adaptive_rag.evaluation.datasets.records import (
    _dedupe,
    _describe,
    _join_sentences,
    _optional_bool,
    _optional_int,
    _passage,
    _Record,
)

if TYPE_CHECKING:
    from _csv import Reader as _CSVReader

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
                parsed = _decode_embedded(value)
            except ValueError:
                raise rec.error(key, _describe(value), "a JSON list of strings (PopQA)") from None
            rec = _Record({key: parsed}, rec.path, rec.location, prefix=rec.prefix)
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


def _csv_error(path: Path, line_num: int, exc: csv.Error) -> DatasetFormatError:
    """A ``csv`` refusal (a field over ``csv.field_size_limit()``, ...) as a format error."""
    return DatasetFormatError(
        str(path),
        location=f"line {max(line_num, 1)}",
        field=None,
        received=f"text the csv reader refused ({exc})",
        expected=(
            "tab-separated fields of reasonable length (an unclosed '\"' makes a field "
            "run on over the following lines)"
        ),
    )


def _popqa_extra(key: str, value: str) -> JSONValue:
    """``s_pop``/``o_pop`` as integers when they are plain digits; every other column as is."""
    if key in ("s_pop", "o_pop") and value.isascii() and value.isdigit():
        try:
            return int(value)
        except ValueError:  # longer than Python converts
            return value
    return value


def _iter_popqa_tsv(path: Path, dataset: str) -> Iterator[Example]:
    with _open_text(path, newline="") as handle:
        reader = csv.DictReader(_checked_lines(handle, path), delimiter="\t")
        try:
            yield from _popqa_rows(path, dataset, reader)
        except csv.Error as exc:  # DictReader's own line_num lags on a failed row
            raise _csv_error(path, reader.reader.line_num, exc) from None


def _popqa_rows(path: Path, dataset: str, reader: csv.DictReader[str]) -> Iterator[Example]:
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
            parsed: object = _decode_embedded(raw_answers)
        except ValueError:
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
        extra: dict[str, JSONValue] = {
            key: _popqa_extra(key, value)
            for key, value in row.items()
            if key not in ("id", "question", "possible_answers")
        }
        yield Example(
            id=row.get("id") or f"{dataset}-{number}",
            question=question,
            answers=answers,
            dataset=dataset,
            extra=extra,
        )


def _literal_answers(text: str) -> object:
    """DPR's answer column, a Python list literal; the text itself when it is none."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return text


def _iter_dpr_qa_csv(path: Path, dataset: str) -> Iterator[Example]:
    """DPR ``*.qa.csv``: ``question<TAB>['answer', ...]`` without a header."""
    with _open_text(path, newline="") as handle:
        reader = csv.reader(_checked_lines(handle, path), delimiter="\t")
        try:
            yield from _dpr_qa_rows(path, dataset, reader)
        except csv.Error as exc:
            raise _csv_error(path, reader.line_num, exc) from None


def _dpr_qa_rows(path: Path, dataset: str, reader: _CSVReader) -> Iterator[Example]:
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
                    "2 columns, question<TAB>['answer', ...] (DPR qa.csv), or a popQA.tsv header"
                ),
            )
        question, raw_answers = row
        rec = _Record({"answers": _literal_answers(raw_answers)}, str(path), location)
        answers = rec.strings("answers", allow_single=False)
        if not question.strip():
            raise rec.error("question", "an empty string", "a non-empty question")
        yield Example(id=f"{dataset}-{number}", question=question, answers=answers, dataset=dataset)
        number += 1


def _iter_text(path: Path, dataset: str) -> Iterator[Example]:
    with _open_text(path) as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
    if "possible_answers" in header and "question" in header:
        return _iter_popqa_tsv(path, dataset)
    if dataset == "popqa":
        return _iter_popqa_tsv(path, dataset)  # raises, naming the missing column
    return _iter_dpr_qa_csv(path, dataset)
