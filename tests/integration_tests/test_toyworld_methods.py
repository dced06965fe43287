"""Every method on the shipped toy model: the qualitative results the papers lead us to expect.

On a fixed balanced question set (known facts, known-first-hop/unknown-second-hop, unknown
first hop): wo-RAG fails the unknown-fact questions, SR-RAG, IRCoT, Adaptive-RAG and FLARE
answer most of them, DRAGIN and FLARE retrieve less often than the fixed schedules, and DRAGIN
retrieves when the second hop is unknown; SeaKR's self-aware re-ranking keeps a gold
passage when BM25 returned one. On the held-out test split of the harness: wo-RAG
answers its 71 known-fact questions, SR-RAG and the adaptive methods answer most of its 90
unknown-fact questions, and DRAGIN mostly does not retrieve on the known ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from langchain_adaptive_rag.evaluation.metrics import exact_match
from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
from langchain_adaptive_rag.toyworld import (
    TOY_MODEL_PATH,
    TOY_PROMPTS,
    load_toy_model,
    toy_corpus,
    toy_questions,
    toy_retriever,
)
from langchain_adaptive_rag.toyworld.benchmark import split_dev_test, toy_examples
from langchain_adaptive_rag.toyworld.comparison import (
    TOY_CONFIGS,
    QuestionResult,
    demo_questions,
    run_comparison,
    summarize,
)
from langchain_adaptive_rag.toyworld.questions import ToyQuestion

UNKNOWN = ("known_first_unknown_second", "unknown")
GUESS_PROOF = ("compositional", "inference")


@pytest.fixture(scope="module")
def results() -> dict[str, list[QuestionResult]]:
    questions = demo_questions(toy_questions(), per_category=6)
    model = load_toy_model()
    model.batch_concurrent_calls = True  # eight at a time, results as one at a time
    return run_comparison(model, toy_retriever(), questions, concurrency=8)


def _em(
    results: list[QuestionResult],
    categories: tuple[str, ...],
    types: tuple[str, ...] = ("compositional", "comparison", "inference"),
) -> float:
    kept = [r for r in results if r.category in categories and r.question_type in types]
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
    # A comparison names one of the question's two people, so a guess is right half the
    # time: failing is asserted on the questions whose answer cannot be guessed.
    assert _em(results["no_retrieval"], UNKNOWN, GUESS_PROOF) <= 0.2
    assert summarize(results["no_retrieval"]).retrievals == 0


@pytest.mark.parametrize("method", ["single_round", "ircot", "adaptive_rag", "flare"])
def test_retrieval_answers_most_unknown_fact_questions(
    results: dict[str, list[QuestionResult]], method: str
) -> None:
    assert _em(results[method], UNKNOWN) > 0.5


def test_seakr_reranking_keeps_a_gold_passage(
    results: dict[str, list[QuestionResult]],
) -> None:
    # Self-aware re-ranking regenerates the step with each of BM25's passages; the toy
    # model is sure with any of them (U at its floor), and the margin keeps BM25's order.
    gold = {q.id: set(q.supporting_ids) for q in toy_questions()}
    events = [
        (r.question_id, e)
        for r in results["seakr"]
        for e in r.events
        if gold[r.question_id] & set(e["doc_ids"])
    ]
    kept = [e["doc_ids"][e["rerank_order"][0]] in gold[q] for q, e in events if e["rerank_order"]]
    assert len(kept) >= 12
    assert sum(kept) / len(kept) >= 0.8, f"{sum(kept)} of {len(kept)} kept a gold passage"


def _eight_at_a_time(method: str, questions: list[ToyQuestion]) -> list[dict[str, Any]]:
    """The method's final states, eight questions at a time: their model calls decode in
    one batched loop, with the results of one at a time (engine/test_scheduler.py)."""
    model = load_toy_model()
    model.batch_concurrent_calls = True
    graph = create_adaptive_rag_graph(
        model, toy_retriever(), method, config=TOY_CONFIGS[method], prompts=TOY_PROMPTS
    )
    return graph.batch([{"question": q.question} for q in questions], {"max_concurrency": 8})


def _held_out_em(method: str, questions: list[ToyQuestion]) -> float:
    """The method's exact match over ``questions``, eight at a time."""
    states = _eight_at_a_time(method, questions)
    assert len(states) == len(questions)
    pairs = zip(states, questions, strict=True)
    return sum(exact_match(str(state["answer"]), q.answer) for state, q in pairs) / len(states)


