"""Test helper: FLARE's scripted draft, a confident sentence and then an uncertain one."""

from __future__ import annotations

import math

from langchain_adaptive_rag.testing import ScriptedResponse

__all__ = ["draft"]


def draft() -> ScriptedResponse:
    """Sentence 1 is confident; in sentence 2 ``1931.`` has p = 0.1 and ``born`` p = 0.35."""
    tokens = (
        " It",
        " was",
        " directed",
        " by",
        " Anna",
        " Berg.",
        " She",
        " was",
        " born",
        " in",
        " 1931.",
    )
    probs = (0.9, 0.9, 0.8, 0.9, 0.7, 0.9, 0.9, 0.9, 0.35, 0.9, 0.1)
    return ScriptedResponse(
        "".join(tokens), tokens=tokens, logprobs=tuple(math.log(p) for p in probs)
    )
