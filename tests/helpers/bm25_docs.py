"""Test helper: random passages over a fixed vocabulary, to build BM25 indexes from."""

from __future__ import annotations

import random

from langchain_core.documents import Document

__all__ = ["VOCAB", "random_docs"]

VOCAB = [f"w{i}" for i in range(300)]
"""The words of [`random_docs`]: ``w0`` to ``w299``."""


def random_docs(count: int, seed: int = 0) -> list[Document]:
    """``count`` seeded passages of up to 30 words, titled ``T<i % 7> <word>``."""
    rng = random.Random(seed)
    return [
        Document(
            page_content=" ".join(rng.choices(VOCAB, k=rng.randint(0, 30))),
            metadata={"id": f"p{i}", "title": f"T{i % 7} {rng.choice(VOCAB)}", "n": i},
        )
        for i in range(count)
    ]
