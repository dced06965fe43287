"""The package's previous BM25 retriever (0.1 ``sparse`` backend), kept as a baseline.

Every passage is held as a ``Document`` and the inverted index is a dict of numpy posting
arrays built in memory on every run; nothing can be saved. Scores are Lucene BM25 with the
``(k1 + 1)`` factor, unstemmed with spaCy's stop words.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
from langchain_core.documents import Document

from langchain_adaptive_rag.retrievers import english_analyzer


class SparseBM25:
    """Inverted index of term weights ``w[d, t] = idf(t) * tf (k1 + 1) / (tf + norm_d)``."""

    def __init__(self, documents: Sequence[Document], k1: float = 1.2, b: float = 0.75) -> None:
        self.documents = list(documents)
        corpus = [english_analyzer(d.page_content) for d in self.documents]
        self.size = len(corpus)
        lengths = np.array([len(doc) for doc in corpus], dtype=np.float64)
        norm = k1 * (1.0 - b + b * lengths / (float(lengths.mean()) or 1.0))
        postings: dict[str, tuple[list[int], list[float]]] = {}
        for d, doc in enumerate(corpus):
            for term, tf in Counter(doc).items():
                docs, weights = postings.setdefault(term, ([], []))
                docs.append(d)
                weights.append(tf * (k1 + 1.0) / (tf + norm[d]))
        self.postings = {}
        for term, (docs, weights) in postings.items():
            idf = math.log(1.0 + (self.size - len(docs) + 0.5) / (len(docs) + 0.5))
            self.postings[term] = (
                np.asarray(docs, dtype=np.int64),
                np.asarray(weights, dtype=np.float64) * idf,
            )

    def search(self, query: str, k: int = 3) -> list[Document]:
        scores = np.zeros(self.size, dtype=np.float64)
        for term in english_analyzer(query):
            entry = self.postings.get(term)
            if entry is not None:
                scores[entry[0]] += entry[1]
        candidates = np.flatnonzero(scores > 0)
        if candidates.size > k:
            candidates = candidates[np.argpartition(-scores[candidates], k - 1)[:k]]
        order = candidates[np.lexsort((candidates, -scores[candidates]))]
        return [self.documents[i] for i in order]
