"""Shared prompts: attention over one copy of a call's prompt equals attention over copies."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from langchain_adaptive_rag.engine.kv_cache import RoomyCache
from langchain_adaptive_rag.engine.shared_prompts import SharedPrompts, shared_prompt_attention

DIM = 8


def left_mask(lengths: list[int], width: int) -> torch.Tensor:
    """Rows of zeros then ``length`` ones."""
    return torch.tensor([[0] * (width - n) + [1] * n for n in lengths])


def prompts_of(keys: torch.Tensor, values: torch.Tensor, lengths: list[int]) -> SharedPrompts:
    cache = RoomyCache()
    cache.update(keys, values, 0)
    prompts = SharedPrompts()
    calls = list(range(len(lengths)))
    prompts.add(cache, left_mask(lengths, keys.shape[2]), calls, [10 + c for c in calls])
    return prompts


def reference(
    query: torch.Tensor,
    keys: list[torch.Tensor],
    values: list[torch.Tensor],
    scale: float,
    softcap: float | None,
) -> torch.Tensor:
    """Each row's attention over its own ``(kv heads, n, dim)`` keys, in float64."""
    heads = query.shape[1]
    out = []
    for q, k, v in zip(query.double(), keys, values, strict=True):
        repeat = heads // k.shape[0]
        k, v = k.double().repeat_interleave(repeat, 0), v.double().repeat_interleave(repeat, 0)
        scores = (q @ k.transpose(-1, -2)) * scale  # (heads, 1, n)
        if softcap is not None:
            scores = torch.tanh(scores / softcap) * softcap
        out.append(torch.softmax(scores, dim=-1) @ v)
    return torch.stack(out).transpose(1, 2)  # (rows, 1, heads, dim)


@pytest.mark.parametrize(("heads", "kv_heads"), [(4, 4), (4, 2), (6, 1)])
@pytest.mark.parametrize(
    "requests",
    [
        [10, 10, 10, 11, 11, 11],  # every row reads a prompt, calls of equal size
        [10, 10, 10, 11],  # calls of different sizes
        [7, 10, 10, 8, 11, 11, 11],  # rows of single-sample calls among them
        [10, 11, 11, 10, 10, 11],  # calls' rows interleaved: laid out apart, not as a view
    ],
)
@pytest.mark.parametrize("softcap", [None, 5.0])
def test_shared_attention_equals_attention_over_each_rows_own_copy(
    heads: int, kv_heads: int, requests: list[int], softcap: float | None
) -> None:
    torch.manual_seed(0)
    prompt_lengths, width = [5, 3], 5
    prompt_keys = torch.randn(2, kv_heads, width, DIM)
    prompt_values = torch.randn(2, kv_heads, width, DIM)
    prompts = prompts_of(prompt_keys, prompt_values, prompt_lengths)
    rows, own_width = len(requests), 4
    own_lengths = [1 + i % own_width for i in range(rows)]
    own_keys, own_values = (
        torch.randn(rows, kv_heads, own_width, DIM),
        torch.randn(rows, kv_heads, own_width, DIM),
    )
    query = torch.randn(rows, heads, 1, DIM)
    layout = prompts.arrange(requests)
    assert layout is not None
    assert layout.dense == (requests == [10, 10, 10, 11, 11, 11])
    prompts.set_own_mask(left_mask(own_lengths, own_width))
    module = nn.Module()
    module.layer_idx = 0
    module._adaptive_rag_prompts = prompts
    got, weights = shared_prompt_attention(
        module, query, own_keys, own_values, None, scaling=0.3, softcap=softcap
    )
    keys, values = [], []
    for row, request in enumerate(requests):
        own = slice(own_width - own_lengths[row], own_width)
        k, v = own_keys[row, :, own], own_values[row, :, own]
        if request >= 10:  # reads its call's prompt first
            call = request - 10
            seen = slice(width - prompt_lengths[call], width)
            k = torch.cat([prompt_keys[call, :, seen], k], dim=1)
            v = torch.cat([prompt_values[call, :, seen], v], dim=1)
        keys.append(k)
        values.append(v)
    want = reference(query, keys, values, 0.3, softcap)
    assert weights is None
    assert got.shape == (rows, 1, heads, DIM)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=0)


def test_prompts_no_row_reads_are_dropped_with_the_padding_only_they_needed() -> None:
    keys = torch.arange(2 * 1 * 5 * 2, dtype=torch.float32).view(2, 1, 5, 2)
    prompts = prompts_of(keys, -keys, [5, 3])
    layout = prompts.arrange([10, 10, 11, 11])
    assert layout is not None and layout.dense and layout.calls == 2 and layout.width == 2
    assert prompts.arrange([11, 11, 11]) is not None
    assert prompts.owners == [11]
    assert prompts.cache is not None
    assert prompts.mask.tolist() == [[1, 1, 1]]  # the longer prompt's padding went with it
    torch.testing.assert_close(prompts.cache.layers[0].keys, keys[1:, :, 2:])
    torch.testing.assert_close(prompts.cache.layers[0].values, -keys[1:, :, 2:])
    assert prompts.arrange([3]) is None
    assert prompts.owners == [] and prompts.cache is None and prompts.layout is None


def test_prompts_added_later_are_left_padded_to_one_length() -> None:
    first = torch.ones(1, 1, 2, 2)
    prompts = prompts_of(first, first, [2])
    later = RoomyCache()
    later.update(torch.full((2, 1, 4, 2), 2.0), torch.full((2, 1, 4, 2), 3.0), 0)
    prompts.add(later, left_mask([4, 1], 4), [0, 1], [20, 21])
    assert prompts.owners == [10, 20, 21]
    assert prompts.mask.tolist() == [[0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 1]]
    assert prompts.cache is not None
    held = prompts.cache.layers[0].keys
    assert held.shape == (3, 1, 4, 2)
    assert held[0, 0, :, 0].tolist() == [0.0, 0.0, 1.0, 1.0]  # padding is zero
    layout = prompts.arrange([21, 20, 20, 5])
    assert layout is not None and not layout.every_row and layout.width == 2
    bias = layout.prompt_bias[:, 0]
    assert torch.isinf(bias[3]).all()  # a row that reads no prompt sees none of it
    assert bias[0].tolist() == [float("-inf")] * 3 + [0.0]
