"""Against a real Elasticsearch server: set ELASTICSEARCH_URL (see docs/retrieval.md) to run."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_adaptive_rag.cli import main
from langchain_adaptive_rag.retrievers import create_elasticsearch_retriever, index_elasticsearch

URL = os.environ.get("ELASTICSEARCH_URL")
pytestmark = pytest.mark.skipif(
    not URL, reason="no Elasticsearch server: set ELASTICSEARCH_URL=http://localhost:9200"
)

PASSAGES = [
    Document(
        id="1",
        page_content="Anna Berg is a Swedish film director.",
        metadata={"title": "Anna Berg"},
    ),
    Document(
        id="2",
        page_content="Blue Harbour is a 1962 film directed by Anna Berg.",
        metadata={"title": "Blue Harbour"},
    ),
    Document(
        id="3", page_content="Carl Lind was born in Oslo in 1902.", metadata={"title": "Carl Lind"}
    ),
]


def test_index_and_retrieve_on_a_real_server() -> None:
    from elasticsearch import Elasticsearch

    assert URL is not None
    name = f"adaptive-rag-test-{uuid.uuid4().hex[:8]}"
    client = Elasticsearch(URL)
    try:
        assert index_elasticsearch(PASSAGES, client, index_name=name) == 3
        retriever = create_elasticsearch_retriever(client, index_name=name, k=2)
        docs = retriever.invoke("Who directed Blue Harbour?")
        assert docs[0].id == "2" and docs[0].metadata["title"] == "Blue Harbour"
        assert docs[0].metadata["score"] > 0
        assert [d.id for d in retriever.invoke("Carl Lind born", k=1)] == ["3"]
    finally:
        client.indices.delete(index=name, ignore_unavailable=True)


def test_cli_indexes_a_dpr_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from elasticsearch import Elasticsearch

    assert URL is not None
    corpus = tmp_path / "psgs.tsv"
    corpus.write_text("id\ttext\ttitle\n1\tCarl Lind was born in Oslo.\tCarl Lind\n")
    name = f"adaptive-rag-test-{uuid.uuid4().hex[:8]}"
    try:
        argv = ["index", str(corpus), "--elasticsearch", URL, "--es-index", name, "--no-progress"]
        assert main(argv) == 0
        assert "indexed 1 passages" in capsys.readouterr().out
    finally:
        Elasticsearch(URL).indices.delete(index=name, ignore_unavailable=True)
