"""Whether two runs gave the same results, question by question, and in what sense.

Two runs of the same settings (at ``--concurrency 1`` and 8, with and without the prefix
cache, before and after a change) give the same answers, texts, retrieved documents,
decisions and counts; their floating-point scores (a retrieval decision's ``score`` and
``threshold``) agree to rounding, not always to the bit: a batched decoding step sums in
another order than a step alone, which moves the last bits of a logit. So "the same
results" is checked as:

- every text, id, list, integer and boolean equal exactly (answers, texts, metrics'
  inputs, queries, document ids and texts, trigger positions and words, re-rank orders,
  notes, counts, error types and messages);
- every float within ``tolerance`` (default ``1e-4``), relative to its size when larger
  than 1: ``|a - b| <= tolerance * max(1, |a|, |b|)``;
- ``seconds``, the settings fingerprint and error tracebacks are not compared.

A decision that rests on a score within rounding of its threshold can flip; it then shows
as a difference of the trigger, the query or the documents, never as rounding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_adaptive_rag.catalogue import DEFAULT_TOLERANCE
from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation.results import FINGERPRINT_KEY, PathLike, Record, read_run

__all__ = [
    "DEFAULT_TOLERANCE",
    "Difference",
    "RunAgreement",
    "compare_records",
    "compare_results",
]

_NOT_COMPARED = frozenset({"seconds", FINGERPRINT_KEY})


@dataclass(frozen=True)
class Difference:
    """One value that differs between two runs' results for a question."""

    question_id: str
    """The question."""
    field: str
    """Where in its record: ``"prediction.answer"``, ``"retrievals[1].doc_ids"``."""
    first: object
    """The value in the first run."""
    second: object
    """The value in the second run."""


@dataclass(frozen=True)
class RunAgreement:
    """How two runs' results compare, question by question."""

    questions: int
    """Questions answered in both runs (the ones compared)."""
    only_first: tuple[str, ...]
    """Question ids answered only in the first run."""
    only_second: tuple[str, ...]
    """Question ids answered only in the second run."""
    differences: tuple[Difference, ...]
    """Values that differ: exact fields that are not equal, floats beyond tolerance."""
    rounded: int
    """Floats that differ within the tolerance (0: the compared values are bit-identical)."""
    largest_rounding: float
    """The largest difference among them (0.0 when there is none)."""
    tolerance: float
    """The tolerance used."""

    @property
    def agree(self) -> bool:
        """Same questions, exact fields equal, floats equal to rounding."""
        return not (self.only_first or self.only_second or self.differences)

    @property
    def bit_identical(self) -> bool:
        """Agree, and every float equal to the bit too."""
        return self.agree and self.rounded == 0

    def describe(self) -> str:
        """The agreement in one sentence."""
        if not self.agree:
            parts = []
            if self.differences:
                ids = {d.question_id for d in self.differences}
                parts.append(f"{len(ids)} of {self.questions} questions differ")
            if self.only_first or self.only_second:
                parts.append(
                    f"{len(self.only_first)} questions only in the first run, "
                    f"{len(self.only_second)} only in the second"
                )
            return "; ".join(parts) + "."
        if self.rounded == 0:
            return f"{self.questions} questions: identical to the bit."
        return (
            f"{self.questions} questions: answers, texts, documents, decisions and counts "
            f"equal; {self.rounded} scores differ by rounding (at most "
            f"{self.largest_rounding:.1e}, within {self.tolerance:g})."
        )


