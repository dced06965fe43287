"""Retrieval: BM25 on ``bm25s`` (in memory, saved, memory-mapped) and on Elasticsearch.

- [`create_bm25_retriever`][] indexes a list of Documents in memory;
  ``retriever.save(dir)`` writes it, [`load_bm25_retriever`][] memory-maps it back.
- [`build_bm25_index`][] streams a corpus of any size (DPR's 21M passages) into such a
  directory in bounded memory (``adaptive-rag index CORPUS --out DIR``).
- [`verify_bm25_index`][] checks a saved index in full against the checksums written with
  it (``adaptive-rag verify-index DIR``).
- [`create_elasticsearch_retriever`][] and [`index_elasticsearch`][] set up the papers'
  Elasticsearch BM25 for a corpus beyond one machine.

Names load on first use (PEP 562): the command line's parsers import no retriever.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_adaptive_rag.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from langchain_adaptive_rag.retrievers.analysis import (
        BM25Analyzer,
        english_analyzer,
    )
    from langchain_adaptive_rag.retrievers.bm25 import (
        BM25Index,
        BM25Retriever,
        create_bm25_retriever,
        load_bm25_retriever,
    )
    from langchain_adaptive_rag.retrievers.builder import (
        BM25Parameters,
        build_bm25_index,
    )
    from langchain_adaptive_rag.retrievers.elasticsearch import (
        create_elasticsearch_retriever,
        elasticsearch_index_body,
        elasticsearch_query_body,
        index_elasticsearch,
    )
    from langchain_adaptive_rag.retrievers.verify import (
        verify_bm25_index,
    )

_EXPORTS: dict[str, str] = {
    "BM25Analyzer": "langchain_adaptive_rag.retrievers.analysis",
    "BM25Index": "langchain_adaptive_rag.retrievers.bm25",
    "BM25Parameters": "langchain_adaptive_rag.retrievers.builder",
    "BM25Retriever": "langchain_adaptive_rag.retrievers.bm25",
    "build_bm25_index": "langchain_adaptive_rag.retrievers.builder",
    "create_bm25_retriever": "langchain_adaptive_rag.retrievers.bm25",
    "create_elasticsearch_retriever": "langchain_adaptive_rag.retrievers.elasticsearch",
    "elasticsearch_index_body": "langchain_adaptive_rag.retrievers.elasticsearch",
    "elasticsearch_query_body": "langchain_adaptive_rag.retrievers.elasticsearch",
    "english_analyzer": "langchain_adaptive_rag.retrievers.analysis",
    "index_elasticsearch": "langchain_adaptive_rag.retrievers.elasticsearch",
    "load_bm25_retriever": "langchain_adaptive_rag.retrievers.bm25",
    "verify_bm25_index": "langchain_adaptive_rag.retrievers.verify",
}
"""Where each public name lives."""

__all__ = [
    "BM25Analyzer",
    "BM25Index",
    "BM25Parameters",
    "BM25Retriever",
    "build_bm25_index",
    "create_bm25_retriever",
    "create_elasticsearch_retriever",
    "elasticsearch_index_body",
    "elasticsearch_query_body",
    "english_analyzer",
    "index_elasticsearch",
    "load_bm25_retriever",
    "verify_bm25_index",
]


__getattr__, __dir__ = lazy_exports(
    "langchain_adaptive_rag.retrievers", _EXPORTS, globals(), __all__
)
