"""Streaming passage-corpus and qrels loaders.

The loaders are generators: they read one line at a time and never hold the whole file, so a
21M-passage ``psgs_w100.tsv`` can feed an index in constant memory. Each passage becomes a
``Document(page_content=text, metadata={"id": ..., "title": ..., ...})`` whose ``id`` is
also set as the Document's own ``id``.

- DPR ``psgs_w100.tsv``: tab-separated ``id, text, title`` with a header row (columns are
  matched by name, so their order may differ).
- Passage JSON lines: ``{id, title, text, ...}`` (extra fields such as ``source`` go into the
  metadata), or FlashRAG's ``{id, contents}`` with the title on the first line of
  ``contents``.
- Qrels JSON lines: ``{dataset, qid, passage_id}``, one gold passage per line.
"""

from __future__ import annotations

import csv
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError, DatasetFormatError
from langchain_adaptive_rag.evaluation.datasets.example import JSONValue, PathLike
from langchain_adaptive_rag.evaluation.datasets.reading import (
    _checked_lines,
    _iter_json_lines,
    _open_text,
    _sniff,
)
from langchain_adaptive_rag.evaluation.datasets.records import _Record

if TYPE_CHECKING:
    from _csv import Reader as _CSVReader

__all__ = [
    "Qrel",
    "iter_dpr_passages",
    "iter_jsonl_passages",
    "iter_passages",
    "iter_qrels",
    "load_qrels",
]

_DPR_COLUMNS = ("id", "text", "title")


@functools.cache
def _largest_field_limit() -> int:
    """The largest ``csv.field_size_limit`` this platform takes (a C long)."""
    previous = csv.field_size_limit()
    limit = sys.maxsize
    while True:
        try:
            csv.field_size_limit(limit)
        except OverflowError:
            limit //= 10
        else:
            csv.field_size_limit(previous)
            return limit


def _rows_with_long_fields(reader: _CSVReader) -> Iterator[list[str]]:
    """The reader's rows, each read with csv's 128 KiB field cap lifted for that read only.

    ``csv.field_size_limit`` is process-wide: lifting it for the whole stream would change
    every other csv reader of the process meanwhile (a dataset TSV read in between).
    """
    while True:
        previous = csv.field_size_limit(_largest_field_limit())
        try:
            row = next(reader, None)
        finally:
            csv.field_size_limit(previous)
        if row is None:
            return
        yield row


def _existing_file(path: PathLike) -> Path:
    file = Path(path)
    if not file.is_file():
        msg = f"Corpus file {str(file)!r} does not exist or is not a file."
        raise AdaptiveRAGError(msg)
    return file


def iter_dpr_passages(path: PathLike) -> Iterator[Document]:
    """Stream DPR's ``psgs_w100.tsv``: a header row, then ``id<TAB>text<TAB>title`` rows.

    Fields may be quoted CSV-style (``"..."`` with ``""`` for a quote), as in DPR's file.

    Args:
        path: The TSV file.

    Yields:
        One Document per passage, ``metadata={"id", "title"}``.

    Raises:
        DatasetFormatError: The header lacks a column, or a row has the wrong number of
            columns or an empty id.
    """
    file = _existing_file(path)
    with _open_text(file, newline="") as handle:
        reader = csv.reader(_checked_lines(handle, file), delimiter="\t")
        try:
            yield from _dpr_rows(file, reader)
        except csv.Error as exc:
            raise DatasetFormatError(
                str(file),
                location=f"line {max(reader.line_num, 1)}",
                field=None,
                received=f"text the csv reader refused ({exc})",
                expected="tab-separated id, text and title columns",
            ) from None


def _dpr_rows(file: Path, reader: _CSVReader) -> Iterator[Document]:
    rows = _rows_with_long_fields(reader)
    header = next(rows, None)
    if header is None:
        raise DatasetFormatError(
            str(file),
            location=None,
            field=None,
            received="an empty file",
            expected="a header row id<TAB>text<TAB>title, then one passage per line",
        )
    names = [column.strip().lower() for column in header]
    missing = [column for column in _DPR_COLUMNS if column not in names]
    if missing:
        raise DatasetFormatError(
            str(file),
            location="line 1",
            field=missing[0],
            received=f"the header {header!r}",
            expected="the header row id<TAB>text<TAB>title (DPR psgs_w100.tsv)",
        )
    id_at, text_at, title_at = (names.index(column) for column in _DPR_COLUMNS)
    for row in rows:
        if not row:
            continue
        location = f"line {reader.line_num}"
        if len(row) != len(names):
            raise DatasetFormatError(
                str(file),
                location=location,
                field=None,
                received=f"{len(row)} tab-separated columns",
                expected=f"{len(names)} columns like the header {header!r}",
            )
        passage_id = row[id_at].strip()
        if not passage_id:
            raise DatasetFormatError(
                str(file),
                location=location,
                field="id",
                received="an empty string",
                expected="a passage id",
            )
        yield Document(
            id=passage_id,
            page_content=row[text_at],
            metadata={"id": passage_id, "title": row[title_at]},
        )


