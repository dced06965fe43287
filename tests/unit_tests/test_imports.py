"""The public surface is explicit and stable."""

from __future__ import annotations

import langchain_adaptive_rag

EXPECTED_ALL = [
    "AdaptiveRAGError",
    "AttentionMatrix",
    "AttentionUnavailableError",
    "ChatTransformers",
    "GenerationTrace",
    "HiddenLayerError",
    "PromptTooLongError",
    "TokenSignals",
    "get_token_signals",
]


def test_all_imports() -> None:
    assert sorted(langchain_adaptive_rag.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert getattr(langchain_adaptive_rag, name) is not None
