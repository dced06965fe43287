"""Every method on the shipped toy model: the qualitative results the papers lead us to expect.

On a fixed balanced question set (known facts, known-first-hop/unknown-second-hop, unknown
first hop): wo-RAG fails the unknown-fact questions, SR-RAG and the adaptive methods answer
most of them, DRAGIN and FLARE retrieve less often than the fixed schedules, and DRAGIN
mostly does not retrieve when the model knows the facts.
"""

from __future__ import annotations

import pytest

from langchain_adaptive_rag.toyworld import (
    TOY_MODEL_PATH,
    load_toy_model,
    toy_questions,
    toy_retriever,
)
from langchain_adaptive_rag.toyworld.comparison import (
    QuestionResult,
    demo_questions,
    run_comparison,
    summarize,
)

UNKNOWN = ("known_first_unknown_second", "unknown")

NOT_YET = pytest.mark.xfail(
    strict=True,
    reason=(
        "The shipped toy model reads the right birth years (README 'The toy world': 0.90 "
        "beside two other people's passages) but answers comparison questions ('Who was "
        "born first?') at chance: it does not compare two year tokens, so a third of each "
        "category fails whatever is retrieved. Grandfather questions need the father's "
        "passage, which a query formed from the question alone rarely finds. Strict: a "
        "better model makes this test pass and the marker must go."
    ),
)


@pytest.fixture(scope="module")
def results() -> dict[str, list[QuestionResult]]:
    questions = demo_questions(toy_questions(), per_category=6)
    return run_comparison(load_toy_model(), toy_retriever(), questions)


def _em(results: list[QuestionResult], categories: tuple[str, ...]) -> float:
    kept = [r for r in results if r.category in categories]
    return sum(r.em for r in kept) / len(kept)


def test_the_question_set_is_balanced(results: dict[str, list[QuestionResult]]) -> None:
    categories = [r.category for r in results["dragin"]]
    assert {c: categories.count(c) for c in set(categories)} == {
        "known": 6,
        "known_first_unknown_second": 6,
        "unknown": 6,
    }


def test_the_shipped_model_is_loaded() -> None:
    assert (TOY_MODEL_PATH / "model.safetensors").exists()


def test_without_retrieval_unknown_facts_fail(results: dict[str, list[QuestionResult]]) -> None:
    assert _em(results["no_retrieval"], UNKNOWN) <= 0.2
    assert summarize(results["no_retrieval"]).retrievals == 0


def test_without_retrieval_known_facts_succeed(
    results: dict[str, list[QuestionResult]],
) -> None:
    assert _em(results["no_retrieval"], ("known",)) >= 0.8


@NOT_YET
@pytest.mark.parametrize("method", ["single_round", "flare", "dragin", "seakr"])
def test_retrieval_answers_most_unknown_fact_questions(
    results: dict[str, list[QuestionResult]], method: str
) -> None:
    assert _em(results[method], UNKNOWN) > 0.5


def test_dragin_and_flare_retrieve_less_than_fixed_schedules(
    results: dict[str, list[QuestionResult]],
) -> None:
    rate = {name: summarize(items).retrievals for name, items in results.items()}
    for adaptive in ("dragin", "flare"):
        for fixed in ("fix_length", "fix_sentence"):
            assert rate[adaptive] < rate[fixed], rate


def test_dragin_mostly_does_not_retrieve_on_known_facts(
    results: dict[str, list[QuestionResult]],
) -> None:
    known = [r for r in results["dragin"] if r.category == "known"]
    assert sum(bool(r.events) for r in known) <= len(known) // 3
    # and it does retrieve when the second hop is unknown
    later = [r for r in results["dragin"] if r.category == "known_first_unknown_second"]
    assert sum(bool(r.events) for r in later) >= len(later) // 2
