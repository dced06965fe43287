"""A reading circuit set into the toy model's first two layers before training.

Reading a passage in the toy world means finding in the context the words the answer is
writing now ("Erik Gran was born in") and copying the word that followed them there
("1921"): the chain of thought repeats corpus sentences word for word. A small Llama does
not learn this associative lookup within the CPU training budget: on the toy world's own
tokens, eight "First Last was born in YEAR." facts recalled in shuffled order stay at
chance (0.115) after 200 steps from random weights, while the same model with this circuit
set at initialisation recalls 0.988 of them after 50 steps
(``benchmarks/toy_reading_circuit.py``).

The circuit is ordinary Llama weights (query/key biases are enabled in the config), so the
model loads with ``from_pretrained`` and training is free to change it:

- layer 0, heads ``0 .. r-1`` (offset heads): head ``j-1`` attends to the token ``j`` back,
  whatever the content (a rotary phase set through the query and key biases), reads that
  token through a shared projection ``V`` and writes it into its own subspace ``O_j``;
- layer 1, heads ``0 .. r-1`` (match heads): head ``j-1`` compares the token ``j-1`` back
  from the current position (the current token itself for ``j = 1``) with the token ``j``
  back from every earlier position, and copies the earlier position's token. The ``r``
  heads vote: the word after the longest matching run of context wins. Matching uses only
  the lowest-frequency rotary pairs, where the rotation hardly depends on distance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["ReadingCircuit", "install_reading_circuit", "offset_biases", "rotary_frequencies"]

MATCH_PAIRS = 4
"""Rotary pairs (the lowest-frequency ones) that carry the match heads' comparisons."""


