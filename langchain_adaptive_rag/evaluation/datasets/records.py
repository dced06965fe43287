"""Records with checked fields, and the helpers the format parsers share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from langchain_core.documents import Document

from langchain_adaptive_rag.errors import DatasetFormatError
from langchain_adaptive_rag.evaluation.datasets.example import JSONValue
from langchain_adaptive_rag.evaluation.datasets.reading import _LongNumber

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
    if isinstance(value, _LongNumber):
        return value.describe()
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
    try:
        preview = repr(value)
    except RecursionError:
        preview = "nested too deep to show"
    if len(preview) > 60:
        preview = preview[:57] + "..."
    return f"{kind} ({preview})"


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
        """A list of JSON objects, each wrapped as a nested ``_Record``.

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
