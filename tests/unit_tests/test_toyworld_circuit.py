"""The reading circuit set into the toy model before training."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from langchain_adaptive_rag.errors import AdaptiveRAGError
from toyworld_training.circuit import (
    install_reading_circuit,
    offset_biases,
    rotary_frequencies,
)
from toyworld_training.train import TrainConfig, build_model


def _rotate(vector: np.ndarray, position: int, frequencies: np.ndarray) -> np.ndarray:
    """Llama's rotary embedding by hand: pair (i, i + d/2) turned by position * f_i."""
    half = len(vector) // 2
    cos, sin = np.cos(position * frequencies), np.sin(position * frequencies)
    first, second = vector[:half], vector[half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin])


def _llama(attention_bias: bool = True, heads: int = 4, layers: int = 2) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(
        LlamaConfig(
            vocab_size=300,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=heads,
            attention_bias=attention_bias,
            attn_implementation="eager",
        )
    )


def test_rotary_frequencies_by_hand() -> None:
    assert rotary_frequencies(4, 100.0) == pytest.approx([1.0, 0.1])
    assert rotary_frequencies(6, 1000.0) == pytest.approx([1.0, 0.1, 0.01])


@pytest.mark.parametrize(("head_dim", "offset"), [(32, 1), (32, 5), (16, 3), (4, 2)])
def test_offset_biases_peak_at_the_offset_by_the_margin(head_dim: int, offset: int) -> None:
    frequencies = rotary_frequencies(head_dim, 10_000.0)
    query, key = offset_biases(head_dim, 10_000.0, offset, margin=7.0, span=300)
    m = 400
    scores = [
        float(_rotate(query, m, frequencies) @ _rotate(key, m - d, frequencies))
        / math.sqrt(head_dim)
        for d in range(300)
    ]
    best = int(np.argmax(scores))
    others = max(s for d, s in enumerate(scores) if d != offset)
    assert best == offset
    assert scores[offset] - others == pytest.approx(7.0, abs=1e-6)


def test_offset_heads_attend_to_the_token_r_back_and_match_heads_find_repeats() -> None:
    model = _llama()
    install_reading_circuit(model, 3, seed=0)
    torch.manual_seed(1)
    first = torch.randint(10, 290, (1, 40))
    ids = torch.cat([first, first], dim=1)  # a repeated random sequence
    with torch.no_grad():
        attentions = model(input_ids=ids, output_attentions=True).attentions
    layer0, layer1 = attentions[0][0], attentions[1][0]
    for head in range(3):
        target = [i - (head + 1) for i in range(10, 80)]
        mass = layer0[head, list(range(10, 80)), target]
        assert float(mass.min()) > 0.99
    # in the second copy, position 40 + i holds token i again: the token that followed the
    # earlier occurrence of the current token sits at i + 1
    queries = list(range(45, 79))
    keys = [q - 40 + 1 for q in queries]
    for head in range(3):
        on_target = float(layer1[head, queries, keys].mean())
        uniform = float(np.mean([1.0 / (q + 1) for q in queries]))
        assert on_target > 5 * uniform, (head, on_target, uniform)
    # the untouched head keeps its random weights
    assert float(layer0[3, 60].max()) < 0.5


def test_the_circuit_needs_biases_layers_and_heads() -> None:
    with pytest.raises(AdaptiveRAGError, match="attention_bias=True"):
        install_reading_circuit(_llama(attention_bias=False), 2)
    with pytest.raises(AdaptiveRAGError, match="offsets=4"):
        install_reading_circuit(_llama(heads=4), 4)
    with pytest.raises(AdaptiveRAGError, match="1 layers"):
        install_reading_circuit(_llama(layers=1), 2)


def test_build_model_sets_the_circuit_only_when_asked() -> None:
    plain = build_model(dataclasses.replace(TrainConfig.quick(), reading_offsets=0), 300)
    assert not plain.config.attention_bias
    circuit = build_model(TrainConfig.quick(), 300)
    assert circuit.config.attention_bias
    assert float(circuit.model.layers[0].self_attn.q_proj.weight.detach()[:16].abs().max()) == 0.0
    assert float(circuit.model.layers[0].self_attn.k_proj.bias.detach()[:16].abs().max()) > 1.0