class _Walk:
    """Compares two JSON values, collecting differences and rounding."""

    def __init__(self, question_id: str, tolerance: float) -> None:
        self.question_id = question_id
        self.tolerance = tolerance
        self.differences: list[Difference] = []
        self.rounded = 0
        self.largest = 0.0

    def value(self, first: object, second: object, where: str) -> None:
        if _is_float(first) or _is_float(second):
            self.number(first, second, where)
        elif isinstance(first, Mapping) and isinstance(second, Mapping):
            for key in sorted(set(first) | set(second), key=str):
                if key == "traceback" or (not where and key in _NOT_COMPARED):
                    continue
                path = f"{where}.{key}" if where else str(key)
                if key not in first or key not in second:
                    self.differ(path, first.get(key), second.get(key))
                else:
                    self.value(first[key], second[key], path)
        elif isinstance(first, list) and isinstance(second, list):
            if len(first) != len(second) or not any(map(_holds_floats, (*first, *second))):
                if first != second:  # a list of ids or words: one difference for it
                    self.differ(where, first, second)
                return
            for index, (a, b) in enumerate(zip(first, second, strict=True)):
                self.value(a, b, f"{where}[{index}]")
        elif first != second or type(first) is not type(second):
            self.differ(where, first, second)

    def number(self, first: object, second: object, where: str) -> None:
        if not (_is_number(first) and _is_number(second)):
            self.differ(where, first, second)
            return
        a, b = float(first), float(second)  # type: ignore[arg-type]
        if a == b or (math.isnan(a) and math.isnan(b)):
            return
        gap = abs(a - b)
        if gap <= self.tolerance * max(1.0, abs(a), abs(b)):
            self.rounded += 1
            self.largest = max(self.largest, gap)
        else:
            self.differ(where, first, second)

    def differ(self, where: str, first: object, second: object) -> None:
        self.differences.append(Difference(self.question_id, where, first, second))


def _holds_floats(value: object) -> bool:
    """Whether a value is a float or a container (where floats may sit)."""
    return isinstance(value, (float, Mapping, list))


def _is_float(value: object) -> bool:
    return isinstance(value, float)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def compare_records(
    first: Sequence[Record], second: Sequence[Record], *, tolerance: float = DEFAULT_TOLERANCE
) -> RunAgreement:
    """Compare two runs' result records, question by question (see the module's rules).

    Args:
        first: One run's records ([`read_results`][]), one per question id.
        second: The other run's.
        tolerance: How far floats may differ and still count as equal to rounding.

    Returns:
        The agreement (questions compared, ids in one run only, differences, rounding).

    Raises:
        AdaptiveRAGError: ``tolerance`` is negative or not a finite number.
    """
    if (
        isinstance(tolerance, bool)
        or not isinstance(tolerance, (int, float))
        or not (math.isfinite(tolerance) and tolerance >= 0)
    ):
        msg = f"Received tolerance={tolerance!r}; expected a finite number >= 0 (e.g. 1e-4)."
        raise AdaptiveRAGError(msg)
    by_id = {str(record["id"]): record for record in second}
    seen = {str(record["id"]) for record in first}
    differences: list[Difference] = []
    rounded, largest = 0, 0.0
    for record in first:
        key = str(record["id"])
        if key not in by_id:
            continue
        walk = _Walk(key, float(tolerance))
        walk.value(record, by_id[key], "")
        differences.extend(walk.differences)
        rounded += walk.rounded
        largest = max(largest, walk.largest)
    return RunAgreement(
        questions=len(seen & set(by_id)),
        only_first=tuple(sorted(seen - set(by_id))),
        only_second=tuple(sorted(set(by_id) - seen)),
        differences=tuple(differences),
        rounded=rounded,
        largest_rounding=largest,
        tolerance=float(tolerance),
    )


def compare_results(
    first: PathLike, second: PathLike, *, tolerance: float = DEFAULT_TOLERANCE
) -> RunAgreement:
    """Compare two run directories' results, question by question.

    Args:
        first: One run directory.
        second: The other.
        tolerance: How far floats may differ and still count as equal to rounding.

    Returns:
        The agreement; ``agree`` means the same results in the sense of this module,
        ``bit_identical`` the same to the bit as well.

    Raises:
        AdaptiveRAGError: A directory is not a run directory, or holds results of other
            settings than its ``run.json``.
    """
    _, first_records = read_run(Path(first))
    _, second_records = read_run(Path(second))
    return compare_records(first_records, second_records, tolerance=tolerance)
