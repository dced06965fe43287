"""Randomly initialised Llamas of a few sizes, saved with the locally trained tokenizer."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from langchain_adaptive_rag.testing import train_tokenizer

SIZES = {
    "8m": {"hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4},
    "20m": {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 6},
    "110m": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12},
}
"""Shapes by rough parameter count (64-dimensional heads, 4,096 positions)."""


def save_random_llama(directory: Path, size: str) -> None:
    """Save a seeded random Llama of ``size`` and the trained tokenizer in ``directory``."""
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    shape = SIZES[size]
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        num_attention_heads=shape["hidden_size"] // 64,
        num_key_value_heads=shape["hidden_size"] // 64,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
        **shape,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
