r"""Reading dataset files safely: text, JSON documents, JSON lines, and the file kind.

Whatever a file holds, reading it raises only
``DatasetFormatError``, naming the file, the line (or
record) and, where there is one, the field:

- bytes that are not UTF-8 (a Latin-1 or cp1252 file): the line, column and byte; files
  are decoded with ``surrogateescape`` so the bad byte is found where it is, never in the
  middle of a read-ahead buffer;
- JSON that does not parse: the line and column;
- nesting too deep for Python's JSON parser (a ``RecursionError``): the line and the
  field where the nesting runs away;
- numbers longer than Python converts to ``int`` (``sys.get_int_max_str_digits()``,
  4,300 digits by default): the field, found by parsing again with a decoder that keeps
  such a number as a marker instead of failing;
- strings with an unpaired UTF-16 surrogate escape (``"\\ud800"``), which no UTF-8 file
  can hold: the field.

A one-line JSON document (``json.dump`` without ``indent``: the official SQuAD and
TriviaQA files) is both "a JSON document" and "one JSON object on one line";
``_sniff`` reads it as the document when its object has the SQuAD ``data`` or the
TriviaQA ``Data`` list and no ``question``.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TypeAlias

from langchain_adaptive_rag.errors import DatasetFormatError
from langchain_adaptive_rag.evaluation.datasets.example import _FileKind

_ENCODING = "utf-8-sig"
_ERRORS = "surrogateescape"
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_DEEP = 100
_RE_ENCODE = "re-encode the file as UTF-8 (for example: iconv -f latin1 -t utf-8 FILE > NEW)"

_JSONPath: TypeAlias = tuple[str | int, ...]


class _LongNumber:
    """A JSON integer with more digits than Python converts (kept to report its field)."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<a number of {self.digits} digits>"

    def describe(self) -> str:
        """The number in words, for an error message."""
        limit = sys.get_int_max_str_digits()
        return f"a number of {self.digits} digits (Python reads integers of at most {limit})"


def _parse_int(text: str) -> int | _LongNumber:
    try:
        return int(text)
    except ValueError:  # longer than sys.get_int_max_str_digits()
        return _LongNumber(len(text.lstrip("-")))


_MARKING_DECODER = json.JSONDecoder(parse_int=_parse_int)
"""Used only once the plain decoder refused a number: slower, never fails on one."""


def _decode(text: str) -> tuple[object, bool]:
    """``json.loads``, but a number too long for ``int`` becomes a ``_LongNumber``.

    Returns:
        The value, and whether it may hold such a marker.
    """
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer longer than sys.get_int_max_str_digits()
        return _MARKING_DECODER.decode(text), True


def _open_text(path: Path, *, newline: str | None = None) -> IO[str]:
    """Open a file as UTF-8 text whose undecodable bytes become escape characters.

    Args:
        path: The file.
        newline: ``""`` for the ``csv`` module (quoted fields may hold line breaks).
    """
    return path.open(encoding=_ENCODING, errors=_ERRORS, newline=newline)


def _field_name(parts: _JSONPath) -> str | None:
    """``("context", 2, "title")`` as ``"context[2].title"`` (``None`` when empty).

    A path deeper than eight steps is cut, ending in ``...``.
    """
    name = ""
    for part in parts[:8]:
        if isinstance(part, int):
            name += f"[{part}]"
        else:
            name += f".{part}" if name else part
    if len(parts) > 8:
        name += "..."
    return name or None


def _byte_words(char: str) -> str:
    return f"the byte 0x{ord(char) - 0xDC00:02X}, which is not UTF-8"


