"""Elasticsearch BM25: the papers' index settings and query, bulk loading, errors (no server).

The client's transport is replaced by a recording double at the method level, so the real
``elasticsearch`` client, ``streaming_bulk`` and ``langchain-elasticsearch`` code run.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from elasticsearch import Elasticsearch
from langchain_core.documents import Document

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.retrievers import (
    BM25Parameters,
    create_elasticsearch_retriever,
    elasticsearch_index_body,
    elasticsearch_query_body,
    index_elasticsearch,
)

URL = "http://127.0.0.1:9"  # never contacted: every call below is replaced
IndicesClient = type(Elasticsearch(URL).indices)


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


@dataclass
class _Response:
    body: dict[str, Any]


@dataclass
class FakeServer:
    indices: dict[str, dict[str, Any]] = field(default_factory=dict)
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    searches: list[dict[str, Any]] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        server = self

        def exists(_: Any, *, index: str) -> bool:
            return index in server.indices

        def create(_: Any, *, index: str, **body: Any) -> dict[str, Any]:
            server.indices[index] = body
            return {"acknowledged": True}

        def delete(_: Any, *, index: str) -> dict[str, Any]:
            server.indices.pop(index)
            return {"acknowledged": True}

        def refresh(_: Any, *, index: str) -> dict[str, Any]:
            return {}

        def bulk(_: Any, *, operations: list[bytes], **__: Any) -> _Response:
            lines = [json.loads(line) for line in operations]
            items = []
            for header, source in zip(lines[::2], lines[1::2], strict=True):
                identifier = header["index"]["_id"]
                status = 400 if identifier in server.refuse else 201
                if status == 201:
                    server.documents[identifier] = source
                items.append({"index": {"_id": identifier, "status": status}})
            return _Response({"items": items, "errors": bool(server.refuse)})

        def search(_: Any, **request: Any) -> dict[str, Any]:
            server.searches.append(request)
            words = _words(request["body"]["query"]["multi_match"]["query"])
            hits = [
                {
                    "_id": key,
                    "_score": 1.0 + len(words & _words(src["txt"])),
                    "_source": dict(src),
                }
                for key, src in server.documents.items()
                if words & _words(f"{src['title']} {src['txt']}")
            ]
            hits.sort(key=lambda hit: -hit["_score"])
            return {"hits": {"hits": hits[: request["body"]["size"]]}}

        monkeypatch.setattr(IndicesClient, "exists", exists)
        monkeypatch.setattr(IndicesClient, "create", create)
        monkeypatch.setattr(IndicesClient, "delete", delete)
        monkeypatch.setattr(IndicesClient, "refresh", refresh)
        monkeypatch.setattr(Elasticsearch, "bulk", bulk)
        monkeypatch.setattr(Elasticsearch, "search", search)


PASSAGES = [
    Document(
        id="1",
        page_content="Anna Berg is a Swedish film director.",
        metadata={"title": "Anna Berg"},
    ),
    Document(
        id="2", page_content="Blue Harbour is a 1962 film.", metadata={"title": "Blue Harbour"}
    ),
    Document(page_content="Carl Lind was born in Oslo.", metadata={"title": "Carl Lind"}),
]


def test_index_body_is_the_papers_setup() -> None:
    body = elasticsearch_index_body(BM25Parameters(k1=0.9, b=0.4), shards=3)
    settings = body["settings"]
    assert settings["number_of_shards"] == 3
    assert settings["analysis"]["analyzer"]["default"] == {"type": "english"}
    assert settings["similarity"]["default"] == {"type": "BM25", "k1": 0.9, "b": 0.4}
    fields = body["mappings"]["properties"]
    assert fields["title"]["analyzer"] == fields["txt"]["analyzer"] == "english"
    assert elasticsearch_query_body("who?", 5) == {
        "query": {
            "multi_match": {
                "query": "who?",
                "type": "best_fields",
                "fields": ["title", "txt"],
                "tie_breaker": 0.5,
            }
        },
        "size": 5,
    }


def test_index_then_retrieve(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer()
    server.install(monkeypatch)
    seen: list[int] = []
    assert index_elasticsearch(PASSAGES, URL, batch_size=2, progress=seen.append) == 3
    assert seen[-1] == 3
    assert server.indices["wiki"]["settings"]["similarity"]["default"]["k1"] == 1.2
    assert server.documents["doc-2"] == {
        "id": "doc-2",
        "title": "Carl Lind",
        "txt": PASSAGES[2].page_content,
    }
    retriever = create_elasticsearch_retriever(URL, k=2)
    docs = retriever.invoke("Swedish film director")
    assert [d.id for d in docs] == ["1", "2"]
    assert docs[0].page_content == PASSAGES[0].page_content
    assert docs[0].metadata == {"id": "1", "title": "Anna Berg", "score": 4.0}
    assert server.searches[-1]["search_type"] == "dfs_query_then_fetch"
    assert server.searches[-1]["index"] == "wiki"
    assert len(retriever.invoke("film", k=1)) == 1  # per-call k
    assert server.searches[-1]["body"]["size"] == 1


def test_existing_index_needs_overwrite(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer(indices={"wiki": {}})
    server.install(monkeypatch)
    with pytest.raises(AdaptiveRAGError, match=r"index 'wiki' exists.*--overwrite"):
        index_elasticsearch(PASSAGES, URL)
    assert index_elasticsearch(PASSAGES, URL, overwrite=True) == 3


def test_refused_passage_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    server = FakeServer(refuse={"2"})
    server.install(monkeypatch)
    with pytest.raises(AdaptiveRAGError, match="Elasticsearch refused a passage"):
        index_elasticsearch(PASSAGES, URL)


def test_unreachable_server_is_explained() -> None:
    with pytest.raises(AdaptiveRAGError, match=r"failed: ConnectionError.*server is up"):
        index_elasticsearch(PASSAGES, Elasticsearch(URL, request_timeout=1, max_retries=0))


def test_bad_k_is_explained() -> None:
    with pytest.raises(AdaptiveRAGError, match="k must be an integer >= 1, got 0"):
        create_elasticsearch_retriever(URL, k=0)
