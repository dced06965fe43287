"""BM25 retrieval over the user's documents, the graphs' default retriever.

Scores are BM25 with term weight ``idf(t) * tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl))``.
The default idf is Lucene's ``log(1 + (N - n + 0.5) / (n + 0.5))``, as in the Elasticsearch
BM25 index the DRAGIN and FLARE papers retrieve from, always positive; ``idf="okapi"`` is
``rank_bm25``'s ``log((N - n + 0.5) / (n + 0.5))`` with negative values floored to
``epsilon`` times the average idf (a term in half the documents then scores 0).

Two backends rank identically: ``rank_bm25`` (scores every document for each query) and
``sparse``, an inverted index of precomputed term weights in numpy that reads only the
postings of the query's terms.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, Protocol

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = [
    "BM25Backend",
    "BM25Idf",
    "BM25Retriever",
    "create_bm25_retriever",
    "english_analyzer",
]

BM25Idf = Literal["lucene", "okapi"]
"""Inverse document frequency: Lucene/Elasticsearch (default) or rank_bm25's Okapi."""

BM25Backend = Literal["auto", "rank_bm25", "sparse"]
"""``rank_bm25`` scores every document per query (simple, slow beyond ~10k passages);
``sparse`` reads only the postings of the query's terms; ``auto`` picks ``sparse`` above
``SPARSE_THRESHOLD`` documents."""

SPARSE_THRESHOLD = 5_000
"""Corpus size above which ``backend="auto"`` uses the sparse index."""

_WORD = re.compile(r"\w+", re.UNICODE)


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS) | {"s", "t"}


def english_analyzer(text: str) -> list[str]:
    """Lower-case word tokens without punctuation or English stop words.

    Stop words are spaCy's English list (plus the ``s``/``t`` left by apostrophes).

    Args:
        text: Any text.

    Returns:
        Its index terms in order, repeats kept.
    """
    stop = _stop_words()
    return [w for w in _WORD.findall(text.lower()) if w not in stop]


