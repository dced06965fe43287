"""A year-order circuit set into the toy model before training, for "Who was born first?".

A comparison's chain of thought writes both birth sentences and then the answer
("Ebba Lind was born in 1903 in Trondheim. Signe Tell was born in 1925 in Oslo. So the
answer is Ebba Lind."): at "is" the model must find the smaller of two year tokens and
write the given name that stands a fixed number of tokens before it. Year tokens are
arbitrary vocabulary entries, so a small Llama would first have to learn the order of 161
of them from a few thousand comparisons; the reading circuit alone leaves the toy model's
comparisons at chance. This circuit gives it the two pieces it lacks, as ordinary weights
that training is free to change:

- every year token's embedding gains ``m(y) u``: a shared direction ``u`` scaled by the
  year's place in ``YEARS`` (``-1`` for the
  first, ``+1`` for the last), so "earlier" is one linear read-out;
- one head of layer 1 (the *order head*) is gated by the answer token ("is"): its query
  peaks, through a rotary phase, at the two distances where the chain of thought puts the
  years, and a content term subtracts ``A m(y)`` of the key's year, so the earlier year wins;
  its value reads the subspace where the reading circuit's offset head wrote the token
  ``name_offset`` back (the given name), and writes it towards that name's embedding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from langchain_adaptive_rag.errors import AdaptiveRAGError
from toyworld_training.circuit import ReadingCircuit, _orthonormal, rotary_frequencies

__all__ = ["OrderCircuit", "OrderLayout", "window_biases", "year_position"]


@dataclass(frozen=True)
class OrderLayout:
    """Where the answer token of a comparison finds the two years and their names."""

    years: tuple[tuple[int, int], ...]
    """``(token id, year)`` of every year token."""
    gate_id: int
    """Token id of the answer position ("is" of "So the answer is")."""
    distances: tuple[int, int]
    """Tokens from the answer position back to the second and to the first year."""
    name_offset: int
    """Tokens from a year back to its subject's given name."""
    sample: tuple[int, ...]
    """Token ids of one comparison's chain of thought up to the answer token (the
    read-outs are calibrated on it)."""


def year_position(year: int, years: Sequence[int]) -> float:
    """``m(y)``: the year's place between the first (``-1``) and the last (``+1``) year.

    Args:
        year: A year.
        years: Every year, in order.

    Returns:
        The position in ``[-1, 1]``.
    """
    low, high = min(years), max(years)
    return 2.0 * (year - low) / (high - low) - 1.0


def window_biases(
    head_dim: int,
    theta: float,
    layout_distances: tuple[int, int],
    near: int,
    far: int,
    pairs: int,
    span: int = 1024,
) -> tuple[np.ndarray, np.ndarray]:
    """Query and key of a head whose rotary score is a recency window.

    The score ``w(d) = sum_i (c_i cos(d f_i) + s_i sin(d f_i)) / sqrt(head_dim)`` over the
    ``pairs`` fastest rotary pairs is fitted by ridge least squares to ``+1`` for
    distances below ``near`` (weighted 100 times more at both ``layout_distances``, so
    the two score the same) and ``-1`` from ``far`` to ``span``; distances in between are
    free.

    Args:
        head_dim: Size of one attention head (even).
        theta: Rotary base.
        layout_distances: Distances that must score the same (the two years).
        near: Distances below this are inside the window.
        far: Distances from this on are outside.
        pairs: How many of the fastest rotary pairs shape the window.
        span: Longest distance fitted.

    Returns:
        ``(query, key)``, each of length ``head_dim``; ``key`` is constant on the first
        component of each shaping pair and zero elsewhere.
    """
    frequencies = rotary_frequencies(head_dim, theta)[:pairs]
    distance = np.arange(span, dtype=np.float64)
    basis = np.concatenate(
        [np.cos(distance[:, None] * frequencies), np.sin(distance[:, None] * frequencies)], axis=1
    )
    target = np.where(distance < near, 1.0, -1.0)
    weight = np.where(distance < near, 20.0, 1.0)
    weight[list(layout_distances)] = 2000.0
    keep = (distance < near) | (distance >= far)
    rows = basis[keep] * np.sqrt(weight[keep])[:, None]
    coefficients = np.linalg.solve(
        rows.T @ rows + 0.1 * np.eye(2 * pairs), rows.T @ (target[keep] * np.sqrt(weight[keep]))
    )
    half = head_dim // 2
    query = np.zeros(head_dim)
    key = np.zeros(head_dim)
    scale = math.sqrt(math.sqrt(head_dim))
    query[:pairs] = coefficients[:pairs] * scale
    query[half : half + pairs] = -coefficients[pairs:] * scale
    key[:pairs] = scale
    return query, key


