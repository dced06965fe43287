"""Test helper: the question, passages, retriever and prompts the graph tests script."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_adaptive_rag.prompts import QAPrompts

__all__ = ["NO_SHOTS", "PASSAGES", "QUESTION", "RecordingRetriever", "TitledTableRetriever"]

QUESTION = "When was the director of film Blue Harbour born?"
"""The scripted graphs' question."""
PASSAGES = [
    "Blue Harbour is a 1962 film directed by Anna Berg.",
    "Anna Berg (born 1931) is a Swedish film director.",
    "Carl Lind was born in Oslo in 1902.",
]
"""What [`RecordingRetriever`] returns, as documents ``p0``, ``p1``, ``p2``."""
NO_SHOTS = QAPrompts(exemplars=())
"""The prompts without exemplars, so that each model call's prompt is short and known."""


class RecordingRetriever(BaseRetriever):
    """Returns [`PASSAGES`] and records every query (``fail``: raises; ``empty``: none)."""

    queries: list[str] = Field(default_factory=list)
    fail: bool = False
    empty: bool = False

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        if self.fail:
            raise ConnectionError("search service down")
        if self.empty:
            return []
        return [Document(id=f"p{i}", page_content=t) for i, t in enumerate(PASSAGES)]


class TitledTableRetriever(BaseRetriever):
    """Returns ``table[query]`` (title, text pairs; none for another query) as documents
    with a ``title``, and records every query."""

    table: Mapping[str, Sequence[tuple[str, str]]] = Field(default_factory=dict)
    queries: list[str] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        self.queries.append(query)
        return [
            Document(id=f"{query}-{i}", page_content=text, metadata={"title": title})
            for i, (title, text) in enumerate(self.table.get(query, ()))
        ]
