"""Test helper: one tiny randomly initialised model of every family the engine serves.

Attention families (Llama, Qwen2, GPT-2, Mistral's sliding window, Gemma, DeepSeek-V3's
latent attention) come from ``create_tiny_model``; the others are built here on the same
trained tokenizer: state-space and hybrid (Mamba, LFM2's convolutions, Nemotron-H's
Mamba-2 layers), mixture-of-experts (Llama 4, Granite MoE, Granite MoE hybrid) and the
windowed shapes that mix sliding-window and global layers (Gemma 2's alternation, Gemma 3's
five local layers to one global, GPT-OSS's alternation with attention sinks and experts),
each with a 16-position window so that short prompts pass it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import transformers

from langchain_adaptive_rag.testing import TinyArchitecture, create_tiny_model

__all__ = [
    "ATTENTION_FAMILIES",
    "FAMILIES",
    "OTHER_FAMILIES",
    "WINDOWED_FAMILIES",
    "save_tiny_family",
]

ATTENTION_FAMILIES: tuple[TinyArchitecture, ...] = (
    "llama",
    "qwen2",
    "gpt2",
    "mistral",
    "gemma",
    "deepseek_v3",
)
"""Families ``create_tiny_model`` builds."""
WINDOWED_FAMILIES = ("mistral", "gemma2", "gemma3", "gpt_oss")
"""Families with sliding-window layers of 16 positions (Mistral's every layer; the others
mix windowed and global layers)."""
OTHER_FAMILIES = (
    "mamba",
    "lfm2",
    "nemotron_h",
    "llama4",
    "granitemoe",
    "granitemoehybrid",
    "gemma2",
    "gemma3",
    "gpt_oss",
)
"""State-space, hybrid, mixture-of-experts and windowed families built here."""
FAMILIES = ATTENTION_FAMILIES + OTHER_FAMILIES
"""Every family."""


def _common(tokenizer: Any) -> dict[str, Any]:
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": 32,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
    }


def _other(family: str, tokenizer: Any) -> Any:
    """The randomly initialised model of one of [`OTHER_FAMILIES`]."""
    common = _common(tokenizer)
    attention = {"num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 64}
    if family == "mamba":
        return transformers.MambaForCausalLM(
            transformers.MambaConfig(
                **common, num_hidden_layers=4, state_size=8, expand=2, conv_kernel=4
            )
        )
    if family == "lfm2":
        return transformers.Lfm2ForCausalLM(
            transformers.Lfm2Config(
                **common,
                **attention,
                num_hidden_layers=4,
                layer_types=["conv", "full_attention", "conv", "conv"],
            )
        )
    if family == "nemotron_h":
        return transformers.NemotronHForCausalLM(
            transformers.NemotronHConfig(
                **common,
                **attention,
                num_hidden_layers=4,
                head_dim=8,
                hybrid_override_pattern="M*M-",  # Mamba-2, attention, Mamba-2, MLP
                mamba_num_heads=4,
                mamba_head_dim=16,
                ssm_state_size=8,
                n_groups=1,
                expand=2,
            )
        )
    if family == "llama4":
        return transformers.Llama4ForCausalLM(
            transformers.Llama4TextConfig(
                **common,
                **attention,
                intermediate_size_mlp=64,
                num_hidden_layers=2,
                head_dim=8,
                num_local_experts=2,
                interleave_moe_layer_step=1,  # every layer's feed-forward is experts
            )
        )
    if family in ("gemma2", "gemma3", "gpt_oss"):
        return _windowed(family, common, attention)
    experts = {"num_local_experts": 4, "num_experts_per_tok": 2, "residual_multiplier": 0.5}
    if family == "granitemoe":
        return transformers.GraniteMoeForCausalLM(
            transformers.GraniteMoeConfig(**common, **attention, **experts, num_hidden_layers=2)
        )
    if family == "granitemoehybrid":
        return transformers.GraniteMoeHybridForCausalLM(
            transformers.GraniteMoeHybridConfig(
                **common,
                **attention,
                **experts,
                num_hidden_layers=2,
                shared_intermediate_size=48,
                layers_block_type=["linear_attention", "attention"],
                mamba_n_heads=4,
                mamba_d_head=16,
                mamba_d_state=8,
                mamba_n_groups=1,
                mamba_expand=2,
            )
        )
    msg = f"unknown family {family!r}; expected one of {FAMILIES}"
    raise ValueError(msg)


WINDOW = 16
"""The sliding window of the windowed shapes, in positions."""


def _windowed(family: str, common: dict[str, Any], attention: dict[str, Any]) -> Any:
    """The randomly initialised model of a windowed shape: sliding-window layers of
    [`WINDOW`] positions beside global ones."""
    shape = {**common, **attention, "head_dim": 8, "sliding_window": WINDOW}
    if family == "gemma2":
        return transformers.Gemma2ForCausalLM(
            transformers.Gemma2Config(
                **shape,
                num_hidden_layers=4,  # sliding, full, sliding, full
                query_pre_attn_scalar=8,
            )
        )
    if family == "gemma3":
        return transformers.Gemma3ForCausalLM(
            transformers.Gemma3TextConfig(
                **shape,
                num_hidden_layers=6,
                layer_types=["sliding_attention"] * 5 + ["full_attention"],
                query_pre_attn_scalar=8,
            )
        )
    return transformers.GptOssForCausalLM(
        transformers.GptOssConfig(
            **shape,
            num_hidden_layers=4,  # sliding, full, sliding, full
            num_local_experts=4,
            num_experts_per_tok=2,
        )
    )


def save_tiny_family(family: str, path: Path, *, seed: int = 0) -> Path:
    """Save the tiny model of ``family`` and its tokenizer under ``path``.

    Args:
        family: One of [`FAMILIES`].
        path: The directory (created).
        seed: Seed of the random weights.

    Returns:
        ``path``.
    """
    if family in ATTENTION_FAMILIES:
        return create_tiny_model(path, architecture=family, seed=seed)  # type: ignore[arg-type]
    base = create_tiny_model(path.parent / f"{path.name}-tokenizer", seed=seed)
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    torch.manual_seed(seed)
    model = _other(family, tokenizer)
    model.generation_config.eos_token_id = 2
    model.generation_config.pad_token_id = 3
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
