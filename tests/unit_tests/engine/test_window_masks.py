"""Window masks counted in each row's positions, and their narrowed form."""

from __future__ import annotations

import torch

from langchain_adaptive_rag.engine.window_masks import WindowMasks

# Row 0: 8 real columns. Row 1: two columns of padding inside it (a stored prefix, then
# the rest of its prompt), so its positions run 0 1 _ _ 2 3 4 5.
PADDING = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 1, 1, 1, 1]])
MASKS = WindowMasks(window=3, by_type=True, additive=False, sliding_layers=(0, 2))


def test_a_windowed_query_sees_its_last_window_of_positions_in_its_own_row() -> None:
    masks = MASKS.build(PADDING, 1, torch.float32)
    full, sliding = masks["full_attention"], masks["sliding_attention"]
    assert full.shape == sliding.shape == (2, 1, 1, 8)
    assert full[0, 0, 0].tolist() == [True] * 8
    assert full[1, 0, 0].tolist() == [True, True, False, False, True, True, True, True]
    # row 0's query is at position 7: it sees 5, 6, 7; row 1's at 5: it sees 3, 4, 5
    assert sliding[0, 0, 0].int().tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    assert sliding[1, 0, 0].int().tolist() == [0, 0, 0, 0, 0, 1, 1, 1]


def test_narrowed_masks_start_at_the_first_column_any_query_sees() -> None:
    padding = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 1, 1]])
    # row 1's positions: _ _ _ 0 1 _ 2 3; its query (3) sees 1, 2, 3: columns 4, 6, 7
    built, start = MASKS.build_narrowed(padding, 1, torch.float32)
    assert start == 4
    assert built["full_attention"].shape == (2, 1, 1, 8)  # global layers read every column
    sliding = built["sliding_attention"]
    assert sliding[:, 0, 0].int().tolist() == [[0, 1, 1, 1], [1, 0, 1, 1]]
    whole = MASKS.build(padding, 1, torch.float32)["sliding_attention"]
    assert not whole[..., :start].any() and torch.equal(whole[..., start:], sliding)


def test_a_prefill_narrows_to_its_earliest_query() -> None:
    additive = WindowMasks(window=2, by_type=False, additive=True, sliding_layers=(0, 1))
    built, start = additive.build_narrowed(torch.ones(1, 6, dtype=torch.long), 3, torch.float32)
    # queries at positions 3, 4, 5 with a window of 2: the earliest sees 2 and 3
    assert start == 2 and built.shape == (1, 1, 3, 4)
    low = torch.finfo(torch.float32).min
    assert built[0, 0].tolist() == [[0, 0, low, low], [low, 0, 0, low], [low, low, 0, 0]]
