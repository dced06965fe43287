"""RoomyLayer: appends in place, and reads exactly as a DynamicLayer that concatenates."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig
from transformers.cache_utils import DynamicCache, DynamicLayer

from langchain_adaptive_rag.engine import kv_cache
from langchain_adaptive_rag.engine.kv_cache import (
    RoomyCache,
    RoomyLayer,
    buffer_width,
    is_roomy,
)
from tests.helpers.host_reads import DispatchedOperators


def states(batch: int, tokens: int, start: float) -> torch.Tensor:
    """``(batch, 2 heads, tokens, 3)`` states numbered from ``start`` (easy to follow)."""
    count = batch * 2 * tokens * 3
    return torch.arange(start, start + count, dtype=torch.float32).reshape(batch, 2, tokens, 3)


def test_appends_equal_concatenation_and_stay_in_one_buffer_while_there_is_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kv_cache, "ROOM", 3)
    roomy, plain = RoomyLayer(), DynamicLayer()
    prompt = states(2, 5, 0)
    for layer in (roomy, plain):
        layer.update(prompt, -prompt)
    buffers = [roomy.keys.data_ptr()]
    for step in range(7):  # 6 columns hold 5; each buffer's last column stays free
        token = states(2, 1, 1000 + 100 * step)
        keys, values = roomy.update(token, -token)
        plain.update(token, -token)
        assert torch.equal(keys, plain.keys) and torch.equal(values, plain.values)
        buffers.append(roomy.keys.data_ptr())
    moved = [step for step in range(7) if buffers[step + 1] != buffers[step]]
    assert moved == [0, 3, 6]  # ends 6, 9 and 12: a new buffer at each multiple of ROOM
    assert roomy.get_seq_length() == 12


def test_a_buffer_width_depends_on_its_end_column_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Views of one end column have one set of strides, as concatenated states do."""
    monkeypatch.setattr(kv_cache, "ROOM", 4)
    assert [buffer_width(n) for n in (0, 3, 4, 7, 8)] == [4, 4, 8, 8, 12]
    strides: dict[int, tuple[int, ...]] = {}
    for prompt_length in range(1, 9):  # prefills of every length, then steps to column 14
        roomy = RoomyLayer()
        roomy.update(states(1, prompt_length, 0), states(1, prompt_length, 0))
        for end in range(prompt_length, 15):
            if end > prompt_length:
                token = states(1, 1, 0)
                roomy.update(token, token)
            assert roomy.keys.shape[-2] == end
            stride = roomy.keys.stride()
            assert strides.setdefault(end, stride) == stride, (prompt_length, end)
            assert roomy._key_buffer is not None
            assert roomy._key_buffer.shape[-2] == buffer_width(end)


def test_selected_rows_and_dropped_columns_read_like_a_dynamic_layer() -> None:
    roomy, plain = RoomyLayer(), DynamicLayer()
    prompt = states(3, 4, 0)
    for layer in (roomy, plain):
        layer.update(prompt, -prompt)
    keep = torch.tensor([0, 2])
    roomy.batch_select_indices(keep)
    plain.batch_select_indices(keep)
    roomy.drop_leading(1)
    plain.keys, plain.values = plain.keys[:, :, 1:], plain.values[:, :, 1:]
    buffer = roomy.keys.data_ptr()
    token = states(2, 1, 500)
    roomy.update(token, -token)
    plain.update(token, -token)
    assert torch.equal(roomy.keys, plain.keys) and torch.equal(roomy.values, plain.values)
    assert roomy.keys.data_ptr() == buffer  # still the same buffer, one column further


def test_replaced_states_are_copied_into_a_new_buffer_at_the_next_append() -> None:
    roomy = RoomyLayer()
    prompt = states(1, 3, 0)
    roomy.update(prompt, -prompt)
    roomy.keys = roomy.keys[:, :, 1:].clone()  # as a caller that trims or joins does
    roomy.values = roomy.values[:, :, 1:].clone()
    token = states(1, 1, 100)
    keys, values = roomy.update(token, -token)
    assert torch.equal(keys, torch.cat([prompt[:, :, 1:], token], dim=2))
    assert torch.equal(values, -keys)


