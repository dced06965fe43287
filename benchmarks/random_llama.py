"""Randomly initialised Llamas of a few sizes, with the locally trained tokenizer.

The small sizes are saved and loaded back (``save_random_llama``), as a user's checkpoint
would be; the 7B/8B shapes are built straight on the device (``build_random_llama``), since
writing and reading 13 GB of random weights would only measure the disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, PreTrainedTokenizerFast

from langchain_adaptive_rag.testing import train_tokenizer

SIZES = {
    # A 7B's 32 layers at almost no arithmetic: what a step costs the host (Python, torch's
    # dispatch), the part of a GPU step that launching kernels cannot hide.
    "host32": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 32},
    "8m": {"hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4},
    "20m": {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 6},
    "110m": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12},
    # Llama-2-7B's body (32 heads, no grouping) and Llama-3-8B's (8 key/value heads).
    "7b": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32},
    "8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_key_value_heads": 8,
    },
}
"""Shapes by rough parameter count (64-dimensional heads below 7B, 128 from 7B; 4,096
positions), and ``host32``, 32 layers 64 wide (one head). The vocabulary is the trained
tokenizer's (under 2,000 tokens), so the 7B/8B shapes hold about 6.5/7.0B parameters."""


def _config(size: str, vocab_size: int, sliding_window: int | None = None) -> LlamaConfig:
    """A Llama of ``size``; with ``sliding_window``, a Mistral of the same shape."""
    shape: dict[str, Any] = dict(SIZES[size])
    head_dim = 128 if shape["hidden_size"] >= 4096 else 64
    heads = shape["hidden_size"] // head_dim
    shape.setdefault("num_key_value_heads", heads)
    common: dict[str, Any] = {
        "vocab_size": vocab_size,
        "num_attention_heads": heads,
        "tie_word_embeddings": False,
        **shape,
    }
    if sliding_window is not None:
        return MistralConfig(
            max_position_embeddings=4 * sliding_window, sliding_window=sliding_window, **common
        )
    return LlamaConfig(max_position_embeddings=4096, **common)


def save_random_llama(directory: Path, size: str) -> None:
    """Save a seeded random Llama of ``size`` and the trained tokenizer in ``directory``."""
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_config(size, len(tokenizer)))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def build_random_llama(
    size: str,
    device: str,
    dtype: torch.dtype,
    attn_implementation: str = "sdpa",
    sliding_window: int | None = None,
) -> tuple[Any, PreTrainedTokenizerFast]:
    """A seeded random Llama of ``size`` built on ``device`` in ``dtype``, and its tokenizer.

    The same arguments give the same weights, whatever ``attn_implementation``. With
    ``sliding_window``: a Mistral of the same shape with that window (Mistral-7B-v0.1:
    4,096), whose cache keeps only the window.
    """
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    config = _config(size, len(tokenizer), sliding_window)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            config, dtype=dtype, attn_implementation=attn_implementation
        )
    return model.eval(), tokenizer