@pytest.fixture(scope="module")
def held_out() -> list[ToyQuestion]:
    # The harness's held-out test split (161 questions).
    test_ids = {e.id for e in split_dev_test(toy_examples(toy_questions(), toy_corpus()))[1]}
    return [q for q in toy_questions() if q.id in test_ids]


@pytest.fixture(scope="module")
def unknown_test_questions(held_out: list[ToyQuestion]) -> list[ToyQuestion]:
    return [q for q in held_out if q.category in UNKNOWN]


def test_without_retrieval_known_facts_succeed(held_out: list[ToyQuestion]) -> None:
    # Every known-fact question of the held-out test split (71): the fixed set's six hold
    # four comparison and grandfather questions, which the toy model answers least surely.
    known = [q for q in held_out if q.category == "known"]
    em = _held_out_em("no_retrieval", known)
    assert len(known) == 71 and em >= 0.8, f"EM {em:.3f} on {len(known)} known-fact questions"


@pytest.mark.parametrize("method", ["single_round", "flare", "dragin", "seakr"])
def test_retrieval_answers_most_unknown_fact_test_questions(
    unknown_test_questions: list[ToyQuestion], method: str
) -> None:
    # The fixed set's 12 unknown-fact questions are few (DRAGIN and SeaKR answer 5 and 6 of
    # them): the same claim on all 90 of the held-out test split (the harness's split;
    # comparisons, compositional and grandfather); SeaKR, whose calls decode k + 1
    # sequences, on the first 48 (EM 0.83 there, 0.66 on all 90 when measured) to keep the
    # suite's time.
    questions = unknown_test_questions[:48] if method == "seakr" else unknown_test_questions
    em = _held_out_em(method, questions)
    assert len(unknown_test_questions) == 90
    assert em > 0.5, f"{method}: EM {em:.3f} on {len(questions)} unknown-fact test questions"


def test_dragin_and_flare_retrieve_less_than_fixed_schedules(
    results: dict[str, list[QuestionResult]],
) -> None:
    rate = {name: summarize(items).retrievals for name, items in results.items()}
    for adaptive in ("dragin", "flare"):
        for fixed in ("fix_length", "fix_sentence"):
            assert rate[adaptive] < rate[fixed], rate


def test_dragin_retrieves_when_the_second_hop_is_unknown(
    results: dict[str, list[QuestionResult]],
) -> None:
    later = [r for r in results["dragin"] if r.category == "known_first_unknown_second"]
    assert sum(bool(r.events) for r in later) >= len(later) // 2


def test_dragin_mostly_does_not_retrieve_on_known_facts(held_out: list[ToyQuestion]) -> None:
    # Every known-fact question of the held-out test split (71, the harness's split):
    # six questions are too few for a share, and the fixed set's six hold four of the
    # comparison and grandfather questions the toy model is least sure of.
    known = [q for q in held_out if q.category == "known"]
    retrieving = sum(bool(state["retrievals"]) for state in _eight_at_a_time("dragin", known))
    assert len(known) == 71
    assert retrieving < len(known) / 2, f"{retrieving} of {len(known)} retrieve"


def test_the_router_classifies_toy_questions_by_semantic_entropy() -> None:
    from langchain_adaptive_rag.graphs import create_adaptive_rag_graph
    from langchain_adaptive_rag.graphs.adaptive_rag import AdaptiveRAGConfig

    config = AdaptiveRAGConfig(
        generate_max_length=48, retrieve_topk=3, max_paragraphs=6, classifier="semantic_entropy"
    )
    graph = create_adaptive_rag_graph(
        load_toy_model(), toy_retriever(), "adaptive_rag", config=config, prompts=TOY_PROMPTS
    )
    question = demo_questions(toy_questions(), per_category=1)[0]
    events: list[dict[str, object]] = []
    final: dict[str, object] = {}
    for mode, part in graph.stream(
        {"question": question.question}, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append(part)
        else:
            final = part
    (event,) = [e for e in events if e.get("event") == "complexity"]
    assert event["complexity"] in ("A", "B", "C")
    assert "over 5 sampled answers" in str(event["note"])
    counts = final["counts"]
    assert isinstance(counts, dict) and counts["llm_calls"] >= 6  # 5 samples, then the route