def test_a_replaced_state_of_the_same_shape_is_not_taken_for_the_buffer() -> None:
    """Only ``keys``/``values`` objects the layer set itself skip the full check."""
    for replaced in ("keys", "values"):
        roomy = RoomyLayer()
        prompt = states(1, 3, 0)
        roomy.update(prompt, -prompt)
        setattr(roomy, replaced, getattr(roomy, replaced).clone() + 1)  # same shape, new data
        token = states(1, 1, 100)
        keys, values = roomy.update(token, -token)
        assert torch.equal(keys, torch.cat([prompt + (replaced == "keys"), token], dim=2))
        assert torch.equal(values, torch.cat([-prompt + (replaced == "values"), -token], dim=2))


def test_a_step_with_room_launches_two_copies_and_nothing_else() -> None:
    """A decoding step's append costs the host two copies and four ``as_strided`` views."""
    roomy = RoomyLayer()
    roomy.update(states(2, 5, 0), states(2, 5, 0))
    token, negated = states(2, 1, 100), states(2, 1, -100)
    with DispatchedOperators() as ops:
        roomy.update(token, negated)
    assert ops.seen.count("copy_") == 2
    assert set(ops.seen) <= {"copy_", "as_strided"}, ops.seen  # views launch nothing
    assert len(ops.seen) == 6, ops.seen  # two slots written, two views handed out


def test_appended_rows_are_left_padded_with_zeros() -> None:
    roomy, other = RoomyLayer(), RoomyLayer()
    roomy.update(states(1, 2, 0), states(1, 2, 0))
    other.update(states(2, 4, 50), states(2, 4, 50))
    roomy.append_rows(other, 4)
    assert roomy.keys.shape == (3, 2, 4, 3)
    assert torch.equal(roomy.keys[0, :, :2], torch.zeros(2, 2, 3))
    assert torch.equal(roomy.keys[0, :, 2:], states(1, 2, 0)[0])
    assert torch.equal(roomy.keys[1:], states(2, 4, 50))
    token = states(3, 1, 900)
    keys, _ = roomy.update(token, token)
    assert torch.equal(keys[:, :, 4:], token)


def test_a_roomy_cache_is_told_from_a_models_own() -> None:
    cache = RoomyCache()
    cache.update(states(1, 2, 0), states(1, 2, 0), 0)
    assert type(cache.layers[0]) is RoomyLayer and is_roomy(cache)
    dynamic = DynamicCache(config=LlamaConfig(num_hidden_layers=2))  # a model's own
    dynamic.update(states(1, 2, 0), states(1, 2, 0), 0)
    dynamic.update(states(1, 2, 0), states(1, 2, 0), 1)
    assert not is_roomy(dynamic) and not is_roomy(None)


def padded(rows: torch.Tensor, length: int) -> torch.Tensor:
    """``rows`` left-padded with zero columns to ``length``."""
    missing = length - rows.shape[-2]
    return torch.cat([rows.new_zeros((*rows.shape[:2], missing, rows.shape[-1])), rows], dim=2)


def test_rows_leave_in_place_and_read_like_a_dynamic_layer() -> None:
    roomy, plain = RoomyLayer(), DynamicLayer()
    prompt = states(5, 4, 0)
    for layer in (roomy, plain):
        layer.update(prompt, -prompt)
    buffer = roomy.keys.data_ptr()
    roomy.keep_rows([0, 2, 3])
    plain.batch_select_indices(torch.tensor([0, 2, 3]))
    assert torch.equal(roomy.keys, plain.keys) and torch.equal(roomy.values, plain.values)
    assert roomy.keys.data_ptr() == buffer  # no new buffer: rows 2 and 3 moved down
    assert roomy._key_buffer is not None and not roomy._key_buffer[3:].any()  # freed: zero
    token = states(3, 1, 700)
    keys, values = roomy.update(token, -token)
    plain.update(token, -token)
    assert torch.equal(keys, plain.keys) and torch.equal(values, plain.values)
    assert roomy.keys.data_ptr() == buffer


