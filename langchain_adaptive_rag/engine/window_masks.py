"""Sliding-window masks for the loop's own cache, per row.

The loop's own cache keeps every key of every layer. A sliding-window layer of ``w``
positions must not see keys ``w`` or more positions behind its query; the model's own mask
counts that distance in cache columns, which is right for a row without gaps, but a row
of the loop may hold padding between its stored prefix and the rest of its prompt (see
the runner's prefill), and columns then overstate the distance. The masks here count it
in each row's own positions (the number of real columns before a key), so a windowed
layer sees what it would see in the model's own cache, for every row, at any length.

The model receives, in place of the loop's 2-D padding mask, a 4-D mask for every kind
of layer: a dictionary by layer type (``"full_attention"``, ``"sliding_attention"``) for
models whose forward takes one (Gemma 2 and 3, GPT-OSS, Qwen2), or one tensor for a model
whose layers all share one window (Mistral). The masks are boolean for the ``sdpa``
kernel and additive for ``eager``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = ["WindowMasks", "window_masks_of"]

_MASKED_KERNELS = ("sdpa", "eager")


@dataclass(frozen=True)
class WindowMasks:
    """How a windowed model's layers see their keys, read from its config."""

    window: int
    """The sliding window (``config.sliding_window``) in positions."""
    by_type: bool
    """Whether the model's forward takes a dictionary of masks by layer type (else every
    layer is windowed, and one mask serves them all)."""
    additive: bool
    """Whether the kernel adds the mask to its scores (``eager``) or reads booleans."""

    sliding_layers: tuple[int, ...] = ()
    """The layers the windowed mask serves (``config.layer_types``; every layer when one
    mask serves them all)."""

    def build(self, padding: torch.Tensor, queries: int, dtype: torch.dtype) -> Any:
        """The 4-D masks of a pass over the last ``queries`` columns of ``padding``.

        Args:
            padding: ``(rows, columns)`` 1 for a real key, 0 for padding (the loop's mask,
                the pass's own columns last).
            queries: How many columns the pass feeds.
            dtype: The model's dtype (for an additive mask).

        Returns:
            A dictionary of ``(rows, 1, queries, columns)`` masks by layer type, or one
            such mask.
        """
        seen, windowed = self._visible(padding, queries)
        return self._assemble(seen, windowed, dtype)

    def build_narrowed(
        self, padding: torch.Tensor, queries: int, dtype: torch.dtype
    ) -> tuple[Any, int]:
        """The masks of [`build`][WindowMasks.build], the windowed one cut to its window.

        The windowed mask starts at the first column any of its queries sees, and the
        windowed layers then read their keys from that column on (see
        ``RoomyCache.narrowed``): past the window, a few hundred columns instead of the
        whole sequence. Finding the column reads the mask on the host.

        Returns:
            The masks (the windowed one ``(rows, 1, queries, columns - start)``) and
            ``start``, that first column.
        """
        seen, windowed = self._visible(padding, queries)
        seen_columns = windowed.any(dim=0).any(dim=0).nonzero()  # one read on the host
        start = int(seen_columns[0, 0]) if len(seen_columns) else 0
        return self._assemble(seen, windowed[:, :, start:], dtype), start

    def _visible(self, padding: torch.Tensor, queries: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rows, queries, columns)``: the keys each query sees, without and with the window."""
        real = padding.bool()
        positions = padding.long().cumsum(dim=-1) - 1  # each column's position in its row
        columns = padding.shape[1]
        query_columns = torch.arange(columns - queries, columns, device=padding.device)
        key_columns = torch.arange(columns, device=padding.device)
        causal = key_columns[None, :] <= query_columns[:, None]  # (queries, columns)
        seen = real[:, None, :] & causal[None, :, :]  # (rows, queries, columns)
        query_positions = positions[:, columns - queries :]  # (rows, queries)
        near = positions[:, None, :] > query_positions[:, :, None] - self.window
        return seen, seen & near

    def _assemble(self, seen: torch.Tensor, windowed: torch.Tensor, dtype: torch.dtype) -> Any:
        sliding = self._as_mask(windowed, dtype)
        if self.by_type:
            return {"full_attention": self._as_mask(seen, dtype), "sliding_attention": sliding}
        return sliding

    def _as_mask(self, visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        mask = visible[:, None, :, :]
        if not self.additive:
            return mask
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            ~mask, torch.finfo(dtype).min
        )


def window_masks_of(model: PreTrainedModel) -> WindowMasks | None:
    """The masks a windowed model needs from the loop, or ``None`` when it cannot have them.

    ``None`` for a model without a sliding window, a kernel that reads no mask
    (flash attention, flex), layers of another kind than full and sliding attention, or
    mixed layers under a forward that takes one mask only.
    """
    config = model.config.get_text_config()
    window = getattr(config, "sliding_window", None)
    kernel = getattr(config, "_attn_implementation", None)
    if not isinstance(window, int) or window <= 0 or kernel not in _MASKED_KERNELS:
        return None
    types = getattr(config, "layer_types", None)
    if types is not None and set(types) - {"full_attention", "sliding_attention"}:
        return None
    by_type = _takes_masks_by_type(model)
    if not by_type and types is not None and set(types) != {"sliding_attention"}:
        return None
    if types is not None and "sliding_attention" not in types:
        return None
    count = config.num_hidden_layers
    sliding = tuple(i for i in range(count) if types is None or types[i] == "sliding_attention")
    return WindowMasks(
        window=window, by_type=by_type, additive=kernel == "eager", sliding_layers=sliding
    )


def _takes_masks_by_type(model: PreTrainedModel) -> bool:
    """Whether the model's decoder forward accepts a dictionary of masks by layer type."""
    inner = getattr(model, "model", model)
    inner = getattr(inner, "language_model", inner)
    try:
        source = inspect.getsource(type(inner).forward)
    except (OSError, TypeError):
        return False
    return "attention_mask, dict)" in source