def _first_flaw(value: object) -> tuple[_JSONPath, str] | None:
    """The first long number or unpaired surrogate in a parsed value, and its path.

    The walk is iterative, so a value nested as deep as the parser allows is fine.
    """
    stack: list[tuple[_JSONPath, object]] = [((), value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, _LongNumber):
            return where, item.describe()
        if isinstance(item, str):
            found = _SURROGATE.search(item)
            if found is not None:
                return where, _surrogate_words(found.group())
        elif isinstance(item, dict):
            children: list[tuple[_JSONPath, object]] = []
            for key, child in item.items():
                found = _SURROGATE.search(key)
                if found is not None:
                    return (*where, key), f"a field name with {_surrogate_words(found.group())}"
                children.append(((*where, key), child))
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([((*where, i), child) for i, child in enumerate(item)]))
    return None


def _surrogate_words(char: str) -> str:
    if "\udc80" <= char <= "\udcff":
        return f"text with {_byte_words(char)} (or the escape \\u{ord(char):04x})"
    return f"text with an unpaired surrogate escape \\u{ord(char):04x}"


def _runaway_nesting(text: str) -> tuple[int, _JSONPath]:
    """Where nesting first gets deeper than ``_DEEP``: the line (from 1) and the path."""
    line = 1
    stack: list[list[str | int | None]] = []  # per open container: [kind, key or index]
    in_string = escaped = False
    start = 0
    last_string = ""
    for position, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                last_string = text[start:position]
            continue
        if char == '"':
            in_string, start = True, position + 1
        elif char == "\n":
            line += 1
        elif char in "[{":
            stack.append(["list", 0] if char == "[" else ["object", None])
            if len(stack) > _DEEP:
                break
        elif char in "]}" and stack:
            stack.pop()
        elif char == ":" and stack:
            stack[-1][1] = last_string
        elif char == "," and stack and stack[-1][0] == "list":
            index = stack[-1][1]
            stack[-1][1] = index + 1 if isinstance(index, int) else 0
    parts: list[str | int] = [key for _, key in stack[:-1] if key is not None]
    return line, tuple(parts)


def _parse_json(text: str, path: str, line: int | None) -> object:
    """Parse JSON text: one line of a JSON-lines file (``line``) or a whole document.

    Raises:
        DatasetFormatError: Not UTF-8, not JSON, nested too deep, a number too long, an
            unpaired surrogate.
    """
    bad = None if text.isascii() else _ESCAPED_BYTE.search(text)
    if bad is not None:
        before = text[: bad.start()]
        found_line = (line or 1) + before.count("\n")
        column = bad.start() - before.rfind("\n")
        field = None
        try:
            flaw = _first_flaw(_decode(text)[0])
        except (ValueError, RecursionError):
            flaw = None
        if flaw is not None:
            field = _field_name(flaw[0] if line is not None else _record_path(flaw[0])[1])
        raise DatasetFormatError(
            path,
            location=f"line {found_line}",
            field=field,
            received=f"{_byte_words(bad.group())} (column {column})",
            expected="UTF-8 text",
            fix=_RE_ENCODE,
        )
    try:
        value, marked = _decode(text)
    except json.JSONDecodeError as exc:
        # a JSON line holds no line break but its last: the error is on that line
        at_line, column = (line, exc.pos + 1) if line is not None else (exc.lineno, exc.colno)
        raise DatasetFormatError(
            path,
            location=f"line {at_line}",
            field=None,
            received=f"text that is not valid JSON ({exc.msg} at column {column})",
            expected="one JSON object per line" if line is not None else "a JSON document",
        ) from None
    except RecursionError:
        deep_line, parts = _runaway_nesting(text)
        where = parts if line is not None else _record_path(parts)[1]
        raise DatasetFormatError(
            path,
            location=f"line {(line or 1) + deep_line - 1}",
            field=_field_name(where),
            received=f"JSON nested more than {_DEEP} levels deep (too deep for Python's parser)",
            expected="a record of plain fields",
        ) from None
    except ValueError as exc:  # any other refusal of the decoder
        raise DatasetFormatError(
            path,
            location=f"line {line or 1}",
            field=None,
            received=f"JSON the parser refused ({exc})",
            expected="a JSON document" if line is None else "one JSON object per line",
        ) from None
    # a number too long, or a surrogate escaped as \\udXXX: the walk names its field
    flaw = _first_flaw(value) if marked or "\\ud" in text or "\\uD" in text else None
    if flaw is not None:
        where, words = flaw
        location, parts = (f"line {line}", where) if line is not None else _record_path(where)
        raise DatasetFormatError(
            path,
            location=location,
            field=_field_name(parts),
            received=words,
            expected="text, or integers Python can read",
        )
    return value


