"""The year-order circuit set into the toy model before training (comparison questions)."""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.toyworld import TOY_MODEL_PATH
from langchain_adaptive_rag.toyworld.world import WORLD_POOLS, YEARS
from toyworld_training.circuit import install_reading_circuit, rotary_frequencies
from toyworld_training.order_circuit import (
    OrderCircuit,
    OrderLayout,
    window_biases,
    year_position,
)
from toyworld_training.train import TrainConfig, _build, order_layout

FIRST = WORLD_POOLS.first_names[:12]
LAST = WORLD_POOLS.last_names[:6]


def _rotate(vector: np.ndarray, position: int, frequencies: np.ndarray) -> np.ndarray:
    """Llama's rotary embedding by hand: pair (i, i + d/2) turned by position * f_i."""
    half = len(vector) // 2
    cos, sin = np.cos(position * frequencies), np.sin(position * frequencies)
    first, second = vector[:half], vector[half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin])


@pytest.fixture(scope="module")
def tokenizer() -> object:
    return AutoTokenizer.from_pretrained(str(TOY_MODEL_PATH))


@pytest.fixture(scope="module")
def fresh(tokenizer: object) -> tuple[torch.nn.Module, OrderCircuit]:
    model, circuit = _build(TrainConfig(), len(tokenizer), order_layout(tokenizer))  # type: ignore[arg-type]
    assert circuit is not None
    model.config._attn_implementation = "eager"  # type: ignore[union-attr]
    return model, circuit


def _comparisons(tokenizer: object, count: int) -> list[tuple[list[int], int]]:
    """Token ids of "... So the answer is" and the distance back to the earlier year.

    A context passage before the question holds a third birth year (often earlier than
    both): the window must keep the head on the chain of thought's two years.
    """
    rng = random.Random(7)
    cases = []
    for _ in range(count):
        a, b, c = rng.sample(FIRST, 3)
        la, lb, lc = (rng.choice(LAST) for _ in range(3))
        ya, yb = rng.sample(range(1850, 1971), 2)
        text = (
            f"Context:\n[1] {c} {lc} was born in {rng.randint(1840, 1900)} in Oslo.\n"
            f"Question: Who was born first, {a} {la} or {b} {lb}?\n"
            f"Answer: {a} {la} was born in {ya} in Oslo. {b} {lb} was born in {yb} in "
            "Bergen. So the answer is"
        )
        ids: list[int] = tokenizer(text)["input_ids"]  # type: ignore[operator]
        cases.append((ids, 16 if ya < yb else 7))
    return cases


def _head_accuracy(model: torch.nn.Module, circuit: OrderCircuit, cases: list) -> float:
    """Share of cases whose answer token puts most of the head's attention on the earlier
    year."""
    hits = 0
    with torch.no_grad():
        for ids, distance in cases:
            out = model(input_ids=torch.tensor([ids]), output_attentions=True)
            row = out.attentions[1][0, circuit.head, -1]
            hits += int(row.argmax()) == len(ids) - 1 - distance
    return hits / len(cases)


def test_year_position_by_hand() -> None:
    assert year_position(1840, YEARS) == -1.0
    assert year_position(2000, YEARS) == 1.0
    assert year_position(1920, YEARS) == 0.0
    assert year_position(1880, YEARS) == -0.5


def test_window_keeps_the_two_years_and_drops_the_context() -> None:
    head_dim, theta = 32, 10_000.0
    frequencies = rotary_frequencies(head_dim, theta)
    query, key = window_biases(head_dim, theta, (7, 16), near=20, far=30, pairs=12)
    m = 600
    scores = np.array(
        [
            float(_rotate(query, m, frequencies) @ _rotate(key, m - d, frequencies))
            / math.sqrt(head_dim)
            for d in range(600)
        ]
    )
    assert scores[7] == pytest.approx(scores[16], abs=0.02)
    assert scores[7] == pytest.approx(1.0, abs=0.05)
    assert scores[:20].min() > 0.6
    assert scores[30:].max() < 0.35
    # only the fastest `pairs` pairs are used: the two slowest stay free for the year terms
    assert not query[12:16].any() and not query[28:].any()
    assert not key[12:16].any() and not key[28:].any()


def test_order_layout_of_the_toy_tokenizer(tokenizer: object) -> None:
    layout = order_layout(tokenizer)
    assert layout.distances == (7, 16)
    assert layout.name_offset == 5
    assert len(layout.years) == len(YEARS)
    convert = tokenizer.convert_ids_to_tokens  # type: ignore[attr-defined]
    assert convert(layout.gate_id) == "Ġis"
    assert convert(layout.sample[-1]) == "Ġis"
    assert convert(layout.sample[-1 - layout.distances[1]]) == "Ġ1901"


def test_year_tokens_carry_their_order(fresh: tuple[torch.nn.Module, OrderCircuit]) -> None:
    model, circuit = fresh
    embeddings = model.get_input_embeddings().weight.detach()  # type: ignore[operator]
    rows = embeddings[circuit.tokens]
    assert (rows @ circuit.is_year).tolist() == pytest.approx([circuit.gain] * len(YEARS))
    expected = [circuit.gain * year_position(y, YEARS) for y in YEARS]
    assert (rows @ circuit.order).tolist() == pytest.approx(expected, abs=1e-5)


def test_a_fresh_order_head_finds_the_earlier_year(
    tokenizer: object, fresh: tuple[torch.nn.Module, OrderCircuit]
) -> None:
    model, circuit = fresh
    assert _head_accuracy(model, circuit, _comparisons(tokenizer, 40)) >= 0.8


def test_hold_sets_a_disturbed_circuit_again(tokenizer: object) -> None:
    model, circuit = _build(TrainConfig(), len(tokenizer), order_layout(tokenizer))  # type: ignore[arg-type]
    assert circuit is not None
    model.config._attn_implementation = "eager"  # type: ignore[union-attr]
    cases = _comparisons(tokenizer, 30)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter += 0.02 * torch.randn(parameter.shape, generator=generator)
        rows = slice(circuit.head * circuit.head_dim, (circuit.head + 1) * circuit.head_dim)
        model.model.layers[1].self_attn.q_proj.weight[rows] = 0.0  # type: ignore[union-attr,index]
    assert _head_accuracy(model, circuit, cases) < 0.5
    circuit.hold(model, recalibrate=True)
    assert _head_accuracy(model, circuit, cases) >= 0.7


def test_the_order_circuit_needs_a_free_head(tokenizer: object) -> None:
    config = dataclasses.replace(TrainConfig(), order_circuit=False)
    model, circuit = _build(config, len(tokenizer), order_layout(tokenizer))  # type: ignore[arg-type]
    assert circuit is None
    reading = install_reading_circuit(model, config.reading_offsets)
    with pytest.raises(AdaptiveRAGError, match=r"free \(5 \.\. 5\).*head=2"):
        OrderCircuit(model, reading, order_layout(tokenizer), head=2)


def test_the_order_circuit_needs_the_name_offset_written(tokenizer: object) -> None:
    layout = dataclasses.replace(order_layout(tokenizer), name_offset=6)
    assert isinstance(layout, OrderLayout)
    with pytest.raises(AdaptiveRAGError, match="name_offset=6"):
        _build(TrainConfig(), len(tokenizer), layout)  # type: ignore[arg-type]