def _layer_one_inputs(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """The normalised input of layer 1's attention, ``(batch, positions, hidden)``."""
    inner: Any = model.model
    with torch.no_grad():
        out = inner(input_ids=ids, output_hidden_states=True)
        hidden: torch.Tensor = inner.layers[1].input_layernorm(out.hidden_states[1])
    return hidden


@dataclass
class OrderCircuit:
    """The year directions and the order head of one model, to set and to hold in training.

    Training moves small structured weights quickly (AdamW changes every weight by about
    the learning rate per step, whatever its gradient), and it moves layer 0, whose output
    the head's read-outs were calibrated on: left alone, the head stops finding the earlier
    year within 50 steps of the copy phase. ``hold`` sets it again after an optimizer
    step, recalibrated on the current weights, so the rest of the model learns around a
    head that works.

    Args:
        model: A ``LlamaForCausalLM`` with the reading circuit installed.
        reading: What ``install_reading_circuit`` returned.
        layout: Token ids and distances of the comparison answer.
        head: The layer-1 head to use (one the reading circuit left free).
        embedding_gain: Norm of each year direction in a year's embedding, relative to
            the mean embedding norm at installation.
        window_logit: ``W``: the window's height.
        year_logit: ``Y``: the bonus of a year token.
        order_logit: ``A``: the score of the first year over the middle one.
        copy_scale: Gain of the name the head writes.
        seed: Seed of the year directions.

    Raises:
        AdaptiveRAGError: The head is out of range or one the reading circuit uses, or the
            name offset is not one the reading circuit wrote.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        reading: ReadingCircuit,
        layout: OrderLayout,
        *,
        head: int,
        embedding_gain: float = 3.0,
        window_logit: float = 40.0,
        year_logit: float = 15.0,
        order_logit: float = 12.0,
        copy_scale: float = 5.0,
        seed: int = 0,
    ) -> None:
        config: Any = model.config
        heads = int(config.num_attention_heads)
        hidden = int(config.hidden_size)
        offsets = len(reading.writes)
        if not offsets <= head < heads or not 1 <= layout.name_offset <= offsets:
            msg = (
                f"The order circuit needs a layer-1 head the reading circuit leaves free "
                f"({offsets} .. {heads - 1}) and a name offset it wrote (1 .. {offsets}); got "
                f"head={head}, name_offset={layout.name_offset}. Build the model with more "
                "heads or a reading circuit of at least name_offset offsets."
            )
            raise AdaptiveRAGError(msg)
        self.reading = reading
        self.layout = layout
        self.head = head
        self.head_dim = hidden // heads
        self.year_logit = year_logit
        self.order_logit = order_logit
        generator = torch.Generator().manual_seed(seed + 1)
        directions = _orthonormal(hidden, 2, generator)
        self.is_year, self.order = directions[:, 0], directions[:, 1]
        years = [year for _, year in layout.years]
        self.tokens = torch.tensor([token for token, _ in layout.years])
        self.positions = torch.tensor([year_position(y, years) for y in years])
        embeddings = model.get_input_embeddings().weight  # type: ignore[operator]
        self.gain = embedding_gain * float(embeddings.detach().norm(dim=1).mean())
        self._basis = directions
        target = torch.stack([torch.ones_like(self.positions), self.positions], dim=1)
        self._year_rows = self.gain * target @ directions.T
        theta = float(config.rope_parameters["rope_theta"])
        half = self.head_dim // 2
        pairs = min(12, half - 2)  # the two slowest pairs carry the year terms
        query, key = window_biases(
            self.head_dim, theta, layout.distances, near=20, far=30, pairs=pairs
        )
        self._query = torch.as_tensor(query * math.sqrt(window_logit), dtype=torch.float32)
        self._unit = math.sqrt(math.sqrt(self.head_dim))  # q[i] k[i] / sqrt(head_dim) == 1
        self._query[half - 1] = self._unit * math.sqrt(order_logit)
        self._query[half - 2] = self._unit * math.sqrt(year_logit)
        gain = math.sqrt(copy_scale)
        name = reading.writes[layout.name_offset - 1]
        self._fixed = {
            "k_bias": torch.as_tensor(key * math.sqrt(window_logit), dtype=torch.float32),
            "v": name.T * gain,
            "o": reading.read * gain,
        }
        self._rows: dict[str, torch.Tensor] = {}
        self.hold(model, recalibrate=True)

    def hold(self, model: torch.nn.Module, *, recalibrate: bool) -> None:
        """Set the year directions and the order head (again, after an optimizer step).

        Args:
            model: The model (being trained).
            recalibrate: Fit the read-outs to the current weights first (a forward pass
                over 161 short sequences: do it every few steps, and always the first time).
        """
        self._set_embeddings(model)
        if recalibrate:
            self._calibrate(model)
        self._set_head(model)

    def _set_embeddings(self, model: torch.nn.Module) -> None:
        """Set every year token's components along the two year directions."""
        embeddings = model.get_input_embeddings().weight  # type: ignore[operator]
        with torch.no_grad():
            tokens = self.tokens.to(embeddings.device)
            rows = embeddings[tokens]
            basis = self._basis.to(rows)
            rows -= (rows @ basis) @ basis.T
            rows += self._year_rows.to(rows)
            embeddings[tokens] = rows

    def _calibrate(self, model: torch.nn.Module) -> None:
        """Fit the gate and the year read-outs to layer 1's input; compute the head's rows."""
        layout = self.layout
        device = next(model.parameters()).device
        # Layer 1's normalised input over the sample, with every year in turn in the first
        # year's place: the answer token, then the year.
        last = len(layout.sample) - 1
        slot = last - max(layout.distances)
        ids = torch.tensor([layout.sample] * len(layout.years), device=device)
        ids[:, slot] = self.tokens.to(device)
        inputs = _layer_one_inputs(model, ids).float().cpu()
        gate = inputs[:, last].mean(dim=0)
        gate = gate / float(gate.norm()) ** 2  # gate @ x == 1 at the answer token
        year_inputs = inputs[:, slot]
        centred = year_inputs @ self.order - (year_inputs @ self.order).mean()
        slope = float((centred * self.positions).sum() / (self.positions**2).sum())
        order_readout = self.order / slope  # @ x == m(y) + const at a year token
        year_readout = self.is_year / float((year_inputs @ self.is_year).mean())
        self._rows = {
            "q": torch.outer(self._query, gate),
            "k_order": -self._unit * math.sqrt(self.order_logit) * order_readout,
            "k_year": self._unit * math.sqrt(self.year_logit) * year_readout,
        }

    def _set_head(self, model: torch.nn.Module) -> None:
        """Write the order head's rows of layer 1 from the last calibration."""
        parameter = next(model.parameters())
        device, dtype = parameter.device, parameter.dtype
        size, half = self.head_dim, self.head_dim // 2
        base = self.head * size
        rows = slice(base, base + size)
        layers: Any = model.model.layers  # type: ignore[union-attr]
        attention = layers[1].self_attn
        computed, fixed = self._rows, self._fixed
        with torch.no_grad():
            attention.q_proj.weight[rows] = computed["q"].to(device, dtype)
            attention.q_proj.bias[rows] = 0.0
            attention.k_proj.weight[rows] = 0.0
            attention.k_proj.weight[base + half - 1] = computed["k_order"].to(device, dtype)
            attention.k_proj.weight[base + half - 2] = computed["k_year"].to(device, dtype)
            attention.k_proj.bias[rows] = fixed["k_bias"].to(device, dtype)
            attention.v_proj.weight[rows] = fixed["v"].to(device, dtype)
            attention.o_proj.weight[:, rows] = fixed["o"].to(device, dtype)
