"""BM25 on Elasticsearch, set up as the DRAGIN, FLARE and SeaKR papers' retrieval.

Their Wikipedia index (BEIR's ``ElasticSearch`` helper over DPR's ``psgs_w100.tsv``) has
two ``text`` fields, ``title`` and ``txt``, with the built-in ``english`` analyzer and
Elasticsearch's default BM25 similarity (``k1`` 1.2, ``b`` 0.75); a query is a
``multi_match`` of ``best_fields`` over both with ``tie_breaker`` 0.5, searched with
``dfs_query_then_fetch`` so every shard scores with the index-wide term statistics.
[`index_elasticsearch`][] creates that index and [`create_elasticsearch_retriever`][]
queries it through ``langchain-elasticsearch`` (``pip install
"langchain-adaptive-rag[elasticsearch]"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.retrievers.builder import BM25Parameters, passage_id

if TYPE_CHECKING:
    from elasticsearch import Elasticsearch
    from langchain_elasticsearch import ElasticsearchRetriever

__all__ = [
    "create_elasticsearch_retriever",
    "elasticsearch_index_body",
    "elasticsearch_query_body",
    "index_elasticsearch",
]

TITLE_FIELD = "title"
TEXT_FIELD = "txt"

_INSTALL_HINT = (
    "Elasticsearch retrieval needs langchain-elasticsearch. Fix: pip install "
    '"langchain-adaptive-rag[elasticsearch]".'
)


def _client(url_or_client: str | Elasticsearch) -> Elasticsearch:
    try:
        from elasticsearch import Elasticsearch
    except ImportError as error:
        raise AdaptiveRAGError(_INSTALL_HINT) from error
    if isinstance(url_or_client, str):
        return Elasticsearch(url_or_client)
    return url_or_client


def elasticsearch_index_body(
    params: BM25Parameters | None = None, *, shards: int = 1
) -> dict[str, Any]:
    """Settings and mappings of the papers' index (``english`` analyzer, BM25).

    Args:
        params: BM25 ``k1`` and ``b`` (default Elasticsearch's own, 1.2 and 0.75).
        shards: Primary shards (the query uses ``dfs_query_then_fetch``, so scores do not
            depend on it).

    Returns:
        The body of the create-index request.
    """
    params = params or BM25Parameters()
    field = {"type": "text", "analyzer": "english", "similarity": "default"}
    return {
        "settings": {
            "number_of_shards": shards,
            "analysis": {"analyzer": {"default": {"type": "english"}}},
            "similarity": {"default": {"type": "BM25", "k1": params.k1, "b": params.b}},
        },
        "mappings": {
            "properties": {
                "id": {"type": "keyword"},
                TITLE_FIELD: field,
                TEXT_FIELD: field,
            }
        },
    }


def elasticsearch_query_body(query: str, k: int) -> dict[str, Any]:
    """The papers' query: ``multi_match`` best fields over title and text, tie breaker 0.5."""
    return {
        "query": {
            "multi_match": {
                "query": query,
                "type": "best_fields",
                "fields": [TITLE_FIELD, TEXT_FIELD],
                "tie_breaker": 0.5,
            }
        },
        "size": k,
    }


def _hit_to_document(hit: Mapping[str, Any]) -> Document:
    source = dict(hit.get("_source", {}))
    text = str(source.pop(TEXT_FIELD, ""))
    identifier = str(source.pop("id", hit.get("_id", "")))
    metadata = {"id": identifier, **source, "score": float(hit.get("_score") or 0.0)}
    return Document(id=identifier, page_content=text, metadata=metadata)


def _retriever_class() -> type[ElasticsearchRetriever]:
    try:
        from langchain_elasticsearch import ElasticsearchRetriever
    except ImportError as error:
        raise AdaptiveRAGError(_INSTALL_HINT) from error

    class ElasticsearchBM25Retriever(ElasticsearchRetriever):
        """``ElasticsearchRetriever`` with a per-call ``k`` and DFS term statistics."""

        k: int = 3
        """Documents returned per query (``invoke(query, k=5)`` overrides it)."""

        def _get_relevant_documents(
            self,
            query: str,
            *,
            run_manager: CallbackManagerForRetrieverRun,
            k: int | None = None,
        ) -> list[Document]:
            limit = self.k if k is None else k
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                msg = f"k must be an integer >= 1, got {limit!r}."
                raise AdaptiveRAGError(msg)
            body = elasticsearch_query_body(query, limit)
            found = self.client.search(
                index=self.index_name, body=body, search_type="dfs_query_then_fetch"
            )
            mapper: Callable[[Mapping[str, Any]], Document] = _hit_to_document
            return [mapper(hit) for hit in found["hits"]["hits"]]

    return ElasticsearchBM25Retriever


def create_elasticsearch_retriever(
    url_or_client: str | Elasticsearch,
    *,
    index_name: str = "wiki",
    k: int = 3,
) -> ElasticsearchRetriever:
    """A LangChain retriever over an index made by [`index_elasticsearch`][].

    Args:
        url_or_client: The server's URL (``http://localhost:9200``) or an
            ``elasticsearch.Elasticsearch`` client (for credentials, TLS, cloud ids).
        index_name: The index to search.
        k: Documents returned per query (``invoke(query, k=...)`` overrides it).

    Returns:
        An ``ElasticsearchRetriever``; Documents carry ``id``, ``title`` and ``score``.

    Raises:
        AdaptiveRAGError: langchain-elasticsearch is missing or ``k`` is below 1.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        msg = f"k must be an integer >= 1, got {k!r}."
        raise AdaptiveRAGError(msg)
    cls = _retriever_class()
    retriever = cls(
        index_name=index_name,
        body_func=lambda query: elasticsearch_query_body(query, k),
        document_mapper=_hit_to_document,
        client=_client(url_or_client),
    )
    retriever.k = k  # type: ignore[attr-defined]
    return retriever


def index_elasticsearch(
    passages: Iterable[Document],
    url_or_client: str | Elasticsearch,
    *,
    index_name: str = "wiki",
    params: BM25Parameters | None = None,
    shards: int = 1,
    batch_size: int = 1000,
    overwrite: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Create the papers' BM25 index on Elasticsearch and bulk-load passages into it.

    Args:
        passages: Documents, e.g. ``iter_passages("psgs_w100.tsv")`` (streamed).
        url_or_client: The server's URL or an ``elasticsearch.Elasticsearch`` client.
        index_name: The index to create.
        params: BM25 ``k1`` and ``b``.
        shards: Primary shards.
        batch_size: Passages per bulk request.
        overwrite: Delete an existing index of that name first.
        progress: Called with the number of passages sent after each batch.

    Returns:
        The number of passages indexed.

    Raises:
        AdaptiveRAGError: The index exists (without ``overwrite``), or a passage failed.
    """
    client = _client(url_or_client)
    from elasticsearch import ApiError
    from elasticsearch import ConnectionError as TransportConnectionError

    try:
        return _bulk_index(
            client, passages, index_name, params, shards, batch_size, overwrite, progress
        )
    except (ApiError, TransportConnectionError) as error:
        msg = (
            f"Elasticsearch indexing into {index_name!r} failed: {type(error).__name__}: "
            f"{error}. Fix: check that the server is up and reachable (see docs/retrieval.md, "
            "Elasticsearch section)."
        )
        raise AdaptiveRAGError(msg) from error


def _bulk_index(
    client: Elasticsearch,
    passages: Iterable[Document],
    index_name: str,
    params: BM25Parameters | None,
    shards: int,
    batch_size: int,
    overwrite: bool,
    progress: Callable[[int], None] | None,
) -> int:
    from elasticsearch.helpers import streaming_bulk

    if client.indices.exists(index=index_name):
        if not overwrite:
            msg = (
                f"Elasticsearch index {index_name!r} exists. Fix: pick another --es-index, or "
                "pass overwrite=True (--overwrite) to replace it."
            )
            raise AdaptiveRAGError(msg)
        client.indices.delete(index=index_name)
    client.indices.create(index=index_name, **elasticsearch_index_body(params, shards=shards))

    def actions() -> Iterable[dict[str, Any]]:
        for row, doc in enumerate(passages):
            identifier = passage_id(doc, row)
            title = doc.metadata.get("title", "")
            yield {
                "_index": index_name,
                "_id": identifier,
                "_source": {"id": identifier, TITLE_FIELD: title, TEXT_FIELD: doc.page_content},
            }

    count = 0
    for ok, item in streaming_bulk(client, actions(), chunk_size=batch_size, raise_on_error=False):
        if not ok:
            msg = f"Elasticsearch refused a passage: {item}. Fix: check the server's log."
            raise AdaptiveRAGError(msg)
        count += 1
        if progress is not None and count % batch_size == 0:
            progress(count)
    client.indices.refresh(index=index_name)
    if progress is not None:
        progress(count)
    return count
