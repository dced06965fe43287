"""Two runs' results compared question by question: exact fields, floats to rounding."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.evaluation import compare_records

RECORD: dict[str, Any] = {
    "id": "q1",
    "run": "0123456789abcdef",
    "question": "Who directed Blue Harbour?",
    "answers": ["Anna Berg"],
    "prediction": {"answer": "Anna Berg", "text": "So the answer is Anna Berg."},
    "metrics": {"em": 1.0, "f1": 1.0},
    "counts": {"retrievals": 1, "llm_calls": 2},
    "seconds": 1.25,
    "retrievals": [
        {
            "step": 1,
            "trigger_position": 4,
            "trigger_word": "directed",
            "score": 0.3141592,
            "threshold": 0.5,
            "query": "Blue Harbour directed",
            "doc_ids": ["p1", "p2"],
            "rerank_order": None,
            "note": "",
        }
    ],
    "error": None,
}


def _changed(
    path: tuple[Any, ...], value: object, record: dict[str, Any] = RECORD
) -> dict[str, Any]:
    result = copy.deepcopy(record)
    target: Any = result
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return result


def test_equal_runs_are_bit_identical() -> None:
    agreement = compare_records([RECORD], [copy.deepcopy(RECORD)])
    assert agreement.agree and agreement.bit_identical
    assert agreement.describe() == "1 questions: identical to the bit."


def test_seconds_fingerprint_and_traceback_are_not_compared() -> None:
    other = _changed(("seconds",), 9.0)
    other["run"] = "fedcba9876543210"
    failed = _changed(("error",), {"type": "E", "message": "m", "traceback": "line 1"})
    failed_again = _changed(("error",), {"type": "E", "message": "m", "traceback": "line 2"})
    assert compare_records([RECORD], [other]).bit_identical
    assert compare_records([failed], [failed_again]).bit_identical


def test_a_score_differing_in_its_last_bits_is_rounding() -> None:
    other = _changed(("retrievals", 0, "score"), 0.3141592 + 3e-8)
    agreement = compare_records([RECORD], [other])
    assert agreement.agree and not agreement.bit_identical
    assert agreement.rounded == 1 and agreement.largest_rounding == pytest.approx(3e-8)
    assert "1 scores differ by rounding (at most 3.0e-08, within 0.0001)" in agreement.describe()


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("retrievals", 0, "score"), 0.32, "retrievals[0].score"),
        (("retrievals", 0, "doc_ids"), ["p2", "p1"], "retrievals[0].doc_ids"),
        (("retrievals", 0, "trigger_position"), 5, "retrievals[0].trigger_position"),
        (("prediction", "text"), "So the answer is Anna.", "prediction.text"),
        (("counts", "llm_calls"), 3, "counts.llm_calls"),
        (("retrievals",), [], "retrievals"),
        (("metrics", "em"), 0.0, "metrics.em"),
    ],
)
def test_other_values_are_differences(path: tuple[Any, ...], value: object, field: str) -> None:
    agreement = compare_records([RECORD], [_changed(path, value)])
    assert not agreement.agree
    assert [d.field for d in agreement.differences] == [field]
    assert agreement.differences[0].question_id == "q1"
    assert agreement.describe() == "1 of 1 questions differ."


def test_a_relative_tolerance_above_one() -> None:
    big = _changed(("retrievals", 0, "threshold"), 1000.0)
    near = _changed(("retrievals", 0, "threshold"), 1000.05, big)  # 5e-5 relative
    assert compare_records([big], [near]).agree
    assert not compare_records([big], [near], tolerance=1e-6).agree


def test_questions_in_one_run_only_are_named() -> None:
    other = _changed(("id",), "q2")
    agreement = compare_records([RECORD], [other])
    assert (agreement.questions, agreement.only_first, agreement.only_second) == (
        0,
        ("q1",),
        ("q2",),
    )
    assert not agreement.agree


@pytest.mark.parametrize("tolerance", [-1.0, float("nan"), True, "1e-4"])
def test_a_bad_tolerance_is_refused(tolerance: object) -> None:
    with pytest.raises(AdaptiveRAGError, match="expected a finite number >= 0"):
        compare_records([RECORD], [RECORD], tolerance=tolerance)  # type: ignore[arg-type]
