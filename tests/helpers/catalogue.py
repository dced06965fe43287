"""Test helper: a retriever whose documents carry catalogue metadata, and the answer to it."""

from __future__ import annotations

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

__all__ = ["ANSWER", "CatalogueRetriever"]

ANSWER = " Anna Berg was born in 1931. So the answer is 1931."
"""The scripted model's reply to the scripted question."""


class CatalogueRetriever(BaseRetriever):
    """Documents with a source, a title, a URL and a numpy score, as real retrievers give."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(
                id="wiki-17",
                page_content="Anna Berg (born 1931) is a Swedish film director.",
                metadata={
                    "title": "Anna Berg",
                    "source": "wikipedia",
                    "url": "https://en.wikipedia.org/wiki/Anna_Berg",
                    "score": np.float32(12.5),
                    "tags": ("film", "director"),
                },
            ),
            Document(id="wiki-3", page_content="Blue Harbour is a 1962 film.", metadata={}),
        ]
