"""A KV cache whose layers append a step's keys and values in place.

transformers' ``DynamicLayer`` appends by concatenation: every decoding step copies the
whole cache of every layer, which for a batch of many rows over long prompts costs as
much as the step's own computation (measured on the toy model, 72 rows over 300 tokens:
57 ms a step, 27 ms without the copy). A [`RoomyLayer`][] keeps its keys and values
in a buffer with room for up to [`ROOM`][] more tokens and writes each step into that
room; the layer's ``keys`` and ``values`` are views of the filled part, so everything
that reads a ``DynamicLayer`` reads it unchanged. A buffer's width is the next multiple
of [`ROOM`][] above its filled columns ([`buffer_width`][]), so views of one end column
have one set of strides, as concatenated states do. Whoever replaces ``keys`` or
``values`` (a join of two caches, a trim) leaves the buffer; the next append copies them
into a new one.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer

if TYPE_CHECKING:
    from transformers import PreTrainedModel

__all__ = [
    "ROOM",
    "RoomyCache",
    "RoomyLayer",
    "buffer_width",
    "cache_keyword",
    "is_roomy",
    "join_rows",
    "select_rows",
]

ROOM = 64
"""Buffers are made [`ROOM`][] columns at a time (see [`buffer_width`][])."""


def buffer_width(filled: int) -> int:
    """Columns of a buffer whose used columns end at ``filled``: the next multiple of ROOM.

    The width depends on ``filled`` alone and a buffer is never filled to its last
    column, so a layer's views always have the strides that this rule gives their end
    column, whatever the history that made the buffer. Kernels that cache a plan per
    shape and stride (torch's cuDNN attention caches one per key length and stride)
    then meet as many distinct strides as with concatenated, contiguous states.

    Args:
        filled: The buffer's last used column plus one.

    Returns:
        The smallest multiple of [`ROOM`][] above ``filled``.
    """
    return ROOM * (filled // ROOM + 1)


_Geometry = tuple[int, int, tuple[int, ...], int]
"""A buffer's heads, head size, strides, and the storage offset of a column in row 0."""

_NO_GEOMETRY: _Geometry = (0, 0, (), 0)


def _geometry(buffer: torch.Tensor, column: int) -> _Geometry:
    """``buffer``'s geometry, with the storage offset of ``column`` in row 0."""
    strides = buffer.stride()
    return (
        buffer.shape[1],
        buffer.shape[3],
        strides,
        int(buffer.storage_offset()) + column * strides[2],
    )


class RoomyLayer(DynamicLayer):  # type: ignore[misc]
    """A ``DynamicLayer`` that appends into spare room instead of copying itself.

    ``keys`` and ``values`` are rows ``0..rows`` and columns ``start..end`` of the
    buffers. Columns before ``start`` (dropped padding) and rows after ``rows`` (rows
    that left, or room made for joining ones) are room too: rows leave by moving the
    rows after them down, and rows join by writing into that room, so neither copies
    the rows that stay. Every column a row does not hold is zero. Keys and values may
    differ in heads and size (a multi-head latent attention cache holds a compressed
    latent and a rotary key, as DeepSeek-V3's does).
    """

    keys: torch.Tensor
    values: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self._key_buffer: torch.Tensor | None = None
        self._value_buffer: torch.Tensor | None = None
        self._rows = 0
        self._start = 0
        self._end = 0
        self._geometry: tuple[int, _Geometry, _Geometry] = (0, _NO_GEOMETRY, _NO_GEOMETRY)
        """Rows, and the keys' and values' geometry (heads, head size, the buffer's strides
        and the storage offset of column ``start``): a step writes and views its columns
        with one ``as_strided`` each (the cheapest view to make, about half a slice's
        host time)."""
        self._views: tuple[torch.Tensor, torch.Tensor] | None = None
        """The ``keys`` and ``values`` objects this layer last set."""
        self._capacity = 0
        """Columns of the buffers (0: none)."""

    def _owns_views(self) -> bool:
        """Whether ``keys``/``values`` are the very views this layer last set (fast)."""
        views = self._views
        return views is not None and self.keys is views[0] and self.values is views[1]

    def _in_buffer(self) -> bool:
        """Whether ``keys``/``values`` are still this layer's views of its buffers."""
        if self._owns_views():
            return True  # untouched since they were set: a step's common case
        keys, values = self._key_buffer, self._value_buffer
        if keys is None or values is None or not self.is_initialized:
            return False
        start = self._start
        if self.keys.numel() == 0:  # an empty view has no address; nothing in it to lose
            return self.keys.shape[0] == self._rows and self._end == start
        return (
            self.keys.shape[0] == self._rows
            and self.keys.shape[-2] == self._end - start
            and self.keys.data_ptr() == keys[:, :, start:].data_ptr()
            and self.values.data_ptr() == values[:, :, start:].data_ptr()
        )

    def _set_views(self) -> None:
        assert self._key_buffer is not None and self._value_buffer is not None
        rows, start, end = self._rows, self._start, self._end
        self.keys = self._key_buffer[:rows, :, start:end]
        self.values = self._value_buffer[:rows, :, start:end]
        self._views = self.keys, self.values
        self._capacity = self._key_buffer.shape[-2]
        self._geometry = (
            rows,
            _geometry(self._key_buffer, self._start),
            _geometry(self._value_buffer, self._start),
        )

    def _rebuild(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        rows: int,
        left: int,
        right: int = 0,
    ) -> None:
        """Copy ``keys``/``values`` into new zeroed buffers with room.

        Args:
            keys: The states to hold, ``(r, heads, length, dim)``.
            values: Their values.
            rows: Rows of the new buffers (at least ``r``).
            left: Columns of room before the states.
            right: Columns after them that must be free (the states about to be
                appended); the width is [`buffer_width`][] of all three.
        """
        held, length = keys.shape[0], keys.shape[-2]
        width = buffer_width(left + length + right)
        self._key_buffer = keys.new_zeros((rows, keys.shape[1], width, keys.shape[-1]))
        self._value_buffer = values.new_zeros((rows, values.shape[1], width, values.shape[-1]))
        self._key_buffer[:held, :, left : left + length] = keys
        self._value_buffer[:held, :, left : left + length] = values
        self._rows, self._start, self._end = held, left, left + length
        self._set_views()

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append a step's keys and values; return everything held (views)."""
        new = key_states.shape[-2]
        if self._owns_views() and self._end + new < self._capacity:  # a step with room
            return self._append(key_states, value_states, new)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        if not self._in_buffer() or self._end + new >= self._capacity:  # last column stays free
            held = self.keys.numel() > 0
            keys = self.keys if held else key_states[:, :, :0]
            values = self.values if held else value_states[:, :, :0]
            rows = keys.shape[0]
            if self._in_buffer() and self._key_buffer is not None:  # keep its rows of room
                rows = max(rows, self._key_buffer.shape[0])
            self._rebuild(keys, values, rows, 0, new)
        return self._append(key_states, value_states, new)

    def _append(
        self, key_states: torch.Tensor, value_states: torch.Tensor, new: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``new`` columns after the held ones (there is room); the new views."""
        assert self._key_buffer is not None and self._value_buffer is not None
        rows, (heads, dim, strides, first), (v_heads, v_dim, v_strides, v_first) = self._geometry
        held = self._end - self._start
        keys, values = self._key_buffer, self._value_buffer
        keys.as_strided((rows, heads, new, dim), strides, first + held * strides[2]).copy_(
            key_states
        )
        values.as_strided(
            (rows, v_heads, new, v_dim), v_strides, v_first + held * v_strides[2]
        ).copy_(value_states)
        self._end += new
        self.keys = keys.as_strided((rows, heads, held + new, dim), strides, first)
        self.values = values.as_strided((rows, v_heads, held + new, v_dim), v_strides, v_first)
        self._views = self.keys, self.values
        return self.keys, self.values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows ``indices`` (in that order, repeats allowed), in new buffers."""
        if not self._in_buffer():
            super().batch_select_indices(indices)
            return
        assert self._key_buffer is not None and self._value_buffer is not None
        self._key_buffer = self._key_buffer[indices]
        self._value_buffer = self._value_buffer[indices]
        self._rows = self._key_buffer.shape[0]
        self._set_views()

    def keep_rows(self, keep: Sequence[int], index: torch.Tensor | None = None) -> None:
        """Keep the rows ``keep`` in place: the rows after a gap move down.

        Only the moved rows' columns in use are copied; the rows freed at the end are
        zeroed and become room for joining rows. Rows out of order or repeated are
        gathered into new buffers instead.

        Args:
            keep: The rows to keep.
            index: ``keep`` as a tensor on the cache's device, when the caller made it
                once for every layer (then ``keep`` must be increasing).
        """
        if index is None:
            if not _increasing(keep):
                self.batch_select_indices(torch.tensor(list(keep), device=self.keys.device))
                return
            index = torch.tensor(list(keep), device=self.keys.device)
        if not self._in_buffer():
            self.batch_select_indices(index)
            return
        assert self._key_buffer is not None and self._value_buffer is not None
        start, end, rows = self._start, self._end, self._rows
        first = next((i for i, row in enumerate(keep) if row != i), len(keep))
        if first < len(keep):
            moved = index[first:]
            for buffer in (self._key_buffer, self._value_buffer):
                live = buffer[:, :, start:end]
                live[first : len(keep)] = live.index_select(0, moved)
        for buffer in (self._key_buffer, self._value_buffer):
            buffer[len(keep) : rows, :, start:end] = 0
        self._rows = len(keep)
        self._set_views()

    def add_rows(self, count: int, rows: int = 0) -> None:
        """Append ``count`` rows that hold no columns yet (rows that read a shared prompt).

        Their columns are zero, as every column a row does not hold; the loop's mask hides
        them. In the buffers' room when there is room for the rows; otherwise everything
        is copied once into new buffers with room for up to twice the rows they hold.

        Args:
            count: Rows to append.
            rows: The most rows the layer is to hold (see ``append_rows``).
        """
        total = self.keys.shape[0] + count
        fits = (
            self._in_buffer()
            and self._key_buffer is not None
            and total <= self._key_buffer.shape[0]
        )
        if not fits:
            room = min(max(total, rows), 2 * total)
            self._rebuild(self.keys, self.values, room, ROOM)
        self._rows = total
        self._set_views()

    def drop_leading(self, count: int) -> None:
        """Forget the first ``count`` columns of every row (without copying)."""
        if self._in_buffer():
            assert self._key_buffer is not None and self._value_buffer is not None
            start = self._start
            for buffer in (self._key_buffer, self._value_buffer):
                buffer[: self._rows, :, start : start + count] = 0
            self._start += count
            self._set_views()
        else:
            self.keys = self.keys[:, :, count:]
            self.values = self.values[:, :, count:]

    def append_rows(
        self,
        other: RoomyLayer,
        length: int,
        select: Sequence[int] | None = None,
        rows: int = 0,
        index: torch.Tensor | None = None,
    ) -> None:
        """Append ``other``'s rows after this layer's, both left-padded to ``length``.

        The joining rows are written into this layer's room when it has the rows and
        the columns for them (only they are copied); otherwise both are copied once,
        into new buffers with room.

        Args:
            other: The layer whose rows join (a prefill's).
            length: Columns of the joint layer (at least either's).
            select: Rows of ``other`` to append, in order (repeats allowed); default all.
            rows: The most rows the layer is to hold (the loop's ``max_batch_rows``):
                new buffers, when they are made, have room for up to twice the rows
                they hold, but not past this, so later joins write into them.
            index: ``select`` as a tensor on the cache's device, when the caller made it
                once for every layer.
        """
        order = list(range(other.keys.shape[0])) if select is None else list(select)
        if index is None:
            index = torch.tensor(order, device=other.keys.device)
        theirs = other.keys.index_select(0, index)
        their_values = other.values.index_select(0, index)
        mine, held = self.keys.shape[0], self.keys.shape[-2]
        total = mine + len(order)
        fits = (
            self._in_buffer()
            and self._key_buffer is not None
            and total <= self._key_buffer.shape[0]
            and self._end - length >= 0
        )
        if not fits:
            room = min(max(total, rows), 2 * total)  # grows by doubling, up to ``rows``
            self._rebuild(self.keys, self.values, room, max(length - held, 0) + ROOM)
        assert self._key_buffer is not None and self._value_buffer is not None
        end = self._end
        self._start = min(self._start, end - length)  # older columns: zero room
        width = theirs.shape[-2]
        self._key_buffer[mine:total, :, end - width : end] = theirs
        self._value_buffer[mine:total, :, end - width : end] = their_values
        self._rows = total
        self._set_views()


class RoomyCache(DynamicCache):  # type: ignore[misc]
    """A ``DynamicCache`` of [`RoomyLayer`][] layers, created as a model fills them."""

    def __init__(self) -> None:
        Cache.__init__(self, layer_class_to_replicate=RoomyLayer)
        self.narrowed: dict[int, int] = {}
        """Layers whose passes read their keys and values from a column on (layer: that
        column), set by the loop for one pass: a sliding-window layer past its window
        reads only the columns its mask can show."""

    def update(
        self,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Append a step's keys and values to a layer; return what its pass reads."""
        keys, values = super().update(key_states, value_states, layer_idx, *args, **kwargs)
        start = self.narrowed.get(layer_idx, 0)
        if start:
            return keys[:, :, start:], values[:, :, start:]
        return keys, values

    def keep_rows(self, keep: Sequence[int]) -> None:
        """Keep the rows ``keep`` in every layer (see ``RoomyLayer.keep_rows``).

        The order is checked and the index made once for all layers.
        """
        device = self.layers[0].keys.device
        index = torch.tensor(list(keep), device=device)
        if not _increasing(keep):
            self.batch_select_indices(index)
            return
        for layer in self.layers:
            layer.keep_rows(keep, index)


def join_rows(
    cache: Any,
    mask: torch.Tensor,
    other: Any,
    other_mask: torch.Tensor,
    select: Sequence[int],
    rows: int,
) -> torch.Tensor:
    """Append rows ``select`` of ``other`` to ``cache``, left-padding the shorter; the mask.

    Both are ``RoomyCache`` caches (a decoding loop's own);
    ``other_mask`` is already the selected rows' mask. The joining rows go into the
    cache's room when it has room for them; a cache made anew holds ``rows`` rows.
    """
    length = max(mask.shape[1], other_mask.shape[1])
    index = torch.tensor(list(select), device=other_mask.device)  # made once, for every layer
    for layer, joining in zip(cache.layers, other.layers, strict=True):
        layer.append_rows(joining, length, select, rows, index)
    return torch.cat([_left_pad_mask(mask, length), _left_pad_mask(other_mask, length)])


def _left_pad_mask(mask: torch.Tensor, length: int) -> torch.Tensor:
    missing = length - mask.shape[1]
    if missing == 0:
        return mask
    return torch.cat([mask.new_zeros((mask.shape[0], missing)), mask], dim=1)


def _increasing(rows: Sequence[int]) -> bool:
    """Whether ``rows`` are strictly increasing (each row kept once, in order)."""
    return all(a < b for a, b in itertools.pairwise(rows))


def is_roomy(cache: Any) -> bool:
    """Whether every layer of ``cache`` is a [`RoomyLayer`][].

    Only such a cache (the decoding loop's own) has rows that can be joined, trimmed and
    stored as prompt prefixes; a sliding-window or hybrid cache the model built is not.
    """
    layers: list[object] = list(getattr(cache, "layers", None) or [])
    return bool(layers) and all(type(layer) is RoomyLayer for layer in layers)


def cache_keyword(model: PreTrainedModel) -> str:
    """The forward argument that takes a KV cache.

    Newer transformers 5.x releases name it ``cache`` and deprecate ``past_key_values``
    (removed in 5.40); earlier 5.x releases know only ``past_key_values``.
    """
    model_class = type(model)
    keyword = _CACHE_KEYWORDS.get(model_class)
    if keyword is None:
        parameters = inspect.signature(model_class.forward).parameters
        keyword = "cache" if "cache" in parameters else "past_key_values"
        _CACHE_KEYWORDS[model_class] = keyword
    return keyword


_CACHE_KEYWORDS: dict[type, str] = {}


def select_rows(cache: Any, indices: torch.Tensor) -> None:
    """Keep the rows ``indices`` of any cache (in that order, repeats allowed).

    A ``RoomyCache`` keeps them in its buffers. Other caches reorder every layer as
    beam search does (``reorder_cache``), which each kind of transformers' layers
    implements for all it holds: keys and values, and the convolution and recurrent
    states of linear-attention and state-space layers (Mamba, Qwen3-Next, LFM2), whose
    ``batch_select_indices`` selects only keys and values or is missing.
    """
    if is_roomy(cache):
        cache.batch_select_indices(indices)
    else:
        cache.reorder_cache(indices)
