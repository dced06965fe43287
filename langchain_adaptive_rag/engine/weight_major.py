"""Decoding steps of a few rows on CPU: linear layers as weight-first products.

``nn.Linear`` computes ``x @ W.T``. For the handful of rows a batched decoding step
feeds (one token a row), MKL runs that float32 product as a short, very wide one and
reads the weights several times slower than the same product written weight-first,
``(W @ x.T).T``. One row is worse off still: ``nn.Linear`` runs it as a matrix-vector
product, which reads the weights at a third of the rate of a 2-row weight-first
product. And the product's own kernels run a multiple of 8 rows faster than most
counts between (Gemma 3 270M's linear layers: 7 rows 104 ms, 8 rows 96 ms; 13 to 15
rows 214-250 ms, 16 rows 151 ms). So the rows are padded with rows of zeros, whose
outputs are dropped (see [`padded_rows`][]): one row is fed as two, and from 7 rows on
a step feeds the next multiple of 8. On 2 cores, Gemma 3 270M's 262,144 x 640 output
layer takes 56 ms for 1 row as ``nn.Linear`` and 21 ms as a 2-row weight-first
product, and a whole 1-row decoding step over 1,800 cached positions 106 ms and 49 ms
(``python benchmarks/weight_major_step.py``). Models that fit in the CPU's caches
(the toy model) gain nothing.

[`WeightMajorLinears`][] routes a model's plain float32 ``nn.Linear`` layers that way
while the decoding loop's passes run, and only then: the forward passes are entered
through [`WeightMajorLinears.active`][], which sets each layer's ``forward`` on the way
in and removes it on the way out (counted, so loops on other threads share it). The
products sum in another order than ``nn.Linear``'s, so logits differ from the model's
own forward by float32 rounding (about 1e-6 of their size), as a batch of rows already
differs from one row.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

__all__ = [
    "MIN_MODEL_BYTES",
    "PAD_TO_EIGHT_FROM",
    "ROWS",
    "WeightMajorLinears",
    "padded_rows",
    "weight_major_linear",
]

ROWS = range(1, 33)
"""Rows a pass feeds for which a layer runs weight-first (measured faster from 1 to 32
rows, for whole steps of Gemma 3 270M; one row is fed as two)."""

PAD_TO_EIGHT_FROM = 7
"""From this many rows, a product is computed for the next multiple of 8 rows."""

MIN_MODEL_BYTES = 64 * 2**20
"""Models whose float32 linear weights total less than this stay as they are: their
weights stay in the CPU's caches between steps, where both layouts run alike."""


def padded_rows(rows: int) -> int:
    """The rows a weight-first product of ``rows`` rows is computed for.

    Args:
        rows: The rows a pass feeds, within [`ROWS`][].

    Returns:
        2 for one row (a product, not a matrix-vector product), the next multiple of 8
        from [`PAD_TO_EIGHT_FROM`][] rows on, else ``rows``.
    """
    if rows == 1:
        return 2
    if rows >= PAD_TO_EIGHT_FROM:
        return -(-rows // 8) * 8
    return rows


def weight_major_linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """``layer(x)`` computed as ``(W @ x.T).T`` when ``x`` has [`ROWS`][] rows.

    The rows are padded with rows of zeros to [`padded_rows`][] and only their own
    outputs kept.

    Args:
        layer: A plain ``nn.Linear``.
        x: Its input, ``(..., in_features)``.

    Returns:
        ``(..., out_features)``, contiguous, as ``layer(x)``.
    """
    rows = x.numel() // max(x.shape[-1], 1)
    if rows not in ROWS:
        return nn.functional.linear(x, layer.weight, layer.bias)
    flat = x.reshape(rows, x.shape[-1])
    width = padded_rows(rows)
    if width > rows:
        flat = torch.cat([flat, flat.new_zeros(width - rows, flat.shape[-1])])
    out = torch.mm(layer.weight, flat.T)[:, :rows].T.contiguous()
    if layer.bias is not None:
        out += layer.bias
    return out.reshape(*x.shape[:-1], layer.out_features)


class WeightMajorLinears:
    """A model's linear layers, routed weight-first while a decoding pass runs.

    Only plain ``nn.Linear`` layers with float32 weights on the CPU are routed (not
    subclasses: quantized layers keep their own forward), none whose ``forward`` another
    library has already replaced (accelerate's offloading hooks), and none at all in a
    model whose such weights total less than [`MIN_MODEL_BYTES`][].
    """

    def __init__(self, model: nn.Module) -> None:
        layers = [
            m
            for m in model.modules()
            if type(m) is nn.Linear
            and m.weight.device.type == "cpu"
            and m.weight.dtype == torch.float32
            and "forward" not in vars(m)
        ]
        total = sum(m.weight.numel() * m.weight.element_size() for m in layers)
        self.layers: tuple[nn.Linear, ...] = tuple(layers) if total >= MIN_MODEL_BYTES else ()
        """The routed layers (empty: the model runs as it is)."""
        self._lock = threading.Lock()
        self._entered = 0

    @classmethod
    def of(cls, model: nn.Module) -> WeightMajorLinears:
        """The one instance for ``model`` (kept while the model lives)."""
        with _LOCK:
            try:
                known = _KNOWN.get(model)
            except TypeError:  # not weakly referable: a fresh one, routed for its passes
                return cls(model)
            if known is None:
                known = _KNOWN[model] = cls(model)
            return known

    @contextmanager
    def active(self) -> Iterator[None]:
        """Route the layers for the passes run inside (nested and threaded entries share)."""
        if not self.layers:
            yield
            return
        with self._lock:
            if self._entered == 0:
                for layer in self.layers:
                    layer.forward = functools.partial(weight_major_linear, layer)  # type: ignore[method-assign]
            self._entered += 1
        try:
            yield
        finally:
            with self._lock:
                self._entered -= 1
                if self._entered == 0:
                    for layer in self.layers:
                        vars(layer).pop("forward", None)


_LOCK = threading.Lock()
_KNOWN: weakref.WeakKeyDictionary[Any, WeightMajorLinears] = weakref.WeakKeyDictionary()
"""Each model's routed layers."""