def rotary_frequencies(head_dim: int, theta: float) -> np.ndarray:
    """Angular frequency of each rotary pair: ``theta ** (-2i / head_dim)``.

    Args:
        head_dim: Size of one attention head (even).
        theta: Rotary base (``rope_theta``).

    Returns:
        ``head_dim // 2`` frequencies, highest first.
    """
    return np.asarray(theta ** (-np.arange(head_dim // 2) * 2.0 / head_dim), dtype=np.float64)


def _pair_weights(half: int) -> np.ndarray:
    """Half the weight on the fastest pair, the rest spread over the next eight (or fewer)."""
    weights = np.zeros(half)
    weights[0] = 0.5
    rest = max(1, min(8, half - 1 - MATCH_PAIRS))
    weights[1 : 1 + rest] = 0.5 / rest
    return weights


def _scores(frequencies: np.ndarray, weights: np.ndarray, offset: int, span: int) -> np.ndarray:
    """``sum_i w_i cos((d - offset) f_i)`` for every distance ``d`` in ``[0, span)``."""
    distance = np.arange(span)[:, None] - offset
    return np.asarray(np.cos(distance * frequencies[None, :]) @ weights)


def offset_biases(
    head_dim: int, theta: float, offset: int, margin: float, span: int = 1024
) -> tuple[np.ndarray, np.ndarray]:
    """Query and key biases of a head that attends to the token ``offset`` back.

    With zero query and key weights, the rotary attention score between positions ``m``
    and ``n`` is ``sum_i w_i S cos((m - n - offset) f_i) / sqrt(head_dim)``: highest at
    ``m - n = offset``. ``S`` is chosen so that the score there beats every other distance
    below ``span`` by ``margin`` logits.

    Args:
        head_dim: Size of one attention head (even, at least 4).
        theta: Rotary base.
        offset: How many tokens back the head looks (``>= 0``).
        margin: Logit gap between the target distance and any other.
        span: Longest distance the gap is guaranteed for.

    Returns:
        ``(query_bias, key_bias)``, each of length ``head_dim``.
    """
    frequencies = rotary_frequencies(head_dim, theta)
    half = head_dim // 2
    weights = _pair_weights(half)
    scores = _scores(frequencies, weights, offset, span)
    gap = scores[offset] - np.delete(scores, offset).max()
    scale = margin * math.sqrt(head_dim) / gap
    amplitude = np.sqrt(scale * weights)
    key = np.zeros(head_dim)
    query = np.zeros(head_dim)
    key[:half] = amplitude
    # rotating the query by -offset*f_i puts the peak of each pair at distance `offset`
    query[:half] = amplitude * np.cos(offset * frequencies)
    query[half:] = -amplitude * np.sin(offset * frequencies)
    return query, key


def _orthonormal(rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(rows, cols, generator=generator, dtype=torch.float64))
    result: torch.Tensor = q.to(torch.float32)
    return result


@dataclass(frozen=True)
class ReadingCircuit:
    """The projections a reading circuit was set with (later circuits build on them)."""

    read: torch.Tensor
    """``(hidden, head_dim)``: token embedding -> offset-head space, shared by all heads."""
    writes: tuple[torch.Tensor, ...]
    """``(hidden, head_dim)`` each: where offset head ``j`` writes the token ``j`` back."""


def install_reading_circuit(
    model: torch.nn.Module,
    offsets: int,
    *,
    offset_margin: float = 10.0,
    match_logit: float = 20.0,
    copy_scale: float = 5.0,
    seed: int = 0,
) -> ReadingCircuit:
    """Set the offset heads (layer 0) and match heads (layer 1) of a fresh Llama in place.

    Args:
        model: A ``LlamaForCausalLM`` built with ``attention_bias=True``, at least two
            layers and more than ``offsets`` heads (the remaining heads are left as they are).
        offsets: ``r``: the longest run of matching tokens the match heads vote on.
        offset_margin: Logit gap of each offset head's target distance over any other.
        match_logit: Score of a full match in a match head (before RMS-normalisation effects).
        copy_scale: Gain of what a match head copies into the residual stream.
        seed: Seed of the random projections.

    Returns:
        The projections the offset heads read and write with.

    Raises:
        AdaptiveRAGError: The model has no attention biases, fewer than two layers or not
            enough heads.
    """
    config: Any = model.config
    heads = int(config.num_attention_heads)
    hidden = int(config.hidden_size)
    head_dim = hidden // heads
    if not getattr(config, "attention_bias", False):
        msg = (
            "install_reading_circuit needs query/key biases, got a config with "
            "attention_bias=False. Build the LlamaConfig with attention_bias=True."
        )
        raise AdaptiveRAGError(msg)
    if int(config.num_hidden_layers) < 2 or not 1 <= offsets < heads:
        msg = (
            f"install_reading_circuit needs at least 2 layers and more than `offsets` heads; "
            f"got {config.num_hidden_layers} layers, {heads} heads, offsets={offsets}. Use "
            "offsets between 1 and num_attention_heads - 1."
        )
        raise AdaptiveRAGError(msg)
    theta = float(config.rope_parameters["rope_theta"])
    layers: Any = model.model.layers  # type: ignore[union-attr]
    first, second = layers[0].self_attn, layers[1].self_attn
    generator = torch.Generator().manual_seed(seed)
    embedding_norm = float(model.get_input_embeddings().weight.detach().norm(dim=1).mean())  # type: ignore[operator]
    write = math.sqrt(embedding_norm / math.sqrt(head_dim))
    read = _orthonormal(hidden, head_dim, generator)  # shared: token -> head space
    writes = [_orthonormal(hidden, head_dim, generator) for _ in range(offsets)]
    half = head_dim // 2
    low = list(range(half - MATCH_PAIRS, half))
    dims = low + [i + half for i in low]
    match = math.sqrt(match_logit * math.sqrt(head_dim) / len(dims))
    with torch.no_grad():
        for index in range(offsets):
            rows = slice(index * head_dim, (index + 1) * head_dim)
            query, key = offset_biases(head_dim, theta, index + 1, offset_margin)
            first.q_proj.weight[rows] = 0.0
            first.k_proj.weight[rows] = 0.0
            first.q_proj.bias[rows] = torch.as_tensor(query, dtype=torch.float32)
            first.k_proj.bias[rows] = torch.as_tensor(key, dtype=torch.float32)
            first.v_proj.weight[rows] = read.T * write
            first.o_proj.weight[:, rows] = writes[index] * write

            compare = _orthonormal(head_dim, len(dims), generator).T  # len(dims) x head_dim
            query_weight = torch.zeros(head_dim, hidden)
            key_weight = torch.zeros(head_dim, hidden)
            source = read if index == 0 else writes[index - 1]
            query_weight[dims] = compare @ source.T
            key_weight[dims] = compare @ writes[index].T
            second.q_proj.weight[rows] = query_weight * match
            second.k_proj.weight[rows] = key_weight * match
            copy = _orthonormal(hidden, head_dim, generator)
            second.v_proj.weight[rows] = copy.T * math.sqrt(copy_scale)
            second.o_proj.weight[:, rows] = copy * math.sqrt(copy_scale)
    return ReadingCircuit(read=read, writes=tuple(writes))
