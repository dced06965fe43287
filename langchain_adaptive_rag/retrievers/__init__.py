"""Retrieval: BM25 on ``bm25s`` (in memory, saved, memory-mapped) and on Elasticsearch.

- ``create_bm25_retriever`` indexes a list of Documents in memory;
  ``retriever.save(dir)`` writes it, ``load_bm25_retriever`` memory-maps it back.
- ``build_bm25_index`` streams a corpus of any size (DPR's 21M passages) into such a
  directory in bounded memory (``adaptive-rag index CORPUS --out DIR``).
- ``verify_bm25_index`` checks a saved index in full against the checksums written with
  it (``adaptive-rag verify-index DIR``).
- ``create_elasticsearch_retriever`` and ``index_elasticsearch`` set up the papers'
  Elasticsearch BM25 for a corpus beyond one machine.
"""

from langchain_adaptive_rag.retrievers.analysis import BM25Analyzer, english_analyzer
from langchain_adaptive_rag.retrievers.bm25 import (
    BM25Index,
    BM25Retriever,
    create_bm25_retriever,
    load_bm25_retriever,
)
from langchain_adaptive_rag.retrievers.builder import BM25Parameters, build_bm25_index
from langchain_adaptive_rag.retrievers.elasticsearch import (
    create_elasticsearch_retriever,
    elasticsearch_index_body,
    elasticsearch_query_body,
    index_elasticsearch,
)
from langchain_adaptive_rag.retrievers.verify import verify_bm25_index

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
