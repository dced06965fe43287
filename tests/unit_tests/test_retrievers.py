"""BM25 retriever: analyzer, hand-computed scores, backends agree, per-call k, errors."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.retrievers import (
    BM25Retriever,
    create_bm25_retriever,
    english_analyzer,
)

PASSAGES = [
    "Anna Berg (born 1931) is a Swedish film director.",
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Carl Lind was born in Oslo in 1902.",
    "The river Seine flows through Paris, the capital of France.",
]


def test_english_analyzer() -> None:
    assert english_analyzer("The Director's film, BLUE Harbour (1962)!") == [
        "director",
        "film",
        "blue",
        "harbour",
        "1962",
    ]
    assert english_analyzer("it is what it is") == []


def test_okapi_scores_by_hand() -> None:
    # Three documents; "cat" occurs in doc 0 (tf 2, length 2) and doc 1 (tf 1, length 2).
    docs = ["cat cat", "cat dog", "fish bird"]
    k1, b, avgdl = 1.5, 0.75, 2.0
    idf_cat = math.log(3 - 2 + 0.5) - math.log(2 + 0.5)  # negative: floored
    idf_one = math.log(2.5) - math.log(1.5)  # dog, fish and bird occur once
    floor = 0.25 * (idf_cat + 3 * idf_one) / 4
    norm = k1 * (1 - b + b * 2 / avgdl)  # every document has length 2
    expected = [floor * 2 * (k1 + 1) / (2 + norm), floor * 1 * (k1 + 1) / (1 + norm), 0.0]
    dog = idf_one * (k1 + 1) / (1 + norm)
    for backend in ("sparse", "rank_bm25"):
        retriever = create_bm25_retriever(docs, backend=backend, idf="okapi", k1=k1)
        np.testing.assert_allclose(retriever.scores("cat"), expected)
        np.testing.assert_allclose(
            retriever.scores("dog cat"), [expected[0], expected[1] + dog, 0.0]
        )


def test_lucene_scores_by_hand() -> None:
    # Lucene idf log(1 + (N - n + 0.5) / (n + 0.5)) stays positive for a term in 2 of 3 docs.
    docs = ["cat cat", "cat dog", "fish bird"]
    k1, b = 1.2, 0.75
    idf_cat = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # 0.4700036292
    assert idf_cat == pytest.approx(0.4700036292, abs=1e-9)
    norm = k1 * (1 - b + b * 1.0)
    expected = [idf_cat * 2 * 2.2 / (2 + norm), idf_cat * 1 * 2.2 / (1 + norm), 0.0]
    for backend in ("sparse", "rank_bm25"):
        retriever = create_bm25_retriever(docs, backend=backend)
        np.testing.assert_allclose(retriever.scores("cat"), expected)


def test_backends_rank_identically() -> None:
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choices(vocab, k=rng.randint(3, 30))) for _ in range(400)]
    for idf in ("lucene", "okapi"):
        slow = create_bm25_retriever(texts, backend="rank_bm25", k=10, idf=idf)
        fast = create_bm25_retriever(texts, backend="sparse", k=10, idf=idf)
        assert (slow.backend, fast.backend) == ("rank_bm25", "sparse")
        for _ in range(20):
            query = " ".join(rng.choices(vocab, k=rng.randint(1, 6)))
            np.testing.assert_allclose(fast.scores(query), slow.scores(query), atol=1e-9)
            assert [d.id for d in fast.invoke(query)] == [d.id for d in slow.invoke(query)]


def test_invoke_orders_by_score_with_ids_and_scores() -> None:
    retriever = create_bm25_retriever(PASSAGES, k=2)
    docs = retriever.invoke("When was the director Anna Berg born?")
    assert [d.id for d in docs] == ["doc-0", "doc-1"]
    assert docs[0].metadata["score"] > docs[1].metadata["score"] > 0
    assert len(retriever.invoke("Anna Berg film", k=1)) == 1


def test_documents_keep_their_ids_and_metadata() -> None:
    retriever = create_bm25_retriever(
        [Document(id="berg", page_content=PASSAGES[0], metadata={"title": "Anna Berg"})]
    )
    (doc,) = retriever.invoke("Berg")
    assert doc.id == "berg" and doc.metadata["title"] == "Anna Berg"


def test_no_matching_term_returns_nothing() -> None:
    retriever = create_bm25_retriever(PASSAGES)
    assert retriever.invoke("zebra quantum") == []
    assert retriever.invoke("the of and") == []


def test_auto_backend_switches_on_size() -> None:
    assert create_bm25_retriever(PASSAGES).backend == "rank_bm25"
    big = [f"passage {i} term{i % 97}" for i in range(5_001)]
    assert create_bm25_retriever(big).backend == "sparse"


@pytest.mark.parametrize(
    ("documents", "message"),
    [([], "received no documents"), (["the", "and of"], "has an index term")],
)
def test_bad_corpus_is_explained(documents: list[str], message: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=message):
        create_bm25_retriever(documents)


def test_bad_k_is_explained() -> None:
    with pytest.raises(AdaptiveRAGError, match="k must be >= 1, got 0"):
        create_bm25_retriever(PASSAGES).invoke("Berg", k=0)


class TestBM25RetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BM25Retriever]:
        return create_bm25_retriever  # type: ignore[return-value]

    @property
    def retriever_constructor_params(self) -> dict[str, object]:
        return {"documents": PASSAGES * 2}

    @property
    def retriever_query_example(self) -> str:
        return "Anna Berg film director"


def test_ids_come_from_the_document_then_its_metadata() -> None:
    docs = [
        Document(id="own", page_content="Anna Berg directed Blue Harbour."),
        Document(page_content="Anna Berg was born in 1931.", metadata={"id": "p7"}),
        Document(page_content="Carl Lind was born in Oslo."),
    ]
    retriever = create_bm25_retriever(docs, k=3)
    assert sorted(str(d.id) for d in retriever.invoke("Anna Berg Carl")) == ["doc-2", "own", "p7"]