def _record_path(parts: _JSONPath) -> tuple[str, _JSONPath]:
    """Where a path of a JSON document lies: ``("record N", field path)``.

    Places are named as the parsers name them: a list's records, SQuAD's ``data[N]``,
    TriviaQA's ``Data[N]``.
    """
    if parts and isinstance(parts[0], int):
        return f"record {parts[0]}", parts[1:]
    if len(parts) >= 2 and parts[0] in ("data", "Data") and isinstance(parts[1], int):
        return f"record {parts[1]}", parts
    return "the top-level object", parts


def _decode_embedded(text: str) -> object:
    """Parse JSON held in a text field (PopQA's ``possible_answers``).

    Raises:
        ValueError: Not JSON (or nested too deep for the parser).
    """
    try:
        return json.loads(text)
    except RecursionError:
        msg = "nested too deep"
        raise ValueError(msg) from None


def _checked_lines(handle: Iterable[str], path: Path) -> Iterator[str]:
    """The lines of a text file, refusing one with bytes that are not UTF-8.

    Raises:
        DatasetFormatError: A line holds a byte that is not UTF-8 (its number counts the
            physical lines, from 1).
    """
    for number, line in enumerate(handle, start=1):
        bad = _ESCAPED_BYTE.search(line)
        if bad is not None:
            raise DatasetFormatError(
                str(path),
                location=f"line {number}",
                field=None,
                received=f"{_byte_words(bad.group())} (column {bad.start() + 1})",
                expected="UTF-8 text",
                fix=_RE_ENCODE,
            )
        yield line


def _is_document_layout(value: object) -> bool:
    """A whole SQuAD ``{"data": [...]}`` or TriviaQA ``{"Data": [...]}`` object."""
    if not isinstance(value, dict) or "question" in value:
        return False
    return isinstance(value.get("data"), list) or isinstance(value.get("Data"), list)


def _sniff(path: Path) -> _FileKind:
    """Tell a JSON document from JSON lines from delimited text by the file's first line.

    A file whose first non-blank line is a complete JSON object is JSON lines, unless
    that object is a whole SQuAD/TriviaQA document written on one line; one that starts
    with ``[`` or with a ``{`` that does not close on its line is one JSON document;
    anything else is delimited text (TSV/CSV).

    Args:
        path: The file.

    Returns:
        The file kind.

    Raises:
        DatasetFormatError: The file is empty.
    """
    with _open_text(path) as handle:
        for line in handle:
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith("["):
                return "json"
            if stripped.startswith("{"):
                try:
                    first, _ = _decode(stripped)
                except (ValueError, RecursionError):
                    return "json"
                if not isinstance(first, dict) or _is_document_layout(first):
                    return "json"
                return "jsonl"
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
        DatasetFormatError: The file is not valid UTF-8 JSON (the error names the line).
    """
    with _open_text(path) as handle:
        text = handle.read()
    return _parse_json(text, str(path), None)


def _iter_json_lines(path: Path) -> Iterator[tuple[str, object]]:
    """Stream the values of a JSON-lines file, one line at a time; blank lines are skipped.

    Args:
        path: The file.

    Yields:
        ``("line N", parsed value)`` for each non-blank line, N counting from 1.

    Raises:
        DatasetFormatError: A line is not valid UTF-8 JSON (see the module docstring).
    """
    with _open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            yield f"line {number}", _parse_json(line, str(path), number)
