"""The cache kind and the loop's window, read from a config alone."""

from __future__ import annotations

from types import SimpleNamespace

from transformers import Gemma2Config, LlamaConfig, MambaConfig, MistralConfig

from langchain_adaptive_rag.engine.capabilities import cache_kind


def test_plain_windowed_and_recurrent_configs() -> None:
    llama = SimpleNamespace(config=LlamaConfig(num_hidden_layers=2))
    mistral = SimpleNamespace(config=MistralConfig(num_hidden_layers=2, sliding_window=16))
    gemma2 = SimpleNamespace(config=Gemma2Config(num_hidden_layers=4, sliding_window=512))
    mamba = SimpleNamespace(config=MambaConfig(num_hidden_layers=2))
    assert cache_kind(llama) == ("plain", None)  # type: ignore[arg-type]
    assert cache_kind(mistral) == ("windowed", 16)  # type: ignore[arg-type]
    assert cache_kind(gemma2) == ("windowed", 512)  # type: ignore[arg-type]  # local layers
    assert cache_kind(mamba) == ("recurrent", 0)  # type: ignore[arg-type]