def _split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG ``contents``: the title (maybe quoted) on the first line, then the text."""
    title, _, text = contents.partition("\n")
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text.strip()


def iter_jsonl_passages(path: PathLike) -> Iterator[Document]:
    """Stream passages from JSON lines ``{id, title, text, ...}`` (or ``{id, contents}``).

    Args:
        path: The JSON-lines file.

    Yields:
        One Document per line; ``metadata`` holds ``id``, ``title`` and every other field.

    Raises:
        DatasetFormatError: A line is not JSON, or lacks ``id`` or ``text``, or has a field
            of the wrong type.
    """
    file = _existing_file(path)
    for location, value in _iter_json_lines(file):
        rec = _Record(value, str(file), location, expected="a passage {id, title, text}")
        passage_id = rec.identifier("id")
        if rec.has("text"):
            text = rec.string("text", allow_empty=True)
            title = rec.optional_string("title") or ""
            known = {"id", "title", "text"}
        elif rec.has("contents"):
            title, text = _split_contents(rec.string("contents", allow_empty=True))
            known = {"id", "contents"}
        else:
            present = ", ".join(sorted(rec.data)) or "none"
            raise rec.error(
                "text",
                f"no such field (fields present: {present})",
                "the passage text in 'text' (or FlashRAG's 'contents')",
            )
        metadata: dict[str, JSONValue] = {"id": passage_id, "title": title}
        metadata.update(rec.extras(known))
        yield Document(id=passage_id, page_content=text, metadata=metadata)


def iter_passages(path: PathLike) -> Iterator[Document]:
    """Stream a passage corpus, choosing the reader from the content.

    Args:
        path: DPR TSV or passage JSON lines.

    Yields:
        One Document per passage.

    Raises:
        DatasetFormatError: The file is neither layout, or is malformed.
    """
    file = _existing_file(path)
    kind = _sniff(file)
    if kind == "jsonl":
        yield from iter_jsonl_passages(file)
    elif kind == "text":
        yield from iter_dpr_passages(file)
    else:
        raise DatasetFormatError(
            str(file),
            location="line 1",
            field=None,
            received="a JSON document (it starts with '[' or spans several lines)",
            expected="a DPR TSV with header id<TAB>text<TAB>title, or one JSON passage per line",
        )


class Qrel(NamedTuple):
    """One relevance judgement: ``passage_id`` is gold for question ``qid`` of ``dataset``."""

    dataset: str
    qid: str
    passage_id: str


def iter_qrels(path: PathLike) -> Iterator[Qrel]:
    """Stream qrels JSON lines ``{dataset, qid, passage_id}``.

    Args:
        path: The file.

    Yields:
        One [`Qrel`][] per line.

    Raises:
        DatasetFormatError: A line is not JSON or lacks one of the three fields.
    """
    file = _existing_file(path)
    for location, value in _iter_json_lines(file):
        rec = _Record(value, str(file), location, expected="an object {dataset, qid, passage_id}")
        yield Qrel(rec.string("dataset"), rec.identifier("qid"), rec.identifier("passage_id"))


def load_qrels(path: PathLike, *, dataset: str | None = None) -> dict[str, tuple[str, ...]]:
    """Read qrels into ``{qid: gold passage ids}``, in file order.

    Args:
        path: Qrels JSON lines ``{dataset, qid, passage_id}``.
        dataset: Keep only the lines of this dataset (as written in the file, e.g.
            ``"hotpotqa"``); by default all lines.

    Returns:
        Each question id mapped to its gold passage ids (duplicates dropped).

    Raises:
        DatasetFormatError: A line is malformed.
        AdaptiveRAGError: ``dataset`` was given but no line has it (the message lists the
            datasets present).
    """
    table: dict[str, dict[str, None]] = {}
    seen: set[str] = set()
    for qrel in iter_qrels(path):
        seen.add(qrel.dataset)
        if dataset is not None and qrel.dataset != dataset:
            continue
        table.setdefault(qrel.qid, {})[qrel.passage_id] = None
    if dataset is not None and not table:
        msg = (
            f"No qrels for dataset {dataset!r} in {str(path)!r}; the file has "
            f"{sorted(seen)!r}. Expected one of those names."
        )
        raise AdaptiveRAGError(msg)
    return {qid: tuple(ids) for qid, ids in table.items()}
