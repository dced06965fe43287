"""Test helper: Self-RAG's reflection-token ids and a scripted first draft."""

from __future__ import annotations

import math

from langchain_adaptive_rag.testing import ScriptedResponse

__all__ = ["IDS", "draft"]

IDS = {
    "[Retrieval]": 101,
    "[No Retrieval]": 102,
    "[Relevant]": 103,
    "[Irrelevant]": 104,
    "[Fully supported]": 105,
    "[Partially supported]": 106,
    "[No support / Contradictory]": 107,
    **{f"[Utility:{i}]": 107 + i for i in range(1, 6)},
}
"""The scripted vocabulary's reflection-token ids."""


def draft(retrieve: float, no_retrieve: float, ids: tuple[int, ...] = (7, 8)) -> ScriptedResponse:
    """A two-token draft with ``p([Retrieval])`` and ``p([No Retrieval])`` at its first token."""
    return ScriptedResponse(
        " Anna Berg.",
        tokens=(" Anna", " Berg."),
        token_ids=ids,
        token_logprobs=({101: math.log(retrieve), 102: math.log(no_retrieve)}, {}),
    )