class _Scorer(Protocol):
    def get_scores(self, query: list[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class _Index:
    documents: list[Document]
    analyzer: Callable[[str], list[str]]
    scorer: _Scorer


def _idf_table(
    document_frequency: dict[str, int], size: int, idf: BM25Idf, epsilon: float
) -> dict[str, float]:
    """Idf of every term from its document frequency ``n`` among ``size`` documents."""
    if idf == "lucene":
        return {
            t: math.log(1.0 + (size - n + 0.5) / (n + 0.5)) for t, n in document_frequency.items()
        }
    raw = {t: math.log(size - n + 0.5) - math.log(n + 0.5) for t, n in document_frequency.items()}
    floor = epsilon * sum(raw.values()) / len(raw) if raw else 0.0
    return {t: (v if v >= 0 else floor) for t, v in raw.items()}


class _SparseBM25:
    """Inverted index of term weights ``w[d, t] = idf(t) * tf (k1 + 1) / (tf + norm_d)``."""

    def __init__(
        self, corpus: Sequence[Sequence[str]], k1: float, b: float, idf: BM25Idf, epsilon: float
    ) -> None:
        self.size = len(corpus)
        lengths = np.array([len(doc) for doc in corpus], dtype=np.float64)
        average = float(lengths.mean()) if self.size else 0.0
        norm = k1 * (1.0 - b + b * lengths / (average or 1.0))
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for d, doc in enumerate(corpus):
            for term, tf in Counter(doc).items():
                docs, weights = postings.setdefault(term, ([], []))
                docs.append(d)
                weights.append(tf * (k1 + 1.0) / (tf + norm[d]))
        table = _idf_table(
            {term: len(docs) for term, (docs, _) in postings.items()}, self.size, idf, epsilon
        )
        self.postings = {
            term: (
                np.asarray(docs, dtype=np.int64),
                np.asarray(weights, dtype=np.float64) * table[term],
            )
            for term, (docs, weights) in postings.items()
        }

    def get_scores(self, query: list[str]) -> np.ndarray:
        scores = np.zeros(self.size, dtype=np.float64)
        for term in query:
            entry = self.postings.get(term)
            if entry is not None:
                scores[entry[0]] += entry[1]
        return scores


def _rank_bm25(
    corpus: list[list[str]], k1: float, b: float, idf: BM25Idf, epsilon: float
) -> _Scorer:
    """A ``rank_bm25.BM25Okapi`` whose idf table is :func:`_idf_table`'s."""
    from rank_bm25 import BM25Okapi

    scorer = BM25Okapi(corpus, k1=k1, b=b, epsilon=epsilon)
    frequencies = Counter(term for doc in corpus for term in set(doc))
    scorer.idf = _idf_table(dict(frequencies), len(corpus), idf, epsilon)
    return scorer  # type: ignore[no-any-return]


class BM25Retriever(BaseRetriever):
    """BM25 over a fixed list of documents; create it with :func:`create_bm25_retriever`.

    Returned documents carry their ``id`` and ``metadata["score"]``; documents that share
    no term with the query are never returned, so a query can return fewer than ``k``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    k: int = Field(default=3, ge=1)
    """Number of documents to return (per call: ``retriever.invoke(query, k=5)``)."""
    backend: Literal["rank_bm25", "sparse"] = "rank_bm25"
    """Index in use (resolved from ``auto``)."""

    _index: _Index | None = PrivateAttr(default=None)

    @property
    def index(self) -> _Index:
        """The documents, analyzer and scorer (set by :func:`create_bm25_retriever`)."""
        if self._index is None:
            msg = "This BM25Retriever has no index. Create it with create_bm25_retriever(...)."
            raise AdaptiveRAGError(msg)
        return self._index

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``, shape ``(len(documents),)``."""
        index = self.index
        result: np.ndarray = np.asarray(
            index.scorer.get_scores(index.analyzer(query)), dtype=np.float64
        )
        return result

    @property
    def documents(self) -> list[Document]:
        """The indexed documents, in index order."""
        return list(self.index.documents)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        limit = self.k if k is None else k
        if limit < 1:
            msg = f"k must be >= 1, got {limit}."
            raise AdaptiveRAGError(msg)
        documents = self.index.documents
        scores = self.scores(query)
        candidates = np.flatnonzero(scores > 0)
        if candidates.size > limit:
            top = np.argpartition(-scores[candidates], limit - 1)[:limit]
            candidates = candidates[top]
        order = candidates[np.lexsort((candidates, -scores[candidates]))]  # score, then index
        return [
            Document(
                id=documents[i].id,
                page_content=documents[i].page_content,
                metadata={**documents[i].metadata, "score": float(scores[i])},
            )
            for i in order
        ]


def create_bm25_retriever(
    documents: Sequence[Document] | Sequence[str],
    *,
    k: int = 3,
    backend: BM25Backend = "auto",
    k1: float = 1.2,
    b: float = 0.75,
    idf: BM25Idf = "lucene",
    epsilon: float = 0.25,
    analyzer: Callable[[str], list[str]] = english_analyzer,
) -> BM25Retriever:
    """Index documents (or plain texts) for BM25 retrieval.

    Args:
        documents: ``Document`` objects or strings. A Document without an ``id`` takes
            ``metadata["id"]``, else ``"doc-<index>"``.
        k: Documents returned per query (``invoke(query, k=...)`` overrides it).
        backend: ``rank_bm25``, ``sparse`` (fast on large corpora) or ``auto``.
        k1: BM25 term-frequency saturation (Elasticsearch's default 1.2).
        b: BM25 length normalisation.
        idf: ``lucene`` (always positive) or ``okapi`` (rank_bm25's, floored).
        epsilon: With ``okapi``: floor for negative idf, a fraction of the average idf.
        analyzer: Text to index terms (default: lower-case, no punctuation or stop words).

    Returns:
        The retriever.

    Raises:
        AdaptiveRAGError: If there are no documents or none has an index term.
    """
    docs = [Document(page_content=d) if isinstance(d, str) else d for d in documents]
    if not docs:
        msg = (
            "create_bm25_retriever received no documents. Expected a non-empty list of "
            "Documents or strings (the passages to search)."
        )
        raise AdaptiveRAGError(msg)
    docs = [
        d
        if d.id is not None
        else Document(
            id=str(d.metadata.get("id", f"doc-{i}")),
            page_content=d.page_content,
            metadata=d.metadata,
        )
        for i, d in enumerate(docs)
    ]
    corpus = [analyzer(d.page_content) for d in docs]
    if not any(corpus):
        msg = (
            f"None of the {len(docs)} documents has an index term after analysis (all empty "
            "or stop words). Expected passages with content words."
        )
        raise AdaptiveRAGError(msg)
    chosen = backend
    if chosen == "auto":
        chosen = "sparse" if len(docs) > SPARSE_THRESHOLD else "rank_bm25"
    scorer: _Scorer
    if idf not in ("lucene", "okapi"):
        msg = f"idf must be 'lucene' or 'okapi', got {idf!r}."
        raise AdaptiveRAGError(msg)
    if chosen == "sparse":
        scorer = _SparseBM25(corpus, k1=k1, b=b, idf=idf, epsilon=epsilon)
    elif chosen == "rank_bm25":
        scorer = _rank_bm25(corpus, k1=k1, b=b, idf=idf, epsilon=epsilon)
    else:
        msg = f"backend must be 'auto', 'rank_bm25' or 'sparse', got {backend!r}."
        raise AdaptiveRAGError(msg)
    retriever = BM25Retriever(k=k, backend=chosen)
    retriever._index = _Index(documents=docs, analyzer=analyzer, scorer=scorer)
    return retriever
