"""Adaptive retrieval-augmented generation for LangChain and LangGraph.

The package's foundation is :class:`ChatTransformers`, a LangChain chat model over a local
HuggingFace causal LM that reports per-token entropy, log-probabilities, attention rows and
hidden states: the signals the adaptive methods use to decide when and what to retrieve.
"""

from langchain_adaptive_rag.chat_models import (
    AttentionMatrix,
    ChatTransformers,
    TokenSignals,
    get_token_signals,
)
from langchain_adaptive_rag.errors import (
    AdaptiveRAGError,
    AttentionUnavailableError,
    HiddenLayerError,
    PromptTooLongError,
)
from langchain_adaptive_rag.generation import GenerationTrace

__all__ = [
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

__version__ = "0.1.0"