def test_rows_kept_out_of_order_or_repeated_are_gathered() -> None:
    roomy, plain = RoomyLayer(), DynamicLayer()
    prompt = states(3, 2, 0)
    for layer in (roomy, plain):
        layer.update(prompt, -prompt)
    roomy.keep_rows([2, 0, 0])
    plain.batch_select_indices(torch.tensor([2, 0, 0]))
    assert torch.equal(roomy.keys, plain.keys) and torch.equal(roomy.values, plain.values)


def test_joining_rows_fill_the_room_of_rows_that_left() -> None:
    roomy, other = RoomyLayer(), RoomyLayer()
    held = states(4, 5, 0)
    roomy.update(held, -held)
    roomy.keep_rows([1, 3])
    buffer = roomy.keys.data_ptr()
    joining = states(2, 3, 500)
    other.update(joining, -joining)
    roomy.append_rows(other, 5, select=[1, 0])  # narrower rows, in another order
    expected = torch.cat([held[[1, 3]], padded(joining[[1, 0]], 5)])
    assert torch.equal(roomy.keys, expected) and torch.equal(roomy.values, -expected)
    assert roomy.keys.data_ptr() == buffer


def test_wider_joining_rows_take_the_columns_of_dropped_padding() -> None:
    roomy, other = RoomyLayer(), RoomyLayer()
    held = states(3, 6, 0)
    roomy.update(held, -held)
    roomy.keep_rows([0, 1])
    roomy.drop_leading(3)  # columns 0..2 are zeroed room now
    joining = states(1, 5, 900)
    other.update(joining, -joining)
    buffer = roomy._key_buffer
    roomy.append_rows(other, 5)
    expected = torch.cat([padded(held[:2, :, 3:], 5), joining])
    assert torch.equal(roomy.keys, expected) and torch.equal(roomy.values, -expected)
    assert roomy._key_buffer is buffer  # written into the room, nothing else copied


def test_a_join_without_room_makes_buffers_with_room_for_more_rows() -> None:
    roomy, other, late = RoomyLayer(), RoomyLayer(), RoomyLayer()
    held = states(1, 2, 0)
    roomy.update(held, -held)
    joining = states(2, 4, 50)
    other.update(joining, -joining)
    roomy.append_rows(other, 4, rows=8)
    assert roomy._key_buffer is not None and roomy._key_buffer.shape[0] == 6  # 2 x 3 held
    assert torch.equal(roomy.keys, torch.cat([padded(held, 4), joining]))
    buffer = roomy._key_buffer
    last = states(1, 4, 300)
    late.update(last, -last)
    roomy.append_rows(late, 4)  # the room made for it: no copy
    assert roomy._key_buffer is buffer
    assert torch.equal(roomy.keys, torch.cat([padded(held, 4), joining, last]))
    token = states(4, 1, 990)
    keys, _ = roomy.update(token, token)
    assert torch.equal(keys[:, :, -1:], token) and roomy._key_buffer is buffer


def test_room_for_rows_stops_at_the_most_rows_asked_for() -> None:
    roomy, other = RoomyLayer(), RoomyLayer()
    roomy.update(states(2, 2, 0), states(2, 2, 0))
    other.update(states(2, 2, 50), states(2, 2, 50))
    roomy.append_rows(other, 2, rows=5)
    assert roomy._key_buffer is not None and roomy._key_buffer.shape[0] == 5
    without = RoomyLayer()
    without.update(states(2, 2, 0), states(2, 2, 0))
    without.append_rows(other, 2)  # no most rows given: exactly the rows held
    assert without._key_buffer is not None and without._key_buffer.shape[0] == 4


def test_a_roomy_cache_keeps_rows_in_place_in_every_layer() -> None:
    cache, plain = RoomyCache(), DynamicCache()
    for index in range(2):
        prompt = states(4, 3, 100 * index)
        cache.update(prompt, -prompt, index)
        plain.update(prompt, -prompt, index)
    buffers = [layer.keys.data_ptr() for layer in cache.layers]
    cache.keep_rows([1, 3])
    plain.batch_select_indices(torch.tensor([1, 3]))
    for mine, theirs in zip(cache.layers, plain.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)
    assert [layer.keys.data_ptr() for layer in cache.layers] == buffers
    cache.keep_rows([1, 0])  # out of order: gathered
    plain.batch_select_indices(torch.tensor([1, 0]))
    for mine, theirs in zip(cache.layers, plain.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys)


