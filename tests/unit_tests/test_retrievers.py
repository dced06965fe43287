"""BM25 retriever: analyzers, hand-computed Lucene scores, title field, per-call k, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.retrievers import (
    BM25Analyzer,
    BM25Retriever,
    create_bm25_retriever,
    english_analyzer,
)
from langchain_adaptive_rag.retrievers.bm25 import top_rows
from langchain_adaptive_rag.retrieving import takes_k

PASSAGES = [
    "Anna Berg (born 1931) is a Swedish film director.",
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Carl Lind was born in Oslo in 1902.",
    "The river Seine flows through Paris, the capital of France.",
]
PLAIN = BM25Analyzer(stemmer=None)


def test_english_analyzer_is_unstemmed_with_spacy_stop_words() -> None:
    assert english_analyzer("The Director's film, BLUE Harbour (1962)!") == [
        "director",
        "film",
        "blue",
        "harbour",
        "1962",
    ]
    assert english_analyzer("it is what it is") == []


def test_default_analyzer_is_lucene_stop_words_and_english_stemming() -> None:
    analyzer = BM25Analyzer()
    assert (analyzer.stemmer, analyzer.stopwords) == ("english", "lucene")
    assert analyzer("The Directors' films, BLUE Harbour (1962)!") == [
        "director",
        "film",
        "blue",
        "harbour",
        "1962",
    ]
    # Lucene's 33 stop words keep "what" and "who"; the possessive "s" is dropped
    assert analyzer("Who is what? Anna's running") == ["who", "what", "anna", "run"]
    assert BM25Analyzer(stopwords=None, stemmer=None)("it is") == ["it", "is"]
    assert BM25Analyzer(stopwords="spacy", stemmer=None)("it is what") == []


@pytest.mark.parametrize(
    ("options", "message"),
    [({"stemmer": "porter"}, "stemmer must be"), ({"stopwords": "english"}, "stopwords must")],
)
def test_bad_analyzer_settings_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=message):
        BM25Analyzer(**options)  # type: ignore[arg-type]


def test_lucene_scores_by_hand() -> None:
    # Lucene: idf log(1 + (N - n + 0.5) / (n + 0.5)); tf / (tf + k1 (1 - b + b |d| / avgdl))
    docs = ["cat", "cat dog bird", "fish"]
    k1, b, avgdl = 1.2, 0.75, 5 / 3
    idf_cat = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    idf_dog = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    assert idf_cat == pytest.approx(0.4700036292, abs=1e-9)
    norm0 = k1 * (1 - b + b * 1 / avgdl)  # 0.84
    norm1 = k1 * (1 - b + b * 3 / avgdl)  # 1.92
    assert (norm0, norm1) == pytest.approx((0.84, 1.92))
    retriever = create_bm25_retriever(docs, analyzer=PLAIN)
    np.testing.assert_allclose(
        retriever.scores("cat"), [idf_cat / (1 + norm0), idf_cat / (1 + norm1), 0.0], rtol=1e-6
    )
    # a repeated query term counts twice, as in a Lucene boolean query of its clauses
    np.testing.assert_allclose(
        retriever.scores("dog cat cat"),
        [2 * idf_cat / (1 + norm0), (2 * idf_cat + idf_dog) / (1 + norm1), 0.0],
        rtol=1e-6,
    )
    tf2 = create_bm25_retriever(["cat cat", "cat dog", "fish bird"], analyzer=PLAIN)
    np.testing.assert_allclose(
        tf2.scores("cat"), [idf_cat * 2 / (2 + k1), idf_cat / (1 + k1), 0.0], rtol=1e-6
    )


def test_title_field_scores_as_best_fields_with_tie_breaker() -> None:
    docs = [
        Document(id="a", page_content="cat", metadata={"title": "dog"}),
        Document(id="b", page_content="dog", metadata={"title": "fish"}),
        Document(id="c", page_content="bird", metadata={"title": "cat"}),
    ]
    # every field: one term per passage, avgdl 1, each term in 1 of 3 passages
    w = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5)) / (1 + 1.2)
    retriever = create_bm25_retriever(docs, analyzer=PLAIN, index_title=True, k=3)
    assert retriever.index.index_title
    np.testing.assert_allclose(retriever.scores("cat dog"), [1.5 * w, w, w], rtol=1e-6)
    assert [d.id for d in retriever.invoke("cat dog")] == ["a", "b", "c"]  # ties: index order
    assert retriever.invoke("fish")[0].page_content == "dog"  # the text alone is returned
    untitled = create_bm25_retriever(docs, analyzer=PLAIN)
    np.testing.assert_allclose(untitled.scores("cat dog"), [w, w, 0.0], rtol=1e-6)
    no_titles = create_bm25_retriever(["cat", "dog"], index_title=True)
    assert not no_titles.index.index_title  # no document has a title: no field


def test_invoke_orders_by_score_with_ids_and_scores() -> None:
    retriever = create_bm25_retriever(PASSAGES, k=2)
    docs = retriever.invoke("When was the director Anna Berg born?")
    assert [d.id for d in docs] == ["doc-0", "doc-1"]
    assert docs[0].metadata["score"] > docs[1].metadata["score"] > 0
    assert len(retriever.invoke("Anna Berg film", k=1)) == 1


def test_stemming_matches_inflections() -> None:
    texts = ["She directs films.", "Carl Lind was born in Oslo."]
    assert [d.id for d in create_bm25_retriever(texts).invoke("directed film")] == ["doc-0"]
    assert create_bm25_retriever(texts, analyzer=PLAIN).invoke("directed film") == []


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
    assert retriever.invoke("") == []


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ([], "received no documents"),
        (["the", "and of"], "has an index term"),
        ("one text", "expected a list of Documents or strings, got str"),
    ],
)
def test_bad_corpus_is_explained(documents: object, message: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=message):
        create_bm25_retriever(documents)  # type: ignore[arg-type]


@pytest.mark.parametrize(("k1", "b"), [(-1.0, 0.75), (1.2, 1.5), (float("nan"), 0.75)])
def test_bad_bm25_parameters_are_explained(k1: float, b: float) -> None:
    with pytest.raises(AdaptiveRAGError, match="BM25"):
        create_bm25_retriever(PASSAGES, k1=k1, b=b)


def test_bad_k_is_explained() -> None:
    with pytest.raises(AdaptiveRAGError, match="k must be an integer >= 1, got 0"):
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


@pytest.mark.parametrize("size", [10, 5_000, 40_000])
def test_top_rows_equals_a_full_sort(size: int) -> None:
    rng = np.random.default_rng(size)
    for k in (1, 3, 10):
        # few distinct values: many ties; many zeros: rows that must never be returned
        scores = rng.choice([0.0, 0.0, 0.5, 1.0, 1.5, 2.0], size=size).astype(np.float32)
        scores[rng.integers(0, size, size=3)] = 7.0
        expected = [r for r in sorted(range(size), key=lambda r: (-scores[r], r)) if scores[r] > 0]
        assert list(top_rows(scores, k)) == expected[:k]
    assert list(top_rows(np.zeros(size, dtype=np.float32), 3)) == []


class _WithK(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int = 2
    ) -> list[Document]:
        return [Document(str(i)) for i in range(k)]


class _WithoutK(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document("only")]


def test_a_per_call_k_is_read_from_the_retrievers_own_signature() -> None:
    bm25 = create_bm25_retriever(["a b", "b c"])
    assert takes_k(bm25) and takes_k(bm25.with_retry()) and takes_k(_WithK())
    assert takes_k(_WithK().with_retry())
    assert not takes_k(_WithoutK()) and not takes_k(_WithoutK().with_retry())
    assert not takes_k(RunnableLambda(lambda q: [Document(q)]))
    assert len(_WithK().invoke("q", k=5)) == 5  # LangChain hands k to the retriever
