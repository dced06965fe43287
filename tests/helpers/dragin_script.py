"""Test helper: DRAGIN's scripted draft and a model whose forward attention is scripted."""

from __future__ import annotations

import numpy as np

from langchain_adaptive_rag.testing import FakeTraceModel, ScriptedResponse

__all__ = ["DRAFT_TOKENS", "QFS_WEIGHTS", "draft", "model"]

DRAFT_TOKENS = (
    " Blue", " Harbour", " was", " directed", " by", " Anna", " Berg.",
    " She", " was", " born", " in", " 1931.",
)  # fmt: skip
"""The draft's tokens: two sentences, the second ending on the uncertain ``1931.``."""
QFS_WEIGHTS = {"Anna": 0.3, "Berg.": 0.25, "born": 0.2, "director": 0.15, "Harbour": 0.1}
"""The scripted attention that the row predicting ``1931.`` gives each word."""


def draft(entropy_1931: float = 3.0) -> ScriptedResponse:
    """The draft, confident (entropy 0.1) but for ``1931.`` at ``entropy_1931``."""
    entropies = (0.1,) * 11 + (entropy_1931,)
    return ScriptedResponse("".join(DRAFT_TOKENS), tokens=DRAFT_TOKENS, entropies=entropies)


def _qfs_attention(pieces: list[str]) -> np.ndarray:
    """Uniform causal, except the row predicting the last piece, which is scripted."""
    size = len(pieces)
    rows = np.tril(np.ones((size, size)))
    rows = rows / rows.sum(axis=1, keepdims=True)
    if size > 1 and pieces[0].strip() == "When" and pieces[-1].strip() == "1931.":
        row = np.zeros(size)
        for i, piece in enumerate(pieces[:-1]):
            row[i] = QFS_WEIGHTS.get(piece.strip(), 0.0)
            if piece.strip() == "born" and i < 10:  # only the answer's "born", not the question's
                row[i] = 0.0
        rows[size - 2] = row / row.sum()
    return rows[None]


def model(*responses: ScriptedResponse | str) -> FakeTraceModel:
    """A model replying ``responses`` in order, its forward attention scripted for QFS."""
    return FakeTraceModel(list(responses), forward_attention_fn=_qfs_attention)