def test_rows_without_columns_are_added_in_the_room_of_rows_that_left() -> None:
    roomy = RoomyLayer()
    held = states(4, 3, 0)
    roomy.update(held, -held)
    roomy.keep_rows([0, 2])
    buffer = roomy.keys.data_ptr()
    roomy.add_rows(2)
    assert roomy.keys.data_ptr() == buffer and roomy.keys.shape == (4, 2, 3, 3)
    assert torch.equal(roomy.keys[:2], held[[0, 2]]) and not roomy.keys[2:].any()
    token = states(4, 1, 700)
    keys, values = roomy.update(token, -token)
    assert torch.equal(keys[2:, :, -1:], token[2:]) and torch.equal(values, -keys)


def test_rows_without_columns_and_no_room_get_new_buffers_with_room() -> None:
    roomy = RoomyLayer()
    held = states(2, 3, 0)
    roomy.update(held, -held)
    roomy.add_rows(1, rows=5)  # 3 rows: room for up to twice, at most 5
    assert roomy._key_buffer is not None and roomy._key_buffer.shape[0] == 5
    assert torch.equal(roomy.keys[:2], held) and not roomy.keys[2].any()
    buffer = roomy.keys.data_ptr()
    roomy.add_rows(2, rows=5)
    assert roomy.keys.shape[0] == 5 and roomy.keys.data_ptr() == buffer


def latents(batch: int, tokens: int, start: float) -> torch.Tensor:
    """``(batch, 1 head, tokens, 5)`` states: a multi-head latent attention cache's latent."""
    count = batch * tokens * 5
    return torch.arange(start, start + count, dtype=torch.float32).reshape(batch, 1, tokens, 5)


def test_keys_and_values_of_other_shapes_read_like_a_dynamic_layer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A latent cache (DeepSeek-V3: one head of the compressed latent as "keys", one of
    the rotary key as "values", of another size): appends with and without room, rows
    leaving and joining, rows without columns and dropped padding, as concatenation."""
    monkeypatch.setattr(kv_cache, "ROOM", 4)
    roomy, plain = RoomyLayer(), DynamicLayer()
    prompt, rotary = latents(3, 5, 0), states(3, 5, 0)[:, :1]  # (3, 1, 5, 5) and (3, 1, 5, 3)
    for layer in (roomy, plain):
        layer.update(prompt, rotary)
    for step in range(6):  # through two new buffers
        token, its_rotary = latents(3, 1, 100 * step + 100), states(3, 1, 10 * step)[:, :1]
        keys, values = roomy.update(token, its_rotary)
        plain.update(token, its_rotary)
        assert torch.equal(keys, plain.keys) and torch.equal(values, plain.values)
    roomy.keep_rows([0, 2])
    plain.batch_select_indices(torch.tensor([0, 2]))
    roomy.drop_leading(2)
    plain.keys, plain.values = plain.keys[:, :, 2:], plain.values[:, :, 2:]
    assert torch.equal(roomy.keys, plain.keys) and torch.equal(roomy.values, plain.values)
    other = RoomyLayer()
    other.update(latents(1, 4, 900), states(1, 4, 900)[:, :1])
    roomy.append_rows(other, roomy.keys.shape[-2])
    roomy.add_rows(1)
    assert roomy.keys.shape == (4, 1, 9, 5) and roomy.values.shape == (4, 1, 9, 3)
    assert torch.equal(roomy.keys[2, :, -4:], latents(1, 4, 900)[0])
    assert torch.equal(roomy.values[2, :, -4:], states(1, 4, 900)[0, :1])
    assert not roomy.keys[2, :, :-4].any() and not roomy.keys[3].any()
    token, its_rotary = latents(4, 1, 5000), states(4, 1, 5000)[:, :1]
    keys, values = roomy.update(token, its_rotary)
    assert torch.equal(keys[:, :, -1:], token) and torch.equal(values[:, :, -1:], its_rotary)
    assert torch.equal(keys[:2, :, :-1], plain.keys) and torch.equal(
        values[:2, :, :-1], plain.values
    )
